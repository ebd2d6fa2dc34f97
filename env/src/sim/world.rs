//! The world behind every [`SimEnv`](super::SimEnv) handle: its state, the gate every IO passes, fault keying, and crashes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::ThreadId;

use super::FAULT_LOG_MAX;
use super::cost::CostLedger;
use super::disk::{CrashDecisions, CrashEffects, Disk, InodeId, Node, WriteFate};
use super::faults::{FaultConfig, FaultKeying, FaultKind, FaultRecord, detail, fires, tag};
use super::names::PathId;
use super::persistence::CrashImage;
use super::scheduler::TaskSlot;
use super::shape::{CrashShape, Recording, ShapedCrash};
use super::threads::{Sched, index_in};
use crate::random::{DeterministicRng, chance_ppm, hash_bytes, keyed};
use crate::thread::ThreadFailure;
use crate::{Error, Op, Result, Task};

/// What the fault keying knows about one path.
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

/// The state of one simulated world, behind the mutex every [`SimEnv`](super::SimEnv) handle shares.
pub(super) struct World {
    pub(super) seed: u64,
    owner: Option<ThreadId>,
    /// The virtual clock in nanoseconds: written under the world's lock, and by the world's scheduler when every
    /// thread waits for a deadline (ADR-0166), which reads it without the lock.
    pub(super) clock: Arc<AtomicU64>,
    pub(super) clock_reads: u64,
    pub(super) engine_rng: DeterministicRng,
    pub(super) scheduler_rng: DeterministicRng,
    pub(super) config: FaultConfig,
    pub(super) disk: Disk,
    /// Fault-keying state by interned path ([`Disk::names`]); `None` for a path only named as an ancestor.
    paths: Vec<Option<PathInfo>>,
    pub(super) epoch: u64,
    pub(super) halted: bool,
    pub(super) io_count: u64,
    /// Units of work done ([`super::budget`]) and the limit set on them.
    pub(super) work_done: u64,
    pub(super) work_limit: Option<u64>,
    pub(super) crash_at_io: Option<u64>,
    pub(super) crash_count: u64,
    pub(super) last_crash: Option<(Op, PathBuf)>,
    pub(super) step: u64,
    pub(super) fault_log: Vec<FaultRecord>,
    pub(super) fault_counts: BTreeMap<FaultKind, u64>,
    /// The sum of `fault_counts`: a poll that finds it unchanged need not copy them. Shared with every
    /// [`SimEnv`](super::SimEnv) handle, which reads it without the world's lock (ADR-0138); written only here,
    /// under the lock.
    pub(super) fault_total: Arc<AtomicU64>,
    pub(super) fail_next_sync: BTreeSet<PathBuf>,
    pub(super) fail_next_write: BTreeSet<PathBuf>,
    pub(super) tasks: BTreeMap<u64, TaskSlot>,
    /// Tasks a crash cancelled, dropped only once the world's lock is released: a task may own handles and locks
    /// whose drops lock the world.
    pub(super) cancelled: Vec<Task>,
    pub(super) next_task_id: u64,
    pub(super) locks: BTreeSet<PathBuf>,
    pub(super) buggify_enabled: bool,
    pub(super) buggify_reached: BTreeMap<&'static str, u64>,
    pub(super) buggify_fired: BTreeMap<&'static str, u64>,
    /// Hits per probe name (`Env::probe`): this world's only, so parallel seeds count apart.
    pub(super) probe_hits: BTreeMap<&'static str, u64>,
    /// The world's threads ([`super::threads`]), once its first thread was spawned.
    pub(super) threads: Option<Arc<Sched>>,
    /// Keep the image each crash leaves (`--export-image`), and the last one kept.
    pub(super) keep_crash_image: bool,
    pub(super) last_crash_image: Option<CrashImage>,
    /// The crash epoch each of the world's threads was born in, by scheduler index ([`super::power`], ADR-0168).
    pub(super) thread_births: Vec<u64>,
    /// The first thread the world refused (not the owner, not one of its threads), for the owner to raise
    /// ([`super::driver`], ADR-0169).
    pub(super) refused: Option<ThreadFailure>,
    /// The shape every crash takes while set (ADR-0172); keyed draws while `None`.
    pub(super) crash_shape: Option<CrashShape>,
    /// Classify each crash's image by the models that admit it (ADR-0173), and the classes so far.
    pub(super) classify_crashes: bool,
    pub(super) crash_classes: Vec<Vec<super::persistence::Persistence>>,
    /// Record, for each keyed crash, the shape of what it kept (ADR-0172), with the step it happened in.
    pub(super) record_shapes: bool,
    pub(super) recorded_shapes: Vec<(u64, CrashShape)>,
    /// What the world's IO cost so far, and the device profile that prices it (ADR-0180, ADR-0181).
    pub(super) cost: CostLedger,
}

