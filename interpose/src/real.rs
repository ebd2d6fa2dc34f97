//! The real C library: every entry point this crate defines shadows the C library's for the whole binary, so the
//! crate reaches the real one through `dlsym(RTLD_NEXT, name)` (the next object in the lookup order after the
//! executable: `libc.so.6`), resolved once per symbol and cached (ADR-0162). Never call `libc::open64` and friends
//! from this crate: the static linker binds those to this crate's own definitions.

#![expect(unsafe_code, reason = "the C library's symbols are looked up and called through raw pointers (ADR-0162)")]

use std::ffi::{CStr, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

/// One cached symbol of the real C library.
#[derive(Debug)]
pub(crate) struct RealFn {
    name: &'static CStr,
    pointer: AtomicPtr<c_void>,
}

impl RealFn {
    pub(crate) const fn new(name: &'static CStr) -> Self {
        Self { name, pointer: AtomicPtr::new(std::ptr::null_mut()) }
    }

    /// The real function's address; aborts (with the symbol's name on stderr) if the C library lacks it, since
    /// there is then nothing correct to call.
    pub(crate) fn address(&self) -> *mut c_void {
        let cached = self.pointer.load(Ordering::Acquire);
        if !cached.is_null() {
            return cached;
        }
        // SAFETY: `name` is a NUL-terminated C string; RTLD_NEXT is valid from code in the executable.
        let found = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
        if found.is_null() {
            write_stderr(b"interpose: the C library has no symbol ");
            write_stderr(self.name.to_bytes());
            write_stderr(b"\n");
            std::process::abort();
        }
        self.pointer.store(found, Ordering::Release);
        found
    }
}

/// Call the real C library's `$name`, of type `$ty` (an `unsafe extern "C" fn(..) -> ..`), with `$args`.
macro_rules! real {
    ($name:ident : $ty:ty => ($($arg:expr),* $(,)?)) => {{
        static REAL: $crate::real::RealFn = $crate::real::RealFn::new(
            // SAFETY: the literal ends in the one NUL.
            unsafe { ::std::ffi::CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) },
        );
        // SAFETY: the symbol named `$name` in the C library has the C type `$ty` (its glibc prototype).
        let function: $ty = unsafe { ::std::mem::transmute::<*mut ::std::ffi::c_void, $ty>(REAL.address()) };
        // SAFETY: the caller passes the arguments the C function's contract asks for.
        unsafe { function($($arg),*) }
    }};
}
pub(crate) use real;

/// Write `bytes` to the real standard error, unbuffered, allocating nothing: for messages from inside an
/// intercepted call, where `eprintln!` could re-enter this crate.
pub(crate) fn write_stderr(bytes: &[u8]) {
    let mut rest = bytes;
    // A bounded loop: each round writes at least one byte or stops.
    for _ in 0..bytes.len() {
        if rest.is_empty() {
            return;
        }
        let written = real!(write: unsafe extern "C" fn(libc::c_int, *const c_void, libc::size_t) -> libc::ssize_t
            => (libc::STDERR_FILENO, rest.as_ptr().cast::<c_void>(), rest.len()));
        let Ok(written) = usize::try_from(written) else { return };
        if written == 0 {
            return;
        }
        rest = &rest[written.min(rest.len())..];
    }
}

/// True when `path` exists on the host (a real `access(path, F_OK)`).
pub(crate) fn host_path_exists(path: &CStr) -> bool {
    real!(access: unsafe extern "C" fn(*const libc::c_char, libc::c_int) -> libc::c_int => (path.as_ptr(), libc::F_OK))
        == 0
}

/// The hard limit on this process's descriptors (`RLIMIT_NOFILE`): the kernel hands out no descriptor at or
/// above it. `None` when unlimited or unreadable.
pub(crate) fn descriptor_hard_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `limit` is a valid out-pointer; `getrlimit` is not one of this crate's entry points.
    let status = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) };
    (status == 0 && limit.rlim_max != libc::RLIM_INFINITY).then_some(limit.rlim_max)
}

/// Set the calling thread's `errno`.
pub(crate) fn set_errno(code: libc::c_int) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot, valid for the thread's life.
    unsafe { *libc::__errno_location() = code };
}

/// The calling thread's `errno`.
pub(crate) fn errno() -> libc::c_int {
    // SAFETY: `__errno_location` returns the calling thread's errno slot, valid for the thread's life.
    unsafe { *libc::__errno_location() }
}
