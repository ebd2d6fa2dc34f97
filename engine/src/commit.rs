//! The commit pipeline (ADR-0021, ADR-0081): every write, transactional or blind, goes through it.
//!
//! 1. **submit** — under the writer lock: SSI validation (the conflict tracker), sequence assignment, and the
//!    log record encoded into the segment's pending bytes (no IO, ADR-0134). A synced commit joins the open batch
//!    (spawning its `group-commit` task if none is open) and gets a [`CommitTicket`]. Both are **finished** after
//!    the lock: the record is written through the log lock, by whoever finds pending bytes, one `write_all_at` for
//!    the whole group (`crate::wal_writer`). An unsynced commit's writes go into the concurrent memtable in
//!    parallel with other committers' (ADR-0133), before its record is written (ADR-0196: the insert overlaps an
//!    earlier committer's group write, and records appended meanwhile join that group), and it becomes visible
//!    once its record is written and every earlier sequence has landed (the visibility watermark,
//!    `crate::watermark`).
//! 2. **capture** — the batch's first step: once no earlier batch is still syncing, it captures the log's end
//!    under the writer lock and closes (later commits open the next batch).
//! 3. **sync and acknowledge** — its second step: one sync outside every lock, then every commit now durable is
//!    applied to the memtable in sequence order under the writer lock, and becomes visible through the
//!    watermark after it (ADR-0146; under it when the batch rotates); the task ends. A committer waits
//!    (`Env::wait`) on its own batch's task only: the task handle is the batch's condition variable.

use std::mem;
use std::sync::{Arc, Weak};

use env::{Env, File, OpenOptions, TaskHandle, TaskStep};

use crate::error::{Error, Result};
use crate::memtable::Memtable;
use crate::options::SyncMode;
use crate::ssi::{Conflict, ConflictCause, TxnId, WrittenKey};
use crate::state::{Immutable, Inner, PendingCommit, Registry, State};
use crate::types::Sequence;
use crate::wal::{Batch, BatchWrite, RecordKind};
use crate::wal_writer::LogTail;
use crate::watermark::Completed;

/// How many batches a committer waits through before giving up.
pub const COMMIT_WAITS_MAX: u32 = 1 << 16;
/// The most batch tasks alive at once: one capturing-or-syncing, one open (a batch captures only after the one
/// before it ended, so a third cannot start).
pub const BATCHES_LIVE_MAX: usize = 2;
/// The name every batch task is spawned under (the simulator's `run_task` steps name it).
pub const GROUP_COMMIT_TASK: &str = "group-commit";

/// A submitted commit: its writes are in the log; [`crate::Db::wait_for_commit`] makes them durable and visible.
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
        ConflictCause::DangerousStructure { .. } => env::probe!(env, "ssi.conflict_dangerous_structure"),
        ConflictCause::ReadOnlyGuard { .. } => env::probe!(env, "ssi.conflict_read_only_guard"),
        _ => {}
    }
    Error::Conflict { cause: conflict.cause }
}

/// Start tracking a transaction, expiring the oldest ones when the tracker is full (ADR-0072).
pub(crate) fn track<E: Env>(
    inner: &Inner<E>,
    registry: &mut Registry,
    snapshot: Sequence,
    read_only: bool,
) -> Result<TxnId> {
    let expired_before = registry.tracker.stats.expired;
    let tracked = registry.tracker.try_begin(snapshot, read_only);
    if registry.tracker.stats.expired > expired_before {
        env::probe!(inner.env, "ssi.transaction_expired");
        inner.publish_dooms(registry);
    }
    tracked.map_err(|error| conflict(&inner.env, error))
}

/// A batch of `writes` over the log's record limit (`Options::record_payload_bytes_max`) is `InvalidArgument`
/// (ADR-0071, ADR-0099).
pub(crate) fn check_payload(payload_bytes: usize, options: &crate::Options) -> Result<()> {
    let limit = options.record_payload_bytes_max;
    if payload_bytes > limit {
        let message = format!("a transaction's writes take {payload_bytes} bytes in the log, over its {limit}");
        return Err(Error::InvalidArgument { message });
    }
    Ok(())
}

