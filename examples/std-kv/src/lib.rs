//! std-kv (README.md): a key-value store written only with `std` ([`store`], [`writer`]), and [`StdKvTarget`], which
//! puts it under holdfast: it opens the [`Store`] with an ordinary path in the directory the world names, drives
//! puts, deletes, gets and checkpoints, and checks every read against a model of acknowledged state. Which route
//! takes the store's `std` calls to the world is a build switch ([`sys`], DECISIONS.md ADR-0003).
//!
//! * **Oracle** (`oracle.*`): every `get` returns the acknowledged value, or one of the key's in-flight writes (a
//!   write whose call failed or was cut by a crash: the key holds it or its old value, wholly; never another).
//! * **Durability** (`durability.*`): after every crash (also inside an IO or inside recovery) and reopen, every
//!   key reads as the model says, and the store holds no other key.
//! * **Liveness** (`liveness.*`): once faults heal, a checkpoint succeeds and everything verifies; then the final
//!   power cut loses nothing acknowledged.

use std::path::Path;

use holdfast::config::FaultProfile;
use holdfast::env::fs::env_error;
use holdfast::env::{DeterministicRng, Op as Io, SimEnv};
use holdfast::kit::{KeyModel, ValueSpec, key_bytes, sig_of, smaller_u32, value_bytes};
use holdfast::protocol::{cut_io, in_dir};
use holdfast::{FailureKind, FaultMenu, FaultSite, Observed, Step, SystemError, Target, Violation, World, WorldConfig};
use serde::{Deserialize, Serialize};

pub mod frame;
pub mod store;
pub mod sys;
#[cfg(test)]
mod tests;
pub mod writer;
use crate::store::{Error, Store};

/// The route this build takes (its seeds directory under `seeds/`).
#[cfg(feature = "env-fs")]
pub const ROUTE: &str = "env-fs";
/// The route this build takes (its seeds directory under `seeds/`).
#[cfg(all(feature = "interposed", not(feature = "env-fs")))]
pub const ROUTE: &str = "interposed";

/// The store's directory on the simulated disk (route A), or its name under the world's directory (route B).
pub const DIR: &str = "/std-kv";

/// The world bound to the calling thread for one call of the target (the store's calls go to it), and the
/// directory the store opens.
#[cfg(feature = "env-fs")]
fn enter(env: &SimEnv) -> (sys::Entered, std::path::PathBuf) {
    (sys::enter(env), DIR.into())
}

/// Route A counts nothing here: every call the store makes is an `Env` call the world counts itself.
#[cfg(feature = "env-fs")]
fn count_intercepted(_world: &mut World) {}

/// Route B: the C library calls the world answered so far, by function, as coverage counters
/// (`interposed.<call>`), so a swarm's summary shows what the interposition saw.
#[cfg(all(feature = "interposed", not(feature = "env-fs")))]
fn count_intercepted(world: &mut World) {
    for (call, count) in interpose::stats().map(|stats| stats.calls).unwrap_or_default() {
        world.add(&format!("interposed.{call}"), count);
    }
}

/// The world bound to the calling thread for one call of the target (the C library calls below the store's `std`
/// calls go to it), and the directory the store opens: an ordinary path under the one the world names.
#[cfg(all(feature = "interposed", not(feature = "env-fs")))]
fn enter(env: &SimEnv) -> (interpose::Entered, std::path::PathBuf) {
    let entered = interpose::enter(env);
    let dir = entered.dir().join(DIR.trim_start_matches('/'));
    (entered, dir)
}

/// The workload of one seed: drawn once from the seed, stored in every schedule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// Keys are `0..key_count`: few keys mean many overwrites and deletes of live keys.
    pub key_count: u32,
    /// Values are generated `8..=value_len_max` bytes (at least 8, so two writes never share their bytes); the
    /// shrinker may shorten them.
    pub value_len_max: u32,
    /// Operation weights. `checkpoint` is the checkpoint frequency.
    pub put: u64,
    pub delete: u64,
    pub get: u64,
    pub checkpoint: u64,
}

/// One operation of the store. World steps (crashes, reopens, faults) are the framework's, not ours.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Op {
    Put { key: u32, value: ValueSpec },
    Delete { key: u32 },
    Get { key: u32 },
    Checkpoint,
}

/// What an operation or a recovery produced (digested by the framework through serde).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Observation {
    Ok,
    Value { value: Option<ValueSpec> },
    Recovered { live_keys: u64 },
}

/// The target: the store when open, the model, and every value written (to name them in reports).
#[derive(Debug)]
pub struct StdKvTarget {
    store: Option<Store>,
    env: SimEnv,
    config: Config,
    model: KeyModel,
}