/// Keyed crash decisions: pure functions of (seed, crash number, the operation's stable key).
struct KeyedCrash<'a> {
    seed: u64,
    crash: u64,
    config: &'a FaultConfig,
}

impl CrashDecisions for KeyedCrash<'_> {
    fn keep_meta(&mut self, key: u64, _seq: u64) -> bool {
        let value = keyed(&[self.seed, tag::CRASH_META, self.crash, key]);
        chance_ppm(self.config.crash_metadata_kept_ppm, value)
    }

    fn write_fate(&mut self, key: u64, _seq: u64, _offset: u64, _len: u64) -> WriteFate {
        let value = keyed(&[self.seed, tag::CRASH_WRITE, self.crash, key]);
        if chance_ppm(self.config.crash_write_kept_ppm, value) {
            WriteFate::Kept
        } else if (value >> 40) & 1 == 0 {
            WriteFate::Dropped
        } else {
            WriteFate::Torn
        }
    }

    fn keep_sector(&mut self, key: u64, _seq: u64, sector: u64) -> bool {
        keyed(&[self.seed, tag::CRASH_SECTOR, self.crash, key, sector]) & 1 == 0
    }

    fn keep_set_len(&mut self, key: u64, _seq: u64) -> bool {
        keyed(&[self.seed, tag::CRASH_SET_LEN, self.crash, key]) & 1 == 0
    }

    fn garble_sector(&mut self, key: u64, sector: u64) -> Option<u64> {
        let value = keyed(&[self.seed, tag::CRASH_GARBLE, self.crash, key, sector]);
        chance_ppm(self.config.crash_torn_garbage_ppm, value).then(|| keyed(&[value, tag::DETAIL]))
    }

    /// All of the page's operations with the chance a write is kept whole, else uniform over `min..=max`.
    fn page_prefix(&mut self, key: u64, page: u64, min: u64, seqs: &[u64]) -> u64 {
        let max = seqs.len() as u64;
        let value = keyed(&[self.seed, tag::CRASH_PAGE, self.crash, key, page]);
        prefix(self.config.crash_write_kept_ppm, value, min, max)
    }

    fn size_prefix(&mut self, key: u64, seqs: &[u64]) -> u64 {
        let ops = seqs.len() as u64;
        let value = keyed(&[self.seed, tag::CRASH_SIZE, self.crash, key]);
        prefix(self.config.crash_write_kept_ppm, value, 0, ops)
    }

    /// Every event with the chance a metadata operation is kept, else uniform over `0..=events`.
    fn journal_prefix(&mut self, events: &[u64]) -> u64 {
        let events = events.len() as u64;
        let value = keyed(&[self.seed, tag::CRASH_JOURNAL, self.crash]);
        prefix(self.config.crash_metadata_kept_ppm, value, 0, events)
    }
}

/// `max` with chance `all_ppm`, else uniform over `min..=max`, from one keyed value.
/// This OS thread's id, read once per thread: `std::thread::current()` clones the thread's handle, and every
/// lock of the world asks for the id.
fn current_thread_id() -> ThreadId {
    thread_local! {
        static ID: ThreadId = std::thread::current().id();
    }
    // While this thread's locals are torn down (a world dropped by a thread-local destructor), ask std.
    ID.try_with(|id| *id).unwrap_or_else(|_| std::thread::current().id())
}

fn prefix(all_ppm: u32, value: u64, min: u64, max: u64) -> u64 {
    assert!(min <= max, "an empty prefix range");
    if chance_ppm(all_ppm, value) { max } else { min + keyed(&[value, tag::DETAIL]) % (max - min + 1) }
}

