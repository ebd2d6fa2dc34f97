//! Transaction-target steps and observations: plain data, serde JSON, stable digests.

use std::hash::Hasher;

use env::{ExplicitFault, StableHasher};
use serde::{Deserialize, Serialize};

use crate::engine_target::ValueSpec;
use crate::target::{Digest, Observation, digest_fault, digest_text, digest_words};

/// Which client issued a step (each client has at most one transaction open or in flight).
pub type ClientId = u32;

/// One schedule step. Every variant carries all its data; none needs the generating RNG. A client step whose
/// precondition is gone (no open transaction, nothing in flight, a read-only transaction asked to write) is
/// skipped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Step {
    /// `db.begin()` (or `db.begin_read()` when `read_only`).
    Begin { client: ClientId, read_only: bool },
    /// `t.get(key)`, checked against the model at the transaction's snapshot.
    Get { client: ClientId, key: u32 },
    /// `t.put(key, value_bytes(value))`.
    Put { client: ClientId, key: u32, value: ValueSpec },
    /// `t.delete(key)`.
    Delete { client: ClientId, key: u32 },
    /// `t.scan(key(start)..key(end))`, checked against the model at the transaction's snapshot.
    Scan { client: ClientId, start: u32, end: u32 },
    /// `t.submit()`: validate and append (not yet durable). A read-only transaction just ends.
    Commit { client: ClientId },
    /// `db.wait_for_commit(&ticket)`: the client waits for its submitted commit to be acknowledged.
    Ack { client: ClientId },
    /// `t.rollback()`.
    Rollback { client: ClientId },
    /// Step the first runnable background task named `name` (`group-commit`, `flush`, `compaction`).
    RunTask { name: String },
    /// `db.flush()`.
    Flush,
    /// `db.compact()`.
    Compact,
    /// Power cut now, then recover, resolve in-flight commits and verify every key.
    Crash,
    /// Arm a crash at the `k`-th IO of the next step; disarmed after it if it did not fire.
    CrashAtIo { k: u64 },
    /// Inject an explicit (non-damaging) fault into the simulated disk.
    Fault(ExplicitFault),
    /// Clean close and reopen (open transactions are rolled back first), then verify every key.
    Reopen,
}

impl Step {
    /// The client of a client step.
    pub fn client(&self) -> Option<ClientId> {
        match self {
            Step::Begin { client, .. }
            | Step::Get { client, .. }
            | Step::Put { client, .. }
            | Step::Delete { client, .. }
            | Step::Scan { client, .. }
            | Step::Commit { client }
            | Step::Ack { client }
            | Step::Rollback { client } => Some(*client),
            _ => None,
        }
    }
}

impl Digest for Step {
    fn digest_into(&self, hasher: &mut StableHasher) {
        let client = u64::from(self.client().unwrap_or(u32::MAX));
        match self {
            Step::Begin { read_only, .. } => digest_words(hasher, &[1, client, u64::from(*read_only)]),
            Step::Get { key, .. } => digest_words(hasher, &[2, client, u64::from(*key)]),
            Step::Put { key, value, .. } => {
                digest_words(hasher, &[3, client, u64::from(*key), value.id, u64::from(value.len)]);
            }
            Step::Delete { key, .. } => digest_words(hasher, &[4, client, u64::from(*key)]),
            Step::Scan { start, end, .. } => digest_words(hasher, &[5, client, u64::from(*start), u64::from(*end)]),
            Step::Commit { .. } => digest_words(hasher, &[6, client]),
            Step::Ack { .. } => digest_words(hasher, &[7, client]),
            Step::Rollback { .. } => digest_words(hasher, &[8, client]),
            Step::RunTask { name } => {
                hasher.write_u64(9);
                hasher.write(name.as_bytes());
            }
            Step::Flush => hasher.write_u64(10),
            Step::Compact => hasher.write_u64(11),
            Step::Crash => hasher.write_u64(12),
            Step::CrashAtIo { k } => digest_words(hasher, &[13, *k]),
            Step::Fault(fault) => digest_fault(hasher, 14, fault),
            Step::Reopen => hasher.write_u64(15),
        }
    }
}

