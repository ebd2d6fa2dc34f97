//! `SimEnv`: a simulated world owned by one seed (ADR-0004, ADR-0005).
//!
//! A cheap `Clone` handle to one world: a virtual clock starting at 0, a disk that keeps durable and volatile
//! state apart (see [`disk`]), seeded faults keyed by (seed, file, that file's operation index, kind), crashes
//! that can land inside an operation ([`SimEnv::crash_at_io`]), and a scheduler that runs background tasks only
//! when stepped. Driven from one OS thread only (asserted).

mod disk;
mod faults;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::Duration;

use self::disk::{CrashDecisions, Disk, InodeId, Node, PendingData, WriteFate, is_root, parent_of, write_into};
pub use self::faults::{ExplicitFault, FaultConfig, FaultKeying, FaultKind, FaultRecord};
use self::faults::{detail, fires, tag};
use crate::random::{DeterministicRng, StableHasher, chance_ppm, hash_bytes, keyed};
use crate::{Env, Error, File, Op, OpenOptions, Result, SECTOR_SIZE_BYTES, Task, TaskHandle, TaskStep};

/// The fault log keeps at most this many records; later faults are only counted.
pub const FAULT_LOG_MAX: usize = 100_000;
/// A task waited on inline must finish within this many steps, or it is livelocked (a bug: panic).
pub const TASK_INLINE_STEPS_MAX: u64 = 10_000_000;
/// How far a misdirected write can land from its target, in sectors.
pub const MISDIRECT_SECTORS_MAX: u64 = 8;

/// One file of the simulated disk, for checkers and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileReport {
    pub path: PathBuf,
    /// Length of what would survive a crash that drops every pending operation (None: the name itself is not
    /// durable yet).
    pub durable_len: Option<u64>,
    pub current_len: u64,
    pub pending_operations: usize,
}

/// A handle to one simulated world. See the module docs.
#[derive(Clone)]
pub struct SimEnv {
    world: Arc<Mutex<World>>,
}

struct TaskSlot {
    name: String,
    task: Option<Task>,
}

struct PathInfo {
    hash: u64,
    operations: u64,
    /// Syncs of this path so far (its sync epoch, for [`FaultKeying::OffsetSyncEpoch`]).
    syncs: u64,
    /// Operations at each (offset, is `set_len`) in this sync epoch, so that a retry of the same write gets a
    /// fresh decision (cleared by each sync; at most one entry per distinct offset).
    epoch_visits: BTreeMap<(u64, bool), u64>,
}

/// The offset a sync is keyed at under [`FaultKeying::OffsetSyncEpoch`] (no read or write can start there).
const SYNC_KEY_OFFSET: u64 = u64::MAX;

struct World {
    seed: u64,
    owner: Option<ThreadId>,
    clock_nanos: u64,
    clock_reads: u64,
    engine_rng: DeterministicRng,
    scheduler_rng: DeterministicRng,
    config: FaultConfig,
    disk: Disk,
    path_ids: BTreeMap<PathBuf, usize>,
    paths: Vec<PathInfo>,
    epoch: u64,
    halted: bool,
    io_count: u64,
    crash_at_io: Option<u64>,
    crash_count: u64,
    last_crash: Option<(Op, PathBuf)>,
    step: u64,
    fault_log: Vec<FaultRecord>,
    fault_counts: BTreeMap<FaultKind, u64>,
    fail_next_sync: BTreeSet<PathBuf>,
    fail_next_write: BTreeSet<PathBuf>,
    tasks: BTreeMap<u64, TaskSlot>,
    /// Tasks a crash cancelled, dropped only once the world's lock is released: a task may own handles and locks
    /// whose drops lock the world.
    cancelled: Vec<Task>,
    next_task_id: u64,
    locks: BTreeSet<PathBuf>,
    buggify_enabled: bool,
    buggify_reached: BTreeMap<&'static str, u64>,
    buggify_fired: BTreeMap<&'static str, u64>,
}

impl fmt::Debug for SimEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let world = self.world.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f.debug_struct("SimEnv").field("seed", &world.seed).field("epoch", &world.epoch).finish_non_exhaustive()
    }
}

impl SimEnv {
    /// A new world for `seed`, with no faults (crashes still lose unsynced state).
    pub fn new(seed: u64) -> Self {
        Self::with_faults(seed, FaultConfig::default())
    }

    /// A new world for `seed` with the given fault probabilities.
    pub fn with_faults(seed: u64, config: FaultConfig) -> Self {
        let world = World {
            seed,
            owner: None,
            clock_nanos: 0,
            clock_reads: 0,
            engine_rng: DeterministicRng::stream(seed, "engine"),
            scheduler_rng: DeterministicRng::stream(seed, "scheduler"),
            config,
            disk: Disk::default(),
            path_ids: BTreeMap::new(),
            paths: Vec::new(),
            epoch: 0,
            halted: false,
            io_count: 0,
            crash_at_io: None,
            crash_count: 0,
            last_crash: None,
            step: 0,
            fault_log: Vec::new(),
            fault_counts: BTreeMap::new(),
            fail_next_sync: BTreeSet::new(),
            fail_next_write: BTreeSet::new(),
            tasks: BTreeMap::new(),
            cancelled: Vec::new(),
            next_task_id: 1,
            locks: BTreeSet::new(),
            buggify_enabled: true,
            buggify_reached: BTreeMap::new(),
            buggify_fired: BTreeMap::new(),
        };
        Self { world: Arc::new(Mutex::new(world)) }
    }

