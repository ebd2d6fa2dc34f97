//! The tracker as it was before the index (ADR-0084): every question answered by a walk over every record. Kept
//! only for the tests, as the reference the indexed tracker must agree with call for call (`equivalence` tests).
//! The same records ([`TxnRecord`]) and the same rules, verbatim.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    Conflict, ConflictCause, KeyRange, Sequence, Status, Straddle, TRACKED_TRANSACTIONS_MAX, TrackerStats, TxnId,
    TxnRecord, WrittenKey, snapshot_outside,
};

/// The conflict tracker. See the module docs.
#[derive(Clone, Debug)]
pub(super) struct Reference {
    pub(super) txns: BTreeMap<TxnId, TxnRecord>,
    next_id: TxnId,
    /// The last sequence readers can see (validated commits above it are in flight: appended, not synced).
    visible: Sequence,
    /// The most records held at once (`Options::tracked_transactions_max`).
    capacity: usize,
    /// Transactions ended to make room, still held by their callers (id → read-only): their next call fails with
    /// [`ConflictCause::Expired`]; forgotten at their `abort` or `finish`. At most one per live handle.
    pub(super) expired: BTreeMap<TxnId, bool>,
    pub stats: TrackerStats,
}

impl Reference {
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
        matches: impl Fn(&BTreeSet<WrittenKey>) -> bool,
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
        self.txns.get_mut(&txn).expect("committer").writes =
            writes.iter().map(|key| WrittenKey::from(key.as_slice())).collect();
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
                // Never another victim: no rw edge leads into a transaction that has not committed (ADR-0103).
                assert_eq!(victim, txn, "a structure closed at a commit doomed another transaction");
                self.stats.dangerous_aborts += 1;
                return Err(Conflict { cause: ConflictCause::DangerousStructure { key } });
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
        outs.find_map(|out| out.writes.iter().find(|key| record.read_covers(key)).map(|key| key.to_vec()))
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
        // The lowest snapshot a reader can still take: the safe one at the oldest (ADR-0131).
        let horizon = self.safe_snapshot(oldest.map_or(visible, |oldest| oldest.min(visible)));
        let doomed: Vec<TxnId> = self
            .txns
            .iter()
            .filter(|(_, record)| record.end().is_some_and(|end| end <= horizon))
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
