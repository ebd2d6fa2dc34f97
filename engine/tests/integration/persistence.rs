//! Persistence is shown, not named: the bytes are read back.

use std::path::Path;

use engine::wal::{Record, WalEnd, decode_segment};
use engine::{Db, Error, Options, ValueKind};
use env::Env;

#[test]
fn put_is_in_the_durable_wal_bytes() {
    let env = env::SimEnv::new(11);
    let db = Db::open(env.clone(), "/db", Options::default()).unwrap();
    db.put(b"alpha", b"one").unwrap();
    db.delete(b"beta").unwrap();
    let wal = env.files().into_iter().find(|f| f.path.to_string_lossy().contains("wal-")).expect("a log segment");
    // Durable bytes: what survives a crash that drops every pending write.
    let bytes = env.read_durable(&wal.path).expect("the segment's name is durable");
    let scan = decode_segment(&bytes);
    assert_eq!(scan.end, WalEnd::Clean);
    let writes: Vec<(ValueKind, Vec<u8>, Vec<u8>)> = scan
        .records
        .iter()
        .filter_map(|(_, r)| if let Record::Batch(b) = r { Some(b.writes.clone()) } else { None })
        .flatten()
        .map(|w| (w.kind, w.key, w.value))
        .collect();
    assert_eq!(
        writes,
        vec![(ValueKind::Put, b"alpha".to_vec(), b"one".to_vec()), (ValueKind::Delete, b"beta".to_vec(), vec![])]
    );
}

#[test]
fn flush_writes_a_durable_table_the_manifest_names() {
    let env = env::SimEnv::new(12);
    let db = Db::open(env.clone(), "/db", Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.flush().unwrap();
    let manifest = engine::manifest::decode_manifest(&env.read_durable(Path::new("/db/MANIFEST")).unwrap()).unwrap();
    assert_eq!(manifest.tables.len(), 1);
    let name = format!("/db/table-{:06}.sst", manifest.tables[0].file_number);
    let table = env.read_durable(Path::new(&name)).expect("table bytes are durable");
    let decoded = engine::sstable::decode_table(&table).expect("table decodes");
    assert_eq!(decoded.entries.len(), 1);
    assert_eq!(decoded.entries[0].key.user_key, b"k");
}

#[test]
fn second_open_is_locked_and_close_releases() {
    let env = env::SimEnv::new(13);
    let db = Db::open(env.clone(), "/db", Options::default()).unwrap();
    let second = Db::open(env.clone(), "/db", Options::default());
    assert!(matches!(second, Err(Error::Locked { .. })), "{second:?}");
    db.close().unwrap();
    assert!(matches!(db.put(b"a", b"b"), Err(Error::Closed { .. })));
    let reopened = Db::open(env.clone(), "/db", Options::default()).unwrap();
    reopened.put(b"a", b"b").unwrap();
}

#[test]
fn real_env_round_trip() {
    let env = env::RealEnv::new();
    let scratch = env.temp_dir("engine-test").unwrap();
    let dir = scratch.path().to_path_buf();
    {
        let db = Db::open(env.clone(), &dir, Options::default().with_flush_threshold_bytes(4096)).unwrap();
        for i in 0..500u32 {
            db.put(format!("k{i:04}").as_bytes(), format!("v{i}").as_bytes()).unwrap();
        }
        db.delete(b"k0007").unwrap();
        db.flush().unwrap();
        db.close().unwrap();
    }
    let db = Db::open(env.clone(), &dir, Options::default()).unwrap();
    assert_eq!(db.get(b"k0042").unwrap(), Some(b"v42".to_vec()));
    assert_eq!(db.get(b"k0007").unwrap(), None);
    assert!(db.stats().tables_per_level.iter().sum::<usize>() >= 1);
    db.close().unwrap();
    for path in env.list_dir(&dir).unwrap() {
        env.remove_file(&path).unwrap();
    }
}

#[test]
fn options_out_of_range_are_invalid_arguments() {
    let env = env::SimEnv::new(14);
    let result = Db::open(env.clone(), "/db", Options::default().with_bloom_bits_per_key(0));
    assert!(matches!(&result, Err(Error::InvalidArgument { message }) if message.contains("bloom_bits_per_key")));
    let db = Db::open(env, "/db", Options::default().with_bloom_bits_per_key(16)).unwrap();
    db.put(b"k", b"v").unwrap();
    db.flush().unwrap();
}
