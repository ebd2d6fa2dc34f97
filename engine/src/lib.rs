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
mod commit;

/// Whether the expensive cross-checks run: checks whose cost is of the order of the operation they check (a
/// second, plain binary search of a table's index on every lookup). On in the engine's own tests and in every
/// build with the `expensive-checks` feature, which the simulation targets turn on; off in a production build.
/// Cheap assertions stay on everywhere (ADR-0001, amended by ADR-0063).
pub const EXPENSIVE_CHECKS: bool = cfg!(any(test, feature = "expensive-checks"));
mod db;
mod error;
mod file_names;
mod introspect;
mod jobs;
mod lock_meter;
pub mod manifest;
mod memtable;
mod options;
mod read_cache;
mod recovery;
pub mod recovery_rules;
mod scan;
pub mod ssi;
pub mod sstable;
mod state;
mod striped;
mod txn;
mod types;
mod version;
mod view;
pub mod wal;
mod wal_writer;
mod watermark;
pub mod work;

pub use commit::{COMMIT_WAITS_MAX, CommitTicket};
pub use db::{Db, Stats};
pub use error::{DecodeError, Error, Result};
pub use introspect::{FileKeyRange, SkippedTables};
pub use lock_meter::{LockHold, LockHolds};
pub use manifest::FILE_NUMBER_MAX;
pub use options::{GROUP_COMMIT_GATHER_US_MAX, Options, SyncMode, TRACKED_TRANSACTIONS_MIN};
pub use scan::ScanIter;
pub use ssi::ConflictCause;
pub use txn::{READS_BUFFERED_MAX, ReadTransaction, Transaction};
/// Every probe (`env::probe!`) the engine can hit, sorted: the rare paths a simulation should reach. A swarm
/// summary lists those no seed hit (`probes: H of D hit`). The engine's `probes` test keeps this list and the
/// call sites in `engine/src` equal, so neither can rot.
///
/// | probe | where it fires |
/// |-------|----------------|
/// | `compaction.kept_version_for_snapshot` | a compaction kept an older version of a key for a live snapshot |
/// | `compaction.live_snapshot` | a compaction started while a snapshot below the newest sequence was live |
/// | `compaction.output_split` | a compaction's output reached the table size target and was split |
/// | `compaction.tombstone_dropped` | a bottom-level compaction dropped a tombstone no snapshot needs |
/// | `flush.l0_trigger_reached` | a flush left level 0 at its compaction trigger |
/// | `jobs.background_failed` | a flush or compaction failed and poisoned the database |
/// | `manifest.reread_recovered` | `MANIFEST` decoded only on a second read (a transient read flip) |
/// | `memtable.rotated_early` | BUGGIFY rotated a memtable below its flush threshold |
/// | `recovery.empty_segment_skipped` | recovery found an empty log segment (an earlier open did not finish) |
/// | `recovery.interrupted_manifest_install` | open found a `MANIFEST.tmp` an install cut before its rename left |
/// | `recovery.multi_segment_replay` | recovery replayed more than one non-empty log segment |
/// | `recovery.orphan_table_removed` | open removed a table no manifest lists (a crash cut its flush or compaction) |
/// | `recovery.segment_reread_differed` | a damaged-looking log segment read differently the second time |
/// | `ssi.conflict_dangerous_structure` | a commit aborted as the pivot of a dangerous structure |
/// | `ssi.conflict_read_only_guard` | a commit aborted by the read-only anomaly guard |
/// | `ssi.conflict_read_write` | an operation aborted: its read closed a dangerous structure |
/// | `ssi.conflict_write_write` | a commit aborted: first committer wins |
/// | `ssi.safe_snapshot_stepped_back` | a read-only transaction read below the latest snapshot (an in-flight pivot) |
/// | `txn.batch_gathered` | a group-commit batch paused to gather the committers the batch before it released |
/// | `txn.group_commit_batch` | one log sync acknowledged more than one commit |
/// | `wal.seal_acknowledged_pending` | a segment's seal made pending commits durable before their group commit |
/// | `wal.torn_tail_truncated` | recovery truncated a torn tail of the last log segment |
/// | `write.stalled` | a write waited for a flush: too many memtables were waiting |
pub const PROBES: &[&str] = &[
    "compaction.kept_version_for_snapshot",
    "compaction.live_snapshot",
    "compaction.output_split",
    "compaction.tombstone_dropped",
    "flush.l0_trigger_reached",
    "jobs.background_failed",
    "manifest.reread_recovered",
    "memtable.rotated_early",
    "recovery.empty_segment_skipped",
    "recovery.interrupted_manifest_install",
    "recovery.multi_segment_replay",
    "recovery.orphan_table_removed",
    "recovery.segment_reread_differed",
    "ssi.conflict_dangerous_structure",
    "ssi.conflict_read_only_guard",
    "ssi.conflict_read_write",
    "ssi.conflict_write_write",
    "ssi.safe_snapshot_stepped_back",
    "ssi.transaction_expired",
    "txn.batch_gathered",
    "txn.group_commit_batch",
    "wal.seal_acknowledged_pending",
    "wal.torn_tail_truncated",
    "write.stalled",
];

pub use types::{
    Entry, InternalKey, KEY_SIZE_BYTES_MAX, Lookup, SEQUENCE_MAX, Sequence, VALUE_SIZE_BYTES_MAX, ValueKind,
    compare_internal,
};
