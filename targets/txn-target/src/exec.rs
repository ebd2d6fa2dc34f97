//! Applying the target's operations to the open database, and checking what each one read against the history
//! at its transaction's snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hasher;
use std::ops::Bound;

use holdfast::env::StableHasher;
use holdfast::kit::{ValueSpec, key_bytes, parse_key, sig_of, value_bytes};
use holdfast::{FailureKind, Observed, Violation, World};

use crate::model::{ScanRead, Submission, TxnRecord};
use crate::ops::{ClientId, Observation, Op};
use crate::{Client, Handle, OpenTxn, TxnTarget, system_error};

pub(crate) type Outcome = Result<Observed<Observation>, Violation>;

/// An engine call failed: observed when a fault or a crash justifies it (the framework then reopens), a
/// violation otherwise. A serialization failure is never excused by a fault.
pub(crate) fn tolerate(world: &mut World, what: &str, error: &engine::Error) -> Outcome {
    if error.is_conflict() {
        return Err(Violation::new(
            format!("no_unexpected_error.{what}"),
            FailureKind::UnexpectedError,
            "Ok (a conflict is only expected from a transaction's reads, writes and submit)",
            error.to_string(),
        ));
    }
    world.tolerate(what, &system_error(error))
}

impl TxnTarget {
    /// Apply one operation to the open database.
    pub(crate) fn apply_op(&mut self, world: &mut World, op: &Op) -> Outcome {
        match op {
            Op::Begin { client, read_only } => self.begin(world, *client, *read_only),
            Op::Get { client, key } => self.get(world, *client, *key),
            Op::Put { client, key, value } => self.write(world, *client, *key, Some(*value)),
            Op::Delete { client, key } => self.write(world, *client, *key, None),
            Op::Scan { client, start, end } => self.scan(world, *client, *start, *end),
            Op::Commit { client } => self.commit(world, *client),
            Op::Ack { client } => self.ack(world, *client),
            Op::Rollback { client } => self.rollback(world, *client),
            Op::Flush | Op::Compact => self.maintain(world, op == &Op::Compact),
        }
    }

