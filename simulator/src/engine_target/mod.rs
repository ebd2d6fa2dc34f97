//! The engine as a simulator target: `engine::Db` on `SimEnv`, checked against a model after every step.
//!
//! # Invariants
//!
//! * **Oracle** (`oracle.*`): every `Get` and `Scan` returns what the model of acknowledged state says. A write
//!   whose call returned an error (or was cut by a crash) is *in flight*: the key may hold it or its previous
//!   value, wholly; the first read resolves the model.
//! * **Durability** (`durability.*`): after every crash + recovery (and every reopen), every key of the key space
//!   reads as the model says.
//! * **No never-written values, no resurrection**: every value read is one written under that key; a deleted key
//!   never comes back (unless a data-destroying fault justifies a rollback, below).
//! * **Sequence numbers** (`sequence_monotonic`, `sequence_recovered`): every acknowledged write gets a sequence
//!   above every earlier acknowledged one; after recovery `db.last_sequence()` is at least the highest
//!   acknowledged sequence seen before.
//! * **Structural** (`structural`): `db.check_invariants()` after every step that can change structure (every
//!   step but a successful `Get` or `Scan`, after which files and version are unchanged).
//! * **Liveness** (`liveness.*`): with faults and BUGGIFY healed, the database opens, background work drains,
//!   flush and compaction succeed, and every key verifies; then a final power cut loses nothing acknowledged.
//!
//! # Per-fault weakening rules
//!
//! Faults are read from the world's fault counters after every step (and whenever an error surfaces). A fault
//! *excuses errors* until the next successful reopen in which no fault fired; it *damages* the run when it can
//! destroy or hide durable data. The rules:
//!
//! * `fsync_error`, `explicit_sync_error` — errors: a typed error, the write in flight, `Closed` until a reopen
//!   (drop + open, no crash). Acknowledged data lost: **no** — a failed fsync loses only unsynced bytes, and in
//!   `SyncMode::Sync` no acknowledged write is unsynced (stricter than `FaultKind::destroys_data`, on purpose:
//!   it catches fsyncgate-style reuse of a file after a failed sync).
//! * `write_error`, `explicit_write_error`, `short_write` — errors: a typed error, the write in flight, `Closed`
//!   until a reopen. Acknowledged data lost: no.
//! * `disk_full` — errors: `NoSpace`, the write in flight; opens may fail until the liveness phase heals the
//!   quota. Acknowledged data lost: no.
//! * `read_error` — errors: a typed error on the read (an open that fails is retried). Data lost: no.
//! * `read_corruption` (transient: a re-read is correct) — errors: a typed `Corruption` (the only non-damaging
//!   fault that excuses `Corruption`; a write or sync error never does). Data lost: no — a wrong value, or a
//!   record dropped as a "torn tail" because one read of it was corrupt, is a bug.
//! * `latent_sector`, `misdirected_write`, `explicit_corruption` — the run is *damaged*: typed errors from then
//!   on, and an open may fail for good (the run then ends "unrecoverable", which passes). Data lost: **yes** — a
//!   read may return any value the key ever had, or absent (a rollback or a resurrection), and sequence numbers
//!   may go back after recovery.
//! * `latency`, `clock_jump` — errors: none. Data lost: no.
//! * crash effects (`crash_dropped_write`, `crash_torn_write`, `crash_dropped_metadata`) — errors: none. Data
//!   lost: no (they only touch unsynced state).
//!
//! Never allowed, whatever fired: a value that was never written under that key; an untyped failure (panic); a
//! crash error when no crash happened; a structural invariant failing.
//!
//! # Coverage counters
//!
//! `fault.<kind>` (faults fired), `crash.<place>` for `mid_append` (an armed crash cut a `write` of a `wal-*`
//! file), `between_append_and_sync` (cut a `sync` of a `wal-*` file), `mid_flush` (cut an IO while a flush ran,
//! or of a `table-*` file outside compaction), `mid_compaction`, `mid_manifest` (cut an IO of `MANIFEST*`),
//! `during_recovery` (cut inside `Db::open`); `crashes`, `recoveries`, `reopens`, `flushes`, `compactions`,
//! `buggify.sites_hit`, `buggify.fires`, `errors_tolerated`, `in_flight_writes`, `damaged_runs`,
//! `unrecoverable_runs`.

mod model;
pub mod simplify;
mod step;

use std::path::Path;

use engine::{Db, Options, SyncMode};
use env::{DeterministicRng, ExplicitFault, FaultKind, Op, SimEnv};

