//! A schedule is data: everything needed to replay a run, with no reference to the RNG that generated it.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::config::WorldConfig;
use crate::step::Step;
use crate::target::Target;

/// The schedule format this build writes and reads. Version 2 (ADR-0042) split the configuration into the
/// world's and the target's own, and made world steps the framework's.
pub const FORMAT_VERSION: u32 = 2;

/// Largest schedule file the CLI reads, in bytes.
pub const SCHEDULE_SIZE_BYTES_MAX: u64 = 1 << 30;

/// An ordered list of steps for one target, plus the seed and configurations of the world they run in.
///
/// **Invariant:** replaying a schedule depends only on its fields: the world is `SimEnv::with_faults(seed,
/// world.faults)`, the target is built from `config`, and each step carries its data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(serialize = "C: Serialize, O: Serialize", deserialize = "C: DeserializeOwned, O: DeserializeOwned"))]
pub struct Schedule<C, O> {
    pub format_version: u32,
    /// The [`Target::NAME`] these steps are for.
    pub target: String,
    pub seed: u64,
    pub world: WorldConfig,
    /// The target's own configuration.
    pub config: C,
    pub steps: Vec<Step<O>>,
}

/// The schedule type of target `T`.
pub type ScheduleOf<T> = Schedule<<T as Target>::Config, <T as Target>::Op>;

impl<C: Serialize + DeserializeOwned, O: Serialize + DeserializeOwned> Schedule<C, O> {
    /// A schedule with no steps yet.
    pub fn new(target: &str, seed: u64, world: WorldConfig, config: C) -> Self {
        assert!(!target.is_empty(), "a schedule names its target");
        Self { format_version: FORMAT_VERSION, target: target.to_string(), seed, world, config, steps: Vec::new() }
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        let json = serde_json::to_string_pretty(self).expect("a schedule always serializes");
        debug_assert!(json.starts_with('{'));
        json
    }
}

/// Parse a schedule of target `T` from JSON and check its version, target and configurations.
pub fn parse_schedule<T: Target>(text: &str) -> Result<ScheduleOf<T>, String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|error| format!("not JSON: {error}"))?;
    parse_schedule_value::<T>(value)
}

/// [`parse_schedule`] from a JSON value (a seed file's `schedule` field).
pub fn parse_schedule_value<T: Target>(value: serde_json::Value) -> Result<ScheduleOf<T>, String> {
    let version = value.get("format_version").and_then(serde_json::Value::as_u64);
    if version != Some(u64::from(FORMAT_VERSION)) {
        return Err(format!(
            "schedule format_version {} is not supported (this build reads {FORMAT_VERSION})",
            version.map_or_else(|| "missing".to_string(), |version| version.to_string())
        ));
    }
    let target = value.get("target").and_then(serde_json::Value::as_str).unwrap_or_default();
    if target != T::NAME {
        return Err(format!("schedule is for target {target:?}, not {:?}", T::NAME));
    }
    let schedule: ScheduleOf<T> = serde_json::from_value(value).map_err(|error| format!("not a schedule: {error}"))?;
    schedule.world.validate().map_err(|error| format!("schedule world: {error}"))?;
    T::validate_config(&schedule.config).map_err(|error| format!("schedule config: {error}"))?;
    Ok(schedule)
}