/// What a step produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Observed {
    /// The call succeeded (a buffered write).
    Ok,
    /// A transaction began: its history id and snapshot.
    Began { txn: u64, snapshot: u64 },
    /// A read returned this value (None: absent).
    Value { value: Option<ValueSpec> },
    /// A scan returned `entries` pairs whose keys and values hash to `hash`.
    Scan { entries: u64, hash: u64 },
    /// A read-write commit was validated and appended: its last sequence.
    Submitted { txn: u64, last_sequence: u64 },
    /// A transaction committed with nothing to make durable (read-only, or wrote nothing).
    Committed { txn: u64 },
    /// The client's submitted commit was acknowledged.
    Acked { txn: u64 },
    /// The transaction rolled back.
    RolledBack { txn: u64 },
    /// A serialization failure aborted the transaction.
    Aborted { txn: u64, reason: String },
    /// The call failed with an error a fault justified.
    Error { class: String },
    /// The database could not be opened (a fault justified it); the step was not attempted.
    Unavailable { reason: String },
    /// The step's precondition is gone: nothing happened.
    Skipped,
    /// A background task step ran; `done` when the task finished.
    Task { name: String, done: bool },
    /// Recovered (after a crash or reopen): in-flight commits resolved, every key verified.
    Recovered { last_sequence: u64, present: u64, absent: u64 },
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
            Observed::Ok => hasher.write_u64(1),
            Observed::Began { txn, snapshot } => digest_words(hasher, &[2, *txn, *snapshot]),
            Observed::Value { value } => match value {
                None => digest_words(hasher, &[3, 0]),
                Some(spec) => digest_words(hasher, &[3, 1, spec.id, u64::from(spec.len)]),
            },
            Observed::Scan { entries, hash } => digest_words(hasher, &[4, *entries, *hash]),
            Observed::Submitted { txn, last_sequence } => digest_words(hasher, &[5, *txn, *last_sequence]),
            Observed::Committed { txn } => digest_words(hasher, &[6, *txn]),
            Observed::Acked { txn } => digest_words(hasher, &[7, *txn]),
            Observed::RolledBack { txn } => digest_words(hasher, &[8, *txn]),
            Observed::Aborted { txn, reason } => {
                digest_words(hasher, &[9, *txn]);
                hasher.write(reason.as_bytes());
            }
            Observed::Error { class } => digest_text(hasher, 10, class),
            Observed::Unavailable { reason } => digest_text(hasher, 11, reason),
            Observed::Skipped => hasher.write_u64(12),
            Observed::Task { name, done } => {
                digest_words(hasher, &[13, u64::from(*done)]);
                hasher.write(name.as_bytes());
            }
            Observed::Recovered { last_sequence, present, absent } => {
                digest_words(hasher, &[14, *last_sequence, *present, *absent]);
            }
            Observed::Armed { k } => digest_words(hasher, &[15, *k]),
            Observed::Injected => hasher.write_u64(16),
            Observed::CutByCrash { op, path } => {
                digest_text(hasher, 17, op);
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
            Step::Begin { client: 1, read_only: true },
            Step::Put { client: 2, key: 3, value: ValueSpec { id: 9, len: 12 } },
            Step::Scan { client: 0, start: 1, end: 4 },
            Step::Commit { client: 2 },
            Step::RunTask { name: "group-commit".into() },
            Step::Fault(ExplicitFault::FailNextSync { path: PathBuf::from("/db/wal-000001.log") }),
            Step::CrashAtIo { k: 2 },
        ];
        let json = serde_json::to_string(&steps).expect("serializes");
        assert!(json.contains(r#"{"op":"begin","client":1,"read_only":true}"#), "{json}");
        let back: Vec<Step> = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, steps);
    }

    #[test]
    fn digests_differ_by_client_and_field() {
        let digest = |step: &Step| {
            let mut hasher = StableHasher::new();
            step.digest_into(&mut hasher);
            hasher.finish()
        };
        assert_ne!(digest(&Step::Get { client: 0, key: 1 }), digest(&Step::Get { client: 1, key: 1 }));
        assert_ne!(digest(&Step::Get { client: 0, key: 1 }), digest(&Step::Get { client: 0, key: 2 }));
        assert_eq!(digest(&Step::Commit { client: 3 }), digest(&Step::Commit { client: 3 }));
        assert!(Observed::Skipped.is_idle());
        assert!(!Observed::Acked { txn: 1 }.is_idle());
    }
}
