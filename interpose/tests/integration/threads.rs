//! Threads of an unmodified `std` program under a world's scheduler (ADR-0165, ADR-0166): `std::thread`,
//! `std::sync::{Mutex, Condvar, mpsc}`, sleeps and timeouts, with no holdfast import in the program.

#![expect(clippy::disallowed_methods, reason = "the point: std's threads, locks and clock under a world")]
#![expect(clippy::disallowed_types, reason = "the point: std's threads, locks and clock under a world")]

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::{Duration, Instant};

use env::SimEnv;
use env::thread::ThreadFailure;
use interpose::futex::FUTEX_WAIT_OPERATION;
use interpose::threads::run;

/// Run `scenario` on its own OS thread and fail if it has not ended within a minute: a hang is a failure.
fn within_a_minute<T: Send + 'static>(scenario: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(catch_unwind(AssertUnwindSafe(scenario)));
    });
    match result.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(value)) => value,
        Ok(Err(payload)) => resume_unwind(payload),
        Err(_) => panic!("the scenario hung: a blocked world must be reported, not wait forever"),
    }
}

/// The program: three workers wait for a start signal on a Condvar, then each appends to a shared log under a
/// Mutex and sends what it appended on a channel while holding the lock (so the others contend for it); one of
/// them sleeps first. The main thread of the program receives every message and joins them. Its log is the
/// order the seed chose.
fn program() -> (Vec<String>, u64, u64) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let start = Arc::new((Mutex::new(false), Condvar::new()));
    let (tx, rx) = mpsc::channel();
    let workers: Vec<_> = (0..3)
        .map(|id| {
            let (log, start, tx) = (Arc::clone(&log), Arc::clone(&start), tx.clone());
            std::thread::Builder::new()
                .name(format!("worker{id}"))
                .spawn(move || {
                    let (flag, signal) = &*start;
                    drop(signal.wait_while(flag.lock().unwrap(), |go| !*go).unwrap());
                    if id == 2 {
                        std::thread::sleep(Duration::from_millis(3));
                    }
                    for round in 0..4 {
                        let mut log = log.lock().unwrap();
                        log.push(format!("w{id}.{round}"));
                        tx.send(format!("w{id}.{round}")).unwrap();
                    }
                })
                .unwrap()
        })
        .collect();
    drop(tx);
    *start.0.lock().unwrap() = true;
    start.1.notify_all();
    for message in rx {
        log.lock().unwrap().push(format!("got {message}"));
    }
    for worker in workers {
        worker.join().unwrap();
    }
    let stats = interpose::stats().expect("the program's thread is bound");
    let calls = |kind| stats.calls.get(kind).copied().unwrap_or(0);
    let futex = calls("futex_wait") + calls("futex_wake");
    let order = log.lock().unwrap().clone();
    (order, calls("pthread_create"), futex)
}

fn order(seed: u64) -> Vec<String> {
    let sim = SimEnv::new(seed);
    let (order, created, futex) = run(&sim, "program", program);
    assert_eq!(created, 3, "every std::thread::spawn was the world's");
    assert!(futex > 0, "the threads blocked and woke through the world's futex");
    assert_eq!(order.len(), 24, "12 appends and 12 receipts: {order:?}");
    order
}

#[test]
fn an_unmodified_std_program_with_threads_runs_and_its_interleaving_is_a_function_of_the_seed() {
    within_a_minute(|| {
        let first = order(1);
        assert_eq!(first, order(1), "the same seed, the same order");
        let orders: std::collections::BTreeSet<Vec<String>> = (0..6).map(order).collect();
        assert!(orders.len() >= 2, "6 seeds gave one order: {first:?}");
    });
}

#[test]
fn two_worlds_with_threads_on_two_os_threads_do_not_interfere() {
    within_a_minute(|| {
        let alone = (order(3), order(4));
        let (a, b) = (std::thread::spawn(|| order(3)), std::thread::spawn(|| order(4)));
        assert_eq!((a.join().unwrap(), b.join().unwrap()), alone);
    });
}

/// Run `program` in a world, expecting a deadlock; each blocked thread's (name, operation).
fn deadlock_of(seed: u64, program: impl FnOnce() + Send + 'static) -> Vec<(String, &'static str)> {
    within_a_minute(move || {
        let sim = SimEnv::new(seed);
        let payload = catch_unwind(AssertUnwindSafe(|| run(&sim, "program", program))).expect_err("a deadlock");
        let failure = payload.downcast_ref::<ThreadFailure>().expect("a ThreadFailure").clone();
        let ThreadFailure::Deadlock { blocked } = failure else { panic!("not a deadlock: {failure}") };
        blocked.into_iter().map(|point| (point.thread, point.operation)).collect()
    })
}

fn stuck_worker(body: impl FnOnce() + Send + 'static) {
    let worker = std::thread::Builder::new().name("stuck".into()).spawn(body).unwrap();
    worker.join().unwrap();
}

