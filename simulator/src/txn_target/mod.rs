//! Concurrent transactions as a simulator target: several clients run serializable transactions against
//! `engine::Db` on `SimEnv`, interleaved by the seed, with group commit, flushes, compactions, crashes and faults
//! in between; every step is checked against a version-history model and the committed history against a
//! serializability checker ([`crate::dsg`]).
//!
//! # Steps
//!
//! Client steps ([`Step::Begin`], `Get`, `Put`, `Delete`, `Scan`, `Commit` = submit, `Ack` = wait for the
//! commit to be acknowledged, `Rollback`) name their client; each client has at most one transaction open or
//! in flight, so many commits can be submitted and waiting for the shared sync at once. System steps:
//! `RunTask{group-commit|flush|compaction}`, `Flush`, `Compact`, `Crash`, `CrashAtIo{k}`, `Fault`, `Reopen`.
//! A step whose precondition is gone is skipped.
//!
//! # Model
//!
//! [`History`]: per key, the versions of every commit that became *visible* (`db.last_sequence()` reached its
//! ticket's sequence), keyed by the sequences the engine assigned (the batch is in key order, so the write at
//! index `i` has sequence `first + i`). A transaction's snapshot is what `t.snapshot()` reports (a read-only
//! transaction may read at a snapshot older than the latest visible one: its safe snapshot).
//!
//! # Invariants
//!
//! * **Snapshot reads** (`snapshot_read.get`, `snapshot_read.scan`): every read returns the history at the
//!   transaction's snapshot, overlaid with its own writes.
//! * **Serializability** (`serializable`): each commit, when it becomes visible (and each read-only or write-less
//!   transaction, when it ends), goes into the DSG with the versions it read; a cycle is a failure whose `actual`
//!   is the cycle (`T3 -rw(k000002)-> T5 -rw(k000007)-> T3`; [`failure_dot`] draws it).
//! * **Atomic snapshots** (`snapshot_atomic`): no transaction's snapshot falls inside a multi-write commit's
//!   sequences (it would see part of that commit).
//! * **Read-only transactions never abort** (`read_only_never_aborts`).
//! * **Acknowledged means visible** (`ack_visible`), **sequences increase** (`sequence_monotonic`), nothing
//!   becomes visible that was not submitted (`visibility.unknown_sequence`).
//! * **Atomicity across crashes** (`atomicity.partial_commit`, `atomicity.prefix`, `durability.*`): after a
//!   crash or reopen every visible commit is wholly present, every aborted transaction wholly absent, and each
//!   in-flight commit (submitted, not visible) wholly present or wholly absent — the present ones a prefix in
//!   sequence order; resolved by reading their keys.
//! * **Aborts are explained** (`abort_explained`): every conflict names a key.
//! * **Structural** (`structural`): `db.check_invariants()` after every step that can change structure.
//! * **Liveness**: healed, the database reopens, drains, flushes, compacts, and every key verifies.
//!
//! # Faults
//!
//! The engine target's rule table ([`crate::engine_target::excuses_errors`]): a fault excuses typed errors until
//! the next clean open; only `read_corruption` excuses `Corruption`. Data-destroying faults (latent sectors,
//! misdirected writes, bit flips) are turned off for this target: they would void the history checks, and the
//! engine target covers them.
//!
//! # Coverage counters
//!
//! `txn.begins`, `txn.read_only_begins`, `txn.commits` (read-write commits made visible or found present),
//! `txn.read_only_commits`, `txn.empty_commits`, `txn.aborts`, `txn.aborts.<cause>` (`ww`, `rw`, `dangerous`,
//! `read_only_guard`, `other`), `txn.false_aborts` (had the transaction committed, after every pending commit,
//! it would not have closed a DSG cycle) and `txn.false_aborts.<cause>`,
//! `txn.rollbacks`, `txn.dropped` (open when a crash or reopen came), `txn.gets`, `txn.scans`,
//! `txn.group_commit_batches` (more than one commit made visible at once), `txn.in_flight_present`,
//! `txn.in_flight_absent`, `txn.old_snapshot_across_compaction`, `crash.between_commit_append_and_sync`,
//! `crash.mid_append`, `crash.mid_flush`, `crash.mid_compaction`, `crash.mid_manifest`, `crashes`,
//! `recoveries`, `reopens`, `flushes`, `compactions`, `fault.<kind>`, `errors_tolerated`, `dsg.transactions`.

mod exec;
mod model;
mod step;

use std::collections::BTreeMap;

use engine::{CommitTicket, Db, Options, ReadTransaction, Transaction};
use env::{DeterministicRng, FaultKind, Op, SimEnv};