    /// `db.flush()`, or `db.compact()` when `compact`.
    fn maintain(&mut self, world: &mut World, compact: bool) -> Outcome {
        let db = self.live_db();
        let (what, result) = if compact {
            self.count_old_snapshots();
            ("compact", db.compact())
        } else {
            ("flush", db.flush())
        };
        if result.is_ok() && !compact {
            // A flush seals and syncs the log first: every visible commit is durable (ADR-0205).
            self.absorb_visible(world)?;
            self.durable();
        }
        result.map_or_else(|error| tolerate(world, what, &error), |()| Ok(Observed::Op(Observation::Ok)))
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

    /// A call of `open`'s transaction failed: a conflict aborts it; any other error leaves it open, and is
    /// tolerated when a fault or a crash justifies it.
    fn failed(&mut self, world: &mut World, open: OpenTxn, what: &str, error: engine::Error) -> Outcome {
        if let engine::Error::Conflict { cause } = error {
            return self.conflict_abort(world, open.record, &cause);
        }
        self.put_back(open);
        tolerate(world, what, &error)
    }

    fn begin(&mut self, world: &mut World, client: ClientId, read_only: bool) -> Outcome {
        if self.clients.contains_key(&client) {
            return Ok(Observed::Skipped);
        }
        let db = self.live_db();
        let handle = if read_only { db.begin_read().map(Handle::ReadOnly) } else { db.begin().map(Handle::ReadWrite) };
        let handle = match handle {
            Ok(handle) => handle,
            Err(error) => return tolerate(world, "begin", &error),
        };
        // A read-write transaction takes its snapshot at its first read (ADR-0210): checked there.
        let snapshot = match &handle {
            Handle::ReadWrite(txn) => txn.snapshot(),
            Handle::ReadOnly(txn) => Some(txn.snapshot()),
        };
        if let Some(snapshot) = snapshot {
            self.check_snapshot(world, snapshot, read_only)?;
        }
        let id = self.next_txn;
        self.next_txn += 1;
        self.count("txn.begins");
        if read_only {
            self.count("txn.read_only_begins");
        }
        self.put_back(OpenTxn { handle, record: TxnRecord::new(id, client, snapshot, read_only), ops: 0 });
        Ok(Observed::Op(Observation::Began { txn: id, snapshot }))
    }

    /// `snapshot_visible` and `snapshot_atomic`: a snapshot is at or below the last visible commit and splits no
    /// commit of several writes.
    fn check_snapshot(&self, world: &mut World, snapshot: u64, read_only: bool) -> Result<(), Violation> {
        if snapshot > self.history.visible() && !world.damaged() {
            return Err(Violation::new(
                "snapshot_visible",
                FailureKind::Safety,
                format!("a snapshot at or below {} (the last visible commit)", self.history.visible()),
                snapshot.to_string(),
            ));
        }
        if let Some((first, last, writer)) = self.history.split_commit(snapshot)
            && !world.damaged()
        {
            return Err(Violation::new(
                "snapshot_atomic",
                FailureKind::Safety,
                format!("a snapshot that sees all or none of every commit (T{writer} is seq {first}..={last})"),
                format!("{} transaction snapshot {snapshot}", if read_only { "read-only" } else { "read-write" }),
            ));
        }
        Ok(())
    }

    /// The snapshot `open` read at: recorded at its first read that took one (ADR-0210: a read-write transaction
    /// takes it then), and checked when recorded.
    fn read_snapshot(&mut self, world: &mut World, open: &mut OpenTxn) -> Result<u64, Violation> {
        if let Some(snapshot) = open.record.snapshot {
            return Ok(snapshot);
        }
        let snapshot = match &open.handle {
            Handle::ReadWrite(txn) => txn.snapshot().expect("a read that returned took the snapshot"),
            Handle::ReadOnly(txn) => txn.snapshot(),
        };
        self.check_snapshot(world, snapshot, open.record.read_only)?;
        self.count("txn.snapshots_at_first_read");
        open.record.snapshot = Some(snapshot);
        Ok(snapshot)
    }

    fn get(&mut self, world: &mut World, client: ClientId, key: u32) -> Outcome {
        let Some(mut open) = self.take_open(client) else { return Ok(Observed::Skipped) };
        open.ops += 1;
        let result = match &mut open.handle {
            Handle::ReadWrite(txn) => txn.get(&key_bytes(key)),
            Handle::ReadOnly(txn) => txn.get(&key_bytes(key)),
        };
        let value = match result {
            Ok(value) => value,
            Err(error) => return self.failed(world, open, "get", error),
        };
        self.count("txn.gets");
        let actual = value.as_deref().map(sig_of);
        let id = open.record.id;
        let own = open.record.writes.get(&key).copied();
        // A read of an own write takes no snapshot (the engine answers from the transaction's buffer).
        let snapshot = match own {
            Some(_) => open.record.snapshot.unwrap_or(u64::MAX),
            None => self.read_snapshot(world, &mut open)?,
        };
        let expected = own.unwrap_or_else(|| self.history.value_at(key, snapshot));
        if actual != expected && (own.is_some() || !self.damage_reaches(world, key, snapshot)) {
            let expected = match own {
                Some(value) => format!("k{key:06} = {} (T{id}'s own write)", self.history.describe(value)),
                None => format!("{} at T{id}'s snapshot {snapshot}", self.history.describe_at(key, snapshot)),
            };
            let actual = format!("k{key:06} = {}", self.history.describe(actual));
            return Err(Violation::new("snapshot_read.get", FailureKind::Safety, expected, actual));
        }
        if own.is_none() {
            open.record.reads.push((key, self.history.writer_at(key, snapshot)));
        }
        self.put_back(open);
        Ok(Observed::Op(Observation::Value { value: actual.and_then(|sig| self.history.spec(sig)) }))
    }

    fn scan(&mut self, world: &mut World, client: ClientId, start: u32, end: u32) -> Outcome {
        if start >= end {
            return Ok(Observed::Skipped);
        }
        let Some(mut open) = self.take_open(client) else { return Ok(Observed::Skipped) };
        open.ops += 1;
        let (start_bytes, end_bytes) = (key_bytes(start), key_bytes(end));
        let range = (Bound::Included(start_bytes.as_slice()), Bound::Excluded(end_bytes.as_slice()));
        let shape = ScanShape::of(start, end);
        let result = match &mut open.handle {
            Handle::ReadWrite(txn) => txn.scan(range).and_then(|rows| shape.read(rows)),
            Handle::ReadOnly(txn) => txn.scan(range).and_then(|rows| shape.read(rows)),
        };
        let rows = match result {
            Ok(rows) => rows,
            Err(error) => return self.failed(world, open, "scan", error),
        };
        // An iterator dropped early protected only what it read (ADR-0085): the model records exactly that.
        let Some((start, end)) = shape.observed(start, end, &rows) else {
            return Err(Violation::new(
                "snapshot_read.scan_shape",
                FailureKind::Safety,
                format!("keys of the form k000000 within [k{start:06}, k{end:06})"),
                format!("{} rows, the last unparsable", rows.len()),
            ));
        };
        self.count("txn.scans");
        let mut found: BTreeMap<u32, u64> = BTreeMap::new();
        let mut hasher = StableHasher::new();
        for (key, value) in &rows {
            let previous = found.keys().next_back().copied();
            let parsed = parse_key(key).filter(|index| (start..end).contains(index));
            let Some(index) = parsed.filter(|&index| previous.is_none_or(|previous| previous < index)) else {
                return Err(Violation::new(
                    "snapshot_read.scan_shape",
                    FailureKind::Safety,
                    format!("keys strictly ascending within [k{start:06}, k{end:06})"),
                    format!("key {:?} (after {previous:?})", String::from_utf8_lossy(key)),
                ));
            };
            hasher.write(key);
            hasher.write(value);
            found.insert(index, sig_of(value));
        }
        let snapshot = self.read_snapshot(world, &mut open)?;
        self.check_scan(world, &open.record, snapshot, (start, end), &found)?;
        let observed =
            self.history.keys_in(start, end).into_iter().map(|key| (key, self.history.writer_at(key, snapshot)));
        open.record.scans.push(ScanRead { start, end, observed: observed.collect() });
        self.put_back(open);
        Ok(Observed::Op(Observation::Scan { entries: rows.len() as u64, hash: hasher.finish() }))
    }

    /// A scan of `[start, end)` found `found`: the history at the snapshot, overlaid with the transaction's writes.
    fn check_scan(
        &mut self,
        world: &mut World,
        record: &TxnRecord,
        snapshot: u64,
        (start, end): (u32, u32),
        found: &BTreeMap<u32, u64>,
    ) -> Result<(), Violation> {
        let mut expected: BTreeMap<u32, u64> = BTreeMap::new();
        for key in self.history.keys_in(start, end) {
            expected.extend(self.history.value_at(key, snapshot).map(|sig| (key, sig)));
        }
        for (&key, &value) in record.writes.range(start..end) {
            match value {
                Some(sig) => expected.insert(key, sig),
                None => expected.remove(&key),
            };
        }
        if *found == expected {
            return Ok(());
        }
        let differing: BTreeSet<u32> =
            expected.keys().chain(found.keys()).copied().filter(|key| expected.get(key) != found.get(key)).collect();
        // Damage excuses a key's row only where it reaches the version the snapshot reads (never an own write).
        let mut excused = true;
        for &key in &differing {
            excused = excused && !record.writes.contains_key(&key) && self.damage_reaches(world, key, snapshot);
        }
        if excused {
            return Ok(());
        }
        let render = |map: &BTreeMap<u32, u64>| {
            let keys: Vec<String> = differing
                .iter()
                .map(|&key| format!("k{key:06} = {}", self.history.describe(map.get(&key).copied())))
                .collect();
            keys.join(", ")
        };
        Err(Violation::new(
            "snapshot_read.scan",
            FailureKind::Safety,
            format!(
                "[k{start:06}, k{end:06}) at T{}'s snapshot {snapshot} (own writes applied): {}",
                record.id,
                render(&expected)
            ),
            render(found),
        ))
    }

    fn write(&mut self, world: &mut World, client: ClientId, key: u32, value: Option<ValueSpec>) -> Outcome {
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
                Ok(Observed::Op(Observation::Buffered))
            }
            Err(error) => self.failed(world, open, if value.is_some() { "put" } else { "delete" }, error),
        }
    }

    fn commit(&mut self, world: &mut World, client: ClientId) -> Outcome {
        let Some(OpenTxn { handle, record, .. }) = self.take_open(client) else { return Ok(Observed::Skipped) };
        let txn = match handle {
            Handle::ReadOnly(txn) => {
                drop(txn);
                self.count("txn.read_only_commits");
                self.add_to_graph(world, &record)?;
                return Ok(Observed::Op(Observation::Committed { txn: record.id }));
            }
            Handle::ReadWrite(txn) => txn,
        };
        let ticket = match txn.submit() {
            Ok(Some(ticket)) => ticket,
            Ok(None) if record.writes.is_empty() => {
                self.count("txn.empty_commits");
                self.add_to_graph(world, &record)?;
                return Ok(Observed::Op(Observation::Committed { txn: record.id }));
            }
            Ok(None) => {
                return Err(Violation::new(
                    "commit.ticket",
                    FailureKind::Safety,
                    format!("a commit ticket for T{}'s {} writes", record.id, record.writes.len()),
                    "no ticket",
                ));
            }
            Err(engine::Error::Conflict { cause }) => return self.conflict_abort(world, record, &cause),
            Err(error) => {
                if !record.writes.is_empty() {
                    // The record may or may not be in the log: in flight, resolved after the reopen.
                    let first_sequence = self.next_sequence;
                    let last_sequence = first_sequence + record.writes.len() as u64 - 1;
                    self.pending.push(Submission { record, first_sequence, last_sequence, ticketed: false });
                    self.count("txn.submit_outcome_unknown");
                }
                return tolerate(world, "submit", &error);
            }
        };
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
        let (txn, last_sequence) = (record.id, ticket.last_sequence);
        self.next_sequence = last_sequence + 1;
        self.pending.push(Submission {
            record,
            first_sequence: last_sequence + 1 - writes,
            last_sequence,
            ticketed: true,
        });
        self.clients.insert(client, Client::Submitted { txn, ticket });
        self.count("txn.submits");
        Ok(Observed::Op(Observation::Submitted { txn, last_sequence }))
    }

    fn ack(&mut self, world: &mut World, client: ClientId) -> Outcome {
        let Some(Client::Submitted { txn, ticket }) = self.clients.remove(&client) else {
            return Ok(Observed::Skipped);
        };
        let db = self.live_db();
        self.ack_cost.before(world.env(), db.stats().log_seals);
        let waited = db.wait_for_commit(&ticket);
        self.ack_cost.after(world.env(), db.stats().log_seals);
        if let Err(error) = waited {
            return tolerate(world, "wait_for_commit", &error);
        }
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
        Ok(Observed::Op(Observation::Acked { txn }))
    }

    fn rollback(&mut self, world: &mut World, client: ClientId) -> Outcome {
        let Some(OpenTxn { handle, record, .. }) = self.take_open(client) else { return Ok(Observed::Skipped) };
        self.count("txn.rollbacks");
        match handle {
            Handle::ReadWrite(txn) => txn.rollback(),
            Handle::ReadOnly(txn) => {
                drop(txn);
                self.add_to_graph(world, &record)?;
            }
        }
        Ok(Observed::Op(Observation::RolledBack { txn: record.id }))
    }

    /// A serialization failure ended `record`'s transaction: check it is explained and classify it.
    fn conflict_abort(&mut self, world: &mut World, record: TxnRecord, cause: &engine::ConflictCause) -> Outcome {
        let reason = cause.to_string();
        if record.read_only {
            return Err(Violation::new(
                "read_only_never_aborts",
                FailureKind::Safety,
                format!("read-only T{} never aborts", record.id),
                reason,
            ));
        }
        if cause.key().is_none() {
            return Err(Violation::new(
                "abort_explained",
                FailureKind::Safety,
                format!("T{}'s conflict names a key or range", record.id),
                reason,
            ));
        }
        let name = cause.name();
        self.count("txn.aborts");
        self.count(&format!("txn.aborts.{name}"));
        if !world.damaged() && !self.would_cycle(&record) {
            self.count("txn.false_aborts");
            self.count(&format!("txn.false_aborts.{name}"));
        }
        Ok(Observed::Op(Observation::Aborted { txn: record.id, reason }))
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

/// How a scan reads its iterator, chosen by its range (not the RNG: schedules are unchanged): forward or from the
/// back, to the end or dropped after a few rows (ADR-0085).
#[derive(Clone, Copy, Debug)]
struct ScanShape {
    reverse: bool,
    /// Rows read before the iterator is dropped; `None`: to the end.
    limit: Option<usize>,
}

/// Rows a partial scan reads before dropping its iterator.
const PARTIAL_SCAN_ROWS: usize = 2;

impl ScanShape {
    fn of(start: u32, end: u32) -> Self {
        let mode = (start.wrapping_mul(7) ^ end) % 4;
        Self { reverse: mode % 2 == 1, limit: (mode < 2).then_some(PARTIAL_SCAN_ROWS) }
    }

    /// The rows, in ascending key order.
    fn read(self, rows: engine::ScanIter<'_>) -> engine::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let limit = self.limit.unwrap_or(usize::MAX);
        if self.reverse {
            let mut read = rows.rev().take(limit).collect::<engine::Result<Vec<_>>>()?;
            read.reverse();
            Ok(read)
        } else {
            rows.take(limit).collect()
        }
    }

    /// The range the scan observed: all of `[start, end)` unless it stopped after `limit` rows, then up to and
    /// including the last row read (from the back: from the last row read). `None` when a row's key does not parse.
    fn observed(self, start: u32, end: u32, rows: &[(Vec<u8>, Vec<u8>)]) -> Option<(u32, u32)> {
        if self.limit.is_none_or(|limit| rows.len() < limit) {
            return Some((start, end));
        }
        if self.reverse {
            Some((parse_key(&rows.first()?.0)?, end))
        } else {
            Some((start, parse_key(&rows.last()?.0)? + 1))
        }
    }
}
