//! The reference engine as a holdfast target: `engine::Db` on `SimEnv`, checked against a model after every step.
//!
//! # Invariants
//!
//! * **Oracle** (`oracle.*`): every `get` and `scan` returns what the model of acknowledged state says. A write
//!   whose call returned an error (or was cut by a crash) is *in flight*: the key may hold it or its previous
//!   value, wholly; the first read resolves the model.
//! * **Durability** (`durability.*`): after every crash + recovery (and every reopen), every key of the key space
//!   reads as the model says (read with one ordered scan merged against the model, and point reads after an
//!   excused scan error: ADR-0113).
//! * **No never-written values, no resurrection**: every value read is one written under that key; a deleted key
//!   never comes back (unless a data-destroying fault justifies a rollback).
//! * **Damage only where it landed, until it is overwritten** (ADR-0069, ADR-0101): a data-destroying fault lets
//!   a key read back any value it ever had, or none, only when the fault landed in a file that held the key
//!   (tables: their manifest key range; log segments: their memtables' ranges; remembered over the run), and only
//!   until a write of the key is acknowledged that cannot have landed in a damaged file (no live log segment is
//!   damaged); from then on the key is checked exactly again. Damage to a file never seen holding keys (the
//!   `MANIFEST`, a table cut before its install) excuses no key: the engine must refuse to open, naming it, or
//!   read back exactly. The rule is `holdfast::kit::DamageExcuses`, shared with the txn target. Every other key
//!   is checked exactly, damaged run or not.
//! * **Sequence numbers** (`sequence_monotonic`, `sequence_recovered`): every acknowledged write gets a sequence
//!   above every earlier one; after recovery `db.last_sequence()` is at least the highest acknowledged before
//!   (unsynced: the highest acknowledged when the log was last known synced).
//! * **Unsynced** (ADR-0203, a quarter of the seeds, drawn from the `engine.sync` stream): the engine runs in
//!   `SyncMode::NoSync`. Reads before a crash are checked as above; after a crash a key may read as any value it
//!   held since the last flush or close that returned `Ok` (each syncs the log), or an in-flight write an
//!   acknowledged one superseded, and never as one from before that point; and together
//!   (`durability.unsynced_prefix`, ADR-0204), the keys read after the crash are those of one prefix of the commits
//!   acknowledged since that point, in sequence order (keys a failed write left uncertain excepted).
//! * **Structural** (`structural`): `db.check_invariants()` after every step that can change structure (every
//!   step but a successful `get` or `scan`).
//! * **Edges of the API** (ADR-0071, ADR-0072, ADR-0073, ADR-0074, ADR-0075, ADR-0076, ADR-0077, in 20% of seeds): keys of 0 and over 64 KiB are `InvalidArgument`, of
//!   1 and 64 KiB accepted and read back (`api.key_limits`); a transaction over the log's 64 MiB record limit is
//!   `InvalidArgument` and the handle keeps working, one that surely fits commits (`api.record_limit`); after a
//!   `close` with a commit pending and a transaction, a reader and a scan iterator held, no task is runnable
//!   (`close.complete`) and every call fails with `Closed` (`close.every_call_closed`); read-only transactions
//!   held across steps with a small `tracked_transactions_max` reach the tracker's bound.
//! * **Liveness** (`liveness.*`): with faults healed, background work drains, flush and compaction succeed, and
//!   every key verifies; then a final power cut loses nothing acknowledged.
//!
//! Which errors a fault excuses, and when data may be lost, is the framework's rule table
//! (`holdfast::world`, ADR-0010). This target is stricter than the table in one place: in `SyncMode::Sync`
//! no acknowledged write is unsynced, so a failed fsync may not lose one (fsyncgate).
//!
//! # Coverage counters
//!
//! `unsynced_runs` (a run in `SyncMode::NoSync`); `unsynced.crash_kept_none`, `unsynced.crash_kept_prefix`,
//! `unsynced.crash_kept_all` (how many of the commits acknowledged since the last sync a crash kept); `crash.<place>` for `mid_append` (an armed crash cut a `write` of a `wal-*` file), `between_append_and_sync`
//! (cut a `sync` of a `wal-*` file), `mid_flush`, `mid_compaction`, `mid_manifest`; `flushes`, `compactions`,
//! `in_flight_writes`; in a damaged run, `damage.excused_reads` (a read of a key that lived in a damaged file),
//! `damage.exact_reads` (one checked exactly all the same) and `damage.excuses_ended` (an acknowledged write ended a
//! key's excuses); `key.invalid_rejected`, `key.limit_accepted`,
//! `txn.oversize_rejected`, `txn.large_value_committed`, `readers.held`, `close.checked`; and the framework's
//! (`crashes`, `recoveries`, `reopens`, `fault.<kind>`, ...).
//!
//! # Probes
//!
//! The engine's probes (`engine::PROBES`) but [`TRANSACTION_PROBES`]: the conflict, safe-snapshot and group-commit
//! probes only overlapping transactions and commits in flight together reach, which the txn target runs and this
//! target does not (ADR-0103). A deep swarm (`--seeds 0..5000 --require-probes`) hits every probe it declares.

