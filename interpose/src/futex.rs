//! The futex system call that `std::sync` (`Mutex`, `Condvar`, `RwLock`, `Once`), `std::thread::park` (and so
//! `mpsc`) and `parking_lot` block on, as the world's scheduler's blocking points (ADR-0165). On Linux `std` calls
//! `libc::syscall(SYS_futex, ..)`; `crate::syscalls` defines `syscall` and hands `SYS_futex` to `answer_futex`,
//! which answers it for a thread of a live world's scheduler (bound to that world, or the unbound thread driving
//! it); every other call goes to the real one.
//!
//! * `FUTEX_WAIT` and `FUTEX_WAIT_BITSET` (bitset "any"): if the word still holds the expected value the thread
//!   blocks on the word's address under the baton (no other world thread runs between the comparison and the
//!   block, so no wake is lost); a timeout is a deadline on the world's clock (ADR-0166): the wait ends when the
//!   clock reaches it, and a world where nobody else can run jumps the clock there. An untimed wait with nobody
//!   able to run is a deadlock naming [`FUTEX_WAIT_OPERATION`].
//! * `FUTEX_WAKE` and `FUTEX_WAKE_BITSET` (bitset "any") wake up to `n` of the world's waiters in the order they
//!   blocked, then the kernel's for the rest (a word `env` itself or a thread outside the world waits on), and are
//!   a yield point.
//! * Any other futex operation (requeue, `WAKE_OP`, priority inheritance, a partial bitset) is refused: the run
//!   fails naming it, and the call fails with `ENOSYS`.
//!
//! `syscall` is variadic in C (see `crate::syscalls`): `std` passes `FUTEX_WAIT_BITSET`'s bitset as the sixth
//! argument after the number, on the stack, which the non-variadic definition reads as its seventh parameter: the
//! tests of the bitset forms (a partial bitset is refused, "any" is served) check that it arrives.

#![expect(unsafe_code, reason = "the C entry point `syscall` and the futex word behind a raw address (ADR-0165)")]

use std::panic::Location;
use std::sync::atomic::{AtomicU32, Ordering};

use env::sim::foreign::{Member, Wake};
use libc::{c_long, timespec};

use crate::real::{real, set_errno};
use crate::threads::{NANOS_PER_SEC, SchedCall, scheduled_call, scheduler_thread};

/// The operation a thread blocked in a futex wait is named by in a deadlock report.
pub const FUTEX_WAIT_OPERATION: &str =
    "futex wait (a std::sync Mutex, Condvar, RwLock or Once, thread::park or an mpsc channel)";
/// The same, for a wait with a timeout.
pub const FUTEX_TIMED_WAIT_OPERATION: &str = "futex wait with a timeout";
/// The bitset that matches every waker (`FUTEX_BITSET_MATCH_ANY`).
const BITSET_ANY: u32 = u32::MAX;

type RealSyscall = unsafe extern "C" fn(c_long, ...) -> c_long;

/// The world's answer to `syscall(SYS_futex, args..)` (`crate::syscalls` hands it over before anything else), or
/// `None` when it is not the world's (the caller forwards it): `env`'s own locking, this crate's own code, or a
/// thread outside every live world's scheduler.
pub(crate) fn answer_futex(args: [c_long; 6]) -> Option<c_long> {
    let sched = scheduler_thread()?;
    let [address, op, value, timeout, _, bitset] = args;
    let op = i32::try_from(op).ok()?;
    let command = op & !(libc::FUTEX_PRIVATE_FLAG | libc::FUTEX_CLOCK_REALTIME);
    // The word and the bitset are 32-bit C ints passed as longs: the low 32 bits are the value.
    let (expected, bitset) = (value as u32, bitset as u32);
    let address = usize::try_from(address).ok()?;
    let waits = matches!(command, libc::FUTEX_WAIT | libc::FUTEX_WAIT_BITSET);
    if waits && !sched.is_bound() {
        return None; // the thread driving the world waits in the kernel (see `scheduler_thread`)
    }
    Some(match command {
        libc::FUTEX_WAIT => {
            let deadline = relative_deadline(&sched.member, timeout);
            wait(&sched, address, expected, deadline)
        }
        libc::FUTEX_WAIT_BITSET if bitset == BITSET_ANY => {
            let deadline = absolute_deadline(timeout, op & libc::FUTEX_CLOCK_REALTIME != 0);
            wait(&sched, address, expected, deadline)
        }
        libc::FUTEX_WAKE => wake(&sched, address, value),
        libc::FUTEX_WAKE_BITSET if bitset == BITSET_ANY => wake(&sched, address, value),
        _ => refuse(&sched, command, bitset),
    })
}

