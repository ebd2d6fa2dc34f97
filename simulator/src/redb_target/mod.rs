//! redb as a simulator target (ADR-0038): a database nobody here wrote, run on a `SimEnv` file through its
//! `StorageBackend` trait ([`backend::EnvBackend`]), driven by seeded write and read transactions, crashes and
//! (in the `beyond` profile) media faults, and checked against a model after every step.
//!
//! # Invariants
//!
//! * **Durability** (`durability.*`): after every crash and reopen, the table holds exactly the committed state:
//!   every transaction whose `commit()` returned Ok (with `Durability::Immediate`) survives.
//! * **Atomicity** (`atomicity.partial_transaction`): a transaction whose commit was cut by a crash or failed with
//!   an error is *in flight*: after recovery the table holds the state before it or the state after it, never a
//!   part of it. An aborted transaction is never visible.
//! * **Reads** (`oracle.*`): every read transaction sees the committed state; a long-lived read transaction keeps
//!   seeing the state it began at while later transactions commit (`oracle.snapshot`).
//! * **Recovery** (`recovery.open`): reopening after any crash succeeds; when it fails, the violation shows redb's
//!   error. Under `beyond`, a refusal to open after a data-destroying fault is recorded (`Unavailable`, the run's
//!   `redb.unrecoverable_runs`) and the run only records from then on.
//! * **Errors** (`unexpected_error`): redb returns no error unless an injected fault justifies it (the `beyond`
//!   profile; never under `assumed`, where only crashes happen).
//! * **Structural** (`structural.integrity`): `Database::check_integrity()` finds nothing to repair (steps
//!   `CheckIntegrity`, and the liveness phase).
//! * **Liveness** (`liveness.*`): with faults healed, the database opens, a write commits, and every key verifies;
//!   then a final power cut loses nothing committed.
//!
//! # Coverage counters
//!
//! `redb.commits`, `redb.aborts`, `redb.reads`, `redb.snapshot_reads`, `redb.compactions`, `redb.integrity_checks`,
//! `redb.repairs` (opens that ran redb's repair), `redb.in_flight_applied`, `redb.in_flight_lost`,
//! `redb.errors_tolerated` (errors an injected fault justified: zero under `assumed`), `redb.errors_cut_by_crash`,
//! `redb.unrecoverable_runs`; `crashes`, `recoveries`, `reopens`; `crash.commit_write`,
//! `crash.commit_sync` (an armed crash cut a write or an fdatasync of a commit), `crash.read`, `crash.compact`,
//! `crash.close`, `crash.during_recovery`; `fault.<kind>`.

pub mod backend;
mod exec;
pub mod plan;
pub mod simplify;
pub mod step;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

use env::{Env, FaultKind, OpenOptions, SimEnv};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, TableError};

pub use self::plan::{FaultProfile, RedbPlan, profile_of, swarm_config};
pub use self::simplify::RedbSimplify;
pub use self::step::{Observed, Step, WriteOp};
use crate::config::{SwarmConfig, healed_faults};
use crate::engine_target::{ValueSpec, excuses_errors, parse_key, sig_of};
use crate::target::{Coverage, FailureKind, FaultTracker, Target, Violation};

/// The directory of redb's file inside the simulated world.
pub const DB_DIR: &str = "/redb";
/// redb's file.
pub const DB_PATH: &str = "/redb/db.redb";
/// The one table the workload uses.
pub const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("holdfast");
/// How many times an open is retried when a fault justified its failure.
pub const OPEN_ATTEMPTS_MAX: u32 = 8;
/// How many crash/restart rounds one recovery may go through.
pub const RECOVERY_ROUNDS_MAX: u32 = 4;
/// The value id of the liveness phase's write.
pub const LIVENESS_VALUE_ID: u64 = u64::MAX;

/// A key's committed value: its spec (for reports) and the signature of its bytes.
pub type State = BTreeMap<u32, (ValueSpec, u64)>;

