//! The tracker's unit tests: each rule and cause on a small history.

use super::*;

#[test]
fn a_snapshot_steps_below_every_span_that_holds_it() {
    assert_eq!(snapshot_outside(9, &[]), 9);
    assert_eq!(snapshot_outside(9, &[(10, 12)]), 9, "a span above the visible sequence holds nothing");
    assert_eq!(snapshot_outside(9, &[(9, 10)]), 8);
    assert_eq!(snapshot_outside(9, &[(4, 6), (7, 12)]), 6, "a span's end is exclusive");
    assert_eq!(snapshot_outside(9, &[(5, 7), (7, 12)]), 4, "chained spans step down one after the other");
}

/// A pivot `T0 → T1` where `T1` committed two writes (sequences 1..=2) before `T0` (sequence 3): a reader
/// must read below `T1`'s first sequence, not its commit sequence (the txn target's partial-commit finding).
#[test]
fn the_safe_snapshot_is_below_the_whole_straddled_commit() {
    let mut tracker = ConflictTracker::new();
    let (pivot, out) = (tracker.begin(0, false), tracker.begin(0, false));
    tracker.on_read(pivot, b"a").expect("read");
    tracker.commit(out, &[b"a".to_vec(), b"b".to_vec()], 2).expect("out commits first");
    tracker.commit(pivot, &[b"c".to_vec()], 3).expect("the pivot commits");
    assert_eq!(tracker.straddles(), vec![Straddle { out_first: 1, out_commit: 2, pivot_commit: 3 }]);
    assert_eq!(tracker.safe_snapshot(2), 0);
    assert_eq!(tracker.safe_snapshot(3), 3, "once the pivot is visible no snapshot straddles it");
}

/// Every cause, on `key`, with the message the tracker formatted before causes were values (the same text).
fn causes(key: &[u8], shown: &str) -> Vec<(ConflictCause, String, &'static str)> {
    let key = key.to_vec();
    vec![
        (
            ConflictCause::WriteWrite { key: key.clone() },
            format!("write-write conflict on {shown}: first committer wins"),
            "ww",
        ),
        (ConflictCause::ReadWrite { key: key.clone() }, format!("rw conflict on {shown}"), "rw"),
        (
            ConflictCause::DangerousStructure { key: key.clone() },
            format!("dangerous structure through rw conflict on {shown}"),
            "dangerous",
        ),
        (
            ConflictCause::ReadOnlyGuard { key },
            format!("rw conflict on {shown}: an open read-only transaction sees a commit this writer must precede"),
            "read_only_guard",
        ),
    ]
}

#[test]
fn conflict_cause_display_is_the_old_message_text() {
    let expected = [
        "write-write conflict on \"k000001\": first committer wins",
        "rw conflict on \"k000001\"",
        "dangerous structure through rw conflict on \"k000001\"",
        "rw conflict on \"k000001\": an open read-only transaction sees a commit this writer must precede",
    ];
    let shown: Vec<String> = causes(b"k000001", "\"k000001\"").iter().map(|(cause, _, _)| cause.to_string()).collect();
    assert_eq!(shown, expected);
    // Keys that are not printable text are shown in hex, as before.
    for (key, rendered) in [(&b"\x00\xffa"[..], "0x00ff61"), (b"a\nb", "0x610a62"), (b"", "\"\"")] {
        for (cause, text, _) in causes(key, rendered) {
            assert_eq!(cause.to_string(), text, "{cause:?}");
        }
    }
}

#[test]
fn conflict_cause_name_and_key() {
    for (cause, _, name) in causes(b"x", "\"x\"") {
        assert_eq!(cause.name(), name, "{cause:?}");
        assert_eq!(cause.key(), Some(&b"x"[..]), "{cause:?}");
    }
}

fn keys(keys: &[&str]) -> Vec<Vec<u8>> {
    keys.iter().map(|key| key.as_bytes().to_vec()).collect()
}

fn cause(result: Result<(), Conflict>) -> ConflictCause {
    result.expect_err("a conflict").cause
}

