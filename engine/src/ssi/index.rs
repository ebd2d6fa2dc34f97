//! The conflict tracker's indexes (ADR-0084): every question a commit, a read, `prune` or `safe_snapshot` asks
//! of the records is answered from an ordered index instead of a walk over every record, so its cost follows the
//! transactions that overlap it, not how many records a long-lived reader keeps.
//!
//! The index is a pure function of the records ([`Index::build`]): the tracker updates it at every change of a
//! record's status, writes or out-edges, and `ConflictTracker::check_index` compares it with a rebuild: after
//! every simulator step, and after every change in the tracker's unit tests (ADR-0123). Only
//! `BTreeMap`/`BTreeSet`: iteration order is the key order, never a hash order.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use super::{Sequence, Straddle, TxnId, TxnRecord, WrittenKey};

/// A straddle's unsafe span in the index: `(pivot_commit, pivot, out_first, out_commit)`. Ordered by the span's
/// end (the pivot's commit) first, so `safe_snapshot` visits only the spans that end above its answer, and a
/// pivot's spans are one contiguous range (its id after its commit sequence).
type SpanKey = (Sequence, TxnId, Sequence, Sequence);

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Index {
    /// Active transactions by `(snapshot, id)`: the oldest first (expiry, `prune`).
    active: BTreeSet<(Sequence, TxnId)>,
    /// Active read-only transactions by `(snapshot, id)`: the newest last (the read-only guard).
    active_read_only: BTreeSet<(Sequence, TxnId)>,
    /// Ended transactions (committed or finished) by `(end, id)`: `prune` takes them from the front; those that
    /// ended after a snapshot are the ended ones that overlap it.
    ended: BTreeSet<(Sequence, TxnId)>,
    /// Committed transactions' writes: key (shared with the record, ADR-0144) → `(commit, id)` of every committed
    /// record that wrote it.
    writes: BTreeMap<WrittenKey, Writers>,
    /// Every straddle's unsafe span `[out_first, pivot_commit)`.
    spans: BTreeSet<SpanKey>,
}

