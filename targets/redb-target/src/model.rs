//! The model of committed state, and reading redb's table into the same shape.
//!
//! **Invariant:** the model holds exactly the transactions whose `commit()` returned Ok; a transaction whose
//! commit outcome is unknown is kept aside (*in flight*) until a full read shows the state before or after it.

use std::collections::BTreeMap;

use holdfast::kit::{Sig, ValueSpec, parse_key, sig_of, value_bytes};
use redb::{ReadableTable, TableDefinition, TableError};
use serde::{Deserialize, Serialize};

/// The one table the workload uses.
pub const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("holdfast");

/// One operation inside a write transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum WriteOp {
    /// `table.insert(key_bytes(key), value_bytes(value))`.
    Insert { key: u32, value: ValueSpec },
    /// `table.remove(key_bytes(key))`.
    Remove { key: u32 },
}

impl WriteOp {
    /// The key this operation touches.
    pub fn key(&self) -> u32 {
        match self {
            WriteOp::Insert { key, .. } | WriteOp::Remove { key } => *key,
        }
    }
}

/// A key's committed value: its spec (for reports) and the signature of its bytes.
pub type State = BTreeMap<u32, (ValueSpec, Sig)>;

/// What a read found: each present key's value signature.
pub type Found = BTreeMap<u32, Sig>;

/// Why reading the table failed.
#[derive(Debug)]
pub enum ReadFailure {
    /// redb returned an error.
    Redb(redb::Error),
    /// The table held a key the workload never writes.
    ForeignKey(Vec<u8>),
}

/// The workload's table, read-only.
pub type Table = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;

/// The workload's table as `txn` sees it; `None` before the first commit created it (an empty table).
pub fn open_table(txn: &redb::ReadTransaction) -> Result<Option<Table>, redb::Error> {
    match txn.open_table(TABLE) {
        Ok(table) => Ok(Some(table)),
        Err(TableError::TableDoesNotExist(_)) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// The state a read transaction sees: every entry of the table. A key outside `0..key_count` is foreign.
pub fn read_state(txn: &redb::ReadTransaction, key_count: u32) -> Result<Found, ReadFailure> {
    let Some(table) = open_table(txn).map_err(ReadFailure::Redb)? else { return Ok(Found::new()) };
    let mut state = Found::new();
    for entry in table.iter().map_err(|error| ReadFailure::Redb(error.into()))? {
        let (key, value) = entry.map_err(|error| ReadFailure::Redb(error.into()))?;
        let Some(index) = parse_key(key.value()).filter(|&index| index < key_count) else {
            return Err(ReadFailure::ForeignKey(key.value().to_vec()));
        };
        state.insert(index, sig_of(value.value()));
        assert!(state.len() <= key_count as usize, "more entries than keys");
    }
    Ok(state)
}

/// `state` with `ops` applied.
pub fn apply_ops(state: &State, ops: &[WriteOp]) -> State {
    let mut next = state.clone();
    for op in ops {
        match op {
            WriteOp::Insert { key, value } => {
                next.insert(*key, (*value, sig_of(&value_bytes(*value))));
            }
            WriteOp::Remove { key } => {
                next.remove(key);
            }
        }
    }
    next
}

/// The signatures of a model state.
pub fn signatures(state: &State) -> Found {
    state.iter().map(|(&key, &(_, sig))| (key, sig)).collect()
}

/// The model's entries among `keys`.
pub fn expected_among(state: &State, keys: impl Iterator<Item = u32>) -> Found {
    keys.filter_map(|key| state.get(&key).map(|&(_, sig)| (key, sig))).collect()
}

/// The first key where `actual` and `expected` differ, rendered for a report.
pub fn first_difference(expected: &Found, actual: &Found) -> String {
    let keys = expected.keys().chain(actual.keys());
    let key = keys.copied().find(|key| expected.get(key) != actual.get(key));
    let render = |sig: Option<&Sig>| sig.map_or("absent".to_string(), |sig| format!("value {sig:016x}"));
    match key {
        None => "no difference".to_string(),
        Some(key) => format!(
            "k{key:06}: expected {}, found {} ({} keys expected, {} found)",
            render(expected.get(&key)),
            render(actual.get(&key)),
            expected.len(),
            actual.len()
        ),
    }
}

/// How a full read compares with the model and an in-flight transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Comparison {
    /// The committed state; the in-flight transaction (if any) is lost whole.
    Before,
    /// The committed state plus the whole in-flight transaction: the new committed state.
    After(State),
    /// Neither: `outside` when a key the in-flight transaction did not touch differs.
    Neither { outside: bool, before: String, after: Option<String> },
}

/// Compare `actual` with `model`, and with `model` plus `in_flight`.
pub fn compare(model: &State, in_flight: Option<&[WriteOp]>, actual: &Found) -> Comparison {
    let before = signatures(model);
    if *actual == before {
        return Comparison::Before;
    }
    let before_text = first_difference(&before, actual);
    let Some(ops) = in_flight else {
        return Comparison::Neither { outside: true, before: before_text, after: None };
    };
    let after_state = apply_ops(model, ops);
    let after = signatures(&after_state);
    if *actual == after {
        return Comparison::After(after_state);
    }
    let touched: Vec<u32> = ops.iter().map(WriteOp::key).collect();
    let outside =
        actual.keys().chain(before.keys()).any(|key| !touched.contains(key) && actual.get(key) != before.get(key));
    Comparison::Neither { outside, before: before_text, after: Some(first_difference(&after, actual)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_in_flight_transaction_lands_whole_or_not_at_all() {
        let value = ValueSpec { id: 1, len: 3 };
        let model = apply_ops(&State::new(), &[WriteOp::Insert { key: 1, value }]);
        let ops = [WriteOp::Insert { key: 2, value }, WriteOp::Remove { key: 1 }];
        assert_eq!(compare(&model, Some(&ops), &signatures(&model)), Comparison::Before);
        let after = apply_ops(&model, &ops);
        assert_eq!(compare(&model, Some(&ops), &signatures(&after)), Comparison::After(after.clone()));
        let partial = signatures(&apply_ops(&model, &ops[..1]));
        let Comparison::Neither { outside, .. } = compare(&model, Some(&ops), &partial) else { panic!("partial") };
        assert!(!outside, "a part of the transaction is not a change outside it");
        let Comparison::Neither { outside, after, .. } = compare(&model, None, &partial) else { panic!("differs") };
        assert!(outside && after.is_none());
    }
}