#[test]
fn a_thread_blocked_forever_on_a_mutex_a_condvar_or_recv_is_a_deadlock_naming_the_futex_wait() {
    let held = deadlock_of(5, || {
        let lock = Arc::new(Mutex::new(()));
        let guard = lock.lock().unwrap();
        let theirs = Arc::clone(&lock);
        stuck_worker(move || drop(theirs.lock().unwrap()));
        drop(guard);
    });
    let waited = deadlock_of(6, || {
        let pair = Arc::new((Mutex::new(()), Condvar::new()));
        let theirs = Arc::clone(&pair);
        stuck_worker(move || drop(theirs.1.wait(theirs.0.lock().unwrap()).unwrap()));
        pair.1.notify_all(); // only after the join: never reached
    });
    let received = deadlock_of(7, || {
        let (tx, rx) = mpsc::channel::<u8>();
        stuck_worker(move || {
            let _ = rx.recv();
        });
        drop(tx);
    });
    for blocked in [held, waited, received] {
        assert!(blocked.contains(&("stuck".into(), FUTEX_WAIT_OPERATION)), "{blocked:?}");
        assert!(blocked.contains(&("program".into(), "pthread_join")), "{blocked:?}");
        assert!(blocked.contains(&("main".into(), "interpose::threads::run")), "{blocked:?}");
    }
}

#[test]
fn a_panic_on_a_std_thread_in_a_world_is_the_run_failure_with_its_message() {
    let failure = within_a_minute(|| {
        let sim = SimEnv::new(8);
        let payload = catch_unwind(AssertUnwindSafe(|| {
            run(&sim, "program", || {
                let flusher =
                    std::thread::Builder::new().name("flusher".into()).spawn(|| panic!("the flusher gave up"));
                let _ = flusher.unwrap().join();
            });
        }))
        .expect_err("the run failed");
        payload.downcast_ref::<ThreadFailure>().expect("a ThreadFailure").clone()
    });
    assert_eq!(failure, ThreadFailure::Panicked { thread: "flusher".into(), message: "the flusher gave up".into() });
}

#[test]
fn sleeps_and_timeouts_are_simulated_time_and_an_idle_world_jumps_to_the_next_deadline() {
    let (waited, slept, elapsed) = within_a_minute(|| {
        let sim = SimEnv::new(9);
        run(&sim, "program", || {
            let begin = Instant::now();
            let (tx, rx) = mpsc::channel::<u8>();
            let waiter = std::thread::spawn(move || {
                let at = Instant::now();
                assert_eq!(rx.recv_timeout(Duration::from_millis(50)), Err(mpsc::RecvTimeoutError::Timeout));
                at.elapsed()
            });
            let sleeper = std::thread::spawn(|| {
                let at = Instant::now();
                std::thread::sleep(Duration::from_millis(20));
                at.elapsed()
            });
            let (waited, slept) = (waiter.join().unwrap(), sleeper.join().unwrap());
            drop(tx);
            (waited, slept, begin.elapsed())
        })
    });
    assert_eq!(waited, Duration::from_millis(50), "the timeout ended exactly at its simulated deadline");
    assert_eq!(slept, Duration::from_millis(20));
    assert_eq!(elapsed, Duration::from_millis(50), "both ran concurrently in simulated time, on no real clock");
}

#[test]
fn a_thread_bound_with_enter_that_starts_threads_is_the_worlds_main_thread() {
    let total = within_a_minute(|| {
        let sim = SimEnv::new(10);
        let entered = interpose::enter(&sim);
        let counter = Arc::new(Mutex::new(0u32));
        let adders: Vec<_> = (0..2)
            .map(|_| {
                let counter = Arc::clone(&counter);
                std::thread::spawn(move || (0..10).for_each(|_| *counter.lock().unwrap() += 1))
            })
            .collect();
        adders.into_iter().for_each(|adder| adder.join().unwrap());
        assert_eq!(entered.stats().calls.get("pthread_create"), Some(&2));
        *counter.lock().unwrap()
    });
    assert_eq!(total, 20);
}

