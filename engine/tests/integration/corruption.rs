//! One damaged byte in the middle of an SSTable, a WAL or the manifest gives a typed error naming the file —
//! never a panic, never a wrong value.

use std::path::{Path, PathBuf};

use engine::{Db, Error, Options};
use env::{ExplicitFault, SimEnv};

fn populated(seed: u64, flush: bool) -> SimEnv {
    let env = SimEnv::new(seed);
    let db = Db::open(env.clone(), "/db", Options::default().with_block_size_bytes(256)).unwrap();
    for i in 0..300u32 {
        db.put(format!("key{i:04}").as_bytes(), format!("value{i:0>40}").as_bytes()).unwrap();
    }
    if flush {
        db.flush().unwrap();
    }
    db.close().unwrap();
    env
}

fn file_like(env: &SimEnv, needle: &str) -> (PathBuf, u64) {
    let file = env.files().into_iter().find(|f| f.path.to_string_lossy().contains(needle)).expect("file exists");
    (file.path, file.current_len)
}

fn expect_corruption(result: Result<(), Error>, file: &Path) {
    match result {
        Err(Error::Corruption { file: named, .. }) => assert_eq!(named, file),
        other => panic!("expected corruption naming {}, got {other:?}", file.display()),
    }
}

fn read_everything(db: &Db<SimEnv>) -> Result<(), Error> {
    for i in 0..300u32 {
        let value = db.get(format!("key{i:04}").as_bytes())?;
        assert_eq!(value, Some(format!("value{i:0>40}").into_bytes()), "wrong value returned as if correct");
    }
    Ok(())
}

#[test]
fn damaged_sstable_is_a_typed_error() {
    let env = populated(1, true);
    let (path, len) = file_like(&env, ".sst");
    env.inject(ExplicitFault::FlipBit { path: path.clone(), offset: len / 3 });
    let result = Db::open(env.clone(), "/db", Options::default()).and_then(|db| read_everything(&db));
    expect_corruption(result, &path);
}

#[test]
fn damaged_wal_middle_is_a_typed_error() {
    let env = populated(2, false);
    let (path, len) = file_like(&env, "wal-");
    env.inject(ExplicitFault::FlipBit { path: path.clone(), offset: len / 2 });
    expect_corruption(Db::open(env.clone(), "/db", Options::default()).map(|_| ()), &path);
}

#[test]
fn damaged_manifest_is_a_typed_error() {
    let env = populated(3, true);
    let path = PathBuf::from("/db/MANIFEST");
    env.inject(ExplicitFault::FlipBit { path: path.clone(), offset: 30 });
    expect_corruption(Db::open(env.clone(), "/db", Options::default()).map(|_| ()), &path);
}

/// A populated, closed database's log: its path, bytes and scan.
fn closed_log(seed: u64) -> (SimEnv, PathBuf, Vec<u8>, engine::wal::WalScan) {
    let env = populated(seed, false);
    let (path, _) = file_like(&env, "wal-");
    let bytes = env.read_current(&path).expect("the log exists");
    let scan = engine::wal::decode_segment(&bytes);
    (env, path, bytes, scan)
}

#[test]
fn damaged_last_record_of_a_closed_log_is_corruption() {
    let (env, path, _, scan) = closed_log(4);
    // The seal written by close() proves the last data record was synced. (The seal starts at a sector boundary
    // after a zero gap, ADR-0067: flip a bit inside the last data record itself.)
    let last_batch = scan.records.iter().rev().find(|(_, record)| matches!(record, engine::wal::Record::Batch(_)));
    let (offset, _) = last_batch.expect("the log holds a batch");
    env.inject(ExplicitFault::FlipBit { path: path.clone(), offset: offset + 30 });
    expect_corruption(Db::open(env.clone(), "/db", Options::default()).map(|_| ()), &path);
}

#[test]
fn a_damaged_padding_gap_loses_no_record() {
    let (env, path, bytes, scan) = closed_log(4);
    let (seal, _) = scan.records.last().expect("the seal");
    let gap = engine::wal::record_padding(&bytes, usize::try_from(*seal).expect("fits"));
    assert!(gap > 0, "close() pads its seal to a sector boundary after the last sync");
    // The gap holds no data: damage there drops at most the seal of the last segment, never a record.
    env.inject(ExplicitFault::FlipBit { path: path.clone(), offset: seal - 1 });
    let db = Db::open(env.clone(), "/db", Options::default()).expect("no data was damaged");
    read_everything(&db).expect("every record survives");
}

#[test]
fn torn_tail_after_a_crash_is_truncated_not_an_error() {
    let env = SimEnv::new(5);
    let db = Db::open(env.clone(), "/db", Options::default().with_sync_mode(engine::SyncMode::NoSync)).unwrap();
    for i in 0..300u32 {
        db.put(format!("key{i:04}").as_bytes(), format!("value{i:0>40}").as_bytes()).unwrap();
    }
    let (path, before) = file_like(&env, "wal-");
    env.crash();
    drop(db);
    let after = env.read_current(&path).map_or(0, |bytes| bytes.len() as u64);
    assert!(after <= before, "a crash never grows the log");
    let db = Db::open(env.clone(), "/db", Options::default()).expect("a torn tail is not corruption");
    // Whatever survived is a prefix of the writes: once a key is missing, every later key is missing too.
    let present: Vec<bool> = (0..300u32).map(|i| db.get(format!("key{i:04}").as_bytes()).unwrap().is_some()).collect();
    let first_missing = present.iter().position(|p| !p).unwrap_or(present.len());
    assert!(present[first_missing..].iter().all(|p| !p), "recovered writes are not a prefix");
}