pub use self::model::{History, ScanRead, Submission, TxnRecord, Version};
pub use self::step::{ClientId, Observed, Step};
use crate::config::{SwarmConfig, healed_faults};
use crate::dsg::{Cycle, DependencyGraph, Edge, EdgeKind, TxnId};
use crate::engine_target::{DB_DIR, EngineTarget, OPEN_ATTEMPTS_MAX, RECOVERY_ROUNDS_MAX, TASK_DRAIN_STEPS_MAX};
use crate::engine_target::{excuses_errors, key_bytes};
use crate::runner::Failure;
use crate::target::{Coverage, FailureKind, FaultTracker, Target, Violation};

/// The invariant name of a serializability failure.
pub const SERIALIZABLE: &str = "serializable";
/// The fewest and most clients a run has.
pub const CLIENTS_MIN: u32 = 2;
pub const CLIENTS_MAX: u32 = 6;
/// The smallest and largest key space.
pub const KEY_COUNT_MIN: u32 = 4;
pub const KEY_COUNT_MAX: u32 = 32;

/// The per-seed shape of the transaction workload: a pure function of the seed (its `"txn"` stream) and the
/// swarm configuration (which turns crashes, reopens and faults on or off).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnConfig {
    pub clients: u32,
    pub key_count: u32,
    /// The chance a transaction is read-only.
    pub read_only_ppm: u32,
    /// The chance a transaction is long-lived (20..=80 operations: it stays open across flushes and
    /// compactions).
    pub long_ppm: u32,
    /// Ordinary transactions do `1..=ops_max` operations.
    pub ops_max: u32,
    pub rollback_ppm: u32,
    /// The chance a client with a submitted commit waits for it when chosen (else another client moves).
    pub ack_ppm: u32,
    pub scan_keys_max: u32,
    pub value_len_max: u32,
    /// Operation weights inside a transaction: get, put, delete, scan.
    pub op_weights: [u64; 4],
    /// Step weights: client step, run task, flush, compact, reopen, fault, crash, crash at IO.
    pub step_weights: [u64; 8],
}

impl TxnConfig {
    /// The configuration of `seed` under `swarm`.
    pub fn derive(seed: u64, swarm: &SwarmConfig) -> Self {
        let mut rng = DeterministicRng::stream(seed, "txn");
        let clients = u32::try_from(rng.range_inclusive(u64::from(CLIENTS_MIN), u64::from(CLIENTS_MAX))).expect("fits");
        let key_count = match rng.weighted(&[40, 35, 25]) {
            0 => rng.range_inclusive(u64::from(KEY_COUNT_MIN), 8),
            1 => rng.range_inclusive(9, 16),
            _ => rng.range_inclusive(17, u64::from(KEY_COUNT_MAX)),
        };
        let key_count = u32::try_from(key_count).expect("fits");
        let ppm = |rng: &mut DeterministicRng, low: u64, high: u64| {
            u32::try_from(rng.range_inclusive(low, high)).expect("ppm fits")
        };
        let read_only_ppm = ppm(&mut rng, 50_000, 400_000);
        let long_ppm = ppm(&mut rng, 30_000, 250_000);
        let ops_max = u32::try_from(rng.range_inclusive(2, 8)).expect("fits");
        let rollback_ppm = ppm(&mut rng, 0, 80_000);
        let ack_ppm = ppm(&mut rng, 200_000, 1_000_000);
        let scan_keys_max = u32::try_from(rng.range_inclusive(1, u64::from(key_count))).expect("fits");
        let value_len_max = swarm.workload.value_size_bytes_max.min(256);
        let op_weights = [
            rng.range_inclusive(10, 40),
            rng.range_inclusive(10, 40),
            rng.range_inclusive(0, 10),
            if rng.chance_ppm(200_000) { 0 } else { rng.range_inclusive(2, 15) },
        ];
        let on = |weight: u64, rng: &mut DeterministicRng, low: u64, high: u64| {
            if weight == 0 { 0 } else { rng.range_inclusive(low, high) }
        };
        let weights = &swarm.weights;
        let step_weights = [
            100,
            rng.range_inclusive(5, 40),
            on(weights.flush.max(1), &mut rng, 1, 4),
            if rng.chance_ppm(100_000) { 0 } else { rng.range_inclusive(1, 4) },
            on(weights.reopen, &mut rng, 1, 1),
            on(weights.fault, &mut rng, 1, 1),
            on(weights.crash, &mut rng, 1, 1),
            on(weights.crash_at_io, &mut rng, 1, 3),
        ];
        Self {
            clients,
            key_count,
            read_only_ppm,
            long_ppm,
            ops_max,
            rollback_ppm,
            ack_ppm,
            scan_keys_max,
            value_len_max,
            op_weights,
            step_weights,
        }
    }
}

