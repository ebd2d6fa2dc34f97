//! The doctors' write skew: Alice and Bob are both on call; each, in one transaction, reads both on-call
//! flags and, seeing two doctors on call, takes itself off. Run serially, one of them stays on call.
//! Under snapshot isolation both commit and nobody is on call: VIOLATED.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::Row;
use crate::backend::{BErr, EngineSpec};

const FLAGS: [&[u8; 16]; 2] = [b"oncall-alice....", b"oncall-bob......"];
/// How long each transaction waits, between its reads and its write, for the other to have read too.
const RENDEZVOUS: Duration = Duration::from_millis(1500);

pub fn doctors(spec: &EngineSpec, data_dir: &Path) -> Row {
    let synced = true;
    let mut row = Row {
        engine: spec.name.into(),
        workload: "write-skew".into(),
        threads: 2,
        synced_per_commit: synced,
        ..Row::default()
    };
    let dir = data_dir.join(format!("skew-{}", spec.name.replace([' ', '(', ')'], "_")));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    let b = match (spec.open)(&dir, synced) {
        Ok(b) => b,
        Err(e) => {
            row.error = Some(format!("open failed: {e:?}"));
            return row;
        }
    };
    let setup = crate::workloads::retry_txn(b.as_ref(), &mut |t| {
        t.put(FLAGS[0], b"on")?;
        t.put(FLAGS[1], b"on")
    });
    if let Err(e) = setup {
        row.error = Some(e);
        return row;
    }
    let read_done = [AtomicBool::new(false), AtomicBool::new(false)];
    let outcomes: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|me| {
                let (b, read_done) = (&b, &read_done);
                s.spawn(move || {
                    let mut log = Vec::new();
                    let mut calls = 0;
                    for attempt in 0..10u64 {
                        let mut wrote = false;
                        let r = b.txn(&mut |t| {
                            calls += 1;
                            wrote = false;
                            let a = t.get(FLAGS[0])?;
                            let c = t.get(FLAGS[1])?;
                            if calls == 1 {
                                read_done[me].store(true, Ordering::Release);
                                let t0 = Instant::now();
                                while !read_done[1 - me].load(Ordering::Acquire) && t0.elapsed() < RENDEZVOUS {
                                    std::thread::sleep(Duration::from_millis(1));
                                }
                            }
                            let on = [a, c].iter().filter(|v| v.as_deref() == Some(&b"on"[..])).count();
                            if on == 2 {
                                t.put(FLAGS[me], b"off")?;
                                wrote = true;
                            }
                            Ok(())
                        });
                        match r {
                            Ok(_) => {
                                log.push(if wrote {
                                    "committed off".to_string()
                                } else {
                                    "committed, stayed on".into()
                                });
                                break;
                            }
                            Err(BErr::Conflict(e)) => {
                                let e: String = e.chars().take(60).collect();
                                log.push(format!("aborted ({e})"));
                                read_done[me].store(true, Ordering::Release);
                                // Back off like an application would: the winner's commit may still be in flight.
                                std::thread::sleep(Duration::from_millis(2 << attempt.min(6)));
                            }
                            Err(BErr::Other(e)) => {
                                log.push(format!("error ({e})"));
                                break;
                            }
                        }
                    }
                    log.join(" then ")
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| "panicked".into())).collect()
    });
    let final_on: Vec<bool> = FLAGS.iter().map(|k| matches!(b.get(&k[..]), Ok(Some(v)) if v == b"on")).collect();
    let on_call = final_on.iter().filter(|x| **x).count();
    row.outcome = Some(if on_call == 0 { "VIOLATED".into() } else { "holds".into() });
    row.detail = Some(format!("alice: {}; bob: {}; doctors left on call: {on_call}", outcomes[0], outcomes[1]));
    drop(b);
    let _ = std::fs::remove_dir_all(&dir);
    row
}