/// A commit's writes with what can be computed before the writer lock (ADR-0132): the log payload, its first
/// sequence set under the lock, and the keys the conflict tracker records, already in the shared form it keeps
/// (ADR-0144: no key is copied under the writer lock).
pub(crate) struct Prepared {
    writes: Vec<BatchWrite>,
    keys: Vec<WrittenKey>,
    payload: Vec<u8>,
    /// The transaction's reads not yet registered with the conflict tracker: registered in the validation's
    /// registry take, just before its writes are (ADR-0198).
    reads: Vec<Vec<u8>>,
}

impl Prepared {
    /// These writes, committed by a transaction that read `reads` (not yet registered) at its snapshot.
    pub(crate) fn with_reads(self, reads: Vec<Vec<u8>>) -> Self {
        Self { reads, ..self }
    }
}

/// Step 0, outside every lock: encode the log payload (at sequence 1, a valid placeholder the writer replaces) and
/// copy the keys out.
pub(crate) fn prepare(writes: Vec<BatchWrite>) -> Prepared {
    let keys = writes.iter().map(|write| WrittenKey::from(write.key.as_slice())).collect();
    let batch = Batch { first_sequence: 1, writes };
    let payload = crate::wal::encode_batch(&batch);
    Prepared { writes: batch.writes, keys, payload, reads: Vec::new() }
}

/// A commit appended under the writer lock, for [`finish`] to complete after it.
#[must_use = "a commit's record is written only once finished"]
pub(crate) struct Submitted<E: Env> {
    ticket: CommitTicket,
    /// The segment its record is queued in, and the record's end (ADR-0134).
    log: (Arc<LogTail<E>>, u64),
    /// An unsynced commit's writes and snapshot, and the memtable they go into (ADR-0133); none when a group
    /// commit's batch acknowledges it.
    insert: Option<(Arc<Memtable>, Batch, Option<Sequence>)>,
}

/// Step 1: validate `txn`'s writes, assign sequences, append the record, join the open batch (synced) or hand the
/// writes to [`finish`] (unsynced). Under the writer lock. `txn` is `None` for writes that read nothing (a blind
/// write, a transaction that only wrote): they are tracked in this take, at a snapshot that includes every
/// submitted commit (ADR-0210; no false write-write conflict), with nothing registered for compaction.
pub(crate) fn submit<E: Env>(
    inner: &Arc<Inner<E>>,
    state: &mut State<E>,
    prepared: Prepared,
    txn: Option<TxnId>,
    snapshot: Option<Sequence>,
) -> Result<Submitted<E>> {
    let Prepared { writes, keys, mut payload, reads } = prepared;
    let first = state.next_sequence;
    let last = first + writes.len() as u64 - 1;
    {
        let mut registry = inner.registry();
        let txn = match txn {
            Some(txn) => txn,
            None => {
                assert!(reads.is_empty() && snapshot.is_none(), "untracked writes read nothing");
                track(inner, &mut registry, state.next_sequence - 1, false)?
            }
        };
        // ADR-0198: the reads still buffered are registered in this take, first (a conflict they close is reported
        // before a closed or poisoned database, as when ADR-0195 registered them before the writer lock), then the
        // writes are validated: as if registered just before, with no commit between.
        if !reads.is_empty() {
            let tracked = registry.tracker.on_reads(txn, reads);
            inner.publish_dooms(&registry);
            if let Err(error) = tracked {
                registry.tracker.abort(txn);
                return Err(conflict(&inner.env, error));
            }
        }
        if let Err(error) = inner.check_writable().and_then(|()| check_payload(payload.len(), &inner.options)) {
            registry.tracker.abort(txn);
            return Err(error);
        }
        if last > crate::types::SEQUENCE_MAX {
            registry.tracker.abort(txn);
            return Err(Error::Closed { reason: format!("sequence numbers exhausted (at {first})") });
        }
        registry.tracker.commit_keys(txn, keys, last).map_err(|error| conflict(&inner.env, error))?;
    }
    let batch = Batch { first_sequence: first, writes };
    crate::wal::set_batch_first_sequence(&mut payload, first);
    let split = inner.env.buggify("wal.split_write");
    // Queued, not written: no IO under the writer lock unless the pending bytes are over their limit.
    let end_offset = state.wal.append(RecordKind::Batch, &payload, split).inspect_err(|error| inner.poison(error))?;
    // Canary: acknowledge before the record is synced.
    let unsynced = inner.options.sync_mode == SyncMode::NoSync || crate::canary::active("unsynced-ack");
    if !unsynced && state.batches.open.is_none() {
        // A synced commit that opens a batch writes the pending records before it spawns the batch's task: once
        // per batch under the writer lock, and the Env calls keep the order a record written under the lock had
        // (write, then spawn), so every simulator schedule is unchanged (ADR-0134).
        state.wal.write_out().inspect_err(|error| inner.poison(error))?;
    }
    state.next_sequence = last + 1;
    state.commit_count += 1;
    let wal_number = state.wal.number();
    let log = (Arc::clone(state.wal.tail()), end_offset);
    let ticket = CommitTicket { last_sequence: last };
    if unsynced {
        // The rotation that would seal this memtable waits for this commit's insert (`acknowledge_all`).
        return Ok(Submitted { ticket, log, insert: Some((Arc::clone(&state.memtable), batch, snapshot)) });
    }
    // Joined now, so a simulator can step the shared sync before anyone waits (batches larger than one).
    let group = Some(join_open_batch(inner, state));
    state.pending_commits.push_back(PendingCommit { batch, wal_number, end_offset, snapshot, group });
    Ok(Submitted { ticket, log, insert: None })
}

