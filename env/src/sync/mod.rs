//! `std`-shaped blocking primitives for systems with their own threads (ADR-0104): [`Mutex`], [`Condvar`] and
//! [`mpsc`]. On a thread of a simulated world (one started with [`crate::thread::spawn`], or the world's main thread
//! once it started one) each operation is a yield point and blocking hands the baton to another thread the seed
//! chooses; everywhere else they are `std`'s. Same types, same signatures, so code written against them runs on
//! `RealEnv` and `SimEnv` alike.
//!
//! Not modelled: `Condvar::wait_timeout` (there is no simulated timeout), and spurious wake-ups (a simulated wait
//! returns only after a notify; `std` allows spurious ones, so loop on your condition as usual).

#![expect(clippy::disallowed_methods, reason = "std's blocking primitives back RealEnv's threads (ADR-0104)")]
#![expect(clippy::disallowed_types, reason = "std's blocking primitives back RealEnv's threads (ADR-0104)")]

pub mod mpsc;

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::panic::Location;
use std::sync::{LockResult, PoisonError, TryLockError, TryLockResult};

#[cfg(feature = "sim")]
use crate::sim::threads::{BlockPoint, Resource, scheduled};

/// A mutual exclusion lock shaped like `std::sync::Mutex`.
#[derive(Default)]
pub struct Mutex<T: ?Sized> {
    inner: std::sync::Mutex<T>,
}

/// The guard of a locked [`Mutex`]; unlocks on drop.
pub struct MutexGuard<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
    guard: Option<std::sync::MutexGuard<'a, T>>,
}

impl<T> Mutex<T> {
    /// A new unlocked mutex holding `value`.
    pub const fn new(value: T) -> Self {
        Self { inner: std::sync::Mutex::new(value) }
    }

    /// The value, consuming the mutex.
    pub fn into_inner(self) -> LockResult<T> {
        self.inner.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Lock it, blocking until it is free.
    #[track_caller]
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        self.lock_at("Mutex::lock", Location::caller())
    }

