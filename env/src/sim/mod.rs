//! `SimEnv`: a simulated world owned by one seed (ADR-0004, ADR-0005).
//!
//! A cheap `Clone` handle to one world: a virtual clock starting at 0, a disk that keeps durable and volatile
//! state apart (see `sim/disk.rs`), seeded faults keyed by (seed, file, that file's operation index, kind), crashes
//! that can land inside an operation ([`SimEnv::crash_at_io`]), and a scheduler that runs background tasks only
//! when stepped. Driven from one OS thread, and from the threads it starts with `env::thread::spawn`, which run one
//! at a time in an order the seed chooses (`threads`, ADR-0104); any other thread is refused (asserted).

//!
//! Files by component: `world` (the state behind every handle, the IO gate, fault keying, crashes), `file`
//! ([`SimFile`], where data faults fire), `scheduler` (background tasks), `env_impl` (`Env for SimEnv`), and the
//! pure `disk` model and `faults` configuration they share; a crash applies the world's persistence model
//! (`persistence`, ADR-0109) through `posix` (per write and sector) or `paged` (per page, and a journal).

mod admits;
mod budget;
mod cost;
mod disk;
pub(crate) mod driver;
mod env_impl;
mod faults;
mod file;
#[doc(hidden)]
pub mod foreign;
mod image;
mod names;
mod operator;
mod paged;
mod persistence;
mod posix;
mod power;
mod scheduler;
mod shape;
pub(crate) mod threads;
mod world;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

pub use self::budget::WorkBudgetExceeded;
pub use self::cost::{
    Cost, CostCounters, Device, DeviceCosts, IoKind, LatencyHistogram, WORK_COUNTERS_MAX, WORK_OVERFLOW_COUNTER,
};
use self::disk::Node;
pub use self::driver::on_world_thread;
pub use self::env_impl::SimLock;
pub use self::faults::{ExplicitFault, FaultConfig, FaultKeying, FaultKind, FaultRecord};
pub use self::file::SimFile;
pub use self::image::{CRASH_UNITS_LISTED_MAX, FileCrash};
pub use self::persistence::{
    CrashImage, DiskModel, PAGE_BYTES_DEFAULT, PAGE_BYTES_MAX, Persistence, SECTOR_BYTES_CHOICES,
};
pub use self::shape::{CRASH_SHAPE_MARKS_MAX, CrashShape, Fate, Marks};
use self::world::World;
use crate::Op;
use crate::random::StableHasher;

/// The fault log keeps at most this many records; later faults are only counted.
pub const FAULT_LOG_MAX: usize = 100_000;
/// A world classifies at most this many crashes (ADR-0173); later ones are not classified.
pub const CRASH_CLASSES_MAX: usize = 10_000;
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

/// A handle to a simulated world that does not keep it alive ([`SimEnv::downgrade`]): for a registry of worlds
/// that must not outlive them (the interposition layer's bindings, ADR-0163).
#[derive(Clone)]
pub struct WeakSimEnv {
    world: Weak<Mutex<World>>,
    fault_total: Arc<AtomicU64>,
}

impl fmt::Debug for WeakSimEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeakSimEnv").field("alive", &(self.world.strong_count() > 0)).finish_non_exhaustive()
    }
}

impl WeakSimEnv {
    /// The world, while any `SimEnv` handle to it (or an open `SimFile` of it) lives.
    pub fn upgrade(&self) -> Option<SimEnv> {
        Some(SimEnv { world: self.world.upgrade()?, fault_total: Arc::clone(&self.fault_total) })
    }
}

/// What a path names in a simulated world's current namespace ([`SimEnv::lookup_current`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeInfo {
    Dir,
    File { len_bytes: u64 },
}

/// A handle to one simulated world. See the module docs.
#[derive(Clone)]
pub struct SimEnv {
    world: Arc<Mutex<World>>,
    /// The world's fault total ([`SimEnv::fault_total`]), read without its lock.
    fault_total: Arc<AtomicU64>,
}

