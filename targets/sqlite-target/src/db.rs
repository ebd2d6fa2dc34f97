//! SQLite as the target drives it, in safe code: opening a connection on the holdfast VFS with the cell's
//! pragmas, the table, reads, and SQLite's errors as the framework sees them.

#![forbid(unsafe_code)]

use std::path::Path;

use holdfast::SystemError;
use holdfast::env::{Env, OpenOptions, SimEnv};
use holdfast::kit::{sig_of, value_bytes};
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, params};

use crate::config::SqliteConfig;
use crate::model::{Found, Write};
use crate::world::TEMP_DIR;

/// The database's directory on the simulated disk.
pub const DB_DIR: &str = "/sqlite";
/// The database file; SQLite adds `-journal` and `-wal`.
pub const DB_PATH: &str = "/sqlite/db";
/// The files SQLite keeps beside the database.
pub const SIDE_FILES: [&str; 2] = ["/sqlite/db-journal", "/sqlite/db-wal"];

/// A SQLite error as the framework's fault rules see it: `SQLITE_CORRUPT` and `SQLITE_NOTADB` claim damaged bytes.
pub fn system_error(error: &rusqlite::Error) -> SystemError {
    match error {
        rusqlite::Error::SqliteFailure(failure, _) => match failure.code {
            ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => SystemError::corruption("corrupt", error),
            code => SystemError::new(format!("sqlite_{code:?}_{}", failure.extended_code).to_lowercase(), error),
        },
        _ => SystemError::new("rusqlite", error),
    }
}

/// Does `error` say the database is damaged?
pub fn is_corruption(error: &rusqlite::Error) -> bool {
    system_error(error).corruption
}

/// An `env` error of the harness's own calls.
pub fn env_error(error: &holdfast::env::Error) -> SystemError {
    SystemError::new(format!("env_{}", error.op()), error)
}

/// Create `/sqlite` (and the temp directory) and an empty database file, durably, before SQLite sees them: the
/// harness's job, as for redb (SQLite's unix VFS never syncs the directory of a new database file).
pub fn create_files(env: &SimEnv) -> Result<(), SystemError> {
    for dir in [DB_DIR, TEMP_DIR] {
        env.create_dir_all(Path::new(dir)).map_err(|error| env_error(&error))?;
    }
    env.sync_dir(Path::new("/")).map_err(|error| env_error(&error))?;
    let options = OpenOptions { create: true, create_new: false, truncate: false, write: true };
    env.open(Path::new(DB_PATH), options).map_err(|error| env_error(&error))?;
    env.sync_dir(Path::new(DB_DIR)).map_err(|error| env_error(&error))
}

/// Remove the database and its side files and create an empty one (a cell that promises nothing, after SQLite
/// corrupted its database: recorded, then started over).
pub fn wipe(env: &SimEnv) -> Result<(), SystemError> {
    for path in [DB_PATH].into_iter().chain(SIDE_FILES) {
        match env.remove_file(Path::new(path)) {
            Ok(()) | Err(holdfast::env::Error::NotFound { .. }) => {}
            Err(error) => return Err(env_error(&error)),
        }
    }
    env.sync_dir(Path::new(DB_DIR)).map_err(|error| env_error(&error))?;
    create_files(env)
}

/// Open the database on the holdfast VFS and set the cell's pragmas; create the table if it is missing.
pub fn open(config: &SqliteConfig) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags_and_vfs(DB_PATH, open_flags(), crate::vfs::VFS_NAME)?;
    configure(&conn, config)?;
    Ok(conn)
}

/// How every route opens the database: read-write, created if missing, no SQLite mutex (one thread uses it).
pub fn open_flags() -> OpenFlags {
    OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX
}

/// Set the cell's pragmas on a new connection and create the table if it is missing (every route, in this order).
pub fn configure(conn: &Connection, config: &SqliteConfig) -> rusqlite::Result<()> {
    conn.pragma_update(None, "page_size", config.page_size_bytes)?;
    conn.pragma_update(None, "cache_size", config.cache_size_pages)?;
    let mode: String =
        conn.query_row(&format!("PRAGMA journal_mode={}", config.cell.journal_mode.sql()), [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case(config.cell.journal_mode.sql()) {
        let code = rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR);
        return Err(rusqlite::Error::SqliteFailure(code, Some(format!("journal_mode {mode} instead of the cell's"))));
    }
    conn.pragma_update(None, "synchronous", config.cell.synchronous.sql())?;
    conn.pragma_update(None, "wal_autocheckpoint", config.wal_autocheckpoint_pages)?;
    conn.execute_batch("CREATE TABLE IF NOT EXISTS kv(k INTEGER PRIMARY KEY, v BLOB NOT NULL)")
}

/// Run one write of a transaction.
pub fn write(conn: &Connection, write: &Write) -> rusqlite::Result<()> {
    match write {
        Write::Insert { key, value } => {
            let mut statement = conn.prepare_cached("INSERT OR REPLACE INTO kv(k, v) VALUES (?1, ?2)")?;
            statement.execute(params![key, value_bytes(*value)])?;
        }
        Write::Update { key, value } => {
            let mut statement = conn.prepare_cached("UPDATE kv SET v = ?2 WHERE k = ?1")?;
            statement.execute(params![key, value_bytes(*value)])?;
        }
        Write::Delete { key } => {
            let mut statement = conn.prepare_cached("DELETE FROM kv WHERE k = ?1")?;
            statement.execute(params![key])?;
        }
    }
    Ok(())
}

/// One key's value bytes.
pub fn get(conn: &Connection, key: u32) -> rusqlite::Result<Option<Vec<u8>>> {
    let mut statement = conn.prepare_cached("SELECT v FROM kv WHERE k = ?1")?;
    statement.query_row(params![key], |row| row.get(0)).optional()
}

/// The rows with `start <= k < end`, in key order, as (key, length, signature).
pub fn range(conn: &Connection, start: i64, end: i64) -> rusqlite::Result<Found> {
    let mut statement = conn.prepare_cached("SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k")?;
    let rows = statement.query_map(params![start, end], |row| {
        let key: i64 = row.get(0)?;
        let value: Vec<u8> = row.get(1)?;
        Ok((key, value))
    })?;
    let mut found = Found::new();
    for row in rows {
        let (key, value) = row?;
        let key = u32::try_from(key).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(0, key))?;
        found.insert(key, (u32::try_from(value.len()).unwrap_or(u32::MAX), sig_of(&value)));
    }
    Ok(found)
}

/// The whole table.
pub fn read_all(conn: &Connection) -> rusqlite::Result<Found> {
    range(conn, i64::MIN, i64::MAX)
}

/// `PRAGMA integrity_check`: `None` when it says `ok`, else its messages.
pub fn integrity_check(conn: &Connection) -> rusqlite::Result<Option<String>> {
    let mut statement = conn.prepare("PRAGMA integrity_check")?;
    let lines: Vec<String> = statement.query_map([], |row| row.get(0))?.collect::<rusqlite::Result<_>>()?;
    Ok((lines != ["ok"]).then(|| lines.join("; ")))
}

/// `PRAGMA wal_checkpoint(mode)`: (busy, frames in the WAL, frames checkpointed).
pub fn checkpoint(conn: &Connection, mode: &str) -> rusqlite::Result<(bool, i64, i64)> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |row| {
        Ok((row.get::<_, i64>(0)? != 0, row.get(1)?, row.get(2)?))
    })
}
