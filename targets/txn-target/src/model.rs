//! The model of the transaction target: a version history per key of the commits that became visible (keyed by
//! the sequences the engine assigned), and the record of what each transaction read and wrote, in the form the
//! DSG checker takes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use holdfast::kit::{Sig, ValueSpec, key_bytes, sig_of, value_bytes};

use crate::dsg::{CommittedTxn, INITIAL, Scan, TxnId};
use crate::ops::ClientId;

/// The most versions the history keeps per key (a leak is a bug).
pub const VERSIONS_PER_KEY_MAX: usize = 1 << 20;

/// One committed version of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    pub sequence: u64,
    pub writer: TxnId,
    /// None: a tombstone.
    pub value: Option<Sig>,
}

/// The version history of every key: what a snapshot at any sequence must read.
#[derive(Clone, Debug, Default)]
pub struct History {
    versions: BTreeMap<u32, Vec<Version>>,
    /// The highest sequence applied (every sequence at or below it that belongs to a commit is applied).
    visible: u64,
    /// Every value signature written, with its spec (for reports and observations).
    specs: BTreeMap<Sig, ValueSpec>,
    /// Signatures more than one spec wrote (never named by one of their ids, or one author, in a report).
    shared: BTreeSet<Sig>,
    /// Which transaction wrote which value (committed or not, for reports).
    authors: BTreeMap<Sig, TxnId>,
    /// Commits of more than one write: first sequence → (last sequence, writer). A snapshot inside one would
    /// see part of a commit.
    batches: BTreeMap<u64, (u64, TxnId)>,
}

impl History {
    /// Remember a value about to be written by `txn`, returning its signature.
    pub fn register(&mut self, spec: ValueSpec, txn: TxnId) -> Sig {
        let sig = sig_of(&value_bytes(spec));
        if *self.specs.entry(sig).or_insert(spec) != spec {
            self.shared.insert(sig);
        }
        self.authors.entry(sig).or_insert(txn);
        sig
    }

    /// The spec of a known signature.
    pub fn spec(&self, sig: Sig) -> Option<ValueSpec> {
        self.specs.get(&sig).copied()
    }

    /// The highest sequence applied.
    pub fn visible(&self) -> u64 {
        self.visible
    }

    /// The version of `key` a snapshot at `snapshot` reads (None: no version at or below it).
    pub fn at(&self, key: u32, snapshot: u64) -> Option<Version> {
        let chain = self.versions.get(&key)?;
        let position = chain.partition_point(|version| version.sequence <= snapshot);
        position.checked_sub(1).map(|index| chain[index])
    }

    /// The latest version of `key`.
    pub fn latest(&self, key: u32) -> Option<Version> {
        self.versions.get(&key).and_then(|chain| chain.last().copied())
    }

    /// The value of `key` at `snapshot` (None: absent or deleted).
    pub fn value_at(&self, key: u32, snapshot: u64) -> Option<Sig> {
        self.at(key, snapshot).and_then(|version| version.value)
    }

    /// The latest value of `key`.
    pub fn latest_value(&self, key: u32) -> Option<Sig> {
        self.latest(key).and_then(|version| version.value)
    }

    /// The writer of the version of `key` at `snapshot` ([`INITIAL`] when there is none).
    pub fn writer_at(&self, key: u32, snapshot: u64) -> TxnId {
        self.at(key, snapshot).map_or(INITIAL, |version| version.writer)
    }

    /// Keys with at least one version, in `start..end`.
    pub fn keys_in(&self, start: u32, end: u32) -> Vec<u32> {
        if start >= end {
            return Vec::new();
        }
        self.versions.range(start..end).map(|(&key, _)| key).collect()
    }

