//! A small swarm passes; shards partition the seeds; summaries merge.

use engine_target::EngineTarget;
use holdfast::{RunOptions, SwarmOptions, SwarmSummary, run_swarm};

#[test]
fn simulation_builds_run_the_engines_expensive_cross_checks() {
    // engine-target turns on `engine/expensive-checks` (ADR-0063): every table lookup of a swarm is
    // cross-checked by a binary search of the whole index.
    // A constant: checked when this test compiles.
    const { assert!(engine::EXPENSIVE_CHECKS, "engine-target must build the engine with `expensive-checks`") };
}

#[test]
fn a_small_swarm_passes_with_coverage() {
    let options = SwarmOptions {
        seeds: 0..20,
        shard: None,
        stop_on_failure: false,
        jobs: 2,
        run: RunOptions::with_steps(500),
        seed_timeout: None,
    };
    let mut seen = Vec::new();
    let summary = run_swarm::<EngineTarget>(&options, |outcome| seen.push(outcome.seed));
    let reports: Vec<String> = summary
        .failures
        .iter()
        .map(|f| format!("seed {} {}: {} vs {}", f.seed, f.invariant, f.expected, f.actual))
        .collect();
    assert!(summary.failures.is_empty(), "failures: {reports:#?}");
    assert_eq!(summary.seeds_run, 20);
    assert_eq!(seen, (0..20).collect::<Vec<u64>>());
    assert!(summary.coverage.get("flushes") > 0, "{:?}", summary.coverage);
    assert!(summary.coverage.get("crashes") > 0, "{:?}", summary.coverage);
    assert!(!summary.required.is_empty());
    let declared: Vec<&str> = summary.declared_probes.iter().map(String::as_str).collect();
    let reachable: Vec<&str> =
        engine::PROBES.iter().copied().filter(|probe| !engine_target::TRANSACTION_PROBES.contains(probe)).collect();
    assert_eq!(declared, reachable, "the swarm reports the engine's probes but the transaction-only ones");
    let unknown: Vec<&&str> =
        engine_target::TRANSACTION_PROBES.iter().filter(|probe| !engine::PROBES.contains(probe)).collect();
    assert!(unknown.is_empty(), "transaction-only probes the engine does not declare: {unknown:?}");
    assert!(!summary.probes_hit().is_empty(), "20 seeds hit no engine probe: {:?}", summary.coverage);
    assert!(summary.probes_undeclared().is_empty(), "{:?}", summary.probes_undeclared());
}

#[test]
fn shards_partition_the_seeds_and_merge() {
    let run = |shard| {
        let options = SwarmOptions {
            seeds: 0..9,
            shard,
            stop_on_failure: false,
            jobs: 1,
            run: RunOptions::with_steps(50),
            seed_timeout: None,
        };
        let mut seeds = Vec::new();
        let summary = run_swarm::<EngineTarget>(&options, |outcome| seeds.push(outcome.seed));
        (summary, seeds)
    };
    let (first, first_seeds) = run(Some((0, 2)));
    let (second, second_seeds) = run(Some((1, 2)));
    assert_eq!(first_seeds, vec![0, 2, 4, 6, 8]);
    assert_eq!(second_seeds, vec![1, 3, 5, 7]);
    let mut merged = SwarmSummary::default();
    merged.merge(&first);
    merged.merge(&second);
    let (whole, _) = run(None);
    assert_eq!(merged.seeds_run, whole.seeds_run);
    assert_eq!(merged.coverage, whole.coverage);
    let json = serde_json::to_string(&merged).expect("summary serializes");
    let back: SwarmSummary = serde_json::from_str(&json).expect("summary parses");
    assert_eq!(back, merged);
}