pub use self::model::{Model, Resolution, Sig, ValueSpec, key_bytes, parse_key, sig_of, value_bytes};
pub use self::step::{Action, ClientId, Observed, Step};
use crate::config::{SwarmConfig, healed_faults};
use crate::target::{Coverage, FailureKind, FaultTracker, Target, Violation};

mod exec;

/// The database directory inside the simulated world.
pub const DB_DIR: &str = "/db";
/// How many times an open is retried when a fault justified its failure.
pub const OPEN_ATTEMPTS_MAX: u32 = 8;
/// How many crash/restart rounds one recovery may go through.
pub const RECOVERY_ROUNDS_MAX: u32 = 4;
/// The liveness phase's budget of background-task steps.
pub const TASK_DRAIN_STEPS_MAX: u64 = 1_000_000;

/// What a step was doing when an armed crash cut it (for the crash-place coverage counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Activity {
    Client,
    Flush,
    Compaction,
    Recovery,
}

/// The engine target's state: the world, the database, the model, the fault bookkeeping and coverage.
#[derive(Debug)]
pub struct EngineTarget {
    env: SimEnv,
    db: Option<Db<SimEnv>>,
    options: Options,
    config: SwarmConfig,
    model: Model,
    /// A crash armed by `CrashAtIo` for the next step.
    armed: Option<u64>,
    /// A data-destroying fault fired: durability is weakened for the rest of the run.
    damaged: bool,
    /// An error-causing fault fired since the last clean open.
    excused: bool,
    /// A fault that corrupts bytes read (`read_corruption`) fired since the last clean open: only such a fault (or
    /// damage) excuses a `Corruption` error; a write or sync error never does.
    corruption_excused: bool,
    /// The database could not be reopened after damage; the rest of the run only records.
    unrecoverable: bool,
    /// Drop and reopen the database at the end of this step (an error surfaced).
    reopen_pending: bool,
    /// The last step may have changed structure (anything but a successful `Get` or `Scan`).
    structure_dirty: bool,
    faults: FaultTracker,
    crashes_classified: u64,
    max_acked_sequence: u64,
    next_value_id: u64,
    /// The last error `Db::open` returned (for `Unavailable` observations).
    last_open_error: String,
    counters: Coverage,
}

impl EngineTarget {
    /// Engine options for a configuration (always `SyncMode::Sync`: the oracle treats every acknowledged write as
    /// durable).
    pub fn options_for(config: &SwarmConfig) -> Options {
        let tuning = &config.tuning;
        Options::default()
            .with_flush_threshold_bytes(tuning.flush_threshold_bytes)
            .with_block_size_bytes(usize::try_from(tuning.block_size_bytes).unwrap_or(4096))
            .with_bloom_bits_per_key(tuning.bloom_bits_per_key)
            .with_level_size_ratio(tuning.level_size_ratio.max(2))
            .with_l0_compaction_trigger(usize::try_from(tuning.l0_compaction_trigger).unwrap_or(4).max(1))
            .with_block_cache_bytes(usize::try_from(tuning.block_cache_bytes).unwrap_or(0))
            .with_sync_mode(SyncMode::Sync)
    }

    /// The database, if open.
    pub fn db(&self) -> Option<&Db<SimEnv>> {
        self.db.as_ref()
    }

    /// The model of acknowledged state.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Read new fault records: set `damaged` and `excused` as the rule table says.
    fn poll_faults(&mut self) {
        for kind in self.faults.poll(&self.env) {
            self.damaged |= kind.destroys_data();
            self.excused |= excuses_errors(kind);
            self.corruption_excused |= kind == FaultKind::ReadCorruption;
        }
    }

    /// May `error` surface now? Only when a fault justifies it (rule table); `Corruption` only after a fault that
    /// corrupts what is read.
    fn error_allowed(&mut self, error: &engine::Error) -> bool {
        self.poll_faults();
        if error.is_crash() {
            return false;
        }
        if error.is_corruption() {
            return self.corruption_excused || self.damaged;
        }
        self.excused || self.damaged
    }

    fn count(&mut self, name: &str) {
        self.counters.add(name, 1);
    }

    /// Drop the database, keeping its flush and compaction counts.
    fn drop_db(&mut self) {
        if let Some(db) = self.db.take() {
            let stats = db.stats();
            self.counters.add("flushes", stats.flush_count);
            self.counters.add("compactions", stats.compaction_count);
            drop(db);
        }
        assert!(self.db.is_none(), "database still open after drop");
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
        self.count("crash.armed_fired");
    }

