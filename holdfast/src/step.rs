//! Schedule steps and what they produced. A [`Step`] is a world step (the framework's) or one of the target's
//! own operations; both serialize as one JSON object tagged by `op` (`{"op":"crash"}`,
//! `{"op":"put","key":3,...}`), so a schedule reads as one flat list.
//!
//! **Invariant:** a world step's `op` names ([`WORLD_OPS`]) are reserved: a target operation may not use them
//! (checked when a schedule is read, and by [`check_op_names`] in every target's tests).

use env::{CrashShape, ExplicitFault};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};

/// The `op` names of world steps.
pub const WORLD_OPS: [&str; 8] =
    ["crash", "crash_at_io", "crash_during_recovery", "fault", "fault_on", "reopen", "run_task", "tamper"];

/// A step the framework owns: the same for every target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum WorldStep {
    /// Power cut now, then recover and verify. `shape`: which pending operations the crash keeps, by their place
    /// in the write sequence (ADR-0172); absent, the world's keyed draws decide (every schedule before shapes).
    Crash {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shape: Option<CrashShape>,
    },
    /// Arm a crash at the `k`-th IO of the next step; disarmed after it if it did not fire. `shape` as for
    /// [`WorldStep::Crash`].
    CrashAtIo {
        k: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shape: Option<CrashShape>,
    },
    /// Power cut, then a second crash at the `k`-th IO of recovery itself, then recover and verify. `shape`, when
    /// present, shapes both crashes.
    CrashDuringRecovery {
        k: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shape: Option<CrashShape>,
    },
    /// Inject an explicit fault into one named file.
    Fault(ExplicitFault),
    /// Inject an explicit fault into a file chosen by its family and age when the step runs (what generation
    /// produces): removing earlier steps renumbers files, and the fault still lands on "the newest log".
    FaultOn(FaultOn),
    /// Clean close and reopen, then verify.
    Reopen,
    /// Step the first runnable background task named `name`; skipped if there is none.
    RunTask { name: String },
    /// The hostile operator: close the system, delete or rename a file it needs (chosen by family and age among
    /// [`crate::Target::tamper_sites`]), and open it: it must refuse with corruption naming that file, delete
    /// nothing, and open with everything once the file is put back (ADR-0077).
    Tamper(Tamper),
}

/// What a [`WorldStep::Tamper`] does to the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TamperAction {
    /// The file is removed (its bytes are kept by the framework to put it back).
    Delete,
    /// The file is renamed to `<name>.moved` in the same directory.
    Rename,
}

/// A tamper aimed at a file by family and age, as [`FaultOn`] aims a fault.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tamper {
    pub action: TamperAction,
    pub family: String,
    pub newest: u32,
}

/// Which explicit fault a [`WorldStep::FaultOn`] injects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "fault")]
pub enum FaultAction {
    /// The file's next `sync` fails (and loses its unsynced data).
    FailNextSync,
    /// The file's next `write_at` fails.
    FailNextWrite,
    /// Flip one bit of the file at `offset` (nothing if the file is shorter).
    FlipBit { offset: u64 },
}

/// An explicit fault aimed at a file by family and age: `family` is the file's path with its last run of digits
/// replaced by `#` (`/db/wal-#.log`; a name without digits is its own family), `newest` its rank among the
/// family's files the target offers, newest (highest number) first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultOn {
    #[serde(flatten)]
    pub action: FaultAction,
    pub family: String,
    pub newest: u32,
}

/// The family of a path and the number in its name: the last run of ASCII digits becomes `#`.
pub fn file_family(path: &std::path::Path) -> (String, u64) {
    let text = path.to_string_lossy();
    let bytes = text.as_bytes();
    let Some(end) = bytes.iter().rposition(u8::is_ascii_digit).map(|index| index + 1) else {
        return (text.into_owned(), 0);
    };
    let start = bytes[..end].iter().rposition(|byte| !byte.is_ascii_digit()).map_or(0, |index| index + 1);
    let number = text[start..end].parse::<u64>().unwrap_or(u64::MAX);
    (format!("{}#{}", &text[..start], &text[end..]), number)
}

/// One schedule step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Step<Op> {
    World(WorldStep),
    Op(Op),
}

impl WorldStep {
    /// A plain power cut with keyed crash decisions.
    pub const CRASH: WorldStep = WorldStep::Crash { shape: None };

