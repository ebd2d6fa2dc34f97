//! redb-target steps and observations: plain data, serde JSON, stable digests.

use std::hash::Hasher;

use env::{ExplicitFault, StableHasher};
use serde::{Deserialize, Serialize};

use crate::engine_target::ValueSpec;
use crate::target::{Digest, Observation, digest_fault, digest_text, digest_words};

/// One operation inside a write transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum WriteOp {
    /// `table.insert(key_bytes(key), value_bytes(value))`.
    Insert { key: u32, value: ValueSpec },
    /// `table.remove(key_bytes(key))`.
    Remove { key: u32 },
}

impl WriteOp {
    /// The key this operation touches.
    pub fn key(&self) -> u32 {
        match self {
            WriteOp::Insert { key, .. } | WriteOp::Remove { key } => *key,
        }
    }
}

/// One schedule step. Every variant carries all its data; none needs the generating RNG.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Step {
    /// One write transaction: `ops` in order, then `commit()` with `Durability::Immediate` — or, when `commit` is
    /// false, `abort()`: nothing of it may ever be visible.
    Write { ops: Vec<WriteOp>, commit: bool },
    /// A read transaction: `get` of each key, checked against the model.
    Read { keys: Vec<u32> },
    /// A read transaction: `range(key(start)..key(end))`, checked against the model.
    Range { start: u32, end: u32 },
    /// Open a long-lived read transaction (replacing any open one); later `SnapshotRead` steps read it.
    Snapshot,
    /// Read every key through the long-lived read transaction: it must still show the state it began at.
    SnapshotRead,
    /// `Database::compact()` (skipped while a snapshot is open: redb refuses).
    Compact,
    /// `Database::check_integrity()`: redb's own structural check (checksums, allocator state).
    CheckIntegrity,
    /// Drop the database cleanly (redb writes its allocator state on close), reopen, verify every key.
    Reopen,
    /// Power cut now, then reopen (redb repairs) and verify every key.
    Crash,
    /// Arm a crash at the `k`-th IO of the next step; disarmed after it if it did not fire; then recover.
    CrashAtIo { k: u64 },
    /// Power cut, then a second crash at the `k`-th IO of reopening (inside redb's repair), then recover.
    CrashDuringRecovery { k: u64 },
    /// An explicit fault on the database file (the `beyond` profile only).
    Fault(ExplicitFault),
}

impl Digest for Step {
    fn digest_into(&self, hasher: &mut StableHasher) {
        match self {
            Step::Write { ops, commit } => {
                digest_words(hasher, &[1, u64::from(*commit), ops.len() as u64]);
                for op in ops {
                    match op {
                        WriteOp::Insert { key, value } => {
                            digest_words(hasher, &[1, u64::from(*key), value.id, u64::from(value.len)]);
                        }
                        WriteOp::Remove { key } => digest_words(hasher, &[2, u64::from(*key)]),
                    }
                }
            }
            Step::Read { keys } => {
                digest_words(hasher, &[2, keys.len() as u64]);
                digest_words(hasher, &keys.iter().map(|&key| u64::from(key)).collect::<Vec<u64>>());
            }
            Step::Range { start, end } => digest_words(hasher, &[3, u64::from(*start), u64::from(*end)]),
            Step::Snapshot => hasher.write_u64(4),
            Step::SnapshotRead => hasher.write_u64(5),
            Step::Compact => hasher.write_u64(6),
            Step::CheckIntegrity => hasher.write_u64(7),
            Step::Reopen => hasher.write_u64(8),
            Step::Crash => hasher.write_u64(9),
            Step::CrashAtIo { k } => digest_words(hasher, &[10, *k]),
            Step::CrashDuringRecovery { k } => digest_words(hasher, &[11, *k]),
            Step::Fault(fault) => digest_fault(hasher, 12, fault),
        }
    }
}

