//! Threads of an unmodified program under the world's scheduler (ADR-0165, ADR-0104): `pthread_create`,
//! `pthread_join`, `pthread_detach`, `pthread_setname_np` and `sched_yield` for a thread bound to a world, and
//! sleeps as simulated time (ADR-0166). The futex waits the threads block in are [`crate::futex`]'s.
//!
//! * `pthread_create` on a world's thread registers the new thread in the world at the call (the parent holds the
//!   baton, so the index is deterministic), starts it with the real `pthread_create` through a trampoline that
//!   binds it to the world, waits for the baton, runs the start routine, then finishes and leaves the world
//!   before the C library runs its thread-local destructors and exit (they run unscheduled); then the parent
//!   yields.
//! * `pthread_join` blocks under the baton until the thread finished, then joins for real (a moment later).
//! * A panic on such a thread (a `std::thread` whose closure panicked) is the run's failure, with the thread's
//!   name and message: a panic hook installed with the first thread records it.
//!
//! Drive a program with threads through [`run`]: the program then runs on a thread of the world, and the calling
//! thread (the world's main thread) waits in the scheduler's join, in Rust, where the run's failure (a deadlock, a
//! panic on any thread) is raised as a panic the test or holdfast's runner reports.
//! A thread bound with [`crate::enter`] that starts threads itself becomes the world's main thread; a failure
//! that reaches it while it is blocked inside a C call (a futex wait) cannot unwind through the C library, so
//! it is written to stderr and the process aborts: loud, never a hang.

#![expect(unsafe_code, reason = "C entry points: pthread_t out-pointers and the start routine's argument (ADR-0165)")]

use std::any::Any;
use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::time::Duration;

use env::SimEnv;
use env::sim::foreign::{self, Member};
use env::thread::ThreadFailure;

use crate::real::{real, write_stderr};
use crate::world::{self, Call, Inside, World};

pub(crate) const NANOS_PER_SEC: u64 = 1_000_000_000;

/// The threads started through `pthread_create` that are a world's and not yet joined or detached.
static STARTED: Mutex<BTreeMap<libc::pthread_t, Member>> = Mutex::new(BTreeMap::new());

thread_local! {
    /// True on a thread this module started, while its start routine runs: its panics are the run's failure.
    static FOREIGN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;

/// Run `program` on a new thread of `env`'s world bound to it (`interpose::enter`), and wait for it: its value.
/// The calling thread is the world's main thread (registering the program's thread makes it so on the world's
/// first thread) or one of its threads, and waits in the scheduler's join, in Rust, so a deadlock among the
/// program's threads or a panic on any of them is raised here as `env::thread::ThreadFailure` (holdfast reports it
/// as `liveness.deadlock` or the thread's panic). The program's thread's slot is freed when it is joined, so a
/// target may `run` each call of a long run.
#[expect(
    clippy::disallowed_methods,
    reason = "the program's thread is an OS thread the world's scheduler runs (ADR-0165)"
)]
pub fn run<T: Send + 'static>(env: &SimEnv, name: &str, program: impl FnOnce() -> T + Send + 'static) -> T {
    let member = foreign::register(env, name);
    let index = member.index();
    let result = Arc::new(Mutex::new(None));
    let (slot, world_env) = (Arc::clone(&result), env.clone());
    let body = move || {
        foreign::run(member, move || {
            let entered = crate::enter(&world_env);
            let value = program();
            drop(entered);
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(value);
        });
    };
    let started = {
        // The thread is the world's already: its OS thread is not a `pthread_create` of the program's.
        let _inside = Inside::enter();
        std::thread::Builder::new().name(name.to_string()).spawn(body)
    };
    let os = started.unwrap_or_else(|error| panic!("interpose::threads::run: the OS refused a thread: {error}"));
    let me = foreign::current().expect("registering made the caller a thread of the world");
    me.join(index, "interpose::threads::run");
    if let Err(payload) = os.join() {
        resume_unwind(payload);
    }
    let value = result.lock().unwrap_or_else(PoisonError::into_inner).take();
    value.unwrap_or_else(|| panic!("interpose::threads::run: '{name}' ended without a value"))
}

