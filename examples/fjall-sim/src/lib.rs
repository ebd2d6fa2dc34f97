//! fjall-sim (README.md): fjall, the published crate, unmodified and with its own worker threads, under holdfast's
//! simulator. fjall calls `std::fs` and `std::thread` directly; the `interpose` crate (linked into this binary)
//! answers those calls below `std` from the simulated world, so fjall opens an ordinary path under the directory
//! the world names and its threads run one at a time, in an order the seed chooses.
//!
//! What fjall promises, and what is checked:
//! * **Oracle** (`oracle.*`): a `get` returns the acknowledged value, or one of the key's in-flight writes.
//! * **Durability** (`durability.*`): a write is acknowledged once `insert`/`remove` and then
//!   `Database::persist(PersistMode::SyncAll)` returned `Ok`. After every crash and reopen, every acknowledged write
//!   is there, nothing unacknowledged half-appears (a key holds its acknowledged value or one in-flight value,
//!   whole), and the database opens.

use std::path::{Path, PathBuf};

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use holdfast::config::FaultProfile;
use holdfast::env::{DeterministicRng, Op as Io, SimEnv};
use holdfast::kit::{KeyModel, Sig, ValueSpec, key_bytes, sig_of, smaller_u32, value_bytes};
use holdfast::protocol::in_dir;
use holdfast::{
    FailureKind, FaultMenu, FaultSite, Observed, SeedParallelism, Step, SystemError, Target, Violation, World,
    WorldConfig,
};
use serde::{Deserialize, Serialize};

/// The database's directory, under the one the world names.
pub const DIR: &str = "fjall";
/// fjall's worker threads (flush, compaction, journal maintenance). One: with more, fjall's worker 0 hands a
/// `Compact` message back to the pool and takes the next one in a loop that makes no system call
/// (`fjall/src/worker_pool.rs`, "Let one worker prioritize flushing"), waiting for another worker to run. Under
/// one-thread-at-a-time scheduling that wait never ends: a spin loop without a call is invisible to the
/// interposition (TARGETS.md, "what breaks determinism"). With one worker, fjall still runs its own thread beside
/// the caller's.
pub const WORKER_THREADS: usize = 1;

/// The workload of one seed: drawn once from the seed, stored in every schedule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// Keys are `0..key_count`.
    pub key_count: u32,
    /// Values are `8..=value_len_max` bytes; the shrinker may shorten them.
    pub value_len_max: u32,
    /// fjall's memtable size: small, so that flushes and compactions run within a short schedule.
    pub memtable_bytes: u64,
    /// Operation weights.
    pub put: u64,
    pub delete: u64,
    pub get: u64,
}

/// One operation on fjall. World steps (crashes, reopens) are the framework's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Op {
    Put { key: u32, value: ValueSpec },
    Delete { key: u32 },
    Get { key: u32 },
}

/// What an operation or a recovery produced (digested by the framework through serde).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Observation {
    Ok,
    Value { value: Option<ValueSpec> },
    Recovered { live_keys: u64 },
}

/// An open fjall database and its one keyspace.
struct Open {
    db: Database,
    items: Keyspace,
}

impl std::fmt::Debug for Open {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("fjall::Database")
    }
}

/// The target: fjall when open, the model, and every value written (to name them in reports).
#[derive(Debug)]
pub struct FjallTarget {
    open: Option<Open>,
    env: SimEnv,
    config: Config,
    model: KeyModel,
}

/// A fjall error as the framework's fault rules see it.
fn system_error(error: &fjall::Error) -> SystemError {
    match error {
        fjall::Error::Io(io) if io.kind() == std::io::ErrorKind::StorageFull => SystemError::new("no_space", error),
        fjall::Error::Io(_) => SystemError::new("io", error),
        fjall::Error::Poisoned => SystemError::new("poisoned", error),
        other => SystemError::new("fjall", other),
    }
}

/// Bind the calling thread to the world for one call of the target, and name fjall's directory in it.
fn enter(env: &SimEnv) -> (interpose::Entered, PathBuf) {
    let entered = interpose::enter(env);
    let dir = entered.dir().join(DIR);
    (entered, dir)
}

