//! Per-commit cost of the SSI conflict tracker against the number of records it retains (ADR-0072, ADR-ssi).
//!
//! One `ReadTransaction` is held open (it read one key), so every later commit's record is retained. Then N
//! filler transactions commit, then 200 more are timed: the table gives the mean wall time per timed transaction,
//! from `begin` (or the blind `put`) to its acknowledged commit, on `SimEnv` (no real I/O) in one thread.
//!
//! Two workloads: `blind` (one-write `Db::put`, the ADR-0072 measurement) and `read_scan` (a transaction that reads
//! one key, scans an 8-key range, writes one key and commits: retained records carry reads and ranges too).
//!
//! `cargo run --release --manifest-path bench/Cargo.toml --no-default-features --features holdfast --example
//! tracker_cost [N ...]` (default N: 1000 10000 50000).

use std::time::Instant;

use engine::{Db, Options};
use env::SimEnv;

/// Distinct keys the workloads write (the key space stays small: the LSM is not what is measured).
const KEYS: u64 = 1000;
/// Timed transactions after the fillers.
const TIMED: u64 = 200;
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

struct Row {
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
    let start = Instant::now();
    for index in fillers..fillers + TIMED {
        conflicts += u64::from(!workload.run(&db, index));
    }
    let elapsed = start.elapsed();
    let (_, tracked) = db.conflict_stats();
    drop(reader);
    db.close().expect("close");
    let mean_us = elapsed.as_secs_f64() * 1e6 / TIMED as f64;
    Row { workload, retained: fillers, tracked, mean_us, conflicts }
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|arg| arg.parse().expect("N is a number")).collect();
    let sizes = if args.is_empty() { vec![1_000, 10_000, 50_000] } else { args };
    println!("{:<10} {:>10} {:>10} {:>14} {:>10}", "workload", "fillers", "tracked", "us/commit", "conflicts");
    for workload in [Workload::Blind, Workload::ReadScan] {
        for &fillers in &sizes {
            let row = measure(workload, fillers);
            println!(
                "{:<10} {:>10} {:>10} {:>14.1} {:>10}",
                row.workload.name(),
                row.retained,
                row.tracked,
                row.mean_us,
                row.conflicts
            );
        }
    }
}
