//! File entry points: `open` and friends (`openat`, `creat`, the fortified `__open_2`), `read`/`write` (positional and vectored), `lseek`, `fsync`,
//! `fdatasync`, `ftruncate`, `fallocate`, `close`, `dup`, `fcntl`, `flock` (ADR-0162). Variadic C functions
//! (`open`, `openat`, `fcntl`) are defined with their optional argument as one more integer parameter: on x86_64
//! System V a variadic caller passes it in the next integer register, exactly as for a fixed parameter (and the
//! value is read only when the flags say the caller passed it).

#![expect(unsafe_code, reason = "C entry points: raw buffers and C strings from the caller (ADR-0162)")]

use libc::{c_char, c_int, c_long, c_void, iovec, mode_t, off64_t, size_t, ssize_t};

use crate::fds::is_simulated;
use crate::ops::{self, Answer};
use crate::real::real;
use crate::route::{Routed, fail, ret, ret_unit, route_path, world_fd};

type OpenFn = unsafe extern "C" fn(*const c_char, c_int, mode_t) -> c_int;
type OpenatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, mode_t) -> c_int;

fn open_in_world(kind: &'static str, dirfd: Option<c_int>, path: *const c_char, flags: c_int) -> Option<c_int> {
    // SAFETY: as below.
    if let Some(fd) = unsafe { crate::devices::open_random(kind, path, flags) } {
        return Some(fd);
    }
    // SAFETY: `path` comes from the C caller, null or NUL-terminated.
    match unsafe { route_path(kind, dirfd, path) } {
        Routed::Real => None,
        Routed::Fail(errno) => Some(fail(errno)),
        Routed::World(call, world_path) => {
            let answer = ops::answer(&call, kind, |world| ops::open(world, world_path, flags));
            Some(ret(answer, |fd| fd as isize) as c_int)
        }
    }
}

/// `open(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    open_in_world("open", None, path, flags).unwrap_or_else(|| real!(open: OpenFn => (path, flags, mode)))
}

/// `open64(2)`: what `std::fs::File::open` calls.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    open_in_world("open64", None, path, flags).unwrap_or_else(|| real!(open64: OpenFn => (path, flags, mode)))
}

/// `openat(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    open_in_world("openat", Some(dirfd), path, flags)
        .unwrap_or_else(|| real!(openat: OpenatFn => (dirfd, path, flags, mode)))
}

/// `openat64(2)`: what `std::fs::remove_dir_all` calls.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    open_in_world("openat64", Some(dirfd), path, flags)
        .unwrap_or_else(|| real!(openat64: OpenatFn => (dirfd, path, flags, mode)))
}

/// `__open_2`: `open` as C code built with `_FORTIFY_SOURCE` calls it (no mode: never `O_CREAT`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    open_in_world("open", None, path, flags)
        .unwrap_or_else(|| real!(__open_2: unsafe extern "C" fn(*const c_char, c_int) -> c_int => (path, flags)))
}

/// `__open64_2`: the fortified `open64`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    open_in_world("open64", None, path, flags)
        .unwrap_or_else(|| real!(__open64_2: unsafe extern "C" fn(*const c_char, c_int) -> c_int => (path, flags)))
}

type CreatFn = unsafe extern "C" fn(*const c_char, mode_t) -> c_int;

/// `creat(2)`: `open` with `O_CREAT | O_WRONLY | O_TRUNC`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn creat(path: *const c_char, mode: mode_t) -> c_int {
    open_in_world("creat", None, path, libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC)
        .unwrap_or_else(|| real!(creat: CreatFn => (path, mode)))
}

/// `creat64(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn creat64(path: *const c_char, mode: mode_t) -> c_int {
    open_in_world("creat64", None, path, libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC)
        .unwrap_or_else(|| real!(creat64: CreatFn => (path, mode)))
}

