//! A hang is a failure (ADR-seeds-perf): a toy system whose background work never converges, or whose code loops
//! on the world, must fail its seed with a liveness violation that names the work budget — never stall the swarm —
//! and that failure must replay identically and shrink like any other.

use std::path::{Path, PathBuf};

use holdfast::budget::{WORK_BUDGET_INVARIANT, work_limit};
use holdfast::config::{ExplicitFaults, WorldWeights, healed_faults};
use holdfast::env::{Env, FaultConfig, File, OpenOptions, SimEnv, TaskHandle, TaskStep};
use holdfast::{
    FailureKind, FaultProfile, Observed, OutcomeOf, RunOptions, SystemError, Target, Violation, World, WorldConfig,
};
use serde::{Deserialize, Serialize};

const DATA: &str = "/spin/data";
/// Steps per run: short, so that a failing run and the shrink of it stay quick.
const STEPS: u64 = 30;

/// How the toy system gets stuck.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Stuck {
    /// A compaction task that re-arms itself forever; only the liveness phase's drain waits for it.
    Background,
    /// The same task, waited for inline by the operation that starts it.
    Waited,
    /// An operation that polls the disk for a file nobody creates.
    Polling,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
enum SpinOp {
    Write { value: u64 },
    Compact,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "result")]
enum SpinObserved {
    Ok,
}

#[derive(Debug)]
struct Spin {
    env: Option<SimEnv>,
    stuck: Stuck,
    compactions: Vec<TaskHandle>,
}

fn io(error: &holdfast::env::Error) -> SystemError {
    SystemError::new("io", error)
}

impl Spin {
    fn env(&self) -> &SimEnv {
        self.env.as_ref().expect("open")
    }

    /// A compaction that never finds its work done: each step reads the data file and asks to run again.
    fn compact(&mut self) -> holdfast::env::Result<()> {
        let env = self.env().clone();
        let task = Box::new(move || {
            let _ = env.exists(Path::new(DATA));
            TaskStep::Continue
        });
        let handle = self.env().spawn("compaction", task);
        match self.stuck {
            Stuck::Background => self.compactions.push(handle),
            Stuck::Waited => self.env().wait(&handle)?,
            Stuck::Polling => while !self.env().exists(Path::new("/spin/never"))? {},
        }
        Ok(())
    }
}

impl Target for Spin {
    const NAME: &'static str = "spin";
    type Config = Stuck;
    type Op = SpinOp;
    type Observation = SpinObserved;

    fn configure(_seed: u64, _world: &WorldConfig) -> Stuck {
        Stuck::Background
    }

    fn new(_env: &SimEnv, stuck: &Stuck) -> Self {
        Self { env: None, stuck: *stuck, compactions: Vec::new() }
    }

    fn open(&mut self, env: &SimEnv) -> Result<(), SystemError> {
        env.create_dir_all(Path::new("/spin")).map_err(|error| io(&error))?;
        self.env = Some(env.clone());
        Ok(())
    }

    fn drop_system(&mut self) {
        self.env = None;
    }

    fn is_open(&self) -> bool {
        self.env.is_some()
    }

    fn recovered(&mut self, _world: &mut World) -> Result<SpinObserved, Violation> {
        Ok(SpinObserved::Ok)
    }

    fn generate(&mut self, _world: &World, rng: &mut holdfast::env::DeterministicRng, _stuck: &Stuck) -> SpinOp {
        if rng.chance_ppm(100_000) { SpinOp::Compact } else { SpinOp::Write { value: rng.next_u64() } }
    }

    fn apply(&mut self, world: &mut World, op: &SpinOp) -> Result<Observed<SpinObserved>, Violation> {
        let result = match op {
            SpinOp::Write { value } => self
                .env()
                .open(&PathBuf::from(DATA), OpenOptions::create_truncate())
                .and_then(|file| file.write_all_at(0, &value.to_le_bytes())),
            SpinOp::Compact => self.compact(),
        };
        match result {
            Ok(()) => Ok(Observed::Op(SpinObserved::Ok)),
            Err(error) => world.tolerate("spin", &io(&error)),
        }
    }

