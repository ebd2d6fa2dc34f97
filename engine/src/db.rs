//! The database handle: the public API, the write path, and reads.

use std::path::Path;
use std::sync::Arc;

use env::{Env, TaskHandle};

use crate::error::{Error, Result};
use crate::options::{Options, SyncMode};
use crate::state::{Inner, State, parse_number, table_file_name, wal_file_name};
use crate::types::{Sequence, ValueKind, check_write};
use crate::wal::{BatchWrite, RecordKind};

/// How many times a write waits for a flush before giving up on a stall (each wait finishes a flush).
pub const STALL_WAITS_MAX: u32 = 1024;
/// How many rounds of waiting for background tasks `close` goes through (a task may spawn another).
pub const CLOSE_WAITS_MAX: u32 = 64;

/// Counters and sizes, for tests, the simulator and operators.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub tables_per_level: Vec<usize>,
    pub bytes_per_level: Vec<u64>,
    pub memtable_bytes: u64,
    pub immutable_memtables: usize,
    pub flush_count: u64,
    pub compaction_count: u64,
    /// Seal syncs memtable rotations issued, one per segment a rotation sealed or tried to seal: counted before
    /// the sync, so a seal whose sync failed counts (ADR-0212), and the next segment's creation may then have
    /// failed too (ADR-0192).
    pub log_seals: u64,
    pub last_sequence: u64,
    pub wal_segments: usize,
    pub pending_commits: usize,
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
    /// Commits appended to the log since open (blind writes and transactions with writes).
    pub commits: u64,
    /// How long each shared lock has been held since open: zero unless [`Options::lock_timing`] is on (ADR-0119).
    pub lock_holds: crate::LockHolds,
}

/// An open database. Cheap to clone; `Send + Sync` when the environment is.
pub struct Db<E: Env> {
    pub(crate) inner: Arc<Inner<E>>,
}

impl<E: Env> Clone for Db<E> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner) }
    }
}

impl<E: Env> std::fmt::Debug for Db<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish_non_exhaustive()
    }
}

impl<E: Env> Db<E> {
    /// Open (or create) the database in `dir`, recovering whatever a crash left. See `recovery.rs`.
    pub fn open(env: E, dir: impl AsRef<Path>, options: Options) -> Result<Self> {
        crate::recovery::open(env, dir.as_ref(), options).map(|inner| Self { inner })
    }

