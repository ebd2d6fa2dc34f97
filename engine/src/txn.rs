//! Transactions (ADR-0022..ADR-0026): serializable read-write transactions, read-only transactions, and the
//! three-step commit pipeline with group commit.
//!
//! A commit is three steps, each visible to the simulator:
//! 1. **submit** — under the state lock: SSI validation (the [`ConflictTracker`]), sequence assignment, WAL
//!    append. Returns a [`CommitTicket`].
//! 2. **sync** — the `group-commit` task syncs the log once for every record appended so far, outside the lock
//!    (concurrent committers share it: a batch).
//! 3. **acknowledge** — records now durable are applied to the memtable in sequence order and become visible;
//!    [`Db::wait_for_commit`] returns.
//!
//! Nothing ever blocks waiting for another transaction: conflicts are detected, not waited on.
//!
//! Modelled by `specs::Mvcc` (snapshot reads, first committer wins) and `specs::Ssi` (which drives this module's
//! conflict tracker, `crate::ssi`, through the same calls); see `specs/README.md`.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::ops::RangeBounds;
use std::sync::Arc;

use env::{Env, File, TaskHandle, TaskStep};

use crate::db::{Db, Inner, PendingCommit, State};
use crate::error::{Error, Result};
use crate::options::SyncMode;
use crate::scan::{Registrar, ScanIter, key_range, prefix_range};
use crate::ssi::{Conflict, ConflictCause, KeyRange, TxnId};
use crate::types::{Sequence, ValueKind, check_write};
use crate::wal::{Batch, BatchWrite, RecordKind, batch_write_bytes};

/// How many group-commit rounds a committer waits through before giving up.
pub const COMMIT_WAITS_MAX: u32 = 1 << 16;
/// The most writes one transaction may buffer.
pub const TRANSACTION_WRITES_MAX: usize = 1 << 20;

/// A submitted commit: its writes are in the log; [`Db::wait_for_commit`] makes them durable and visible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitTicket {
    /// The sequence of the commit's last write.
    pub last_sequence: Sequence,
}

/// A serialization failure as the engine reports it, probed by cause.
pub(crate) fn conflict<E: Env>(env: &E, conflict: Conflict) -> Error {
    match &conflict.cause {
        ConflictCause::WriteWrite { .. } => env::probe!(env, "ssi.conflict_write_write"),
        ConflictCause::ReadWrite { .. } => env::probe!(env, "ssi.conflict_read_write"),
        ConflictCause::ReadWriteCommittedFirst { .. } => env::probe!(env, "ssi.conflict_read_write_committed_first"),
        ConflictCause::DangerousStructure { .. } => env::probe!(env, "ssi.conflict_dangerous_structure"),
        ConflictCause::ReadOnlyGuard { .. } => env::probe!(env, "ssi.conflict_read_only_guard"),
        _ => {}
    }
    Error::Conflict { cause: conflict.cause }
}

/// Makes a transaction `!Sync` (it stays `Send`): one thread at a time uses it (ADR-0064).
type NotSync = PhantomData<Cell<()>>;

/// A serializable read-write transaction. Dropping it uncommitted rolls it back. `Send`, not `Sync`.
#[derive(Debug)]
pub struct Transaction<E: Env> {
    db: Db<E>,
    id: TxnId,
    snapshot: Sequence,
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// The encoded size of `writes` as one batch record's payload: kept within the log's record limit.
    payload_bytes: usize,
    ended: bool,
    not_sync: NotSync,
}

/// A read-only transaction: reads at its snapshot, never aborts, never waits. It has no write methods. `Send`,
/// not `Sync`.
#[derive(Debug)]
pub struct ReadTransaction<E: Env> {
    db: Db<E>,
    id: TxnId,
    snapshot: Sequence,
    not_sync: NotSync,
}

impl<E: Env> Db<E> {
    /// Begin a serializable read-write transaction.
    pub fn begin(&self) -> Result<Transaction<E>> {
        let mut state = self.inner.state();
        state.check_writable()?;
        let snapshot = state.last_sequence;
        let id = self.track(&mut state, snapshot, false)?;
        *state.snapshots.entry(snapshot).or_insert(0) += 1;
        let payload_bytes = crate::wal::BATCH_HEADER_BYTES;
        Ok(Transaction {
            db: self.clone(),
            id,
            snapshot,
            writes: BTreeMap::new(),
            payload_bytes,
            ended: false,
            not_sync: PhantomData,
        })
    }

