//! Many seeds, one summary: coverage summed over runs, failures listed, required coverage checked.

use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use env::random::keyed;
use env::{FaultKind, RealEnv, Watched};
use serde::{Deserialize, Serialize};

use crate::config::{ExplicitFaults, WorldConfig};
use crate::cost::CostReport;
use crate::runner::{
    Failure, Outcome, OutcomeOf, Progress, RunOptions, configure_for, publish_progress_to, run_target,
};
use crate::schedule::Schedule;
use crate::target::{Coverage, FailureKind, PROBE_COUNTER_PREFIX, SeedParallelism, Target, probe_counter};

/// The most seeds one swarm may run.
pub const SWARM_SEEDS_MAX: u64 = 1 << 40;
/// Seeds handed to the worker threads at a time, per job (outcomes are then folded in seed order).
pub const SEEDS_PER_JOB_BATCH_MAX: usize = 4;
/// The invariant of a seed the wall-clock watchdog gave up on (ADR-0098).
pub const STUCK_INVARIANT: &str = "liveness.stuck";
/// Stuck seeds one in-process swarm abandons before it stops: each leaves its thread running (spinning, perhaps)
/// until the process exits, so past this many the rest of the swarm would run on a machine they slow down.
pub const STUCK_SEEDS_MAX: usize = 16;

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
    /// The wall-clock watchdog (ADR-0098): a seed still running after this long fails as [`STUCK_INVARIANT`]
    /// and its thread is abandoned. `None`: no watchdog (a seed that never returns hangs the swarm).
    pub seed_timeout: Option<Duration>,
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
    /// Each cost per kind of step, when the runs recorded it (`--cost-report`, ADR-0183).
    #[serde(default, skip_serializing_if = "CostReport::is_empty")]
    pub cost_report: CostReport,
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
        self.cost_report.merge(&other.cost_report);
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
        if !outcome.cost_report.is_empty() {
            self.cost_report.merge(&outcome.cost_report);
            if let Some(cost) = &outcome.cost {
                self.cost_report.record_run(cost);
            }
        }
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
/// order. Under the watchdog (`options.seed_timeout`), a stuck seed's outcome carries a [`STUCK_INVARIANT`]
/// failure; after [`STUCK_SEEDS_MAX`] stuck seeds (after the first, for a target whose seeds share process-wide
/// state) the swarm stops, and the summary's `seeds_run` says how far it got.
pub fn run_swarm<T: Target>(options: &SwarmOptions, mut on_outcome: impl FnMut(&OutcomeOf<T>)) -> SwarmSummary {
    assert!(options.seeds.end - options.seeds.start <= SWARM_SEEDS_MAX, "swarm above SWARM_SEEDS_MAX seeds");
    // A target whose seeds share process-wide state runs them one at a time in-process (ADR-0050).
    let threads = T::PARALLELISM == SeedParallelism::Threads;
    let jobs = if threads { options.jobs.max(1) } else { 1 };
    let stuck_max = if threads { STUCK_SEEDS_MAX } else { 1 };
    let mut summary = SwarmSummary::for_target::<T>();
    let mut seeds = options.shard_seeds();
    let mut stuck = 0;
    loop {
        let batch: Vec<u64> = seeds.by_ref().take(jobs * SEEDS_PER_JOB_BATCH_MAX).collect();
        if batch.is_empty() {
            return summary;
        }
        let outcomes: Vec<Option<OutcomeOf<T>>> = match options.seed_timeout {
            None => RealEnv::map_parallel(jobs, batch, |seed| Some(timed_run::<T>(seed, &options.run))),
            Some(timeout) => watched_outcomes::<T>(jobs, batch, &options.run, timeout, stuck_max - stuck),
        };
        for outcome in outcomes {
            // Not run: the watchdog abandoned `stuck_max` threads.
            let Some(outcome) = outcome else { return summary };
            stuck += usize::from(outcome.failure.as_ref().is_some_and(|failure| failure.invariant == STUCK_INVARIANT));
            summary.add(&outcome, required_coverage::<T>(&outcome.schedule.world, &outcome.schedule.config));
            on_outcome(&outcome);
            if options.stop_on_failure && !outcome.passed() {
                return summary;
            }
        }
        if stuck >= stuck_max {
            return summary;
        }
    }
}

/// Run `seed`, measuring the CPU time of the thread that ran it.
fn timed_run<T: Target>(seed: u64, options: &RunOptions) -> OutcomeOf<T> {
    let started = RealEnv::thread_cpu_time();
    let mut outcome = run_target::<T>(seed, options);
    outcome.cpu_nanos = started
        .zip(RealEnv::thread_cpu_time())
        .map(|(start, end)| u64::try_from(end.saturating_sub(start).as_nanos()).unwrap_or(u64::MAX));
    outcome
}

