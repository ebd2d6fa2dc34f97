//! The step loop: build the world, generate or replay steps, apply and check each, run the liveness phase and a
//! final crash, and fold everything into a digest and an [`Outcome`].

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::hash::Hasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use env::{CostCounters, DeterministicRng, Device, DiskModel, Persistence, SimEnv, StableHasher};
use serde::{Deserialize, Serialize};

use crate::budget::{WORK_BUDGET_INVARIANT, work_limit};
use crate::config::{FaultProfile, WorldConfig};
use crate::cost::{CostReport, step_kind};
use crate::digest::digest_serde;
use crate::protocol::Session;
use crate::schedule::{Schedule, ScheduleOf};
use crate::step::{Observed, Step};
use crate::target::{Coverage, FailureKind, Target, Violation};

mod panics;

pub use panics::{DEADLOCK_INVARIANT, PANIC_VERBOSE_ENV_VAR, install_panic_hook};
use panics::{contained, guarded};

/// The most steps one run may have.
pub const STEPS_MAX: u64 = 100_000_000;
/// The most history entries a failure report keeps.
pub const HISTORY_STEPS_MAX: usize = 1000;
/// A generated run whose system stays unavailable for this many steps in a row stops stepping and goes straight to
/// its liveness phase (faults healed: the system must reopen and converge) and final crash, counting
/// `unavailable_cutoffs`; more such steps would only retry the same failing open or reopen (ADR-seeds-perf). A step
/// counts when it is observed `unavailable` (every open failed, a fault excusing it) or ends with a reopen still
/// pending (the reopen an excused error asked for could not verify the system without another excused error: a
/// damaged store, or reads that fail more often than a full verification can get through); other idle steps
/// (skipped, armed, injected) neither count nor break the run.
pub const UNAVAILABLE_STEPS_MAX: u64 = 20;

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
    /// Turn this planted bug on for the run ([`Target::set_canary`]).
    pub canary: Option<String>,
    /// The fault profile a generated run draws its world from.
    pub profile: FaultProfile,
    /// The persistence model a generated run's world gets (`--persistence`); `None`: its fault menu's
    /// ([`crate::FaultMenu::persistence`], `posix` unless the menu says otherwise).
    pub persistence: Option<Persistence>,
    /// The sector size a generated run's world gets (`--sector-size`); `None`: 512 bytes.
    pub sector_bytes: Option<u64>,
    /// Keep the image the run's last crash left ([`Outcome::crash_image`], for `--export-image`).
    pub keep_crash_image: bool,
    /// Classify every crash's image by the persistence models that admit it ([`Outcome::crash_classes`],
    /// ADR-0173). Changes no decision and no digest.
    pub classify_crashes: bool,
    /// Record the shape of what each keyed crash kept ([`Outcome::recorded_crash_shapes`], ADR-0172): what the
    /// shrinker pins. Changes no decision and no digest.
    pub record_crash_shapes: bool,
    /// The device pricing the world's IO (ADR-0181); `None`: drawn from the seed. Changes no decision and no
    /// digest, only the simulated latencies.
    pub device: Option<Device>,
    /// Record each step's cost by kind of step ([`Outcome::cost_report`], `--cost-report`, ADR-0183).
    pub cost_report: bool,
}

