//! SQLite under the simulator (ADR-0078, ADR-0079, ADR-0080): all of SQLite — its files, directory syncs, clock, randomness and
//! sleeps — runs inside the seeded world through a `sqlite3_vfs` over `env::Env` ([`vfs`]), unchanged, bundled by
//! `rusqlite`. A seeded workload of SQL transactions over one table (inserts, updates, deletes, multi-row
//! transactions, rollbacks, point and range reads, WAL checkpoints, integrity checks) is crashed at every point
//! the framework offers, and each recovery is judged against what SQLite's documentation promises in the run's
//! (journal_mode, synchronous) cell ([`config::Cell::promise`]).
//!
//! # Invariants
//!
//! * **Durability** (`durability.lost_commit`): after a recovery the table is the state after an acknowledged
//!   commit no older than the cell's promise allows: the last one where the docs promise durability; the last
//!   or the one before where only the last commit may roll back; any since the last completed checkpoint (or
//!   recovery) in WAL + NORMAL. A commit cut by a crash or failed at `COMMIT` may have happened or not.
//! * **Atomicity** (`atomicity.partial_transaction`): the recovered table is never a state no prefix of the
//!   acknowledged commits produced.
//! * **Structure** (`structural.integrity_check`): `PRAGMA integrity_check` says `ok` after every recovery and
//!   when the workload asks.
//! * **Reads** (`oracle.get`, `oracle.range`): reads return the model's state.
//! * **Errors** (`no_unexpected_error.*`): SQLite returns no error unless a fault justifies it (ADR-0010).
//!
//! In a `synchronous=OFF` cell SQLite promises nothing after a power loss: lost commits, partial states and
//! integrity failures are counted (`sqlite.commits_lost`, `sqlite.partial_transactions`,
//! `sqlite.integrity_failures`) and the database is started over, never judged.
//!
//! `unsafe_code` is `deny` in this crate (its Cargo.toml) instead of the workspace's `forbid`, so that the one
//! module [`vfs`] can `expect` it; every other module `forbid`s it (ADR-0078).

pub mod config;
pub mod db;
pub mod matrix;
pub mod matrix_cli;
pub mod model;
pub mod ops;
pub mod route;
mod run;
#[expect(unsafe_code, reason = "the sqlite3_vfs C interface, confined to this module (ADR-0078)")]
pub mod vfs;
pub mod world;

use std::path::Path;

use holdfast::env::{DeterministicRng, Op as Io, SimEnv};
use holdfast::{Coverage, FaultMenu, FaultProfile, FaultSite, Observed, SeedParallelism, Step, SystemError, Target};
use holdfast::{Violation, World, WorldConfig};
use rusqlite::Connection;

pub use self::config::{Cell, JournalMode, LossBound, Promise, SqliteConfig, Synchronous};
pub use self::model::{History, State, Write};
pub use self::ops::{CheckpointMode, Observation, Op};
pub use self::route::{Route, VfsRoute};

/// The value id of the liveness phase's write.
pub const LIVENESS_VALUE_ID: u64 = u64::MAX;

/// The sqlite target's state: the connection (when open), the model, the route to the world, counters. Generic
/// over the [`Route`] SQLite reaches the disk by; the default is our VFS ([`VfsRoute`]).
pub struct SqliteTarget<R: Route = VfsRoute> {
    config: SqliteConfig,
    route: R,
    conn: Option<Connection>,
    history: History,
    /// `/sqlite` and the database file exist durably.
    files_created: bool,
    /// The database was found corrupt in a cell that promises nothing: start over at the next open.
    wipe_pending: bool,
    /// The last recovery read the whole table.
    verified: bool,
    last_error: String,
    /// Power cuts seen by the last recovery ([`SimEnv::crash_count`]).
    crashes_seen: u64,
    next_value_id: u64,
    counters: Coverage,
}

impl<R: Route> std::fmt::Debug for SqliteTarget<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteTarget")
            .field("cell", &self.config.cell)
            .field("open", &self.conn.is_some())
            .field("rows", &self.history.current().len())
            .finish_non_exhaustive()
    }
}

impl<R: Route> SqliteTarget<R> {
    /// The configuration this run follows.
    pub fn config(&self) -> &SqliteConfig {
        &self.config
    }

    /// The model.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// The cell's promise.
    pub fn promise(&self) -> Promise {
        self.config.cell.promise()
    }

    /// Forget the connection as a dead process would: its close writes, checkpoints and deletes nothing
    /// ([`Route::forget`]).
    fn forget_connection(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.route.forget(conn);
        }
    }

    pub(crate) fn open_database(&mut self, env: &SimEnv) -> Result<(), SystemError> {
        let _bound = self.route.bind();
        if !self.files_created {
            db::create_files(env)?;
            self.files_created = true;
        }
        if std::mem::take(&mut self.wipe_pending) {
            self.counters.add("sqlite.wipes", 1);
            db::wipe(env)?;
            self.history.reset(State::new());
        }
        match self.route.open(&self.config) {
            Ok(conn) => {
                self.conn = Some(conn);
                Ok(())
            }
            Err(error) if self.promise() == Promise::Nothing && db::is_corruption(&error) && !env.is_halted() => {
                // Recorded, not judged: the database is started over.
                self.counters.add("sqlite.integrity_failures", 1);
                self.wipe_pending = true;
                self.open_database(env)
            }
            Err(error) => {
                if db::is_corruption(&error) && !env.is_halted() {
                    self.counters.add("sqlite.corruption_errors", 1);
                }
                Err(db::system_error(&error))
            }
        }
    }
}

