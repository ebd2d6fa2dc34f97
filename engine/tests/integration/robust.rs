//! The engine at the edges of its API (ADR-0071 to ADR-0076): oversize transactions, empty and maximal keys, a full
//! conflict tracker, `close` with work and handles outstanding, and a directory that lost a file.

use std::path::{Path, PathBuf};

use engine::ssi::ConflictCause;
use engine::wal::RECORD_PAYLOAD_BYTES_MAX;
use engine::{Db, Error, KEY_SIZE_BYTES_MAX, Options, VALUE_SIZE_BYTES_MAX};
use env::{Env, SimEnv};

fn open(env: &SimEnv) -> Db<SimEnv> {
    Db::open(env.clone(), "/db", Options::default()).expect("opens")
}

fn is_invalid(result: Result<(), Error>) -> bool {
    matches!(result, Err(Error::InvalidArgument { .. }))
}

fn is_closed<T>(result: Result<T, Error>) -> bool {
    matches!(result, Err(Error::Closed { .. }))
}

/// (name, length) of every file in the database directory.
fn listing(env: &SimEnv) -> Vec<(PathBuf, u64)> {
    env.files().into_iter().map(|file| (file.path, file.current_len)).collect()
}

#[test]
fn an_oversize_transaction_is_invalid_and_the_handle_keeps_working() {
    let env = SimEnv::new(1);
    let db = open(&env);
    let value = vec![7u8; VALUE_SIZE_BYTES_MAX];
    let mut txn = db.begin().expect("begin");
    for key in 0..3u8 {
        txn.put(format!("k{key}").as_bytes(), &value).expect("48 MiB fit in one record");
    }
    // The fourth 16 MiB value would take the batch past the log's 64 MiB record limit.
    assert!(is_invalid(txn.put(b"k3", &value)), "the write crossing the record limit is refused");
    // The refused write changed nothing: the transaction is still usable, and a smaller value fits.
    txn.put(b"k3", b"small").expect("a small write still fits");
    txn.commit().expect("the transaction under the limit commits");
    assert_eq!(db.get(b"k0").expect("get").map(|v| v.len()), Some(VALUE_SIZE_BYTES_MAX));
    assert_eq!(db.get(b"k3").expect("get").as_deref(), Some(&b"small"[..]));
    // A rewrite of a key replaces its share of the record: it does not count twice.
    let mut txn = db.begin().expect("begin");
    for _ in 0..8 {
        txn.put(b"k0", &value).expect("the same key rewritten stays one write");
    }
    txn.commit().expect("commits");
    db.put(b"after", b"v").expect("the handle keeps working");
    assert_eq!(db.get(b"after").expect("get").as_deref(), Some(&b"v"[..]));
}

#[test]
fn empty_keys_are_invalid_and_maximal_keys_round_trip() {
    let env = SimEnv::new(2);
    let db = open(&env);
    assert!(is_invalid(db.put(b"", b"v")), "put under an empty key");
    assert!(is_invalid(db.delete(b"")), "delete of an empty key");
    let mut txn = db.begin().expect("begin");
    assert!(is_invalid(txn.put(b"", b"v")), "a transaction's put under an empty key");
    assert!(is_invalid(txn.delete(b"")), "a transaction's delete of an empty key");
    drop(txn);
    assert_eq!(db.get(b"").expect("reading an empty key finds nothing"), None);
    let longest = vec![b'x'; KEY_SIZE_BYTES_MAX];
    db.put(&longest, b"max").expect("the longest key is accepted");
    assert!(is_invalid(db.put(&vec![b'x'; KEY_SIZE_BYTES_MAX + 1], b"v")), "one byte more is not");
    db.flush().expect("flush");
    db.close().expect("close");
    drop(db);
    let db = open(&env);
    assert_eq!(db.get(&longest).expect("get").as_deref(), Some(&b"max"[..]), "the longest key survives a table");
}