    /// Start tracking a transaction, expiring the oldest ones when the tracker is full (ADR-0072).
    pub(crate) fn track(&self, state: &mut State<E>, snapshot: Sequence, read_only: bool) -> Result<TxnId> {
        let expired_before = state.tracker.stats.expired;
        let tracked = state.tracker.try_begin(snapshot, read_only);
        if state.tracker.stats.expired > expired_before {
            env::probe!(self.inner.env, "ssi.transaction_expired");
        }
        tracked.map_err(|error| conflict(&self.inner.env, error))
    }

    /// Begin a read-only transaction.
    pub fn begin_read(&self) -> Result<ReadTransaction<E>> {
        let mut state = self.inner.state();
        state.check_open()?;
        // The newest snapshot no in-flight pivot straddles: never waits, never aborts (ADR-0025).
        let snapshot = state.tracker.safe_snapshot(state.last_sequence);
        if snapshot < state.last_sequence {
            // An in-flight pivot straddles the latest snapshot: the reader reads below it instead of waiting.
            env::probe!(self.inner.env, "ssi.safe_snapshot_stepped_back");
        }
        let id = self.track(&mut state, snapshot, true)?;
        *state.snapshots.entry(snapshot).or_insert(0) += 1;
        Ok(ReadTransaction { db: self.clone(), id, snapshot, not_sync: PhantomData })
    }

    /// Wait until the commit is durable and visible: runs (or joins) the group-commit sync.
    pub fn wait_for_commit(&self, ticket: &CommitTicket) -> Result<()> {
        for _ in 0..COMMIT_WAITS_MAX {
            let handle = {
                let mut state = self.inner.state();
                if ticket.last_sequence <= state.last_sequence {
                    return Ok(());
                }
                state.check_writable()?;
                assert!(!state.pending_commits.is_empty(), "an unacknowledged commit is not pending");
                ensure_group_commit_task(&self.inner, &mut state)
            };
            self.inner.env.wait(&handle)?;
        }
        Err(Error::Closed { reason: format!("commit not acknowledged within {COMMIT_WAITS_MAX} group commits") })
    }

    /// How many commits are appended but not yet acknowledged (for the simulator).
    pub fn pending_commits(&self) -> usize {
        self.inner.state().pending_commits.len()
    }

    /// Statistics of the conflict tracker: rw edges, aborts by cause, and how many records it holds.
    pub fn conflict_stats(&self) -> (crate::ssi::TrackerStats, usize) {
        let state = self.inner.state();
        (state.tracker.stats.clone(), state.tracker.tracked())
    }
}

fn release_snapshot<E: Env>(state: &mut State<E>, snapshot: Sequence) {
    let count = state.snapshots.get_mut(&snapshot).expect("snapshot registered");
    *count -= 1;
    if *count == 0 {
        state.snapshots.remove(&snapshot);
    }
}

/// A batch of `writes` over the log's record limit is `InvalidArgument` (ADR-0071).
fn check_payload(payload_bytes: usize) -> Result<()> {
    if payload_bytes > crate::wal::RECORD_PAYLOAD_BYTES_MAX {
        let limit = crate::wal::RECORD_PAYLOAD_BYTES_MAX;
        let message = format!("a transaction's writes take {payload_bytes} bytes in the log, over its {limit}");
        return Err(Error::InvalidArgument { message });
    }
    Ok(())
}

impl<E: Env> Transaction<E> {
    /// The sequence this transaction reads at.
    pub fn snapshot(&self) -> Sequence {
        self.snapshot
    }

    fn fail(&mut self, error: Conflict) -> Error {
        self.end_with(|state, id| state.tracker.abort(id));
        conflict(&self.db.inner.env, error)
    }

    fn end_with(&mut self, finish: impl FnOnce(&mut State<E>, TxnId)) {
        if self.ended {
            return;
        }
        self.ended = true;
        let mut state = self.db.inner.state();
        finish(&mut state, self.id);
        release_snapshot(&mut state, self.snapshot);
    }

    fn check_open(&self) -> Result<()> {
        if self.ended {
            return Err(Error::InvalidArgument { message: "the transaction has ended".into() });
        }
        Ok(())
    }

