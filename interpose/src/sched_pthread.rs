//! The `pthread_mutex` and `pthread_cond` families for C code on a world's threads (ADR-0165). glibc's own
//! implementations wait with inline futex system calls that `syscall()` never sees, so a contended one would block
//! the OS thread holding the baton. On a thread of a world's scheduler these model them on the scheduler instead;
//! on every other thread they are the C library's.
//!
//! * A mutex is locked with the real `pthread_mutex_trylock` (glibc keeps its owner, type and recursion count);
//!   while it is busy the thread blocks on the mutex's address (`pthread_mutex_lock` in a deadlock report), and an
//!   unlock wakes the world's waiters, which retry. An uncontended lock or unlock is no yield point. An
//!   error-checking mutex locked again by its owner blocks (a deadlock report) instead of returning `EDEADLK`.
//! * A condition variable is the scheduler's: a wait unlocks the mutex and blocks on the variable's address with no
//!   other world thread running between the two (no signal is lost), then locks the mutex again; a signal wakes the
//!   waiter that blocked first, a broadcast every waiter. A timed wait's deadline is on the variable's clock (glibc
//!   keeps it in bit 0 of `__wrefs`, word 9 of the `pthread_cond_t`: monotonic when set, else realtime). A thread
//!   outside the world that signals a variable a world thread waits on (or the reverse) is outside the model.

#![expect(unsafe_code, reason = "C entry points on the caller's pthread objects (ADR-0165)")]

use std::panic::Location;

use env::sim::foreign::{Member, Wake};
use libc::{c_int, pthread_cond_t, pthread_mutex_t, timespec};

use crate::real::real;
use crate::threads::{NANOS_PER_SEC, SchedCall, scheduled_call, scheduler_thread};

type MutexFn = unsafe extern "C" fn(*mut pthread_mutex_t) -> c_int;
type CondFn = unsafe extern "C" fn(*mut pthread_cond_t) -> c_int;

/// The calling thread as a thread of a live world's scheduler (see [`scheduler_thread`]); for a call that
/// waits (`waits`), only a thread bound to it.
fn world_thread(waits: bool) -> Option<(SchedCall, Member)> {
    let sched = scheduler_thread().filter(|sched| !waits || sched.is_bound())?;
    let member = sched.member.clone();
    Some((sched, member))
}

/// Lock `mutex` for `member`: the real trylock until it succeeds, blocking on the mutex's address meanwhile.
#[track_caller]
fn lock(member: &Member, mutex: *mut pthread_mutex_t, deadline: Option<u64>) -> c_int {
    let location = Location::caller();
    loop {
        let status = real!(pthread_mutex_trylock: MutexFn => (mutex));
        if status != libc::EBUSY {
            return status;
        }
        let wake = scheduled_call(member, || member.block(mutex as usize, "pthread_mutex_lock", location, deadline));
        match wake {
            Some(Wake::TimedOut) => return libc::ETIMEDOUT,
            Some(Wake::Woken) => {}
            None => return real!(pthread_mutex_lock: MutexFn => (mutex)), // the run failed: unscheduled from now on
        }
    }
}

/// Unlock `mutex` and make the world's threads waiting for it runnable; whether any was.
fn unlock(member: &Member, mutex: *mut pthread_mutex_t) -> (c_int, bool) {
    let status = real!(pthread_mutex_unlock: MutexFn => (mutex));
    (status, status == 0 && member.wake(mutex as usize, usize::MAX) > 0)
}

/// `pthread_mutex_lock(3)`.
///
/// # Safety
/// As the C function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_lock(mutex: *mut pthread_mutex_t) -> c_int {
    match world_thread(true) {
        Some((call, member)) => {
            call.count("pthread_mutex_lock");
            lock(&member, mutex, None)
        }
        None => real!(pthread_mutex_lock: MutexFn => (mutex)),
    }
}

/// `pthread_mutex_timedlock(3)`: the deadline is on the world's realtime clock.
///
/// # Safety
/// As the C function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_timedlock(mutex: *mut pthread_mutex_t, at: *const timespec) -> c_int {
    match world_thread(true) {
        Some((call, member)) => {
            call.count("pthread_mutex_timedlock");
            lock(&member, mutex, deadline(at, true))
        }
        None => real!(pthread_mutex_timedlock: unsafe extern "C" fn(*mut pthread_mutex_t, *const timespec) -> c_int
            => (mutex, at)),
    }
}

