//! The seam between the framework and a system under test: the [`Target`] trait, and the values that cross it
//! ([`Violation`], [`SystemError`], [`FaultSite`], [`Coverage`]).
//!
//! **Boundary:** the framework owns the world (`SimEnv`), the schedule, every world step (crash now, crash at the
//! k-th IO, crash during recovery, explicit faults, reopen, background tasks), the rules for which errors a fault
//! excuses (ADR-0010), recovery and liveness sequencing, the digest, shrinking and the CLI. A [`Target`] owns
//! what only it knows: how to open its system on an `Env`, its own operations and their checks, its model, and
//! what "healthy once faults heal" means.

use std::collections::BTreeMap;
use std::fmt::{self, Debug};
use std::path::{Path, PathBuf};

use env::{DeterministicRng, Op, SimEnv};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::config::{FaultMenu, FaultProfile, WorldConfig};
use crate::cost::StepCost;
use crate::runner::Failure;
use crate::step::{Observed, Step};
use crate::world::World;

/// Which class of invariant failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// A read disagreed with the model of acknowledged state.
    Safety,
    /// Acknowledged data was lost, or recovery failed, after a crash.
    Durability,
    /// The system's own structural check failed.
    Structural,
    /// An operation failed with no fault to justify it.
    UnexpectedError,
    /// The system did not converge once faults were healed.
    Liveness,
    /// The system (or the target) panicked.
    Panic,
    /// The run could not start (bad configuration or schedule).
    Setup,
    /// A `cost.*` invariant: the system did more work than its design allows (ADR-0182).
    Cost,
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            FailureKind::Safety => "safety",
            FailureKind::Durability => "durability",
            FailureKind::Structural => "structural",
            FailureKind::UnexpectedError => "unexpected_error",
            FailureKind::Liveness => "liveness",
            FailureKind::Panic => "panic",
            FailureKind::Setup => "setup",
            FailureKind::Cost => "cost",
        };
        f.write_str(name)
    }
}

/// An invariant that did not hold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    /// A short stable name, e.g. `oracle.get`, `durability.read`, `serializable`.
    pub invariant: String,
    pub kind: FailureKind,
    pub expected: String,
    pub actual: String,
    /// Structured evidence a target's failure renderer reads back as a value (a dependency cycle, say); never
    /// parsed out of `actual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<serde_json::Value>,
}

impl Violation {
    /// A violation of `invariant`.
    pub fn new(
        invariant: impl Into<String>,
        kind: FailureKind,
        expected: impl Into<String>,
        actual: impl Into<String>,
    ) -> Self {
        let violation = Self {
            invariant: invariant.into(),
            kind,
            expected: expected.into(),
            actual: actual.into(),
            evidence: None,
        };
        assert!(!violation.invariant.is_empty(), "a violation needs an invariant name");
        violation
    }

    /// The same violation carrying `evidence` (any serializable value; see [`Target::render_failure`]).
    pub fn with_evidence(mut self, evidence: &impl Serialize) -> Self {
        self.evidence = Some(serde_json::to_value(evidence).expect("evidence serializes"));
        self
    }
}

/// An error the system under test returned, as the framework's fault rules need to see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemError {
    /// A short stable class for observations and digests (`io_write`, `no_space`, `corruption`, `closed`).
    pub class: String,
    /// The system reports damaged bytes. Only a fault that corrupts what is read, or data damage, excuses this
    /// (ADR-0010); a write or sync error never does.
    pub corruption: bool,
    /// The error's full text, for reports.
    pub message: String,
    /// The file the error names, if it names one (a corruption error names the damaged or missing file): a
    /// hostile-operator tamper excuses a refusal that names the tampered file (ADR-0077).
    pub file: Option<std::path::PathBuf>,
}

impl SystemError {
    /// An error that does not claim corruption.
    pub fn new(class: impl Into<String>, message: impl fmt::Display) -> Self {
        Self { class: class.into(), corruption: false, message: message.to_string(), file: None }
    }

    /// An error that reports corrupt bytes.
    pub fn corruption(class: impl Into<String>, message: impl fmt::Display) -> Self {
        Self { class: class.into(), corruption: true, message: message.to_string(), file: None }
    }

    /// The error names `file`.
    pub fn naming(mut self, file: impl Into<std::path::PathBuf>) -> Self {
        self.file = Some(file.into());
        self
    }
}

