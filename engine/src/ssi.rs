//! Serializable snapshot isolation: the conflict tracker (ADR-0022..ADR-0025). Modelled by `specs::Ssi`, which
//! drives this very code.
//!
//! After Cahill, Röhm & Fekete (SIGMOD 2008) and Ports & Grittner (VLDB 2012). A plain value (`Clone + Eq +
//! Hash`, no locks, no shared mutable state: a written key is an immutable [`WrittenKey`], shared by the record
//! and the index, ADR-0144): the engine wraps it in its registry lock.
//!
//! * **rw-antidependency** `R → W`: `R` read a key (or scanned a range holding a key) at a snapshot that does not
//!   see `W`'s write of it. Detected in both orders: when `W` commits after `R`'s read (write after concurrent
//!   read), and when `R` reads after `W` committed a version newer than `R`'s snapshot (read after commit).
//! * **Dangerous structure** `Tin → Tp → Tout` (two consecutive rw edges) is an anomaly risk only if `Tout`
//!   commits first: before `Tp` and before `Tin` (`Tin` may be `Tout`: write skew). For a read-only `Tin`, only if
//!   `Tout` committed before `Tin`'s snapshot. The victim is `Tp` if it has not committed, else `Tin`.
//! * **Read-only transactions never abort.** Writers pay: at a writer `Tp`'s commit, if `Tp → Tout` with `Tout`
//!   committed, and a read-only transaction that is still open sees `Tout` (its snapshot is at or after `Tout`'s
//!   commit), `Tp` aborts — that reader could later read a key `Tp` wrote (Fekete's read-only anomaly).
//! * **First committer wins** for write-write conflicts.
//! * **Bounded memory**: a finished transaction's record is dropped once no active transaction overlaps it; a
//!   full tracker expires its oldest active transaction (ADR-0072).
//! * **Indexed** (ADR-0084): records are indexed by status, end, written key and straddle span
//!   (`ssi/index.rs`), so a commit's cost follows its own keys and the transactions that overlap it, not the number
//!   of records a long-lived reader keeps.
//!
//! Sequences give the order: a transaction's snapshot `S` sees every commit with sequence `<= S`; a commit gets
//! the next sequence when it is validated, even though it becomes visible only when its log record is synced.

mod cause;
#[cfg(test)]
mod equivalence;
mod index;
#[cfg(test)]
mod reference;
mod rules;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::ops::Bound;
use std::sync::Arc;

pub use self::cause::{Conflict, ConflictCause};
use self::index::Index;
use crate::types::Sequence;

/// A transaction's id inside the tracker.
pub type TxnId = u64;

/// A committed write's key: immutable bytes the record and the index share, allocated by the committer before
/// the writer lock (ADR-0144). Hashes and compares as its bytes, like the `Vec<u8>` it replaced.
pub type WrittenKey = Arc<[u8]>;

/// The most transactions the tracker may hold records for (active plus retained): a leak is a bug.
pub const TRACKED_TRANSACTIONS_MAX: usize = 1 << 20;

/// The most dropped records the tracker keeps for its caller to free after the registry lock (ADR-0198); past it,
/// a record is freed where it is dropped.
pub const DROPPED_RECORDS_MAX: usize = 64;

/// Records the tracker dropped (pruned or aborted), handed to the caller to free outside its lock (ADR-0198): a
/// record's key and edge sets are freed after the registry lock, where at two threads freeing memory another
/// thread allocated can wait on the allocator's lock without holding the registry.
#[derive(Clone, Debug, Default)]
pub struct DroppedRecords(Vec<TxnRecord>);

impl DroppedRecords {
    /// How many records it holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A key range `[start, end)`; `end == None` is unbounded.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyRange {
    pub start: Vec<u8>,
    pub end: Option<Vec<u8>>,
}

impl KeyRange {
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.end.as_ref().is_none_or(|end| key < end.as_slice())
    }
}