    fn lock_world(&self) -> MutexGuard<'_, World> {
        let mut world = self.world.lock().expect("SimEnv world poisoned by an earlier panic");
        world.assert_owner();
        world
    }

    /// The seed this world was made from.
    pub fn seed(&self) -> u64 {
        self.lock_world().seed
    }

    // ---- crashes -----------------------------------------------------------------------------------------------

    /// Cut the power now and restart: volatile state is kept, dropped or torn (ADR-0004), every handle and task
    /// from before is dead, locks are released. A new instance opened afterwards sees the crash image.
    pub fn crash(&self) {
        let cancelled = {
            let mut world = self.lock_world();
            world.apply_crash();
            world.last_crash = None;
            world.halted = false;
            std::mem::take(&mut world.cancelled)
        };
        drop(cancelled);
    }

    /// Arm a crash at the `k`-th IO call from now (`k >= 1`): that call fails with [`Error::Crashed`], the crash
    /// is applied, and every later IO fails until [`SimEnv::restart`].
    pub fn crash_at_io(&self, k: u64) {
        assert!(k >= 1, "crash_at_io counts from 1");
        let mut world = self.lock_world();
        world.crash_at_io = Some(world.io_count + k);
    }

    /// Disarm a pending [`SimEnv::crash_at_io`].
    pub fn disarm_crash(&self) {
        self.lock_world().crash_at_io = None;
    }

    /// True while an armed crash has fired and the power is still off.
    pub fn is_halted(&self) -> bool {
        self.lock_world().halted
    }

    /// Power back on after an armed crash fired. A no-op when not halted.
    pub fn restart(&self) {
        let cancelled = {
            let mut world = self.lock_world();
            world.halted = false;
            std::mem::take(&mut world.cancelled)
        };
        drop(cancelled);
    }

    /// How many crashes this world has had.
    pub fn crash_count(&self) -> u64 {
        self.lock_world().crash_count
    }

    /// Where the last armed crash landed: the operation and path of the IO call it cut (None after an explicit
    /// [`SimEnv::crash`]).
    pub fn last_crash(&self) -> Option<(Op, PathBuf)> {
        self.lock_world().last_crash.clone()
    }

    /// How many IO calls have been made (the unit of [`SimEnv::crash_at_io`]).
    pub fn io_count(&self) -> u64 {
        self.lock_world().io_count
    }

    // ---- faults ------------------------------------------------------------------------------------------------

    /// Replace the fault probabilities (the simulator turns faults off for its liveness phase).
    pub fn set_fault_config(&self, config: FaultConfig) {
        self.lock_world().config = config;
    }

    /// The current fault probabilities.
    pub fn fault_config(&self) -> FaultConfig {
        self.lock_world().config.clone()
    }

    /// Turn BUGGIFY on or off for the rest of the run (sites stay enabled or not as the seed chose).
    pub fn set_buggify(&self, enabled: bool) {
        self.lock_world().buggify_enabled = enabled;
    }

    /// Inject a fault now (an explicit schedule step).
    pub fn inject(&self, fault: ExplicitFault) {
        let mut world = self.lock_world();
        match fault {
            ExplicitFault::FailNextSync { path } => {
                world.fail_next_sync.insert(path);
            }
            ExplicitFault::FailNextWrite { path } => {
                world.fail_next_write.insert(path);
            }
            ExplicitFault::FlipBit { path, offset } => world.flip_durable_bit(&path, offset),
        }
    }

    /// Tell the world which simulator step is running (recorded in the fault log).
    pub fn set_step(&self, step: u64) {
        self.lock_world().step = step;
    }

    /// Every fault that fired, in order (at most [`FAULT_LOG_MAX`]).
    pub fn fault_log(&self) -> Vec<FaultRecord> {
        self.lock_world().fault_log.clone()
    }

    /// How many faults of each kind fired.
    pub fn fault_counts(&self) -> BTreeMap<FaultKind, u64> {
        self.lock_world().fault_counts.clone()
    }

    /// BUGGIFY sites reached and how often each fired.
    pub fn buggify_counts(&self) -> BTreeMap<&'static str, (u64, u64)> {
        let world = self.lock_world();
        world
            .buggify_reached
            .iter()
            .map(|(&site, &reached)| (site, (reached, world.buggify_fired.get(site).copied().unwrap_or(0))))
            .collect()
    }

    // ---- introspection -----------------------------------------------------------------------------------------

    /// Every file in the current namespace with its durable and current sizes, sorted by path.
    pub fn files(&self) -> Vec<FileReport> {
        let world = self.lock_world();
        world
            .disk
            .current
            .iter()
            .filter_map(|(path, node)| match node {
                Node::File(id) => {
                    let inode = &world.disk.inodes[id];
                    let durably_named = world.disk.durable.get(path) == Some(node);
                    Some(FileReport {
                        path: path.clone(),
                        durable_len: durably_named.then_some(inode.durable.len() as u64),
                        current_len: inode.current.len() as u64,
                        pending_operations: inode.pending.len(),
                    })
                }
                Node::Dir => None,
            })
            .collect()
    }

    /// The bytes a read of `path` sees now (None if there is no such file).
    pub fn read_current(&self, path: &Path) -> Option<Vec<u8>> {
        let world = self.lock_world();
        match world.disk.current.get(path) {
            Some(Node::File(id)) => Some(world.disk.inodes[id].current.clone()),
            _ => None,
        }
    }

    /// The bytes of `path` that are durable: what a crash that drops every pending operation leaves.
    pub fn read_durable(&self, path: &Path) -> Option<Vec<u8>> {
        let world = self.lock_world();
        match world.disk.durable.get(path) {
            Some(Node::File(id)) => Some(world.disk.inodes[id].durable.clone()),
            _ => None,
        }
    }

    /// A stable hash of the whole disk image, durable and current, names and bytes.
    pub fn disk_digest(&self) -> u64 {
        use std::hash::Hasher;
        let world = self.lock_world();
        let mut hasher = StableHasher::new();
        for (label, namespace, durable) in [(1u64, &world.disk.durable, true), (2u64, &world.disk.current, false)] {
            hasher.write_u64(label);
            for (path, node) in namespace {
                hasher.write(path.as_os_str().as_encoded_bytes());
                match node {
                    Node::Dir => hasher.write_u64(0),
                    Node::File(id) => {
                        let inode = &world.disk.inodes[id];
                        let bytes = if durable { &inode.durable } else { &inode.current };
                        hasher.write_u64(bytes.len() as u64 + 1);
                        hasher.write(bytes);
                    }
                }
            }
        }
        hasher.finish()
    }

    // ---- scheduling --------------------------------------------------------------------------------------------

    /// Tasks that can be stepped, as (id, name), by id.
    pub fn runnable_tasks(&self) -> Vec<(u64, String)> {
        let world = self.lock_world();
        world.tasks.iter().filter(|(_, slot)| slot.task.is_some()).map(|(&id, slot)| (id, slot.name.clone())).collect()
    }

    /// Run one step of task `id`. None if there is no such runnable task.
    pub fn step_task(&self, id: u64) -> Option<TaskStep> {
        let (mut task, epoch) = {
            let mut world = self.lock_world();
            let epoch = world.epoch;
            let slot = world.tasks.get_mut(&id)?;
            (slot.task.take()?, epoch)
        };
        let step = task();
        let mut world = self.lock_world();
        if world.epoch != epoch {
            // A crash during the step cancelled every task, this one included.
            return Some(TaskStep::Done);
        }
        match step {
            TaskStep::Done => {
                let removed = world.tasks.remove(&id);
                assert!(removed.is_some(), "finished task {id} vanished");
            }
            TaskStep::Continue => {
                let slot = world.tasks.get_mut(&id).expect("running task vanished");
                assert!(slot.task.is_none(), "task {id} stepped twice at once");
                slot.task = Some(task);
            }
        }
        Some(step)
    }

    /// Step one runnable task chosen by the seed's scheduling stream: (id, name, what it reported).
    pub fn step_random_task(&self) -> Option<(u64, String, TaskStep)> {
        let (id, name) = {
            let mut world = self.lock_world();
            let runnable: Vec<(u64, String)> = world
                .tasks
                .iter()
                .filter(|(_, slot)| slot.task.is_some())
                .map(|(&id, slot)| (id, slot.name.clone()))
                .collect();
            if runnable.is_empty() {
                return None;
            }
            let index = world.scheduler_rng.index(runnable.len());
            runnable[index].clone()
        };
        let step = self.step_task(id)?;
        Some((id, name, step))
    }

    /// Step tasks until none is runnable or `steps_max` steps ran; returns the steps run.
    pub fn run_tasks(&self, steps_max: u64) -> u64 {
        let mut steps = 0;
        while steps < steps_max && self.step_random_task().is_some() {
            steps += 1;
        }
        steps
    }

    /// Advance the virtual clock.
    pub fn advance_clock(&self, duration: Duration) {
        let mut world = self.lock_world();
        world.clock_nanos = world.clock_nanos.saturating_add(duration_nanos(duration));
    }
}

