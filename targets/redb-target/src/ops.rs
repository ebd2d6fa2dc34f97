//! The redb target's operations: what they are, how they are generated and applied, and how the shrinker
//! simplifies them.

use std::hash::Hasher;

use holdfast::env::{DeterministicRng, StableHasher};
use holdfast::kit::{ValueSpec, key_bytes, parse_key, sig_of, value_bytes};
use holdfast::{FailureKind, Observed, Violation, World};
use redb::{Database, Durability, ReadableDatabase};
use serde::{Deserialize, Serialize};

use crate::RedbTarget;
use crate::config::{RedbConfig, RedbSettings};
use crate::model::{Found, ReadFailure, WriteOp, apply_ops, expected_among, first_difference, open_table};
use crate::model::{read_state, signatures};

/// One redb operation. Every variant carries all its data; none needs the generating RNG.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Op {
    /// One write transaction: `ops` in order, then `commit()` with `Durability::Immediate` — or, when `commit` is
    /// false, `abort()`: nothing of it may ever be visible.
    Write { ops: Vec<WriteOp>, commit: bool },
    /// A read transaction: `get` of each key, checked against the model.
    Read { keys: Vec<u32> },
    /// A read transaction: `range(key(start)..key(end))`, checked against the model.
    Range { start: u32, end: u32 },
    /// Open a long-lived read transaction (replacing any open one); later `SnapshotRead` steps read it.
    Snapshot,
    /// Read every key through the long-lived read transaction: it must still show the state it began at.
    SnapshotRead,
    /// `Database::compact()` (skipped while a snapshot is open: redb refuses).
    Compact,
    /// `Database::check_integrity()`: redb's own structural check (checksums, allocator state).
    CheckIntegrity,
}

/// What a redb operation (or a recovery) produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Observation {
    /// The write transaction committed (`Durability::Immediate` returned Ok).
    Committed,
    /// The write transaction was aborted on purpose.
    Aborted,
    /// A read saw what the model says: `entries` present keys whose keys and values hash to `hash`.
    Read { entries: u64, hash: u64 },
    /// `compact()` returned; `compacted` is its answer.
    Compacted { compacted: bool },
    /// `check_integrity()` returned Ok; `clean` is its answer (false: redb repaired something).
    Integrity { clean: bool },
    /// A long-lived read transaction is open.
    SnapshotOpen,
    /// Opened and read the whole table: `entries` keys (None: a fault or a crash stopped the read); `repairs` is 1
    /// when the open ran redb's repair.
    Recovered { entries: Option<u64>, repairs: u64 },
}

/// What applying one operation returns.
pub type Outcome = Result<Observed<Observation>, Violation>;

/// How a write transaction failed.
enum WriteFailure {
    /// Before `commit()` (or in `abort()`): nothing of it can be visible.
    BeforeCommit(redb::Error),
    /// In `commit()`: it may or may not be durable.
    Commit(redb::Error),
}

/// One write transaction with `Durability::Immediate`, then commit (or abort).
fn run_write(db: &Database, settings: &RedbSettings, ops: &[WriteOp], commit: bool) -> Result<(), WriteFailure> {
    let before = |error: redb::Error| WriteFailure::BeforeCommit(error);
    let mut txn = db.begin_write().map_err(|error| before(error.into()))?;
    txn.set_durability(Durability::Immediate).map_err(|error| before(error.into()))?;
    txn.set_two_phase_commit(settings.two_phase_commit);
    txn.set_quick_repair(settings.quick_repair);
    {
        let mut table = txn.open_table(crate::model::TABLE).map_err(|error| before(error.into()))?;
        for op in ops {
            match op {
                WriteOp::Insert { key, value } => {
                    let bytes = value_bytes(*value);
                    table.insert(key_bytes(*key).as_slice(), bytes.as_slice()).map_err(|error| before(error.into()))?;
                }
                WriteOp::Remove { key } => {
                    table.remove(key_bytes(*key).as_slice()).map_err(|error| before(error.into()))?;
                }
            }
        }
    }
    if commit {
        txn.commit().map_err(|error| WriteFailure::Commit(error.into()))
    } else {
        txn.abort().map_err(|error| before(error.into()))
    }
}

