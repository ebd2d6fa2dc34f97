//! The transaction target: determinism, a small swarm, crash coverage, and the DSG checker catching anomalies
//! through the records the target produces.

use std::collections::BTreeMap;

use holdfast::kit::ValueSpec;
use holdfast::{
    Coverage, FailureKind, FaultProfile, OutcomeOf, RunOptions, Schedule, Step, SwarmOptions, Violation, WorldStep,
    check_determinism, run_schedule, run_swarm, run_target,
};
use txn_target::{
    Cycle, DependencyGraph, EdgeKind, INITIAL, Op, SERIALIZABLE, ScanRead, TxnRecord, TxnTarget, abort_summary,
    failure_dot,
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
        let schedule = holdfast::parse_schedule::<TxnTarget>(&outcome.schedule.to_json()).expect("schedule parses");
        let replayed = run_schedule::<TxnTarget>(&schedule, &options(0));
        assert_eq!(replayed.digest, outcome.digest, "seed {seed}: replay digest differs");
    }
}

#[test]
fn a_thirty_seed_swarm_passes_and_commits_and_aborts() {
    let options = SwarmOptions {
        seeds: 0..30,
        shard: None,
        stop_on_failure: false,
        jobs: 2,
        run: RunOptions::with_steps(800),
        seed_timeout: None,
    };
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
    let mut record = TxnRecord::new(id, 0, Some(0), false);
    record.reads = reads.to_vec();
    record.scans = scans;
    record.writes = writes.iter().map(|&key| (key, Some(u64::from(key)))).collect::<BTreeMap<_, _>>();
    record
}

/// A serializability failure as the runner reports it: the class and the rendered cycle as `actual`, the cycle as
/// evidence.
fn cycle_failure(cycle: &Cycle) -> holdfast::Failure {
    let violation = Violation::new(SERIALIZABLE, FailureKind::Safety, "", cycle.report()).with_evidence(cycle);
    holdfast::Failure {
        seed: 0,
        step: 9,
        phase: "step".into(),
        invariant: violation.invariant,
        kind: violation.kind,
        expected: violation.expected,
        actual: violation.actual,
        evidence: violation.evidence,
        last_steps: Vec::new(),
    }
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
    assert_eq!(cycle.report(), "G2-item: T2 -rw(k000001)-> T1 -rw(k000002)-> T2");
    let failure = cycle_failure(&cycle);
    assert_eq!(failure_dot(&failure), Some(cycle.to_dot()), "the CLI's --dot output");
    let rendering = <TxnTarget as holdfast::Target>::render_failure(&failure).expect("a rendering");
    assert_eq!(rendering.text, cycle.to_dot());
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
    assert_eq!(cycle.report(), "G2: T2 -rw(k000003)-> T1 -rw(k000005)-> T2");
}

/// Hand-written steps on a quiet world (seed 0's, no probabilistic faults, no BUGGIFY).
fn schedule_of(steps: Vec<Step<Op>>) -> holdfast::ScheduleOf<TxnTarget> {
    let (world, config) = holdfast::runner::configure::<TxnTarget>(0, FaultProfile::Assumed).expect("assumed");
    let mut schedule = Schedule::new("txn", 0, world.quiet(), config);
    schedule.steps = steps;
    schedule
}

fn run_steps(steps: Vec<Step<Op>>, canary: Option<&str>) -> OutcomeOf<TxnTarget> {
    run_schedule::<TxnTarget>(&schedule_of(steps), &RunOptions { canary: canary.map(String::from), ..options(0) })
}

fn op(op: Op) -> Step<Op> {
    Step::Op(op)
}

fn put(client: u32, key: u32, id: u64) -> Step<Op> {
    op(Op::Put { client, key, value: ValueSpec { id, len: 16 } })
}

fn begin(client: u32) -> Step<Op> {
    op(Op::Begin { client, read_only: false })
}

/// Two on-call doctors: both read k1 and k2, each takes one off call.
fn write_skew() -> Vec<Step<Op>> {
    let mut steps = vec![begin(0), begin(1)];
    for client in [0, 1] {
        steps.extend([op(Op::Get { client, key: 1 }), op(Op::Get { client, key: 2 })]);
    }
    steps.extend([put(0, 1, 1), put(1, 2, 2)]);
    steps.extend([op(Op::Commit { client: 0 }), op(Op::Ack { client: 0 }), op(Op::Commit { client: 1 })]);
    steps.push(op(Op::Ack { client: 1 }));
    steps
}