/// The redb target's state: the world, the database, the model, fault bookkeeping and coverage.
pub struct RedbTarget {
    env: SimEnv,
    db: Option<Database>,
    config: SwarmConfig,
    plan: RedbPlan,
    /// The committed state.
    model: State,
    /// A transaction whose commit outcome is unknown (cut by a crash, or failed): resolved by the next full read.
    in_flight: Option<Vec<WriteOp>>,
    /// A long-lived read transaction and the state it must keep seeing.
    snapshot: Option<(redb::ReadTransaction, State)>,
    /// A crash armed by `CrashAtIo` for the next step.
    armed: Option<u64>,
    /// An error-causing fault fired since the last clean open (`beyond` only).
    excused: bool,
    /// A data-destroying fault fired (`beyond` only): a refusal to open is recorded, not failed.
    damaged: bool,
    /// The database refused to open after damage: the rest of the run only records.
    unrecoverable: bool,
    /// Drop and reopen at the end of this step (redb latches IO errors until a reopen).
    reopen_pending: bool,
    faults: FaultTracker,
    crashes_classified: u64,
    /// Set by redb's repair callback during an open.
    repaired: Rc<Cell<bool>>,
    last_open_error: String,
    next_value_id: u64,
    counters: Coverage,
}

impl std::fmt::Debug for RedbTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbTarget").field("model_keys", &self.model.len()).finish_non_exhaustive()
    }
}

/// Why reading the table failed.
#[derive(Debug)]
enum ReadFailure {
    /// redb returned an error.
    Redb(redb::Error),
    /// The table held a key the workload never writes.
    ForeignKey(Vec<u8>),
}

/// The workload's table, read-only.
type Table = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;