/// `pthread_mutex_unlock(3)`: a yield point when it woke a world thread.
///
/// # Safety
/// As the C function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_unlock(mutex: *mut pthread_mutex_t) -> c_int {
    let Some((_call, member)) = world_thread(false) else {
        return real!(pthread_mutex_unlock: MutexFn => (mutex));
    };
    let (status, woke) = unlock(&member, mutex);
    if woke {
        scheduled_call(&member, || member.yield_now());
    }
    status
}

/// An absolute `timespec` on the realtime clock (`realtime`) or the monotonic one, as a deadline on the world's
/// clock (ADR-0166); none for a null pointer.
fn deadline(at: *const timespec, realtime: bool) -> Option<u64> {
    // SAFETY: the caller passes a null or valid `timespec`.
    let at = unsafe { at.as_ref() }?;
    let secs = u64::try_from(at.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(at.tv_nsec).unwrap_or(0).min(NANOS_PER_SEC - 1);
    let absolute = secs.saturating_mul(NANOS_PER_SEC).saturating_add(nanos);
    let base = if realtime { crate::REALTIME_BASE_SECS.saturating_mul(NANOS_PER_SEC) } else { 0 };
    Some(absolute.saturating_sub(base))
}

/// Wait on `cond` for `member`, unlocking `mutex` meanwhile; 0, or `ETIMEDOUT` at `deadline`.
#[track_caller]
fn cond_wait(member: &Member, cond: *mut pthread_cond_t, mutex: *mut pthread_mutex_t, deadline: Option<u64>) -> c_int {
    let location = Location::caller();
    let (status, _) = unlock(member, mutex);
    if status != 0 {
        return status;
    }
    let wake = scheduled_call(member, || member.block(cond as usize, "pthread_cond_wait", location, deadline));
    let relocked = lock(member, mutex, None);
    match (relocked, wake) {
        (0, Some(Wake::TimedOut)) => libc::ETIMEDOUT,
        (status, _) => status,
    }
}

/// `pthread_cond_wait(3)`.
///
/// # Safety
/// As the C function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_cond_wait(cond: *mut pthread_cond_t, mutex: *mut pthread_mutex_t) -> c_int {
    match world_thread(true) {
        Some((call, member)) => {
            call.count("pthread_cond_wait");
            cond_wait(&member, cond, mutex, None)
        }
        None => real!(pthread_cond_wait: unsafe extern "C" fn(*mut pthread_cond_t, *mut pthread_mutex_t) -> c_int
            => (cond, mutex)),
    }
}

/// True when `cond` was initialised for `CLOCK_MONOTONIC` (glibc 2.25+: bit 0 of `__wrefs`, its 32-bit word 9).
fn is_monotonic(cond: *mut pthread_cond_t) -> bool {
    // SAFETY: a `pthread_cond_t` is 48 bytes, 8-aligned; word 9 lies inside it.
    let wrefs = unsafe { cond.cast::<u32>().add(9).read_volatile() };
    wrefs & 1 != 0
}

/// `pthread_cond_timedwait(3)`.
///
/// # Safety
/// As the C function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_cond_timedwait(
    cond: *mut pthread_cond_t,
    mutex: *mut pthread_mutex_t,
    at: *const timespec,
) -> c_int {
    type Real = unsafe extern "C" fn(*mut pthread_cond_t, *mut pthread_mutex_t, *const timespec) -> c_int;
    match world_thread(true) {
        Some((call, member)) => {
            call.count("pthread_cond_timedwait");
            cond_wait(&member, cond, mutex, deadline(at, !is_monotonic(cond)))
        }
        None => real!(pthread_cond_timedwait: Real => (cond, mutex, at)),
    }
}

/// Wake up to `count` world waiters of `cond`, then let the C library wake its own (threads outside the world).
fn signal(cond: *mut pthread_cond_t, count: usize, real_signal: impl FnOnce() -> c_int) -> c_int {
    let Some((call, member)) = world_thread(false) else { return real_signal() };
    call.count(if count == 1 { "pthread_cond_signal" } else { "pthread_cond_broadcast" });
    let woken = member.wake(cond as usize, count);
    let status = if woken < count { real_signal() } else { 0 };
    if call.is_bound() || woken > 0 {
        scheduled_call(&member, || member.yield_now());
    }
    status
}

/// `pthread_cond_signal(3)`: a yield point on a world thread.
///
/// # Safety
/// As the C function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_cond_signal(cond: *mut pthread_cond_t) -> c_int {
    signal(cond, 1, || real!(pthread_cond_signal: CondFn => (cond)))
}

/// `pthread_cond_broadcast(3)`: a yield point on a world thread.
///
/// # Safety
/// As the C function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_cond_broadcast(cond: *mut pthread_cond_t) -> c_int {
    signal(cond, usize::MAX, || real!(pthread_cond_broadcast: CondFn => (cond)))
}
