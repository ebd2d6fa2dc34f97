//! Which world answers a thread's calls: the binding of OS threads to worlds, the registry that gives one world one
//! binding, the "inside the interposer" flag that sends this crate's own calls to the real C library, and the
//! per-world state (descriptors, counts of calls by kind, refusals).

#![forbid(unsafe_code)]

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use env::{SimEnv, WeakSimEnv};

use crate::fds::FdTable;

/// Every world's directory lies under this host path, which must not exist on the host (ADR-0163, ADR-0164).
pub const WORLD_ROOT: &str = "/holdfast-world";
/// The most worlds alive at once in one process (a swarm runs a few per core).
pub(crate) const WORLDS_MAX: usize = 4096;
/// The most refusals one world records (the first is the one reported; later ones are counted).
pub(crate) const REFUSALS_MAX: usize = 64;

/// A refusal: a call the simulation cannot answer faithfully, with the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The C function refused (`mmap`, `fork`, `open64`, ...).
    pub call: &'static str,
    /// What happened and how to fix it.
    pub message: String,
}

/// One world's binding: its `SimEnv` (held weakly: the binding lives as long as the world, not longer), its
/// directory, and the state its intercepted calls share.
#[derive(Debug)]
pub(crate) struct World {
    env: WeakSimEnv,
    pub(crate) dir: PathBuf,
    state: Mutex<State>,
}

/// Never held across a call into the `SimEnv`: that call may pass the baton to another of the world's threads,
/// which may need this lock (ADR-0104's yield points).
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) calls: BTreeMap<&'static str, u64>,
    pub(crate) refusals: Vec<Refusal>,
    pub(crate) refusals_dropped: u64,
    /// How many of the refusals a guard has raised already (each is raised once).
    pub(crate) refusals_raised: usize,
    pub(crate) fds: FdTable,
}

impl World {
    fn new(env: &SimEnv) -> Self {
        let dir = Path::new(WORLD_ROOT).join(env.seed().to_string());
        Self { env: env.downgrade(), dir, state: Mutex::new(State::default()) }
    }

    /// The world's `SimEnv`. Panics (inside [`guarded`], so the call fails with `EIO`) when every handle to the
    /// world is gone: a thread still bound to a world its runner dropped.
    pub(crate) fn env(&self) -> SimEnv {
        self.env.upgrade().expect("interpose: a call on a thread bound to a world whose every SimEnv handle is gone")
    }

    /// The world's `SimEnv` while any handle to it lives (the threads half: a thread left running after its world
    /// was dropped gets the real C library, never a panic inside a C call).
    pub(crate) fn live_env(&self) -> Option<SimEnv> {
        self.env.upgrade()
    }

    fn is_world_of(&self, env: &SimEnv) -> bool {
        self.env.upgrade().is_some_and(|mine| mine.same_world(env))
    }

