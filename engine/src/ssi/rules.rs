//! The SSI rules: rw antidependencies at reads, scans and commits, dangerous structures and their victims, first
//! committer wins, and the read-only guard (see the parent module's docs). Every lookup of other transactions goes
//! through the index (ADR-0084).

use super::{Conflict, ConflictCause, ConflictTracker, KeyRange, Sequence, TxnId, TxnRecord, WrittenKey};

impl ConflictTracker {
    /// `txn` read `key` at its snapshot. Records the read and the rw edges to writers it did not see.
    pub fn on_read(&mut self, txn: TxnId, key: &[u8]) -> Result<(), Conflict> {
        self.on_read_owned(txn, key.to_vec())
    }

    /// [`Self::on_read`] of a key the caller already owns: the record keeps it without copying a byte (a
    /// transaction that buffered its reads copied each key when it read it, before the registry lock, ADR-0195).
    /// The read is recorded after its edges are added, which read only edges and commits, never the read set.
    pub fn on_read_owned(&mut self, txn: TxnId, key: Vec<u8>) -> Result<(), Conflict> {
        self.check_doomed(txn)?;
        let record = self.txns.get(&txn).expect("unknown transaction");
        assert!(record.is_active(), "read by a finished transaction");
        let snapshot = record.snapshot;
        // Canaries: snapshot isolation only, or the read-after-commit rw edge is not recorded.
        let tracked = if crate::canary::active("ssi-off") || crate::canary::active("read-after-commit-edge-missed") {
            Ok(())
        } else {
            let writers = self.committed_writers_of(&key, snapshot, txn);
            self.add_edges_from_reader(txn, &writers, &key)
        };
        self.txns.get_mut(&txn).expect("unknown transaction").reads.insert(key);
        tracked
    }

    /// `txn` read `keys` at its snapshot, in order: [`Self::on_read_owned`] of each, stopping at the first
    /// conflict. A transaction that buffered its reads registers them so, in one registry take (ADR-0195).
    pub fn on_reads(&mut self, txn: TxnId, keys: impl IntoIterator<Item = Vec<u8>>) -> Result<(), Conflict> {
        keys.into_iter().try_for_each(|key| self.on_read_owned(txn, key))
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
        let writers = self.committed_writers_in(&range, snapshot, txn);
        self.add_edges_from_reader(txn, &writers, &range.start)
    }

    /// Committed transactions whose commit the snapshot does not see and that wrote `key`, in id order: a lookup
    /// in the index of writes by key.
    fn committed_writers_of(&self, key: &[u8], snapshot: Sequence, except: TxnId) -> Vec<TxnId> {
        let mut writers = self.index.writers_after(key, snapshot);
        writers.retain(|&id| id != except);
        writers
    }

