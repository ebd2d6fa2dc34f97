//! `Arbitrary` schedules for `cargo fuzz` (feature `arbitrary`), shared with `fuzz/fuzz_targets/schedule.rs`.
//!
//! The fuzzer's bytes choose a seed (which fixes the world and the engine configuration, faults included) and a
//! list of small operations, mapped onto well-formed steps: keys within the configuration's key space, bounded
//! values, crash points from the world's ranges, explicit faults only on a file the engine writes. A run of such
//! a schedule must pass every invariant; a failure aborts the fuzzer with the report.

use std::path::PathBuf;

use arbitrary::{Arbitrary, Unstructured};
use holdfast::env::ExplicitFault;
use holdfast::kit::ValueSpec;
use holdfast::{FaultProfile, ScheduleOf, Step, WorldConfig, WorldStep};

use crate::{EngineConfig, EngineTarget, Op};

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

fn to_step(action: FuzzAction, world: &WorldConfig, config: &EngineConfig) -> Step<Op> {
    let keys = config.workload.key_count.max(1);
    let key = |k: u16| u32::from(k) % keys;
    let manifest = || PathBuf::from("/db/MANIFEST.tmp");
    let op = match action {
        FuzzAction::Put { key: k, id, len } => {
            Op::Put { key: key(k), value: ValueSpec { id: u64::from(id), len: u32::from(len) % FUZZ_VALUE_BYTES_MAX } }
        }
        FuzzAction::Delete { key: k } => Op::Delete { key: key(k) },
        FuzzAction::Get { key: k } => Op::Get { key: key(k) },
        FuzzAction::Scan { start, span } => Op::Scan { start: key(start), end: key(start) + u32::from(span) },
        FuzzAction::Flush => Op::Flush,
        FuzzAction::Compact => Op::Compact,
        world_step => return Step::World(to_world_step(world_step, world, manifest())),
    };
    Step::Op(op)
}

fn to_world_step(action: FuzzAction, world: &WorldConfig, manifest: PathBuf) -> WorldStep {
    match action {
        FuzzAction::RunFlush => WorldStep::RunTask { name: "flush".into() },
        FuzzAction::RunCompaction => WorldStep::RunTask { name: "compaction".into() },
        FuzzAction::CrashAtIo { k } => {
            WorldStep::CrashAtIo { k: 1 + u64::from(k) % world.crash_at_io_k_max.max(1), shape: None }
        }
        FuzzAction::CrashDuringRecovery { k } => {
            WorldStep::CrashDuringRecovery { k: 1 + u64::from(k) % world.recovery_crash_k_max.max(1), shape: None }
        }
        FuzzAction::FailNextSync => WorldStep::Fault(ExplicitFault::FailNextSync { path: manifest }),
        FuzzAction::FailNextWrite => WorldStep::Fault(ExplicitFault::FailNextWrite { path: manifest }),
        FuzzAction::Reopen => WorldStep::Reopen,
        _ => WorldStep::Crash { shape: None },
    }
}

/// A well-formed engine schedule made from fuzzer bytes.
#[derive(Debug)]
pub struct FuzzSchedule(pub ScheduleOf<EngineTarget>);

impl<'a> Arbitrary<'a> for FuzzSchedule {
    fn arbitrary(input: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let seed = u64::arbitrary(input)?;
        let (world, config) = holdfast::runner::configure::<EngineTarget>(seed, FaultProfile::Assumed)
            .expect("the engine target has the assumed profile");
        let mut schedule = holdfast::Schedule::new("engine", seed, world.clone(), config.clone());
        for _ in 0..FUZZ_STEPS_MAX {
            if input.is_empty() {
                break;
            }
            schedule.steps.push(to_step(FuzzAction::arbitrary(input)?, &world, &config));
        }
        assert!(schedule.steps.len() <= FUZZ_STEPS_MAX, "fuzzed schedule over FUZZ_STEPS_MAX");
        Ok(Self(schedule))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arbitrary_bytes_make_well_formed_schedules_that_replay() {
        for fill in [0u8, 7, 0x5a, 0xff] {
            let bytes: Vec<u8> = (0..400u32).map(|i| (i as u8).wrapping_mul(31) ^ fill).collect();
            let FuzzSchedule(schedule) = FuzzSchedule::arbitrary(&mut Unstructured::new(&bytes)).expect("schedule");
            assert!(!schedule.steps.is_empty() && schedule.steps.len() <= FUZZ_STEPS_MAX);
            let parsed = holdfast::parse_schedule::<EngineTarget>(&schedule.to_json()).expect("well formed");
            assert_eq!(parsed.steps.len(), schedule.steps.len());
            let outcome = holdfast::run_schedule::<EngineTarget>(&parsed, &holdfast::RunOptions::default());
            assert!(outcome.passed(), "{}", outcome.failure.map(|f| f.report()).unwrap_or_default());
        }
    }
}
