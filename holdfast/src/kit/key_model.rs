//! The model a key-value target checks a store against, one key at a time: the value the last acknowledged write
//! left, and the writes that failed (in flight: they may or may not have landed). A read that finds an in-flight
//! value resolves the key to it; anything else is a violation classed by what went wrong.

use std::collections::{BTreeMap, BTreeSet};

use crate::{FailureKind, Violation};

use super::{Sig, ValueSpec};

/// The most unresolved in-flight writes one key may carry (each failed write adds one until a read resolves them;
/// a run has far fewer steps).
pub const IN_FLIGHT_PER_KEY_MAX: usize = 1_000_000;

/// One key: its acknowledged value (`None`: absent or deleted) and the in-flight writes it may hold instead.
#[derive(Clone, Debug, Default)]
struct Slot {
    value: Option<Sig>,
    maybe: BTreeSet<Option<Sig>>,
}

/// Every key's slot (acknowledged value, in-flight writes), the values written (by signature, to name them in reports) and the next value's id.
#[derive(Clone, Debug, Default)]
pub struct KeyModel {
    slots: BTreeMap<u32, Slot>,
    specs: BTreeMap<Sig, ValueSpec>,
    next_value_id: u64,
}

impl KeyModel {
    /// An empty model: every key absent.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh value of `len` bytes to write (ids count up from 1).
    pub fn next_value(&mut self, len: u32) -> ValueSpec {
        self.next_value_id += 1;
        ValueSpec { id: self.next_value_id, len }
    }

    /// Remember that `value`'s bytes have signature `sig`, so that reports name it; returns `sig`.
    pub fn written(&mut self, value: ValueSpec, sig: Sig) -> Sig {
        self.specs.insert(sig, value);
        sig
    }

    /// The value whose bytes have signature `sig`, if one was written.
    pub fn spec(&self, sig: Sig) -> Option<ValueSpec> {
        self.specs.get(&sig).copied()
    }

    /// A write of `value` to `key` (`None`: a delete) was acknowledged: the key now holds it, nothing in flight.
    pub fn acknowledged(&mut self, key: u32, value: Option<Sig>) {
        self.slots.insert(key, Slot { value, maybe: BTreeSet::new() });
    }

    /// A write of `value` to `key` failed: the key may hold it from now on, or what it held.
    pub fn in_flight(&mut self, key: u32, value: Option<Sig>) {
        let slot = self.slots.entry(key).or_default();
        assert!(slot.maybe.len() < IN_FLIGHT_PER_KEY_MAX, "key {key}: more than {IN_FLIGHT_PER_KEY_MAX} in flight");
        slot.maybe.insert(value);
    }

    /// How many keys hold a value.
    pub fn live_keys(&self) -> u64 {
        self.slots.values().filter(|slot| slot.value.is_some()).count() as u64
    }

    /// The keys a full verification reads: `0..key_count` and every key the model knows, ascending.
    pub fn keys_to_verify(&self, key_count: u32) -> BTreeSet<u32> {
        (0..key_count).chain(self.slots.keys().copied()).collect()
    }

    /// A value's name in a report: `absent`, `v17(33B)`, or a never-written value by its signature.
    pub fn describe(&self, value: Option<Sig>) -> String {
        match value.map(|sig| (sig, self.specs.get(&sig))) {
            None => "absent".into(),
            Some((_, Some(spec))) => format!("v{}({}B)", spec.id, spec.len),
            Some((sig, None)) => format!("a never-written value (sig {sig:016x})"),
        }
    }

    /// Compare `actual`, what the store returned for `key`, with the model. The acknowledged value or an in-flight
    /// one resolves the key to it (and gives its spec); anything else is a violation named
    /// `<context>.<never_written_value|lost_write|resurrection|stale_value>`, of `kind`.
    pub fn judge(
        &mut self,
        key: u32,
        actual: Option<Sig>,
        context: &str,
        kind: FailureKind,
    ) -> Result<Option<ValueSpec>, Violation> {
        let slot = self.slots.entry(key).or_default();
        if slot.value == actual || slot.maybe.contains(&actual) {
            slot.value = actual;
            slot.maybe.clear();
            return Ok(actual.and_then(|sig| self.spec(sig)));
        }
        let slot = slot.clone();
        let class = match (slot.value, actual) {
            (_, Some(sig)) if !self.specs.contains_key(&sig) => "never_written_value",
            (Some(_), None) => "lost_write",
            (None, Some(_)) => "resurrection",
            _ => "stale_value",
        };
        let maybe: String = slot.maybe.iter().map(|value| format!(" or in-flight {}", self.describe(*value))).collect();
        let expected = format!("k{key:06} = {}{maybe}", self.describe(slot.value));
        let actual = format!("k{key:06} = {}", self.describe(actual));
        Err(Violation::new(format!("{context}.{class}"), kind, expected, actual))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model_with(value: ValueSpec, sig: Sig) -> KeyModel {
        let mut model = KeyModel::new();
        model.written(value, sig);
        model
    }

    #[test]
    fn an_acknowledged_value_reads_back_and_a_lost_one_is_named() {
        let value = ValueSpec { id: 1, len: 8 };
        let mut model = model_with(value, 0xa);
        model.acknowledged(3, Some(0xa));
        assert_eq!(model.judge(3, Some(0xa), "oracle", FailureKind::Safety), Ok(Some(value)));
        assert_eq!(model.live_keys(), 1);
        let lost = model.judge(3, None, "durability", FailureKind::Durability).expect_err("a lost write");
        assert_eq!(lost.invariant, "durability.lost_write");
        assert_eq!((lost.expected.as_str(), lost.actual.as_str()), ("k000003 = v1(8B)", "k000003 = absent"));
    }

    #[test]
    fn an_in_flight_write_may_land_or_not_and_a_read_resolves_it() {
        let mut model = model_with(ValueSpec { id: 1, len: 8 }, 0xa);
        model.in_flight(5, Some(0xa));
        assert_eq!(model.judge(5, Some(0xa), "oracle", FailureKind::Safety).map(|v| v.map(|s| s.id)), Ok(Some(1)));
        // Resolved: the key now holds it, and losing it is a lost write.
        let lost = model.judge(5, None, "oracle", FailureKind::Safety).expect_err("resolved");
        assert_eq!(lost.invariant, "oracle.lost_write");
        let mut model = model_with(ValueSpec { id: 1, len: 8 }, 0xa);
        model.in_flight(5, Some(0xa));
        assert_eq!(model.judge(5, None, "oracle", FailureKind::Safety), Ok(None), "it did not land: also fine");
    }

    #[test]
    fn each_wrong_answer_has_its_class() {
        let mut model = model_with(ValueSpec { id: 1, len: 8 }, 0xa);
        model.written(ValueSpec { id: 2, len: 8 }, 0xb);
        let class =
            |model: &mut KeyModel, actual| model.judge(1, actual, "c", FailureKind::Safety).expect_err("").invariant;
        assert_eq!(class(&mut model.clone(), Some(0xa)), "c.resurrection");
        assert_eq!(class(&mut model.clone(), Some(0xff)), "c.never_written_value");
        model.acknowledged(1, Some(0xb));
        assert_eq!(class(&mut model.clone(), Some(0xa)), "c.stale_value");
        assert_eq!(model.keys_to_verify(2), BTreeSet::from([0, 1]));
        assert_eq!(model.next_value(4), ValueSpec { id: 1, len: 4 });
    }
}