/// `close(2)`. A simulated descriptor closed by a thread outside its world (a `File` dropped after its world's
/// guard) succeeds and leaves the description to its world, which drops it with its table: `std` in a build with
/// debug assertions aborts the process when closing an owned descriptor fails with `EBADF`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    match world_fd(fd) {
        Some(call) => ret_unit(ops::answer(&call, "close", |world| ops::close(world, fd))),
        None if is_simulated(fd) && crate::world::is_fenced() && crate::world::release_fenced(fd) => 0,
        None if is_simulated(fd) && !crate::world::is_inside() => 0,
        None => real!(close: unsafe extern "C" fn(c_int) -> c_int => (fd)),
    }
}

/// The caller's buffer as a slice (empty for a null pointer or zero length).
///
/// # Safety
/// `buf` is null or valid for `count` bytes of writes.
unsafe fn buffer_mut<'a>(buf: *mut c_void, count: size_t) -> &'a mut [u8] {
    if buf.is_null() || count == 0 {
        return &mut [];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), count) }
}

/// # Safety
/// `buf` is null or valid for `count` bytes of reads.
unsafe fn buffer<'a>(buf: *const c_void, count: size_t) -> &'a [u8] {
    if buf.is_null() || count == 0 {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), count) }
}

fn ret_len(answer: Answer<usize>) -> ssize_t {
    ret(answer, |count| isize::try_from(count).unwrap_or(isize::MAX))
}

fn offset_of(offset: off64_t) -> Answer<u64> {
    u64::try_from(offset).map_err(|_| libc::EINVAL)
}

/// `read(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    let Some(call) = world_fd(fd) else {
        return real!(read: unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t => (fd, buf, count));
    };
    // SAFETY: the C caller's buffer of `count` bytes.
    let buf = unsafe { buffer_mut(buf, count) };
    ret_len(ops::answer(&call, "read", |world| ops::read(world, fd, buf, None)))
}

/// `write(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    let Some(call) = world_fd(fd) else {
        return real!(write: unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t => (fd, buf, count));
    };
    // SAFETY: the C caller's buffer of `count` bytes.
    let data = unsafe { buffer(buf, count) };
    ret_len(ops::answer(&call, "write", |world| ops::write(world, fd, data, None)))
}

type PreadFn = unsafe extern "C" fn(c_int, *mut c_void, size_t, off64_t) -> ssize_t;
type PwriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t, off64_t) -> ssize_t;

fn pread_in_world(kind: &'static str, fd: c_int, buf: *mut c_void, count: size_t, offset: off64_t) -> Option<ssize_t> {
    let call = world_fd(fd)?;
    // SAFETY: the C caller's buffer of `count` bytes.
    let buf = unsafe { buffer_mut(buf, count) };
    Some(ret_len(ops::answer(&call, kind, |world| ops::read(world, fd, buf, Some(offset_of(offset)?)))))
}

fn pwrite_in_world(
    kind: &'static str,
    fd: c_int,
    buf: *const c_void,
    count: size_t,
    offset: off64_t,
) -> Option<ssize_t> {
    let call = world_fd(fd)?;
    // SAFETY: the C caller's buffer of `count` bytes.
    let data = unsafe { buffer(buf, count) };
    Some(ret_len(ops::answer(&call, kind, |world| ops::write(world, fd, data, Some(offset_of(offset)?)))))
}

/// `pread64(2)`: what `FileExt::read_at` calls.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, count: size_t, offset: off64_t) -> ssize_t {
    pread_in_world("pread64", fd, buf, count, offset)
        .unwrap_or_else(|| real!(pread64: PreadFn => (fd, buf, count, offset)))
}

/// `pread(2)` (the same call on x86_64).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, count: size_t, offset: off64_t) -> ssize_t {
    pread_in_world("pread", fd, buf, count, offset).unwrap_or_else(|| real!(pread: PreadFn => (fd, buf, count, offset)))
}

/// `pwrite64(2)`: what `FileExt::write_at` calls.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, count: size_t, offset: off64_t) -> ssize_t {
    pwrite_in_world("pwrite64", fd, buf, count, offset)
        .unwrap_or_else(|| real!(pwrite64: PwriteFn => (fd, buf, count, offset)))
}