impl RunOptions {
    /// `base` with the persistence model and sector size these options name.
    pub fn disk_over(&self, base: &DiskModel) -> DiskModel {
        DiskModel {
            persistence: self.persistence.unwrap_or(base.persistence),
            sector_bytes: self.sector_bytes.unwrap_or(base.sector_bytes),
            ..base.clone()
        }
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            steps: 1000,
            history_steps: 10,
            record_step_digests: false,
            record_trace: false,
            canary: None,
            profile: FaultProfile::Assumed,
            persistence: None,
            sector_bytes: None,
            keep_crash_image: false,
            classify_crashes: false,
            record_crash_shapes: false,
            device: Some(Device::Nvme),
            cost_report: false,
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub seed: u64,
    /// Index of the failing step; the step count itself for the liveness phase and final crash.
    pub step: u64,
    /// `open`, `generate`, `step`, `liveness` (faults healed, the target's `healthy`), `final_crash` (the last power
    /// cut and its recovery), `process` (a child process that aborted or was killed), or `finale` (a seed stuck
    /// in the liveness phase or the final crash, [`Progress`]).
    pub phase: String,
    pub invariant: String,
    pub kind: FailureKind,
    pub expected: String,
    pub actual: String,
    /// Structured evidence from the target ([`Violation::evidence`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<serde_json::Value>,
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

    /// The failure's signature: its invariant and kind.
    pub fn signature(&self) -> corpus::Signature {
        corpus::Signature { invariant: self.invariant.clone(), kind: self.kind.to_string() }
    }
}

/// The result of one run.
#[derive(Clone, Debug)]
pub struct Outcome<C, O> {
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
    /// CPU time of the thread that ran the seed, when a swarm measured it (`RealEnv::thread_cpu_time`).
    pub cpu_nanos: Option<u64>,
    /// The steps that ran (generated or replayed), replayable.
    pub schedule: Schedule<C, O>,
    /// The disk as the run's last crash left it, when [`RunOptions::keep_crash_image`] asked (ADR-0111).
    pub crash_image: Option<env::CrashImage>,
    /// For each crash of the run, the models that admit its image, weakest first, when
    /// [`RunOptions::classify_crashes`] asked (ADR-0173).
    pub crash_classes: Vec<Vec<env::Persistence>>,
    /// For each keyed crash, the step it happened in and the shape of what it kept, when
    /// [`RunOptions::record_crash_shapes`] asked (ADR-0172).
    pub recorded_crash_shapes: Vec<(u64, env::CrashShape)>,
    /// What the run's IO cost (ADR-0180); `None` when a panic poisoned the world.
    pub cost: Option<env::Cost>,
    /// Each step's cost by kind of step, when [`RunOptions::cost_report`] asked (ADR-0183).
    pub cost_report: CostReport,
}

/// The outcome type of target `T`.
pub type OutcomeOf<T> = Outcome<<T as Target>::Config, <T as Target>::Op>;

impl<C, O> Outcome<C, O> {
    /// True when every invariant held.
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }

    /// The digest as 16 hex digits.
    pub fn digest_hex(&self) -> String {
        format!("{:016x}", self.digest)
    }
}

/// The world and target configuration a generated run of `seed` uses under `profile`. Errors when the target
/// has no such profile or its menu for it is invalid (`FaultMenu::validate`).
pub fn configure<T: Target>(seed: u64, profile: FaultProfile) -> Result<(WorldConfig, T::Config), String> {
    let menu = T::fault_menu(profile).ok_or_else(|| format!("target {} has no fault profile {profile:?}", T::NAME))?;
    menu.validate().map_err(|error| format!("target {}'s fault menu for profile {profile:?}: {error}", T::NAME))?;
    let world = WorldConfig::from_seed(seed, profile, &menu);
    let config = T::configure(seed, &world);
    T::validate_config(&config).map_err(|error| format!("target {} configured seed {seed} badly: {error}", T::NAME))?;
    Ok((world, config))
}

/// [`configure`], with the parts of the world's disk model that `options` names (ADR-0109).
pub fn configure_for<T: Target>(seed: u64, options: &RunOptions) -> Result<(WorldConfig, T::Config), String> {
    if let (Some(model), Some(menu)) = (options.persistence, T::fault_menu(options.profile)) {
        menu.honours(model).map_err(|error| format!("target {}: {error}", T::NAME))?;
    }
    let (mut world, config) = configure::<T>(seed, options.profile)?;
    world.disk = options.disk_over(&world.disk);
    world.validate()?;
    Ok((world, config))
}

/// Run `seed` against target `T`: generate steps from the seed's workload stream and apply them.
///
/// Panics when the target has no such fault profile (the CLI checks first).
pub fn run_target<T: Target>(seed: u64, options: &RunOptions) -> OutcomeOf<T> {
    assert!(options.steps <= STEPS_MAX, "{} steps is above STEPS_MAX", options.steps);
    let (world, config) = configure_for::<T>(seed, options).unwrap_or_else(|error| panic!("{error}"));
    execute::<T>(Schedule::new(T::NAME, seed, world, config), None, options)
}

/// Run `seed` against target `T` with a given world and configuration instead of the seed's own (a fixed
/// benchmark, a test that needs one corner of the space).
pub fn run_configured<T: Target>(
    seed: u64,
    world: WorldConfig,
    config: T::Config,
    options: &RunOptions,
) -> OutcomeOf<T> {
    assert!(options.steps <= STEPS_MAX, "{} steps is above STEPS_MAX", options.steps);
    world.validate().unwrap_or_else(|error| panic!("run_configured: {error}"));
    T::validate_config(&config).unwrap_or_else(|error| panic!("run_configured: {error}"));
    execute::<T>(Schedule::new(T::NAME, seed, world, config), None, options)
}