/// A stable hash of a read's (key, signature) pairs.
fn hash_entries(entries: &Found) -> u64 {
    let mut hasher = StableHasher::new();
    for (&key, &sig) in entries {
        hasher.write_u64(u64::from(key));
        hasher.write_u64(sig);
    }
    hasher.finish()
}

/// `get` of each key in one read transaction.
fn read_keys(db: &Database, keys: &[u32]) -> Result<Found, redb::Error> {
    let txn = db.begin_read()?;
    let Some(table) = open_table(&txn)? else { return Ok(Found::new()) };
    let mut found = Found::new();
    for &key in keys {
        if let Some(value) = table.get(key_bytes(key).as_slice())? {
            found.insert(key, sig_of(value.value()));
        }
    }
    Ok(found)
}

/// `range(key(start)..key(end))` in one read transaction.
fn read_range(db: &Database, start: u32, end: u32) -> Result<Found, redb::Error> {
    let txn = db.begin_read()?;
    let Some(table) = open_table(&txn)? else { return Ok(Found::new()) };
    let (low, high) = (key_bytes(start), key_bytes(end));
    let mut found = Found::new();
    for entry in table.range(low.as_slice()..high.as_slice())? {
        let (key, value) = entry?;
        let index = parse_key(key.value()).unwrap_or(u32::MAX);
        found.insert(index, sig_of(value.value()));
        assert!(found.len() <= (end - start) as usize + 1, "a range returned more entries than keys in it");
    }
    Ok(found)
}

/// Compare a read with the model's entries for the same keys.
fn check_read(invariant: &str, expected: &Found, actual: &Found) -> Outcome {
    if expected != actual {
        return Err(Violation::new(
            invariant,
            FailureKind::Safety,
            "the committed state",
            first_difference(expected, actual),
        ));
    }
    Ok(Observed::Op(Observation::Read { entries: actual.len() as u64, hash: hash_entries(actual) }))
}

impl RedbTarget {
    /// The next operation, drawn by the configuration's weights.
    pub(crate) fn generate_op(&mut self, rng: &mut DeterministicRng, config: &RedbConfig) -> Op {
        let workload = &config.workload;
        match rng.weighted(&config.weights.as_array()) {
            0 => {
                let count = rng.range_inclusive(1, config.ops_max);
                let ops = (0..count).map(|_| self.generate_write_op(rng, config)).collect();
                Op::Write { ops, commit: !rng.chance_ppm(config.abort_ppm) }
            }
            1 => {
                let count = rng.range_inclusive(1, config.read_keys_max);
                Op::Read { keys: (0..count).map(|_| workload.pick_key(rng)).collect() }
            }
            2 => {
                let start = workload.pick_key(rng);
                let span = u32::try_from(rng.range_inclusive(1, u64::from(workload.scan_keys_max))).expect("fits");
                Op::Range { start, end: start.saturating_add(span).min(workload.key_count) }
            }
            3 => Op::Snapshot,
            4 => Op::SnapshotRead,
            5 => Op::Compact,
            _ => Op::CheckIntegrity,
        }
    }

    fn generate_write_op(&mut self, rng: &mut DeterministicRng, config: &RedbConfig) -> WriteOp {
        let key = config.workload.pick_key(rng);
        if rng.chance_ppm(config.remove_ppm) {
            return WriteOp::Remove { key };
        }
        let value = ValueSpec { id: self.next_value_id, len: config.workload.pick_value_len_bytes(rng) };
        self.next_value_id += 1;
        WriteOp::Insert { key, value }
    }

