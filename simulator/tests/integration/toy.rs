//! A tiny toy system plugged into the generic core: a key-value store that keeps one file per key on `SimEnv`.
//! The safe variant writes a temp file, syncs, renames and syncs the directory; the buggy variant overwrites the
//! key's file in place, so a crash can leave it empty or torn — the simulator must catch that.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hasher;
use std::path::PathBuf;

use env::{DeterministicRng, Env, File, OpenOptions, SimEnv, StableHasher};
use serde::{Deserialize, Serialize};
use simulator::config::{KeyDistribution, OpWeights, SwarmConfig, TuningConfig, WorkloadConfig};
use simulator::{
    Coverage, Digest, FailureKind, Observation, RunOptions, Target, Violation, run_schedule_target, run_target,
};

const TOY_DIR: &str = "/toy";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum ToyStep {
    Put { key: u32, value: u64 },
    Get { key: u32 },
    Crash,
    CrashAtIo { k: u64 },
}

impl Digest for ToyStep {
    fn digest_into(&self, hasher: &mut StableHasher) {
        match self {
            ToyStep::Put { key, value } => [1, u64::from(*key), *value].iter().for_each(|&w| hasher.write_u64(w)),
            ToyStep::Get { key } => [2, u64::from(*key)].iter().for_each(|&w| hasher.write_u64(w)),
            ToyStep::Crash => hasher.write_u64(3),
            ToyStep::CrashAtIo { k } => [4, *k].iter().for_each(|&w| hasher.write_u64(w)),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum ToyObserved {
    Ok,
    Value(Option<u64>),
    Crashed,
    Armed,
}

impl Digest for ToyObserved {
    fn digest_into(&self, hasher: &mut StableHasher) {
        match self {
            ToyObserved::Ok => hasher.write_u64(1),
            ToyObserved::Value(value) => {
                [2, value.map_or(0, |v| v.wrapping_add(1))].iter().for_each(|&w| hasher.write_u64(w))
            }
            ToyObserved::Crashed => hasher.write_u64(3),
            ToyObserved::Armed => hasher.write_u64(4),
        }
    }
}

impl Observation for ToyObserved {
    fn is_idle(&self) -> bool {
        *self == ToyObserved::Armed
    }
}

/// The toy store on a `SimEnv`, with its model. `SAFE`: write via temp file + rename (correct) or in place (buggy).
#[derive(Debug)]
pub struct Toy<const SAFE: bool> {
    env: SimEnv,
    acked: BTreeMap<u32, u64>,
    maybe: BTreeMap<u32, BTreeSet<u64>>,
    armed: Option<u64>,
    next_value: u64,
    crashes: u64,
}

/// The toy's swarm configuration: a handful of keys, puts, gets and crashes.
pub fn toy_config() -> SwarmConfig {
    let mut config = SwarmConfig::from_seed(0);
    config.workload = WorkloadConfig {
        key_count: 4,
        distribution: KeyDistribution::Uniform,
        value_size_bytes_max: 8,
        large_value_ppm: 0,
        large_value_size_bytes_max: 0,
        scan_keys_max: 1,
    };
    config.weights = OpWeights {
        put: 10,
        delete: 0,
        get: 10,
        scan: 0,
        flush: 0,
        compact: 0,
        run_task: 0,
        reopen: 0,
        fault: 0,
        crash: 1,
        crash_at_io: 3,
        crash_during_recovery: 0,
    };
    config.tuning = TuningConfig {
        flush_threshold_bytes: 1,
        block_size_bytes: 1,
        bloom_bits_per_key: 0,
        level_size_ratio: 2,
        l0_compaction_trigger: 1,
        block_cache_bytes: 0,
    };
    config.faults = simulator::config::healed_faults(&config.faults);
    config.buggify = false;
    config.crash_at_io_k_max = 6;
    config
}

impl<const SAFE: bool> Toy<SAFE> {
    fn path(key: u32) -> PathBuf {
        PathBuf::from(format!("{TOY_DIR}/k{key}"))
    }

    fn put(&self, key: u32, value: u64) -> env::Result<()> {
        let path = Self::path(key);
        let target = if SAFE { path.with_extension("tmp") } else { path.clone() };
        let file = self.env.open(&target, OpenOptions::create_truncate())?;
        file.write_all_at(0, &value.to_le_bytes())?;
        file.sync()?;
        if SAFE {
            self.env.rename(&target, &path)?;
        }
        self.env.sync_dir(&PathBuf::from(TOY_DIR))
    }

    fn get(&self, key: u32) -> Result<Option<u64>, Violation> {
        let file = match self.env.open(&Self::path(key), OpenOptions::read()) {
            Ok(file) => file,
            Err(error) if error.is_not_found() => return Ok(None),
            Err(error) => {
                return Err(Violation::new("toy.read", FailureKind::UnexpectedError, "read ok", error.to_string()));
            }
        };
        let bytes = file
            .read_all()
            .map_err(|e| Violation::new("toy.read", FailureKind::UnexpectedError, "ok", e.to_string()))?;
        let array: [u8; 8] = bytes.as_slice().try_into().map_err(|_| {
            Violation::new(
                "toy.torn_value",
                FailureKind::Durability,
                "an 8-byte value",
                format!("{} bytes", bytes.len()),
            )
        })?;
        Ok(Some(u64::from_le_bytes(array)))
    }

    fn check_key(&mut self, key: u32) -> Result<Option<u64>, Violation> {
        let actual = self.get(key)?;
        let expected = self.acked.get(&key).copied();
        let maybe = self.maybe.remove(&key).unwrap_or_default();
        if actual == expected || actual.is_some_and(|value| maybe.contains(&value)) {
            if let Some(value) = actual {
                self.acked.insert(key, value);
            }
            return Ok(actual);
        }
        Err(Violation::new(
            "toy.oracle",
            FailureKind::Durability,
            format!("k{key} = {expected:?} or {maybe:?}"),
            format!("{actual:?}"),
        ))
    }

    fn recover(&mut self) -> Result<(), Violation> {
        if self.env.is_halted() {
            self.env.restart();
        }
        self.crashes += 1;
        let keys: Vec<u32> = self.acked.keys().chain(self.maybe.keys()).copied().collect();
        for key in keys {
            self.check_key(key)?;
        }
        Ok(())
    }
}

impl<const SAFE: bool> Target for Toy<SAFE> {
    const NAME: &'static str = if SAFE { "toy" } else { "toy-buggy" };
    type Step = ToyStep;
    type Observation = ToyObserved;

    fn open(env: SimEnv, _config: &SwarmConfig) -> Result<Self, Violation> {
        let setup = |e: env::Error| Violation::new("toy.open", FailureKind::Setup, "ok", e.to_string());
        env.create_dir_all(&PathBuf::from(TOY_DIR)).map_err(setup)?;
        // The directory's own entry must be durable too, or a crash takes every key with it.
        env.sync_dir(&PathBuf::from("/")).map_err(setup)?;
        Ok(Self { env, acked: BTreeMap::new(), maybe: BTreeMap::new(), armed: None, next_value: 1, crashes: 0 })
    }

    fn generate(&mut self, rng: &mut DeterministicRng, config: &SwarmConfig) -> ToyStep {
        let key = config.workload.pick_key(rng);
        match rng.weighted(&[10, 10, 1, 3]) {
            0 => {
                self.next_value += 1;
                ToyStep::Put { key, value: self.next_value }
            }
            1 => ToyStep::Get { key },
            2 => ToyStep::Crash,
            _ => ToyStep::CrashAtIo { k: rng.range_inclusive(1, config.crash_at_io_k_max) },
        }
    }

    fn apply(&mut self, step: &ToyStep) -> Result<ToyObserved, Violation> {
        if let Some(k) = self.armed.take() {
            self.env.crash_at_io(k);
        }
        let observed = match step {
            ToyStep::Put { key, value } => match self.put(*key, *value) {
                Ok(()) => {
                    self.acked.insert(*key, *value);
                    self.maybe.remove(key);
                    ToyObserved::Ok
                }
                Err(_) => {
                    self.maybe.entry(*key).or_default().insert(*value);
                    ToyObserved::Crashed
                }
            },
            ToyStep::Get { key } => match self.check_key(*key) {
                Ok(value) => ToyObserved::Value(value),
                Err(_) if self.env.is_halted() => ToyObserved::Crashed,
                Err(violation) => return Err(violation),
            },
            ToyStep::Crash => {
                self.env.crash();
                self.recover()?;
                ToyObserved::Crashed
            }
            ToyStep::CrashAtIo { k } => {
                self.armed = Some(*k);
                return Ok(ToyObserved::Armed);
            }
        };
        if self.env.is_halted() {
            self.recover()?;
        }
        self.env.disarm_crash();
        Ok(observed)
    }

    fn check(&mut self) -> Result<(), Violation> {
        assert!(!self.env.is_halted(), "toy left the world halted");
        Ok(())
    }

    fn crash_recover(&mut self) -> Result<(), Violation> {
        self.env.crash();
        self.recover()
    }

    fn finish(&mut self) -> Result<(), Violation> {
        self.armed = None;
        self.env.disarm_crash();
        Ok(())
    }

    fn coverage(&self) -> Coverage {
        let mut coverage = Coverage::default();
        coverage.add("crashes", self.crashes);
        coverage.add("keys", self.acked.len() as u64);
        coverage
    }

    fn required_coverage(_config: &SwarmConfig) -> Vec<String> {
        vec!["crashes".into()]
    }
}

fn toy_options(steps: u64) -> RunOptions {
    RunOptions { steps, config: Some(toy_config()), ..RunOptions::default() }
}

#[test]
fn safe_toy_passes_many_seeds_with_crashes() {
    let mut crashes = 0;
    for seed in 0..30 {
        let outcome = run_target::<Toy<true>>(seed, &toy_options(300));
        assert!(outcome.passed(), "seed {seed}: {}", outcome.failure.map(|f| f.report()).unwrap_or_default());
        assert_eq!(outcome.steps_run, 300);
        crashes += outcome.coverage.get("crashes");
    }
    assert!(crashes > 100, "only {crashes} crashes over 30 seeds");
}

#[test]
fn buggy_toy_is_caught_and_its_failure_replays() {
    let failing = (0..50)
        .map(|seed| run_target::<Toy<false>>(seed, &toy_options(300)))
        .find(|outcome| !outcome.passed())
        .expect("an in-place overwrite must lose a value to some crash in 50 seeds");
    let failure = failing.failure.clone().expect("failed");
    assert!(failure.invariant.starts_with("toy."), "{}", failure.invariant);
    assert!(!failure.last_steps.is_empty() && failure.last_steps.len() <= 10);
    let json = failing.schedule.to_json();
    let schedule = simulator::Schedule::<ToyStep>::from_json(&json, "toy-buggy").expect("round trip");
    let replayed = run_schedule_target::<Toy<false>>(&schedule, &RunOptions::default());
    assert_eq!(replayed.failure, failing.failure, "a replayed schedule fails the same way");
    assert_eq!(replayed.digest, failing.digest);
}
