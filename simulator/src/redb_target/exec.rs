//! Generating and applying redb-target steps.

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::path::{Path, PathBuf};

use env::{DeterministicRng, ExplicitFault, Op, StableHasher};
use redb::{Database, Durability, ReadableDatabase};

use super::plan::RedbPlan;
use super::step::{Observed, Step, WriteOp};
use super::{DB_PATH, ReadFailure, RedbTarget, State, TABLE, open_table, read_state, signatures};
use crate::config::SwarmConfig;
use crate::engine_target::{ValueSpec, key_bytes, parse_key, sig_of, value_bytes};
use crate::target::{FailureKind, Violation};

/// How a write transaction failed.
enum WriteFailure {
    /// Before `commit()` (or in `abort()`): nothing of it can be visible.
    BeforeCommit(redb::Error),
    /// In `commit()`: it may or may not be durable.
    Commit(redb::Error),
}

/// One write transaction with `Durability::Immediate`, then commit (or abort).
fn run_write(db: &Database, plan: &RedbPlan, ops: &[WriteOp], commit: bool) -> Result<(), WriteFailure> {
    let before = |error: redb::Error| WriteFailure::BeforeCommit(error);
    let mut txn = db.begin_write().map_err(|error| before(error.into()))?;
    txn.set_durability(Durability::Immediate).map_err(|error| before(error.into()))?;
    txn.set_two_phase_commit(plan.two_phase_commit);
    txn.set_quick_repair(plan.quick_repair);
    {
        let mut table = txn.open_table(TABLE).map_err(|error| before(error.into()))?;
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
fn hash_entries(entries: &BTreeMap<u32, u64>) -> u64 {
    let mut hasher = StableHasher::new();
    for (&key, &sig) in entries {
        hasher.write_u64(u64::from(key));
        hasher.write_u64(sig);
    }
    hasher.finish()
}

/// `get` of each key in one read transaction.
fn read_keys(db: &Database, keys: &[u32]) -> Result<BTreeMap<u32, u64>, redb::Error> {
    let txn = db.begin_read()?;
    let Some(table) = open_table(&txn)? else { return Ok(BTreeMap::new()) };
    let mut found = BTreeMap::new();
    for &key in keys {
        if let Some(value) = table.get(key_bytes(key).as_slice())? {
            found.insert(key, sig_of(value.value()));
        }
    }
    Ok(found)
}

/// `range(key(start)..key(end))` in one read transaction.
fn read_range(db: &Database, start: u32, end: u32) -> Result<BTreeMap<u32, u64>, redb::Error> {
    let txn = db.begin_read()?;
    let Some(table) = open_table(&txn)? else { return Ok(BTreeMap::new()) };
    let (low, high) = (key_bytes(start), key_bytes(end));
    let mut found = BTreeMap::new();
    for entry in table.range(low.as_slice()..high.as_slice())? {
        let (key, value) = entry?;
        let index = parse_key(key.value()).unwrap_or(u32::MAX);
        found.insert(index, sig_of(value.value()));
        assert!(found.len() <= (end - start) as usize + 1, "a range returned more entries than keys in it");
    }
    Ok(found)
}

/// The model's entries among `keys`.
fn expected_among(model: &State, keys: impl Iterator<Item = u32>) -> BTreeMap<u32, u64> {
    keys.filter_map(|key| model.get(&key).map(|&(_, sig)| (key, sig))).collect()
}

impl RedbTarget {
    /// Draw the next step from the plan's weights.
    pub(super) fn generate_step(&mut self, rng: &mut DeterministicRng, config: &SwarmConfig) -> Step {
        let workload = &config.workload;
        match rng.weighted(&self.plan.weights) {
            0 => {
                let count = rng.range_inclusive(1, self.plan.ops_max);
                let ops = (0..count).map(|_| self.generate_op(rng, config)).collect();
                Step::Write { ops, commit: !rng.chance_ppm(self.plan.abort_ppm) }
            }
            1 => {
                let count = rng.range_inclusive(1, self.plan.read_keys_max);
                Step::Read { keys: (0..count).map(|_| workload.pick_key(rng)).collect() }
            }
            2 => {
                let start = workload.pick_key(rng);
                let span = u32::try_from(rng.range_inclusive(1, u64::from(workload.scan_keys_max))).expect("fits");
                Step::Range { start, end: start.saturating_add(span).min(workload.key_count) }
            }
            3 => Step::Snapshot,
            4 => Step::SnapshotRead,
            5 => Step::Compact,
            6 => Step::CheckIntegrity,
            7 => Step::Reopen,
            8 => Step::Crash,
            9 => Step::CrashAtIo { k: rng.range_inclusive(1, config.crash_at_io_k_max) },
            10 => Step::CrashDuringRecovery { k: rng.range_inclusive(1, config.recovery_crash_k_max) },
            _ => Step::Fault(self.generate_fault(rng)),
        }
    }

    fn generate_op(&mut self, rng: &mut DeterministicRng, config: &SwarmConfig) -> WriteOp {
        let key = config.workload.pick_key(rng);
        if rng.chance_ppm(self.plan.remove_ppm) {
            return WriteOp::Remove { key };
        }
        let value = ValueSpec { id: self.next_value_id, len: config.workload.pick_value_len_bytes(rng) };
        self.next_value_id += 1;
        WriteOp::Insert { key, value }
    }

    fn generate_fault(&self, rng: &mut DeterministicRng) -> ExplicitFault {
        let path = PathBuf::from(DB_PATH);
        let len = self.env.read_current(Path::new(DB_PATH)).map_or(0, |bytes| bytes.len() as u64);
        match rng.weighted(&[2, 2, 3]) {
            0 => ExplicitFault::FailNextSync { path },
            1 => ExplicitFault::FailNextWrite { path },
            _ => ExplicitFault::FlipBit { path, offset: rng.below(len.max(1)) },
        }
    }

    /// Apply one step: arm a pending crash, run it, recover if a crash cut it, reopen after errors.
    pub(super) fn apply_step(&mut self, step: &Step) -> Result<Observed, Violation> {
        if self.unrecoverable {
            return Ok(Observed::Skipped);
        }
        let armed = self.armed.take();
        if let Some(k) = armed {
            self.env.crash_at_io(k.max(1));
        }
        let mut observed = self.apply_action(step)?;
        if self.env.is_halted() {
            let (op, path) = self.env.last_crash().unwrap_or((Op::Write, PathBuf::new()));
            self.classify_crash(crash_place(step, op));
            self.count("crashes");
            self.recover()?;
            observed = Observed::CutByCrash { op: format!("{op:?}"), path: path.display().to_string() };
        } else if armed.is_some() {
            self.env.disarm_crash();
        }
        self.poll_faults();
        if self.reopen_pending && !self.unrecoverable {
            self.reopen_pending = false;
            self.count("reopens");
            self.recover()?;
        }
        assert!(!self.env.is_halted(), "world left halted after a step");
        Ok(observed)
    }

    /// The step itself. Client steps first bring the database back if an earlier error left it closed or a
    /// transaction in flight.
    fn apply_action(&mut self, step: &Step) -> Result<Observed, Violation> {
        let needs_database = !matches!(
            step,
            Step::Crash | Step::CrashAtIo { .. } | Step::CrashDuringRecovery { .. } | Step::Fault(_) | Step::Reopen
        );
        if needs_database && (self.db.is_none() || self.in_flight.is_some()) {
            self.recover()?;
            if self.db.is_none() || self.in_flight.is_some() || self.env.is_halted() {
                return Ok(Observed::Skipped);
            }
        }
        match step {
            Step::Write { ops, commit } => self.apply_write(ops, *commit),
            Step::Read { keys } => self.apply_read(keys),
            Step::Range { start, end } => self.apply_range(*start, *end),
            Step::Snapshot => self.apply_snapshot(),
            Step::SnapshotRead => self.apply_snapshot_read(),
            Step::Compact => self.apply_compact(),
            Step::CheckIntegrity => self.check_integrity_step(),
            Step::Reopen => {
                self.count("reopens");
                self.recover()
            }
            Step::Crash => {
                self.env.crash();
                self.count("crashes");
                self.recover()
            }
            Step::CrashAtIo { k } => {
                self.armed = Some(*k);
                Ok(Observed::Armed { k: *k })
            }
            Step::CrashDuringRecovery { k } => self.apply_crash_during_recovery(*k),
            Step::Fault(fault) => {
                self.env.inject(fault.clone());
                Ok(Observed::Injected)
            }
        }
    }

    /// A redb error: tolerated (and the database reopened) when a crash or an injected fault justifies it.
    fn tolerate(&mut self, what: &str, error: &redb::Error) -> Result<Observed, Violation> {
        if !self.error_allowed() {
            return Err(self.unexpected(what, error));
        }
        if self.env.is_halted() {
            self.count("redb.errors_cut_by_crash");
        } else {
            self.count("redb.errors_tolerated");
            self.reopen_pending = true;
        }
        Ok(Observed::Error { error: error.to_string() })
    }

    /// A write transaction; on success the model takes it; a failed commit leaves it in flight.
    pub(super) fn apply_write(&mut self, ops: &[WriteOp], commit: bool) -> Result<Observed, Violation> {
        let Some(db) = &self.db else { return Ok(Observed::Skipped) };
        match run_write(db, &self.plan, ops, commit) {
            Ok(()) if commit => {
                self.model = super::apply_ops(&self.model, ops);
                self.count("redb.commits");
                Ok(Observed::Committed)
            }
            Ok(()) => {
                self.count("redb.aborts");
                Ok(Observed::Aborted)
            }
            Err(WriteFailure::BeforeCommit(error)) => self.tolerate("a write transaction", &error),
            Err(WriteFailure::Commit(error)) => {
                self.in_flight = Some(ops.to_vec());
                self.tolerate("commit", &error)
            }
        }
    }

    /// Compare a read with the model's entries for the same keys.
    fn check_read(
        &self,
        invariant: &str,
        expected: &BTreeMap<u32, u64>,
        actual: BTreeMap<u32, u64>,
    ) -> Result<Observed, Violation> {
        if *expected != actual {
            return Err(Violation::new(
                invariant,
                FailureKind::Safety,
                "the committed state",
                super::first_difference(expected, &actual),
            ));
        }
        Ok(Observed::Read { entries: actual.len() as u64, hash: hash_entries(&actual) })
    }

    fn apply_read(&mut self, keys: &[u32]) -> Result<Observed, Violation> {
        let Some(db) = &self.db else { return Ok(Observed::Skipped) };
        match read_keys(db, keys) {
            Ok(actual) => {
                self.count("redb.reads");
                let expected = expected_among(&self.model, keys.iter().copied());
                self.check_read("oracle.read", &expected, actual)
            }
            Err(error) => self.tolerate("a read transaction", &error),
        }
    }

    fn apply_range(&mut self, start: u32, end: u32) -> Result<Observed, Violation> {
        let Some(db) = &self.db else { return Ok(Observed::Skipped) };
        if start >= end {
            return Ok(Observed::Skipped);
        }
        match read_range(db, start, end) {
            Ok(actual) => {
                self.count("redb.reads");
                let expected = expected_among(&self.model, start..end);
                self.check_read("oracle.range", &expected, actual)
            }
            Err(error) => self.tolerate("a range read", &error),
        }
    }

    fn apply_snapshot(&mut self) -> Result<Observed, Violation> {
        self.snapshot = None;
        let Some(db) = &self.db else { return Ok(Observed::Skipped) };
        match db.begin_read() {
            Ok(txn) => {
                self.snapshot = Some((txn, self.model.clone()));
                Ok(Observed::SnapshotOpen)
            }
            Err(error) => self.tolerate("begin_read", &error.into()),
        }
    }

    fn apply_snapshot_read(&mut self) -> Result<Observed, Violation> {
        let Some((txn, state)) = &self.snapshot else { return Ok(Observed::Skipped) };
        let expected = signatures(state);
        match read_state(txn, self.config.workload.key_count) {
            Ok(actual) => {
                self.count("redb.snapshot_reads");
                self.check_read("oracle.snapshot", &expected, actual)
            }
            Err(ReadFailure::ForeignKey(key)) => Err(Violation::new(
                "oracle.snapshot",
                FailureKind::Safety,
                "only keys the workload wrote",
                format!("{key:?}"),
            )),
            Err(ReadFailure::Redb(error)) => self.tolerate("a snapshot read", &error),
        }
    }

    fn apply_compact(&mut self) -> Result<Observed, Violation> {
        if self.snapshot.is_some() {
            return Ok(Observed::Skipped);
        }
        let Some(db) = self.db.as_mut() else { return Ok(Observed::Skipped) };
        match db.compact() {
            Ok(compacted) => {
                self.count("redb.compactions");
                Ok(Observed::Compacted { compacted })
            }
            Err(error) => self.tolerate("compact", &error.into()),
        }
    }

    /// `check_integrity()`: redb's own structural check. `Ok(false)` (it had to repair) is a violation unless a
    /// data-destroying fault fired.
    pub(super) fn check_integrity_step(&mut self) -> Result<Observed, Violation> {
        if self.snapshot.is_some() {
            return Ok(Observed::Skipped);
        }
        let Some(db) = self.db.as_mut() else { return Ok(Observed::Skipped) };
        match db.check_integrity() {
            Ok(clean) => {
                self.count("redb.integrity_checks");
                self.poll_faults();
                if !clean && !self.damaged {
                    return Err(Violation::new(
                        "structural.integrity",
                        FailureKind::Structural,
                        "check_integrity() == Ok(true)",
                        "Ok(false): redb found damage and repaired it",
                    ));
                }
                Ok(Observed::Integrity { clean })
            }
            Err(error) => self.tolerate("check_integrity", &error.into()),
        }
    }

    /// Power cut, then a second crash at the `k`-th IO of reopening, then recover.
    fn apply_crash_during_recovery(&mut self, k: u64) -> Result<Observed, Violation> {
        self.env.crash();
        self.count("crashes");
        self.close_db();
        self.env.crash_at_io(k.max(1));
        let opened = self.open_db()?;
        self.env.disarm_crash();
        if !opened && self.env.is_halted() {
            self.count("crashes");
        }
        self.recover()
    }
}

/// The coverage counter of a crash that cut `step` at an `op`.
fn crash_place(step: &Step, op: Op) -> &'static str {
    match step {
        Step::Write { .. } if op == Op::Sync => "crash.commit_sync",
        Step::Write { .. } => "crash.commit_write",
        Step::Read { .. } | Step::Range { .. } | Step::Snapshot | Step::SnapshotRead => "crash.read",
        Step::Compact => "crash.compact",
        Step::CheckIntegrity => "crash.integrity",
        _ => "crash.close",
    }
}
