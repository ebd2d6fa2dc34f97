//! The transaction target's operations and observations, how operations are generated from the current state,
//! and how the shrinker simplifies them.

use std::collections::BTreeMap;

use holdfast::Step;
use holdfast::env::DeterministicRng;
use holdfast::kit::{ValueSpec, smaller_u32};
use serde::{Deserialize, Serialize};

use crate::config::TxnConfig;
use crate::{Client, TxnTarget};

/// Which client issued an operation (each client has at most one transaction open or in flight).
pub type ClientId = u32;

/// Long-lived transactions do this many operations.
const LONG_OPS_MIN: u64 = 20;
const LONG_OPS_MAX: u64 = 80;

/// One operation of the target. Every variant carries all its data; none needs the generating RNG. A client
/// operation whose precondition is gone (no open transaction, nothing in flight, a read-only transaction asked
/// to write) is skipped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Op {
    /// `db.begin()` (or `db.begin_read()` when `read_only`).
    Begin { client: ClientId, read_only: bool },
    /// `t.get(key)`, checked against the model at the transaction's snapshot.
    Get { client: ClientId, key: u32 },
    /// `t.put(key, value_bytes(value))`.
    Put { client: ClientId, key: u32, value: ValueSpec },
    /// `t.delete(key)`.
    Delete { client: ClientId, key: u32 },
    /// `t.scan(key(start)..key(end))`, checked against the model at the transaction's snapshot.
    Scan { client: ClientId, start: u32, end: u32 },
    /// `t.submit()`: validate and append (not yet durable). A read-only transaction just ends.
    Commit { client: ClientId },
    /// `db.wait_for_commit(&ticket)`: the client waits for its submitted commit to be acknowledged.
    Ack { client: ClientId },
    /// `t.rollback()`.
    Rollback { client: ClientId },
    /// `db.flush()`.
    Flush,
    /// `db.compact()`.
    Compact,
}

impl Op {
    /// The client of a client operation.
    pub fn client(&self) -> Option<ClientId> {
        match self {
            Op::Begin { client, .. }
            | Op::Get { client, .. }
            | Op::Put { client, .. }
            | Op::Delete { client, .. }
            | Op::Scan { client, .. }
            | Op::Commit { client }
            | Op::Ack { client }
            | Op::Rollback { client } => Some(*client),
            Op::Flush | Op::Compact => None,
        }
    }
}

/// What an operation (or a recovery) produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Observation {
    /// A flush or a compaction succeeded.
    Ok,
    /// The transaction buffered a write.
    Buffered,
    /// A transaction began: its history id and snapshot (`None` for a read-write transaction, which takes it at
    /// its first read, ADR-0210).
    Began { txn: u64, snapshot: Option<u64> },
    /// A read returned this value (None: absent).
    Value { value: Option<ValueSpec> },
    /// A scan returned `entries` pairs whose keys and values hash to `hash`.
    Scan { entries: u64, hash: u64 },
    /// A read-write commit was validated and appended: its last sequence.
    Submitted { txn: u64, last_sequence: u64 },
    /// A transaction committed with nothing to make durable (read-only, or wrote nothing).
    Committed { txn: u64 },
    /// The client's submitted commit was acknowledged.
    Acked { txn: u64 },
    /// The transaction rolled back.
    RolledBack { txn: u64 },
    /// A serialization failure aborted the transaction; `reason` is the engine's conflict cause.
    Aborted { txn: u64, reason: String },
    /// Recovered: in-flight commits resolved (`present` survived, `absent` did not), every key verified.
    Recovered { last_sequence: u64, present: u64, absent: u64 },
    /// A recovery read failed (a fault or a crash justified it): the database is dropped and recovered again.
    Interrupted,
}

impl TxnTarget {
    /// The next operation: a client's next move, a flush or a compaction, by the configuration's weights. After
    /// a `crash_at_io` step (`armed`), most often a waiting client's `ack`, so that armed crashes land between a
    /// commit's append and its sync.
    pub(crate) fn generate_op(&mut self, rng: &mut DeterministicRng, config: &TxnConfig, armed: bool) -> Op {
        if armed && !self.pending.is_empty() && rng.chance_ppm(700_000) {
            let waiting: Vec<ClientId> =
                self.clients.keys().copied().filter(|&client| self.submitted(client)).collect();
            if !waiting.is_empty() {
                return Op::Ack { client: waiting[rng.index(waiting.len())] };
            }
        }
        match rng.weighted(&config.step_weights.as_array()) {
            0 => self.client_step(rng, config),
            1 => Op::Flush,
            _ => Op::Compact,
        }
    }

    fn submitted(&self, client: ClientId) -> bool {
        matches!(self.clients.get(&client), Some(Client::Submitted { .. }))
    }

