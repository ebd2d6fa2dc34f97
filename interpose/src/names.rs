//! Name entry points on world paths: `unlink`, `unlinkat`, `rename`, `renameat`, `renameat2`, `mkdir`, `mkdirat`,
//! `rmdir`, `access`, `faccessat`, `realpath` (ADR-0162). What the world cannot simulate (renaming a directory or
//! across directories) is refused, not approximated.

#![expect(unsafe_code, reason = "C entry points: C strings and out-buffers from the caller (ADR-0162)")]

use std::path::Path;

use libc::{c_char, c_int, c_uint, mode_t};

use crate::ops::{self, Answer};
use crate::real::real;
use crate::route::{Routed, fail, ret_unit, route_in, route_path};
use crate::world::{Call, World};

/// Route a one-path call; `None` means the real C library answers.
fn one_path(
    kind: &'static str,
    dirfd: Option<c_int>,
    path: *const c_char,
    answer: impl FnOnce(&World, &Path) -> Answer<()>,
) -> Option<c_int> {
    // SAFETY: `path` comes from the C caller, null or NUL-terminated.
    match unsafe { route_path(kind, dirfd, path) } {
        Routed::Real => None,
        Routed::Fail(errno) => Some(fail(errno)),
        Routed::World(call, world_path) => Some(ret_unit(ops::answer(&call, kind, |world| answer(world, &world_path)))),
    }
}

/// `unlink(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    one_path("unlink", None, path, ops::unlink)
        .unwrap_or_else(|| real!(unlink: unsafe extern "C" fn(*const c_char) -> c_int => (path)))
}

/// `unlinkat(2)`: a file, or with `AT_REMOVEDIR` an empty directory.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    let answer = |world: &World, world_path: &Path| {
        if flags & libc::AT_REMOVEDIR != 0 { ops::rmdir(world, world_path) } else { ops::unlink(world, world_path) }
    };
    one_path("unlinkat", Some(dirfd), path, answer).unwrap_or_else(
        || real!(unlinkat: unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int => (dirfd, path, flags)),
    )
}

/// `rmdir(2)`: an empty world directory (its removal is durable once the parent is synced).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rmdir(path: *const c_char) -> c_int {
    one_path("rmdir", None, path, ops::rmdir)
        .unwrap_or_else(|| real!(rmdir: unsafe extern "C" fn(*const c_char) -> c_int => (path)))
}

/// `mkdir(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkdir(path: *const c_char, mode: mode_t) -> c_int {
    one_path("mkdir", None, path, ops::mkdir)
        .unwrap_or_else(|| real!(mkdir: unsafe extern "C" fn(*const c_char, mode_t) -> c_int => (path, mode)))
}

/// `mkdirat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mkdirat(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int {
    one_path("mkdirat", Some(dirfd), path, ops::mkdir).unwrap_or_else(
        || real!(mkdirat: unsafe extern "C" fn(c_int, *const c_char, mode_t) -> c_int => (dirfd, path, mode)),
    )
}

fn exists(world: &World, path: &Path) -> Answer<()> {
    ops::node(world, path).map(drop)
}

/// `access(2)`: whether the path exists (a world has no permissions).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    one_path("access", None, path, exists)
        .unwrap_or_else(|| real!(access: unsafe extern "C" fn(*const c_char, c_int) -> c_int => (path, mode)))
}

/// `faccessat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn faccessat(dirfd: c_int, path: *const c_char, mode: c_int, flags: c_int) -> c_int {
    type FaccessatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, c_int) -> c_int;
    one_path("faccessat", Some(dirfd), path, exists)
        .unwrap_or_else(|| real!(faccessat: FaccessatFn => (dirfd, path, mode, flags)))
}

/// `readlink` of a world path: a world has no symbolic links, so an existing node is `EINVAL` (not a link).
fn not_a_link(world: &World, path: &Path) -> Answer<()> {
    exists(world, path).and(Err(libc::EINVAL))
}

type ReadlinkFn = unsafe extern "C" fn(*const c_char, *mut c_char, libc::size_t) -> libc::ssize_t;
type ReadlinkatFn = unsafe extern "C" fn(c_int, *const c_char, *mut c_char, libc::size_t) -> libc::ssize_t;

