//! A serialization failure reaches the caller as data: `Error::Conflict { cause }` with the cause's variant and
//! key, matched on the value (never on the message). Each test drives real transactions through `Db` on SimEnv.

use engine::{ConflictCause, Db, Error, Options, READS_BUFFERED_MAX};
use env::SimEnv;

fn open_with(seed: u64, rows: &[(&str, &str)]) -> Db<SimEnv> {
    let db = Db::open(SimEnv::new(seed), "/db", Options::default()).unwrap();
    let mut t = crate::begun(&db);
    for (k, v) in rows {
        t.put(k.as_bytes(), v.as_bytes()).unwrap();
    }
    t.commit().unwrap();
    db
}

/// The cause of a conflict error; anything else fails the test.
fn cause_of(error: Error) -> ConflictCause {
    match error {
        Error::Conflict { cause } => cause,
        other => panic!("expected a serialization conflict, got {other:?}"),
    }
}

/// Two blind writers of x: the second to commit loses to the first (first committer wins), on x.
#[test]
fn write_write_conflict_is_a_write_write_cause_on_the_key() {
    let db = open_with(61, &[("x", "0")]);
    let (mut t1, mut t2) = (crate::begun(&db), crate::begun(&db));
    t1.put(b"x", b"1").unwrap();
    t2.put(b"a", b"2").unwrap();
    t2.put(b"x", b"2").unwrap();
    t1.commit().unwrap();
    let cause = cause_of(t2.commit().unwrap_err());
    assert!(matches!(&cause, ConflictCause::WriteWrite { key } if key == b"x"), "{cause:?}");
    assert_eq!((cause.name(), cause.key()), ("ww", Some(&b"x"[..])));
}

/// A commit that loses to a writer whose commit is still in flight (appended, not yet synced) returns its conflict
/// only once that writer is visible: the retry then reads the winner's value instead of losing to it again.
#[test]
fn a_lost_commit_returns_once_the_winner_in_flight_is_visible() {
    let db = open_with(62, &[("x", "0")]);
    let (mut t1, mut t2) = (crate::begun(&db), crate::begun(&db));
    t1.put(b"x", b"1").unwrap();
    t2.put(b"x", b"2").unwrap();
    let ticket = t1.submit().unwrap().expect("a write commits");
    assert!(db.last_sequence() < ticket.last_sequence, "the winner is in flight: appended, not acknowledged");
    let cause = cause_of(t2.commit().unwrap_err());
    assert!(matches!(&cause, ConflictCause::WriteWrite { key } if key == b"x"), "{cause:?}");
    assert!(db.last_sequence() >= ticket.last_sequence, "the loser returned before the winner was visible");
    let mut retry = crate::begun(&db);
    assert_eq!(retry.get(b"x").unwrap(), Some(b"1".to_vec()), "the retry reads the winner");
    retry.put(b"x", b"2").unwrap();
    retry.commit().unwrap();
}

/// Write skew (the on-call doctors): both read both rows, each takes itself off call. The second committer closes
/// a dangerous structure through its write of bob, which the first had read.
#[test]
fn write_skew_is_a_dangerous_structure_cause_on_the_key() {
    let db = open_with(62, &[("alice", "on"), ("bob", "on")]);
    let (mut t1, mut t2) = (crate::begun(&db), crate::begun(&db));
    for t in [&mut t1, &mut t2] {
        assert_eq!(t.get(b"alice").unwrap(), Some(b"on".to_vec()));
        assert_eq!(t.get(b"bob").unwrap(), Some(b"on".to_vec()));
    }
    t1.put(b"alice", b"off").unwrap();
    t2.put(b"bob", b"off").unwrap();
    t1.commit().unwrap();
    let cause = cause_of(t2.commit().unwrap_err());
    assert_eq!(cause, ConflictCause::DangerousStructure { key: b"bob".to_vec() });
    assert_eq!((cause.name(), cause.key()), ("dangerous", Some(&b"bob"[..])));
}

