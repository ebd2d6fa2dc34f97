//! redb as a holdfast target (ADR-0038): a database nobody here wrote, run on a `SimEnv` file through its
//! `StorageBackend` trait ([`backend::EnvBackend`]), driven by seeded write and read transactions, the
//! framework's crashes and (in the `beyond` profile) media faults, and checked against a model after every step.
//!
//! # Invariants
//!
//! * **Durability** (`durability.*`): after every crash and reopen, the table holds exactly the committed state:
//!   every transaction whose `commit()` returned Ok (with `Durability::Immediate`) survives.
//! * **Atomicity** (`atomicity.partial_transaction`): a transaction whose commit was cut by a crash or failed with
//!   an error is *in flight*: after recovery the table holds the state before it or the state after it, never a
//!   part of it. An aborted transaction is never visible.
//! * **Reads** (`oracle.*`): every read transaction sees the committed state; a long-lived read transaction keeps
//!   seeing the state it began at while later transactions commit (`oracle.snapshot`). A full read that disagrees
//!   after a transient read bit flip, while a re-read agrees, is `oracle.silent_read_corruption`.
//! * **Recovery** (`recovery.open`, the framework's): reopening after any crash succeeds. Under `beyond`, a refusal
//!   to open after a data-destroying fault is recorded (`Unavailable`, `redb.unrecoverable_runs`).
//! * **Errors** (`unexpected_error`): redb returns no error unless the framework's rule table (ADR-0010) says a
//!   fault justifies it (never under `assumed`, where only crashes happen). A `Corrupted` error needs a fault that
//!   corrupts what is read, or damage.
//! * **Structural** (`structural.integrity`): `Database::check_integrity()` finds nothing to repair (operation
//!   `check_integrity`, and the liveness phase).
//! * **Liveness** (`liveness.*`): with faults healed, the database opens, verifies, a write commits, and every key
//!   verifies; then a final power cut loses nothing committed.
//!
//! redb latches an IO error until it is reopened: every tolerated error makes the framework reopen after the step.
//!
//! # Coverage counters
//!
//! `redb.commits`, `redb.aborts`, `redb.reads`, `redb.snapshot_reads`, `redb.compactions`, `redb.integrity_checks`,
//! `redb.repairs` (opens that ran redb's repair), `redb.in_flight_applied`, `redb.in_flight_lost`,
//! `redb.errors_tolerated` (errors a fault justified: zero under `assumed`), `redb.errors_cut_by_crash`,
//! `redb.unrecoverable_runs`; `crash.commit_write`, `crash.commit_sync` (an armed crash cut a write or an
//! fdatasync of a commit), `crash.read`, `crash.compact`, `crash.integrity`, `crash.close`; and the framework's
//! (`crashes`, `recoveries`, `reopens`, `crash.during_recovery`, `fault.<kind>`, ...).

pub mod backend;
pub mod config;
pub mod model;
mod ops;

use std::cell::Cell;
use std::path::Path;
use std::rc::Rc;

use holdfast::env::{DeterministicRng, Env, Op as Io, OpenOptions, SimEnv};
use holdfast::kit::ValueSpec;
use holdfast::{Coverage, FailureKind, FaultMenu, FaultProfile, FaultSite, Observed, Step, SystemError, Target};
use holdfast::{Violation, World, WorldConfig};
use redb::{Database, ReadableDatabase};

pub use self::config::{OpWeights, RedbConfig, RedbSettings};
use self::model::{Comparison, Found, ReadFailure, compare, read_state};
pub use self::model::{State, WriteOp};
pub use self::ops::{Observation, Op};

/// The directory of redb's file inside the simulated world.
pub const DB_DIR: &str = "/redb";
/// redb's file.
pub const DB_PATH: &str = "/redb/db.redb";
/// The value id of the liveness phase's write.
pub const LIVENESS_VALUE_ID: u64 = u64::MAX;

