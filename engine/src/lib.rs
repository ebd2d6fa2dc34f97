//! holdfast's reference engine: an embedded key-value store (LSM tree, WAL, MVCC) over [`env::Env`].
//!
//! ```
//! use engine::{Db, Options};
//! let env = env::SimEnv::new(7);
//! let db = Db::open(env.clone(), "/db", Options::default())?;
//! db.put(b"key", b"value")?;
//! assert_eq!(db.get(b"key")?, Some(b"value".to_vec()));
//! # Ok::<(), engine::Error>(())
//! ```

pub mod canary;
mod db;
mod error;
mod jobs;
pub mod manifest;
mod memtable;
mod options;
mod recovery;
pub mod ssi;
pub mod sstable;
mod txn;
mod types;
mod version;
pub mod wal;

pub use db::{Db, FILE_NUMBER_MAX, Stats};
pub use error::{DecodeError, Error, Result};
pub use options::{Options, SyncMode};
pub use ssi::ConflictCause;
pub use txn::{COMMIT_WAITS_MAX, CommitTicket, ReadTransaction, ScanIter, Transaction};
pub use types::{
    Entry, InternalKey, KEY_SIZE_BYTES_MAX, Lookup, SEQUENCE_MAX, Sequence, VALUE_SIZE_BYTES_MAX, ValueKind,
    compare_internal,
};
