//! Concurrent transactions as a holdfast target: several clients run serializable transactions against
//! `engine::Db` on `SimEnv`, interleaved by the seed, with group commit, flushes, compactions, crashes and faults
//! in between; every step is checked against a version-history model and the committed history against a
//! serializability checker ([`dsg`]).
//!
//! # Operations
//!
//! Client operations ([`Op::Begin`], `Get`, `Put`, `Delete`, `Scan`, `Commit` = submit, `Ack` = wait for the
//! commit to be acknowledged, `Rollback`) name their client; each client has at most one transaction open or in
//! flight, so many commits can be submitted and waiting for the shared sync at once. `Flush` and `Compact` call
//! the database. An operation whose precondition is gone is skipped. Crashes, armed crashes, faults, reopens and
//! background-task steps (the engine's `group-commit`, `flush` and `compaction` tasks) are the framework's world
//! steps.
//!
//! # Model
//!
//! [`History`]: per key, the versions of every commit that became *visible* (`db.last_sequence()` reached its
//! ticket's sequence), keyed by the sequences the engine assigned (the batch is in key order, so the write at
//! index `i` has sequence `first + i`). Commits becoming visible are noticed in [`holdfast::Target::check`],
//! after every step, and at recovery (what the dropped database had made visible). A transaction's snapshot is
//! what `t.snapshot()` reports (a read-only transaction may read at a snapshot older than the latest visible
//! one: its safe snapshot); a read-write transaction's, after its first read takes it (ADR-0210: one that only
//! writes never takes one).
//!
//! # Invariants
//!
//! * **Snapshot reads** (`snapshot_read.get`, `snapshot_read.scan`, `snapshot_read.scan_shape`): every read
//!   returns the history at the transaction's snapshot, overlaid with its own writes; `snapshot_visible`: no
//!   snapshot is above the last visible commit.
//! * **Serializability** (`serializable`): each commit, when it becomes visible (and each read-only or write-less
//!   transaction, when it ends), goes into the DSG with the versions it read; a cycle is a failure whose `actual`
//!   is the cycle's Adya class ([`AdyaClass`]: G0, G1c, G-single, G2-item or G2, as Elle names them) and the
//!   cycle (`G2-item: T3 -rw(k000002)-> T5 -rw(k000007)-> T3`), and whose evidence is the [`Cycle`] itself, its
//!   class included, which `--dot` draws. The engine installs versions in commit order and the target records
//!   only reads of committed versions, so `ww` and `wr` edges point forward in commit order: every cycle the
//!   target finds holds an anti-dependency (G-single, G2-item or G2). G1a and G1b (aborted and intermediate
//!   reads) surface as `snapshot_read.*` failures at the read, before the reader can commit (see [`AdyaClass`]).
//! * **Atomic snapshots** (`snapshot_atomic`): no transaction's snapshot falls inside a multi-write commit's
//!   sequences (it would see part of that commit).
//! * **Read-only transactions never abort** (`read_only_never_aborts`).
//! * **Acknowledged means visible** (`ack_visible`), **sequences increase** (`sequence_monotonic`,
//!   `sequence_recovered`, `commit.ticket`), nothing becomes visible that was not submitted
//!   (`visibility.unknown_sequence`).
//! * **Atomicity across crashes** (`atomicity.partial_commit`, `atomicity.prefix`, `durability.*`): after a
//!   crash or reopen every visible commit is wholly present, every aborted transaction wholly absent, and each
//!   in-flight commit (submitted, not visible) wholly present or wholly absent — the present ones a prefix in
//!   sequence order; resolved by reading their keys (a later in-flight commit may write the same key, ADR-0210: its
//!   value there says the earlier one survived).
//! * **Unsynced runs** (ADR-0205, a quarter of the seeds, `SyncMode::NoSync`): a commit is visible at once and
//!   durable at the next flush, close or recovery; after a crash the commits visible since then are resolved like
//!   commits in flight (a prefix of them in sequence order survives, wholly), and the ones it took leave the
//!   history and the DSG. Counters `unsynced_runs`, `unsynced.commits_rewound`, `unsynced.commits_lost`,
//!   `unsynced.crash_kept_none`, `unsynced.crash_kept_some`.
//! * **Aborts are explained** (`abort_explained`): every conflict's cause names a key
//!   (`engine::Error::Conflict { cause }`).
//! * **Structural** (`structural`): `db.check_invariants()` after every step that can change structure, and
//!   `db.check_transactions()` (the conflict tracker's index against its records, ADR-0123) after a begin or a
//!   rollback.
//! * **Liveness** (`liveness.*`): healed, the database reopens, drains, flushes, compacts, and every key
//!   verifies; then a final power cut loses nothing acknowledged.
//!
//! # Faults
//!
//! The framework's rule table (`holdfast::world`, ADR-0010). Data-destroying faults (latent sectors, misdirected
//! writes, bit flips) are off for this target (`FaultMenu::without_data_loss`): they would void the history
//! checks, and the engine target covers them. Where one fires all the same (a `fault_on` step, a seed file), a
//! read is excused per key by the rule the engine target uses (`holdfast::kit::DamageExcuses`, ADR-0101): only
//! while a damaged file may hold the version the read's snapshot should see — a commit made visible after the
//! damage, not appended to a damaged log segment, ends its keys' excuses for snapshots at or after it. The
//! sequence, atomicity and serializability (DSG) checks still relax on any damage.
//!
//! # Coverage counters
//!
//! `txn.begins`, `txn.read_only_begins`, `txn.commits` (read-write commits made visible or found present),
//! `txn.read_only_commits`, `txn.empty_commits`, `txn.submits`, `txn.acks`, `txn.submit_outcome_unknown`,
//! `txn.aborts`, `txn.aborts.<cause>` (`ww`, `rw`, `dangerous`, `read_only_guard`), `txn.false_aborts` (had the
//! transaction committed, after every pending commit, it would not have closed a DSG cycle) and
//! `txn.false_aborts.<cause>`, `txn.rollbacks`, `txn.dropped` (open when a crash or reopen came), `txn.gets`,
//! `txn.scans`, `txn.group_commit_batches` (more than one commit made visible at once), `txn.in_flight_present`,
//! `txn.in_flight_absent`, `txn.old_snapshot_across_compaction`, `crash.between_commit_append_and_sync`,
//! `crash.mid_append`, `crash.between_append_and_sync`, `crash.mid_flush`, `crash.mid_compaction`,
//! `crash.mid_manifest`, `flushes`, `compactions`, `dsg.transactions`; and the framework's (`crashes`,
//! `recoveries`, `reopens`, `fault.<kind>`, `errors_tolerated`, ...).