/// The redb target's state: the database (when open), the model, and its own counters.
pub struct RedbTarget {
    /// A long-lived read transaction and the state it must keep seeing. Declared before `db`: dropped first.
    snapshot: Option<(redb::ReadTransaction, State)>,
    db: Option<Database>,
    config: RedbConfig,
    /// The committed state.
    model: State,
    /// A transaction whose commit outcome is unknown (cut by a crash, or failed): resolved by the next full read.
    in_flight: Option<Vec<WriteOp>>,
    /// The last full read of the table completed (false: a fault or a crash stopped it).
    verified: bool,
    /// The last error that stopped a full read, for reports.
    last_error: String,
    /// `/redb` exists and its creation is durable.
    dir_created: bool,
    /// Set by redb's repair callback during an open.
    repaired: Rc<Cell<bool>>,
    next_value_id: u64,
    counters: Coverage,
}

impl std::fmt::Debug for RedbTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbTarget")
            .field("open", &self.db.is_some())
            .field("model_keys", &self.model.len())
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

/// A redb error as the framework's fault rules see it: only `Corrupted` claims damaged bytes.
pub fn system_error(error: &redb::Error) -> SystemError {
    let class = match error {
        redb::Error::Corrupted(_) => return SystemError::corruption("corrupted", error),
        redb::Error::Io(io) => format!("io_{:?}", io.kind()),
        redb::Error::PreviousIo => "previous_io".into(),
        redb::Error::DatabaseClosed => "database_closed".into(),
        redb::Error::LockPoisoned(_) => "lock_poisoned".into(),
        redb::Error::ValueTooLarge(_) => "value_too_large".into(),
        redb::Error::TransactionInProgress => "transaction_in_progress".into(),
        redb::Error::RepairAborted => "repair_aborted".into(),
        _ => "other".into(),
    };
    SystemError::new(class, error)
}

/// An `env` error of the harness's own calls (creating the directory, opening the file).
fn env_error(error: &holdfast::env::Error) -> SystemError {
    SystemError::new(format!("env_{}", error.op()), error)
}

/// A redb error no fault justifies, named as before the port (`unexpected_error`).
fn unexpected(what: &str, violation: Violation) -> Violation {
    debug_assert_eq!(violation.kind, FailureKind::UnexpectedError);
    Violation::new(
        "unexpected_error",
        FailureKind::UnexpectedError,
        format!("{what} succeeds (no fault justifies an error)"),
        violation.actual,
    )
}

impl RedbTarget {
    /// The configuration this run follows.
    pub fn config(&self) -> &RedbConfig {
        &self.config
    }

    /// The model of committed state.
    pub fn model(&self) -> &State {
        &self.model
    }

    /// A redb error: observed (and the database reopened after the step) when a crash or a fault justifies it.
    fn tolerate(&mut self, world: &mut World, what: &str, error: &redb::Error) -> ops::Outcome {
        if world.env().is_halted() {
            world.count("redb.errors_cut_by_crash");
        }
        world.tolerate(what, &system_error(error)).map_err(|violation| unexpected(what, violation))
    }

    /// Read the whole table and compare it with the model, resolving an in-flight transaction. `Ok(None)` when a
    /// fault-justified error (a reopen follows) or an armed crash (the framework recovers) stopped the read.
    fn verify_all(&mut self, world: &mut World, context: &str) -> Result<Option<u64>, Violation> {
        self.verified = false;
        let Some(db) = &self.db else { return Ok(None) };
        let key_count = self.config.workload.key_count;
        let read = db.begin_read().map_err(|error| ReadFailure::Redb(error.into()));
        match read.and_then(|txn| read_state(&txn, key_count)) {
            Ok(actual) => {
                self.resolve(world, &actual, context)?;
                self.verified = true;
                Ok(Some(actual.len() as u64))
            }
            Err(ReadFailure::ForeignKey(key)) => Err(Violation::new(
                format!("{context}.foreign_key"),
                FailureKind::Safety,
                "only keys the workload wrote",
                format!("key {key:?}"),
            )),
            Err(ReadFailure::Redb(error)) => {
                let what = "reading the whole table";
                let excused = world
                    .tolerate_verify(context, what, &system_error(&error))
                    .map_err(|violation| unexpected(what, violation))?;
                if !excused {
                    world.count("redb.errors_cut_by_crash");
                }
                self.last_error = error.to_string();
                Ok(None)
            }
        }
    }

