//! redb's `StorageBackend` on an [`env::File`]: with a `SimFile`, redb's every read, write, `set_len` and
//! `fdatasync` goes through the simulated disk — its crashes, torn writes, fsync errors and seeds (ADR-0038).
//!
//! **Boundary:** this adapter is the whole seam. redb keeps no other file handle, reads no clock and spawns no
//! thread in this configuration (`ConcurrencyMode` default, no lock support: redb falls back to its in-process
//! writer lock, as its trait documentation allows).

use std::io;

use holdfast::env::{self, File};

/// The planted bug of feature `canaries` (ADR-0020): `sync_data` returns Ok without syncing (a lying disk cache).
pub const SYNC_IGNORED_CANARY: &str = "sync-ignored";

#[cfg(feature = "canaries")]
thread_local! {
    /// Whether [`SYNC_IGNORED_CANARY`] is on for this thread.
    static SYNC_IGNORED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Turn the lying `sync_data` on or off for this thread (feature `canaries`).
#[cfg(feature = "canaries")]
pub fn set_sync_ignored(on: bool) {
    SYNC_IGNORED.with(|flag| flag.set(on));
}

fn sync_ignored() -> bool {
    #[cfg(feature = "canaries")]
    return SYNC_IGNORED.with(std::cell::Cell::get);
    #[cfg(not(feature = "canaries"))]
    false
}

/// redb's storage on one file of an [`env::Env`].
#[derive(Debug)]
pub struct EnvBackend<F: File> {
    file: F,
}

impl<F: File> EnvBackend<F> {
    /// A backend over `file` (opened read-write).
    pub fn new(file: F) -> Self {
        Self { file }
    }
}

/// An `env` error as the `io::Error` redb expects, keeping its kind (EOF, ENOSPC) and its text (op and path).
pub fn io_error(error: &env::Error) -> io::Error {
    let kind = match error {
        env::Error::UnexpectedEof { .. } => io::ErrorKind::UnexpectedEof,
        env::Error::NoSpace { .. } => io::ErrorKind::StorageFull,
        env::Error::NotFound { .. } => io::ErrorKind::NotFound,
        env::Error::InvalidInput { .. } => io::ErrorKind::InvalidInput,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, error.to_string())
}

impl<F: File> redb::StorageBackend for EnvBackend<F> {
    fn len(&self) -> Result<u64, io::Error> {
        self.file.len().map_err(|error| io_error(&error))
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        // `read_exact_at` fails with `UnexpectedEof` past the end, as the trait asks.
        self.file.read_exact_at(offset, out).map_err(|error| io_error(&error))
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        // Zero-extends: new positions read as zero, as the trait asks.
        self.file.set_len(len).map_err(|error| io_error(&error))
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        if sync_ignored() {
            return Ok(());
        }
        self.file.sync().map_err(|error| io_error(&error))
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        // Short writes are continued (bounded by `env::WRITE_ATTEMPTS_MAX`).
        self.file.write_all_at(offset, data).map_err(|error| io_error(&error))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use holdfast::env::{Env, OpenOptions, SimEnv};
    use redb::{ReadableDatabase, StorageBackend, TableDefinition};

    use super::*;

    const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("t");

    fn open_file(env: &SimEnv) -> <SimEnv as Env>::File {
        let options = OpenOptions { create: true, create_new: false, truncate: false, write: true };
        env.create_dir_all(Path::new("/redb")).expect("mkdir");
        let file = env.open(Path::new("/redb/db.redb"), options).expect("open");
        env.sync_dir(Path::new("/redb")).expect("sync_dir");
        env.sync_dir(Path::new("/")).expect("sync_dir root");
        file
    }

    #[test]
    fn backend_reads_back_what_it_wrote_and_refuses_reads_past_the_end() {
        let env = SimEnv::new(1);
        let backend = EnvBackend::new(open_file(&env));
        backend.write(100, b"hello").expect("write");
        backend.sync_data().expect("sync");
        let mut out = [0u8; 5];
        backend.read(100, &mut out).expect("read");
        assert_eq!(&out, b"hello");
        assert_eq!(backend.len().expect("len"), 105);
        let error = backend.read(103, &mut out).expect_err("past the end");
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
        backend.set_len(200).expect("grow");
        let mut grown = [1u8; 10];
        backend.read(190, &mut grown).expect("read grown");
        assert_eq!(grown, [0u8; 10], "new positions read as zero");
        // The bytes are on the simulated disk, durable.
        let durable = env.read_durable(Path::new("/redb/db.redb")).expect("durable");
        assert_eq!(&durable[100..105], b"hello");
    }

    #[test]
    fn redb_commits_land_on_the_simulated_disk_and_survive_a_crash() {
        let env = SimEnv::new(7);
        let db = redb::Builder::new().create_with_backend(EnvBackend::new(open_file(&env))).expect("create");
        let txn = db.begin_write().expect("begin");
        {
            let mut table = txn.open_table(TABLE).expect("table");
            table.insert(b"key".as_slice(), b"value".as_slice()).expect("insert");
        }
        txn.commit().expect("commit");
        assert!(env.read_durable(Path::new("/redb/db.redb")).is_some_and(|bytes| bytes.len() > 1000));
        env.crash();
        drop(db);
        let db = redb::Builder::new().create_with_backend(EnvBackend::new(open_file(&env))).expect("reopen");
        let read = db.begin_read().expect("begin_read");
        let table = read.open_table(TABLE).expect("table");
        let value = table.get(b"key".as_slice()).expect("get").expect("present after the crash");
        assert_eq!(value.value(), b"value");
    }
}