    fn healthy(&mut self, world: &mut World) -> Result<(), Violation> {
        world.drain("spin.drain")
    }
}

/// Operations only: no faults, crashes or task steps, so the only way to fail is to get stuck.
fn spin_world() -> WorldConfig {
    WorldConfig {
        profile: FaultProfile::Assumed,
        faults: healed_faults(&FaultConfig::none()),
        buggify: false,
        weights: WorldWeights {
            op: 1,
            run_task: 0,
            reopen: 0,
            fault: 0,
            crash: 0,
            crash_at_io: 0,
            crash_during_recovery: 0,
            tamper: 0,
        },
        explicit: ExplicitFaults::None,
        crash_at_io_k_max: 1,
        recovery_crash_k_max: 1,
    }
}

fn run(seed: u64, stuck: Stuck) -> OutcomeOf<Spin> {
    holdfast::run_configured::<Spin>(seed, spin_world(), stuck, &RunOptions::with_steps(STEPS))
}

/// The first of a few seeds that compacts (one in ten steps does), its failure checked against the budget.
fn stuck_run(stuck: Stuck) -> OutcomeOf<Spin> {
    let outcome = (0..10)
        .map(|seed| run(seed, stuck))
        .find(|outcome| outcome.schedule.steps.iter().any(|step| step.op() == Some(&SpinOp::Compact)))
        .expect("some seed compacts within 30 steps");
    let failure = outcome.failure.clone().expect("a system that never converges fails");
    assert_eq!((failure.invariant.as_str(), failure.kind), (WORK_BUDGET_INVARIANT, FailureKind::Liveness));
    assert!(failure.expected.contains("work budget of"), "the message names the budget: {}", failure.expected);
    outcome
}

/// The failure replays with the same failure and digest, and shrinks to the one step that gets stuck.
fn replays_and_shrinks(outcome: &OutcomeOf<Spin>) {
    let schedule = holdfast::parse_schedule::<Spin>(&outcome.schedule.to_json()).expect("round trip");
    let replayed = holdfast::run_schedule::<Spin>(&schedule, &RunOptions::default());
    assert_eq!(replayed.failure, outcome.failure, "the replay fails the same way");
    assert_eq!(replayed.digest, outcome.digest);
    let shrunk = holdfast::shrink::shrink_schedule::<Spin>(&schedule, &RunOptions::default(), 200).expect("shrinks");
    assert_eq!(shrunk.signature, outcome.failure.as_ref().expect("failed").signature());
    assert_eq!(shrunk.schedule.steps, vec![holdfast::Step::Op(SpinOp::Compact)], "shrunk to the stuck step");
}

#[test]
fn background_work_that_never_converges_fails_the_liveness_phase_on_the_work_budget() {
    let outcome = stuck_run(Stuck::Background);
    let failure = outcome.failure.as_ref().expect("failed");
    assert_eq!((failure.phase.as_str(), failure.step), ("liveness", STEPS), "{}", failure.report());
    assert!(failure.expected.contains(&work_limit(STEPS, true).to_string()), "{}", failure.expected);
    assert!(failure.actual.contains("units of simulated work"), "{}", failure.actual);
    replays_and_shrinks(&outcome);
}

#[test]
fn an_operation_waiting_on_a_task_that_never_finishes_fails_its_step_on_the_work_budget() {
    let outcome = stuck_run(Stuck::Waited);
    let failure = outcome.failure.as_ref().expect("failed");
    assert_eq!(failure.phase, "step", "{}", failure.report());
    assert_eq!(outcome.steps_run, failure.step + 1, "the run ends at the stuck step");
    assert!(failure.expected.contains(&work_limit(failure.step + 1, false).to_string()), "{}", failure.expected);
    replays_and_shrinks(&outcome);
}

#[test]
fn an_operation_polling_the_world_forever_fails_its_step_on_the_work_budget() {
    let outcome = stuck_run(Stuck::Polling);
    let failure = outcome.failure.as_ref().expect("failed");
    assert_eq!(failure.phase, "step", "{}", failure.report());
    assert!(failure.actual.contains("at exists"), "{}", failure.actual);
    replays_and_shrinks(&outcome);
}