    /// Compare a full read with the model (and the model plus the in-flight transaction); adopt the match.
    fn resolve(&mut self, world: &mut World, actual: &Found, context: &str) -> Result<(), Violation> {
        let (outside, before, after) = match compare(&self.model, self.in_flight.as_deref(), actual) {
            Comparison::Before => {
                if self.in_flight.take().is_some() {
                    world.count("redb.in_flight_lost");
                }
                return Ok(());
            }
            Comparison::After(state) => {
                self.model = state;
                self.in_flight = None;
                world.count("redb.in_flight_applied");
                return Ok(());
            }
            Comparison::Neither { outside, before, after } => (outside, before, after),
        };
        let committed_state = format!("{context}.committed_state");
        let violation = match (after, self.in_flight.as_ref()) {
            (Some(after), Some(ops)) => Violation::new(
                if outside { committed_state } else { "atomicity.partial_transaction".into() },
                FailureKind::Durability,
                format!("the state before or after the in-flight transaction of {} operations", ops.len()),
                format!("before: {before}; after: {after}"),
            ),
            _ => Violation::new(
                committed_state,
                FailureKind::Durability,
                "the table holds exactly the committed transactions",
                before,
            ),
        };
        Err(self.classify_mismatch(world, violation))
    }

    /// A full read disagreed with the model. After a transient read bit flip (`read_corruption`), read once more:
    /// if the second read matches, redb returned a flipped bit without noticing (`oracle.silent_read_corruption`);
    /// if not, the damage is on the disk (the original violation).
    fn classify_mismatch(&mut self, world: &mut World, violation: Violation) -> Violation {
        if !world.has_seen(holdfast::env::FaultKind::ReadCorruption) {
            return violation;
        }
        let Some(db) = &self.db else { return violation };
        let reread = db.begin_read().map_err(|error| ReadFailure::Redb(error.into()));
        let Ok(actual) = reread.and_then(|txn| read_state(&txn, self.config.workload.key_count)) else {
            return violation;
        };
        if matches!(compare(&self.model, self.in_flight.as_deref(), &actual), Comparison::Neither { .. }) {
            return violation;
        }
        Violation::new(
            "oracle.silent_read_corruption",
            FailureKind::Safety,
            "a read returns the stored value, or an error (a re-read matched the model)",
            violation.actual,
        )
    }

    /// Open redb on the simulated file (creating `/redb` durably first, once).
    fn open_database(&mut self, env: &SimEnv) -> Result<Database, SystemError> {
        if !self.dir_created {
            env.create_dir_all(Path::new(DB_DIR)).map_err(|error| env_error(&error))?;
            env.sync_dir(Path::new("/")).map_err(|error| env_error(&error))?;
            self.dir_created = true;
        }
        let options = OpenOptions { create: true, create_new: false, truncate: false, write: true };
        let file = env.open(Path::new(DB_PATH), options).map_err(|error| env_error(&error))?;
        env.sync_dir(Path::new(DB_DIR)).map_err(|error| env_error(&error))?;
        let repaired = Rc::clone(&self.repaired);
        repaired.set(false);
        let mut builder = redb::Builder::new();
        builder.set_cache_size(usize::try_from(self.config.settings.cache_size_bytes).expect("cache size fits"));
        builder.set_repair_callback(move |_session| repaired.set(true));
        let backend = backend::EnvBackend::new(file);
        builder.create_with_backend(backend).map_err(|error| system_error(&error.into()))
    }
}