impl fmt::Display for SystemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A file an explicit fault step may hit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultSite {
    pub path: PathBuf,
    pub len_bytes: u64,
    /// A bit flip may land here (the target can recover from a flipped bit in this file with a typed error).
    pub flippable: bool,
}

/// Counters of what a run exercised, by stable name (`fault.fsync_error`, `crash.mid_flush`, `flushes`, ...).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Coverage {
    pub counters: BTreeMap<String, u64>,
}

impl Coverage {
    /// Add `count` to counter `name`. A counter already there is found by `&str`, with no `String` made: the
    /// engine target counts every key it verifies in a damaged run (ADR-0137).
    pub fn add(&mut self, name: &str, count: u64) {
        if let Some(slot) = self.counters.get_mut(name) {
            *slot = slot.saturating_add(count);
        } else {
            self.counters.insert(name.to_string(), count);
        }
    }

    /// The value of counter `name` (0 if never counted).
    pub fn get(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    /// Add every counter of `other` into this one.
    pub fn merge(&mut self, other: &Coverage) {
        for (name, &count) in &other.counters {
            self.add(name, count);
        }
    }
}

/// The prefix of the coverage counters of probe hits.
pub const PROBE_COUNTER_PREFIX: &str = "probe.";

/// The coverage counter of probe `name`: `probe.<name>` (`probe.wal.torn_tail_truncated`).
pub fn probe_counter(name: &str) -> String {
    format!("{PROBE_COUNTER_PREFIX}{name}")
}

/// A rendering of a failure a target offers (`--dot FILE` writes [`Rendering::text`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendering {
    /// What it is, for the message (`the dependency cycle`).
    pub what: String,
    pub text: String,
}

/// How a target's seeds may run side by side in a swarm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeedParallelism {
    /// On threads of one process, each seed in its own world (the default).
    Threads,
    /// Each seed in its own child process (a system with process-wide state, such as a C library's PRNG or a
    /// global registry): `--isolate` is implied, and in-process swarms run one seed at a time.
    ChildProcesses,
    /// One seed at a time, in this process.
    OneAtATime,
}

/// A system under test, driven step by step on a [`SimEnv`].
///
/// The framework calls, per run: [`Target::configure`] once (generation only; replays read the configuration
/// from the schedule), [`Target::new_in_world`] (by default [`Target::new`]), then [`Target::open`] (retried while a fault excuses the error); per step
/// [`Target::generate`] (generation only) and [`Target::apply`] for the target's own operations — world steps are
/// the framework's — and [`Target::check`] after every step; after every crash or reopen, [`Target::drop_system`],
/// [`Target::open`] and [`Target::recovered`]; at the end, faults healed, [`Target::healthy`]; then a final power
/// cut and one more [`Target::recovered`].
///
/// Everything but the lifecycle and the operations has a default. `Op` and `Observation` digest through their
/// serde encoding ([`crate::digest`]): no digest code to write.
pub trait Target: Sized {
    /// The name recorded in schedules and seed files, and given to `--target`.
    const NAME: &'static str;
    /// One paragraph for `--help`: what this target runs and checks.
    const ABOUT: &'static str = "";
    /// Saved findings expect `fail`: the bug is in a system we do not maintain, so a seed pins the behaviour
    /// instead of waiting for a fix (ADR-0038).
    const FINDINGS_EXPECT_FAIL: bool = false;
    /// Where this target's seed files live, relative to the seeds directory (`""`: the directory itself).
    const SEEDS_SUBDIR: &'static str = "";
    /// Whether seeds may run on threads side by side (`--jobs`), or need child processes or one at a time.
    const PARALLELISM: SeedParallelism = SeedParallelism::Threads;
    /// The system creates, renames or removes files as it runs, so a crash can drop a namespace operation:
    /// `fault.crash_dropped_metadata` is then required coverage of a swarm with crashes. False for a system on one
    /// file whose creation the target makes durable before the system sees it (redb).
    const NAMESPACE_CRASHES: bool = true;

    /// The target's own configuration: derived from the seed once, stored in every schedule, shrinkable.
    type Config: Clone + Debug + PartialEq + Send + Sync + Serialize + DeserializeOwned + 'static;
    /// One of the target's own operations. Must carry all its data: replay never consults the generating RNG.
    type Op: Clone + Debug + PartialEq + Send + Serialize + DeserializeOwned + 'static;
    /// What applying an operation (or verifying after a recovery) produced.
    type Observation: Clone + Debug + Serialize;

