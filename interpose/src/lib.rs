//! `interpose`: unmodified `std` and C code under the simulator (issue 38, ADR-0162).
//!
//! A binary that links this crate defines the C library's file, directory, clock, randomness and machine-shape
//! entry points itself, so that `std` (and C code) in that binary calls them instead of glibc's. Each one asks
//! whether the calling OS thread is bound to a simulated world ([`enter`]): if it is, and the call is the world's
//! (a path under [`Entered::dir`], a simulated descriptor, the clock, randomness), the world's [`env::SimEnv`]
//! answers; every other call goes to the real C library untouched. Calls the simulation cannot answer faithfully
//! (`mmap` of a simulated file, `fork`, `io_uring`, `epoll` on a simulated descriptor, a host path) are refused: the
//! call fails with an error, the refusal is written to stderr and recorded, and the run fails when the world's
//! guard drops ([`Entered`]).
//!
//! ```
//! let world = env::SimEnv::new(7);
//! let entered = interpose::enter(&world);
//! let path = entered.dir().join("log");
//! std::fs::create_dir_all(entered.dir()).unwrap();
//! std::fs::write(&path, b"put k v\n").unwrap(); // lands on the SimEnv's disk, not the host's
//! assert_eq!(world.read_current(std::path::Path::new("/log")).as_deref(), Some(&b"put k v\n"[..]));
//! ```
//!
//! Code that makes system calls itself (rustix's default `linux_raw` backend, which `tempfile` uses) is invisible
//! here: on a world path such a call fails with `ENOENT`, since `/holdfast-world` does not exist on the host. Build
//! with `RUSTFLAGS="--cfg rustix_use_libc"` to send rustix through the C library (ADR-0164).
//!
//! Platforms: Linux with glibc on x86_64 (ADR-0162). Modules: `world` (bindings and per-world state), `real` (the
//! real C library through `dlsym(RTLD_NEXT)`), `fds` (simulated descriptors), and the entry points by area.

#[cfg(not(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64")))]
compile_error!(
    "interpose covers Linux with glibc on x86_64 only (ADR-0162): its symbols and ABI assumptions are that platform's"
);

mod clock;
mod devices;
mod dirs;
mod fds;
mod files;
pub mod futex;
mod hints;
mod machine;
mod names;
mod ops;
mod paths;
mod random;
mod real;
mod refuse;
mod route;
mod sched_pthread;
mod stat;
mod statics;
mod syscalls;
pub mod threads;
mod world;

use std::collections::BTreeMap;
use std::ffi::CString;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::Arc;

use env::SimEnv;

pub use crate::clock::REALTIME_BASE_SECS;
pub use crate::devices::RANDOM_DEVICES;
pub use crate::fds::{FD_BASE, FDS_MAX};
pub use crate::machine::WORLD_CPUS;
pub use crate::paths::{MACHINE_SHAPE_DIRS, MACHINE_SHAPE_FILES};
use crate::world::World;
pub use crate::world::{Refusal, WORLD_ROOT};

/// The intercepted calls a world answered, counted by kind (the C function's name), and its refusals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Calls answered by the world, by C function (`open64`, `pwrite64`, `clock_gettime`, ...).
    pub calls: BTreeMap<&'static str, u64>,
    /// Calls refused (at most `REFUSALS_MAX`; `refusals_dropped` counts the rest).
    pub refusals: Vec<Refusal>,
    pub refusals_dropped: u64,
    /// Simulated descriptors open now.
    pub open_descriptors: usize,
}

impl Stats {
    /// All calls answered, every kind together.
    pub fn total_calls(&self) -> u64 {
        self.calls.values().sum()
    }
}

/// The calling thread is bound to a world until this guard drops. Not `Send`: a binding is per OS thread.
///
/// Dropping the outermost guard of a world that refused a call panics with the first refusal not raised before
/// (unless the thread is already panicking), so a refused call fails the run even when the code under test swallowed its error.
#[derive(Debug)]
#[must_use = "the thread is bound only while the guard lives"]
pub struct Entered {
    /// Keeps the world alive while the guard lives (the binding holds it weakly).
    _env: SimEnv,
    world: Arc<World>,
    previous: Option<Arc<World>>,
    _not_send: PhantomData<*const ()>,
}

