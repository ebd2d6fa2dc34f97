//! Many seeds, one summary: coverage summed over runs, failures listed, required coverage checked.

use std::collections::BTreeSet;
use std::ops::Range;

use env::FaultKind;
use serde::{Deserialize, Serialize};

use crate::config::{ExplicitFaults, WorldConfig};
use crate::runner::{Failure, Outcome, OutcomeOf, RunOptions, configure, run_target};
use crate::target::{Coverage, Target};

/// The most seeds one swarm may run.
pub const SWARM_SEEDS_MAX: u64 = 1 << 40;

/// Which seeds to run and how.
#[derive(Clone, Debug)]
pub struct SwarmOptions {
    /// Seeds `start..end`.
    pub seeds: Range<u64>,
    /// `(index, count)`: run only seeds with `seed % count == index`.
    pub shard: Option<(u64, u64)>,
    /// Stop at the first failing seed.
    pub stop_on_failure: bool,
    pub run: RunOptions,
}

impl SwarmOptions {
    /// The seeds this shard runs, in order.
    pub fn shard_seeds(&self) -> impl Iterator<Item = u64> + '_ {
        let (index, count) = self.shard.unwrap_or((0, 1));
        assert!(count > 0 && index < count, "shard {index}/{count} is not valid");
        self.seeds.clone().filter(move |seed| seed % count == index)
    }
}

/// What a swarm found. Serializable, so shards can be merged.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SwarmSummary {
    pub seeds_run: u64,
    pub seeds_passed: u64,
    pub failures: Vec<Failure>,
    /// Counters summed over every run.
    pub coverage: Coverage,
    /// Counters that some run's configuration requires above zero.
    pub required: BTreeSet<String>,
}

impl SwarmSummary {
    /// Required counters still at zero.
    pub fn missing_coverage(&self) -> Vec<String> {
        let missing: Vec<String> = self.required.iter().filter(|name| self.coverage.get(name) == 0).cloned().collect();
        debug_assert!(missing.len() <= self.required.len());
        missing
    }

    /// Fold another shard's summary into this one.
    pub fn merge(&mut self, other: &SwarmSummary) {
        self.seeds_run += other.seeds_run;
        self.seeds_passed += other.seeds_passed;
        self.failures.extend(other.failures.iter().cloned());
        self.failures.sort_by_key(|failure| failure.seed);
        self.coverage.merge(&other.coverage);
        self.required.extend(other.required.iter().cloned());
        assert!(self.seeds_passed <= self.seeds_run, "more seeds passed than ran");
    }

    /// Add one run.
    pub fn add<C, O>(&mut self, outcome: &Outcome<C, O>, required: Vec<String>) {
        self.seeds_run += 1;
        match &outcome.failure {
            None => self.seeds_passed += 1,
            Some(failure) => self.failures.push(failure.clone()),
        }
        self.coverage.merge(&outcome.coverage);
        self.required.extend(required);
        assert!(self.seeds_passed <= self.seeds_run, "more seeds passed than ran");
    }
}

/// The counters a run with this world requires above zero: the framework's (enabled fault kinds, explicit
/// faults, crash effects (dropped namespace operations only where [`Target::NAMESPACE_CRASHES`]), crashes inside
/// recovery, BUGGIFY), then the target's own.
pub fn required_coverage<T: Target>(world: &WorldConfig, config: &T::Config) -> Vec<String> {
    let mut names: Vec<String> = world.enabled_fault_kinds().iter().map(|kind| fault_counter(*kind)).collect();
    if world.weights.fault > 0 {
        names.extend([FaultKind::ExplicitSyncError, FaultKind::ExplicitWriteError].map(fault_counter));
        if world.explicit == ExplicitFaults::All {
            names.push(fault_counter(FaultKind::ExplicitCorruption));
        }
    }
    if world.weights.crashes() {
        names.extend([FaultKind::CrashDroppedWrite, FaultKind::CrashTornWrite].map(fault_counter));
        if T::NAMESPACE_CRASHES {
            names.push(fault_counter(FaultKind::CrashDroppedMetadata));
        }
    }
    if world.weights.crash_at_io + world.weights.crash_during_recovery > 0 {
        names.push("crash.during_recovery".into());
    }
    if world.buggify {
        names.extend(["buggify.sites_hit", "buggify.fires"].map(String::from));
    }
    names.extend(T::required_coverage(world, config));
    names
}

fn fault_counter(kind: FaultKind) -> String {
    format!("fault.{}", kind.name())
}

/// Run every seed of the shard against `T`, calling `on_outcome` after each.
pub fn run_swarm<T: Target>(options: &SwarmOptions, mut on_outcome: impl FnMut(&OutcomeOf<T>)) -> SwarmSummary {
    assert!(options.seeds.end - options.seeds.start <= SWARM_SEEDS_MAX, "swarm above SWARM_SEEDS_MAX seeds");
    let mut summary = SwarmSummary::default();
    for seed in options.shard_seeds() {
        let outcome = run_target::<T>(seed, &options.run);
        summary.add(&outcome, required_coverage::<T>(&outcome.schedule.world, &outcome.schedule.config));
        on_outcome(&outcome);
        if options.stop_on_failure && !outcome.passed() {
            break;
        }
    }
    summary
}

/// The required counters of `seed` without running it (for a child process that aborted).
pub fn required_for_seed<T: Target>(seed: u64, options: &RunOptions) -> Vec<String> {
    configure::<T>(seed, options.profile)
        .map(|(world, config)| required_coverage::<T>(&world, &config))
        .unwrap_or_default()
}
