//! Directory streams on world directories: `opendir`, `fdopendir`, `readdir64`, `readdir`, `rewinddir`, `dirfd`,
//! `closedir` (ADR-0162). A stream lists the directory once, when opened (POSIX leaves entries added or removed
//! afterwards unspecified), in the world's order, with each entry's type (`DT_REG`/`DT_DIR`) so that `std` needs
//! no `stat` per entry; `.` and `..` are not listed (`std` skips them anyway).

#![expect(unsafe_code, reason = "C entry points: DIR pointers and C strings from the caller (ADR-0162)")]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use env::NodeInfo;
use libc::{DIR, c_char, c_int, dirent64};

use crate::fds::Target;
use crate::ops::{self, Answer};
use crate::real::{real, set_errno};
use crate::route::{Routed, route_path, world_fd};
use crate::world::{self, World};

/// The most directory streams open at once in the process.
pub const STREAMS_MAX: usize = 1 << 16;

/// One open stream: its descriptor, the entries listed when it opened, and the entry `readdir` returned last.
struct Stream {
    world: Weak<World>,
    fd: c_int,
    entries: Vec<(OsString, NodeInfo)>,
    next: usize,
    entry: Box<dirent64>,
}

/// Every simulated stream in the process, by the address handed out as its `DIR *` (the address of its boxed
/// entry: unique while the stream lives). Never held across a call into a world (a yield point).
static STREAMS: Mutex<BTreeMap<usize, Stream>> = Mutex::new(BTreeMap::new());

fn streams() -> std::sync::MutexGuard<'static, BTreeMap<usize, Stream>> {
    STREAMS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn is_ours(dir: *mut DIR) -> bool {
    let _inside = world::Inside::enter();
    streams().contains_key(&(dir as usize))
}

/// Open a stream on world directory descriptor `fd` (owned by the stream from now on).
fn open_stream(world: &Arc<World>, fd: c_int) -> Answer<*mut DIR> {
    let description = ops::description(world, fd)?;
    if !matches!(description.target, Target::Dir) {
        return Err(libc::ENOTDIR);
    }
    let entries = ops::list(world, &description.path)?;
    // SAFETY: an all-zero dirent64 is valid (integers and bytes).
    let entry: Box<dirent64> = Box::new(unsafe { std::mem::zeroed() });
    let key = std::ptr::from_ref::<dirent64>(&entry) as usize;
    let mut streams = streams();
    if streams.len() >= STREAMS_MAX {
        return Err(libc::EMFILE);
    }
    streams.insert(key, Stream { world: Arc::downgrade(world), fd, entries, next: 0, entry });
    Ok(key as *mut DIR)
}

fn ret_dir(answer: Answer<*mut DIR>) -> *mut DIR {
    answer.unwrap_or_else(|errno| {
        set_errno(errno);
        std::ptr::null_mut()
    })
}

/// `opendir(3)`: what `fs::read_dir` calls.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut DIR {
    // SAFETY: `path` comes from the C caller, null or NUL-terminated.
    match unsafe { route_path("opendir", None, path) } {
        Routed::Real => real!(opendir: unsafe extern "C" fn(*const c_char) -> *mut DIR => (path)),
        Routed::Fail(errno) => ret_dir(Err(errno)),
        Routed::World(call, world_path) => ret_dir(ops::answer(&call, "opendir", |world| {
            let fd = ops::open(world, world_path, libc::O_RDONLY | libc::O_DIRECTORY)?;
            open_stream(&call.world, fd).inspect_err(|_| {
                let _ = ops::close(world, fd);
            })
        })),
    }
}

/// `fdopendir(3)`: what `fs::remove_dir_all` calls.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fdopendir(fd: c_int) -> *mut DIR {
    match world_fd(fd) {
        Some(call) => ret_dir(ops::answer(&call, "fdopendir", |_| open_stream(&call.world, fd))),
        None => real!(fdopendir: unsafe extern "C" fn(c_int) -> *mut DIR => (fd)),
    }
}