/// Bind the calling OS thread to `env`'s world until the returned guard drops: this thread's C library calls are
/// then answered by that world. Entering the world the thread is already bound to nests; entering another panics.
///
/// Panics when the host has [`WORLD_ROOT`] (raw system calls on world paths would then reach it, ADR-0164) or when
/// this process may hold descriptors at or above [`FD_BASE`] (ADR-0163).
pub fn enter(env: &SimEnv) -> Entered {
    check_host();
    let world = world::binding_for(env);
    let previous = world::set_current(Some(Arc::clone(&world)));
    if let Some(previous) = &previous
        && !Arc::ptr_eq(previous, &world)
    {
        let other = world::set_current(Some(Arc::clone(previous)));
        drop(other);
        panic!(
            "interpose::enter: this thread is bound to the world of {} already; a thread belongs to one world",
            previous.dir.display()
        );
    }
    Entered { _env: env.clone(), world, previous, _not_send: PhantomData }
}

fn check_host() {
    let root = CString::new(WORLD_ROOT).expect("no NUL in the root");
    assert!(
        !real::host_path_exists(&root),
        "interpose: the host has {WORLD_ROOT}; raw system calls (which bypass the C library) on world paths would \
         reach it instead of failing with ENOENT (ADR-0164). Remove it"
    );
    if let Some(limit) = real::descriptor_hard_limit() {
        assert!(
            limit <= FD_BASE as u64,
            "interpose: RLIMIT_NOFILE's hard limit {limit} reaches the simulated descriptors from {FD_BASE}; lower it \
             (ulimit -Hn) below {FD_BASE} (ADR-0163)"
        );
    }
}

impl Entered {
    /// The host-looking directory this world names (`/holdfast-world/<seed>`): paths under it are the world's.
    pub fn dir(&self) -> PathBuf {
        self.world.dir.clone()
    }

    /// The world's counts of intercepted calls and its refusals.
    pub fn stats(&self) -> Stats {
        stats_of(&self.world)
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        let previous = self.previous.take();
        let outermost = previous.is_none();
        drop(world::set_current(previous));
        if outermost && !std::thread::panicking() {
            if let Some(payload) = world::take_pending() {
                std::panic::resume_unwind(payload);
            }
            let unraised = {
                let mut state = self.world.state();
                let next = state.refusals.get(state.refusals_raised).cloned();
                state.refusals_raised = state.refusals.len();
                next
            };
            if let Some(refusal) = unraised {
                panic!("interpose: the world refused `{}`: {}", refusal.call, refusal.message);
            }
        }
    }
}

/// Run `f` as a process that died (ADR-0177): for its duration no call of the calling thread reaches its world.
/// Calls go to the real C library instead, where a world path does not exist (`ENOENT`, ADR-0164) and a simulated
/// descriptor is not the kernel's (`EBADF`), except `close` of a simulated descriptor, which releases it from the
/// thread's world with no IO, as the kernel closes a dead process's descriptors (so the world's table does not
/// keep its files, and the world, alive). For dropping the handles of a process that died: their close must not
/// write, and their descriptors must go.
pub fn fenced<T>(f: impl FnOnce() -> T) -> T {
    struct Unfence(bool);
    impl Drop for Unfence {
        fn drop(&mut self) {
            world::set_fenced(self.0);
        }
    }
    let _unfence = Unfence(world::set_fenced(true));
    f()
}

/// The calling thread's world's stats, if the thread is bound.
pub fn stats() -> Option<Stats> {
    world::current().map(|world| stats_of(&world))
}

fn stats_of(world: &World) -> Stats {
    let state = world.state();
    Stats {
        calls: state.calls.clone(),
        refusals: state.refusals.clone(),
        refusals_dropped: state.refusals_dropped,
        open_descriptors: state.fds.len(),
    }
}