/// An open transaction's engine handle.
#[derive(Debug)]
enum Handle {
    ReadWrite(Transaction<SimEnv>),
    ReadOnly(ReadTransaction<SimEnv>),
}

/// An open transaction: its handle and what it did so far.
#[derive(Debug)]
struct OpenTxn {
    handle: Handle,
    record: TxnRecord,
    ops: u32,
}

/// What a client is doing.
#[derive(Debug)]
enum Client {
    Open(OpenTxn),
    /// Submitted; waiting for the acknowledgement.
    Submitted {
        txn: TxnId,
        ticket: CommitTicket,
    },
}

/// What a step was doing when an armed crash cut it (for the crash-place coverage counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Activity {
    Client,
    Flush,
    Compaction,
    Recovery,
}

/// The transaction target's state.
#[derive(Debug)]
pub struct TxnTarget {
    env: SimEnv,
    db: Option<Db<SimEnv>>,
    options: Options,
    config: SwarmConfig,
    plan: TxnConfig,
    clients: BTreeMap<ClientId, Client>,
    /// The operation count each client's current transaction is meant to reach (generation only).
    targets: BTreeMap<ClientId, u32>,
    history: History,
    graph: DependencyGraph,
    /// Submitted read-write commits not yet visible, in sequence order.
    pending: Vec<Submission>,
    /// Summaries of the transactions in the DSG (for cycle reports).
    finished: BTreeMap<TxnId, String>,
    next_txn: TxnId,
    next_value_id: u64,
    /// The sequence the engine will give the next commit's first write (for commits whose submit failed).
    next_sequence: u64,
    armed: Option<u64>,
    /// The last step armed a crash: the generator prefers a group-commit step next.
    after_arm: bool,
    excused: bool,
    corruption_excused: bool,
    /// A data-destroying fault fired anyway: history checks are off for the rest of the run.
    damaged: bool,
    unrecoverable: bool,
    reopen_pending: bool,
    structure_dirty: bool,
    faults: FaultTracker,
    crashes_classified: u64,
    last_open_error: String,
    counters: Coverage,
}

impl TxnTarget {
    /// The per-seed workload shape of this run.
    pub fn plan(&self) -> &TxnConfig {
        &self.plan
    }

    /// The version history of visible commits.
    pub fn history(&self) -> &History {
        &self.history
    }

    fn count(&mut self, name: &str) {
        self.counters.add(name, 1);
    }

    fn poll_faults(&mut self) {
        for kind in self.faults.poll(&self.env) {
            self.damaged |= kind.destroys_data();
            self.excused |= excuses_errors(kind);
            self.corruption_excused |= kind == FaultKind::ReadCorruption;
        }
    }

    fn error_allowed(&mut self, error: &engine::Error) -> bool {
        self.poll_faults();
        if error.is_crash() || error.is_conflict() {
            return false;
        }
        if error.is_corruption() {
            return self.corruption_excused || self.damaged;
        }
        self.excused || self.damaged
    }

    fn drop_db(&mut self) {
        if let Some(db) = self.db.take() {
            let stats = db.stats();
            self.counters.add("flushes", stats.flush_count);
            self.counters.add("compactions", stats.compaction_count);
            drop(db);
        }
    }

    /// End every client's transaction (a crash or reopen is coming): read-only ones end normally and join the
    /// DSG; read-write ones are rolled back; submitted commits stay in flight.
    fn drop_clients(&mut self) -> Result<(), Violation> {
        let clients = std::mem::take(&mut self.clients);
        for (_, client) in clients {
            if let Client::Open(open) = client {
                self.count("txn.dropped");
                let read_only = open.record.read_only;
                drop(open.handle);
                if read_only {
                    self.finish_without_writes(&open.record)?;
                }
            }
        }
        assert!(self.clients.is_empty());
        Ok(())
    }

    /// A transaction that wrote nothing ended (committed or read-only): it joins the DSG.
    fn finish_without_writes(&mut self, record: &TxnRecord) -> Result<(), Violation> {
        assert!(record.writes.is_empty(), "finish_without_writes with writes");
        self.add_to_graph(record)
    }

    fn add_to_graph(&mut self, record: &TxnRecord) -> Result<(), Violation> {
        if self.damaged {
            return Ok(());
        }
        self.count("dsg.transactions");
        self.finished.insert(record.id, record.summary());
        match self.graph.commit(&record.to_committed()) {
            None => Ok(()),
            Some(cycle) => Err(self.cycle_violation(&cycle, record)),
        }
    }