impl fmt::Debug for SimEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let world = threads::internal(|| self.world.lock()).unwrap_or_else(std::sync::PoisonError::into_inner);
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
        Self::with_model(seed, config, DiskModel::default())
    }

    /// A new world for `seed` with the given fault probabilities, persistence model and sector size (ADR-0109).
    ///
    /// Panics on a model that fails [`DiskModel::validate`] (the caller checks input first).
    pub fn with_model(seed: u64, config: FaultConfig, model: DiskModel) -> Self {
        model.validate().unwrap_or_else(|error| panic!("SimEnv::with_model: {error}"));
        let mut world = World::new(seed, config);
        world.disk.model = model;
        let fault_total = Arc::clone(&world.fault_total);
        Self { world: Arc::new(Mutex::new(world)), fault_total }
    }

    /// True when `self` and `other` are handles to the same world (clones of one `SimEnv`). Reads no state.
    pub fn same_world(&self, other: &SimEnv) -> bool {
        Arc::ptr_eq(&self.world, &other.world)
    }

    /// A handle that does not keep the world alive: [`WeakSimEnv::upgrade`] gives this `SimEnv` back while any
    /// other handle lives. Reads no state.
    pub fn downgrade(&self) -> WeakSimEnv {
        WeakSimEnv { world: Arc::downgrade(&self.world), fault_total: Arc::clone(&self.fault_total) }
    }

    /// Keep a [`CrashImage`] of the disk after each crash (the last one only), for `--export-image`.
    pub fn keep_crash_images(&self, keep: bool) {
        self.lock_world().keep_crash_image = keep;
    }

    /// The image the last crash left, when [`SimEnv::keep_crash_images`] is on.
    pub fn last_crash_image(&self) -> Option<CrashImage> {
        self.lock_world().last_crash_image.clone()
    }

    /// Give every later crash `shape` (ADR-0172) instead of keyed draws; `None` goes back to the draws.
    pub fn set_crash_shape(&self, shape: Option<CrashShape>) {
        self.lock_world().crash_shape = shape;
    }

    /// Classify every later crash's image by the persistence models that admit it (ADR-0173); off by default.
    pub fn classify_crashes(&self, on: bool) {
        self.lock_world().classify_crashes = on;
    }

    /// For each crash classified so far, in order: the models that admit its image, weakest first.
    pub fn crash_classes(&self) -> Vec<Vec<Persistence>> {
        self.lock_world().crash_classes.clone()
    }

    /// Record, for every later crash that keyed draws decide, the shape of what it kept (ADR-0172): what the
    /// shrinker pins. Changes no decision and no digest.
    pub fn record_crash_shapes(&self, on: bool) {
        self.lock_world().record_shapes = on;
    }

    /// The shapes recorded so far, each with the step its crash happened in ([`SimEnv::set_step`]).
    pub fn recorded_crash_shapes(&self) -> Vec<(u64, CrashShape)> {
        self.lock_world().recorded_shapes.clone()
    }

    /// The persistence model and sector size of this world.
    pub fn disk_model(&self) -> DiskModel {
        self.lock_world().disk.model.clone()
    }

    fn lock_world(&self) -> MutexGuard<'_, World> {
        driver::lock_owned(&self.world)
    }

    /// The seed this world was made from.
    pub fn seed(&self) -> u64 {
        self.lock_world().seed
    }

    // ---- crashes -----------------------------------------------------------------------------------------------

    /// Cut the power now and restart: volatile state is kept, dropped or torn (ADR-0004), every handle and task
    /// from before is dead, locks are released. A new instance opened afterwards sees the crash image.
    ///
    /// The same as [`SimEnv::cut_power`] then [`SimEnv::restart`] with nothing in between: the threads of the
    /// system that was running stay dead (ADR-0168).
    pub fn crash(&self) {
        self.cut_power();
        self.restart();
    }

    /// Arm a crash at the `k`-th IO call from now (`k >= 1`): that call fails with [`crate::Error::Crashed`], the crash
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

    /// Drop every explicit fault injected but not yet fired (a `FailNextSync` or `FailNextWrite` waiting for its
    /// file's next sync or write); returns how many were pending. Flipped bits are already on the disk and stay.
    pub fn cancel_pending_faults(&self) -> usize {
        let mut world = self.lock_world();
        let pending = world.fail_next_sync.len() + world.fail_next_write.len();
        world.fail_next_sync.clear();
        world.fail_next_write.clear();
        pending
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

    /// Tell the world which simulator step is running (recorded in the fault log; the choices between its threads
    /// are keyed from the step's start, ADR-0104).
    pub fn set_step(&self, step: u64) {
        let mut world = self.lock_world();
        world.step = step;
        world.cost.new_step();
        if let Some(sched) = &world.threads {
            sched.new_step();
        }
    }

    /// Price the world's IO on `device` from now on (ADR-0181; [`Device::Nvme`] until set). Changes no decision,
    /// no clock reading and no digest: the simulated device time is accounted, never slept.
    pub fn set_device(&self, device: Device) {
        self.lock_world().cost.set_device(device);
    }

    /// The device profile pricing the world's IO.
    pub fn device(&self) -> Device {
        self.lock_world().cost.device
    }

    /// The world's IO cost so far, whole (ADR-0180): totals, per file, the system's work counters and latencies
    /// per kind of call. Copies the per-file and latency maps; a per-step check wants [`SimEnv::step_cost`].
    pub fn cost(&self) -> Cost {
        let world = self.lock_world();
        let ledger = &world.cost;
        let mut files: BTreeMap<PathBuf, CostCounters> = BTreeMap::new();
        for (id, counters) in ledger.files.iter().enumerate() {
            if *counters != CostCounters::default() {
                files.entry(world.disk.names.path(id).to_path_buf()).or_default().add(counters);
            }
        }
        Cost {
            device: ledger.device,
            total: ledger.total,
            files,
            work: ledger.work.iter().map(|(name, count)| ((*name).to_string(), *count)).collect(),
            latencies: ledger.latencies.clone(),
        }
    }

    /// The world's IO totals so far (a copy of ten counters).
    pub fn cost_total(&self) -> CostCounters {
        self.lock_world().cost.total
    }

    /// The IO of the current step: since the last [`SimEnv::set_step`] (the whole run before any).
    pub fn step_cost(&self) -> CostCounters {
        let world = self.lock_world();
        world.cost.total.since(&world.cost.step_start)
    }

    /// The IO of the current step per path it named (a rename on its source path), in path order.
    pub fn step_files(&self) -> Vec<(PathBuf, CostCounters)> {
        let world = self.lock_world();
        let names = &world.disk.names;
        let mut files: Vec<(PathBuf, CostCounters)> =
            world.cost.step_files.iter().map(|(&id, counters)| (names.path(id).to_path_buf(), *counters)).collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        files
    }

    /// The system's work counter `name` so far ([`crate::Env::count_work`]; 0 if never counted).
    pub fn work_count(&self, name: &str) -> u64 {
        self.lock_world().cost.work.get(name).copied().unwrap_or(0)
    }

    /// Every fault that fired, in order (at most [`FAULT_LOG_MAX`]).
    pub fn fault_log(&self) -> Vec<FaultRecord> {
        self.lock_world().fault_log.clone()
    }

    /// The faults logged from position `start` of the fault log on (an empty list past its end), and whether the
    /// log is full ([`FAULT_LOG_MAX`]: later faults were counted but not logged).
    pub fn fault_log_from(&self, start: usize) -> (Vec<FaultRecord>, bool) {
        let world = self.lock_world();
        let log = &world.fault_log;
        (log.get(start..).map(<[FaultRecord]>::to_vec).unwrap_or_default(), log.len() >= FAULT_LOG_MAX)
    }

    /// How many faults of each kind fired.
    pub fn fault_counts(&self) -> BTreeMap<FaultKind, u64> {
        self.lock_world().fault_counts.clone()
    }

    /// How many faults fired, all kinds together (the sum of [`SimEnv::fault_counts`], without copying them):
    /// a checker polls it after every call and reads the counts only when it moved (ADR-0126). A read of one
    /// counter, without the world's lock (ADR-0138): the engine target polls it once per key it verifies. It
    /// reads no state that shapes the run, so it is not an owner-checked call either.
    pub fn fault_total(&self) -> u64 {
        self.fault_total.load(Ordering::Acquire)
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

    /// How often each probe (`env::probe!`) was hit in this world, by name; probes never hit are absent.
    pub fn probe_counts(&self) -> BTreeMap<&'static str, u64> {
        self.lock_world().probe_hits.clone()
    }

    // ---- introspection -----------------------------------------------------------------------------------------

    /// Every file in the current namespace with its durable and current sizes, sorted by path.
    pub fn files(&self) -> Vec<FileReport> {
        let world = self.lock_world();
        let disk = &world.disk;
        disk.sorted(&disk.current)
            .into_iter()
            .filter_map(|(path, node)| match node {
                Node::File(id) => {
                    let inode = disk.inode(id).expect("a named inode exists");
                    let durably_named = disk.durable.get(path) == Some(node);
                    Some(FileReport {
                        path: disk.names.path(path).to_path_buf(),
                        durable_len: durably_named.then_some(inode.durable.len() as u64),
                        current_len: inode.current.len() as u64,
                        pending_operations: inode.pending.len(),
                    })
                }
                Node::Dir => None,
            })
            .collect()
    }

    /// What `path` names in the current namespace (None: nothing), for the interposition layer's `stat` and
    /// directory entry types (ADR-0163). Introspection: no yield point, no IO counted, nothing drawn.
    pub fn lookup_current(&self, path: &Path) -> Option<NodeInfo> {
        let world = self.lock_world();
        match world.disk.lookup(path)? {
            Node::Dir => Some(NodeInfo::Dir),
            Node::File(id) => Some(NodeInfo::File {
                len_bytes: world.disk.inode(id).expect("a named inode exists").current.len() as u64,
            }),
        }
    }

    /// The bytes a read of `path` sees now (None if there is no such file).
    pub fn read_current(&self, path: &Path) -> Option<Vec<u8>> {
        let world = self.lock_world();
        match world.disk.lookup(path) {
            Some(Node::File(id)) => Some(world.disk.inode(id).expect("a named inode exists").current.clone()),
            _ => None,
        }
    }

    /// The bytes of `path` that are durable: what a crash that drops every pending operation leaves.
    pub fn read_durable(&self, path: &Path) -> Option<Vec<u8>> {
        let world = self.lock_world();
        match world.disk.lookup_durable(path) {
            Some(Node::File(id)) => Some(world.disk.inode(id).expect("a named inode exists").durable.clone()),
            _ => None,
        }
    }

    /// A stable hash of the whole disk image, durable and current, names and bytes.
    pub fn disk_digest(&self) -> u64 {
        use std::hash::Hasher;
        let world = self.lock_world();
        let disk = &world.disk;
        let mut hasher = StableHasher::new();
        for (label, namespace, durable) in [(1u64, &disk.durable, true), (2u64, &disk.current, false)] {
            hasher.write_u64(label);
            for (path, node) in disk.sorted(namespace) {
                hasher.write(disk.names.path(path).as_os_str().as_encoded_bytes());
                match node {
                    Node::Dir => hasher.write_u64(0),
                    Node::File(id) => {
                        let inode = disk.inode(id).expect("a named inode exists");
                        let bytes = if durable { &inode.durable } else { &inode.current };
                        hasher.write_u64(bytes.len() as u64 + 1);
                        hasher.write(bytes);
                    }
                }
            }
        }
        hasher.finish()
    }

    /// Remove the empty directory `path` (`rmdir`), for the interposition layer (ADR-0163): a counted call and a
    /// namespace operation of the parent, as [`crate::Env::remove_file`] is, durable once the parent is synced. A missing
    /// path is [`crate::Error::NotFound`]; a file, the root or a directory with entries is
    /// [`crate::Error::InvalidInput`].
    pub fn remove_dir(&self, path: &Path) -> crate::Result<()> {
        let mut world = self.lock_call("remove_dir");
        world.begin_io(Op::Remove, path, None)?;
        let invalid =
            |message: &str| crate::Error::InvalidInput { op: Op::Remove, path: path.into(), message: message.into() };
        if names::is_root(path) {
            return Err(invalid("the root cannot be removed"));
        }
        match world.disk.find(path) {
            (Some(id), Some(Node::Dir)) => {
                if world.disk.current_dir(path).is_some_and(|dir| !world.disk.list(dir).is_empty()) {
                    return Err(invalid("directory not empty"));
                }
                let (path_id, key) = world.meta_key(path);
                debug_assert_eq!(path_id, id, "one interned id per path");
                world.metadata_fault(Op::Remove, path, key)?;
                world.disk.remove_dir(path_id, key);
                Ok(())
            }
            (_, Some(Node::File(_))) => Err(invalid("not a directory")),
            _ => Err(crate::Error::NotFound { op: Op::Remove, path: path.into() }),
        }
    }

    /// Advance the virtual clock.
    pub fn advance_clock(&self, duration: Duration) {
        self.lock_world().advance_clock_nanos(duration_nanos(duration));
    }
}

fn duration_nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}
