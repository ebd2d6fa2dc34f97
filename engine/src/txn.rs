//! Transactions (ADR-0022..ADR-0026): serializable read-write transactions and read-only transactions. A commit
//! goes through the commit pipeline (`crate::commit`: submit, one group-commit batch per sync, acknowledge).
//!
//! Nothing ever blocks waiting for another transaction: conflicts are detected, not waited on.
//!
//! Modelled by `specs::Mvcc` (snapshot reads, first committer wins) and `specs::Ssi` (which drives this module's
//! conflict tracker, `crate::ssi`, through the same calls); see `specs/README.md`.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::ops::RangeBounds;
use std::sync::atomic::Ordering;

use env::Env;

use crate::commit::{CommitTicket, conflict, track};
use crate::db::Db;
use crate::error::{Error, Result};
use crate::scan::{Registrar, ScanIter, ScanRegistry, key_range, prefix_range};
use crate::ssi::{Conflict, ConflictCause, KeyRange, TxnId};
use crate::state::{Inner, Registry};
use crate::types::{Sequence, ValueKind, check_write};
use crate::wal::{BatchWrite, batch_write_bytes};

pub use crate::types::TRANSACTION_WRITES_MAX;

/// The most reads a read-write transaction keeps before it registers them with the conflict tracker, all in one
/// registry take (ADR-0195). The rest are registered in its commit's validation take, under the writer lock
/// (ADR-0198).
pub const READS_BUFFERED_MAX: usize = 64;

/// Makes a transaction `!Sync` (it stays `Send`): one thread at a time uses it (ADR-0064).
type NotSync = PhantomData<Cell<()>>;

/// A serializable read-write transaction. Dropping it uncommitted rolls it back. `Send`, not `Sync`.
///
/// It takes its snapshot at its first read (`get`, `scan`, `scan_prefix`), not at [`Db::begin`] (ADR-0210), as
/// InnoDB's consistent read does: until then it has read nothing a snapshot would fix. A transaction that only
/// writes takes none; its commit is validated as a blind write's is, as if it began just before.
#[derive(Debug)]
pub struct Transaction<E: Env> {
    db: Db<E>,
    /// Its conflict tracker id and snapshot, from its first read; `None` while it has only written.
    tracked: Option<Tracked>,
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Keys read at the snapshot and not yet registered with the conflict tracker (ADR-0195): registered in one
    /// registry take when [`READS_BUFFERED_MAX`] are kept, and in the commit's validation take (ADR-0198). A read
    /// registered late is a read at the same snapshot made later, which the tracker's read-after-commit rule checks
    /// against every write committed after the snapshot.
    reads: Vec<Vec<u8>>,
    /// The encoded size of `writes` as one batch record's payload: kept within the log's record limit.
    payload_bytes: usize,
    ended: bool,
    /// [`Inner::dooms`] when this transaction last found itself not doomed (ADR-0144); set when it is tracked.
    dooms_seen: u64,
    not_sync: NotSync,
}

/// A read-write transaction's registration with the conflict tracker, made at its first read (ADR-0210).
#[derive(Clone, Copy, Debug)]
struct Tracked {
    id: TxnId,
    snapshot: Sequence,
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
    /// Begin a serializable read-write transaction. It takes no lock: it is registered with the conflict tracker
    /// and takes its snapshot at its first read (ADR-0210).
    pub fn begin(&self) -> Result<Transaction<E>> {
        self.inner.check_writable()?;
        let payload_bytes = crate::wal::BATCH_HEADER_BYTES;
        Ok(Transaction {
            db: self.clone(),
            tracked: None,
            writes: BTreeMap::new(),
            reads: Vec::new(),
            payload_bytes,
            ended: false,
            dooms_seen: 0,
            not_sync: PhantomData,
        })
    }

    /// Begin a read-only transaction.
    pub fn begin_read(&self) -> Result<ReadTransaction<E>> {
        self.inner.check_open()?;
        let mut registry = self.inner.registry();
        let visible = registry.visible;
        // The newest snapshot no in-flight pivot straddles: never waits, never aborts (ADR-0025).
        let snapshot = registry.tracker.safe_snapshot(visible);
        if snapshot < visible {
            // An in-flight pivot straddles the latest snapshot: the reader reads below it instead of waiting.
            env::probe!(self.inner.env, "ssi.safe_snapshot_stepped_back");
        }
        let id = track(&self.inner, &mut registry, snapshot, true)?;
        registry.register_snapshot(snapshot);
        drop(registry);
        Ok(ReadTransaction { db: self.clone(), id, snapshot, not_sync: PhantomData })
    }

