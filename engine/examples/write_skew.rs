//! Write skew on real threads: the on-call doctors.
//!
//! Alice and Bob are both on call; at least one must stay on call. Two transactions are begun (on the main thread,
//! so both snapshots are taken before either commits); each then runs on its own thread (`env.spawn`): it reads
//! both doctors and, seeing both on call, takes its own doctor off call and commits. Under snapshot isolation both
//! would commit (write skew); under serializable isolation one of them aborts with a conflict.
//!
//! Prints which transaction committed and which aborted, then `held` if at most one doctor went off call
//! (otherwise `VIOLATED`, exit status 1).
//!
//! ```text
//! cargo run -p engine --example write_skew
//! ```

use std::sync::{Arc, Mutex};

use engine::{Db, Options, Transaction};
use env::{Env, RealEnv, TaskStep};

/// One doctor's transaction: read both, go off call if both are on call, commit. Returns a line to print.
fn go_off_call(mut txn: Transaction<RealEnv>, me: &str) -> String {
    let run = |txn: &mut Transaction<RealEnv>| -> Result<bool, engine::Error> {
        let alice = txn.get(b"alice")?;
        let bob = txn.get(b"bob")?;
        let both_on = alice.as_deref() == Some(b"on") && bob.as_deref() == Some(b"on");
        if both_on {
            txn.put(me.as_bytes(), b"off")?;
        }
        Ok(both_on)
    };
    match run(&mut txn) {
        Ok(false) => format!("{me}: the other doctor is already off call; stays on call"),
        Ok(true) => match txn.commit() {
            Ok(()) => format!("{me}: went off call, committed"),
            Err(error) if error.is_conflict() => format!("{me}: aborted ({error})"),
            Err(error) => format!("{me}: commit failed: {error}"),
        },
        Err(error) if error.is_conflict() => format!("{me}: aborted before commit ({error})"),
        Err(error) => format!("{me}: failed: {error}"),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let env = RealEnv::new();
    // A fresh scratch directory, removed with everything in it when `scratch` drops.
    let scratch = env.temp_dir("write-skew")?;
    let dir = scratch.path().to_path_buf();
    let db = Db::open(env.clone(), &dir, Options::default())?;
    let mut setup = db.begin()?;
    setup.put(b"alice", b"on")?;
    setup.put(b"bob", b"on")?;
    setup.commit()?;

    // Both begin before either commits: their snapshots both show two doctors on call.
    let transactions = [("alice", db.begin()?), ("bob", db.begin()?)];
    let lines: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for (me, txn) in transactions {
        let mut txn = Some(txn);
        let lines = Arc::clone(&lines);
        let task = Box::new(move || {
            if let Some(txn) = txn.take() {
                let line = go_off_call(txn, me);
                lines.lock().expect("lines lock").push(line);
            }
            TaskStep::Done
        });
        handles.push(env.spawn(&format!("doctor-{me}"), task));
    }
    for handle in &handles {
        env.wait(handle)?;
    }
    for line in lines.lock().expect("lines lock").iter() {
        println!("{line}");
    }
    let off: Vec<&str> = ["alice", "bob"]
        .into_iter()
        .filter(|d| db.get(d.as_bytes()).ok().flatten().as_deref() == Some(b"off"))
        .collect();
    println!("off call: {off:?}");
    db.close()?;
    drop(db);
    drop(scratch);
    if off.len() <= 1 {
        println!("held");
        Ok(())
    } else {
        println!("VIOLATED");
        std::process::exit(1);
    }
}