impl KeyRange {
    /// Does the range hold any of `keys`? A range lookup in the set, not a walk over it.
    fn holds_any(&self, keys: &BTreeSet<WrittenKey>) -> bool {
        let start = Bound::Included(self.start.as_slice());
        let end = match &self.end {
            Some(end) if end.as_slice() < self.start.as_slice() => return false,
            Some(end) => Bound::Excluded(end.as_slice()),
            None => Bound::Unbounded,
        };
        keys.range::<[u8], _>((start, end)).next().is_some()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Status {
    Active,
    /// Validated at this commit sequence (a read-write transaction).
    Committed(Sequence),
    /// A read-only transaction (or a read-write one that wrote nothing) ended; later commits are concurrent
    /// with it only if they were validated before this sequence.
    Finished(Sequence),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TxnRecord {
    snapshot: Sequence,
    read_only: bool,
    status: Status,
    doomed: Option<ConflictCause>,
    reads: BTreeSet<Vec<u8>>,
    ranges: Vec<KeyRange>,
    writes: BTreeSet<WrittenKey>,
    in_edges: BTreeSet<TxnId>,
    out_edges: BTreeSet<TxnId>,
    /// The earliest commit among out-neighbours whose records were dropped.
    pruned_out_commit_min: Option<Sequence>,
    /// The earliest *first* sequence (a batch's first write) among those dropped out-neighbours.
    pruned_out_first_min: Option<Sequence>,
}

impl TxnRecord {
    fn new(snapshot: Sequence, read_only: bool) -> Self {
        Self {
            snapshot,
            read_only,
            status: Status::Active,
            doomed: None,
            reads: BTreeSet::new(),
            ranges: Vec::new(),
            writes: BTreeSet::new(),
            in_edges: BTreeSet::new(),
            out_edges: BTreeSet::new(),
            pruned_out_commit_min: None,
            pruned_out_first_min: None,
        }
    }

    fn commit(&self) -> Option<Sequence> {
        match self.status {
            Status::Committed(sequence) => Some(sequence),
            _ => None,
        }
    }

    /// The first sequence of a committed transaction's writes (they take consecutive sequences ending at its
    /// commit).
    fn first(&self) -> Option<Sequence> {
        Some(self.commit()? + 1 - self.writes.len().max(1) as u64)
    }

    fn is_active(&self) -> bool {
        self.status == Status::Active
    }

    /// The end of the transaction's life in sequence order (None while active).
    fn end(&self) -> Option<Sequence> {
        match self.status {
            Status::Active => None,
            Status::Committed(sequence) | Status::Finished(sequence) => Some(sequence),
        }
    }

    fn read_covers(&self, key: &[u8]) -> bool {
        self.reads.contains(key) || self.ranges.iter().any(|range| range.contains(key))
    }

    /// Does it overlap a committer whose snapshot is `snapshot`? Active ones do; ended ones do if they ended
    /// after the committer began.
    fn overlaps_commit(&self, snapshot: Sequence) -> bool {
        self.end().is_none_or(|end| end > snapshot)
    }
}

/// A pivot `P` whose rw antidependency leads to `T`, which committed before `P`: a reader that sees `T` and not `P`
/// is unsafe (Fekete's read-only anomaly).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Straddle {
    /// `T`'s first sequence (a commit of several writes takes consecutive sequences ending at its commit).
    pub out_first: Sequence,
    /// `T`'s commit sequence (its last).
    pub out_commit: Sequence,
    /// `P`'s commit sequence.
    pub pivot_commit: Sequence,
}

/// The newest snapshot at or below `visible` inside none of the half-open `[start, end)` spans: a snapshot inside
/// one steps to just below its start, until none holds it. Pure.
pub fn snapshot_outside(visible: Sequence, spans: &[(Sequence, Sequence)]) -> Sequence {
    let mut snapshot = visible;
    for _ in 0..=spans.len() {
        match spans.iter().find(|(start, end)| *start <= snapshot && snapshot < *end) {
            Some((start, _)) => snapshot = start - 1,
            None => break,
        }
    }
    debug_assert!(spans.iter().all(|(start, end)| !(*start <= snapshot && snapshot < *end)));
    assert!(snapshot <= visible, "a safe snapshot is never newer than what is visible");
    snapshot
}

/// Counters for tests and the simulator.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TrackerStats {
    pub rw_edges: u64,
    pub ww_aborts: u64,
    pub dangerous_aborts: u64,
    pub read_only_guard_aborts: u64,
    pub doomed: u64,
    /// Transactions ended to make room in a full tracker.
    pub expired: u64,
}

/// The conflict tracker. See the module docs. Equality and hashing cover the records, not the index (a
/// function of them), so `specs::Ssi` sees the same states as before the index.
#[derive(Clone, Debug)]
pub struct ConflictTracker {
    txns: BTreeMap<TxnId, TxnRecord>,
    next_id: TxnId,
    /// The last sequence readers can see (validated commits above it are in flight: appended, not synced).
    visible: Sequence,
    /// The most records held at once (`Options::tracked_transactions_max`).
    capacity: usize,
    /// Transactions ended to make room, still held by their callers (id → read-only): their next call fails with
    /// [`ConflictCause::Expired`]; forgotten at their `abort` or `finish`. At most one per live handle.
    expired: BTreeMap<TxnId, bool>,
    pub stats: TrackerStats,
    index: Index,
    /// The latest end among the records `prune` dropped: no transaction may begin below it, or it would miss their
    /// writes and spans (ADR-0131). A check, not state: left out of equality and hashing like the index.
    pruned_end_max: Sequence,
    /// Records dropped since the caller last took them, for it to free after its lock (ADR-0198). Not state: left
    /// out of equality and hashing.
    dropped: DroppedRecords,
}

impl PartialEq for ConflictTracker {
    fn eq(&self, other: &Self) -> bool {
        (&self.txns, self.next_id, self.visible, self.capacity, &self.expired, &self.stats)
            == (&other.txns, other.next_id, other.visible, other.capacity, &other.expired, &other.stats)
    }
}

impl Eq for ConflictTracker {}

impl Hash for ConflictTracker {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (&self.txns, self.next_id, self.visible, self.capacity, &self.expired, &self.stats).hash(state);
    }
}