/// What a step produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Observed {
    /// The write transaction committed (`Durability::Immediate` returned Ok).
    Committed,
    /// The write transaction was aborted on purpose.
    Aborted,
    /// A read saw what the model says: `entries` present keys whose keys and values hash to `hash`.
    Read { entries: u64, hash: u64 },
    /// `compact()` returned; `compacted` is its answer.
    Compacted { compacted: bool },
    /// `check_integrity()` returned Ok; `clean` is its answer (false: redb repaired something).
    Integrity { clean: bool },
    /// A long-lived read transaction is open.
    SnapshotOpen,
    /// redb returned an error that an injected fault justifies (the `beyond` profile); the database is reopened.
    Error { error: String },
    /// Reopened (after a crash or a clean close) and verified every key; `repairs` counts redb's repair callbacks.
    Recovered { entries: u64, repairs: u64 },
    /// The database could not be opened: the redb error, shown in the report. Only the `beyond` profile tolerates
    /// it (after a data-destroying fault); the rest of the run only records.
    Unavailable { reason: String },
    /// The step's precondition is gone (no snapshot, database unavailable): nothing happened.
    Skipped,
    /// A crash is armed for the next step.
    Armed { k: u64 },
    /// An explicit fault is injected.
    Injected,
    /// An armed crash cut this step at `op` on `path`; recovered and verified.
    CutByCrash { op: String, path: String },
}

impl Digest for Observed {
    fn digest_into(&self, hasher: &mut StableHasher) {
        match self {
            Observed::Committed => hasher.write_u64(1),
            Observed::Aborted => hasher.write_u64(2),
            Observed::Read { entries, hash } => digest_words(hasher, &[3, *entries, *hash]),
            Observed::Compacted { compacted } => digest_words(hasher, &[4, u64::from(*compacted)]),
            Observed::Integrity { clean } => digest_words(hasher, &[5, u64::from(*clean)]),
            Observed::SnapshotOpen => hasher.write_u64(6),
            Observed::Error { error } => digest_text(hasher, 7, error),
            Observed::Recovered { entries, repairs } => digest_words(hasher, &[8, *entries, *repairs]),
            Observed::Unavailable { reason } => digest_text(hasher, 9, reason),
            Observed::Skipped => hasher.write_u64(10),
            Observed::Armed { k } => digest_words(hasher, &[11, *k]),
            Observed::Injected => hasher.write_u64(12),
            Observed::CutByCrash { op, path } => {
                digest_text(hasher, 13, op);
                hasher.write(path.as_bytes());
            }
        }
    }
}

impl Observation for Observed {
    fn is_idle(&self) -> bool {
        matches!(self, Observed::Skipped | Observed::Armed { .. } | Observed::Injected | Observed::Unavailable { .. })
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn steps_round_trip_through_json() {
        let steps = vec![
            Step::Write {
                ops: vec![WriteOp::Insert { key: 3, value: ValueSpec { id: 9, len: 4 } }, WriteOp::Remove { key: 1 }],
                commit: true,
            },
            Step::Fault(ExplicitFault::FlipBit { path: PathBuf::from("/redb/db.redb"), offset: 7 }),
            Step::CrashAtIo { k: 5 },
            Step::Range { start: 1, end: 9 },
        ];
        let json = serde_json::to_string(&steps).expect("serializes");
        assert!(json.contains(r#"{"kind":"insert","key":3,"value":{"id":9,"len":4}}"#), "{json}");
        let back: Vec<Step> = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, steps);
    }

    #[test]
    fn digests_differ_by_field() {
        let digest = |step: &Step| {
            let mut hasher = StableHasher::new();
            step.digest_into(&mut hasher);
            hasher.finish()
        };
        let a = Step::Write { ops: vec![WriteOp::Remove { key: 1 }], commit: true };
        let b = Step::Write { ops: vec![WriteOp::Remove { key: 1 }], commit: false };
        assert_ne!(digest(&a), digest(&b));
        assert_eq!(digest(&a), digest(&a.clone()));
        assert!(Observed::Skipped.is_idle());
        assert!(!Observed::Committed.is_idle());
    }
}
