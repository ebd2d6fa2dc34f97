//! A schedule is data: everything needed to replay a run, with no reference to the RNG that generated it.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::config::SwarmConfig;

/// The schedule file format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// Largest schedule file the CLI reads, in bytes.
pub const SCHEDULE_SIZE_BYTES_MAX: u64 = 1 << 30;

/// An ordered list of steps for one target, plus the seed and configuration of the world they run in.
///
/// **Invariant:** replaying a schedule depends only on its fields: the world is `SimEnv::with_faults(seed,
/// config.faults)`, and each step carries its data or derives it by a pure function of its own fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule<S> {
    pub format_version: u32,
    /// The [`crate::Target::NAME`] these steps are for.
    pub target: String,
    pub seed: u64,
    pub config: SwarmConfig,
    pub steps: Vec<S>,
}

impl<S: Serialize + DeserializeOwned> Schedule<S> {
    /// A schedule with no steps yet.
    pub fn new(target: &str, seed: u64, config: SwarmConfig) -> Self {
        assert!(!target.is_empty(), "a schedule names its target");
        Self { format_version: FORMAT_VERSION, target: target.to_string(), seed, config, steps: Vec::new() }
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        let json = serde_json::to_string_pretty(self).expect("a schedule always serializes");
        debug_assert!(json.starts_with('{'));
        json
    }

    /// Parse JSON and check the version, target and configuration.
    pub fn from_json(text: &str, target: &str) -> Result<Self, String> {
        let schedule: Self = serde_json::from_str(text).map_err(|error| format!("not a schedule: {error}"))?;
        if schedule.format_version != FORMAT_VERSION {
            return Err(format!(
                "schedule format_version {} is not supported (this build reads {FORMAT_VERSION})",
                schedule.format_version
            ));
        }
        if schedule.target != target {
            return Err(format!("schedule is for target {:?}, not {target:?}", schedule.target));
        }
        schedule.config.validate().map_err(|error| format!("schedule config: {error}"))?;
        Ok(schedule)
    }
}