    /// The crash shape of a crash step (`None` for other steps and for keyed crashes).
    pub fn crash_shape(&self) -> Option<&CrashShape> {
        match self {
            WorldStep::Crash { shape }
            | WorldStep::CrashAtIo { shape, .. }
            | WorldStep::CrashDuringRecovery { shape, .. } => shape.as_ref(),
            _ => None,
        }
    }

    /// Is this a step that crashes (now, armed, or inside recovery)?
    pub fn is_crash(&self) -> bool {
        matches!(self, WorldStep::Crash { .. } | WorldStep::CrashAtIo { .. } | WorldStep::CrashDuringRecovery { .. })
    }

    /// The same crash step with `shape` (other steps unchanged).
    pub fn with_crash_shape(&self, new: Option<CrashShape>) -> WorldStep {
        match self {
            WorldStep::Crash { .. } => WorldStep::Crash { shape: new },
            WorldStep::CrashAtIo { k, .. } => WorldStep::CrashAtIo { k: *k, shape: new },
            WorldStep::CrashDuringRecovery { k, .. } => WorldStep::CrashDuringRecovery { k: *k, shape: new },
            other => other.clone(),
        }
    }
}

impl<Op> Step<Op> {
    /// The target operation, if this is one.
    pub fn op(&self) -> Option<&Op> {
        match self {
            Step::Op(op) => Some(op),
            Step::World(_) => None,
        }
    }
}

impl<'de, Op: DeserializeOwned> Deserialize<'de> for Step<Op> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        let name = value.get("op").and_then(serde_json::Value::as_str).unwrap_or_default();
        if WORLD_OPS.contains(&name) {
            return WorldStep::deserialize(value).map(Step::World).map_err(D::Error::custom);
        }
        Op::deserialize(value).map(Step::Op).map_err(D::Error::custom)
    }
}

/// Check that a target's operations do not serialize with a reserved `op` name (pass one of each kind).
pub fn check_op_names<Op: Serialize>(ops: &[Op]) -> Result<(), String> {
    for op in ops {
        let value = serde_json::to_value(op).map_err(|error| error.to_string())?;
        if let Some(name) = value.get("op").and_then(serde_json::Value::as_str)
            && WORLD_OPS.contains(&name)
        {
            return Err(format!("operation {value} uses the reserved world step name {name:?}"));
        }
    }
    Ok(())
}

/// A target's unit test in one call: `ops` (one of each kind) serialize, parse back equal, and use no reserved
/// world step name. Returns their JSON for the test's own shape assertions.
pub fn check_ops<Op: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(ops: &[Op]) -> Result<String, String> {
    let json = serde_json::to_string(ops).map_err(|error| format!("ops do not serialize: {error}"))?;
    let back: Vec<Op> = serde_json::from_str(&json).map_err(|error| format!("{json} does not parse back: {error}"))?;
    if back != ops {
        return Err(format!("ops changed through JSON: {ops:?} became {back:?}"));
    }
    check_op_names(ops)?;
    Ok(json)
}

/// What a step produced: the target's own observation, or one the framework made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Observed<O> {
    /// The system recovered (after a crash or reopen) and the target verified it.
    Recovered { verified: O },
    /// The system could not be opened (a fault justified it; `reason` is the last open error): the step was not
    /// attempted.
    Unavailable { reason: String },
    /// The call failed with an error a fault justified (`class` from [`crate::SystemError::class`]; `crashed` when
    /// an armed crash cut it).
    Error { class: String },
    /// The step's precondition is gone: nothing happened.
    Skipped,
    /// A crash is armed for the next step.
    Armed { k: u64 },
    /// An explicit fault is injected.
    Injected,
    /// A background task step ran; `done` when the task finished.
    Task { name: String, done: bool },
    /// An armed crash cut this step at `io` on `path`; the system recovered and was verified.
    CutByCrash { io: String, path: String },
    /// The target's own observation.
    #[serde(untagged)]
    Op(O),
}