/// The workload's table as `txn` sees it; `None` before the first commit created it (an empty table).
fn open_table(txn: &redb::ReadTransaction) -> Result<Option<Table>, redb::Error> {
    match txn.open_table(TABLE) {
        Ok(table) => Ok(Some(table)),
        Err(TableError::TableDoesNotExist(_)) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// The state a read transaction sees: every entry of the table.
fn read_state(txn: &redb::ReadTransaction, key_count: u32) -> Result<BTreeMap<u32, u64>, ReadFailure> {
    let Some(table) = open_table(txn).map_err(ReadFailure::Redb)? else { return Ok(BTreeMap::new()) };
    let mut state = BTreeMap::new();
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
fn apply_ops(state: &State, ops: &[WriteOp]) -> State {
    let mut next = state.clone();
    for op in ops {
        match op {
            WriteOp::Insert { key, value } => {
                next.insert(*key, (*value, sig_of(&crate::engine_target::value_bytes(*value))));
            }
            WriteOp::Remove { key } => {
                next.remove(key);
            }
        }
    }
    next
}

/// The signatures of a model state.
fn signatures(state: &State) -> BTreeMap<u32, u64> {
    state.iter().map(|(&key, &(_, sig))| (key, sig)).collect()
}

/// The first key where `actual` and `expected` differ, rendered for a report.
fn first_difference(expected: &BTreeMap<u32, u64>, actual: &BTreeMap<u32, u64>) -> String {
    let keys = expected.keys().chain(actual.keys());
    let key = keys.copied().find(|key| expected.get(key) != actual.get(key));
    match key {
        None => "no difference".to_string(),
        Some(key) => format!(
            "k{key:06}: expected {}, found {} ({} keys expected, {} found)",
            expected.get(&key).map_or("absent".to_string(), |sig| format!("value {sig:016x}")),
            actual.get(&key).map_or("absent".to_string(), |sig| format!("value {sig:016x}")),
            expected.len(),
            actual.len()
        ),
    }
}

impl RedbTarget {
    fn count(&mut self, name: &str) {
        self.counters.add(name, 1);
    }

    /// The plan this run follows.
    pub fn plan(&self) -> &RedbPlan {
        &self.plan
    }

    /// Read new fault records: set `damaged` and `excused`.
    fn poll_faults(&mut self) {
        for kind in self.faults.poll(&self.env) {
            self.damaged |= kind.destroys_data();
            self.excused |= excuses_errors(kind);
        }
    }

    /// May a redb error surface now? Only after a crash cut the call, or an injected fault.
    fn error_allowed(&mut self) -> bool {
        self.poll_faults();
        self.env.is_halted() || self.excused || self.damaged
    }

    /// A redb error no fault justifies.
    fn unexpected(&self, what: &str, error: &dyn std::fmt::Display) -> Violation {
        Violation::new(
            "unexpected_error",
            FailureKind::UnexpectedError,
            format!("{what} succeeds (no fault justifies an error; fault profile {})", profile_of(&self.config)),
            error.to_string(),
        )
    }

    /// Drop the snapshot and the database (redb closes cleanly if the world is up; after a crash its writes fail
    /// on dead handles and it returns, as its close path allows).
    fn close_db(&mut self) {
        self.snapshot = None;
        if let Some(db) = self.db.take() {
            drop(db);
        }
        assert!(self.db.is_none() && self.snapshot.is_none());
    }

    /// Open redb on the simulated file.
    fn open_database(&self) -> Result<Database, String> {
        let options = OpenOptions { create: true, create_new: false, truncate: false, write: true };
        let file = self.env.open(Path::new(DB_PATH), options).map_err(|error| error.to_string())?;
        self.env.sync_dir(Path::new(DB_DIR)).map_err(|error| error.to_string())?;
        let repaired = Rc::clone(&self.repaired);
        repaired.set(false);
        let mut builder = redb::Builder::new();
        builder.set_cache_size(usize::try_from(self.plan.cache_size_bytes).expect("cache size fits"));
        builder.set_repair_callback(move |_session| repaired.set(true));
        builder.create_with_backend(backend::EnvBackend::new(file)).map_err(|error| error.to_string())
    }

    /// Open the database, retrying failures a fault justifies. `Ok(true)` when open; `Ok(false)` when an armed
    /// crash cut the open (the world is halted) or every attempt failed with a justified error.
    fn open_db(&mut self) -> Result<bool, Violation> {
        assert!(self.db.is_none(), "open_db with a database open");
        for _ in 0..OPEN_ATTEMPTS_MAX {
            self.poll_faults();
            let faults_before = self.faults.total();
            match self.open_database() {
                Ok(db) => {
                    self.db = Some(db);
                    self.poll_faults();
                    self.excused &= self.faults.total() != faults_before;
                    self.count("opens");
                    if self.repaired.get() {
                        self.count("redb.repairs");
                    }
                    return Ok(true);
                }
                Err(_) if self.env.is_halted() => {
                    self.classify_crash("crash.during_recovery");
                    return Ok(false);
                }
                Err(error) if !self.error_allowed() => {
                    return Err(Violation::new(
                        "recovery.open",
                        FailureKind::Durability,
                        format!("redb opens after a crash (fault profile {})", profile_of(&self.config)),
                        error,
                    ));
                }
                Err(error) => {
                    self.last_open_error = error;
                    self.count("redb.errors_tolerated");
                }
            }
        }
        Ok(false)
    }

    /// Count where an armed crash landed (once per crash).
    fn classify_crash(&mut self, place: &str) {
        let crashes = self.env.crash_count();
        if crashes <= self.crashes_classified {
            return;
        }
        self.crashes_classified = crashes;
        self.count(place);
        self.count("crash.armed_fired");
    }

    /// Recover after a crash, an error or a reopen: restart the world if halted, open (surviving crashes armed
    /// inside the open), then read everything and resolve any in-flight transaction.
    fn recover(&mut self) -> Result<Observed, Violation> {
        self.close_db();
        for _ in 0..RECOVERY_ROUNDS_MAX {
            if self.env.is_halted() {
                self.env.restart();
            }
            if self.open_db()? || !self.env.is_halted() {
                break;
            }
        }
        assert!(!self.env.is_halted() || self.db.is_none(), "a database open in a halted world");
        if self.db.is_none() {
            if self.damaged {
                self.unrecoverable = true;
                self.count("redb.unrecoverable_runs");
            }
            return Ok(Observed::Unavailable { reason: self.last_open_error.clone() });
        }
        self.count("recoveries");
        let repairs = u64::from(self.repaired.get());
        match self.verify_all("durability")? {
            Some(entries) => Ok(Observed::Recovered { entries, repairs }),
            None => Ok(Observed::Error { error: "verification read failed (fault)".into() }),
        }
    }

    /// Read the whole table and compare it with the model, resolving an in-flight transaction. `Ok(None)` when a
    /// fault-justified error stopped the read (a reopen follows).
    fn verify_all(&mut self, context: &str) -> Result<Option<u64>, Violation> {
        let Some(db) = &self.db else { return Ok(None) };
        let key_count = self.config.workload.key_count;
        let read = db.begin_read().map_err(|error| ReadFailure::Redb(error.into()));
        let state = read.and_then(|txn| read_state(&txn, key_count));
        match state {
            Ok(actual) => {
                let in_flight = self.in_flight.clone();
                if let Err(violation) = self.resolve(&actual, context) {
                    self.in_flight = in_flight;
                    return Err(self.classify_mismatch(violation));
                }
                Ok(Some(actual.len() as u64))
            }
            Err(ReadFailure::ForeignKey(key)) => Err(Violation::new(
                format!("{context}.foreign_key"),
                FailureKind::Safety,
                "only keys the workload wrote",
                format!("key {key:?}"),
            )),
            // An armed crash cut the verification: the step's crash handling recovers and verifies again.
            Err(ReadFailure::Redb(_)) if self.env.is_halted() => {
                self.count("redb.errors_cut_by_crash");
                Ok(None)
            }
            Err(ReadFailure::Redb(error)) if self.error_allowed() => {
                self.count("redb.errors_tolerated");
                self.last_open_error = error.to_string();
                self.reopen_pending = true;
                Ok(None)
            }
            Err(ReadFailure::Redb(error)) => Err(self.unexpected("reading the whole table", &error)),
        }
    }

    /// A full read disagreed with the model. After a transient read bit flip (`read_corruption`), read once more:
    /// if the second read matches, redb returned a flipped bit without noticing (`oracle.silent_read_corruption`);
    /// if not, the damage is on the disk (the original violation).
    fn classify_mismatch(&mut self, violation: Violation) -> Violation {
        self.poll_faults();
        if !self.faults.has_seen(FaultKind::ReadCorruption) {
            return violation;
        }
        let Some(db) = &self.db else { return violation };
        let key_count = self.config.workload.key_count;
        let reread = db.begin_read().map_err(|error| ReadFailure::Redb(error.into()));
        let Ok(actual) = reread.and_then(|txn| read_state(&txn, key_count)) else { return violation };
        if self.resolve(&actual, "reread").is_err() {
            return violation;
        }
        Violation::new(
            "oracle.silent_read_corruption",
            FailureKind::Safety,
            "a read returns the stored value, or an error (a re-read matched the model)",
            violation.actual,
        )
    }

    /// Compare a full read with the model (and the model plus the in-flight transaction); adopt the match.
    fn resolve(&mut self, actual: &BTreeMap<u32, u64>, context: &str) -> Result<(), Violation> {
        let before = signatures(&self.model);
        if *actual == before {
            if self.in_flight.take().is_some() {
                self.count("redb.in_flight_lost");
            }
            return Ok(());
        }
        let Some(ops) = self.in_flight.take() else {
            return Err(Violation::new(
                format!("{context}.committed_state"),
                FailureKind::Durability,
                "the table holds exactly the committed transactions",
                first_difference(&before, actual),
            ));
        };
        let after_state = apply_ops(&self.model, &ops);
        let after = signatures(&after_state);
        if *actual == after {
            self.model = after_state;
            self.count("redb.in_flight_applied");
            return Ok(());
        }
        let touched: Vec<u32> = ops.iter().map(WriteOp::key).collect();
        let outside =
            actual.keys().chain(before.keys()).any(|key| !touched.contains(key) && actual.get(key) != before.get(key));
        let invariant =
            if outside { format!("{context}.committed_state") } else { "atomicity.partial_transaction".into() };
        Err(Violation::new(
            invariant,
            FailureKind::Durability,
            format!("the state before or after the in-flight transaction of {} operations", ops.len()),
            format!("before: {}; after: {}", first_difference(&before, actual), first_difference(&after, actual)),
        ))
    }
}

impl Target for RedbTarget {
    const NAME: &'static str = "redb";
    type Step = Step;
    type Observation = Observed;

    fn open(env: SimEnv, config: &SwarmConfig) -> Result<Self, Violation> {
        let plan = RedbPlan::derive(env.seed(), config);
        let dir = Path::new(DB_DIR);
        let created = env.create_dir_all(dir).and_then(|()| env.sync_dir(Path::new("/")));
        created.map_err(|error| Violation::new("setup", FailureKind::Setup, "create /redb", error.to_string()))?;
        let mut target = Self {
            env,
            db: None,
            config: config.clone(),
            plan,
            model: State::new(),
            in_flight: None,
            snapshot: None,
            armed: None,
            excused: false,
            damaged: false,
            unrecoverable: false,
            reopen_pending: false,
            faults: FaultTracker::default(),
            crashes_classified: 0,
            repaired: Rc::new(Cell::new(false)),
            last_open_error: String::new(),
            next_value_id: 1,
            counters: Coverage::default(),
        };
        target.open_db()?;
        Ok(target)
    }

    fn generate(&mut self, rng: &mut env::DeterministicRng, config: &SwarmConfig) -> Step {
        self.generate_step(rng, config)
    }

    fn apply(&mut self, step: &Step) -> Result<Observed, Violation> {
        self.apply_step(step)
    }

    fn check(&mut self) -> Result<(), Violation> {
        // Every step verifies what it touched; recoveries verify the whole table. Here: the world is up and the
        // model never holds a key outside the key space.
        assert!(!self.env.is_halted(), "world halted after a step");
        let key_count = self.config.workload.key_count;
        if let Some((&key, _)) = self.model.last_key_value() {
            assert!(key < key_count, "model holds k{key:06}, outside the key space of {key_count}");
        }
        Ok(())
    }

    fn crash_recover(&mut self) -> Result<(), Violation> {
        if self.unrecoverable {
            return Ok(());
        }
        self.env.crash();
        self.count("crashes");
        let recovered = self.recover()?;
        if !matches!(recovered, Observed::Recovered { .. }) && !self.damaged {
            return Err(Violation::new(
                "liveness.final_recovery",
                FailureKind::Liveness,
                "redb opens and verifies after the final crash",
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
        coverage
    }

    fn required_coverage(config: &SwarmConfig) -> Vec<String> {
        // Required over a whole swarm (almost every plan crashes; see `RedbPlan::derive`).
        let mut names: Vec<String> = [
            "redb.commits",
            "redb.aborts",
            "redb.repairs",
            "redb.in_flight_applied",
            "redb.in_flight_lost",
            "recoveries",
            "crash.commit_write",
            "crash.commit_sync",
            "crash.during_recovery",
            "fault.crash_dropped_write",
            "fault.crash_torn_write",
        ]
        .map(String::from)
        .to_vec();
        names.extend(config.enabled_fault_kinds().iter().map(|kind| format!("fault.{}", kind.name())));
        names
    }

    fn swarm_config(seed: u64, options: &crate::RunOptions) -> SwarmConfig {
        let profile = options.fault_profile.as_deref().map_or(Ok(FaultProfile::Assumed), FaultProfile::parse);
        swarm_config(seed, profile.unwrap_or_else(|error| panic!("{error}")))
    }
}

impl RedbTarget {
    /// The liveness phase: heal faults, reopen cleanly, verify, commit one write, check integrity, verify again.
    fn liveness(&mut self) -> Result<(), Violation> {
        self.armed = None;
        self.env.disarm_crash();
        self.env.set_fault_config(healed_faults(&self.config.faults));
        self.poll_faults();
        if self.unrecoverable {
            return Ok(());
        }
        self.close_db();
        self.excused = false;
        let recovered = self.recover()?;
        if !matches!(recovered, Observed::Recovered { .. }) {
            if self.damaged {
                self.unrecoverable = true;
                return Ok(());
            }
            return Err(Violation::new(
                "liveness.open",
                FailureKind::Liveness,
                "redb opens and verifies once healed",
                format!("{recovered:?}"),
            ));
        }
        // A fixed value: generation and replay must write the same bytes here (the id counter only advances when
        // generating).
        let value = ValueSpec { id: LIVENESS_VALUE_ID, len: 16 };
        let observed = self.apply_write(&[WriteOp::Insert { key: 0, value }], true)?;
        if observed != Observed::Committed {
            return Err(Violation::new(
                "liveness.commit",
                FailureKind::Liveness,
                "a commit succeeds once healed",
                format!("{observed:?}"),
            ));
        }
        self.check_integrity_step()?;
        self.verify_all("liveness")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{RunOptions, run_schedule_target, run_target};
    use crate::shrink::shrink_schedule;

    fn first_failing(seeds: std::ops::Range<u64>) -> Option<crate::Outcome<Step>> {
        seeds.map(|seed| run_target::<RedbTarget>(seed, &RunOptions::with_steps(200))).find(|outcome| !outcome.passed())
    }

    /// The oracle can fail: a backend whose `sync_data` lies loses committed transactions at the next crash, and
    /// the target says so; the same seeds pass with an honest backend.
    #[test]
    fn a_backend_that_ignores_fsync_is_caught_and_shrunk() {
        backend::SYNC_IGNORED.with(|flag| flag.set(true));
        let found = first_failing(0..20);
        let outcome = found.expect("no seed in 0..20 noticed a backend that never syncs");
        let failure = outcome.failure.clone().expect("failed");
        assert_eq!(failure.kind, FailureKind::Durability, "{}", failure.report());
        let shrunk = shrink_schedule::<RedbTarget, _>(&RedbSimplify, &outcome.schedule, &RunOptions::default(), 2_000)
            .expect("shrinks");
        backend::SYNC_IGNORED.with(|flag| flag.set(false));
        assert!(shrunk.steps_after <= 4, "shrunk to {} steps: {:?}", shrunk.steps_after, shrunk.schedule.steps);
        assert!(run_schedule_target::<RedbTarget>(&shrunk.schedule, &RunOptions::default()).passed());
        assert!(run_target::<RedbTarget>(outcome.seed, &RunOptions::with_steps(200)).passed());
    }

    #[test]
    fn the_assumed_profile_injects_no_error_and_runs_replay_exactly() {
        for seed in 0..8 {
            let outcome = run_target::<RedbTarget>(seed, &RunOptions::with_steps(300));
            assert!(outcome.passed(), "{}", outcome.failure.map(|f| f.report()).unwrap_or_default());
            assert_eq!(outcome.coverage.get("redb.errors_tolerated"), 0, "seed {seed}: an error without a fault");
            let replayed = run_schedule_target::<RedbTarget>(&outcome.schedule, &RunOptions::default());
            assert_eq!(replayed.digest, outcome.digest, "seed {seed}: the replay differs");
        }
    }
}