    fn cycle_violation(&self, cycle: &Cycle, closing: &TxnRecord) -> Violation {
        let members: Vec<String> = cycle
            .edges
            .iter()
            .map(|edge| edge.from)
            .map(|id| match self.describe_txn(id) {
                Some(text) => text,
                None if id == closing.id => closing.summary(),
                None => format!("T{id}"),
            })
            .collect();
        Violation::new(
            SERIALIZABLE,
            FailureKind::Safety,
            format!("an acyclic DSG (a serializable history); the cycle's transactions: {}", members.join(" ")),
            cycle.render(),
        )
    }

    /// Make visible commits part of the model: every pending commit up to `db.last_sequence()`.
    fn absorb_visible(&mut self) -> Result<(), Violation> {
        let Some(db) = &self.db else { return Ok(()) };
        let last = db.last_sequence();
        let mut absorbed = 0;
        while self.pending.first().is_some_and(|front| front.last_sequence <= last) {
            let submission = self.pending.remove(0);
            self.commit_visible(&submission)?;
            absorbed += 1;
        }
        if absorbed > 1 {
            self.count("txn.group_commit_batches");
        }
        if last > self.history.visible() && !self.damaged {
            return Err(Violation::new(
                "visibility.unknown_sequence",
                FailureKind::Safety,
                format!("db.last_sequence() <= {} (the last submitted commit made visible)", self.history.visible()),
                format!("{last} (pending: {:?})", self.pending.iter().map(|s| s.last_sequence).collect::<Vec<_>>()),
            ));
        }
        Ok(())
    }

    fn commit_visible(&mut self, submission: &Submission) -> Result<(), Violation> {
        self.history.apply(&submission.record, submission.first_sequence);
        self.next_sequence = self.next_sequence.max(submission.last_sequence + 1);
        self.count("txn.commits");
        self.add_to_graph(&submission.record)
    }

    /// Count where an armed crash landed (once per crash).
    fn classify_crash(&mut self, activity: Activity) {
        let crashes = self.env.crash_count();
        if crashes <= self.crashes_classified {
            return;
        }
        self.crashes_classified = crashes;
        let Some((op, path)) = self.env.last_crash() else { return };
        let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        let mut places = Vec::new();
        if activity == Activity::Recovery {
            places.push("crash.during_recovery");
        }
        if name.starts_with("wal-") && op == Op::Write {
            places.push("crash.mid_append");
        }
        if name.starts_with("wal-") && op == Op::Sync {
            places.push("crash.between_append_and_sync");
            if !self.pending.is_empty() {
                places.push("crash.between_commit_append_and_sync");
            }
        }
        if name.starts_with("MANIFEST") {
            places.push("crash.mid_manifest");
        }
        match activity {
            Activity::Flush => places.push("crash.mid_flush"),
            Activity::Compaction => places.push("crash.mid_compaction"),
            Activity::Client if name.starts_with("table-") => places.push("crash.mid_flush"),
            _ => {}
        }
        for place in places {
            self.count(place);
        }
    }

    /// Open the database, retrying failures a fault justifies.
    fn open_db(&mut self) -> Result<bool, Violation> {
        assert!(self.db.is_none(), "open_db with a database already open");
        for _ in 0..OPEN_ATTEMPTS_MAX {
            self.poll_faults();
            let faults_before = self.faults.total();
            match Db::open(self.env.clone(), DB_DIR, self.options.clone()) {
                Ok(db) => {
                    self.next_sequence = db.last_sequence() + 1;
                    self.db = Some(db);
                    self.poll_faults();
                    let faulted = self.faults.total() != faults_before;
                    self.excused &= faulted;
                    self.corruption_excused &= faulted;
                    return Ok(true);
                }
                Err(_) if self.env.is_halted() => {
                    self.classify_crash(Activity::Recovery);
                    return Ok(false);
                }
                Err(error) if !self.error_allowed(&error) => {
                    return Err(Violation::new(
                        "recovery.open",
                        FailureKind::Durability,
                        "Db::open succeeds (no fault justifies a failure)",
                        error.to_string(),
                    ));
                }
                Err(error) => {
                    self.last_open_error = error.to_string();
                    self.count("errors_tolerated");
                }
            }
        }
        Ok(false)
    }