impl<O> Observed<O> {
    /// Did this step do no work (skipped, armed, injected, unavailable)? A target's own observation asks
    /// [`crate::Target::is_idle`].
    pub fn is_idle_with(&self, op_idle: impl FnOnce(&O) -> bool) -> bool {
        match self {
            Observed::Skipped | Observed::Armed { .. } | Observed::Injected | Observed::Unavailable { .. } => true,
            Observed::Op(observation) => op_idle(observation),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case", tag = "op")]
    enum Toy {
        Put { key: u32 },
        Flush,
    }

    #[test]
    fn steps_round_trip_as_one_flat_list() {
        let steps: Vec<Step<Toy>> = vec![
            Step::Op(Toy::Put { key: 3 }),
            Step::World(WorldStep::CRASH),
            Step::World(WorldStep::CrashAtIo { k: 5, shape: None }),
            Step::World(WorldStep::Crash { shape: Some(CrashShape::all(false)) }),
            Step::World(WorldStep::Fault(ExplicitFault::FlipBit { path: PathBuf::from("/db/x"), offset: 7 })),
            Step::World(WorldStep::RunTask { name: "flush".into() }),
            Step::Op(Toy::Flush),
        ];
        let json = serde_json::to_string(&steps).expect("serializes");
        assert!(json.contains(r#"{"op":"put","key":3}"#), "{json}");
        assert!(json.contains(r#"{"op":"crash_at_io","k":5}"#), "{json}");
        assert!(json.contains(r#"{"op":"crash"},"#), "a keyed crash reads as before: {json}");
        assert!(json.contains(r#"{"op":"crash","shape":{"older":"dropped"}}"#), "{json}");
        assert!(json.contains(r#"{"op":"fault","fault":"flip_bit","path":"/db/x","offset":7}"#), "{json}");
        let back: Vec<Step<Toy>> = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, steps);
    }

    #[test]
    fn a_bad_step_names_the_target_error_and_reserved_names_are_refused() {
        let error = serde_json::from_str::<Step<Toy>>(r#"{"op":"put","key":"x"}"#).expect_err("bad key");
        assert!(error.to_string().contains("invalid type"), "{error}");
        let error = serde_json::from_str::<Step<Toy>>(r#"{"op":"crash_at_io"}"#).expect_err("missing k");
        assert!(error.to_string().contains("missing field `k`"), "{error}");
        assert_eq!(check_op_names(&[Toy::Put { key: 1 }, Toy::Flush]), Ok(()));
        assert_eq!(check_ops(&[Toy::Flush]), Ok(r#"[{"op":"flush"}]"#.to_string()));
        #[derive(Serialize)]
        #[serde(tag = "op", rename_all = "snake_case")]
        enum Clash {
            Crash,
        }
        assert!(check_op_names(&[Clash::Crash]).is_err());
    }

    #[test]
    fn families_strip_the_last_number_and_fault_on_round_trips() {
        assert_eq!(file_family(std::path::Path::new("/db/wal-000032.log")), ("/db/wal-#.log".to_string(), 32));
        assert_eq!(file_family(std::path::Path::new("/db/MANIFEST")), ("/db/MANIFEST".to_string(), 0));
        assert_eq!(file_family(std::path::Path::new("/d1/table-7")), ("/d1/table-#".to_string(), 7));
        let step: Step<Toy> = Step::World(WorldStep::FaultOn(FaultOn {
            action: FaultAction::FlipBit { offset: 9 },
            family: "/db/table-#.sst".into(),
            newest: 1,
        }));
        let json = serde_json::to_string(&step).expect("serializes");
        assert_eq!(json, r#"{"op":"fault_on","fault":"flip_bit","offset":9,"family":"/db/table-#.sst","newest":1}"#);
        assert_eq!(serde_json::from_str::<Step<Toy>>(&json).expect("parses"), step);
    }

    #[test]
    fn observations_serialize_flat_and_idle_is_the_documented_set() {
        let own: Observed<Toy> = Observed::Op(Toy::Flush);
        assert_eq!(serde_json::to_string(&own).expect("serializes"), r#"{"op":"flush"}"#);
        let armed: Observed<Toy> = Observed::Armed { k: 2 };
        assert_eq!(serde_json::to_string(&armed).expect("serializes"), r#"{"result":"armed","k":2}"#);
        assert!(armed.is_idle_with(|_| false));
        assert!(Observed::<Toy>::Skipped.is_idle_with(|_| false));
        assert!(!Observed::<Toy>::Error { class: "io".into() }.is_idle_with(|_| true));
        assert!(own.is_idle_with(|_| true) && !own.is_idle_with(|_| false));
    }
}