/// Step 1b, after the writer lock: an unsynced commit's writes go into the memtable its sequences were assigned
/// in (ADR-0196); then the commit's record is written (by this committer for its whole group, or already by
/// another, ADR-0134); a failed write poisons the database and the commit is never visible (its writes stay above
/// the visible sequence, where no read sees them, and a poisoned database neither rotates nor flushes). Then an
/// unsynced commit is completed on the visibility watermark and waits for the commits before it to land (they
/// are inserting now). Then the rotation its writes made due, if no one else did it first.
pub(crate) fn finish<E: Env>(inner: &Arc<Inner<E>>, submitted: Submitted<E>) -> Result<CommitTicket> {
    let Submitted { ticket, log: (tail, end), insert } = submitted;
    if let Some((memtable, batch, _)) = &insert {
        // ADR-0196: inserted before the record is written, invisible until completed after it. The insert runs
        // while an earlier committer writes its group, and a record appended meanwhile joins this one's group.
        insert_writes(memtable, batch);
    }
    let written = tail.write_through(end);
    drop(tail);
    if let Err(error) = written {
        inner.poison(&error);
        if let Some((_, _, Some(snapshot))) = insert {
            inner.registry().release_snapshot(snapshot);
        }
        return Err(error);
    }
    let Some((memtable, batch, snapshot)) = insert else { return Ok(ticket) };
    let (first, last) = (batch.first_sequence, batch.last_sequence());
    inner.complete([Completed { first, last, snapshot }]);
    inner.wait_visible(last)?;
    rotate_if_due(inner, &memtable)?;
    Ok(ticket)
}

/// Submit (under the writer lock `state`), then finish after it; `release` runs, under the registry lock, when
/// the submit fails (the caller's snapshot stays registered otherwise, until the commit is visible).
pub(crate) fn commit_writes<E: Env>(
    inner: &Arc<Inner<E>>,
    mut state: crate::lock_meter::Metered<'_, State<E>, E>,
    prepared: Prepared,
    txn: Option<TxnId>,
    snapshot: Option<Sequence>,
) -> Result<CommitTicket> {
    let submitted = submit(inner, &mut state, prepared, txn, snapshot);
    drop(state);
    let submitted = submitted.inspect_err(|_| {
        if let Some(snapshot) = snapshot {
            inner.registry().release_snapshot(snapshot);
        }
    })?;
    finish(inner, submitted)
}