/// A store error as the framework's fault rules see it: corruption is marked, so that only a fault that
/// corrupts what is read can excuse it.
pub fn system_error(error: &Error) -> SystemError {
    match error {
        Error::Corruption { .. } => SystemError::corruption("corruption", error),
        Error::Poisoned => SystemError::new("poisoned", error),
        Error::Io(io) if io.kind() == std::io::ErrorKind::StorageFull => SystemError::new("no_space", error),
        Error::Io(io) => {
            SystemError::new(env_error(io).map_or("io".into(), |inner| format!("io_{}", inner.op())), error)
        }
    }
}

impl StdKvTarget {
    /// Read `key` from the store and compare it with the model, resolving in-flight writes.
    fn observe(&mut self, key: u32, context: &str, kind: FailureKind) -> Result<Option<ValueSpec>, Violation> {
        let actual = self.store.as_ref().expect("the store is open").get(&key_bytes(key)).map(sig_of);
        self.model.judge(key, actual, context, kind)
    }

    /// Verify every key of the key space (and every key the model knows), then that the store has no others.
    fn verify_all(&mut self, context: &str, kind: FailureKind) -> Result<u64, Violation> {
        let keys = self.model.keys_to_verify(self.config.key_count);
        for key in keys {
            self.observe(key, context, kind)?;
        }
        let live = self.model.live_keys();
        let stored = self.store.as_ref().expect("the store is open").len();
        if stored as u64 != live {
            let invariant = format!("{context}.extra_keys");
            return Err(Violation::new(invariant, kind, format!("{live} live keys"), format!("{stored} keys")));
        }
        Ok(live)
    }
}

/// The framework drops the target after the run, outside any of its calls: the store (and its writer thread's
/// shutdown, a channel hang-up and a join) must still happen inside the world, or on route B the hang-up is a
/// futex wake the world never sees and the join waits forever.
impl Drop for StdKvTarget {
    fn drop(&mut self) {
        if self.store.is_some() {
            let _entered = enter(&self.env);
            self.store = None;
        }
    }
}

impl Target for StdKvTarget {
    const NAME: &'static str = "std-kv";
    /// Each route pins its own seeds (`seeds/interposed/`, `seeds/env-fs/`): a seed's thread interleaving is keyed
    /// by its yield points, and the routes yield at different calls (every intercepted C library call on route B,
    /// every `Env` call on route A), so a race's shrunk schedule reproduces on the route that found it.
    const SEEDS_SUBDIR: &'static str = ROUTE;
    const ABOUT: &'static str = "a key-value store written only with std (fs, thread, sync, time): puts, deletes, gets and \
                                 checkpoints, checked against a model after every step";
    type Config = Config;
    type Op = Op;
    type Observation = Observation;

    /// What this store claims to survive: crashes anywhere, failed writes and syncs, short writes, a full disk,
    /// read errors and transient read corruption (a torn tail is truncated only after a second read agrees). Not
    /// data destroyed at rest (latent sectors, misdirected writes, bit flips): these checks do not weaken for it.
    fn fault_menu(profile: FaultProfile) -> Option<FaultMenu> {
        let menu = FaultMenu { tasks: false, ..FaultMenu::standard().without_data_loss() }; // no background tasks
        (profile == FaultProfile::Assumed).then_some(menu)
    }

    fn configure(seed: u64, _world: &WorldConfig) -> Config {
        let mut rng = DeterministicRng::stream(seed, "std-kv");
        Config {
            key_count: [1, 4, 16, 64, 256][rng.index(5)],
            value_len_max: [8, 64, 512, 4096][rng.index(4)],
            put: 100,
            delete: rng.range_inclusive(0, 30),
            get: rng.range_inclusive(10, 60),
            checkpoint: rng.range_inclusive(1, 20),
        }
    }

    fn validate_config(config: &Config) -> Result<(), String> {
        (config.key_count > 0).then_some(()).ok_or_else(|| "key_count must be at least 1".into())
    }

    fn new(env: &SimEnv, config: &Config) -> Self {
        Self { store: None, env: env.clone(), config: config.clone(), model: KeyModel::new() }
    }

    fn open(&mut self, env: &SimEnv) -> Result<(), SystemError> {
        let (_entered, dir) = enter(env);
        self.store = Some(Store::open(dir).map_err(|error| system_error(&error))?);
        Ok(())
    }

    fn drop_system(&mut self) {
        let _entered = enter(&self.env);
        self.store = None;
    }

    fn is_open(&self) -> bool {
        self.store.is_some()
    }

    fn recovered(&mut self, _world: &mut World) -> Result<Observation, Violation> {
        let live_keys = self.verify_all("durability", FailureKind::Durability)?;
        Ok(Observation::Recovered { live_keys })
    }