impl Index {
    /// The index of `txns`, from scratch (the reference the incremental index must equal).
    pub(super) fn build<'a>(
        txns: impl IntoIterator<Item = (&'a TxnId, &'a TxnRecord)>,
        straddles: impl Fn(TxnId, &TxnRecord) -> Vec<Straddle>,
    ) -> Self {
        let mut index = Index::default();
        for (&id, record) in txns {
            index.add(id, record);
            if let Some(commit) = record.commit() {
                index.replace_spans(id, commit, &straddles(id, record));
            }
        }
        index
    }

    /// Whether this index equals [`Index::build`] of the same records, without building one (ADR-0136): every
    /// entry the records imply is here, and each part holds exactly as many entries as they imply, so it holds
    /// nothing else. The implied entries are distinct (ids are unique, a record's writes a set, a pivot's spans
    /// deduplicated here), so presence plus equal counts is set equality, part by part.
    pub(super) fn matches<'a>(
        &self,
        txns: impl IntoIterator<Item = (&'a TxnId, &'a TxnRecord)>,
        straddles: impl Fn(TxnId, &TxnRecord) -> Vec<Straddle>,
    ) -> bool {
        let (mut active, mut read_only, mut ended, mut writes, mut spans) = (0, 0, 0, 0, 0);
        for (&id, record) in txns {
            let present = match record.end() {
                None => {
                    active += 1;
                    read_only += usize::from(record.read_only);
                    self.active.contains(&(record.snapshot, id))
                        && (!record.read_only || self.active_read_only.contains(&(record.snapshot, id)))
                }
                Some(end) => {
                    ended += 1;
                    self.ended.contains(&(end, id))
                }
            };
            if !present {
                return false;
            }
            let Some(commit) = record.commit() else { continue };
            writes += record.writes.len();
            if !record.writes.iter().all(|key| self.writes.get(key).is_some_and(|ids| ids.contains((commit, id)))) {
                return false;
            }
            let mut keys: Vec<SpanKey> =
                straddles(id, record).iter().map(|s| (s.pivot_commit, id, s.out_first, s.out_commit)).collect();
            keys.sort_unstable();
            keys.dedup();
            spans += keys.len();
            if !keys.iter().all(|key| key.0 == commit && self.spans.contains(key)) {
                return false;
            }
        }
        let indexed_writes: usize = self.writes.values().map(Writers::len).sum();
        let no_empty_writers = self.writes.values().all(Writers::is_canonical);
        self.sizes_of_parts() == (active, read_only, ended, spans) && indexed_writes == writes && no_empty_writers
    }

    /// `(active, active read-only, ended, spans)` entry counts, for [`Index::matches`].
    fn sizes_of_parts(&self) -> (usize, usize, usize, usize) {
        (self.active.len(), self.active_read_only.len(), self.ended.len(), self.spans.len())
    }

    /// Index `record` under its current status (not its spans: see [`Index::set_spans`]).
    pub(super) fn add(&mut self, id: TxnId, record: &TxnRecord) {
        match record.end() {
            None => {
                self.active.insert((record.snapshot, id));
                if record.read_only {
                    self.active_read_only.insert((record.snapshot, id));
                }
            }
            Some(end) => {
                self.ended.insert((end, id));
            }
        }
        if let Some(commit) = record.commit() {
            // One search per key; the entry's key is the record's, shared (a count, not a copy).
            for key in &record.writes {
                match self.writes.entry(WrittenKey::clone(key)) {
                    Entry::Occupied(mut writers) => writers.get_mut().insert((commit, id)),
                    Entry::Vacant(vacant) => drop(vacant.insert(Writers::One((commit, id)))),
                }
            }
        }
    }

    /// Undo [`Index::add`] of `record` (before its status changes or it is dropped), and drop its spans.
    pub(super) fn remove(&mut self, id: TxnId, record: &TxnRecord) {
        match record.end() {
            None => {
                self.active.remove(&(record.snapshot, id));
                self.active_read_only.remove(&(record.snapshot, id));
            }
            Some(end) => {
                self.ended.remove(&(end, id));
            }
        }
        if let Some(commit) = record.commit() {
            for key in &record.writes {
                let writers = self.writes.get_mut(key).expect("an indexed write");
                if writers.remove((commit, id)) {
                    self.writes.remove(key);
                }
            }
            self.replace_spans(id, commit, &[]);
        }
    }

    /// Replace the spans of the committed `pivot` (at `pivot_commit`) with those of `straddles` (its own).
    pub(super) fn replace_spans(&mut self, pivot: TxnId, pivot_commit: Sequence, straddles: &[Straddle]) {
        let range = (pivot_commit, pivot, 0, 0)..=(pivot_commit, pivot, Sequence::MAX, Sequence::MAX);
        let old: Vec<SpanKey> = self.spans.range(range).copied().collect();
        for key in old {
            self.spans.remove(&key);
        }
        for straddle in straddles {
            assert_eq!(straddle.pivot_commit, pivot_commit, "a span of another pivot");
            self.spans.insert((pivot_commit, pivot, straddle.out_first, straddle.out_commit));
        }
    }

    /// How many entries each part holds: `(active, active read-only, ended, written keys, spans)`, for messages.
    pub(super) fn sizes(&self) -> (usize, usize, usize, usize, usize) {
        (self.active.len(), self.active_read_only.len(), self.ended.len(), self.writes.len(), self.spans.len())
    }

    /// Unit tests only: unindex an active transaction (a planted drift).
    #[cfg(test)]
    pub(super) fn forget_active_for_test(&mut self, snapshot: Sequence, id: TxnId) {
        assert!(self.active.remove(&(snapshot, id)), "an indexed active transaction");
    }

    /// The active transaction with the oldest snapshot (the lowest id among equals).
    pub(super) fn oldest_active(&self) -> Option<(Sequence, TxnId)> {
        self.active.first().copied()
    }

    pub(super) fn active_count(&self) -> usize {
        self.active.len()
    }

    /// The newest snapshot of an active read-only transaction.
    pub(super) fn newest_read_only_snapshot(&self) -> Option<Sequence> {
        self.active_read_only.last().map(|(snapshot, _)| *snapshot)
    }

    /// Every transaction that overlaps a committer whose snapshot is `snapshot`: the active ones and those that
    /// ended after it. In id order.
    pub(super) fn overlapping(&self, snapshot: Sequence) -> Vec<TxnId> {
        let active = self.active.iter().map(|(_, id)| *id);
        let mut ids: Vec<TxnId> = active.chain(self.ended_after(snapshot)).collect();
        ids.sort_unstable();
        ids
    }

    /// The transactions that ended after `sequence` (committed or finished), in end order.
    pub(super) fn ended_after(&self, sequence: Sequence) -> impl Iterator<Item = TxnId> + '_ {
        let after = (Bound::Excluded((sequence, TxnId::MAX)), Bound::Unbounded);
        self.ended.range(after).map(|(_, id)| *id)
    }

    /// The transactions that ended at or before `sequence`, in id order.
    pub(super) fn ended_by(&self, sequence: Sequence) -> Vec<TxnId> {
        let mut ids: Vec<TxnId> = self.ended.range(..=(sequence, TxnId::MAX)).map(|(_, id)| *id).collect();
        ids.sort_unstable();
        ids
    }

    /// The committed transactions that wrote `key` and committed after `snapshot`, in id order.
    pub(super) fn writers_after(&self, key: &[u8], snapshot: Sequence) -> Vec<TxnId> {
        let Some(writers) = self.writes.get(key) else { return Vec::new() };
        let mut ids: Vec<TxnId> = writers.after(snapshot).map(|(_, id)| id).collect();
        ids.sort_unstable();
        ids
    }

    /// Whether a transaction other than `except` wrote `key` and committed after `snapshot` (first committer
    /// wins): [`Index::writers_after`] without the list.
    pub(super) fn written_after(&self, key: &[u8], snapshot: Sequence, except: TxnId) -> bool {
        self.writes.get(key).is_some_and(|writers| writers.after(snapshot).any(|(_, id)| id != except))
    }

    /// The newest snapshot at or below `visible` inside no span: the answer of [`super::snapshot_outside`] over
    /// every span, visiting only the spans that end above it. Folding the spans by descending end keeps the least
    /// start among those ending above the candidate: if it is at or below the candidate, that span holds every
    /// sequence from its start to the candidate, so the candidate steps to just below it.
    pub(super) fn safe_snapshot(&self, visible: Sequence) -> Sequence {
        let mut snapshot = visible;
        let mut start_min = Sequence::MAX;
        let mut spans = self.spans.iter().rev().peekable();
        // Every step past the first folds in at least one more span, or the loop ends.
        for _ in 0..=self.spans.len() {
            while let Some(&&(end, _, start, _)) = spans.peek() {
                if end <= snapshot {
                    break;
                }
                start_min = start_min.min(start);
                spans.next();
            }
            if start_min > snapshot {
                return snapshot;
            }
            snapshot = start_min - 1;
        }
        unreachable!("each step folds in a span: at most one step per span")
    }
}