    /// Read `key`: this transaction's own write, else the value at its snapshot.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_open()?;
        if let Some(own) = self.writes.get(key) {
            return Ok(own.clone());
        }
        let value = self.db.get_at(key, self.snapshot)?;
        let tracked = self.db.inner.state().tracker.on_read(self.id, key);
        tracked.map_err(|error| self.fail(error))?;
        Ok(value)
    }

    /// The rows in `range` at the snapshot, with this transaction's own writes applied: a lazy, double-ended
    /// iterator (ADR-scan-a). `Err` up front when the transaction has ended, the database is closed or the
    /// transaction is doomed; the range it observes is registered as a predicate read when it is exhausted or
    /// dropped.
    pub fn scan<'a>(&mut self, range: impl RangeBounds<&'a [u8]>) -> Result<ScanIter<'_>> {
        self.scan_range(key_range(&range))
    }

    /// The rows whose key starts with `prefix`, as [`Transaction::scan`] returns them.
    pub fn scan_prefix(&mut self, prefix: &[u8]) -> Result<ScanIter<'_>> {
        self.scan_range(prefix_range(prefix))
    }

    fn scan_range(&mut self, bounds: KeyRange) -> Result<ScanIter<'_>> {
        self.check_open()?;
        let view = self.db.inner.read_view()?;
        let doomed = self.db.inner.state().tracker.check_doomed_public(self.id);
        doomed.map_err(|error| self.fail(error))?;
        let registrar = Registrar { registry: self.db.inner.clone(), txn: self.id, read_only: false };
        Ok(ScanIter::new(&view, bounds, self.snapshot, Some(&self.writes), Some(registrar)))
    }

    fn buffer(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        self.check_open()?;
        check_write(key, value.unwrap_or(&[]))?;
        if self.writes.len() >= TRANSACTION_WRITES_MAX && !self.writes.contains_key(key) {
            let message = format!("a transaction may write at most {TRANSACTION_WRITES_MAX} keys");
            return Err(Error::InvalidArgument { message });
        }
        let replaced =
            self.writes.get(key).map_or(0, |old| batch_write_bytes(key.len(), old.as_ref().map_or(0, Vec::len)));
        let payload_bytes = self.payload_bytes - replaced + batch_write_bytes(key.len(), value.map_or(0, <[u8]>::len));
        check_payload(payload_bytes)?;
        let doomed = {
            let state = self.db.inner.state();
            state.check_open()?;
            state.tracker.check_doomed_public(self.id)
        };
        doomed.map_err(|error| self.fail(error))?;
        self.writes.insert(key.to_vec(), value.map(<[u8]>::to_vec));
        self.payload_bytes = payload_bytes;
        Ok(())
    }

    /// Write `value` under `key` (visible to this transaction now, to others after commit).
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.buffer(key, Some(value))
    }

    /// Delete `key`.
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.buffer(key, None)
    }

    /// Validate and append this transaction's commit without waiting for it to be durable.
    /// `Db::wait_for_commit` finishes it. Fails with `is_conflict()` on a serialization failure.
    pub fn submit(mut self) -> Result<Option<CommitTicket>> {
        self.check_open()?;
        self.ended = true;
        let writes: Vec<BatchWrite> = std::mem::take(&mut self.writes)
            .into_iter()
            .map(|(key, value)| match value {
                Some(value) => BatchWrite { kind: ValueKind::Put, key, value },
                None => BatchWrite { kind: ValueKind::Delete, key, value: Vec::new() },
            })
            .collect();
        let mut state = self.db.inner.state();
        if let Err(error) = state.check_open() {
            release_snapshot(&mut state, self.snapshot);
            state.tracker.abort(self.id);
            return Err(error);
        }
        if writes.is_empty() {
            release_snapshot(&mut state, self.snapshot);
            let visible = state.last_sequence;
            let finished = state.tracker.finish(self.id, visible);
            return finished.map(|()| None).map_err(|error| conflict(&self.db.inner.env, error));
        }
        // The snapshot stays registered until the commit is visible (released by `acknowledge`): a reader's safe
        // snapshot may go back to it (ADR-0025).
        let result = submit(&self.db.inner, &mut state, writes, self.id, Some(self.snapshot), true).map(Some);
        if result.is_err() {
            release_snapshot(&mut state, self.snapshot);
        }
        result
    }

    /// Commit: serializable, and durable when it returns (in `Sync` mode).
    pub fn commit(self) -> Result<()> {
        let db = self.db.clone();
        match self.submit()? {
            Some(ticket) => db.wait_for_commit(&ticket),
            None => Ok(()),
        }
    }

    /// Roll back (the same as dropping it).
    pub fn rollback(mut self) {
        self.end_with(|state, id| state.tracker.abort(id));
    }
}

impl<E: Env> Drop for Transaction<E> {
    fn drop(&mut self) {
        self.end_with(|state, id| state.tracker.abort(id));
    }
}

impl<E: Env> ReadTransaction<E> {
    /// The sequence this transaction reads at.
    pub fn snapshot(&self) -> Sequence {
        self.snapshot
    }