fn duration_nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Keyed crash decisions: pure functions of (seed, crash number, the operation's stable key).
struct KeyedCrash<'a> {
    seed: u64,
    crash: u64,
    config: &'a FaultConfig,
}

impl CrashDecisions for KeyedCrash<'_> {
    fn keep_meta(&mut self, key: u64) -> bool {
        let value = keyed(&[self.seed, tag::CRASH_META, self.crash, key]);
        chance_ppm(self.config.crash_metadata_kept_ppm, value)
    }

    fn write_fate(&mut self, key: u64) -> WriteFate {
        let value = keyed(&[self.seed, tag::CRASH_WRITE, self.crash, key]);
        if chance_ppm(self.config.crash_write_kept_ppm, value) {
            WriteFate::Kept
        } else if (value >> 40) & 1 == 0 {
            WriteFate::Dropped
        } else {
            WriteFate::Torn
        }
    }

    fn keep_sector(&mut self, key: u64, sector: u64) -> bool {
        keyed(&[self.seed, tag::CRASH_SECTOR, self.crash, key, sector]) & 1 == 0
    }

    fn keep_set_len(&mut self, key: u64) -> bool {
        keyed(&[self.seed, tag::CRASH_SET_LEN, self.crash, key]) & 1 == 0
    }

    fn garble_sector(&mut self, key: u64, sector: u64) -> Option<u64> {
        let value = keyed(&[self.seed, tag::CRASH_GARBLE, self.crash, key, sector]);
        chance_ppm(self.config.crash_torn_garbage_ppm, value).then(|| keyed(&[value, tag::DETAIL]))
    }
}