    /// Apply one operation to the open database. While a transaction is in flight a reopen is pending (redb
    /// latched the error): the operation is skipped and the reopen resolves it.
    pub(crate) fn apply_op(&mut self, world: &mut World, op: &Op) -> Outcome {
        if self.in_flight.is_some() {
            return Ok(Observed::Skipped);
        }
        match op {
            Op::Write { ops, commit } => self.write(world, ops, *commit),
            Op::Read { keys } => self.read(world, keys),
            Op::Range { start, end } => self.range(world, *start, *end),
            Op::Snapshot => self.open_snapshot(world),
            Op::SnapshotRead => self.read_snapshot(world),
            Op::Compact => self.compact(world),
            Op::CheckIntegrity => self.check_integrity(world),
        }
    }

    fn live_db(&self) -> &Database {
        self.db.as_ref().expect("the framework opens the system before an operation")
    }

    /// A write transaction; on success the model takes it; a failed commit leaves it in flight.
    pub(crate) fn write(&mut self, world: &mut World, ops: &[WriteOp], commit: bool) -> Outcome {
        match run_write(self.live_db(), &self.config.settings, ops, commit) {
            Ok(()) if commit => {
                self.model = apply_ops(&self.model, ops);
                world.count("redb.commits");
                Ok(Observed::Op(Observation::Committed))
            }
            Ok(()) => {
                world.count("redb.aborts");
                Ok(Observed::Op(Observation::Aborted))
            }
            Err(WriteFailure::BeforeCommit(error)) => self.tolerate(world, "a write transaction", &error),
            Err(WriteFailure::Commit(error)) => {
                self.in_flight = Some(ops.to_vec());
                self.tolerate(world, "commit", &error)
            }
        }
    }

    fn read(&mut self, world: &mut World, keys: &[u32]) -> Outcome {
        match read_keys(self.live_db(), keys) {
            Ok(actual) => {
                world.count("redb.reads");
                check_read("oracle.read", &expected_among(&self.model, keys.iter().copied()), &actual)
            }
            Err(error) => self.tolerate(world, "a read transaction", &error),
        }
    }

    fn range(&mut self, world: &mut World, start: u32, end: u32) -> Outcome {
        if start >= end {
            return Ok(Observed::Skipped);
        }
        match read_range(self.live_db(), start, end) {
            Ok(actual) => {
                world.count("redb.reads");
                check_read("oracle.range", &expected_among(&self.model, start..end), &actual)
            }
            Err(error) => self.tolerate(world, "a range read", &error),
        }
    }

    fn open_snapshot(&mut self, world: &mut World) -> Outcome {
        self.snapshot = None;
        match self.live_db().begin_read() {
            Ok(txn) => {
                self.snapshot = Some((txn, self.model.clone()));
                Ok(Observed::Op(Observation::SnapshotOpen))
            }
            Err(error) => self.tolerate(world, "begin_read", &error.into()),
        }
    }

    fn read_snapshot(&mut self, world: &mut World) -> Outcome {
        let Some((txn, state)) = &self.snapshot else { return Ok(Observed::Skipped) };
        let expected: Found = signatures(state);
        match read_state(txn, self.config.workload.key_count) {
            Ok(actual) => {
                world.count("redb.snapshot_reads");
                check_read("oracle.snapshot", &expected, &actual)
            }
            Err(ReadFailure::ForeignKey(key)) => Err(Violation::new(
                "oracle.snapshot",
                FailureKind::Safety,
                "only keys the workload wrote",
                format!("{key:?}"),
            )),
            Err(ReadFailure::Redb(error)) => self.tolerate(world, "a snapshot read", &error),
        }
    }

    /// The database for a call that needs it to itself: none while a snapshot is open (redb refuses `compact()`
    /// while a read transaction lives, and `check_integrity()` would wait for it).
    fn exclusive_db(&mut self) -> Option<&mut Database> {
        if self.snapshot.is_some() {
            return None;
        }
        Some(self.db.as_mut().expect("the framework opens the system before an operation"))
    }