    fn client_step(&mut self, rng: &mut DeterministicRng, config: &TxnConfig) -> Op {
        let clients = config.clients.max(1);
        let mut client = u32::try_from(rng.below(u64::from(clients))).expect("client fits");
        if self.submitted(client) && !rng.chance_ppm(config.ack_ppm) {
            let others: Vec<ClientId> = (0..clients).filter(|&other| !self.submitted(other)).collect();
            if !others.is_empty() {
                client = others[rng.index(others.len())];
            }
        }
        match self.clients.get(&client) {
            None => {
                let shape = TxnShape::draw(rng, config);
                self.op_targets.insert(client, shape.ops);
                Op::Begin { client, read_only: shape.read_only }
            }
            Some(Client::Submitted { .. }) => Op::Ack { client },
            Some(Client::Open(open)) => {
                let shape = TxnShape {
                    read_only: open.record.read_only,
                    ops: self.op_targets.get(&client).copied().unwrap_or(1),
                };
                shape.next_op(client, open.ops, &mut self.next_value_id, rng, config)
            }
        }
    }
}

/// A transaction as the workload draws it at its `begin`: read-only or not, and how many operations it is meant
/// to do before it commits (or rolls back). Public so that a workload on real threads draws the same
/// transactions as the simulated target (`tests/integration/real_threads.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnShape {
    pub read_only: bool,
    pub ops: u32,
}

impl TxnShape {
    /// Draw a new transaction's shape from `config`.
    pub fn draw(rng: &mut DeterministicRng, config: &TxnConfig) -> Self {
        let read_only = rng.chance_ppm(config.read_only_ppm);
        let ops = if rng.chance_ppm(config.long_ppm) {
            rng.range_inclusive(LONG_OPS_MIN, LONG_OPS_MAX)
        } else {
            rng.range_inclusive(1, u64::from(config.ops_max.max(1)))
        };
        Self { read_only, ops: u32::try_from(ops).expect("fits") }
    }

    /// The transaction's next operation after `done` of its operations: a read, a write or a scan, by the
    /// configuration's weights, and `commit` (or now and then `rollback`) once it reached its count. A put's value
    /// takes the id `next_value_id`, which then advances.
    pub fn next_op(
        &self,
        client: ClientId,
        done: u32,
        next_value_id: &mut u64,
        rng: &mut DeterministicRng,
        config: &TxnConfig,
    ) -> Op {
        if done >= self.ops {
            return if rng.chance_ppm(config.rollback_ppm) { Op::Rollback { client } } else { Op::Commit { client } };
        }
        let w = &config.op_weights;
        let weights = if self.read_only { [w.get.max(1), 0, 0, w.scan] } else { [w.get, w.put, w.delete, w.scan] };
        let key = u32::try_from(rng.below(u64::from(config.key_count.max(1)))).expect("key fits");
        match rng.weighted(&weights) {
            0 => Op::Get { client, key },
            1 => {
                let len = 8 + rng.range_inclusive(0, u64::from(config.value_len_max));
                let value = ValueSpec { id: *next_value_id, len: u32::try_from(len).expect("fits") };
                *next_value_id += 1;
                Op::Put { client, key, value }
            }
            2 => Op::Delete { client, key },
            _ => {
                let keys = rng.range_inclusive(1, u64::from(config.scan_keys_max.max(1)));
                Op::Scan { client, start: key, end: key + u32::try_from(keys).expect("fits") }
            }
        }
    }
}

/// Simpler variants of one operation: shorter values, narrower scans, a compaction made a flush.
pub(crate) fn simplify_op(op: &Op) -> Vec<Op> {
    match op {
        Op::Put { client, key, value } => smaller_u32(value.len, 0)
            .into_iter()
            .map(|len| Op::Put { client: *client, key: *key, value: ValueSpec { len, ..*value } })
            .collect(),
        Op::Scan { client, start, end } if end.saturating_sub(*start) > 1 => {
            let middle = start + (end - start) / 2;
            vec![
                Op::Scan { client: *client, start: *start, end: start + 1 },
                Op::Scan { client: *client, start: end - 1, end: *end },
                Op::Scan { client: *client, start: *start, end: middle },
                Op::Scan { client: *client, start: middle, end: *end },
            ]
        }
        Op::Compact => vec![Op::Flush],
        _ => Vec::new(),
    }
}

/// The same operation with every key renumbered by `rank` (a scan keeps a non-empty range).
fn renumber(op: &Op, rank: &BTreeMap<u32, u32>) -> Op {
    let to = |key: &u32| rank.get(key).copied().unwrap_or(*key);
    match op {
        Op::Get { client, key } => Op::Get { client: *client, key: to(key) },
        Op::Put { client, key, value } => Op::Put { client: *client, key: to(key), value: *value },
        Op::Delete { client, key } => Op::Delete { client: *client, key: to(key) },
        Op::Scan { client, start, end } => {
            let first = to(start);
            Op::Scan { client: *client, start: first, end: to(&end.saturating_sub(1)).max(first) + 1 }
        }
        other => other.clone(),
    }
}

