//! A scan's iterator borrows its transaction: the transaction cannot commit while the iterator lives.

fn main() {
    let db = engine::Db::open(env::SimEnv::new(1), "/db", engine::Options::default()).unwrap();
    let mut txn = db.begin().unwrap();
    let rows = txn.scan(..).unwrap();
    txn.commit().unwrap();
    assert_eq!(rows.count(), 0);
}