/// Replay `schedule` against target `T`. Never consults the generating RNG.
pub fn run_schedule<T: Target>(schedule: &ScheduleOf<T>, options: &RunOptions) -> OutcomeOf<T> {
    assert_eq!(schedule.target, T::NAME, "schedule for another target");
    assert!(schedule.steps.len() as u64 <= STEPS_MAX, "schedule longer than STEPS_MAX");
    let empty = Schedule::new(T::NAME, schedule.seed, schedule.world.clone(), schedule.config.clone());
    execute::<T>(empty, Some(&schedule.steps), options)
}

/// One remembered step: its index, the step, and what it produced (`None`: it failed).
type HistoryEntry<T> = (u64, Step<<T as Target>::Op>, Option<Observed<<T as Target>::Observation>>);

struct Recorder<T: Target> {
    seed: u64,
    hasher: StableHasher,
    history: VecDeque<HistoryEntry<T>>,
    history_steps: usize,
    step_digests: Vec<u64>,
    trace: Vec<String>,
    record_step_digests: bool,
    record_trace: bool,
    work_steps: u64,
    /// Each step's cost by kind, when asked ([`RunOptions::cost_report`]).
    cost_report: CostReport,
    record_cost: bool,
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
            cost_report: CostReport::default(),
            record_cost: options.cost_report,
        }
    }

    /// Digest the step and what it produced, and keep both in the history (the observation moved in, not copied).
    fn record(
        &mut self,
        index: u64,
        step: &Step<T::Op>,
        observation: Option<Observed<T::Observation>>,
        io: Option<CostCounters>,
    ) {
        self.hasher.write_u64(index);
        digest_serde(&mut self.hasher, step);
        match &observation {
            Some(observation) => {
                self.hasher.write_u64(1);
                digest_serde(&mut self.hasher, observation);
                self.work_steps += u64::from(!observation.is_idle_with(T::is_idle));
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
                "cost": io,
            });
            self.trace.push(line.to_string());
        }
        if let Some(io) = io.filter(|_| self.record_cost) {
            self.cost_report.record_step(&step_kind(step), &io);
        }
        if self.history.len() == self.history_steps {
            self.history.pop_front();
        }
        self.history.push_back((index, step.clone(), observation));
        debug_assert!(self.history.len() <= self.history_steps);
    }

    fn failure(&self, step: u64, phase: &str, violation: Violation) -> Failure {
        let last_steps = self
            .history
            .iter()
            .map(|(index, step, observation)| match observation {
                Some(observation) => format!("#{index} {} -> {}", one_line(step), one_line(observation)),
                None => format!("#{index} {} -> FAILED", one_line(step)),
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
            evidence: violation.evidence,
            last_steps,
        }
    }
}

/// One-line JSON of a step or observation (for failure reports).
fn one_line(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|error| format!("<unserializable: {error}>"))
}

/// How far the run on some thread got (its phase and step), published for a watchdog on another thread that
/// must say where a seed got stuck (ADR-0098). One relaxed atomic store per step.
#[derive(Debug, Default)]
pub struct Progress(AtomicU64);

/// [`Progress`]: the phase, in the top two bits (0 open, 1 step, 2 finale), above the step.
const PROGRESS_PHASE_SHIFT: u32 = 62;

impl Progress {
    fn publish(phase: u64, step: u64) {
        PROGRESS.with(|slot| {
            if let Some(progress) = slot.borrow().as_ref() {
                progress.0.store((phase << PROGRESS_PHASE_SHIFT) | step, Ordering::Relaxed);
            }
        });
    }

    /// The phase (`open`, `step` or `finale`) and step the run reached.
    pub fn reached(&self) -> (&'static str, u64) {
        let value = self.0.load(Ordering::Relaxed);
        let phase = match value >> PROGRESS_PHASE_SHIFT {
            0 => "open",
            1 => "step",
            _ => "finale",
        };
        (phase, value & ((1 << PROGRESS_PHASE_SHIFT) - 1))
    }
}

thread_local! {
    /// Where runs on this thread publish their progress ([`publish_progress_to`]).
    static PROGRESS: std::cell::RefCell<Option<Arc<Progress>>> = const { std::cell::RefCell::new(None) };
}

/// Runs on this thread publish their phase and step to `progress` from now on (`None`: nowhere).
pub fn publish_progress_to(progress: Option<Arc<Progress>>) {
    PROGRESS.with(|slot| *slot.borrow_mut() = progress);
}