/// `pwrite(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, count: size_t, offset: off64_t) -> ssize_t {
    pwrite_in_world("pwrite", fd, buf, count, offset)
        .unwrap_or_else(|| real!(pwrite: PwriteFn => (fd, buf, count, offset)))
}

/// The most `iovec`s one vectored call takes (Linux's `IOV_MAX`).
pub const IOV_MAX: usize = 1024;

/// The caller's `iovec`s (at most [`IOV_MAX`]; more is `EINVAL`).
///
/// # Safety
/// `iov` is valid for `count` entries, each naming a valid buffer.
unsafe fn iovecs<'a>(iov: *const iovec, count: c_int) -> Answer<&'a [iovec]> {
    let count = usize::try_from(count).map_err(|_| libc::EINVAL)?;
    if count > IOV_MAX {
        return Err(libc::EINVAL);
    }
    if iov.is_null() || count == 0 {
        return Ok(&[]);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(iov, count) })
}

/// Read into each buffer in turn, stopping at a short read; `at` is the starting offset of a `preadv`.
fn readv_in_world(world: &crate::world::World, fd: c_int, slices: &[iovec], at: Option<u64>) -> Answer<usize> {
    let mut total = 0usize;
    for slice in slices {
        // SAFETY: each iovec names a buffer of `iov_len` bytes the caller owns.
        let buf = unsafe { buffer_mut(slice.iov_base, slice.iov_len) };
        let count = ops::read(world, fd, buf, at.map(|start| start + total as u64))?;
        total += count;
        if count < buf.len() {
            break;
        }
    }
    Ok(total)
}

/// Write each buffer in turn, stopping at a short write.
fn writev_in_world(world: &crate::world::World, fd: c_int, slices: &[iovec], at: Option<u64>) -> Answer<usize> {
    let mut total = 0usize;
    for slice in slices {
        // SAFETY: each iovec names a buffer of `iov_len` bytes the caller owns.
        let data = unsafe { buffer(slice.iov_base, slice.iov_len) };
        let count = ops::write(world, fd, data, at.map(|start| start + total as u64))?;
        total += count;
        if count < data.len() {
            break;
        }
    }
    Ok(total)
}

/// `readv(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, count: c_int) -> ssize_t {
    let Some(call) = world_fd(fd) else {
        return real!(readv: unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t => (fd, iov, count));
    };
    // SAFETY: the C caller's iovec array.
    ret_len(ops::answer(&call, "readv", |world| readv_in_world(world, fd, unsafe { iovecs(iov, count) }?, None)))
}

/// `writev(2)`: what `write_all_vectored` and `BufWriter` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, count: c_int) -> ssize_t {
    let Some(call) = world_fd(fd) else {
        return real!(writev: unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t => (fd, iov, count));
    };
    // SAFETY: the C caller's iovec array.
    ret_len(ops::answer(&call, "writev", |world| writev_in_world(world, fd, unsafe { iovecs(iov, count) }?, None)))
}

type PreadvFn = unsafe extern "C" fn(c_int, *const iovec, c_int, off64_t) -> ssize_t;

/// `preadv64(2)`: what `FileExt::read_vectored_at` calls.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preadv64(fd: c_int, iov: *const iovec, count: c_int, offset: off64_t) -> ssize_t {
    let Some(call) = world_fd(fd) else { return real!(preadv64: PreadvFn => (fd, iov, count, offset)) };
    ret_len(ops::answer(&call, "preadv64", |world| {
        // SAFETY: the C caller's iovec array.
        readv_in_world(world, fd, unsafe { iovecs(iov, count) }?, Some(offset_of(offset)?))
    }))
}

/// `pwritev64(2)`: what `FileExt::write_vectored_at` calls.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pwritev64(fd: c_int, iov: *const iovec, count: c_int, offset: off64_t) -> ssize_t {
    let Some(call) = world_fd(fd) else { return real!(pwritev64: PreadvFn => (fd, iov, count, offset)) };
    ret_len(ops::answer(&call, "pwritev64", |world| {
        // SAFETY: the C caller's iovec array.
        writev_in_world(world, fd, unsafe { iovecs(iov, count) }?, Some(offset_of(offset)?))
    }))
}

