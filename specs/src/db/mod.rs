//! The transactional database that [`crate::Mvcc`] and [`crate::Ssi`] both drive: a multi-version store (a list
//! of `(key, value, sequence)` versions), the engine's sequence rules, and the engine's own conflict tracker
//! ([`engine::ssi::ConflictTracker`]) held as a value inside the model state.
//!
//! The transitions follow `engine/src/txn.rs` and the commit pipeline it calls (`engine/src/commit.rs`) step by
//! step:
//!
//! * `begin`: snapshot = `last_sequence` (the last *acknowledged* sequence) for a read-write transaction,
//!   `tracker.safe_snapshot(last_sequence)` for a read-only one ([`ReadOnlySnapshot`]); then `tracker.begin`.
//! * `get`: a key the transaction wrote is answered from its buffer without the tracker (the model does not
//!   generate such reads); otherwise the value at the snapshot, then `tracker.on_read`. A conflict aborts the
//!   transaction (`tracker.abort`) and the read is not delivered.
//! * `scan`: the rows at the snapshot with the transaction's own writes applied, then `tracker.on_scan`.
//! * `put`: `tracker.check_doomed_public`, then buffer the write.
//! * `submit`: no writes: `tracker.finish(id, last_sequence)`. Writes: sequences from `next_sequence` to `last =
//!   next_sequence + writes - 1` in key order, `tracker.commit(id, keys, last)`, then `next_sequence = last + 1`.
//!   The commit is then *validated* (in the log) but not yet visible.
//! * acknowledge (group commit): the oldest validated commit becomes visible; `last_sequence` = its last sequence;
//!   `tracker.set_visible(last_sequence)`.
//! * a read-only transaction's end (drop): `tracker.finish(id, last_sequence)`; the engine asserts it never fails.
//!
//! Tracker panics (its `assert!`s and its "no transaction left to abort" panic) are caught and recorded as
//! failures in the state, as are conflicts reported to read-only transactions (which the engine turns into a
//! panic). A state with a failure has no successors.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

use engine::ssi::{Conflict, ConflictTracker, KeyRange, TxnId};
use engine::{ConflictCause, Sequence};

/// A model key: key `k` is the engine key `[b'a' + k]`.
pub type Key = u8;
/// A model value: transaction slot `s` writes the value `s + 1`, so every committed value names its writer.
pub type Value = u8;

mod serial;
mod types;

pub use serial::describe;
use serial::{replay, serial_order_exists};
pub use types::*;

/// The model state: the database, its tracker, and every transaction's history.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DbState {
    pub tracker: ConflictTracker,
    pub next_sequence: Sequence,
    /// The last acknowledged (visible) sequence: new snapshots read here.
    pub last_sequence: Sequence,
    /// Every visible version.
    pub versions: Vec<(Key, Value, Sequence)>,
    /// Slots of validated, unacknowledged commits, in sequence order.
    pub pending: Vec<usize>,
    pub txns: Vec<Txn>,
    /// Property failures the transitions observed (tracker panics, conflicts reported to readers).
    pub failures: Vec<String>,
}

thread_local! {
    static IN_TRACKER: Cell<bool> = const { Cell::new(false) };
}

/// Keep the default panic hook quiet for panics the model catches from the tracker (they are recorded).
fn install_quiet_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_TRACKER.with(Cell::get) {
                default(info);
            }
        }));
    });
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "(non-text panic)".to_string()
    }
}

impl DbState {
    pub fn new(config: &Config) -> Self {
        let txn = |slot: &Slot| Txn {
            read_only: slot.read_only,
            id: 0,
            snapshot: 0,
            status: Status::NotStarted,
            ops: Vec::new(),
        };
        Self {
            tracker: ConflictTracker::new(),
            next_sequence: 1,
            last_sequence: 0,
            versions: Vec::new(),
            pending: Vec::new(),
            txns: config.slots.iter().map(txn).collect(),
            failures: Vec::new(),
        }
    }

    /// Call the tracker, catching a panic as a recorded failure (`None`).
    fn tracker_call<T>(&mut self, what: &str, call: impl FnOnce(&mut ConflictTracker) -> T) -> Option<T> {
        install_quiet_hook();
        IN_TRACKER.with(|flag| flag.set(true));
        let result = catch_unwind(AssertUnwindSafe(|| call(&mut self.tracker)));
        IN_TRACKER.with(|flag| flag.set(false));
        // The counters do not steer the tracker: reset them so that states differing only in them merge.
        self.tracker.stats = engine::ssi::TrackerStats::default();
        match result {
            Ok(value) => Some(value),
            Err(payload) => {
                self.failures.push(format!("tracker panicked in {what}: {}", panic_message(payload.as_ref())));
                None
            }
        }
    }

