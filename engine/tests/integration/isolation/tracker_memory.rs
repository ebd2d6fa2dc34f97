//! The conflict tracker's memory stays bounded.

use std::collections::VecDeque;

use super::*;

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