impl World {
    fn assert_owner(&mut self) {
        let me = std::thread::current().id();
        match self.owner {
            None => self.owner = Some(me),
            Some(owner) => assert_eq!(owner, me, "SimEnv driven from a second OS thread: determinism is lost"),
        }
    }

    fn log_fault(&mut self, kind: FaultKind, file: &Path, offset: u64) {
        *self.fault_counts.entry(kind).or_insert(0) += 1;
        if self.fault_log.len() < FAULT_LOG_MAX {
            self.fault_log.push(FaultRecord { step: self.step, file: file.to_path_buf(), offset, kind });
        }
    }

    /// The gate every IO passes: stale handles, power off, and an armed crash.
    fn begin_io(&mut self, op: Op, path: &Path, handle_epoch: Option<u64>) -> Result<()> {
        if handle_epoch.is_some_and(|epoch| epoch != self.epoch) {
            return Err(Error::StaleHandle { op, path: path.to_path_buf() });
        }
        if self.halted {
            return Err(Error::Crashed { op, path: path.to_path_buf() });
        }
        self.io_count += 1;
        if self.crash_at_io.is_some_and(|at| self.io_count >= at) {
            self.apply_crash();
            self.last_crash = Some((op, path.to_path_buf()));
            self.halted = true;
            return Err(Error::Crashed { op, path: path.to_path_buf() });
        }
        Ok(())
    }

    fn apply_crash(&mut self) {
        let mut names: BTreeMap<InodeId, PathBuf> = BTreeMap::new();
        for (path, node) in self.disk.durable.iter().chain(self.disk.current.iter()) {
            if let Node::File(id) = node {
                names.insert(*id, path.clone());
            }
        }
        let config = self.config.clone();
        let mut decisions = KeyedCrash { seed: self.seed, crash: self.crash_count, config: &config };
        let effects = self.disk.crash(&mut decisions);
        for path in &effects.meta_dropped {
            self.log_fault(FaultKind::CrashDroppedMetadata, path, 0);
        }
        for (kind, list) in [
            (FaultKind::CrashDroppedWrite, &effects.writes_dropped),
            (FaultKind::CrashTornWrite, &effects.writes_torn),
            (FaultKind::CrashGarbledSector, &effects.sectors_garbled),
        ] {
            for (inode, offset) in list {
                let path = names.get(inode).cloned().unwrap_or_else(|| PathBuf::from("<unnamed>"));
                self.log_fault(kind, &path, *offset);
            }
        }
        self.epoch += 1;
        self.crash_count += 1;
        self.crash_at_io = None;
        let cancelled = std::mem::take(&mut self.tasks);
        self.cancelled.extend(cancelled.into_values().filter_map(|slot| slot.task));
        self.locks.clear();
        assert!(self.disk.pending_meta.is_empty(), "crash left pending metadata");
    }

    fn path_id(&mut self, path: &Path) -> usize {
        if let Some(&id) = self.path_ids.get(path) {
            return id;
        }
        let id = self.paths.len();
        self.paths.push(PathInfo {
            hash: hash_bytes(path.as_os_str().as_encoded_bytes()),
            operations: 0,
            syncs: 0,
            epoch_visits: BTreeMap::new(),
        });
        self.path_ids.insert(path.to_path_buf(), id);
        id
    }

    /// The next operation index of a file, and its path hash: the keys of every fault decision on it.
    fn next_operation(&mut self, path_id: usize) -> (u64, u64) {
        let info = &mut self.paths[path_id];
        let index = info.operations;
        info.operations += 1;
        (info.hash, index)
    }

    /// The keys of a fault decision on a file's data (ADR-0039): its path hash, and either the file's next operation
    /// index or (offset, sync epoch, how many operations at that offset this epoch has seen), by the configured
    /// [`FaultKeying`]. `set_len` passes `is_set_len` so that it
    /// never shares a key with a write at the same offset.
    fn data_key(&mut self, path_id: usize, offset: u64, is_set_len: bool) -> (u64, u64) {
        let (path_hash, op_index) = self.next_operation(path_id);
        match self.config.keying {
            FaultKeying::OperationIndex => (path_hash, op_index),
            FaultKeying::OffsetSyncEpoch => {
                let info = &mut self.paths[path_id];
                let visit = info.epoch_visits.entry((offset, is_set_len)).or_insert(0);
                let nth = *visit;
                *visit += 1;
                (path_hash, keyed(&[tag::OFFSET_EPOCH, u64::from(is_set_len), offset, info.syncs, nth]))
            }
        }
    }

