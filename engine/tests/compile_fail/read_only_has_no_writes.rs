//! A read-only transaction has no write methods: no put, no delete, nothing to commit.

fn main() {
    let db = engine::Db::open(env::SimEnv::new(1), "/db", engine::Options::default()).unwrap();
    let mut reader = db.begin_read().unwrap();
    reader.put(b"key", b"value").unwrap();
    reader.delete(b"key").unwrap();
    reader.commit().unwrap();
}