/// A wait's deadline on the world's clock: none, or a timeout that already passed.
#[derive(Clone, Copy, Debug)]
enum Deadline {
    None,
    At(u64),
}

fn read_timespec(pointer: c_long) -> Option<u64> {
    let pointer = pointer as *const timespec;
    // SAFETY: the caller passes a null or valid `timespec` (the futex contract).
    let value = unsafe { pointer.as_ref() }?;
    let secs = u64::try_from(value.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(value.tv_nsec).unwrap_or(0).min(NANOS_PER_SEC - 1);
    Some(secs.saturating_mul(NANOS_PER_SEC).saturating_add(nanos))
}

/// `FUTEX_WAIT`'s timeout is relative.
fn relative_deadline(member: &Member, timeout: c_long) -> Deadline {
    match read_timespec(timeout) {
        Some(nanos) => Deadline::At(member.now_nanos().saturating_add(nanos)),
        None => Deadline::None,
    }
}

/// `FUTEX_WAIT_BITSET`'s timeout is absolute: on `CLOCK_MONOTONIC` (the world's clock as `clock_gettime` reads
/// it) or, with `FUTEX_CLOCK_REALTIME`, on the realtime clock (the same plus [`crate::REALTIME_BASE_SECS`]).
fn absolute_deadline(timeout: c_long, realtime: bool) -> Deadline {
    let Some(nanos) = read_timespec(timeout) else { return Deadline::None };
    let base = if realtime { crate::REALTIME_BASE_SECS.saturating_mul(NANOS_PER_SEC) } else { 0 };
    Deadline::At(nanos.saturating_sub(base))
}

#[track_caller]
fn wait(sched: &SchedCall, address: usize, expected: u32, deadline: Deadline) -> c_long {
    let member = &sched.member;
    let location = Location::caller();
    // SAFETY: the futex contract: `address` is the caller's aligned 32-bit futex word, alive during the call.
    let word = unsafe { &*(address as *const AtomicU32) };
    let kind = if matches!(deadline, Deadline::At(_)) { "futex_timed_wait" } else { "futex_wait" };
    sched.count(kind);
    if word.load(Ordering::SeqCst) != expected {
        set_errno(libc::EAGAIN);
        return -1;
    }
    if crate::statics::is_static(address) {
        match crate::statics::probe(address, expected) {
            crate::statics::Probe::Released => {
                sched.count("futex_static_released");
                return 0;
            }
            crate::statics::Probe::HeldInWorld => sched.count("futex_static_held_in_world"),
        }
    }
    let (operation, deadline) = match deadline {
        Deadline::None => (FUTEX_WAIT_OPERATION, None),
        Deadline::At(at) => (FUTEX_TIMED_WAIT_OPERATION, Some(at)),
    };
    let wake = scheduled_call(member, || member.block(address, operation, location, deadline));
    if wake == Some(Wake::TimedOut) {
        set_errno(libc::ETIMEDOUT);
        return -1;
    }
    0 // woken (or the run failed: the caller re-checks its word and waits again, unscheduled)
}

fn wake(sched: &SchedCall, address: usize, count: c_long) -> c_long {
    let member = &sched.member;
    sched.count("futex_wake");
    let count = usize::try_from(count).unwrap_or(0);
    let ours = member.wake(address, count);
    let mut woken = c_long::try_from(ours).unwrap_or(c_long::MAX);
    let rest = count - ours;
    if rest > 0 {
        // A waiter outside the scheduler (`env`'s own locking, a thread of no world) sleeps in the kernel.
        let rest = c_long::try_from(rest).unwrap_or(c_long::MAX);
        let op = c_long::from(libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG);
        let kernel = real!(syscall: RealSyscall => (libc::SYS_futex, address as c_long, op, rest, 0, 0, 0 as c_long));
        woken += kernel.max(0);
    }
    // A wake on a static word that woke none of the world's threads released a lock a thread outside the world
    // waited for (ADR-0191): not a yield point, so the schedule does not depend on another run's timing.
    let outside_only = ours == 0 && crate::statics::is_static(address);
    if (sched.is_bound() && !outside_only) || ours > 0 {
        scheduled_call(member, || member.yield_now());
    }
    woken
}

fn refuse(sched: &SchedCall, command: i32, bitset: u32) -> c_long {
    let message = format!(
        "futex operation {command} (bitset {bitset:#x}) on a thread of a simulated world: only FUTEX_WAIT, \
         FUTEX_WAKE and their bitset forms with FUTEX_BITSET_MATCH_ANY are modelled (ADR-0165); requeue, WAKE_OP \
         and priority-inheritance futexes are not"
    );
    if let Some(call) = &sched.call {
        call.world.refuse("futex", message.clone());
    }
    sched.member.fail(Box::new(message));
    set_errno(libc::ENOSYS);
    -1
}
