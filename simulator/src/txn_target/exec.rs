//! Generating and applying transaction steps.

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::ops::Bound;

use env::{DeterministicRng, ExplicitFault, StableHasher};

use super::model::{ScanRead, Submission, TxnRecord};
use super::step::{ClientId, Observed, Step};
use super::{Activity, Client, Handle, OpenTxn, TxnTarget};
use crate::config::SwarmConfig;
use crate::engine_target::{DB_DIR, ValueSpec, key_bytes, parse_key, sig_of, value_bytes};
use crate::target::{FailureKind, Violation};

/// The group-commit task's name on `SimEnv`.
pub const GROUP_COMMIT_TASK: &str = "group-commit";
/// Long-lived transactions do this many operations.
const LONG_OPS_MIN: u64 = 20;
const LONG_OPS_MAX: u64 = 80;

/// A stable class name of an engine error, for observations and digests.
fn error_class(error: &engine::Error) -> String {
    match error {
        engine::Error::Env(inner) => format!("env_{}", inner.op()),
        engine::Error::Corruption { .. } => "corruption".into(),
        engine::Error::Locked { .. } => "locked".into(),
        engine::Error::Closed { .. } => "closed".into(),
        engine::Error::InvalidArgument { .. } => "invalid_argument".into(),
        engine::Error::Conflict { .. } => "conflict".into(),
        _ => "other".into(),
    }
}

impl TxnTarget {
    /// The next step: a client step or a system step, by the plan's weights, made concrete from the state.
    pub(super) fn generate_step(&mut self, rng: &mut DeterministicRng, config: &SwarmConfig) -> Step {
        if std::mem::take(&mut self.after_arm)
            && !self.pending.is_empty()
            && rng.chance_ppm(700_000)
            && let Some(step) = self.group_commit_step(rng)
        {
            return step;
        }
        match rng.weighted(&self.plan.step_weights) {
            0 => self.client_step(rng),
            1 => {
                let runnable = self.env.runnable_tasks();
                if runnable.is_empty() {
                    self.client_step(rng)
                } else {
                    Step::RunTask { name: runnable[rng.index(runnable.len())].1.clone() }
                }
            }
            2 => Step::Flush,
            3 => Step::Compact,
            4 => Step::Reopen,
            5 => self.generate_fault(rng),
            6 => Step::Crash,
            _ => {
                self.after_arm = true;
                let max = config.crash_at_io_k_max.max(1);
                let k = if rng.chance_ppm(600_000) {
                    rng.range_inclusive(1, max.min(4))
                } else {
                    rng.range_inclusive(1, max)
                };
                Step::CrashAtIo { k }
            }
        }
    }

    /// A step that syncs the log for pending commits: the group-commit task, or a waiting client.
    fn group_commit_step(&mut self, rng: &mut DeterministicRng) -> Option<Step> {
        if self.env.runnable_tasks().iter().any(|(_, name)| name == GROUP_COMMIT_TASK) {
            return Some(Step::RunTask { name: GROUP_COMMIT_TASK.into() });
        }
        let waiting: Vec<ClientId> = self
            .clients
            .iter()
            .filter(|(_, client)| matches!(client, Client::Submitted { .. }))
            .map(|(&id, _)| id)
            .collect();
        (!waiting.is_empty()).then(|| Step::Ack { client: waiting[rng.index(waiting.len())] })
    }

    fn client_step(&mut self, rng: &mut DeterministicRng) -> Step {
        let clients = self.plan.clients;
        let mut client = u32::try_from(rng.below(u64::from(clients))).expect("client fits");
        if matches!(self.clients.get(&client), Some(Client::Submitted { .. })) && !rng.chance_ppm(self.plan.ack_ppm) {
            let others: Vec<ClientId> = (0..clients)
                .filter(|other| !matches!(self.clients.get(other), Some(Client::Submitted { .. })))
                .collect();
            if !others.is_empty() {
                client = others[rng.index(others.len())];
            }
        }
        match self.clients.get(&client) {
            None => {
                let read_only = rng.chance_ppm(self.plan.read_only_ppm);
                let target = if rng.chance_ppm(self.plan.long_ppm) {
                    rng.range_inclusive(LONG_OPS_MIN, LONG_OPS_MAX)
                } else {
                    rng.range_inclusive(1, u64::from(self.plan.ops_max))
                };
                self.targets.insert(client, u32::try_from(target).expect("fits"));
                Step::Begin { client, read_only }
            }
            Some(Client::Submitted { .. }) => Step::Ack { client },
            Some(Client::Open(open)) => {
                let (ops, read_only) = (open.ops, open.record.read_only);
                self.txn_op(client, ops, read_only, rng)
            }
        }
    }