/// Sync the directory that holds fjall's (the world's directory), as an application that made it would.
#[expect(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "std::fs as the application calls it; interpose answers it from the world (issue 38)"
)]
fn sync_parent(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

fn open_db(dir: &Path, config: &Config) -> fjall::Result<Open> {
    let db = Database::builder(dir).worker_threads(WORKER_THREADS).open()?;
    let memtable_bytes = config.memtable_bytes;
    let items = db.keyspace("items", move || KeyspaceCreateOptions::default().max_memtable_size(memtable_bytes))?;
    Ok(Open { db, items })
}

impl FjallTarget {
    fn read(&self, key: u32) -> Result<Option<Sig>, fjall::Error> {
        let open = self.open.as_ref().expect("fjall is open");
        Ok(open.items.get(key_bytes(key))?.map(|value| sig_of(&value)))
    }

    /// Verify every key of the key space (and every key the model knows).
    fn verify_all(&mut self, context: &str, kind: FailureKind) -> Result<u64, Violation> {
        let keys = self.model.keys_to_verify(self.config.key_count);
        for key in keys {
            let actual = self.read(key).map_err(|error| {
                Violation::new(format!("{context}.read_failed"), kind, "a read succeeds", error.to_string())
            })?;
            self.model.judge(key, actual, context, kind)?;
        }
        Ok(self.model.live_keys())
    }
}

/// fjall's `Drop` stops its workers and waits for them, sleeping in a loop: that must happen inside the world, where
/// its worker threads are scheduled, or the waiting thread sleeps on the host's clock while the workers wait for a
/// turn that never comes.
impl Drop for FjallTarget {
    fn drop(&mut self) {
        let _entered = enter(&self.env);
        self.open = None;
    }
}

impl Target for FjallTarget {
    const NAME: &'static str = "fjall";
    /// fjall is not ours: a pinned finding expects `fail` until fjall changes (ADR-0038).
    const FINDINGS_EXPECT_FAIL: bool = true;
    /// fjall and its dependencies keep process-wide state that a seed's world cannot own (lsm-tree's tree-id
    /// counter, crossbeam-epoch's global collector, dashmap's shard count, `fastrand` seeded from a process-wide
    /// thread id), and a worker thread of an in-process swarm carries thread-local state (`std`'s hash keys) from
    /// one seed to the next: each seed runs in a process of its own, as `--seed N` does (ADR-0201).
    const PARALLELISM: SeedParallelism = SeedParallelism::ChildProcesses;
    const ABOUT: &'static str = "fjall 3.1, unmodified, with its own worker threads: puts and deletes acknowledged by \
                                 persist(SyncAll), gets, crashes anywhere; checked against a model after every step";
    type Config = Config;
    type Op = Op;
    type Observation = Observation;

    /// What fjall is checked against here: crashes (anywhere, with each persistence model's unsynced-state rules).
    /// Not IO errors: fjall poisons itself on a failed fsync by design, which this target does not model yet.
    fn fault_menu(profile: FaultProfile) -> Option<FaultMenu> {
        (profile == FaultProfile::Assumed).then_some(FaultMenu { tasks: false, ..FaultMenu::crashes_only() })
    }

    fn configure(seed: u64, _world: &WorldConfig) -> Config {
        let mut rng = DeterministicRng::stream(seed, "fjall");
        Config {
            key_count: [1, 4, 16, 64][rng.index(4)],
            value_len_max: [8, 64, 512][rng.index(3)],
            memtable_bytes: [4 * 1024, 16 * 1024, 64 * 1024][rng.index(3)],
            put: 100,
            delete: rng.range_inclusive(0, 30),
            get: rng.range_inclusive(10, 60),
        }
    }

    fn validate_config(config: &Config) -> Result<(), String> {
        (config.key_count > 0).then_some(()).ok_or_else(|| "key_count must be at least 1".into())
    }

    fn new(env: &SimEnv, config: &Config) -> Self {
        Self { open: None, env: env.clone(), config: config.clone(), model: KeyModel::new() }
    }

    fn open(&mut self, env: &SimEnv) -> Result<(), SystemError> {
        let (entered, dir) = enter(env);
        self.open = Some(open_db(&dir, &self.config).map_err(|error| system_error(&error))?);
        // fjall creates its directory and syncs it, but not the entry naming it in the parent: on a model that
        // keeps directory operations apart (posix, page) a power cut can take the whole database away, with every
        // acknowledged write (seed 9, ADR-0174's triage). Making the application's own directory durable is the
        // caller's part here, so the checks below are about what fjall promises inside its directory.
        sync_parent(&entered.dir()).map_err(|error| SystemError::new("io", error))?;
        Ok(())
    }

    fn drop_system(&mut self) {
        let _entered = enter(&self.env);
        self.open = None;
    }

    fn is_open(&self) -> bool {
        self.open.is_some()
    }

    fn recovered(&mut self, _world: &mut World) -> Result<Observation, Violation> {
        let _entered = enter(&self.env);
        let live_keys = self.verify_all("durability", FailureKind::Durability)?;
        Ok(Observation::Recovered { live_keys })
    }

    fn generate(&mut self, _world: &World, rng: &mut DeterministicRng, config: &Config) -> Op {
        let key = u32::try_from(rng.below(u64::from(config.key_count))).expect("below a u32");
        match rng.weighted(&[config.put, config.delete, config.get]) {
            0 => {
                let len = u32::try_from(rng.range_inclusive(8, u64::from(config.value_len_max.max(8)))).expect("fits");
                Op::Put { key, value: self.model.next_value(len) }
            }
            1 => Op::Delete { key },
            _ => Op::Get { key },
        }
    }

    fn apply(&mut self, world: &mut World, op: &Op) -> Result<Observed<Observation>, Violation> {
        let _entered = enter(&self.env);
        let open = self.open.as_ref().expect("the framework opens fjall before an operation");
        let (what, result, key, value) = match *op {
            Op::Put { key, value } => {
                let bytes = value_bytes(value);
                self.model.written(value, sig_of(&bytes));
                let result = open.items.insert(key_bytes(key), bytes.clone());
                ("insert", result, key, Some(sig_of(&bytes)))
            }
            Op::Delete { key } => ("remove", open.items.remove(key_bytes(key)), key, None),
            Op::Get { key } => {
                let actual = self.read(key).map_err(|error| {
                    Violation::new("oracle.read_failed", FailureKind::Safety, "a read succeeds", error.to_string())
                })?;
                let value = self.model.judge(key, actual, "oracle", FailureKind::Safety)?;
                return Ok(Observed::Op(Observation::Value { value }));
            }
        };
        let result = result.and_then(|()| open.db.persist(PersistMode::SyncAll));
        match result {
            Ok(()) => {
                self.model.acknowledged(key, value);
                Ok(Observed::Op(Observation::Ok))
            }
            Err(error) => {
                self.model.in_flight(key, value);
                world.count("in_flight_writes");
                world.tolerate(what, &system_error(&error))
            }
        }
    }

    fn healthy(&mut self, world: &mut World) -> Result<(), Violation> {
        let _entered = enter(&self.env);
        self.verify_all("liveness", FailureKind::Liveness)?;
        // The C library calls the world answered, by function (`interposed.pthread_create` counts fjall's threads),
        // as coverage counters, so a run's and a swarm's summary show what the interposition saw.
        for (call, count) in interpose::stats().map(|stats| stats.calls).unwrap_or_default() {
            world.add(&format!("interposed.{call}"), count);
        }
        Ok(())
    }

    fn fault_sites(&self, env: &SimEnv) -> Vec<FaultSite> {
        let files = env.files().into_iter().filter(|file| in_dir(&file.path, &format!("/{DIR}")));
        files.map(|file| FaultSite { path: file.path, len_bytes: file.current_len, flippable: false }).collect()
    }

    fn crash_places(&self, _step: Option<&Step<Op>>, io: Io, _path: &Path) -> Vec<&'static str> {
        match io {
            Io::Write => vec!["crash.mid_write"],
            Io::Sync => vec!["crash.mid_sync"],
            _ => Vec::new(),
        }
    }

    fn required_coverage(_world: &WorldConfig, _config: &Config) -> Vec<String> {
        Vec::new()
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
}

/// Open the database at `dir` with this crate's options, on whatever calls reach (the host's disk when no world is
/// bound), and list the keyspace `items`: `keyspaces: N`, then one `KEY len=L` line per key, in key order.
pub fn open_and_list(dir: &Path) -> fjall::Result<Vec<String>> {
    let config = Config { key_count: 1, value_len_max: 8, memtable_bytes: 64 * 1024, put: 1, delete: 0, get: 0 };
    let open = open_db(dir, &config)?;
    let mut lines = vec![format!("keyspaces: {}", open.db.keyspace_count())];
    for pair in open.items.iter() {
        let (key, value) = pair.into_inner()?;
        lines.push(format!("{} len={}", String::from_utf8_lossy(&key), value.len()));
    }
    Ok(lines)
}