/// Run `seeds` with `run` on `jobs` threads under the wall-clock watchdog ([`RealEnv::map_watched`]), each
/// seed publishing its progress: its outcome, or (stuck) its [`stuck_failure`], or (not run) nothing. Generic
/// over the configuration and operation types only, not the target: they are `'static`, as a detached thread
/// needs.
pub fn watched_runs<C, O>(
    run: fn(u64, &RunOptions) -> Outcome<C, O>,
    jobs: usize,
    seeds: Vec<u64>,
    options: &RunOptions,
    timeout: Duration,
    stuck_max: usize,
) -> Vec<Option<Result<Outcome<C, O>, Failure>>>
where
    C: Send + 'static,
    O: Send + 'static,
{
    let progress: Vec<Arc<Progress>> = seeds.iter().map(|_| Arc::default()).collect();
    let items: Vec<(u64, Arc<Progress>)> = seeds.iter().copied().zip(progress.iter().cloned()).collect();
    let shared = options.clone();
    let task = Arc::new(move |(seed, progress): (u64, Arc<Progress>)| {
        publish_progress_to(Some(progress));
        let outcome = run(seed, &shared);
        publish_progress_to(None);
        outcome
    });
    let watched = RealEnv::map_watched(jobs, items, timeout, stuck_max, task);
    let runs = watched.into_iter().zip(seeds.iter().zip(&progress));
    runs.map(|(watched, (&seed, progress))| match watched {
        Watched::Done(outcome) => Some(Ok(outcome)),
        Watched::Stuck { .. } => Some(Err(stuck_failure(seed, progress, timeout))),
        Watched::NotRun => None,
    })
    .collect()
}

/// The failure of a seed the watchdog gave up on, at the phase and step it reached. It says nothing of the time
/// the watchdog took to notice, so the summary stays the same for every `--jobs` and machine.
pub fn stuck_failure(seed: u64, progress: &Progress, timeout: Duration) -> Failure {
    let (phase, step) = progress.reached();
    Failure {
        seed,
        step,
        phase: phase.to_string(),
        invariant: STUCK_INVARIANT.to_string(),
        kind: FailureKind::Liveness,
        expected: format!("the seed finishes within the --seed-timeout of {} s (wall clock)", timeout.as_secs_f64()),
        actual: format!("still running at the timeout, in phase {phase} at step {step}; its thread was abandoned"),
        evidence: None,
        last_steps: Vec::new(),
    }
}

/// The outcome of a stuck seed: its failure, digest 0 (its run never ended), no coverage, and a schedule with
/// the seed's configuration but no steps (`--seed` replays it, not the schedule).
pub fn stuck_outcome<T: Target>(failure: Failure, options: &RunOptions) -> OutcomeOf<T> {
    let seed = failure.seed;
    let (world, config) = configure_for::<T>(seed, options).unwrap_or_else(|error| panic!("{error}"));
    Outcome {
        seed,
        steps_run: failure.step,
        failure: Some(failure),
        digest: 0,
        coverage: Coverage::default(),
        work_steps: 0,
        step_digests: Vec::new(),
        trace: Vec::new(),
        cpu_nanos: None,
        crash_image: None,
        crash_classes: Vec::new(),
        recorded_crash_shapes: Vec::new(),
        cost: None,
        cost_report: crate::cost::CostReport::default(),
        schedule: Schedule::new(T::NAME, seed, world, config),
    }
}

/// Run `seeds` of `T` under the watchdog: outcomes in seed order (stuck seeds' as [`stuck_outcome`]), `None` for
/// a seed not run.
pub fn watched_outcomes<T: Target>(
    jobs: usize,
    seeds: Vec<u64>,
    options: &RunOptions,
    timeout: Duration,
    stuck_max: usize,
) -> Vec<Option<OutcomeOf<T>>> {
    let runs = watched_runs(timed_run::<T>, jobs, seeds, options, timeout, stuck_max);
    let outcome =
        |run: Result<OutcomeOf<T>, Failure>| run.unwrap_or_else(|failure| stuck_outcome::<T>(failure, options));
    runs.into_iter().map(|run| run.map(outcome)).collect()
}

/// The required counters of `seed` without running it (for a child process that aborted).
pub fn required_for_seed<T: Target>(seed: u64, options: &RunOptions) -> Vec<String> {
    configure_for::<T>(seed, options).map(|(world, config)| required_coverage::<T>(&world, &config)).unwrap_or_default()
}