/// A commit's writes into `memtable`, at their sequences. Copied at their exact size: moving the transaction's
/// buffers in measured slower (ADR-0132).
fn insert_writes(memtable: &Memtable, batch: &Batch) {
    for (index, write) in batch.writes.iter().enumerate() {
        memtable.insert(&write.key, batch.first_sequence + index as u64, write.kind, &write.value);
    }
}

/// Step 3: make every durable pending commit visible, in sequence order. `all` acknowledges every pending
/// commit (after the segment was sealed and synced). The new last sequence is published to readers before the
/// registry learns it ([`Inner::complete`]), so no snapshot the registry hands out is ahead of the read view.
pub(crate) fn acknowledge<E: Env>(inner: &Inner<E>, state: &mut State<E>, all: bool) {
    complete_nonempty(inner, apply_durable(inner, state, all));
}

/// Step 3a, under the writer lock: every durable pending commit's writes into the memtable, in sequence order,
/// and the writer's sources published to readers (ADR-0132's first step). The commits it returns become visible
/// only once [`Inner::complete`] is called with them: under the writer lock ([`acknowledge`]), or after it
/// (a batch that does not rotate, ADR-0146; the watermark orders completions that race).
fn apply_durable<E: Env>(inner: &Inner<E>, state: &mut State<E>, all: bool) -> Vec<Completed> {
    let mut acknowledged: Vec<Completed> = Vec::new();
    for commit in take_durable(state, all) {
        let (first, last) = (commit.batch.first_sequence, commit.batch.last_sequence());
        insert_writes(&state.memtable, &commit.batch);
        assert!(last > state.last_sequence, "acknowledged out of sequence order");
        state.last_sequence = last;
        acknowledged.push(Completed { first, last, snapshot: commit.snapshot });
    }
    if !acknowledged.is_empty() {
        inner.publish(state);
    }
    acknowledged
}

/// The pending commits now durable (every one when `all`), in sequence order, off the pending queue. Under the
/// writer lock.
fn take_durable<E: Env>(state: &mut State<E>, all: bool) -> Vec<PendingCommit> {
    let mut durable = Vec::new();
    while let Some(front) = state.pending_commits.front() {
        if !(all || front.wal_number < state.wal.number() || front.end_offset <= state.wal.synced_offset()) {
            break;
        }
        durable.push(state.pending_commits.pop_front().expect("front exists"));
    }
    durable
}

/// Acknowledge every pending commit and wait until every unsynced one still inserting after the writer lock
/// has landed: every appended sequence is then in `state.memtable` and visible (a rotation, a close).
pub(crate) fn acknowledge_all<E: Env>(inner: &Inner<E>, state: &mut State<E>) -> Result<()> {
    acknowledge(inner, state, true);
    let appended = state.next_sequence - 1;
    inner.wait_visible(appended)?;
    state.last_sequence = appended;
    Ok(())
}

/// Whether `memtable` should be sealed now: full, or (`buggify`) early.
fn rotation_due<E: Env>(inner: &Inner<E>, memtable: &Memtable) -> bool {
    let full = memtable.size_bytes() >= inner.options.flush_threshold_bytes;
    let early = !full && !memtable.is_empty() && inner.env.buggify("memtable.early_rotate");
    if early {
        env::probe!(inner.env, "memtable.rotated_early");
    }
    full || early
}

/// Seal the current log segment, start a new one, and queue the memtable for flushing. Under the writer lock (its
/// syncs too): readers keep reading the view published before it, and see the new memtable once it is published.
pub(crate) fn rotate<E: Env>(inner: &Arc<Inner<E>>, state: &mut State<E>) -> Result<()> {
    let result = rotate_log(inner, state);
    if let Err(error) = &result {
        inner.poison(error);
    }
    result?;
    crate::jobs::ensure_flush_task(inner, state);
    Ok(())
}