#[test]
fn after_close_every_call_is_closed_and_no_task_is_left() {
    let env = SimEnv::new(3);
    let db = Db::open(env.clone(), "/db", Options::default().with_flush_threshold_bytes(4096)).expect("opens");
    for key in 0..40u32 {
        db.put(&key.to_be_bytes(), &[1u8; 100]).expect("put");
    }
    let mut reader = db.begin_read().expect("begin_read");
    let mut scanned = db.begin_read().expect("begin_read"); // the iterator borrows its reader (ADR-0064)
    let mut iter = scanned.scan(..).expect("scan");
    let mut txn = db.begin().expect("begin");
    let mut committer = db.begin().expect("begin");
    committer.put(b"pending", &[2u8; 4096]).expect("put");
    let ticket = committer.submit().expect("submit").expect("a ticket");
    assert!(!env.runnable_tasks().is_empty(), "the group commit is pending when close is called");
    db.close().expect("close");
    assert_eq!(env.runnable_tasks(), Vec::new(), "no task is left after close");
    db.wait_for_commit(&ticket).expect("close made the submitted commit durable");
    assert!(is_closed(db.get(b"k")));
    assert!(is_closed(db.put(b"k", b"v")));
    assert!(is_closed(db.delete(b"k")));
    assert!(is_closed(db.scan(..)));
    assert!(is_closed(db.flush()));
    assert!(is_closed(db.compact()));
    assert!(is_closed(db.begin()));
    assert!(is_closed(db.begin_read()));
    assert!(is_closed(txn.get(b"k")));
    assert!(is_closed(txn.scan(..)));
    assert!(is_closed(txn.put(b"k", b"v")));
    assert!(is_closed(txn.delete(b"k")));
    assert!(is_closed(reader.get(b"k")));
    assert!(is_closed(reader.scan(..)));
    assert!(matches!(iter.next(), Some(Err(Error::Closed { .. }))), "an iterator from before the close");
    assert!(iter.next().is_none(), "and then it ends");
    assert!(is_closed(txn.commit()));
    db.close().expect("a second close is a no-op");
    drop(reader);
    drop(db);
    let db = open(&env);
    assert_eq!(db.get(b"pending").expect("get"), Some(vec![2u8; 4096]), "the commit close finished is durable");
}

#[test]
fn a_full_tracker_expires_its_oldest_transaction_instead_of_panicking() {
    let env = SimEnv::new(4);
    let options = Options::default().with_tracked_transactions_max(engine::TRACKED_TRANSACTIONS_MIN);
    let db = Db::open(env.clone(), "/db", options).expect("opens");
    let mut reader = db.begin_read().expect("begin_read");
    // Its snapshot taken at once, so it is tracked (and expirable) before its commit (ADR-0210).
    let mut writer = crate::begun(&db);
    writer.put(b"w", b"1").expect("put");
    for key in 0..200u32 {
        db.put(&key.to_be_bytes(), b"v").expect("every commit gets room");
    }
    let (stats, tracked) = db.conflict_stats();
    assert!(tracked <= engine::TRACKED_TRANSACTIONS_MIN, "the tracker holds {tracked} records");
    assert!(stats.expired >= 2, "the reader and the writer were expired: {stats:?}");
    let expired = |result: Result<(), Error>| matches!(result, Err(Error::Conflict { cause: ConflictCause::Expired }));
    assert!(expired(reader.get(b"w").map(drop)), "the expired reader's next read");
    assert!(expired(writer.commit()), "the expired writer's commit");
    drop(reader);
    let mut fresh = db.begin_read().expect("a new reader");
    assert_eq!(fresh.get(&7u32.to_be_bytes()).expect("reads"), Some(b"v".to_vec()));
}

#[test]
fn a_missing_manifest_or_log_with_data_is_corruption_naming_it_and_nothing_is_deleted() {
    for (victim, seed) in [("MANIFEST", 5), ("table", 6), ("wal", 7)] {
        let env = SimEnv::new(seed);
        let db = open(&env);
        db.put(b"k", b"flushed").expect("put");
        db.flush().expect("flush");
        db.put(b"l", b"logged").expect("put");
        db.close().expect("close");
        drop(db);
        let names: Vec<PathBuf> = env.list_dir(Path::new("/db")).expect("list");
        let name = |prefix: &str| names.iter().find(|p| p.to_string_lossy().contains(prefix)).expect("a file").clone();
        let path = name(victim);
        let bytes = env.read_current(&path).expect("the file");
        env.remove_file(&path).expect("remove");
        env.sync_dir(Path::new("/db")).expect("sync");
        let before = listing(&env);
        let error = Db::open(env.clone(), "/db", Options::default()).expect_err("refuses");
        assert!(matches!(&error, Error::Corruption { file, .. } if *file == path), "{victim}: {error:?}");
        assert_eq!(listing(&env), before, "{victim}: the refused open deleted or created nothing");
        let file = env.open(&path, env::OpenOptions::create_new()).expect("put it back");
        env::File::write_at(&file, 0, &bytes).expect("write");
        env::File::sync(&file).expect("sync");
        drop(file);
        let db = open(&env);
        assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"flushed"[..]), "{victim}");
        assert_eq!(db.get(b"l").expect("get").as_deref(), Some(&b"logged"[..]), "{victim}");
    }
}

