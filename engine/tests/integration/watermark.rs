//! Unsynced commits insert into the memtable after the writer lock, in parallel (ADR-0133): on real threads, a
//! transaction's snapshot S (the registry's visible sequence) must still read exactly the commits with a sequence
//! at or below S, with no gap, while small memtables rotate under the committers (a rotation waits for every
//! insert into the memtable it seals). Synced commits too: a batch completes them on the watermark after the
//! writer lock (ADR-0146), racing the next batch's and a rotation's.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use engine::{Db, Options, SyncMode};
use env::{Env, RealEnv, TaskStep};

const WRITERS: usize = 4;
const COMMITS_PER_WRITER: usize = 400;
/// Fewer when each batch syncs; still several memtables' worth.
const SYNCED_COMMITS_PER_WRITER: usize = 150;
/// Small, so the memtable rotates (and flushes) many times while commits are in flight.
const FLUSH_THRESHOLD_BYTES: u64 = 16 * 1024;
const OBSERVATIONS_MAX: usize = 200;
/// How many scans the observer takes at most while the writers run (it keeps one per distinct snapshot).
const OBSERVE_ATTEMPTS_MAX: usize = 1 << 22;

/// What a reader saw: its snapshot and every key it read.
struct Observation {
    snapshot: u64,
    keys: Vec<Vec<u8>>,
}

fn writer(db: &Db<RealEnv>, thread: usize, commits: usize, sequences: &Mutex<BTreeMap<Vec<u8>, u64>>) {
    for index in 0..commits {
        let key = format!("w{thread}-{index:04}").into_bytes();
        let mut txn = db.begin().unwrap();
        txn.put(&key, &[7; 24]).unwrap();
        let ticket = txn.submit().unwrap().expect("a write has a ticket");
        db.wait_for_commit(&ticket).unwrap();
        // Once its commit returned, the writer's next snapshot includes it.
        let mut next = db.begin().unwrap();
        assert_eq!(next.get(b"unwritten").unwrap(), None);
        let snapshot = next.snapshot().expect("a read takes the snapshot (ADR-0210)");
        assert!(snapshot >= ticket.last_sequence, "{ticket:?} not visible after its commit");
        sequences.lock().unwrap().insert(key, ticket.last_sequence);
    }
}

fn observe(db: &Db<RealEnv>) -> Observation {
    let mut txn = db.begin().unwrap();
    let keys = txn.scan(..).unwrap().map(|row| row.unwrap().0).collect();
    let snapshot = txn.snapshot().expect("the scan took the snapshot (ADR-0210)");
    txn.rollback();
    Observation { snapshot, keys }
}

#[test]
fn a_snapshot_reads_exactly_the_commits_at_or_below_it_while_inserts_land_out_of_order() {
    snapshots_read_exactly_their_commits(SyncMode::NoSync, COMMITS_PER_WRITER);
}

#[test]
fn a_snapshot_reads_exactly_the_commits_at_or_below_it_while_synced_batches_complete_after_the_writer_lock() {
    snapshots_read_exactly_their_commits(SyncMode::Sync, SYNCED_COMMITS_PER_WRITER);
}

fn snapshots_read_exactly_their_commits(mode: SyncMode, commits: usize) {
    let env = RealEnv::new();
    let dir = env.temp_dir("watermark-real-threads").unwrap();
    let options = Options::default().with_sync_mode(mode).with_flush_threshold_bytes(FLUSH_THRESHOLD_BYTES);
    let db = Db::open(env.clone(), dir.path(), options).unwrap();
    let sequences = Arc::new(Mutex::new(BTreeMap::new()));
    let handles: Vec<_> = (0..WRITERS)
        .map(|thread| {
            let (db, sequences) = (db.clone(), Arc::clone(&sequences));
            let body = move || {
                writer(&db, thread, commits, &sequences);
                TaskStep::Done
            };
            env.spawn("writer", Box::new(body))
        })
        .collect();
    let total = (WRITERS * commits) as u64;
    let mut observations: Vec<Observation> = Vec::new();
    for _ in 0..OBSERVE_ATTEMPTS_MAX {
        if observations.len() >= OBSERVATIONS_MAX || db.last_sequence() >= total {
            break;
        }
        // Synced: one observation per snapshot (a sync is slow next to a scan); unsynced: every one.
        let observation = observe(&db);
        let repeat = observations.last().is_some_and(|last| last.snapshot == observation.snapshot);
        if mode == SyncMode::NoSync || !repeat {
            observations.push(observation);
        }
    }
    for handle in &handles {
        env.wait(handle).unwrap();
    }
    observations.push(observe(&db));
    let sequences = sequences.lock().unwrap();
    assert_eq!((sequences.len() as u64, db.last_sequence()), (total, total));
    let mut between = 0;
    for observation in &observations {
        let expected: Vec<&Vec<u8>> =
            sequences.iter().filter(|(_, sequence)| **sequence <= observation.snapshot).map(|(key, _)| key).collect();
        let seen: Vec<&Vec<u8>> = observation.keys.iter().collect();
        assert_eq!(seen, expected, "{mode:?} at snapshot {}", observation.snapshot);
        between += usize::from(observation.snapshot > 0 && observation.snapshot < total);
    }
    let stats = db.stats();
    // Every rotation leaves a memtable flushed or waiting to be.
    let rotations = stats.flush_count + stats.immutable_memtables as u64;
    assert!(rotations > 0, "{mode:?}: no rotation ran while committing: {stats:?}");
    // Unsynced writers can finish before the observer's first scan; synced ones (a sync each batch) cannot.
    assert!(mode == SyncMode::NoSync || between > 0, "{mode:?}: no snapshot taken while the writers ran");
    eprintln!("{mode:?}: {} observations, {between} taken mid-run", observations.len());
    db.close().unwrap();
}
