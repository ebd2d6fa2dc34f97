//! The target's unit tests.

use super::*;

#[test]
fn engine_only_probes_are_engine_probes_this_target_does_not_declare() {
    let declared = <TxnTarget as Target>::probes();
    for probe in ENGINE_ONLY_PROBES {
        assert!(engine::PROBES.contains(probe) && !declared.contains(probe), "{probe}");
    }
    assert_eq!(declared.len() + ENGINE_ONLY_PROBES.len(), engine::PROBES.len());
}

fn write_skew_cycle() -> Cycle {
    Cycle::new(vec![Edge::item(2, 1, EdgeKind::Rw, b"k000001"), Edge::item(1, 2, EdgeKind::Rw, b"k000002")])
}

/// A failure as a report file stores it.
fn failure(invariant: &str, violation: &Violation) -> Failure {
    let json = serde_json::json!({
        "seed": 0, "step": 9, "phase": "step", "invariant": invariant, "kind": violation.kind,
        "expected": violation.expected, "actual": violation.actual, "evidence": violation.evidence,
        "last_steps": [],
    });
    serde_json::from_value(json).expect("a failure")
}

#[test]
fn the_cycle_travels_as_evidence_and_renders_as_dot() {
    let cycle = write_skew_cycle();
    let violation = Violation::new(SERIALIZABLE, FailureKind::Safety, "acyclic", cycle.report()).with_evidence(&cycle);
    assert_eq!(violation.actual, "G2-item: T2 -rw(k000001)-> T1 -rw(k000002)-> T2");
    let found = failure(SERIALIZABLE, &violation);
    let rendering = TxnTarget::render_failure(&found).expect("a cycle renders");
    assert_eq!(rendering.text, cycle.to_dot());
    assert!(rendering.text.contains("label=\"G2-item\";"), "{}", rendering.text);
    assert!(rendering.text.contains("T2 -> T1 [label=\"rw(k000001)\", style=dashed];"), "{}", rendering.text);
    // Text alone is never parsed: without evidence there is no drawing, and other invariants have none.
    let mut textual = found.clone();
    textual.evidence = None;
    assert_eq!(TxnTarget::render_failure(&textual), None);
    assert_eq!(TxnTarget::render_failure(&failure("snapshot_read.get", &violation)), None);
}

#[test]
fn rates_are_ppm() {
    let mut coverage = Coverage::default();
    coverage.add("txn.commits", 75);
    coverage.add("txn.aborts", 25);
    coverage.add("txn.false_aborts", 5);
    assert_eq!(abort_rates_ppm(&coverage), (250_000, 200_000));
    assert_eq!(abort_summary(&coverage), "commits 75, aborts 25 (25.0%), false aborts 5 (20.0% of aborts)");
}

#[test]
fn the_fault_menu_destroys_no_data_and_errors_are_classified() {
    let menu = TxnTarget::fault_menu(FaultProfile::Assumed).expect("assumed");
    assert!(menu.kinds.iter().all(|(kind, _)| !kind.destroys_data()));
    assert!(menu.kinds.iter().any(|(kind, _)| *kind == holdfast::env::FaultKind::DirSyncError));
    assert_eq!(menu.explicit, holdfast::ExplicitFaults::Errors);
    assert!(TxnTarget::fault_menu(FaultProfile::Beyond).is_none());
    let conflict = engine::Error::Conflict { cause: engine::ConflictCause::WriteWrite { key: b"k".to_vec() } };
    assert_eq!(system_error(&conflict).class, "conflict");
    let corrupt = engine::Error::Corruption { file: "/db/x".into(), offset: 3, reason: "crc".into() };
    assert!(system_error(&corrupt).corruption);
}
