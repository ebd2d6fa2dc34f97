//! C code's `pthread_mutex` and `pthread_cond` on a world's threads (ADR-0165), called as C code calls them.

#![expect(unsafe_code, reason = "pthread objects used as C code uses them")]
#![expect(clippy::disallowed_methods, reason = "the point: std's threads and sleeps under a world")]

use std::cell::UnsafeCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use env::SimEnv;
use env::thread::ThreadFailure;
use interpose::threads::run;

/// A C mutex, a C condition variable and a counter, shared as C code would share them.
struct Shared {
    mutex: UnsafeCell<libc::pthread_mutex_t>,
    cond: UnsafeCell<libc::pthread_cond_t>,
    counter: AtomicU32,
    ready: AtomicBool,
}

// SAFETY: the pthread objects are made to be shared between threads; every access goes through their functions.
unsafe impl Sync for Shared {}

impl Shared {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            mutex: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
            cond: UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER),
            counter: AtomicU32::new(0),
            ready: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> i32 {
        // SAFETY: an initialised mutex that outlives the call.
        unsafe { libc::pthread_mutex_lock(self.mutex.get()) }
    }

    fn unlock(&self) -> i32 {
        // SAFETY: as above, locked by this thread.
        unsafe { libc::pthread_mutex_unlock(self.mutex.get()) }
    }

    fn wait(&self, deadline: Option<&libc::timespec>) -> i32 {
        let (cond, mutex) = (self.cond.get(), self.mutex.get());
        // SAFETY: an initialised condition variable and the mutex this thread holds.
        unsafe {
            match deadline {
                Some(at) => libc::pthread_cond_timedwait(cond, mutex, at),
                None => libc::pthread_cond_wait(cond, mutex),
            }
        }
    }

    fn signal(&self) -> i32 {
        // SAFETY: an initialised condition variable.
        unsafe { libc::pthread_cond_signal(self.cond.get()) }
    }
}

/// Two threads increment under the C mutex and sleep while holding it (a yield point), so they contend; a third
/// waits on the condition variable until the counter is done.
fn contended(seed: u64) -> (u32, Vec<(&'static str, u64)>) {
    let sim = SimEnv::new(seed);
    run(&sim, "program", || {
        let shared = Shared::new();
        let waiter = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                assert_eq!(shared.lock(), 0);
                while !shared.ready.load(Ordering::SeqCst) {
                    assert_eq!(shared.wait(None), 0);
                }
                let seen = shared.counter.load(Ordering::SeqCst);
                assert_eq!(shared.unlock(), 0);
                seen
            })
        };
        let adders: Vec<_> = (0..2)
            .map(|_| {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || {
                    for _ in 0..5 {
                        assert_eq!(shared.lock(), 0);
                        let before = shared.counter.load(Ordering::SeqCst);
                        std::thread::sleep(Duration::from_micros(10));
                        shared.counter.store(before + 1, Ordering::SeqCst);
                        assert_eq!(shared.unlock(), 0);
                    }
                })
            })
            .collect();
        adders.into_iter().for_each(|adder| adder.join().unwrap());
        assert_eq!(shared.lock(), 0);
        shared.ready.store(true, Ordering::SeqCst);
        assert_eq!(shared.signal(), 0);
        assert_eq!(shared.unlock(), 0);
        let seen = waiter.join().unwrap();
        let stats = interpose::stats().expect("bound");
        let kinds = ["pthread_mutex_lock", "pthread_cond_wait", "pthread_cond_signal"];
        (seen, kinds.iter().map(|kind| (*kind, stats.calls.get(kind).copied().unwrap_or(0))).collect())
    })
}

#[test]
fn contended_c_mutexes_and_condition_variables_run_under_the_worlds_scheduler() {
    let (seen, counts) = contended(21);
    assert_eq!(seen, 10, "no increment was lost: the mutex excluded");
    assert!(counts.iter().all(|(_, count)| *count > 0), "each family was the world's: {counts:?}");
    assert_eq!(contended(21), (seen, counts), "a seed replays");
}

#[test]
fn a_timed_c_wait_ends_at_its_simulated_deadline_and_a_c_mutex_held_forever_is_a_deadlock() {
    let sim = SimEnv::new(22);
    let waited = run(&sim, "program", || {
        let shared = Shared::new();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        let until = now + Duration::from_millis(10);
        let at = libc::timespec {
            tv_sec: until.as_secs() as libc::time_t,
            tv_nsec: libc::c_long::from(until.subsec_nanos()),
        };
        let waiter = std::thread::spawn(move || {
            assert_eq!(shared.lock(), 0);
            let status = shared.wait(Some(&at));
            assert_eq!(shared.unlock(), 0);
            status
        });
        (waiter.join().unwrap(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap() - now)
    });
    assert_eq!(waited, (libc::ETIMEDOUT, Duration::from_millis(10)));

    let sim = SimEnv::new(23);
    let payload = catch_unwind(AssertUnwindSafe(|| {
        run(&sim, "program", || {
            let shared = Shared::new();
            assert_eq!(shared.lock(), 0);
            let theirs = Arc::clone(&shared);
            let stuck = std::thread::Builder::new().name("stuck".into()).spawn(move || theirs.lock()).unwrap();
            let _ = stuck.join();
        });
    }))
    .expect_err("a deadlock");
    let failure = payload.downcast_ref::<ThreadFailure>().expect("a ThreadFailure").to_string();
    assert!(failure.contains("thread 'stuck' blocks in pthread_mutex_lock"), "{failure}");
}
