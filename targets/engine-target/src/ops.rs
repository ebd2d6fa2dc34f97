//! The engine target's operations: what they are, how they are generated and applied, and how the shrinker
//! simplifies them.

use std::collections::BTreeMap;
use std::hash::Hasher;

use holdfast::env::{DeterministicRng, StableHasher};
use holdfast::kit::{RenderedKey, ValueSpec, key_bytes, parse_key, sig_of, smaller_u32, value_bytes};
use holdfast::{FailureKind, Observed, Step, Violation, World};
use serde::{Deserialize, Serialize};

use crate::config::EngineConfig;
use crate::{EngineTarget, system_error};

/// One engine operation. Every variant carries all its data; none needs the generating RNG.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Op {
    /// `db.put(key, value_bytes(value))`.
    Put { key: u32, value: ValueSpec },
    /// `db.delete(key)`.
    Delete { key: u32 },
    /// `db.get(key)`, checked against the model.
    Get { key: u32 },
    /// `db.scan(key(start), key(end))`, checked against the model.
    Scan { start: u32, end: u32 },
    /// `db.flush()`.
    Flush,
    /// `db.compact()`.
    Compact,
    /// A put under a key of `len` bytes outside the key space: 0 (empty) and over the run's key limit must be
    /// refused, the maximum accepted (ADR-0071, ADR-0072, ADR-0073, ADR-0074, ADR-0075, ADR-0076, ADR-0077).
    OddKey { len: u32, value: ValueSpec },
    /// One transaction writing `values` values (ids from `value.id`) under keys `key..`: near and over the log's
    /// record limit.
    BigTxn { key: u32, values: u32, value: ValueSpec },
    /// Begin a read-only transaction and hold it across later steps.
    HoldReader,
    /// Drop the oldest held read-only transaction.
    ReleaseReader,
    /// Close with a commit's group commit pending and handles held; every later call must fail with `Closed`.
    CloseRacing { key: u32, value: ValueSpec },
}

/// What an engine operation (or a recovery) produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Observation {
    /// The call succeeded.
    Ok,
    /// A read returned this value (None: absent).
    Value { value: Option<ValueSpec> },
    /// A scan returned `entries` pairs whose keys and values hash to `hash`.
    Scan { entries: u64, hash: u64 },
    /// Recovered and verified every key; the engine's last sequence.
    Recovered { last_sequence: u64 },
}

type Outcome = Result<Observed<Observation>, Violation>;

impl EngineTarget {
    /// The next operation, drawn by the configuration's weights.
    pub(crate) fn generate_op(&mut self, rng: &mut DeterministicRng, config: &EngineConfig) -> Op {
        let workload = &config.workload;
        match rng.weighted(&config.weights.as_array()) {
            kind @ 6.. => self.generate_robust(rng, config, kind - 6),
            0 => {
                let value = ValueSpec { id: self.next_value_id, len: workload.pick_value_len_bytes(rng) };
                self.next_value_id += 1;
                Op::Put { key: workload.pick_key(rng), value }
            }
            1 => Op::Delete { key: workload.pick_key(rng) },
            2 => Op::Get { key: workload.pick_key(rng) },
            3 => {
                let start = workload.pick_key(rng);
                let keys =
                    u32::try_from(rng.range_inclusive(1, u64::from(workload.scan_keys_max.max(1)))).expect("fits");
                Op::Scan { start, end: start.saturating_add(keys) }
            }
            4 => Op::Flush,
            _ => Op::Compact,
        }
    }

    /// Apply one operation to the open database.
    pub(crate) fn apply_op(&mut self, world: &mut World, op: &Op) -> Outcome {
        match op {
            Op::Put { key, value } => self.write(world, *key, Some(*value)),
            Op::Delete { key } => self.write(world, *key, None),
            Op::Get { key } => self.get(world, *key),
            Op::Scan { start, end } => self.scan(world, *start, *end),
            Op::Flush => {
                let flushed = self.call(world, "flush", |db| db.flush());
                if matches!(flushed, Ok(Observed::Op(Observation::Ok))) {
                    // A flush seals and syncs the log first: every acknowledged write is durable.
                    self.durable();
                }
                flushed
            }
            Op::Compact => self.call(world, "compact", |db| db.compact()),
            Op::OddKey { len, value } => self.odd_key_put(world, *len, *value),
            Op::BigTxn { key, values, value } => self.big_txn(world, *key, *values, *value),
            Op::HoldReader => self.hold_reader(world),
            Op::ReleaseReader => self.release_reader(),
            Op::CloseRacing { key, value } => self.close_racing(world, *key, *value),
        }
    }

