//! The generic step loop: build the world, generate or replay steps, apply and check each, run the liveness phase
//! and a final crash, and fold everything into a digest and an [`Outcome`].

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::hash::Hasher;
use std::panic::{AssertUnwindSafe, catch_unwind};

use env::{DeterministicRng, SimEnv, StableHasher};
use serde::{Deserialize, Serialize};

use crate::config::SwarmConfig;
use crate::schedule::Schedule;
use crate::target::{Coverage, Digest, FailureKind, Observation, Target, Violation};

/// The most steps one run may have.
pub const STEPS_MAX: u64 = 100_000_000;
/// The most history entries a failure report keeps.
pub const HISTORY_STEPS_MAX: usize = 1000;

/// How to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// Steps to generate (ignored on replay: a schedule runs all its steps).
    pub steps: u64,
    /// How many of the last steps a failure report shows.
    pub history_steps: usize,
    /// Keep the running digest after every step (for `--check-determinism`).
    pub record_step_digests: bool,
    /// Keep one JSON line per step (for `--trace`).
    pub record_trace: bool,
    /// Use this configuration instead of the seed's swarm configuration (generation only).
    pub config: Option<SwarmConfig>,
    /// Turn this planted bug on for the run (needs the `canaries` feature; ADR-0020).
    pub canary: Option<String>,
    /// The fault profile of a target that has them (the redb target: `assumed`, `beyond`; ADR-0038).
    pub fault_profile: Option<String>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            steps: 1000,
            history_steps: 10,
            record_step_digests: false,
            record_trace: false,
            config: None,
            canary: None,
            fault_profile: None,
        }
    }
}

impl RunOptions {
    /// Default options with `steps` steps.
    pub fn with_steps(steps: u64) -> Self {
        Self { steps, ..Self::default() }
    }
}

/// Where and how a run failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub seed: u64,
    /// Index of the failing step; the step count itself for the liveness phase and final crash.
    pub step: u64,
    /// `step`, `open`, `generate` or `finale`.
    pub phase: String,
    pub invariant: String,
    pub kind: FailureKind,
    pub expected: String,
    pub actual: String,
    /// The last steps before the failure (the failing one last), one rendered line each.
    pub last_steps: Vec<String>,
}

impl Failure {
    /// A multi-line human report (without the replay command, which the caller knows).
    pub fn report(&self) -> String {
        let mut text = String::new();
        let _ = writeln!(text, "FAILURE seed={} step={} phase={}", self.seed, self.step, self.phase);
        let _ = writeln!(text, "  invariant: {} ({})", self.invariant, self.kind);
        let _ = writeln!(text, "  expected:  {}", self.expected);
        let _ = writeln!(text, "  actual:    {}", self.actual);
        let _ = writeln!(text, "  last {} steps:", self.last_steps.len());
        for line in &self.last_steps {
            let _ = writeln!(text, "    {line}");
        }
        text
    }
}

/// The result of one run.
#[derive(Clone, Debug)]
pub struct Outcome<S> {
    pub seed: u64,
    pub failure: Option<Failure>,
    /// A hash of every step, every result and the final disk image.
    pub digest: u64,
    pub coverage: Coverage,
    /// Schedule steps executed.
    pub steps_run: u64,
    /// Steps that did work (not idle).
    pub work_steps: u64,
    /// The running digest after each step (when asked for).
    pub step_digests: Vec<u64>,
    /// One JSON line per step (when asked for).
    pub trace: Vec<String>,
    /// The steps that ran (generated or replayed), replayable.
    pub schedule: Schedule<S>,
}

impl<S> Outcome<S> {
    /// True when every invariant held.
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }

    /// The digest as 16 hex digits.
    pub fn digest_hex(&self) -> String {
        format!("{:016x}", self.digest)
    }
}

/// Run `seed` against target `T`: generate steps from the seed's workload stream and apply them.
pub fn run_target<T: Target>(seed: u64, options: &RunOptions) -> Outcome<T::Step> {
    assert!(options.steps <= STEPS_MAX, "{} steps is above STEPS_MAX", options.steps);
    let config = options.config.clone().unwrap_or_else(|| T::swarm_config(seed, options));
    execute::<T>(Schedule::new(T::NAME, seed, config), None, options)
}

/// Replay `schedule` against target `T`. Never consults the generating RNG.
pub fn run_schedule_target<T: Target>(schedule: &Schedule<T::Step>, options: &RunOptions) -> Outcome<T::Step> {
    assert_eq!(schedule.target, T::NAME, "schedule for another target");
    assert!(schedule.steps.len() as u64 <= STEPS_MAX, "schedule longer than STEPS_MAX");
    let empty = Schedule::new(T::NAME, schedule.seed, schedule.config.clone());
    execute::<T>(empty, Some(&schedule.steps), options)
}

