//! Crash durability on SimEnv: every acknowledged write survives; nothing deleted comes back; nothing
//! never-written appears.

use std::collections::BTreeMap;

use engine::{Db, Options};
use env::{DeterministicRng, SimEnv};

fn key(i: u64) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Write 20k keys with deletes through several flushes and a compaction, crash, reopen: every value right.
#[test]
fn twenty_thousand_keys_survive_a_crash() {
    let env = SimEnv::new(20_000);
    let options = Options::default().with_flush_threshold_bytes(64 * 1024);
    let db = Db::open(env.clone(), "/db", options.clone()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..20_000u64 {
        let value = format!("value-{i}").into_bytes();
        db.put(&key(i), &value).unwrap();
        model.insert(key(i), value);
        if i % 5 == 0 {
            db.delete(&key(i / 2)).unwrap();
            model.remove(&key(i / 2));
        }
        if i == 10_000 {
            db.compact().unwrap();
        }
    }
    assert!(db.stats().flush_count >= 3, "{:?}", db.stats());
    env.crash();
    drop(db);
    let db = Db::open(env.clone(), "/db", options).unwrap();
    for i in 0..20_000u64 {
        assert_eq!(db.get(&key(i)).unwrap(), model.get(&key(i)).cloned(), "key {i}");
    }
    db.check_invariants().unwrap();
}

/// Random crash points, including armed crashes inside operations (mid-append, mid-flush, mid-compaction,
/// mid-manifest, during recovery).
#[test]
fn random_crash_points_keep_acknowledged_writes() {
    for seed in 0..40u64 {
        crash_run(seed);
    }
}

fn crash_run(seed: u64) {
    let env = SimEnv::new(seed);
    let mut rng = DeterministicRng::stream(seed, "test");
    let options = Options::default().with_flush_threshold_bytes(1024).with_l0_compaction_trigger(2);
    let mut db = Some(Db::open(env.clone(), "/db", options.clone()).unwrap());
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut written: BTreeMap<Vec<u8>, Vec<Vec<u8>>> = BTreeMap::new();
    for step in 0..400u64 {
        let handle = db.as_ref().unwrap();
        if rng.chance_ppm(30_000) {
            env.crash_at_io(1 + rng.below(12));
        }
        let k = key(rng.below(40));
        let outcome = match rng.below(10) {
            0..=5 => {
                let v = format!("v{seed}-{step}").into_bytes();
                written.entry(k.clone()).or_default().push(v.clone());
                handle.put(&k, &v).map(|()| Some((k.clone(), Some(v))))
            }
            6 | 7 => handle.delete(&k).map(|()| Some((k.clone(), None))),
            8 => handle.flush().map(|()| None),
            _ => {
                env.run_tasks(4);
                Ok(None)
            }
        };
        match outcome {
            Ok(Some((k, Some(v)))) => {
                model.insert(k, v);
            }
            Ok(Some((k, None))) => {
                model.remove(&k);
            }
            Ok(None) => {}
            Err(error) => {
                assert!(error.is_crash(), "seed {seed} step {step}: unexpected {error}");
                // The in-flight write may or may not have survived: accept either, wholly.
                drop(db.take());
                env.restart();
                let reopened = reopen_through_crashes(&env, &options, &mut rng);
                let actual = reopened.get(&k).unwrap();
                let before = model.get(&k).cloned();
                let is_new = actual.is_some() && written[&k].last() == actual.as_ref();
                assert!(actual == before || is_new || actual.is_none(), "seed {seed}: {k:?} = {actual:?}");
                match actual {
                    Some(v) => model.insert(k.clone(), v),
                    None => model.remove(&k),
                };
                db = Some(reopened);
            }
        }
        if rng.chance_ppm(20_000) {
            env.crash();
            drop(db.take());
            db = Some(reopen_through_crashes(&env, &options, &mut rng));
            verify(db.as_ref().unwrap(), &model, &written, seed);
        }
        env.disarm_crash();
    }
    verify(db.as_ref().unwrap(), &model, &written, seed);
}

fn reopen_through_crashes(env: &SimEnv, options: &Options, rng: &mut DeterministicRng) -> Db<SimEnv> {
    for _ in 0..8 {
        if rng.chance_ppm(300_000) {
            env.crash_at_io(1 + rng.below(10));
        }
        match Db::open(env.clone(), "/db", options.clone()) {
            Ok(db) => {
                env.disarm_crash();
                return db;
            }
            Err(error) => {
                assert!(error.is_crash(), "recovery failed without a crash: {error}");
                env.restart();
            }
        }
    }
    Db::open(env.clone(), "/db", options.clone()).expect("recovery without faults")
}

fn verify(db: &Db<SimEnv>, model: &BTreeMap<Vec<u8>, Vec<u8>>, written: &BTreeMap<Vec<u8>, Vec<Vec<u8>>>, seed: u64) {
    for i in 0..40 {
        let k = key(i);
        let actual = db.get(&k).unwrap();
        assert_eq!(actual, model.get(&k).cloned(), "seed {seed}: key {i}");
        if let Some(v) = &actual {
            assert!(written[&k].contains(v), "never-written value");
        }
    }
    db.check_invariants().unwrap();
}
