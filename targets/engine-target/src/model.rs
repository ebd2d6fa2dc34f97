//! The oracle: a `BTreeMap` model of acknowledged state, the in-flight writes that may or may not have landed,
//! and every value ever written per key.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use holdfast::kit::{Sig, ValueSpec, sig_of};
use holdfast::{FailureKind, Violation};

use crate::prefix::{Commit, Journal, PrefixCheck};

/// The most unresolved in-flight writes one key may carry (each failed write adds one until a read resolves them).
pub const IN_FLIGHT_PER_KEY_MAX: usize = 1_000_000;

#[derive(Clone, Debug, Default)]
struct Slot {
    /// The acknowledged value (None: absent or deleted).
    value: Option<Sig>,
    /// Unresolved in-flight writes: the key may now hold any of these, or `value`.
    maybe: BTreeSet<Option<Sig>>,
    /// Every value ever written (acknowledged or not) under this key.
    ever: BTreeSet<Sig>,
    /// `SyncMode::NoSync` only (ADR-0203): the values the key held since the log was last known synced, before
    /// its latest acknowledged write, and the in-flight ones that write superseded. A crash may bring any back.
    unsynced: BTreeSet<Option<Sig>>,
}

/// How a read compared with the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// What the model expected.
    Expected,
    /// One of the in-flight candidates: the model now holds it.
    ResolvedInFlight,
    /// Not what the model expected, but allowed by a data-destroying fault (a rollback to an earlier value).
    Degraded,
}

/// Keys below this have their slot in a vector indexed by the key (key spaces stop at 2,000), the rest in a map:
/// the verification looks every key of the key space up after every recovery, and a `BTreeMap` lookup per key
/// was 2.7 % of an engine swarm's instructions (ADR-0137).
pub const DENSE_KEYS_MAX: u32 = 4096;

/// Every key's slot: dense below [`DENSE_KEYS_MAX`], a map above. A key has a slot once it was written, deleted
/// or read (a "known" key).
#[derive(Clone, Debug, Default)]
struct Slots {
    dense: Vec<Option<Slot>>,
    sparse: BTreeMap<u32, Slot>,
}

impl Slots {
    /// The slot of `key`, made on first sight.
    fn entry(&mut self, key: u32) -> &mut Slot {
        if key >= DENSE_KEYS_MAX {
            return self.sparse.entry(key).or_default();
        }
        let index = key as usize;
        if index >= self.dense.len() {
            self.dense.resize(index + 1, None);
        }
        self.dense[index].get_or_insert_with(Slot::default)
    }

    fn get(&self, key: u32) -> Option<&Slot> {
        if key >= DENSE_KEYS_MAX { self.sparse.get(&key) } else { self.dense.get(key as usize)?.as_ref() }
    }

    /// Every known key, ascending.
    fn keys(&self) -> impl Iterator<Item = u32> + '_ {
        let dense = self.dense.iter().enumerate().filter(|(_, slot)| slot.is_some());
        let dense = dense.map(|(index, _)| u32::try_from(index).expect("below DENSE_KEYS_MAX"));
        dense.chain(self.sparse.keys().copied())
    }

    /// The known keys in `start..end`, ascending.
    fn keys_in(&self, start: u32, end: u32) -> impl Iterator<Item = u32> + '_ {
        let dense_end = end.min(DENSE_KEYS_MAX).min(u32::try_from(self.dense.len()).unwrap_or(u32::MAX));
        let dense = (start.min(dense_end)..dense_end).filter(|&key| self.dense[key as usize].is_some());
        let sparse_start = start.max(DENSE_KEYS_MAX);
        let sparse = (sparse_start < end).then(|| self.sparse.range(sparse_start..end).map(|(&key, _)| key));
        dense.chain(sparse.into_iter().flatten())
    }
}

/// The model of one database.
#[derive(Clone, Debug, Default)]
pub struct Model {
    slots: Slots,
    /// Every value signature ever written, with the spec that made it (for reports and observations).
    specs: BTreeMap<Sig, ValueSpec>,
    /// Signatures more than one spec wrote (never named by one of their ids in a report).
    shared: BTreeSet<Sig>,
    /// The database runs in `SyncMode::NoSync`: an acknowledged write is durable only at the next durable point
    /// ([`Model::durable`]); until then a crash may undo it ([`Model::crash`], ADR-0203).
    unsynced_mode: bool,
    /// The keys whose `unsynced` set is not empty, ascending.
    unsynced_keys: BTreeSet<u32>,
    /// Unsynced: the commits acknowledged since the last durable point (ADR-0204).
    journal: Journal,
    /// Unsynced: the journal the last crash ended, until the verification after it is checked against it.
    prefix_check: Option<PrefixCheck>,
}

