//! `stat` and friends for world paths and simulated descriptors: `stat64`, `lstat64`, `fstat64`, `fstatat64`,
//! `statx` (which `std` prefers, linked weakly and so bound to this crate's definition, ADR-0162), and their
//! non-64 names (the same structures on x86_64).
//!
//! What a world's `stat` says: a file (`S_IFREG`, mode 0644) or a directory (`S_IFDIR`, 0755), its current size,
//! an inode number hashed from the world path (stable for a path, not kept across a rename), one link, owner 0,
//! device [`WORLD_DEVICE`], and every timestamp [`crate::REALTIME_BASE_SECS`]: the world keeps no times.

#![expect(unsafe_code, reason = "C entry points: raw out-pointers and C strings from the caller (ADR-0162)")]

use std::hash::Hasher;
use std::path::Path;

use env::{NodeInfo, StableHasher};
use libc::{c_char, c_int, c_uint};

use crate::ops::{self, Answer};
use crate::real::real;
use crate::route::{Routed, fail, ret_unit, route_path, world_fd};
use crate::world::World;

/// The device number of every world's files (major 0x68, "h"; minor 0x66, "f").
pub const WORLD_DEVICE: (u32, u32) = (0x68, 0x66);
const BLOCK_BYTES: u64 = 512;
const IO_BLOCK_BYTES: u32 = 4096;

/// What `stat` reports for one node.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attributes {
    pub(crate) mode: u32,
    pub(crate) ino: u64,
    pub(crate) nlink: u32,
    pub(crate) size: u64,
}

/// The inode number of a world path: hashed from it, so the same in every run.
pub(crate) fn inode_of(path: &Path) -> u64 {
    let mut hasher = StableHasher::new();
    hasher.write(path.as_os_str().as_encoded_bytes());
    hasher.finish() | 1
}

fn attributes(path: &Path, info: NodeInfo) -> Attributes {
    let ino = inode_of(path);
    match info {
        NodeInfo::Dir => Attributes { mode: libc::S_IFDIR | 0o755, ino, nlink: 2, size: 4096 },
        NodeInfo::File { len_bytes } => Attributes { mode: libc::S_IFREG | 0o644, ino, nlink: 1, size: len_bytes },
    }
}

fn path_attributes(world: &World, path: &Path) -> Answer<Attributes> {
    Ok(attributes(path, ops::node(world, path)?))
}

fn fd_attributes(world: &World, fd: c_int) -> Answer<Attributes> {
    let description = ops::description(world, fd)?;
    world.env().charge_work(1, "fstat");
    if matches!(description.target, crate::fds::Target::Random) {
        return Ok(crate::devices::attributes_of_random(&description.path));
    }
    let info = world.env().lookup_current(&description.path).unwrap_or(match &description.target {
        // An unlinked but open file: its size through the handle.
        crate::fds::Target::File(file) => {
            NodeInfo::File { len_bytes: env::File::len(file).map_err(|e| crate::paths::errno_of(&e))? }
        }
        crate::fds::Target::Dir | crate::fds::Target::Random => NodeInfo::Dir,
    });
    Ok(attributes(&description.path, info))
}

fn fill_stat(out: *mut libc::stat64, attributes: Attributes) -> Answer<()> {
    if out.is_null() {
        return Err(libc::EFAULT);
    }
    let time = i64::try_from(crate::REALTIME_BASE_SECS).unwrap_or(i64::MAX);
    // SAFETY: an all-zero `stat64` is valid (integers only).
    let mut stat: libc::stat64 = unsafe { std::mem::zeroed() };
    stat.st_dev = libc::makedev(WORLD_DEVICE.0, WORLD_DEVICE.1);
    stat.st_ino = attributes.ino;
    stat.st_nlink = u64::from(attributes.nlink);
    stat.st_mode = attributes.mode;
    stat.st_size = i64::try_from(attributes.size).unwrap_or(i64::MAX);
    stat.st_blksize = i64::from(IO_BLOCK_BYTES);
    stat.st_blocks = i64::try_from(attributes.size.div_ceil(BLOCK_BYTES)).unwrap_or(i64::MAX);
    (stat.st_atime, stat.st_mtime, stat.st_ctime) = (time, time, time);
    // SAFETY: the caller's `struct stat64` (checked non-null).
    unsafe { out.write(stat) };
    Ok(())
}

fn fill_statx(out: *mut libc::statx, attributes: Attributes) -> Answer<()> {
    if out.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: an all-zero `statx` and `statx_timestamp` are valid (integers only).
    let (mut statx, mut time): (libc::statx, libc::statx_timestamp) = unsafe { std::mem::zeroed() };
    time.tv_sec = i64::try_from(crate::REALTIME_BASE_SECS).unwrap_or(i64::MAX);
    statx.stx_mask = libc::STATX_BASIC_STATS;
    statx.stx_blksize = IO_BLOCK_BYTES;
    statx.stx_nlink = attributes.nlink;
    statx.stx_mode = u16::try_from(attributes.mode).unwrap_or(u16::MAX);
    statx.stx_ino = attributes.ino;
    statx.stx_size = attributes.size;
    statx.stx_blocks = attributes.size.div_ceil(BLOCK_BYTES);
    (statx.stx_atime, statx.stx_ctime, statx.stx_mtime) = (time, time, time);
    (statx.stx_dev_major, statx.stx_dev_minor) = WORLD_DEVICE;
    // SAFETY: the caller's `struct statx` (checked non-null; the kernel's and glibc's are both 256 bytes).
    unsafe { out.write(statx) };
    Ok(())
}

type StatFn = unsafe extern "C" fn(*const c_char, *mut libc::stat64) -> c_int;

