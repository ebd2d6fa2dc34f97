//! The transaction target: determinism, a small swarm, crash coverage, and the DSG checker catching anomalies
//! through the records the target produces.

use std::collections::BTreeMap;

use simulator::dsg::{DependencyGraph, EdgeKind, INITIAL};
use simulator::engine_target::ValueSpec;
use simulator::swarm::SwarmOptions;
use simulator::txn_target::Step;
use simulator::txn_target::{ScanRead, TxnRecord, TxnTarget, abort_summary, failure_dot, parse_cycle};
use simulator::{
    Coverage, Outcome, RunOptions, Schedule, SwarmConfig, check_determinism, run_schedule_target, run_swarm, run_target,
};

fn options(steps: u64) -> RunOptions {
    RunOptions { record_step_digests: true, ..RunOptions::with_steps(steps) }
}

#[test]
fn same_seed_same_digest_and_replay_matches() {
    for seed in [1, 7, 42] {
        let result = check_determinism(|| run_target::<TxnTarget>(seed, &options(400)));
        assert!(result.is_ok(), "seed {seed}: {result:?}");
        let outcome = run_target::<TxnTarget>(seed, &options(400));
        assert!(outcome.passed(), "{}", outcome.failure.map(|f| f.report()).unwrap_or_default());
        let json = serde_json::to_string(&outcome.schedule).expect("schedule serializes");
        let schedule = serde_json::from_str(&json).expect("schedule parses");
        let replayed = run_schedule_target::<TxnTarget>(&schedule, &options(0));
        assert_eq!(replayed.digest, outcome.digest, "seed {seed}: replay digest differs");
    }
}

#[test]
fn a_thirty_seed_swarm_passes_and_commits_and_aborts() {
    let options = SwarmOptions { seeds: 0..30, shard: None, stop_on_failure: false, run: RunOptions::with_steps(800) };
    let summary = run_swarm::<TxnTarget>(&options, |_| {});
    let reports: Vec<String> = summary.failures.iter().map(|f| format!("seed {}\n{}", f.seed, f.report())).collect();
    assert!(summary.failures.is_empty(), "failures:\n{}", reports.join("\n"));
    let coverage = &summary.coverage;
    for name in ["txn.commits", "txn.aborts", "txn.read_only_commits", "txn.group_commit_batches", "dsg.transactions"] {
        assert!(coverage.get(name) > 0, "{name} never counted: {coverage:?}");
    }
    println!("30 seeds: {}", abort_summary(coverage));
}

#[test]
fn a_crash_between_a_commit_append_and_its_sync_happens() {
    let mut coverage = Coverage::default();
    // Passing is the swarm test's job: this one asks only that the crash place is reached.
    for seed in 0..40 {
        coverage.merge(&run_target::<TxnTarget>(seed, &RunOptions::with_steps(600)).coverage);
    }
    assert!(coverage.get("crash.between_commit_append_and_sync") > 0, "{coverage:?}");
    assert!(coverage.get("txn.in_flight_absent") + coverage.get("txn.in_flight_present") > 0, "{coverage:?}");
}

fn record(id: u64, reads: &[(u32, u64)], scans: Vec<ScanRead>, writes: &[u32]) -> TxnRecord {
    let mut record = TxnRecord::new(id, 0, 0, false);
    record.reads = reads.to_vec();
    record.scans = scans;
    record.writes = writes.iter().map(|&key| (key, Some(u64::from(key)))).collect::<BTreeMap<_, _>>();
    record
}

#[test]
fn the_dsg_catches_write_skew_in_target_records() {
    // Two doctors on call (k1, k2): each reads both, sees both on call, takes itself off.
    let mut graph = DependencyGraph::new();
    let t1 = record(1, &[(1, INITIAL), (2, INITIAL)], vec![], &[1]);
    let t2 = record(2, &[(1, INITIAL), (2, INITIAL)], vec![], &[2]);
    assert_eq!(graph.commit(&t1.to_committed()), None);
    let cycle = graph.commit(&t2.to_committed()).expect("write skew is a cycle");
    assert_eq!(cycle.kinds(), vec![EdgeKind::Rw, EdgeKind::Rw]);
    assert_eq!(cycle.render(), "T2 -rw(k000001)-> T1 -rw(k000002)-> T2");
    assert_eq!(parse_cycle(&cycle.render()), Some(cycle.clone()));
    let failure = simulator::Failure {
        seed: 0,
        step: 9,
        phase: "step".into(),
        invariant: "serializable".into(),
        kind: simulator::FailureKind::Safety,
        expected: String::new(),
        actual: cycle.render(),
        last_steps: Vec::new(),
    };
    assert_eq!(failure_dot(&failure), Some(cycle.to_dot()), "the CLI's --dot output");
    // A serial order of the same transactions is fine.
    let mut serial = DependencyGraph::new();
    let t2_after = record(2, &[(1, 1), (2, INITIAL)], vec![], &[2]);
    assert_eq!(serial.commit(&t1.to_committed()), None);
    assert_eq!(serial.commit(&t2_after.to_committed()), None);
}

