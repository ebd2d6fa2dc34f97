//! A scan's iterator borrows its transaction: the transaction cannot write while the iterator lives.

fn main() {
    let db = engine::Db::open(env::SimEnv::new(1), "/db", engine::Options::default()).unwrap();
    let mut txn = db.begin().unwrap();
    let rows = txn.scan(..).unwrap();
    txn.put(b"key", b"value").unwrap();
    assert_eq!(rows.count(), 0);
}
