//! The shared state's lock order and publication, tested (ADR-0082, ADR-0132).

use std::sync::mpsc;
use std::time::Duration;

use env::{Env, RealEnv, TaskStep};

use crate::{Db, Options};

/// How long the readers get. Generous: they need microseconds, and only a reader blocked on the writer lock
/// (released after this) can take this long.
const READERS_TIMEOUT_MS: u64 = 20_000;

/// Every read path: `Db::get`/`scan`/`last_sequence`, a read-only transaction, and a read-write transaction's
/// begin, get, scan, buffered put and rollback.
fn read_everything(db: &Db<RealEnv>) -> crate::Result<Vec<Option<Vec<u8>>>> {
    let mut seen =
        vec![db.get(b"k")?, db.scan(b"a".as_slice()..b"z".as_slice())?.next().transpose()?.map(|(_, value)| value)];
    let mut read = db.begin_read()?;
    seen.push(read.get(b"k")?);
    seen.push(read.scan(..)?.next().transpose()?.map(|(_, value)| value));
    drop(read);
    let mut txn = db.begin()?;
    seen.push(txn.get(b"k")?);
    txn.put(b"k2", b"buffered")?;
    seen.push(txn.scan(..)?.last().transpose()?.map(|(_, value)| value));
    txn.rollback();
    seen.push(Some(db.last_sequence().to_string().into_bytes()));
    Ok(seen)
}

/// Readers never wait on IO held under a lock (ADR-0082): every log append, rotation sync and manifest install
/// runs under the writer lock (or under none), and with the writer lock held by this test, as such IO would
/// hold it, every read path finishes on another thread and sees the acknowledged state.
#[test]
fn readers_finish_while_the_writer_lock_is_held() {
    let env = RealEnv::new();
    let dir = env.temp_dir("readers-no-wait").unwrap();
    let db = Db::open(env.clone(), dir.path(), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    let writer = db.inner.state();
    let (sender, receiver) = mpsc::channel();
    let reader = db.clone();
    let handle = env.spawn(
        "readers",
        Box::new(move || {
            // The receiver is gone only if the test already failed.
            let _ = sender.send(read_everything(&reader));
            TaskStep::Done
        }),
    );
    let outcome = receiver.recv_timeout(Duration::from_millis(READERS_TIMEOUT_MS));
    drop(writer);
    env.wait(&handle).unwrap();
    let seen = outcome.expect("a reader waited for the writer lock").unwrap();
    let v = Some(b"v".to_vec());
    let last = Some(b"1".to_vec());
    assert_eq!(seen, [v.clone(), v.clone(), v.clone(), v.clone(), v, Some(b"buffered".to_vec()), last]);
    db.close().unwrap();
}

/// The committer's early return (ADR-0132): a synced commit submitted but not yet synced is above the
/// registered watermark (so `wait_for_commit` waits for its batch); once acknowledged, the watermark, the
/// registry and the read view all hold it, and the committer's next transaction's snapshot sees its write.
#[test]
fn the_registered_watermark_moves_only_with_the_registry() {
    let env = env::SimEnv::new(5);
    let db = Db::open(env, "/db", Options::default()).unwrap();
    let before = db.inner.registered_visible();
    let mut txn = db.begin().unwrap();
    txn.put(b"k", b"v").unwrap();
    let ticket = txn.submit().unwrap().expect("a transaction with a write has a ticket");
    assert_eq!((before, ticket.last_sequence), (0, 1));
    assert_eq!((db.inner.registered_visible(), db.inner.registry().visible), (before, before));
    db.wait_for_commit(&ticket).unwrap();
    let visible = (db.inner.registered_visible(), db.inner.registry().visible, db.inner.visible_sequence());
    assert_eq!(visible, (1, 1, 1));
    db.wait_for_commit(&ticket).unwrap();
    assert_eq!(db.begin().unwrap().get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// ADR-0197: a completion queues its commit for the registry instead of taking the registry lock; the next take
/// applies it (the committer's snapshot released, the tracker told the commit is visible) before anything reads
/// the registry, and leaves the queue empty.
#[test]
fn a_completion_is_registered_at_the_next_registry_take() {
    let env = env::SimEnv::new(7);
    let options = Options::default().with_sync_mode(crate::SyncMode::NoSync);
    let db = Db::open(env, "/db", options).unwrap();
    let mut txn = db.begin().unwrap();
    // Its first read registers its snapshot (ADR-0210), which its completion releases.
    assert_eq!(txn.get(b"other").unwrap(), None);
    txn.put(b"k", b"v").unwrap();
    txn.commit().unwrap();
    let queued: Vec<_> = db.inner.unregistered.lock().unwrap().iter().map(|c| (c.first, c.last, c.snapshot)).collect();
    assert_eq!((db.inner.registered_visible(), queued), (1, vec![(1, 1, Some(0))]));
    let raw = db.inner.registry.lock().unwrap();
    assert_eq!((raw.visible, raw.snapshots.get(&0)), (0, Some(&1)), "applied before the next take");
    drop(raw);
    let registry = db.inner.registry();
    assert_eq!((registry.visible, registry.snapshots.len()), (1, 0));
    drop(registry);
    assert!(db.inner.unregistered.lock().unwrap().is_empty());
    assert_eq!(db.begin().unwrap().get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// The invariant check sees a change the writer did not publish, and passes once it is published.
#[test]
fn an_unpublished_change_fails_the_invariant_check() {
    let env = env::SimEnv::new(3);
    let db = Db::open(env, "/db", Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.check_invariants().unwrap();
    let mut state = db.inner.state();
    state.memtable = std::sync::Arc::new(crate::memtable::Memtable::new());
    let stale = db.inner.check_published(&state).unwrap_err();
    assert!(stale.contains("memtables or version"), "{stale}");
    db.inner.publish(&state);
    db.inner.check_published(&state).unwrap();
    state.last_sequence += 1;
    let behind = db.inner.check_published(&state).unwrap_err();
    assert!(behind.contains("the watermark is at sequence 1, the writer at 2"), "{behind}");
    state.last_sequence -= 1;
    db.inner.read_cache().set_visible(2);
    let ahead = db.inner.check_published(&state).unwrap_err();
    assert!(ahead.contains("readers see sequence 2, the writer acknowledged 1"), "{ahead}");
    db.inner.read_cache().set_visible(1);
    let landed = crate::watermark::Completed { first: 3, last: 3, snapshot: None };
    db.inner.watermark.lock().insert(landed);
    let gap = db.inner.check_published(&state).unwrap_err();
    assert!(gap.contains("above a gap at sequence 1"), "{gap}");
}

/// ADR-0198: a registry take that drops tracker records frees them when its guard is let go, after the lock: the
/// guard held them (the tracker has them to hand over while it is held), and the next take finds none.
#[test]
fn the_registry_guard_frees_dropped_records_after_the_lock() {
    let env = env::SimEnv::new(3);
    let db = Db::open(env, "/db", Options::default()).unwrap();
    let txn = db.begin().unwrap();
    let mut registry = db.inner.registry();
    assert!(registry.tracker.take_dropped().is_empty());
    drop(registry);
    txn.rollback();
    let mut registry = db.inner.registry();
    assert!(registry.tracker.take_dropped().is_empty(), "the rollback's take freed its record on release");
    let txn = registry.tracker.try_begin(0, false).unwrap();
    registry.tracker.abort(txn);
    assert_eq!(registry.tracker.clone().take_dropped().len(), 1, "held while the registry is");
    drop(registry);
    assert!(db.inner.registry().tracker.take_dropped().is_empty(), "and freed when it was let go");
    db.close().unwrap();
}
