//! `testbed-foreign`: a store whose third operation starts a plain `std::thread` log writer (not
//! `env::thread::spawn`) that calls into the world. The world refuses it, its panic is printed on stderr with the
//! thread's name, and the run fails with that message: exit 1, never a silent 101 (ADR-0169).

use holdfast::env::{Env, SimEnv};
use holdfast::{Observed, SystemError, Target, Violation, World, WorldConfig};
use serde::{Deserialize, Serialize};

/// The operation (counted from 0) that starts the foreign thread.
const FOREIGN_OP_INDEX: u64 = 2;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum ForeignOp {
    Tick,
}

pub struct Foreign {
    env: SimEnv,
    open: bool,
    ops: u64,
}

impl Target for Foreign {
    const NAME: &'static str = "testbed-foreign";
    const ABOUT: &'static str = "a test fixture: the third operation calls the world from a std::thread";
    type Config = ();
    type Op = ForeignOp;
    type Observation = u64;

    fn configure(_seed: u64, _world: &WorldConfig) {}

    fn new(env: &SimEnv, _config: &()) -> Self {
        Self { env: env.clone(), open: false, ops: 0 }
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

    fn generate(&mut self, _world: &World, _rng: &mut holdfast::env::DeterministicRng, _config: &()) -> ForeignOp {
        ForeignOp::Tick
    }

    #[expect(
        clippy::disallowed_methods,
        reason = "the fixture starts a thread the simulator does not know, on purpose"
    )]
    fn apply(&mut self, _world: &mut World, _op: &ForeignOp) -> Result<Observed<u64>, Violation> {
        let index = self.ops;
        self.ops += 1;
        if index == FOREIGN_OP_INDEX {
            let env = self.env.clone();
            let writer = std::thread::Builder::new().name("log-writer".into()).spawn(move || {
                let _ = env.now();
            });
            // The writer panics (the world refuses it); the store carries on as one that ignores its threads.
            let _ = writer.map(std::thread::JoinHandle::join);
        }
        Ok(Observed::Op(index))
    }

    fn healthy(&mut self, _world: &mut World) -> Result<(), Violation> {
        Ok(())
    }
}