    pub(crate) fn live_db(&self) -> &engine::Db<holdfast::env::SimEnv> {
        self.db.as_ref().expect("the framework opens the system before an operation")
    }

    fn call(
        &mut self,
        world: &mut World,
        what: &str,
        f: impl FnOnce(&engine::Db<holdfast::env::SimEnv>) -> engine::Result<()>,
    ) -> Outcome {
        match f(self.live_db()) {
            Ok(()) => Ok(Observed::Op(Observation::Ok)),
            Err(error) => world.tolerate(what, &system_error(&error)),
        }
    }

    fn write(&mut self, world: &mut World, key: u32, value: Option<ValueSpec>) -> Outcome {
        let bytes = value.map(value_bytes);
        let sig = match (value, &bytes) {
            (Some(spec), Some(bytes)) => Some(self.model.register(spec, bytes)),
            _ => None,
        };
        let db = self.db.as_ref().expect("the framework opens the system before an operation");
        self.cost.unknown_key = false;
        self.cost.before_call(world.env(), db);
        let result = match &bytes {
            Some(bytes) => db.put(RenderedKey::new(key).as_bytes(), bytes),
            None => db.delete(RenderedKey::new(key).as_bytes()),
        };
        self.cost.after_call(world.env(), db);
        match result {
            Ok(()) => {
                self.model.ack(key, sig);
                self.damage_acknowledged(world, key);
                let sequence = self.live_db().last_sequence();
                if sequence <= self.max_acked_sequence && !world.damaged() {
                    return Err(Violation::new(
                        "sequence_monotonic",
                        FailureKind::Safety,
                        format!("a new write's sequence > {}", self.max_acked_sequence),
                        sequence.to_string(),
                    ));
                }
                self.max_acked_sequence = sequence;
                Ok(Observed::Op(Observation::Ok))
            }
            Err(error) => {
                self.model.in_flight(key, sig);
                self.counters.add("in_flight_writes", 1);
                world.tolerate(if value.is_some() { "put" } else { "delete" }, &system_error(&error))
            }
        }
    }

    pub(crate) fn get(&mut self, world: &mut World, key: u32) -> Outcome {
        let db = self.db.as_ref().expect("the framework opens the system before an operation");
        self.cost.unknown_key = self.model.known_keys_in(key, key.saturating_add(1)).is_empty();
        self.cost.before_call(world.env(), db);
        let result = db.get(RenderedKey::new(key).as_bytes());
        self.cost.after_call(world.env(), db);
        match result {
            Ok(value) => {
                let actual = value.as_deref().map(sig_of);
                let damaged = self.damage_reaches(world, key);
                self.model.observe(key, actual, damaged, "oracle")?;
                Ok(Observed::Op(Observation::Value { value: actual.and_then(|sig| self.model.spec(sig)) }))
            }
            Err(error) => world.tolerate("get", &system_error(&error)),
        }
    }

    fn scan(&mut self, world: &mut World, start: u32, end: u32) -> Outcome {
        if start >= end {
            return Ok(Observed::Skipped);
        }
        let (start_bytes, end_bytes) = (key_bytes(start), key_bytes(end));
        // Half the scans run from the back (chosen by the range, not the RNG: the schedule is unchanged) and are
        // turned around before the checks: both directions of the streaming iterator face the oracle (ADR-0085).
        let reverse = (start ^ end) & 1 == 1;
        let db = self.db.as_ref().expect("the framework opens the system before an operation");
        self.cost.unknown_key = false;
        self.cost.before_call(world.env(), db);
        let scanned = db.scan(start_bytes.as_slice()..end_bytes.as_slice()).and_then(|rows| {
            if reverse {
                let mut entries = rows.rev().collect::<engine::Result<Vec<_>>>()?;
                entries.reverse();
                Ok(entries)
            } else {
                rows.collect::<engine::Result<Vec<_>>>()
            }
        });
        self.cost.after_call(world.env(), db);
        let entries = match scanned {
            Ok(entries) => entries,
            Err(error) => return world.tolerate("scan", &system_error(&error)),
        };
        let mut found: BTreeMap<u32, u64> = BTreeMap::new();
        let mut hasher = StableHasher::new();
        let mut previous: Option<&[u8]> = None;
        for (key, value) in &entries {
            let parsed = parse_key(key).filter(|index| (start..end).contains(index));
            let ordered = previous.is_none_or(|previous| previous < key.as_slice());
            let Some(index) = parsed.filter(|_| ordered) else {
                return Err(Violation::new(
                    "oracle.scan_shape",
                    FailureKind::Safety,
                    format!("keys strictly ascending within [k{start:06}, k{end:06})"),
                    format!(
                        "key {:?} (after {:?})",
                        String::from_utf8_lossy(key),
                        previous.map(String::from_utf8_lossy)
                    ),
                ));
            };
            previous = Some(key);
            hasher.write(key);
            hasher.write(value);
            found.insert(index, sig_of(value));
        }
        let mut keys = self.model.known_keys_in(start, end);
        keys.extend(found.keys().copied());
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            let damaged = self.damage_reaches(world, key);
            self.model.observe(key, found.get(&key).copied(), damaged, "oracle")?;
        }
        Ok(Observed::Op(Observation::Scan { entries: entries.len() as u64, hash: hasher.finish() }))
    }
}

