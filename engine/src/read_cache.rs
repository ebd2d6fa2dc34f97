//! Reads without a shared mutex (ADR-0127), like RocksDB's thread-local superversion. The writer publishes the
//! read side in two parts: the sources (memtables and version, which change on a rotation, a flush or a
//! compaction) under the view lock, with a version counter bumped each time they change; and the last visible
//! sequence, an atomic stored (Release) after the memtable holds every write up to it. A reader keeps the sources
//! it last used in a cell of its own thread, and takes the view lock only when the counter moved: a point read
//! writes no cache line another thread reads (no shared lock, no `Arc` count), only its own cell's.
//!
//! A reader's pair is consistent because it loads the sequence first (Acquire) and the counter after: a sequence
//! whose writes went into a memtable published after the cached sources was stored after that publication's bump,
//! so the counter load sees the bump and the reader takes the locked path, where sources and sequence cannot
//! disagree (no sources change while the view lock is held, and every visible write is in the sources then).
//!
//! When the sources change, the writer empties every thread's cell (after the view lock), so an idle thread keeps
//! no old memtable or deleted table file alive; a cell in use is emptied by its reader, which puts back only
//! sources still current. Nothing here is a scheduling point under `SimEnv`: no `Env` or `env::sync` call.

use std::any::Any;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::types::Sequence;
use crate::view::{ClosedFlag, ViewSources};

/// How many databases one thread keeps a cell for; the least recently added one is dropped beyond it.
const THREAD_CELLS_MAX: usize = 8;
/// How many threads one database keeps a cell for; a thread beyond it reads through the view lock.
const DATABASE_CELLS_MAX: usize = 1024;

/// A process-wide number per [`ReadCache`], so a thread's cell is never taken for another database's.
static NEXT_CACHE_ID: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's cells, one per database it reads (by [`ReadCache::id`]), each a `ViewCell<F>`.
    static CELLS: RefCell<Vec<(u64, Arc<dyn Any + Send + Sync>)>> = const { RefCell::new(Vec::new()) };
}

/// Sources as of one value of the version counter.
#[derive(Debug)]
pub(crate) struct Cached<F: env::File> {
    pub(crate) version: u64,
    pub(crate) sources: Arc<ViewSources<F>>,
}

/// One thread's cached sources for one database. Only its thread and the writer's emptying take its mutex.
#[derive(Debug)]
struct ViewCell<F: env::File>(Mutex<Option<Cached<F>>>);

impl<F: env::File> ViewCell<F> {
    fn take(&self) -> Option<Cached<F>> {
        self.0.lock().expect("read cell poisoned by a panic").take()
    }
}

/// The lock-free half of the published read side, and every thread's cell for it.
#[derive(Debug)]
pub(crate) struct ReadCache<F: env::File> {
    id: u64,
    /// Bumped (under the view lock) each time the published sources change.
    version: AtomicU64,
    /// The last visible sequence: stored after the memtable holds every write up to it.
    visible: AtomicU64,
    cells: Mutex<Vec<Weak<ViewCell<F>>>>,
}