    /// Wait until the commit is durable and visible: waits for the group-commit batch that covers its record
    /// (on SimEnv, runs that batch's steps inline), and for no later one.
    pub fn wait_for_commit(&self, ticket: &CommitTicket) -> Result<()> {
        crate::commit::wait_for_commit(&self.inner, ticket)
    }

    /// How many commits are appended but not yet acknowledged (for the simulator).
    pub fn pending_commits(&self) -> usize {
        self.inner.state().pending_commits.len()
    }

    /// Statistics of the conflict tracker: rw edges, aborts by cause, and how many records it holds.
    pub fn conflict_stats(&self) -> (crate::ssi::TrackerStats, usize) {
        let registry = self.inner.registry();
        (registry.tracker.stats.clone(), registry.tracker.tracked())
    }
}

impl<E: Env> Transaction<E> {
    /// The sequence this transaction reads at: `None` until its first read takes it (ADR-0210).
    pub fn snapshot(&self) -> Option<Sequence> {
        self.tracked.map(|tracked| tracked.snapshot)
    }

    /// Take the snapshot now, as a first read would (ADR-0210), and return it: from here on the transaction is
    /// tracked as one that began now, so a commit after this point that writes a key it writes is a write-write
    /// conflict, as it is for one that has read. A transaction that never calls this and never reads is validated
    /// at its commit, as a blind write is.
    pub fn take_snapshot(&mut self) -> Result<Sequence> {
        self.check_open()?;
        self.tracked_for_reading().map(|tracked| tracked.snapshot)
    }

    /// Register with the conflict tracker and take the snapshot, in one registry take, at the first read: what
    /// [`Db::begin`] did before ADR-0210 (the newest registered-visible sequence, kept for compaction until the
    /// transaction ends or its commit is visible).
    fn tracked_for_reading(&mut self) -> Result<Tracked> {
        if let Some(tracked) = self.tracked {
            return Ok(tracked);
        }
        let inner = &self.db.inner;
        let mut registry = inner.registry();
        let snapshot = registry.visible;
        let id = track(inner, &mut registry, snapshot, false)?;
        registry.register_snapshot(snapshot);
        self.dooms_seen = registry.tracker.dooms();
        drop(registry);
        let tracked = Tracked { id, snapshot };
        self.tracked = Some(tracked);
        Ok(tracked)
    }

    fn fail(&mut self, error: Conflict) -> Error {
        self.end_with(|registry, id| registry.tracker.abort(id));
        conflict(&self.db.inner.env, error)
    }

    fn end_with(&mut self, finish: impl FnOnce(&mut Registry, TxnId)) {
        if self.ended {
            return;
        }
        self.ended = true;
        // Never tracked: nothing registered to end.
        let Some(Tracked { id, snapshot }) = self.tracked else { return };
        let mut registry = self.db.inner.registry();
        finish(&mut registry, id);
        registry.release_snapshot(snapshot);
    }

    fn check_open(&self) -> Result<()> {
        if self.ended {
            return Err(Error::InvalidArgument { message: "the transaction has ended".into() });
        }
        Ok(())
    }

