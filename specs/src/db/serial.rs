//! The serializability check of a finished history, and the state's description.

use super::*;

/// Replay `ops` over `base`: each read must see its own earlier writes, else `base`. The resulting state, or None
/// if a read disagrees.
pub(super) fn replay(ops: &[Op], base: &BTreeMap<Key, Value>) -> Option<BTreeMap<Key, Value>> {
    let mut state = base.clone();
    for op in ops {
        match op {
            Op::Read { key, saw } => {
                if state.get(key).copied() != *saw {
                    return None;
                }
            }
            Op::Scan { range, saw } => {
                let rows: Vec<(Key, Value)> =
                    state.iter().filter(|(key, _)| range.contains(**key)).map(|(k, v)| (*k, *v)).collect();
                if rows != *saw {
                    return None;
                }
            }
            Op::Write { key, value } => {
                state.insert(*key, *value);
            }
        }
    }
    Some(state)
}

pub(super) fn serial_order_exists(
    txns: &[Txn],
    committed: &[usize],
    used: &mut [bool],
    state: &BTreeMap<Key, Value>,
    final_state: &BTreeMap<Key, Value>,
) -> bool {
    if used.iter().all(|&u| u) {
        return state == final_state;
    }
    for index in 0..committed.len() {
        if used[index] {
            continue;
        }
        if let Some(after) = replay(&txns[committed[index]].ops, state) {
            used[index] = true;
            let found = serial_order_exists(txns, committed, used, &after, final_state);
            used[index] = false;
            if found {
                return true;
            }
        }
    }
    false
}

/// A short description of a state for the end of a trace.
pub fn describe(state: &DbState) -> String {
    let mut text = String::new();
    for (slot, txn) in state.txns.iter().enumerate() {
        let kind = if txn.read_only { "RO" } else { "RW" };
        let _ = writeln!(text, "  T{slot} {kind} snapshot={} {:?} ops={:?}", txn.snapshot, txn.status, txn.ops);
    }
    let _ = writeln!(
        text,
        "  last_sequence={} next_sequence={} versions={:?} tracker: {} tracked, {} active",
        state.last_sequence,
        state.next_sequence,
        state.versions,
        state.tracker.tracked(),
        state.tracker.active()
    );
    for failure in &state.failures {
        let _ = writeln!(text, "  failure: {failure}");
    }
    text
}
