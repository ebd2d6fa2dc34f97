//! Reproduces the doctors' write skew on holdfast's engine deterministically in one thread, without the
//! bench harness: Bob's commit is validated but still in flight (appended, not yet synced and visible) when
//! Alice, aborted by the SSI check, retries.
//!
//! `cargo run --release --manifest-path bench/Cargo.toml --example write_skew_inflight`
//! Exit code 1 (and "VIOLATED") when both doctors end up off call.

use engine::{Db, Options, SyncMode};
use env::RealEnv;

const ALICE: &[u8] = b"oncall-alice";
const BOB: &[u8] = b"oncall-bob";

fn on(v: Option<Vec<u8>>) -> bool {
    v.as_deref() == Some(&b"on"[..])
}

fn main() {
    let dir = std::env::temp_dir().join(format!("holdfast-skew-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let db = Db::open(RealEnv::new(), &dir, Options::default().with_sync_mode(SyncMode::Sync)).expect("open");
    let mut t = db.begin().expect("begin");
    t.put(ALICE, b"on").expect("put");
    t.put(BOB, b"on").expect("put");
    t.commit().expect("setup commit");

    let mut bob = db.begin().expect("begin");
    let mut alice = db.begin().expect("begin");
    for t in [&mut bob, &mut alice] {
        assert!(on(t.get(ALICE).expect("get")) && on(t.get(BOB).expect("get")));
    }
    bob.put(BOB, b"off").expect("put");
    let bob_ticket = bob.submit().expect("bob validated").expect("bob wrote");
    println!("bob: validated, in flight (pending commits: {})", db.pending_commits());
    alice.put(ALICE, b"off").expect("put");
    match alice.commit() {
        Err(e) if e.is_conflict() => println!("alice: aborted as expected: {e}"),
        other => println!("alice: first attempt {other:?}"),
    }
    // Alice retries at once, as an application would.
    let mut alice2 = db.begin().expect("begin");
    let pending = db.pending_commits();
    let (a, b) = (alice2.get(ALICE).expect("get"), alice2.get(BOB).expect("get"));
    println!(
        "alice retry: snapshot {} (bob's commit in flight: {}), reads alice={:?} bob={:?}",
        alice2.snapshot().expect("its reads took the snapshot"),
        pending > 0,
        a.as_deref().map(String::from_utf8_lossy),
        b.as_deref().map(String::from_utf8_lossy)
    );
    let mut retry_result = Ok(());
    if on(a) && on(b) {
        alice2.put(ALICE, b"off").expect("put");
        retry_result = alice2.commit();
    } else {
        drop(alice2);
    }
    println!("alice retry commit: {retry_result:?}");
    db.wait_for_commit(&bob_ticket).expect("bob durable");
    let (a, b) = (on(db.get(ALICE).expect("get")), on(db.get(BOB).expect("get")));
    let _ = db.close();
    let _ = std::fs::remove_dir_all(&dir);
    if !a && !b {
        println!("VIOLATED: both doctors are off call");
        std::process::exit(1);
    }
    println!("holds: alice on={a} bob on={b}");
}