    /// Read `key`: this transaction's own write, else the value at its snapshot. The read is recorded for the
    /// conflict tracker without its lock (ADR-0195): a conflict it closes is reported by the read that fills the
    /// buffer or by the commit; a doom another transaction's commit put on this one is reported here, as before.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_open()?;
        if let Some(own) = self.writes.get(key) {
            return Ok(own.clone());
        }
        let Tracked { id, snapshot } = self.tracked_for_reading()?;
        let value = self.db.get_at(key, snapshot)?;
        self.check_doomed()?;
        self.reads.push(key.to_vec());
        if self.reads.len() >= READS_BUFFERED_MAX {
            let tracked = self.db.inner.on_reads(id, self.reads.drain(..));
            tracked.map_err(|error| self.fail(error))?;
        }
        Ok(value)
    }

    /// The rows in `range` at the snapshot, with this transaction's own writes applied: a lazy, double-ended
    /// iterator (ADR-0085). `Err` up front when the transaction has ended, the database is closed or the
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
        let Tracked { id, snapshot } = self.tracked_for_reading()?;
        let view = self.db.inner.read_view()?;
        self.check_doomed()?;
        let registrar = Registrar { registry: self.db.inner.clone(), txn: id, read_only: false };
        Ok(ScanIter::new(&view, bounds, snapshot, Some(&self.writes), Some(registrar)))
    }

    fn buffer(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        self.check_open()?;
        check_write(key, value.unwrap_or(&[]), self.db.inner.options.write_limits())?;
        if self.writes.len() >= TRANSACTION_WRITES_MAX && !self.writes.contains_key(key) {
            let message = format!("a transaction may write at most {TRANSACTION_WRITES_MAX} keys");
            return Err(Error::InvalidArgument { message });
        }
        let replaced =
            self.writes.get(key).map_or(0, |old| batch_write_bytes(key.len(), old.as_ref().map_or(0, Vec::len)));
        let payload_bytes = self.payload_bytes - replaced + batch_write_bytes(key.len(), value.map_or(0, <[u8]>::len));
        crate::commit::check_payload(payload_bytes, &self.db.inner.options)?;
        self.db.inner.check_open()?;
        self.check_doomed()?;
        self.writes.insert(key.to_vec(), value.map(<[u8]>::to_vec));
        self.payload_bytes = payload_bytes;
        Ok(())
    }

    /// Fail if another transaction doomed (or the tracker expired) this one. Under the registry lock only when a
    /// transaction was doomed or expired since this one last checked (ADR-0144): a doom that lands while the
    /// unchanged count is read is one that came after the check, as if it had taken the lock first. A transaction
    /// not yet tracked cannot be doomed.
    fn check_doomed(&mut self) -> Result<()> {
        let inner = &self.db.inner;
        let Some(Tracked { id, .. }) = self.tracked else { return Ok(()) };
        if inner.dooms.load(Ordering::Acquire) == self.dooms_seen {
            return Ok(());
        }
        let registry = inner.registry();
        let doomed = registry.tracker.check_doomed_public(id);
        self.dooms_seen = registry.tracker.dooms();
        drop(registry);
        doomed.map_err(|error| self.fail(error))
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
        let inner = &self.db.inner;
        let tracked = self.tracked;
        if let Err(error) = inner.check_open() {
            if let Some(Tracked { id, snapshot }) = tracked {
                let mut registry = inner.registry();
                registry.release_snapshot(snapshot);
                registry.tracker.abort(id);
            }
            return Err(error);
        }
        if writes.is_empty() {
            // Read nothing and wrote nothing: nothing to register or finish.
            let Some(Tracked { id, snapshot }) = tracked else { return Ok(None) };
            // The buffered reads are registered in the take that finishes the transaction (ADR-0195).
            let mut registry = inner.registry();
            register_reads(inner, &mut registry, id, snapshot, std::mem::take(&mut self.reads))?;
            registry.release_snapshot(snapshot);
            let visible = registry.visible;
            let finished = registry.tracker.finish(id, visible);
            return finished.map(|()| None).map_err(|error| conflict(&inner.env, error));
        }
        // The buffered reads are registered in the validation's registry take, under the writer lock, just before
        // the writes are validated (ADR-0198; one take, as ADR-0195 had them in, before the writer lock): a writer
        // that commits after this one finds them, and one that committed already is found by them.
        let prepared = crate::commit::prepare(writes).with_reads(std::mem::take(&mut self.reads));
        // The snapshot stays registered until the commit is visible (released by `Inner::complete`): a reader's
        // safe snapshot may go back to it (ADR-0025). Released here if the submit fails. A transaction that read
        // nothing is tracked in its validation's take, as a blind write is (ADR-0210).
        let (txn, snapshot) = (tracked.map(|tracked| tracked.id), tracked.map(|tracked| tracked.snapshot));
        crate::commit::commit_writes(inner, inner.state(), prepared, txn, snapshot).map(Some)
    }

    /// Commit: serializable, and durable when it returns (in `Sync` mode). A serialization failure is returned only
    /// once the commits that were in flight when it was found are visible, so a retry reads what beat it instead
    /// of failing against the same unacknowledged writer again (ADR-0087).
    pub fn commit(self) -> Result<()> {
        let db = self.db.clone();
        match self.submit() {
            Ok(Some(ticket)) => db.wait_for_commit(&ticket),
            Ok(None) => Ok(()),
            Err(error) if error.is_conflict() => {
                let in_flight = CommitTicket { last_sequence: db.inner.state().next_sequence - 1 };
                // Its own failure (a crash, a poisoned log) is not this commit's: the conflict is the answer.
                drop(db.wait_for_commit(&in_flight));
                Err(error)
            }
            Err(error) => Err(error),
        }
    }

    /// Roll back (the same as dropping it).
    pub fn rollback(mut self) {
        self.end_with(|registry, id| registry.tracker.abort(id));
    }
}

