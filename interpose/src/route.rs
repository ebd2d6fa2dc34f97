//! Routing an intercepted call: to the world (a simulated descriptor, a path under the world's directory), to a
//! fixed machine-shape answer, to a refusal (a host path), or to the real C library (ADR-0163).

#![expect(unsafe_code, reason = "path arguments arrive as raw C strings (ADR-0162)")]

use std::ffi::CStr;
use std::path::PathBuf;

use libc::{c_char, c_int};

use crate::fds::{Target, is_simulated};
use crate::ops::Answer;
use crate::paths::{Base, Place, path_of, place};
use crate::world::{self, Call};

/// Where a path call goes.
#[derive(Debug)]
pub(crate) enum Routed {
    /// The real C library (an unbound thread, this crate's own call, a host path while the thread panics).
    Real,
    /// The world, with its path.
    World(Call, PathBuf),
    /// Fail with this errno at once (a machine-shape file: `ENOENT`; a refused host path: `EACCES`).
    Fail(c_int),
}

/// The world's call for descriptor `fd` when it is simulated and the thread is bound.
pub(crate) fn world_fd(fd: c_int) -> Option<Call> {
    if is_simulated(fd) { world::begin() } else { None }
}

/// Route a call `kind` on the C string `raw`, relative to `dirfd` (`None` or `AT_FDCWD`: the working directory).
///
/// # Safety
/// `raw` is null or a NUL-terminated string valid for the call.
pub(crate) unsafe fn route_path(kind: &'static str, dirfd: Option<c_int>, raw: *const c_char) -> Routed {
    if raw.is_null() {
        return Routed::Real;
    }
    let Some(call) = world::begin() else { return Routed::Real };
    // SAFETY: the caller's contract.
    match unsafe { route_in(&call, kind, dirfd, raw) } {
        Ok(world_path) => Routed::World(call, world_path),
        Err(routed) => routed,
    }
}

/// Route a second path of the same call (`rename`'s target): the world's path, or how the call goes instead.
///
/// # Safety
/// `raw` is null or a NUL-terminated string valid for the call.
pub(crate) unsafe fn route_in(
    call: &Call,
    kind: &'static str,
    dirfd: Option<c_int>,
    raw: *const c_char,
) -> Result<PathBuf, Routed> {
    if raw.is_null() {
        return Err(Routed::Fail(libc::EFAULT));
    }
    // SAFETY: the caller's contract: a NUL-terminated string.
    let path = path_of(unsafe { CStr::from_ptr(raw) });
    let base = match dirfd {
        None | Some(libc::AT_FDCWD) => Base::Cwd,
        Some(_) if path.is_absolute() => Base::Cwd,
        Some(fd) if is_simulated(fd) => match crate::ops::description(&call.world, fd) {
            Ok(description) if matches!(description.target, Target::Dir) => Base::WorldDir(description.path.clone()),
            Ok(_) => return Err(Routed::Fail(libc::ENOTDIR)),
            Err(errno) => return Err(Routed::Fail(errno)),
        },
        Some(_) => Base::HostDir,
    };
    match place(&call.world, &base, path) {
        Place::World(world_path) => Ok(world_path),
        Place::Shape => {
            call.world.count("machine_shape_file");
            Err(Routed::Fail(libc::ENOENT))
        }
        Place::Host(_) if std::thread::panicking() => Err(Routed::Real),
        Place::Host(host) => {
            call.world.refuse(
                kind,
                format!(
                    "a world thread named the host path {} (the run would touch the host). Name paths under the \
                     world's directory ({}, interpose::Entered::dir), or do this outside the run, on a thread not \
                     bound to a world",
                    host.display(),
                    call.world.dir.display()
                ),
            );
            Err(Routed::Fail(libc::EACCES))
        }
    }
}

/// The C return value of an answer: the value, or -1 with `errno` set.
pub(crate) fn ret<T>(answer: Answer<T>, to_c: impl FnOnce(T) -> isize) -> isize {
    match answer {
        Ok(value) => to_c(value),
        Err(errno) => {
            crate::real::set_errno(errno);
            -1
        }
    }
}

/// [`ret`] for calls that return `int` success (0).
pub(crate) fn ret_unit(answer: Answer<()>) -> c_int {
    match answer {
        Ok(()) => 0,
        Err(errno) => {
            crate::real::set_errno(errno);
            -1
        }
    }
}

/// Fail with `errno` (-1).
pub(crate) fn fail(errno: c_int) -> c_int {
    crate::real::set_errno(errno);
    -1
}
