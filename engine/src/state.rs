//! The database's shared state and its locks (ADR-0082). Five locks, always taken in this order and never the
//! other way round: **writer** (`Inner::state`) → [the log segment's **log lock** and, below it, its pending
//! bytes' leaf, `crate::wal_writer::LogTail`, ADR-0134: never held while taking any lock listed here] →
//! **watermark** (the visibility watermark, ADR-0133) →
//! **registry** (`Inner::registry`) → **view** (the published read side) → **poisoned** (a leaf). An unsynced
//! committer inserts into the memtable and publishes through the watermark after the writer lock, and so does a
//! synced batch that does not rotate, after inserting under it (ADR-0146); a rotation waits, under the writer
//! lock, for those completions (they take no writer lock). Only the writer and log locks are
//! ever held across IO (the writer: a rotation's syncs, a manifest install, the log writes a sync makes first; the
//! log lock: one group's log write, ADR-0134); readers take only the registry and view locks,
//! which no IO runs under, so a reader never waits for a disk. A point read takes no shared lock at all while the
//! sources are unchanged (ADR-0127, [`ReadCache`]): the view lock is the path of the first read on a thread and of
//! reads after a change. The read cache's own mutexes (its list of cells, then one thread's cell) are leaves below
//! all five, never held across IO or while taking another lock.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use env::{Env, TaskHandle};

use crate::error::{Error, Result};
use crate::file_names::file_path;
pub(crate) use crate::file_names::{parse_number, table_file_name, wal_file_name};
use crate::lock_meter::{LockHolds, LockMeter, Metered, lock_spinning};
use crate::manifest::FILE_NUMBER_MAX;
use crate::memtable::Memtable;
use crate::options::Options;
use crate::read_cache::{Cached, ReadCache};
use crate::ssi::ConflictTracker;
use crate::sstable::BlockCache;
use crate::types::Sequence;
use crate::version::Version;
use crate::view::{ClosedFlag, ReadView, ViewSources};
use crate::wal::Batch;
use crate::wal_writer::WalWriter;
use crate::watermark::{Completed, Marks, VISIBLE_SPINS_MAX, Watermark};

/// A commit appended to the log and not yet acknowledged.
#[derive(Debug)]
pub(crate) struct PendingCommit {
    pub(crate) batch: Batch,
    pub(crate) wal_number: u64,
    pub(crate) end_offset: u64,
    /// The committing transaction's snapshot, registered until the commit is visible.
    pub(crate) snapshot: Option<Sequence>,
    /// The task of the group-commit batch whose sync covers this record (none when acknowledged unsynced).
    pub(crate) group: Option<TaskHandle>,
}

/// The most completions queued for the registry at once (ADR-0197): every commit takes the registry before it
/// completes (its validation, or its `begin`), and each take drains the queue, so it holds at most the commits that
/// completed since the last take: one per committer, or one synced batch.
pub(crate) const UNREGISTERED_MAX: usize = 1 << 16;

/// A memtable waiting to be flushed, and the log segment that holds its writes.
#[derive(Debug)]
pub(crate) struct Immutable {
    pub(crate) memtable: Arc<Memtable>,
    pub(crate) wal_number: u64,
    /// The segment's path, as its writer's file was opened by ([`crate::wal_writer::WalWriter::path`]).
    pub(crate) wal_path: PathBuf,
}

/// The group-commit batches (ADR-0081): the open one new commits join, and every batch task not yet ended.
#[derive(Debug, Default)]
pub(crate) struct Batches {
    /// The batch new commits join: spawned, its log end not yet captured.
    pub(crate) open: Option<(u64, TaskHandle)>,
    /// Every batch task not yet ended, oldest first (the open one, if any, last).
    pub(crate) live: VecDeque<(u64, TaskHandle)>,
    pub(crate) next_id: u64,
    /// How many commits the last batch to end acknowledged: more than one, and the next batch pauses to gather
    /// the committers it released (ADR-0092).
    pub(crate) last_size: usize,
}

impl Batches {
    /// The task handles of every batch not yet ended (`Db::close` waits for them).
    pub(crate) fn live_handles(&self) -> impl Iterator<Item = &TaskHandle> {
        self.live.iter().map(|(_, handle)| handle)
    }

    /// Close batch `id` to new commits (its log end is captured).
    pub(crate) fn close(&mut self, id: u64) {
        if self.open.as_ref().is_some_and(|(open, _)| *open == id) {
            self.open = None;
        }
    }

