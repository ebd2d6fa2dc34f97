//! `testbed-checkpointer`: a store whose checkpointer thread (`env::thread`, `env::sync`) writes a snapshot,
//! renames it into place, syncs the directory and then removes the log segments it covers by path: an order
//! that is correct on a real disk (ADR-0168). Before a crash stopped the world, a checkpointer paused inside
//! its `sync_dir` at a crash resumed while the framework dropped the store and removed segments whose covering
//! rename the crash had undone: a false `checkpointer.lost` finding.
//!
//! Layout under `/cp`: `seg-N` (one 8-byte record per put: its sequence number, each synced before the put is
//! acknowledged), `snap` (16 bytes: the last segment it covers, the last sequence it covers), `snap.tmp` while
//! one is written.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use holdfast::env::sim::SimFile;
use holdfast::env::sync::{Condvar, Mutex};
use holdfast::env::thread::JoinHandle;
use holdfast::env::{Env, File, OpenOptions, SimEnv};
use holdfast::{FailureKind, FaultMenu, FaultProfile, Observed, SystemError, Target, Violation, World, WorldConfig};
use serde::{Deserialize, Serialize};

const DIR: &str = "/cp";
const SNAP: &str = "/cp/snap";
const SNAP_TMP: &str = "/cp/snap.tmp";
/// The most segments a recovery reads (a store this small never has more).
const SEGMENTS_MAX: usize = 10_000;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum CheckpointOp {
    /// Append the next sequence number to the open segment and sync it.
    Put,
    /// Seal the open segment, start the next one, and ask the checkpointer to cover the sealed ones.
    Rotate,
}

/// What the checkpointer is asked and has done.
#[derive(Debug, Default)]
struct Requests {
    /// Cover every segment up to this one, and every sequence up to the second.
    pending: Option<(u64, u64)>,
    stop: bool,
}

struct Shared {
    requests: Mutex<Requests>,
    wake: Condvar,
}

/// The open store: its log segment and its checkpointer thread.
struct Store {
    shared: Arc<Shared>,
    checkpointer: Option<JoinHandle<()>>,
    segment: u64,
    log: SimFile,
}

impl Drop for Store {
    fn drop(&mut self) {
        self.shared.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner).stop = true;
        self.shared.wake.notify_all();
        if let Some(thread) = self.checkpointer.take() {
            let _ = thread.join();
        }
    }
}

fn segment_path(number: u64) -> PathBuf {
    Path::new(DIR).join(format!("seg-{number}"))
}

fn segment_number(path: &Path) -> Option<u64> {
    path.file_name()?.to_str()?.strip_prefix("seg-")?.parse().ok()
}

fn error(what: &str, error: impl std::fmt::Display) -> SystemError {
    SystemError::new("io", format!("{what}: {error}"))
}

/// The checkpointer's body: wait for a request, write the snapshot, rename it, sync the directory, remove the
/// covered segments. A failed call (the power is off) abandons the request.
fn checkpointer(env: SimEnv, shared: Arc<Shared>) {
    loop {
        let request = {
            let mut requests = shared.requests.lock().expect("requests");
            requests = shared.wake.wait_while(requests, |r| r.pending.is_none() && !r.stop).expect("requests");
            if requests.stop {
                return;
            }
            requests.pending.take()
        };
        if let Some((segment, sequence)) = request {
            let _ = checkpoint(&env, segment, sequence);
        }
    }
}

fn checkpoint(env: &SimEnv, segment: u64, sequence: u64) -> holdfast::env::Result<()> {
    let snap = env.open(Path::new(SNAP_TMP), OpenOptions::create_truncate())?;
    let mut bytes = segment.to_le_bytes().to_vec();
    bytes.extend_from_slice(&sequence.to_le_bytes());
    snap.write_all_at(0, &bytes)?;
    snap.sync()?;
    env.rename(Path::new(SNAP_TMP), Path::new(SNAP))?;
    env.sync_dir(Path::new(DIR))?;
    for path in env.list_dir(Path::new(DIR))? {
        if segment_number(&path).is_some_and(|number| number <= segment) {
            env.remove_file(&path)?;
        }
    }
    Ok(())
}