    /// The keys of a sync, then the file's sync epoch advances (whether the sync succeeds or not).
    fn sync_key(&mut self, path_id: usize) -> (u64, u64) {
        let key = self.data_key(path_id, SYNC_KEY_OFFSET, false);
        let info = &mut self.paths[path_id];
        info.syncs += 1;
        info.epoch_visits.clear();
        debug_assert!(info.syncs <= info.operations, "more syncs than operations");
        key
    }

    /// The stable key of a metadata operation on `path`: its path and that path's operation index, so removing
    /// an unrelated step does not change which metadata operations a crash keeps.
    fn meta_key(&mut self, path: &Path) -> u64 {
        let path_id = self.path_id(path);
        let (path_hash, op_index) = self.next_operation(path_id);
        keyed(&[path_hash, op_index])
    }

    fn fires(&self, kind: FaultKind, path_hash: u64, op_index: u64) -> bool {
        fires(self.seed, &self.config, kind, path_hash, op_index)
    }

    fn maybe_latency(&mut self, path: &Path, path_hash: u64, op_index: u64) {
        if self.fires(FaultKind::Latency, path_hash, op_index) {
            let max = self.config.latency_nanos_max.max(1);
            let nanos = 1 + detail(self.seed, FaultKind::Latency, path_hash, op_index) % max;
            self.clock_nanos = self.clock_nanos.saturating_add(nanos);
            self.log_fault(FaultKind::Latency, path, 0);
        }
    }

    fn flip_durable_bit(&mut self, path: &Path, offset: u64) {
        let Some(Node::File(id)) = self.disk.current.get(path).copied() else { return };
        let inode = self.disk.inodes.get_mut(&id).expect("named inode exists");
        let Ok(index) = usize::try_from(offset) else { return };
        let mut flipped = false;
        if index < inode.durable.len() {
            inode.durable[index] ^= 1;
            flipped = true;
        }
        if index < inode.current.len() {
            inode.current[index] ^= 1;
            flipped = true;
        }
        if flipped {
            self.log_fault(FaultKind::ExplicitCorruption, path, offset);
        }
    }

    fn current_dir_exists(&self, path: &Path) -> bool {
        self.disk.is_dir(path)
    }
}

/// An open file of the simulated disk. Dead (every call errors) after a crash.
pub struct SimFile {
    world: Arc<Mutex<World>>,
    inode: InodeId,
    path: PathBuf,
    path_id: usize,
    epoch: u64,
    writable: bool,
}

impl fmt::Debug for SimFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimFile").field("path", &self.path).field("epoch", &self.epoch).finish_non_exhaustive()
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut world = self.world.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if world.epoch == self.epoch
            && let Some(inode) = world.disk.inodes.get_mut(&self.inode)
        {
            assert!(inode.open_handles > 0, "open handle count underflow");
            inode.open_handles -= 1;
        }
    }
}

impl SimFile {
    fn lock(&self) -> MutexGuard<'_, World> {
        let mut world = self.world.lock().expect("SimEnv world poisoned by an earlier panic");
        world.assert_owner();
        world
    }

    fn io_error(&self, op: Op, what: &str) -> Error {
        Error::Io { op, path: self.path.clone(), message: format!("injected {what}") }
    }
}

/// Garble the bytes of latent sectors inside a read: a bad sector reads back as garbage, every time.
fn garble_latent(latent: &BTreeSet<u64>, offset: u64, buf: &mut [u8]) {
    let end = offset + buf.len() as u64;
    for &sector in latent.range(offset / SECTOR_SIZE_BYTES..=end.saturating_sub(1) / SECTOR_SIZE_BYTES) {
        let start = (sector * SECTOR_SIZE_BYTES).max(offset);
        let stop = ((sector + 1) * SECTOR_SIZE_BYTES).min(end);
        for position in start..stop {
            let index = usize::try_from(position - offset).expect("index fits");
            buf[index] = !buf[index] ^ 0x5a;
        }
    }
}

