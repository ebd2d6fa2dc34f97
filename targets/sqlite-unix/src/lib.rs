//! SQLite's own default `unix` VFS under the simulator (issue 38 item 5, ADR-0177): rusqlite's bundled SQLite,
//! unchanged, with no VFS of ours; the C library calls its unix VFS makes (`open`, `pread64`, `pwrite64`, `fsync`,
//! `ftruncate`, `fstat`, `fcntl` locks, `unlink`, `access`, `lstat`, `/dev/urandom`, `gettimeofday`) are answered
//! by the run's world through `interpose`. The workload, the model, the judgement and the guarantee matrix are
//! `sqlite-target`'s, on this crate's [`UnixRoute`]; only the route differs, so the two routes' matrices can be
//! compared cell for cell (`sqlite-unix-matrix --check --against seeds/sqlite/MATRIX-ext4-ordered.md`).
//!
//! Only this crate's binaries link `interpose`; every other binary of the workspace keeps the real C library.

use std::path::PathBuf;

use holdfast::Coverage;
use holdfast::env::SimEnv;
use rusqlite::Connection;
use sqlite_target::config::{JournalMode, SqliteConfig, Synchronous};
use sqlite_target::world::TEMP_DIR;
use sqlite_target::{Route, SqliteTarget, db};

/// The target on SQLite's default VFS.
pub type UnixTarget = SqliteTarget<UnixRoute>;

/// SQLite's default VFS on Linux, named explicitly when opening (this crate never registers another).
pub const UNIX_VFS: &str = "unix";

/// SQLite's `unix` VFS, with the calling thread bound to the run's world (`interpose::enter`) for every call that
/// reaches SQLite.
#[derive(Clone, Debug)]
pub struct UnixRoute {
    env: SimEnv,
    /// The world's host-looking directory (`/holdfast-world/<seed>`, `interpose::Entered::dir`).
    dir: PathBuf,
}

impl UnixRoute {
    /// The host-looking path SQLite is given for world path `path` (`/sqlite/db`).
    pub fn host_path(&self, path: &str) -> PathBuf {
        self.dir.join(path.trim_start_matches('/'))
    }
}

impl Route for UnixRoute {
    const NAME: &'static str = "sqlite-unix";
    const ABOUT: &'static str = "SQLite (bundled by rusqlite) on its own default unix VFS, unchanged, with the C \
                                 library answered by the world through interpose: the sqlite target's workload, \
                                 model and judgement per (journal_mode, synchronous) cell (ADR-0177)";
    const SEEDS_SUBDIR: &'static str = "sqlite-unix";
    const PACKAGE: &'static str = "sqlite-unix";
    const MATRIX_ADR: &'static str = "ADR-0177";
    const MATRIX_BIN: &'static str = "sqlite-unix-matrix";
    type Bound = interpose::Entered;

    fn new(env: &SimEnv) -> Self {
        let entered = interpose::enter(env);
        let dir = entered.dir();
        // A run must not depend on the seeds before it: SQLite re-seeds its PRNG at its next use from the default
        // VFS's `xRandomness`, which reads `/dev/urandom`, answered by this world (interpose's `devices`).
        sqlite_target::vfs::reset_prng();
        Self { env: env.clone(), dir }
    }

    fn bind(&self) -> interpose::Entered {
        interpose::enter(&self.env)
    }

    /// Temporary files go under the world's temp directory (SQLite would otherwise `stat` `/var/tmp`, `/tmp`, ...:
    /// host paths, refused). In a WAL cell, `locking_mode=EXCLUSIVE` comes before the cell's pragmas (the
    /// first of which reads the schema): SQLite then keeps the WAL index in heap memory instead of `mmap`ing a `-shm` file, which a world
    /// refuses (wal.html#noshm; ADR-0177 says why the comparison stays fair).
    fn open(&self, config: &SqliteConfig) -> rusqlite::Result<Connection> {
        let conn = Connection::open_with_flags_and_vfs(self.host_path(db::DB_PATH), db::open_flags(), UNIX_VFS)?;
        let temp = self.host_path(TEMP_DIR);
        conn.pragma_update(None, "temp_store_directory", temp.to_string_lossy().as_ref())?;
        if config.cell.journal_mode == JournalMode::Wal {
            let mode: String = conn.query_row("PRAGMA locking_mode=EXCLUSIVE", [], |row| row.get(0))?;
            if !mode.eq_ignore_ascii_case("exclusive") {
                let code = rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR);
                return Err(rusqlite::Error::SqliteFailure(code, Some(format!("locking_mode {mode}, not exclusive"))));
            }
        }
        db::configure(&conn, config)?;
        Ok(conn)
    }

    /// Dropped fenced (`interpose::fenced`): SQLite's close reaches the real C library, where the world's paths do
    /// not exist and its descriptors are not the kernel's, so it writes, checkpoints and deletes nothing; its
    /// `close`s release the world's descriptors.
    fn forget(&self, conn: Connection) {
        let _bound = self.bind();
        interpose::fenced(|| drop(conn));
    }

    /// The C library calls the world answered, by function (`interpose.pwrite64`, ...).
    fn counters(&self) -> Coverage {
        let stats = self.bind().stats();
        let mut coverage = Coverage::default();
        for (call, count) in &stats.calls {
            coverage.add(&format!("interpose.{call}"), *count);
        }
        coverage
    }

    /// SQLite's PRNG was seeded from the world, and every cell but `synchronous=OFF` synced through `fsync`.
    fn required_coverage(config: &SqliteConfig) -> Vec<&'static str> {
        let mut names = vec!["interpose.random_device", "interpose.pwrite64", "interpose.pread64"];
        if config.cell.synchronous != Synchronous::Off {
            names.push("interpose.fsync");
        }
        names
    }
}
