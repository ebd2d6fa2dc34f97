//! A read-only transaction's scan iterator cannot outlive the transaction.

fn main() {
    let db = engine::Db::open(env::SimEnv::new(1), "/db", engine::Options::default()).unwrap();
    let rows = {
        let mut reader = db.begin_read().unwrap();
        reader.scan(..).unwrap()
    };
    assert_eq!(rows.count(), 0);
}
