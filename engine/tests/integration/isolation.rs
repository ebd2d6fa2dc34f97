//! Isolation: the Adya / Hermitage anomaly catalogue on SimEnv, with transactions interleaved on one thread
//! (no operation blocks on another transaction, so one thread can drive several). Every anomaly test asserts the
//! anomaly is prevented: some transaction gets `is_conflict()`, or what committed is serializable. Then
//! non-conflicting workloads that must all commit, the plain transaction semantics, a brute-force serializability
//! proptest over random interleavings, and the conflict tracker's memory bound.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

use engine::{CommitTicket, Db, Error, Options, ReadTransaction, Transaction};
use env::{DeterministicRng, SimEnv};
use proptest::prelude::*;

type Txn = Transaction<SimEnv>;
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

fn open(seed: u64) -> (SimEnv, Db<SimEnv>) {
    let env = SimEnv::new(seed);
    let db = Db::open(env.clone(), "/db", Options::default()).unwrap();
    (env, db)
}

/// A database holding `rows` (committed and acknowledged).
fn open_with(seed: u64, rows: &[(&str, &str)]) -> (SimEnv, Db<SimEnv>) {
    let (env, db) = open(seed);
    let mut t = db.begin().unwrap();
    for (k, v) in rows {
        t.put(k.as_bytes(), v.as_bytes()).unwrap();
    }
    t.commit().unwrap();
    (env, db)
}

fn some(value: &str) -> Option<Vec<u8>> {
    Some(value.as_bytes().to_vec())
}

fn rows(pairs: &[(&str, &str)]) -> Rows {
    pairs.iter().map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec())).collect()
}

/// Leaks its contents instead of dropping them while a panic unwinds. An engine panic under its state lock poisons
/// the lock; dropping an open transaction then panics again (it locks the state), and a panic during unwinding
/// aborts the whole test binary. With this wrapper a failing test fails alone.
struct Leak<T>(Option<T>);

impl<T> Drop for Leak<T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            std::mem::forget(self.0.take());
        }
    }
}

impl<T> std::ops::Deref for Leak<T> {
    type Target = Option<T>;

