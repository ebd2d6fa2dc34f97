//! Same seed, same run: in-process digests, per-step digests, and schedule replay.

use engine_target::EngineTarget;
use holdfast::{OutcomeOf, RunOptions, check_determinism, parse_schedule, run_schedule, run_target};

fn run(seed: u64, options: &RunOptions) -> OutcomeOf<EngineTarget> {
    run_target::<EngineTarget>(seed, options)
}

#[test]
fn same_seed_same_digest_in_process() {
    let options = RunOptions::with_steps(400);
    for seed in [0, 7, 0xDEAD_BEEF] {
        let first = run(seed, &options);
        let second = run(seed, &options);
        assert_eq!(first.digest, second.digest, "seed {seed}");
        assert_eq!(first.coverage, second.coverage, "seed {seed}");
        assert_eq!(first.schedule, second.schedule, "seed {seed}");
    }
    assert_ne!(run(1, &options).digest, run(2, &options).digest, "different seeds gave one digest");
}

#[test]
fn per_step_digests_agree_between_two_runs() {
    let options = RunOptions { steps: 300, record_step_digests: true, ..RunOptions::default() };
    let steps = check_determinism(|| run(11, &options)).expect("two runs of one seed diverged");
    assert_eq!(steps, 300);
}

#[test]
fn a_saved_schedule_replays_to_the_same_digest() {
    for seed in [3, 4, 5] {
        let generated = run(seed, &RunOptions::with_steps(300));
        let schedule = parse_schedule::<EngineTarget>(&generated.schedule.to_json()).expect("schedule round trip");
        assert_eq!(schedule.steps.len(), 300);
        let replayed = run_schedule::<EngineTarget>(&schedule, &RunOptions::default());
        assert_eq!(replayed.digest, generated.digest, "seed {seed}: replay differs from the generating run");
        assert_eq!(replayed.failure, generated.failure);
    }
}

#[test]
fn a_schedule_with_steps_deleted_still_replays() {
    let generated = run(9, &RunOptions::with_steps(300));
    let mut schedule = generated.schedule.clone();
    // A shrinker deletes steps: what needed them is skipped harmlessly, and the run still checks every invariant.
    schedule.steps = schedule.steps.iter().step_by(3).cloned().collect();
    let replayed = run_schedule::<EngineTarget>(&schedule, &RunOptions::default());
    assert!(replayed.passed(), "{}", replayed.failure.map(|f| f.report()).unwrap_or_default());
    assert_eq!(replayed.steps_run, schedule.steps.len() as u64);
}

#[test]
fn schedules_reject_wrong_versions_and_bad_configs() {
    let json = run(1, &RunOptions::with_steps(5)).schedule.to_json();
    let bumped = json.replacen("\"format_version\": 2", "\"format_version\": 99", 1);
    let error = parse_schedule::<EngineTarget>(&bumped).expect_err("version 99");
    assert!(error.contains("format_version"), "{error}");
    let mut value: serde_json::Value = serde_json::from_str(&json).expect("json");
    value["config"]["workload"]["key_count"] = serde_json::json!(0);
    let error = parse_schedule::<EngineTarget>(&value.to_string()).expect_err("no keys");
    assert!(error.contains("key_count"), "{error}");
}