impl Model {
    /// Remember the spec of a value about to be written, returning its signature.
    pub fn register(&mut self, spec: ValueSpec, bytes: &[u8]) -> Sig {
        assert_eq!(bytes.len(), spec.len as usize, "bytes do not match their spec");
        let sig = sig_of(bytes);
        if *self.specs.entry(sig).or_insert(spec) != spec {
            self.shared.insert(sig);
        }
        debug_assert!(self.specs.contains_key(&sig));
        sig
    }

    /// The spec of a known signature.
    pub fn spec(&self, sig: Sig) -> Option<ValueSpec> {
        self.specs.get(&sig).copied()
    }

    /// A model of a database in `SyncMode::NoSync` (ADR-0203).
    pub fn unsynced() -> Self {
        Self { unsynced_mode: true, ..Self::default() }
    }

    /// A write of `value` (None: delete) to `key` was acknowledged.
    pub fn ack(&mut self, key: u32, value: Option<Sig>) {
        if self.unsynced_mode {
            self.ack_commit(vec![(key, value)]);
        } else {
            // Synced, nothing is journaled: no commit to build.
            self.ack_write(key, value);
        }
    }

    /// One commit of several writes was acknowledged: unsynced, a crash keeps all of them or none (ADR-0204).
    pub fn ack_commit(&mut self, commit: Commit) {
        if self.unsynced_mode {
            let slots = &self.slots;
            let before = |key| slots.get(key).map_or((None, false), |slot| (slot.value, !slot.maybe.is_empty()));
            self.journal.acknowledged(commit.clone(), before);
        }
        for (key, value) in commit {
            self.ack_write(key, value);
        }
    }

    fn ack_write(&mut self, key: u32, value: Option<Sig>) {
        let unsynced_mode = self.unsynced_mode;
        let slot = self.slots.entry(key);
        if unsynced_mode {
            // Until the log is synced, a crash may bring back what the key held before, or an in-flight write
            // this one superseded.
            let before = std::mem::take(&mut slot.maybe);
            slot.unsynced.extend(before.into_iter().chain([slot.value]).filter(|&old| old != value));
            if !slot.unsynced.is_empty() {
                self.unsynced_keys.insert(key);
            }
        }
        let slot = self.slots.entry(key);
        slot.value = value;
        slot.maybe.clear();
        if let Some(sig) = value {
            slot.ever.insert(sig);
        }
        debug_assert!(slot.maybe.is_empty());
    }

    /// A write of `value` (None: delete) to `key` returned an error: it may or may not have landed.
    pub fn in_flight(&mut self, key: u32, value: Option<Sig>) {
        if self.unsynced_mode {
            self.journal.in_flight(key);
        }
        let slot = self.slots.entry(key);
        if let Some(sig) = value {
            slot.ever.insert(sig);
        }
        if slot.value != value {
            slot.maybe.insert(value);
        }
        assert!(slot.maybe.len() <= IN_FLIGHT_PER_KEY_MAX, "key {key} has too many unresolved writes");
    }

    /// Every acknowledged write is durable now (a flush or a close returned `Ok`): no crash may undo it.
    pub fn durable(&mut self) {
        self.journal = Journal::default();
        for key in std::mem::take(&mut self.unsynced_keys) {
            self.slots.entry(key).unsynced.clear();
        }
    }

    /// The database was dropped without a clean close: each key may now hold its acknowledged value or any value
    /// a crash may bring back (they become in-flight candidates, which the verification after recovery resolves).
    pub fn crash(&mut self) {
        if !self.journal.is_empty() {
            self.prefix_check = Some(PrefixCheck::new(std::mem::take(&mut self.journal)));
        }
        for key in std::mem::take(&mut self.unsynced_keys) {
            let slot = self.slots.entry(key);
            let value = slot.value;
            let undone = std::mem::take(&mut slot.unsynced);
            slot.maybe.extend(undone.into_iter().filter(|&old| old != value));
            assert!(slot.maybe.len() <= IN_FLIGHT_PER_KEY_MAX, "key {key} has too many unresolved writes");
        }
    }

    /// Unsynced: the journal the last crash ended, with what the reads since saw (ADR-0204); none after.
    pub fn take_prefix_check(&mut self) -> Option<PrefixCheck> {
        self.prefix_check.take()
    }

    /// Keys the model knows about (ever written or deleted).
    pub fn known_keys(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.keys()
    }

    /// Known keys in `start..end`.
    pub fn known_keys_in(&self, start: u32, end: u32) -> Vec<u32> {
        if start >= end {
            return Vec::new();
        }
        self.slots.keys_in(start, end).collect()
    }