    fn deref(&self) -> &Option<T> {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Leak<T> {
    fn deref_mut(&mut self) -> &mut Option<T> {
        &mut self.0
    }
}

/// Run `op` on a transaction that is still alive. A serialization conflict kills it (returns None); any other
/// error is a test failure.
fn live<T>(txn: &mut Option<Txn>, op: impl FnOnce(&mut Txn) -> Result<T, Error>) -> Option<T> {
    let t = txn.as_mut()?;
    match op(t) {
        Ok(value) => Some(value),
        Err(error) if error.is_conflict() => {
            *txn = None;
            None
        }
        Err(error) => panic!("unexpected non-conflict error: {error:?}"),
    }
}

fn get(txn: &mut Option<Txn>, key: &str) -> Option<Option<Vec<u8>>> {
    live(txn, |t| t.get(key.as_bytes()))
}

fn put(txn: &mut Option<Txn>, key: &str, value: &str) {
    live(txn, |t| t.put(key.as_bytes(), value.as_bytes()));
}

fn delete(txn: &mut Option<Txn>, key: &str) {
    live(txn, |t| t.delete(key.as_bytes()));
}

fn scan(txn: &mut Option<Txn>, start: &str, end: &str) -> Option<Rows> {
    live(txn, |t| t.scan(start.as_bytes()..end.as_bytes())?.collect::<Result<Rows, Error>>())
}

/// Commit; true if it committed, false on a conflict (now or earlier).
fn commit(mut txn: Leak<Txn>) -> bool {
    match txn.0.take().map(Transaction::commit) {
        None => false,
        Some(Ok(())) => true,
        Some(Err(error)) if error.is_conflict() => false,
        Some(Err(error)) => panic!("unexpected non-conflict error at commit: {error:?}"),
    }
}

/// Submit without waiting; Some(ticket) if it passed validation (in flight), None on a conflict.
fn submit(mut txn: Leak<Txn>) -> Option<Option<CommitTicket>> {
    match txn.0.take()?.submit() {
        Ok(ticket) => Some(ticket),
        Err(error) if error.is_conflict() => None,
        Err(error) => panic!("unexpected non-conflict error at submit: {error:?}"),
    }
}

fn begin(db: &Db<SimEnv>) -> Leak<Txn> {
    Leak(Some(db.begin().unwrap()))
}

fn begin_read(db: &Db<SimEnv>) -> Leak<ReadTransaction<SimEnv>> {
    Leak(Some(db.begin_read().unwrap()))
}

/// The latest committed value, as a string.
fn latest(db: &Db<SimEnv>, key: &str) -> Option<String> {
    let mut r = db.begin_read().unwrap();
    r.get(key.as_bytes()).unwrap().map(|v| String::from_utf8(v).unwrap())
}

fn ro_get(r: &mut Option<ReadTransaction<SimEnv>>, key: &str) -> Option<String> {
    let r = r.as_mut().expect("an open read-only transaction");
    r.get(key.as_bytes()).unwrap().map(|v| String::from_utf8(v).unwrap())
}

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

// ---- what must commit --------------------------------------------------------------------------------------------

#[test]
fn disjoint_keys_both_commit() {
    let (_env, db) = open_with(30, &[("a", "1"), ("b", "2")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    assert_eq!(get(&mut t1, "a"), Some(some("1")));
    assert_eq!(get(&mut t2, "b"), Some(some("2")));
    put(&mut t1, "a", "10");
    put(&mut t2, "b", "20");
    assert!(commit(t1));
    assert!(commit(t2));
    assert_eq!((latest(&db, "a"), latest(&db, "b")), (Some("10".into()), Some("20".into())));
}

/// Reading and writing different keys with one rw edge and no cycle: T2 reads b (which T1 writes) and writes c,
/// which nobody read. Serial order T2; T1. Both commit, in either commit order.
#[test]
fn one_rw_edge_without_a_cycle_both_commit() {
    for t1_first in [true, false] {
        let (_env, db) = open_with(31, &[("a", "1"), ("b", "2"), ("c", "3")]);
        let (mut t1, mut t2) = (begin(&db), begin(&db));
        get(&mut t1, "a");
        put(&mut t1, "b", "20");
        assert_eq!(get(&mut t2, "b"), Some(some("2")));
        put(&mut t2, "c", "30");
        let (c1, c2) = if t1_first {
            let c1 = commit(t1);
            (c1, commit(t2))
        } else {
            let c2 = commit(t2);
            (commit(t1), c2)
        };
        assert!(c1 && c2, "t1_first={t1_first}: T1 {c1}, T2 {c2}");
    }
}

/// A read-only transaction alongside writers: it never conflicts and its reads never change.
#[test]
fn read_only_alongside_writers_never_conflicts() {
    let (_env, db) = open_with(32, &[("x", "0"), ("y", "0")]);
    let mut r = begin_read(&db);
    assert_eq!(ro_get(&mut r, "x").as_deref(), Some("0"));
    for i in 1..=20 {
        let mut w = begin(&db);
        let x: i32 = String::from_utf8(get(&mut w, "x").unwrap().unwrap()).unwrap().parse().unwrap();
        put(&mut w, "x", &(x + 1).to_string());
        put(&mut w, "y", &(i * 2).to_string());
        assert!(commit(w), "writer {i}");
        assert_eq!(ro_get(&mut r, "x").as_deref(), Some("0"));
        assert_eq!(ro_get(&mut r, "y").as_deref(), Some("0"));
    }
    let all = r.as_mut().unwrap().scan(..).unwrap().collect::<Result<Rows, Error>>().unwrap();
    assert_eq!(all, rows(&[("x", "0"), ("y", "0")]));
    drop(r);
    assert_eq!(latest(&db, "x").as_deref(), Some("20"));
}

/// Scans over disjoint ranges, each writer inserting into its own range: both commit.
#[test]
fn scans_over_disjoint_ranges_both_commit() {
    let (_env, db) = open_with(33, &[("a1", "1"), ("n1", "1")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    assert_eq!(scan(&mut t1, "a", "m").unwrap().len(), 1);
    assert_eq!(scan(&mut t2, "n", "z").unwrap().len(), 1);
    put(&mut t1, "a2", "2");
    put(&mut t2, "n2", "2");
    assert!(commit(t1));
    assert!(commit(t2));
    let mut r = db.begin_read().unwrap();
    assert_eq!(r.scan(..).unwrap().count(), 4);
}

// ---- transaction semantics -----------------------------------------------------------------------------------------

#[test]
fn own_writes_are_visible_to_get_and_scan() {
    let (_env, db) = open_with(40, &[("a", "1"), ("b", "2"), ("c", "3")]);
    let mut t = db.begin().unwrap();
    t.put(b"b", b"20").unwrap();
    t.delete(b"c").unwrap();
    t.put(b"d", b"4").unwrap();
    assert_eq!(t.get(b"b").unwrap(), some("20"));
    assert_eq!(t.get(b"c").unwrap(), None);
    assert_eq!(t.get(b"d").unwrap(), some("4"));
    let all = t.scan(..).unwrap().collect::<Result<Rows, Error>>().unwrap();
    assert_eq!(all, rows(&[("a", "1"), ("b", "20"), ("d", "4")]));
    let part = t.scan(&b"b"[..]..&b"d"[..]).unwrap().collect::<Result<Rows, Error>>().unwrap();
    assert_eq!(part, rows(&[("b", "20")]));
    t.delete(b"d").unwrap();
    t.put(b"c", b"30").unwrap();
    assert_eq!(
        t.scan(..).unwrap().collect::<Result<Rows, Error>>().unwrap(),
        rows(&[("a", "1"), ("b", "20"), ("c", "30")])
    );
    // Nobody else sees them before the commit.
    assert_eq!(latest(&db, "b").as_deref(), Some("2"));
    t.commit().unwrap();
    assert_eq!(latest(&db, "b").as_deref(), Some("20"));
    assert_eq!(latest(&db, "c").as_deref(), Some("30"));
    assert_eq!(latest(&db, "d"), None);
}

#[test]
fn rollback_on_drop_leaves_nothing() {
    let (_env, db) = open_with(41, &[("a", "1")]);
    let before = db.conflict_stats().1;
    {
        let mut t = db.begin().unwrap();
        t.put(b"a", b"2").unwrap();
        t.put(b"b", b"2").unwrap();
        t.delete(b"a").unwrap();
        assert_eq!(t.get(b"b").unwrap(), some("2"));
    }
    let mut t = db.begin().unwrap();
    t.put(b"c", b"3").unwrap();
    t.rollback();
    assert_eq!(db.conflict_stats().1, before, "rolled-back transactions left records in the tracker");
    assert_eq!(db.pending_commits(), 0);
    assert_eq!(latest(&db, "a").as_deref(), Some("1"));
    assert_eq!(latest(&db, "b"), None);
    assert_eq!(latest(&db, "c"), None);
    // A writer of the same keys afterwards commits: nothing of the rolled-back ones conflicts.
    let mut t = db.begin().unwrap();
    t.put(b"a", b"9").unwrap();
    t.put(b"b", b"9").unwrap();
    t.commit().unwrap();
}

/// A snapshot keeps reading the same values while others commit, across a flush and a full compaction.
#[test]
fn snapshot_reads_are_stable_while_others_commit() {
    let env = SimEnv::new(42);
    let db = Db::open(env.clone(), "/db", Options::default().with_flush_threshold_bytes(2048)).unwrap();
    for i in 0..50 {
        db.put(format!("k{i:02}").as_bytes(), b"old").unwrap();
    }
    let mut t = db.begin().unwrap();
    let mut r = db.begin_read().unwrap();
    let expected: Rows = (0..50).map(|i| (format!("k{i:02}").into_bytes(), b"old".to_vec())).collect();
    for round in 0..5 {
        for i in 0..50 {
            let mut w = db.begin().unwrap();
            if i % 3 == 0 {
                w.delete(format!("k{i:02}").as_bytes()).unwrap();
            } else {
                w.put(format!("k{i:02}").as_bytes(), format!("new{round}").as_bytes()).unwrap();
            }
            w.put(format!("z{round}-{i}").as_bytes(), b"inserted").unwrap();
            w.commit().unwrap();
        }
        if round == 2 {
            db.flush().unwrap();
        }
        if round == 3 {
            db.compact().unwrap();
        }
        env.run_tasks(16);
        assert_eq!(t.get(b"k03").unwrap(), some("old"), "round {round}");
        assert_eq!(t.scan(..).unwrap().collect::<Result<Rows, Error>>().unwrap(), expected, "round {round}");
        assert_eq!(r.get(b"k07").unwrap(), some("old"), "round {round}");
        assert_eq!(r.scan(..).unwrap().collect::<Result<Rows, Error>>().unwrap(), expected, "round {round}");
    }
    assert!(db.stats().flush_count >= 1);
    drop(r);
    assert!(t.commit().is_ok(), "T only read");
    let mut now = db.begin_read().unwrap();
    assert_eq!(now.get(b"k03").unwrap(), None);
    assert_eq!(now.get(b"k04").unwrap(), some("new4"));
}

/// `..`, inclusive and exclusive bounds on both transaction kinds.
#[test]
fn scan_bounds_and_full_range() {
    let (_env, db) = open_with(43, &[("0", "zero"), ("a", "1"), ("b", "2"), ("c", "3"), ("\u{7f}", "del")]);
    let mut t = db.begin().unwrap();
    let mut r = db.begin_read().unwrap();
    let all = rows(&[("0", "zero"), ("a", "1"), ("b", "2"), ("c", "3"), ("\u{7f}", "del")]);
    assert_eq!(t.scan(..).unwrap().collect::<Result<Rows, Error>>().unwrap(), all);
    assert_eq!(r.scan(..).unwrap().collect::<Result<Rows, Error>>().unwrap(), all);
    let (a, b, c): (&[u8], &[u8], &[u8]) = (b"a", b"b", b"c");
    assert_eq!(t.scan(a..=b).unwrap().collect::<Result<Rows, Error>>().unwrap(), rows(&[("a", "1"), ("b", "2")]));
    assert_eq!(r.scan(a..c).unwrap().collect::<Result<Rows, Error>>().unwrap(), rows(&[("a", "1"), ("b", "2")]));
    assert_eq!(
        t.scan(b..).unwrap().collect::<Result<Rows, Error>>().unwrap(),
        rows(&[("b", "2"), ("c", "3"), ("\u{7f}", "del")])
    );
    assert_eq!(r.scan(..b).unwrap().collect::<Result<Rows, Error>>().unwrap(), rows(&[("0", "zero"), ("a", "1")]));
    let excluded = (Bound::Excluded(a), Bound::Excluded(c));
    assert_eq!(t.scan(excluded).unwrap().collect::<Result<Rows, Error>>().unwrap(), rows(&[("b", "2")]));
    assert_eq!(r.scan(excluded).unwrap().collect::<Result<Rows, Error>>().unwrap(), rows(&[("b", "2")]));
    assert_eq!(t.scan(c..a).unwrap().count(), 0, "an empty (inverted) range");
    assert!(t.commit().is_ok());
}

/// A transaction that lost a conflict is over: its writes never appear, and the tracker forgets it.
#[test]
fn a_conflict_ends_the_transaction() {
    let (_env, db) = open_with(44, &[("x", "1")]);
    let mut t1 = db.begin().unwrap();
    let mut t2 = db.begin().unwrap();
    t1.get(b"x").unwrap();
    t2.get(b"x").unwrap();
    t1.put(b"x", b"2").unwrap();
    t2.put(b"x", b"3").unwrap();
    t2.put(b"other", b"3").unwrap();
    t1.commit().unwrap();
    let error = t2.commit().unwrap_err();
    assert!(error.is_conflict(), "{error:?}");
    assert_eq!(latest(&db, "x").as_deref(), Some("2"));
    assert_eq!(latest(&db, "other"), None);
    let held = db.conflict_stats().1;
    assert!(held < 64, "no transaction is open, yet the tracker holds {held} records");
    assert!(db.conflict_stats().0.ww_aborts >= 1);
}

// ---- streaming scans: a scan protects the range it observed (ADR-0085) --------------------------------------------

/// Rows `a1..a5` and `b1`: T1 reads part of range a (the first two rows forward, or the last two from the back)
/// and writes into range b; T2 reads range b whole and writes `key` into range a. A write skew exactly when `key`
/// falls in the part of range a that T1 observed.
fn skew_through_a_partial_scan(seed: u64, reverse: bool, key: &str) -> (bool, bool) {
    let (_env, db) = open_with(seed, &[("a1", "1"), ("a2", "1"), ("a3", "1"), ("a4", "1"), ("a5", "1"), ("b1", "1")]);
    let (mut t1, mut t2) = (begin(&db), begin(&db));
    let seen = live(&mut t1, |t| {
        let rows = t.scan(&b"a"[..]..&b"b"[..])?;
        if reverse { rows.rev().take(2).collect::<Result<Rows, Error>>() } else { rows.take(2).collect() }
    });
    let expected = if reverse { rows(&[("a5", "1"), ("a4", "1")]) } else { rows(&[("a1", "1"), ("a2", "1")]) };
    assert_eq!(seen, Some(expected), "the iterator was dropped after two rows");
    assert_eq!(scan(&mut t2, "b", "c"), Some(rows(&[("b1", "1")])));
    put(&mut t1, "b2", "new");
    put(&mut t2, key, "new");
    (commit(t1), commit(t2))
}

#[test]
fn a_write_past_where_a_dropped_scan_stopped_does_not_conflict() {
    // Forward: T1 observed [a, a2]; a4 and a25 lie past it. Reverse: T1 observed [a4, b); a2 and a35 lie before it.
    for (reverse, key) in [(false, "a4"), (false, "a25"), (true, "a2"), (true, "a35")] {
        assert_eq!(skew_through_a_partial_scan(70, reverse, key), (true, true), "reverse={reverse} key={key}");
    }
}

#[test]
fn a_write_inside_what_a_dropped_scan_observed_is_write_skew_and_is_prevented() {
    // Forward: a15 is a phantom between the two rows read, a2 a row read. Reverse: a45 and a4 likewise.
    for (reverse, key) in [(false, "a15"), (false, "a2"), (false, "a0"), (true, "a45"), (true, "a4"), (true, "a9")] {
        let (c1, c2) = skew_through_a_partial_scan(71, reverse, key);
        assert!(!(c1 && c2), "write skew through a partial scan: reverse={reverse} key={key}");
    }
}

/// A dangerous structure closed by a scan dropped after one row: the registration at the drop dooms the scanning
/// transaction, and its next operation reports the conflict. A scan dropped before its first row observed nothing
/// and registers nothing.
#[test]
fn a_conflict_found_when_a_dropped_scan_registers_surfaces_at_the_next_operation() {
    for read_a_row in [true, false] {
        let (_env, db) = open_with(72, &[("y", "0"), ("z", "0")]);
        let (mut t0, mut t1, mut t2) = (db.begin().unwrap(), db.begin().unwrap(), db.begin().unwrap());
        assert_eq!(t1.get(b"z").unwrap(), some("0"));
        t0.put(b"z", b"1").unwrap();
        t0.commit().unwrap();
        t1.put(b"y", b"1").unwrap();
        t1.commit().unwrap();
        let mut rows = t2.scan(&b"w"[..]..&b"z"[..]).unwrap();
        if read_a_row {
            assert_eq!(rows.next().unwrap().unwrap(), (b"y".to_vec(), b"0".to_vec()), "the snapshot's y");
        }
        drop(rows);
        let next = t2.put(b"q", b"1");
        assert_eq!(next.is_err_and(|error| error.is_conflict()), read_a_row, "read a row: {read_a_row}");
    }
}

#[test]
fn scans_run_both_ways_and_by_prefix_with_own_writes() {
    let (_env, db) = open_with(73, &[("a", "1"), ("b", "2"), ("c", "3"), ("ca", "4"), ("d", "5")]);
    let mut t = db.begin().unwrap();
    t.put(b"cb", b"40").unwrap();
    t.delete(b"ca").unwrap();
    let backward = t.scan(..).unwrap().rev().collect::<Result<Rows, Error>>().unwrap();
    assert_eq!(backward, rows(&[("d", "5"), ("cb", "40"), ("c", "3"), ("b", "2"), ("a", "1")]));
    let prefixed = t.scan_prefix(b"c").unwrap().collect::<Result<Rows, Error>>().unwrap();
    assert_eq!(prefixed, rows(&[("c", "3"), ("cb", "40")]));
    // Both ends at once: they meet in the middle, every row once.
    let mut both = t.scan(..).unwrap();
    let (first, last) = (both.next().unwrap().unwrap(), both.next_back().unwrap().unwrap());
    let middle = both.collect::<Result<Rows, Error>>().unwrap();
    assert_eq!((first, last), (rows(&[("a", "1")])[0].clone(), rows(&[("d", "5")])[0].clone()));
    assert_eq!(middle, rows(&[("b", "2"), ("c", "3"), ("cb", "40")]));
    let mut r = db.begin_read().unwrap();
    assert_eq!(r.scan_prefix(b"c").unwrap().rev().count(), 2, "the reader sees c and ca, not t's writes");
    assert_eq!(
        db.scan_prefix(b"c").unwrap().rev().collect::<Result<Rows, Error>>().unwrap(),
        rows(&[("ca", "4"), ("c", "3")])
    );
}

// ---- brute-force serializability over random interleavings -------------------------------------------------------

#[derive(Clone, Debug)]
enum Op {
    Get(usize),
    Put(usize),
    Delete(usize),
    /// `[key(lo), key(hi))`; `hi` may name a key past the last one.
    Scan(usize, usize),
    Full,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Commit,
    /// Submit, and wait for it only later (at a `Tick` or at the end).
    Submit,
    Rollback,
}

#[derive(Clone, Debug)]
struct Script {
    read_only: bool,
    ops: Vec<Op>,
    end: End,
}

#[derive(Clone, Debug)]
struct Case {
    keys: usize,
    initial: Vec<bool>,
    scripts: Vec<Script>,
    /// Which actor moves next (modulo those with steps left). Actor `scripts.len()` is the group commit.
    schedule: Vec<u8>,
    ticks: usize,
}

fn case_strategy(in_flight: bool) -> impl Strategy<Value = Case> {
    (3usize..=4, 2usize..=4).prop_flat_map(move |(keys, txns)| {
        let op = prop_oneof![
            3 => (0..keys).prop_map(Op::Get),
            3 => (0..keys).prop_map(Op::Put),
            1 => (0..keys).prop_map(Op::Delete),
            2 => (0..keys, 0..=keys).prop_map(|(a, b)| Op::Scan(a.min(b), a.max(b))),
            1 => Just(Op::Full),
        ];
        let end = if in_flight {
            prop_oneof![2 => Just(End::Commit), 3 => Just(End::Submit), 1 => Just(End::Rollback)].boxed()
        } else {
            prop_oneof![5 => Just(End::Commit), 1 => Just(End::Rollback)].boxed()
        };
        let script = (proptest::bool::weighted(0.25), proptest::collection::vec(op, 1..=5), end)
            .prop_map(|(read_only, ops, end)| Script { read_only, ops, end });
        (
            Just(keys),
            proptest::collection::vec(any::<bool>(), keys),
            proptest::collection::vec(script, txns),
            proptest::collection::vec(any::<u8>(), 40),
            if in_flight { 0usize..=3 } else { 0usize..=0 },
        )
            .prop_map(|(keys, initial, scripts, schedule, ticks)| Case {
                keys,
                initial,
                scripts,
                schedule,
                ticks,
            })
    })
}

fn pkey(i: usize) -> Vec<u8> {
    format!("k{i}").into_bytes()
}

/// What a transaction did, in its own order: the replay re-executes it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Event {
    Get(Vec<u8>, Option<Vec<u8>>),
    Scan(Vec<u8>, Option<Vec<u8>>, Rows),
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

enum Handle {
    NotBegun,
    Rw(Txn),
    Ro(ReadTransaction<SimEnv>),
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Open,
    Committed,
    InFlight,
    Aborted,
}

/// Run one case; Ok(()) or a precise description of the non-serializable history.
fn run_case(case: &Case, seed: u64) -> Result<(), String> {
    let (_env, db) = open(seed);
    let initial: BTreeMap<Vec<u8>, Vec<u8>> =
        (0..case.keys).filter(|&k| case.initial[k]).map(|k| (pkey(k), format!("init{k}").into_bytes())).collect();
    if !initial.is_empty() {
        let mut t = db.begin().unwrap();
        for (k, v) in &initial {
            t.put(k, v).unwrap();
        }
        t.commit().unwrap();
    }
    let n = case.scripts.len();
    let mut slot = Leak(Some((0..n).map(|_| Handle::NotBegun).collect::<Vec<Handle>>()));
    let handles = slot.0.as_mut().expect("just made");
    let mut events: Vec<Vec<Event>> = vec![Vec::new(); n];
    let mut outcomes = vec![Outcome::Open; n];
    // Steps left per actor: begin + ops + end; the group-commit actor has `ticks`.
    let mut next: Vec<usize> = vec![0; n];
    let mut ticks_left = case.ticks;
    let mut tickets: VecDeque<(usize, CommitTicket)> = VecDeque::new();
    let mut log: Vec<String> = Vec::new();
    let mut choice = case.schedule.iter().copied().cycle();
    loop {
        let mut ready: Vec<usize> = (0..n).filter(|&t| next[t] < case.scripts[t].ops.len() + 2).collect();
        if ticks_left > 0 {
            ready.push(n);
        }
        if ready.is_empty() {
            break;
        }
        let actor = ready[usize::from(choice.next().unwrap()) % ready.len()];
        if actor == n {
            ticks_left -= 1;
            if let Some((t, ticket)) = tickets.pop_front() {
                db.wait_for_commit(&ticket).map_err(|e| format!("wait for T{t}'s commit failed: {e:?}"))?;
                log.push(format!("tick: T{t}'s commit (and all before it) acknowledged"));
            }
            continue;
        }
        let script = &case.scripts[actor];
        let step = next[actor];
        next[actor] += 1;
        if step == 0 {
            handles[actor] =
                if script.read_only { Handle::Ro(db.begin_read().unwrap()) } else { Handle::Rw(db.begin().unwrap()) };
            log.push(format!("T{actor}: begin{}", if script.read_only { " (read-only)" } else { "" }));
            continue;
        }
        if step == script.ops.len() + 1 {
            let handle = std::mem::replace(&mut handles[actor], Handle::Done);
            match handle {
                Handle::Ro(r) => {
                    drop(r);
                    outcomes[actor] = Outcome::Committed;
                }
                Handle::Rw(t) => match script.end {
                    End::Rollback => {
                        t.rollback();
                        outcomes[actor] = Outcome::Aborted;
                    }
                    End::Commit => match t.commit() {
                        Ok(()) => outcomes[actor] = Outcome::Committed,
                        Err(e) if e.is_conflict() => outcomes[actor] = Outcome::Aborted,
                        Err(e) => return Err(format!("T{actor}: commit failed: {e:?}")),
                    },
                    End::Submit => match t.submit() {
                        Ok(Some(ticket)) => {
                            outcomes[actor] = Outcome::InFlight;
                            tickets.push_back((actor, ticket));
                        }
                        Ok(None) => outcomes[actor] = Outcome::Committed,
                        Err(e) if e.is_conflict() => outcomes[actor] = Outcome::Aborted,
                        Err(e) => return Err(format!("T{actor}: submit failed: {e:?}")),
                    },
                },
                Handle::NotBegun | Handle::Done => {}
            }
            log.push(format!("T{actor}: end {:?} -> {:?}", script.end, outcomes[actor]));
            continue;
        }
        let op = &script.ops[step - 1];
        let (op, read_only) = match (op, script.read_only) {
            (Op::Put(k) | Op::Delete(k), true) => (Op::Get(*k), true),
            (op, ro) => (op.clone(), ro),
        };
        let value = format!("t{actor}s{step}").into_bytes();
        let result: Result<Event, Error> = match &mut handles[actor] {
            Handle::Rw(t) => match &op {
                Op::Get(k) => t.get(&pkey(*k)).map(|v| Event::Get(pkey(*k), v)),
                Op::Put(k) => t.put(&pkey(*k), &value).map(|()| Event::Put(pkey(*k), value.clone())),
                Op::Delete(k) => t.delete(&pkey(*k)).map(|()| Event::Delete(pkey(*k))),
                Op::Scan(lo, hi) => {
                    let (lo, hi) = (pkey(*lo), pkey(*hi));
                    let scanned = t.scan(&lo[..]..&hi[..]).and_then(|it| it.collect::<Result<Rows, Error>>());
                    scanned.map(|rows| Event::Scan(lo, Some(hi), rows))
                }
                Op::Full => {
                    let scanned = t.scan(..).and_then(|it| it.collect::<Result<Rows, Error>>());
                    scanned.map(|rows| Event::Scan(Vec::new(), None, rows))
                }
            },
            Handle::Ro(r) => {
                assert!(read_only);
                match &op {
                    Op::Get(k) => r.get(&pkey(*k)).map(|v| Event::Get(pkey(*k), v)),
                    Op::Scan(lo, hi) => {
                        let (lo, hi) = (pkey(*lo), pkey(*hi));
                        let scanned = r.scan(&lo[..]..&hi[..]).and_then(|it| it.collect::<Result<Rows, Error>>());
                        scanned.map(|rows| Event::Scan(lo, Some(hi), rows))
                    }
                    Op::Full => {
                        let scanned = r.scan(..).and_then(|it| it.collect::<Result<Rows, Error>>());
                        scanned.map(|rows| Event::Scan(Vec::new(), None, rows))
                    }
                    Op::Put(_) | Op::Delete(_) => unreachable!("read-only scripts only read"),
                }
            }
            Handle::NotBegun | Handle::Done => continue,
        };
        match result {
            Ok(event) => {
                log.push(format!("T{actor}: {}", render_event(&event)));
                events[actor].push(event);
            }
            Err(e) if e.is_conflict() && !read_only => {
                log.push(format!("T{actor}: {op:?} -> conflict ({e})"));
                handles[actor] = Handle::Done;
                outcomes[actor] = Outcome::Aborted;
            }
            Err(e) => return Err(format!("T{actor}: {op:?} failed: {e:?}\n{}", log.join("\n"))),
        }
    }
    for (t, ticket) in tickets {
        db.wait_for_commit(&ticket).map_err(|e| format!("wait for T{t}'s commit failed: {e:?}"))?;
        outcomes[t] = Outcome::Committed;
    }
    for outcome in &mut outcomes {
        if *outcome == Outcome::InFlight {
            *outcome = Outcome::Committed;
        }
    }
    let mut r = db.begin_read().unwrap();
    let final_state: BTreeMap<Vec<u8>, Vec<u8>> = r.scan(..).unwrap().map(Result::unwrap).collect();
    drop(r);
    let committed: Vec<usize> = (0..n).filter(|&t| outcomes[t] == Outcome::Committed).collect();
    if serial_order(&initial, &committed, &events, &final_state).is_some() {
        return Ok(());
    }
    Err(format!(
        "no serial order of the committed transactions {committed:?} explains their reads and the final state\n\
         initial: {}\nfinal:   {}\nhistory:\n  {}",
        render_state(&initial),
        render_state(&final_state),
        log.join("\n  ")
    ))
}

/// A serial order of `committed` that reproduces every read and the final state, if one exists.
fn serial_order(
    initial: &BTreeMap<Vec<u8>, Vec<u8>>,
    committed: &[usize],
    events: &[Vec<Event>],
    final_state: &BTreeMap<Vec<u8>, Vec<u8>>,
) -> Option<Vec<usize>> {
    let mut order = committed.to_vec();
    permutations(&mut order, 0, &mut |order| {
        let mut state = initial.clone();
        for &t in order {
            for event in &events[t] {
                match event {
                    Event::Get(k, seen) => {
                        if state.get(k) != seen.as_ref() {
                            return false;
                        }
                    }
                    Event::Scan(lo, hi, seen) => {
                        let upper = hi.as_ref().map_or(Bound::Unbounded, |h| Bound::Excluded(h.clone()));
                        let expected: Rows = state
                            .range((Bound::Included(lo.clone()), upper))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                        if &expected != seen {
                            return false;
                        }
                    }
                    Event::Put(k, v) => {
                        state.insert(k.clone(), v.clone());
                    }
                    Event::Delete(k) => {
                        state.remove(k);
                    }
                }
            }
        }
        &state == final_state
    })
}

/// Calls `check` on every permutation of `items[from..]` (swap recursion); returns the first it accepts.
fn permutations(items: &mut [usize], from: usize, check: &mut impl FnMut(&[usize]) -> bool) -> Option<Vec<usize>> {
    if from == items.len() {
        return check(items).then(|| items.to_vec());
    }
    for i in from..items.len() {
        items.swap(from, i);
        if let Some(found) = permutations(items, from + 1, check) {
            return Some(found);
        }
        items.swap(from, i);
    }
    None
}

fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn render_event(event: &Event) -> String {
    match event {
        Event::Get(k, v) => format!("get {} = {:?}", show(k), v.as_deref().map(show)),
        Event::Scan(lo, hi, rows) => format!(
            "scan [{}, {}) = {{{}}}",
            show(lo),
            hi.as_deref().map_or("..".to_string(), show),
            rows.iter().map(|(k, v)| format!("{}={}", show(k), show(v))).collect::<Vec<_>>().join(", ")
        ),
        Event::Put(k, v) => format!("put {} = {}", show(k), show(v)),
        Event::Delete(k) => format!("delete {}", show(k)),
    }
}

fn render_state(state: &BTreeMap<Vec<u8>, Vec<u8>>) -> String {
    state.iter().map(|(k, v)| format!("{}={}", show(k), show(v))).collect::<Vec<_>>().join(", ")
}

proptest! {
    // No failure-persistence file: a counterexample is reported in full (history and minimal case) instead.
    #![proptest_config(ProptestConfig { cases: 4096, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random interleavings of 2-4 transactions (some read-only) over 3-4 keys, every commit waited on: the
    /// committed transactions are serializable (checked by brute force over serial orders).
    #[test]
    fn committed_transactions_are_serializable(case in case_strategy(false), seed in 0u64..1000) {
        if let Err(report) = run_case(&case, seed) {
            prop_assert!(false, "{}", report);
        }
    }

    /// The same with commits left in flight (submitted, acknowledged only by a later tick or at the end), so
    /// transactions begin while others are validated but not yet visible.
    #[test]
    fn committed_transactions_are_serializable_with_in_flight_commits(
        case in case_strategy(true),
        seed in 0u64..1000,
    ) {
        if let Err(report) = run_case(&case, seed) {
            prop_assert!(false, "{}", report);
        }
    }
}

// ---- the tracker's memory -----------------------------------------------------------------------------------------

/// 5,000 short read-write transactions, up to four open at once, some conflicting: the tracker's records stay
/// bounded during the run and drain at the end.
#[test]
fn tracker_memory_stays_bounded_with_overlapping_writers() {
    let (_env, db) = open(50);
    let mut rng = DeterministicRng::stream(50, "tracker");
    let mut open_txns: VecDeque<Leak<Txn>> = VecDeque::new();
    let (mut most, mut committed) = (0usize, 0u32);
    for i in 0..5_000u64 {
        let mut t = begin(&db);
        get(&mut t, &format!("k{}", rng.below(16)));
        put(&mut t, &format!("k{}", rng.below(16)), &format!("v{i}"));
        open_txns.push_back(t);
        if open_txns.len() > 1 + rng.below(4) as usize {
            committed += u32::from(commit(open_txns.pop_front().unwrap()));
        }
        most = most.max(db.conflict_stats().1);
    }
    for t in open_txns {
        committed += u32::from(commit(t));
    }
    let (stats, held) = db.conflict_stats();
    assert!(committed > 1_000, "only {committed} of 5000 committed: {stats:?}");
    assert!(most <= 200, "the tracker held {most} records at once");
    assert!(held < 64, "the tracker still holds {held} records with no transaction open");
}

/// Overlapping readers with no writes in between: a read-only (or read-write that wrote nothing) transaction
/// that finished must be forgotten once no open transaction overlaps it. Here there is always one open.
#[test]
fn tracker_memory_stays_bounded_with_overlapping_readers() {
    let (_env, db) = open_with(51, &[("a", "1")]);
    let mut reader = db.begin_read().unwrap();
    let mut writer = begin(&db);
    let mut most = 0usize;
    for i in 0..5_000u32 {
        let mut next_reader = db.begin_read().unwrap();
        next_reader.get(b"a").unwrap();
        drop(std::mem::replace(&mut reader, next_reader));
        let mut next_writer = begin(&db);
        get(&mut next_writer, "a");
        assert!(commit(std::mem::replace(&mut writer, next_writer)), "a transaction that only read, {i}");
        most = most.max(db.conflict_stats().1);
    }
    drop(reader);
    assert!(commit(writer));
    assert!(most <= 200, "the tracker held {most} records at once (at most 4 transactions ever overlapped)");
    assert!(db.conflict_stats().1 < 64);
}
