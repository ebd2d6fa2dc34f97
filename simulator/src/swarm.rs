//! Many seeds, one summary: coverage summed over runs, failures listed, required coverage checked.

use std::collections::BTreeSet;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::runner::{Failure, Outcome, RunOptions, run_target};
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
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    pub fn add<S>(&mut self, outcome: &Outcome<S>, required: Vec<String>) {
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

/// Run every seed of the shard against `T`, calling `on_outcome` after each.
pub fn run_swarm<T: Target>(options: &SwarmOptions, mut on_outcome: impl FnMut(&Outcome<T::Step>)) -> SwarmSummary {
    assert!(options.seeds.end - options.seeds.start <= SWARM_SEEDS_MAX, "swarm above SWARM_SEEDS_MAX seeds");
    let mut summary = SwarmSummary::default();
    for seed in options.shard_seeds() {
        let outcome = run_target::<T>(seed, &options.run);
        let config = options.run.config.clone().unwrap_or_else(|| T::swarm_config(seed, &options.run));
        summary.add(&outcome, T::required_coverage(&config));
        on_outcome(&outcome);
        if options.stop_on_failure && !outcome.passed() {
            break;
        }
    }
    summary
}