/// Turns a canary on for this thread for the length of one run, and off again after it (ADR-0020).
struct CanaryGuard<T: Target>(std::marker::PhantomData<T>);

impl<T: Target> CanaryGuard<T> {
    fn set(name: Option<&str>) -> Self {
        T::set_canary(name).unwrap_or_else(|error| panic!("{error}"));
        Self(std::marker::PhantomData)
    }
}

impl<T: Target> Drop for CanaryGuard<T> {
    fn drop(&mut self) {
        T::set_canary(None).expect("turning canaries off cannot fail");
    }
}

/// The loop's state that is not the session.
struct Run<T: Target> {
    recorder: Recorder<T>,
    failure: Option<Failure>,
    panicked: bool,
    steps_run: u64,
}

impl<T: Target> Run<T> {
    fn fail(&mut self, step: u64, phase: &str, violation: Violation) {
        // A panic or a work budget overrun unwound through the system: it may be mid-operation.
        // A deadlock too: its threads (or its only one) stopped inside a wait, and dropping the system could wait
        // again while unwinding (ADR-0169).
        self.panicked |= violation.kind == FailureKind::Panic
            || violation.invariant == WORK_BUDGET_INVARIANT
            || violation.invariant == DEADLOCK_INVARIANT;
        self.failure = Some(self.recorder.failure(step, phase, violation));
    }
}

fn execute<T: Target>(
    mut schedule: ScheduleOf<T>,
    replay: Option<&[Step<T::Op>]>,
    options: &RunOptions,
) -> OutcomeOf<T> {
    let _canary = CanaryGuard::<T>::set(options.canary.as_deref());
    let seed = schedule.seed;
    let env = SimEnv::with_model(seed, schedule.world.faults.clone(), schedule.world.disk.clone());
    env.set_buggify(schedule.world.buggify);
    env.keep_crash_images(options.keep_crash_image);
    env.classify_crashes(options.classify_crashes);
    env.record_crash_shapes(options.record_crash_shapes);
    env.set_device(options.device.unwrap_or_else(|| Device::drawn(seed)));
    let mut run = Run::<T> { recorder: Recorder::new(seed, options), failure: None, panicked: false, steps_run: 0 };
    let steps_total = replay.map_or(options.steps, |steps| steps.len() as u64);
    let (world, config) = (schedule.world.clone(), schedule.config.clone());
    Progress::publish(0, 0);
    env.set_work_limit(Some(work_limit(0, false)));
    let mut session = match guarded("open", || Session::<T>::start(env.clone(), &world, &config)) {
        Ok(session) => session,
        Err(violation) => {
            run.fail(0, "open", violation);
            return outcome(run, schedule, Coverage::default(), &env);
        }
    };
    run_steps(&mut run, &mut session, &mut schedule, replay, steps_total);
    if run.failure.is_none() {
        Progress::publish(2, run.steps_run);
        let finale = guarded("finale", || {
            env.set_step(run.steps_run);
            env.set_work_limit(Some(work_limit(run.steps_run, true)));
            session.finale()
        });
        if let Err(violation) = finale {
            run.fail(run.steps_run, session.stage, violation);
        }
    }
    poisoned_world(&mut run, &env);
    run.recorder.hasher.write_u64(u64::from(run.failure.is_some()));
    let coverage = if run.panicked {
        Coverage::default()
    } else {
        run.recorder.hasher.write_u64(env.disk_digest());
        let mut coverage = session.world.coverage();
        session.target.coverage(&mut coverage);
        coverage
    };
    dispose(session, run.panicked);
    outcome(run, schedule, coverage, &env)
}