/// The `(commit, id)` of every committed record that wrote one key. Most keys have one writer: it is held inline,
/// so indexing a key allocates no set (ADR-0144). Canonical: `Many` holds at least two, so equal contents are
/// equal values (the index is compared with a rebuild).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Writers {
    One((Sequence, TxnId)),
    Many(BTreeSet<(Sequence, TxnId)>),
}

impl Writers {
    fn insert(&mut self, writer: (Sequence, TxnId)) {
        match self {
            Writers::One(one) if *one == writer => {}
            Writers::One(one) => *self = Writers::Many(BTreeSet::from([*one, writer])),
            Writers::Many(many) => drop(many.insert(writer)),
        }
    }

    /// Remove `writer` (which must be here); true when none is left (the key leaves the index).
    fn remove(&mut self, writer: (Sequence, TxnId)) -> bool {
        match self {
            Writers::One(one) => {
                assert_eq!(*one, writer, "an indexed writer");
                true
            }
            Writers::Many(many) => {
                assert!(many.remove(&writer), "an indexed writer");
                if many.len() == 1 {
                    *self = Writers::One(*many.first().expect("one left"));
                }
                false
            }
        }
    }

    fn contains(&self, writer: (Sequence, TxnId)) -> bool {
        match self {
            Writers::One(one) => *one == writer,
            Writers::Many(many) => many.contains(&writer),
        }
    }

    fn len(&self) -> usize {
        match self {
            Writers::One(_) => 1,
            Writers::Many(many) => many.len(),
        }
    }

