//! Deterministic threads (ADR-0104): `env::thread::spawn` and `env::sync` on `SimEnv` and `RealEnv`.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;

use env::sync::{Condvar, Mutex, mpsc};
use env::thread::ThreadFailure;
use env::{Env, File, OpenOptions, RealEnv, SimEnv};

/// Two workers and the main thread append their names to one log, each at its own yield points; the order is
/// the schedule the seed chose.
fn interleaving<E: Env>(env: &E) -> Vec<String> {
    let log = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|name| {
            let log = Arc::clone(&log);
            env::thread::spawn(env, name, move || {
                for round in 0..8 {
                    log.lock().expect("log").push(format!("{name}{round}"));
                }
            })
        })
        .collect();
    for round in 0..8 {
        log.lock().expect("log").push(format!("m{round}"));
    }
    for worker in workers {
        worker.join().expect("no panic");
    }
    log.lock().expect("log").clone()
}

#[test]
fn a_seed_fixes_the_interleaving_and_different_seeds_explore_others() {
    let first = interleaving(&SimEnv::new(7));
    assert_eq!(first.len(), 24);
    assert_eq!(first, interleaving(&SimEnv::new(7)), "the same seed, the same schedule");
    let others: std::collections::BTreeSet<Vec<String>> = (0..8).map(|seed| interleaving(&SimEnv::new(seed))).collect();
    assert!(others.len() >= 4, "8 seeds gave only {} interleavings", others.len());
    assert_eq!(interleaving(&RealEnv::new()).len(), 24, "RealEnv runs the same code on std's threads");
}

#[test]
fn a_worker_doing_io_replays_exactly() {
    let run = |seed| {
        let sim = SimEnv::new(seed);
        sim.create_dir_all(Path::new("/d")).expect("mkdir");
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        let writer_env = sim.clone();
        let writer = env::thread::spawn(&sim, "log-writer", move || {
            let log = writer_env.open(Path::new("/d/log"), OpenOptions::create_truncate()).expect("open");
            for record in rx.iter() {
                log.append(&record).expect("append");
                log.sync().expect("sync");
            }
        });
        for index in 0..16u8 {
            tx.send(vec![index; 3]).expect("the writer is alive");
            let clock = sim.now(); // a yield point of the main thread, racing the writer
            assert!(clock.as_nanos() < 1_000_000_000);
        }
        drop(tx);
        writer.join().expect("no panic");
        assert_eq!(sim.read_current(Path::new("/d/log")).expect("written").len(), 48);
        (sim.disk_digest(), sim.work_done())
    };
    assert_eq!(run(3), run(3));
}

#[test]
fn a_deadlock_between_two_sync_users_names_every_blocking_point() {
    let sim = SimEnv::new(11);
    let locks = Arc::new((Mutex::new(()), Mutex::new(())));
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let first = {
        let locks = Arc::clone(&locks);
        env::thread::spawn(&sim, "first", move || {
            let _a = locks.0.lock().expect("a");
            ready_tx.send(()).expect("second waits");
            go_rx.recv().expect("second signals");
            let _b = locks.1.lock().expect("b"); // second holds b and wants a
        })
    };
    let second = {
        let locks = Arc::clone(&locks);
        env::thread::spawn(&sim, "second", move || {
            let _b = locks.1.lock().expect("b");
            ready_rx.recv().expect("first holds a");
            go_tx.send(()).expect("first waits");
            let _a = locks.0.lock().expect("a"); // first holds a and wants b
        })
    };
    let payload = catch_unwind(AssertUnwindSafe(|| first.join())).expect_err("a deadlock fails the run");
    let failure = payload.downcast_ref::<ThreadFailure>().expect("a ThreadFailure payload").clone();
    let ThreadFailure::Deadlock { blocked } = &failure else { panic!("not a deadlock: {failure}") };
    let names: Vec<(&str, &str)> = blocked.iter().map(|b| (b.thread.as_str(), b.operation)).collect();
    assert_eq!(names, [("main", "JoinHandle::join"), ("first", "Mutex::lock"), ("second", "Mutex::lock")]);
    assert!(blocked.iter().all(|b| b.location.starts_with("env/tests/integration/threads.rs:")), "{failure}");
    assert_eq!(sim.thread_failure(), Some(failure.clone()));
    assert!(
        failure.to_string().starts_with("deadlock: no thread can run; thread 'main' blocks in JoinHandle::join at")
    );
    drop(second); // its OS thread unwound when the run failed
}

#[test]
fn a_panic_on_a_worker_is_the_failure_with_its_thread_and_message() {
    let sim = SimEnv::new(5);
    let state = Arc::new((Mutex::new(false), Condvar::new()));
    let payload = catch_unwind(AssertUnwindSafe(|| {
        let shared = Arc::clone(&state);
        let _worker = env::thread::spawn(&sim, "checkpointer", move || {
            let ready = shared.0.lock().expect("lock");
            assert!(*ready, "checkpoint started before the store was ready");
        });
        let guard = state.0.lock().expect("lock");
        drop(state.1.wait_while(guard, |ready| !*ready).expect("never notified: the worker panics first"));
    }))
    .expect_err("the worker's panic fails the run");
    let failure = payload.downcast_ref::<ThreadFailure>().expect("a ThreadFailure payload");
    let expected = ThreadFailure::Panicked {
        thread: "checkpointer".into(),
        message: "checkpoint started before the store was ready".into(),
    };
    let text = "thread 'checkpointer' panicked: checkpoint started before the store was ready";
    assert_eq!((failure, failure.to_string().as_str()), (&expected, text));
    assert_eq!(sim.thread_failure().as_ref(), Some(&expected));
}

#[test]
#[expect(clippy::disallowed_methods, reason = "the test starts a thread the simulator does not know, on purpose")]
fn a_std_thread_driving_a_sim_env_is_refused_with_the_fix() {
    let sim = SimEnv::new(1);
    let _ = sim.now(); // the main thread drives it
    let other = sim.clone();
    let outcome = std::thread::Builder::new().name("rogue".into()).spawn(move || other.now()).expect("spawn").join();
    let payload = outcome.expect_err("the world refuses the rogue thread");
    let message = payload.downcast_ref::<String>().expect("a formatted message");
    assert!(message.contains("second OS thread (rogue)") && message.contains("env::thread::spawn"), "{message}");
}