    /// The faults a profile allows on this target's world; `None` when the target has no such profile.
    fn fault_menu(profile: FaultProfile) -> Option<FaultMenu> {
        (profile == FaultProfile::Assumed).then(FaultMenu::standard)
    }

    /// The configuration of `seed` in `world`: a pure function (draw from `DeterministicRng::stream(seed, ..)`).
    fn configure(seed: u64, world: &WorldConfig) -> Self::Config;

    /// Check a configuration read from a file (schedules may be edited by hand).
    fn validate_config(_config: &Self::Config) -> Result<(), String> {
        Ok(())
    }

    /// The target's state before its system first opens: its model, counters, nothing open.
    fn new(env: &SimEnv, config: &Self::Config) -> Self;

    /// [`Target::new`] for a target whose system depends on the world it runs in: its fault profile, its disk
    /// model (`world.profile`, `world.disk`). The framework calls this one; the default calls [`Target::new`].
    /// Keep what [`Target::open`] derives from them (open the system with directory syncs where names are not
    /// durable, say) in `Self`, not in [`Target::Config`], which the shrinker simplifies: the profile and the disk
    /// model are never shrunk (ADR-0117).
    fn new_in_world(env: &SimEnv, config: &Self::Config, _world: &WorldConfig) -> Self {
        Self::new(env, config)
    }

    /// Open (and recover) the system on `env`. Called only when it is not open.
    fn open(&mut self, env: &SimEnv) -> Result<(), SystemError>;

    /// Close the system cleanly (a `reopen` step, and before the liveness phase). Handles are dropped after. The
    /// default does nothing: a system whose every acknowledged write is already durable needs no shutdown.
    fn close(&mut self) -> Result<(), SystemError> {
        Ok(())
    }

    /// Forget every handle into the system (a power cut happened, or a reopen follows). Avoid IO here; after a
    /// power cut the world is halted and any IO fails harmlessly (redb, which writes when a handle drops, relies
    /// on that).
    fn drop_system(&mut self);

    /// Is the system open?
    fn is_open(&self) -> bool;

    /// After every successful open: verify what must have survived (the durability checks), resolve in-flight
    /// work, and report what was found.
    fn recovered(&mut self, world: &mut World) -> Result<Self::Observation, Violation>;

    /// The next operation, drawn from `rng`; may look at the current state so that the step is concrete.
    fn generate(&mut self, world: &World, rng: &mut DeterministicRng, config: &Self::Config) -> Self::Op;

    /// Apply one operation (the system is open) and check what it touches. Errors go through
    /// [`World::tolerate`]; an operation whose precondition is gone returns [`Observed::Skipped`].
    fn apply(&mut self, world: &mut World, op: &Self::Op) -> Result<Observed<Self::Observation>, Violation>;

    /// Invariants that must hold after every step (`last` is the step's observation; `None` in the finale).
    fn check(&mut self, _world: &mut World, _last: Option<&Observed<Self::Observation>>) -> Result<(), Violation> {
        Ok(())
    }

    /// The target's cost contract (ADR-0182): `cost.*` invariants on the IO the world counted, checked after every
    /// step, after [`Target::check`], with what the step cost, and once more at the end of the run (`cost.step`
    /// `None`). Return a [`crate::cost::cost_violation`]: its kind is [`FailureKind::Cost`], so the shrinker keeps
    /// the same cost invariant and `--save` pins it. Per-file figures: `world.env().step_files()`; the whole run:
    /// `world.env().cost()`. The default checks nothing.
    fn check_cost(
        &mut self,
        _world: &mut World,
        _cost: &StepCost<'_, Self::Op, Self::Observation>,
    ) -> Result<(), Violation> {
        Ok(())
    }

