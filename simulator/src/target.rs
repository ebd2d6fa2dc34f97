//! The seam between the generic simulator core and a system under test.
//!
//! **Boundary:** the core ([`crate::runner`]) owns the world (`SimEnv`), the workload stream, the step loop, the
//! digest, the failure report and the swarm; a [`Target`] owns its step type, how steps are generated, how each is
//! applied and checked, how the system crashes and recovers, and what "done and healthy" means.

use std::collections::BTreeMap;
use std::fmt::{self, Debug};

use std::hash::Hasher;

use env::{DeterministicRng, ExplicitFault, FaultKind, SimEnv, StableHasher};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::config::SwarmConfig;
use crate::runner::RunOptions;

/// A value that folds itself into a run's digest. Must be stable across processes and machines: write integers
/// and bytes explicitly, never through `derive(Hash)` of types whose layout may change.
pub trait Digest {
    /// Feed this value into `hasher`.
    fn digest_into(&self, hasher: &mut StableHasher);
}

/// Feed `words` into `hasher`, in order (the digest encoding every target's steps and observations share).
pub fn digest_words(hasher: &mut StableHasher, words: &[u64]) {
    for &word in words {
        hasher.write_u64(word);
    }
}

/// Feed a variant `tag` and then `text`'s bytes.
pub fn digest_text(hasher: &mut StableHasher, tag: u64, text: &str) {
    hasher.write_u64(tag);
    hasher.write(text.as_bytes());
}

/// Feed an explicit fault under a step's variant `tag`: the same encoding in every target.
pub fn digest_fault(hasher: &mut StableHasher, tag: u64, fault: &ExplicitFault) {
    let (code, path, offset) = match fault {
        ExplicitFault::FailNextSync { path } => (1, path, 0),
        ExplicitFault::FailNextWrite { path } => (2, path, 0),
        ExplicitFault::FlipBit { path, offset } => (3, path, *offset),
    };
    digest_words(hasher, &[tag, code, offset]);
    hasher.write(path.as_os_str().as_encoded_bytes());
}

/// What a target reports about one applied step.
pub trait Observation: Clone + Debug + Serialize + Digest {
    /// True when the step did no work (skipped, armed a crash, injected a fault): it does not count as a step in
    /// `--bench`.
    fn is_idle(&self) -> bool;
}

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
        };
        f.write_str(name)
    }
}

/// An invariant that did not hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// A short stable name, e.g. `oracle_get`, `no_resurrection`, `sequence_monotonic`.
    pub invariant: String,
    pub kind: FailureKind,
    pub expected: String,
    pub actual: String,
}

impl Violation {
    /// A violation of `invariant`.
    pub fn new(
        invariant: impl Into<String>,
        kind: FailureKind,
        expected: impl Into<String>,
        actual: impl Into<String>,
    ) -> Self {
        let violation = Self { invariant: invariant.into(), kind, expected: expected.into(), actual: actual.into() };
        assert!(!violation.invariant.is_empty(), "a violation needs an invariant name");
        violation
    }
}

/// Counters of what a run exercised, by stable name (`fault.fsync_error`, `crash.mid_flush`, `flushes`, ...).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Coverage {
    pub counters: BTreeMap<String, u64>,
}

impl Coverage {
    /// Add `count` to counter `name`.
    pub fn add(&mut self, name: &str, count: u64) {
        let slot = self.counters.entry(name.to_string()).or_insert(0);
        *slot = slot.saturating_add(count);
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

/// Which faults a target has accounted for: each poll returns the kinds that fired since the last one, read from
/// the world's fault counters (targets turn them into their own weakening flags).
#[derive(Clone, Debug, Default)]
pub struct FaultTracker {
    seen: BTreeMap<FaultKind, u64>,
    total: u64,
}

impl FaultTracker {
    /// The kinds that fired since the last poll, each once, in `FaultKind` order.
    pub fn poll(&mut self, env: &SimEnv) -> Vec<FaultKind> {
        let counts = env.fault_counts();
        let total: u64 = counts.values().sum();
        if total == self.total {
            return Vec::new();
        }
        assert!(total > self.total, "fault counters went backwards");
        let fired: Vec<FaultKind> = counts
            .iter()
            .filter(|&(kind, &count)| count > self.seen.get(kind).copied().unwrap_or(0))
            .map(|(&kind, _)| kind)
            .collect();
        assert!(!fired.is_empty(), "the total grew but no kind did");
        self.seen = counts;
        self.total = total;
        fired
    }

    /// Faults seen so far, all kinds together.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Has a fault of `kind` been seen?
    pub fn has_seen(&self, kind: FaultKind) -> bool {
        self.seen.contains_key(&kind)
    }
}

/// A system under test, driven step by step on a [`SimEnv`].
///
/// The core calls, in order: [`Target::open`]; then per step [`Target::generate`] (only when generating, never on
/// replay), [`Target::apply`] and [`Target::check`]; then [`Target::finish`] (liveness) and
/// [`Target::crash_recover`] (a final power cut: everything acknowledged must survive); then
/// [`Target::coverage`].
pub trait Target: Sized {
    /// The name recorded in schedules (`"engine"`).
    const NAME: &'static str;
    /// One step of a schedule. Must carry all its data: replay never consults the generating RNG.
    type Step: Clone + Debug + Serialize + DeserializeOwned + Digest;
    /// What applying a step produced.
    type Observation: Observation;

    /// Start the system on a fresh world.
    fn open(env: SimEnv, config: &SwarmConfig) -> Result<Self, Violation>;

    /// The next step, drawn from the workload stream; may look at the current state (files, runnable tasks) so
    /// that the step it returns is concrete.
    fn generate(&mut self, rng: &mut DeterministicRng, config: &SwarmConfig) -> Self::Step;

    /// Apply one step and check every invariant it touches. Steps whose precondition is gone are skipped.
    fn apply(&mut self, step: &Self::Step) -> Result<Self::Observation, Violation>;

    /// Cheap invariants that must hold after every step.
    fn check(&mut self) -> Result<(), Violation>;

    /// Cut the power, recover, and verify durability of everything acknowledged.
    fn crash_recover(&mut self) -> Result<(), Violation>;

    /// The liveness phase: heal every fault, drain background work, verify everything.
    fn finish(&mut self) -> Result<(), Violation>;

    /// What this run exercised.
    fn coverage(&self) -> Coverage;

    /// Counters that a swarm containing this configuration must see above zero (`--require-coverage`).
    fn required_coverage(config: &SwarmConfig) -> Vec<String>;

    /// The configuration a generated run of `seed` uses (when `options.config` does not override it). Targets with
    /// fault profiles read `options.fault_profile`.
    fn swarm_config(seed: u64, options: &RunOptions) -> SwarmConfig {
        assert!(options.fault_profile.is_none(), "target {} has no fault profiles", Self::NAME);
        SwarmConfig::from_seed(seed)
    }
}
