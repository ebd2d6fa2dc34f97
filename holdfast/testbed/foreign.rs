//! `testbed-foreign`: a store whose third operation starts a plain `std::thread` log writer (not
//! `env::thread::spawn`) that calls into the world. The world refuses it, its panic is printed on stderr with the
//! thread's name, and the run fails with that message: exit 1, never a silent 101 (ADR-0169). In odd seeds the
//! third operation instead panics while the world's lock is held (inside a `visit_dir_names` visitor), poisoning
//! the world: the run fails with a verdict and a replay line, and nothing after it panics again.

use std::path::Path;

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
    /// Poison the world instead of calling it from a foreign thread.
    poison: bool,
    open: bool,
    ops: u64,
}

impl Target for Foreign {
    const NAME: &'static str = "testbed-foreign";
    const ABOUT: &'static str = "a test fixture: the third operation calls the world from a std::thread";
    /// Poison the world (odd seeds) instead of starting the foreign thread.
    type Config = bool;
    type Op = ForeignOp;
    type Observation = u64;

    fn configure(seed: u64, _world: &WorldConfig) -> bool {
        seed % 2 == 1
    }

    fn new(env: &SimEnv, poison: &bool) -> Self {
        Self { env: env.clone(), poison: *poison, open: false, ops: 0 }
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

    fn generate(&mut self, _world: &World, _rng: &mut holdfast::env::DeterministicRng, _poison: &bool) -> ForeignOp {
        ForeignOp::Tick
    }

    #[expect(
        clippy::disallowed_methods,
        reason = "the fixture starts a thread the simulator does not know, on purpose"
    )]
    fn apply(&mut self, _world: &mut World, _op: &ForeignOp) -> Result<Observed<u64>, Violation> {
        let index = self.ops;
        self.ops += 1;
        if index == FOREIGN_OP_INDEX && self.poison {
            self.env.create_dir_all(Path::new("/d")).expect("mkdir");
            let visited =
                self.env.visit_dir_names(Path::new("/"), &mut |_| panic!("a visitor panicked under the lock"));
            return Ok(Observed::Op(u64::from(visited.is_ok())));
        }
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
