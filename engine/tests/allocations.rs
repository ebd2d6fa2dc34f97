//! Heap allocations on the read hot paths (ADR-0065) and per version a flush writes, counted by a global allocator (`stats_alloc`) in this
//! binary of its own (the count is process-wide, so nothing else may run beside it: `harness = false`, one
//! thread, `SimEnv`, whose background work runs only when stepped).
//!
//! A database of YCSB-style keys (`user` + 12 digits, 100-byte values) is flushed to one SSTable and every block
//! is read once, so the measured reads all hit the block cache. The figures it prints are the ones in
//! `engine/BENCH.md`; each is also checked against its ceiling here, so a change that adds an allocation to a
//! hot path fails this test.
//!
//! ```text
//! cargo test -p engine --test allocations
//! ```

use std::alloc::System;

use engine::{Db, Options, SyncMode};
use env::SimEnv;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const KEY_COUNT: u64 = 2_000;
const VALUE_SIZE_BYTES: usize = 100;

fn key(index: u64) -> Vec<u8> {
    format!("user{index:012}").into_bytes()
}

/// Allocations (allocs + reallocs) while `work` runs, divided by `units`.
fn allocations_per(units: u64, work: impl FnOnce()) -> f64 {
    let region = Region::new(GLOBAL);
    work();
    let change = region.change();
    (change.allocations + change.reallocations) as f64 / units as f64
}

/// One measured figure, printed and checked against its ceiling. The owned API puts a floor under each: a `get`
/// that finds a value returns it as a `Vec` (1 allocation), a scanned row is an owned key and value (2).
struct Figure {
    what: &'static str,
    per: &'static str,
    measured: f64,
    ceiling: f64,
}

fn main() {
    let env = SimEnv::new(16);
    let options = Options::default().with_sync_mode(SyncMode::NoSync);
    let db = Db::open(env, "/db", options).expect("open");
    for index in 0..KEY_COUNT {
        db.put(&key(index), &[b'v'; VALUE_SIZE_BYTES]).expect("put");
    }
    db.flush().expect("flush");
    assert_eq!(db.stats().tables_per_level.iter().sum::<usize>(), 1, "one table, empty memtable");
    let keys: Vec<Vec<u8>> = (0..KEY_COUNT).map(key).collect();
    for key in &keys {
        assert_eq!(db.get(key).expect("warm-up get").map(|value| value.len()), Some(VALUE_SIZE_BYTES));
    }
    let mut figures = Vec::new();
    // With the expensive cross-checks (a `cargo test --workspace` build: the simulation targets turn them on),
    // the block lookup is checked against a seek that rebuilds keys in a buffer: one allocation more.
    let cached_get_ceiling = if engine::EXPENSIVE_CHECKS { 2.2 } else { 1.2 };

    let table_get = allocations_per(KEY_COUNT, || {
        for key in &keys {
            assert!(db.get(key).expect("get").is_some());
        }
    });
    figures.push(Figure {
        what: "`Db::get`, SSTable, block cached",
        per: "get",
        measured: table_get,
        ceiling: cached_get_ceiling,
    });

    let absent: Vec<Vec<u8>> = keys.iter().map(|key| [key.as_slice(), b"x"].concat()).collect();
    let missing = allocations_per(KEY_COUNT, || {
        for key in &absent {
            assert!(db.get(key).expect("get").is_none());
        }
    });
    figures.push(Figure { what: "`Db::get` of an absent key", per: "get", measured: missing, ceiling: 0.05 });

    db.put(b"user-memtable", &[b'm'; VALUE_SIZE_BYTES]).expect("put");
    let memtable_get = allocations_per(KEY_COUNT, || {
        for _ in 0..KEY_COUNT {
            assert!(db.get(b"user-memtable").expect("get").is_some());
        }
    });
    figures.push(Figure { what: "`Db::get`, memtable", per: "get", measured: memtable_get, ceiling: 1.0 });

    let db_scan = allocations_per(KEY_COUNT, || {
        let rows = db.scan(b"user".as_slice()..b"user~".as_slice()).expect("scan").map(|row| row.expect("row"));
        assert_eq!(rows.count() as u64, KEY_COUNT + 1);
    });
    figures.push(Figure { what: "`Db::scan`, SSTable rows", per: "row", measured: db_scan, ceiling: 2.1 });

    let db_scan_reverse = allocations_per(KEY_COUNT, || {
        let rows = db.scan_prefix(b"user").expect("scan").rev().map(|row| row.expect("row"));
        assert_eq!(rows.count() as u64, KEY_COUNT + 1);
    });
    // Reverse decodes a block at a time into its entries (ADR-0085), into one vector reused from block to block.
    let what = "`Db::scan_prefix(..).rev()`, SSTable rows";
    figures.push(Figure { what, per: "row", measured: db_scan_reverse, ceiling: 2.1 });

    let mut reader = db.begin_read().expect("begin_read");
    let read_scan = allocations_per(KEY_COUNT, || {
        let rows = reader.scan(..).expect("scan").count();
        assert_eq!(rows as u64, KEY_COUNT + 1);
    });
    drop(reader);
    figures.push(Figure { what: "`ReadTransaction::scan`", per: "row", measured: read_scan, ceiling: 2.1 });

    let mut txn = db.begin().expect("begin");
    let txn_scan = allocations_per(KEY_COUNT, || {
        let rows = txn.scan(..).expect("scan").count();
        assert_eq!(rows as u64, KEY_COUNT + 1);
    });
    txn.rollback();
    figures.push(Figure { what: "`Transaction::scan`", per: "row", measured: txn_scan, ceiling: 2.1 });

    // A flush lends the memtable's versions to the table builder through one reused entry: what it allocates
    // is per table (its buffer, file, manifest) and per block, not per version (two each, collected, before).
    for index in 0..KEY_COUNT {
        db.put(&[b"flush".as_slice(), &key(index)].concat(), &[b'f'; VALUE_SIZE_BYTES]).expect("put");
    }
    let tables_before = db.stats().tables_per_level.iter().sum::<usize>();
    let flush = allocations_per(KEY_COUNT + 1, || db.flush().expect("flush"));
    assert_eq!(db.stats().tables_per_level.iter().sum::<usize>(), tables_before + 1, "the flush wrote one table");
    assert_eq!(db.get(b"flushuser000000000007").expect("get"), Some(vec![b'f'; VALUE_SIZE_BYTES]));
    figures.push(Figure { what: "`Db::flush`", per: "flushed version", measured: flush, ceiling: 0.5 });

    println!("expensive checks in this build: {}", engine::EXPENSIVE_CHECKS);
    println!("| path | allocations | ceiling |");
    println!("|:--|--:|--:|");
    for figure in &figures {
        println!("| {} | {:.2} per {} | {:.2} |", figure.what, figure.measured, figure.per, figure.ceiling);
    }
    let over: Vec<&str> =
        figures.iter().filter(|figure| figure.measured > figure.ceiling).map(|figure| figure.what).collect();
    assert!(over.is_empty(), "allocations above their ceiling on: {over:?}");
    println!("1 passed, 0 failed");
}