/// `readlink(2)` (SQLite's `unixFullPathname` asks only of a path `lstat` called a link, which none in a world is).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readlink(path: *const c_char, buf: *mut c_char, size: libc::size_t) -> libc::ssize_t {
    match one_path("readlink", None, path, not_a_link) {
        Some(failed) => failed as libc::ssize_t,
        None => real!(readlink: ReadlinkFn => (path, buf, size)),
    }
}

/// `readlinkat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readlinkat(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut c_char,
    size: libc::size_t,
) -> libc::ssize_t {
    match one_path("readlinkat", Some(dirfd), path, not_a_link) {
        Some(failed) => failed as libc::ssize_t,
        None => real!(readlinkat: ReadlinkatFn => (dirfd, path, buf, size)),
    }
}

/// Route a two-path call: both in the world (answered), both real (`None`), or mixed (`EXDEV`, as between two
/// file systems; a host path among them is refused by the routing).
fn two_paths(
    kind: &'static str,
    from: (Option<c_int>, *const c_char),
    to: (Option<c_int>, *const c_char),
    answer: impl FnOnce(&Call, &Path, &Path) -> c_int,
) -> Option<c_int> {
    // SAFETY: both paths come from the C caller, null or NUL-terminated.
    let (call, source) = match unsafe { route_path(kind, from.0, from.1) } {
        Routed::World(call, source) => (call, source),
        Routed::Fail(errno) => return Some(fail(errno)),
        Routed::Real => {
            // The source is the host's (or the thread is not a world's): a world target is across file systems.
            let call = crate::world::begin()?;
            // SAFETY: as above.
            return match unsafe { route_in(&call, kind, to.0, to.1) } {
                Ok(_) => Some(fail(libc::EXDEV)),
                Err(_) => None,
            };
        }
    };
    // SAFETY: as above.
    match unsafe { route_in(&call, kind, to.0, to.1) } {
        Ok(target) => Some(answer(&call, &source, &target)),
        Err(Routed::Fail(errno)) => Some(fail(errno)),
        Err(_) => Some(fail(libc::EXDEV)),
    }
}

fn rename_in_world(call: &Call, kind: &'static str, from: &Path, to: &Path, no_replace: bool) -> c_int {
    ret_unit(ops::answer(call, kind, |world| {
        if no_replace && ops::node(world, to).is_ok() {
            return Err(libc::EEXIST);
        }
        ops::rename(world, from, to).unwrap_or_else(|| {
            world.refuse(
                kind,
                format!(
                    "renaming {} to {} is not simulated: the world renames files within one directory only \
                     (env::Env::rename); rename within the directory, or extend env::SimEnv first",
                    from.display(),
                    to.display()
                ),
            );
            Err(libc::EXDEV)
        })
    }))
}

/// `rename(2)`: a file within one directory, replacing the target.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rename(from: *const c_char, to: *const c_char) -> c_int {
    two_paths("rename", (None, from), (None, to), |call, a, b| rename_in_world(call, "rename", a, b, false))
        .unwrap_or_else(|| real!(rename: unsafe extern "C" fn(*const c_char, *const c_char) -> c_int => (from, to)))
}

/// `renameat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn renameat(from_dir: c_int, from: *const c_char, to_dir: c_int, to: *const c_char) -> c_int {
    type RenameatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char) -> c_int;
    two_paths("renameat", (Some(from_dir), from), (Some(to_dir), to), |call, a, b| {
        rename_in_world(call, "renameat", a, b, false)
    })
    .unwrap_or_else(|| real!(renameat: RenameatFn => (from_dir, from, to_dir, to)))
}

/// `renameat2(2)`: flags 0 or `RENAME_NOREPLACE` (`RENAME_EXCHANGE` and `RENAME_WHITEOUT`: `EINVAL`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn renameat2(
    from_dir: c_int,
    from: *const c_char,
    to_dir: c_int,
    to: *const c_char,
    flags: c_uint,
) -> c_int {
    type Renameat2Fn = unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_uint) -> c_int;
    two_paths("renameat2", (Some(from_dir), from), (Some(to_dir), to), |call, a, b| match flags {
        0 => rename_in_world(call, "renameat2", a, b, false),
        libc::RENAME_NOREPLACE => rename_in_world(call, "renameat2", a, b, true),
        _ => fail(libc::EINVAL),
    })
    .unwrap_or_else(|| real!(renameat2: Renameat2Fn => (from_dir, from, to_dir, to, flags)))
}