fn rotate_log<E: Env>(inner: &Arc<Inner<E>>, state: &mut State<E>) -> Result<()> {
    let number = state.allocate_file_number();
    // The seal follows every queued record: its sync writes them all first (ADR-0134).
    state.wal.append(RecordKind::Seal, &[], false)?;
    // ADR-0212: counted as issued, before the sync: a seal sync that fails still cost its caller a sync.
    state.log_seals += 1;
    state.wal.sync()?;
    // Every pending commit is in this segment and now durable: make it visible in this memtable, whose log is
    // this segment, before the memtable is queued for flushing.
    if !state.pending_commits.is_empty() {
        // The seal's sync made commits durable before their group commit ran.
        env::probe!(inner.env, "wal.seal_acknowledged_pending");
    }
    acknowledge_all(inner, state)?;
    assert!(state.pending_commits.is_empty(), "rotation left commits pending");
    let file = inner.env.open(&inner.wal_path(number), OpenOptions::create_new())?;
    inner.env.sync_dir(&inner.dir)?;
    let next = state.wal.successor(file, number);
    let old = mem::replace(&mut state.wal, next);
    let memtable = mem::replace(&mut state.memtable, Arc::new(Memtable::new()));
    assert!(old.number() < number, "log segment numbers must grow");
    state.immutables.push_back(Immutable { memtable, wal_number: old.number(), wal_path: old.path().to_path_buf() });
    inner.publish(state);
    Ok(())
}

/// Wait until the commit is durable and visible: waits on the task of the batch that holds it, and on no other.
pub(crate) fn wait_for_commit<E: Env>(inner: &Inner<E>, ticket: &CommitTicket) -> Result<()> {
    // Already visible (every unsynced commit, ADR-0132): the registry knows it (so the committer's next snapshot
    // includes it), and the writer lock is not taken a second time.
    if ticket.last_sequence <= inner.registered_visible() {
        return Ok(());
    }
    let mut waited: Option<TaskHandle> = None;
    for _ in 0..COMMIT_WAITS_MAX {
        let handle = {
            let state = inner.state();
            if ticket.last_sequence <= inner.registered_visible() {
                return Ok(());
            }
            inner.check_writable()?;
            let index = state.pending_commits.partition_point(|c| c.batch.last_sequence() < ticket.last_sequence);
            let Some(commit) = state.pending_commits.get(index) else {
                // Not pending: an unsynced commit still inserting after the writer lock (ADR-0133), or a synced
                // one its batch acknowledged and is completing after the writer lock (ADR-0146).
                drop(state);
                return inner.wait_visible(ticket.last_sequence);
            };
            let handle = commit.group.clone().expect("a pending commit waiting for a sync has a batch");
            // Its batch ended without acknowledging it only if it failed, and a failure poisons (checked above).
            assert!(
                waited.as_ref() != Some(&handle),
                "{handle:?} ended and left commit {} pending",
                ticket.last_sequence
            );
            handle
        };
        inner.wait_for_batch(&handle)?;
        waited = Some(handle);
    }
    Err(Error::Closed { reason: format!("commit not acknowledged within {COMMIT_WAITS_MAX} batches") })
}

/// The open batch, spawned if none is open.
fn join_open_batch<E: Env>(inner: &Arc<Inner<E>>, state: &mut State<E>) -> TaskHandle {
    let batches = &mut state.batches;
    if let Some((_, handle)) = &batches.open {
        return handle.clone();
    }
    assert!(batches.live.len() < BATCHES_LIVE_MAX, "a third batch: {:?}", batches.live);
    let (weak, id) = (Arc::downgrade(inner), batches.next_id);
    batches.next_id += 1;
    let mut phase = Phase::Capture { gathered: false };
    let handle = inner.env.spawn(GROUP_COMMIT_TASK, Box::new(move || batch_step(&weak, id, &mut phase)));
    batches.open = Some((id, handle.clone()));
    batches.live.push_back((id, handle.clone()));
    handle
}

/// Where a batch task is.
enum Phase<F> {
    /// Waiting for the batch before it to end, then capturing the log's end.
    Capture { gathered: bool },
    /// The log's end is captured: sync segment `number` up to `end`, then acknowledge.
    Sync { file: Arc<F>, number: u64, end: u64 },
}

