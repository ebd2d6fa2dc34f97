//! Calls that change nothing a world keeps (ADR-0162): access-pattern advice (`posix_fadvise`), write-back hints
//! (`sync_file_range`, which makes nothing durable on Linux either), and ownership (`fchown`, `chown`, `lchown`: a
//! world keeps no owners; SQLite calls `fchown` on its journals when running as root). On a world's file or path
//! they succeed (after a yield point) once it exists; elsewhere the real C library answers.

#![expect(unsafe_code, reason = "C entry points: C strings from the caller (ADR-0162)")]

use std::path::Path;

use libc::{c_char, c_int, c_uint, gid_t, off64_t, uid_t};

use crate::ops::{self, Answer};
use crate::real::real;
use crate::route::{Routed, fail, ret_unit, route_path, world_fd};
use crate::world::World;

fn descriptor_exists(world: &World, fd: c_int, kind: &'static str) -> Answer<()> {
    ops::description(world, fd)?;
    world.env().charge_work(1, kind);
    Ok(())
}

fn fd_hint(kind: &'static str, fd: c_int) -> Option<c_int> {
    let call = world_fd(fd)?;
    Some(ret_unit(ops::answer(&call, kind, |world| descriptor_exists(world, fd, kind))))
}

type FadviseFn = unsafe extern "C" fn(c_int, off64_t, off64_t, c_int) -> c_int;

/// `posix_fadvise64(2)`: returns the error number, as the C function does.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_fadvise64(fd: c_int, offset: off64_t, len: off64_t, advice: c_int) -> c_int {
    match world_fd(fd) {
        Some(call) => ops::answer(&call, "posix_fadvise64", |world| descriptor_exists(world, fd, "posix_fadvise64"))
            .err()
            .unwrap_or(0),
        None => real!(posix_fadvise64: FadviseFn => (fd, offset, len, advice)),
    }
}

/// `posix_fadvise(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_fadvise(fd: c_int, offset: off64_t, len: off64_t, advice: c_int) -> c_int {
    match world_fd(fd) {
        Some(call) => ops::answer(&call, "posix_fadvise", |world| descriptor_exists(world, fd, "posix_fadvise"))
            .err()
            .unwrap_or(0),
        None => real!(posix_fadvise: FadviseFn => (fd, offset, len, advice)),
    }
}

/// `sync_file_range(2)`: starts write-back on Linux and promises no durability, so a world does nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sync_file_range(fd: c_int, offset: off64_t, len: off64_t, flags: c_uint) -> c_int {
    type SyncFileRangeFn = unsafe extern "C" fn(c_int, off64_t, off64_t, c_uint) -> c_int;
    fd_hint("sync_file_range", fd)
        .unwrap_or_else(|| real!(sync_file_range: SyncFileRangeFn => (fd, offset, len, flags)))
}

/// `fchown(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchown(fd: c_int, owner: uid_t, group: gid_t) -> c_int {
    fd_hint("fchown", fd)
        .unwrap_or_else(|| real!(fchown: unsafe extern "C" fn(c_int, uid_t, gid_t) -> c_int => (fd, owner, group)))
}

fn path_hint(kind: &'static str, path: *const c_char) -> Option<c_int> {
    // SAFETY: `path` comes from the C caller, null or NUL-terminated.
    match unsafe { route_path(kind, None, path) } {
        Routed::Real => None,
        Routed::Fail(errno) => Some(fail(errno)),
        Routed::World(call, world_path) => {
            Some(ret_unit(ops::answer(&call, kind, |world| ops::node(world, Path::new(&world_path)).map(drop))))
        }
    }
}

type ChownFn = unsafe extern "C" fn(*const c_char, uid_t, gid_t) -> c_int;

/// `chown(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chown(path: *const c_char, owner: uid_t, group: gid_t) -> c_int {
    path_hint("chown", path).unwrap_or_else(|| real!(chown: ChownFn => (path, owner, group)))
}

/// `lchown(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lchown(path: *const c_char, owner: uid_t, group: gid_t) -> c_int {
    path_hint("lchown", path).unwrap_or_else(|| real!(lchown: ChownFn => (path, owner, group)))
}
