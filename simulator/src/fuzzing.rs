//! `Arbitrary` schedules for `cargo fuzz` (feature `arbitrary`), shared with `fuzz/fuzz_targets/schedule.rs`.
//!
//! The fuzzer's bytes choose a seed (which fixes the swarm configuration, faults included) and a list of small
//! operations, mapped onto well-formed engine steps: keys within the configuration's key space, bounded values,
//! crash points from the configuration's ranges, explicit faults only on the files the engine writes. A run of
//! such a schedule must pass every invariant; a failure aborts the fuzzer with the report.

use std::path::PathBuf;

use arbitrary::{Arbitrary, Unstructured};
use env::ExplicitFault;

use crate::config::SwarmConfig;
use crate::engine_target::{Action, Step, ValueSpec};
use crate::schedule::Schedule;

/// The most steps a fuzzed schedule has (longer inputs are cut: one fuzz execution stays fast).
pub const FUZZ_STEPS_MAX: usize = 256;
/// The largest value a fuzzed put writes.
pub const FUZZ_VALUE_BYTES_MAX: u32 = 300;

#[derive(Arbitrary, Debug)]
enum FuzzAction {
    Put { key: u16, id: u16, len: u16 },
    Delete { key: u16 },
    Get { key: u16 },
    Scan { start: u16, span: u8 },
    Flush,
    Compact,
    RunFlush,
    RunCompaction,
    Crash,
    CrashAtIo { k: u8 },
    CrashDuringRecovery { k: u8 },
    FailNextSync,
    FailNextWrite,
    Reopen,
}

fn to_step(action: FuzzAction, config: &SwarmConfig) -> Step {
    let keys = config.workload.key_count.max(1);
    let key = |k: u16| u32::from(k) % keys;
    let action = match action {
        FuzzAction::Put { key: k, id, len } => Action::Put {
            key: key(k),
            value: ValueSpec { id: u64::from(id), len: u32::from(len) % FUZZ_VALUE_BYTES_MAX },
        },
        FuzzAction::Delete { key: k } => Action::Delete { key: key(k) },
        FuzzAction::Get { key: k } => Action::Get { key: key(k) },
        FuzzAction::Scan { start, span } => Action::Scan { start: key(start), end: key(start) + u32::from(span) },
        FuzzAction::Flush => Action::Flush,
        FuzzAction::Compact => Action::Compact,
        FuzzAction::RunFlush => Action::RunTask { name: "flush".into() },
        FuzzAction::RunCompaction => Action::RunTask { name: "compaction".into() },
        FuzzAction::Crash => Action::Crash,
        FuzzAction::CrashAtIo { k } => Action::CrashAtIo { k: 1 + u64::from(k) % config.crash_at_io_k_max.max(1) },
        FuzzAction::CrashDuringRecovery { k } => {
            Action::CrashDuringRecovery { k: 1 + u64::from(k) % config.recovery_crash_k_max.max(1) }
        }
        FuzzAction::FailNextSync => {
            Action::Fault(ExplicitFault::FailNextSync { path: PathBuf::from("/db/MANIFEST.tmp") })
        }
        FuzzAction::FailNextWrite => {
            Action::Fault(ExplicitFault::FailNextWrite { path: PathBuf::from("/db/MANIFEST.tmp") })
        }
        FuzzAction::Reopen => Action::Reopen,
    };
    Step { client: 0, action }
}

impl<'a> Arbitrary<'a> for Schedule<Step> {
    fn arbitrary(input: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let seed = u64::arbitrary(input)?;
        let config = SwarmConfig::from_seed(seed);
        let mut schedule = Schedule::new("engine", seed, config.clone());
        for _ in 0..FUZZ_STEPS_MAX {
            if input.is_empty() {
                break;
            }
            schedule.steps.push(to_step(FuzzAction::arbitrary(input)?, &config));
        }
        assert!(schedule.steps.len() <= FUZZ_STEPS_MAX, "fuzzed schedule over FUZZ_STEPS_MAX");
        Ok(schedule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arbitrary_bytes_make_well_formed_schedules_that_replay() {
        for fill in [0u8, 7, 0x5a, 0xff] {
            let bytes: Vec<u8> = (0..400u32).map(|i| (i as u8).wrapping_mul(31) ^ fill).collect();
            let schedule = Schedule::<Step>::arbitrary(&mut Unstructured::new(&bytes)).expect("schedule");
            assert!(!schedule.steps.is_empty() && schedule.steps.len() <= FUZZ_STEPS_MAX);
            let text = schedule.to_json();
            let parsed = Schedule::<Step>::from_json(&text, "engine").expect("a fuzzed schedule is well formed");
            assert_eq!(parsed.steps.len(), schedule.steps.len());
            let outcome = crate::run_schedule(&parsed, &crate::RunOptions::default());
            assert!(outcome.passed(), "{}", outcome.failure.map(|f| f.report()).unwrap_or_default());
        }
    }
}