type LseekFn = unsafe extern "C" fn(c_int, off64_t, c_int) -> off64_t;

fn lseek_in_world(kind: &'static str, fd: c_int, offset: off64_t, whence: c_int) -> Option<off64_t> {
    let call = world_fd(fd)?;
    let answer = ops::answer(&call, kind, |world| ops::seek(world, fd, offset, whence));
    Some(ret(answer, |position| isize::try_from(position).unwrap_or(isize::MAX)) as off64_t)
}

/// `lseek64(2)`: what `Seek for File` calls.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lseek64(fd: c_int, offset: off64_t, whence: c_int) -> off64_t {
    lseek_in_world("lseek64", fd, offset, whence).unwrap_or_else(|| real!(lseek64: LseekFn => (fd, offset, whence)))
}

/// `lseek(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lseek(fd: c_int, offset: off64_t, whence: c_int) -> off64_t {
    lseek_in_world("lseek", fd, offset, whence).unwrap_or_else(|| real!(lseek: LseekFn => (fd, offset, whence)))
}

/// `fsync(2)`: a file's data and size, or a directory's entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    match world_fd(fd) {
        Some(call) => ret_unit(ops::answer(&call, "fsync", |world| ops::sync(world, fd))),
        None => real!(fsync: unsafe extern "C" fn(c_int) -> c_int => (fd)),
    }
}

/// `fdatasync(2)`: as `fsync` (the world's file sync makes data and size durable).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    match world_fd(fd) {
        Some(call) => ret_unit(ops::answer(&call, "fdatasync", |world| ops::sync(world, fd))),
        None => real!(fdatasync: unsafe extern "C" fn(c_int) -> c_int => (fd)),
    }
}

type FtruncateFn = unsafe extern "C" fn(c_int, off64_t) -> c_int;

/// `ftruncate64(2)`: what `File::set_len` calls.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftruncate64(fd: c_int, len: off64_t) -> c_int {
    match world_fd(fd) {
        Some(call) => ret_unit(ops::answer(&call, "ftruncate64", |world| ops::set_len(world, fd, len))),
        None => real!(ftruncate64: FtruncateFn => (fd, len)),
    }
}

/// `ftruncate(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ftruncate(fd: c_int, len: off64_t) -> c_int {
    match world_fd(fd) {
        Some(call) => ret_unit(ops::answer(&call, "ftruncate", |world| ops::set_len(world, fd, len))),
        None => real!(ftruncate: FtruncateFn => (fd, len)),
    }
}

type FallocateFn = unsafe extern "C" fn(c_int, c_int, off64_t, off64_t) -> c_int;

/// `fallocate64(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fallocate64(fd: c_int, mode: c_int, offset: off64_t, len: off64_t) -> c_int {
    match world_fd(fd) {
        Some(call) => ret_unit(ops::answer(&call, "fallocate64", |world| ops::allocate(world, fd, mode, offset, len))),
        None => real!(fallocate64: FallocateFn => (fd, mode, offset, len)),
    }
}

/// `fallocate(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fallocate(fd: c_int, mode: c_int, offset: off64_t, len: off64_t) -> c_int {
    match world_fd(fd) {
        Some(call) => ret_unit(ops::answer(&call, "fallocate", |world| ops::allocate(world, fd, mode, offset, len))),
        None => real!(fallocate: FallocateFn => (fd, mode, offset, len)),
    }
}

type PosixFallocateFn = unsafe extern "C" fn(c_int, off64_t, off64_t) -> c_int;

/// `posix_fallocate64(3)`: returns the error number (glibc's own would call `fallocate` inside the C library,
/// where this crate cannot see it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_fallocate64(fd: c_int, offset: off64_t, len: off64_t) -> c_int {
    match world_fd(fd) {
        Some(call) => {
            ops::answer(&call, "posix_fallocate64", |world| ops::allocate(world, fd, 0, offset, len)).err().unwrap_or(0)
        }
        None => real!(posix_fallocate64: PosixFallocateFn => (fd, offset, len)),
    }
}