pub mod config;
pub mod cost;
mod damage;
pub mod dsg;
mod exec;
mod model;
mod ops;
mod recovery;
mod unsynced;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use engine::{CommitTicket, Db, ReadTransaction, Transaction};
use holdfast::env::{DeterministicRng, Op as Io, SimEnv};
use holdfast::protocol::{cut_io, file_name, in_dir};
use holdfast::runner::Failure;
use holdfast::{
    Coverage, FailureKind, FaultMenu, FaultProfile, FaultSite, Observed, Rendering, Step, SystemError, Target,
    Violation, World, WorldConfig, WorldStep,
};

pub use self::config::{OpWeights, StepWeights, TxnConfig, engine_options};
pub use self::dsg::{AdyaClass, Cycle, DependencyGraph, Edge, EdgeKind, INITIAL, TxnId};
pub use self::model::{History, ScanRead, Submission, TxnRecord, Version};
pub use self::ops::{ClientId, Observation, Op, TxnShape};

/// The database directory inside the simulated world.
pub const DB_DIR: &str = "/db";

/// The disk quotas a seed with `disk_full` draws from. The history's values are a few bytes and its key space
/// is small, so the database stays within a few KiB: the standard 16 KiB..=512 KiB would never fill
/// (`--require-coverage` reported `fault.disk_full` = 0).
pub const TXN_DISK_QUOTA_BYTES: std::ops::RangeInclusive<u64> = 4 * 1024..=16 * 1024;
/// The invariant name of a serializability failure.
pub const SERIALIZABLE: &str = "serializable";
/// The name under which the engine spawns its group-commit task (a `run_task` world step names it).
pub const GROUP_COMMIT_TASK: &str = "group-commit";
/// The engine probes this target does not declare, so `--require-probes` asks it only for what it reaches: its
/// small transactions never fill the memtable queue (`write.stalled`), and it keeps the conflict tracker's default
/// bound, which its few clients never fill (`ssi.transaction_expired`). The engine target reaches both (large values
/// and readers held across steps under a small `tracked_transactions_max`). A 20,000-seed swarm hit every other
/// engine probe and neither of these (ADR-0103).
pub const ENGINE_ONLY_PROBES: &[&str] = &["ssi.transaction_expired", "write.stalled"];