fn batch_step<E: Env>(weak: &Weak<Inner<E>>, me: u64, phase: &mut Phase<E::File>) -> TaskStep {
    let Some(inner) = weak.upgrade() else { return TaskStep::Done };
    let step = match std::mem::replace(phase, Phase::Capture { gathered: true }) {
        Phase::Capture { gathered } => {
            capture(&inner, me, gathered).map(|next| next.map(|next| *phase = next).is_some())
        }
        Phase::Sync { file, number, end } => sync_and_acknowledge(&inner, me, &file, number, end).map(|()| false),
    };
    match step {
        Ok(true) => TaskStep::Continue,
        Ok(false) => TaskStep::Done,
        Err(error) => {
            let mut state = inner.state();
            inner.poison(&error);
            state.batches.end(me);
            TaskStep::Done
        }
    }
}

/// The batch's first step(s): wait for the batch before it to end (so its sync covers everything appended
/// meanwhile), pause once for the committers the last batch released when it released more than one (`gathered`
/// says the pause is behind it, ADR-0092), then capture the log's end and close the batch. `Some(phase)` to step
/// again, `None` when done.
fn capture<E: Env>(inner: &Arc<Inner<E>>, me: u64, gathered: bool) -> Result<Option<Phase<E::File>>> {
    let earlier = {
        let mut state = inner.state();
        if inner.is_poisoned() {
            state.batches.end(me);
            return Ok(None);
        }
        let (front, handle) = state.batches.live.front().expect("a live batch is listed").clone();
        let gather_us = inner.options.group_commit_gather_us;
        if front == me && !gathered && gather_us > 0 && state.batches.last_size > 1 {
            // The batch before this one released several committers: give them a moment to join this batch
            // before its log end is captured (ADR-0092). Outside the lock, a step of its own.
            drop(state);
            env::probe!(inner.env, "txn.batch_gathered");
            inner.env.sleep(std::time::Duration::from_micros(gather_us));
            return Ok(Some(Phase::Capture { gathered: true }));
        }
        if front == me {
            state.batches.close(me);
            if state.pending_commits.is_empty() {
                // A rotation's seal already made this batch's commits durable and visible.
                state.batches.end(me);
                return Ok(None);
            }
            let number = state.wal.number();
            // Every queued record is written first, under the writer lock (ADR-0134).
            let (file, end) = state.wal.begin_sync()?;
            return Ok(Some(Phase::Sync { file, number, end }));
        }
        handle
    };
    // Outside the lock: commits keep joining this batch while the one before it syncs.
    inner.env.wait(&earlier)?;
    Ok(Some(Phase::Capture { gathered: false }))
}

/// The batch's last step: one sync outside the lock, then acknowledge every commit now durable.
fn sync_and_acknowledge<E: Env>(inner: &Arc<Inner<E>>, me: u64, file: &E::File, number: u64, end: u64) -> Result<()> {
    let synced = file.sync();
    let mut state = inner.state();
    state.batches.end(me);
    match synced {
        Ok(()) => {}
        // Canary: a failed sync is treated as success.
        Err(_) if crate::canary::active("fsync-error-ignored") => {}
        Err(error) => {
            let error = Error::from(error);
            inner.poison(&error);
            return Err(error);
        }
    }
    if inner.is_poisoned() {
        // A sync after a failed one proves nothing about what the failure lost: nothing more is acknowledged.
        return Ok(());
    }
    if state.wal.number() == number {
        state.wal.mark_synced(end);
    }
    let durable = take_durable(&mut state, false);
    if crate::canary::active("sync-per-commit") {
        // Canary (ADR-0185): the group's one sync repeated for each further commit it made durable.
        for _ in 1..durable.len() {
            file.sync()?;
        }
    }
    state.batches.last_size = durable.len();
    if state.batches.last_size > 1 {
        // One sync made several commits durable: a group commit batch.
        env::probe!(inner.env, "txn.group_commit_batch");
    }
    // ADR-0189: the batch's writes go into the memtable their sequences were assigned in after the writer lock,
    // as an unsynced commit's do (ADR-0133): a rotation waits for them on the watermark. ADR-0146: they become
    // visible through the watermark, which orders them behind any commit still landing, before the task ends and
    // wakes their committers.
    let memtable = Arc::clone(&state.memtable);
    drop(state);
    let acknowledged: Vec<Completed> = durable
        .iter()
        .map(|commit| {
            insert_writes(&memtable, &commit.batch);
            Completed {
                first: commit.batch.first_sequence,
                last: commit.batch.last_sequence(),
                snapshot: commit.snapshot,
            }
        })
        .collect();
    complete_nonempty(inner, acknowledged);
    rotate_if_due(inner, &memtable)
}