impl Target for RedbTarget {
    const NAME: &'static str = "redb";
    const ABOUT: &'static str = "redb 4.5 on the simulated disk through its StorageBackend: write transactions, \
                                 reads, ranges, snapshots, compaction and integrity checks, checked against a \
                                 model; --fault-profile beyond goes past redb's media assumptions";
    const FINDINGS_EXPECT_FAIL: bool = true;
    const SEEDS_SUBDIR: &'static str = "redb";
    /// One file, created and made durable by the harness before redb sees it: no namespace operation to drop.
    const NAMESPACE_CRASHES: bool = false;
    type Config = RedbConfig;
    type Op = Op;
    type Observation = Observation;

    fn fault_menu(profile: FaultProfile) -> Option<FaultMenu> {
        Some(match profile {
            FaultProfile::Assumed => config::assumed_menu(),
            FaultProfile::Beyond => config::beyond_menu(),
        })
    }

    fn configure(seed: u64, _world: &WorldConfig) -> RedbConfig {
        RedbConfig::from_seed(seed)
    }

    fn new(_env: &SimEnv, config: &RedbConfig) -> Self {
        Self {
            snapshot: None,
            db: None,
            config: config.clone(),
            model: State::new(),
            in_flight: None,
            verified: false,
            last_error: String::new(),
            dir_created: false,
            repaired: Rc::new(Cell::new(false)),
            next_value_id: 1,
            counters: Coverage::default(),
        }
    }

    fn validate_config(config: &RedbConfig) -> Result<(), String> {
        config.validate()
    }

    fn open(&mut self, env: &SimEnv) -> Result<(), SystemError> {
        let db = self.open_database(env)?;
        if self.repaired.get() {
            self.counters.add("redb.repairs", 1);
        }
        self.db = Some(db);
        Ok(())
    }

    fn close(&mut self) -> Result<(), SystemError> {
        self.snapshot = None;
        let Some(db) = self.db.take() else { return Ok(()) };
        db.close().map_err(|error| system_error(&error.into()))
    }

    /// Drops the snapshot and the database. redb cannot forget a handle without IO: its `Drop` closes as `close()`
    /// does, errors ignored. After a crash its writes fail on dead handles; after a latched IO error it writes
    /// nothing; otherwise it records its allocator state (as before the port).
    fn drop_system(&mut self) {
        self.snapshot = None;
        self.db = None;
    }

    fn is_open(&self) -> bool {
        self.db.is_some()
    }

    fn recovered(&mut self, world: &mut World) -> Result<Observation, Violation> {
        let repairs = u64::from(self.repaired.get());
        let entries = self.verify_all(world, "durability")?;
        Ok(Observation::Recovered { entries, repairs })
    }

    fn generate(&mut self, _world: &World, rng: &mut DeterministicRng, config: &RedbConfig) -> Op {
        self.generate_op(rng, config)
    }

    fn apply(&mut self, world: &mut World, op: &Op) -> Result<Observed<Observation>, Violation> {
        self.apply_op(world, op)
    }

    fn check(&mut self, _world: &mut World, _last: Option<&Observed<Observation>>) -> Result<(), Violation> {
        // Every operation verifies what it touched; recoveries verify the whole table. Here: the model never holds
        // a key outside the key space.
        let key_count = self.config.workload.key_count;
        if let Some((&key, _)) = self.model.last_key_value() {
            assert!(key < key_count, "model holds k{key:06}, outside the key space of {key_count}");
        }
        Ok(())
    }