/// Where an armed crash cut a file IO: (file name prefix, the IO, or any IO when `None`, coverage counter).
const FILE_CRASH_PLACES: [(&str, Option<Io>, &str); 3] = [
    ("wal-", Some(Io::Write), "crash.mid_append"),
    ("wal-", Some(Io::Sync), "crash.between_append_and_sync"),
    ("MANIFEST", None, "crash.mid_manifest"),
];

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

/// The transaction target's state: the database (when open), the clients, the history model and the DSG.
#[derive(Debug)]
pub struct TxnTarget {
    db: Option<Db<SimEnv>>,
    config: TxnConfig,
    clients: BTreeMap<ClientId, Client>,
    /// The operation count each client's current transaction is meant to reach (generation only).
    op_targets: BTreeMap<ClientId, u32>,
    history: History,
    graph: DependencyGraph,
    /// Submitted read-write commits not yet visible, in sequence order.
    pending: Vec<Submission>,
    /// Summaries of the transactions in the DSG (for cycle reports).
    finished: BTreeMap<TxnId, String>,
    next_txn: TxnId,
    next_value_id: u64,
    /// What the last acknowledgement cost the log (the cost contract, ADR-0184).
    ack_cost: cost::AckCost,
    /// The sequence the engine will give the next commit's first write (for commits whose submit failed).
    next_sequence: u64,
    /// Read-only transactions a crash or reopen ended: they join the DSG at the next recovery.
    dropped: Vec<TxnRecord>,
    /// The last sequence a dropped database had made visible: absorbed at the next recovery.
    dropped_visible: Option<u64>,
    /// The open database is recovered and verified (or fresh): what it makes visible is committed.
    in_service: bool,
    opens: u64,
    counters: Coverage,
    /// Which keys each file may have held and which were written again since (ADR-0069, ADR-0101).
    excuses: holdfast::kit::DamageExcuses,
    /// Unsynced runs (ADR-0205): the commits made visible since the log was last known synced, in sequence order.
    unsynced_visible: Vec<Submission>,
    /// Unsynced runs: every transaction added to the DSG, in order, to rebuild it without the commits a crash
    /// took back.
    graph_log: Vec<dsg::CommittedTxn>,
    /// Commits a crash put back in flight that are already in the DSG: not added again if they survived.
    in_graph: BTreeSet<TxnId>,
}

/// An engine error as the framework's fault rules see it.
pub fn system_error(error: &engine::Error) -> SystemError {
    if error.is_corruption() {
        return SystemError::corruption("corruption", error);
    }
    let class = match error {
        engine::Error::Env(inner) => format!("env_{}", inner.op()),
        engine::Error::Closed { .. } => "closed".into(),
        engine::Error::Conflict { .. } => "conflict".into(),
        engine::Error::Locked { .. } => "locked".into(),
        _ => "other".into(),
    };
    SystemError::new(class, error)
}

impl TxnTarget {
    /// The per-seed workload shape of this run.
    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// The version history of visible commits.
    pub fn history(&self) -> &History {
        &self.history
    }

    fn count(&mut self, name: &str) {
        self.counters.add(name, 1);
    }

    /// The open database (the framework opens it before an operation; recovery runs after an open).
    fn live_db(&self) -> Db<SimEnv> {
        self.db.clone().expect("the framework opens the system first")
    }

    /// End every client's transaction (a crash or reopen came): read-write ones are rolled back by dropping
    /// them; read-only ones end normally and join the DSG at the next recovery; submitted commits stay in
    /// flight.
    fn drop_clients(&mut self) {
        for (_, client) in std::mem::take(&mut self.clients) {
            if let Client::Open(OpenTxn { handle, record, .. }) = client {
                self.counters.add("txn.dropped", 1);
                drop(handle);
                if record.read_only {
                    self.dropped.push(record);
                }
            }
        }
    }

