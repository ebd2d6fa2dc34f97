//! The result rows and the run metadata a `--out` JSON holds (read back by `--report`).

use crate::backend;
use serde::{Deserialize, Serialize};

/// One result row. Every number of a row comes from the same (median) run.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct Row {
    pub engine: String,
    pub workload: String,
    pub threads: usize,
    pub synced_per_commit: bool,
    pub ops_per_sec: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub aborts: Option<u64>,
    pub run_seconds: Option<f64>,
    /// ops/s of every run, in run order; the row's cells come from the median one.
    pub runs_ops_per_sec: Vec<f64>,
    pub ops: Option<u64>,
    pub records: u64,
    /// Where the data was when the row ran (SSTables per level for LSM engines).
    pub layout: Option<String>,
    /// Set when the backend failed to build, open or run: then there are no numbers.
    pub error: Option<String>,
    /// Write-skew rows: "holds" or "VIOLATED".
    pub outcome: Option<String>,
    pub detail: Option<String>,
    /// Peak resident set of the bench process while the row ran, in KiB: `VmHWM` of /proc/self/status, reset
    /// before the row through /proc/self/clear_refs. It includes the harness and everything the engine holds
    /// (caches, memtables). None where Linux does not offer it, and in results from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_kib: Option<u64>,
    /// `--lock-hold`: the serial part of a commit, over every run of the row (warm-ups included), where the engine
    /// counts it (holdfast, ADR-0119).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_hold: Option<LockHoldRow>,
    /// CPU per operation over every run of the row, on the workload's threads and on the rest of the process (an
    /// engine's background work): `bench/src/cpu.rs`, ADR-0214. None off Linux and in results from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_op: Option<crate::cpu::CpuPerOp>,
}

/// Lock hold time per commit: every commit takes these locks, so `1 / writer_ns_per_commit` commits per
/// nanosecond is the most any number of cores can commit (Amdahl), whatever else they do in parallel. The per-op
/// figures divide by every operation of the row instead (reads included, ADR-0127): a read-only row has no
/// commit, and its per-commit figures are 0.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct LockHoldRow {
    pub commits: u64,
    pub writer_ns_per_commit: f64,
    pub writer_acquisitions_per_commit: f64,
    pub registry_ns_per_commit: f64,
    pub registry_acquisitions_per_commit: f64,
    pub view_ns_per_commit: f64,
    pub view_acquisitions_per_commit: f64,
    /// Operations of the row, warm-ups included (as the engine's counters); absent in results from before.
    #[serde(default)]
    pub ops: u64,
    #[serde(default)]
    pub writer_ns_per_op: f64,
    #[serde(default)]
    pub writer_acquisitions_per_op: f64,
    #[serde(default)]
    pub registry_ns_per_op: f64,
    #[serde(default)]
    pub registry_acquisitions_per_op: f64,
    #[serde(default)]
    pub view_ns_per_op: f64,
    #[serde(default)]
    pub view_acquisitions_per_op: f64,
    /// The visibility watermark's lock (ADR-0133: an unsynced commit publishes through it after the writer lock);
    /// absent in results from before it existed.
    #[serde(default)]
    pub watermark_ns_per_commit: f64,
    #[serde(default)]
    pub watermark_acquisitions_per_commit: f64,
    /// The log lock (ADR-0134: a committer writes its group's records under it, after the writer lock); absent in
    /// results from before it existed.
    #[serde(default)]
    pub log_ns_per_commit: f64,
    #[serde(default)]
    pub log_acquisitions_per_commit: f64,
    /// Time per commit spent waiting to take each lock (asked to taken), ADR-0186; absent in results from before.
    #[serde(default)]
    pub writer_wait_ns_per_commit: f64,
    #[serde(default)]
    pub registry_wait_ns_per_commit: f64,
    #[serde(default)]
    pub view_wait_ns_per_commit: f64,
    #[serde(default)]
    pub watermark_wait_ns_per_commit: f64,
    #[serde(default)]
    pub log_wait_ns_per_commit: f64,
    /// A committer's wait for the commits before it to become visible, and a synced one's for its batch: waits
    /// and time per commit (ADR-0186).
    #[serde(default)]
    pub visibility_waits_per_commit: f64,
    #[serde(default)]
    pub visibility_wait_ns_per_commit: f64,
    #[serde(default)]
    pub batch_waits_per_commit: f64,
    #[serde(default)]
    pub batch_wait_ns_per_commit: f64,
}

