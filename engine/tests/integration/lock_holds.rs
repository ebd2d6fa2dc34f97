//! The lock-hold counters behind issue 27's serial-fraction figures (ADR-0119): off by default, and on they count
//! every commit's writer, registry, watermark (ADR-0133) and log (ADR-0134) locks, and a synced commit's view lock,
//! with a time no longer than the commits took.

use engine::{ConflictCause, Db, Error, LockHolds, Options, READS_BUFFERED_MAX, SyncMode};
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
        // Timed from before the open: a background job's hold that began before the counters were read is counted
        // whole when it ends, so the window that bounds every hold is the database's whole life.
        let start = env.now();
        let db = Db::open(env.clone(), dir.path(), options).unwrap();
        let before = db.stats();
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
        // A commit publishes after the writer lock, through the watermark alone: an unsynced one (ADR-0133) and,
        // since its batch inserts after the writer lock too, a synced one (ADR-0189). The view lock is taken only
        // when the sources change.
        let view = holds.view;
        assert!(view.held_ns <= elapsed_ns, "{mode:?} view: {view:?} in {elapsed_ns} ns");
        assert!(view.acquisitions < COMMITS, "{mode:?} view taken per commit: {view:?}");
        db.close().unwrap();
    }
}

/// A transaction's write checks for its doom under the registry lock only when some transaction was doomed or
/// expired since it last checked (ADR-0144): writes take no registry lock while nothing was, and a write after its
/// own expiry still fails with `Expired`.
#[test]
fn a_write_takes_the_registry_lock_only_after_a_doom_and_still_sees_it() {
    const PUTS: u64 = 20;
    let env = RealEnv::new();
    let dir = env.temp_dir("lock-holds-dooms").unwrap();
    let options = Options::default()
        .with_sync_mode(SyncMode::NoSync)
        .with_lock_timing(true)
        .with_tracked_transactions_max(engine::TRACKED_TRANSACTIONS_MIN);
    let db = Db::open(env.clone(), dir.path(), options).unwrap();
    let registry_takes = |db: &Db<RealEnv>| db.stats().lock_holds.registry.acquisitions;
    // Tracked from now (ADR-0210: a transaction that only writes is tracked at its commit, and cannot be doomed).
    let mut writer = crate::begun(&db);
    let before = registry_takes(&db);
    for index in 0..PUTS {
        writer.put(format!("w-{index}").as_bytes(), b"1").unwrap();
    }
    assert_eq!(registry_takes(&db) - before, 0, "{PUTS} writes with no doom since the begin");
    // Blind writes fill the tracker: it expires its oldest transactions, the writer among them.
    for key in 0..200u32 {
        db.put(&key.to_be_bytes(), b"v").unwrap();
    }
    assert!(db.conflict_stats().0.expired >= 1, "{:?}", db.conflict_stats());
    let before = registry_takes(&db);
    let put = writer.put(b"w-late", b"2");
    assert!(matches!(put, Err(Error::Conflict { cause: ConflictCause::Expired })), "{put:?}");
    assert!(registry_takes(&db) - before >= 1, "the doom count moved: the write checked under the lock");
    // A transaction begun after those expiries writes without the lock again, and commits.
    let mut fresh = crate::begun(&db);
    let before = registry_takes(&db);
    for index in 0..PUTS {
        fresh.put(format!("f-{index}").as_bytes(), b"1").unwrap();
    }
    assert_eq!(registry_takes(&db) - before, 0, "no doom since the fresh transaction began");
    fresh.commit().unwrap();
    assert_eq!(db.get(b"f-0").unwrap().as_deref(), Some(&b"1"[..]));
    db.close().unwrap();
}