    fn txn_op(&mut self, client: ClientId, ops: u32, read_only: bool, rng: &mut DeterministicRng) -> Step {
        let target = self.targets.get(&client).copied().unwrap_or(1);
        if ops >= target {
            return if rng.chance_ppm(self.plan.rollback_ppm) {
                Step::Rollback { client }
            } else {
                Step::Commit { client }
            };
        }
        let [get, put, delete, scan] = self.plan.op_weights;
        let weights = if read_only { [get.max(1), 0, 0, scan] } else { [get, put, delete, scan] };
        let key_count = u64::from(self.plan.key_count);
        let key = u32::try_from(rng.below(key_count)).expect("key fits");
        match rng.weighted(&weights) {
            0 => Step::Get { client, key },
            1 => {
                let len = 8 + rng.range_inclusive(0, u64::from(self.plan.value_len_max));
                let value = ValueSpec { id: self.next_value_id, len: u32::try_from(len).expect("fits") };
                self.next_value_id += 1;
                Step::Put { client, key, value }
            }
            2 => Step::Delete { client, key },
            _ => {
                let keys = rng.range_inclusive(1, u64::from(self.plan.scan_keys_max.max(1)));
                Step::Scan { client, start: key, end: key + u32::try_from(keys).expect("fits") }
            }
        }
    }

    fn generate_fault(&mut self, rng: &mut DeterministicRng) -> Step {
        let files: Vec<_> = self
            .env
            .files()
            .into_iter()
            .filter(|file| file.path.parent() == Some(std::path::Path::new(DB_DIR)) && !file.path.ends_with("LOCK"))
            .collect();
        if files.is_empty() {
            return self.client_step(rng);
        }
        let path = files[rng.index(files.len())].path.clone();
        if rng.chance_ppm(500_000) {
            Step::Fault(ExplicitFault::FailNextSync { path })
        } else {
            Step::Fault(ExplicitFault::FailNextWrite { path })
        }
    }

    /// Apply one step: arm a pending crash, run it, recover if a crash cut it, absorb what became visible,
    /// reopen after errors.
    pub(super) fn apply_step(&mut self, step: &Step) -> Result<Observed, Violation> {
        let armed = self.armed.take();
        if let Some(k) = armed {
            self.env.crash_at_io(k.max(1));
        }
        let activity = match step {
            Step::Flush => Activity::Flush,
            Step::Compact => Activity::Compaction,
            Step::RunTask { name } if name == "compaction" => Activity::Compaction,
            Step::RunTask { name } if name == "flush" => Activity::Flush,
            _ => Activity::Client,
        };
        if activity == Activity::Compaction
            && self.clients.values().any(|c| matches!(c, Client::Open(o) if o.record.snapshot < self.history.visible()))
        {
            self.count("txn.old_snapshot_across_compaction");
        }
        let mut observed = self.apply_action(step)?;
        if self.env.is_halted() {
            self.classify_crash(activity);
            let (op, path) = self
                .env
                .last_crash()
                .map(|(op, path)| (op.to_string(), path.display().to_string()))
                .unwrap_or_default();
            self.count("crashes");
            self.recover()?;
            observed = Observed::CutByCrash { op, path };
        } else if armed.is_some() {
            self.env.disarm_crash();
        }
        let reads_only = matches!(
            step,
            Step::Begin { .. } | Step::Get { .. } | Step::Scan { .. } | Step::Put { .. } | Step::Delete { .. }
        ) || matches!(step, Step::Rollback { .. });
        self.structure_dirty |= !reads_only || matches!(observed, Observed::CutByCrash { .. });
        self.absorb_visible()?;
        self.poll_faults();
        if self.reopen_pending && !self.unrecoverable {
            self.reopen_pending = false;
            self.structure_dirty = true;
            self.reopen()?;
        }
        assert!(!self.env.is_halted(), "world left halted after a step");
        Ok(observed)
    }