    fn generate(&mut self, _world: &World, rng: &mut DeterministicRng, config: &Config) -> Op {
        let key = u32::try_from(rng.below(u64::from(config.key_count))).expect("below a u32");
        match rng.weighted(&[config.put, config.delete, config.get, config.checkpoint]) {
            0 => {
                let len = u32::try_from(rng.range_inclusive(8, u64::from(config.value_len_max.max(8)))).expect("fits");
                Op::Put { key, value: self.model.next_value(len) }
            }
            1 => Op::Delete { key },
            2 => Op::Get { key },
            _ => Op::Checkpoint,
        }
    }

    fn apply(&mut self, world: &mut World, op: &Op) -> Result<Observed<Observation>, Violation> {
        let _entered = enter(&self.env);
        let store = self.store.as_mut().expect("the framework opens the store before an operation");
        let (what, result, write) = match *op {
            Op::Put { key, value } => {
                let bytes = value_bytes(value);
                self.model.written(value, sig_of(&bytes));
                ("put", store.put(&key_bytes(key), &bytes), Some((key, Some(sig_of(&bytes)))))
            }
            Op::Delete { key } => ("delete", store.delete(&key_bytes(key)), Some((key, None))),
            Op::Checkpoint => ("checkpoint", store.checkpoint(), None),
            Op::Get { key } => {
                let value = self.observe(key, "oracle", FailureKind::Safety)?;
                return Ok(Observed::Op(Observation::Value { value }));
            }
        };
        match (result, write) {
            (Ok(()), Some((key, value))) => {
                self.model.acknowledged(key, value);
            }
            (Ok(()), None) => world.count("checkpoints"),
            (Err(error), write) => {
                if let Some((key, value)) = write {
                    self.model.in_flight(key, value);
                    world.count("in_flight_writes");
                }
                return world.tolerate(what, &system_error(&error));
            }
        }
        Ok(Observed::Op(Observation::Ok))
    }

    fn healthy(&mut self, world: &mut World) -> Result<(), Violation> {
        let _entered = enter(&self.env);
        let store = self.store.as_mut().expect("healthy after an open");
        let checkpointed = store.checkpoint();
        count_intercepted(world);
        if let Err(error) = checkpointed {
            return world.give_up("liveness.checkpoint", "a checkpoint succeeds once faults heal", error.to_string());
        }
        self.verify_all("liveness", FailureKind::Liveness).map(drop)
    }

    fn fault_sites(&self, env: &SimEnv) -> Vec<FaultSite> {
        let files = env.files().into_iter().filter(|file| in_dir(&file.path, DIR));
        files.map(|file| FaultSite { path: file.path, len_bytes: file.current_len, flippable: false }).collect()
    }

    fn crash_places(&self, step: Option<&Step<Op>>, io: Io, path: &Path) -> Vec<&'static str> {
        let log = [(Io::Write, "crash.mid_append"), (Io::Sync, "crash.log_sync")];
        let mut places: Vec<_> = log.into_iter().filter(|&(op, _)| cut_io(io, path, "log", op)).map(|p| p.1).collect();
        if matches!(step, Some(Step::Op(Op::Checkpoint))) {
            places.push("crash.mid_checkpoint");
        }
        places
    }

    fn required_coverage(world: &WorldConfig, _config: &Config) -> Vec<String> {
        let mut names = vec!["checkpoints".to_string()];
        if world.weights.crash_at_io > 0 {
            names.extend(["crash.mid_append", "crash.log_sync", "crash.mid_checkpoint"].map(String::from));
        }
        names
    }

    fn simplify_op(op: &Op) -> Vec<Op> {
        match *op {
            Op::Put { key, value } => {
                let shorter = smaller_u32(value.len, 0).into_iter();
                shorter.map(|len| Op::Put { key, value: ValueSpec { len, ..value } }).collect()
            }
            _ => Vec::new(),
        }
    }

    /// One whole-schedule rewrite: every operation on key 0 (the shrinker keeps it only if the failure stays).
    fn rewrite(steps: &[Step<Op>]) -> Vec<Vec<Step<Op>>> {
        let to_key_zero = |step: &Step<Op>| match step {
            Step::Op(Op::Put { value, .. }) => Step::Op(Op::Put { key: 0, value: *value }),
            Step::Op(Op::Delete { .. }) => Step::Op(Op::Delete { key: 0 }),
            Step::Op(Op::Get { .. }) => Step::Op(Op::Get { key: 0 }),
            other => other.clone(),
        };
        vec![steps.iter().map(to_key_zero).collect()]
    }
}
