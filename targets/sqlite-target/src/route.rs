//! How a run's SQLite reaches the simulated disk: the route. The workload, the model, the judgement and the
//! guarantee matrix are the same on every route ([`crate::SqliteTarget`] is generic over it); only opening a
//! connection, binding the calling thread to the world, and forgetting a dead process's connection differ.
//!
//! * [`VfsRoute`] (the default, ADR-0078): our `sqlite3_vfs` over `env::Env` ([`crate::vfs`]), registered as
//!   SQLite's default VFS.
//! * The default-VFS route (ADR-0177, crate `sqlite-unix`): SQLite's own `unix` VFS, unchanged, with the C library
//!   underneath answered by the world through `interpose`. It lives in a crate of its own, so that only its binaries
//!   link `interpose`.

#![forbid(unsafe_code)]

use std::rc::Rc;

use holdfast::Coverage;
use holdfast::env::SimEnv;
use rusqlite::Connection;

use crate::config::{JournalMode, SqliteConfig, Synchronous};
use crate::world::{self, VfsWorld};

/// A route from SQLite to one run's world.
pub trait Route: Sized {
    /// The target's name in schedules and seed files.
    const NAME: &'static str;
    /// One paragraph for `--help`.
    const ABOUT: &'static str;
    /// Where this route's seed files live under `seeds/`.
    const SEEDS_SUBDIR: &'static str;
    /// The package whose `seeds` test replays them.
    const PACKAGE: &'static str;
    /// The ADR every pinned matrix seed of this route cites.
    const MATRIX_ADR: &'static str;
    /// The binary that runs this route's matrix.
    const MATRIX_BIN: &'static str;
    /// What keeps SQLite's calls on the world while it lives (dropped at the end of each target call).
    type Bound;

    /// The route for one run on `env`, made before any SQLite call of the run.
    fn new(env: &SimEnv) -> Self;

    /// Bind the calling thread: SQLite's calls reach this run's world until the returned value drops.
    fn bind(&self) -> Self::Bound;

    /// Open the database (the thread is bound) and set the cell's pragmas ([`crate::db::configure`]).
    fn open(&self, config: &SqliteConfig) -> rusqlite::Result<Connection>;

    /// Drop the connection of a process that died: its close must write, checkpoint and delete nothing.
    fn forget(&self, conn: Connection);

    /// The route's own counters (merged into the run's coverage).
    fn counters(&self) -> Coverage;

    /// The route's own counters a run must reach.
    fn required_coverage(config: &SqliteConfig) -> Vec<&'static str>;
}

/// Our `sqlite3_vfs` over `env::Env` (ADR-0078): the target's original route.
#[derive(Clone, Debug)]
pub struct VfsRoute {
    world: Rc<VfsWorld>,
}

impl Route for VfsRoute {
    const NAME: &'static str = "sqlite";
    const ABOUT: &'static str = "SQLite (bundled by rusqlite) on the simulated disk through a sqlite3_vfs over Env: \
                                 SQL transactions, reads, checkpoints and integrity checks, crashes everywhere, \
                                 judged per (journal_mode, synchronous) cell against SQLite's documented promises; \
                                 --fault-profile beyond goes past SQLite's media assumptions";
    const SEEDS_SUBDIR: &'static str = "sqlite";
    const PACKAGE: &'static str = "sqlite-target";
    const MATRIX_ADR: &'static str = "ADR-0080";
    const MATRIX_BIN: &'static str = "sqlite-matrix";
    type Bound = ();

    fn new(env: &SimEnv) -> Self {
        crate::vfs::register()
            .unwrap_or_else(|code| panic!("registering the holdfast VFS failed with SQLite code {code}"));
        let powersafe = env.fault_config().crash_torn_garbage_ppm == 0;
        let world = VfsWorld::new(env.clone(), powersafe);
        world::install(&world);
        // A run must not depend on the seeds that ran before it in this process.
        crate::vfs::reset_prng();
        Self { world }
    }

    fn bind(&self) {
        world::install(&self.world);
    }

    fn open(&self, config: &SqliteConfig) -> rusqlite::Result<Connection> {
        crate::db::open(config)
    }

    /// SQLite's close runs with the VFS fenced, so it writes, checkpoints and deletes nothing.
    fn forget(&self, conn: Connection) {
        self.world.fenced(|| drop(conn));
    }

    fn counters(&self) -> Coverage {
        self.world.counters()
    }

    fn required_coverage(config: &SqliteConfig) -> Vec<&'static str> {
        let mut names = vec!["vfs.randomness_calls"];
        if config.cell.journal_mode == JournalMode::Wal {
            names.push("vfs.shm_regions");
        }
        if config.cell.synchronous != Synchronous::Off {
            names.push("vfs.create_dir_syncs");
        }
        if config.cell.journal_mode == JournalMode::Delete && config.cell.synchronous == Synchronous::Extra {
            names.push("vfs.delete_dir_syncs");
        }
        names
    }
}
