//! The Adya / Hermitage anomaly catalogue: every anomaly is prevented.

use super::*;

// ---- the anomaly catalogue --------------------------------------------------------------------------------------

/// G0 (dirty write / write cycle): T1 and T2 both write x and y, interleaved. The final state must come wholly
/// from one of them (serial order), never x from one and y from the other.
#[test]
fn g0_write_cycles_are_prevented() {
    let (_env, db) = open_with(1, &[("x", "10"), ("y", "20")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    put(&mut t1, "x", "11");
    put(&mut t2, "x", "12");
    put(&mut t1, "y", "21");
    put(&mut t2, "y", "22");
    let c1 = commit(t1);
    let c2 = commit(t2);
    let state = (latest(&db, "x").unwrap(), latest(&db, "y").unwrap());
    assert!(!(c1 && c2), "both overlapping writers of x and y committed: first committer must win");
    let expected = match (c1, c2) {
        (true, false) => ("11", "21"),
        (false, true) => ("12", "22"),
        _ => ("10", "20"),
    };
    assert_eq!(state, (expected.0.to_string(), expected.1.to_string()), "committed: T1 {c1}, T2 {c2}");
}

/// G1a (aborted read): T2 never sees a write of T1, which rolls back.
#[test]
fn g1a_aborted_reads_are_prevented() {
    let (_env, db) = open_with(2, &[("x", "10"), ("y", "20")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    put(&mut t1, "x", "101");
    assert_eq!(get(&mut t2, "x"), Some(some("10")));
    drop(t1);
    assert_eq!(get(&mut t2, "x"), Some(some("10")));
    let mut t3 = begin(&db);
    assert_eq!(get(&mut t3, "x"), Some(some("10")), "a transaction begun after the rollback");
    assert_eq!(scan(&mut t3, "a", "z"), Some(rows(&[("x", "10"), ("y", "20")])));
    assert!(commit(t2));
    assert!(commit(t3));
    assert_eq!(latest(&db, "x").as_deref(), Some("10"));
}

/// G1b (intermediate read): T2 never sees T1's intermediate write, only (after T1 commits, in a new snapshot)
/// its final one.
#[test]
fn g1b_intermediate_reads_are_prevented() {
    let (_env, db) = open_with(3, &[("x", "10"), ("y", "20")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    put(&mut t1, "x", "101");
    assert_eq!(get(&mut t2, "x"), Some(some("10")));
    put(&mut t1, "x", "11");
    assert_eq!(get(&mut t1, "x"), Some(some("11")), "own latest write");
    assert!(commit(t1));
    assert_eq!(get(&mut t2, "x"), Some(some("10")), "T2's snapshot is before T1's commit");
    assert_eq!(scan(&mut t2, "a", "z"), Some(rows(&[("x", "10"), ("y", "20")])));
    assert!(commit(t2));
    let mut t3 = begin(&db);
    assert_eq!(get(&mut t3, "x"), Some(some("11")), "never the intermediate 101");
}

/// G1c (circular information flow): T1 writes x and reads y, T2 writes y and reads x, each reading the other's
/// key before the other commits. Both committing would be a cycle (T1 -rw-> T2 -rw-> T1).
#[test]
fn g1c_circular_information_flow_is_prevented() {
    let (_env, db) = open_with(4, &[("x", "10"), ("y", "20")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    put(&mut t1, "x", "11");
    put(&mut t2, "y", "22");
    let r1 = get(&mut t1, "y");
    let r2 = get(&mut t2, "x");
    assert!(r1.as_ref().is_none_or(|v| *v == some("20")), "T1 read T2's uncommitted y: {r1:?}");
    assert!(r2.as_ref().is_none_or(|v| *v == some("10")), "T2 read T1's uncommitted x: {r2:?}");
    let c1 = commit(t1);
    let c2 = commit(t2);
    assert!(!(c1 && c2), "both committed, each having read the state before the other: a cycle");
}

/// OTV (observed transaction vanishes): T3 reads x from T1's commit; its later read of y must come from the same
/// commit, never from T2 (aborted) nor the initial state.
#[test]
fn otv_observed_transaction_vanishes_is_prevented() {
    let (_env, db) = open_with(5, &[("x", "10"), ("y", "20")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    put(&mut t1, "x", "11");
    put(&mut t1, "y", "19");
    put(&mut t2, "x", "12");
    assert!(commit(t1));
    let mut t3 = begin(&db);
    let x = get(&mut t3, "x").unwrap();
    put(&mut t2, "y", "18");
    let c2 = commit(t2);
    assert!(!c2, "T2 wrote x concurrently with T1, which committed first");
    let y = get(&mut t3, "y").unwrap();
    assert_eq!((x, y), (some("11"), some("19")), "T3 sees T1 wholly");
    assert!(commit(t3));
}

/// PMP (predicate-many-preceders) with a read predicate: a scan repeated inside T1 returns the same rows after
/// T2 inserts into the range and commits.
#[test]
fn pmp_read_predicate_is_stable() {
    let (_env, db) = open_with(6, &[("a1", "10"), ("a2", "20")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    let first = scan(&mut t1, "a", "b").unwrap();
    assert_eq!(first, rows(&[("a1", "10"), ("a2", "20")]));
    put(&mut t2, "a3", "30");
    assert!(commit(t2));
    assert_eq!(scan(&mut t1, "a", "b"), Some(first), "a phantom appeared in T1's snapshot");
    assert_eq!(get(&mut t1, "a3"), Some(None));
    assert!(commit(t1), "T1 only read: serializable before T2");
}

/// PMP with a write predicate: T1 adds 10 to every row in the range; T2 deletes the rows whose value is 20. The
/// committed result must equal one of the two serial orders.
#[test]
fn pmp_write_predicate_is_serializable() {
    let (_env, db) = open_with(7, &[("a1", "10"), ("a2", "20")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    for (k, v) in scan(&mut t1, "a", "b").unwrap() {
        let n: u32 = String::from_utf8(v).unwrap().parse().unwrap();
        put(&mut t1, std::str::from_utf8(&k).unwrap(), &(n + 10).to_string());
    }
    for (k, v) in scan(&mut t2, "a", "b").unwrap() {
        if v == b"20" {
            delete(&mut t2, std::str::from_utf8(&k).unwrap());
        }
    }
    let c1 = commit(t1);
    let c2 = commit(t2);
    let mut r = db.begin_read().unwrap();
    let state = r.scan(&b"a"[..]..&b"b"[..]).unwrap().collect::<Result<Rows, Error>>().unwrap();
    let t1_then_t2 = rows(&[("a2", "30")]);
    let t2_then_t1 = rows(&[("a1", "20")]);
    let only_t1 = rows(&[("a1", "20"), ("a2", "30")]);
    let only_t2 = rows(&[("a1", "10")]);
    let allowed: Vec<&Rows> = match (c1, c2) {
        // Both serial orders: T1;T2 deletes a1 (now 20), leaving a2=30; T2;T1 leaves a1=20.
        (true, true) => vec![&t1_then_t2, &t2_then_t1],
        (true, false) => vec![&only_t1],
        (false, true) => vec![&only_t2],
        (false, false) => panic!("neither committed: T1 had no concurrent committer when it committed"),
    };
    assert!(allowed.contains(&&state), "T1 {c1}, T2 {c2}: {state:?} is no serial outcome");
}

/// P4 (lost update): both read x and write x+1; both committing would lose one increment.
#[test]
fn p4_lost_update_is_prevented() {
    let (_env, db) = open_with(8, &[("x", "10")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    assert_eq!(get(&mut t1, "x"), Some(some("10")));
    assert_eq!(get(&mut t2, "x"), Some(some("10")));
    put(&mut t1, "x", "11");
    put(&mut t2, "x", "11");
    let c1 = commit(t1);
    let c2 = commit(t2);
    assert!(c1, "the first committer wins");
    assert!(!c2, "lost update: both read 10 and both wrote 11");
}

/// P4 across an in-flight commit: T1 reads x, writes x+1 and is submitted (validated, in the log, not yet
/// synced nor visible). T2 begins now, while no other transaction is open: its snapshot cannot see T1, so T2
/// reads the old x. T2 must not be able to commit its own x+1.
#[test]
fn p4_lost_update_across_an_in_flight_commit_is_prevented() {
    let (_env, db) = open_with(9, &[("x", "10")]);
    let mut t1 = begin(&db);
    assert_eq!(get(&mut t1, "x"), Some(some("10")));
    put(&mut t1, "x", "11");
    let ticket = submit(t1).expect("T1 has no concurrent transaction").expect("T1 wrote");
    let mut t2 = begin(&db);
    let read = get(&mut t2, "x");
    put(&mut t2, "x", "11");
    let c2 = commit(t2);
    db.wait_for_commit(&ticket).unwrap();
    assert!(
        !c2,
        "lost update: T1 (in flight) and T2 both read x=10 and wrote x=11 and both committed (T2 read {read:?}); \
         final x = {:?}",
        latest(&db, "x")
    );
}

/// G-single (read skew), read-only side: T1 reads x, T2 moves 5 from y to x... and commits; T1 then reads y. T1
/// must see the sum as before (x=10, y=20): its snapshot is before T2.
#[test]
fn g_single_read_skew_is_prevented() {
    let (_env, db) = open_with(10, &[("x", "10"), ("y", "20")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    assert_eq!(get(&mut t1, "x"), Some(some("10")));
    assert_eq!(get(&mut t2, "x"), Some(some("10")));
    assert_eq!(get(&mut t2, "y"), Some(some("20")));
    put(&mut t2, "x", "15");
    put(&mut t2, "y", "15");
    assert!(commit(t2));
    assert_eq!(get(&mut t1, "y"), Some(some("20")), "read skew: T1 saw x before T2 and y after");
    assert_eq!(scan(&mut t1, "a", "z"), Some(rows(&[("x", "10"), ("y", "20")])));
    assert!(commit(t1), "T1 only read: serializable before T2");
    // The same with a read-only transaction.
    let mut r = begin_read(&db);
    let mut t3 = begin(&db);
    assert_eq!(ro_get(&mut r, "x").as_deref(), Some("15"));
    put(&mut t3, "x", "0");
    put(&mut t3, "y", "30");
    assert!(commit(t3));
    assert_eq!(ro_get(&mut r, "y").as_deref(), Some("15"));
}

/// G-single, write side (Hermitage's variant): T1 reads x (old), T2 updates x and y and commits, T1 reads y (old,
/// its snapshot) and writes y based on what it read. T1 overwriting T2's y must be refused.
#[test]
fn g_single_read_skew_with_write_is_prevented() {
    let (_env, db) = open_with(11, &[("x", "10"), ("y", "20")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    assert_eq!(get(&mut t1, "x"), Some(some("10")));
    put(&mut t2, "x", "12");
    put(&mut t2, "y", "18");
    assert!(commit(t2));
    let y = get(&mut t1, "y");
    assert!(y.as_ref().is_none_or(|v| *v == some("20")), "{y:?}");
    put(&mut t1, "y", "30");
    assert!(!commit(t1), "T1 wrote y after T2 committed y concurrently");
    assert_eq!((latest(&db, "x"), latest(&db, "y")), (Some("12".into()), Some("18".into())));
}

/// G2-item (write skew): the on-call doctors. Both read both rows, each takes itself off call.
#[test]
fn g2_item_write_skew_is_prevented() {
    let (_env, db) = open_with(12, &[("alice", "on"), ("bob", "on")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    for t in [&mut t1, &mut t2] {
        assert_eq!(get(t, "alice"), Some(some("on")));
        assert_eq!(get(t, "bob"), Some(some("on")));
    }
    put(&mut t1, "alice", "off");
    put(&mut t2, "bob", "off");
    let c1 = commit(t1);
    let c2 = commit(t2);
    assert!(!(c1 && c2), "write skew: both doctors went off call");
    assert!(c1 || c2, "one of the two could commit");
}

/// G2-item where the second reader reads AFTER the first writer committed (a read-after-commit rw edge: the
/// crackeddb miss). T2 began before T1 committed, so its snapshot still shows both on call.
#[test]
fn g2_item_write_skew_read_after_commit_is_prevented() {
    let (_env, db) = open_with(13, &[("alice", "on"), ("bob", "on")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    assert_eq!(get(&mut t1, "alice"), Some(some("on")));
    assert_eq!(get(&mut t1, "bob"), Some(some("on")));
    put(&mut t1, "alice", "off");
    assert!(commit(t1));
    let alice = get(&mut t2, "alice");
    let bob = get(&mut t2, "bob");
    if alice == Some(some("on")) && bob == Some(some("on")) {
        put(&mut t2, "bob", "off");
    }
    let c2 = commit(t2);
    let off = [latest(&db, "alice"), latest(&db, "bob")].iter().filter(|v| v.as_deref() == Some("off")).count();
    assert!(off <= 1, "write skew via read-after-commit: T2 read alice={alice:?} bob={bob:?}, committed={c2}");
}

/// Write skew across an in-flight commit: T1 reads both doctors, goes off call and is submitted (not yet synced
/// nor visible). T2 begins now, while no other transaction is open, sees both on call and takes bob off call.
#[test]
fn write_skew_across_an_in_flight_commit_is_prevented() {
    let (_env, db) = open_with(14, &[("alice", "on"), ("bob", "on")]);
    let mut t1 = begin(&db);
    get(&mut t1, "alice");
    get(&mut t1, "bob");
    put(&mut t1, "alice", "off");
    let ticket = submit(t1).unwrap().unwrap();
    let mut t2 = begin(&db);
    let alice = get(&mut t2, "alice");
    let bob = get(&mut t2, "bob");
    if alice == Some(some("on")) && bob == Some(some("on")) {
        put(&mut t2, "bob", "off");
    }
    let c2 = commit(t2);
    db.wait_for_commit(&ticket).unwrap();
    let off = [latest(&db, "alice"), latest(&db, "bob")].iter().filter(|v| v.as_deref() == Some("off")).count();
    assert!(off <= 1, "write skew across an in-flight commit: T2 read alice={alice:?} bob={bob:?}, committed={c2}");
}

/// G2 with predicates (phantom write skew): each transaction counts the rows in a range and, seeing fewer than 3,
/// inserts a new one. Both committing leaves 4 rows: a cycle through two scans.
#[test]
fn g2_predicate_phantom_write_skew_is_prevented() {
    let (_env, db) = open_with(15, &[("slot1", "x"), ("slot2", "y")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    let n1 = scan(&mut t1, "slot", "slou").unwrap().len();
    let n2 = scan(&mut t2, "slot", "slou").unwrap().len();
    assert_eq!((n1, n2), (2, 2));
    put(&mut t1, "slot3", "a");
    put(&mut t2, "slot4", "b");
    let c1 = commit(t1);
    let c2 = commit(t2);
    assert!(!(c1 && c2), "phantom: both saw 2 rows and inserted a third (different keys)");
    let mut r = db.begin_read().unwrap();
    let n = r.scan(&b"slot"[..]..&b"slou"[..]).unwrap().count();
    assert_eq!(n, 3);
}

/// G2 with predicates where the second scan runs after the first inserter committed (read-after-commit over a
/// range), and with a delete: T1 scans and deletes a row outside the other's predicate.
#[test]
fn g2_predicate_read_after_commit_is_prevented() {
    let (_env, db) = open_with(16, &[("a1", "1"), ("b1", "1")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    // T1: if range b is non-empty, clear range a. T2: if range a is non-empty, clear range b.
    let b_rows = scan(&mut t1, "b", "c").unwrap();
    assert!(!b_rows.is_empty());
    delete(&mut t1, "a1");
    assert!(commit(t1));
    let a_rows = scan(&mut t2, "a", "b");
    if a_rows.as_ref().is_some_and(|r| !r.is_empty()) {
        delete(&mut t2, "b1");
    }
    let c2 = commit(t2);
    let mut r = db.begin_read().unwrap();
    let left = r.scan(..).unwrap().count();
    assert!(left >= 1, "both ranges cleared: T2 scanned a (after T1 cleared it) = {a_rows:?}, committed={c2}");
}

/// Fekete's read-only anomaly, reader reads before the writer commits: T2 (withdraw) reads checking x and savings
/// y; T1 deposits into y and commits; read-only T3 sees y after T1 and x before T2. T2 must abort, T3 never.
#[test]
fn fekete_read_only_anomaly_writer_aborts() {
    let (_env, db) = open_with(17, &[("x", "0"), ("y", "0")]);
    let mut t2 = begin(&db);
    assert_eq!(get(&mut t2, "x"), Some(some("0")));
    assert_eq!(get(&mut t2, "y"), Some(some("0")));
    let mut t1 = begin(&db);
    assert_eq!(get(&mut t1, "y"), Some(some("0")));
    put(&mut t1, "y", "20");
    assert!(commit(t1));
    let mut t3 = begin_read(&db);
    let seen = (ro_get(&mut t3, "x"), ro_get(&mut t3, "y"));
    assert_eq!(seen, (Some("0".into()), Some("20".into())));
    // T2 saw x + y = 0 < 10: withdraw 10 with a 1 penalty.
    put(&mut t2, "x", "-11");
    let c2 = commit(t2);
    drop(t3);
    assert!(!c2, "Fekete's read-only anomaly: T3 saw {seen:?} yet T2 (which read y=0) committed x=-11");
}

/// Fekete's anomaly when the read-only transaction is open but has not read yet when the writer commits: the
/// writer pays (the read-only guard), and the reader then sees a consistent state.
#[test]
fn fekete_read_only_anomaly_reader_open_before_writer_commits() {
    let (_env, db) = open_with(18, &[("x", "0"), ("y", "0")]);
    let mut t2 = begin(&db);
    get(&mut t2, "x");
    get(&mut t2, "y");
    let mut t1 = begin(&db);
    get(&mut t1, "y");
    put(&mut t1, "y", "20");
    assert!(commit(t1));
    let mut t3 = begin_read(&db);
    put(&mut t2, "x", "-11");
    let c2 = commit(t2);
    let seen = (ro_get(&mut t3, "x"), ro_get(&mut t3, "y"));
    assert!(!c2, "T2 committed while an open read-only transaction can see T1 and not T2: T3 then saw {seen:?}");
    assert_eq!(seen, (Some("0".into()), Some("20".into())));
    assert!(db.conflict_stats().0.read_only_guard_aborts >= 1);
}

/// Fekete's anomaly with the writer in flight: T2 is validated and appended (submitted, not yet synced) before the
/// read-only T3 begins; T3's snapshot sees T1 but not T2. No transaction is open meanwhile. T3 must never get a
/// conflict, and if T2 commits T3 must not have seen the state T1-without-T2.
#[test]
fn fekete_read_only_anomaly_with_writer_in_flight() {
    let (_env, db) = open_with(19, &[("x", "0"), ("y", "0")]);
    let mut t2 = begin(&db);
    get(&mut t2, "x");
    get(&mut t2, "y");
    let mut t1 = begin(&db);
    get(&mut t1, "y");
    put(&mut t1, "y", "20");
    assert!(commit(t1));
    put(&mut t2, "x", "-11");
    let ticket = submit(t2);
    let mut t3 = begin_read(&db);
    let seen = (ro_get(&mut t3, "x"), ro_get(&mut t3, "y"));
    drop(t3);
    let c2 = match ticket {
        Some(Some(ticket)) => db.wait_for_commit(&ticket).is_ok(),
        _ => false,
    };
    assert!(
        !(c2 && seen == (Some("0".into()), Some("20".into()))),
        "Fekete's read-only anomaly: T2 (read y=0, wrote x=-11) committed, T3 saw x=0 and y=20 (T1 without T2)"
    );
}

/// As above, with an unrelated transaction left open throughout (so the tracker keeps every record): the read
/// of the read-only transaction must not fail or panic.
#[test]
fn fekete_read_only_anomaly_with_writer_in_flight_and_a_bystander() {
    let (_env, db) = open_with(20, &[("x", "0"), ("y", "0"), ("z", "0")]);
    let mut bystander = begin(&db);
    get(&mut bystander, "z");
    let mut t2 = begin(&db);
    get(&mut t2, "x");
    get(&mut t2, "y");
    let mut t1 = begin(&db);
    get(&mut t1, "y");
    put(&mut t1, "y", "20");
    assert!(commit(t1));
    put(&mut t2, "x", "-11");
    let ticket = submit(t2);
    let mut t3 = begin_read(&db);
    let seen = (ro_get(&mut t3, "x"), ro_get(&mut t3, "y"));
    drop(t3);
    let c2 = match ticket {
        Some(Some(ticket)) => db.wait_for_commit(&ticket).is_ok(),
        _ => false,
    };
    assert!(!(c2 && seen == (Some("0".into()), Some("20".into()))), "Fekete's read-only anomaly with a bystander");
    assert!(commit(bystander));
}