    fn apply_action(&mut self, step: &Step) -> Result<Observed, Violation> {
        match step {
            Step::Begin { client, read_only } => self.begin(*client, *read_only),
            Step::Get { client, key } => self.get(*client, *key),
            Step::Put { client, key, value } => self.write(*client, *key, Some(*value)),
            Step::Delete { client, key } => self.write(*client, *key, None),
            Step::Scan { client, start, end } => self.scan(*client, *start, *end),
            Step::Commit { client } => self.commit(*client),
            Step::Ack { client } => self.ack(*client),
            Step::Rollback { client } => self.rollback(*client),
            Step::RunTask { name } => Ok(self.run_task(name)),
            Step::Flush => self.call("flush", |db| db.flush()),
            Step::Compact => self.call("compact", |db| db.compact()),
            Step::Crash => {
                self.env.crash();
                self.count("crashes");
                self.recover()
            }
            Step::CrashAtIo { k } => {
                self.armed = Some(*k);
                Ok(Observed::Armed { k: *k })
            }
            Step::Fault(fault) => {
                self.env.inject(fault.clone());
                Ok(Observed::Injected)
            }
            Step::Reopen => {
                if self.db.is_none() && self.unrecoverable {
                    return Ok(Observed::Skipped);
                }
                self.reopen()
            }
        }
    }

    /// Open the database if a fault left it closed. False when it still cannot be opened.
    fn ensure_db(&mut self) -> Result<bool, Violation> {
        if self.db.is_some() {
            return Ok(true);
        }
        if self.unrecoverable {
            return Ok(false);
        }
        self.recover()?;
        Ok(self.db.is_some())
    }

    fn unavailable(&self) -> Observed {
        Observed::Unavailable { reason: self.last_open_error.clone() }
    }

    /// An engine call failed: allowed (and observed) only when a fault or a crash justifies it; the database is
    /// then reopened at the end of the step.
    fn tolerate(&mut self, error: &engine::Error, what: &str) -> Result<Observed, Violation> {
        if self.env.is_halted() {
            return Ok(Observed::Error { class: "crashed".into() });
        }
        if self.error_allowed(error) {
            self.count("errors_tolerated");
            self.reopen_pending = true;
            return Ok(Observed::Error { class: error_class(error) });
        }
        Err(Violation::new(
            format!("no_unexpected_error.{what}"),
            FailureKind::UnexpectedError,
            "Ok (no fault or crash justifies an error)",
            error.to_string(),
        ))
    }

    fn call(
        &mut self,
        what: &str,
        f: impl FnOnce(&engine::Db<env::SimEnv>) -> engine::Result<()>,
    ) -> Result<Observed, Violation> {
        if !self.ensure_db()? {
            return Ok(self.unavailable());
        }
        let db = self.db.clone().expect("ensured");
        match f(&db) {
            Ok(()) => Ok(Observed::Ok),
            Err(error) => self.tolerate(&error, what),
        }
    }

    fn run_task(&mut self, name: &str) -> Observed {
        let Some((id, _)) = self.env.runnable_tasks().into_iter().find(|(_, task)| task == name) else {
            return Observed::Skipped;
        };
        match self.env.step_task(id) {
            Some(step) => Observed::Task { name: name.to_string(), done: step == env::TaskStep::Done },
            None => Observed::Skipped,
        }
    }

    /// Take `client`'s open transaction out of the table (put it back with [`Self::put_back`]).
    fn take_open(&mut self, client: ClientId) -> Option<OpenTxn> {
        match self.clients.remove(&client) {
            Some(Client::Open(open)) => Some(open),
            Some(other) => {
                self.clients.insert(client, other);
                None
            }
            None => None,
        }
    }

    fn put_back(&mut self, open: OpenTxn) {
        let previous = self.clients.insert(open.record.client, Client::Open(open));
        assert!(previous.is_none(), "a client with two transactions");
    }