/// `posix_fallocate(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn posix_fallocate(fd: c_int, offset: off64_t, len: off64_t) -> c_int {
    match world_fd(fd) {
        Some(call) => {
            ops::answer(&call, "posix_fallocate", |world| ops::allocate(world, fd, 0, offset, len)).err().unwrap_or(0)
        }
        None => real!(posix_fallocate: PosixFallocateFn => (fd, offset, len)),
    }
}

/// `dup(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    match world_fd(fd) {
        Some(call) => ret(ops::answer(&call, "dup", |world| ops::dup(world, fd, 0)), |fd| fd as isize) as c_int,
        None => real!(dup: unsafe extern "C" fn(c_int) -> c_int => (fd)),
    }
}

/// `dup2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup2(fd: c_int, target: c_int) -> c_int {
    match world_fd(fd) {
        Some(call) => {
            ret(ops::answer(&call, "dup2", |world| ops::dup_to(world, fd, target)), |fd| fd as isize) as c_int
        }
        None => real!(dup2: unsafe extern "C" fn(c_int, c_int) -> c_int => (fd, target)),
    }
}

/// `dup3(2)` (the flags, only `O_CLOEXEC`, mean nothing in a world: it has no `exec`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup3(fd: c_int, target: c_int, flags: c_int) -> c_int {
    match world_fd(fd) {
        Some(call) if fd == target => {
            ret(ops::answer(&call, "dup3", |_| Err::<c_int, _>(libc::EINVAL)), |_| 0) as c_int
        }
        Some(call) => {
            ret(ops::answer(&call, "dup3", |world| ops::dup_to(world, fd, target)), |fd| fd as isize) as c_int
        }
        None => real!(dup3: unsafe extern "C" fn(c_int, c_int, c_int) -> c_int => (fd, target, flags)),
    }
}

/// `flock(2)`: what `File::lock`, `try_lock` and `unlock` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn flock(fd: c_int, operation: c_int) -> c_int {
    match world_fd(fd) {
        Some(call) => ret_unit(ops::answer(&call, "flock", |world| ops::flock(world, fd, operation))),
        None => real!(flock: unsafe extern "C" fn(c_int, c_int) -> c_int => (fd, operation)),
    }
}

type FcntlFn = unsafe extern "C" fn(c_int, c_int, c_long) -> c_int;

/// `fcntl(2)` on a simulated descriptor.
fn fcntl_in_world(world: &crate::world::World, fd: c_int, command: c_int, argument: c_long) -> Answer<c_int> {
    let description = ops::description(world, fd)?;
    match command {
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
            let at_least = c_int::try_from(argument).map_err(|_| libc::EINVAL)?;
            ops::dup(world, fd, at_least)
        }
        libc::F_GETFD => Ok(libc::FD_CLOEXEC),
        libc::F_SETFD | libc::F_SETFL => Ok(0),
        libc::F_GETFL => {
            let access = match (description.readable, description.writable) {
                (true, true) => libc::O_RDWR,
                (false, true) => libc::O_WRONLY,
                _ => libc::O_RDONLY,
            };
            Ok(access | if description.append { libc::O_APPEND } else { 0 })
        }
        // POSIX record locks belong to the process, and a world is one process: its own locks never conflict.
        libc::F_SETLK | libc::F_SETLKW => Ok(0),
        libc::F_GETLK => {
            let lock = argument as *mut libc::flock;
            if lock.is_null() {
                return Err(libc::EFAULT);
            }
            // SAFETY: F_GETLK's argument is the caller's `struct flock`.
            unsafe { (*lock).l_type = libc::F_UNLCK as libc::c_short };
            Ok(0)
        }
        _ => Err(libc::EINVAL),
    }
}

fn fcntl_answer(kind: &'static str, fd: c_int, command: c_int, argument: c_long) -> Option<c_int> {
    let outside = crate::world::current().is_none() || crate::world::is_fenced();
    if command == libc::F_GETFD && is_simulated(fd) && !crate::world::is_inside() && outside {
        // `std`'s check before closing an owned descriptor (see `close`), outside the descriptor's world or fenced.
        return Some(libc::FD_CLOEXEC);
    }
    let call = world_fd(fd)?;
    let answer = ops::answer(&call, kind, |world| {
        world.env().charge_work(1, kind);
        fcntl_in_world(world, fd, command, argument)
    });
    Some(ret(answer, |value| value as isize) as c_int)
}

