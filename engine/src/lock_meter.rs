//! How long each of the engine's shared locks is held, for the serial-fraction measurement of issue 27
//! (ADR-0119): every commit takes the writer lock, and the time it holds it bounds how far commits can scale
//! (Amdahl). Off by default ([`crate::Options::lock_timing`]): a lock then costs one branch more and no clock
//! read. On, each acquisition reads [`Env::now`] twice and adds to two relaxed atomic counters.
//! Never on in simulation: `SimEnv::now` draws from the run's clock stream, so it would change the schedule.

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::MutexGuard;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use env::Env;

/// One lock's acquisitions and the total time they held it, as [`crate::Db::stats`] reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockHold {
    pub acquisitions: u64,
    pub held_ns: u64,
    /// How long its takers waited for it (asked to taken), over every acquisition (ADR-0186).
    pub waited_ns: u64,
}

impl LockHold {
    /// What happened between `earlier` and `self` (both read from the same database).
    pub fn since(self, earlier: LockHold) -> LockHold {
        LockHold {
            acquisitions: self.acquisitions.saturating_sub(earlier.acquisitions),
            held_ns: self.held_ns.saturating_sub(earlier.held_ns),
            waited_ns: self.waited_ns.saturating_sub(earlier.waited_ns),
        }
    }
}

/// The locks a commit takes (ADR-0082, ADR-0133, ADR-0134): writer, registry, view, the visibility watermark (an
/// unsynced commit's publication after the writer lock; a waiter's sleep on it is not counted) and the log lock. All zero unless
/// [`crate::Options::lock_timing`] is on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockHolds {
    pub writer: LockHold,
    pub registry: LockHold,
    pub view: LockHold,
    pub watermark: LockHold,
    /// The log lock (ADR-0134): a committer's write-through after the writer lock (the leader holds it across
    /// its group's write), and a sync's write-out under the writer lock.
    pub log: LockHold,
    /// A committer's wait for the commits before it to land (the visibility watermark, ADR-0133, ADR-0187):
    /// `acquisitions` counts the waits, `waited_ns` their time (`held_ns` stays 0).
    pub visibility_wait: LockHold,
    /// A synced committer's wait for its group-commit batch (ADR-0081): counted as `visibility_wait` is.
    pub batch_wait: LockHold,
}

impl LockHolds {
    /// What happened between `earlier` and `self`.
    pub fn since(self, earlier: LockHolds) -> LockHolds {
        LockHolds {
            writer: self.writer.since(earlier.writer),
            registry: self.registry.since(earlier.registry),
            view: self.view.since(earlier.view),
            watermark: self.watermark.since(earlier.watermark),
            log: self.log.since(earlier.log),
            visibility_wait: self.visibility_wait.since(earlier.visibility_wait),
            batch_wait: self.batch_wait.since(earlier.batch_wait),
        }
    }
}

/// How many times [`lock_spinning`] tries a contended lock, [`LOCK_SPIN_PAUSES`] spin hints apart, before it
/// sleeps on it (ADR-0199): about 30 µs on the 2-vCPU VM (a `pause` is 27 ns there), longer than the writer and
/// registry sections it waits out, and shorter than the sleep and wake it saves.
pub(crate) const LOCK_SPINS_MAX: u32 = 128;
/// Spin hints between two tries, so a waiter does not take the lock's cache line from its holder on every one.
pub(crate) const LOCK_SPIN_PAUSES: u32 = 8;

/// Take `mutex`, spinning on `try_lock` for a while before sleeping on it (ADR-0199): `std`'s mutex spins about
/// 100 hints before it sleeps on a futex, and on a VM a sleeping waiter's vCPU halts, so its wake costs an
/// interprocessor interrupt and a VM entry, longer than the section it waited for.
pub(crate) fn lock_spinning<T>(mutex: &std::sync::Mutex<T>) -> std::sync::LockResult<MutexGuard<'_, T>> {
    for _ in 0..LOCK_SPINS_MAX {
        match mutex.try_lock() {
            Ok(guard) => return Ok(guard),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => return Err(poisoned),
            Err(std::sync::TryLockError::WouldBlock) => {
                for _ in 0..LOCK_SPIN_PAUSES {
                    std::hint::spin_loop();
                }
            }
        }
    }
    mutex.lock()
}

/// The counters of one lock.
#[derive(Debug, Default)]
pub(crate) struct LockMeter {
    acquisitions: AtomicU64,
    held_ns: AtomicU64,
    waited_ns: AtomicU64,
}

impl LockMeter {
    pub(crate) fn read(&self) -> LockHold {
        LockHold {
            acquisitions: self.acquisitions.load(Ordering::Relaxed),
            held_ns: self.held_ns.load(Ordering::Relaxed),
            waited_ns: self.waited_ns.load(Ordering::Relaxed),
        }
    }

    fn add(&self, held: Duration) {
        self.acquisitions.fetch_add(1, Ordering::Relaxed);
        self.held_ns.fetch_add(nanos(held), Ordering::Relaxed);
    }

    /// One wait of `waited` (a lock's taker before it got it, or a committer's wait, ADR-0186).
    fn add_wait(&self, waited: Duration) {
        self.waited_ns.fetch_add(nanos(waited), Ordering::Relaxed);
    }