fn stat_path(kind: &'static str, path: *const c_char, out: *mut libc::stat64) -> Option<c_int> {
    // SAFETY: `path` comes from the C caller, null or NUL-terminated.
    match unsafe { route_path(kind, None, path) } {
        Routed::Real => None,
        Routed::Fail(errno) => Some(fail(errno)),
        Routed::World(call, world_path) => {
            Some(ret_unit(ops::answer(&call, kind, |world| fill_stat(out, path_attributes(world, &world_path)?))))
        }
    }
}

/// `stat64(2)`: what `fs::metadata` calls when `statx` is unavailable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stat64(path: *const c_char, out: *mut libc::stat64) -> c_int {
    stat_path("stat64", path, out).unwrap_or_else(|| real!(stat64: StatFn => (path, out)))
}

/// `stat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stat(path: *const c_char, out: *mut libc::stat64) -> c_int {
    stat_path("stat", path, out).unwrap_or_else(|| real!(stat: StatFn => (path, out)))
}

/// `lstat64(2)` (a world has no symbolic links).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lstat64(path: *const c_char, out: *mut libc::stat64) -> c_int {
    stat_path("lstat64", path, out).unwrap_or_else(|| real!(lstat64: StatFn => (path, out)))
}

/// `lstat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lstat(path: *const c_char, out: *mut libc::stat64) -> c_int {
    stat_path("lstat", path, out).unwrap_or_else(|| real!(lstat: StatFn => (path, out)))
}

type FstatFn = unsafe extern "C" fn(c_int, *mut libc::stat64) -> c_int;

/// `fstat64(2)`: what `File::metadata` calls when `statx` is unavailable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstat64(fd: c_int, out: *mut libc::stat64) -> c_int {
    match world_fd(fd) {
        Some(call) => ret_unit(ops::answer(&call, "fstat64", |world| fill_stat(out, fd_attributes(world, fd)?))),
        None => real!(fstat64: FstatFn => (fd, out)),
    }
}

/// `fstat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstat(fd: c_int, out: *mut libc::stat64) -> c_int {
    match world_fd(fd) {
        Some(call) => ret_unit(ops::answer(&call, "fstat", |world| fill_stat(out, fd_attributes(world, fd)?))),
        None => real!(fstat: FstatFn => (fd, out)),
    }
}

/// True when the call names the descriptor itself: `AT_EMPTY_PATH` with an empty path.
fn names_descriptor(path: *const c_char, flags: c_int) -> bool {
    // SAFETY: a non-null path from the C caller is NUL-terminated; its first byte is readable.
    flags & libc::AT_EMPTY_PATH != 0 && !path.is_null() && unsafe { *path } == 0
}

type FstatatFn = unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat64, c_int) -> c_int;

fn fstatat_in_world(
    kind: &'static str,
    dirfd: c_int,
    path: *const c_char,
    out: *mut libc::stat64,
    flags: c_int,
) -> Option<c_int> {
    if names_descriptor(path, flags) {
        let call = world_fd(dirfd)?;
        return Some(ret_unit(ops::answer(&call, kind, |world| fill_stat(out, fd_attributes(world, dirfd)?))));
    }
    // SAFETY: `path` comes from the C caller, null or NUL-terminated.
    match unsafe { route_path(kind, Some(dirfd), path) } {
        Routed::Real => None,
        Routed::Fail(errno) => Some(fail(errno)),
        Routed::World(call, world_path) => {
            Some(ret_unit(ops::answer(&call, kind, |world| fill_stat(out, path_attributes(world, &world_path)?))))
        }
    }
}

/// `fstatat64(2)`: what `DirEntry::metadata` calls when `statx` is unavailable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstatat64(dirfd: c_int, path: *const c_char, out: *mut libc::stat64, flags: c_int) -> c_int {
    fstatat_in_world("fstatat64", dirfd, path, out, flags)
        .unwrap_or_else(|| real!(fstatat64: FstatatFn => (dirfd, path, out, flags)))
}

/// `fstatat(2)` (`newfstatat`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fstatat(dirfd: c_int, path: *const c_char, out: *mut libc::stat64, flags: c_int) -> c_int {
    fstatat_in_world("fstatat", dirfd, path, out, flags)
        .unwrap_or_else(|| real!(fstatat: FstatatFn => (dirfd, path, out, flags)))
}

/// `statx(2)`: what `fs::metadata`, `File::metadata` and `DirEntry::metadata` call first. `std` links it weakly
/// (`syscall!`), so the static linker binds it to this definition.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    out: *mut libc::statx,
) -> c_int {
    type StatxFn = unsafe extern "C" fn(c_int, *const c_char, c_int, c_uint, *mut libc::statx) -> c_int;
    if names_descriptor(path, flags) {
        return match world_fd(dirfd) {
            Some(call) => ret_unit(ops::answer(&call, "statx", |world| fill_statx(out, fd_attributes(world, dirfd)?))),
            None => real!(statx: StatxFn => (dirfd, path, flags, mask, out)),
        };
    }
    // SAFETY: `path` comes from the C caller, null or NUL-terminated.
    match unsafe { route_path("statx", Some(dirfd), path) } {
        Routed::Real => real!(statx: StatxFn => (dirfd, path, flags, mask, out)),
        Routed::Fail(errno) => fail(errno),
        Routed::World(call, world_path) => {
            ret_unit(ops::answer(&call, "statx", |world| fill_statx(out, path_attributes(world, &world_path)?)))
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_structures_written_are_the_kernels_sizes() {
        assert_eq!(size_of::<libc::statx>(), 256, "struct statx is 256 bytes in the kernel and glibc");
        assert_eq!(size_of::<libc::stat64>(), 144, "struct stat64 is 144 bytes on x86_64 glibc");
    }
}