    /// Read `key` at the snapshot. Never a conflict.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let value = self.db.get_at(key, self.snapshot)?;
        let tracked = self.db.inner.state().tracker.on_read(self.id, key);
        self.expired_only(tracked)?;
        Ok(value)
    }

    /// A read-only transaction never aborts for a conflict; it can only be expired (ADR-0072).
    fn expired_only(&self, tracked: Result<(), Conflict>) -> Result<()> {
        tracked.map_err(|error| {
            assert!(error.cause == ConflictCause::Expired, "a read-only transaction was chosen to abort");
            conflict(&self.db.inner.env, error)
        })
    }

    /// The rows in `range` at the snapshot, as [`Transaction::scan`] returns them. Never a conflict.
    pub fn scan<'a>(&mut self, range: impl RangeBounds<&'a [u8]>) -> Result<ScanIter<'_>> {
        self.scan_range(key_range(&range))
    }

    /// The rows whose key starts with `prefix`. Never a conflict.
    pub fn scan_prefix(&mut self, prefix: &[u8]) -> Result<ScanIter<'_>> {
        self.scan_range(prefix_range(prefix))
    }

    fn scan_range(&mut self, bounds: KeyRange) -> Result<ScanIter<'_>> {
        let view = self.db.inner.read_view()?;
        let expired = self.db.inner.state().tracker.check_doomed_public(self.id);
        self.expired_only(expired)?;
        let registrar = Registrar { registry: self.db.inner.clone(), txn: self.id, read_only: true };
        Ok(ScanIter::new(&view, bounds, self.snapshot, None, Some(registrar)))
    }
}

impl<E: Env> Drop for ReadTransaction<E> {
    fn drop(&mut self) {
        let mut state = self.db.inner.state();
        let visible = state.last_sequence;
        let finished = state.tracker.finish(self.id, visible);
        assert!(finished.is_ok(), "a read-only transaction was doomed");
        release_snapshot(&mut state, self.snapshot);
    }
}

/// Step 1: validate `txn`'s writes, assign sequences, append the record. Under the state lock.
pub(crate) fn submit<E: Env>(
    inner: &Arc<Inner<E>>,
    state: &mut State<E>,
    writes: Vec<BatchWrite>,
    txn: TxnId,
    snapshot: Option<Sequence>,
    spawn_group_commit: bool,
) -> Result<CommitTicket> {
    let payload_bytes = crate::wal::BATCH_HEADER_BYTES
        + writes.iter().map(|write| batch_write_bytes(write.key.len(), write.value.len())).sum::<usize>();
    if let Err(error) = state.check_writable().and_then(|()| check_payload(payload_bytes)) {
        state.tracker.abort(txn);
        return Err(error);
    }
    let first = state.next_sequence;
    let last = first + writes.len() as u64 - 1;
    if last > crate::types::SEQUENCE_MAX {
        state.tracker.abort(txn);
        return Err(Error::Closed { reason: format!("sequence numbers exhausted (at {first})") });
    }
    let keys: Vec<Vec<u8>> = writes.iter().map(|write| write.key.clone()).collect();
    state.tracker.commit(txn, &keys, last).map_err(|error| conflict(&inner.env, error))?;
    let batch = Batch { first_sequence: first, writes };
    let split = inner.env.buggify("wal.split_write");
    if let Err(error) = state.wal.append(RecordKind::Batch, &crate::wal::encode_batch(&batch), split) {
        let error = Error::from(error);
        inner.poison(state, &error);
        return Err(error);
    }
    state.next_sequence = last + 1;
    let (wal_number, end_offset) = (state.wal.number(), state.wal.end_offset());
    state.pending_commits.push_back(PendingCommit { batch, wal_number, end_offset, snapshot });
    // Canary: acknowledge before the record is synced.
    if inner.options.sync_mode == SyncMode::NoSync || crate::canary::active("unsynced-ack") {
        acknowledge(state, true);
        maybe_rotate(inner, state)?;
    } else if spawn_group_commit {
        // Spawned now, so a simulator can step the shared sync before anyone waits (batches larger than one).
        ensure_group_commit_task(inner, state);
    }
    Ok(CommitTicket { last_sequence: last })
}

