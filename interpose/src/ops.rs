//! The world's answers to descriptor and name calls, in safe Rust with `errno` errors: the FFI modules convert the
//! C arguments, route the call here when it is the world's, and convert the answer back.
//!
//! Every answer is a yield point of the world's scheduler (ADR-0104): it makes at least one counted `SimEnv` call
//! (`SimEnv::charge_work` where the call has no `Env` counterpart: `close`, `lseek`, `dup`, `fcntl`, `fstat`).

#![forbid(unsafe_code)]

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use env::{Env, File as _, NodeInfo, OpenOptions};
use libc::c_int;

use crate::fds::{Description, FD_BASE, Target};
use crate::paths::errno_of;
use crate::world::{self, Call, World};

/// An answer: the value, or the `errno` to fail with.
pub(crate) type Answer<T> = Result<T, c_int>;

/// Answer `call` (counted as `kind`) with `answer`; a panic inside becomes `EIO` ([`world::guarded`]).
pub(crate) fn answer<T>(call: &Call, kind: &'static str, answer: impl FnOnce(&World) -> Answer<T>) -> Answer<T> {
    call.world.count(kind);
    world::guarded(|| answer(&call.world)).unwrap_or(Err(libc::EIO))
}

fn io(error: env::Error) -> c_int {
    errno_of(&error)
}

/// A yield point for a call with no `Env` counterpart.
fn yield_point(world: &World, kind: &'static str) {
    world.env().charge_work(1, kind);
}

pub(crate) fn description(world: &World, fd: c_int) -> Answer<Arc<Description>> {
    world.state().fds.get(fd).ok_or(libc::EBADF)
}

fn file_of(description: &Description) -> Answer<&env::sim::SimFile> {
    match &description.target {
        Target::File(file) => Ok(file),
        Target::Dir => Err(libc::EISDIR),
        Target::Random => Err(libc::EINVAL),
    }
}

pub(crate) fn install(world: &World, description: Description, at_least: c_int) -> Answer<c_int> {
    world.state().fds.insert(Arc::new(description), at_least).ok_or(libc::EMFILE)
}

/// What `path` names now, after a yield point (`ENOENT` when nothing; `EIO` while the power is off).
pub(crate) fn node(world: &World, path: &Path) -> Answer<NodeInfo> {
    if !world.env().exists(path).map_err(io)? {
        return Err(libc::ENOENT);
    }
    world.env().lookup_current(path).ok_or(libc::ENOENT)
}

/// `open(2)` of world path `path` with `flags`.
pub(crate) fn open(world: &World, path: PathBuf, flags: c_int) -> Answer<c_int> {
    if flags & libc::O_TMPFILE == libc::O_TMPFILE {
        return Err(libc::EOPNOTSUPP);
    }
    let access = flags & libc::O_ACCMODE;
    let (readable, writable) = (access != libc::O_WRONLY, access != libc::O_RDONLY);
    let (create, exclusive) = (flags & libc::O_CREAT != 0, flags & libc::O_EXCL != 0);
    let existing = match node(world, &path) {
        Ok(found) => Some(found),
        Err(libc::ENOENT) => None,
        Err(errno) => return Err(errno),
    };
    let target = match existing {
        Some(_) if create && exclusive => return Err(libc::EEXIST),
        Some(NodeInfo::Dir) if writable => return Err(libc::EISDIR),
        Some(NodeInfo::Dir) => Target::Dir,
        Some(NodeInfo::File { .. }) if flags & libc::O_DIRECTORY != 0 => return Err(libc::ENOTDIR),
        None if flags & libc::O_DIRECTORY != 0 && !create => return Err(libc::ENOENT),
        Some(NodeInfo::File { .. }) | None => {
            let truncate = flags & libc::O_TRUNC != 0 && writable;
            // The world's handle may write whenever it creates (SimEnv asks for it); the descriptor's own flags
            // say whether the caller may.
            let options = OpenOptions { create, create_new: create && exclusive, truncate, write: writable || create };
            Target::File(world.env().open(&path, options).map_err(io)?)
        }
    };
    let append = flags & libc::O_APPEND != 0;
    let description =
        Description { path, target, readable, writable, append, offset: AtomicU64::new(0), lock: Default::default() };
    install(world, description, FD_BASE)
}

/// `read`/`pread`: at the description's offset (advancing it) or at `at`.
pub(crate) fn read(world: &World, fd: c_int, buf: &mut [u8], at: Option<u64>) -> Answer<usize> {
    let description = description(world, fd)?;
    if matches!(description.target, Target::Random) {
        return Ok(crate::devices::read_random(world, buf));
    }
    let file = file_of(&description)?;
    if !description.readable {
        return Err(libc::EBADF);
    }
    let offset = at.unwrap_or_else(|| description.offset());
    let count = file.read_at(offset, buf).map_err(io)?;
    if at.is_none() {
        description.set_offset(offset + count as u64);
    }
    Ok(count)
}