pub mod config;
pub mod cost;
mod damage;
#[cfg(feature = "arbitrary")]
pub mod fuzzing;
mod model;
mod ops;
mod prefix;
mod robust;
mod verify;

use std::path::Path;

use engine::Db;
use holdfast::env::{DeterministicRng, Op as Io, SimEnv};
use holdfast::protocol::{cut_io, file_name, in_dir};
use holdfast::{
    Coverage, FailureKind, FaultMenu, FaultProfile, FaultSite, Observed, Step, SystemError, Target, Violation, World,
    WorldConfig,
};

pub use self::config::{EngineConfig, LimitsConfig, OpWeights, TuningConfig};
pub use self::model::{Model, Resolution};
pub use self::ops::{Observation, Op};

/// The database directory inside the simulated world.
pub const DB_DIR: &str = "/db";

/// The engine probes only concurrent transactions reach, which this target does not declare (so `--require-probes`
/// asks it only for what it can reach): conflicts and safe snapshots need transactions that overlap, and group
/// commit batches and a seal that acknowledges pending commits need commits in flight together; this target runs
/// one write at a time and holds only read-only transactions (ADR-0103). The txn target declares and reaches them.
pub const TRANSACTION_PROBES: &[&str] = &[
    "ssi.conflict_dangerous_structure",
    "ssi.conflict_read_only_guard",
    "ssi.conflict_read_write",
    "ssi.conflict_write_write",
    "ssi.safe_snapshot_stepped_back",
    "txn.batch_gathered",
    "txn.group_commit_batch",
    "wal.seal_acknowledged_pending",
];

/// The engine target's state: the database (when open), the model, and its own counters.
#[derive(Debug)]
pub struct EngineTarget {
    db: Option<Db<SimEnv>>,
    config: EngineConfig,
    model: Model,
    max_acked_sequence: u64,
    /// The highest acknowledged sequence when the log was last known synced (a flush or a close returned `Ok`):
    /// in `SyncMode::NoSync` a recovery must reach it, not `max_acked_sequence` (ADR-0203).
    durable_sequence: u64,
    next_value_id: u64,
    counters: Coverage,
    /// Which keys each file may have held and which were written again since: a data-destroying fault excuses
    /// only its files' keys, until they are written where no damage is (ADR-0069, ADR-0101).
    excuses: holdfast::kit::DamageExcuses,
    /// The newest live log segment at the last step boundary (when the database listed one).
    newest_log: Option<u64>,
    /// The live files and key ranges last recorded into `excuses`.
    recorded: damage::Recorded,
    /// The `damage.excused_reads` and `damage.exact_reads` counters, kept apart from `counters` (ADR-0141).
    damage_reads: damage::ReadCounts,
    /// Read-only transactions held across steps (`hold_reader`), oldest first.
    readers: Vec<engine::ReadTransaction<SimEnv>>,
    /// The cost contract's state ([`cost`], ADR-0184).
    cost: cost::CostState,
}