/// Recover: the snapshot's (segment, sequence), then every later segment's records that continue the sequence.
fn recover(env: &SimEnv) -> Result<(u64, u64), SystemError> {
    env.create_dir_all(Path::new(DIR)).map_err(|e| error("mkdir", e))?;
    env.sync_dir(Path::new("/")).map_err(|e| error("sync root", e))?;
    let (mut covered, mut sequence) = (0, 0);
    if env.exists(Path::new(SNAP)).map_err(|e| error("exists", e))? {
        let bytes = env.open(Path::new(SNAP), OpenOptions::read()).and_then(|f| f.read_all());
        let bytes = bytes.map_err(|e| error("read snap", e))?;
        let word = |at: usize| bytes.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        (covered, sequence) = word(0).zip(word(8)).ok_or_else(|| SystemError::corruption("snap", "short"))?;
    }
    let mut segments: Vec<u64> = env
        .list_dir(Path::new(DIR))
        .map_err(|e| error("list", e))?
        .iter()
        .filter_map(|path| segment_number(path))
        .collect();
    segments.sort_unstable();
    segments.truncate(SEGMENTS_MAX);
    for &number in segments.iter().filter(|&&number| number > covered) {
        let bytes = env.open(&segment_path(number), OpenOptions::read()).and_then(|f| f.read_all());
        for record in bytes.map_err(|e| error("read segment", e))?.chunks_exact(8) {
            if u64::from_le_bytes(record.try_into().expect("8 bytes")) == sequence + 1 {
                sequence += 1;
            }
        }
    }
    Ok((segments.last().copied().unwrap_or(0).max(covered), sequence))
}

/// Open a new segment numbered `number` (its name durable before any record lands in it).
fn new_segment(env: &SimEnv, number: u64) -> Result<SimFile, SystemError> {
    let log = env.open(&segment_path(number), OpenOptions::create_truncate()).map_err(|e| error("create", e))?;
    env.sync_dir(Path::new(DIR)).map_err(|e| error("sync_dir", e))?;
    Ok(log)
}

#[derive(Default)]
pub struct Checkpointer {
    env: Option<SimEnv>,
    store: Option<Store>,
    /// The last sequence acknowledged (synced), and the last one recovery found.
    acknowledged: u64,
    sequence: u64,
}

impl Target for Checkpointer {
    const NAME: &'static str = "testbed-checkpointer";
    const ABOUT: &'static str =
        "a test fixture: a checkpointer thread removes log segments by path after its directory sync (correct)";
    type Config = ();
    type Op = CheckpointOp;
    type Observation = u64;

    fn fault_menu(profile: FaultProfile) -> Option<FaultMenu> {
        (profile == FaultProfile::Assumed).then(|| FaultMenu { tasks: false, ..FaultMenu::crashes_only() })
    }

    fn configure(_seed: u64, _world: &WorldConfig) {}

    fn new(env: &SimEnv, _config: &()) -> Self {
        Self { env: Some(env.clone()), ..Self::default() }
    }

    fn open(&mut self, env: &SimEnv) -> Result<(), SystemError> {
        let (last_segment, sequence) = recover(env)?;
        let log = new_segment(env, last_segment + 1)?;
        let shared = Arc::new(Shared { requests: Mutex::new(Requests::default()), wake: Condvar::new() });
        let (thread_env, thread_shared) = (env.clone(), Arc::clone(&shared));
        let thread = holdfast::env::thread::spawn(env, "checkpointer", move || checkpointer(thread_env, thread_shared));
        self.store = Some(Store { shared, checkpointer: Some(thread), segment: last_segment + 1, log });
        self.sequence = sequence;
        Ok(())
    }

    fn drop_system(&mut self) {
        self.store = None;
    }

    fn is_open(&self) -> bool {
        self.store.is_some()
    }

    fn recovered(&mut self, _world: &mut World) -> Result<u64, Violation> {
        if self.sequence < self.acknowledged {
            let actual = format!("recovery found sequences up to {}", self.sequence);
            let expected = format!("every acknowledged sequence, up to {}", self.acknowledged);
            return Err(Violation::new("checkpointer.lost", FailureKind::Durability, expected, actual));
        }
        self.acknowledged = self.sequence;
        Ok(self.sequence)
    }

    fn generate(&mut self, _world: &World, rng: &mut holdfast::env::DeterministicRng, _config: &()) -> CheckpointOp {
        if rng.below(10) < 7 { CheckpointOp::Put } else { CheckpointOp::Rotate }
    }

    fn apply(&mut self, world: &mut World, op: &CheckpointOp) -> Result<Observed<u64>, Violation> {
        let env = self.env.clone().expect("built with an env");
        let store = self.store.as_mut().expect("applied only while open");
        let result = match op {
            CheckpointOp::Put => {
                let record = (self.sequence + 1).to_le_bytes();
                store.log.append(&record).and_then(|_| store.log.sync()).map_err(|e| error("put", e)).map(|()| {
                    self.sequence += 1;
                    self.acknowledged = self.sequence;
                })
            }
            CheckpointOp::Rotate => new_segment(&env, store.segment + 1).map(|log| {
                let sealed = store.segment;
                (store.segment, store.log) = (sealed + 1, log);
                store.shared.requests.lock().expect("requests").pending = Some((sealed, self.sequence));
                store.shared.wake.notify_all();
            }),
        };
        match result {
            Ok(()) => Ok(Observed::Op(self.sequence)),
            Err(error) => world.tolerate("checkpointer", &error),
        }
    }

    fn healthy(&mut self, _world: &mut World) -> Result<(), Violation> {
        Ok(())
    }
}