impl<E: Env> Drop for Transaction<E> {
    fn drop(&mut self) {
        self.end_with(|registry, id| registry.tracker.abort(id));
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
        let tracked = self.db.inner.on_read(self.id, key);
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
        let expired = self.db.inner.registry().tracker.check_doomed_public(self.id);
        self.expired_only(expired)?;
        let registrar = Registrar { registry: self.db.inner.clone(), txn: self.id, read_only: true };
        Ok(ScanIter::new(&view, bounds, self.snapshot, None, Some(registrar)))
    }
}

impl<E: Env> Drop for ReadTransaction<E> {
    fn drop(&mut self) {
        let mut registry = self.db.inner.registry();
        let visible = registry.visible;
        let finished = registry.tracker.finish(self.id, visible);
        assert!(finished.is_ok(), "a read-only transaction was doomed");
        registry.release_snapshot(self.snapshot);
    }
}

impl<E: Env> Inner<E> {
    /// Store the tracker's doom count for [`Transaction::check_doomed`], under the registry lock, after a call
    /// that may have doomed or expired a transaction (ADR-0144).
    pub(crate) fn publish_dooms(&self, registry: &Registry) {
        let dooms = registry.tracker.dooms();
        // Stored only when it changed: a read does not write the line every writer's check reads.
        if self.dooms.load(Ordering::Relaxed) != dooms {
            self.dooms.store(dooms, Ordering::Release);
        }
    }

    /// `txn` read `key`: the conflict tracker records it (and may doom a writer).
    fn on_read(&self, txn: TxnId, key: &[u8]) -> std::result::Result<(), Conflict> {
        self.on_reads(txn, std::iter::once(key.to_vec()))
    }

    /// `txn` read `keys`: the conflict tracker records them all in one registry take, keeping the keys (ADR-0195).
    fn on_reads(&self, txn: TxnId, keys: impl IntoIterator<Item = Vec<u8>>) -> std::result::Result<(), Conflict> {
        let mut registry = self.registry();
        let tracked = registry.tracker.on_reads(txn, keys);
        self.publish_dooms(&registry);
        tracked
    }
}

/// Register a read-write transaction's buffered `reads` under `registry`, in the take that ends the transaction
/// (a transaction that wrote nothing; a committing one registers them in its validation take, ADR-0198). On a
/// conflict the transaction is aborted and its snapshot released (the caller has marked it ended).
fn register_reads<E: Env>(
    inner: &Inner<E>,
    registry: &mut Registry,
    txn: TxnId,
    snapshot: Sequence,
    reads: Vec<Vec<u8>>,
) -> Result<()> {
    let tracked = registry.tracker.on_reads(txn, reads);
    inner.publish_dooms(registry);
    tracked.map_err(|error| {
        registry.release_snapshot(snapshot);
        registry.tracker.abort(txn);
        conflict(&inner.env, error)
    })
}

/// A scan registers the range it observed with the conflict tracker through this (ADR-0085).
impl<E: Env> ScanRegistry for Inner<E> {
    fn register(&self, txn: TxnId, read_only: bool, range: KeyRange) -> Result<()> {
        let mut registry = self.registry();
        let tracked = registry.tracker.on_scan(txn, range);
        self.publish_dooms(&registry);
        drop(registry);
        tracked.map_err(|error| {
            assert!(!read_only || error.cause == ConflictCause::Expired, "a read-only transaction was chosen to abort");
            conflict(&self.env, error)
        })
    }
}
