//! The clock and sleeps for bound threads: every clock reads the world's simulated clock (`Env::now`), and a sleep
//! lets simulated time pass (`Env::sleep`) without blocking the OS thread (ADR-0162).
//!
//! `CLOCK_REALTIME` (and `gettimeofday`, `time`) read [`REALTIME_BASE_SECS`] plus the simulated time, so that
//! `SystemTime` looks like a date and every run of a seed sees the same one; every other clock (monotonic, boot,
//! CPU time) reads the simulated time itself.

#![expect(unsafe_code, reason = "C entry points: raw out-pointers from the caller (ADR-0162)")]

use std::time::Duration;

use env::Env;
use libc::{c_int, c_long, c_uint, time_t, timespec, timeval};

use crate::real::{real, set_errno};
use crate::world::{self, Call};

/// What `CLOCK_REALTIME` reads at simulated time 0: 2026-01-01T00:00:00Z.
pub const REALTIME_BASE_SECS: u64 = 1_767_225_600;
const NANOS_PER_SEC: u64 = 1_000_000_000;

/// The world's time on `clock`, or `None` (the call then fails with `EIO`) when an earlier call on this thread
/// panicked.
fn world_time(call: &Call, kind: &'static str, clock: c_int) -> Option<Duration> {
    call.world.count(kind);
    let now = world::guarded(|| call.world.env().now()).ok()?;
    Some(if clock == libc::CLOCK_REALTIME || clock == libc::CLOCK_REALTIME_COARSE || clock == libc::CLOCK_TAI {
        now.saturating_add(Duration::from_secs(REALTIME_BASE_SECS))
    } else {
        now
    })
}

fn to_timespec(time: Duration) -> timespec {
    timespec {
        tv_sec: time_t::try_from(time.as_secs()).unwrap_or(time_t::MAX),
        tv_nsec: c_long::from(time.subsec_nanos().cast_signed()),
    }
}

/// `clock_gettime(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clock_gettime(clock: libc::clockid_t, out: *mut timespec) -> c_int {
    let Some(call) = world::begin() else {
        return real!(clock_gettime: unsafe extern "C" fn(libc::clockid_t, *mut timespec) -> c_int => (clock, out));
    };
    let Some(time) = world_time(&call, "clock_gettime", clock) else {
        set_errno(libc::EIO);
        return -1;
    };
    if out.is_null() {
        set_errno(libc::EFAULT);
        return -1;
    }
    // SAFETY: the caller passes a valid `timespec` out-pointer (checked non-null).
    unsafe { out.write(to_timespec(time)) };
    0
}

/// `gettimeofday(2)`: the realtime clock in microseconds; the time zone, if asked, is UTC.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gettimeofday(out: *mut timeval, zone: *mut libc::c_void) -> c_int {
    let Some(call) = world::begin() else {
        return real!(gettimeofday: unsafe extern "C" fn(*mut timeval, *mut libc::c_void) -> c_int => (out, zone));
    };
    let Some(time) = world_time(&call, "gettimeofday", libc::CLOCK_REALTIME) else {
        set_errno(libc::EIO);
        return -1;
    };
    if !out.is_null() {
        let micros = libc::suseconds_t::from(time.subsec_micros().cast_signed());
        let tv_sec = time_t::try_from(time.as_secs()).unwrap_or(time_t::MAX);
        // SAFETY: a non-null `timeval` out-pointer from the caller.
        unsafe { out.write(timeval { tv_sec, tv_usec: micros }) };
    }
    if !zone.is_null() {
        // SAFETY: a non-null `struct timezone` (two ints) out-pointer from the caller.
        unsafe { zone.cast::<[c_int; 2]>().write([0, 0]) };
    }
    0
}

/// `time(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn time(out: *mut time_t) -> time_t {
    let Some(call) = world::begin() else {
        return real!(time: unsafe extern "C" fn(*mut time_t) -> time_t => (out));
    };
    let Some(now) = world_time(&call, "time", libc::CLOCK_REALTIME) else {
        set_errno(libc::EIO);
        return -1;
    };
    let secs = time_t::try_from(now.as_secs()).unwrap_or(time_t::MAX);
    if !out.is_null() {
        // SAFETY: a non-null `time_t` out-pointer from the caller.
        unsafe { out.write(secs) };
    }
    secs
}

/// Let `duration` pass on the world's clock; false when an earlier call on this thread panicked.
fn world_sleep(call: &Call, kind: &'static str, duration: Duration) -> bool {
    call.world.count(kind);
    world::guarded(|| crate::threads::sleep(&call.world.env(), duration)).is_ok()
}

fn from_timespec(value: &timespec) -> Option<Duration> {
    let secs = u64::try_from(value.tv_sec).ok()?;
    let nanos = u32::try_from(value.tv_nsec).ok().filter(|nanos| u64::from(*nanos) < NANOS_PER_SEC)?;
    Some(Duration::new(secs, nanos))
}

/// `nanosleep(2)`: simulated time passes; the OS thread does not block.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nanosleep(request: *const timespec, remaining: *mut timespec) -> c_int {
    let Some(call) = world::begin() else {
        return real!(nanosleep: unsafe extern "C" fn(*const timespec, *mut timespec) -> c_int => (request, remaining));
    };
    // SAFETY: a null or valid `timespec` from the caller.
    let Some(duration) = (unsafe { request.as_ref() }).and_then(from_timespec) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    if !world_sleep(&call, "nanosleep", duration) {
        set_errno(libc::EIO);
        return -1;
    }
    0
}

/// `clock_nanosleep(2)`: a relative sleep lets the time pass; an absolute one (`TIMER_ABSTIME`) lets the time
/// until the deadline on that clock pass. Returns an error number, as the C function does.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clock_nanosleep(
    clock: libc::clockid_t,
    flags: c_int,
    request: *const timespec,
    remaining: *mut timespec,
) -> c_int {
    let Some(call) = world::begin() else {
        return real!(clock_nanosleep: unsafe extern "C" fn(libc::clockid_t, c_int, *const timespec, *mut timespec)
            -> c_int => (clock, flags, request, remaining));
    };
    // SAFETY: a null or valid `timespec` from the caller.
    let Some(mut duration) = (unsafe { request.as_ref() }).and_then(from_timespec) else {
        return libc::EINVAL;
    };
    if flags & libc::TIMER_ABSTIME != 0 {
        let Some(now) = world_time(&call, "clock_nanosleep", clock) else { return libc::EIO };
        duration = duration.saturating_sub(now);
    }
    if world_sleep(&call, "clock_nanosleep", duration) { 0 } else { libc::EIO }
}

/// `usleep(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn usleep(micros: c_uint) -> c_int {
    let Some(call) = world::begin() else {
        return real!(usleep: unsafe extern "C" fn(c_uint) -> c_int => (micros));
    };
    if world_sleep(&call, "usleep", Duration::from_micros(u64::from(micros))) {
        0
    } else {
        set_errno(libc::EIO);
        -1
    }
}