/// `realpath(3)`: what `fs::canonicalize` calls. A world path resolves lexically to its host-looking form (it
/// must exist); the result is `malloc`ed when `resolved` is null, as glibc's is.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn realpath(path: *const c_char, resolved: *mut c_char) -> *mut c_char {
    type RealpathFn = unsafe extern "C" fn(*const c_char, *mut c_char) -> *mut c_char;
    // SAFETY: `path` comes from the C caller, null or NUL-terminated.
    let (call, world_path) = match unsafe { route_path("realpath", None, path) } {
        Routed::Real => return real!(realpath: RealpathFn => (path, resolved)),
        Routed::Fail(errno) => {
            fail(errno);
            return std::ptr::null_mut();
        }
        Routed::World(call, world_path) => (call, world_path),
    };
    let answer = ops::answer(&call, "realpath", |world| {
        ops::node(world, &world_path)?;
        let host = world.host_path(&world_path);
        let bytes = host.as_os_str().as_encoded_bytes();
        if bytes.len() >= libc::PATH_MAX as usize {
            return Err(libc::ENAMETOOLONG);
        }
        let out = if resolved.is_null() {
            // SAFETY: `malloc` is not one of this crate's entry points; the caller frees the result.
            unsafe { libc::malloc(bytes.len() + 1).cast::<c_char>() }
        } else {
            resolved
        };
        if out.is_null() {
            return Err(libc::ENOMEM);
        }
        // SAFETY: `out` holds PATH_MAX bytes (the caller's buffer) or `len + 1` (ours); `bytes` has no NUL.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), out, bytes.len());
            out.add(bytes.len()).write(0);
        }
        Ok(out)
    });
    answer.unwrap_or_else(|errno| {
        fail(errno);
        std::ptr::null_mut()
    })
}

/// A world keeps no permissions: changing them succeeds once the file exists (`fs::copy` sets the copy's, and
/// `fs::set_permissions` a file's), and `stat` keeps reporting 0644 or 0755 (ADR-0163).
fn keep_mode(world: &World, path: &Path) -> Answer<()> {
    ops::node(world, path).map(drop)
}

/// `chmod(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn chmod(path: *const c_char, mode: mode_t) -> c_int {
    one_path("chmod", None, path, keep_mode)
        .unwrap_or_else(|| real!(chmod: unsafe extern "C" fn(*const c_char, mode_t) -> c_int => (path, mode)))
}

/// `fchmodat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchmodat(dirfd: c_int, path: *const c_char, mode: mode_t, flags: c_int) -> c_int {
    type FchmodatFn = unsafe extern "C" fn(c_int, *const c_char, mode_t, c_int) -> c_int;
    one_path("fchmodat", Some(dirfd), path, keep_mode)
        .unwrap_or_else(|| real!(fchmodat: FchmodatFn => (dirfd, path, mode, flags)))
}

/// `fchmod(2)`: what `File::set_permissions` calls.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fchmod(fd: c_int, mode: mode_t) -> c_int {
    match crate::route::world_fd(fd) {
        Some(call) => ret_unit(ops::answer(&call, "fchmod", |world| {
            let description = ops::description(world, fd)?;
            keep_mode(world, &description.path)
        })),
        None => real!(fchmod: unsafe extern "C" fn(c_int, mode_t) -> c_int => (fd, mode)),
    }
}

type TruncateFn = unsafe extern "C" fn(*const c_char, libc::off64_t) -> c_int;

fn truncate_path(world: &World, path: &Path, len: libc::off64_t) -> Answer<()> {
    let fd = ops::open(world, path.to_path_buf(), libc::O_WRONLY)?;
    let result = ops::set_len(world, fd, len);
    ops::close(world, fd)?;
    result
}

/// `truncate64(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn truncate64(path: *const c_char, len: libc::off64_t) -> c_int {
    one_path("truncate64", None, path, |world, world_path| truncate_path(world, world_path, len))
        .unwrap_or_else(|| real!(truncate64: TruncateFn => (path, len)))
}

/// `truncate(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn truncate(path: *const c_char, len: libc::off64_t) -> c_int {
    one_path("truncate", None, path, |world, world_path| truncate_path(world, world_path, len))
        .unwrap_or_else(|| real!(truncate: TruncateFn => (path, len)))
}