    fn is_alive(&self) -> bool {
        self.env.upgrade().is_some()
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Count one intercepted call of `kind` answered by this world.
    pub(crate) fn count(&self, kind: &'static str) {
        let mut state = self.state();
        let count = state.calls.entry(kind).or_insert(0);
        *count = count.saturating_add(1);
    }

    /// Record a refusal and say it on the real stderr at once (the run fails when the world's guard drops).
    pub(crate) fn refuse(&self, call: &'static str, message: String) {
        crate::real::write_stderr(format!("interpose: refused `{call}`: {message}\n").as_bytes());
        let mut state = self.state();
        if state.refusals.len() < REFUSALS_MAX {
            state.refusals.push(Refusal { call, message });
        } else {
            state.refusals_dropped = state.refusals_dropped.saturating_add(1);
        }
    }

    /// The world's path for `host`, a path under this world's directory (`None` otherwise): `/` for the
    /// directory itself, `/a/b` for `<dir>/a/b`.
    pub(crate) fn world_path(&self, host: &Path) -> Option<PathBuf> {
        let rest = host.strip_prefix(&self.dir).ok()?;
        Some(Path::new("/").join(rest))
    }

    /// The host-looking path of world path `path` (the inverse of [`World::world_path`]).
    pub(crate) fn host_path(&self, path: &Path) -> PathBuf {
        self.dir.join(path.strip_prefix("/").unwrap_or(path))
    }
}

thread_local! {
    /// The world the calling OS thread belongs to.
    static CURRENT: RefCell<Option<Arc<World>>> = const { RefCell::new(None) };
    /// True while this thread runs this crate's own code for an intercepted call: everything it calls then goes to
    /// the real C library (no re-entrant interception).
    static INSIDE: Cell<bool> = const { Cell::new(false) };
    /// A panic raised while this thread's intercepted call ran (a work budget overrun, a scheduler abort, a bug):
    /// it cannot unwind through the C caller, so it waits here and the call fails; see [`guarded`].
    static PENDING: RefCell<Option<Box<dyn Any + Send>>> = const { RefCell::new(None) };
    /// True while this thread runs as a process that died ([`crate::fenced`]): no call reaches its world.
    static FENCED: Cell<bool> = const { Cell::new(false) };
}

/// Set or clear this thread's fence; returns the previous value.
pub(crate) fn set_fenced(fenced: bool) -> bool {
    FENCED.try_with(|flag| flag.replace(fenced)).unwrap_or(false)
}

/// True while the calling thread is fenced ([`crate::fenced`]).
pub(crate) fn is_fenced() -> bool {
    FENCED.try_with(Cell::get).unwrap_or(false)
}

/// A fenced thread's `close` of a simulated descriptor: the descriptor is released from the thread's world with no
/// yield point and no IO, as the kernel closes a dead process's descriptors. `false` when the thread has no world.
pub(crate) fn release_fenced(fd: libc::c_int) -> bool {
    let Some(world) = current() else { return false };
    let _inside = Inside::enter();
    let removed = world.state().fds.remove(fd);
    drop(removed);
    true
}

/// Run `answer` (this crate's answer to an intercepted call) so that a panic inside it does not unwind into the C
/// caller: `std` declares the C library's functions `nounwind`, so an unwind through them aborts the process. The
/// payload is kept (the first one) and `Err(())` returned; the call then fails with `EIO`, every later world call
/// on this thread fails the same way, and [`take_pending`] hands the payload to whoever can raise it: the outermost
/// [`crate::Entered`] when it drops, or the threads module when a world thread's body returns.
pub(crate) fn guarded<T>(answer: impl FnOnce() -> T) -> Result<T, ()> {
    if has_pending() {
        return Err(());
    }
    catch_unwind(AssertUnwindSafe(answer)).map_err(|payload| {
        let _ = PENDING.try_with(|slot| {
            let mut slot = slot.borrow_mut();
            if slot.is_none() {
                *slot = Some(payload);
            }
        });
    })
}

/// True while this crate's own code runs on this thread (or its locals are gone).
pub(crate) fn is_inside() -> bool {
    INSIDE.try_with(Cell::get).unwrap_or(true)
}

/// True when an intercepted call on this thread panicked and the panic was not raised yet.
pub(crate) fn has_pending() -> bool {
    PENDING.try_with(|slot| slot.borrow().is_some()).unwrap_or(false)
}

/// The panic an intercepted call on this thread caught, to raise now (`std::panic::resume_unwind`).
pub(crate) fn take_pending() -> Option<Box<dyn Any + Send>> {
    PENDING.try_with(|slot| slot.borrow_mut().take()).ok().flatten()
}

/// The registry: one binding per live world, so that nested or repeated `enter`s share descriptors and counts for
/// as long as the world lives. A binding whose world is gone is dropped at the next `enter`.
static WORLDS: Mutex<Vec<Arc<World>>> = Mutex::new(Vec::new());

/// The calling thread's world, if it is bound to one (`None` too while the thread's locals are torn down).
pub(crate) fn current() -> Option<Arc<World>> {
    CURRENT.try_with(|slot| slot.borrow().clone()).ok().flatten()
}

/// Bind the calling thread to `world` (or unbind it, `None`); returns the previous binding. The threads module
/// uses it to bind a thread a world thread starts.
pub(crate) fn set_current(world: Option<Arc<World>>) -> Option<Arc<World>> {
    CURRENT.try_with(|slot| slot.replace(world)).ok().flatten()
}

/// The binding for `env`'s world: the live one, or a new one.
pub(crate) fn binding_for(env: &SimEnv) -> Arc<World> {
    let _inside = Inside::enter();
    let mut worlds = WORLDS.lock().unwrap_or_else(PoisonError::into_inner);
    let gone: Vec<Arc<World>> = worlds.extract_if(.., |world| !world.is_alive()).collect();
    if let Some(live) = worlds.iter().find(|world| world.is_world_of(env)) {
        return Arc::clone(live);
    }
    assert!(worlds.len() < WORLDS_MAX, "interpose: more than {WORLDS_MAX} worlds alive at once");
    let world = Arc::new(World::new(env));
    worlds.push(Arc::clone(&world));
    drop(worlds);
    drop(gone);
    world
}

/// Marks the calling thread as inside the interposer until dropped (restoring the previous mark).
#[derive(Debug)]
pub(crate) struct Inside {
    was: bool,
}

impl Inside {
    pub(crate) fn enter() -> Self {
        Self { was: INSIDE.try_with(|flag| flag.replace(true)).unwrap_or(true) }
    }

    /// Marks the calling thread as outside the interposer until dropped: the program's own code runs again (a
    /// world thread's start routine, run from inside the threads module's trampoline).
    pub(crate) fn leave() -> Self {
        Self { was: INSIDE.try_with(|flag| flag.replace(false)).unwrap_or(true) }
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        let was = self.was;
        let _ = INSIDE.try_with(|flag| flag.set(was));
    }
}

/// An intercepted call on a bound thread, outside this crate's own code: the thread is marked inside until the
/// `Call` drops, so the C library calls made while answering it are real.
#[derive(Debug)]
pub(crate) struct Call {
    pub(crate) world: Arc<World>,
    _inside: Inside,
}

/// The world that should answer the calling thread's intercepted call, or `None`: the thread is not bound, or this
/// crate's own code is running on it (the caller then calls the real C library).
pub(crate) fn begin() -> Option<Call> {
    if INSIDE.try_with(Cell::get).unwrap_or(true) || is_fenced() {
        return None;
    }
    let inside = Inside::enter();
    let world = current()?;
    Some(Call { world, _inside: inside })
}