    /// Committed transactions whose commit the snapshot does not see and that wrote a key in `range`, in id order:
    /// the transactions that ended after the snapshot, each asked with a range lookup in its writes.
    fn committed_writers_in(&self, range: &KeyRange, snapshot: Sequence, except: TxnId) -> Vec<TxnId> {
        let mut writers: Vec<TxnId> = self
            .index
            .ended_after(snapshot)
            .filter(|&id| id != except)
            .filter(|&id| {
                let record = self.record(id);
                record.commit().is_some_and(|commit| commit > snapshot) && range.holds_any(&record.writes)
            })
            .collect();
        writers.sort_unstable();
        writers
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

    pub(super) fn validate(
        &mut self,
        txn: TxnId,
        writes: Vec<WrittenKey>,
        commit_sequence: Sequence,
    ) -> Result<(), Conflict> {
        self.check_doomed(txn)?;
        let snapshot = self.record(txn).snapshot;
        assert!(commit_sequence > snapshot, "commit sequence not after the snapshot");
        assert!(!self.record(txn).read_only || writes.is_empty(), "a read-only transaction wrote");
        // First committer wins: a lookup per written key in the index of committed writes, allocating nothing.
        if let Some(key) = writes.iter().find(|key| self.index.written_after(key, snapshot, txn)) {
            self.stats.ww_aborts += 1;
            return Err(Conflict { cause: ConflictCause::WriteWrite { key: key.to_vec() } });
        }
        // Not indexed yet: the index holds the writes of committed transactions only. The keys move in (ADR-0144).
        let record = self.txns.get_mut(&txn).expect("committer");
        record.writes = writes.into_iter().collect();
        // Canary: snapshot isolation only (first committer wins, no rw-antidependency tracking).
        if crate::canary::active("ssi-off") {
            return Ok(());
        }
        let wrote = !record.writes.is_empty();
        // Write after concurrent read: every transaction that read what we write and does not see our commit.
        let readers = self.concurrent_readers(txn, snapshot);
        for (reader, key) in readers {
            self.add_edge(reader, txn);
            if self.closes_structure_at_commit(reader, txn, commit_sequence) {
                self.stats.dangerous_aborts += 1;
                return Err(Conflict { cause: ConflictCause::DangerousStructure { key } });
            }
        }
        if wrote && self.read_only_guard_trips(txn) {
            self.stats.read_only_guard_aborts += 1;
            let first = self.record(txn).writes.first().map(|key| key.to_vec());
            let key = self.guard_key(txn).or(first).expect("a writer wrote a key");
            return Err(Conflict { cause: ConflictCause::ReadOnlyGuard { key } });
        }
        Ok(())
    }

    /// At `txn`'s commit (sequence `commit`), with the new edge `reader → txn`: does a dangerous structure close
    /// through it? Its victim is always `txn` (ADR-0103):
    ///
    /// * `txn` as the pivot, `reader → txn → out` with `out` committed first: `txn` is active and writes, so the
    ///   pivot rule picks it.
    /// * `reader` as the pivot, `in → reader → txn`, never closes here: rw edges are recorded only into a
    ///   committed transaction (a read finds committed writers; a commit adds edges into itself, and a failed
    ///   commit is forgotten with its edges), so a reader with an in-edge has committed, before `txn` (commit
    ///   sequences follow validation order), and `txn`, committing last, is not the first committer the structure
    ///   needs. Writes are checked at commit, not when buffered, which is why no rw edge leads into a transaction
    ///   still running (Cahill's and PostgreSQL's SSI find `in → pivot` at the write, and doom a running pivot
    ///   there). Checked, not assumed: debug and expensive-checks builds assert it, and `specs::Ssi` explores it.
    fn closes_structure_at_commit(&self, reader: TxnId, txn: TxnId, commit: Sequence) -> bool {
        if crate::EXPENSIVE_CHECKS || cfg!(debug_assertions) {
            let record = self.record(reader);
            assert!(record.in_edges.is_empty() || record.commit().is_some(), "an rw edge into uncommitted T{reader}");
            let tins = record.in_edges.iter().filter(|&&tin| tin != txn);
            let victim = tins.into_iter().find_map(|&tin| self.structure_victim(tin, reader, commit, txn));
            assert_eq!(victim, None, "a structure with reader T{reader} as its pivot closed at T{txn}'s commit");
        }
        // txn as pivot: reader → txn → out, where out committed before txn (txn is not yet marked committed).
        let victim = self.pivot_victim(reader, txn);
        assert!(victim.is_none_or(|victim| victim == txn), "the committer is the pivot and can abort");
        victim.is_some()
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
        self.index.newest_read_only_snapshot().is_some_and(|snapshot| snapshot >= earliest)
    }

    /// The transactions other than `txn` that overlap a commit from `snapshot` and read (or scanned over) one of
    /// `txn`'s writes, in id order, each with the first of them (in key order) it read. Only the overlapping
    /// transactions are asked (the active ones and those that ended after the snapshot, from the index): a record
    /// that ended at or before the snapshot is not concurrent with the commit, however many of them are retained.
    fn concurrent_readers(&self, txn: TxnId, snapshot: Sequence) -> Vec<(TxnId, Vec<u8>)> {
        let writes = &self.record(txn).writes;
        let overlapping = self.index.overlapping(snapshot).into_iter().filter(|&id| id != txn);
        overlapping
            .filter_map(|id| {
                let record: &TxnRecord = self.record(id);
                debug_assert!(record.overlaps_commit(snapshot));
                Some((id, writes.iter().find(|key| record.read_covers(key))?.to_vec()))
            })
            .collect()
    }
}