/// `fcntl(2)`: descriptor flags, status flags, duplication and locks on a simulated descriptor (open file
/// description locks, `F_OFD_*`, are not simulated: `EINVAL`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fcntl(fd: c_int, command: c_int, argument: c_long) -> c_int {
    fcntl_answer("fcntl", fd, command, argument).unwrap_or_else(|| real!(fcntl: FcntlFn => (fd, command, argument)))
}

/// `fcntl64(2)`: glibc's name for `fcntl` in C code built with 64-bit offsets.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fcntl64(fd: c_int, command: c_int, argument: c_long) -> c_int {
    fcntl_answer("fcntl64", fd, command, argument).unwrap_or_else(|| real!(fcntl64: FcntlFn => (fd, command, argument)))
}

/// The kernel's in-kernel copies (`copy_file_range`, `sendfile`, `splice`) cannot move a world's bytes: with a
/// simulated descriptor on either side they fail as the kernel fails them between file systems or for unsupported
/// descriptors (`EXDEV`, `EINVAL`), which is what makes `std::io::copy` and `fs::copy` fall back to `read`/`write`.
fn no_kernel_copy(kind: &'static str, fds: [c_int; 2], errno: c_int) -> Option<ssize_t> {
    if !fds.iter().any(|&fd| is_simulated(fd)) {
        return None;
    }
    let call = crate::world::begin()?;
    Some(ret_len(ops::answer(&call, kind, |world| {
        world.env().charge_work(1, kind);
        Err(errno)
    })))
}

/// `copy_file_range(2)`: `EXDEV` with a simulated descriptor.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn copy_file_range(
    fd_in: c_int,
    off_in: *mut off64_t,
    fd_out: c_int,
    off_out: *mut off64_t,
    len: size_t,
    flags: libc::c_uint,
) -> ssize_t {
    type CopyFileRangeFn =
        unsafe extern "C" fn(c_int, *mut off64_t, c_int, *mut off64_t, size_t, libc::c_uint) -> ssize_t;
    no_kernel_copy("copy_file_range", [fd_in, fd_out], libc::EXDEV)
        .unwrap_or_else(|| real!(copy_file_range: CopyFileRangeFn => (fd_in, off_in, fd_out, off_out, len, flags)))
}

type SendfileFn = unsafe extern "C" fn(c_int, c_int, *mut off64_t, size_t) -> ssize_t;

/// `sendfile64(2)`: `EINVAL` with a simulated descriptor.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendfile64(out_fd: c_int, in_fd: c_int, offset: *mut off64_t, count: size_t) -> ssize_t {
    no_kernel_copy("sendfile64", [out_fd, in_fd], libc::EINVAL)
        .unwrap_or_else(|| real!(sendfile64: SendfileFn => (out_fd, in_fd, offset, count)))
}

/// `sendfile(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendfile(out_fd: c_int, in_fd: c_int, offset: *mut off64_t, count: size_t) -> ssize_t {
    no_kernel_copy("sendfile", [out_fd, in_fd], libc::EINVAL)
        .unwrap_or_else(|| real!(sendfile: SendfileFn => (out_fd, in_fd, offset, count)))
}

/// `splice(2)`: `EINVAL` with a simulated descriptor.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn splice(
    fd_in: c_int,
    off_in: *mut off64_t,
    fd_out: c_int,
    off_out: *mut off64_t,
    len: size_t,
    flags: libc::c_uint,
) -> ssize_t {
    type SpliceFn = unsafe extern "C" fn(c_int, *mut off64_t, c_int, *mut off64_t, size_t, libc::c_uint) -> ssize_t;
    no_kernel_copy("splice", [fd_in, fd_out], libc::EINVAL)
        .unwrap_or_else(|| real!(splice: SpliceFn => (fd_in, off_in, fd_out, off_out, len, flags)))
}
