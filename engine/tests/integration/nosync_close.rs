//! ADR-0203: a close that cannot sync the writes it acknowledged unsynced says so.

use std::path::Path;

use engine::{Db, Options, SyncMode};
use env::{Env as _, FaultConfig, SimEnv};

/// Writes acknowledged before the failure.
const KEYS_ACKNOWLEDGED: u32 = 20;

fn key(index: u32) -> [u8; 4] {
    index.to_be_bytes()
}

/// Acknowledged writes, then a write whose log write fails (poisoning the database), then a close. The close's
/// result, and the database reopened after a crash.
fn close_after_a_failed_write(mode: SyncMode) -> (engine::Result<()>, Db<SimEnv>) {
    let env = SimEnv::new(41);
    let options = Options::default().with_sync_mode(mode);
    let db = Db::open(env.clone(), "/db", options.clone()).expect("opens");
    for index in 0..KEYS_ACKNOWLEDGED {
        db.put(&key(index), &[7u8; 100]).expect("put");
    }
    env.set_fault_config(FaultConfig { write_error_ppm: 1_000_000, ..FaultConfig::none() });
    db.put(&key(KEYS_ACKNOWLEDGED), &[8u8; 100]).expect_err("the log write fails");
    env.set_fault_config(FaultConfig::none());
    let closed = db.close();
    // Complete whatever it returned: the directory's lock is free while the handle still lives.
    drop(env.lock(Path::new("/db/LOCK")).expect("the close released the directory's lock"));
    drop(db);
    env.crash();
    (closed, Db::open(env.clone(), "/db", options).expect("reopens after the crash"))
}

/// Unsynced: the poisoned database closes without sealing its log, so the writes it acknowledged are not durable;
/// the close returns the failure that poisoned it instead of `Ok`.
#[test]
fn an_unsynced_close_that_cannot_sync_fails() {
    let (closed, db) = close_after_a_failed_write(SyncMode::NoSync);
    let error = closed.expect_err("a close that left acknowledged writes unsynced returned Ok");
    assert!(error.to_string().contains("were not synced and may be lost"), "{error}");
    assert!(db.check_invariants().is_ok());
    assert!(error.to_string().contains("injected"), "the close names the failure that poisoned it: {error}");
    // The crash took what was never synced: nothing a reader can rely on, and nothing the close claimed.
    assert!(db.last_sequence() < u64::from(KEYS_ACKNOWLEDGED), "this seed's crash keeps no unsynced write");
}

/// Synced: every acknowledged write was durable before the close, so the poisoned close returns `Ok`, and every
/// acknowledged write reads back after the crash.
#[test]
fn a_synced_close_after_a_failed_write_loses_nothing() {
    let (closed, db) = close_after_a_failed_write(SyncMode::Sync);
    closed.expect("every acknowledged write was already durable");
    for index in 0..KEYS_ACKNOWLEDGED {
        assert_eq!(db.get(&key(index)).expect("get"), Some(vec![7u8; 100]), "key {index}");
    }
}