/// The next entry of stream `dir`, written into its entry buffer; null at the end.
fn next_entry(world: &World, dir: *mut DIR) -> Answer<*mut dirent64> {
    world.env().charge_work(1, "readdir");
    let mut streams = streams();
    let stream = streams.get_mut(&(dir as usize)).ok_or(libc::EBADF)?;
    let Some((name, info)) = stream.entries.get(stream.next) else { return Ok(std::ptr::null_mut()) };
    let bytes = name.as_encoded_bytes();
    let entry = &mut *stream.entry;
    if bytes.len() >= entry.d_name.len() {
        return Err(libc::ENAMETOOLONG);
    }
    entry.d_name.fill(0);
    for (slot, byte) in entry.d_name.iter_mut().zip(bytes) {
        *slot = byte.cast_signed();
    }
    entry.d_type = match info {
        NodeInfo::Dir => libc::DT_DIR,
        NodeInfo::File { .. } => libc::DT_REG,
    };
    let index = stream.next;
    stream.next += 1;
    entry.d_ino = index as u64 + 1;
    entry.d_off = i64::try_from(stream.next).unwrap_or(i64::MAX);
    entry.d_reclen = u16::try_from(size_of::<dirent64>()).unwrap_or(u16::MAX);
    Ok(std::ptr::from_mut(entry))
}

fn readdir_in_world(kind: &'static str, dir: *mut DIR) -> Option<*mut dirent64> {
    if dir.is_null() || !is_ours(dir) {
        return None;
    }
    let Some(call) = world::begin() else {
        // A stream of a world, read by a thread outside it.
        set_errno(libc::EBADF);
        return Some(std::ptr::null_mut());
    };
    let answer = ops::answer(&call, kind, |world| next_entry(world, dir));
    Some(answer.unwrap_or_else(|errno| {
        set_errno(errno);
        std::ptr::null_mut()
    }))
}

/// `readdir64(3)`: what `ReadDir`'s iterator calls.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readdir64(dir: *mut DIR) -> *mut dirent64 {
    readdir_in_world("readdir64", dir)
        .unwrap_or_else(|| real!(readdir64: unsafe extern "C" fn(*mut DIR) -> *mut dirent64 => (dir)))
}

/// `readdir(3)` (the same structure as `readdir64` on x86_64).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readdir(dir: *mut DIR) -> *mut dirent64 {
    readdir_in_world("readdir", dir)
        .unwrap_or_else(|| real!(readdir: unsafe extern "C" fn(*mut DIR) -> *mut dirent64 => (dir)))
}

/// `dirfd(3)`: the stream's simulated descriptor.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dirfd(dir: *mut DIR) -> c_int {
    if !dir.is_null() && is_ours(dir) {
        let _inside = world::Inside::enter();
        return streams().get(&(dir as usize)).map_or(-1, |stream| stream.fd);
    }
    real!(dirfd: unsafe extern "C" fn(*mut DIR) -> c_int => (dir))
}

/// `rewinddir(3)`: back to the first entry listed when the stream opened.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rewinddir(dir: *mut DIR) {
    if !dir.is_null() && is_ours(dir) {
        let _inside = world::Inside::enter();
        if let Some(stream) = streams().get_mut(&(dir as usize)) {
            stream.next = 0;
        }
        return;
    }
    type RewinddirFn = unsafe extern "C" fn(*mut DIR);
    real!(rewinddir: RewinddirFn => (dir));
}

/// `closedir(3)`: frees the stream and closes its descriptor.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn closedir(dir: *mut DIR) -> c_int {
    if dir.is_null() || !is_ours(dir) {
        return real!(closedir: unsafe extern "C" fn(*mut DIR) -> c_int => (dir));
    }
    let Some(stream) = ({
        let _inside = world::Inside::enter();
        streams().remove(&(dir as usize))
    }) else {
        set_errno(libc::EBADF);
        return -1;
    };
    match world::begin() {
        Some(call) if stream.world.upgrade().is_some_and(|world| Arc::ptr_eq(&world, &call.world)) => {
            crate::route::ret_unit(ops::answer(&call, "closedir", |world| ops::close(world, stream.fd)))
        }
        // Closed by a thread outside its world: its descriptor goes without a yield point.
        _ => {
            let _inside = world::Inside::enter();
            if let Some(world) = stream.world.upgrade() {
                drop(world.state().fds.remove(stream.fd));
            }
            0
        }
    }
}