    /// A compaction is about to run (or ran) while a transaction reads at a snapshot older than the latest.
    fn count_old_snapshots(&mut self) {
        let visible = self.history.visible();
        let old = self.clients.values().any(
            |client| matches!(client, Client::Open(o) if o.record.snapshot.is_some_and(|snapshot| snapshot < visible)),
        );
        if old {
            self.count("txn.old_snapshot_across_compaction");
        }
    }
}

impl Target for TxnTarget {
    const NAME: &'static str = "txn";
    const ABOUT: &'static str = "holdfast's engine under concurrent serializable transactions: interleaved \
                                 clients, group commit, crashes and faults, checked against a version history \
                                 and a serializability (DSG) checker";
    const SEEDS_SUBDIR: &'static str = "txn";
    type Config = TxnConfig;
    type Op = Op;
    type Observation = Observation;

    /// Only `assumed`, without the faults that destroy data (they would void the history checks), with the
    /// directory-operation faults the engine claims to survive (ADR-0068).
    fn fault_menu(profile: FaultProfile) -> Option<FaultMenu> {
        (profile == FaultProfile::Assumed).then(|| {
            let menu = FaultMenu::standard().without_data_loss().with_buggify().with_directory_faults();
            menu.with_disk_quota_bytes(TXN_DISK_QUOTA_BYTES)
        })
    }

    fn new(_env: &SimEnv, config: &TxnConfig) -> Self {
        let mut counters = Coverage::default();
        if config.unsynced {
            counters.add("unsynced_runs", 1);
        }
        Self {
            db: None,
            config: config.clone(),
            clients: BTreeMap::new(),
            op_targets: BTreeMap::new(),
            history: History::default(),
            graph: DependencyGraph::new(),
            pending: Vec::new(),
            finished: BTreeMap::new(),
            next_txn: 1,
            next_value_id: 1,
            ack_cost: cost::AckCost::default(),
            next_sequence: 1,
            dropped: Vec::new(),
            dropped_visible: None,
            in_service: false,
            opens: 0,
            counters,
            excuses: holdfast::kit::DamageExcuses::default(),
            unsynced_visible: Vec::new(),
            graph_log: Vec::new(),
            in_graph: BTreeSet::new(),
        }
    }

    fn open(&mut self, env: &SimEnv) -> Result<(), SystemError> {
        let db = Db::open(env.clone(), DB_DIR, self.config.options()).map_err(|error| system_error(&error))?;
        self.next_sequence = db.last_sequence() + 1;
        // The first open is of an empty directory; every later one is in service once `recovered` verified it.
        self.in_service = self.opens == 0;
        self.opens += 1;
        self.db = Some(db);
        Ok(())
    }

    fn close(&mut self) -> Result<(), SystemError> {
        self.drop_clients();
        let closed = self.db.as_ref().map_or(Ok(()), |db| db.close().map_err(|error| system_error(&error)));
        if closed.is_ok() {
            // A close seals and syncs the log.
            self.durable();
        }
        closed
    }

    fn drop_system(&mut self) {
        self.drop_clients();
        if let Some(db) = self.db.take() {
            if self.in_service {
                // What it made visible before the crash or close: no IO, only the in-memory horizon.
                self.dropped_visible = Some(self.dropped_visible.unwrap_or(0).max(db.last_sequence()));
            }
            self.counters.merge(&work_done(&db));
        }
        self.in_service = false;
    }

    fn is_open(&self) -> bool {
        self.db.is_some()
    }

    fn configure(seed: u64, _world: &WorldConfig) -> TxnConfig {
        TxnConfig::from_seed(seed)
    }

    fn validate_config(config: &TxnConfig) -> Result<(), String> {
        config.validate()
    }

    fn recovered(&mut self, world: &mut World) -> Result<Observation, Violation> {
        self.recover(world)
    }

    fn generate(&mut self, world: &World, rng: &mut DeterministicRng, config: &TxnConfig) -> Op {
        self.generate_op(rng, config, world.crash_armed())
    }

