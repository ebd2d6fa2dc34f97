//! wal-kv (README.md): a small durable key-value store, [`store`], and [`WalKvTarget`], which puts it under
//! holdfast: it opens the [`Store`] on the simulated disk, drives puts, deletes, gets and checkpoints, and checks
//! every read against a model of acknowledged state.
//!
//! * **Oracle** (`oracle.*`): every `get` returns the acknowledged value, or one of the key's in-flight writes (a
//!   write whose call failed or was cut by a crash: the key holds it or its old value, wholly; never another).
//! * **Durability** (`durability.*`): after every crash (also inside an IO or inside recovery) and reopen, every
//!   key reads as the model says, and the store holds no other key.
//! * **Liveness** (`liveness.*`): once faults heal, a checkpoint succeeds and everything verifies; then the final
//!   power cut loses nothing acknowledged.

use std::path::Path;

use holdfast::config::FaultProfile;
use holdfast::env::fs::{Fs, env_error};
use holdfast::env::{DeterministicRng, Op as Io, SimEnv};
use holdfast::kit::{KeyModel, ValueSpec, key_bytes, sig_of, smaller_u32, value_bytes};
use holdfast::protocol::{cut_io, in_dir};
use holdfast::{FailureKind, FaultMenu, FaultSite, Observed, Step, SystemError, Target, Violation, World, WorldConfig};
use serde::{Deserialize, Serialize};

#[cfg(feature = "planted-page-bug")]
pub mod appended;
pub mod store;
pub mod writer;
use crate::store::{Error, Store};

/// The store's directory on the simulated disk.
pub const DIR: &str = "/wal-kv";

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
pub struct WalKvTarget {
    store: Option<Store<SimEnv>>,
    config: Config,
    model: KeyModel,
    /// Calls that may sync the log once each: opens, puts, deletes and checkpoints (the cost contract).
    log_sync_calls: u64,
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

impl WalKvTarget {
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

impl Target for WalKvTarget {
    const NAME: &'static str = "wal-kv";
    const ABOUT: &'static str = "a write-ahead-log key-value store on the env::fs facade: puts, deletes, gets and \
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
        let mut rng = DeterministicRng::stream(seed, "wal-kv");
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

    fn new(_env: &SimEnv, config: &Config) -> Self {
        Self { store: None, config: config.clone(), model: KeyModel::new(), log_sync_calls: 0 }
    }

    fn open(&mut self, env: &SimEnv) -> Result<(), SystemError> {
        self.log_sync_calls += 1;
        self.store = Some(Store::open(Fs::new(env.clone()), DIR).map_err(|error| system_error(&error))?);
        Ok(())
    }

    fn drop_system(&mut self) {
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
        let store = self.store.as_mut().expect("the framework opens the store before an operation");
        self.log_sync_calls += u64::from(!matches!(op, Op::Get { .. }));
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

    /// The store's cost contract (ADR-0182), declared as a user would: over the whole run (checked at its end,
    /// `cost.step == None`), the log is synced at most once per call that syncs it — an open (after replay), a
    /// put, a delete, a checkpoint (the emptied log). A store that synced twice per write, or on every get, fails
    /// `cost.log_syncs` with a schedule the shrinker reduces like any other failure.
    fn check_cost(
        &mut self,
        world: &mut World,
        cost: &holdfast::cost::StepCost<'_, Op, Observation>,
    ) -> Result<(), Violation> {
        if cost.step.is_some() {
            return Ok(());
        }
        let is_log = |path: &Path| path.file_name().is_some_and(|name| name.as_encoded_bytes().starts_with(b"wal"));
        let syncs: u64 =
            world.env().cost().files.iter().filter(|(path, _)| is_log(path)).map(|(_, io)| io.file_syncs).sum();
        if syncs > self.log_sync_calls {
            let expected =
                format!("at most {} log syncs, one per open, put, delete and checkpoint", self.log_sync_calls);
            return Err(holdfast::cost::cost_violation("cost.log_syncs", expected, format!("{syncs}")));
        }
        Ok(())
    }

    fn healthy(&mut self, world: &mut World) -> Result<(), Violation> {
        let store = self.store.as_mut().expect("healthy after an open");
        self.log_sync_calls += 1;
        if let Err(error) = store.checkpoint() {
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
        let mut places: Vec<_> = log.into_iter().filter(|&(op, _)| cut_io(io, path, "wal", op)).map(|p| p.1).collect();
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