    /// The newest visible version of `key` at `snapshot` (the model's read path).
    pub fn value_at(&self, key: Key, snapshot: Sequence) -> Option<Value> {
        self.versions
            .iter()
            .filter(|(k, _, sequence)| *k == key && *sequence <= snapshot)
            .max_by_key(|(_, _, sequence)| *sequence)
            .map(|(_, value, _)| *value)
    }

    /// The actions enabled in this state.
    pub fn actions(&self, config: &Config, actions: &mut Vec<Action>) {
        if !self.failures.is_empty() {
            return;
        }
        for (slot, txn) in self.txns.iter().enumerate() {
            match txn.status {
                Status::NotStarted => {
                    // Symmetry: of identical slots, the lower one begins first.
                    let earlier_idle = (0..slot).any(|other| {
                        config.slots[other] == config.slots[slot] && self.txns[other].status == Status::NotStarted
                    });
                    if !earlier_idle {
                        actions.push(Action::Begin(slot));
                    }
                }
                Status::Active => {
                    let writes = txn.writes();
                    if txn.ops.len() < config.slots[slot].ops_max {
                        for key in 0..config.keys {
                            if !writes.contains_key(&key) {
                                actions.push(Action::Read(slot, key));
                            }
                        }
                        for range in &config.ranges {
                            actions.push(Action::Scan(slot, *range));
                        }
                        if !txn.read_only {
                            for key in 0..config.keys {
                                if !writes.contains_key(&key) {
                                    actions.push(Action::Write(slot, key));
                                }
                            }
                        }
                    }
                    actions.push(Action::Commit(slot));
                    if config.rollback && !txn.read_only {
                        actions.push(Action::Rollback(slot));
                    }
                }
                _ => {}
            }
        }
        if !self.pending.is_empty() {
            actions.push(Action::Acknowledge);
        }
    }

    /// Apply `action` as the engine would.
    pub fn next(&self, config: &Config, action: &Action) -> Self {
        let mut next = self.clone();
        match *action {
            Action::Begin(slot) => next.begin(config, slot),
            Action::Read(slot, key) => next.read(config, slot, key),
            Action::Scan(slot, range) => next.scan(config, slot, range),
            Action::Write(slot, key) => next.write(config, slot, key),
            Action::Commit(slot) => next.commit(config, slot),
            Action::Rollback(slot) => next.abort(config, slot, Cause::Rollback),
            Action::Acknowledge => next.acknowledge(config),
        }
        next
    }

    fn begin(&mut self, config: &Config, slot: usize) {
        let read_only = self.txns[slot].read_only;
        let visible = self.last_sequence;
        let rule = if read_only && config.tracker != TrackerUse::Off {
            config.read_only_snapshot
        } else {
            ReadOnlySnapshot::Latest
        };
        let snapshot = match rule {
            ReadOnlySnapshot::Latest => Some(visible),
            ReadOnlySnapshot::Safe => self.tracker_call("safe_snapshot", |tracker| tracker.safe_snapshot(visible)),
            ReadOnlySnapshot::BelowCommit => self.tracker_call("straddles", |tracker| {
                let spans: Vec<(Sequence, Sequence)> =
                    tracker.straddles().iter().map(|straddle| (straddle.out_commit, straddle.pivot_commit)).collect();
                engine::ssi::snapshot_outside(visible, &spans)
            }),
        };
        let Some(snapshot) = snapshot else { return };
        let id = if config.tracker == TrackerUse::Off {
            0
        } else {
            match self.tracker_call("begin", |tracker| tracker.begin(snapshot, read_only)) {
                Some(id) => id,
                None => return,
            }
        };
        let txn = &mut self.txns[slot];
        (txn.id, txn.snapshot, txn.status) = (id, snapshot, Status::Active);
    }

    /// Was `key` written by a validated commit that a snapshot at `snapshot` does not see?
    fn newer_writer(&self, snapshot: Sequence, key: Key) -> bool {
        self.txns
            .iter()
            .any(|txn| txn.validated().is_some_and(|(_, last)| last > snapshot) && txn.writes().contains_key(&key))
    }