struct Recorder<T: Target> {
    seed: u64,
    hasher: StableHasher,
    history: VecDeque<(u64, T::Step, Option<T::Observation>)>,
    history_steps: usize,
    step_digests: Vec<u64>,
    trace: Vec<String>,
    record_step_digests: bool,
    record_trace: bool,
    work_steps: u64,
}

impl<T: Target> Recorder<T> {
    fn new(seed: u64, options: &RunOptions) -> Self {
        Self {
            seed,
            hasher: StableHasher::new(),
            history: VecDeque::new(),
            history_steps: options.history_steps.clamp(1, HISTORY_STEPS_MAX),
            step_digests: Vec::new(),
            trace: Vec::new(),
            record_step_digests: options.record_step_digests,
            record_trace: options.record_trace,
            work_steps: 0,
        }
    }

    fn record(&mut self, index: u64, step: &T::Step, observation: Option<&T::Observation>) {
        self.hasher.write_u64(index);
        step.digest_into(&mut self.hasher);
        match observation {
            Some(observation) => {
                self.hasher.write_u64(1);
                observation.digest_into(&mut self.hasher);
                self.work_steps += u64::from(!observation.is_idle());
            }
            None => self.hasher.write_u64(0),
        }
        if self.record_step_digests {
            self.step_digests.push(self.hasher.finish());
        }
        if self.record_trace {
            let line = serde_json::json!({
                "step": index,
                "op": step,
                "result": observation,
                "digest": format!("{:016x}", self.hasher.finish()),
            });
            self.trace.push(line.to_string());
        }
        if self.history.len() == self.history_steps {
            self.history.pop_front();
        }
        self.history.push_back((index, step.clone(), observation.cloned()));
        debug_assert!(self.history.len() <= self.history_steps);
    }

    fn failure(&self, step: u64, phase: &str, violation: Violation) -> Failure {
        let last_steps = self
            .history
            .iter()
            .map(|(index, step, observation)| {
                let step = serde_json::to_string(step).unwrap_or_else(|error| format!("<unserializable: {error}>"));
                match observation {
                    Some(observation) => {
                        let result = serde_json::to_string(observation).unwrap_or_else(|error| error.to_string());
                        format!("#{index} {step} -> {result}")
                    }
                    None => format!("#{index} {step} -> FAILED"),
                }
            })
            .collect();
        Failure {
            seed: self.seed,
            step,
            phase: phase.to_string(),
            invariant: violation.invariant,
            kind: violation.kind,
            expected: violation.expected,
            actual: violation.actual,
            last_steps,
        }
    }
}

/// Set this environment variable to have [`install_panic_hook`] print every panic as it happens (one line each).
pub const PANIC_VERBOSE_ENV_VAR: &str = "SIMULATOR_PANIC_VERBOSE";

thread_local! {
    /// Where the last panic on this thread happened (`file:line`), recorded by [`install_panic_hook`].
    static LAST_PANIC_LOCATION: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Record every panic's location for the failure report instead of printing the default message and backtrace:
/// a run that panics is reported as a [`FailureKind::Panic`] violation with its message and that location
/// (`SIMULATOR_PANIC_VERBOSE=1` prints each panic too).
/// For the command line; tests keep the default hook.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info.location().map(|location| format!("{}:{}", location.file(), location.line()));
        if std::env::var_os(PANIC_VERBOSE_ENV_VAR).is_some() {
            eprintln!("simulator: panic at {}: {info}", location.as_deref().unwrap_or("<unknown>"));
        }
        LAST_PANIC_LOCATION.with(|slot| slot.borrow_mut().clone_from(&location));
    }));
}

/// Run `f`, turning a panic into a [`FailureKind::Panic`] violation (with its location when the hook recorded it).
fn guarded<R>(what: &str, f: impl FnOnce() -> Result<R, Violation>) -> Result<R, Violation> {
    LAST_PANIC_LOCATION.with(|slot| slot.borrow_mut().take());
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let mut message = payload
                .downcast_ref::<&str>()
                .map(|text| (*text).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "<non-string panic payload>".to_string());
            if let Some(location) = LAST_PANIC_LOCATION.with(|slot| slot.borrow_mut().take()) {
                message = format!("{message} (at {location})");
            }
            Err(Violation::new(format!("no_panic_{what}"), FailureKind::Panic, "no panic", message))
        }
    }
}

/// Turns a canary on for this thread for the length of one run, and off again after it (ADR-0020).
struct CanaryGuard;

impl CanaryGuard {
    fn set(name: Option<&str>) -> Self {
        #[cfg(feature = "canaries")]
        engine::canary::set_active(name).unwrap_or_else(|error| panic!("{error}"));
        #[cfg(not(feature = "canaries"))]
        assert!(name.is_none(), "canary {name:?} needs the simulator built with --features canaries");
        CanaryGuard
    }
}

impl Drop for CanaryGuard {
    fn drop(&mut self) {
        #[cfg(feature = "canaries")]
        engine::canary::set_active(None).expect("turning canaries off cannot fail");
    }
}