    fn begin(&mut self, client: ClientId, read_only: bool) -> Result<Observed, Violation> {
        if self.clients.contains_key(&client) {
            return Ok(Observed::Skipped);
        }
        if !self.ensure_db()? {
            return Ok(self.unavailable());
        }
        let db = self.db.as_ref().expect("ensured");
        let handle = if read_only { db.begin_read().map(Handle::ReadOnly) } else { db.begin().map(Handle::ReadWrite) };
        let handle = match handle {
            Ok(handle) => handle,
            Err(error) => return self.tolerate(&error, "begin"),
        };
        let snapshot = match &handle {
            Handle::ReadWrite(txn) => txn.snapshot(),
            Handle::ReadOnly(txn) => txn.snapshot(),
        };
        if snapshot > self.history.visible() && !self.damaged {
            return Err(Violation::new(
                "snapshot_visible",
                FailureKind::Safety,
                format!("a snapshot at or below {} (the last visible commit)", self.history.visible()),
                snapshot.to_string(),
            ));
        }
        if let Some((first, last, writer)) = self.history.split_commit(snapshot)
            && !self.damaged
        {
            return Err(Violation::new(
                "snapshot_atomic",
                FailureKind::Safety,
                format!("a snapshot that sees all or none of every commit (T{writer} is seq {first}..={last})"),
                format!("{} transaction snapshot {snapshot}", if read_only { "read-only" } else { "read-write" }),
            ));
        }
        let id = self.next_txn;
        self.next_txn += 1;
        self.count("txn.begins");
        if read_only {
            self.count("txn.read_only_begins");
        }
        self.put_back(OpenTxn { handle, record: TxnRecord::new(id, client, snapshot, read_only), ops: 0 });
        Ok(Observed::Began { txn: id, snapshot })
    }

    fn get(&mut self, client: ClientId, key: u32) -> Result<Observed, Violation> {
        let Some(mut open) = self.take_open(client) else { return Ok(Observed::Skipped) };
        open.ops += 1;
        let result = match &mut open.handle {
            Handle::ReadWrite(txn) => txn.get(&key_bytes(key)),
            Handle::ReadOnly(txn) => txn.get(&key_bytes(key)),
        };
        let value = match result {
            Ok(value) => value,
            Err(error) if error.is_conflict() => return self.conflict_abort(open.record, &error),
            Err(error) => {
                self.put_back(open);
                return self.tolerate(&error, "get");
            }
        };
        self.count("txn.gets");
        let actual = value.as_deref().map(sig_of);
        let snapshot = open.record.snapshot;
        let own = open.record.writes.get(&key).copied();
        let expected = own.unwrap_or_else(|| self.history.value_at(key, snapshot));
        if actual != expected && !self.damaged {
            let expected = match own {
                Some(value) => {
                    format!("k{key:06} = {} (T{}'s own write)", self.history.describe(value), open.record.id)
                }
                None => {
                    format!("{} at T{}'s snapshot {snapshot}", self.history.describe_at(key, snapshot), open.record.id)
                }
            };
            return Err(Violation::new(
                "snapshot_read.get",
                FailureKind::Safety,
                expected,
                format!("k{key:06} = {}", self.history.describe(actual)),
            ));
        }
        if own.is_none() {
            open.record.reads.push((key, self.history.writer_at(key, snapshot)));
        }
        self.put_back(open);
        Ok(Observed::Value { value: actual.and_then(|sig| self.history.spec(sig)) })
    }

