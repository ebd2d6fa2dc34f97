//! A verification that meets a table with a damaged block passes over it and point-reads only the keys it may hold
//! (ADR-0142): the run passes, the damaged keys' reads are excused, and every other key is still compared.

use engine_target::{EngineConfig, EngineTarget, Op};
use holdfast::kit::ValueSpec;
use holdfast::step::{FaultAction, FaultOn};
use holdfast::{FaultProfile, RunOptions, ScheduleOf, Step, WorldStep, run_schedule};

/// Puts of every sixth key below 30, a flush (one table), puts of every other key (in the log), a bit flipped in
/// the table's first data block, then a crash (recovery verifies every key).
fn damaged_table_schedule() -> ScheduleOf<EngineTarget> {
    let (world, _) = holdfast::runner::configure::<EngineTarget>(1, FaultProfile::Assumed).expect("configured");
    let mut config = EngineConfig::from_seed(1);
    config.workload.key_count = 240;
    config.tuning.block_cache_bytes = 0;
    config.tuning.flush_threshold_bytes = 1 << 20;
    let mut schedule = holdfast::Schedule::new("engine", 0xDA4A6E, world.quiet(), config);
    let put = |key: u32| Step::Op(Op::Put { key, value: ValueSpec { id: u64::from(key) + 1, len: 16 } });
    schedule.steps.extend((0..30).step_by(6).map(put));
    schedule.steps.push(Step::Op(Op::Flush));
    schedule.steps.extend((0..240).filter(|key| key % 6 != 0 || *key >= 30).map(put));
    let flip = FaultOn { action: FaultAction::FlipBit { offset: 8 }, family: "/db/table-#.sst".into(), newest: 0 };
    schedule.steps.push(Step::World(WorldStep::FaultOn(flip)));
    schedule.steps.push(Step::World(WorldStep::Crash { shape: None }));
    schedule
}

#[test]
fn a_verification_passes_over_a_damaged_table_and_reads_only_its_keys() {
    let outcome = run_schedule::<EngineTarget>(&damaged_table_schedule(), &RunOptions::default());
    assert!(outcome.passed(), "{}", outcome.failure.map(|f| f.report()).unwrap_or_default());
    let passed_over = outcome.coverage.get("verify.tables_passed_over");
    assert!(passed_over >= 1, "no verification passed over the damaged table: {:?}", outcome.coverage);
    // The table's range excuses its keys (0..=24); every key past it is compared exactly, through the scan.
    let (exact, excused) = (outcome.coverage.get("damage.exact_reads"), outcome.coverage.get("damage.excused_reads"));
    assert!(exact >= 200 && excused <= 30 * passed_over, "exact {exact}, excused {excused}: {:?}", outcome.coverage);
}
