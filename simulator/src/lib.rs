//! holdfast's deterministic simulator.
//!
//! One seed owns a whole world: a [`env::SimEnv`] (virtual disk, faults, crashes, scheduler), a swarm
//! configuration ([`SwarmConfig::from_seed`]), and a workload stream. The simulator generates steps, applies each
//! to the system under test, checks invariants after every step, heals faults for a liveness phase, cuts the
//! power one last time, and folds every step, every result and the final disk image into a digest. A run is
//! recorded as a [`Schedule`] — plain data — that replays without the generating RNG.
//!
//! # Codemap
//!
//! * [`config`]: the per-seed swarm configuration.
//! * [`schedule`]: the replayable schedule format.
//! * [`target`]: the [`Target`] trait, the seam to a system under test, with [`Violation`] and [`Coverage`].
//! * [`runner`]: the generic step loop ([`run_target`], [`run_schedule_target`]) and [`Outcome`].
//! * [`swarm`]: many seeds, one summary.
//! * [`engine_target`]: the reference engine as a target, with its oracle and the per-fault weakening rules.
//! * `redb_target` (feature `redb`): redb, a database nobody here wrote, on a `SimEnv` file through its
//!   `StorageBackend` trait (ADR-0038).
//! * [`bench`]: the fixed `--bench` schedule and its real-IO replay.
//!
//! # Use from your own tests
//!
//! ```no_run
//! let seed = simulator::seed_from_env_or(42);
//! let outcome = simulator::run(seed, &simulator::RunOptions::with_steps(500));
//! assert!(outcome.passed(), "{}", outcome.failure.map(|f| f.report()).unwrap_or_default());
//! ```

pub mod bench;
pub mod config;
pub mod dsg;
pub mod engine_target;
#[cfg(feature = "arbitrary")]
pub mod fuzzing;
#[cfg(feature = "redb")]
pub mod redb_target;
pub mod runner;
pub mod schedule;
pub mod shrink;
pub mod swarm;
pub mod target;
pub mod txn_target;

pub use config::SwarmConfig;
pub use engine_target::EngineTarget;
pub use runner::{Failure, Outcome, RunOptions, check_determinism, run_schedule_target, run_target};
pub use schedule::{FORMAT_VERSION, Schedule};
pub use swarm::{SwarmOptions, SwarmSummary, run_swarm};
pub use target::{Coverage, Digest, FailureKind, Observation, Target, Violation};

/// The environment variable that overrides a test's default seed.
pub const SEED_ENV_VAR: &str = "SIMULATOR_SEED";

/// Run `seed` against the engine target.
pub fn run(seed: u64, options: &RunOptions) -> Outcome<engine_target::Step> {
    run_target::<EngineTarget>(seed, options)
}

/// Replay an engine schedule.
pub fn run_schedule(schedule: &Schedule<engine_target::Step>, options: &RunOptions) -> Outcome<engine_target::Step> {
    run_schedule_target::<EngineTarget>(schedule, options)
}

/// Parse a seed: decimal (`3735928559`) or hexadecimal with `0x` (`0xDEADBEEF`); `_` separators allowed.
pub fn parse_seed(text: &str) -> Result<u64, String> {
    let cleaned: String = text.trim().chars().filter(|&c| c != '_').collect();
    let parsed = match cleaned.strip_prefix("0x").or_else(|| cleaned.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => cleaned.parse::<u64>(),
    };
    parsed.map_err(|error| format!("invalid seed {text:?}: {error} (want a decimal or 0x-hex u64)"))
}

/// The seed in `SIMULATOR_SEED` if set, else `default`. Panics with a clear message on an unparsable value.
pub fn seed_from_env_or(default: u64) -> u64 {
    match std::env::var(SEED_ENV_VAR) {
        Ok(text) => parse_seed(&text).unwrap_or_else(|error| panic!("{SEED_ENV_VAR}: {error}")),
        Err(_) => default,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_in_decimal_and_hex() {
        assert_eq!(parse_seed("0xDEADBEEF"), Ok(3_735_928_559));
        assert_eq!(parse_seed("3735928559"), Ok(3_735_928_559));
        assert_eq!(parse_seed("1_000"), Ok(1000));
        assert!(parse_seed("banana").is_err());
        assert!(parse_seed("0x").is_err());
    }

    #[test]
    fn swarm_configs_are_pure_and_varied() {
        assert_eq!(SwarmConfig::from_seed(5), SwarmConfig::from_seed(5));
        let configs: Vec<SwarmConfig> = (0..50).map(SwarmConfig::from_seed).collect();
        assert!(configs.iter().any(|config| config.workload.key_count <= 8), "no tiny key space in 50 seeds");
        assert!(configs.iter().any(|config| !config.enabled_fault_kinds().is_empty()), "faults never on");
        assert!(configs.iter().any(|config| config.enabled_fault_kinds().is_empty()), "faults always on");
        assert!(configs.iter().any(|config| config.buggify) && configs.iter().any(|config| !config.buggify));
    }
}
