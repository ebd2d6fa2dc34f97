#![expect(clippy::disallowed_methods, reason = "foreign threads are OS threads the test starts itself (ADR-0165)")]

use std::panic::{AssertUnwindSafe, Location, catch_unwind};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::Env;
use crate::thread::{BlockedThread, ThreadFailure};

/// The most yields a test's main thread makes while it waits for its threads to reach a point.
const TEST_YIELDS_MAX: usize = 10_000;

type Log = Arc<Mutex<Vec<String>>>;

fn push(log: &Log, entry: String) {
    log.lock().expect("log").push(entry);
}

/// Start a foreign thread of `sim`'s world: registered now, run on a new OS thread, then the caller yields.
fn start(sim: &SimEnv, name: &str, body: impl FnOnce() + Send + 'static) -> (usize, std::thread::JoinHandle<bool>) {
    let member = register(sim, name);
    let index = member.index();
    let os = std::thread::spawn(move || run(member, body));
    current().expect("the caller is the world's main thread now").yield_now();
    (index, os)
}

fn join_all(threads: Vec<(usize, std::thread::JoinHandle<bool>)>) {
    let main = current().expect("main");
    for (index, os) in threads {
        main.join(index, "pthread_join");
        assert!(os.join().expect("the OS thread ends"), "thread {index} ran");
    }
}

#[test]
fn the_caller_becomes_main_and_foreign_threads_block_and_wake_on_an_address_in_fifo_order() {
    let sim = SimEnv::new(5);
    let log: Log = Arc::default();
    let address = 0x1000;
    let threads: Vec<_> = (0..3)
        .map(|id| {
            let log = Arc::clone(&log);
            start(&sim, &format!("t{id}"), move || {
                let me = current().expect("a world thread");
                push(&log, format!("blocked t{id}"));
                let wake = me.block(address, "futex wait", Location::caller(), None);
                assert_eq!(wake, Wake::Woken);
                push(&log, format!("woke t{id}"));
            })
        })
        .collect();
    let main = current().expect("main");
    assert!(main.is_main() && main.is_of(&sim));
    let blocked = |log: &Log| log.lock().expect("log").iter().filter(|e| e.starts_with("blocked")).count();
    for _ in 0..TEST_YIELDS_MAX {
        if blocked(&log) == 3 {
            break;
        }
        main.yield_now();
    }
    assert_eq!(blocked(&log), 3, "every thread reached its block");
    let order: Vec<String> = log.lock().expect("log").iter().map(|e| e.replace("blocked ", "")).collect();
    assert_eq!(main.wake(address, 2), 2);
    assert_eq!(main.wake(address, 5), 1, "one waiter was left");
    assert_eq!(main.wake(address, 1), 0, "nobody waits any more");
    join_all(threads);
    let woke: Vec<String> =
        log.lock().expect("log").iter().filter_map(|e| e.strip_prefix("woke ")).map(String::from).collect();
    assert_eq!(woke.len(), 3);
    assert!(order[..2].iter().all(|first| woke.contains(first)), "the first two to block were woken: {order:?}");
}

#[test]
fn an_untimed_block_with_nobody_runnable_is_a_deadlock_naming_the_operation() {
    let sim = SimEnv::new(9);
    let (index, os) = start(&sim, "waiter", || {
        current().expect("member").block(0x2000, "futex wait", Location::caller(), None);
        unreachable!("nobody wakes it");
    });
    let main = current().expect("main");
    let payload = catch_unwind(AssertUnwindSafe(|| main.join(index, "pthread_join"))).expect_err("a deadlock");
    let failure = payload.downcast_ref::<ThreadFailure>().expect("a ThreadFailure payload").clone();
    let ThreadFailure::Deadlock { blocked } = failure else { panic!("not a deadlock: {failure}") };
    let operations: Vec<(&str, &str)> =
        blocked.iter().map(|BlockedThread { thread, operation, .. }| (thread.as_str(), *operation)).collect();
    assert_eq!(operations, [("main", "pthread_join"), ("waiter", "futex wait")]);
    assert!(main.run_failed());
    assert!(os.join().expect("the waiter unwinds quietly"), "its body ran");
    assert!(sim.thread_failure().is_some());
}

#[test]
fn a_timed_block_with_nobody_runnable_moves_the_clock_to_its_deadline() {
    let sim = SimEnv::new(3);
    let waiter_sim = sim.clone();
    let (index, os) = start(&sim, "timed", move || {
        let deadline = now_nanos(&waiter_sim) + 5_000_000;
        let wake = current().expect("member").block(0x3000, "futex wait", Location::caller(), Some(deadline));
        assert_eq!(wake, Wake::TimedOut);
        assert_eq!(now_nanos(&waiter_sim), deadline, "the clock jumped to the deadline, no further");
    });
    current().expect("main").join(index, "pthread_join");
    assert!(os.join().expect("ends"));
    assert_eq!(sim.now(), Duration::from_millis(5));
}

