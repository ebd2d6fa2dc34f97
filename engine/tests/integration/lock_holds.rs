//! The lock-hold counters behind issue 27's serial-fraction figures (ADR-0119): off by default, and on they count
//! every commit's writer, registry, watermark (ADR-0133) and log (ADR-0134) locks, and a synced commit's view lock,
//! with a time no longer than the commits took.

use engine::{Db, LockHolds, Options, SyncMode};
use env::{Env, RealEnv};

const COMMITS: u64 = 50;

fn commit_many(db: &Db<RealEnv>) {
    for index in 0..COMMITS {
        let mut txn = db.begin().unwrap();
        txn.put(format!("key-{index}").as_bytes(), b"value").unwrap();
        txn.commit().unwrap();
    }
}

#[test]
fn lock_holds_are_zero_unless_timing_is_on() {
    let env = RealEnv::new();
    let dir = env.temp_dir("lock-holds-off").unwrap();
    let db = Db::open(env.clone(), dir.path(), Options::default().with_sync_mode(SyncMode::NoSync)).unwrap();
    commit_many(&db);
    let stats = db.stats();
    assert_eq!((stats.commits, stats.lock_holds), (COMMITS, LockHolds::default()));
    db.close().unwrap();
}

#[test]
fn every_commit_takes_the_writer_registry_and_watermark_locks_and_is_timed() {
    let env = RealEnv::new();
    let dir = env.temp_dir("lock-holds-on").unwrap();
    for mode in [SyncMode::NoSync, SyncMode::Sync] {
        let options = Options::default().with_sync_mode(mode).with_lock_timing(true);
        let db = Db::open(env.clone(), dir.path(), options).unwrap();
        let (before, start) = (db.stats(), env.now());
        commit_many(&db);
        let elapsed_ns = u64::try_from((env.now() - start).as_nanos()).unwrap();
        let stats = db.stats();
        let holds = stats.lock_holds.since(before.lock_holds);
        assert_eq!(stats.commits - before.commits, COMMITS, "{mode:?}");
        // Every committer writes its record through the log lock after the writer lock (ADR-0134).
        let every = [
            ("writer", holds.writer),
            ("registry", holds.registry),
            ("watermark", holds.watermark),
            ("log", holds.log),
        ];
        for (name, hold) in every {
            assert!(hold.acquisitions >= COMMITS, "{mode:?} {name}: {hold:?}");
            assert!(hold.held_ns > 0 && hold.held_ns <= elapsed_ns, "{mode:?} {name}: {hold:?} in {elapsed_ns} ns");
        }
        // A synced commit's batch publishes under the writer lock (the view lock); an unsynced commit publishes
        // after it, through the watermark alone (ADR-0133).
        let view = holds.view;
        assert!(view.held_ns <= elapsed_ns, "{mode:?} view: {view:?} in {elapsed_ns} ns");
        match mode {
            SyncMode::Sync => assert!(view.acquisitions >= COMMITS && view.held_ns > 0, "{mode:?} view: {view:?}"),
            _ => assert!(view.acquisitions < COMMITS, "{mode:?} view taken per commit: {view:?}"),
        }
        db.close().unwrap();
    }
}