/// Simpler variants of one operation, simplest first.
pub(crate) fn simplify_op(op: &Op) -> Vec<Op> {
    match op {
        Op::Put { key, value } => {
            let mut out: Vec<Op> = smaller_u32(value.len, 0)
                .into_iter()
                .map(|len| Op::Put { key: *key, value: ValueSpec { id: value.id, len } })
                .collect();
            out.extend(smaller_u32(*key, 0).into_iter().map(|key| Op::Put { key, value: *value }));
            out
        }
        Op::Delete { key } => smaller_u32(*key, 0).into_iter().map(|key| Op::Delete { key }).collect(),
        Op::Get { key } => smaller_u32(*key, 0).into_iter().map(|key| Op::Get { key }).collect(),
        Op::Scan { start, end } => {
            let mut out = Vec::new();
            if end.saturating_sub(*start) > 1 {
                // Narrower: one key at either end, then half the range.
                out.push(Op::Scan { start: *start, end: start + 1 });
                out.push(Op::Scan { start: end - 1, end: *end });
                out.push(Op::Scan { start: *start, end: start + (end - start) / 2 });
                out.push(Op::Scan { start: start + (end - start) / 2, end: *end });
            }
            // Lower: the same width, starting at smaller keys.
            let width = end.saturating_sub(*start).max(1);
            out.extend(smaller_u32(*start, 0).into_iter().map(|start| Op::Scan { start, end: start + width }));
            out.retain(|candidate| candidate != op);
            out
        }
        Op::Compact => vec![Op::Flush],
        Op::BigTxn { key, values, value } => {
            let fewer =
                smaller_u32(*values, 1).into_iter().map(|values| Op::BigTxn { key: *key, values, value: *value });
            fewer
                .chain(smaller_u32(*key, 0).into_iter().map(|key| Op::BigTxn { key, values: *values, value: *value }))
                .collect()
        }
        Op::CloseRacing { key, value } => {
            smaller_u32(*key, 0).into_iter().map(|key| Op::CloseRacing { key, value: *value }).collect()
        }
        Op::Flush | Op::OddKey { .. } | Op::HoldReader | Op::ReleaseReader => Vec::new(),
    }
}

/// Rewrite every key of `op` with `map` (a scan keeps a non-empty range).
fn map_keys(op: &Op, map: &dyn Fn(u32) -> u32) -> Op {
    match op {
        Op::Put { key, value } => Op::Put { key: map(*key), value: *value },
        Op::Delete { key } => Op::Delete { key: map(*key) },
        Op::Get { key } => Op::Get { key: map(*key) },
        Op::BigTxn { key, values, value } => Op::BigTxn { key: map(*key), values: *values, value: *value },
        Op::CloseRacing { key, value } => Op::CloseRacing { key: map(*key), value: *value },
        Op::Scan { start, end } => {
            let start_mapped = map(*start);
            let end_mapped = map(end.saturating_sub(1)).saturating_add(1).max(start_mapped.saturating_add(1));
            Op::Scan { start: start_mapped, end: end_mapped }
        }
        other => other.clone(),
    }
}

fn keys_of(op: &Op) -> Vec<u32> {
    match op {
        Op::Put { key, .. } | Op::Delete { key } | Op::Get { key } | Op::CloseRacing { key, .. } => vec![*key],
        Op::BigTxn { key, .. } => vec![*key],
        Op::Scan { start, end } => vec![*start, end.saturating_sub(1)],
        Op::Flush | Op::Compact | Op::OddKey { .. } | Op::HoldReader | Op::ReleaseReader => Vec::new(),
    }
}