    /// Every key with a version.
    pub fn keys(&self) -> impl Iterator<Item = u32> + '_ {
        self.versions.keys().copied()
    }

    /// The multi-write commit a snapshot at `snapshot` would see only part of: (first, last, writer).
    pub fn split_commit(&self, snapshot: u64) -> Option<(u64, u64, TxnId)> {
        let (&first, &(last, writer)) = self.batches.range(..=snapshot).next_back()?;
        (snapshot < last).then_some((first, last, writer))
    }

    /// Apply a commit that became visible: its writes get sequences `first..` in key order.
    pub fn apply(&mut self, record: &TxnRecord, first_sequence: u64) {
        if record.writes.len() > 1 {
            let last = first_sequence + record.writes.len() as u64 - 1;
            self.batches.insert(first_sequence, (last, record.id));
        }
        for (index, (&key, &value)) in record.writes.iter().enumerate() {
            let sequence = first_sequence + index as u64;
            let chain = self.versions.entry(key).or_default();
            assert!(chain.last().is_none_or(|last| last.sequence < sequence), "versions of k{key} out of order");
            assert!(chain.len() < VERSIONS_PER_KEY_MAX, "k{key} has too many versions");
            chain.push(Version { sequence, writer: record.id, value });
            self.visible = self.visible.max(sequence);
        }
    }

    /// Undo every version above `sequence` (an unsynced run's crash took those commits back, ADR-0205): the
    /// history is again what it was when `sequence` was the last visible.
    pub fn truncate_after(&mut self, sequence: u64) {
        for chain in self.versions.values_mut() {
            let kept = chain.partition_point(|version| version.sequence <= sequence);
            chain.truncate(kept);
        }
        self.versions.retain(|_, chain| !chain.is_empty());
        self.batches.retain(|&first, _| first <= sequence);
        self.visible = self.visible.min(sequence);
    }

    /// Every sequence up to `sequence` is accounted for, though no commit here has it: an unsynced recovery went on
    /// from a manifest's last sequence above the commits the crash kept (ADR-0205).
    pub fn skip_to(&mut self, sequence: u64) {
        self.visible = self.visible.max(sequence);
    }

    /// A value for reports: `absent`, `v17(33B) by T4`, or an unknown signature.
    pub fn describe(&self, value: Option<Sig>) -> String {
        match value {
            None => "absent".to_string(),
            Some(sig) => match (self.specs.get(&sig), self.authors.get(&sig)) {
                (Some(&spec), _) if self.shared.contains(&sig) => holdfast::kit::value_name(spec, true),
                (Some(spec), Some(author)) => format!("v{}({}B) by T{author}", spec.id, spec.len),
                (Some(&spec), None) => holdfast::kit::value_name(spec, false),
                _ => format!("never-written value (sig {sig:016x})"),
            },
        }
    }

    /// `key`'s version at `snapshot`, for reports.
    pub fn describe_at(&self, key: u32, snapshot: u64) -> String {
        match self.at(key, snapshot) {
            None => format!("k{key:06} = absent (no version at or below {snapshot})"),
            Some(version) => format!(
                "k{key:06} = {} (T{}'s version, seq {})",
                self.describe(version.value),
                version.writer,
                version.sequence
            ),
        }
    }
}

/// A predicate read: `[start, end)` and the writer of the version observed for every key the history had in range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanRead {
    pub start: u32,
    pub end: u32,
    pub observed: Vec<(u32, TxnId)>,
}

/// What one transaction did, in terms of versions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnRecord {
    pub id: TxnId,
    pub client: ClientId,
    /// `None` until the transaction's first read takes one (ADR-0210: read-write transactions).
    pub snapshot: Option<u64>,
    pub read_only: bool,
    /// Point reads not served from the transaction's own writes: (key, writer of the version observed).
    pub reads: Vec<(u32, TxnId)>,
    pub scans: Vec<ScanRead>,
    /// The buffered writes (None: delete), in key order — the order of the commit batch.
    pub writes: BTreeMap<u32, Option<Sig>>,
}

impl TxnRecord {
    /// A transaction that began (at `snapshot`, if it took one then) and has done nothing yet.
    pub fn new(id: TxnId, client: ClientId, snapshot: Option<u64>, read_only: bool) -> Self {
        Self { id, client, snapshot, read_only, reads: Vec::new(), scans: Vec::new(), writes: BTreeMap::new() }
    }

    /// The record in the DSG checker's form.
    pub fn to_committed(&self) -> CommittedTxn {
        CommittedTxn {
            id: self.id,
            reads: self.reads.iter().map(|&(key, writer)| (key_bytes(key), writer)).collect(),
            scans: self
                .scans
                .iter()
                .map(|scan| Scan {
                    start: key_bytes(scan.start),
                    end: Some(key_bytes(scan.end)),
                    observed: scan.observed.iter().map(|&(key, writer)| (key_bytes(key), writer)).collect(),
                })
                .collect(),
            writes: self.writes.keys().map(|&key| key_bytes(key)).collect(),
            deletes: self.writes.iter().filter(|(_, value)| value.is_none()).map(|(&key, _)| key_bytes(key)).collect(),
        }
    }