/// Generate (or replay) and apply the steps, each under its share of the work budget ([`crate::budget`]).
/// Returns when every step ran, one failed, or — generating only — the system stayed unavailable for
/// [`UNAVAILABLE_STEPS_MAX`] steps: the schedule then ends there, so its replay runs exactly the steps that ran.
fn run_steps<T: Target>(
    run: &mut Run<T>,
    session: &mut Session<T>,
    schedule: &mut ScheduleOf<T>,
    replay: Option<&[Step<T::Op>]>,
    steps_total: u64,
) {
    let env = session.world.env().clone();
    let mut rng = DeterministicRng::stream(schedule.seed, "workload");
    let mut unavailable = 0;
    for index in 0..steps_total {
        let step = match replay {
            Some(steps) => steps[usize::try_from(index).expect("index fits")].clone(),
            None => match guarded("generate", || Ok(session.generate(&mut rng))) {
                Ok(step) => step,
                Err(violation) => {
                    run.fail(index, "generate", violation);
                    return;
                }
            },
        };
        Progress::publish(1, index);
        run.steps_run += 1;
        // Inside the guard: a world a panic poisoned fails the step instead of the process (ADR-0169).
        let result = guarded("step", || {
            env.set_step(index);
            env.set_work_limit(Some(work_limit(index + 1, false)));
            session.apply(&step)
        });
        // What the step cost before the target's checks ran (`Session::apply`); all of it when the step failed.
        let io = (run.recorder.record_trace || run.recorder.record_cost)
            .then(|| if result.is_ok() { session.step_io } else { env.step_cost() });
        match result {
            Ok(observation) => {
                let stuck = session.world.reopen_pending;
                unavailable = unavailable_streak(unavailable, &observation, stuck, T::is_idle);
                run.recorder.record(index, &step, Some(observation), io);
                schedule.steps.push(step);
            }
            Err(violation) => {
                run.recorder.record(index, &step, None, io);
                schedule.steps.push(step);
                run.fail(index, "step", violation);
                return;
            }
        }
        if replay.is_none() && unavailable >= UNAVAILABLE_STEPS_MAX {
            session.world.count("unavailable_cutoffs");
            return;
        }
    }
}

/// The run of unavailable steps ([`UNAVAILABLE_STEPS_MAX`]) after one more step: one longer for a step observed
/// `unavailable` or ending with a reopen `pending`, the same for another idle step, none after a step that did work.
fn unavailable_streak<O>(streak: u64, observed: &Observed<O>, pending: bool, op_idle: impl FnOnce(&O) -> bool) -> u64 {
    match observed {
        Observed::Unavailable { .. } => streak + 1,
        _ if pending => streak + 1,
        idle if idle.is_idle_with(op_idle) => streak,
        _ => 0,
    }
}

/// Drop the session. After a panic its system may be poisoned and panic again when dropped (redb does): it is
/// leaked instead (memory only; the world is discarded with it). Otherwise a panic while dropping is contained.
fn dispose<S>(session: S, panicked: bool) {
    if panicked {
        std::mem::forget(session);
        return;
    }
    contained(move || drop(session));
}

/// The invariant of a run whose world a panic poisoned (ADR-0169).
pub const POISONED_WORLD_INVARIANT: &str = "no_panic_world";

/// After the run: a world a panic poisoned (a panic while its lock was held) cannot be read any more, so the run
/// is a failure (unless it already is one) and nothing more reads it; otherwise the work limit is lifted.
fn poisoned_world<T: Target>(run: &mut Run<T>, env: &SimEnv) {
    if !env.is_poisoned() {
        env.set_work_limit(None);
        return;
    }
    if run.failure.is_none() {
        let actual = "a panic while the simulated world's lock was held poisoned it (its thread and message are \
                      printed above)";
        run.fail(
            run.steps_run,
            "world",
            Violation::new(POISONED_WORLD_INVARIANT, FailureKind::Panic, "no panic", actual),
        );
    }
    run.panicked = true;
}

fn outcome<T: Target>(run: Run<T>, schedule: ScheduleOf<T>, coverage: Coverage, env: &SimEnv) -> OutcomeOf<T> {
    assert_eq!(schedule.steps.len() as u64, run.steps_run, "schedule and steps run disagree");
    Outcome {
        seed: schedule.seed,
        failure: run.failure,
        digest: run.recorder.hasher.finish(),
        coverage,
        steps_run: run.steps_run,
        work_steps: run.recorder.work_steps,
        step_digests: run.recorder.step_digests,
        trace: run.recorder.trace,
        cpu_nanos: None,
        schedule,
        crash_image: if env.is_poisoned() { None } else { env.last_crash_image() },
        crash_classes: if env.is_poisoned() { Vec::new() } else { env.crash_classes() },
        recorded_crash_shapes: if env.is_poisoned() { Vec::new() } else { env.recorded_crash_shapes() },
        cost: (!env.is_poisoned()).then(|| env.cost()),
        cost_report: run.recorder.cost_report,
    }
}

/// Run the same thing twice in-process and compare per-step digests. `Ok(steps)` when identical; `Err((step,
/// first, second))` names the first step whose running digest differs (the step count for the final digest).
pub fn check_determinism<C, O>(mut run: impl FnMut() -> Outcome<C, O>) -> Result<u64, (u64, u64, u64)> {
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
