//! Model test: random put/delete/get/flush/compact sequences against a `BTreeMap`.

use std::collections::BTreeMap;

use engine::{Db, Options};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Put(u8, u16),
    Delete(u8),
    Get(u8),
    Scan(u8, u8),
    Flush,
    Compact,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<u8>(), any::<u16>()).prop_map(|(k, v)| Op::Put(k % 64, v)),
        2 => any::<u8>().prop_map(|k| Op::Delete(k % 64)),
        3 => any::<u8>().prop_map(|k| Op::Get(k % 64)),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::Scan(a % 64, b % 64)),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
    ]
}

fn key(k: u8) -> Vec<u8> {
    format!("key{k:03}").into_bytes()
}

fn value(k: u8, v: u16) -> Vec<u8> {
    format!("value-{k}-{v}-{}", "x".repeat(usize::from(v % 50))).into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn engine_matches_btreemap(ops in proptest::collection::vec(op(), 1..160), seed in any::<u64>()) {
        let env = env::SimEnv::new(seed);
        let options = Options::default().with_flush_threshold_bytes(2048).with_l0_compaction_trigger(2);
        let mut db = Db::open(env.clone(), "/db", options.clone()).unwrap();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    db.put(&key(k), &value(k, v)).unwrap();
                    model.insert(key(k), value(k, v));
                }
                Op::Delete(k) => {
                    db.delete(&key(k)).unwrap();
                    model.remove(&key(k));
                }
                Op::Get(k) => prop_assert_eq!(db.get(&key(k)).unwrap(), model.get(&key(k)).cloned()),
                Op::Scan(a, b) => {
                    let (low, high) = (key(a.min(b)), key(a.max(b)));
                    let expected: Vec<(Vec<u8>, Vec<u8>)> =
                        model.range(low.clone()..high.clone()).map(|(k, v)| (k.clone(), v.clone())).collect();
                    let scanned = db.scan(low.as_slice()..high.as_slice()).unwrap().collect::<Result<Vec<_>, _>>().unwrap();
                    prop_assert_eq!(scanned, expected);
                }
                Op::Flush => {
                    let before = db.stats();
                    db.flush().unwrap();
                    let after = db.stats();
                    prop_assert_eq!(after.memtable_bytes, 0);
                    if before.memtable_bytes > 0 {
                        // The flush really wrote a table.
                        prop_assert!(after.flush_count > before.flush_count, "{:?}", after);
                    }
                }
                Op::Compact => {
                    db.compact().unwrap();
                    let stats = db.stats();
                    prop_assert!(stats.tables_per_level[..3].iter().all(|&n| n == 0), "{:?}", stats);
                    if stats.tables_per_level[3] > 0 {
                        // Everything now sits in the last level: the compaction really ran.
                        prop_assert!(stats.compaction_count > 0, "{:?}", stats);
                    }
                }
                Op::Reopen => {
                    db.close().unwrap();
                    drop(db);
                    db = Db::open(env.clone(), "/db", options.clone()).unwrap();
                }
            }
            prop_assert_eq!(db.check_invariants(), Ok(()));
        }
        for (k, v) in &model {
            prop_assert_eq!(db.get(k).unwrap(), Some(v.clone()));
        }
    }
}

#[test]
fn flushes_and_compactions_reach_sstables() {
    let env = env::SimEnv::new(3);
    let options = Options::default().with_flush_threshold_bytes(4096).with_l0_compaction_trigger(3);
    let db = Db::open(env.clone(), "/db", options).unwrap();
    for i in 0..2000u32 {
        db.put(format!("k{:05}", i % 700).as_bytes(), format!("v{i}").as_bytes()).unwrap();
        if i % 7 == 0 {
            db.delete(format!("k{:05}", (i * 3) % 700).as_bytes()).unwrap();
        }
        env.run_tasks(8);
    }
    let stats = db.stats();
    assert!(stats.flush_count >= 10, "{stats:?}");
    assert!(stats.compaction_count >= 2, "{stats:?}");
    assert!(stats.tables_per_level[1..].iter().sum::<usize>() >= 1, "{stats:?}");
    db.check_invariants().unwrap();
    let sst_files = env.files().iter().filter(|f| f.path.to_string_lossy().ends_with(".sst")).count();
    assert_eq!(sst_files, stats.tables_per_level.iter().sum::<usize>());
}
