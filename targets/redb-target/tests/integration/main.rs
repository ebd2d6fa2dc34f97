//! redb target integration tests: the oracle can fail (a planted lying backend is caught and shrunk), and the
//! `assumed` profile injects nothing but crashes and replays exactly.

use holdfast::shrink::shrink_schedule;
use holdfast::{FailureKind, OutcomeOf, RunOptions, run_schedule, run_target};
use redb_target::RedbTarget;
use redb_target::backend::SYNC_IGNORED_CANARY;

/// The oracle can fail: a backend whose `sync_data` lies loses committed transactions at the next crash, and the
/// target says so (some seeds end earlier, in a redb panic on the torn file); the same seeds pass with an honest
/// backend.
#[test]
fn a_backend_that_ignores_fsync_is_caught_and_shrunk() {
    const SEEDS: std::ops::Range<u64> = 0..20;
    let lying = RunOptions { canary: Some(SYNC_IGNORED_CANARY.to_string()), ..RunOptions::with_steps(200) };
    let lost =
        |outcome: &OutcomeOf<RedbTarget>| outcome.failure.as_ref().is_some_and(|f| f.kind == FailureKind::Durability);
    let outcome = SEEDS
        .map(|seed| run_target::<RedbTarget>(seed, &lying))
        .find(lost)
        .expect("no seed in 0..20 noticed a backend that never syncs");
    let shrunk = shrink_schedule::<RedbTarget>(&outcome.schedule, &lying, 2_000).expect("shrinks");
    println!("caught by seed {}: shrunk {} -> {} steps", outcome.seed, shrunk.steps_before, shrunk.steps_after);
    assert!(shrunk.steps_after <= 4, "shrunk to {} steps: {:?}", shrunk.steps_after, shrunk.schedule.steps);
    assert_eq!(shrunk.validation.failure.as_ref().map(|f| f.kind), Some(FailureKind::Durability));
    let honest = RunOptions::with_steps(200);
    let replayed = run_schedule::<RedbTarget>(&shrunk.schedule, &honest);
    assert!(replayed.passed(), "{}", replayed.failure.map(|f| f.report()).unwrap_or_default());
    for seed in SEEDS {
        let outcome = run_target::<RedbTarget>(seed, &honest);
        assert!(outcome.passed(), "seed {seed}: {}", outcome.failure.map(|f| f.report()).unwrap_or_default());
    }
}

#[test]
fn the_assumed_profile_injects_no_error_and_runs_replay_exactly() {
    for seed in 0..8 {
        let outcome = run_target::<RedbTarget>(seed, &RunOptions::with_steps(300));
        assert!(outcome.passed(), "{}", outcome.failure.map(|f| f.report()).unwrap_or_default());
        assert_eq!(outcome.coverage.get("redb.errors_tolerated"), 0, "seed {seed}: an error without a fault");
        assert_eq!(outcome.coverage.get("errors_tolerated"), 0, "seed {seed}: an error without a fault");
        assert!(outcome.coverage.get("redb.commits") > 0, "seed {seed}: nothing committed");
        let replayed = run_schedule::<RedbTarget>(&outcome.schedule, &RunOptions::default());
        assert_eq!(replayed.digest, outcome.digest, "seed {seed}: the replay differs");
    }
}
