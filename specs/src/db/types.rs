//! The model's vocabulary: keys, ranges, operations, transactions, their configuration and the actions.

use super::*;

/// The engine key of a model key.
pub fn key_bytes(key: Key) -> Vec<u8> {
    vec![b'a' + key]
}

/// The printable name of a model key.
pub fn key_name(key: Key) -> char {
    char::from(b'a' + key)
}

/// A range read `[start, end)`; `end == None` is unbounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Range {
    pub start: Key,
    pub end: Option<Key>,
}

impl Range {
    pub fn contains(&self, key: Key) -> bool {
        key >= self.start && self.end.is_none_or(|end| key < end)
    }

    /// The tracker's form of the range, as `engine::txn::key_range` builds it.
    pub fn key_range(&self) -> KeyRange {
        KeyRange { start: key_bytes(self.start), end: self.end.map(key_bytes) }
    }

    pub(super) fn render(&self) -> String {
        match self.end {
            Some(end) => format!("[{}, {})", key_name(self.start), key_name(end)),
            None => format!("[{}, ..)", key_name(self.start)),
        }
    }
}

/// One operation a transaction performed, with what it observed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Read { key: Key, saw: Option<Value> },
    Scan { range: Range, saw: Vec<(Key, Value)> },
    Write { key: Key, value: Value },
}

/// Where a transaction is in its life.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    NotStarted,
    Active,
    /// Validated at `first ..= last` and appended to the log; not yet acknowledged (not visible).
    Validated {
        first: Sequence,
        last: Sequence,
    },
    /// Acknowledged: visible to snapshots at or after `last`.
    Committed {
        first: Sequence,
        last: Sequence,
    },
    /// Ended without writes (a read-only transaction, or a read-write one that wrote nothing).
    Finished {
        end: Sequence,
    },
    Aborted {
        cause: Cause,
    },
}

/// Why a transaction aborted (coarse, so that histories differing only in the tracker's wording merge).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cause {
    Rollback,
    /// First committer wins.
    WriteWrite,
    /// The read-only anomaly guard at a writer's commit.
    ReadOnlyGuard,
    /// A dangerous structure of rw antidependencies (at a read, a write, or the commit).
    ReadWrite,
}

impl Cause {
    pub(super) fn of(conflict: &Conflict) -> Self {
        match conflict.cause {
            ConflictCause::WriteWrite { .. } => Cause::WriteWrite,
            ConflictCause::ReadOnlyGuard { .. } => Cause::ReadOnlyGuard,
            // The rw causes (at a read, at another's commit, a dangerous structure at this commit), and any later.
            _ => Cause::ReadWrite,
        }
    }
}

/// One transaction slot.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Txn {
    pub read_only: bool,
    /// The tracker's id (meaningful once begun).
    pub id: TxnId,
    pub snapshot: Sequence,
    pub status: Status,
    pub ops: Vec<Op>,
}

impl Txn {
    /// The writes buffered so far, in key order.
    pub fn writes(&self) -> BTreeMap<Key, Value> {
        self.ops
            .iter()
            .filter_map(|op| match op {
                Op::Write { key, value } => Some((*key, *value)),
                _ => None,
            })
            .collect()
    }

    /// `(first, last)` if the commit was validated (acknowledged or not).
    pub fn validated(&self) -> Option<(Sequence, Sequence)> {
        match self.status {
            Status::Validated { first, last } | Status::Committed { first, last } => Some((first, last)),
            _ => None,
        }
    }
}

/// How the model uses the conflict tracker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TrackerUse {
    /// Not at all: every commit succeeds (no first-committer-wins). A known-bad variant.
    Off,
    /// `begin`, `commit`, `finish`, `abort` only, never the read hooks: first committer wins, so snapshot isolation
    /// ("naive SI" when used as SSI: a known-bad variant).
    WritesOnly,
    /// Every hook, as the engine calls them.
    Full,
    /// Every hook except a read whose key a validated writer outside the snapshot wrote: the read-after-commit
    /// rw edge is never found (the read is not recorded either). A known-bad variant.
    NoReadAfterCommit,
}

/// One transaction slot's kind and its budget of reads, scans and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slot {
    pub read_only: bool,
    pub ops_max: usize,
}

/// The bounds and variant of a transactional model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    pub keys: u8,
    pub slots: Vec<Slot>,
    /// The range reads transactions may do (empty: point reads only).
    pub ranges: Vec<Range>,
    /// Whether a read-write transaction may roll back.
    pub rollback: bool,
    /// Whether a validated commit becomes visible in a separate step (the engine's group commit) or at once.
    pub ack_gap: bool,
    pub tracker: TrackerUse,
    /// Where a read-only transaction reads.
    pub read_only_snapshot: ReadOnlySnapshot,
}

/// Where a read-only transaction reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReadOnlySnapshot {
    /// At `last_sequence` (a known-bad variant: the rule before ADR-0025).
    Latest,
    /// At `tracker.safe_snapshot(last_sequence)`: the engine.
    Safe,
    /// A known-bad variant, the rule before the txn target's partial-commit finding: below the commit sequence
    /// (the last) of a straddled pivot's out-neighbour rather than its first sequence, computed with the
    /// engine's own [`engine::ssi::ConflictTracker::straddles`] and [`engine::ssi::snapshot_outside`]. A reader
    /// can then see part of a commit of several writes.
    BelowCommit,
}

impl Config {
    /// A one-line description of the bounds.
    pub fn describe(&self) -> String {
        let slots: Vec<String> = self
            .slots
            .iter()
            .map(|s| format!("{}({} ops)", if s.read_only { "RO" } else { "RW" }, s.ops_max))
            .collect();
        let ranges: Vec<String> = self.ranges.iter().map(Range::render).collect();
        format!(
            "keys={} txns=[{}] ranges=[{}] rollback={} ack_gap={} tracker={:?} read_only_snapshot={:?}",
            self.keys,
            slots.join(", "),
            ranges.join(", "),
            self.rollback,
            self.ack_gap,
            self.tracker,
            self.read_only_snapshot
        )
    }
}

/// What a transaction can do next.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Begin(usize),
    Read(usize, Key),
    Scan(usize, Range),
    Write(usize, Key),
    /// Submit (read-write) or end (read-only).
    Commit(usize),
    Rollback(usize),
    /// Group commit makes the oldest validated commit visible.
    Acknowledge,
}

/// Render an action for a trace.
pub fn render_action(action: &Action) -> String {
    match action {
        Action::Begin(slot) => format!("T{slot} begin"),
        Action::Read(slot, key) => format!("T{slot} read {}", key_name(*key)),
        Action::Scan(slot, range) => format!("T{slot} scan {}", range.render()),
        Action::Write(slot, key) => format!("T{slot} write {}={}", key_name(*key), slot + 1),
        Action::Commit(slot) => format!("T{slot} commit"),
        Action::Rollback(slot) => format!("T{slot} rollback"),
        Action::Acknowledge => "acknowledge the oldest validated commit".to_string(),
    }
}