    /// Batch `id`'s task ends.
    pub(crate) fn end(&mut self, id: u64) {
        self.close(id);
        self.live.retain(|(live, _)| *live != id);
    }
}

/// The write side, under the writer lock: the log, the memtables and version as the writer sees them (the read
/// side gets a copy published in [`Inner::publish`]), the pending commits and the background tasks.
#[derive(Debug)]
pub(crate) struct State<E: Env> {
    pub(crate) memtable: Arc<Memtable>,
    pub(crate) wal: WalWriter<E>,
    /// Oldest first.
    pub(crate) immutables: VecDeque<Immutable>,
    pub(crate) version: Arc<Version<E::File>>,
    pub(crate) next_file_number: u64,
    /// The last visible sequence as the writer knows it: set by a synced commit's acknowledgement and a rotation,
    /// and brought up to the read view's on every acquisition of the writer lock ([`Inner::state`]), since an
    /// unsynced commit becomes visible after the lock (ADR-0133).
    pub(crate) last_sequence: Sequence,
    /// The next sequence a commit gets (commits between are appended, not yet acknowledged).
    pub(crate) next_sequence: Sequence,
    /// Appended commits waiting for a sync, in sequence order.
    pub(crate) pending_commits: VecDeque<PendingCommit>,
    pub(crate) batches: Batches,
    pub(crate) flush_task: Option<TaskHandle>,
    pub(crate) compaction_task: Option<TaskHandle>,
    /// Set while a full compaction is asked for.
    pub(crate) full_compaction: bool,
    /// Table files being written and not yet in a version.
    pub(crate) pending_outputs: BTreeSet<u64>,
    /// Table and log files a job has dropped from the state and is deleting now (after the writer lock, so no
    /// IO under it): not leaks (ADR-0122).
    pub(crate) deleting_files: BTreeSet<u64>,
    pub(crate) flush_count: u64,
    pub(crate) compaction_count: u64,
    /// Seal syncs rotations issued, counted before the sync (ADR-0212): whether or not it succeeded and the next
    /// segment was then created.
    pub(crate) log_seals: u64,
    /// Commits appended to the log (blind writes and transactions), for the per-commit lock figures.
    pub(crate) commit_count: u64,
}

impl<E: Env> State<E> {
    pub(crate) fn allocate_file_number(&mut self) -> u64 {
        let number = self.next_file_number;
        assert!(number < FILE_NUMBER_MAX, "file numbers exhausted");
        self.next_file_number += 1;
        number
    }

    /// The oldest log segment still needed: the one of the oldest unflushed memtable.
    pub(crate) fn live_log_number(&self) -> u64 {
        self.immutables.front().map_or(self.wal.number(), |immutable| immutable.wal_number)
    }
}

/// The transactions' side, under the registry lock: the SSI conflict tracker and the live snapshots. Never held
/// across IO.
#[derive(Debug)]
pub(crate) struct Registry {
    pub(crate) tracker: ConflictTracker,
    /// Live snapshots (sequence → how many): compaction keeps what they need.
    pub(crate) snapshots: BTreeMap<Sequence, usize>,
    /// The last visible sequence as the tracker knows it (`set_visible`); never ahead of the published view's.
    pub(crate) visible: Sequence,
}

impl Registry {
    pub(crate) fn new(tracked_transactions_max: usize, visible: Sequence) -> Self {
        let mut tracker = ConflictTracker::with_capacity(tracked_transactions_max);
        tracker.set_visible(visible);
        Self { tracker, snapshots: BTreeMap::new(), visible }
    }

    pub(crate) fn register_snapshot(&mut self, snapshot: Sequence) {
        *self.snapshots.entry(snapshot).or_insert(0) += 1;
    }

    pub(crate) fn release_snapshot(&mut self, snapshot: Sequence) {
        let count = self.snapshots.get_mut(&snapshot).expect("snapshot registered");
        *count -= 1;
        if *count == 0 {
            self.snapshots.remove(&snapshot);
        }
    }

    /// Commits up to `last` are visible.
    pub(crate) fn set_visible(&mut self, last: Sequence) {
        self.tracker.set_visible(last);
        self.visible = last;
    }
}

/// The read side's sources, under the view lock (the last visible sequence is [`ReadCache`]'s atomic). Never
/// held across IO.
#[derive(Debug)]
pub(crate) struct Published<F: env::File> {
    sources: Arc<ViewSources<F>>,
}