    fn apply(&mut self, world: &mut World, op: &Op) -> Result<Observed<Observation>, Violation> {
        self.apply_op(world, op)
    }

    fn check(&mut self, world: &mut World, last: Option<&Observed<Observation>>) -> Result<(), Violation> {
        if let Some(Observed::Task { name, .. }) = last
            && name == "compaction"
        {
            self.count_old_snapshots();
        }
        self.absorb_visible(world)?;
        // Begins, reads, buffered writes and rollbacks cannot change the files or the version.
        let reads_only = matches!(
            last,
            Some(Observed::Op(
                Observation::Began { .. }
                    | Observation::Value { .. }
                    | Observation::Scan { .. }
                    | Observation::Buffered
                    | Observation::RolledBack { .. }
            ))
        );
        // A begin or a rollback (its prune) changes the conflict tracker's records, whose index is checked here
        // alone (ADR-0123); a get's or scan's new edges are checked at the next step that checks (as the tracker
        // checked them at its next begin, commit or prune before).
        let tracker_changed =
            matches!(last, Some(Observed::Op(Observation::Began { .. } | Observation::RolledBack { .. })));
        if reads_only && !tracker_changed {
            return Ok(());
        }
        if reads_only {
            let Some(db) = self.db.as_ref() else { return Ok(()) };
            return db.check_transactions().map_err(|message| {
                Violation::new("structural", FailureKind::Structural, "db.check_transactions() == Ok", message)
            });
        }
        self.record_file_keys();
        let Some(db) = self.db.as_ref() else { return Ok(()) };
        db.check_invariants().map_err(|message| {
            Violation::new("structural", FailureKind::Structural, "db.check_invariants() == Ok", message)
        })
    }

    fn check_cost(
        &mut self,
        _world: &mut World,
        cost: &holdfast::cost::StepCost<'_, Op, Observation>,
    ) -> Result<(), Violation> {
        match cost.op_ran() {
            Some((Op::Ack { .. }, Observation::Acked { txn })) => self.ack_cost.check(*txn),
            _ => Ok(()),
        }
    }

