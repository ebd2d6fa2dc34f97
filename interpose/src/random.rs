//! Randomness for bound threads: `getrandom` and `getentropy` draw from the world's engine stream
//! (`Env::random_u64`), so `HashMap` seeds (`std`'s `RandomState` keys, taken once per thread from `getrandom`)
//! come from the world's seed (ADR-0162).

#![expect(unsafe_code, reason = "C entry points: raw buffers from the caller (ADR-0162)")]

use env::Env;
use libc::{c_int, c_uint, c_void, size_t, ssize_t};

use crate::ops::{self, Answer};
use crate::real::{real, set_errno};
use crate::world::{self, Call};

/// The most bytes one `getrandom` answers (Linux returns at most this many per call, too).
pub const RANDOM_BYTES_MAX: usize = 33_554_431;
/// `getentropy`'s limit, from POSIX.
pub const ENTROPY_BYTES_MAX: usize = 256;

/// Fill `buf` from the world's engine stream, eight bytes per draw.
pub(crate) fn fill(call: &Call, kind: &'static str, buf: *mut c_void, len: usize) -> Answer<usize> {
    let len = len.min(RANDOM_BYTES_MAX);
    if len > 0 && buf.is_null() {
        return Err(libc::EFAULT);
    }
    ops::answer(call, kind, |world| {
        if len == 0 {
            world.env().charge_work(1, kind);
            return Ok(0);
        }
        // SAFETY: the caller's buffer of at least `len` bytes (non-null).
        fill_from(world, unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) });
        Ok(len)
    })
}

/// Fill `bytes` from the world's engine stream, eight bytes per draw (each draw a yield point).
pub(crate) fn fill_from(world: &crate::world::World, bytes: &mut [u8]) {
    for chunk in bytes.chunks_mut(8) {
        let draw = world.env().random_u64().to_le_bytes();
        chunk.copy_from_slice(&draw[..chunk.len()]);
    }
}

/// `getrandom(2)`: the world's bytes (the flags do not matter: the world never blocks).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getrandom(buf: *mut c_void, len: size_t, flags: c_uint) -> ssize_t {
    let Some(call) = world::begin() else {
        return real!(getrandom: unsafe extern "C" fn(*mut c_void, size_t, c_uint) -> ssize_t => (buf, len, flags));
    };
    crate::route::ret(fill(&call, "getrandom", buf, len), |count| isize::try_from(count).unwrap_or(isize::MAX))
}

/// `getentropy(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getentropy(buf: *mut c_void, len: size_t) -> c_int {
    let Some(call) = world::begin() else {
        return real!(getentropy: unsafe extern "C" fn(*mut c_void, size_t) -> c_int => (buf, len));
    };
    if len > ENTROPY_BYTES_MAX {
        set_errno(libc::EIO);
        return -1;
    }
    crate::route::ret_unit(fill(&call, "getentropy", buf, len).map(drop))
}