    /// The names of the `cost.*` invariants [`Target::check_cost`] checks, for `--help` and the cost report.
    fn cost_invariants() -> Vec<&'static str> {
        Vec::new()
    }

    /// The liveness phase, faults healed and the system freshly opened: background work drains, everything
    /// verifies. [`World::give_up`] records a damaged run that cannot get healthy.
    fn healthy(&mut self, world: &mut World) -> Result<(), Violation>;

    /// Files an explicit fault step may hit (none: no explicit faults for this target).
    fn fault_sites(&self, _env: &SimEnv) -> Vec<FaultSite> {
        Vec::new()
    }

    /// Files the system cannot open without, with the system closed: a hostile-operator `tamper` step deletes or
    /// renames one and the open must refuse with a corruption error naming it ([`SystemError::file`]). Called
    /// after [`Target::close`]. None (the default): no tamper steps for this target (ADR-0077).
    fn tamper_sites(&self, _env: &SimEnv) -> Vec<std::path::PathBuf> {
        Vec::new()
    }

    /// Coverage names for where an armed crash landed: `step` was running (`None`: inside an open), cut at `io`
    /// on `path`. Names start with `crash.`.
    fn crash_places(&self, _step: Option<&Step<Self::Op>>, _io: Op, _path: &Path) -> Vec<&'static str> {
        Vec::new()
    }

    /// Did this observation do no work (counts as idle in `--bench`)?
    fn is_idle(_observation: &Self::Observation) -> bool {
        false
    }

    /// Add the target's own counters.
    fn coverage(&self, _coverage: &mut Coverage) {}

    /// Counters a swarm containing this configuration must see above zero, beyond the framework's own.
    fn required_coverage(_world: &WorldConfig, _config: &Self::Config) -> Vec<String> {
        Vec::new()
    }

    /// The probes (`env::probe!`) the system under test declares: every rare path it marks. A swarm summary
    /// reports how many of them some seed hit and lists the others (`probes: H of D hit`); `--require-probes`
    /// makes a never-hit probe missing coverage. Hits are counted whether declared or not (`probe.<name>`).
    fn probes() -> Vec<&'static str> {
        Vec::new()
    }

    /// The planted bugs this build can turn on (`--canary`).
    fn canaries() -> Vec<&'static str> {
        Vec::new()
    }

    /// Turn a canary on (`Some`) or off (`None`) for this thread.
    fn set_canary(name: Option<&str>) -> Result<(), String> {
        match name {
            None => Ok(()),
            Some(name) => Err(format!("target {} has no canary {name:?} in this build", Self::NAME)),
        }
    }

    /// Simpler variants of one operation for the shrinker (each only a candidate).
    fn simplify_op(_op: &Self::Op) -> Vec<Self::Op> {
        Vec::new()
    }

    /// Simpler variants of the configuration for the shrinker.
    fn simplify_config(_config: &Self::Config) -> Vec<Self::Config> {
        Vec::new()
    }

    /// Whole-schedule rewrites for the shrinker (renumber keys, drop every step of a kind, ...).
    fn rewrite(_steps: &[Step<Self::Op>]) -> Vec<Vec<Step<Self::Op>>> {
        Vec::new()
    }

    /// Steps that must go when step `index` goes (a transaction's operations with its begin).
    fn dependents(_steps: &[Step<Self::Op>], _index: usize) -> Vec<usize> {
        Vec::new()
    }

    /// Seeds whose system may abort the process run in child processes unless told otherwise.
    fn isolate_by_default(_profile: FaultProfile) -> bool {
        false
    }

    /// A rendering of a failure for `--dot FILE` (from [`Violation::evidence`]), when the target has one.
    fn render_failure(_failure: &Failure) -> Option<Rendering> {
        None
    }

    /// The configuration as printed at the start of a run.
    fn describe(config: &Self::Config) -> String {
        serde_json::to_string(config).unwrap_or_else(|error| format!("<unprintable: {error}>"))
    }
}

#[cfg(test)]
mod tests {
    use super::Coverage;

    /// `add` creates a counter on first sight and sums afterwards (saturating); `merge` adds counter by counter.
    #[test]
    fn coverage_adds_new_and_existing_counters() {
        let mut coverage = Coverage::default();
        coverage.add("damage.exact_reads", 2);
        coverage.add("damage.exact_reads", 3);
        coverage.add("flushes", 0);
        assert_eq!((coverage.get("damage.exact_reads"), coverage.get("flushes")), (5, 0));
        assert_eq!(coverage.counters.len(), 2, "a zero count still names its counter");
        coverage.add("damage.exact_reads", u64::MAX);
        assert_eq!(coverage.get("damage.exact_reads"), u64::MAX, "saturates");
        let mut total = Coverage::default();
        total.add("flushes", 4);
        total.merge(&coverage);
        assert_eq!((total.get("flushes"), total.get("damage.exact_reads"), total.get("none")), (4, u64::MAX, 0));
    }
}