    /// Lock it if it is free now.
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
        #[cfg(feature = "sim")]
        if let Some((sched, me)) = scheduled() {
            sched.yield_now(me);
        }
        match self.inner.try_lock() {
            Ok(guard) => Ok(self.wrap(guard)),
            Err(TryLockError::Poisoned(poisoned)) => {
                Err(TryLockError::Poisoned(PoisonError::new(self.wrap(poisoned.into_inner()))))
            }
            Err(TryLockError::WouldBlock) => Err(TryLockError::WouldBlock),
        }
    }

    /// A mutable reference to the value (no locking: the borrow is exclusive).
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        self.inner.get_mut()
    }

    fn wrap<'a>(&'a self, guard: std::sync::MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        MutexGuard { mutex: self, guard: Some(guard) }
    }

    fn wrap_result<'a>(&'a self, locked: LockResult<std::sync::MutexGuard<'a, T>>) -> LockResult<MutexGuard<'a, T>> {
        locked.map(|guard| self.wrap(guard)).map_err(|poisoned| PoisonError::new(self.wrap(poisoned.into_inner())))
    }

    /// [`Mutex::lock`], naming `operation` at `location` as the blocking point if it blocks.
    pub(crate) fn lock_at(
        &self,
        operation: &'static str,
        location: &'static Location<'static>,
    ) -> LockResult<MutexGuard<'_, T>> {
        #[cfg(feature = "sim")]
        if let Some((sched, me)) = scheduled() {
            sched.yield_now(me);
            let point = BlockPoint { resource: self.resource(), operation, location };
            loop {
                match self.inner.try_lock() {
                    Ok(guard) => return Ok(self.wrap(guard)),
                    Err(TryLockError::Poisoned(poisoned)) => {
                        return Err(PoisonError::new(self.wrap(poisoned.into_inner())));
                    }
                    Err(TryLockError::WouldBlock) if sched.aborted() => break, // the run failed: std's lock below
                    Err(TryLockError::WouldBlock) => sched.block(me, point),
                }
            }
        }
        match self.inner.try_lock() {
            Ok(guard) => return Ok(self.wrap(guard)),
            Err(TryLockError::Poisoned(poisoned)) => return Err(PoisonError::new(self.wrap(poisoned.into_inner()))),
            // Held: by this very thread when it drives a world alone, a deadlock (ADR-0169).
            #[cfg(feature = "sim")]
            Err(TryLockError::WouldBlock) => crate::sim::driver::deadlock_if_alone(operation, location),
            #[cfg(not(feature = "sim"))]
            Err(TryLockError::WouldBlock) => {}
        }
        let _ = (operation, location);
        self.wrap_result(self.inner.lock())
    }

    #[cfg(feature = "sim")]
    fn resource(&self) -> Resource {
        Resource::Object(std::ptr::from_ref(self).cast::<u8>() as usize)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl<T: ?Sized> MutexGuard<'_, T> {
    /// Unlock without a yield point, waking the threads blocked on the mutex: the first half of a condvar wait,
    /// which must not let another thread run before the waiter is registered.
    fn release_quiet(&mut self) {
        if self.guard.take().is_none() {
            return;
        }
        #[cfg(feature = "sim")]
        if let Some((sched, _)) = scheduled() {
            sched.wake_all(self.mutex.resource());
        }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        let held = self.guard.is_some();
        self.release_quiet();
        #[cfg(feature = "sim")]
        if held
            && !std::thread::panicking()
            && let Some((sched, me)) = scheduled()
        {
            sched.yield_now(me);
        }
        let _ = held;
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.guard.as_ref().expect("a live guard holds the lock")
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.guard.as_mut().expect("a live guard holds the lock")
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// A condition variable shaped like `std::sync::Condvar`.
#[derive(Debug, Default)]
pub struct Condvar {
    inner: std::sync::Condvar,
}

impl Condvar {
    /// A new condition variable.
    pub const fn new() -> Self {
        Self { inner: std::sync::Condvar::new() }
    }

    /// Unlock `guard`'s mutex and wait for a notify, then lock it again.
    #[track_caller]
    pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> LockResult<MutexGuard<'a, T>> {
        self.wait_at(guard, "Condvar::wait", Location::caller())
    }

    /// Wait while `condition` holds.
    #[track_caller]
    pub fn wait_while<'a, T, F>(&self, mut guard: MutexGuard<'a, T>, mut condition: F) -> LockResult<MutexGuard<'a, T>>
    where
        F: FnMut(&mut T) -> bool,
    {
        let location = Location::caller();
        while condition(&mut *guard) {
            guard = self.wait_at(guard, "Condvar::wait_while", location)?;
        }
        Ok(guard)
    }

    /// [`Condvar::wait`], naming `operation` at `location` as the blocking point.
    pub(crate) fn wait_at<'a, T>(
        &self,
        mut guard: MutexGuard<'a, T>,
        operation: &'static str,
        location: &'static Location<'static>,
    ) -> LockResult<MutexGuard<'a, T>> {
        let mutex = guard.mutex;
        #[cfg(feature = "sim")]
        if let Some((sched, me)) = scheduled() {
            // Unlock and register as a waiter with no yield point between: no notify can fall in the gap.
            guard.release_quiet();
            drop(guard);
            let resource = Resource::Object(std::ptr::from_ref(self) as usize);
            sched.block(me, BlockPoint { resource, operation, location });
            return mutex.lock_at(operation, location);
        }
        // The only thread of a world waits: nobody can notify it (ADR-0169).
        #[cfg(feature = "sim")]
        crate::sim::driver::deadlock_if_alone(operation, location);
        let std_guard = guard.guard.take().expect("a live guard holds the lock");
        drop(guard);
        mutex.wrap_result(self.inner.wait(std_guard))
    }

    /// Wake one waiting thread (on a simulated world, the waiter started first: the lowest thread index).
    pub fn notify_one(&self) {
        self.inner.notify_one();
        #[cfg(feature = "sim")]
        if let Some((sched, me)) = scheduled() {
            sched.wake_one(Resource::Object(std::ptr::from_ref(self) as usize));
            sched.yield_now(me);
        }
    }

    /// Wake every waiting thread.
    pub fn notify_all(&self) {
        self.inner.notify_all();
        #[cfg(feature = "sim")]
        if let Some((sched, me)) = scheduled() {
            sched.wake_all(Resource::Object(std::ptr::from_ref(self) as usize));
            sched.yield_now(me);
        }
    }
}