    /// Recover after a crash or a reopen: end every client's transaction, restart the world if halted, open,
    /// resolve in-flight commits and verify every key.
    fn recover(&mut self) -> Result<Observed, Violation> {
        self.absorb_visible()?;
        self.drop_clients()?;
        for _ in 0..RECOVERY_ROUNDS_MAX {
            self.drop_db();
            if self.env.is_halted() {
                // An armed crash cut the step, or the previous round's open or reads.
                self.env.restart();
            }
            if !self.open_db()? {
                if self.env.is_halted() {
                    self.count("crashes");
                    continue;
                }
                break;
            }
            let last_sequence = self.db.as_ref().map_or(0, Db::last_sequence);
            if last_sequence < self.history.visible() && !self.damaged {
                return Err(Violation::new(
                    "sequence_recovered",
                    FailureKind::Durability,
                    format!("last_sequence >= {} (the highest visible commit before)", self.history.visible()),
                    last_sequence.to_string(),
                ));
            }
            let resolved = self.resolve_in_flight()?;
            let verified = resolved.is_some() && self.verify_all("durability")?;
            if self.env.is_halted() {
                self.classify_crash(Activity::Recovery);
                self.count("crashes");
                continue;
            }
            let (Some((present, absent)), true) = (resolved, verified) else {
                return Ok(Observed::Error { class: "recovery_read".into() });
            };
            self.count("recoveries");
            let last_sequence = self.db.as_ref().map_or(0, Db::last_sequence);
            return Ok(Observed::Recovered { last_sequence, present, absent });
        }
        if self.env.is_halted() {
            self.drop_db();
            self.env.restart();
        }
        if self.damaged {
            self.unrecoverable = true;
        }
        Ok(Observed::Unavailable { reason: self.last_open_error.clone() })
    }

    /// After an open: decide, by reading their keys, which in-flight commits made it. `Ok(None)` when a read
    /// failed with a justified error (the database is dropped; the next step reopens and tries again).
    fn resolve_in_flight(&mut self) -> Result<Option<(u64, u64)>, Violation> {
        if self.pending.is_empty() {
            return Ok(Some((0, 0)));
        }
        let db = self.db.clone().expect("resolve_in_flight needs an open database");
        let recovered_last = db.last_sequence();
        let mut verdicts = Vec::new();
        for submission in &self.pending {
            let (mut new, mut old) = (Vec::new(), Vec::new());
            for (&key, &value) in &submission.record.writes {
                let actual = match db.get(&key_bytes(key)) {
                    Ok(actual) => actual.map(|bytes| crate::engine_target::sig_of(&bytes)),
                    Err(error) if self.env.is_halted() || self.error_allowed(&error) => {
                        self.count("errors_tolerated");
                        self.drop_db();
                        return Ok(None);
                    }
                    Err(error) => {
                        return Err(Violation::new(
                            "recovery.read",
                            FailureKind::UnexpectedError,
                            format!("get k{key:06} succeeds (no fault justifies an error)"),
                            error.to_string(),
                        ));
                    }
                };
                let previous = self.history.latest_value(key);
                match (actual == value, actual == previous) {
                    (true, true) => {}
                    (true, false) => new.push(key),
                    (false, true) => old.push(key),
                    (false, false) if self.damaged => {}
                    (false, false) => {
                        return Err(Violation::new(
                            "durability.unexpected_value",
                            FailureKind::Durability,
                            format!(
                                "k{key:06} = {} (in-flight T{}) or {} (before it)",
                                self.history.describe(value),
                                submission.record.id,
                                self.history.describe(previous)
                            ),
                            format!("k{key:06} = {}", self.history.describe(actual)),
                        ));
                    }
                }
            }
            if !new.is_empty() && !old.is_empty() && !self.damaged {
                return Err(Violation::new(
                    "atomicity.partial_commit",
                    FailureKind::Durability,
                    format!(
                        "in-flight commit T{} wholly present or wholly absent after recovery",
                        submission.record.id
                    ),
                    format!("present: {:?}; absent: {:?}", new, old),
                ));
            }
            let present = if !new.is_empty() {
                true
            } else if !old.is_empty() {
                false
            } else {
                submission.last_sequence <= recovered_last
            };
            verdicts.push(present);
        }
        if let Some(first_absent) = verdicts.iter().position(|present| !present)
            && let Some(offset) = verdicts[first_absent..].iter().position(|&present| present)
            && !self.damaged
        {
            let (absent, present) = (&self.pending[first_absent], &self.pending[first_absent + offset]);
            return Err(Violation::new(
                "atomicity.prefix",
                FailureKind::Durability,
                "the in-flight commits that survive a crash are a prefix in sequence order",
                format!(
                    "T{} (seq {}..={}) absent but T{} (seq {}..={}) present",
                    absent.record.id,
                    absent.first_sequence,
                    absent.last_sequence,
                    present.record.id,
                    present.first_sequence,
                    present.last_sequence
                ),
            ));
        }
        let pending = std::mem::take(&mut self.pending);
        let (mut present_count, mut absent_count) = (0, 0);
        for (submission, present) in pending.iter().zip(verdicts) {
            if present {
                present_count += 1;
                self.count("txn.in_flight_present");
                if submission.last_sequence > recovered_last && !self.damaged {
                    return Err(Violation::new(
                        "sequence_recovered",
                        FailureKind::Durability,
                        format!("last_sequence >= {} (T{} is present)", submission.last_sequence, submission.record.id),
                        recovered_last.to_string(),
                    ));
                }
                self.commit_visible(submission)?;
            } else {
                absent_count += 1;
                self.count("txn.in_flight_absent");
            }
        }
        self.next_sequence = recovered_last + 1;
        Ok(Some((present_count, absent_count)))
    }