/// `syscall(SYS_futex, word, op, value, null, null, bitset)` from the program, as `std` calls it.
#[expect(unsafe_code, reason = "a raw futex call, as std makes it")]
fn raw_futex(word: &std::sync::atomic::AtomicU32, op: i32, bitset: u32) -> (libc::c_long, i32) {
    let null = std::ptr::null::<libc::timespec>();
    // SAFETY: a live futex word, no timeout, no second word; the bitset is the sixth argument, as std passes it.
    let answer =
        unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), op | libc::FUTEX_PRIVATE_FLAG, 1, null, null, bitset) };
    (answer, std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

#[test]
fn the_bitset_arrives_through_the_variadic_call_and_an_unmodelled_futex_operation_fails_the_run() {
    let failure = within_a_minute(|| {
        let sim = SimEnv::new(11);
        let payload = catch_unwind(AssertUnwindSafe(|| {
            run(&sim, "program", || {
                let word = std::sync::atomic::AtomicU32::new(0);
                assert_eq!(
                    raw_futex(&word, libc::FUTEX_WAKE_BITSET, u32::MAX).0,
                    0,
                    "bitset 'any': served, none woken"
                );
                let stats = interpose::stats().expect("bound");
                assert_eq!(stats.calls.get("futex_wake"), Some(&1), "the world answered it");
                assert_eq!(raw_futex(&word, libc::FUTEX_WAKE_BITSET, 1), (-1, libc::ENOSYS), "a partial bitset");
            });
        }))
        .expect_err("the refusal fails the run");
        payload.downcast_ref::<ThreadFailure>().expect("a ThreadFailure").to_string()
    });
    assert!(failure.contains("futex operation 10 (bitset 0x1)"), "{failure}");
}

#[test]
fn the_thread_driving_a_world_wakes_and_joins_its_workers_from_outside_the_program() {
    let sum = within_a_minute(|| {
        let sim = SimEnv::new(13);
        let (tx, worker) = run(&sim, "program", || {
            let (tx, rx) = mpsc::channel::<u32>();
            let worker = std::thread::spawn(move || rx.iter().sum::<u32>());
            tx.send(1).unwrap();
            (tx, worker)
        });
        // Outside the program, unbound: the worker waits in the world for the next message.
        tx.send(2).unwrap();
        drop(tx);
        worker.join().unwrap()
    });
    assert_eq!(sum, 3);
}

#[test]
fn a_world_can_run_more_programs_than_it_has_thread_slots_one_after_another() {
    let total = within_a_minute(|| {
        let sim = SimEnv::new(14);
        (0..env::sim::foreign::THREADS_MAX as u64 + 100).map(|call| run(&sim, "call", move || call % 3)).sum::<u64>()
    });
    assert_eq!(total, (0..1124u64).map(|call| call % 3).sum());
}

/// A futex word in static data, as `std`'s process-wide locks are (ADR-0191): 1 while "held".
static STATIC_WORD: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
/// Set by the program just before it waits on `STATIC_WORD`.
static WAITING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[test]
fn a_static_word_held_outside_the_world_is_waited_for_in_the_kernel_and_its_wake_is_not_lost() {
    use std::sync::atomic::Ordering;
    within_a_minute(|| {
        let outside = std::thread::spawn(|| {
            while !WAITING.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            std::thread::sleep(Duration::from_millis(10));
            STATIC_WORD.store(0, Ordering::SeqCst);
            // SAFETY: a live futex word; wake every waiter.
            #[expect(unsafe_code, reason = "a raw futex wake, as std's unlock makes it")]
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    STATIC_WORD.as_ptr(),
                    libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                    i32::MAX,
                )
            };
        });
        let sim = SimEnv::new(17);
        let released = run(&sim, "program", || {
            WAITING.store(true, Ordering::SeqCst);
            while STATIC_WORD.load(Ordering::SeqCst) == 1 {
                let null = std::ptr::null::<libc::timespec>();
                // SAFETY: a live futex word, no timeout.
                #[expect(unsafe_code, reason = "a raw futex wait, as std's lock makes it")]
                unsafe {
                    libc::syscall(
                        libc::SYS_futex,
                        STATIC_WORD.as_ptr(),
                        libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                        1,
                        null,
                    )
                };
            }
            let stats = interpose::stats().expect("bound");
            stats.calls.get("futex_static_released").copied().unwrap_or(0)
        });
        outside.join().unwrap();
        assert_eq!(released, 1, "the wait was the kernel's, and the outside thread's wake reached it");
    });
}

/// A program's own static lock, held by one of its threads across a yield point.
static PROGRAM_LOCK: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn contended_static_lock(seed: u64) -> (Vec<u32>, u64) {
    let sim = SimEnv::new(seed);
    run(&sim, "program", || {
        PROGRAM_LOCK.lock().unwrap().clear();
        let workers: Vec<_> = (0..2)
            .map(|id| {
                std::thread::spawn(move || {
                    let mut held = PROGRAM_LOCK.lock().unwrap();
                    std::thread::sleep(Duration::from_millis(1)); // a yield point with the lock held
                    held.push(id);
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        let stats = interpose::stats().expect("bound");
        (PROGRAM_LOCK.lock().unwrap().clone(), stats.calls.get("futex_static_held_in_world").copied().unwrap_or(0))
    })
}

#[test]
fn a_programs_static_lock_held_across_a_yield_point_is_waited_for_in_the_world() {
    within_a_minute(|| {
        let (first, held_in_world) = contended_static_lock(19);
        assert_eq!(first.len(), 2, "both workers appended: {first:?}");
        assert!(held_in_world >= 1, "the second worker found the lock held by the first, parked in the world");
        assert_eq!(contended_static_lock(19), (first, held_in_world), "the same seed, the same run");
    });
}
