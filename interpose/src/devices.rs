//! The host's randomness devices, answered by the world (ADR-0177): a bound thread that opens `/dev/urandom` or
//! `/dev/random` gets a simulated descriptor whose reads draw from the world's engine stream, as `getrandom` does
//! (ADR-0162). SQLite's unix VFS seeds its PRNG this way (`unixRandomness`), and a refused open would fail the run.
//! Any other call naming the device's path stays a host path (refused).

#![expect(unsafe_code, reason = "the path arrives as a raw C string (ADR-0162)")]

use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

use libc::{c_char, c_int};

use crate::fds::{Description, FD_BASE, Target};
use crate::ops;
use crate::stat::{Attributes, inode_of};
use crate::world::{self, World};

/// The device files a world answers from its randomness.
pub const RANDOM_DEVICES: [&str; 2] = ["/dev/urandom", "/dev/random"];

/// `open` of a randomness device by a bound thread: `Some(descriptor or -1)`; `None` for any other path or an
/// unbound thread (the caller routes those as usual).
///
/// # Safety
/// `path` is null or a NUL-terminated string valid for the call.
pub(crate) unsafe fn open_random(kind: &'static str, path: *const c_char, flags: c_int) -> Option<c_int> {
    if path.is_null() {
        return None;
    }
    // SAFETY: the caller's contract: non-null and NUL-terminated.
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    let device = RANDOM_DEVICES.into_iter().find(|device| device.as_bytes() == bytes)?;
    let call = world::begin()?;
    call.world.count("random_device");
    let answer = ops::answer(&call, kind, |world| {
        if flags & libc::O_ACCMODE != libc::O_RDONLY {
            return Err(libc::EACCES);
        }
        world.env().charge_work(1, kind);
        let description = Description {
            path: PathBuf::from(device),
            target: Target::Random,
            readable: true,
            writable: false,
            append: false,
            offset: AtomicU64::new(0),
            lock: Default::default(),
        };
        ops::install(world, description, FD_BASE)
    });
    Some(crate::route::ret(answer, |fd| fd as isize) as c_int)
}

/// A read of a randomness device: `buf` filled from the world's engine stream, eight bytes per draw.
pub(crate) fn read_random(world: &World, buf: &mut [u8]) -> usize {
    if buf.is_empty() {
        world.env().charge_work(1, "read");
    }
    crate::random::fill_from(world, buf);
    buf.len()
}

/// What `fstat` says of an open randomness device: a character device, world-readable.
pub(crate) fn attributes_of_random(path: &Path) -> Attributes {
    Attributes { mode: libc::S_IFCHR | 0o666, ino: inode_of(path), nlink: 1, size: 0 }
}