#[test]
fn a_deadline_the_clock_passed_while_others_ran_wakes_the_thread() {
    let sim = SimEnv::new(4);
    let waiter_sim = sim.clone();
    let (index, os) = start(&sim, "timed", move || {
        let me = current().expect("member");
        assert_eq!(me.block(0x4000, "futex wait", Location::caller(), Some(1_000_000_000)), Wake::TimedOut);
        assert!(now_nanos(&waiter_sim) >= 2_000_000_000, "the main thread moved the clock past it");
    });
    let main = current().expect("main");
    sim.advance_clock(Duration::from_secs(2));
    main.yield_now();
    main.join(index, "pthread_join");
    assert!(os.join().expect("ends"));
    assert_eq!(sim.now(), Duration::from_secs(2), "no jump: the deadline had passed already");
}

#[test]
fn sleepers_wake_in_deadline_order_on_the_simulated_clock() {
    let sim = SimEnv::new(8);
    let log: Log = Arc::default();
    let threads: Vec<_> = [30u64, 10, 20]
        .into_iter()
        .map(|millis| {
            let (log, sim_here) = (Arc::clone(&log), sim.clone());
            start(&sim, &format!("sleep{millis}"), move || {
                sleep(&sim_here, millis * 1_000_000);
                push(&log, format!("{millis}ms at {}", now_nanos(&sim_here) / 1_000_000));
            })
        })
        .collect();
    join_all(threads);
    assert_eq!(*log.lock().expect("log"), ["10ms at 10", "20ms at 20", "30ms at 30"]);
    let alone = SimEnv::new(8);
    sleep(&alone, 7_000);
    assert_eq!(now_nanos(&alone), 7_000, "a world without threads moves its clock at once");
}

fn interleaving(seed: u64) -> Vec<String> {
    let sim = SimEnv::new(seed);
    let log: Log = Arc::default();
    let threads: Vec<_> = ["a", "b", "c"]
        .into_iter()
        .map(|name| {
            let log = Arc::clone(&log);
            start(&sim, name, move || {
                for round in 0..5 {
                    push(&log, format!("{name}{round}"));
                    current().expect("member").yield_now();
                }
            })
        })
        .collect();
    join_all(threads);
    log.lock().expect("log").clone()
}

#[test]
fn a_seed_fixes_the_interleaving_of_foreign_threads() {
    let first = interleaving(1);
    assert_eq!(first.len(), 15);
    assert_eq!(first, interleaving(1));
    let others: std::collections::BTreeSet<_> = (0..6).map(interleaving).collect();
    assert!(others.len() >= 3, "6 seeds gave {} interleavings", others.len());
}

#[test]
fn a_joined_thread_frees_its_slot_for_the_next_one() {
    let sim = SimEnv::new(2);
    let first = start(&sim, "first", || {});
    let index = first.0;
    join_all(vec![first]);
    let second = start(&sim, "second", || {});
    assert_eq!(second.0, index, "the joined thread's slot is reused");
    join_all(vec![second]);
}

#[test]
fn a_panic_on_a_foreign_thread_is_the_run_failure_with_its_name_and_message() {
    let sim = SimEnv::new(6);
    let (index, os) = start(&sim, "pthread-1", || {
        current().expect("member").rename("flusher");
        panic!("the flusher gave up");
    });
    let payload =
        catch_unwind(AssertUnwindSafe(|| current().expect("main").join(index, "pthread_join"))).expect_err("failure");
    let failure = payload.downcast_ref::<ThreadFailure>().expect("a ThreadFailure payload");
    assert_eq!(*failure, ThreadFailure::Panicked { thread: "flusher".into(), message: "the flusher gave up".into() });
    assert!(os.join().expect("the panic was caught by run"));
}

#[test]
fn a_failure_recorded_from_a_hook_reaches_the_main_thread() {
    let sim = SimEnv::new(7);
    let member = register(&sim, "hooked");
    let index = member.index();
    let os = std::thread::spawn(move || {
        run(member, || {
            let me = current().expect("member");
            me.fail(Box::new(String::from("futex operation 5 refused")));
            assert!(me.run_failed());
            me.leave();
            assert!(current().is_none(), "left the world");
        })
    });
    let payload =
        catch_unwind(AssertUnwindSafe(|| current().expect("main").join(index, "pthread_join"))).expect_err("failure");
    let failure = payload.downcast_ref::<ThreadFailure>().expect("a ThreadFailure payload");
    assert!(failure.to_string().contains("futex operation 5 refused"), "{failure}");
    assert!(os.join().expect("ends"));
    assert!(is_unwinding_a_failed_run(&Aborted));
}