impl World {
    /// A fresh world for `seed`: clock at 0, empty disk, no tasks.
    pub(super) fn new(seed: u64, config: FaultConfig) -> Self {
        Self {
            seed,
            owner: None,
            clock: Arc::new(AtomicU64::new(0)),
            clock_reads: 0,
            engine_rng: DeterministicRng::stream(seed, "engine"),
            scheduler_rng: DeterministicRng::stream(seed, "scheduler"),
            config,
            disk: Disk::default(),
            paths: Vec::new(),
            epoch: 0,
            halted: false,
            io_count: 0,
            work_done: 0,
            work_limit: None,
            crash_at_io: None,
            crash_count: 0,
            last_crash: None,
            step: 0,
            fault_log: Vec::new(),
            fault_counts: BTreeMap::new(),
            fault_total: Arc::new(AtomicU64::new(0)),
            fail_next_sync: BTreeSet::new(),
            fail_next_write: BTreeSet::new(),
            tasks: BTreeMap::new(),
            cancelled: Vec::new(),
            next_task_id: 1,
            locks: BTreeSet::new(),
            buggify_enabled: true,
            buggify_reached: BTreeMap::new(),
            buggify_fired: BTreeMap::new(),
            probe_hits: BTreeMap::new(),
            threads: None,
            keep_crash_image: false,
            last_crash_image: None,
            thread_births: Vec::new(),
            refused: None,
            crash_shape: None,
            classify_crashes: false,
            crash_classes: Vec::new(),
            record_shapes: false,
            recorded_shapes: Vec::new(),
            cost: CostLedger::default(),
        }
    }

    /// Only the thread that first drove this world, and the threads it started with `env::thread::spawn`, may
    /// drive it: any other thread runs unscheduled, and the run would depend on the OS's timing. `Ok(true)` when
    /// the calling thread just became the owner; `Err` names the refused thread and why ([`super::driver`]).
    pub(super) fn check_owner(&mut self) -> std::result::Result<bool, ThreadFailure> {
        let me = current_thread_id();
        match self.owner {
            None => {
                self.owner = Some(me);
                Ok(true)
            }
            Some(owner) if owner == me => Ok(false),
            Some(_) if self.threads.as_ref().is_some_and(|sched| index_in(sched).is_some()) => Ok(false),
            Some(_) => {
                let thread = std::thread::current().name().unwrap_or("unnamed").to_string();
                let message = format!(
                    "SimEnv driven from a second OS thread ({thread}) that the simulator did not start: its timing \
                     would decide the run. Start threads with env::thread::spawn (and use env::sync's Mutex, \
                     Condvar and channel), so that the seed schedules them"
                );
                Err(ThreadFailure::Panicked { thread, message })
            }
        }
    }

    /// The virtual clock, in nanoseconds.
    pub(super) fn clock_nanos(&self) -> u64 {
        self.clock.load(Ordering::Acquire)
    }

    /// Let `nanos` pass on the virtual clock (saturating).
    pub(super) fn advance_clock_nanos(&self, nanos: u64) {
        let add = |now: u64| Some(now.saturating_add(nanos));
        let _ = self.clock.fetch_update(Ordering::AcqRel, Ordering::Acquire, add);
    }

    pub(super) fn log_fault(&mut self, kind: FaultKind, file: &Path, offset: u64) {
        *self.fault_counts.entry(kind).or_insert(0) += 1;
        // Only the world's lock holder writes it: a load and a store, never a lost update.
        let total = self.fault_total.load(Ordering::Relaxed) + 1;
        self.fault_total.store(total, Ordering::Release);
        if self.fault_log.len() < FAULT_LOG_MAX {
            self.fault_log.push(FaultRecord { step: self.step, file: file.to_path_buf(), offset, kind });
        }
    }