    /// A read hook's result: deliver the read (true), or the transaction aborted / a failure was recorded.
    fn read_hook(
        &mut self,
        config: &Config,
        slot: usize,
        keys: &[Key],
        hook: impl FnOnce(&mut ConflictTracker, TxnId) -> Result<(), Conflict>,
    ) -> bool {
        let (id, snapshot, read_only) = (self.txns[slot].id, self.txns[slot].snapshot, self.txns[slot].read_only);
        let call = match config.tracker {
            TrackerUse::Off | TrackerUse::WritesOnly => false,
            TrackerUse::Full => true,
            TrackerUse::NoReadAfterCommit => !keys.iter().any(|&key| self.newer_writer(snapshot, key)),
        };
        if !call {
            return true;
        }
        match self.tracker_call("a read hook", |tracker| hook(tracker, id)) {
            None if read_only => {
                self.failures
                    .push(format!("read-only T{slot}'s read made the tracker panic (a reader chosen to abort)"));
                false
            }
            None => false,
            Some(Ok(())) => true,
            Some(Err(conflict)) if read_only => {
                self.failures.push(format!("read-only T{slot} got a conflict on a read: {}", conflict.cause));
                false
            }
            Some(Err(conflict)) => {
                self.abort(config, slot, Cause::of(&conflict));
                false
            }
        }
    }

    fn read(&mut self, config: &Config, slot: usize, key: Key) {
        let saw = self.value_at(key, self.txns[slot].snapshot);
        let engine_key = key_bytes(key);
        if self.read_hook(config, slot, &[key], |tracker, id| tracker.on_read(id, &engine_key)) {
            self.txns[slot].ops.push(Op::Read { key, saw });
        }
    }

    fn scan(&mut self, config: &Config, slot: usize, range: Range) {
        let snapshot = self.txns[slot].snapshot;
        let mut rows: BTreeMap<Key, Value> = (0..config.keys)
            .filter(|&k| range.contains(k))
            .filter_map(|k| Some((k, self.value_at(k, snapshot)?)))
            .collect();
        rows.extend(self.txns[slot].writes().into_iter().filter(|(key, _)| range.contains(*key)));
        let keys: Vec<Key> = (0..config.keys).filter(|&k| range.contains(k)).collect();
        let bounds = range.key_range();
        if self.read_hook(config, slot, &keys, |tracker, id| tracker.on_scan(id, bounds)) {
            self.txns[slot].ops.push(Op::Scan { range, saw: rows.into_iter().collect() });
        }
    }

    fn write(&mut self, config: &Config, slot: usize, key: Key) {
        if config.tracker != TrackerUse::Off {
            let id = self.txns[slot].id;
            match self.tracker_call("check_doomed_public", |tracker| tracker.check_doomed_public(id)) {
                None => return,
                Some(Err(conflict)) => return self.abort(config, slot, Cause::of(&conflict)),
                Some(Ok(())) => {}
            }
        }
        let value = Value::try_from(slot + 1).expect("few slots");
        self.txns[slot].ops.push(Op::Write { key, value });
    }

    fn commit(&mut self, config: &Config, slot: usize) {
        let (id, read_only) = (self.txns[slot].id, self.txns[slot].read_only);
        let writes = self.txns[slot].writes();
        if writes.is_empty() {
            let end = self.last_sequence;
            let finished = if config.tracker == TrackerUse::Off {
                Ok(())
            } else {
                match self.tracker_call("finish", |tracker| tracker.finish(id, end)) {
                    Some(result) => result,
                    None => return,
                }
            };
            match finished {
                Ok(()) => self.txns[slot].status = Status::Finished { end },
                Err(conflict) if read_only => {
                    self.failures.push(format!("read-only T{slot} got a conflict at its end: {}", conflict.cause));
                }
                // `finish` aborted it already.
                Err(conflict) => self.aborted(slot, Cause::of(&conflict)),
            }
            return;
        }
        let first = self.next_sequence;
        let last = first + writes.len() as u64 - 1;
        if config.tracker != TrackerUse::Off {
            let keys: Vec<Vec<u8>> = writes.keys().map(|&key| key_bytes(key)).collect();
            match self.tracker_call("commit", |tracker| tracker.commit(id, &keys, last)) {
                None => return,
                // `commit` aborted it already.
                Some(Err(conflict)) => return self.aborted(slot, Cause::of(&conflict)),
                Some(Ok(())) => {}
            }
        }
        self.txns[slot].status = Status::Validated { first, last };
        self.next_sequence = last + 1;
        self.pending.push(slot);
        if !config.ack_gap {
            self.acknowledge(config);
        }
    }

    fn abort(&mut self, config: &Config, slot: usize, cause: Cause) {
        let id = self.txns[slot].id;
        if config.tracker != TrackerUse::Off && self.tracker_call("abort", |tracker| tracker.abort(id)).is_none() {
            return;
        }
        self.aborted(slot, cause);
    }