/// `write`/`pwrite`: at the description's offset (advancing it), at `at`, or at the end for `O_APPEND` (as Linux
/// does for `pwrite` too). May be short, as the world's disk may be.
pub(crate) fn write(world: &World, fd: c_int, data: &[u8], at: Option<u64>) -> Answer<usize> {
    let description = description(world, fd)?;
    let file = file_of(&description)?;
    if !description.writable {
        return Err(libc::EBADF);
    }
    let offset = if description.append { file.len().map_err(io)? } else { at.unwrap_or_else(|| description.offset()) };
    let count = file.write_at(offset, data).map_err(io)?;
    if at.is_none() {
        description.set_offset(offset + count as u64);
    }
    Ok(count)
}

/// `lseek(2)`: `SEEK_SET`, `SEEK_CUR`, `SEEK_END` (`SEEK_DATA`/`SEEK_HOLE`: `EINVAL`).
pub(crate) fn seek(world: &World, fd: c_int, offset: i64, whence: c_int) -> Answer<u64> {
    let description = description(world, fd)?;
    yield_point(world, "lseek");
    let base = match (whence, &description.target) {
        (libc::SEEK_SET, _) => 0,
        (libc::SEEK_CUR, _) => description.offset(),
        (libc::SEEK_END, Target::File(file)) => file.len().map_err(io)?,
        (libc::SEEK_END, Target::Dir | Target::Random) => 0,
        _ => return Err(libc::EINVAL),
    };
    let target = i128::from(base) + i128::from(offset);
    let target = u64::try_from(target).map_err(|_| libc::EINVAL)?;
    if i64::try_from(target).is_err() {
        return Err(libc::EOVERFLOW);
    }
    description.set_offset(target);
    Ok(target)
}

/// `fsync`/`fdatasync`: a file's data and size, or a directory's entries (`Env::sync_dir`).
pub(crate) fn sync(world: &World, fd: c_int) -> Answer<()> {
    let description = description(world, fd)?;
    match &description.target {
        Target::File(file) => file.sync().map_err(io),
        Target::Dir => world.env().sync_dir(&description.path).map_err(io),
        Target::Random => Err(libc::EINVAL),
    }
}

/// `ftruncate(2)`.
pub(crate) fn set_len(world: &World, fd: c_int, len: i64) -> Answer<()> {
    let description = description(world, fd)?;
    let file = file_of(&description).map_err(|_| libc::EINVAL)?;
    let len = u64::try_from(len).map_err(|_| libc::EINVAL)?;
    if !description.writable {
        return Err(libc::EINVAL);
    }
    file.set_len(len).map_err(io)
}

/// `fallocate(2)` mode 0 (and `posix_fallocate`): the file grows to `offset + len` if shorter, zero-filled.
/// `FALLOC_FL_KEEP_SIZE` alone reserves space the world does not model: it succeeds and changes nothing. Other
/// modes (punching or collapsing ranges) are not simulated: `EOPNOTSUPP`.
pub(crate) fn allocate(world: &World, fd: c_int, mode: c_int, offset: i64, len: i64) -> Answer<()> {
    let description = description(world, fd)?;
    let file = file_of(&description).map_err(|_| libc::ENODEV)?;
    let (Ok(offset), Ok(len)) = (u64::try_from(offset), u64::try_from(len)) else { return Err(libc::EINVAL) };
    if len == 0 {
        return Err(libc::EINVAL);
    }
    if !description.writable {
        return Err(libc::EBADF);
    }
    match mode {
        0 => {
            let end = offset.checked_add(len).ok_or(libc::EFBIG)?;
            if file.len().map_err(io)? < end {
                file.set_len(end).map_err(io)?;
            }
            Ok(())
        }
        libc::FALLOC_FL_KEEP_SIZE => file.len().map(drop).map_err(io),
        _ => Err(libc::EOPNOTSUPP),
    }
}

/// `close(2)`: the description (and its lock) goes when its last descriptor does.
pub(crate) fn close(world: &World, fd: c_int) -> Answer<()> {
    yield_point(world, "close");
    let removed = world.state().fds.remove(fd).ok_or(libc::EBADF)?;
    drop(removed);
    Ok(())
}

/// `dup`/`fcntl(F_DUPFD)`: a new descriptor (the lowest free at or above `at_least`) for the same description.
pub(crate) fn dup(world: &World, fd: c_int, at_least: c_int) -> Answer<c_int> {
    let description = description(world, fd)?;
    yield_point(world, "dup");
    world.state().fds.insert(description, at_least).ok_or(libc::EMFILE)
}

