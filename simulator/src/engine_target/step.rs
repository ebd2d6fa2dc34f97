//! Engine-target steps and observations: plain data, serde JSON, stable digests.

use std::hash::Hasher;

use env::{ExplicitFault, StableHasher};
use serde::{Deserialize, Serialize};

use super::model::ValueSpec;
use crate::target::{Digest, Observation, digest_fault, digest_text, digest_words};

/// Which client issued a step. Every step today comes from client 0; multi-client transactions (a later issue)
/// will interleave steps of several clients, each with its own open transaction.
pub type ClientId = u32;

/// One schedule step: a client and what it does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub client: ClientId,
    #[serde(flatten)]
    pub action: Action,
}

fn is_zero(client: &ClientId) -> bool {
    *client == 0
}

impl Step {
    /// A step of client 0.
    pub fn new(action: Action) -> Self {
        Self { client: 0, action }
    }
}

/// What a step does. Every variant carries all its data; none needs the generating RNG.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Action {
    /// `db.put(key, value_bytes(value))`.
    Put { key: u32, value: ValueSpec },
    /// `db.delete(key)`.
    Delete { key: u32 },
    /// `db.get(key)`, checked against the model.
    Get { key: u32 },
    /// `db.scan(key(start), key(end))`, checked against the model.
    Scan { start: u32, end: u32 },
    /// `db.flush()`.
    Flush,
    /// `db.compact()`.
    Compact,
    /// Step the first runnable background task named `name` (`flush`, `compaction`); skipped if there is none.
    RunTask { name: String },
    /// Power cut now, then recover and verify every key.
    Crash,
    /// Arm a crash at the `k`-th IO of the next step; disarmed after it if it did not fire; then recover.
    CrashAtIo { k: u64 },
    /// Power cut, then a second crash at the `k`-th IO of recovery itself, then recover and verify.
    CrashDuringRecovery { k: u64 },
    /// Inject an explicit fault into the simulated disk.
    Fault(ExplicitFault),
    /// Clean close and reopen, then verify every key.
    Reopen,
}

impl Digest for Step {
    fn digest_into(&self, hasher: &mut StableHasher) {
        hasher.write_u64(u64::from(self.client));
        match &self.action {
            Action::Put { key, value } => digest_words(hasher, &[1, u64::from(*key), value.id, u64::from(value.len)]),
            Action::Delete { key } => digest_words(hasher, &[2, u64::from(*key)]),
            Action::Get { key } => digest_words(hasher, &[3, u64::from(*key)]),
            Action::Scan { start, end } => digest_words(hasher, &[4, u64::from(*start), u64::from(*end)]),
            Action::Flush => hasher.write_u64(5),
            Action::Compact => hasher.write_u64(6),
            Action::RunTask { name } => digest_text(hasher, 7, name),
            Action::Crash => hasher.write_u64(8),
            Action::CrashAtIo { k } => digest_words(hasher, &[9, *k]),
            Action::CrashDuringRecovery { k } => digest_words(hasher, &[10, *k]),
            Action::Fault(fault) => digest_fault(hasher, 11, fault),
            Action::Reopen => hasher.write_u64(12),
        }
    }
}

/// What a step produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Observed {
    /// The call succeeded.
    Ok,
    /// A read returned this value (None: absent).
    Value { value: Option<ValueSpec> },
    /// A scan returned `entries` pairs whose keys and values hash to `hash`.
    Scan { entries: u64, hash: u64 },
    /// The call failed with an error a fault justified (class: `closed`, `corruption`, `io`, `no_space`, ...).
    Error { class: String },
    /// The database could not be opened (a fault justified it; `reason` is the last open error); the step was not
    /// attempted.
    Unavailable { reason: String },
    /// The step's precondition is gone (no such task, empty range): nothing happened.
    Skipped,
    /// A background task step ran; `done` when the task finished.
    Task { name: String, done: bool },
    /// Recovered (after a crash or reopen) and verified every key.
    Recovered { last_sequence: u64 },
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
            Observed::Value { value } => match value {
                None => digest_words(hasher, &[2, 0]),
                Some(spec) => digest_words(hasher, &[2, 1, spec.id, u64::from(spec.len)]),
            },
            Observed::Scan { entries, hash } => digest_words(hasher, &[3, *entries, *hash]),
            Observed::Error { class } => digest_text(hasher, 4, class),
            Observed::Unavailable { reason } => digest_text(hasher, 5, reason),
            Observed::Skipped => hasher.write_u64(6),
            Observed::Task { name, done } => {
                digest_words(hasher, &[7, u64::from(*done)]);
                hasher.write(name.as_bytes());
            }
            Observed::Recovered { last_sequence } => digest_words(hasher, &[8, *last_sequence]),
            Observed::Armed { k } => digest_words(hasher, &[9, *k]),
            Observed::Injected => hasher.write_u64(10),
            Observed::CutByCrash { op, path } => {
                digest_text(hasher, 11, op);
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
            Step::new(Action::Put { key: 3, value: ValueSpec { id: 9, len: 4 } }),
            Step::new(Action::Fault(ExplicitFault::FlipBit { path: PathBuf::from("/db/MANIFEST"), offset: 7 })),
            Step { client: 2, action: Action::RunTask { name: "flush".into() } },
            Step::new(Action::CrashAtIo { k: 5 }),
        ];
        let json = serde_json::to_string(&steps).expect("serializes");
        assert!(json.contains(r#"{"op":"put","key":3,"value":{"id":9,"len":4}}"#), "{json}");
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
        let a = Step::new(Action::Get { key: 1 });
        let b = Step::new(Action::Get { key: 2 });
        assert_ne!(digest(&a), digest(&b));
        assert_eq!(digest(&a), digest(&a.clone()));
        assert!(Observed::Skipped.is_idle());
        assert!(!Observed::Ok.is_idle());
    }
}