/// Run `f` (a scheduler operation of `member`) where a panic cannot unwind: its value, or `None` when the run
/// failed. The failed run's unwinding of a thread other than the main one is swallowed (the caller returns as if
/// woken, and the thread runs on unscheduled); any other panic is the run's failure; on the main thread the
/// failure cannot be raised through the C caller, so it is written to stderr and the process aborts.
pub(crate) fn scheduled_call<T>(member: &Member, f: impl FnOnce() -> T) -> Option<T> {
    let payload = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => return Some(value),
        Err(payload) => payload,
    };
    if member.is_main() {
        let text = format!(
            "interpose: the world failed while its main thread was inside a C call, where a panic cannot unwind: \
             {}. Drive programs with threads through interpose::threads::run (ADR-0165)\n",
            describe(payload.as_ref())
        );
        write_stderr(text.as_bytes());
        std::process::abort();
    }
    if !foreign::is_unwinding_a_failed_run(payload.as_ref()) {
        member.fail(payload);
    }
    None
}

fn describe(payload: &(dyn Any + Send)) -> String {
    if let Some(failure) = payload.downcast_ref::<ThreadFailure>() {
        failure.to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else {
        "a panic with a non-string payload".into()
    }
}

/// Let `duration` pass for the calling thread on `env`'s clock: a thread of the world's scheduler blocks until the
/// clock reaches the deadline (ADR-0166); any other bound thread moves the clock on at once.
pub(crate) fn sleep(env: &SimEnv, duration: Duration) {
    let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
    match foreign::current().filter(|member| !member.run_failed() && member.is_of(env)) {
        Some(member) => {
            scheduled_call(&member, || foreign::sleep(env, nanos));
        }
        None => foreign::sleep(env, nanos),
    }
}

/// A thread call (futex, join, yield, C mutex) of a thread of a live world's scheduler: the thread is marked
/// inside this crate until it drops.
pub(crate) struct SchedCall {
    /// The world's binding, when the thread is bound (its calls are counted there).
    pub(crate) call: Option<Call>,
    pub(crate) member: Member,
    _inside: Option<Inside>,
}

impl SchedCall {
    /// True when the thread is bound to the world (part of the program), not only the thread driving it.
    pub(crate) fn is_bound(&self) -> bool {
        self.call.is_some()
    }

    /// Count one call of `kind`, if the thread is bound.
    pub(crate) fn count(&self, kind: &'static str) {
        if let Some(call) = &self.call {
            call.world.count(kind);
        }
    }
}

/// The calling thread as a thread of a live world's scheduler whose run has not failed, or `None` (the caller
/// forwards the call to the C library): not inside this crate's or `env`'s own locking, and, if bound, bound to the
/// scheduler's world. A member need not be bound: the thread driving a world (its main thread, outside the
/// program) wakes the world's waiters and joins the world's threads under the baton, so that a store it drops can
/// wake and join the world's workers; its waits stay the kernel's ([`SchedCall::is_bound`]), since what it waits
/// for may be outside the world (another test's hold on stdout).
pub(crate) fn scheduler_thread() -> Option<SchedCall> {
    if foreign::in_env_internals() || world::is_inside() {
        return None;
    }
    let member = foreign::current().filter(|member| !member.run_failed())?;
    match world::begin() {
        Some(call) => {
            let env = call.world.live_env()?;
            member.is_of(&env).then_some(SchedCall { call: Some(call), member, _inside: None })
        }
        None => Some(SchedCall { call: None, member, _inside: Some(Inside::enter()) }),
    }
}

struct Start {
    member: Member,
    world: Arc<World>,
    routine: StartRoutine,
    argument: *mut c_void,
}

/// `pthread_create(3)`: a world's thread's new thread is the world's (see the module docs).
///
/// # Safety
/// As the C function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: StartRoutine,
    argument: *mut c_void,
) -> c_int {
    type Real =
        unsafe extern "C" fn(*mut libc::pthread_t, *const libc::pthread_attr_t, StartRoutine, *mut c_void) -> c_int;
    let call = if foreign::in_env_internals() { None } else { world::begin() };
    let env = call.as_ref().and_then(|call| call.world.live_env());
    let ours = env.as_ref().is_some_and(|env| foreign::current().is_none_or(|m| !m.run_failed() && m.is_of(env)));
    let (Some(call), Some(env), true) = (call, env, ours) else {
        return real!(pthread_create: Real => (thread, attr, routine, argument));
    };
    call.world.count("pthread_create");
    install_panic_hook();
    let registered = catch_unwind(AssertUnwindSafe(|| foreign::register(&env, "pthread")));
    let Ok(child) = registered else {
        call.world.refuse("pthread_create", "a thread outside the world's scheduler started a thread".into());
        return libc::EPERM;
    };
    child.rename(&format!("pthread-{}", child.index()));
    let start = Box::new(Start { member: child.clone(), world: Arc::clone(&call.world), routine, argument });
    let start = Box::into_raw(start).cast::<c_void>();
    let status = real!(pthread_create: Real => (thread, attr, trampoline, start));
    if status != 0 {
        // SAFETY: the real pthread_create failed, so the trampoline never got `start`.
        drop(unsafe { Box::from_raw(start.cast::<Start>()) });
        child.abandon(child.index());
        return status;
    }
    // SAFETY: the real pthread_create succeeded and wrote the new thread's id.
    let id = unsafe { thread.read() };
    STARTED.lock().unwrap_or_else(PoisonError::into_inner).insert(id, child);
    if let Some(parent) = foreign::current() {
        scheduled_call(&parent, || parent.yield_now());
    }
    0
}