#[test]
fn the_tracker_reports_write_write_as_a_value() {
    let mut tracker = ConflictTracker::new();
    let (t1, t2) = (tracker.begin(0, false), tracker.begin(0, false));
    tracker.commit(t1, &keys(&["x"]), 1).unwrap();
    let found = cause(tracker.commit(t2, &keys(&["a", "x"]), 2));
    assert_eq!(found, ConflictCause::WriteWrite { key: b"x".to_vec() });
    assert_eq!(tracker.stats.ww_aborts, 1);
}

#[test]
fn the_tracker_reports_a_dangerous_structure_at_commit_as_a_value() {
    // Write skew: both read x and y, t1 writes x, t2 writes y.
    let mut tracker = ConflictTracker::new();
    let (t1, t2) = (tracker.begin(0, false), tracker.begin(0, false));
    for txn in [t1, t2] {
        tracker.on_read(txn, b"x").unwrap();
        tracker.on_read(txn, b"y").unwrap();
    }
    tracker.commit(t1, &keys(&["x"]), 1).unwrap();
    let found = cause(tracker.commit(t2, &keys(&["y"]), 2));
    assert_eq!(found, ConflictCause::DangerousStructure { key: b"y".to_vec() });
    assert_eq!(tracker.stats.dangerous_aborts, 1);
}

#[test]
fn the_tracker_reports_an_rw_conflict_at_a_read_as_a_value() {
    // t1 -> t0 (t1 read z, t0 wrote it and committed first), then t2 reads y that t1 wrote: t2 -> t1 -> t0,
    // and t2 is the only one left to abort. It is doomed, and stays doomed for its next operation.
    let mut tracker = ConflictTracker::new();
    let (t0, t1, t2) = (tracker.begin(0, false), tracker.begin(0, false), tracker.begin(0, false));
    tracker.on_read(t1, b"z").unwrap();
    tracker.commit(t0, &keys(&["z"]), 1).unwrap();
    tracker.commit(t1, &keys(&["y"]), 2).unwrap();
    let expected = ConflictCause::ReadWrite { key: b"y".to_vec() };
    assert_eq!(cause(tracker.on_read(t2, b"y")), expected);
    assert_eq!(cause(tracker.check_doomed_public(t2)), expected);
    assert_eq!(cause(tracker.commit(t2, &keys(&["w"]), 3)), expected);
}

#[test]
fn the_tracker_reports_the_read_only_guard_as_a_value() {
    // t2 read y; t1 overwrote y and committed (t2 -> t1); a read-only reader sees t1; t2's commit must abort.
    let mut tracker = ConflictTracker::new();
    let (t1, t2) = (tracker.begin(0, false), tracker.begin(0, false));
    tracker.on_read(t2, b"x").unwrap();
    tracker.on_read(t2, b"y").unwrap();
    tracker.commit(t1, &keys(&["y"]), 1).unwrap();
    tracker.set_visible(1);
    let reader = tracker.begin(1, true);
    let found = cause(tracker.commit(t2, &keys(&["x"]), 2));
    assert_eq!(found, ConflictCause::ReadOnlyGuard { key: b"y".to_vec() });
    assert_eq!(tracker.stats.read_only_guard_aborts, 1);
    tracker.finish(reader, 1).unwrap();
}

#[test]
fn a_full_tracker_expires_the_oldest_active_transaction_and_its_next_call_says_so() {
    let mut tracker = ConflictTracker::with_capacity(3);
    let reader = tracker.try_begin(0, true).unwrap();
    tracker.on_read(reader, b"x").unwrap();
    let writer = tracker.try_begin(0, false).unwrap();
    for sequence in 1..=10 {
        let blind = tracker.try_begin(sequence - 1, false).unwrap();
        tracker.commit(blind, &keys(&["y"]), sequence).unwrap();
        tracker.set_visible(sequence);
        assert!(tracker.tracked() <= 3, "{} records at sequence {sequence}", tracker.tracked());
    }
    assert_eq!(tracker.stats.expired, 2, "the reader, then the writer");
    assert_eq!(cause(tracker.on_read(reader, b"y")), ConflictCause::Expired);
    assert_eq!(tracker.finish(reader, 10), Ok(()), "an expired reader still ends cleanly");
    assert_eq!(cause(tracker.commit(writer, &keys(&["z"]), 11)), ConflictCause::Expired);
    assert_eq!(tracker.expired.len(), 0, "both forgotten once their handles ended");
    assert_eq!(ConflictCause::Expired.key(), None);
    assert_eq!(ConflictCause::Expired.name(), "expired");
}