#[test]
fn the_dsg_catches_a_phantom_in_target_records() {
    // Both scan [k0, k8) and see nothing there, then each inserts a different key into the range.
    let mut graph = DependencyGraph::new();
    let scan = || vec![ScanRead { start: 0, end: 8, observed: vec![] }];
    let t1 = record(1, &[], scan(), &[3]);
    let t2 = record(2, &[], scan(), &[5]);
    assert_eq!(graph.commit(&t1.to_committed()), None);
    let cycle = graph.commit(&t2.to_committed()).expect("a phantom is a cycle");
    assert!(cycle.kinds().iter().all(|&kind| kind == EdgeKind::Rw), "{}", cycle.render());
}

/// Run hand-written steps on a quiet world.
fn run_steps(steps: Vec<Step>, canary: Option<&str>) -> Outcome<Step> {
    let mut schedule = Schedule::new("txn", 0, SwarmConfig::from_seed(0).quiet());
    schedule.steps = steps;
    run_schedule_target::<TxnTarget>(&schedule, &RunOptions { canary: canary.map(String::from), ..options(0) })
}

fn put(client: u32, key: u32, id: u64) -> Step {
    Step::Put { client, key, value: ValueSpec { id, len: 16 } }
}

/// Two on-call doctors: both read k1 and k2, each takes one off call.
fn write_skew() -> Vec<Step> {
    let mut steps = vec![Step::Begin { client: 0, read_only: false }, Step::Begin { client: 1, read_only: false }];
    for client in [0, 1] {
        steps.extend([Step::Get { client, key: 1 }, Step::Get { client, key: 2 }]);
    }
    steps.extend([put(0, 1, 1), put(1, 2, 2)]);
    steps.extend([Step::Commit { client: 0 }, Step::Ack { client: 0 }, Step::Commit { client: 1 }]);
    steps.push(Step::Ack { client: 1 });
    steps
}

/// Both scan `[k0, k8)`, see it empty, and insert different keys into it.
fn phantom() -> Vec<Step> {
    let mut steps = vec![Step::Begin { client: 0, read_only: false }, Step::Begin { client: 1, read_only: false }];
    steps.extend([Step::Scan { client: 0, start: 0, end: 8 }, Step::Scan { client: 1, start: 0, end: 8 }]);
    steps.extend([put(0, 3, 1), put(1, 5, 2)]);
    steps.extend([Step::Commit { client: 0 }, Step::Commit { client: 1 }]);
    steps.extend([Step::RunTask { name: "group-commit".into() }, Step::Ack { client: 0 }, Step::Ack { client: 1 }]);
    steps
}

#[test]
fn hand_written_anomalies_are_prevented_by_the_engine() {
    for (name, steps) in [("write skew", write_skew()), ("phantom", phantom())] {
        let outcome = run_steps(steps, None);
        assert!(outcome.passed(), "{name}: {}", outcome.failure.map(|f| f.report()).unwrap_or_default());
        assert_eq!(outcome.coverage.get("txn.aborts"), 1, "{name}: {:?}", outcome.coverage);
        assert_eq!(outcome.coverage.get("txn.false_aborts"), 0, "{name}: {:?}", outcome.coverage);
        assert_eq!(outcome.coverage.get("txn.commits"), 1, "{name}: {:?}", outcome.coverage);
    }
}

#[cfg(feature = "canaries")]
mod canaries {
    use super::*;

    /// The first seed in `0..seeds` whose run finds `canary` (fails with it, passes without it), with the failure.
    fn first_finding(canary: &str, seeds: u64) -> Option<simulator::Failure> {
        (0..seeds).find_map(|seed| {
            let options = RunOptions { canary: Some(canary.into()), ..RunOptions::with_steps(1000) };
            let failure = run_target::<TxnTarget>(seed, &options).failure?;
            run_target::<TxnTarget>(seed, &RunOptions::with_steps(1000)).passed().then_some(failure)
        })
    }

    #[test]
    fn the_target_catches_write_skew_and_a_phantom_with_ssi_weakened() {
        for (name, steps, canary) in
            [("write skew", write_skew(), "ssi-off"), ("phantom", phantom(), "no-predicate-reads")]
        {
            let failure = run_steps(steps, Some(canary)).failure.unwrap_or_else(|| panic!("{name} not caught"));
            assert_eq!(failure.invariant, "serializable", "{name}: {}", failure.report());
            let cycle = parse_cycle(&failure.actual).expect("the actual is a rendered cycle");
            assert!(cycle.kinds().iter().all(|&kind| kind == EdgeKind::Rw), "{name}: {}", failure.actual);
            assert!(failure_dot(&failure).is_some_and(|dot| dot.contains("style=dashed")), "{name}");
        }
    }

    #[test]
    fn every_transaction_canary_is_found() {
        for canary in engine::canary::TRANSACTION_CANARIES {
            let failure = first_finding(canary, 2000).unwrap_or_else(|| panic!("{canary} not found in 2000 seeds"));
            println!("{canary}: seed {} {} {}", failure.seed, failure.invariant, failure.actual);
            if failure.invariant == "serializable" {
                assert!(failure_dot(&failure).is_some_and(|dot| dot.starts_with("digraph")));
            }
        }
    }
}