    /// Read every key of the key space (and every key the history knows) and compare with the latest version.
    /// `Ok(false)` when a read failed with a justified error (the database is dropped).
    fn verify_all(&mut self, context: &str) -> Result<bool, Violation> {
        let mut keys: Vec<u32> = (0..self.plan.key_count).collect();
        keys.extend(self.history.keys().filter(|&key| key >= self.plan.key_count));
        for key in keys {
            let Some(db) = &self.db else { return Ok(false) };
            match db.get(&key_bytes(key)) {
                Ok(value) => {
                    let actual = value.as_deref().map(crate::engine_target::sig_of);
                    let expected = self.history.latest_value(key);
                    if actual != expected && !self.damaged {
                        let class = match (expected, actual) {
                            (Some(_), None) => "lost_commit",
                            (None, Some(_)) => "resurrection_or_aborted_write",
                            _ => "stale_value",
                        };
                        return Err(Violation::new(
                            format!("{context}.{class}"),
                            FailureKind::Durability,
                            self.history.describe_at(key, u64::MAX),
                            format!("k{key:06} = {}", self.history.describe(actual)),
                        ));
                    }
                }
                Err(error) if self.env.is_halted() || self.error_allowed(&error) => {
                    self.count("errors_tolerated");
                    self.drop_db();
                    return Ok(false);
                }
                Err(error) => {
                    return Err(Violation::new(
                        format!("{context}.read"),
                        FailureKind::UnexpectedError,
                        format!("get k{key:06} succeeds (no fault justifies an error)"),
                        error.to_string(),
                    ));
                }
            }
        }
        Ok(true)
    }

    /// A transaction's summary, if it is open, in flight or in the DSG (for cycle reports).
    fn describe_txn(&self, id: TxnId) -> Option<String> {
        let open = self.clients.values().find_map(|client| match client {
            Client::Open(open) if open.record.id == id => Some(open.record.summary()),
            _ => None,
        });
        open.or_else(|| self.pending.iter().find(|s| s.record.id == id).map(|s| s.record.summary()))
            .or_else(|| self.finished.get(&id).cloned())
    }

    /// Close cleanly (after ending every transaction), then recover.
    fn reopen(&mut self) -> Result<Observed, Violation> {
        self.drop_clients()?;
        if let Some(db) = &self.db {
            let closed = db.close();
            if let Err(error) = closed {
                if !self.env.is_halted() && !self.error_allowed(&error) {
                    return Err(Violation::new(
                        "no_unexpected_error.close",
                        FailureKind::UnexpectedError,
                        "Ok (no fault or crash justifies an error)",
                        error.to_string(),
                    ));
                }
                self.count("errors_tolerated");
            }
        }
        self.absorb_visible()?;
        self.count("reopens");
        self.recover()
    }

    /// The liveness phase: heal, reopen cleanly, drain, verify, flush, compact, verify.
    fn liveness(&mut self) -> Result<(), Violation> {
        self.armed = None;
        self.env.disarm_crash();
        self.env.set_fault_config(healed_faults(&self.config.faults));
        self.env.set_buggify(false);
        self.poll_faults();
        if self.env.is_halted() {
            self.env.restart();
        }
        self.drop_clients()?;
        if let Some(db) = &self.db {
            let _ = db.close();
        }
        self.absorb_visible()?;
        self.drop_db();
        self.excused = false;
        self.corruption_excused = false;
        let recovered = self.recover()?;
        if self.db.is_none() || !matches!(recovered, Observed::Recovered { .. }) {
            if self.damaged {
                self.unrecoverable = true;
                return Ok(());
            }
            return Err(Violation::new(
                "liveness.open",
                FailureKind::Liveness,
                "Db::open succeeds and every key verifies once healed",
                format!("{recovered:?}"),
            ));
        }
        self.drain("liveness.drain")?;
        let db = self.db.clone().expect("opened above");
        if let Err(error) = db.flush().and_then(|()| db.compact()) {
            if self.damaged {
                self.unrecoverable = true;
                return Ok(());
            }
            return Err(Violation::new(
                "liveness.flush_compact",
                FailureKind::Liveness,
                "flush and compact succeed once healed",
                error.to_string(),
            ));
        }
        self.drain("liveness.drain_after_compact")?;
        if !self.verify_all("liveness")? {
            return Err(Violation::new(
                "liveness.verify",
                FailureKind::Liveness,
                "reads succeed once healed",
                "failed",
            ));
        }
        Ok(())
    }

