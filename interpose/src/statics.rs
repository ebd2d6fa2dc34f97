//! Futex words in the program's static data, which threads outside the world may hold (ADR-0191).
//!
//! `std` keeps process-wide locks in statics: the stack-overflow handler's thread table, taken by every thread
//! as it starts and as it ends, the environment lock, standard output and error, the panic hook. Their critical
//! sections make no call the world intercepts, so a thread of a world never holds one across a yield point, and
//! within one world they are never contended. They are contended by threads of other worlds (a swarm's parallel
//! runs, a test binary's parallel tests) and by threads of no world. Blocking such a wait in the world's
//! scheduler loses its wake (the holder wakes the kernel's waiters) and makes the seed's schedule depend on
//! another run's timing.
//!
//! So a wait on a word in the executable's writable segments first waits in the kernel, holding the baton, for
//! at most [`PROBE_ROUNDS_MAX`] × [`PROBE_SLICE_NANOS`] of real time: a holder outside the world releases and
//! wakes it, and no other thread of the world ran meanwhile (no yield point, the schedule unchanged). A holder
//! inside the world (a program's own static lock held across a yield point) cannot release while the baton is
//! held; the probe then ends and the wait blocks in the world, as any other.

#![expect(unsafe_code, reason = "the loader's program headers and the raw futex call (ADR-0191)")]

use std::ffi::{c_int, c_void};
use std::ops::Range;
use std::sync::OnceLock;

use libc::{c_long, dl_phdr_info, size_t, timespec};

use crate::real::real;

/// The real-time slice of one kernel wait of the probe.
pub(crate) const PROBE_SLICE_NANOS: i64 = 2_000_000;
/// The most kernel waits one probe makes (100 ms in all).
pub(crate) const PROBE_ROUNDS_MAX: u32 = 50;
/// The most writable segments of the executable remembered.
const SEGMENTS_MAX: usize = 16;

/// How a probe ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Woken, or the word changed: the caller returns as from a wake (the futex contract allows a spurious one).
    Released,
    /// Still held after the last round: a thread of the world holds it.
    HeldInWorld,
}

/// True when `address` lies in the executable's writable segments (`.data`, `.bss`).
pub(crate) fn is_static(address: usize) -> bool {
    static SEGMENTS: OnceLock<Vec<Range<usize>>> = OnceLock::new();
    SEGMENTS.get_or_init(writable_segments).iter().any(|segment| segment.contains(&address))
}

/// Wait in the kernel on the futex word at `address` while it holds `expected`, round by round (see the module
/// docs).
pub(crate) fn probe(address: usize, expected: u32) -> Probe {
    type RealSyscall = unsafe extern "C" fn(c_long, ...) -> c_long;
    let slice = timespec { tv_sec: 0, tv_nsec: PROBE_SLICE_NANOS };
    let op = c_long::from(libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG);
    for _ in 0..PROBE_ROUNDS_MAX {
        let status = real!(syscall: RealSyscall => (libc::SYS_futex, address as c_long, op,
            c_long::from(expected.cast_signed()), &raw const slice as c_long, 0 as c_long, 0 as c_long));
        let timed_out = status == -1 && crate::real::errno() == libc::ETIMEDOUT;
        if !timed_out {
            return Probe::Released; // woken, EAGAIN (the word changed) or EINTR: the caller re-checks
        }
    }
    Probe::HeldInWorld
}

/// The executable's writable `PT_LOAD` segments, where it is loaded.
fn writable_segments() -> Vec<Range<usize>> {
    let mut segments = Vec::new();
    // SAFETY: the callback only reads the loader's `dl_phdr_info` and writes to the `Vec` passed as its data.
    unsafe { libc::dl_iterate_phdr(Some(first_object), (&raw mut segments).cast::<c_void>()) };
    segments
}

/// `dl_iterate_phdr`'s callback: the first object is the executable; collect its writable segments and stop.
unsafe extern "C" fn first_object(info: *mut dl_phdr_info, _size: size_t, data: *mut c_void) -> c_int {
    // SAFETY: the loader passes a valid `info`; `data` is `writable_segments`' `Vec`.
    let (info, segments) = unsafe { (&*info, &mut *data.cast::<Vec<Range<usize>>>()) };
    let count = usize::from(info.dlpi_phnum);
    if info.dlpi_phdr.is_null() {
        return 1;
    }
    // SAFETY: `dlpi_phdr` points at `dlpi_phnum` program headers.
    let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, count) };
    for header in headers.iter().filter(|header| header.p_type == libc::PT_LOAD && header.p_flags & libc::PF_W != 0) {
        let (Ok(start), Ok(size)) = (usize::try_from(header.p_vaddr), usize::try_from(header.p_memsz)) else {
            continue;
        };
        let start = usize::try_from(info.dlpi_addr).unwrap_or(0).wrapping_add(start);
        if segments.len() < SEGMENTS_MAX {
            segments.push(start..start.saturating_add(size));
        }
    }
    1 // the executable only
}
