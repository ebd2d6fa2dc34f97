//! Compaction's GC watermark against the snapshots readers may still take (ADR-0016, ADR-0025, ADR-0093).

use engine::{Db, Options};
use env::SimEnv;

fn value(text: &str) -> Option<Vec<u8>> {
    Some(text.as_bytes().to_vec())
}

/// The txn target's seed 37979 through the API (ADR-0093). Pivot T4 → T2 (T2 committed first) makes `[2, 5)`
/// unsafe for readers; T4 is visible, so its snapshot is released. T5, open at snapshot 3 across a full
/// compaction, then forms a second pivot `T5 → T3` in flight (span `[4, 6)`). A reader beginning at visible 5
/// steps to 3 and on to 1. Compaction must have kept what snapshot 1 reads, `k2 = v66`, though no registered
/// snapshot was as old as 1 when it ran.
#[test]
fn compaction_keeps_what_a_reader_stepping_back_through_a_visible_pivot_reads() {
    let db = Db::open(SimEnv::new(37979), "/db", Options::default()).unwrap();
    db.put(b"k2", b"v66").unwrap();
    let (mut t2, mut t3, mut t4) = (crate::begun(&db), crate::begun(&db), crate::begun(&db));
    assert_eq!([t2.snapshot(), t3.snapshot(), t4.snapshot()], [Some(1); 3]);
    t2.put(b"k2", b"v111").unwrap();
    t2.put(b"k0", b"v112").unwrap();
    t2.commit().unwrap();
    let mut t5 = crate::begun(&db);
    assert_eq!(t5.snapshot(), Some(3), "T2 took sequences 2 and 3");
    t3.delete(b"k3").unwrap();
    t3.commit().unwrap();
    assert_eq!(t4.get(b"k0").unwrap(), None, "T4 reads below T2: the edge T4 -rw-> T2");
    t4.put(b"k4", b"v119").unwrap();
    t4.commit().unwrap();
    assert_eq!(db.last_sequence(), 5, "T4 is visible: its snapshot 1 is no longer registered");
    assert_eq!(t5.get(b"k3").unwrap(), None, "T5 reads below T3: the edge T5 -rw-> T3");
    t5.put(b"k1", b"v122").unwrap();
    db.compact().unwrap();
    let ticket = t5.submit().unwrap().expect("T5 wrote");
    assert_eq!(db.last_sequence(), 5, "T5 is in flight");
    let mut reader = db.begin_read().unwrap();
    assert_eq!(reader.snapshot(), 1, "[4, 6) holds 5, then [2, 5) holds 3");
    let seen = (reader.get(b"k2").unwrap(), reader.get(b"k0").unwrap());
    let scanned: Vec<(Vec<u8>, Vec<u8>)> =
        reader.scan(b"k2".as_slice()..b"k3".as_slice()).unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(seen, (value("v66"), None), "snapshot 1 sees T1's k2 and not T2");
    assert_eq!(scanned, vec![(b"k2".to_vec(), b"v66".to_vec())]);
    drop(reader);
    db.wait_for_commit(&ticket).unwrap();
    let mut latest = db.begin_read().unwrap();
    assert_eq!((latest.snapshot(), latest.get(b"k2").unwrap()), (6, value("v111")));
}
