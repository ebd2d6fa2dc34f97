//! The acceptance run: 1000 crash/recovery cycles interleaved with writes, every key verified after each.

use engine_target::{EngineConfig, EngineTarget, Op};
use holdfast::kit::ValueSpec;
use holdfast::{FaultProfile, RunOptions, ScheduleOf, Step, WorldStep, run_schedule};

/// Crash cycles in the acceptance schedule.
const CRASH_CYCLES: u32 = 1000;

fn acceptance_schedule() -> ScheduleOf<EngineTarget> {
    let (world, _) = holdfast::runner::configure::<EngineTarget>(1, FaultProfile::Assumed).expect("configured");
    let mut config = EngineConfig::from_seed(1);
    config.workload.key_count = 16;
    config.tuning.flush_threshold_bytes = 4096;
    let mut schedule = holdfast::Schedule::new("engine", 0xC0FFEE, world.quiet(), config);
    let mut id = 0u64;
    for cycle in 0..CRASH_CYCLES {
        for write in 0..3u32 {
            id += 1;
            let key = (cycle * 3 + write) % 16;
            let op = if id.is_multiple_of(7) {
                Op::Delete { key }
            } else {
                Op::Put { key, value: ValueSpec { id, len: u32::try_from(id % 24).expect("small") } }
            };
            schedule.steps.push(Step::Op(op));
        }
        if cycle.is_multiple_of(10) {
            schedule.steps.push(Step::World(WorldStep::RunTask { name: "flush".into() }));
        }
        // Every third crash is armed inside the next write: it may land mid-append or between append and sync.
        if cycle.is_multiple_of(3) {
            schedule.steps.push(Step::World(WorldStep::CrashAtIo { k: u64::from(cycle % 5) + 1, shape: None }));
            id += 1;
            schedule.steps.push(Step::Op(Op::Put { key: cycle % 16, value: ValueSpec { id, len: 9 } }));
        }
        schedule.steps.push(Step::World(WorldStep::Crash { shape: None }));
    }
    schedule
}

#[test]
fn a_thousand_crash_recovery_cycles_lose_nothing_acknowledged() {
    let schedule = acceptance_schedule();
    let outcome = run_schedule::<EngineTarget>(&schedule, &RunOptions::default());
    assert!(outcome.passed(), "{}", outcome.failure.map(|f| f.report()).unwrap_or_default());
    let crashes = outcome.coverage.get("crashes");
    assert!(crashes >= u64::from(CRASH_CYCLES), "only {crashes} crashes");
    assert!(outcome.coverage.get("recoveries") >= u64::from(CRASH_CYCLES), "{:?}", outcome.coverage);
    assert!(outcome.coverage.get("crash.armed_fired") > 0, "no armed crash fired: {:?}", outcome.coverage);
}