/// The start routine the real `pthread_create` runs: the thread runs as the world's, then leaves it.
extern "C" fn trampoline(start: *mut c_void) -> *mut c_void {
    // SAFETY: `start` is the box `pthread_create` leaked for this thread, taken back once.
    let Start { member, world, routine, argument } = *unsafe { Box::from_raw(start.cast::<Start>()) };
    let mut result = std::ptr::null_mut();
    let inside = Inside::enter(); // the scheduler's own locking below is real
    foreign::run(member, || {
        let _outside = Inside::leave();
        drop(world::set_current(Some(world)));
        let _ = FOREIGN.try_with(|flag| flag.set(true));
        result = routine(argument);
        let _ = FOREIGN.try_with(|flag| flag.set(false));
        // A panic an intercepted call of this thread caught (a work budget overrun, a bug) is the run's failure.
        if let Some(payload) = world::take_pending()
            && let Some(me) = foreign::current()
        {
            me.fail(payload);
        }
        drop(world::set_current(None));
    });
    drop(inside);
    result
}

/// `pthread_join(3)`: a world's thread blocks under the baton until the thread finished, then joins for real.
///
/// # Safety
/// As the C function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_join(thread: libc::pthread_t, result: *mut *mut c_void) -> c_int {
    // The entry goes whoever joins and whatever the run's state: a stale entry would name a later thread that
    // reuses the id (a thread's id is its descriptor's address), maybe in another world.
    let child = {
        let _inside = Inside::enter();
        STARTED.lock().unwrap_or_else(PoisonError::into_inner).remove(&thread)
    };
    if let Some(child) = child
        && let Some(sched) = scheduler_thread()
        && sched.member.same_world(&child)
    {
        sched.count("pthread_join");
        let me = &sched.member;
        scheduled_call(me, || me.join(child.index(), "pthread_join"));
    }
    real!(pthread_join: unsafe extern "C" fn(libc::pthread_t, *mut *mut c_void) -> c_int => (thread, result))
}

/// `pthread_detach(3)`: nobody will join the thread; its slot in the world is freed once it finished.
///
/// # Safety
/// As the C function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_detach(thread: libc::pthread_t) -> c_int {
    let inside = Inside::enter();
    let child = STARTED.lock().unwrap_or_else(PoisonError::into_inner).remove(&thread);
    if let Some(child) = child {
        child.release(child.index());
    }
    drop(inside);
    real!(pthread_detach: unsafe extern "C" fn(libc::pthread_t) -> c_int => (thread))
}

/// `pthread_setname_np(3)`: `std::thread` names its thread from inside it; the world's deadlock and panic
/// reports use the name.
///
/// # Safety
/// As the C function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_setname_np(thread: libc::pthread_t, name: *const c_char) -> c_int {
    type Real = unsafe extern "C" fn(libc::pthread_t, *const c_char) -> c_int;
    // SAFETY: pthread_self has no preconditions.
    let is_self = thread == unsafe { libc::pthread_self() };
    if is_self
        && !name.is_null()
        && let Some(sched) = scheduler_thread()
    {
        // SAFETY: a non-null NUL-terminated name from the caller.
        sched.member.rename(&unsafe { CStr::from_ptr(name) }.to_string_lossy());
    }
    real!(pthread_setname_np: Real => (thread, name))
}

/// `sched_yield(2)`: a yield point of the world's scheduler.
#[unsafe(no_mangle)]
pub extern "C" fn sched_yield() -> c_int {
    if let Some(sched) = scheduler_thread().filter(SchedCall::is_bound) {
        sched.count("sched_yield");
        scheduled_call(&sched.member, || sched.member.yield_now());
        return 0;
    }
    // SAFETY: sched_yield has no preconditions.
    real!(sched_yield: unsafe extern "C" fn() -> c_int => ())
}

/// Record a panic on a thread this module started as the run's failure (then let the previous hook print it).
fn install_panic_hook() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let foreign_thread = FOREIGN.try_with(std::cell::Cell::get).unwrap_or(false);
            if foreign_thread && let Some(member) = foreign::current() {
                member.fail(Box::new(describe(info.payload())));
            }
            previous(info);
        }));
    });
}