/// Whole-schedule rewrites: every step of one client removed (for each client), and the keys renumbered to
/// their dense rank (fewer distinct keys to verify, shorter reports).
pub(crate) fn rewrite(steps: &[Step<Op>]) -> Vec<Vec<Step<Op>>> {
    let clients: Vec<ClientId> = {
        let mut clients: Vec<ClientId> = steps.iter().filter_map(Step::op).filter_map(Op::client).collect();
        clients.sort_unstable();
        clients.dedup();
        clients
    };
    let mut out: Vec<Vec<Step<Op>>> = clients
        .iter()
        .map(|&gone| steps.iter().filter(|step| step.op().and_then(Op::client) != Some(gone)).cloned().collect())
        .collect();
    let mut keys: Vec<u32> = Vec::new();
    for op in steps.iter().filter_map(Step::op) {
        match op {
            Op::Get { key, .. } | Op::Put { key, .. } | Op::Delete { key, .. } => keys.push(*key),
            Op::Scan { start, end, .. } => keys.extend([*start, end.saturating_sub(1)]),
            _ => {}
        }
    }
    keys.sort_unstable();
    keys.dedup();
    let rank: BTreeMap<u32, u32> = keys.iter().zip(0u32..).map(|(&key, rank)| (key, rank)).collect();
    out.push(
        steps
            .iter()
            .map(|step| match step {
                Step::Op(op) => Step::Op(renumber(op, &rank)),
                world => world.clone(),
            })
            .collect(),
    );
    out
}

/// A `begin`'s transaction: every later operation of its client up to (not including) the client's next
/// `begin`. Removing a begin removes its transaction (else its operations would be skipped one by one).
pub(crate) fn dependents(steps: &[Step<Op>], index: usize) -> Vec<usize> {
    let Some(Op::Begin { client, .. }) = steps.get(index).and_then(Step::op) else { return Vec::new() };
    let mut out = Vec::new();
    for (later, step) in steps.iter().enumerate().skip(index + 1) {
        match step.op() {
            Some(Op::Begin { client: other, .. }) if other == client => break,
            Some(op) if op.client() == Some(*client) => out.push(later),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use holdfast::WorldStep;

    use super::*;

    fn every_kind() -> Vec<Op> {
        vec![
            Op::Begin { client: 1, read_only: true },
            Op::Get { client: 1, key: 2 },
            Op::Put { client: 2, key: 3, value: ValueSpec { id: 9, len: 12 } },
            Op::Delete { client: 2, key: 3 },
            Op::Scan { client: 0, start: 1, end: 4 },
            Op::Commit { client: 2 },
            Op::Ack { client: 2 },
            Op::Rollback { client: 1 },
            Op::Flush,
            Op::Compact,
        ]
    }

    #[test]
    fn ops_round_trip_in_the_old_shape_and_use_no_world_step_name() {
        let ops = every_kind();
        let json = holdfast::step::check_ops(&ops).expect("ops round trip");
        assert!(json.contains(r#"{"op":"begin","client":1,"read_only":true}"#), "{json}");
        assert!(json.contains(r#"{"op":"put","client":2,"key":3,"value":{"id":9,"len":12}}"#), "{json}");
        let steps: Vec<Step<Op>> =
            serde_json::from_str(r#"[{"op":"ack","client":4},{"op":"run_task","name":"group-commit"}]"#)
                .expect("steps");
        assert_eq!(
            steps,
            vec![
                Step::Op(Op::Ack { client: 4 }),
                Step::World(WorldStep::RunTask { name: crate::GROUP_COMMIT_TASK.into() })
            ]
        );
    }

    #[test]
    fn simplifications_and_rewrites_are_well_formed() {
        for op in every_kind() {
            for simpler in simplify_op(&op) {
                assert_ne!(simpler, op);
                if let Op::Scan { start, end, .. } = simpler {
                    assert!(start < end, "empty scan {start}..{end}");
                }
            }
        }
        let steps: Vec<Step<Op>> = vec![
            Step::Op(Op::Begin { client: 0, read_only: false }),
            Step::Op(Op::Begin { client: 1, read_only: false }),
            Step::Op(Op::Put { client: 0, key: 30, value: ValueSpec { id: 1, len: 9 } }),
            Step::World(WorldStep::Crash { shape: None }),
            Step::Op(Op::Scan { client: 1, start: 10, end: 31 }),
            Step::Op(Op::Commit { client: 0 }),
            Step::Op(Op::Begin { client: 0, read_only: true }),
            Step::Op(Op::Get { client: 0, key: 30 }),
        ];
        assert_eq!(dependents(&steps, 0), vec![2, 5]);
        assert_eq!(dependents(&steps, 1), vec![4]);
        assert!(dependents(&steps, 2).is_empty());
        let rewrites = rewrite(&steps);
        assert_eq!(rewrites.len(), 3, "one per client, then renumbered keys");
        assert_eq!(rewrites[0].len(), 3, "client 0's steps gone: {:?}", rewrites[0]);
        assert_eq!(rewrites[2][2], Step::Op(Op::Put { client: 0, key: 1, value: ValueSpec { id: 1, len: 9 } }));
        assert_eq!(rewrites[2][4], Step::Op(Op::Scan { client: 1, start: 0, end: 2 }));
    }
}