    /// A one-line summary for reports: `T5{c2 snap=10 ro r[k3@T1] s[k1..k4:k2@T0] w[k7]}`.
    pub fn summary(&self) -> String {
        let snapshot = self.snapshot.map_or_else(|| "-".to_string(), |snapshot| snapshot.to_string());
        let mut text = format!("T{}{{c{} snap={snapshot}", self.id, self.client);
        if self.read_only {
            text.push_str(" ro");
        }
        let reads: Vec<String> = self.reads.iter().map(|(key, writer)| format!("k{key}@T{writer}")).collect();
        let _ = write!(text, " r[{}]", reads.join(","));
        for scan in &self.scans {
            let seen: Vec<String> = scan.observed.iter().map(|(key, writer)| format!("k{key}@T{writer}")).collect();
            let _ = write!(text, " s[k{}..k{}:{}]", scan.start, scan.end, seen.join(","));
        }
        let writes: Vec<String> = self.writes.keys().map(|key| format!("k{key}")).collect();
        let _ = write!(text, " w[{}]}}", writes.join(","));
        text
    }
}

/// A read-write commit that was submitted (or whose submit failed without a verdict) and is not yet visible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submission {
    pub record: TxnRecord,
    /// The sequence of the first write (key order); from the ticket, or the expected one when the submit failed.
    pub first_sequence: u64,
    pub last_sequence: u64,
    /// False when the submit returned an error: the commit may or may not be in the log.
    pub ticketed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_read_the_latest_version_at_or_below() {
        let mut history = History::default();
        let a = history.register(ValueSpec { id: 1, len: 8 }, 1);
        let mut t1 = TxnRecord::new(1, 0, Some(0), false);
        t1.writes.insert(3, Some(a));
        t1.writes.insert(5, None);
        history.apply(&t1, 4);
        assert_eq!(history.visible(), 5);
        assert_eq!(history.at(3, 3), None);
        assert_eq!(history.value_at(3, 4), Some(a));
        assert_eq!(history.at(5, 5), Some(Version { sequence: 5, writer: 1, value: None }));
        assert_eq!(history.writer_at(5, 9), 1);
        assert_eq!(history.writer_at(5, 4), INITIAL);
        assert_eq!(history.split_commit(4), Some((4, 5, 1)));
        assert_eq!(history.split_commit(5), None);
        assert_eq!(history.split_commit(3), None);
        assert_eq!(history.keys_in(0, 5), vec![3]);
        let committed = t1.to_committed();
        assert_eq!(committed.writes, vec![key_bytes(3), key_bytes(5)]);
        assert_eq!(committed.deletes, vec![key_bytes(5)]);
        assert!(history.describe(Some(a)).contains("by T1"));
    }

    /// ADR-0205: truncating after a sequence gives back the history as it was when that sequence was the last
    /// visible (a later two-write commit wholly gone); skipping ahead only raises what is visible.
    #[test]
    fn a_truncated_history_is_the_history_before_the_later_commits() {
        let mut history = History::default();
        let (a, b) =
            (history.register(ValueSpec { id: 1, len: 8 }, 1), history.register(ValueSpec { id: 2, len: 8 }, 2));
        let mut t1 = TxnRecord::new(1, 0, Some(0), false);
        t1.writes.insert(3, Some(a));
        history.apply(&t1, 1);
        let before = history.clone();
        let mut t2 = TxnRecord::new(2, 0, Some(1), false);
        t2.writes.insert(3, Some(b));
        t2.writes.insert(7, Some(b));
        history.apply(&t2, 2);
        assert_eq!(
            (history.visible(), history.latest_value(7), history.split_commit(2)),
            (3, Some(b), Some((2, 3, 2)))
        );
        history.truncate_after(1);
        assert_eq!(history.visible(), 1);
        assert_eq!((history.latest_value(3), history.latest_value(7), history.split_commit(2)), (Some(a), None, None));
        assert_eq!(history.keys().collect::<Vec<_>>(), before.keys().collect::<Vec<_>>());
        assert_eq!(history.latest(3), before.latest(3));
        history.skip_to(5);
        assert_eq!((history.visible(), history.latest_value(3)), (5, Some(a)));
        history.skip_to(2);
        assert_eq!(history.visible(), 5, "skipping never lowers what is visible");
    }
}