    /// True when `key` has unresolved in-flight writes.
    pub fn is_uncertain(&self, key: u32) -> bool {
        self.slots.get(key).is_some_and(|slot| !slot.maybe.is_empty())
    }

    /// Compare a read of `key` with the model and resolve in-flight writes. `damaged`: a data-destroying fault
    /// landed in a file that held this key, so any value the key ever had (or absence) is allowed; a
    /// never-written value never is. `context`
    /// names the check (`oracle`, `durability`, `liveness`).
    pub fn observe(
        &mut self,
        key: u32,
        actual: Option<Sig>,
        damaged: bool,
        context: &str,
    ) -> Result<Resolution, Violation> {
        if let Some(check) = &mut self.prefix_check {
            check.observed(key, actual);
        }
        let slot = self.slots.entry(key);
        if slot.value == actual {
            slot.maybe.clear();
            return Ok(Resolution::Expected);
        }
        if slot.maybe.contains(&actual) {
            if self.unsynced_mode {
                // The in-flight write landed, unsynced: a crash may still bring back what it replaced.
                let before = slot.value;
                slot.unsynced.insert(before);
                slot.unsynced.remove(&actual);
                if !slot.unsynced.is_empty() {
                    self.unsynced_keys.insert(key);
                }
            }
            let slot = self.slots.entry(key);
            slot.value = actual;
            slot.maybe.clear();
            return Ok(Resolution::ResolvedInFlight);
        }
        let known = actual.is_none_or(|sig| slot.ever.contains(&sig));
        if damaged && known {
            slot.value = actual;
            slot.maybe.clear();
            return Ok(Resolution::Degraded);
        }
        let class = match (slot.value, actual) {
            (_, Some(sig)) if !slot.ever.contains(&sig) => "never_written_value",
            (None, Some(_)) => "resurrection",
            (Some(_), None) => "lost_write",
            _ => "stale_value",
        };
        let kind = if context == "oracle" { FailureKind::Safety } else { FailureKind::Durability };
        let expected = self.describe_expected(key);
        let actual = self.describe(actual);
        Err(Violation::new(format!("{context}.{class}"), kind, expected, format!("k{key:06} = {actual}")))
    }

    /// The model's expectation for `key`, for reports.
    pub fn describe_expected(&self, key: u32) -> String {
        let Some(slot) = self.slots.get(key) else { return format!("k{key:06} = absent (never written)") };
        let mut text = format!("k{key:06} = {}", self.describe(slot.value));
        if !slot.maybe.is_empty() {
            let candidates: Vec<String> = slot.maybe.iter().map(|&value| self.describe(value)).collect();
            let _ = write!(text, " or in-flight {}", candidates.join(" | "));
        }
        text
    }