    /// `Many` only with two or more (an empty or single set is a drift).
    fn is_canonical(&self) -> bool {
        matches!(self, Writers::One(_)) || self.len() >= 2
    }

    /// The writers that committed after `snapshot`, in `(commit, id)` order.
    fn after(&self, snapshot: Sequence) -> impl Iterator<Item = (Sequence, TxnId)> + '_ {
        let (one, many) = match self {
            Writers::One(one) => (Some(*one).filter(|(commit, _)| *commit > snapshot), None),
            Writers::Many(many) => {
                let after = (Bound::Excluded((snapshot, TxnId::MAX)), Bound::Unbounded);
                (None, Some(many.range(after).copied()))
            }
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::{Status, Straddle, TxnId, TxnRecord, WrittenKey};
    use super::{Index, Writers};

    /// Records of every kind the index holds: active (one read-only), finished, and committed with writes, one
    /// of them a pivot with a straddle.
    fn records() -> BTreeMap<TxnId, TxnRecord> {
        let mut txns = BTreeMap::new();
        txns.insert(1, TxnRecord::new(10, false));
        txns.insert(2, TxnRecord::new(11, true));
        let mut finished = TxnRecord::new(9, true);
        finished.status = Status::Finished(12);
        txns.insert(3, finished);
        for (id, commit, keys) in [(4, 14, &[&b"a"[..], b"b"][..]), (5, 16, &[&b"b"[..]][..])] {
            let mut committed = TxnRecord::new(8, false);
            committed.status = Status::Committed(commit);
            committed.writes = keys.iter().map(|&key| WrittenKey::from(key)).collect();
            txns.insert(id, committed);
        }
        txns
    }

    /// Record 5 straddles record 4's commit (two equal spans, deduplicated as the index's set does).
    fn straddles(id: TxnId, record: &TxnRecord) -> Vec<Straddle> {
        let span = Straddle { out_first: 13, out_commit: 14, pivot_commit: record.commit().unwrap_or(0) };
        if id == 5 { vec![span, span] } else { Vec::new() }
    }

    /// One planted change to an index.
    type Drift = fn(&mut Index);

    fn key(bytes: &[u8]) -> WrittenKey {
        WrittenKey::from(bytes)
    }

    /// `matches` agrees with equality to a rebuild: true for the rebuild itself, false after any one entry of any
    /// part goes missing or is added (ADR-0136).
    #[test]
    fn matches_is_equality_with_a_rebuild_under_every_planted_drift() {
        let txns = records();
        let built = Index::build(&txns, straddles);
        assert!(built.matches(&txns, straddles));
        assert_eq!(built.sizes(), (2, 1, 3, 2, 1), "every part holds something to drift");
        let drifts: [(&str, Drift); 13] = [
            ("active missing", |index| assert!(index.active.remove(&(10, 1)))),
            ("active extra", |index| assert!(index.active.insert((7, 99)))),
            ("read-only missing", |index| assert!(index.active_read_only.remove(&(11, 2)))),
            ("read-only extra", |index| assert!(index.active_read_only.insert((10, 1)))),
            ("ended missing", |index| assert!(index.ended.remove(&(12, 3)))),
            ("ended extra", |index| assert!(index.ended.insert((20, 99)))),
            ("writer missing", |index| assert!(!index.writes.get_mut(&b"b"[..]).unwrap().remove((14, 4)))),
            ("writer extra", |index| index.writes.get_mut(&b"a"[..]).unwrap().insert((16, 5))),
            ("written key extra", |index| assert!(index.writes.insert(key(b"z"), Writers::One((14, 4))).is_none())),
            ("empty writer set", |index| assert!(index.writes.insert(key(b"y"), Writers::Many([].into())).is_none())),
            ("one writer as a set", |index| {
                assert!(index.writes.insert(key(b"a"), Writers::Many([(14, 4)].into())).is_some())
            }),
            ("span missing", |index| assert!(index.spans.remove(&(16, 5, 13, 14)))),
            ("span extra", |index| assert!(index.spans.insert((14, 4, 1, 2)))),
        ];
        for (name, drift) in drifts {
            let mut drifted = built.clone();
            drift(&mut drifted);
            assert_ne!(drifted, built, "{name}: planted");
            assert!(!drifted.matches(&txns, straddles), "{name}: caught");
        }
    }
}