/// An engine error as the framework's fault rules see it.
pub fn system_error(error: &engine::Error) -> SystemError {
    let class = match error {
        engine::Error::Env(inner) => format!("env_{}", inner.op()),
        engine::Error::Corruption { file, .. } => {
            return SystemError::corruption("corruption", error).naming(file);
        }
        engine::Error::Locked { .. } => "locked".into(),
        engine::Error::Closed { .. } => "closed".into(),
        engine::Error::InvalidArgument { .. } => "invalid_argument".into(),
        engine::Error::Conflict { cause } => format!("conflict_{}", cause.name()),
        _ => "other".into(),
    };
    if error.is_corruption() { SystemError::corruption(class, error) } else { SystemError::new(class, error) }
}

impl EngineTarget {
    /// Unsynced, after a crash (ADR-0204): the keys the verification read are those of one prefix of the commits
    /// acknowledged since the last durable point. Not in a damaged run (a fault may roll a key back on its own).
    fn check_prefix(&mut self, world: &mut World) -> Result<(), Violation> {
        let Some(check) = self.model.take_prefix_check() else { return Ok(()) };
        if world.damaged() {
            return Ok(());
        }
        let commits = check.commits();
        match check.shortest_prefix() {
            Ok(kept) => {
                let name = match kept {
                    0 => "unsynced.crash_kept_none",
                    kept if kept == commits => "unsynced.crash_kept_all",
                    _ => "unsynced.crash_kept_prefix",
                };
                self.counters.add(name, 1);
                Ok(())
            }
            Err(mismatch) => Err(Violation::new(
                "durability.unsynced_prefix",
                FailureKind::Durability,
                format!(
                    "the keys a crash kept are those of a prefix of the {} commits acknowledged since the last sync",
                    mismatch.commits
                ),
                format!(
                    "no prefix fits; the closest ({} commits) gives other values for keys {:?}",
                    mismatch.prefix, mismatch.keys
                ),
            )),
        }
    }

    /// The log is synced (a flush or a close returned `Ok`): every acknowledged write is durable (ADR-0203).
    pub(crate) fn durable(&mut self) {
        self.model.durable();
        self.durable_sequence = self.max_acked_sequence;
    }

    /// The database, if open.
    pub fn db(&self) -> Option<&Db<SimEnv>> {
        self.db.as_ref()
    }

    /// The model of acknowledged state.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// May a data-destroying fault have destroyed or hidden `key`'s data (ADR-0069, ADR-0101)? Only when it
    /// landed in a file that held `key` and `key` was not written again since where no damage is; every other key
    /// is checked exactly.
    /// Counted in a damaged run as `damage.excused_reads` or `damage.exact_reads`.
    pub(crate) fn damage_reaches(&mut self, world: &mut World, key: u32) -> bool {
        let damage = world.damage();
        if *damage == holdfast::Damage::None {
            return false;
        }
        let reaches = self.excuses.excuses(damage, key, u64::MAX);
        self.damage_reads.count(reaches);
        reaches
    }

    /// Remember which keys the open database's files hold now.
    fn record_file_keys(&mut self) {
        if let Some(db) = &self.db {
            self.newest_log = damage::record(&mut self.excuses, &mut self.recorded, db);
        }
    }

    fn count_stats(&mut self) {
        if let Some(db) = &self.db {
            let stats = db.stats();
            self.counters.add("flushes", stats.flush_count);
            self.counters.add("compactions", stats.compaction_count);
        }
    }
}

impl Target for EngineTarget {
    const NAME: &'static str = "engine";
    const ABOUT: &'static str = "holdfast's engine: puts, deletes, gets, scans, flushes and compactions, checked \
                                 against a model after every step (the default)";
    type Config = EngineConfig;
    type Op = Op;
    type Observation = Observation;