    fn scan(&mut self, client: ClientId, start: u32, end: u32) -> Result<Observed, Violation> {
        if start >= end {
            return Ok(Observed::Skipped);
        }
        let Some(mut open) = self.take_open(client) else { return Ok(Observed::Skipped) };
        open.ops += 1;
        let (start_bytes, end_bytes) = (key_bytes(start), key_bytes(end));
        let range = (Bound::Included(start_bytes.as_slice()), Bound::Excluded(end_bytes.as_slice()));
        let result = match &mut open.handle {
            Handle::ReadWrite(txn) => txn.scan(range),
            Handle::ReadOnly(txn) => txn.scan(range),
        }
        .and_then(|rows| rows.collect::<engine::Result<Vec<_>>>());
        let rows = match result {
            Ok(rows) => rows,
            Err(error) if error.is_conflict() => return self.conflict_abort(open.record, &error),
            Err(error) => {
                self.put_back(open);
                return self.tolerate(&error, "scan");
            }
        };
        self.count("txn.scans");
        let mut found: BTreeMap<u32, u64> = BTreeMap::new();
        let mut hasher = StableHasher::new();
        let mut previous: Option<u32> = None;
        for (key, value) in &rows {
            let parsed = parse_key(key).filter(|index| (start..end).contains(index));
            let Some(index) = parsed.filter(|&index| previous.is_none_or(|previous| previous < index)) else {
                return Err(Violation::new(
                    "snapshot_read.scan_shape",
                    FailureKind::Safety,
                    format!("keys strictly ascending within [k{start:06}, k{end:06})"),
                    format!("key {:?} (after {previous:?})", String::from_utf8_lossy(key)),
                ));
            };
            previous = Some(index);
            hasher.write(key);
            hasher.write(value);
            found.insert(index, sig_of(value));
        }
        let snapshot = open.record.snapshot;
        let in_history = self.history.keys_in(start, end);
        let mut expected: BTreeMap<u32, u64> =
            in_history.iter().filter_map(|&key| Some((key, self.history.value_at(key, snapshot)?))).collect();
        for (&key, &value) in open.record.writes.range(start..end) {
            match value {
                Some(sig) => expected.insert(key, sig),
                None => expected.remove(&key),
            };
        }
        if found != expected && !self.damaged {
            let render = |map: &BTreeMap<u32, u64>, other: &BTreeMap<u32, u64>| {
                let differing: Vec<String> = map
                    .keys()
                    .chain(other.keys())
                    .filter(|key| map.get(key) != other.get(key))
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .map(|&key| format!("k{key:06} = {}", self.history.describe(map.get(&key).copied())))
                    .collect();
                differing.join(", ")
            };
            return Err(Violation::new(
                "snapshot_read.scan",
                FailureKind::Safety,
                format!(
                    "[k{start:06}, k{end:06}) at T{}'s snapshot {snapshot} (own writes applied): {}",
                    open.record.id,
                    render(&expected, &found)
                ),
                render(&found, &expected),
            ));
        }
        let observed = in_history.iter().map(|&key| (key, self.history.writer_at(key, snapshot))).collect();
        open.record.scans.push(ScanRead { start, end, observed });
        self.put_back(open);
        Ok(Observed::Scan { entries: rows.len() as u64, hash: hasher.finish() })
    }

    fn write(&mut self, client: ClientId, key: u32, value: Option<ValueSpec>) -> Result<Observed, Violation> {
        let Some(mut open) = self.take_open(client) else { return Ok(Observed::Skipped) };
        let Handle::ReadWrite(txn) = &mut open.handle else {
            self.put_back(open);
            return Ok(Observed::Skipped);
        };
        open.ops += 1;
        let sig = value.map(|spec| self.history.register(spec, open.record.id));
        let result = match value {
            Some(spec) => txn.put(&key_bytes(key), &value_bytes(spec)),
            None => txn.delete(&key_bytes(key)),
        };
        match result {
            Ok(()) => {
                open.record.writes.insert(key, sig);
                self.put_back(open);
                Ok(Observed::Ok)
            }
            Err(error) if error.is_conflict() => self.conflict_abort(open.record, &error),
            Err(error) => {
                self.put_back(open);
                self.tolerate(&error, if value.is_some() { "put" } else { "delete" })
            }
        }
    }