    fn drain(&mut self, invariant: &str) -> Result<(), Violation> {
        let steps = self.env.run_tasks(TASK_DRAIN_STEPS_MAX);
        let left = self.env.runnable_tasks();
        if !left.is_empty() {
            return Err(Violation::new(
                invariant,
                FailureKind::Liveness,
                format!("background work drains within {TASK_DRAIN_STEPS_MAX} task steps"),
                format!("{} tasks still runnable after {steps} steps: {left:?}", left.len()),
            ));
        }
        self.absorb_visible()
    }
}

impl Target for TxnTarget {
    const NAME: &'static str = "txn";
    type Step = Step;
    type Observation = Observed;

    fn open(env: SimEnv, config: &SwarmConfig) -> Result<Self, Violation> {
        // Data-destroying faults void the history checks: off for this target (the engine target covers them).
        let mut faults = config.faults.clone();
        faults.latent_sector_ppm = 0;
        faults.misdirected_write_ppm = 0;
        env.set_fault_config(faults);
        let plan = TxnConfig::derive(env.seed(), config);
        let mut target = Self {
            options: EngineTarget::options_for(config),
            env,
            db: None,
            config: config.clone(),
            plan,
            clients: BTreeMap::new(),
            targets: BTreeMap::new(),
            history: History::default(),
            graph: DependencyGraph::new(),
            pending: Vec::new(),
            finished: BTreeMap::new(),
            next_txn: 1,
            next_value_id: 1,
            next_sequence: 1,
            armed: None,
            after_arm: false,
            excused: false,
            corruption_excused: false,
            damaged: false,
            unrecoverable: false,
            reopen_pending: false,
            structure_dirty: true,
            faults: FaultTracker::default(),
            crashes_classified: 0,
            last_open_error: String::new(),
            counters: Coverage::default(),
        };
        target.open_db()?;
        Ok(target)
    }

    fn generate(&mut self, rng: &mut DeterministicRng, config: &SwarmConfig) -> Step {
        self.generate_step(rng, config)
    }

    fn apply(&mut self, step: &Step) -> Result<Observed, Violation> {
        self.apply_step(step)
    }

    fn check(&mut self) -> Result<(), Violation> {
        if !std::mem::take(&mut self.structure_dirty) {
            return Ok(());
        }
        let Some(db) = &self.db else { return Ok(()) };
        db.check_invariants().map_err(|message| {
            Violation::new("structural", FailureKind::Structural, "db.check_invariants() == Ok", message)
        })
    }