fn execute<T: Target>(
    mut schedule: Schedule<T::Step>,
    replay: Option<&[T::Step]>,
    options: &RunOptions,
) -> Outcome<T::Step> {
    let _canary = CanaryGuard::set(options.canary.as_deref());
    let (seed, config) = (schedule.seed, schedule.config.clone());
    let env = SimEnv::with_faults(seed, config.faults.clone());
    env.set_buggify(config.buggify);
    let mut recorder = Recorder::<T>::new(seed, options);
    let steps_total = replay.map_or(options.steps, |steps| steps.len() as u64);
    let mut failure = None;
    let mut steps_run = 0;
    let mut panicked = false;
    match guarded("open", || T::open(env.clone(), &config)) {
        Err(violation) => {
            failure = Some(recorder.failure(0, "open", violation));
        }
        Ok(mut target) => {
            let mut rng = DeterministicRng::stream(seed, "workload");
            for index in 0..steps_total {
                let step = match replay {
                    Some(steps) => steps[usize::try_from(index).expect("index fits")].clone(),
                    None => match guarded("generate", || Ok(target.generate(&mut rng, &config))) {
                        Ok(step) => step,
                        Err(violation) => {
                            panicked = true;
                            failure = Some(recorder.failure(index, "generate", violation));
                            break;
                        }
                    },
                };
                env.set_step(index);
                steps_run += 1;
                let result = guarded("step", || {
                    let observation = target.apply(&step)?;
                    target.check()?;
                    Ok(observation)
                });
                schedule.steps.push(step.clone());
                match result {
                    Ok(observation) => recorder.record(index, &step, Some(&observation)),
                    Err(violation) => {
                        recorder.record(index, &step, None);
                        panicked = violation.kind == FailureKind::Panic;
                        failure = Some(recorder.failure(index, "step", violation));
                        break;
                    }
                }
            }
            if failure.is_none() {
                env.set_step(steps_total);
                let result = guarded("finale", || {
                    target.finish()?;
                    target.crash_recover()?;
                    target.check()
                });
                if let Err(violation) = result {
                    panicked = violation.kind == FailureKind::Panic;
                    failure = Some(recorder.failure(steps_total, "finale", violation));
                }
            }
            finish_outcome::<T>(&mut recorder, &env, panicked, failure.is_some());
            let coverage = if panicked { Coverage::default() } else { target.coverage() };
            dispose(target, panicked);
            return outcome(recorder, schedule, failure, coverage, steps_run);
        }
    }
    outcome(recorder, schedule, failure, Coverage::default(), steps_run)
}

/// Drop the target. After a panic its system may be poisoned and panic again when dropped (redb does): it is
/// leaked instead (memory only; the world is discarded with it). Otherwise a panic while dropping is contained.
fn dispose<T>(target: T, panicked: bool) {
    if panicked {
        std::mem::forget(target);
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(move || drop(target)));
}

/// Fold the final disk image into the digest (unless a panic may have poisoned the world).
fn finish_outcome<T: Target>(recorder: &mut Recorder<T>, env: &SimEnv, panicked: bool, failed: bool) {
    recorder.hasher.write_u64(u64::from(failed));
    if !panicked {
        recorder.hasher.write_u64(env.disk_digest());
    }
    debug_assert!(recorder.history.len() <= recorder.history_steps);
}

fn outcome<T: Target>(
    recorder: Recorder<T>,
    schedule: Schedule<T::Step>,
    failure: Option<Failure>,
    coverage: Coverage,
    steps_run: u64,
) -> Outcome<T::Step> {
    assert_eq!(schedule.steps.len() as u64, steps_run, "schedule and steps run disagree");
    Outcome {
        seed: schedule.seed,
        failure,
        digest: recorder.hasher.finish(),
        coverage,
        steps_run,
        work_steps: recorder.work_steps,
        step_digests: recorder.step_digests,
        trace: recorder.trace,
        schedule,
    }
}

/// Run the same thing twice in-process and compare per-step digests. `Ok(steps)` when identical; `Err((step,
/// first, second))` names the first step whose running digest differs (the step count for the final digest).
pub fn check_determinism<S>(mut run: impl FnMut() -> Outcome<S>) -> Result<u64, (u64, u64, u64)> {
    let first = run();
    let second = run();
    assert!(!first.step_digests.is_empty() || first.steps_run == 0, "determinism check needs step digests");
    for (index, (a, b)) in first.step_digests.iter().zip(&second.step_digests).enumerate() {
        if a != b {
            return Err((index as u64, *a, *b));
        }
    }
    if first.step_digests.len() != second.step_digests.len() || first.digest != second.digest {
        let step = first.step_digests.len().min(second.step_digests.len()) as u64;
        return Err((step, first.digest, second.digest));
    }
    Ok(first.steps_run)
}
