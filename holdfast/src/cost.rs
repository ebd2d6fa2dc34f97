//! Cost contracts (ADR-0182): `cost.*` invariants a target declares and the framework checks after every step
//! and at the end of the run, against what the world counted ([`env::Cost`], ADR-0180); and the cost report
//! (`--cost-report`, ADR-0183): the distribution of each cost per kind of step over a swarm.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use std::path::{Path, PathBuf};

use env::{CostCounters, IoKind, LatencyHistogram, SimEnv};
use serde::{Deserialize, Serialize};

use crate::step::{Observed, Step};
use crate::target::{FailureKind, Violation};

/// Every cost invariant's name starts with this.
pub const COST_INVARIANT_PREFIX: &str = "cost.";
/// A cost report keeps at most this many kinds of step; later kinds are counted under `other`.
pub const COST_REPORT_KINDS_MAX: usize = 64;

/// What one step cost, for [`crate::Target::check_cost`].
#[derive(Debug)]
pub struct StepCost<'a, Op, O> {
    /// The step that ran; `None` once more at the end of the run, after the final recovery (`io` is then the
    /// finale's: the liveness phase, the final power cut and its recovery).
    pub step: Option<&'a Step<Op>>,
    /// What it produced (`None` at the end of the run).
    pub observed: Option<&'a Observed<O>>,
    /// The world's IO during the step: its crashes' recoveries, reopens and background work included.
    pub io: CostCounters,
    /// The world's IO during the run so far, this step included.
    pub run: CostCounters,
}

impl<Op, O> StepCost<'_, Op, O> {
    /// The target operation that ran, if the step was one.
    pub fn op(&self) -> Option<&Op> {
        match self.step {
            Some(Step::Op(op)) => Some(op),
            _ => None,
        }
    }

    /// The step was a target operation observed to have run (not skipped, cut by a crash or unavailable).
    pub fn op_ran(&self) -> Option<(&Op, &O)> {
        match (self.op(), self.observed) {
            (Some(op), Some(Observed::Op(observation))) => Some((op, observation)),
            _ => None,
        }
    }
}

/// What one call into the system cost, per file: the world's step figures ([`SimEnv::step_files`]) after it
/// minus before. A contract on a call (a put syncs its log once) measures the call itself this way, not the
/// whole step, which may also reopen the system (ADR-0182).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallCost {
    /// Per path the call touched, in path order.
    pub files: Vec<(PathBuf, CostCounters)>,
}

/// Per file, what `after` (a later `SimEnv::step_files`) adds to `before` (sorted by path, as `step_files` gives
/// it); files whose counts did not change are left out.
pub fn files_since(
    before: &[(std::path::PathBuf, CostCounters)],
    after: Vec<(std::path::PathBuf, CostCounters)>,
) -> Vec<(std::path::PathBuf, CostCounters)> {
    after
        .into_iter()
        .map(|(path, after)| {
            let earlier = before.binary_search_by(|(known, _)| known.as_path().cmp(&path)).ok();
            let delta = earlier.map_or(after, |index| after.since(&before[index].1));
            (path, delta)
        })
        .filter(|(_, delta)| *delta != CostCounters::default())
        .collect()
}

impl CallCost {
    /// Run `call` and measure it.
    pub fn measure<R>(env: &SimEnv, call: impl FnOnce() -> R) -> (R, CallCost) {
        let before = env.step_files();
        let result = call();
        (result, CallCost { files: files_since(&before, env.step_files()) })
    }

    /// The sum over the files `which` picks.
    pub fn sum_where(&self, which: impl Fn(&Path) -> bool) -> CostCounters {
        let mut total = CostCounters::default();
        for (_, io) in self.files.iter().filter(|(path, _)| which(path)) {
            total.add(io);
        }
        total
    }
}

