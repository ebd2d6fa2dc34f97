//! Per-commit cost of the SSI conflict tracker against the number of records it retains (ADR-0072, ADR-0084).
//!
//! One `ReadTransaction` is held open (it read one key), so every later commit's record is retained. Then N
//! filler transactions commit, then 5 batches of 200 more are timed: the table gives the mean wall time per
//! transaction of the fastest batch (a shared machine preempts: the best batch is the least disturbed), from
//! `begin` (or the blind `put`) to its acknowledged commit, on `SimEnv` (no real I/O) in one thread.
//!
//! Two workloads: `blind` (one-write `Db::put`, the ADR-0072 measurement) and `read_scan` (a transaction that reads
//! one key, scans an 8-key range, writes one key and commits: retained records carry reads and ranges too).
//!
//! Two layers: `db` times the whole transaction through `Db` (the held reader also pins every MVCC version, so the
//! read path's cost grows too: that is not the tracker's), and `tracker` replays the same calls on a bare
//! `engine::ssi::ConflictTracker` (begin, read, scan, commit at the next sequences, make visible): the tracker's
//! own cost per transaction.
//!
//! `cargo run --release --manifest-path bench/Cargo.toml --no-default-features --features holdfast --example
//! tracker_cost [N ...]` (default N: 1000 10000 50000).

use std::time::Instant;

use engine::ssi::{ConflictTracker, KeyRange};
use engine::{Db, Options};
use env::SimEnv;

/// Distinct keys the workloads write (the key space stays small: the LSM is not what is measured).
const KEYS: u64 = 1000;
/// Timed transactions after the fillers, per batch.
const TIMED: u64 = 200;
/// Timed batches; the fastest one is reported.
const BATCHES: u64 = 5;

/// The mean microseconds per transaction of the fastest of [`BATCHES`] batches of [`TIMED`] runs of `run` (given
/// the transaction's index, from `first`), and how many did not commit.
fn best_batch(first: u64, mut run: impl FnMut(u64) -> bool) -> (f64, u64) {
    let (mut best_us, mut conflicts) = (f64::MAX, 0);
    for batch in 0..BATCHES {
        let start = Instant::now();
        let from = first + batch * TIMED;
        for index in from..from + TIMED {
            conflicts += u64::from(!run(index));
        }
        best_us = best_us.min(start.elapsed().as_secs_f64() * 1e6 / TIMED as f64);
    }
    (best_us, conflicts)
}
/// Keys one `read_scan` transaction scans.
const SCAN_KEYS: u64 = 8;

fn key(index: u64) -> Vec<u8> {
    format!("k{:06}", index % KEYS).into_bytes()
}

#[derive(Clone, Copy, Debug)]
enum Workload {
    Blind,
    ReadScan,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Blind => "blind",
            Workload::ReadScan => "read_scan",
        }
    }

    /// Run transaction `index`; returns whether it committed (a conflict is counted, not retried).
    fn run(self, db: &Db<SimEnv>, index: u64) -> bool {
        match self {
            Workload::Blind => db.put(&key(index), b"v").map(|()| true).unwrap_or_else(conflict_or_panic),
            Workload::ReadScan => read_scan(db, index).map(|()| true).unwrap_or_else(conflict_or_panic),
        }
    }
}

fn conflict_or_panic(error: engine::Error) -> bool {
    assert!(error.is_conflict(), "unexpected error: {error}");
    false
}

fn read_scan(db: &Db<SimEnv>, index: u64) -> engine::Result<()> {
    let mut txn = db.begin()?;
    txn.get(&key(index.wrapping_mul(7)))?;
    let start = index.wrapping_mul(13) % (KEYS - SCAN_KEYS);
    let (from, to) = (key(start), key(start + SCAN_KEYS));
    let rows = txn.scan(from.as_slice()..to.as_slice())?.count();
    assert!(rows as u64 <= SCAN_KEYS, "a scan of {SCAN_KEYS} keys returned {rows} rows");
    txn.put(&key(index), b"v")?;
    txn.commit()
}

/// The tracker calls the engine makes for transaction `index` of `workload`, on a bare tracker whose last visible
/// sequence is `visible`; returns whether it committed (and then the new visible sequence).
fn tracker_run(tracker: &mut ConflictTracker, workload: Workload, index: u64, visible: &mut u64) -> bool {
    let txn = tracker.try_begin(*visible, false).expect("room in the tracker");
    if let Workload::ReadScan = workload {
        let start = index.wrapping_mul(13) % (KEYS - SCAN_KEYS);
        let range = KeyRange { start: key(start), end: Some(key(start + SCAN_KEYS)) };
        let read = tracker.on_read(txn, &key(index.wrapping_mul(7))).and_then(|()| tracker.on_scan(txn, range));
        if read.is_err() {
            tracker.abort(txn);
            return false;
        }
    }
    if tracker.commit(txn, &[key(index)], *visible + 1).is_err() {
        return false;
    }
    *visible += 1;
    tracker.set_visible(*visible);
    true
}

fn measure_tracker(workload: Workload, fillers: u64) -> Row {
    let mut tracker = ConflictTracker::new();
    let mut visible = 0;
    let reader = tracker.try_begin(visible, true).expect("begin");
    tracker.on_read(reader, &key(0)).expect("the held reader reads");
    let mut conflicts = 0;
    for index in 0..fillers {
        conflicts += u64::from(!tracker_run(&mut tracker, workload, index, &mut visible));
    }
    let (mean_us, timed_conflicts) =
        best_batch(fillers, |index| tracker_run(&mut tracker, workload, index, &mut visible));
    conflicts += timed_conflicts;
    let tracked = tracker.tracked();
    Row { layer: "tracker", workload, retained: fillers, tracked, mean_us, conflicts }
}

struct Row {
    layer: &'static str,
    workload: Workload,
    retained: u64,
    tracked: usize,
    mean_us: f64,
    conflicts: u64,
}

fn measure(workload: Workload, fillers: u64) -> Row {
    let db = Db::open(SimEnv::new(fillers), "/db", Options::default()).expect("open");
    db.put(&key(0), b"v").expect("first put");
    let mut reader = db.begin_read().expect("begin_read");
    reader.get(&key(0)).expect("the held reader reads");
    let mut conflicts = 0;
    for index in 0..fillers {
        conflicts += u64::from(!workload.run(&db, index));
    }
    let (mean_us, timed_conflicts) = best_batch(fillers, |index| workload.run(&db, index));
    conflicts += timed_conflicts;
    let (_, tracked) = db.conflict_stats();
    drop(reader);
    db.close().expect("close");
    Row { layer: "db", workload, retained: fillers, tracked, mean_us, conflicts }
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|arg| arg.parse().expect("N is a number")).collect();
    let sizes = if args.is_empty() { vec![1_000, 10_000, 50_000] } else { args };
    println!(
        "{:<8} {:<10} {:>10} {:>10} {:>14} {:>10}",
        "layer", "workload", "fillers", "tracked", "us/commit", "conflicts"
    );
    let layers: [fn(Workload, u64) -> Row; 2] = [measure_tracker, measure];
    for layer in layers {
        for workload in [Workload::Blind, Workload::ReadScan] {
            for &fillers in &sizes {
                let row = layer(workload, fillers);
                println!(
                    "{:<8} {:<10} {:>10} {:>10} {:>14.1} {:>10}",
                    row.layer,
                    row.workload.name(),
                    row.retained,
                    row.tracked,
                    row.mean_us,
                    row.conflicts
                );
            }
        }
    }
}