    /// The gate every IO passes: stale handles, power off, a thread of a system a crash ended (ADR-0168), and an
    /// armed crash.
    pub(super) fn begin_io(&mut self, op: Op, path: &Path, handle_epoch: Option<u64>) -> Result<()> {
        if handle_epoch.is_some_and(|epoch| epoch != self.epoch) {
            return Err(Error::StaleHandle { op, path: path.to_path_buf() });
        }
        if self.halted || self.caller_outlived() {
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

    pub(super) fn apply_crash(&mut self) {
        let mut names: BTreeMap<InodeId, PathId> = BTreeMap::new();
        for (path, node) in self.disk.durable.iter().chain(self.disk.current.iter()) {
            if let Node::File(id) = node {
                names.insert(id, path);
            }
        }
        let config = self.config.clone();
        let files_before = if self.keep_crash_image { super::image::files_before(&self.disk) } else { Vec::new() };
        let before = self.classify_crashes.then(|| self.disk.before_crash());
        let mut keyed = KeyedCrash { seed: self.seed, crash: self.crash_count, config: &config };
        let model = self.disk.model.clone();
        let shaped = self.crash_shape.is_some() || self.record_shapes;
        let units = if shaped { self.disk.pending_units() } else { Vec::new() };
        let effects = match &self.crash_shape {
            Some(shape) => self.disk.crash(&mut ShapedCrash::new(shape, &units, &model)),
            None if self.record_shapes && self.recorded_shapes.len() < super::CRASH_CLASSES_MAX => {
                let mut recording = Recording::new(&mut keyed, &model);
                let effects = self.disk.crash(&mut recording);
                self.recorded_shapes.push((self.step, recording.shape(&units)));
                effects
            }
            None => self.disk.crash(&mut keyed),
        };
        if let Some(before) = before.filter(|_| self.crash_classes.len() < super::CRASH_CLASSES_MAX) {
            self.crash_classes.push(super::admits::admitted(before, &self.disk, &effects));
        }
        if self.keep_crash_image {
            let mut image = self.crash_image(&effects, &names);
            image.file_crashes = super::image::file_crashes(files_before, &self.disk);
            self.last_crash_image = Some(image);
        }
        for path in &effects.meta_dropped {
            self.log_fault(FaultKind::CrashDroppedMetadata, path, 0);
        }
        for (kind, list) in [
            (FaultKind::CrashDroppedWrite, &effects.writes_dropped),
            (FaultKind::CrashTornWrite, &effects.writes_torn),
            (FaultKind::CrashGarbledSector, &effects.sectors_garbled),
        ] {
            for (inode, offset) in list {
                let path =
                    names.get(inode).map_or_else(|| PathBuf::from("<unnamed>"), |&id| self.disk.names.path(id).into());
                self.log_fault(kind, &path, *offset);
            }
        }
        self.epoch += 1;
        self.crash_count += 1;
        self.crash_at_io = None;
        let cancelled = std::mem::take(&mut self.tasks);
        self.cancelled.extend(cancelled.into_values().filter_map(|slot| slot.task));
        self.locks.clear();
        assert!(!self.disk.has_pending_meta(), "crash left pending metadata");
    }

    /// The disk as the crash just applied left it, and what it did, for `--export-image`.
    fn crash_image(&self, effects: &CrashEffects, names: &BTreeMap<InodeId, PathId>) -> CrashImage {
        let disk = &self.disk;
        let path_of = |list: &[(InodeId, u64)]| -> Vec<(PathBuf, u64)> {
            let named = |inode: &InodeId| {
                names.get(inode).map_or_else(|| PathBuf::from("<unnamed>"), |&id| disk.names.path(id).into())
            };
            list.iter().map(|(inode, offset)| (named(inode), *offset)).collect()
        };
        let mut image = CrashImage { crash: self.crash_count, model: disk.model.clone(), ..CrashImage::default() };
        for (path, node) in disk.sorted(&disk.durable) {
            let path = disk.names.path(path).to_path_buf();
            match node {
                Node::Dir => image.dirs.push(path),
                Node::File(id) => {
                    image.files.push((path, disk.inode(id).map(|inode| inode.durable.clone()).unwrap_or_default()))
                }
            }
        }
        image.writes_kept = path_of(&effects.writes_kept);
        image.writes_dropped = path_of(&effects.writes_dropped);
        image.writes_torn = path_of(&effects.writes_torn);
        image.sectors_garbled = path_of(&effects.sectors_garbled);
        image.meta_kept.clone_from(&effects.meta_kept);
        image.meta_dropped.clone_from(&effects.meta_dropped);
        image.journal = effects.journal;
        image
    }

    /// The interned id of `path`, with its fault-keying state (whose path hash is of the spelling first keyed).
    pub(super) fn path_id(&mut self, path: &Path) -> PathId {
        let id = self.disk.names.intern(path);
        self.key_path(id, path)
    }

    /// [`World::path_id`] for a path already interned as `id` (no lookup): its fault-keying state, made from this
    /// spelling when it has none yet.
    pub(super) fn key_path(&mut self, id: PathId, path: &Path) -> PathId {
        if self.paths.len() <= id {
            self.paths.resize_with(id + 1, || None);
        }
        self.paths[id].get_or_insert_with(|| PathInfo {
            hash: hash_bytes(path.as_os_str().as_encoded_bytes()),
            operations: 0,
            syncs: 0,
            epoch_visits: BTreeMap::new(),
        });
        id
    }

    fn info(&mut self, path_id: PathId) -> &mut PathInfo {
        self.paths[path_id].as_mut().expect("a keyed path has its state")
    }

    /// The next operation index of a file, and its path hash: the keys of every fault decision on it.
    pub(super) fn next_operation(&mut self, path_id: PathId) -> (u64, u64) {
        let info = self.info(path_id);
        let index = info.operations;
        info.operations += 1;
        (info.hash, index)
    }

    /// The keys of a fault decision on a file's data (ADR-0039): its path hash, and either the file's next operation
    /// index or (offset, sync epoch, how many operations at that offset this epoch has seen), by the configured
    /// [`FaultKeying`]. `set_len` passes `is_set_len` so that it
    /// never shares a key with a write at the same offset.
    pub(super) fn data_key(&mut self, path_id: PathId, offset: u64, is_set_len: bool) -> (u64, u64) {
        let (path_hash, op_index) = self.next_operation(path_id);
        match self.config.keying {
            FaultKeying::OperationIndex => (path_hash, op_index),
            FaultKeying::OffsetSyncEpoch => {
                let info = self.info(path_id);
                let visit = info.epoch_visits.entry((offset, is_set_len)).or_insert(0);
                let nth = *visit;
                *visit += 1;
                (path_hash, keyed(&[tag::OFFSET_EPOCH, u64::from(is_set_len), offset, info.syncs, nth]))
            }
        }
    }

    /// The keys of a sync, then the file's sync epoch advances (whether the sync succeeds or not).
    pub(super) fn sync_key(&mut self, path_id: PathId) -> (u64, u64) {
        let key = self.data_key(path_id, SYNC_KEY_OFFSET, false);
        let info = self.info(path_id);
        info.syncs += 1;
        info.epoch_visits.clear();
        debug_assert!(info.syncs <= info.operations, "more syncs than operations");
        key
    }

    /// The interned id of `path` and the stable key of a metadata operation on it: its path and that path's
    /// operation index, so removing an unrelated step does not change which metadata operations a crash keeps.
    pub(super) fn meta_key(&mut self, path: &Path) -> (PathId, u64) {
        let path_id = self.path_id(path);
        let (path_hash, op_index) = self.next_operation(path_id);
        (path_id, keyed(&[path_hash, op_index]))
    }

    /// The directory-operation faults of a create, rename or remove whose metadata key ([`World::meta_key`]) is
    /// `key`: EIO ([`FaultKind::MetadataError`]) or ENOSPC ([`FaultKind::MetadataNoSpace`]), and then the operation
    /// changes nothing. Keyed by (seed, path, that path's operation index), like every fault.
    pub(super) fn metadata_fault(&mut self, op: Op, path: &Path, key: u64) -> Result<()> {
        if self.fires(FaultKind::MetadataError, key, 0) {
            self.log_fault(FaultKind::MetadataError, path, 0);
            let message = "injected directory operation error".to_string();
            return Err(Error::Io { op, path: path.to_path_buf(), message });
        }
        if self.fires(FaultKind::MetadataNoSpace, key, 0) {
            self.log_fault(FaultKind::MetadataNoSpace, path, 0);
            return Err(Error::NoSpace { op, path: path.to_path_buf() });
        }
        Ok(())
    }

    /// Does [`FaultKind::DirSyncError`] fire on this `sync_dir` of `dir` (not the root)? Keyed by the directory's
    /// path and its operation index.
    pub(super) fn dir_sync_fires(&mut self, dir: &Path) -> bool {
        let path_id = self.path_id(dir);
        let (path_hash, op_index) = self.next_operation(path_id);
        self.fires(FaultKind::DirSyncError, path_hash, op_index)
    }

    pub(super) fn fires(&self, kind: FaultKind, path_hash: u64, op_index: u64) -> bool {
        fires(self.seed, &self.config, kind, path_hash, op_index)
    }

    pub(super) fn maybe_latency(&mut self, path: &Path, path_hash: u64, op_index: u64) {
        if self.fires(FaultKind::Latency, path_hash, op_index) {
            let max = self.config.latency_nanos_max.max(1);
            let nanos = 1 + detail(self.seed, FaultKind::Latency, path_hash, op_index) % max;
            self.advance_clock_nanos(nanos);
            self.log_fault(FaultKind::Latency, path, 0);
        }
    }

    pub(super) fn flip_durable_bit(&mut self, path: &Path, offset: u64) {
        let Some(Node::File(id)) = self.disk.lookup(path) else { return };
        let Ok(index) = usize::try_from(offset) else { return };
        let mut inode = self.disk.inode_mut(id).expect("named inode exists");
        let mut flipped = false;
        if index < inode.durable.len() {
            inode.durable[index] ^= 1;
            flipped = true;
        }
        if index < inode.current.len() {
            inode.current[index] ^= 1;
            flipped = true;
        }
        drop(inode);
        if flipped {
            self.log_fault(FaultKind::ExplicitCorruption, path, offset);
        }
    }

    pub(super) fn current_dir_exists(&self, path: &Path) -> bool {
        self.disk.is_dir(path)
    }
}