    /// `assumed`: the standard menu with BUGGIFY (the engine has BUGGIFY sites) and directory-operation faults
    /// (the engine surfaces them as errors and loses nothing acknowledged). `beyond`: that plus garbled torn
    /// sectors, which the engine claims to survive (its log never appends into a sector holding synced records,
    /// ADR-0067).
    fn fault_menu(profile: FaultProfile) -> Option<FaultMenu> {
        let assumed = FaultMenu::standard().with_buggify().with_directory_faults().with_tamper();
        Some(match profile {
            FaultProfile::Assumed => assumed,
            FaultProfile::Beyond => assumed.with_garbled_sectors_survived(),
        })
    }

    fn configure(seed: u64, _world: &WorldConfig) -> EngineConfig {
        EngineConfig::from_seed(seed)
    }

    fn validate_config(config: &EngineConfig) -> Result<(), String> {
        config.validate()
    }

    fn new(_env: &SimEnv, config: &EngineConfig) -> Self {
        let mut counters = Coverage::default();
        if config.unsynced {
            counters.add("unsynced_runs", 1);
        }
        Self {
            db: None,
            config: config.clone(),
            model: if config.unsynced { Model::unsynced() } else { Model::default() },
            max_acked_sequence: 0,
            durable_sequence: 0,
            next_value_id: 1,
            counters,
            excuses: holdfast::kit::DamageExcuses::default(),
            newest_log: None,
            recorded: damage::Recorded::default(),
            damage_reads: damage::ReadCounts::default(),
            readers: Vec::new(),
            cost: cost::CostState::default(),
        }
    }

    fn open(&mut self, env: &SimEnv) -> Result<(), SystemError> {
        let db = Db::open(env.clone(), DB_DIR, self.config.options()).map_err(|error| system_error(&error))?;
        self.db = Some(db);
        Ok(())
    }

    fn close(&mut self) -> Result<(), SystemError> {
        let closed = self.db.as_ref().map_or(Ok(()), |db| db.close().map_err(|error| system_error(&error)));
        if closed.is_ok() {
            // A close syncs the log: every acknowledged write is durable.
            self.durable();
        }
        closed
    }

    fn drop_system(&mut self) {
        // The files it holds now, before a recovery may delete them: a log segment written and damaged within
        // this step is seen holding its keys only here (ADR-0206).
        self.record_file_keys();
        // After a clean close nothing is left to undo; after a crash, an unsynced write may be gone.
        self.model.crash();
        self.readers.clear();
        self.count_stats();
        self.db = None;
    }

    fn is_open(&self) -> bool {
        self.db.is_some()
    }

    fn recovered(&mut self, world: &mut World) -> Result<Observation, Violation> {
        let last_sequence = self.db.as_ref().expect("recovered after an open").last_sequence();
        let damaged = world.damaged();
        // Unsynced, only what a sync covered must come back (ADR-0203).
        let (floor, what) = if self.config.unsynced {
            (self.durable_sequence, "highest acknowledged when the log was last synced")
        } else {
            (self.max_acked_sequence, "highest acknowledged before")
        };
        if last_sequence < floor && !damaged {
            return Err(Violation::new(
                "sequence_recovered",
                FailureKind::Durability,
                format!("last_sequence >= {floor} ({what})"),
                last_sequence.to_string(),
            ));
        }
        if damaged || self.config.unsynced {
            // After damage a rollback is allowed, so sequences restart from what recovery found.
            self.max_acked_sequence = self.max_acked_sequence.min(last_sequence);
            self.durable_sequence = self.durable_sequence.min(last_sequence);
        }
        self.record_file_keys();
        self.verify_all(world, "durability")?;
        self.check_prefix(world)?;
        Ok(Observation::Recovered { last_sequence })
    }