impl<F: env::File> ReadCache<F> {
    pub(crate) fn new(visible: Sequence) -> Self {
        Self {
            id: NEXT_CACHE_ID.fetch_add(1, Ordering::Relaxed),
            version: AtomicU64::new(0),
            visible: AtomicU64::new(visible),
            cells: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn visible(&self) -> Sequence {
        self.visible.load(Ordering::Acquire)
    }

    /// The writer: every write up to `last` is in the published memtables.
    pub(crate) fn set_visible(&self, last: Sequence) {
        self.visible.store(last, Ordering::Release);
    }

    /// The current value of the version counter (the locked path reads it under the view lock).
    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The writer, under the view lock, having replaced the sources: the cells' sources are stale.
    pub(crate) fn bump_version(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Empty every thread's cell (after a bump, after the view lock; on close and drop): no idle thread keeps old
    /// sources alive. The emptied sources are dropped after every cell lock is released.
    pub(crate) fn empty_cells(&self) {
        let mut emptied = Vec::new();
        let mut cells = self.cells.lock().expect("read cells poisoned by a panic");
        cells.retain(|weak| match weak.upgrade() {
            Some(cell) => {
                emptied.extend(cell.take());
                true
            }
            None => false,
        });
        drop(cells);
        drop(emptied);
    }

    /// Run `read` on sources and a visible sequence that agree: this thread's cached sources when the counter has
    /// not moved, else `locked()` (the view lock's sources, counter and sequence, read together).
    pub(crate) fn read<T>(
        &self,
        closed: &ClosedFlag,
        locked: impl FnOnce() -> (Cached<F>, Sequence),
        read: impl FnOnce(&Arc<ViewSources<F>>, Sequence) -> T,
    ) -> T {
        // The cell is borrowed from the thread's list, not cloned: no reference count moves (ADR-0188).
        let (has_cell, taken) = self.with_cell(ViewCell::take).map_or((false, None), |taken| (true, taken));
        let fast = taken.and_then(|cached| self.validate(cached));
        let (cached, visible) = fast.unwrap_or_else(locked);
        let value = read(&cached.sources, visible);
        if has_cell {
            self.with_cell(|cell| self.put_back(cell, cached, closed));
        }
        value
    }

    /// `cached` with the visible sequence, if they agree: the sequence is loaded first, then the counter, which
    /// has moved if any write up to the sequence went into a memtable published after `cached`.
    fn validate(&self, cached: Cached<F>) -> Option<(Cached<F>, Sequence)> {
        let visible = self.visible();
        (self.version() == cached.version).then_some((cached, visible))
    }

    /// Take this thread's cached sources out of its cell, as [`ReadCache::read`] does first.
    #[cfg(test)]
    fn take_own(&self) -> Option<Cached<F>> {
        self.with_cell(ViewCell::take).flatten()
    }

    /// Keep `cached` in `cell` for the next read, unless it is stale or the database closed (then an emptying
    /// may already have passed this cell: keeping it would hold the sources until the next one).
    fn put_back(&self, cell: &ViewCell<F>, cached: Cached<F>, closed: &ClosedFlag) {
        let mut slot = cell.0.lock().expect("read cell poisoned by a panic");
        let replaced =
            if self.version() == cached.version && !closed.is_set() { slot.replace(cached) } else { Some(cached) };
        drop(slot);
        drop(replaced);
    }

    /// `use_cell` on this thread's cell for this database, borrowed from the thread's list (made on first use);
    /// `None` beyond [`DATABASE_CELLS_MAX`] threads. `use_cell` runs with the list borrowed: it must not read.
    fn with_cell<R>(&self, use_cell: impl FnOnce(&ViewCell<F>) -> R) -> Option<R> {
        CELLS.with(|cells| {
            {
                let listed = cells.borrow();
                let found = listed.iter().find(|(id, _)| *id == self.id);
                if let Some((_, cell)) = found {
                    return cell.downcast_ref::<ViewCell<F>>().map(use_cell);
                }
            }
            let cell = self.register()?;
            let mut listed = cells.borrow_mut();
            // A cell its database no longer holds (dropped) is dead weight.
            listed.retain(|(_, cell)| Arc::weak_count(cell) > 0);
            if listed.len() >= THREAD_CELLS_MAX {
                listed.remove(0);
            }
            listed.push((self.id, Arc::clone(&cell) as Arc<dyn Any + Send + Sync>));
            drop(listed);
            Some(use_cell(&cell))
        })
    }

    /// How many cells hold sources now.
    #[cfg(test)]
    pub(crate) fn cached_cells(&self) -> usize {
        let cells = self.cells.lock().expect("read cells poisoned by a panic");
        let full = |cell: Arc<ViewCell<F>>| cell.0.lock().expect("read cell poisoned by a panic").is_some();
        cells.iter().filter_map(Weak::upgrade).filter(|cell| full(Arc::clone(cell))).count()
    }

    /// A new cell in this database's list (the dead ones, of threads gone or that dropped it, pruned first).
    fn register(&self) -> Option<Arc<ViewCell<F>>> {
        let mut cells = self.cells.lock().expect("read cells poisoned by a panic");
        cells.retain(|weak| weak.strong_count() > 0);
        if cells.len() >= DATABASE_CELLS_MAX {
            return None;
        }
        let cell = Arc::new(ViewCell(Mutex::new(None)));
        cells.push(Arc::downgrade(&cell));
        Some(cell)
    }
}

impl<F: env::File> Drop for ReadCache<F> {
    /// The database is gone: no thread's cell may keep its memtables and table files.
    fn drop(&mut self) {
        self.empty_cells();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use env::{Env, RealEnv, TaskStep};

    use crate::{Db, Options, SyncMode};

    /// The puts the writer makes while the readers read.
    const PUTS: u64 = 4_000;
    /// How many reads a reader makes at most (it stops earlier when the writer is done).
    const READS_MAX: u64 = 10_000_000;

    fn view_takes(db: &Db<RealEnv>) -> u64 {
        db.stats().lock_holds.view.acquisitions
    }

    /// A thread's first read takes the view lock, the next ones none (ADR-0127); a change of the sources (a
    /// flush) empties the thread's cell, and its next read takes the lock once and sees the change; close empties
    /// it too, so no thread keeps a closed database's sources.
    #[test]
    fn a_thread_reads_without_the_view_lock_until_the_sources_change() {
        let env = RealEnv::new();
        let dir = env.temp_dir("read-cache-locks").unwrap();
        let db = Db::open(env, dir.path(), Options::default().with_lock_timing(true)).unwrap();
        db.put(b"k", b"v1").unwrap();
        let before = view_takes(&db);
        assert_eq!(db.get(b"k").unwrap(), Some(b"v1".to_vec()));
        assert_eq!((view_takes(&db) - before, db.inner.read_cache().cached_cells()), (1, 1));
        let before = view_takes(&db);
        for _ in 0..100 {
            assert_eq!(db.get(b"k").unwrap(), Some(b"v1".to_vec()));
            assert_eq!(db.scan(..).unwrap().count(), 1);
        }
        assert_eq!(view_takes(&db), before, "reads took the view lock with the sources unchanged");
        db.put(b"k", b"v2").unwrap();
        db.flush().unwrap();
        assert_eq!(db.inner.read_cache().cached_cells(), 0, "a flush left a thread's cell full");
        let before = view_takes(&db);
        assert_eq!(db.get(b"k").unwrap(), Some(b"v2".to_vec()));
        assert_eq!((view_takes(&db) - before, db.inner.read_cache().cached_cells()), (1, 1));
        db.close().unwrap();
        assert_eq!(db.inner.read_cache().cached_cells(), 0, "close left a thread's cell full");
        assert!(db.get(b"k").is_err());
    }

    /// The interleaving a reader on another core can meet (the real-threads test below rarely hits it): the
    /// reader takes its cached sources, the writer rotates and then acknowledges a write into the new memtable,
    /// and the reader loads the new visible sequence. Its validation must refuse the cached sources (they lack
    /// the write), and the read through the view lock must see the write.
    #[test]
    fn cached_sources_are_refused_once_a_visible_write_is_not_in_them() {
        let env = RealEnv::new();
        let dir = env.temp_dir("read-cache-validate").unwrap();
        let db = Db::open(env, dir.path(), Options::default()).unwrap();
        db.put(b"k", b"v1").unwrap();
        assert_eq!(db.get(b"k").unwrap(), Some(b"v1".to_vec()));
        let cache = db.inner.read_cache();
        let unchanged = cache.take_own().expect("the read filled this thread's cell");
        let (unchanged, visible) = cache.validate(unchanged).expect("nothing changed: the cached sources agree");
        assert_eq!((visible, unchanged.sources.get(b"k", visible).unwrap()), (1, Some(b"v1".to_vec())));
        db.flush().unwrap();
        db.put(b"k", b"v2").unwrap();
        let refused = cache.validate(unchanged).map(|(cached, visible)| cached.sources.get(b"k", visible));
        assert!(refused.is_none(), "stale sources accepted, reading {refused:?}");
        assert_eq!(db.get(b"k").unwrap(), Some(b"v2".to_vec()));
        db.close().unwrap();
    }

    /// Real threads: while a writer puts `k` = 1, 2, … (each put one sequence) through many rotations, flushes
    /// and compactions, a reader that saw sequence `s` visible reads a value of at least `s` from `k` (its cached
    /// sources never miss a visible write), and never a smaller one than it read before.
    #[test]
    fn readers_never_miss_a_visible_write_across_rotations() {
        let env = RealEnv::new();
        let dir = env.temp_dir("read-cache-rotations").unwrap();
        let options = Options::default().with_sync_mode(SyncMode::NoSync).with_flush_threshold_bytes(4096);
        let db = Db::open(env.clone(), dir.path(), options).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|index| {
                let (db, done) = (db.clone(), Arc::clone(&done));
                env.spawn(
                    &format!("reader-{index}"),
                    Box::new(move || {
                        read_until_done(&db, &done);
                        TaskStep::Done
                    }),
                )
            })
            .collect();
        for value in 1..=PUTS {
            db.put(b"k", &value.to_be_bytes()).unwrap();
        }
        done.store(true, Ordering::Release);
        for reader in &readers {
            env.wait(reader).unwrap();
        }
        assert!(db.stats().flush_count > 10, "too few rotations to test: {:?}", db.stats().flush_count);
        assert_eq!(db.get(b"k").unwrap(), Some(PUTS.to_be_bytes().to_vec()));
        db.close().unwrap();
    }

    /// One reader's loop: panics (failing the task) on a missed or reordered write.
    fn read_until_done(db: &Db<RealEnv>, done: &AtomicBool) {
        let mut seen = 0;
        for _ in 0..READS_MAX {
            if done.load(Ordering::Acquire) {
                return;
            }
            let visible = db.last_sequence();
            let value = db.get(b"k").unwrap().map_or(0, |bytes| u64::from_be_bytes(bytes.try_into().unwrap()));
            assert!(value >= visible && value >= seen, "read {value} with {visible} visible, {seen} before");
            seen = value;
        }
    }
}