/// Step 3: make every durable pending commit visible, in sequence order. `all` acknowledges every pending
/// commit (`NoSync` mode, or after the segment was sealed and synced).
pub(crate) fn acknowledge<E: Env>(state: &mut State<E>, all: bool) {
    while let Some(front) = state.pending_commits.front() {
        let durable = all || front.wal_number < state.wal.number() || front.end_offset <= state.wal.synced_offset();
        if !durable {
            break;
        }
        let commit = state.pending_commits.pop_front().expect("front exists");
        for (index, write) in commit.batch.writes.iter().enumerate() {
            state.memtable.insert(&write.key, commit.batch.first_sequence + index as u64, write.kind, &write.value);
        }
        let last = commit.batch.last_sequence();
        assert!(last > state.last_sequence, "acknowledged out of sequence order");
        state.last_sequence = last;
        if let Some(snapshot) = commit.snapshot {
            release_snapshot(state, snapshot);
        }
        state.tracker.set_visible(last);
    }
}

pub(crate) fn maybe_rotate<E: Env>(inner: &Arc<Inner<E>>, state: &mut State<E>) -> Result<()> {
    let full = state.memtable.size_bytes() >= inner.options.flush_threshold_bytes;
    let early = !full && !state.memtable.is_empty() && inner.env.buggify("memtable.early_rotate");
    if early {
        env::probe!(inner.env, "memtable.rotated_early");
    }
    if full || early {
        crate::jobs::rotate(inner, state)?;
    }
    Ok(())
}

/// The running group-commit task, spawned if there is none.
pub(crate) fn ensure_group_commit_task<E: Env>(inner: &Arc<Inner<E>>, state: &mut State<E>) -> TaskHandle {
    if let Some(handle) = &state.group_commit_task {
        return handle.clone();
    }
    let weak = Arc::downgrade(inner);
    let handle = inner.env.spawn(
        "group-commit",
        Box::new(move || {
            let Some(inner) = weak.upgrade() else { return TaskStep::Done };
            match group_commit_step(&inner) {
                Ok(true) => TaskStep::Continue,
                Ok(false) => TaskStep::Done,
                Err(error) => {
                    let mut state = inner.state();
                    inner.poison(&mut state, &error);
                    state.group_commit_task = None;
                    TaskStep::Done
                }
            }
        }),
    );
    state.group_commit_task = Some(handle.clone());
    handle
}

/// Step 2: sync the log once for every record appended so far (outside the lock), then acknowledge.
fn group_commit_step<E: Env>(inner: &Arc<Inner<E>>) -> Result<bool> {
    {
        let mut state = inner.state();
        if state.pending_commits.is_empty() || state.poisoned.is_some() {
            state.group_commit_task = None;
            return Ok(false);
        }
    }
    sync_and_acknowledge(inner)?;
    let mut state = inner.state();
    let more = !state.pending_commits.is_empty();
    if !more {
        state.group_commit_task = None;
    }
    Ok(more)
}

/// One shared sync: capture the log's end, sync outside the lock, then acknowledge every commit now durable.
fn sync_and_acknowledge<E: Env>(inner: &Arc<Inner<E>>) -> Result<()> {
    let (file, number, end) = {
        let mut state = inner.state();
        let number = state.wal.number();
        let (file, end) = state.wal.begin_sync();
        (file, number, end)
    };
    let synced = file.sync();
    let mut state = inner.state();
    match synced {
        Ok(()) => {}
        // Canary: a failed sync is treated as success.
        Err(_) if crate::canary::active("fsync-error-ignored") => {}
        Err(error) => {
            let error = Error::from(error);
            inner.poison(&mut state, &error);
            return Err(error);
        }
    }
    if state.wal.number() == number {
        state.wal.mark_synced(end);
    }
    let pending_before = state.pending_commits.len();
    acknowledge(&mut state, false);
    if pending_before - state.pending_commits.len() > 1 {
        // One sync made several commits durable: a group commit batch.
        env::probe!(inner.env, "txn.group_commit_batch");
    }
    maybe_rotate(inner, &mut state)
}

/// Sync the log inline and acknowledge what became durable: for a caller that waits anyway (a blind write), this
/// saves spawning and stepping the group-commit task. Concurrent callers may sync concurrently; acknowledgement is
/// ordered under the lock, so every commit still becomes visible in sequence order (ADR-0021).
pub(crate) fn sync_inline<E: Env>(inner: &Arc<Inner<E>>, ticket: &CommitTicket) -> Result<()> {
    for _ in 0..COMMIT_WAITS_MAX {
        {
            let state = inner.state();
            if ticket.last_sequence <= state.last_sequence {
                return Ok(());
            }
            state.check_writable()?;
        }
        sync_and_acknowledge(inner)?;
    }
    Err(Error::Closed { reason: format!("commit not acknowledged within {COMMIT_WAITS_MAX} syncs") })
}