    fn crash_recover(&mut self) -> Result<(), Violation> {
        if self.unrecoverable {
            return Ok(());
        }
        self.env.crash();
        self.count("crashes");
        let recovered = self.recover()?;
        if (self.db.is_none() || !matches!(recovered, Observed::Recovered { .. })) && !self.damaged {
            return Err(Violation::new(
                "liveness.final_recovery",
                FailureKind::Liveness,
                "the database opens and verifies after the final crash",
                format!("{recovered:?}"),
            ));
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), Violation> {
        self.liveness()
    }

    fn coverage(&self) -> Coverage {
        let mut coverage = self.counters.clone();
        for (kind, count) in self.env.fault_counts() {
            coverage.add(&format!("fault.{}", kind.name()), count);
        }
        if let Some(db) = &self.db {
            let stats = db.stats();
            coverage.add("flushes", stats.flush_count);
            coverage.add("compactions", stats.compaction_count);
        }
        coverage.add("damaged_runs", u64::from(self.damaged));
        coverage.add("unrecoverable_runs", u64::from(self.unrecoverable));
        coverage
    }

    fn required_coverage(config: &SwarmConfig) -> Vec<String> {
        let mut names: Vec<String> = [
            "txn.commits",
            "txn.aborts",
            "txn.read_only_commits",
            "txn.group_commit_batches",
            "flushes",
            "compactions",
        ]
        .map(String::from)
        .to_vec();
        if config.weights.crash_at_io > 0 {
            names.push("crash.between_commit_append_and_sync".into());
            names.push("txn.in_flight_absent".into());
        }
        names
    }
}

/// Abort and false-abort rates from a run's (or a swarm's) coverage: `(aborts / (aborts + commits),
/// false_aborts / aborts)`, in parts per million.
pub fn abort_rates_ppm(coverage: &Coverage) -> (u64, u64) {
    let aborts = coverage.get("txn.aborts");
    let commits = coverage.get("txn.commits");
    let ppm = |part: u64, whole: u64| part.saturating_mul(1_000_000).checked_div(whole).unwrap_or(0);
    (ppm(aborts, aborts + commits), ppm(coverage.get("txn.false_aborts"), aborts))
}

/// One line for reports: `commits 310, aborts 52 (14.4%), false aborts 11 (21.2% of aborts)`.
pub fn abort_summary(coverage: &Coverage) -> String {
    let (abort_ppm, false_ppm) = abort_rates_ppm(coverage);
    format!(
        "commits {}, aborts {} ({}.{}%), false aborts {} ({}.{}% of aborts)",
        coverage.get("txn.commits"),
        coverage.get("txn.aborts"),
        abort_ppm / 10_000,
        abort_ppm / 1_000 % 10,
        coverage.get("txn.false_aborts"),
        false_ppm / 10_000,
        false_ppm / 1_000 % 10
    )
}

/// Parse a rendered cycle (`T3 -rw(k000002)-> T5 -ww(k000007)-> T3`, as [`Cycle::render`] writes it).
pub fn parse_cycle(text: &str) -> Option<Cycle> {
    let mut rest = text.trim().strip_prefix('T')?;
    let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let mut from: TxnId = rest[..digits].parse().ok()?;
    rest = &rest[digits..];
    let mut edges = Vec::new();
    while !rest.is_empty() {
        rest = rest.strip_prefix(" -")?;
        let open = rest.find('(')?;
        let kind = match &rest[..open] {
            "ww" => EdgeKind::Ww,
            "wr" => EdgeKind::Wr,
            "rw" => EdgeKind::Rw,
            _ => return None,
        };
        let close = rest.find(")-> T")?;
        let key = rest.as_bytes()[open + 1..close].to_vec();
        rest = &rest[close + ")-> T".len()..];
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let to: TxnId = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        edges.push(Edge { from, to, kind, key });
        from = to;
    }
    (!edges.is_empty()).then_some(Cycle { edges })
}

/// The Graphviz DOT of a serializability failure's cycle (for `--dot FILE`); None for any other failure.
pub fn failure_dot(failure: &Failure) -> Option<String> {
    if failure.invariant != SERIALIZABLE {
        return None;
    }
    parse_cycle(&failure.actual).map(|cycle| cycle.to_dot())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_cycles_parse_back() {
        let cycle = Cycle {
            edges: vec![
                Edge { from: 3, to: 5, kind: EdgeKind::Rw, key: b"k000002".to_vec() },
                Edge { from: 5, to: 12, kind: EdgeKind::Ww, key: b"k000007".to_vec() },
                Edge { from: 12, to: 3, kind: EdgeKind::Wr, key: b"k000001".to_vec() },
            ],
        };
        assert_eq!(parse_cycle(&cycle.render()), Some(cycle.clone()));
        assert_eq!(parse_cycle("T1"), None);
        assert_eq!(parse_cycle("not a cycle"), None);
        assert!(cycle.to_dot().contains("T5 -> T12"));
    }

    #[test]
    fn configs_are_pure_and_in_range() {
        for seed in 0..50 {
            let swarm = SwarmConfig::from_seed(seed);
            let plan = TxnConfig::derive(seed, &swarm);
            assert_eq!(plan, TxnConfig::derive(seed, &swarm));
            assert!((CLIENTS_MIN..=CLIENTS_MAX).contains(&plan.clients));
            assert!((KEY_COUNT_MIN..=KEY_COUNT_MAX).contains(&plan.key_count));
        }
    }

    #[test]
    fn rates_are_ppm() {
        let mut coverage = Coverage::default();
        coverage.add("txn.commits", 75);
        coverage.add("txn.aborts", 25);
        coverage.add("txn.false_aborts", 5);
        assert_eq!(abort_rates_ppm(&coverage), (250_000, 200_000));
        assert_eq!(abort_summary(&coverage), "commits 75, aborts 25 (25.0%), false aborts 5 (20.0% of aborts)");
    }
}

/// Shrinking for the transaction target (ADR-0030): ddmin and single-step removal need no knowledge of the steps;
/// the configuration simplifies as the engine target's does.
#[derive(Debug, Default)]
pub struct TxnSimplify;

impl shrinker::Simplify for TxnSimplify {
    type Step = Step;
    type Config = crate::config::SwarmConfig;

    fn simplify_config(&self, config: &crate::config::SwarmConfig) -> Vec<crate::config::SwarmConfig> {
        shrinker::Simplify::simplify_config(&crate::engine_target::simplify::EngineSimplify, config)
    }
}