impl File for SimFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let mut world = self.lock();
        world.begin_io(Op::Read, &self.path, Some(self.epoch))?;
        let (path_hash, op_index) = world.data_key(self.path_id, offset, false);
        world.maybe_latency(&self.path, path_hash, op_index);
        if world.fires(FaultKind::ReadError, path_hash, op_index) {
            world.log_fault(FaultKind::ReadError, &self.path, offset);
            return Err(self.io_error(Op::Read, "read error"));
        }
        let inode = world.disk.inodes.get(&self.inode).expect("open inode exists");
        let len = inode.current.len() as u64;
        if offset >= len {
            return Ok(0);
        }
        let start = usize::try_from(offset).expect("offset fits");
        let count = buf.len().min(inode.current.len() - start);
        buf[..count].copy_from_slice(&inode.current[start..start + count]);
        if !inode.latent_sectors.is_empty() {
            garble_latent(&inode.latent_sectors, offset, &mut buf[..count]);
        }
        if count > 0 && world.fires(FaultKind::ReadCorruption, path_hash, op_index) {
            let bit = detail(world.seed, FaultKind::ReadCorruption, path_hash, op_index) % (count as u64 * 8);
            buf[(bit / 8) as usize] ^= 1 << (bit % 8);
            world.log_fault(FaultKind::ReadCorruption, &self.path, offset + bit / 8);
        }
        Ok(count)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<usize> {
        let mut world = self.lock();
        world.begin_io(Op::Write, &self.path, Some(self.epoch))?;
        if !self.writable {
            return Err(Error::InvalidInput {
                op: Op::Write,
                path: self.path.clone(),
                message: "handle opened read-only".into(),
            });
        }
        let (path_hash, op_index) = world.data_key(self.path_id, offset, false);
        world.maybe_latency(&self.path, path_hash, op_index);
        if world.fail_next_write.remove(&self.path) {
            world.log_fault(FaultKind::ExplicitWriteError, &self.path, offset);
            return Err(self.io_error(Op::Write, "write error (explicit)"));
        }
        if world.fires(FaultKind::WriteError, path_hash, op_index) {
            world.log_fault(FaultKind::WriteError, &self.path, offset);
            return Err(self.io_error(Op::Write, "write error"));
        }
        let current_len = world.disk.inodes[&self.inode].current.len() as u64;
        let growth = (offset + data.len() as u64).saturating_sub(current_len);
        if let Some(quota) = world.config.disk_quota_bytes
            && growth > 0
            && world.disk.used_bytes() + growth > quota
        {
            world.log_fault(FaultKind::DiskFull, &self.path, offset);
            return Err(Error::NoSpace { op: Op::Write, path: self.path.clone() });
        }
        let mut count = data.len();
        if count > 1 && world.fires(FaultKind::ShortWrite, path_hash, op_index) {
            count = 1 + (detail(world.seed, FaultKind::ShortWrite, path_hash, op_index) % (count as u64 - 1)) as usize;
            world.log_fault(FaultKind::ShortWrite, &self.path, offset);
        }
        let mut target = offset;
        if world.fires(FaultKind::MisdirectedWrite, path_hash, op_index) {
            let value = detail(world.seed, FaultKind::MisdirectedWrite, path_hash, op_index);
            let shift = (1 + value % MISDIRECT_SECTORS_MAX) * SECTOR_SIZE_BYTES;
            target = if (value >> 32) & 1 == 0 || offset < shift { offset + shift } else { offset - shift };
            world.log_fault(FaultKind::MisdirectedWrite, &self.path, offset);
        }
        let written = &data[..count];
        let key = keyed(&[path_hash, op_index]);
        let latent = world.fires(FaultKind::LatentSector, path_hash, op_index);
        let seed = world.seed;
        let inode = world.disk.inodes.get_mut(&self.inode).expect("open inode exists");
        write_into(&mut inode.current, target, written);
        inode.pending.push(PendingData::Write { offset: target, data: written.to_vec(), key });
        let first_sector = target / SECTOR_SIZE_BYTES;
        let last_sector = (target + count as u64 - 1) / SECTOR_SIZE_BYTES;
        let rewritten: Vec<u64> = inode.latent_sectors.range(first_sector..=last_sector).copied().collect();
        for sector in rewritten {
            inode.latent_sectors.remove(&sector);
        }
        if latent {
            let span = last_sector - first_sector + 1;
            let sector = first_sector + detail(seed, FaultKind::LatentSector, path_hash, op_index) % span;
            inode.latent_sectors.insert(sector);
            world.log_fault(FaultKind::LatentSector, &self.path, sector * SECTOR_SIZE_BYTES);
        }
        Ok(count)
    }

    fn sync(&self) -> Result<()> {
        let mut world = self.lock();
        world.begin_io(Op::Sync, &self.path, Some(self.epoch))?;
        let (path_hash, op_index) = world.sync_key(self.path_id);
        world.maybe_latency(&self.path, path_hash, op_index);
        let explicit = world.fail_next_sync.remove(&self.path);
        if explicit || world.fires(FaultKind::FsyncError, path_hash, op_index) {
            let kind = if explicit { FaultKind::ExplicitSyncError } else { FaultKind::FsyncError };
            world.log_fault(kind, &self.path, 0);
            // As Linux does after a failed fsync: the unsynced data is gone.
            let inode = world.disk.inodes.get_mut(&self.inode).expect("open inode exists");
            inode.current = inode.durable.clone();
            inode.pending.clear();
            return Err(self.io_error(Op::Sync, "fsync error"));
        }
        let inode = world.disk.inodes.get_mut(&self.inode).expect("open inode exists");
        let mut last_write: Option<(usize, usize)> = None;
        for op in std::mem::take(&mut inode.pending) {
            match op {
                PendingData::Write { offset, data, .. } => {
                    write_into(&mut inode.durable, offset, &data);
                    last_write = Some((offset as usize, data.len()));
                }
                PendingData::SetLen { len, .. } => inode.durable.resize(len as usize, 0),
            }
        }
        assert_eq!(inode.durable.len(), inode.current.len(), "sync left durable and current lengths apart");
        // Paired check on what this sync applied (a whole-file compare would make every sync O(file size)).
        if let Some((start, len)) = last_write {
            let end = (start + len).min(inode.current.len());
            let start = start.min(end);
            assert!(inode.durable[start..end] == inode.current[start..end], "sync left durable and current apart");
        }
        Ok(())
    }

    fn set_len(&self, len_bytes: u64) -> Result<()> {
        let mut world = self.lock();
        world.begin_io(Op::SetLen, &self.path, Some(self.epoch))?;
        if !self.writable {
            return Err(Error::InvalidInput {
                op: Op::SetLen,
                path: self.path.clone(),
                message: "handle opened read-only".into(),
            });
        }
        let (path_hash, op_index) = world.data_key(self.path_id, len_bytes, true);
        let current_len = world.disk.inodes[&self.inode].current.len() as u64;
        if let Some(quota) = world.config.disk_quota_bytes
            && len_bytes > current_len
            && world.disk.used_bytes() + (len_bytes - current_len) > quota
        {
            world.log_fault(FaultKind::DiskFull, &self.path, current_len);
            return Err(Error::NoSpace { op: Op::SetLen, path: self.path.clone() });
        }
        let len = usize::try_from(len_bytes).map_err(|_| Error::InvalidInput {
            op: Op::SetLen,
            path: self.path.clone(),
            message: format!("length {len_bytes} does not fit in memory"),
        })?;
        let inode = world.disk.inodes.get_mut(&self.inode).expect("open inode exists");
        inode.current.resize(len, 0);
        inode.pending.push(PendingData::SetLen { len: len_bytes, key: keyed(&[path_hash, op_index]) });
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        let world = self.lock();
        if world.epoch != self.epoch {
            return Err(Error::StaleHandle { op: Op::Len, path: self.path.clone() });
        }
        if world.halted {
            return Err(Error::Crashed { op: Op::Len, path: self.path.clone() });
        }
        Ok(world.disk.inodes[&self.inode].current.len() as u64)
    }
}

