//! Serializable snapshot isolation: the conflict tracker (ADR-0022..ADR-0025). Modelled by `specs::Ssi`, which
//! drives this very code.
//!
//! After Cahill, Röhm & Fekete (SIGMOD 2008) and Ports & Grittner (VLDB 2012). A plain value (`Clone + Eq +
//! Hash`, no locks, no `Arc`): the engine wraps it in its state lock.
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
//! * **Bounded memory**: a finished transaction's record is dropped once no active transaction overlaps it.
//!
//! Sequences give the order: a transaction's snapshot `S` sees every commit with sequence `<= S`; a commit gets
//! the next sequence when it is validated, even though it becomes visible only when its log record is synced.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::types::Sequence;

/// A transaction's id inside the tracker.
pub type TxnId = u64;

/// The most transactions the tracker may hold records for (active plus retained): a leak is a bug.
pub const TRACKED_TRANSACTIONS_MAX: usize = 1 << 20;

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

/// Why a transaction must abort.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Conflict {
    /// The cause, as the tracker found it (the engine reports it as [`crate::Error::Conflict`]).
    pub cause: ConflictCause,
}

/// Why the conflict tracker made a transaction abort: a serialization failure, kept as data (the key as bytes);
/// its [`Display`](fmt::Display) renders the message. See the module docs for the rules behind each cause.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConflictCause {
    /// First committer wins: a transaction that committed after this one's snapshot also wrote `key`, which this
    /// one writes. Found at this transaction's commit.
    WriteWrite {
        /// The first key of this transaction's writes (in the order given to commit) that the other also wrote.
        key: Vec<u8>,
    },
    /// A read found a version of `key` committed after the reader's snapshot (an rw antidependency, read after
    /// commit) and that edge closed a dangerous structure. The victim (this transaction) is the reader, or the
    /// transaction whose rw edge leads into the reader; it learns of it at its next operation.
    ReadWrite {
        /// The key read; for a scan, the start of the scanned range.
        key: Vec<u8>,
    },
    /// Another transaction's commit wrote `key`, which a concurrent transaction had read (an rw antidependency,
    /// write after concurrent read), and that closed a dangerous structure whose victim is not the committer (it
    /// committed first) but this transaction: the reader, or the transaction whose rw edge leads into the reader.
    /// It learns of it at its next operation.
    ReadWriteCommittedFirst {
        /// The key the committer wrote and the reader had read (or scanned over).
        key: Vec<u8>,
    },
    /// At this transaction's commit, its write of `key` completed an rw antidependency from a concurrent reader
    /// that closed a dangerous structure with this transaction as the victim.
    DangerousStructure {
        /// The key this transaction writes that the concurrent reader had read (or scanned over).
        key: Vec<u8>,
    },
    /// Fekete's read-only anomaly guard at a writer's commit: an open read-only transaction sees a commit that
    /// this writer must precede (this writer has an rw antidependency to it), so this writer aborts.
    ReadOnlyGuard {
        /// A key this writer read that the committed transaction it must precede overwrote; if none is left in the
        /// tracker, the first key this writer writes.
        key: Vec<u8>,
    },
    /// The tracker was full (`Options::tracked_transactions_max`) and this was the oldest active transaction: it
    /// was ended to make room (a read-only one too: it ends, it does not abort; ADR-0072). Retry it. No key.
    Expired,
}

impl ConflictCause {
    /// The key the conflict is on, where the cause has one (every cause today has one).
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            ConflictCause::WriteWrite { key }
            | ConflictCause::ReadWrite { key }
            | ConflictCause::ReadWriteCommittedFirst { key }
            | ConflictCause::DangerousStructure { key }
            | ConflictCause::ReadOnlyGuard { key } => Some(key),
            ConflictCause::Expired => None,
        }
    }

    /// A stable short name of the cause, for counters and reports: `ww`, `rw` (both rw causes), `dangerous` or
    /// `read_only_guard`.
    pub fn name(&self) -> &'static str {
        match self {
            ConflictCause::WriteWrite { .. } => "ww",
            ConflictCause::ReadWrite { .. } | ConflictCause::ReadWriteCommittedFirst { .. } => "rw",
            ConflictCause::DangerousStructure { .. } => "dangerous",
            ConflictCause::ReadOnlyGuard { .. } => "read_only_guard",
            ConflictCause::Expired => "expired",
        }
    }
}