impl<R: Route> Target for SqliteTarget<R> {
    const NAME: &'static str = R::NAME;
    const ABOUT: &'static str = R::ABOUT;
    const FINDINGS_EXPECT_FAIL: bool = true;
    const SEEDS_SUBDIR: &'static str = R::SEEDS_SUBDIR;
    /// SQLite's PRNG, its VFS registry and the thread's current world are process-wide or thread-wide: one seed
    /// at a time per process (ADR-0078).
    const PARALLELISM: SeedParallelism = SeedParallelism::OneAtATime;
    type Config = SqliteConfig;
    type Op = Op;
    type Observation = Observation;

    fn fault_menu(profile: FaultProfile) -> Option<FaultMenu> {
        Some(match profile {
            FaultProfile::Assumed => config::assumed_menu(),
            FaultProfile::Beyond => config::beyond_menu(),
        })
    }

    fn configure(seed: u64, _world: &WorldConfig) -> SqliteConfig {
        SqliteConfig::from_seed(seed)
    }

    fn validate_config(config: &SqliteConfig) -> Result<(), String> {
        config.validate()
    }

    fn new(env: &SimEnv, config: &SqliteConfig) -> Self {
        Self {
            config: config.clone(),
            route: R::new(env),
            conn: None,
            history: History::default(),
            files_created: false,
            wipe_pending: false,
            verified: false,
            last_error: String::new(),
            crashes_seen: 0,
            next_value_id: 0,
            counters: Coverage::default(),
        }
    }

    fn open(&mut self, env: &SimEnv) -> Result<(), SystemError> {
        self.open_database(env)
    }

    fn close(&mut self) -> Result<(), SystemError> {
        let Some(conn) = self.conn.take() else { return Ok(()) };
        let bound = self.route.bind();
        let closed = conn.close();
        drop(bound);
        closed.map_err(|(conn, error)| {
            self.route.forget(conn);
            db::system_error(&error)
        })
    }

    fn drop_system(&mut self) {
        self.forget_connection();
    }

    fn is_open(&self) -> bool {
        self.conn.is_some()
    }

    fn recovered(&mut self, world: &mut World) -> Result<Observation, Violation> {
        let _bound = self.route.bind();
        self.recover(world)
    }

    fn generate(&mut self, _world: &World, rng: &mut DeterministicRng, config: &SqliteConfig) -> Op {
        ops::generate(rng, config, self.history.current(), &mut self.next_value_id)
    }

    fn apply(&mut self, world: &mut World, op: &Op) -> Result<Observed<Observation>, Violation> {
        let _bound = self.route.bind();
        self.apply_op(world, op)
    }

    fn healthy(&mut self, world: &mut World) -> Result<(), Violation> {
        let _bound = self.route.bind();
        self.liveness(world)
    }

    /// The database and its side files; a bit may flip anywhere in them.
    fn fault_sites(&self, env: &SimEnv) -> Vec<FaultSite> {
        let names: Vec<&Path> = [db::DB_PATH].into_iter().chain(db::SIDE_FILES).map(Path::new).collect();
        env.files()
            .into_iter()
            .filter(|file| names.contains(&file.path.as_path()))
            .map(|file| FaultSite { path: file.path, len_bytes: file.current_len, flippable: true })
            .collect()
    }

    fn crash_places(&self, step: Option<&Step<Op>>, io: Io, _path: &Path) -> Vec<&'static str> {
        let place = match step {
            None => return Vec::new(),
            Some(Step::Op(Op::Transaction { .. })) if io == Io::Sync || io == Io::SyncDir => "crash.commit_sync",
            Some(Step::Op(Op::Transaction { .. })) => "crash.commit_write",
            Some(Step::Op(Op::Checkpoint { .. })) => "crash.checkpoint",
            Some(Step::Op(Op::Get { .. } | Op::Range { .. })) => "crash.read",
            Some(Step::Op(Op::IntegrityCheck)) => "crash.integrity",
            Some(Step::World(_)) => "crash.close",
        };
        vec![place]
    }

    fn coverage(&self, coverage: &mut Coverage) {
        coverage.merge(&self.counters);
        coverage.merge(&self.route.counters());
    }

    fn required_coverage(world: &WorldConfig, config: &SqliteConfig) -> Vec<String> {
        let mut names = vec!["sqlite.commits"];
        names.extend(R::required_coverage(config));
        if world.weights.crashes() {
            names.push("recoveries");
        }
        if world.weights.crash_at_io > 0 {
            names.extend(["crash.commit_write", "crash.commit_sync"]);
        }
        names.into_iter().map(String::from).collect()
    }

    fn simplify_op(op: &Op) -> Vec<Op> {
        ops::simplify_op(op)
    }

    fn simplify_config(config: &SqliteConfig) -> Vec<SqliteConfig> {
        config.simpler()
    }

    fn describe(config: &SqliteConfig) -> String {
        config.to_string()
    }
}
