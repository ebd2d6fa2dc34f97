//! Calls a world refuses (ADR-0162): what the simulation cannot answer faithfully fails loudly (the call fails,
//! the refusal goes to stderr and into the world's record, and the outermost [`crate::Entered`] panics with it
//! when it drops) and never reaches the real disk.
//!
//! - `mmap` of a simulated descriptor: the world cannot see loads and stores to mapped memory, so it cannot say
//!   what a crash keeps.
//! - `fork`: a child process would share the world's descriptors with a second, unscheduled process.
//! - `epoll_ctl` on a simulated descriptor: readiness of a world's file is not simulated (Linux itself refuses
//!   regular files, `EPERM`).
//! - `io_uring_setup`/`io_uring_enter`/`io_uring_register` through `syscall(2)` (see `crate::syscalls`): the ring's
//!   IO would be the kernel's, on host descriptors.
//! - host paths (`crate::route`), and renames the world cannot simulate (`crate::names`).

#![expect(unsafe_code, reason = "C entry points (ADR-0162)")]

use libc::{c_int, c_void, off64_t, size_t};

use crate::fds::is_simulated;
use crate::real::{real, set_errno};
use crate::world;

type MmapFn = unsafe extern "C" fn(*mut c_void, size_t, c_int, c_int, c_int, off64_t) -> *mut c_void;

const MMAP_FIX: &str = "the world cannot see loads and stores to mapped memory, so it cannot simulate what a crash \
                        keeps. Read and write the file with read/write/pread/pwrite instead (turn off the engine's \
                        mmap option)";

/// `mmap` of a simulated file: refused. Anonymous maps and host descriptors go to the real C library.
fn refuse_mmap(kind: &'static str, fd: c_int, flags: c_int) -> bool {
    if !is_simulated(fd) || flags & libc::MAP_ANONYMOUS != 0 {
        return false;
    }
    let Some(call) = world::begin() else { return false };
    call.world.refuse(kind, format!("{kind} of simulated descriptor {fd}: {MMAP_FIX}"));
    set_errno(libc::ENODEV);
    true
}

/// `mmap(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    offset: off64_t,
) -> *mut c_void {
    if refuse_mmap("mmap", fd, flags) {
        return libc::MAP_FAILED;
    }
    real!(mmap: MmapFn => (addr, len, prot, flags, fd, offset))
}

/// `mmap64(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    offset: off64_t,
) -> *mut c_void {
    if refuse_mmap("mmap64", fd, flags) {
        return libc::MAP_FAILED;
    }
    real!(mmap64: MmapFn => (addr, len, prot, flags, fd, offset))
}

/// `fork(2)`: refused on a world thread (`ENOSYS`); elsewhere the real one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fork() -> libc::pid_t {
    if let Some(call) = world::begin() {
        call.world.refuse(
            "fork",
            "a world thread forked: the child would share the world's descriptors from a second process the world \
             does not schedule. Start processes outside the run, or test the child's logic in-process"
                .to_string(),
        );
        set_errno(libc::ENOSYS);
        return -1;
    }
    real!(fork: unsafe extern "C" fn() -> libc::pid_t => ())
}

/// `epoll_ctl(2)`: refused for a simulated descriptor (`EPERM`, as Linux answers for regular files).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, event: *mut libc::epoll_event) -> c_int {
    if is_simulated(fd)
        && let Some(call) = world::begin()
    {
        call.world.refuse(
            "epoll_ctl",
            format!(
                "epoll_ctl on simulated descriptor {fd}: readiness of a world's files is not simulated. Read the file \
                 directly (a world's file is always ready)"
            ),
        );
        set_errno(libc::EPERM);
        return -1;
    }
    type EpollCtlFn = unsafe extern "C" fn(c_int, c_int, c_int, *mut libc::epoll_event) -> c_int;
    real!(epoll_ctl: EpollCtlFn => (epfd, op, fd, event))
}