/// The writer's memtables and version as a reader's sources.
fn sources_of<E: Env>(state: &State<E>, closed: &ClosedFlag) -> ViewSources<E::File> {
    ViewSources {
        memtable: Arc::clone(&state.memtable),
        immutables: state.immutables.iter().rev().map(|immutable| Arc::clone(&immutable.memtable)).collect(),
        version: Arc::clone(&state.version),
        closed: closed.clone(),
    }
}

/// Whether `sources` are the writer's memtables and version (the same objects, not equal copies).
fn are_writers<E: Env>(sources: &ViewSources<E::File>, state: &State<E>) -> bool {
    Arc::ptr_eq(&sources.memtable, &state.memtable)
        && sources.immutables.len() == state.immutables.len()
        && sources.immutables.iter().zip(state.immutables.iter().rev()).all(|(a, b)| Arc::ptr_eq(a, &b.memtable))
        && Arc::ptr_eq(&sources.version, &state.version)
}

/// The registry lock's guard: when it is let go, the records the conflict tracker dropped while it was held are
/// freed after the lock, not under it (ADR-0198).
pub(crate) struct RegistryGuard<'a, E: Env> {
    /// `Some` until dropped.
    guard: Option<Metered<'a, Registry, E>>,
}

impl<E: Env> std::ops::Deref for RegistryGuard<'_, E> {
    type Target = Registry;

    fn deref(&self) -> &Registry {
        self.guard.as_ref().expect("a registry guard is held until dropped")
    }
}

impl<E: Env> std::ops::DerefMut for RegistryGuard<'_, E> {
    fn deref_mut(&mut self) -> &mut Registry {
        self.guard.as_mut().expect("a registry guard is held until dropped")
    }
}

impl<E: Env> Drop for RegistryGuard<'_, E> {
    fn drop(&mut self) {
        if let Some(mut guard) = self.guard.take() {
            let dropped = guard.tracker.take_dropped();
            drop(guard);
            drop(dropped);
        }
    }
}

pub(crate) struct Inner<E: Env> {
    pub(crate) env: E,
    pub(crate) dir: PathBuf,
    pub(crate) options: Options,
    pub(crate) cache: Arc<BlockCache>,
    /// The writer lock.
    state: Mutex<State<E>>,
    registry: Mutex<Registry>,
    view: Mutex<Published<E::File>>,
    /// The visible sequence, the sources' version counter and every thread's cached sources (ADR-0127).
    read_cache: ReadCache<E::File>,
    /// The last sequence the registry knows is visible (`Registry::set_visible`), or will know before anyone reads
    /// it: stored by [`Inner::complete`] after it queued the commits in `unregistered` (ADR-0197). A committer that
    /// sees its sequence here returns without the writer lock, and its next transaction's snapshot (the registry's,
    /// caught up first) already includes its commit (ADR-0132). Never ahead of the read view.
    registered_visible: AtomicU64,
    /// Commits made visible whose snapshot release and `set_visible` the registry has not applied yet, in sequence
    /// order: the next registry take applies them, before anything reads it ([`Inner::registry`], ADR-0197). A
    /// leaf below the watermark and the registry.
    unregistered: Mutex<Vec<Completed>>,
    /// The tracker's [`crate::ssi::ConflictTracker::dooms`], stored under the registry lock by every call that can
    /// doom or expire a transaction, so a write checks for its doom without the lock while it is unchanged
    /// (ADR-0144).
    pub(crate) dooms: AtomicU64,
    /// The gap-free prefix of commits in the memtable, published by whoever completes it (ADR-0133).
    watermark: Watermark,
    /// Set when a background or write error leaves the on-disk state unknown: writes fail until reopen. A leaf.
    poisoned: Mutex<Option<Error>>,
    /// Whether `poisoned` holds a failure: set once, under its lock, after it is filled.
    poison_set: AtomicBool,
    pub(crate) closed: ClosedFlag,
    pub(crate) lock: Mutex<Option<E::Lock>>,
    /// How long the writer, registry and view locks are held (ADR-0119); counted only with
    /// `Options::lock_timing`.
    meters: LockMeters,
}

/// One [`LockMeter`] per shared lock.
#[derive(Debug, Default)]
struct LockMeters {
    writer: LockMeter,
    registry: LockMeter,
    view: LockMeter,
    watermark: LockMeter,
    /// The log lock's (ADR-0134): every segment's [`WalWriter`] shares it.
    log: Arc<LockMeter>,
    /// Committers' waits for visibility and for their batch (ADR-0186): waits, not locks.
    visibility_wait: LockMeter,
    batch_wait: LockMeter,
}