/// The rotation `memtable`'s writes made due, under the writer lock taken again, unless another committer rotated
/// first or `Db::close` sealed the log since.
fn rotate_if_due<E: Env>(inner: &Arc<Inner<E>>, memtable: &Arc<Memtable>) -> Result<()> {
    if rotation_due(inner, memtable) {
        let mut state = inner.state();
        if Arc::ptr_eq(&state.memtable, memtable) && !inner.closed.is_set() {
            rotate(inner, &mut state)?;
        }
    }
    Ok(())
}

/// [`Inner::complete`], skipped when nothing was acknowledged.
fn complete_nonempty<E: Env>(inner: &Inner<E>, acknowledged: Vec<Completed>) {
    // Canary: a commit's completion is never published, so its committer waits for it forever (ADR-0169).
    if !acknowledged.is_empty() && !crate::canary::active("completion-unpublished") {
        inner.complete(acknowledged);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ValueKind;
    use crate::{Db, Options};

    /// Queue a one-put commit of `key` (submitted under the writer lock, not yet finished).
    fn queue<E: Env>(inner: &Arc<Inner<E>>, key: &[u8]) -> Submitted<E> {
        let mut state = inner.state();
        let snapshot = state.next_sequence - 1;
        let txn = track(inner, &mut inner.registry(), snapshot, false).unwrap();
        let writes = vec![BatchWrite { kind: ValueKind::Put, key: key.to_vec(), value: b"v".to_vec() }];
        submit(inner, &mut state, prepare(writes), Some(txn), None).unwrap()
    }

    /// ADR-0134's failure path: three commits queued in one group, whose one write fails: every commit in it errs
    /// with that failure, none becomes visible, the database is poisoned, and nothing waits for their sequences
    /// (the last committer's finish and the close return). Synced commits too, where the first one opened the
    /// batch and so wrote its record under the writer lock: its wait fails (its batch ends poisoned, unsynced).
    #[test]
    fn a_failed_group_write_fails_every_commit_in_it_and_none_becomes_visible() {
        for mode in [SyncMode::NoSync, SyncMode::Sync] {
            let env = env::SimEnv::new(9);
            let db = Db::open(env.clone(), "/db", Options::default().with_sync_mode(mode)).unwrap();
            db.put(b"before", b"v").unwrap();
            let mut queued: Vec<_> = [b"a", b"b", b"c"].into_iter().map(|key| queue(&db.inner, key)).collect();
            env.set_fault_config(env::FaultConfig { write_error_ppm: 1_000_000, ..env::FaultConfig::default() });
            if mode == SyncMode::Sync {
                let opener = finish(&db.inner, queued.remove(0)).unwrap();
                let error = wait_for_commit(&db.inner, &opener).unwrap_err();
                assert!(matches!(error, Error::Closed { .. }), "{error:?}");
            }
            let errors: Vec<Error> = queued.into_iter().map(|queued| finish(&db.inner, queued).unwrap_err()).collect();
            env.set_fault_config(env::FaultConfig::default());
            assert!(
                matches!(errors[0], Error::Env(_)) && errors.iter().all(|e| *e == errors[0]),
                "{mode:?}: {errors:?}"
            );
            assert!(db.inner.is_poisoned(), "{mode:?}");
            // ADR-0196: an unsynced commit's writes went into the memtable before its record was written, so they
            // are there, at sequences above the visible one, and no read sees them (below). A synced batch inserts
            // only what a sync made durable: nothing here.
            let memtable = Arc::clone(&db.inner.state().memtable);
            let mut inserted: Vec<Sequence> = memtable.entries().map(|entry| entry.key.sequence).collect();
            inserted.sort_unstable();
            let expected: Vec<Sequence> = if mode == SyncMode::NoSync { vec![1, 2, 3, 4] } else { vec![1] };
            assert_eq!(inserted, expected, "{mode:?}");
            let visible = (db.inner.visible_sequence(), db.inner.registered_visible(), db.inner.registry().visible);
            assert_eq!(visible, (1, 1, 1), "{mode:?}");
            for key in [b"a", b"b", b"c"] {
                assert_eq!(db.get(key).unwrap(), None, "{mode:?}");
            }
            assert_eq!(db.get(b"before").unwrap(), Some(b"v".to_vec()));
            assert!(matches!(db.put(b"d", b"v"), Err(Error::Closed { .. })), "{mode:?}");
            // ADR-0203: unsynced, `before` was acknowledged and the poisoned close cannot sync it: it says so.
            let closed = db.close();
            assert_eq!(closed.is_err(), mode == SyncMode::NoSync, "{mode:?}: {closed:?}");
        }
    }

    /// ADR-0212: a rotation whose seal sync fails poisons the database and still counts the seal it issued
    /// (`Stats::log_seals`), so a wait charged that sync is allowed it (`cost.log_syncs_per_ack`); a rotation
    /// whose sync succeeds counts one too.
    #[test]
    fn a_rotation_whose_seal_sync_fails_counts_the_seal() {
        let env = env::SimEnv::new(11);
        let db = Db::open(env.clone(), "/db", Options::default().with_sync_mode(SyncMode::NoSync)).unwrap();
        db.put(b"a", b"v").unwrap();
        rotate(&db.inner, &mut db.inner.state()).unwrap();
        assert_eq!((db.stats().log_seals, db.inner.is_poisoned()), (1, false));
        db.put(b"b", b"v").unwrap();
        env.set_fault_config(env::FaultConfig { fsync_error_ppm: 1_000_000, ..env::FaultConfig::default() });
        let failed = rotate(&db.inner, &mut db.inner.state());
        env.set_fault_config(env::FaultConfig::default());
        assert!(matches!(failed, Err(Error::Env(_))), "{failed:?}");
        assert_eq!((db.stats().log_seals, db.inner.is_poisoned()), (2, true));
    }

    /// How many 1 ms polls the test below waits for the batch to free the writer lock.
    const POLLS_MAX: u32 = 20_000;

    /// ADR-0146, ADR-0189: a synced batch's commits are inserted and complete on the watermark after the writer
    /// lock. With the watermark's lock held here, the batch still takes its commit off the pending queue and frees
    /// the writer lock, while the commit is not yet registered visible; once the watermark is let go, it is. Under ADR-0133's order the batch held the writer lock while it waited here.
    #[test]
    fn a_synced_batch_completes_after_the_writer_lock() {
        let env = env::RealEnv::new();
        let dir = env.temp_dir("sync-complete-after-writer").unwrap();
        let db = Db::open(env.clone(), dir.path(), Options::default().with_sync_mode(SyncMode::Sync)).unwrap();
        db.put(b"before", b"v").unwrap();
        let marks = db.inner.watermark_lock();
        let committer = db.clone();
        let handle = env.spawn(
            "committer",
            Box::new(move || {
                committer.put(b"k", b"v").unwrap();
                TaskStep::Done
            }),
        );
        let mut seen = None;
        for _ in 0..POLLS_MAX {
            let acknowledged = db.inner.try_state().map(|state| (state.pending_commits.len(), state.next_sequence));
            if acknowledged == Some((0, 3)) {
                seen = Some(db.inner.registered_visible());
                break;
            }
            env.sleep(std::time::Duration::from_millis(1));
        }
        drop(marks);
        env.wait(&handle).unwrap();
        assert_eq!(seen, Some(1), "the writer lock was never free with the commit acknowledged and not yet visible");
        assert_eq!((db.inner.registered_visible(), db.get(b"k").unwrap()), (2, Some(b"v".to_vec())));
        db.close().unwrap();
    }
}