/// Every engine lock a commit or a read could take, by name: the five shared locks the meter counts.
fn takes(holds: LockHolds) -> [(&'static str, u64); 5] {
    [
        ("writer", holds.writer.acquisitions),
        ("registry", holds.registry.acquisitions),
        ("view", holds.view.acquisitions),
        ("watermark", holds.watermark.acquisitions),
        ("log", holds.log.acquisitions),
    ]
}

/// The engine locks `read` takes, beyond what reading the counters takes (`Db::stats` takes the writer lock once,
/// counted when it lets go, so after the first sample): `read` is run between two samples, and so is nothing.
fn locks_taken_by(db: &Db<RealEnv>, read: impl FnOnce()) -> [(&'static str, u64); 5] {
    let before = db.stats().lock_holds;
    let idle = takes(db.stats().lock_holds.since(before));
    let before = db.stats().lock_holds;
    read();
    let during = takes(db.stats().lock_holds.since(before));
    std::array::from_fn(|index| (during[index].0, during[index].1 - idle[index].1))
}

/// Issue 41, item 3 (ADR-0188): once a thread has read, a point read (`Db::get`: a memtable hit, a table hit, a
/// miss) takes none of the engine's shared locks, nor does a `Db::scan`; a transaction's reads take only the
/// registry lock, once per `READS_BUFFERED_MAX` of them (their SSI read records, ADR-0195). Outside the meter: a read
/// that reaches a table's data block looks it up in the block cache, which takes that block's shard lock (one of up
/// to 16) for the lookup; counted here through the cache's hits and misses, one per such read and none otherwise
/// (ADR-0213 says why the lookup keeps its lock).
#[test]
fn a_point_read_takes_no_shared_lock() {
    const READS: u64 = 300;
    let none = takes(LockHolds::default());
    let env = RealEnv::new();
    let dir = env.temp_dir("lock-holds-reads").unwrap();
    let options = Options::default().with_sync_mode(SyncMode::NoSync).with_lock_timing(true);
    let db = Db::open(env.clone(), dir.path(), options).unwrap();
    db.put(b"in-table", b"t").unwrap();
    db.flush().unwrap();
    db.put(b"in-memtable", b"m").unwrap();
    assert_eq!(db.get(b"in-table").unwrap().as_deref(), Some(&b"t"[..]), "the thread's first read");
    let gets = locks_taken_by(&db, || {
        for _ in 0..READS {
            assert_eq!(db.get(b"in-memtable").unwrap().as_deref(), Some(&b"m"[..]));
            assert_eq!(db.get(b"in-table").unwrap().as_deref(), Some(&b"t"[..]));
            assert_eq!(db.get(b"missing").unwrap(), None);
        }
    });
    assert_eq!(gets, none, "{} point reads took shared locks", 3 * READS);
    let cache_lookups = || {
        let stats = db.stats();
        stats.block_cache_hits + stats.block_cache_misses
    };
    let lookups_before = cache_lookups();
    for _ in 0..READS {
        assert_eq!(db.get(b"in-table").unwrap().as_deref(), Some(&b"t"[..]));
        assert_eq!(db.get(b"in-memtable").unwrap().as_deref(), Some(&b"m"[..]));
        assert_eq!(db.get(b"missing").unwrap(), None);
    }
    assert_eq!(cache_lookups() - lookups_before, READS, "one block-cache shard lock per read of a table's block");
    let scans = locks_taken_by(&db, || {
        for _ in 0..READS {
            assert_eq!(db.scan(..).unwrap().count(), 2);
        }
    });
    assert_eq!(scans, none, "{READS} scans took shared locks");
    let mut txn = db.begin().unwrap();
    let txn_gets = locks_taken_by(&db, || {
        for _ in 0..READS {
            assert_eq!(txn.get(b"in-table").unwrap().as_deref(), Some(&b"t"[..]));
        }
    });
    // The first registers the transaction and takes its snapshot, one registry take (ADR-0210); the reads are
    // buffered and registered READS_BUFFERED_MAX at a time, one registry take each (ADR-0195).
    let registered = 1 + READS / READS_BUFFERED_MAX as u64;
    let expected = [("writer", 0), ("registry", registered), ("view", 0), ("watermark", 0), ("log", 0)];
    assert_eq!(txn_gets, expected, "a transaction's reads");
    txn.rollback();
    db.close().unwrap();
}

/// ADR-0210: `begin` takes no lock; the first read takes the registry lock once, to register the transaction and
/// its snapshot. ADR-0195: the other reads take no lock. ADR-0198: its commit registers them in the registry take
/// that validates its writes (under the writer lock). ADR-0197: it publishes through the watermark alone; the
/// registry learns of it at its next take. So two registry takes for a transaction with any number of reads below
/// the buffer's size (TPC-C new-order's eleven took eleven more before ADR-0195, a third take to publish before
/// ADR-0197, and a second to register them before ADR-0198), and one for a transaction that only writes: it is
/// tracked in its validation's take (ADR-0210; two before).
#[test]
fn a_commits_reads_are_registered_in_one_take() {
    const READS: usize = 11;
    let env = RealEnv::new();
    let dir = env.temp_dir("lock-holds-txn-reads").unwrap();
    let options = Options::default().with_sync_mode(SyncMode::NoSync).with_lock_timing(true);
    let db = Db::open(env.clone(), dir.path(), options).unwrap();
    for key in 0..READS {
        db.put(format!("item-{key}").as_bytes(), b"i").unwrap();
    }
    let none = takes(LockHolds::default());
    for reads in [READS, 0] {
        // The thread's first read since the last commit refreshes its cached sources (the view lock, ADR-0127).
        assert_eq!(db.get(b"item-0").unwrap().as_deref(), Some(&b"i"[..]));
        let mut begun = None;
        let begin = locks_taken_by(&db, || begun = Some(db.begin().unwrap()));
        assert_eq!(begin, none, "begin takes no lock");
        let mut txn = begun.expect("begun");
        let gets = locks_taken_by(&db, || {
            for key in 0..reads {
                assert_eq!(txn.get(format!("item-{key}").as_bytes()).unwrap().as_deref(), Some(&b"i"[..]));
            }
        });
        let first = u64::from(reads > 0);
        let expected = [("writer", 0), ("registry", first), ("view", 0), ("watermark", 0), ("log", 0)];
        assert_eq!(gets, expected, "{reads} reads");
        txn.put(b"order", b"o").unwrap();
        let commit = locks_taken_by(&db, || txn.commit().unwrap());
        let expected = [("writer", 1), ("registry", 1), ("view", 0), ("watermark", 1), ("log", 1)];
        assert_eq!(commit, expected, "a commit after {reads} reads");
    }
    db.close().unwrap();
}