impl<E: Env> Inner<E> {
    pub(crate) fn new(
        env: E,
        dir: PathBuf,
        options: Options,
        cache: Arc<BlockCache>,
        state: State<E>,
        lock: E::Lock,
    ) -> Self {
        let registry = Registry::new(options.tracked_transactions_max, state.last_sequence);
        let closed = ClosedFlag::default();
        let view = Published { sources: Arc::new(sources_of(&state, &closed)) };
        let read_cache = ReadCache::new(state.last_sequence);
        let registered_visible = AtomicU64::new(state.last_sequence);
        let watermark = Watermark::new(state.last_sequence);
        let meters = LockMeters { log: Arc::clone(state.wal.meter()), ..LockMeters::default() };
        Self {
            env,
            dir,
            options,
            cache,
            state: Mutex::new(state),
            registry: Mutex::new(registry),
            view: Mutex::new(view),
            read_cache,
            registered_visible,
            unregistered: Mutex::new(Vec::new()),
            dooms: AtomicU64::new(0),
            watermark,
            poisoned: Mutex::new(None),
            poison_set: AtomicBool::new(false),
            closed,
            lock: Mutex::new(Some(lock)),
            meters,
        }
    }

    /// The writer lock: held across log appends, rotations and manifest installs, never by a reader.
    /// Its `last_sequence` is brought up to the read view's visible sequence first.
    pub(crate) fn state(&self) -> Metered<'_, State<E>, E> {
        let lock = || lock_spinning(&self.state).expect("engine state poisoned by a panic");
        let mut guard = Metered::take(&self.env, &self.meters.writer, self.options.lock_timing, lock);
        guard.last_sequence = guard.last_sequence.max(self.read_cache.visible());
        guard
    }

    /// The registry lock: the conflict tracker and the live snapshots. No IO under it. The commits made visible
    /// since the last take are applied first (ADR-0197), so every reader of the registry finds it as if each
    /// completion had told it at once.
    pub(crate) fn registry(&self) -> RegistryGuard<'_, E> {
        let lock = || lock_spinning(&self.registry).expect("transaction registry poisoned by a panic");
        let mut registry = Metered::take(&self.env, &self.meters.registry, self.options.lock_timing, lock);
        if self.registered_visible() > registry.visible {
            self.register_completed(&mut registry);
        }
        RegistryGuard { guard: Some(registry) }
    }

    /// Apply every queued completion to `registry`, in sequence order: its snapshot released, then the registry
    /// told it is visible, exactly the calls a completion made under the registry lock before ADR-0197.
    fn register_completed(&self, registry: &mut Registry) {
        let mut unregistered = self.unregistered.lock().expect("completion queue poisoned by a panic");
        for commit in unregistered.drain(..) {
            if let Some(snapshot) = commit.snapshot {
                registry.release_snapshot(snapshot);
            }
            registry.set_visible(commit.last);
        }
    }

    /// The visibility watermark's lock (ADR-0133): below the writer lock, above the registry lock (not nested in it
    /// since ADR-0197) and the completion queue.
    fn watermark(&self) -> Metered<'_, Marks, E, env::sync::MutexGuard<'_, Marks>> {
        Metered::take(&self.env, &self.meters.watermark, self.options.lock_timing, || self.watermark.lock())
    }

    fn published(&self) -> Metered<'_, Published<E::File>, E> {
        let lock = || self.view.lock().expect("read view poisoned by a panic");
        Metered::take(&self.env, &self.meters.view, self.options.lock_timing, lock)
    }

    /// How long each shared lock has been held so far (all zero unless `Options::lock_timing` is on).
    pub(crate) fn lock_holds(&self) -> LockHolds {
        let meters = &self.meters;
        let (writer, registry) = (meters.writer.read(), meters.registry.read());
        let (view, watermark, log) = (meters.view.read(), meters.watermark.read(), meters.log.read());
        let (visibility_wait, batch_wait) = (meters.visibility_wait.read(), meters.batch_wait.read());
        LockHolds { writer, registry, view, watermark, log, visibility_wait, batch_wait }
    }

    /// Publish the writer's memtables and version to readers. Under the writer lock (so publications happen in
    /// order). New sources are published (and the version counter bumped) before any sequence whose writes they
    /// hold is made visible by [`Inner::complete`] (ADR-0127, ADR-0133).
    pub(crate) fn publish(&self, state: &State<E>) {
        let mut published = self.published();
        let stale = (!are_writers(&published.sources, state)).then(|| {
            let old = std::mem::replace(&mut published.sources, Arc::new(sources_of(state, &self.closed)));
            self.read_cache.bump_version();
            old
        });
        drop(published);
        if stale.is_some() {
            self.read_cache.empty_cells();
        }
    }

    /// Drop every thread's cached sources (`Db::close`, after the closed flag is set).
    pub(crate) fn empty_read_cells(&self) {
        self.read_cache.empty_cells();
    }

    /// Whether the published read side is the writer's (`Db::check_invariants`, after every simulator step): a
    /// change the writer forgot to publish would leave readers on stale memtables or a stale version.
    pub(crate) fn check_published(&self, state: &State<E>) -> std::result::Result<(), String> {
        let published = self.published();
        if !are_writers(&published.sources, state) {
            return Err("the published read view's memtables or version are not the writer's".into());
        }
        let marks = self.watermark();
        let (visible, last) = (marks.visible(), state.last_sequence);
        if marks.has_waiting() {
            return Err(format!("commits are in the memtable above a gap at sequence {visible}"));
        }
        if visible != last {
            return Err(format!("the watermark is at sequence {visible}, the writer at {last}"));
        }
        drop(marks);
        let seen = self.read_cache.visible();
        if seen != state.last_sequence {
            let last = state.last_sequence;
            return Err(format!("readers see sequence {seen}, the writer acknowledged {last}"));
        }
        Ok(())
    }

    /// The current read view, owned (a scan keeps it); `Error::Closed` once the database is closed. Takes no
    /// shared lock while the sources are unchanged (ADR-0127), else only the view lock.
    pub(crate) fn read_view(&self) -> Result<ReadView<E::File>> {
        self.with_view(|sources, visible| ReadView::new(Arc::clone(sources), visible))
    }

    /// `read` on the current sources and last visible sequence, borrowed: a point read clones no `Arc` and takes
    /// no shared lock while the sources are unchanged (ADR-0127). `Error::Closed` once the database is closed.
    pub(crate) fn with_view<T>(&self, read: impl FnOnce(&Arc<ViewSources<E::File>>, Sequence) -> T) -> Result<T> {
        self.check_open()?;
        Ok(self.read_cache.read(&self.closed, || self.locked_view(), read))
    }

    /// The view lock's sources with their version, and the visible sequence: they agree, since no sources change
    /// while the lock is held and every visible write is in them.
    fn locked_view(&self) -> (Cached<E::File>, Sequence) {
        let published = self.published();
        let cached = Cached { version: self.read_cache.version(), sources: Arc::clone(&published.sources) };
        (cached, self.read_cache.visible())
    }

    /// The last acknowledged sequence readers see.
    pub(crate) fn visible_sequence(&self) -> Sequence {
        self.read_cache.visible()
    }

    /// The last sequence the registry knows is visible, or will know at its next take (ADR-0197); at most
    /// [`Inner::visible_sequence`].
    pub(crate) fn registered_visible(&self) -> Sequence {
        self.registered_visible.load(Ordering::Acquire)
    }

    /// `commits`' writes are all in the memtable: make the gap-free prefix visible, in this order (ADR-0133):
    /// the read view's sequence, then each commit queued for the registry (its snapshot released and the registry
    /// told at the registry's next take, ADR-0197), then the lock-free watermark. The one whose commit closes a
    /// gap publishes every commit it releases. Takes no registry lock.
    pub(crate) fn complete(&self, commits: impl IntoIterator<Item = Completed>) {
        let mut marks = self.watermark();
        let before = marks.visible();
        for commit in commits {
            marks.insert(commit);
        }
        if marks.visible() == before {
            return;
        }
        let visible = marks.visible();
        self.read_cache.set_visible(visible);
        {
            let mut unregistered = self.unregistered.lock().expect("completion queue poisoned by a panic");
            assert!(unregistered.len() < UNREGISTERED_MAX, "over {UNREGISTERED_MAX} completions not registered");
            unregistered.extend(marks.take_advanced());
        }
        self.registered_visible.store(visible, Ordering::Release);
        self.watermark.notify(&marks);
    }

    /// Block until every commit up to `last` is visible and registered; `Error::Closed` if it never becomes so.
    /// Never waits under `SimEnv` (a commit completes in the step that appends it).
    /// It first watches the lock-free watermark for [`VISIBLE_SPINS_MAX`] checks (ADR-0187): the commits before
    /// it are inserting on other cores, and a sleep and wake on the condition variable costs more than they take.
    pub(crate) fn wait_visible(&self, last: Sequence) -> Result<()> {
        if self.registered_visible() >= last {
            return Ok(());
        }
        let visible = self.meters.visibility_wait.time_wait(&self.env, self.options.lock_timing, || {
            for _ in 0..VISIBLE_SPINS_MAX {
                std::hint::spin_loop();
                if self.registered_visible() >= last {
                    return true;
                }
            }
            self.watermark.wait_for(last)
        });
        if visible {
            return Ok(());
        }
        Err(Error::Closed { reason: format!("sequence {last} not visible after every wait") })
    }

    /// A synced committer's wait for its batch's task (ADR-0081), timed as a wait (ADR-0186).
    pub(crate) fn wait_for_batch(&self, batch: &TaskHandle) -> Result<()> {
        let timing = self.options.lock_timing;
        Ok(self.meters.batch_wait.time_wait(&self.env, timing, || self.env.wait(batch))?)
    }

    #[cfg(test)]
    pub(crate) fn read_cache(&self) -> &ReadCache<E::File> {
        &self.read_cache
    }

    /// The writer lock if it is free (a test polls it while a completion is held up on the watermark).
    #[cfg(test)]
    pub(crate) fn try_state(&self) -> Option<std::sync::MutexGuard<'_, State<E>>> {
        self.state.try_lock().ok()
    }

    /// The watermark's lock, for a test that holds a completion up on it.
    #[cfg(test)]
    pub(crate) fn watermark_lock(&self) -> env::sync::MutexGuard<'_, Marks> {
        self.watermark.lock()
    }

    /// Record a failure that leaves the disk state unknown; later writes fail with `Error::Closed`.
    pub(crate) fn poison(&self, error: &Error) {
        let mut poisoned = self.poisoned.lock().expect("poison slot poisoned by a panic");
        if poisoned.is_none() {
            *poisoned = Some(error.clone());
            self.poison_set.store(true, Ordering::Release);
        }
    }

    /// Read without the poison slot's lock while nothing failed (every commit checks it, ADR-0187).
    pub(crate) fn is_poisoned(&self) -> bool {
        self.poison_set.load(Ordering::Acquire)
    }

    /// Every call fails once the database is closed (reads too; a poisoned database still reads).
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.is_set() {
            return Err(Error::Closed { reason: "closed by Db::close".into() });
        }
        Ok(())
    }

    /// The failure that poisoned the database, if one did.
    pub(crate) fn poison_error(&self) -> Option<Error> {
        if !self.is_poisoned() {
            return None;
        }
        self.poisoned.lock().expect("poison slot poisoned by a panic").clone()
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        if !self.is_poisoned() {
            return Ok(());
        }
        match &*self.poisoned.lock().expect("poison slot poisoned by a panic") {
            // A crash cut the earlier failure: say so, so the caller knows this instance must be dropped.
            Some(error) if error.is_crash() => Err(error.clone()),
            Some(error) => {
                Err(Error::Closed { reason: format!("an earlier failure left the log in an unknown state: {error}") })
            }
            None => Ok(()),
        }
    }

    /// The oldest sequence a live snapshot, or one a reader may still take, can read: compaction keeps every
    /// version it needs (ADR-0016). A read-only transaction's safe snapshot can step back below every registered
    /// one, through the spans of pivots already visible (ADR-0025): the watermark is the safe snapshot at the oldest
    /// registered one, which no later span can hold (ADR-0093). Under the writer lock (it takes the registry lock).
    pub(crate) fn gc_watermark(&self, state: &State<E>) -> Sequence {
        // Canary: compaction ignores live snapshots and drops versions they still need.
        if crate::canary::active("gc-drops-live-version") {
            return state.last_sequence;
        }
        let registry = self.registry();
        let visible = registry.visible.min(state.last_sequence);
        let oldest = registry.snapshots.keys().next().copied().unwrap_or(visible).min(visible);
        registry.tracker.safe_snapshot(oldest)
    }

    pub(crate) fn wal_path(&self, number: u64) -> PathBuf {
        file_path(&self.dir, &wal_file_name(number))
    }

    pub(crate) fn table_path(&self, number: u64) -> PathBuf {
        file_path(&self.dir, &table_file_name(number))
    }
}

#[cfg(test)]
mod tests;