impl fmt::Display for ConflictCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConflictCause::WriteWrite { key } => {
                write!(f, "write-write conflict on {}: first committer wins", render(key))
            }
            ConflictCause::ReadWrite { key } => write!(f, "rw conflict on {}", render(key)),
            ConflictCause::ReadWriteCommittedFirst { key } => {
                write!(f, "rw conflict on {} with a transaction that committed first", render(key))
            }
            ConflictCause::DangerousStructure { key } => {
                write!(f, "dangerous structure through rw conflict on {}", render(key))
            }
            ConflictCause::ReadOnlyGuard { key } => write!(
                f,
                "rw conflict on {}: an open read-only transaction sees a commit this writer must precede",
                render(key)
            ),
            ConflictCause::Expired => {
                f.write_str("expired: the conflict tracker was full and this was its oldest active transaction")
            }
        }
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
    writes: BTreeSet<Vec<u8>>,
    in_edges: BTreeSet<TxnId>,
    out_edges: BTreeSet<TxnId>,
    /// The earliest commit among out-neighbours whose records were dropped.
    pruned_out_commit_min: Option<Sequence>,
    /// The earliest *first* sequence (a batch's first write) among those dropped out-neighbours.
    pruned_out_first_min: Option<Sequence>,
}

impl TxnRecord {
    fn commit(&self) -> Option<Sequence> {
        match self.status {
            Status::Committed(sequence) => Some(sequence),
            _ => None,
        }
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

/// The conflict tracker. See the module docs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
        }
    }

    /// [`ConflictTracker::begin`], first making room in a full tracker (ADR-0072): the active transaction with
    /// the oldest snapshot is ended — a writer aborted, a read-only one finished at the visible sequence (a reader
    /// that stops reading is one that ended then) — and the records nobody needs any more are pruned, until there
    /// is room. Fails with [`ConflictCause::Expired`] when every record left is a commit in flight.
    pub fn try_begin(&mut self, snapshot: Sequence, read_only: bool) -> Result<TxnId, Conflict> {
        while self.txns.len() >= self.capacity {
            let oldest = self.txns.iter().filter(|(_, r)| r.is_active()).min_by_key(|(id, r)| (r.snapshot, **id));
            let Some((&victim, record)) = oldest else {
                return Err(Conflict { cause: ConflictCause::Expired });
            };
            let victim_read_only = record.read_only;
            if victim_read_only {
                let visible = self.visible;
                let record = self.txns.get_mut(&victim).expect("victim");
                record.status = Status::Finished(visible.max(record.snapshot));
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
        let id = self.next_id;
        self.next_id += 1;
        let record = TxnRecord {
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
        };
        self.txns.insert(id, record);
        id
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
    pub fn safe_snapshot(&self, visible: Sequence) -> Sequence {
        // A commit's writes take consecutive sequences ending at its commit sequence: a safe snapshot must be below
        // the *first* of them, or the reader would see part of the commit (found by the txn target; `specs::Ssi`
        // keeps the rule that stepped below the commit sequence as a known-bad variant, ADR-0061).
        let unsafe_spans: Vec<(Sequence, Sequence)> =
            self.straddles().iter().map(|straddle| (straddle.out_first, straddle.pivot_commit)).collect();
        snapshot_outside(visible, &unsafe_spans)
    }

    /// Every pivot `P → T` whose out-neighbour `T` committed before `P` (live records and the pruned summary).
    pub fn straddles(&self) -> Vec<Straddle> {
        let mut straddles = Vec::new();
        for record in self.txns.values() {
            let Some(pivot_commit) = record.commit() else { continue };
            let outs = record.out_edges.iter().filter_map(|out| {
                let out = self.txns.get(out)?;
                let commit = out.commit()?;
                Some((commit, commit + 1 - out.writes.len().max(1) as u64))
            });
            let pruned = record.pruned_out_commit_min.zip(record.pruned_out_first_min);
            for (out_commit, out_first) in outs.chain(pruned) {
                if out_commit < pivot_commit {
                    straddles.push(Straddle { out_first, out_commit, pivot_commit });
                }
            }
        }
        straddles
    }

    /// How many transaction records are held (active plus retained finished ones).
    pub fn tracked(&self) -> usize {
        self.txns.len()
    }

    /// How many transactions are active.
    pub fn active(&self) -> usize {
        self.txns.values().filter(|record| record.is_active()).count()
    }

    fn record(&self, txn: TxnId) -> &TxnRecord {
        self.txns.get(&txn).expect("unknown transaction")
    }

    fn check_doomed(&self, txn: TxnId) -> Result<(), Conflict> {
        self.check_expired(txn)?;
        match &self.record(txn).doomed {
            Some(cause) => Err(Conflict { cause: cause.clone() }),
            None => Ok(()),
        }
    }

    /// Fail if another transaction's commit doomed `txn` (its next operation reports the conflict).
    pub fn check_doomed_public(&self, txn: TxnId) -> Result<(), Conflict> {
        self.check_doomed(txn)
    }

    /// `txn` read `key` at its snapshot. Records the read and the rw edges to writers it did not see.
    pub fn on_read(&mut self, txn: TxnId, key: &[u8]) -> Result<(), Conflict> {
        self.check_doomed(txn)?;
        let record = self.txns.get_mut(&txn).expect("unknown transaction");
        assert!(record.is_active(), "read by a finished transaction");
        record.reads.insert(key.to_vec());
        let snapshot = record.snapshot;
        // Canaries: snapshot isolation only, or the read-after-commit rw edge is not recorded.
        if crate::canary::active("ssi-off") || crate::canary::active("read-after-commit-edge-missed") {
            return Ok(());
        }
        let writers = self.committed_writers_after(snapshot, |writes| writes.contains(key), txn);
        self.add_edges_from_reader(txn, &writers, key)
    }

    /// `txn` scanned `range` at its snapshot (a predicate read: phantoms are caught).
    pub fn on_scan(&mut self, txn: TxnId, range: KeyRange) -> Result<(), Conflict> {
        self.check_doomed(txn)?;
        let record = self.txns.get_mut(&txn).expect("unknown transaction");
        assert!(record.is_active(), "scan by a finished transaction");
        let snapshot = record.snapshot;
        // Canary: scans register no ranges (phantoms slip through).
        if crate::canary::active("no-predicate-reads") {
            return Ok(());
        }
        record.ranges.push(range.clone());
        if crate::canary::active("ssi-off") || crate::canary::active("read-after-commit-edge-missed") {
            return Ok(());
        }
        let writers = self.committed_writers_after(snapshot, |writes| writes.iter().any(|k| range.contains(k)), txn);
        self.add_edges_from_reader(txn, &writers, &range.start)
    }

    /// Committed transactions whose commit the snapshot does not see and whose writes match.
    fn committed_writers_after(
        &self,
        snapshot: Sequence,
        matches: impl Fn(&BTreeSet<Vec<u8>>) -> bool,
        except: TxnId,
    ) -> Vec<TxnId> {
        self.txns
            .iter()
            .filter(|(id, record)| {
                **id != except && record.commit().is_some_and(|commit| commit > snapshot) && matches(&record.writes)
            })
            .map(|(id, _)| *id)
            .collect()
    }

    fn add_edges_from_reader(&mut self, reader: TxnId, writers: &[TxnId], key: &[u8]) -> Result<(), Conflict> {
        for &writer in writers {
            self.add_edge(reader, writer);
            if let Some(victim) = self.find_victim(reader, writer) {
                self.doom(victim, ConflictCause::ReadWrite { key: key.to_vec() });
            }
        }
        self.check_doomed(reader)
    }

    fn add_edge(&mut self, reader: TxnId, writer: TxnId) {
        assert_ne!(reader, writer, "a transaction has no rw edge to itself");
        let new = self.txns.get_mut(&reader).expect("reader").out_edges.insert(writer);
        self.txns.get_mut(&writer).expect("writer").in_edges.insert(reader);
        if new {
            self.stats.rw_edges += 1;
        }
    }

    /// After adding `reader → writer`, the victim of any dangerous structure through that edge.
    fn find_victim(&self, reader: TxnId, writer: TxnId) -> Option<TxnId> {
        // `writer` as the pivot: reader → writer → out.
        if let Some(victim) = self.pivot_victim(reader, writer) {
            return Some(victim);
        }
        // `reader` as the pivot: in → reader → writer.
        let tins: Vec<TxnId> = self.record(reader).in_edges.iter().copied().collect();
        tins.into_iter().find_map(|tin| self.structure_victim(tin, reader, self.record(writer).commit()?, writer))
    }

    /// With `pivot`'s out-edges (live and pruned), is `tin → pivot → out` dangerous? Returns the victim.
    fn pivot_victim(&self, tin: TxnId, pivot: TxnId) -> Option<TxnId> {
        let record = self.record(pivot);
        let live = record.out_edges.iter().filter_map(|out| Some((self.txns.get(out)?.commit()?, *out)));
        let pruned = record.pruned_out_commit_min.map(|commit| (commit, TxnId::MAX));
        live.chain(pruned).find_map(|(out_commit, out)| self.structure_victim(tin, pivot, out_commit, out))
    }

    /// Is `tin → pivot → out` dangerous (out committed at `out_commit` first)? Returns the victim.
    fn structure_victim(&self, tin: TxnId, pivot: TxnId, out_commit: Sequence, out: TxnId) -> Option<TxnId> {
        let (tin_record, pivot_record) = (self.txns.get(&tin)?, self.record(pivot));
        let pivot_after = pivot_record.commit().is_none_or(|commit| commit > out_commit);
        let tin_after = if tin_record.read_only {
            out_commit <= tin_record.snapshot
        } else {
            tin == out || tin_record.commit().is_none_or(|commit| commit > out_commit)
        };
        if !(pivot_after && tin_after) {
            return None;
        }
        let can_abort = |record: &TxnRecord| record.is_active() && !record.read_only;
        if can_abort(pivot_record) {
            Some(pivot)
        } else if can_abort(tin_record) {
            Some(tin)
        } else {
            panic!("dangerous structure {tin} -> {pivot} -> {out} with no transaction left to abort")
        }
    }

    fn doom(&mut self, victim: TxnId, cause: ConflictCause) {
        let record = self.txns.get_mut(&victim).expect("victim");
        assert!(record.is_active() && !record.read_only, "only an active writer can be a victim");
        if record.doomed.is_none() {
            record.doomed = Some(cause);
            self.stats.doomed += 1;
        }
    }

    /// Validate `txn`'s commit of `writes` at `commit_sequence`. On success the transaction is committed (as far
    /// as conflicts go: later transactions see it as committed at that sequence). On failure it is aborted.
    pub fn commit(&mut self, txn: TxnId, writes: &[Vec<u8>], commit_sequence: Sequence) -> Result<(), Conflict> {
        if self.expired.remove(&txn).is_some() {
            return Err(Conflict { cause: ConflictCause::Expired });
        }
        let result = self.validate(txn, writes, commit_sequence);
        match &result {
            Ok(()) => {
                let record = self.txns.get_mut(&txn).expect("committer");
                record.status = Status::Committed(commit_sequence);
                assert!(record.doomed.is_none(), "a doomed transaction committed");
            }
            Err(_) => self.abort(txn),
        }
        result
    }

    fn validate(&mut self, txn: TxnId, writes: &[Vec<u8>], commit_sequence: Sequence) -> Result<(), Conflict> {
        self.check_doomed(txn)?;
        let snapshot = self.record(txn).snapshot;
        assert!(commit_sequence > snapshot, "commit sequence not after the snapshot");
        assert!(!self.record(txn).read_only || writes.is_empty(), "a read-only transaction wrote");
        for key in writes {
            let clash = self.committed_writers_after(snapshot, |w| w.contains(key.as_slice()), txn);
            if !clash.is_empty() {
                self.stats.ww_aborts += 1;
                return Err(Conflict { cause: ConflictCause::WriteWrite { key: key.clone() } });
            }
        }
        self.txns.get_mut(&txn).expect("committer").writes = writes.iter().cloned().collect();
        // Canary: snapshot isolation only (first committer wins, no rw-antidependency tracking).
        if crate::canary::active("ssi-off") {
            return Ok(());
        }
        // Write after concurrent read: every transaction that read what we write and does not see our commit.
        let readers: Vec<(TxnId, Vec<u8>)> = self
            .txns
            .iter()
            .filter(|(id, record)| **id != txn && overlaps_commit(record, snapshot))
            .filter_map(|(id, record)| Some((*id, writes.iter().find(|key| record.read_covers(key))?.clone())))
            .collect();
        for (reader, key) in readers {
            self.add_edge(reader, txn);
            let victim = self.find_victim_at_commit(reader, txn, commit_sequence);
            if let Some(victim) = victim {
                if victim == txn {
                    self.stats.dangerous_aborts += 1;
                    return Err(Conflict { cause: ConflictCause::DangerousStructure { key } });
                }
                self.doom(victim, ConflictCause::ReadWriteCommittedFirst { key });
            }
        }
        if !writes.is_empty() && self.read_only_guard_trips(txn) {
            self.stats.read_only_guard_aborts += 1;
            let key = self.guard_key(txn).unwrap_or_else(|| writes[0].clone());
            return Err(Conflict { cause: ConflictCause::ReadOnlyGuard { key } });
        }
        Ok(())
    }

    /// At `txn`'s commit (sequence `commit`), with the new edge `reader → txn`: dangerous structures through it.
    fn find_victim_at_commit(&self, reader: TxnId, txn: TxnId, commit: Sequence) -> Option<TxnId> {
        // txn as pivot: reader → txn → out, where out committed before txn (txn is not yet marked committed).
        if let Some(victim) = self.pivot_victim(reader, txn) {
            return Some(victim);
        }
        // reader as pivot: in → reader → txn, with txn committing now (first among the three if the others
        // have not committed).
        let tins: Vec<TxnId> = self.record(reader).in_edges.iter().copied().collect();
        tins.into_iter().filter(|&tin| tin != txn).find_map(|tin| self.structure_victim(tin, reader, commit, txn))
    }

    /// A key behind the guard: one this writer read that a committed out-neighbour overwrote.
    fn guard_key(&self, txn: TxnId) -> Option<Vec<u8>> {
        let record = self.record(txn);
        let mut outs = record.out_edges.iter().filter_map(|out| self.txns.get(out));
        outs.find_map(|out| out.writes.iter().find(|key| record.read_covers(key)).cloned())
    }

    /// Fekete's read-only anomaly guard: see the module docs.
    fn read_only_guard_trips(&self, txn: TxnId) -> bool {
        let record = self.record(txn);
        let out_commits: Vec<Sequence> = record
            .out_edges
            .iter()
            .filter_map(|out| self.txns.get(out)?.commit())
            .chain(record.pruned_out_commit_min)
            .collect();
        let Some(&earliest) = out_commits.iter().min() else { return false };
        self.txns.values().any(|other| other.read_only && other.is_active() && other.snapshot >= earliest)
    }

    /// `txn` aborted (or rolled back): it is forgotten.
    pub fn abort(&mut self, txn: TxnId) {
        if self.expired.remove(&txn).is_some() {
            return;
        }
        let record = self.txns.remove(&txn).expect("abort of an unknown transaction");
        assert!(record.commit().is_none(), "abort of a committed transaction");
        for other in record.in_edges.iter().chain(record.out_edges.iter()) {
            if let Some(neighbour) = self.txns.get_mut(other) {
                neighbour.in_edges.remove(&txn);
                neighbour.out_edges.remove(&txn);
            }
        }
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
        let record = self.txns.get_mut(&txn).expect("unknown transaction");
        assert!(record.is_active(), "finish of a finished transaction");
        assert!(record.writes.is_empty(), "finish of a transaction that wrote");
        record.status = Status::Finished(visible.max(record.snapshot));
        record.read_only = true;
        self.prune();
        Ok(())
    }

    /// Drop the records nobody needs: a finished transaction goes once it is visible and every transaction that
    /// is active or in flight (validated, not yet visible) began at or after its end (ADR-0024).
    pub fn prune(&mut self) {
        let visible = self.visible;
        let in_flight = |record: &TxnRecord| record.is_active() || record.commit().is_some_and(|c| c > visible);
        let oldest = self.txns.values().filter(|r| in_flight(r)).map(|r| r.snapshot).min();
        let doomed: Vec<TxnId> = self
            .txns
            .iter()
            .filter(|(_, record)| {
                record.end().is_some_and(|end| end <= visible && oldest.is_none_or(|oldest| end <= oldest))
            })
            .map(|(id, _)| *id)
            .collect();
        for id in doomed {
            let record = self.txns.remove(&id).expect("pruned record");
            for tin in &record.in_edges {
                if let Some(neighbour) = self.txns.get_mut(tin) {
                    neighbour.out_edges.remove(&id);
                    if let Some(commit) = record.commit() {
                        let min = neighbour.pruned_out_commit_min.map_or(commit, |m| m.min(commit));
                        neighbour.pruned_out_commit_min = Some(min);
                        let first = commit + 1 - record.writes.len().max(1) as u64;
                        let min = neighbour.pruned_out_first_min.map_or(first, |m| m.min(first));
                        neighbour.pruned_out_first_min = Some(min);
                    }
                }
            }
            for tout in &record.out_edges {
                if let Some(neighbour) = self.txns.get_mut(tout) {
                    neighbour.in_edges.remove(&id);
                }
            }
        }
    }
}

/// Does a transaction overlap a committer whose snapshot is `snapshot`? Active ones do; finished ones do if they
/// ended after the committer began.
fn overlaps_commit(record: &TxnRecord, snapshot: Sequence) -> bool {
    record.end().is_none_or(|end| end > snapshot)
}

/// A key in a message: quoted text if it is printable UTF-8, else hex.
fn render(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(text) if text.chars().all(|c| !c.is_control()) => format!("{text:?}"),
        _ => format!("0x{}", key.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_steps_below_every_span_that_holds_it() {
        assert_eq!(snapshot_outside(9, &[]), 9);
        assert_eq!(snapshot_outside(9, &[(10, 12)]), 9, "a span above the visible sequence holds nothing");
        assert_eq!(snapshot_outside(9, &[(9, 10)]), 8);
        assert_eq!(snapshot_outside(9, &[(4, 6), (7, 12)]), 6, "a span's end is exclusive");
        assert_eq!(snapshot_outside(9, &[(5, 7), (7, 12)]), 4, "chained spans step down one after the other");
    }

    /// A pivot `T0 → T1` where `T1` committed two writes (sequences 1..=2) before `T0` (sequence 3): a reader
    /// must read below `T1`'s first sequence, not its commit sequence (the txn target's partial-commit finding).
    #[test]
    fn the_safe_snapshot_is_below_the_whole_straddled_commit() {
        let mut tracker = ConflictTracker::new();
        let (pivot, out) = (tracker.begin(0, false), tracker.begin(0, false));
        tracker.on_read(pivot, b"a").expect("read");
        tracker.commit(out, &[b"a".to_vec(), b"b".to_vec()], 2).expect("out commits first");
        tracker.commit(pivot, &[b"c".to_vec()], 3).expect("the pivot commits");
        assert_eq!(tracker.straddles(), vec![Straddle { out_first: 1, out_commit: 2, pivot_commit: 3 }]);
        assert_eq!(tracker.safe_snapshot(2), 0);
        assert_eq!(tracker.safe_snapshot(3), 3, "once the pivot is visible no snapshot straddles it");
    }

    /// Every cause, on `key`, with the message the tracker formatted before causes were values (the same text).
    fn causes(key: &[u8], shown: &str) -> Vec<(ConflictCause, String, &'static str)> {
        let key = key.to_vec();
        vec![
            (
                ConflictCause::WriteWrite { key: key.clone() },
                format!("write-write conflict on {shown}: first committer wins"),
                "ww",
            ),
            (ConflictCause::ReadWrite { key: key.clone() }, format!("rw conflict on {shown}"), "rw"),
            (
                ConflictCause::ReadWriteCommittedFirst { key: key.clone() },
                format!("rw conflict on {shown} with a transaction that committed first"),
                "rw",
            ),
            (
                ConflictCause::DangerousStructure { key: key.clone() },
                format!("dangerous structure through rw conflict on {shown}"),
                "dangerous",
            ),
            (
                ConflictCause::ReadOnlyGuard { key },
                format!("rw conflict on {shown}: an open read-only transaction sees a commit this writer must precede"),
                "read_only_guard",
            ),
        ]
    }

    #[test]
    fn conflict_cause_display_is_the_old_message_text() {
        let expected = [
            "write-write conflict on \"k000001\": first committer wins",
            "rw conflict on \"k000001\"",
            "rw conflict on \"k000001\" with a transaction that committed first",
            "dangerous structure through rw conflict on \"k000001\"",
            "rw conflict on \"k000001\": an open read-only transaction sees a commit this writer must precede",
        ];
        let shown: Vec<String> =
            causes(b"k000001", "\"k000001\"").iter().map(|(cause, _, _)| cause.to_string()).collect();
        assert_eq!(shown, expected);
        // Keys that are not printable text are shown in hex, as before.
        for (key, rendered) in [(&b"\x00\xffa"[..], "0x00ff61"), (b"a\nb", "0x610a62"), (b"", "\"\"")] {
            for (cause, text, _) in causes(key, rendered) {
                assert_eq!(cause.to_string(), text, "{cause:?}");
            }
        }
    }

    #[test]
    fn conflict_cause_name_and_key() {
        for (cause, _, name) in causes(b"x", "\"x\"") {
            assert_eq!(cause.name(), name, "{cause:?}");
            assert_eq!(cause.key(), Some(&b"x"[..]), "{cause:?}");
        }
    }

    fn keys(keys: &[&str]) -> Vec<Vec<u8>> {
        keys.iter().map(|key| key.as_bytes().to_vec()).collect()
    }

    fn cause(result: Result<(), Conflict>) -> ConflictCause {
        result.expect_err("a conflict").cause
    }

    #[test]
    fn the_tracker_reports_write_write_as_a_value() {
        let mut tracker = ConflictTracker::new();
        let (t1, t2) = (tracker.begin(0, false), tracker.begin(0, false));
        tracker.commit(t1, &keys(&["x"]), 1).unwrap();
        let found = cause(tracker.commit(t2, &keys(&["a", "x"]), 2));
        assert_eq!(found, ConflictCause::WriteWrite { key: b"x".to_vec() });
        assert_eq!(tracker.stats.ww_aborts, 1);
    }

    #[test]
    fn the_tracker_reports_a_dangerous_structure_at_commit_as_a_value() {
        // Write skew: both read x and y, t1 writes x, t2 writes y.
        let mut tracker = ConflictTracker::new();
        let (t1, t2) = (tracker.begin(0, false), tracker.begin(0, false));
        for txn in [t1, t2] {
            tracker.on_read(txn, b"x").unwrap();
            tracker.on_read(txn, b"y").unwrap();
        }
        tracker.commit(t1, &keys(&["x"]), 1).unwrap();
        let found = cause(tracker.commit(t2, &keys(&["y"]), 2));
        assert_eq!(found, ConflictCause::DangerousStructure { key: b"y".to_vec() });
        assert_eq!(tracker.stats.dangerous_aborts, 1);
    }

    #[test]
    fn the_tracker_reports_an_rw_conflict_at_a_read_as_a_value() {
        // t1 -> t0 (t1 read z, t0 wrote it and committed first), then t2 reads y that t1 wrote: t2 -> t1 -> t0,
        // and t2 is the only one left to abort. It is doomed, and stays doomed for its next operation.
        let mut tracker = ConflictTracker::new();
        let (t0, t1, t2) = (tracker.begin(0, false), tracker.begin(0, false), tracker.begin(0, false));
        tracker.on_read(t1, b"z").unwrap();
        tracker.commit(t0, &keys(&["z"]), 1).unwrap();
        tracker.commit(t1, &keys(&["y"]), 2).unwrap();
        let expected = ConflictCause::ReadWrite { key: b"y".to_vec() };
        assert_eq!(cause(tracker.on_read(t2, b"y")), expected);
        assert_eq!(cause(tracker.check_doomed_public(t2)), expected);
        assert_eq!(cause(tracker.commit(t2, &keys(&["w"]), 3)), expected);
    }

    #[test]
    fn the_tracker_reports_the_read_only_guard_as_a_value() {
        // t2 read y; t1 overwrote y and committed (t2 -> t1); a read-only reader sees t1; t2's commit must abort.
        let mut tracker = ConflictTracker::new();
        let (t1, t2) = (tracker.begin(0, false), tracker.begin(0, false));
        tracker.on_read(t2, b"x").unwrap();
        tracker.on_read(t2, b"y").unwrap();
        tracker.commit(t1, &keys(&["y"]), 1).unwrap();
        tracker.set_visible(1);
        let reader = tracker.begin(1, true);
        let found = cause(tracker.commit(t2, &keys(&["x"]), 2));
        assert_eq!(found, ConflictCause::ReadOnlyGuard { key: b"y".to_vec() });
        assert_eq!(tracker.stats.read_only_guard_aborts, 1);
        tracker.finish(reader, 1).unwrap();
    }

    #[test]
    fn a_full_tracker_expires_the_oldest_active_transaction_and_its_next_call_says_so() {
        let mut tracker = ConflictTracker::with_capacity(3);
        let reader = tracker.try_begin(0, true).unwrap();
        tracker.on_read(reader, b"x").unwrap();
        let writer = tracker.try_begin(0, false).unwrap();
        for sequence in 1..=10 {
            let blind = tracker.try_begin(sequence - 1, false).unwrap();
            tracker.commit(blind, &keys(&["y"]), sequence).unwrap();
            tracker.set_visible(sequence);
            assert!(tracker.tracked() <= 3, "{} records at sequence {sequence}", tracker.tracked());
        }
        assert_eq!(tracker.stats.expired, 2, "the reader, then the writer");
        assert_eq!(cause(tracker.on_read(reader, b"y")), ConflictCause::Expired);
        assert_eq!(tracker.finish(reader, 10), Ok(()), "an expired reader still ends cleanly");
        assert_eq!(cause(tracker.commit(writer, &keys(&["z"]), 11)), ConflictCause::Expired);
        assert_eq!(tracker.expired.len(), 0, "both forgotten once their handles ended");
        assert_eq!(ConflictCause::Expired.key(), None);
        assert_eq!(ConflictCause::Expired.name(), "expired");
    }

    #[test]
    fn a_tracker_full_of_commits_in_flight_refuses_a_new_transaction() {
        let mut tracker = ConflictTracker::with_capacity(2);
        for sequence in 1..=2 {
            let txn = tracker.try_begin(0, false).unwrap();
            tracker.commit(txn, &keys(&[&format!("k{sequence}")]), sequence).unwrap();
        }
        // Neither commit is visible yet: nothing can be pruned or expired.
        assert_eq!(tracker.try_begin(0, false), Err(Conflict { cause: ConflictCause::Expired }));
        tracker.set_visible(2);
        assert!(tracker.try_begin(2, false).is_ok(), "room once they are visible");
    }
}
