//! Many seeds, one summary: coverage summed over runs, failures listed, required coverage checked.

use std::collections::BTreeSet;
use std::ops::Range;

use env::random::keyed;
use env::{FaultKind, RealEnv};
use serde::{Deserialize, Serialize};

use crate::config::{ExplicitFaults, WorldConfig};
use crate::runner::{Failure, Outcome, OutcomeOf, RunOptions, configure_for, run_target};
use crate::target::{Coverage, PROBE_COUNTER_PREFIX, SeedParallelism, Target, probe_counter};

/// The most seeds one swarm may run.
pub const SWARM_SEEDS_MAX: u64 = 1 << 40;
/// Seeds handed to the worker threads at a time, per job (outcomes are then folded in seed order).
pub const SEEDS_PER_JOB_BATCH_MAX: usize = 4;

/// Which seeds to run and how.
#[derive(Clone, Debug)]
pub struct SwarmOptions {
    /// Seeds `start..end`.
    pub seeds: Range<u64>,
    /// `(index, count)`: run only seeds with `seed % count == index`.
    pub shard: Option<(u64, u64)>,
    /// Stop at the first failing seed.
    pub stop_on_failure: bool,
    /// Seeds run in parallel, each on its own OS thread with its own world (1: in this thread). The summary,
    /// the failure list and the digest do not depend on it.
    pub jobs: usize,
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
    /// The probes the system under test declares ([`Target::probes`]); hits are the `probe.<name>` counters.
    #[serde(default)]
    pub declared_probes: BTreeSet<String>,
    /// The swarm's digest: the wrapping sum of `keyed(seed, run digest)` over its seeds, so the digests of
    /// shards add up to the unsharded swarm's, whatever the order or the number of jobs.
    #[serde(with = "hex_digest")]
    pub digest: u64,
}

/// The swarm digest as 16 hex digits in JSON.
mod hex_digest {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(digest: &u64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format!("{digest:016x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        let text = String::deserialize(deserializer)?;
        u64::from_str_radix(&text, 16).map_err(serde::de::Error::custom)
    }
}

/// One seed's share of a swarm digest.
pub fn seed_digest(seed: u64, run_digest: u64) -> u64 {
    keyed(&[seed, run_digest])
}

impl SwarmSummary {
    /// An empty summary for a swarm of `T`: no seeds yet, `T`'s declared probes.
    pub fn for_target<T: Target>() -> Self {
        let declared_probes = T::probes().into_iter().map(String::from).collect();
        Self { declared_probes, ..Self::default() }
    }

    /// Declared probes some seed hit, sorted.
    pub fn probes_hit(&self) -> Vec<String> {
        self.declared_probes.iter().filter(|name| self.coverage.get(&probe_counter(name)) > 0).cloned().collect()
    }

    /// Declared probes no seed hit, sorted: the rare paths this swarm never reached.
    pub fn probes_never_hit(&self) -> Vec<String> {
        self.declared_probes.iter().filter(|name| self.coverage.get(&probe_counter(name)) == 0).cloned().collect()
    }

    /// Probes hit that the target does not declare, sorted (its declared list is out of date).
    pub fn probes_undeclared(&self) -> Vec<String> {
        let hit = self.coverage.counters.keys().filter_map(|counter| counter.strip_prefix(PROBE_COUNTER_PREFIX));
        hit.filter(|name| !self.declared_probes.contains(*name)).map(String::from).collect()
    }

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
        self.declared_probes.extend(other.declared_probes.iter().cloned());
        self.digest = self.digest.wrapping_add(other.digest);
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
        self.digest = self.digest.wrapping_add(seed_digest(outcome.seed, outcome.digest));
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
    if world.weights.tamper > 0 {
        names.extend(["tamper", "tamper.refused"].map(String::from));
    }
    names.extend(T::required_coverage(world, config));
    names
}

fn fault_counter(kind: FaultKind) -> String {
    format!("fault.{}", kind.name())
}

/// Run every seed of the shard against `T` on `options.jobs` threads, calling `on_outcome` after each in seed
/// order.
pub fn run_swarm<T: Target>(options: &SwarmOptions, mut on_outcome: impl FnMut(&OutcomeOf<T>)) -> SwarmSummary {
    assert!(options.seeds.end - options.seeds.start <= SWARM_SEEDS_MAX, "swarm above SWARM_SEEDS_MAX seeds");
    // A target whose seeds share process-wide state runs them one at a time in-process (ADR-0050).
    let jobs = if T::PARALLELISM == SeedParallelism::Threads { options.jobs.max(1) } else { 1 };
    let mut summary = SwarmSummary::for_target::<T>();
    let mut seeds = options.shard_seeds();
    loop {
        let batch: Vec<u64> = seeds.by_ref().take(jobs * SEEDS_PER_JOB_BATCH_MAX).collect();
        if batch.is_empty() {
            return summary;
        }
        let outcomes = RealEnv::map_parallel(jobs, batch, |seed| {
            let started = RealEnv::thread_cpu_time();
            let mut outcome = run_target::<T>(seed, &options.run);
            outcome.cpu_nanos = started
                .zip(RealEnv::thread_cpu_time())
                .map(|(start, end)| u64::try_from(end.saturating_sub(start).as_nanos()).unwrap_or(u64::MAX));
            outcome
        });
        for outcome in outcomes {
            summary.add(&outcome, required_coverage::<T>(&outcome.schedule.world, &outcome.schedule.config));
            on_outcome(&outcome);
            if options.stop_on_failure && !outcome.passed() {
                return summary;
            }
        }
    }
}

/// The required counters of `seed` without running it (for a child process that aborted).
pub fn required_for_seed<T: Target>(seed: u64, options: &RunOptions) -> Vec<String> {
    configure_for::<T>(seed, options).map(|(world, config)| required_coverage::<T>(&world, &config)).unwrap_or_default()
}