/// A violation of cost invariant `invariant` (which must start with [`COST_INVARIANT_PREFIX`]): a failure of
/// kind [`FailureKind::Cost`], so its signature is its own.
pub fn cost_violation(invariant: &str, expected: impl Into<String>, actual: impl Into<String>) -> Violation {
    assert!(invariant.starts_with(COST_INVARIANT_PREFIX), "cost invariant {invariant:?} does not start with `cost.`");
    Violation::new(invariant, FailureKind::Cost, expected, actual)
}

/// The distribution of every cost per kind of step (target operations by their serde tag, world steps by
/// theirs), and the device latencies per kind of IO call: what `--cost-report` prints. Values are kept in
/// [`LatencyHistogram`]s (exact up to 127, then to 7 significant bits).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostReport {
    /// Kind of step → cost field → the step's values.
    pub steps: BTreeMap<String, BTreeMap<String, LatencyHistogram>>,
    /// Kind of IO call → simulated latencies.
    pub latencies: BTreeMap<IoKind, LatencyHistogram>,
    /// The system's own work counters, summed.
    pub work: BTreeMap<String, u64>,
}

impl CostReport {
    /// Nothing recorded.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty() && self.latencies.is_empty() && self.work.is_empty()
    }

    /// Count one step of kind `kind` that cost `io`.
    pub fn record_step(&mut self, kind: &str, io: &CostCounters) {
        let kind =
            if self.steps.len() >= COST_REPORT_KINDS_MAX && !self.steps.contains_key(kind) { "other" } else { kind };
        let fields = self.steps.entry(kind.to_string()).or_default();
        for (name, value) in io.fields() {
            fields.entry(name.to_string()).or_default().record(value);
        }
    }

    /// Add a run's latencies and work counters.
    pub fn record_run(&mut self, cost: &env::Cost) {
        for (kind, histogram) in &cost.latencies {
            self.latencies.entry(*kind).or_default().merge(histogram);
        }
        for (name, count) in &cost.work {
            let slot = self.work.entry(name.clone()).or_insert(0);
            *slot = slot.saturating_add(*count);
        }
    }

    /// Add everything `other` recorded.
    pub fn merge(&mut self, other: &CostReport) {
        for (kind, fields) in &other.steps {
            let mine = self.steps.entry(kind.clone()).or_default();
            for (name, histogram) in fields {
                mine.entry(name.clone()).or_default().merge(histogram);
            }
        }
        for (kind, histogram) in &other.latencies {
            self.latencies.entry(*kind).or_default().merge(histogram);
        }
        for (name, count) in &other.work {
            let slot = self.work.entry(name.clone()).or_insert(0);
            *slot = slot.saturating_add(*count);
        }
    }

    /// The report as text: per kind of step, each cost that was ever non-zero with its p50, p90, p99 and max;
    /// then the latencies per kind of IO call; then the work counters.
    pub fn render(&self) -> String {
        let mut text = String::from("cost report (per step: p50 p90 p99 max)\n");
        for (kind, fields) in &self.steps {
            let steps = fields.values().next().map_or(0, |histogram| histogram.calls);
            let _ = writeln!(text, "  {kind} ({steps} steps)");
            for (name, histogram) in fields {
                if histogram.counts.keys().all(|&value| value == 0) {
                    continue;
                }
                let _ = writeln!(text, "    {name:<14} {}", quantiles(histogram));
            }
        }
        let _ = writeln!(text, "simulated latency per IO call, nanoseconds (p50 p90 p99 max)");
        for (kind, histogram) in &self.latencies {
            let _ = writeln!(text, "  {:<10} {} ({} calls)", kind.name(), quantiles(histogram), histogram.calls);
        }
        if !self.work.is_empty() {
            let _ = writeln!(text, "work counters");
            for (name, count) in &self.work {
                let _ = writeln!(text, "  {name} {count}");
            }
        }
        text
    }
}

fn quantiles(histogram: &LatencyHistogram) -> String {
    let at = |per_mille| histogram.percentile_nanos(per_mille).unwrap_or(0);
    format!("{} {} {} {}", at(500), at(900), at(990), at(1000))
}