    fn generate(&mut self, _world: &World, rng: &mut DeterministicRng, config: &EngineConfig) -> Op {
        self.generate_op(rng, config)
    }

    fn apply(&mut self, world: &mut World, op: &Op) -> Result<Observed<Observation>, Violation> {
        self.apply_op(world, op)
    }

    fn check(&mut self, _world: &mut World, last: Option<&Observed<Observation>>) -> Result<(), Violation> {
        // The structural check is a function of the files and the version, which a successful read cannot change.
        if matches!(last, Some(Observed::Op(Observation::Value { .. } | Observation::Scan { .. }))) {
            return Ok(());
        }
        self.record_file_keys();
        let Some(db) = &self.db else { return Ok(()) };
        db.check_invariants().map_err(|message| {
            Violation::new("structural", FailureKind::Structural, "db.check_invariants() == Ok", message)
        })
    }

    fn check_cost(
        &mut self,
        world: &mut World,
        cost: &holdfast::cost::StepCost<'_, Op, Observation>,
    ) -> Result<(), Violation> {
        self.check_engine_cost(world, cost)
    }

    fn cost_invariants() -> Vec<&'static str> {
        cost::COST_INVARIANTS.to_vec()
    }

    fn healthy(&mut self, world: &mut World) -> Result<(), Violation> {
        world.drain("liveness.drain")?;
        self.verify_all(world, "liveness")?;
        let db = self.db.as_ref().expect("healthy after an open");
        if let Err(error) = db.flush().and_then(|()| db.compact()) {
            return world.give_up("liveness.flush_compact", "flush and compact succeed once healed", error.to_string());
        }
        // The flush synced the log: the final power cut may lose nothing acknowledged, unsynced runs included.
        self.durable();
        world.drain("liveness.drain_after_compact")?;
        self.verify_all(world, "liveness")
    }

    /// Every database file but the lock file; bit flips only in tables (a flipped WAL or MANIFEST makes the
    /// database refuse to open for the rest of the run, a typed error the rules allow but one that ends the
    /// run's usefulness, so, like VOPR's fault atlas, explicit corruption stays recoverable).
    fn fault_sites(&self, env: &SimEnv) -> Vec<FaultSite> {
        env.files()
            .into_iter()
            .filter(|file| in_dir(&file.path, DB_DIR) && !file.path.ends_with("LOCK"))
            .map(|file| FaultSite {
                flippable: file_name(&file.path).starts_with("table-"),
                path: file.path,
                len_bytes: file.current_len,
            })
            .collect()
    }

    /// What the engine cannot open without (ADR-0071, ADR-0072, ADR-0073, ADR-0074, ADR-0075, ADR-0076, ADR-0077): the `MANIFEST`, every table, and the log segment when
    /// it is the only one (then the manifest names it; a newer segment than the manifest's, deleted, is a lost
    /// tail no open can notice, as a truncated one is).
    fn tamper_sites(&self, env: &SimEnv) -> Vec<std::path::PathBuf> {
        let files: Vec<_> = env.files().into_iter().filter(|file| in_dir(&file.path, DB_DIR)).collect();
        let logs: Vec<_> = files.iter().filter(|file| file_name(&file.path).starts_with("wal-")).collect();
        let only_log = (logs.len() == 1 && logs[0].current_len > 0).then(|| logs[0].path.clone());
        files
            .iter()
            .filter(|file| {
                let name = file_name(&file.path);
                name == "MANIFEST" || (name.starts_with("table-") && name.ends_with(".sst"))
            })
            .map(|file| file.path.clone())
            .chain(only_log)
            .collect()
    }

    fn crash_places(&self, step: Option<&Step<Op>>, io: Io, path: &Path) -> Vec<&'static str> {
        let mut places = Vec::new();
        if cut_io(io, path, "wal-", Io::Write) {
            places.push("crash.mid_append");
        }
        if cut_io(io, path, "wal-", Io::Sync) {
            places.push("crash.between_append_and_sync");
        }
        if file_name(path).starts_with("MANIFEST") {
            places.push("crash.mid_manifest");
        }
        match step {
            Some(Step::Op(Op::Flush)) => places.push("crash.mid_flush"),
            Some(Step::Op(Op::Compact)) => places.push("crash.mid_compaction"),
            Some(Step::World(holdfast::WorldStep::RunTask { name })) if name == "compaction" => {
                places.push("crash.mid_compaction");
            }
            Some(Step::World(holdfast::WorldStep::RunTask { .. })) => places.push("crash.mid_flush"),
            Some(Step::Op(_)) if file_name(path).starts_with("table-") => places.push("crash.mid_flush"),
            _ => {}
        }
        places
    }

    fn coverage(&self, coverage: &mut Coverage) {
        coverage.merge(&self.counters);
        self.damage_reads.add_to(coverage);
        self.cost.add_to(coverage);
        if let Some(db) = &self.db {
            let stats = db.stats();
            coverage.add("flushes", stats.flush_count);
            coverage.add("compactions", stats.compaction_count);
        }
    }

    fn required_coverage(world: &WorldConfig, config: &EngineConfig) -> Vec<String> {
        let mut names: Vec<String> = vec!["flushes".into(), "compactions".into()];
        // The edge-of-the-API operations (ADR-0071, ADR-0072, ADR-0073, ADR-0074, ADR-0075, ADR-0076, ADR-0077), where a seed has them.
        let weights = &config.weights;
        let robust = [
            (weights.odd_key, "key.invalid_rejected"),
            (weights.odd_key, "key.limit_accepted"),
            (weights.big_txn, "txn.oversize_rejected"),
            (weights.hold_reader, "readers.held"),
            (weights.close_racing, "close.checked"),
        ];
        names.extend(robust.iter().filter(|(weight, _)| *weight > 0).map(|(_, name)| (*name).to_string()));
        if weights.hold_reader > 0 && config.tracked_transactions_max.is_some() {
            names.push(holdfast::target::probe_counter("ssi.transaction_expired"));
        }
        if world.weights.crash_at_io > 0 {
            let places = ["mid_append", "between_append_and_sync", "mid_flush", "mid_compaction", "mid_manifest"];
            names.extend(places.iter().map(|place| format!("crash.{place}")));
        }
        names
    }

    /// The engine's probes (`engine::PROBES`) but the ones only transactions reach ([`TRANSACTION_PROBES`]).
    fn probes() -> Vec<&'static str> {
        engine::PROBES.iter().copied().filter(|probe| !TRANSACTION_PROBES.contains(probe)).collect()
    }

    fn canaries() -> Vec<&'static str> {
        #[cfg(feature = "canaries")]
        return engine::canary::CANARIES.to_vec();
        #[cfg(not(feature = "canaries"))]
        Vec::new()
    }

    fn set_canary(name: Option<&str>) -> Result<(), String> {
        set_engine_canary(name, &Self::canaries())
    }

    fn simplify_op(op: &Op) -> Vec<Op> {
        ops::simplify_op(op)
    }

    fn simplify_config(config: &EngineConfig) -> Vec<EngineConfig> {
        config.simpler()
    }

    fn rewrite(steps: &[Step<Op>]) -> Vec<Vec<Step<Op>>> {
        ops::rewrite(steps)
    }

    fn describe(config: &EngineConfig) -> String {
        config.to_string()
    }
}

/// Turn an engine canary on or off for this thread, if it is one of `known` (ADR-0020).
pub fn set_engine_canary(name: Option<&str>, known: &[&str]) -> Result<(), String> {
    if let Some(name) = name
        && !known.contains(&name)
    {
        return Err(format!("canary {name:?} is not compiled into this build (known: {})", known.join(", ")));
    }
    #[cfg(feature = "canaries")]
    engine::canary::set_active(name)?;
    Ok(())
}
