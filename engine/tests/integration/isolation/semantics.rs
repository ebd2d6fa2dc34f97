//! What must commit, the plain transaction semantics, and streaming scans (ADR-0085).

use std::ops::Bound;

use super::*;

// ---- what must commit --------------------------------------------------------------------------------------------

/// ADR-0210: `begin` takes no snapshot; the first read does, so it sees every commit visible by then.
#[test]
fn a_transaction_takes_its_snapshot_at_its_first_read() {
    let (_env, db) = open_with(28, &[("x", "0")]);
    let mut late = db.begin().unwrap();
    assert_eq!(late.snapshot(), None);
    late.put(b"y", b"1").unwrap();
    assert_eq!(late.snapshot(), None, "a write takes no snapshot");
    db.put(b"x", b"1").unwrap();
    let committed = db.last_sequence();
    assert_eq!(late.get(b"x").unwrap(), some("1"), "the commit before the first read is in its snapshot");
    assert_eq!(late.snapshot(), Some(committed));
    db.put(b"x", b"2").unwrap();
    assert_eq!(late.get(b"x").unwrap(), some("1"), "and the one after it is not");
    late.commit().unwrap();
    let mut pinned = db.begin().unwrap();
    let snapshot = pinned.take_snapshot().unwrap();
    db.put(b"x", b"3").unwrap();
    assert_eq!((pinned.get(b"x").unwrap(), pinned.snapshot()), (some("2"), Some(snapshot)));
    pinned.rollback();
}

/// ADR-0210: transactions that only write take no snapshot, so neither loses to the other (as blind writes never
/// do): both commit, in commit order, and the state is wholly the later one's (no write cycle: G0 stays
/// prevented). Once one takes its snapshot before the other commits, first committer wins again.
#[test]
fn transactions_that_only_write_serialize_in_commit_order() {
    let (_env, db) = open_with(29, &[("x", "10"), ("y", "20")]);
    let (mut t1, mut t2) = (db.begin().unwrap(), db.begin().unwrap());
    for (txn, x, y) in [(&mut t1, b"11", b"21"), (&mut t2, b"12", b"22")] {
        txn.put(b"x", x).unwrap();
        txn.put(b"y", y).unwrap();
    }
    t2.commit().unwrap();
    t1.commit().unwrap();
    assert_eq!((latest(&db, "x"), latest(&db, "y")), (Some("11".into()), Some("21".into())));
    let (mut t3, mut t4) = (db.begin().unwrap(), db.begin().unwrap());
    t4.take_snapshot().unwrap();
    t3.put(b"x", b"13").unwrap();
    t4.put(b"x", b"14").unwrap();
    t3.commit().unwrap();
    let lost = t4.commit().unwrap_err();
    assert!(matches!(lost, Error::Conflict { cause: engine::ConflictCause::WriteWrite { .. } }), "{lost:?}");
    assert_eq!(latest(&db, "x"), Some("13".into()));
}

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
    let mut t = crate::begun(&db);
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
        let mut t = crate::begun(&db);
        t.put(b"a", b"2").unwrap();
        t.put(b"b", b"2").unwrap();
        t.delete(b"a").unwrap();
        assert_eq!(t.get(b"b").unwrap(), some("2"));
    }
    let mut t = crate::begun(&db);
    t.put(b"c", b"3").unwrap();
    t.rollback();
    assert_eq!(db.conflict_stats().1, before, "rolled-back transactions left records in the tracker");
    assert_eq!(db.pending_commits(), 0);
    assert_eq!(latest(&db, "a").as_deref(), Some("1"));
    assert_eq!(latest(&db, "b"), None);
    assert_eq!(latest(&db, "c"), None);
    // A writer of the same keys afterwards commits: nothing of the rolled-back ones conflicts.
    let mut t = crate::begun(&db);
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
    let mut t = crate::begun(&db);
    let mut r = db.begin_read().unwrap();
    let expected: Rows = (0..50).map(|i| (format!("k{i:02}").into_bytes(), b"old".to_vec())).collect();
    for round in 0..5 {
        for i in 0..50 {
            let mut w = crate::begun(&db);
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
    let mut t = crate::begun(&db);
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
    let mut t1 = crate::begun(&db);
    let mut t2 = crate::begun(&db);
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
        let (mut t0, mut t1, mut t2) = (crate::begun(&db), crate::begun(&db), crate::begun(&db));
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
    let mut t = crate::begun(&db);
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