    fn compact(&mut self, world: &mut World) -> Outcome {
        let Some(db) = self.exclusive_db() else { return Ok(Observed::Skipped) };
        match db.compact() {
            Ok(compacted) => {
                world.count("redb.compactions");
                Ok(Observed::Op(Observation::Compacted { compacted }))
            }
            Err(error) => self.tolerate(world, "compact", &error.into()),
        }
    }

    /// `check_integrity()`: redb's own structural check. `Ok(false)` (it had to repair) is a violation unless a
    /// data-destroying fault fired.
    pub(crate) fn check_integrity(&mut self, world: &mut World) -> Outcome {
        let Some(db) = self.exclusive_db() else { return Ok(Observed::Skipped) };
        match db.check_integrity() {
            Ok(clean) => {
                world.count("redb.integrity_checks");
                if !clean && !world.damaged() {
                    return Err(Violation::new(
                        "structural.integrity",
                        FailureKind::Structural,
                        "check_integrity() == Ok(true)",
                        "Ok(false): redb found damage and repaired it",
                    ));
                }
                Ok(Observed::Op(Observation::Integrity { clean }))
            }
            Err(error) => self.tolerate(world, "check_integrity", &error.into()),
        }
    }
}

/// `items` without element `index`, for every index (an empty list is not offered).
fn each_removed<T: Clone>(items: &[T]) -> Vec<Vec<T>> {
    if items.len() <= 1 {
        return Vec::new();
    }
    (0..items.len())
        .map(|index| {
            let mut fewer = items.to_vec();
            fewer.remove(index);
            debug_assert_eq!(fewer.len() + 1, items.len());
            fewer
        })
        .collect()
}

/// Simpler variants of one operation: a write transaction without one of its operations, a read without one of
/// its keys, a one-key range.
pub(crate) fn simplify_op(op: &Op) -> Vec<Op> {
    match op {
        Op::Write { ops, commit } => {
            each_removed(ops).into_iter().map(|ops| Op::Write { ops, commit: *commit }).collect()
        }
        Op::Read { keys } => each_removed(keys).into_iter().map(|keys| Op::Read { keys }).collect(),
        Op::Range { start, end } if end.saturating_sub(*start) > 1 => vec![Op::Range { start: *start, end: start + 1 }],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_round_trip_and_use_no_world_step_name() {
        let value = ValueSpec { id: 9, len: 4 };
        let write =
            Op::Write { ops: vec![WriteOp::Insert { key: 3, value }, WriteOp::Remove { key: 1 }], commit: true };
        let reads = [Op::Read { keys: vec![1, 2] }, Op::Range { start: 1, end: 9 }, Op::Snapshot, Op::SnapshotRead];
        let ops: Vec<Op> = [write].into_iter().chain(reads).chain([Op::Compact, Op::CheckIntegrity]).collect();
        let json = holdfast::step::check_ops(&ops).expect("ops round trip");
        assert!(json.contains(r#"{"kind":"insert","key":3,"value":{"id":9,"len":4}}"#), "{json}");
        assert!(json.contains(r#"{"op":"check_integrity"}"#), "{json}");
    }

    #[test]
    fn write_transactions_shrink_one_operation_at_a_time() {
        let value = ValueSpec { id: 1, len: 2 };
        let ops = vec![WriteOp::Insert { key: 1, value }, WriteOp::Remove { key: 2 }, WriteOp::Remove { key: 3 }];
        let simpler = simplify_op(&Op::Write { ops, commit: true });
        assert_eq!(simpler.len(), 3);
        assert!(simpler.iter().all(|candidate| matches!(candidate, Op::Write { ops, commit: true } if ops.len() == 2)));
        let single = Op::Write { ops: vec![WriteOp::Remove { key: 3 }], commit: false };
        assert!(simplify_op(&single).is_empty(), "a one-operation transaction is already simplest");
        assert_eq!(simplify_op(&Op::Range { start: 4, end: 9 }), vec![Op::Range { start: 4, end: 5 }]);
        assert!(simplify_op(&Op::Range { start: 9, end: 4 }).is_empty(), "a backwards range does not overflow");
    }
}