    /// Verified on open (else give up: a damaged run is recorded, an undamaged one fails `liveness.open`), then one
    /// commit, an integrity check and a full read.
    fn healthy(&mut self, world: &mut World) -> Result<(), Violation> {
        if !self.verified {
            let reason = self.last_error.clone();
            return world.give_up("liveness.open", "redb opens and verifies once healed", reason);
        }
        // A fixed value: generation and replay must write the same bytes here.
        let value = ValueSpec { id: LIVENESS_VALUE_ID, len: 16 };
        let observed = self.write(world, &[WriteOp::Insert { key: 0, value }], true)?;
        if observed != Observed::Op(Observation::Committed) {
            return Err(Violation::new(
                "liveness.commit",
                FailureKind::Liveness,
                "a commit succeeds once healed",
                format!("{observed:?}"),
            ));
        }
        self.check_integrity(world)?;
        self.verify_all(world, "liveness")?;
        Ok(())
    }

    /// redb's one file; a bit may flip anywhere in it.
    fn fault_sites(&self, env: &SimEnv) -> Vec<FaultSite> {
        env.files()
            .into_iter()
            .filter(|file| file.path == Path::new(DB_PATH))
            .map(|file| FaultSite { path: file.path, len_bytes: file.current_len, flippable: true })
            .collect()
    }

    fn crash_places(&self, step: Option<&Step<Op>>, io: Io, _path: &Path) -> Vec<&'static str> {
        let place = match step {
            None => return Vec::new(),
            Some(Step::Op(Op::Write { .. })) if io == Io::Sync => "crash.commit_sync",
            Some(Step::Op(Op::Write { .. })) => "crash.commit_write",
            Some(Step::Op(Op::Read { .. } | Op::Range { .. } | Op::Snapshot | Op::SnapshotRead)) => "crash.read",
            Some(Step::Op(Op::Compact)) => "crash.compact",
            Some(Step::Op(Op::CheckIntegrity)) => "crash.integrity",
            Some(Step::World(_)) => "crash.close",
        };
        vec![place]
    }

    fn coverage(&self, coverage: &mut Coverage) {
        coverage.merge(&self.counters);
        // The framework counts these for every target; the redb names stay for continuity.
        coverage.add("redb.errors_tolerated", coverage.get("errors_tolerated"));
        coverage.add("redb.unrecoverable_runs", coverage.get("unrecoverable_runs"));
    }

    fn required_coverage(world: &WorldConfig, config: &RedbConfig) -> Vec<String> {
        let mut names = vec!["redb.commits"];
        if config.abort_ppm > 0 {
            names.push("redb.aborts");
        }
        if world.weights.crashes() {
            names.extend(["recoveries", "redb.repairs"]);
        }
        if world.weights.crash_at_io > 0 {
            names.extend(["redb.in_flight_applied", "redb.in_flight_lost", "crash.commit_write", "crash.commit_sync"]);
        }
        names.into_iter().map(String::from).collect()
    }

    fn canaries() -> Vec<&'static str> {
        #[cfg(feature = "canaries")]
        return vec![backend::SYNC_IGNORED_CANARY];
        #[cfg(not(feature = "canaries"))]
        Vec::new()
    }

    fn set_canary(name: Option<&str>) -> Result<(), String> {
        if let Some(name) = name
            && !Self::canaries().contains(&name)
        {
            return Err(format!("canary {name:?} is not compiled into this build (known: {:?})", Self::canaries()));
        }
        #[cfg(feature = "canaries")]
        backend::set_sync_ignored(name == Some(backend::SYNC_IGNORED_CANARY));
        Ok(())
    }

    fn simplify_op(op: &Op) -> Vec<Op> {
        ops::simplify_op(op)
    }

    fn simplify_config(config: &RedbConfig) -> Vec<RedbConfig> {
        config.simpler()
    }

    /// redb can panic inside a destructor while unwinding from a corrupt page, which aborts the process.
    fn isolate_by_default(profile: FaultProfile) -> bool {
        profile == FaultProfile::Beyond
    }

    fn describe(config: &RedbConfig) -> String {
        config.to_string()
    }
}