#[test]
fn a_tracker_full_of_commits_in_flight_refuses_a_new_transaction() {
    let mut tracker = ConflictTracker::with_capacity(2);
    for sequence in 1..=2 {
        let txn = tracker.try_begin(0, false).unwrap();
        tracker.commit(txn, &keys(&[&format!("k{sequence}")]), sequence).unwrap();
    }
    // Neither commit is visible yet: nothing can be pruned or expired.
    assert_eq!(tracker.try_begin(0, false), Err(Conflict { cause: ConflictCause::Expired }));
    tracker.set_visible(2);
    assert!(tracker.try_begin(2, false).is_ok(), "room once they are visible");
}

/// ADR-0131: `prune` dropped a visible pivot whose straddle span a new reader's safe snapshot could still step
/// back into through the spans of other pivots, so the reader read inside the forgotten span: it saw the pivot's
/// out-neighbour and not the pivot, and with the pivot's record gone its read of the pivot's write found no
/// writer (a G2-item cycle `P1 -rw-> T1 -wr-> reader -rw-> P1` that the real-threads txn test found about once in
/// 75 runs). The call sequence: `P1 → T1` (span [1, 3)), `P2 → F` (span [2, 5)), `P3 → T3` in flight (span [4, 6));
/// the reader at visible 5 steps to 3, then 1 — inside `P1`'s span, unless `P1` is still there to step below.
#[test]
fn a_pivot_whose_span_a_stepped_back_reader_can_reach_is_not_pruned() {
    let mut tracker = ConflictTracker::new();
    let (p1, t1, p2, f) =
        (tracker.begin(0, false), tracker.begin(0, false), tracker.begin(0, false), tracker.begin(0, false));
    tracker.on_read(p1, b"k1").expect("P1 reads k1");
    tracker.on_read(p2, b"kf").expect("P2 reads kf");
    tracker.commit(t1, &keys(&["k1"]), 1).expect("T1 commits k1 at 1");
    tracker.set_visible(1);
    tracker.commit(f, &keys(&["kf"]), 2).expect("F commits kf at 2");
    tracker.set_visible(2);
    tracker.commit(p1, &keys(&["kp1"]), 3).expect("P1 commits kp1 at 3: span [1, 3)");
    tracker.set_visible(3);
    let (p3, t3) = (tracker.begin(3, false), tracker.begin(3, false));
    tracker.on_read(p3, b"k3").expect("P3 reads k3");
    tracker.commit(t3, &keys(&["k3"]), 4).expect("T3 commits k3 at 4");
    tracker.set_visible(4);
    tracker.commit(p2, &keys(&["kp2"]), 5).expect("P2 commits kp2 at 5: span [2, 5)");
    tracker.set_visible(5);
    tracker.commit(p3, &keys(&["kp3"]), 6).expect("P3 commits kp3 at 6, in flight: span [4, 6)");
    let snapshot = tracker.safe_snapshot(5);
    assert!(!(1..3).contains(&snapshot), "the reader's snapshot {snapshot} sees T1 (1) and not P1 (3)");
    assert_eq!(snapshot, 0, "stepped below every span: [4, 6), [2, 5), [1, 3)");
    // The reader reads P1's key: it does not see P1, so the tracker must know of P1 to record the rw edge.
    let reader = tracker.begin(snapshot, true);
    tracker.on_read(reader, b"kp1").expect("a reader never aborts");
    assert!(tracker.record(reader).out_edges.contains(&p1), "the reader's rw edge to P1 was recorded");
}