/// Each pair of adjacent puts as one put of the first's key and id and both lengths: the same bytes written in
/// half the steps. A failure that needs volume (a level over its budget, ADR-0193) shrinks to a few large puts;
/// one that needs the second key or the pair's order rejects it.
fn merge_adjacent_puts(steps: &[Step<Op>]) -> Vec<Step<Op>> {
    let mut merged = Vec::with_capacity(steps.len());
    let mut index = 0;
    while index < steps.len() {
        if let (Step::Op(Op::Put { key, value }), Some(Step::Op(Op::Put { value: next, .. }))) =
            (&steps[index], steps.get(index + 1))
        {
            let len = value.len.saturating_add(next.len);
            merged.push(Step::Op(Op::Put { key: *key, value: ValueSpec { len, ..*value } }));
            index += 2;
        } else {
            merged.push(steps[index].clone());
            index += 1;
        }
    }
    merged
}

/// Whole-schedule rewrites: merge keys (every key to 0, to its dense rank, to half its rank), shortest values,
/// adjacent puts as one.
pub(crate) fn rewrite(steps: &[Step<Op>]) -> Vec<Vec<Step<Op>>> {
    let mut used: Vec<u32> = steps.iter().filter_map(Step::op).flat_map(keys_of).collect();
    used.sort_unstable();
    used.dedup();
    let rank: BTreeMap<u32, u32> =
        used.iter().enumerate().map(|(index, &key)| (key, u32::try_from(index).expect("fits"))).collect();
    let dense = |key: u32| rank.get(&key).copied().unwrap_or(key);
    let each = |f: &dyn Fn(&Op) -> Op| -> Vec<Step<Op>> {
        steps
            .iter()
            .map(|step| match step {
                Step::Op(op) => Step::Op(f(op)),
                world => world.clone(),
            })
            .collect()
    };
    vec![
        each(&|op| map_keys(op, &|_| 0)),
        each(&|op| map_keys(op, &dense)),
        each(&|op| map_keys(op, &|key| dense(key) / 2)),
        each(&|op| match op {
            Op::Put { key, value } => Op::Put { key: *key, value: ValueSpec { len: 0, ..*value } },
            other => other.clone(),
        }),
        merge_adjacent_puts(steps),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_round_trip_and_use_no_world_step_name() {
        let ops = vec![
            Op::Put { key: 3, value: ValueSpec { id: 9, len: 4 } },
            Op::Delete { key: 1 },
            Op::Get { key: 1 },
            Op::Scan { start: 1, end: 4 },
            Op::Flush,
            Op::Compact,
            Op::OddKey { len: 0, value: ValueSpec { id: 2, len: 1 } },
            Op::BigTxn { key: 1, values: 4, value: ValueSpec { id: 3, len: 16 } },
            Op::HoldReader,
            Op::ReleaseReader,
            Op::CloseRacing { key: 2, value: ValueSpec { id: 4, len: 3 } },
        ];
        let json = holdfast::step::check_ops(&ops).expect("ops round trip");
        assert!(json.contains(r#"{"op":"put","key":3,"value":{"id":9,"len":4}}"#), "{json}");
    }

    #[test]
    fn ops_simplify_to_different_valid_ops() {
        let put = Op::Put { key: 9, value: ValueSpec { id: 3, len: 100 } };
        let simpler = simplify_op(&put);
        assert!(simpler.contains(&Op::Put { key: 9, value: ValueSpec { id: 3, len: 0 } }));
        assert!(!simpler.contains(&put));
        for op in simplify_op(&Op::Scan { start: 4, end: 10 }) {
            let Op::Scan { start, end } = op else { panic!("not a scan") };
            assert!(start < end, "empty scan {start}..{end}");
        }
        let steps =
            vec![Step::Op(Op::Put { key: 40, value: ValueSpec { id: 1, len: 5 } }), Step::Op(Op::Get { key: 40 })];
        let rewrites = rewrite(&steps);
        for candidate in &rewrites[..rewrites.len() - 1] {
            assert_eq!(candidate.len(), steps.len());
        }
        assert!(rewrites.iter().any(|candidate| candidate != &steps));
    }

    /// Adjacent puts merge pairwise, keeping the first's key and id and both lengths; other steps stay.
    #[test]
    fn adjacent_puts_merge_pairwise() {
        let put = |key, id, len| Step::Op(Op::Put { key, value: ValueSpec { id, len } });
        let steps = vec![put(1, 1, 10), put(2, 2, 20), put(3, 3, 30), Step::Op(Op::Flush), put(4, 4, 40)];
        let merged = merge_adjacent_puts(&steps);
        assert_eq!(merged, vec![put(1, 1, 30), put(3, 3, 30), Step::Op(Op::Flush), put(4, 4, 40)]);
        assert_eq!(rewrite(&steps).last(), Some(&merged));
        assert_eq!(merge_adjacent_puts(&[put(1, 1, u32::MAX), put(2, 2, 1)]), vec![put(1, 1, u32::MAX)]);
    }
}