    /// Write `value` under `key`. With the default [`crate::SyncMode::Sync`] it is durable when this returns.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        check_write(key, value, self.inner.options.write_limits())?;
        let write = BatchWrite { kind: ValueKind::Put, key: key.to_vec(), value: value.to_vec() };
        self.write_batch(vec![write]).map(|_| ())
    }

    /// Delete `key` (writes a tombstone).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        check_write(key, &[], self.inner.options.write_limits())?;
        let write = BatchWrite { kind: ValueKind::Delete, key: key.to_vec(), value: Vec::new() };
        self.write_batch(vec![write]).map(|_| ())
    }

    /// The latest value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.with_view(|sources, visible| sources.get(key, visible))?
    }

    /// The value of `key` as of `snapshot`.
    pub(crate) fn get_at(&self, key: &[u8], snapshot: Sequence) -> Result<Option<Vec<u8>>> {
        self.inner.with_view(|sources, _| sources.get(key, snapshot))?
    }

    /// The live rows in `range` at the latest state: a lazy, double-ended iterator of `Result<(key, value)>` in key
    /// order (ADR-0085). `Err(Closed)` up front once the database is closed; an error met while scanning is an
    /// item, and the iterator ends after it.
    ///
    /// ```
    /// use engine::{Db, Options};
    /// let db = Db::open(env::SimEnv::new(7), "/db", Options::default())?;
    /// for key in [&b"a1"[..], b"a2", b"b1"] {
    ///     db.put(key, b"v")?;
    /// }
    /// fn keys_of(rows: impl Iterator<Item = engine::Result<(Vec<u8>, Vec<u8>)>>) -> engine::Result<Vec<Vec<u8>>> {
    ///     rows.map(|row| row.map(|(key, _)| key)).collect()
    /// }
    /// assert_eq!(keys_of(db.scan(b"a2".as_slice()..)?)?, vec![b"a2".to_vec(), b"b1".to_vec()]);
    /// let backward = keys_of(db.scan(..)?.rev())?;
    /// assert_eq!(backward, vec![b"b1".to_vec(), b"a2".to_vec(), b"a1".to_vec()]);
    /// assert_eq!(keys_of(db.scan_prefix(b"a")?)?, vec![b"a1".to_vec(), b"a2".to_vec()]);
    /// let last = db.scan(..)?.next_back().transpose()?;
    /// assert_eq!(last.map(|(key, _)| key), Some(b"b1".to_vec()));
    /// # Ok::<(), engine::Error>(())
    /// ```
    pub fn scan<'a>(&self, range: impl std::ops::RangeBounds<&'a [u8]>) -> Result<crate::ScanIter<'static>> {
        let view = self.inner.read_view()?;
        Ok(crate::ScanIter::new(&view, crate::scan::key_range(&range), view.last_sequence, None, None))
    }

    /// The live rows whose key starts with `prefix`, as [`Db::scan`] returns them.
    pub fn scan_prefix(&self, prefix: &[u8]) -> Result<crate::ScanIter<'static>> {
        let view = self.inner.read_view()?;
        Ok(crate::ScanIter::new(&view, crate::scan::prefix_range(prefix), view.last_sequence, None, None))
    }

    /// A blind write as a one-write transaction: submit, then wait for its batch's sync. Returns its sequence.
    pub(crate) fn write_batch(&self, writes: Vec<BatchWrite>) -> Result<Sequence> {
        assert!(!writes.is_empty(), "empty batch");
        self.wait_for_stall()?;
        let prepared = crate::commit::prepare(writes);
        let ticket = {
            let state = self.inner.state();
            self.inner.check_writable()?;
            // A blind write reads nothing: tracked in its validation's registry take, at a snapshot that includes
            // every submitted commit (no false ww aborts, ADR-0210).
            crate::commit::commit_writes(&self.inner, state, prepared, None, None)?
        };
        // Joins the same batches as transactions: waits for the one sync that covers its record.
        crate::commit::wait_for_commit(&self.inner, &ticket)?;
        Ok(ticket.last_sequence)
    }

    /// Block (by running the flush, inline on SimEnv) while too many memtables wait to be flushed.
    fn wait_for_stall(&self) -> Result<()> {
        for _ in 0..STALL_WAITS_MAX {
            let handle = {
                let mut state = self.inner.state();
                self.inner.check_writable()?;
                if state.immutables.len() < self.inner.options.immutable_memtables_max {
                    return Ok(());
                }
                env::probe!(self.inner.env, "write.stalled");
                crate::jobs::ensure_flush_task(&self.inner, &mut state)
            };
            self.inner.env.wait(&handle)?;
        }
        Err(Error::Closed { reason: format!("write stalled through {STALL_WAITS_MAX} flushes") })
    }

    /// Flush the memtable to an SSTable now, and wait until every waiting memtable is flushed.
    pub fn flush(&self) -> Result<()> {
        {
            let mut state = self.inner.state();
            self.inner.check_writable()?;
            if !state.memtable.is_empty() {
                crate::commit::rotate(&self.inner, &mut state)?;
            }
        }
        for _ in 0..STALL_WAITS_MAX {
            let handle = {
                let mut state = self.inner.state();
                self.inner.check_writable()?;
                if state.immutables.is_empty() || crate::canary::active("flush-leaves-immutables") {
                    // Canary (ADR-0185): the flush returns before the memtables it sealed are written out.
                    return Ok(());
                }
                crate::jobs::ensure_flush_task(&self.inner, &mut state)
            };
            self.inner.env.wait(&handle)?;
        }
        Err(Error::Closed { reason: format!("flush did not finish within {STALL_WAITS_MAX} waits") })
    }

    /// Flush, then compact every table into the last level now.
    pub fn compact(&self) -> Result<()> {
        self.flush()?;
        let mut requested = false;
        for _ in 0..STALL_WAITS_MAX {
            let handle = {
                let mut state = self.inner.state();
                self.inner.check_writable()?;
                match state.compaction_task.clone() {
                    // Request the full compaction only when no task runs, so a running job cannot miss the flag.
                    None if !requested => {
                        state.full_compaction = true;
                        requested = true;
                        crate::jobs::ensure_compaction_task(&self.inner, &mut state)
                    }
                    None => {
                        assert!(!state.full_compaction, "compaction task ended with a full compaction pending");
                        return Ok(());
                    }
                    Some(handle) => handle,
                }
            };
            self.inner.env.wait(&handle)?;
        }
        Err(Error::Closed { reason: format!("compaction did not finish within {STALL_WAITS_MAX} waits") })
    }

    /// Wait until no background work is left, seal and sync the log, release the lock. Complete (ADR-0075): no
    /// task of this database runs after it returns, and every later call fails with `Error::Closed`, on this
    /// handle and on the transactions and scan iterators opened before. A database an earlier failure poisoned
    /// is closed without a seal; in `SyncMode::NoSync`, when it had acknowledged writes the log had not synced,
    /// the close (complete all the same, its lock released) returns `Error::Closed` naming the failure that
    /// poisoned it, or that failure itself when it was a crash: those writes may be lost (ADR-0203).
    pub fn close(&self) -> Result<()> {
        let mut sealed = Ok(());
        for _ in 0..CLOSE_WAITS_MAX {
            let handles: Vec<TaskHandle> = {
                let mut state = self.inner.state();
                if self.inner.closed.is_set() {
                    return Ok(());
                }
                let jobs = [&state.flush_task, &state.compaction_task].into_iter().flatten();
                let handles: Vec<TaskHandle> = state.batches.live_handles().chain(jobs).cloned().collect();
                if handles.is_empty() {
                    // No task is left, and none can start: every path that spawns one checks `closed` first.
                    sealed = self.seal_and_close(&mut state);
                    if sealed.is_err() && !self.inner.closed.is_set() {
                        // The seal failed: not closed, the caller may retry.
                        return sealed;
                    }
                    break;
                }
                handles
            };
            // A task may spawn another (a group commit's rotation spawns a flush): the slots are read again.
            for handle in handles {
                self.inner.env.wait(&handle)?;
            }
        }
        if !self.inner.closed.is_set() {
            return Err(Error::Closed { reason: format!("background work still ran after {CLOSE_WAITS_MAX} waits") });
        }
        drop(self.inner.lock.lock().expect("lock slot poisoned").take());
        // Closed either way; an error says acknowledged writes were not synced (ADR-0203).
        sealed
    }

    fn seal_and_close(&self, state: &mut State<E>) -> Result<()> {
        // ADR-0203: a poisoned database is closed without a seal (its log's tail may be unknown), and then writes
        // it acknowledged unsynced (`SyncMode::NoSync`) are not durable: the close reports the failure that
        // poisoned it instead of `Ok`.
        let mut unsynced_lost = None;
        if !self.inner.is_poisoned() {
            // Seal the segment: the seal's synced boundary covers every record, so damage to the last data
            // record of a cleanly closed log reads as corruption, not as a torn tail (ADR-0012).
            state.wal.append(RecordKind::Seal, &[], false)?;
            state.wal.sync()?;
            crate::commit::acknowledge_all(&self.inner, state)?;
        } else if self.inner.options.sync_mode == SyncMode::NoSync && state.wal.synced_offset() < state.wal.end_offset()
        {
            unsynced_lost = self.inner.poison_error().map(|error| match error {
                // A crash cut the earlier failure: say so, the caller must drop this instance.
                error if error.is_crash() => error,
                error => Error::Closed {
                    reason: format!(
                        "the writes acknowledged since the last sync were not synced and may be lost: an earlier \
                         failure poisoned the database: {error}"
                    ),
                },
            });
        }
        self.inner.closed.set();
        self.inner.empty_read_cells();
        unsynced_lost.map_or(Ok(()), Err)
    }

    /// Counters and sizes.
    pub fn stats(&self) -> Stats {
        let state = self.inner.state();
        Stats {
            tables_per_level: state.version.levels.iter().map(Vec::len).collect(),
            bytes_per_level: (0..state.version.levels.len()).map(|level| state.version.level_bytes(level)).collect(),
            memtable_bytes: state.memtable.size_bytes(),
            immutable_memtables: state.immutables.len(),
            flush_count: state.flush_count,
            compaction_count: state.compaction_count,
            log_seals: state.log_seals,
            last_sequence: state.last_sequence,
            wal_segments: 1 + state.immutables.len(),
            pending_commits: state.pending_commits.len(),
            block_cache_hits: self.inner.cache.hits(),
            block_cache_misses: self.inner.cache.misses(),
            commits: state.commit_count,
            lock_holds: self.inner.lock_holds(),
        }
    }

    /// The highest acknowledged sequence number.
    pub fn last_sequence(&self) -> Sequence {
        self.inner.visible_sequence()
    }

    /// The directory this database lives in.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Structural invariants, for the simulator and tests (not on the hot path): levels sorted and
    /// non-overlapping, readers see what the writer published last (ADR-0082), every table in the version exists
    /// on disk, no leaked table or log files, the conflict tracker's index is its records' ([`Db::check_transactions`]).
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        self.check_transactions()?;
        let state = self.inner.state();
        state.version.check(state.last_sequence)?;
        self.inner.check_published(&state)?;
        if self.inner.is_poisoned() || self.inner.closed.is_set() {
            return Ok(());
        }
        // Numbers, not formatted names, and names, not paths: this runs after every simulator step (ADR-0136). Nor
        // a list of them: each name is checked as the listing passes it, and which live tables it found is kept in
        // bits on the stack (ADR-0160); the errors are the ones the two lists gave, in the same order.
        let live_count = state.version.tables().count();
        let mut inline = [0u64; LIVE_MARK_WORDS_INLINE];
        let mut spilled = Vec::new();
        let found = live_marks(&mut inline, &mut spilled, live_count);
        let (mut leaked_table, mut leaked_log) = (None, None);
        let mut classify = |name: &std::ffi::OsStr| {
            let Some(name) = name.to_str() else { return };
            if let Some(number) = parse_number(name, "table-", ".sst") {
                // The first live table of this number is marked (a version naming a number twice is Version's
                // to refuse; the check below still reads it as the lists did).
                let live = state.version.tables().position(|table| table.meta.file_number == number);
                if let Some(index) = live {
                    found[index / 64] |= 1 << (index % 64);
                }
                let live = live.is_some();
                let kept = live || state.pending_outputs.contains(&number) || state.deleting_files.contains(&number);
                if !kept && leaked_table.is_none() {
                    leaked_table = Some(number);
                }
            } else if let Some(number) = parse_number(name, "wal-", ".log") {
                let referenced =
                    number == state.wal.number() || state.immutables.iter().any(|i| i.wal_number == number);
                if !referenced && !state.deleting_files.contains(&number) && leaked_log.is_none() {
                    leaked_log = Some(number);
                }
            }
        };
        self.inner.env.visit_dir_names(&self.inner.dir, &mut classify).map_err(|e| format!("list_dir failed: {e}"))?;
        let marked = |index: usize| found[index / 64] & (1 << (index % 64)) != 0;
        for (index, live) in state.version.tables().enumerate() {
            let number = live.meta.file_number;
            // Unmarked: missing, unless an earlier live table of the same number was marked for it.
            if !marked(index) && !state.version.tables().position(|t| t.meta.file_number == number).is_some_and(marked)
            {
                return Err(format!("table {number} is in the manifest but missing on disk"));
            }
        }
        if let Some(number) = leaked_table {
            return Err(format!("leaked table file {}", table_file_name(number)));
        }
        if let Some(number) = leaked_log {
            return Err(format!("leaked log segment {}", wal_file_name(number)));
        }
        Ok(())
    }
}

/// Live tables [`Db::check_invariants`] marks in bits on the stack (64 per word); a version with more spills.
const LIVE_MARK_WORDS_INLINE: usize = 4;

/// Zeroed mark words for `count` live tables: `inline`'s first words when they are enough, else `spilled`, grown.
pub(crate) fn live_marks<'a>(
    inline: &'a mut [u64; LIVE_MARK_WORDS_INLINE],
    spilled: &'a mut Vec<u64>,
    count: usize,
) -> &'a mut [u64] {
    let words = count.div_ceil(64);
    let marks = if words <= LIVE_MARK_WORDS_INLINE {
        &mut inline[..words]
    } else {
        spilled.resize(words, 0);
        &mut spilled[..]
    };
    marks.fill(0);
    marks
}
