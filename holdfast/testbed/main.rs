//! A test fixture, not a tool: holdfast's command line with one toy target, `testbed`, whose seeds fail or get
//! stuck on purpose, so the integration tests can run the real binary (its `--json` stdout, `merge`, the
//! wall-clock watchdog in-process and under `--isolate`, which re-executes this binary) on swarms that find
//! something (ADR-0097, ADR-0098).
//!
//! Seed `s` plans by `s % 10`: 3 fails its third operation (`testbed.planted`, a safety violation), 7 spins
//! forever in its third operation without calling `Env` (only the watchdog can stop it), anything else passes.
//!
//! A second target, `testbed-pinned`, pins its findings as `fail` (`FINDINGS_EXPECT_FAIL`): each operation draws
//! a number below [`PINNED_DRAWS`] and one that draws 0 fails (`testbed.drew_zero`), so a failing run holds steps
//! the shrinker removes. With `HOLDFAST_TESTBED_BUILT_WITH` set, the binary stands in for one built with
//! `--features planted-bug` (`Cli::built_with`), as a user's `#[cfg(feature = ..)]` would make it. Its
//! `beyond` menu is invalid on purpose (a backwards disk quota range, ADR-0139).
//!
//! `testbed-checkpointer` (`checkpointer.rs`) is a correct store whose checkpointer thread removes covered files
//! by path after its directory sync: it passes only because a crash stops the world (ADR-0168).
//! `testbed-foreign` (`foreign.rs`) calls the world from a plain `std::thread`: its run fails, loudly (ADR-0169).

mod checkpointer;
mod foreign;

use std::process::ExitCode;

use holdfast::cli::Cli;
use holdfast::env::{DeterministicRng, SimEnv};
use holdfast::{FailureKind, FaultMenu, FaultProfile, Observed, SystemError, Target, Violation, World, WorldConfig};
use serde::{Deserialize, Serialize};

/// The invariant a failing seed violates.
const PLANTED_INVARIANT: &str = "testbed.planted";
/// `testbed-pinned`'s quota range under `--fault-profile beyond`: backwards, so its menu is invalid.
#[expect(clippy::reversed_empty_ranges, reason = "the fixture's planted mistake (ADR-0139)")]
const BACKWARDS_QUOTA_BYTES: std::ops::RangeInclusive<u64> = 8192..=4096;
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

/// `testbed-pinned`'s operations draw from `0..PINNED_DRAWS`; a draw of 0 fails.
const PINNED_DRAWS: u64 = 20;
/// Set (to anything) to build the command line with `built_with("planted-bug")`.
const BUILT_WITH_ENV_VAR: &str = "HOLDFAST_TESTBED_BUILT_WITH";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
enum PinnedOp {
    Draw { n: u64 },
}

#[derive(Debug)]
struct Pinned {
    open: bool,
}

impl Target for Pinned {
    const NAME: &'static str = "testbed-pinned";
    const ABOUT: &'static str = "a test fixture that pins its findings as fail: an operation that draws 0 fails";
    const FINDINGS_EXPECT_FAIL: bool = true;
    type Config = ();
    type Op = PinnedOp;
    type Observation = u64;

    /// `beyond` is a target author's mistake on purpose: a disk quota range written backwards, which the command
    /// line refuses by name before running anything (ADR-0139).
    fn fault_menu(profile: FaultProfile) -> Option<FaultMenu> {
        Some(match profile {
            FaultProfile::Assumed => FaultMenu::standard(),
            FaultProfile::Beyond => FaultMenu::standard().with_disk_quota_bytes(BACKWARDS_QUOTA_BYTES),
        })
    }

    fn configure(_seed: u64, _world: &WorldConfig) {}

    fn new(_env: &SimEnv, _config: &()) -> Self {
        Self { open: false }
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
        Ok(0)
    }

    fn generate(&mut self, _world: &World, rng: &mut DeterministicRng, _config: &()) -> PinnedOp {
        PinnedOp::Draw { n: rng.below(PINNED_DRAWS) }
    }

    fn apply(&mut self, _world: &mut World, op: &PinnedOp) -> Result<Observed<u64>, Violation> {
        let PinnedOp::Draw { n } = *op;
        if n == 0 {
            return Err(Violation::new("testbed.drew_zero", FailureKind::Safety, "a draw above 0", "0"));
        }
        Ok(Observed::Op(n))
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
    let cli = Cli::new("holdfast-testbed", "cargo run -p holdfast --bin holdfast-testbed --")
        .target::<Testbed>()
        .target::<Pinned>()
        .target::<checkpointer::Checkpointer>()
        .target::<foreign::Foreign>();
    let cli = if std::env::var_os(BUILT_WITH_ENV_VAR).is_some() { cli.built_with("planted-bug") } else { cli };
    cli.run()
}