#[test]
fn an_empty_first_segment_without_a_manifest_still_opens() {
    // What a crash during the very first open leaves: the log segment created, no manifest yet (ADR-0033).
    let env = SimEnv::new(8);
    env.create_dir_all(Path::new("/db")).expect("mkdir");
    drop(env.open(Path::new("/db/wal-000001.log"), env::OpenOptions::create_new()).expect("create"));
    let db = open(&env);
    db.put(b"k", b"v").expect("a new database");
    assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
}

#[test]
fn configured_size_limits_refuse_past_them_and_accept_up_to_them() {
    let env = SimEnv::new(11);
    let (key_max, value_max) = (100, 1000);
    let options = Options::default().with_key_size_bytes_max(key_max).with_value_size_bytes_max(value_max);
    let options = options.with_record_payload_bytes_max(2500);
    let db = Db::open(env.clone(), "/db", options).expect("small limits are valid");
    db.put(&vec![b'k'; key_max], &vec![1u8; value_max]).expect("a write at both limits is accepted");
    assert!(is_invalid(db.put(&vec![b'k'; key_max + 1], b"v")), "a key one byte over the configured limit");
    assert!(is_invalid(db.put(b"k", &vec![1u8; value_max + 1])), "a value one byte over the configured limit");
    let mut txn = db.begin().expect("begin");
    txn.put(b"a", &vec![2u8; value_max]).expect("one value fits the 2500-byte record");
    txn.put(b"b", &vec![2u8; value_max]).expect("two values fit");
    assert!(is_invalid(txn.put(b"c", &vec![2u8; value_max])), "the third crosses the configured record limit");
    txn.commit().expect("the transaction under the limit commits");
    assert_eq!(db.get(b"b").expect("get").map(|v| v.len()), Some(value_max));
}

#[test]
fn size_limits_out_of_range_are_invalid_arguments_at_open() {
    let env = SimEnv::new(12);
    let default = Options::default();
    let single = default.single_write_payload_bytes();
    let cases = [
        ("key_size_bytes_max", default.clone().with_key_size_bytes_max(0)),
        ("key_size_bytes_max", default.clone().with_key_size_bytes_max(KEY_SIZE_BYTES_MAX + 1)),
        ("value_size_bytes_max", default.clone().with_value_size_bytes_max(0)),
        ("value_size_bytes_max", default.clone().with_value_size_bytes_max(VALUE_SIZE_BYTES_MAX + 1)),
        ("record_payload_bytes_max", default.clone().with_record_payload_bytes_max(0)),
        ("record_payload_bytes_max", default.clone().with_record_payload_bytes_max(single - 1)),
        ("record_payload_bytes_max", default.clone().with_record_payload_bytes_max(RECORD_PAYLOAD_BYTES_MAX + 1)),
    ];
    for (name, options) in cases {
        let result = Db::open(env.clone(), "/db", options);
        assert!(
            matches!(&result, Err(Error::InvalidArgument { message }) if message.contains(name)),
            "{name}: {:?}",
            result.err()
        );
    }
    assert!(env.files().is_empty(), "a refused open creates no file");
    let limits = (default.key_size_bytes_max, default.value_size_bytes_max, default.record_payload_bytes_max);
    assert_eq!(limits, (KEY_SIZE_BYTES_MAX, VALUE_SIZE_BYTES_MAX, RECORD_PAYLOAD_BYTES_MAX), "defaults unchanged");
    let at_min = default.with_record_payload_bytes_max(single);
    Db::open(env, "/db", at_min).expect("the least record limit: one write of the largest key and value").close().ok();
}