/// A lock held in the simulated world; released on drop or by a crash.
pub struct SimLock {
    world: Arc<Mutex<World>>,
    path: PathBuf,
    epoch: u64,
}

impl fmt::Debug for SimLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimLock").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Drop for SimLock {
    fn drop(&mut self) {
        let mut world = self.world.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if world.epoch == self.epoch {
            world.locks.remove(&self.path);
        }
    }
}

impl Env for SimEnv {
    type File = SimFile;
    type Lock = SimLock;

    fn now(&self) -> Duration {
        let mut world = self.lock_world();
        let read = world.clock_reads;
        world.clock_reads += 1;
        let value = keyed(&[world.seed, tag::CLOCK, read]);
        if chance_ppm(world.config.clock_jump_ppm, value) {
            let jump = 1 + (value >> 20) % world.config.clock_jump_nanos_max.max(1);
            world.clock_nanos = world.clock_nanos.saturating_add(jump);
            world.log_fault(FaultKind::ClockJump, Path::new("<clock>"), 0);
        }
        Duration::from_nanos(world.clock_nanos)
    }

    fn sleep(&self, duration: Duration) {
        self.advance_clock(duration);
    }

    fn random_u64(&self) -> u64 {
        self.lock_world().engine_rng.next_u64()
    }

    fn open(&self, path: &Path, options: OpenOptions) -> Result<SimFile> {
        let mut world = self.lock_world();
        world.begin_io(Op::Open, path, None)?;
        if (options.create || options.truncate) && !options.write {
            // As std (and so RealEnv) does: creating or truncating needs write access.
            let message = "create or truncate without write access".to_string();
            return Err(Error::InvalidInput { op: Op::Open, path: path.into(), message });
        }
        let inode = match world.disk.lookup(path) {
            Some(Node::Dir) => {
                return Err(Error::InvalidInput { op: Op::Open, path: path.into(), message: "is a directory".into() });
            }
            Some(Node::File(_)) if options.create_new => {
                return Err(Error::AlreadyExists { op: Op::Open, path: path.into() });
            }
            Some(Node::File(inode)) => inode,
            None if !options.create => return Err(Error::NotFound { op: Op::Open, path: path.into() }),
            None if !world.current_dir_exists(&parent_of(path)) => {
                return Err(Error::NotFound { op: Op::Open, path: parent_of(path) });
            }
            None => {
                let key = world.meta_key(path);
                world.disk.create_file(path, key)
            }
        };
        let path_id = world.path_id(path);
        let epoch = world.epoch;
        if options.truncate && options.write && !world.disk.inodes[&inode].current.is_empty() {
            let (path_hash, op_index) = world.next_operation(path_id);
            let inode_state = world.disk.inodes.get_mut(&inode).expect("inode exists");
            inode_state.current.clear();
            inode_state.pending.push(PendingData::SetLen { len: 0, key: keyed(&[path_hash, op_index]) });
        }
        world.disk.inodes.get_mut(&inode).expect("inode exists").open_handles += 1;
        Ok(SimFile {
            world: Arc::clone(&self.world),
            inode,
            path: path.to_path_buf(),
            path_id,
            epoch,
            writable: options.write,
        })
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        let mut world = self.lock_world();
        world.begin_io(Op::CreateDir, path, None)?;
        let mut missing = Vec::new();
        let mut cursor = Some(path);
        while let Some(dir) = cursor {
            if is_root(dir) {
                break;
            }
            match world.disk.lookup(dir) {
                Some(Node::Dir) => break,
                Some(Node::File(_)) => {
                    return Err(Error::InvalidInput {
                        op: Op::CreateDir,
                        path: dir.into(),
                        message: "a file is in the way".into(),
                    });
                }
                None => missing.push(dir.to_path_buf()),
            }
            cursor = dir.parent();
        }
        for dir in missing.iter().rev() {
            let key = world.meta_key(dir);
            world.disk.mkdir(dir, key);
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<PathBuf>> {
        let mut world = self.lock_world();
        world.begin_io(Op::ListDir, path, None)?;
        if !world.current_dir_exists(path) {
            return Err(Error::NotFound { op: Op::ListDir, path: path.into() });
        }
        Ok(world.disk.list(path))
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        let world = self.lock_world();
        if world.halted {
            return Err(Error::Crashed { op: Op::Exists, path: path.into() });
        }
        Ok(world.disk.lookup(path).is_some())
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let mut world = self.lock_world();
        world.begin_io(Op::Remove, path, None)?;
        match world.disk.lookup(path) {
            Some(Node::File(_)) => {
                let key = world.meta_key(path);
                world.disk.remove(path, key);
                Ok(())
            }
            Some(Node::Dir) => {
                Err(Error::InvalidInput { op: Op::Remove, path: path.into(), message: "is a directory".into() })
            }
            None => Err(Error::NotFound { op: Op::Remove, path: path.into() }),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut world = self.lock_world();
        world.begin_io(Op::Rename, from, None)?;
        if parent_of(from) != parent_of(to) {
            return Err(Error::InvalidInput {
                op: Op::Rename,
                path: from.into(),
                message: format!("rename across directories to {} is not supported", to.display()),
            });
        }
        match (world.disk.lookup(from), world.disk.lookup(to)) {
            (Some(Node::File(_)), None | Some(Node::File(_))) => {
                let key = world.meta_key(to);
                world.disk.rename(from, to, key);
                Ok(())
            }
            (None, _) => Err(Error::NotFound { op: Op::Rename, path: from.into() }),
            _ => Err(Error::InvalidInput { op: Op::Rename, path: from.into(), message: "directory involved".into() }),
        }
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        let mut world = self.lock_world();
        world.begin_io(Op::SyncDir, path, None)?;
        if !world.current_dir_exists(path) {
            return Err(Error::NotFound { op: Op::SyncDir, path: path.into() });
        }
        world.disk.sync_dir(path);
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<SimLock> {
        let mut world = self.lock_world();
        world.begin_io(Op::Lock, path, None)?;
        if world.locks.contains(path) {
            return Err(Error::Locked { op: Op::Lock, path: path.into() });
        }
        match world.disk.lookup(path) {
            Some(Node::File(_)) => {}
            Some(Node::Dir) => {
                return Err(Error::InvalidInput { op: Op::Lock, path: path.into(), message: "is a directory".into() });
            }
            None if world.current_dir_exists(&parent_of(path)) => {
                let key = world.meta_key(path);
                world.disk.create_file(path, key);
            }
            None => return Err(Error::NotFound { op: Op::Lock, path: parent_of(path) }),
        }
        world.locks.insert(path.to_path_buf());
        Ok(SimLock { world: Arc::clone(&self.world), path: path.to_path_buf(), epoch: world.epoch })
    }

    fn spawn(&self, name: &str, task: Task) -> TaskHandle {
        let mut world = self.lock_world();
        let id = world.next_task_id;
        world.next_task_id += 1;
        world.tasks.insert(id, TaskSlot { name: name.to_string(), task: Some(task) });
        TaskHandle { id, name: name.to_string(), epoch: world.epoch }
    }

    fn wait(&self, handle: &TaskHandle) -> Result<()> {
        for _ in 0..TASK_INLINE_STEPS_MAX {
            {
                let world = self.lock_world();
                match world.tasks.get(&handle.id) {
                    None if handle.epoch == world.epoch => return Ok(()),
                    None => {
                        return Err(Error::TaskCancelled { op: Op::Wait, path: PathBuf::from(&handle.name) });
                    }
                    Some(slot) => {
                        assert!(slot.task.is_some(), "{handle:?} waits on itself or on a task running above it");
                    }
                }
            }
            self.step_task(handle.id);
        }
        panic!("{handle:?} did not finish within {TASK_INLINE_STEPS_MAX} steps: livelock");
    }

    fn is_finished(&self, handle: &TaskHandle) -> bool {
        !self.lock_world().tasks.contains_key(&handle.id)
    }

    fn buggify(&self, site: &'static str) -> bool {
        let mut world = self.lock_world();
        if !world.buggify_enabled || world.config.buggify_site_ppm == 0 {
            return false;
        }
        let site_hash = hash_bytes(site.as_bytes());
        if !chance_ppm(world.config.buggify_site_ppm, keyed(&[world.seed, tag::BUGGIFY_SITE, site_hash])) {
            return false;
        }
        let reached = world.buggify_reached.entry(site).or_insert(0);
        let index = *reached;
        *reached += 1;
        let fire = chance_ppm(world.config.buggify_fire_ppm, keyed(&[world.seed, tag::BUGGIFY_FIRE, site_hash, index]));
        if fire {
            *world.buggify_fired.entry(site).or_insert(0) += 1;
        }
        fire
    }

    fn is_simulated(&self) -> bool {
        true
    }
}