    /// A value for reports: `absent`, `v17(33B)`, or an unknown signature.
    pub fn describe(&self, value: Option<Sig>) -> String {
        match value {
            None => "absent".to_string(),
            Some(sig) => match self.specs.get(&sig) {
                Some(&spec) => holdfast::kit::value_name(spec, self.shared.contains(&sig)),
                None => format!("never-written value (sig {sig:016x})"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdfast::kit::value_bytes;

    /// Keys on both sides of [`DENSE_KEYS_MAX`] are known once written, deleted or read, listed ascending, and
    /// found by range across the boundary.
    #[test]
    fn known_keys_span_the_dense_and_sparse_slots() {
        let mut model = Model::default();
        let a = model.register(ValueSpec { id: 1, len: 3 }, &value_bytes(ValueSpec { id: 1, len: 3 }));
        model.ack(u32::MAX, Some(a));
        model.ack(DENSE_KEYS_MAX, None);
        model.in_flight(DENSE_KEYS_MAX - 1, Some(a));
        assert_eq!(model.observe(7, None, false, "oracle"), Ok(Resolution::Expected));
        model.ack(0, Some(a));
        let all = [0, 7, DENSE_KEYS_MAX - 1, DENSE_KEYS_MAX, u32::MAX];
        assert_eq!(model.known_keys().collect::<Vec<_>>(), all);
        assert_eq!(model.known_keys_in(1, DENSE_KEYS_MAX + 1), [7, DENSE_KEYS_MAX - 1, DENSE_KEYS_MAX]);
        assert_eq!(model.known_keys_in(8, DENSE_KEYS_MAX - 1), Vec::<u32>::new());
        assert_eq!(model.known_keys_in(DENSE_KEYS_MAX, u32::MAX), [DENSE_KEYS_MAX]);
        assert_eq!(model.known_keys_in(5, 5), Vec::<u32>::new());
        assert!(model.is_uncertain(DENSE_KEYS_MAX - 1) && !model.is_uncertain(7) && !model.is_uncertain(8));
        assert_eq!(model.describe_expected(8), "k000008 = absent (never written)");
        assert_eq!(model.observe(u32::MAX, Some(a), false, "oracle"), Ok(Resolution::Expected));
    }

    /// Values shrunk to the same bytes (every empty value) are never named by one writer's id (ADR-0171).
    #[test]
    fn a_value_several_writes_made_is_not_named_by_one_of_their_ids() {
        let mut model = Model::default();
        let empty = |id| ValueSpec { id, len: 0 };
        let first = model.register(empty(7), &value_bytes(empty(7)));
        assert_eq!(model.describe(Some(first)), "v7(0B)", "one writer: its id");
        let second = model.register(empty(114), &value_bytes(empty(114)));
        assert_eq!(first, second, "empty values share their bytes");
        assert_eq!(model.describe(Some(second)), "a 0B value (bytes several writes made)");
        let again = model.register(ValueSpec { id: 3, len: 9 }, &value_bytes(ValueSpec { id: 3, len: 9 }));
        model.register(ValueSpec { id: 3, len: 9 }, &value_bytes(ValueSpec { id: 3, len: 9 }));
        assert_eq!(model.describe(Some(again)), "v3(9B)", "the same spec twice is one writer");
    }

    /// ADR-0203: unsynced, a crash may bring back any value a key held since the last durable point (and an
    /// in-flight write an acknowledged one superseded), never one from before it; a durable point forgets them.
    #[test]
    fn an_unsynced_model_lets_a_crash_undo_only_what_no_sync_covered() {
        let mut model = Model::unsynced();
        let sigs: Vec<Sig> = (1..=4)
            .map(|id| model.register(ValueSpec { id, len: 3 }, &value_bytes(ValueSpec { id, len: 3 })))
            .collect();
        model.ack(1, Some(sigs[0]));
        model.durable();
        model.ack(1, Some(sigs[1]));
        model.in_flight(1, Some(sigs[2]));
        model.ack(1, Some(sigs[3]));
        assert!(!model.is_uncertain(1), "before a crash a read must see the last acknowledged write");
        model.crash();
        assert!(model.is_uncertain(1));
        for (index, &sig) in sigs.iter().enumerate() {
            let mut crashed = model.clone();
            assert!(crashed.observe(1, Some(sig), false, "durability").is_ok(), "v{} refused", index + 1);
        }
        let mut crashed = model.clone();
        let error = crashed.observe(1, None, false, "durability").expect_err("a value from before the sync");
        assert_eq!(error.invariant, "durability.lost_write");
        let mut synced = Model::unsynced();
        synced.ack(2, Some(sigs[0]));
        synced.ack(2, Some(sigs[1]));
        synced.durable();
        synced.crash();
        assert!(!synced.is_uncertain(2), "a durable point left something a crash may undo");
        let mut strict = Model::default();
        strict.ack(3, Some(sigs[0]));
        strict.ack(3, Some(sigs[1]));
        strict.crash();
        assert!(!strict.is_uncertain(3), "a synced model let a crash undo an acknowledged write");
    }

    #[test]
    fn in_flight_resolves_either_way_and_never_accepts_unknown_values() {
        let mut model = Model::default();
        let a = model.register(ValueSpec { id: 1, len: 3 }, &value_bytes(ValueSpec { id: 1, len: 3 }));
        let b = model.register(ValueSpec { id: 2, len: 3 }, &value_bytes(ValueSpec { id: 2, len: 3 }));
        model.ack(5, Some(a));
        model.in_flight(5, Some(b));
        assert!(model.is_uncertain(5));
        assert_eq!(model.observe(5, Some(b), false, "oracle"), Ok(Resolution::ResolvedInFlight));
        assert!(!model.is_uncertain(5));
        let error = model.observe(5, Some(a), false, "oracle").expect_err("stale value accepted");
        assert_eq!(error.invariant, "oracle.stale_value");
        assert_eq!(model.observe(5, Some(a), true, "durability"), Ok(Resolution::Degraded));
        let error = model.observe(5, Some(12345), true, "durability").expect_err("unknown value accepted");
        assert_eq!(error.invariant, "durability.never_written_value");
        model.ack(6, None);
        let error = model.observe(6, Some(a), false, "oracle").expect_err("resurrection accepted");
        assert_eq!(error.invariant, "oracle.never_written_value");
        model.ack(6, Some(a));
        model.ack(6, None);
        assert_eq!(
            model.observe(6, Some(a), false, "oracle").expect_err("resurrected").invariant,
            "oracle.resurrection"
        );
    }
}
