//! The machine's shape as a world sees it (ADR-0163): [`WORLD_CPUS`] processors, whatever the host has.
//! `std::thread::available_parallelism` asks `sched_getaffinity` (and the cgroup files, absent in a world:
//! `crate::paths::MACHINE_SHAPE_FILES`), then `sysconf(_SC_NPROCESSORS_ONLN)`; C code asks `sysconf` or
//! `get_nprocs`. Other `sysconf` names (the page size, ...) are the host's: they do not vary between runs on one
//! host and the world cannot answer them differently without breaking the C library.

#![expect(unsafe_code, reason = "C entry points: raw CPU sets from the caller (ADR-0162)")]

use libc::{c_int, c_long, cpu_set_t, pid_t, size_t};

use crate::ops::{self, Answer};
use crate::real::real;
use crate::route::ret_unit;
use crate::world::{self, Call};

/// The processors a world has.
pub const WORLD_CPUS: usize = 4;

fn answer_count(call: &Call, kind: &'static str) -> usize {
    ops::answer(call, kind, |world| {
        world.env().charge_work(1, kind);
        Ok(WORLD_CPUS)
    })
    .unwrap_or(WORLD_CPUS)
}

fn fill_affinity(size: size_t, mask: *mut cpu_set_t) -> Answer<()> {
    if mask.is_null() {
        return Err(libc::EFAULT);
    }
    if size < size_of::<cpu_set_t>() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's CPU set of `size` bytes, at least one `cpu_set_t` (checked).
    unsafe {
        mask.cast::<u8>().write_bytes(0, size);
        for cpu in 0..WORLD_CPUS {
            libc::CPU_SET(cpu, &mut *mask);
        }
    }
    Ok(())
}

/// `sched_getaffinity(2)`: the world's [`WORLD_CPUS`] processors, 0 to 3.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sched_getaffinity(pid: pid_t, size: size_t, mask: *mut cpu_set_t) -> c_int {
    let Some(call) = world::begin() else {
        type AffinityFn = unsafe extern "C" fn(pid_t, size_t, *mut cpu_set_t) -> c_int;
        return real!(sched_getaffinity: AffinityFn => (pid, size, mask));
    };
    ret_unit(ops::answer(&call, "sched_getaffinity", |world| {
        world.env().charge_work(1, "sched_getaffinity");
        fill_affinity(size, mask)
    }))
}

/// `sysconf(3)`: `_SC_NPROCESSORS_ONLN` and `_SC_NPROCESSORS_CONF` are the world's; other names the host's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sysconf(name: c_int) -> c_long {
    if (name == libc::_SC_NPROCESSORS_ONLN || name == libc::_SC_NPROCESSORS_CONF)
        && let Some(call) = world::begin()
    {
        return c_long::try_from(answer_count(&call, "sysconf")).unwrap_or(1);
    }
    real!(sysconf: unsafe extern "C" fn(c_int) -> c_long => (name))
}

/// `get_nprocs(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn get_nprocs() -> c_int {
    match world::begin() {
        Some(call) => c_int::try_from(answer_count(&call, "get_nprocs")).unwrap_or(1),
        None => real!(get_nprocs: unsafe extern "C" fn() -> c_int => ()),
    }
}

/// `get_nprocs_conf(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn get_nprocs_conf() -> c_int {
    match world::begin() {
        Some(call) => c_int::try_from(answer_count(&call, "get_nprocs_conf")).unwrap_or(1),
        None => real!(get_nprocs_conf: unsafe extern "C" fn() -> c_int => ()),
    }
}