impl LockHoldRow {
    /// What happened between two samples, over `ops` operations; `None` when no operation finished.
    pub fn between(before: backend::LockSample, after: backend::LockSample, ops: u64) -> Option<Self> {
        let commits = after.commits.saturating_sub(before.commits);
        // (acquisitions, held ns) per `count`; 0 when there were none.
        let delta = |lock: usize, count: u64| {
            let ((a0, h0), (a1, h1)) = (before.locks[lock], after.locks[lock]);
            let per = |n: u64| if count == 0 { 0.0 } else { n as f64 / count as f64 };
            (per(a1.saturating_sub(a0)), per(h1.saturating_sub(h0)))
        };
        let ((writer_acq, writer_ns), (registry_acq, registry_ns), (view_acq, view_ns)) =
            (delta(0, commits), delta(1, commits), delta(2, commits));
        let ((writer_op_acq, writer_op_ns), (registry_op_acq, registry_op_ns), (view_op_acq, view_op_ns)) =
            (delta(0, ops), delta(1, ops), delta(2, ops));
        let ((watermark_acq, watermark_ns), (log_acq, log_ns)) = (delta(3, commits), delta(4, commits));
        let per_commit = |n: u64| if commits == 0 { 0.0 } else { n as f64 / commits as f64 };
        let lock_wait = |lock: usize| per_commit(after.lock_waits_ns[lock].saturating_sub(before.lock_waits_ns[lock]));
        let wait = |index: usize| {
            let ((n0, ns0), (n1, ns1)) = (before.waits[index], after.waits[index]);
            (per_commit(n1.saturating_sub(n0)), per_commit(ns1.saturating_sub(ns0)))
        };
        let ((visibility_waits, visibility_wait_ns), (batch_waits, batch_wait_ns)) = (wait(0), wait(1));
        (commits > 0 || ops > 0).then_some(Self {
            commits,
            writer_ns_per_commit: writer_ns,
            writer_acquisitions_per_commit: writer_acq,
            registry_ns_per_commit: registry_ns,
            registry_acquisitions_per_commit: registry_acq,
            view_ns_per_commit: view_ns,
            view_acquisitions_per_commit: view_acq,
            ops,
            writer_ns_per_op: writer_op_ns,
            writer_acquisitions_per_op: writer_op_acq,
            registry_ns_per_op: registry_op_ns,
            registry_acquisitions_per_op: registry_op_acq,
            view_ns_per_op: view_op_ns,
            view_acquisitions_per_op: view_op_acq,
            watermark_ns_per_commit: watermark_ns,
            watermark_acquisitions_per_commit: watermark_acq,
            log_ns_per_commit: log_ns,
            log_acquisitions_per_commit: log_acq,
            writer_wait_ns_per_commit: lock_wait(0),
            registry_wait_ns_per_commit: lock_wait(1),
            view_wait_ns_per_commit: lock_wait(2),
            watermark_wait_ns_per_commit: lock_wait(3),
            log_wait_ns_per_commit: lock_wait(4),
            visibility_waits_per_commit: visibility_waits,
            visibility_wait_ns_per_commit: visibility_wait_ns,
            batch_waits_per_commit: batch_waits,
            batch_wait_ns_per_commit: batch_wait_ns,
        })
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct Meta {
    pub date: String,
    pub machine: String,
    pub mode: String,
    pub command: String,
    pub records: u64,
    pub warmup_ms: u64,
    pub duration_ms: u64,
    pub runs: usize,
    pub threads: Vec<usize>,
    pub cpus: usize,
    pub cpu_model: String,
    pub kernel: String,
    pub loadavg_start: String,
    pub loadavg_end: String,
    pub fdatasync_p50_us: f64,
    pub wall_seconds: f64,
    /// The holdfast source the binary was built from (`build.rs`): HEAD then, and whether engine/ or env/ had
    /// uncommitted changes.
    pub holdfast_source: String,
    pub engines: Vec<EngineMeta>,
    /// Set when the 1-minute load average was above the core count at the start or the end of the run: other
    /// work competed for the cores, so the numbers are pessimistic and noisy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_warning: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct EngineMeta {
    pub name: String,
    pub built: bool,
    pub isolation: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct Results {
    pub meta: Meta,
    pub rows: Vec<Row>,
}