/// T0, T1 and T2 begin; T1 reads z, which T0 then overwrites and commits (T1 → T0); T1 writes y and commits.
/// Returns T2, open since before both: a read of y by it closes T2 → T1 → T0.
fn t1_read_z_t0_overwrote_it_t1_wrote_y(db: &Db<SimEnv>) -> engine::Transaction<SimEnv> {
    let (mut t0, mut t1, t2) = (crate::begun(db), crate::begun(db), crate::begun(db));
    assert_eq!(t1.get(b"z").unwrap(), Some(b"0".to_vec()));
    t0.put(b"z", b"1").unwrap();
    t0.commit().unwrap();
    t1.put(b"y", b"1").unwrap();
    t1.commit().unwrap();
    t2
}

/// T1 read z, which T0 then overwrote and committed (T1 → T0); T1 wrote y and committed. T2, open since before
/// both, reads y and misses T1's version: T2 → T1 → T0 with T0 first, and T2 is the only one left to abort. The
/// read is buffered (ADR-0195) and registered at T2's commit, which fails with an rw cause on y.
#[test]
fn a_read_closing_a_dangerous_structure_is_an_rw_cause_on_the_key() {
    let db = open_with(63, &[("y", "0"), ("z", "0")]);
    let mut t2 = t1_read_z_t0_overwrote_it_t1_wrote_y(&db);
    assert_eq!(t2.get(b"y").unwrap(), Some(b"0".to_vec()), "the snapshot's version");
    let cause = cause_of(t2.commit().unwrap_err());
    assert_eq!(cause, ConflictCause::ReadWrite { key: b"y".to_vec() });
    assert_eq!((cause.name(), cause.key()), ("rw", Some(&b"y"[..])));
}

/// The same structure, with T2's read of y buffered among others (ADR-0195): the read that fills the buffer
/// registers them all in one take and fails with the rw cause on y, and T2 is over (a later call says it ended).
#[test]
fn the_read_that_fills_the_buffer_reports_a_structure_an_earlier_read_closed() {
    let db = open_with(65, &[("y", "0"), ("z", "0")]);
    let mut t2 = t1_read_z_t0_overwrote_it_t1_wrote_y(&db);
    assert_eq!(t2.get(b"y").unwrap(), Some(b"0".to_vec()), "buffered: the snapshot's version, no conflict yet");
    for other in 1..READS_BUFFERED_MAX - 1 {
        assert_eq!(t2.get(format!("absent-{other}").as_bytes()).unwrap(), None, "read {other} is buffered");
    }
    let cause = cause_of(t2.get(b"absent-last").unwrap_err());
    assert_eq!(cause, ConflictCause::ReadWrite { key: b"y".to_vec() });
    assert!(matches!(t2.get(b"y"), Err(Error::InvalidArgument { .. })), "the transaction ended at the conflict");
}

/// The same structure closed by a scan: the cause names the start of the scanned range.
#[test]
fn a_scan_closing_a_dangerous_structure_is_an_rw_cause_on_the_range_start() {
    let db = open_with(64, &[("y", "0"), ("z", "0")]);
    let mut t2 = t1_read_z_t0_overwrote_it_t1_wrote_y(&db);
    // The scan registers its range once it has read it all: the conflict is its last item (ADR-0085).
    let error = t2.scan(&b"w"[..]..&b"z"[..]).unwrap().collect::<Result<Vec<_>, _>>().unwrap_err();
    assert_eq!(cause_of(error), ConflictCause::ReadWrite { key: b"w".to_vec() });
}

/// Fekete's read-only anomaly with the reader open before the writer commits: T2 read x and y, T1 overwrote y and
/// committed, a read-only T3 sees T1. T2's commit trips the read-only guard, on y (the key behind its rw edge).
#[test]
fn the_read_only_guard_is_its_own_cause_on_the_key() {
    let db = open_with(65, &[("x", "0"), ("y", "0")]);
    let mut t2 = crate::begun(&db);
    t2.get(b"x").unwrap();
    t2.get(b"y").unwrap();
    let mut t1 = crate::begun(&db);
    t1.get(b"y").unwrap();
    t1.put(b"y", b"20").unwrap();
    t1.commit().unwrap();
    let t3 = db.begin_read().unwrap();
    t2.put(b"x", b"-11").unwrap();
    let cause = cause_of(t2.commit().unwrap_err());
    drop(t3);
    assert_eq!(cause, ConflictCause::ReadOnlyGuard { key: b"y".to_vec() });
    assert_eq!((cause.name(), cause.key()), ("read_only_guard", Some(&b"y"[..])));
}
