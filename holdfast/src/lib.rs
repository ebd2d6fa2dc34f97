//! holdfast: deterministic simulation testing for storage systems.
//!
//! Put your system on a simulated disk ([`env::SimEnv`], or the `std::fs`-shaped [`env::fs`] facade), write one
//! [`Target`] — how to open it, your operations and their checks, what "healthy" means — and get seeded swarms,
//! the disk fault model (crashes that land inside operations, torn and lost writes, fsync errors, corruption,
//! full disks), checks after every step, a determinism self-check, shrinking to a minimal schedule, seed files
//! that replay in your own `cargo test`, and a command line ([`cli::Cli`]). `TARGETS.md` at the repository root
//! walks through it.
//!
//! # Probes: what was never reached
//!
//! Coverage counters say what a swarm did; probes say what it did not. Mark a rare path of your system with
//! `env::probe!(env, "area.what_happened")` (FoundationDB's `CODE_PROBE`, TigerBeetle's coverage marks,
//! Antithesis's "sometimes" assertions): it lives in `env` beside BUGGIFY, so the system needs no dependency on
//! the framework, costs nothing on `RealEnv`, and is counted per simulated world, so parallel seeds stay
//! deterministic. Declare every probe in [`Target::probes`] (the engine's list is `engine::PROBES`, kept equal to
//! its call sites by a test). Each hit becomes the coverage counter `probe.<name>` (coverage, never part of a
//! digest), and a swarm summary prints `probes: H of D hit` and then `never hit: a, b, c`; `--json` carries
//! `declared_probes` and `probes_never_hit`. `--require-probes` turns a never-hit probe into missing coverage
//! (exit 1): rare paths need big swarms, so use it on thousands of seeds, not on a smoke test.
//!
//! # Codemap
//!
//! * [`target`]: the [`Target`] trait and the values that cross it.
//! * [`world`]: what a target borrows during a run ([`World`]), with the per-fault rules (ADR-0010).
//! * [`protocol`]: world steps, recovery, liveness and the final power cut, written once for every target.
//! * [`config`]: the world's per-seed configuration and fault profiles.
//! * [`step`]: schedule steps ([`Step`], [`WorldStep`]) and observations ([`Observed`]).
//! * [`schedule`], [`runner`], [`swarm`], [`shrink`]: replayable schedules, the step loop, many seeds, shrinking.
//! * [`budget`]: every run's budget of simulated work (a hang is a failure).
//! * [`digest`]: digests through serde encodings.
//! * [`seeds`]: a directory of seed files as tests.
//! * [`cli`]: the command line as a library.
//! * [`kit`]: helpers key-value targets share (value specs, key encoding, workload shapes).

pub mod budget;
pub mod cli;
pub mod config;
pub mod cost;
pub mod digest;
pub mod kit;
pub mod models;
pub mod protocol;
pub mod runner;
pub mod schedule;
pub mod seeds;
pub mod shrink;
pub mod step;
pub mod swarm;
pub mod target;
pub mod world;

pub use config::{DISK_QUOTA_BYTES_STANDARD, ExplicitFaults, FaultMenu, FaultProfile, WorldConfig};
pub use runner::{
    Failure, Outcome, OutcomeOf, RunOptions, check_determinism, run_configured, run_schedule, run_target,
};
pub use schedule::{FORMAT_VERSION, Schedule, ScheduleOf, parse_schedule};
pub use step::{Observed, Step, Tamper, TamperAction, WorldStep};
pub use swarm::{SwarmOptions, SwarmSummary, run_swarm};
pub use target::{Coverage, FailureKind, FaultSite, Rendering, SeedParallelism, SystemError, Target, Violation};
pub use world::{Damage, World};
// `::` names the crates alone: a bare `env` would re-export std's `env!` macro too.
pub use ::{corpus, env};

/// The environment variable that overrides a test's default seed.
pub const SEED_ENV_VAR: &str = "SIMULATOR_SEED";

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
}