    /// Time `wait` when `timing` is on, as one acquisition that held nothing: a committer's wait on the watermark
    /// or its batch.
    pub(crate) fn time_wait<E: Env, T>(&self, env: &E, timing: bool, wait: impl FnOnce() -> T) -> T {
        if !timing {
            return wait();
        }
        let asked = env.now();
        let value = wait();
        self.acquisitions.fetch_add(1, Ordering::Relaxed);
        self.add_wait(env.now().saturating_sub(asked));
        value
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// A lock guard (`std`'s, or another `G` such as `env::sync`'s) that, when timing is on, adds how long it was
/// held to its meter when dropped.
pub(crate) struct Metered<'a, T, E: Env, G = MutexGuard<'a, T>> {
    guard: G,
    /// The guarded value's type (a `G` other than `std`'s names it only through `Deref`).
    value: PhantomData<fn() -> T>,
    /// The clock, the meter and when the lock was taken; `None` when timing is off.
    timing: Option<(&'a E, &'a LockMeter, Duration)>,
}

impl<'a, T, E: Env, G: DerefMut<Target = T>> Metered<'a, T, E, G> {
    /// Take the lock with `lock`, timed against `meter` when `timing` is on: how long the taker waited for it,
    /// then how long it is held (ADR-0186).
    pub(crate) fn take(env: &'a E, meter: &'a LockMeter, timing: bool, lock: impl FnOnce() -> G) -> Self {
        if !timing {
            return Self { guard: lock(), value: PhantomData, timing: None };
        }
        let asked = env.now();
        let guard = lock();
        let taken = env.now();
        meter.add_wait(taken.saturating_sub(asked));
        Self { guard, value: PhantomData, timing: Some((env, meter, taken)) }
    }
}

impl<T, E: Env, G: DerefMut<Target = T>> Deref for Metered<'_, T, E, G> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T, E: Env, G: DerefMut<Target = T>> DerefMut for Metered<'_, T, E, G> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T, E: Env, G> Drop for Metered<'_, T, E, G> {
    /// Runs before the guard field is dropped: the clock is read while the lock is still held.
    fn drop(&mut self) {
        if let Some((env, meter, since)) = self.timing {
            meter.add(env.now().saturating_sub(since));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Off: nothing is counted. On: every acquisition is, with the clock's time between take and drop.
    #[test]
    fn counts_only_when_timing_is_on() {
        let env = env::SimEnv::new(1);
        let (lock, meter) = (Mutex::new(0u32), LockMeter::default());
        drop(Metered::take(&env, &meter, false, || lock.lock().unwrap()));
        assert_eq!(meter.read(), LockHold::default());
        let start = env.now();
        {
            let mut held = Metered::take(&env, &meter, true, || lock.lock().unwrap());
            *held += 1;
            env.sleep(Duration::from_micros(7));
        }
        let elapsed_ns = u64::try_from((env.now() - start).as_nanos()).unwrap();
        let hold = meter.read();
        assert_eq!((hold.acquisitions, *lock.lock().unwrap()), (1, 1));
        assert!(hold.held_ns >= 7_000 && hold.held_ns <= elapsed_ns, "{hold:?} of {elapsed_ns} ns");
        assert_eq!(hold.since(LockHold { acquisitions: 1, held_ns: 1000, waited_ns: 0 }).held_ns, hold.held_ns - 1000);
    }

    /// `take` adds the time between asking and getting the lock to the meter's waits, and the hold as `new` does;
    /// `time_wait` counts one wait and its time. Off, neither counts.
    #[test]
    fn take_and_time_wait_count_the_waits() {
        let env = env::SimEnv::new(2);
        let (lock, meter) = (Mutex::new(0u32), LockMeter::default());
        drop(Metered::take(&env, &meter, false, || lock.lock().unwrap()));
        meter.time_wait(&env, false, || env.sleep(Duration::from_micros(3)));
        assert_eq!(meter.read(), LockHold::default());
        let held = Metered::take(&env, &meter, true, || {
            env.sleep(Duration::from_micros(5));
            lock.lock().unwrap()
        });
        drop(held);
        let hold = meter.read();
        assert!(hold.acquisitions == 1 && hold.waited_ns >= 5_000, "{hold:?}");
        let before = meter.read();
        meter.time_wait(&env, true, || env.sleep(Duration::from_micros(11)));
        let waited = meter.read().since(before);
        assert!(waited.acquisitions == 1 && waited.held_ns == 0 && waited.waited_ns >= 11_000, "{waited:?}");
    }

    /// ADR-0199: `lock_spinning` takes a free lock at once, waits out a holder on another thread (which lets go
    /// while the taker spins, or after it has gone to sleep) and then sees what the holder wrote, and reports a
    /// poisoned lock as `lock` does.
    #[test]
    fn lock_spinning_waits_out_a_holder_and_reports_poison() {
        use env::{RealEnv, TaskStep};
        let env = RealEnv::new();
        let lock = std::sync::Arc::new(Mutex::new(0u32));
        *lock_spinning(&lock).unwrap() += 1;
        for (index, hold_us) in [1, 200, 5_000].into_iter().enumerate() {
            let (held, holder_env) = (std::sync::Arc::clone(&lock), env.clone());
            let (taken_tx, taken_rx) = std::sync::mpsc::channel();
            let holder = env.spawn(
                "holder",
                Box::new(move || {
                    let mut guard = held.lock().unwrap();
                    taken_tx.send(()).unwrap();
                    holder_env.sleep(Duration::from_micros(hold_us));
                    *guard += 1;
                    TaskStep::Done
                }),
            );
            taken_rx.recv().unwrap();
            let seen = *lock_spinning(&lock).unwrap();
            env.wait(&holder).unwrap();
            assert_eq!(seen as usize, 2 + index, "taken while held for {hold_us} µs");
        }
        assert_eq!(*lock_spinning(&lock).unwrap(), 4);
        let poisoned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _guard = lock.lock().unwrap();
            panic!("poison it");
        }));
        assert!(poisoned.is_err());
        assert!(lock_spinning(&lock).is_err(), "a poisoned lock is reported, not taken");
    }
}