impl Default for ConflictTracker {
    fn default() -> Self {
        Self::with_capacity(TRACKED_TRANSACTIONS_MAX)
    }
}

impl ConflictTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// A tracker that holds at most `capacity` records (at most [`TRACKED_TRANSACTIONS_MAX`]).
    pub fn with_capacity(capacity: usize) -> Self {
        assert!(capacity <= TRACKED_TRANSACTIONS_MAX, "tracker capacity over TRACKED_TRANSACTIONS_MAX");
        Self {
            txns: BTreeMap::new(),
            next_id: 0,
            visible: 0,
            capacity,
            expired: BTreeMap::new(),
            stats: TrackerStats::default(),
            index: Index::default(),
            pruned_end_max: 0,
            dropped: DroppedRecords::default(),
        }
    }

    /// [`ConflictTracker::begin`], first making room in a full tracker (ADR-0072): the active transaction with
    /// the oldest snapshot is ended — a writer aborted, a read-only one finished at the visible sequence (a reader
    /// that stops reading is one that ended then) — and the records nobody needs any more are pruned, until there
    /// is room. Fails with [`ConflictCause::Expired`] when every record left is a commit in flight.
    pub fn try_begin(&mut self, snapshot: Sequence, read_only: bool) -> Result<TxnId, Conflict> {
        while self.txns.len() >= self.capacity {
            let Some((_, victim)) = self.index.oldest_active() else {
                return Err(Conflict { cause: ConflictCause::Expired });
            };
            let victim_read_only = self.record(victim).read_only;
            if victim_read_only {
                let end = self.visible.max(self.record(victim).snapshot);
                self.update(victim, |record| record.status = Status::Finished(end));
                self.prune();
            } else {
                self.abort(victim);
            }
            self.expired.insert(victim, victim_read_only);
            self.stats.expired += 1;
        }
        Ok(self.begin(snapshot, read_only))
    }

    fn check_expired(&self, txn: TxnId) -> Result<(), Conflict> {
        match self.expired.contains_key(&txn) {
            true => Err(Conflict { cause: ConflictCause::Expired }),
            false => Ok(()),
        }
    }

    /// Start a transaction reading at `snapshot`.
    pub fn begin(&mut self, snapshot: Sequence, read_only: bool) -> TxnId {
        assert!(self.txns.len() < self.capacity, "conflict tracker holds too many transactions");
        assert!(snapshot >= self.pruned_end_max, "a snapshot {snapshot} below a pruned record's end (ADR-0131)");
        let id = self.next_id;
        self.next_id += 1;
        let record = TxnRecord::new(snapshot, read_only);
        self.index.add(id, &record);
        self.txns.insert(id, record);
        self.check_index_in_tests();
        id
    }

    /// The records dropped since the last call, for the caller to free once it lets go of the tracker (ADR-0198).
    pub fn take_dropped(&mut self) -> DroppedRecords {
        std::mem::take(&mut self.dropped)
    }

    /// Keep a dropped `record` for [`ConflictTracker::take_dropped`], or free it here past
    /// [`DROPPED_RECORDS_MAX`].
    fn discard(&mut self, record: TxnRecord) {
        if self.dropped.0.len() < DROPPED_RECORDS_MAX {
            self.dropped.0.push(record);
        }
    }

    /// Commits up to `visible` are now visible to new snapshots (the engine acknowledged them).
    pub fn set_visible(&mut self, visible: Sequence) {
        assert!(visible >= self.visible, "visibility went backwards");
        self.visible = visible;
        self.prune();
    }

    /// The snapshot a read-only transaction should read at, given the last visible sequence: the newest one that
    /// no pivot straddles. A pivot `P → T` with `T` committed before `P` makes any snapshot in `[first_T, C_P)`
    /// unsafe for a reader (it would see `T` but not `P`: Fekete's read-only anomaly). While `P` is in flight
    /// (validated, not yet visible) the latest snapshot can be in that interval; the reader then reads just below
    /// `T`'s first sequence instead of waiting (ADR-0025). `P`'s snapshot stays registered until it is visible, so
    /// the versions that snapshot needs are still there.
    ///
    /// A commit's writes take consecutive sequences ending at its commit sequence: a safe snapshot must be below
    /// the *first* of them, or the reader would see part of the commit (found by the txn target; `specs::Ssi`
    /// keeps the rule that stepped below the commit sequence as a known-bad variant, ADR-0061). Answered from the
    /// index of spans ordered by end (ADR-0084): the same answer as [`snapshot_outside`] over [`Self::straddles`].
    pub fn safe_snapshot(&self, visible: Sequence) -> Sequence {
        let snapshot = self.index.safe_snapshot(visible);
        if crate::EXPENSIVE_CHECKS {
            let spans: Vec<(Sequence, Sequence)> =
                self.straddles().iter().map(|straddle| (straddle.out_first, straddle.pivot_commit)).collect();
            assert_eq!(snapshot, snapshot_outside(visible, &spans), "the span index disagrees with a walk");
        }
        snapshot
    }

    /// Every pivot `P → T` whose out-neighbour `T` committed before `P` (live records and the pruned summary). A
    /// walk over every record: for tests and the specs; the commit path uses the index.
    pub fn straddles(&self) -> Vec<Straddle> {
        self.txns.values().flat_map(|record| self.pivot_straddles(record)).collect()
    }

    /// The straddles whose pivot is `record`: its committed out-neighbours that committed before it, and the
    /// summary of the dropped ones.
    fn pivot_straddles(&self, record: &TxnRecord) -> Vec<Straddle> {
        let Some(pivot_commit) = record.commit() else { return Vec::new() };
        let outs = record.out_edges.iter().filter_map(|out| {
            let out = self.txns.get(out)?;
            Some((out.commit()?, out.first()?))
        });
        let pruned = record.pruned_out_commit_min.zip(record.pruned_out_first_min);
        outs.chain(pruned)
            .filter(|(out_commit, _)| *out_commit < pivot_commit)
            .map(|(out_commit, out_first)| Straddle { out_first, out_commit, pivot_commit })
            .collect()
    }

    /// Re-index the straddle spans of every committed pivot among `pivots`.
    fn reindex_spans(&mut self, pivots: &BTreeSet<TxnId>) {
        for &pivot in pivots {
            let Some(record) = self.txns.get(&pivot) else { continue };
            let Some(commit) = record.commit() else { continue };
            let straddles = self.pivot_straddles(record);
            self.index.replace_spans(pivot, commit, &straddles);
        }
    }

    /// How many transaction records are held (active plus retained finished ones).
    pub fn tracked(&self) -> usize {
        self.txns.len()
    }

    /// How many transactions are active.
    pub fn active(&self) -> usize {
        self.index.active_count()
    }

    fn record(&self, txn: TxnId) -> &TxnRecord {
        self.txns.get(&txn).expect("unknown transaction")
    }

    /// Change `txn`'s record where the index sees it (status, read-only flag, writes), keeping the index in step.
    fn update(&mut self, txn: TxnId, change: impl FnOnce(&mut TxnRecord)) {
        let record = self.txns.get_mut(&txn).expect("unknown transaction");
        self.index.remove(txn, record);
        change(record);
        self.index.add(txn, record);
    }

    /// Whether the incremental index equals one built from scratch (ADR-0123). A rebuild costs a walk over every
    /// record, so it runs once per simulator step (`Db::check_invariants`, `Db::check_transactions`), not at every
    /// tracker call; the tracker's own unit tests still check after every call (`check_index_in_tests`).
    pub fn check_index(&self) -> Result<(), String> {
        // Compared in place (ADR-0136); the tracker's unit tests also hold it to the rebuild it stands for.
        let matches = self.index.matches(&self.txns, |_, record| self.pivot_straddles(record));
        if matches && !cfg!(test) {
            return Ok(());
        }
        let rebuilt = Index::build(&self.txns, |_, record| self.pivot_straddles(record));
        assert_eq!(matches, self.index == rebuilt, "Index::matches disagrees with a rebuild");
        match matches {
            true => Ok(()),
            false => Err(format!(
                "the conflict tracker's index drifted from its {} records: sizes (active, read-only, ended, \
                 written keys, spans) indexed {:?}, rebuilt {:?}",
                self.txns.len(),
                self.index.sizes(),
                rebuilt.sizes()
            )),
        }
    }

    /// The engine's unit tests (`cfg(test)`): [`Self::check_index`] after every change, so a drift fails at the
    /// call that made it.
    fn check_index_in_tests(&self) {
        if cfg!(test) {
            self.check_index().expect("the tracker's index drifted from its records");
        }
    }

    /// Unit tests only: drop an active transaction from the index, the drift [`Self::check_index`] must see.
    #[cfg(test)]
    pub(crate) fn corrupt_index_for_test(&mut self) {
        let (snapshot, id) = self.index.oldest_active().expect("an active transaction to unindex");
        self.index.forget_active_for_test(snapshot, id);
    }

    fn check_doomed(&self, txn: TxnId) -> Result<(), Conflict> {
        self.check_expired(txn)?;
        match &self.record(txn).doomed {
            Some(cause) => Err(Conflict { cause: cause.clone() }),
            None => Ok(()),
        }
    }

    /// How many transactions were doomed or expired so far: it never decreases (the engine never resets `stats`),
    /// so a transaction that finds it unchanged since its last [`Self::check_doomed_public`] would pass the check
    /// again, and may skip it (ADR-0144).
    pub fn dooms(&self) -> u64 {
        self.stats.doomed + self.stats.expired
    }

    /// Fail if another transaction's commit doomed `txn` (its next operation reports the conflict).
    pub fn check_doomed_public(&self, txn: TxnId) -> Result<(), Conflict> {
        self.check_doomed(txn)
    }

    /// Validate `txn`'s commit of `writes` at `commit_sequence`. On success the transaction is committed (as far
    /// as conflicts go: later transactions see it as committed at that sequence). On failure it is aborted.
    pub fn commit(&mut self, txn: TxnId, writes: &[Vec<u8>], commit_sequence: Sequence) -> Result<(), Conflict> {
        let keys = writes.iter().map(|key| WrittenKey::from(key.as_slice())).collect();
        self.commit_keys(txn, keys, commit_sequence)
    }

    /// [`ConflictTracker::commit`] of keys the caller already shares (the engine makes them before the writer
    /// lock, ADR-0144): the record and the index keep them without copying a byte. `writes` in ascending key
    /// order without duplicates (a transaction's write set is a sorted map), as `commit`'s callers give them.
    pub fn commit_keys(
        &mut self,
        txn: TxnId,
        writes: Vec<WrittenKey>,
        commit_sequence: Sequence,
    ) -> Result<(), Conflict> {
        assert!(writes.windows(2).all(|pair| pair[0] < pair[1]), "a commit's keys are sorted and distinct");
        if self.expired.remove(&txn).is_some() {
            return Err(Conflict { cause: ConflictCause::Expired });
        }
        let result = self.validate(txn, writes, commit_sequence);
        match &result {
            Ok(()) => {
                self.update(txn, |record| record.status = Status::Committed(commit_sequence));
                let record = self.record(txn);
                assert!(record.doomed.is_none(), "a doomed transaction committed");
                // Its straddles as a pivot, and those it completes as the out-neighbour of committed pivots.
                let mut pivots: BTreeSet<TxnId> = record.in_edges.clone();
                pivots.insert(txn);
                self.reindex_spans(&pivots);
                self.check_index_in_tests();
            }
            Err(_) => self.abort(txn),
        }
        result
    }

    /// `txn` aborted (or rolled back): it is forgotten.
    pub fn abort(&mut self, txn: TxnId) {
        if self.expired.remove(&txn).is_some() {
            return;
        }
        let record = self.txns.remove(&txn).expect("abort of an unknown transaction");
        assert!(record.commit().is_none(), "abort of a committed transaction");
        self.index.remove(txn, &record);
        for other in record.in_edges.iter().chain(record.out_edges.iter()) {
            if let Some(neighbour) = self.txns.get_mut(other) {
                neighbour.in_edges.remove(&txn);
                neighbour.out_edges.remove(&txn);
            }
        }
        self.discard(record);
        // An uncommitted out-neighbour is in no straddle: no span changes.
        self.prune();
    }

    /// A transaction that wrote nothing ended; `visible` is the last visible sequence. Having written nothing, it
    /// is read-only for the rules from now on (it can only be the `Tin` of a structure, ADR-0024), and it ends at
    /// `visible`: a transaction whose snapshot is at or after that cannot form a dangerous structure through it.
    pub fn finish(&mut self, txn: TxnId, visible: Sequence) -> Result<(), Conflict> {
        if let Some(read_only) = self.expired.remove(&txn) {
            // A reader that was expired ended then; a writer that was expired was aborted.
            return if read_only { Ok(()) } else { Err(Conflict { cause: ConflictCause::Expired }) };
        }
        let doomed = self.check_doomed(txn);
        if doomed.is_err() {
            self.abort(txn);
            return doomed;
        }
        let record = self.record(txn);
        assert!(record.is_active(), "finish of a finished transaction");
        assert!(record.writes.is_empty(), "finish of a transaction that wrote");
        let end = visible.max(record.snapshot);
        self.update(txn, |record| {
            record.status = Status::Finished(end);
            record.read_only = true;
        });
        self.prune();
        Ok(())
    }

    /// Drop the records nobody needs: a finished transaction goes once it is visible, every transaction that
    /// is active or in flight (validated, not yet visible) began at or after its end (ADR-0024), and so will every
    /// read-only one that begins later at its safe snapshot (ADR-0131). The oldest
    /// active snapshot and the commits in flight come from the index, and the records to drop are the front of
    /// the records ordered by end: the cost is the in-flight commits plus the records dropped.
    pub fn prune(&mut self) {
        let visible = self.visible;
        let in_flight = self.index.ended_after(visible).filter_map(|id| {
            let record = self.record(id);
            record.commit().is_some_and(|commit| commit > visible).then_some(record.snapshot)
        });
        let oldest = self.index.oldest_active().map(|(snapshot, _)| snapshot).into_iter().chain(in_flight).min();
        // A read-only reader's safe snapshot can step below every registered snapshot through the spans of visible
        // pivots (ADR-0093): a record goes only if it ended at or below the lowest snapshot a reader can still
        // take, or its span (and its writes) would be gone when that reader reads (ADR-0131).
        let horizon = self.safe_snapshot(oldest.map_or(visible, |oldest| oldest.min(visible)));
        let doomed = self.index.ended_by(horizon);
        let mut touched = BTreeSet::new();
        for id in &doomed {
            let record = self.txns.remove(id).expect("pruned record");
            self.index.remove(*id, &record);
            self.pruned_end_max = self.pruned_end_max.max(record.end().expect("a pruned record ended"));
            for tin in &record.in_edges {
                if let Some(neighbour) = self.txns.get_mut(tin) {
                    neighbour.out_edges.remove(id);
                    if let (Some(commit), Some(first)) = (record.commit(), record.first()) {
                        let min = neighbour.pruned_out_commit_min.map_or(commit, |m| m.min(commit));
                        neighbour.pruned_out_commit_min = Some(min);
                        let min = neighbour.pruned_out_first_min.map_or(first, |m| m.min(first));
                        neighbour.pruned_out_first_min = Some(min);
                    }
                    touched.insert(*tin);
                }
            }
            for tout in &record.out_edges {
                if let Some(neighbour) = self.txns.get_mut(tout) {
                    neighbour.in_edges.remove(id);
                }
            }
            self.discard(record);
        }
        self.reindex_spans(&touched);
        self.check_index_in_tests();
    }
}
