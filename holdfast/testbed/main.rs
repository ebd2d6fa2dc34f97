//! A test fixture, not a tool: holdfast's command line with one toy target, `testbed`, whose seeds fail or get
//! stuck on purpose, so the integration tests can run the real binary (its `--json` stdout, `merge`, the
//! wall-clock watchdog in-process and under `--isolate`, which re-executes this binary) on swarms that find
//! something (ADR-0097, ADR-0098).
//!
//! Seed `s` plans by `s % 10`: 3 fails its third operation (`testbed.planted`, a safety violation), 7 spins
//! forever in its third operation without calling `Env` (only the watchdog can stop it), anything else passes.

use std::process::ExitCode;

use holdfast::cli::Cli;
use holdfast::env::{DeterministicRng, SimEnv};
use holdfast::{FailureKind, Observed, SystemError, Target, Violation, World, WorldConfig};
use serde::{Deserialize, Serialize};

/// The invariant a failing seed violates.
const PLANTED_INVARIANT: &str = "testbed.planted";
/// The operation (counted from 0) at which a failing or spinning seed does so.
const PLANTED_OP_INDEX: u64 = 2;

/// What a seed does at its third operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Plan {
    Pass,
    Fail,
    Spin,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
enum TestbedOp {
    Tick,
}

#[derive(Debug)]
struct Testbed {
    plan: Plan,
    open: bool,
    ops: u64,
}

impl Target for Testbed {
    const NAME: &'static str = "testbed";
    const ABOUT: &'static str = "a test fixture: seeds ending in 3 fail, seeds ending in 7 spin forever";
    type Config = Plan;
    type Op = TestbedOp;
    type Observation = u64;

    fn configure(seed: u64, _world: &WorldConfig) -> Plan {
        match seed % 10 {
            3 => Plan::Fail,
            7 => Plan::Spin,
            _ => Plan::Pass,
        }
    }

    fn new(_env: &SimEnv, plan: &Plan) -> Self {
        Self { plan: *plan, open: false, ops: 0 }
    }

    fn open(&mut self, _env: &SimEnv) -> Result<(), SystemError> {
        self.open = true;
        Ok(())
    }

    fn drop_system(&mut self) {
        self.open = false;
    }

    fn is_open(&self) -> bool {
        self.open
    }

    fn recovered(&mut self, _world: &mut World) -> Result<u64, Violation> {
        Ok(self.ops)
    }

    fn generate(&mut self, _world: &World, _rng: &mut DeterministicRng, _plan: &Plan) -> TestbedOp {
        TestbedOp::Tick
    }

    fn apply(&mut self, _world: &mut World, _op: &TestbedOp) -> Result<Observed<u64>, Violation> {
        let index = self.ops;
        self.ops += 1;
        match (self.plan, index == PLANTED_OP_INDEX) {
            (Plan::Fail, true) => {
                Err(Violation::new(PLANTED_INVARIANT, FailureKind::Safety, "no planted failure", "the planted one"))
            }
            (Plan::Spin, true) => spin(),
            _ => Ok(Observed::Op(index)),
        }
    }

    fn healthy(&mut self, _world: &mut World) -> Result<(), Violation> {
        Ok(())
    }
}

/// Loop forever without calling `Env`: the work budget never sees it, only a wall-clock watchdog does.
fn spin() -> ! {
    loop {
        std::hint::spin_loop();
    }
}

fn main() -> ExitCode {
    Cli::new("holdfast-testbed", "cargo run -p holdfast --bin holdfast-testbed --").target::<Testbed>().run()
}