/// Both scan `[k0, k8)`, see it empty, and insert different keys into it.
fn phantom() -> Vec<Step<Op>> {
    let mut steps = vec![begin(0), begin(1)];
    steps.extend([op(Op::Scan { client: 0, start: 0, end: 8 }), op(Op::Scan { client: 1, start: 0, end: 8 })]);
    steps.extend([put(0, 3, 1), put(1, 5, 2)]);
    steps.extend([op(Op::Commit { client: 0 }), op(Op::Commit { client: 1 })]);
    steps.push(Step::World(WorldStep::RunTask { name: txn_target::GROUP_COMMIT_TASK.into() }));
    steps.extend([op(Op::Ack { client: 0 }), op(Op::Ack { client: 1 })]);
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

#[test]
fn a_crash_before_the_sync_resolves_the_commit_wholly() {
    // T1 is appended, never synced, then the power is cut: after recovery it is wholly present or wholly absent,
    // and counted as a commit only when present.
    for kept_ppm in [0, 500_000, 1_000_000] {
        let steps = vec![
            begin(0),
            put(0, 1, 1),
            put(0, 2, 2),
            op(Op::Commit { client: 0 }),
            Step::World(WorldStep::Crash { shape: None }),
        ];
        let mut schedule = schedule_of(steps);
        schedule.world.faults.crash_write_kept_ppm = kept_ppm;
        let outcome = run_schedule::<TxnTarget>(&schedule, &options(0));
        assert!(outcome.passed(), "{}", outcome.failure.map(|f| f.report()).unwrap_or_default());
        let coverage = &outcome.coverage;
        let (present, absent) = (coverage.get("txn.in_flight_present"), coverage.get("txn.in_flight_absent"));
        assert_eq!(present + absent, 1, "{coverage:?}");
        assert_eq!(coverage.get("txn.commits"), present, "{coverage:?}");
    }
}

/// ADR-0094: T0 is in flight on k2 when a compaction step fails (its `MANIFEST.tmp` write) and poisons the
/// database, so T1's submit of k2 fails before validation: in flight too, with an unknown outcome. Recovery finds
/// T0 present and T1 absent, judging T1 against what T0 left, not against the history alone.
#[test]
fn a_failed_submit_beside_an_in_flight_writer_of_its_key_resolves_absent() {
    let manifest = holdfast::env::ExplicitFault::FailNextWrite { path: "/db/MANIFEST.tmp".into() };
    let mut steps = Vec::new();
    for (key, id) in [(5, 1), (6, 2)] {
        steps.extend([begin(2), put(2, key, id), op(Op::Commit { client: 2 }), op(Op::Ack { client: 2 })]);
        steps.push(op(Op::Flush));
    }
    steps.extend([begin(0), begin(1), put(0, 2, 10), put(1, 2, 11), op(Op::Commit { client: 0 })]);
    steps.push(Step::World(WorldStep::Fault(manifest)));
    steps.push(Step::World(WorldStep::RunTask { name: "compaction".into() }));
    steps.push(op(Op::Commit { client: 1 }));
    let mut schedule = schedule_of(steps);
    schedule.config.tuning.l0_compaction_trigger = 2;
    let outcome = run_schedule::<TxnTarget>(&schedule, &options(0));
    assert!(outcome.passed(), "{}", outcome.failure.map(|f| f.report()).unwrap_or_default());
    let coverage = &outcome.coverage;
    let resolved = ["txn.submit_outcome_unknown", "txn.in_flight_present", "txn.in_flight_absent"];
    assert_eq!(resolved.map(|name| coverage.get(name)), [1, 1, 1], "{coverage:?}");
    assert_eq!(coverage.get("txn.commits"), 3, "{coverage:?}");
}

#[cfg(feature = "canaries")]
mod canaries {
    use txn_target::AdyaClass;

    use super::*;

    /// The first seed in `0..seeds` whose run finds `canary` (fails with it, passes without it), with the failure.
    fn first_finding(canary: &str, seeds: u64) -> Option<holdfast::Failure> {
        (0..seeds).find_map(|seed| {
            let options = RunOptions { canary: Some(canary.into()), ..RunOptions::with_steps(1000) };
            let failure = run_target::<TxnTarget>(seed, &options).failure?;
            run_target::<TxnTarget>(seed, &RunOptions::with_steps(1000)).passed().then_some(failure)
        })
    }

    /// The cycle a serializability failure carries as evidence.
    fn evidence(failure: &holdfast::Failure) -> Cycle {
        serde_json::from_value(failure.evidence.clone().expect("a cycle failure has evidence")).expect("a cycle")
    }

    /// The Adya class a serializability failure's report starts with (`G2-item: T3 -rw(k2)-> ...`); it is the
    /// class of the evidence's cycle, and the text after it is the rendered evidence.
    fn reported_class(failure: &holdfast::Failure) -> AdyaClass {
        assert_eq!(failure.invariant, SERIALIZABLE, "{}", failure.report());
        let (name, rendered) = failure.actual.split_once(": ").expect("`<class>: <cycle>`");
        let class = AdyaClass::from_name(name).unwrap_or_else(|| panic!("{name:?} is not an Adya class"));
        let cycle = evidence(failure);
        assert_eq!((cycle.class, rendered), (class, cycle.render().as_str()), "the text is the evidence");
        assert_eq!(AdyaClass::of_cycle(&cycle.edges), class, "{}", failure.actual);
        assert!(failure_dot(failure).is_some_and(|dot| dot.contains(&format!("label=\"{name}\";"))));
        class
    }

    #[test]
    fn the_target_catches_write_skew_and_a_phantom_with_ssi_weakened() {
        for (name, steps, canary, class) in [
            ("write skew", write_skew(), "ssi-off", AdyaClass::G2Item),
            ("phantom", phantom(), "no-predicate-reads", AdyaClass::G2),
        ] {
            let failure = run_steps(steps, Some(canary)).failure.unwrap_or_else(|| panic!("{name} not caught"));
            assert_eq!(reported_class(&failure), class, "{name}: {}", failure.actual);
            let cycle = evidence(&failure);
            assert!(cycle.kinds().iter().all(|&kind| kind == EdgeKind::Rw), "{name}: {}", failure.actual);
            assert!(failure_dot(&failure).is_some_and(|dot| dot.contains("style=dashed")), "{name}");
        }
    }

    #[test]
    fn a_seed_finds_ssi_off_as_a_named_class_and_no_predicate_reads_as_g2() {
        let options = |canary: &str| RunOptions { canary: Some(canary.into()), ..RunOptions::with_steps(1000) };
        let failure = run_target::<TxnTarget>(0, &options("ssi-off")).failure.expect("ssi-off is found by seed 0");
        let class = reported_class(&failure);
        assert!(
            [AdyaClass::GSingle, AdyaClass::G2Item, AdyaClass::G2].contains(&class),
            "every cycle the target can find holds an anti-dependency: {}",
            failure.actual
        );
        // With scans registering no ranges, a scan's item reads go unprotected too (G2-item cycles), and so do
        // its predicate reads: some seed finds a cycle through a key a scan saw absent.
        let g2 = (0..300)
            .find_map(|seed| {
                let failure = run_target::<TxnTarget>(seed, &options("no-predicate-reads")).failure?;
                (failure.invariant == SERIALIZABLE && reported_class(&failure) == AdyaClass::G2).then_some(failure)
            })
            .expect("no-predicate-reads finds a G2 cycle in seeds 0..300");
        let predicate = evidence(&g2).edges.iter().any(|edge| edge.kind == EdgeKind::Rw && edge.predicate);
        assert!(predicate, "a G2 cycle holds a predicate anti-dependency: {}", g2.actual);
        let without = run_target::<TxnTarget>(g2.seed, &RunOptions::with_steps(1000));
        assert!(without.passed(), "seed {} passes with predicate reads protected", g2.seed);
    }

    #[test]
    fn every_transaction_canary_is_found() {
        for canary in engine::canary::TRANSACTION_CANARIES {
            let failure = first_finding(canary, 2000).unwrap_or_else(|| panic!("{canary} not found in 2000 seeds"));
            println!("{canary}: seed {} {} {}", failure.seed, failure.invariant, failure.actual);
            if failure.invariant == SERIALIZABLE {
                assert!(failure_dot(&failure).is_some_and(|dot| dot.starts_with("digraph")));
            }
        }
    }

    #[test]
    fn write_skew_found_by_a_seed_shrinks_to_a_few_steps() {
        let options = RunOptions { canary: Some("ssi-off".into()), ..RunOptions::with_steps(1000) };
        let outcome = run_target::<TxnTarget>(0, &options);
        let failure = outcome.failure.as_ref().expect("ssi-off is found by seed 0");
        assert_eq!(failure.invariant, SERIALIZABLE);
        let shrunk =
            holdfast::shrink::shrink_schedule::<TxnTarget>(&outcome.schedule, &options, 4000).expect("shrinks");
        assert!(shrunk.steps_after < shrunk.steps_before, "{} -> {}", shrunk.steps_before, shrunk.steps_after);
        assert!(shrunk.steps_after <= 16, "shrunk to {} steps", shrunk.steps_after);
        let confirmed = shrunk.validation.failure.as_ref().expect("the shrunk schedule fails");
        assert_eq!(confirmed.signature(), failure.signature());
        assert!(evidence(confirmed).edges.len() >= 2);
        reported_class(confirmed);
    }
}