/// `dooms` counts every doom and expiry (what lets a write skip its doom check, ADR-0144): it moves exactly when
/// `check_doomed_public` of some transaction starts to fail.
#[test]
fn the_doom_count_moves_with_every_doom_and_expiry() {
    let mut tracker = ConflictTracker::with_capacity(3);
    let (t0, t1, t2) = (tracker.begin(0, false), tracker.begin(0, false), tracker.begin(0, false));
    tracker.on_read(t1, b"z").unwrap();
    tracker.commit(t0, &keys(&["z"]), 1).unwrap();
    tracker.commit(t1, &keys(&["y"]), 2).unwrap();
    assert_eq!((tracker.dooms(), tracker.check_doomed_public(t2)), (0, Ok(())), "commits doom nobody");
    assert!(tracker.on_read(t2, b"y").is_err());
    assert_eq!((tracker.dooms(), tracker.stats.doomed), (1, 1), "t2 doomed");
    tracker.abort(t2);
    tracker.set_visible(2);
    assert_eq!(tracker.tracked(), 0, "nothing left to overlap: every record pruned");
    let (t3, t4, t5) = (tracker.begin(2, false), tracker.begin(2, false), tracker.begin(2, false));
    assert_eq!((tracker.dooms(), tracker.check_doomed_public(t3)), (1, Ok(())));
    let t6 = tracker.try_begin(2, false).expect("room made by expiry");
    assert_eq!((tracker.dooms(), tracker.stats.expired), (2, 1), "the full tracker expired its oldest, t3");
    assert_eq!(cause(tracker.check_doomed_public(t3)), ConflictCause::Expired);
    for txn in [t4, t5, t6] {
        assert_eq!(tracker.check_doomed_public(txn), Ok(()), "T{txn}");
    }
}

/// The engine's entry: keys shared, not copied, in key order; the same answers as `commit` of the same keys.
#[test]
fn commit_keys_shares_the_keys_and_agrees_with_commit() {
    let mut tracker = ConflictTracker::new();
    let (t1, t2) = (tracker.begin(0, false), tracker.begin(0, false));
    let shared: Vec<WrittenKey> = ["a", "x"].iter().map(|key| WrittenKey::from(key.as_bytes())).collect();
    tracker.commit_keys(t1, shared.clone(), 1).unwrap();
    assert_eq!(Arc::strong_count(&shared[0]), 3, "the caller's, the record's and the index's: one allocation");
    let found = cause(tracker.commit(t2, &keys(&["b", "x"]), 3));
    assert_eq!(found, ConflictCause::WriteWrite { key: b"x".to_vec() });
}

#[test]
#[should_panic(expected = "a commit's keys are sorted and distinct")]
fn commit_keys_out_of_order_is_a_bug() {
    let mut tracker = ConflictTracker::new();
    let txn = tracker.begin(0, false);
    let keys = ["x", "a"].iter().map(|key| WrittenKey::from(key.as_bytes())).collect();
    drop(tracker.commit_keys(txn, keys, 2));
}

/// ADR-0198: the records a prune or an abort drops are handed over, in the order dropped, for the caller to free
/// after its lock; they are not state (a tracker that still holds them equals one that handed them over), and
/// past `DROPPED_RECORDS_MAX` the rest are freed in place.
#[test]
fn dropped_records_are_handed_to_the_caller_and_are_not_state() {
    let mut tracker = ConflictTracker::new();
    let (writer, rolled_back) = (tracker.begin(0, false), tracker.begin(0, false));
    tracker.commit(writer, &[b"a".to_vec()], 1).expect("commits");
    tracker.abort(rolled_back);
    assert_eq!(tracker.tracked(), 1, "the committed record stays until it is visible");
    let handed_over = tracker.clone();
    assert_eq!(tracker.take_dropped().len(), 1, "the aborted record");
    tracker.set_visible(1);
    assert_eq!(tracker.tracked(), 0);
    assert_eq!(tracker.take_dropped().len(), 1, "the pruned record");
    assert!(tracker.take_dropped().is_empty(), "taken once");
    let mut pruned = handed_over.clone();
    pruned.set_visible(1);
    tracker = pruned.clone();
    drop(tracker.take_dropped());
    assert_eq!(tracker, pruned, "holding dropped records changes no state");
    for _ in 0..DROPPED_RECORDS_MAX + 3 {
        let txn = tracker.begin(1, false);
        tracker.abort(txn);
    }
    assert_eq!(tracker.take_dropped().len(), DROPPED_RECORDS_MAX);
}