/// The kind of a step for the report: a target operation's serde tag (`{"op": "put", ..}` → `put`; an
/// externally tagged variant → its name), a world step's likewise.
pub fn step_kind(step: &impl Serialize) -> String {
    match serde_json::to_value(step) {
        Ok(serde_json::Value::String(name)) => name,
        Ok(serde_json::Value::Object(map)) => match map.get("op").or_else(|| map.get("world")) {
            Some(serde_json::Value::String(name)) => name.clone(),
            _ => map.keys().next().cloned().unwrap_or_else(|| "step".to_string()),
        },
        _ => "step".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Steps are counted per kind and field; merging two reports adds them; the text lists only non-zero costs.
    #[test]
    fn report_records_merges_and_renders() {
        let mut first = CostReport::default();
        first.record_step("put", &CostCounters { writes: 1, bytes_written: 100, ..CostCounters::default() });
        let mut second = CostReport::default();
        second.record_step("put", &CostCounters { writes: 3, bytes_written: 300, ..CostCounters::default() });
        second.record_step("get", &CostCounters::default());
        first.merge(&second);
        let writes = &first.steps["put"]["writes"];
        assert_eq!((writes.calls, writes.percentile_nanos(1000)), (2, Some(3)));
        let text = first.render();
        assert!(text.contains("put (2 steps)") && text.contains("writes         1 3 3 3"), "{text}");
        assert!(text.contains("get (1 steps)") && !text.contains("file_syncs"), "{text}");
    }

    /// A cost violation has its own kind; a name outside `cost.` is refused.
    #[test]
    fn cost_violations_are_their_own_kind() {
        let violation = cost_violation("cost.file_syncs_per_commit", "at most 2", "3");
        assert_eq!((violation.kind, violation.invariant.as_str()), (FailureKind::Cost, "cost.file_syncs_per_commit"));
        let refused = std::panic::catch_unwind(|| cost_violation("oracle.get", "", ""));
        assert!(refused.is_err());
    }

    /// `CallCost::measure` charges a call with what it did, per file, and nothing done before it in the step.
    #[test]
    fn a_call_is_measured_per_file() {
        use env::{Env, File, OpenOptions};
        let env = SimEnv::new(5);
        env.create_dir_all(Path::new("/d")).expect("dir");
        let earlier = env.open(Path::new("/d/a"), OpenOptions::create_new()).expect("create");
        earlier.write_all_at(0, b"before").expect("write");
        let ((), call) = CallCost::measure(&env, || {
            earlier.write_all_at(6, b"during").expect("write");
            earlier.sync().expect("sync");
            env.sync_dir(Path::new("/d")).expect("sync dir");
        });
        let file = CostCounters { writes: 1, bytes_written: 6, file_syncs: 1, ..CostCounters::default() };
        let a = call.sum_where(|path| path == Path::new("/d/a"));
        assert_eq!(CostCounters { io_nanos: 0, ..a }, file, "the earlier open and write are not the call's");
        assert_eq!(call.sum_where(|path| path == Path::new("/d")).dir_syncs, 1);
        assert_eq!(call.files.len(), 2);
    }

    /// Tagged, externally tagged and unit variants all name their kind.
    #[test]
    fn step_kinds_come_from_serde() {
        #[derive(Serialize)]
        #[serde(tag = "op", rename_all = "snake_case")]
        enum Tagged {
            Put { key: u32 },
        }
        #[derive(Serialize)]
        #[serde(rename_all = "snake_case")]
        enum External {
            Flush,
            Scan { start: u32 },
        }
        assert_eq!(step_kind(&Tagged::Put { key: 1 }), "put");
        assert_eq!(step_kind(&External::Flush), "flush");
        assert_eq!(step_kind(&External::Scan { start: 1 }), "scan");
    }
}