    fn commit(&mut self, client: ClientId) -> Result<Observed, Violation> {
        let Some(open) = self.take_open(client) else { return Ok(Observed::Skipped) };
        let OpenTxn { handle, record, .. } = open;
        let txn = match handle {
            Handle::ReadOnly(txn) => {
                drop(txn);
                self.count("txn.read_only_commits");
                self.finish_without_writes(&record)?;
                return Ok(Observed::Committed { txn: record.id });
            }
            Handle::ReadWrite(txn) => txn,
        };
        match txn.submit() {
            Ok(None) if record.writes.is_empty() => {
                self.count("txn.empty_commits");
                self.finish_without_writes(&record)?;
                Ok(Observed::Committed { txn: record.id })
            }
            Ok(None) => Err(Violation::new(
                "commit.ticket",
                FailureKind::Safety,
                format!("a commit ticket for T{}'s {} writes", record.id, record.writes.len()),
                "no ticket",
            )),
            Ok(Some(ticket)) => {
                let writes = record.writes.len() as u64;
                let floor = self.pending.last().map_or(self.history.visible(), |last| last.last_sequence);
                if writes == 0 || ticket.last_sequence < floor + writes {
                    return Err(Violation::new(
                        "sequence_monotonic",
                        FailureKind::Safety,
                        format!("T{}'s {writes} writes get sequences above {floor}", record.id),
                        format!("ticket last_sequence {}", ticket.last_sequence),
                    ));
                }
                let id = record.id;
                let last_sequence = ticket.last_sequence;
                self.next_sequence = last_sequence + 1;
                self.pending.push(Submission {
                    record,
                    first_sequence: last_sequence + 1 - writes,
                    last_sequence,
                    ticketed: true,
                });
                self.clients.insert(client, Client::Submitted { txn: id, ticket });
                self.count("txn.submits");
                Ok(Observed::Submitted { txn: id, last_sequence })
            }
            Err(error) if error.is_conflict() => self.conflict_abort(record, &error),
            Err(error) => {
                if !record.writes.is_empty() {
                    // The record may or may not be in the log: in flight, resolved after the reopen.
                    let first_sequence = self.next_sequence;
                    let last_sequence = first_sequence + record.writes.len() as u64 - 1;
                    self.pending.push(Submission { record, first_sequence, last_sequence, ticketed: false });
                    self.count("txn.submit_outcome_unknown");
                }
                self.tolerate(&error, "submit")
            }
        }
    }

    fn ack(&mut self, client: ClientId) -> Result<Observed, Violation> {
        let Some(Client::Submitted { txn, ticket }) = self.clients.get(&client) else { return Ok(Observed::Skipped) };
        let (txn, ticket) = (*txn, ticket.clone());
        self.clients.remove(&client);
        let Some(db) = self.db.clone() else { return Ok(Observed::Skipped) };
        match db.wait_for_commit(&ticket) {
            Ok(()) => {
                let last = db.last_sequence();
                if last < ticket.last_sequence {
                    return Err(Violation::new(
                        "ack_visible",
                        FailureKind::Safety,
                        format!("T{txn} visible when acknowledged: last_sequence >= {}", ticket.last_sequence),
                        last.to_string(),
                    ));
                }
                self.count("txn.acks");
                Ok(Observed::Acked { txn })
            }
            Err(error) => self.tolerate(&error, "wait_for_commit"),
        }
    }

    fn rollback(&mut self, client: ClientId) -> Result<Observed, Violation> {
        let Some(open) = self.take_open(client) else { return Ok(Observed::Skipped) };
        self.count("txn.rollbacks");
        match open.handle {
            Handle::ReadWrite(txn) => txn.rollback(),
            Handle::ReadOnly(txn) => {
                drop(txn);
                self.finish_without_writes(&open.record)?;
            }
        }
        Ok(Observed::RolledBack { txn: open.record.id })
    }

    /// A serialization failure ended `record`'s transaction: check it is explained and classify it.
    fn conflict_abort(&mut self, record: TxnRecord, error: &engine::Error) -> Result<Observed, Violation> {
        let (reason, cause) = match error {
            engine::Error::Conflict { cause } => (cause.to_string(), Some(cause)),
            other => (other.to_string(), None),
        };
        if record.read_only {
            return Err(Violation::new(
                "read_only_never_aborts",
                FailureKind::Safety,
                format!("read-only T{} never aborts", record.id),
                reason,
            ));
        }
        let Some(cause) = cause.filter(|cause| cause.key().is_some()) else {
            return Err(Violation::new(
                "abort_explained",
                FailureKind::Safety,
                format!("T{}'s conflict error names a key or range", record.id),
                reason,
            ));
        };
        let cause = cause.name();
        self.count("txn.aborts");
        self.count(&format!("txn.aborts.{cause}"));
        if !self.damaged && !self.would_cycle(&record) {
            self.count("txn.false_aborts");
            self.count(&format!("txn.false_aborts.{cause}"));
        }
        Ok(Observed::Aborted { txn: record.id, reason })
    }

    /// Would `record`, committed now (after every pending commit), close a cycle in the DSG?
    fn would_cycle(&self, record: &TxnRecord) -> bool {
        let mut graph = self.graph.clone();
        for submission in &self.pending {
            if graph.commit(&submission.record.to_committed()).is_some() {
                return true;
            }
        }
        graph.commit(&record.to_committed()).is_some()
    }
}
