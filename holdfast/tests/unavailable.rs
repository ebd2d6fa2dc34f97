//! A seed whose system stays unavailable stops burning steps (ADR-seeds-perf): after `UNAVAILABLE_STEPS_MAX` steps in
//! a row that could not open the system, or that reopened it without getting through its verification, a generated
//! run moves straight to the liveness phase and the final crash; its schedule holds only the steps that ran, so
//! the replay is exact.

use std::path::Path;

use holdfast::config::{ExplicitFaults, WorldWeights, healed_faults};
use holdfast::env::{DeterministicRng, Env, FaultConfig, File, OpenOptions, SimEnv};
use holdfast::runner::UNAVAILABLE_STEPS_MAX;
use holdfast::{FaultProfile, Observed, OutcomeOf, RunOptions, SystemError, Target, Violation, World, WorldConfig};
use serde::{Deserialize, Serialize};

const MARKER: &str = "/stuck/marker";
const STEPS: u64 = 300;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
enum StuckOp {
    Get,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "result")]
enum StuckObserved {
    Read { len: u64 },
}

/// A store that writes a 64-byte marker when it opens and reads it back to verify and to serve gets.
#[derive(Debug)]
struct Stuck {
    env: Option<SimEnv>,
}

fn io(error: &holdfast::env::Error) -> SystemError {
    SystemError::new("io", error)
}

impl Stuck {
    fn read_marker(&self) -> Result<u64, SystemError> {
        let env = self.env.as_ref().expect("open");
        let file = env.open(Path::new(MARKER), OpenOptions::read()).map_err(|error| io(&error))?;
        Ok(file.read_all().map_err(|error| io(&error))?.len() as u64)
    }
}

impl Target for Stuck {
    const NAME: &'static str = "stuck";
    type Config = ();
    type Op = StuckOp;
    type Observation = StuckObserved;

    fn configure(_seed: u64, _world: &WorldConfig) {}

    fn new(_env: &SimEnv, _config: &()) -> Self {
        Self { env: None }
    }

    fn open(&mut self, env: &SimEnv) -> Result<(), SystemError> {
        env.create_dir_all(Path::new("/stuck")).map_err(|error| io(&error))?;
        let file = env.open(Path::new(MARKER), OpenOptions::create_truncate()).map_err(|error| io(&error))?;
        file.write_all_at(0, &[7; 64]).and_then(|()| file.sync()).map_err(|error| io(&error))?;
        env.sync_dir(Path::new("/stuck")).map_err(|error| io(&error))?;
        self.env = Some(env.clone());
        Ok(())
    }

    fn drop_system(&mut self) {
        self.env = None;
    }

    fn is_open(&self) -> bool {
        self.env.is_some()
    }

    fn recovered(&mut self, world: &mut World) -> Result<StuckObserved, Violation> {
        match self.read_marker() {
            Ok(len) => Ok(StuckObserved::Read { len }),
            Err(error) => {
                world.tolerate_verify("durability", "reading the marker", &error)?;
                Ok(StuckObserved::Read { len: 0 })
            }
        }
    }

    fn generate(&mut self, _world: &World, _rng: &mut DeterministicRng, _config: &()) -> StuckOp {
        StuckOp::Get
    }

    fn apply(&mut self, world: &mut World, _op: &StuckOp) -> Result<Observed<StuckObserved>, Violation> {
        match self.read_marker() {
            Ok(len) => Ok(Observed::Op(StuckObserved::Read { len })),
            Err(error) => world.tolerate("get", &error),
        }
    }

    fn healthy(&mut self, _world: &mut World) -> Result<(), Violation> {
        match self.read_marker() {
            Ok(64) => Ok(()),
            other => Err(Violation::new("stuck.healthy", holdfast::FailureKind::Liveness, "64", format!("{other:?}"))),
        }
    }
}

fn run(faults: FaultConfig) -> OutcomeOf<Stuck> {
    let world = WorldConfig {
        profile: FaultProfile::Assumed,
        faults,
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
    };
    holdfast::run_configured::<Stuck>(7, world, (), &RunOptions::with_steps(STEPS))
}

/// The run stopped early, still ran the liveness phase and the final crash, and its schedule replays exactly.
fn cut_short_and_replayed(outcome: &OutcomeOf<Stuck>) {
    assert!(outcome.passed(), "{}", outcome.failure.as_ref().map(|f| f.report()).unwrap_or_default());
    assert_eq!(outcome.steps_run, UNAVAILABLE_STEPS_MAX, "every step was stuck: cut after the first streak");
    assert_eq!(outcome.schedule.steps.len() as u64, outcome.steps_run, "the schedule holds the steps that ran");
    assert_eq!(outcome.coverage.get("unavailable_cutoffs"), 1);
    assert!(outcome.coverage.get("crashes") >= 1, "the final crash ran: {:?}", outcome.coverage);
    assert!(outcome.coverage.get("recoveries") >= 1, "the system recovered once faults healed");
    let replayed = holdfast::run_schedule::<Stuck>(&outcome.schedule, &RunOptions::default());
    assert_eq!((replayed.digest, replayed.steps_run), (outcome.digest, outcome.steps_run));
    assert!(replayed.passed());
}

#[test]
fn a_system_that_cannot_open_on_a_full_disk_is_cut_short_to_its_liveness_phase() {
    let outcome = run(FaultConfig { disk_quota_bytes: Some(16), ..healed_faults(&FaultConfig::none()) });
    assert!(outcome.coverage.get("fault.disk_full") > 0, "{:?}", outcome.coverage);
    cut_short_and_replayed(&outcome);
}

#[test]
fn a_system_reopened_every_step_without_a_clean_verification_is_cut_short_too() {
    let outcome = run(FaultConfig { read_error_ppm: 1_000_000, ..healed_faults(&FaultConfig::none()) });
    assert!(outcome.coverage.get("reopens") >= UNAVAILABLE_STEPS_MAX, "{:?}", outcome.coverage);
    cut_short_and_replayed(&outcome);
}

#[test]
fn a_healthy_run_is_never_cut() {
    let outcome = run(healed_faults(&FaultConfig::none()));
    assert!(outcome.passed());
    assert_eq!((outcome.steps_run, outcome.coverage.get("unavailable_cutoffs")), (STEPS, 0));
}