/// `dup2`/`dup3` onto `target`, a simulated number (a real one cannot name a world's file: `EBADF`).
pub(crate) fn dup_to(world: &World, fd: c_int, target: c_int) -> Answer<c_int> {
    let description = description(world, fd)?;
    yield_point(world, "dup2");
    if !crate::fds::is_simulated(target) {
        return Err(libc::EBADF);
    }
    if fd == target {
        return Ok(target);
    }
    let replaced = {
        let mut state = world.state();
        let replaced = state.fds.remove(target);
        state.fds.insert(description, target).ok_or(libc::EMFILE)?;
        replaced
    };
    drop(replaced);
    Ok(target)
}

/// `flock(2)`: `LOCK_SH` and `LOCK_EX` both take the world's one exclusive lock on the file (`Env::lock`), held by
/// the description; a conflict is `EWOULDBLOCK` with or without `LOCK_NB` (nothing else in one process could ever
/// release it while this thread blocked). `LOCK_UN` releases it.
pub(crate) fn flock(world: &World, fd: c_int, operation: c_int) -> Answer<()> {
    let description = description(world, fd)?;
    let holds = description.lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_some();
    match operation & !libc::LOCK_NB {
        libc::LOCK_UN => {
            yield_point(world, "flock");
            drop(description.take_lock());
            Ok(())
        }
        libc::LOCK_SH | libc::LOCK_EX if holds => {
            yield_point(world, "flock");
            Ok(())
        }
        libc::LOCK_SH | libc::LOCK_EX => {
            // Not under the description's mutex: `Env::lock` is a yield point, and another of the world's threads
            // may need that mutex while this one waits for its turn.
            let lock = world.env().lock(&description.path).map_err(io)?;
            let mut held = description.lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let earlier = held.replace(lock);
            drop(held);
            drop(earlier);
            Ok(())
        }
        _ => Err(libc::EINVAL),
    }
}

/// `mkdir(2)`: one directory, whose parent must exist.
pub(crate) fn mkdir(world: &World, path: &Path) -> Answer<()> {
    match node(world, path) {
        Ok(_) => return Err(libc::EEXIST),
        Err(libc::ENOENT) => {}
        Err(errno) => return Err(errno),
    }
    match path.parent().map(|parent| world.env().lookup_current(parent)) {
        Some(Some(NodeInfo::Dir)) => world.env().create_dir_all(path).map_err(io),
        Some(Some(NodeInfo::File { .. })) => Err(libc::ENOTDIR),
        Some(None) | None => Err(libc::ENOENT),
    }
}

/// `unlink(2)` of a file.
pub(crate) fn unlink(world: &World, path: &Path) -> Answer<()> {
    if world.env().lookup_current(path) == Some(NodeInfo::Dir) {
        yield_point(world, "unlink");
        return Err(libc::EISDIR);
    }
    world.env().remove_file(path).map_err(io)
}

/// `rmdir(2)` of an empty world directory.
pub(crate) fn rmdir(world: &World, path: &Path) -> Answer<()> {
    match node(world, path)? {
        NodeInfo::File { .. } => Err(libc::ENOTDIR),
        NodeInfo::Dir if path.parent().is_none() => Err(libc::EBUSY),
        NodeInfo::Dir => {
            let mut empty = true;
            world.env().visit_dir_names(path, &mut |_| empty = false).map_err(io)?;
            if !empty {
                return Err(libc::ENOTEMPTY);
            }
            world.env().remove_dir(path).map_err(io)
        }
    }
}

/// `rename(2)` of a file within one directory: what `Env::rename` simulates. `None` means the world cannot
/// simulate it (a directory, or across directories): the caller refuses the call.
pub(crate) fn rename(world: &World, from: &Path, to: &Path) -> Option<Answer<()>> {
    let is_dir = |path: &Path| world.env().lookup_current(path) == Some(NodeInfo::Dir);
    if from.parent() != to.parent() || is_dir(from) || is_dir(to) {
        return None;
    }
    Some(world.env().rename(from, to).map_err(io))
}

/// The entries of directory `path`: names and what each names, in the world's order.
pub(crate) fn list(world: &World, path: &Path) -> Answer<Vec<(OsString, NodeInfo)>> {
    let mut names = Vec::new();
    world.env().visit_dir_names(path, &mut |name: &OsStr| names.push(name.to_os_string())).map_err(io)?;
    Ok(names
        .into_iter()
        .filter_map(|name| {
            let info = world.env().lookup_current(&path.join(&name))?;
            Some((name, info))
        })
        .collect())
}
