//! Issue 16's targets: which rows `--targets` runs, and the table of holdfast ÷ peer ratios generated from a
//! results file (`--report FILE` writes it into README.md).

use std::fmt::Write as _;

use crate::{Results, Row};

/// Whom holdfast is compared with in one target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// The faster of RocksDB's two front ends (pessimistic and optimistic transactions) in that row.
    BestRocks,
    /// One engine by name.
    Engine(&'static str),
}

/// The RocksDB front ends "best RocksDB" chooses from.
pub const ROCKS: [&str; 2] = ["rocksdb-pessimistic", "rocksdb-optimistic"];

/// One row of the targets table: holdfast's ops/s ÷ the peer's, in the same workload, threads and durability.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    pub what: &'static str,
    pub workload: &'static str,
    pub synced: bool,
    pub threads: usize,
    pub peer: Peer,
    /// The ratio needed.
    pub needed: f64,
    /// An aim (worth reaching) rather than a target that must be met.
    pub aim: bool,
}

const fn row(
    what: &'static str,
    workload: &'static str,
    synced: bool,
    threads: usize,
    peer: Peer,
    needed: f64,
) -> Target {
    Target { what, workload, synced, threads, peer, needed, aim: false }
}

impl Target {
    /// The same row as an aim.
    const fn as_aim(self) -> Target {
        Target { aim: true, ..self }
    }
}

use Peer::{BestRocks, Engine};

/// Issue 16's targets table. Reads (YCSB-C, YCSB-E) run in the unsynced session; every row with writes that the
/// issue calls synced runs with a sync per commit (`synced_per_commit`).
pub const TARGETS: &[Target] = &[
    row("YCSB-E, unsynced", "ycsb-e", false, 1, BestRocks, 1.0),
    row("YCSB-E, unsynced", "ycsb-e", false, 4, BestRocks, 1.0),
    row("YCSB-C", "ycsb-c", false, 1, BestRocks, 1.0),
    row("YCSB-C", "ycsb-c", false, 4, BestRocks, 1.0),
    row("YCSB-A, synced", "ycsb-a", true, 1, BestRocks, 0.8),
    row("YCSB-A, synced", "ycsb-a", true, 4, BestRocks, 0.8),
    row("YCSB-A, synced", "ycsb-a", true, 8, BestRocks, 0.8),
    row("TPC-C new-order, synced", "tpcc-new-order", true, 8, BestRocks, 0.5),
    row("TPC-C new-order, synced", "tpcc-new-order", true, 8, Engine("lmdb"), 1.0),
    row("durable single-key commits", "single-key-commit", true, 8, BestRocks, 1.0),
    row("durable single-key commits", "single-key-commit", true, 8, Engine("lmdb"), 2.0),
    row("durable single-key commits", "single-key-commit", true, 8, Engine("redb"), 2.0),
    row("YCSB-C", "ycsb-c", false, 1, Engine("lmdb"), 0.5).as_aim(),
    row("YCSB-C", "ycsb-c", false, 4, Engine("lmdb"), 0.5).as_aim(),
    row("YCSB-B, synced", "ycsb-b", true, 1, BestRocks, 1.0).as_aim(),
    row("YCSB-B, synced", "ycsb-b", true, 4, BestRocks, 1.0).as_aim(),
    row("YCSB-B, synced", "ycsb-b", true, 8, BestRocks, 1.0).as_aim(),
    row("YCSB-F, synced", "ycsb-f", true, 1, BestRocks, 1.0).as_aim(),
    row("YCSB-F, synced", "ycsb-f", true, 4, BestRocks, 1.0).as_aim(),
    row("YCSB-F, synced", "ycsb-f", true, 8, BestRocks, 1.0).as_aim(),
    row("TPC-C new-order, synced", "tpcc-new-order", true, 8, BestRocks, 1.0).as_aim(),
];

/// One row to run: (engine, workload, threads, synced_per_commit).
pub type Cell = (&'static str, &'static str, usize, bool);

/// Every row `--targets` runs: holdfast and each peer, for every target, without repeats, in table order.
pub fn plan() -> Vec<Cell> {
    let mut cells: Vec<Cell> = Vec::new();
    for t in TARGETS {
        let peers: Vec<&'static str> = match t.peer {
            BestRocks => ROCKS.to_vec(),
            Engine(name) => vec![name],
        };
        for engine in std::iter::once("holdfast").chain(peers) {
            let cell = (engine, t.workload, t.threads, t.synced);
            if !cells.contains(&cell) {
                cells.push(cell);
            }
        }
    }
    cells
}

fn ops(r: &Results, engine: &str, t: &Target) -> Option<f64> {
    let found: Option<&Row> = r.rows.iter().find(|x| {
        x.engine == engine && x.workload == t.workload && x.threads == t.threads && x.synced_per_commit == t.synced
    });
    found.filter(|x| x.error.is_none()).and_then(|x| x.ops_per_sec)
}

/// One target, measured: holdfast's ops/s, the peer's (named: for best RocksDB, the faster front end).
#[derive(Clone, Debug)]
pub struct Measured {
    pub target: Target,
    pub holdfast: Option<f64>,
    pub peer: Option<(String, f64)>,
}

impl Measured {
    pub fn ratio(&self) -> Option<f64> {
        self.holdfast.zip(self.peer.as_ref()).map(|(h, (_, p))| h / p)
    }
}

/// Every target, measured in `r` (a row missing from `r`, or failed, leaves its side empty).
pub fn evaluate(r: &Results) -> Vec<Measured> {
    TARGETS
        .iter()
        .map(|t| {
            let peer = match t.peer {
                Engine(name) => ops(r, name, t).map(|v| (name.to_string(), v)),
                BestRocks => ROCKS
                    .iter()
                    .filter_map(|name| ops(r, name, t).map(|v| (name.to_string(), v)))
                    .max_by(|a, b| a.1.total_cmp(&b.1)),
            };
            Measured { target: *t, holdfast: ops(r, "holdfast", t), peer }
        })
        .collect()
}

fn fmt_ops(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 1000.0 {
        format!("{:.1}k", v / 1000.0)
    } else {
        format!("{v:.0}")
    }
}

/// The targets table in Markdown: one line per target, holdfast ÷ peer, needed and measured ratio.
pub fn table(r: &Results) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| target | threads | holdfast ÷ | needed | measured | met? | holdfast ops/s | peer ops/s |\n\
         |---|---:|---|---:|---:|---|---:|---:|"
    );
    for m in evaluate(r) {
        let t = &m.target;
        let peer = match t.peer {
            BestRocks => "best RocksDB".to_string(),
            Engine(name) => name.to_string(),
        };
        let met = match m.ratio() {
            None => "not measured".to_string(),
            Some(ratio) if ratio >= t.needed => "**met**".to_string(),
            Some(_) => "missed".to_string(),
        };
        let kind = if t.aim { " (aim)" } else { "" };
        let peer_ops = m.peer.as_ref().map(|(name, v)| format!("{} ({name})", fmt_ops(*v))).unwrap_or("—".into());
        let _ = writeln!(
            s,
            "| {}{kind} | {} | {peer} | ≥ {:.1}× | {} | {met} | {} | {peer_ops} |",
            t.what,
            t.threads,
            t.needed,
            m.ratio().map(|x| format!("{x:.2}×")).unwrap_or("—".into()),
            m.holdfast.map(fmt_ops).unwrap_or("—".into()),
        );
    }
    s
}