    fn cost_invariants() -> Vec<&'static str> {
        cost::COST_INVARIANTS.to_vec()
    }

    fn healthy(&mut self, world: &mut World) -> Result<(), Violation> {
        let Some(db) = self.db.clone() else {
            return world.give_up("liveness.verify", "the database verifies once healed", "it could not be read");
        };
        world.drain("liveness.drain")?;
        self.absorb_visible(world)?;
        if let Err(error) = db.flush().and_then(|()| db.compact()) {
            return world.give_up("liveness.flush_compact", "flush and compact succeed once healed", error.to_string());
        }
        // The flush synced the log: the final power cut may take back nothing, unsynced runs included.
        self.absorb_visible(world)?;
        self.durable();
        world.drain("liveness.drain_after_compact")?;
        self.absorb_visible(world)?;
        if !self.verify_all(world, "liveness")? {
            return world.give_up("liveness.verify", "reads succeed once healed", "a read failed");
        }
        Ok(())
    }

    /// Every database file but the lock file; failed syncs and writes only (no bit flips: no data loss).
    fn fault_sites(&self, env: &SimEnv) -> Vec<FaultSite> {
        let mut sites: Vec<FaultSite> = Vec::new();
        for file in env.files() {
            if in_dir(&file.path, DB_DIR) && !file.path.ends_with("LOCK") {
                sites.push(FaultSite { path: file.path, len_bytes: file.current_len, flippable: false });
            }
        }
        sites
    }

    fn crash_places(&self, step: Option<&Step<Op>>, io: Io, path: &Path) -> Vec<&'static str> {
        let name = file_name(path);
        let mut places: Vec<&'static str> = FILE_CRASH_PLACES
            .iter()
            .filter(|&&(prefix, wanted, _)| match wanted {
                Some(wanted) => cut_io(io, path, prefix, wanted),
                None => name.starts_with(prefix),
            })
            .map(|&(_, _, place)| place)
            .collect();
        if places.contains(&"crash.between_append_and_sync") && !self.pending.is_empty() {
            places.push("crash.between_commit_append_and_sync");
        }
        let task = match step {
            Some(Step::World(WorldStep::RunTask { name })) => name.as_str(),
            _ => "",
        };
        match step.and_then(Step::op) {
            Some(Op::Flush) => places.push("crash.mid_flush"),
            Some(Op::Compact) => places.push("crash.mid_compaction"),
            _ if task == "flush" => places.push("crash.mid_flush"),
            _ if task == "compaction" => places.push("crash.mid_compaction"),
            _ if step.is_some() && name.starts_with("table-") => places.push("crash.mid_flush"),
            _ => {}
        }
        places
    }

    fn coverage(&self, coverage: &mut Coverage) {
        coverage.merge(&self.counters);
        coverage.merge(&self.db.as_ref().map(work_done).unwrap_or_default());
    }

    fn required_coverage(world: &WorldConfig, _config: &TxnConfig) -> Vec<String> {
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
        if world.weights.crash_at_io > 0 {
            names.extend(["crash.between_commit_append_and_sync", "txn.in_flight_absent"].map(String::from));
        }
        names
    }

    /// The engine's transaction-layer canaries (with the `canaries` feature).
    /// The engine's probes (`engine::PROBES`) but the ones only the engine target reaches ([`ENGINE_ONLY_PROBES`]).
    fn probes() -> Vec<&'static str> {
        engine::PROBES.iter().copied().filter(|probe| !ENGINE_ONLY_PROBES.contains(probe)).collect()
    }

    fn canaries() -> Vec<&'static str> {
        canary::TRANSACTION.to_vec()
    }

    fn set_canary(name: Option<&str>) -> Result<(), String> {
        match name {
            Some(name) if !canary::TRANSACTION.contains(&name) => Err(format!(
                "target txn has no canary {name:?} in this build (known: {})",
                canary::TRANSACTION.join(", ")
            )),
            name => canary::turn_on(name),
        }
    }

    fn simplify_op(op: &Op) -> Vec<Op> {
        ops::simplify_op(op)
    }

    fn simplify_config(config: &TxnConfig) -> Vec<TxnConfig> {
        config.simpler()
    }

    fn render_failure(failure: &Failure) -> Option<Rendering> {
        failure_dot(failure).map(|text| Rendering { what: "the dependency cycle".into(), text })
    }

    fn rewrite(steps: &[Step<Op>]) -> Vec<Vec<Step<Op>>> {
        ops::rewrite(steps)
    }

    fn dependents(steps: &[Step<Op>], index: usize) -> Vec<usize> {
        ops::dependents(steps, index)
    }
}

/// The engine's canaries this target finds (ADR-0020), compiled in by the `canaries` feature.
mod canary {
    /// The transaction-layer canaries of this build.
    #[cfg(feature = "canaries")]
    pub(crate) const TRANSACTION: &[&str] = engine::canary::TRANSACTION_CANARIES;
    /// No canaries without the feature.
    #[cfg(not(feature = "canaries"))]
    pub(crate) const TRANSACTION: &[&str] = &[];

    /// Turn one canary on (or all off) for this thread.
    pub(crate) fn turn_on(name: Option<&str>) -> Result<(), String> {
        #[cfg(feature = "canaries")]
        return engine::canary::set_active(name);
        #[cfg(not(feature = "canaries"))]
        name.map_or(Ok(()), |name| Err(format!("canary {name:?} needs the canaries feature")))
    }
}

/// The background work an open database did, as coverage counters (`flushes`, `compactions`).
fn work_done(db: &Db<SimEnv>) -> Coverage {
    let stats = db.stats();
    let counters = [("flushes", stats.flush_count), ("compactions", stats.compaction_count)];
    Coverage { counters: counters.into_iter().map(|(name, count)| (name.to_string(), count)).collect() }
}

/// The Graphviz DOT of a serializability failure's cycle, read from its evidence (never from its text); `None`
/// for any other failure.
pub fn failure_dot(failure: &Failure) -> Option<String> {
    if failure.invariant != SERIALIZABLE {
        return None;
    }
    let cycle: Cycle = serde_json::from_value(failure.evidence.clone()?).ok()?;
    Some(cycle.to_dot())
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

#[cfg(test)]
mod tests;