    /// `slot` is aborted (the tracker knows). Its reads were checked when they were made (every state is), so
    /// they are forgotten: histories that differ only in what an aborted transaction did merge.
    fn aborted(&mut self, slot: usize, cause: Cause) {
        let txn = &mut self.txns[slot];
        txn.status = Status::Aborted { cause };
        txn.ops.clear();
    }

    fn acknowledge(&mut self, config: &Config) {
        let slot = self.pending.remove(0);
        let Status::Validated { first, last } = self.txns[slot].status else {
            unreachable!("pending but not validated")
        };
        for (offset, (key, value)) in self.txns[slot].writes().into_iter().enumerate() {
            self.versions.push((key, value, first + offset as u64));
        }
        assert!(last > self.last_sequence, "acknowledged out of order");
        self.last_sequence = last;
        self.txns[slot].status = Status::Committed { first, last };
        if config.tracker != TrackerUse::Off {
            let _ = self.tracker_call("set_visible", |tracker| tracker.set_visible(last));
        }
    }

    // ---- Oracles: computed from the transactions' histories, not from `versions` or the tracker. ----

    /// Validated read-write transactions in commit order.
    fn validated_in_order(&self) -> Vec<&Txn> {
        let mut validated: Vec<&Txn> = self.txns.iter().filter(|txn| txn.validated().is_some()).collect();
        validated.sort_by_key(|txn| txn.validated().map(|(first, _)| first));
        validated
    }

    /// The committed state a snapshot at `snapshot` must see: every commit validated at or before it, in order.
    fn committed_state_at(&self, snapshot: Sequence) -> BTreeMap<Key, Value> {
        let mut state = BTreeMap::new();
        for txn in self.validated_in_order() {
            if txn.validated().is_some_and(|(_, last)| last <= snapshot) {
                state.extend(txn.writes());
            }
        }
        state
    }

    /// Snapshot isolation's read rule: every read any transaction was given (aborted ones too) saw exactly its
    /// snapshot's committed state plus its own earlier writes. Returns the first violation.
    pub fn snapshot_read_violation(&self) -> Option<String> {
        for (slot, txn) in self.txns.iter().enumerate().filter(|(_, txn)| txn.status != Status::NotStarted) {
            let base = self.committed_state_at(txn.snapshot);
            if replay(&txn.ops, &base).is_none() {
                return Some(format!("T{slot} (snapshot {}) read something other than its snapshot", txn.snapshot));
            }
        }
        None
    }

    /// First committer wins: two validated transactions that ran concurrently (neither's snapshot saw the other's
    /// commit) wrote disjoint keys.
    pub fn first_committer_violation(&self) -> Option<String> {
        let validated: Vec<(usize, &Txn)> =
            self.txns.iter().enumerate().filter(|(_, txn)| txn.validated().is_some()).collect();
        for (index, &(slot_a, a)) in validated.iter().enumerate() {
            for &(slot_b, b) in &validated[index + 1..] {
                let (a_last, b_last) = (a.validated().expect("validated").1, b.validated().expect("validated").1);
                let concurrent = a_last > b.snapshot && b_last > a.snapshot;
                let (a_keys, b_keys): (BTreeSet<Key>, BTreeSet<Key>) =
                    (a.writes().into_keys().collect(), b.writes().into_keys().collect());
                if concurrent && !a_keys.is_disjoint(&b_keys) {
                    return Some(format!("concurrent T{slot_a} and T{slot_b} both committed writes to the same key"));
                }
            }
        }
        None
    }

    /// Serializability, by brute force: is there a serial order of the committed transactions (validated read-write
    /// ones, and every finished one) in which each of them reads what it read (points and ranges) and which ends in
    /// the final committed state? Returns a description of the history when there is none.
    pub fn serializability_violation(&self) -> Option<String> {
        let committed: Vec<usize> = (0..self.txns.len())
            .filter(|&slot| {
                let txn = &self.txns[slot];
                txn.validated().is_some() || matches!(txn.status, Status::Finished { .. })
            })
            .collect();
        let final_state = self.committed_state_at(Sequence::MAX);
        let mut used = vec![false; committed.len()];
        if serial_order_exists(&self.txns, &committed, &mut used, &BTreeMap::new(), &final_state) {
            return None;
        }
        let mut text = String::from("no serial order of the committed transactions explains their reads:");
        for &slot in &committed {
            let _ = write!(text, " T{slot}{:?};", self.txns[slot].ops);
        }
        Some(text)
    }
}