    /// Open the database, retrying failures a fault justifies. `Ok(true)` when open; `Ok(false)` when an armed
    /// crash cut the open (the world is halted) or every attempt failed with a justified error.
    fn open_db(&mut self) -> Result<bool, Violation> {
        assert!(self.db.is_none(), "open_db with a database already open");
        for _ in 0..OPEN_ATTEMPTS_MAX {
            self.poll_faults();
            let faults_before = self.faults.total();
            match Db::open(self.env.clone(), DB_DIR, self.options.clone()) {
                Ok(db) => {
                    self.db = Some(db);
                    self.poll_faults();
                    // A clean open clears the excuse; a fault during the open keeps it.
                    let faulted = self.faults.total() != faults_before;
                    self.excused &= faulted;
                    self.corruption_excused &= faulted;
                    self.count("opens");
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

    /// Recover after a crash or a reopen: restart the world if halted, open (surviving crashes armed inside the
    /// open), then verify every key and the recovered sequence.
    fn recover(&mut self) -> Result<Observed, Violation> {
        self.drop_db();
        for _ in 0..RECOVERY_ROUNDS_MAX {
            if self.env.is_halted() {
                self.env.restart();
            }
            if self.open_db()? || !self.env.is_halted() {
                break;
            }
        }
        assert!(!self.env.is_halted() || self.db.is_none(), "a database open in a halted world");
        let Some(db) = &self.db else {
            if self.damaged {
                self.unrecoverable = true;
            }
            return Ok(Observed::Unavailable { reason: self.last_open_error.clone() });
        };
        let last_sequence = db.last_sequence();
        if last_sequence < self.max_acked_sequence && !self.damaged {
            return Err(Violation::new(
                "sequence_recovered",
                FailureKind::Durability,
                format!("last_sequence >= {} (highest acknowledged before)", self.max_acked_sequence),
                last_sequence.to_string(),
            ));
        }
        if self.damaged {
            // Rule table: after damage a rollback is allowed, so sequences restart from what recovery found.
            self.max_acked_sequence = self.max_acked_sequence.min(last_sequence);
        }
        self.count("recoveries");
        self.verify_all("durability")?;
        Ok(Observed::Recovered { last_sequence })
    }

    /// Read every key of the key space (and every key the model knows) and compare with the model.
    fn verify_all(&mut self, context: &str) -> Result<(), Violation> {
        let key_count = self.config.workload.key_count;
        let mut keys: Vec<u32> = (0..key_count).collect();
        keys.extend(self.model.known_keys().filter(|&key| key >= key_count));
        for key in keys {
            let Some(db) = &self.db else { return Ok(()) };
            match db.get(&key_bytes(key)) {
                Ok(value) => {
                    let actual = value.as_deref().map(sig_of);
                    self.model.observe(key, actual, self.damaged, context)?;
                }
                // An armed crash fired inside this verification (a `Reopen` verifies after opening): the step's
                // crash handling recovers and verifies again (ADR-0041).
                Err(_) if self.env.is_halted() => return Ok(()),
                Err(error) if self.error_allowed(&error) => {
                    self.count("errors_tolerated");
                    self.reopen_pending = true;
                    if matches!(error, engine::Error::Closed { .. }) {
                        return Ok(());
                    }
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
        Ok(())
    }
}

/// May a fault of this kind make a call of the system under test fail (rule table: *errors allowed*)? Every
/// target uses this; which faults *damage* data is `FaultKind::destroys_data`, the disk model's own answer.
pub fn excuses_errors(kind: FaultKind) -> bool {
    !matches!(
        kind,
        FaultKind::Latency
            | FaultKind::ClockJump
            | FaultKind::CrashDroppedWrite
            | FaultKind::CrashTornWrite
            | FaultKind::CrashDroppedMetadata
    )
}

impl Target for EngineTarget {
    const NAME: &'static str = "engine";
    type Step = Step;
    type Observation = Observed;

    fn open(env: SimEnv, config: &SwarmConfig) -> Result<Self, Violation> {
        let mut target = Self {
            env,
            db: None,
            options: Self::options_for(config),
            config: config.clone(),
            model: Model::default(),
            armed: None,
            damaged: false,
            excused: false,
            corruption_excused: false,
            unrecoverable: false,
            reopen_pending: false,
            structure_dirty: true,
            faults: FaultTracker::default(),
            crashes_classified: 0,
            max_acked_sequence: 0,
            next_value_id: 1,
            last_open_error: String::new(),
            counters: Coverage::default(),
        };
        target.open_db()?;
        assert!(target.db.is_some() || target.excused || target.damaged, "first open failed without a fault");
        Ok(target)
    }

    fn generate(&mut self, rng: &mut DeterministicRng, config: &SwarmConfig) -> Step {
        self.generate_step(rng, config)
    }

    fn apply(&mut self, step: &Step) -> Result<Observed, Violation> {
        self.apply_step(step)
    }

    fn check(&mut self) -> Result<(), Violation> {
        // The structural check is a function of the files and the version, which only steps that write, run
        // background work, crash, reopen or inject faults change: after a read-only step it cannot change.
        if !std::mem::take(&mut self.structure_dirty) {
            return Ok(());
        }
        let Some(db) = &self.db else { return Ok(()) };
        db.check_invariants().map_err(|message| {
            Violation::new("structural", FailureKind::Structural, "db.check_invariants() == Ok", message)
        })?;
        debug_assert!(!self.env.is_halted(), "world halted after a step");
        Ok(())
    }

    fn crash_recover(&mut self) -> Result<(), Violation> {
        if self.unrecoverable {
            return Ok(());
        }
        self.env.crash();
        self.count("crashes");
        self.recover()?;
        if self.db.is_none() && !self.damaged {
            return Err(Violation::new(
                "liveness.final_recovery",
                FailureKind::Liveness,
                "the database opens after the final crash",
                "it did not",
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
        let buggify = self.env.buggify_counts();
        coverage.add("buggify.sites_hit", buggify.values().filter(|(_, fired)| *fired > 0).count() as u64);
        coverage.add("buggify.fires", buggify.values().map(|(_, fired)| fired).sum());
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
        let mut names: Vec<String> = vec!["flushes".into(), "compactions".into()];
        names.extend(config.enabled_fault_kinds().iter().map(|kind| format!("fault.{}", kind.name())));
        let weights = &config.weights;
        if weights.fault > 0 {
            names.extend(
                ["fault.explicit_sync_error", "fault.explicit_write_error", "fault.explicit_corruption"]
                    .map(String::from),
            );
        }
        if weights.crash + weights.crash_at_io + weights.crash_during_recovery > 0 {
            names.extend(
                ["fault.crash_dropped_write", "fault.crash_torn_write", "fault.crash_dropped_metadata"]
                    .map(String::from),
            );
        }
        if weights.crash_at_io > 0 {
            let places = ["mid_append", "between_append_and_sync", "mid_flush", "mid_compaction", "mid_manifest"];
            names.extend(places.iter().map(|place| format!("crash.{place}")));
        }
        if weights.crash_at_io + weights.crash_during_recovery > 0 {
            names.push("crash.during_recovery".into());
        }
        if config.buggify {
            names.extend(["buggify.sites_hit", "buggify.fires"].map(String::from));
        }
        names
    }
}

impl EngineTarget {
    /// The liveness phase: heal faults and BUGGIFY, reopen cleanly, drain background work, verify, flush,
    /// compact, verify again.
    fn liveness(&mut self) -> Result<(), Violation> {
        self.armed = None;
        self.env.disarm_crash();
        self.env.set_fault_config(healed_faults(&self.config.faults));
        self.env.set_buggify(false);
        self.poll_faults();
        if let Some(db) = &self.db {
            let _ = db.close();
        }
        self.drop_db();
        self.excused = false;
        self.corruption_excused = false;
        if !self.open_db()? {
            if self.damaged {
                self.unrecoverable = true;
                return Ok(());
            }
            return Err(Violation::new(
                "liveness.open",
                FailureKind::Liveness,
                "Db::open succeeds once healed",
                "failed",
            ));
        }
        self.drain("liveness.drain")?;
        self.verify_all("liveness")?;
        let db = self.db.as_ref().expect("opened above");
        let result = db.flush().and_then(|()| db.compact());
        if let Err(error) = result {
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
        self.verify_all("liveness")?;
        Ok(())
    }

    /// Run background tasks until none is runnable, within [`TASK_DRAIN_STEPS_MAX`].
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
        Ok(())
    }
}

/// Is `path` inside the database directory?
fn in_db_dir(path: &Path) -> bool {
    path.parent() == Some(Path::new(DB_DIR))
}

/// An explicit fault on one of the database's files (used by the generator). Bit flips land only in tables:
/// a flipped WAL or MANIFEST makes the database refuse to open for the rest of the run (a typed error the rule
/// table allows, but one that ends the run's usefulness), so, like VOPR's fault atlas, the generator keeps
/// explicit corruption recoverable.
fn explicit_fault(rng: &mut DeterministicRng, path: &Path, len_bytes: u64) -> ExplicitFault {
    let path = path.to_path_buf();
    let is_table = path.file_name().is_some_and(|name| name.to_string_lossy().starts_with("table-"));
    match rng.weighted(&[3, 3, u64::from(is_table)]) {
        0 => ExplicitFault::FailNextSync { path },
        1 => ExplicitFault::FailNextWrite { path },
        _ => ExplicitFault::FlipBit { path, offset: rng.below(len_bytes.max(1)) },
    }
}
