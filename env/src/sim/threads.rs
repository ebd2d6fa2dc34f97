//! Deterministic threads under `SimEnv` (ADR-0104): every thread started with [`crate::thread::spawn`] is a real OS
//! thread, but exactly one of a world's threads runs at a time. A baton (a `std` mutex and condition variable, the
//! one place outside `RealEnv` that blocks an OS thread) passes between them at yield points: each `Env` call and
//! each [`crate::sync`] operation. Where more than one thread could continue, the choice is keyed by (seed, the
//! number of choices since the simulator's step began) and shared with no other decision, so the interleaving is a
//! pure function of the seed and the steps: a replay of the same steps makes the same choices without recording
//! them, and removing a step leaves the other steps' interleavings as they were.
//!
//! No runnable thread left is a deadlock, and a panic on any thread is the run's failure: either way the world's
//! other threads unwind silently ([`Aborted`]) and the driving thread (thread 0, "main") panics with a
//! [`ThreadFailure`] payload, which holdfast's runner reports as `liveness.deadlock` or as the thread's panic.

#![expect(clippy::disallowed_methods, reason = "the baton blocks OS threads: the one place it may (ADR-0104)")]
#![expect(clippy::disallowed_types, reason = "the baton blocks OS threads: the one place it may (ADR-0104)")]

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, Location, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};

use crate::WorkBudgetExceeded;
use crate::random::{below, keyed, stream_seed};
use crate::thread::{BlockedThread, ThreadFailure};

/// The most threads one world may start (its OS threads are real: a runaway spawn loop is a bug).
pub const THREADS_MAX: usize = 1024;
/// The index of the thread that drives the world (the one that started its first thread).
pub const MAIN_THREAD: usize = 0;

/// What a thread waits for: a `sync` object (by address, only ever compared), another thread's end, a word a
/// foreign thread waits on (a futex, by address: [`super::foreign`]), or only its deadline (a sleep).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resource {
    Object(usize),
    Thread(usize),
    Address(usize),
    Timer,
}

/// How a blocked thread came to run again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Another thread woke it (or the run failed: see [`super::foreign::Member::run_failed`]).
    Woken,
    /// Its deadline passed on the world's clock (ADR-0166).
    TimedOut,
}

/// Where a blocked thread waits: the operation and its caller.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockPoint {
    pub(crate) resource: Resource,
    pub(crate) operation: &'static str,
    pub(crate) location: &'static Location<'static>,
}

#[derive(Clone, Copy, Debug)]
enum Status {
    Runnable,
    Blocked(BlockPoint),
    Finished,
}

#[derive(Debug)]
struct ThreadInfo {
    name: String,
    status: Status,
    /// While blocked: when it times out on the world's clock (nanoseconds), if it does (ADR-0166).
    deadline: Option<u64>,
    /// Its last block ended by its deadline, not by a wake.
    timed_out: bool,
    /// When it blocked, in blocks of this world (FIFO order for [`Sched::wake_fifo`]).
    blocked_at: u64,
    /// Its handle was joined or detached: once finished, its slot may hold a new thread ([`Sched::register`]).
    released: bool,
}

impl ThreadInfo {
    fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            status: Status::Runnable,
            deadline: None,
            timed_out: false,
            blocked_at: 0,
            released: false,
        }
    }

    /// Make it runnable again (woken, or `timed_out`).
    fn resume(&mut self, timed_out: bool) {
        self.status = Status::Runnable;
        self.deadline = None;
        self.timed_out = timed_out;
    }
}

/// The baton's state: who exists, who runs, and how the run ended if it did.
struct State {
    threads: Vec<ThreadInfo>,
    running: usize,
    seed: u64,
    /// Choices made since the simulator's current step began ([`Sched::new_step`]): the key of the next one.
    choices_in_step: u64,
    /// The world's clock (nanoseconds), shared with its `World`: a pass makes every thread whose deadline it
    /// reached runnable, and moves it to the earliest deadline when no thread can run (ADR-0166).
    clock: Arc<AtomicU64>,
    /// Blocks so far (each blocked thread's place in the FIFO of [`Sched::wake_fifo`]).
    blocks: u64,
    /// Set once: the first deadlock or thread panic.
    failure: Option<ThreadFailure>,
    /// The payload to raise on the main thread instead of the failure (a work budget overrun keeps its own).
    payload: Option<Box<dyn Any + Send>>,
    /// True once the failure was raised on the main thread: from then on nothing is scheduled (see [`Sched::aborted`]).
    raised: bool,
}

/// One world's threads and the baton they pass.
pub(crate) struct Sched {
    state: Mutex<State>,
    baton: Condvar,
}

impl std::fmt::Debug for Sched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sched").finish_non_exhaustive()
    }
}

/// The payload a world's other threads unwind with once the run failed: never reported, never printed.
#[derive(Debug)]
pub(crate) struct Aborted;

thread_local! {
    /// The scheduler this OS thread belongs to and its index there.
    static CURRENT: RefCell<Option<(Weak<Sched>, usize)>> = const { RefCell::new(None) };
}

thread_local! {
    /// How deep this OS thread is in `env`'s own locking (a world's or a scheduler's lock, the baton's wait).
    static INTERNAL: Cell<u32> = const { Cell::new(0) };
}

/// Run `lock` (an acquisition or a wait of one of `env`'s own locks) marked as `env`'s: an interposition layer
/// that sees the futex wait inside it sends it to the kernel instead of the scheduler ([`in_internal`]).
pub(crate) fn internal<T>(lock: impl FnOnce() -> T) -> T {
    let _mark = InternalMark::new();
    lock()
}

/// This OS thread is in `env`'s own locking while a mark lives ([`internal`]).
struct InternalMark;

impl InternalMark {
    fn new() -> Self {
        let _ = INTERNAL.try_with(|depth| depth.set(depth.get().saturating_add(1)));
        Self
    }
}

impl Drop for InternalMark {
    fn drop(&mut self) {
        let _ = INTERNAL.try_with(|depth| depth.set(depth.get().saturating_sub(1)));
    }
}

/// The scheduler's state, locked; the OS thread is marked as in `env`'s own locking until it unlocked it (the
/// guard drops before the mark), so the futex calls of the lock, the baton's waits and notifies and the unlock are
/// all the C library's, never a scheduler's ([`in_internal`]).
struct Locked<'a> {
    guard: Option<MutexGuard<'a, State>>,
    _mark: InternalMark,
}

impl std::ops::Deref for Locked<'_> {
    type Target = State;

    fn deref(&self) -> &State {
        self.guard.as_ref().expect("a locked state")
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        self.guard.as_mut().expect("a locked state")
    }
}

impl Locked<'_> {
    /// Wait on `baton` (unlocking meanwhile), still marked.
    fn wait(mut self, baton: &Condvar) -> Self {
        let guard = self.guard.take().expect("a locked state");
        self.guard = Some(baton.wait(guard).unwrap_or_else(PoisonError::into_inner));
        self
    }
}

/// True while this OS thread acquires or waits on one of `env`'s own locks.
pub(crate) fn in_internal() -> bool {
    INTERNAL.try_with(|depth| depth.get() > 0).unwrap_or(true)
}

/// This OS thread's scheduler and index, if it belongs to a live one whose run has not failed: where a `sync`
/// operation is a yield point. Otherwise the operation is `std`'s.
pub(crate) fn scheduled() -> Option<(Arc<Sched>, usize)> {
    member().filter(|(sched, _)| !sched.aborted())
}

/// This OS thread's scheduler and index, if it belongs to a live one, failed or not (none while its thread-locals
/// are being destroyed).
pub(crate) fn member() -> Option<(Arc<Sched>, usize)> {
    let found =
        CURRENT.try_with(|slot| slot.try_borrow().ok()?.as_ref().and_then(|(sched, id)| Some((sched.upgrade()?, *id))));
    found.ok().flatten()
}

/// True on a thread a simulated world started (`env::thread::spawn` on `SimEnv`), live or not: its panic is the
/// world's to report (ADR-0169).
pub(crate) fn is_world_thread() -> bool {
    CURRENT.with(|slot| slot.borrow().as_ref().is_some_and(|(_, id)| *id != MAIN_THREAD))
}

/// This OS thread's index in `sched`, if it is one of its threads.
pub(crate) fn index_in(sched: &Arc<Sched>) -> Option<usize> {
    let found = CURRENT.try_with(|slot| {
        let slot = slot.try_borrow().ok()?;
        slot.as_ref().filter(|(mine, _)| std::ptr::eq(mine.as_ptr(), Arc::as_ptr(sched))).map(|(_, id)| *id)
    });
    found.ok().flatten()
}

pub(crate) fn set_current(sched: &Arc<Sched>, id: usize) {
    CURRENT.with(|slot| *slot.borrow_mut() = Some((Arc::downgrade(sched), id)));
}

/// This OS thread is no longer one of a world's threads.
pub(crate) fn clear_current() {
    let _ = CURRENT.try_with(|slot| slot.try_borrow_mut().map(|mut slot| slot.take()));
}

impl Sched {
    /// A scheduler whose thread 0 is the calling thread, choosing by the world's `threads` stream, its
    /// deadlines on `clock`.
    pub(crate) fn new(seed: u64, clock: Arc<AtomicU64>) -> Arc<Self> {
        let state = State {
            threads: vec![ThreadInfo::new("main")],
            running: MAIN_THREAD,
            seed: stream_seed(seed, "threads"),
            choices_in_step: 0,
            clock,
            blocks: 0,
            failure: None,
            payload: None,
            raised: false,
        };
        let sched = Arc::new(Self { state: Mutex::new(state), baton: Condvar::new() });
        set_current(&sched, MAIN_THREAD);
        sched
    }

    fn lock(&self) -> Locked<'_> {
        let mark = InternalMark::new();
        let guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        Locked { guard: Some(guard), _mark: mark }
    }

    /// True once the run failed: `sync` operations stop scheduling (the failure was raised on the main thread,
    /// whose unwinding may still lock and wait; the other threads are unwinding or gone).
    pub(crate) fn aborted(&self) -> bool {
        self.lock().failure.is_some()
    }

    /// The simulator began a new step: choices are keyed from the step's start again (see [`choose`]).
    pub(crate) fn new_step(&self) {
        self.lock().choices_in_step = 0;
    }

    /// Register a new runnable thread named `name`; its index: the first slot of a finished thread whose handle
    /// was released ([`Sched::release`]), else a new one.
    pub(crate) fn register(&self, name: &str) -> usize {
        let mut state = self.lock();
        let reusable = state.threads.iter().position(|t| t.released && matches!(t.status, Status::Finished));
        if let Some(index) = reusable {
            state.threads[index] = ThreadInfo::new(name);
            return index;
        }
        assert!(state.threads.len() < THREADS_MAX, "more than {THREADS_MAX} live threads in one simulated world");
        state.threads.push(ThreadInfo::new(name));
        state.threads.len() - 1
    }

    /// Nobody will wait for thread `id` any more (joined or detached): once finished, its slot is reused.
    pub(crate) fn release(&self, id: usize) {
        self.lock().threads[id].released = true;
    }

    /// Thread `id` never started: it is finished, and its slot free.
    pub(crate) fn abandon(&self, id: usize) {
        let mut state = self.lock();
        state.threads[id].status = Status::Finished;
        state.threads[id].released = true;
    }

    /// Name thread `id` (a foreign thread names itself after it started, as `std::thread` does).
    pub(crate) fn rename(&self, id: usize, name: &str) {
        name.clone_into(&mut self.lock().threads[id].name);
    }

    /// A yield point of thread `me`: the seed chooses which runnable thread continues; returns when `me` runs again.
    pub(crate) fn yield_now(&self, me: usize) {
        let state = self.lock();
        if state.failure.is_some() {
            return self.after_failure(state, me);
        }
        let state = self.pass(state);
        drop(self.wait_turn(state, me));
    }

    /// Block `me` at `point` and run others until something makes it runnable again.
    pub(crate) fn block(&self, me: usize, point: BlockPoint) {
        self.block_until(me, point, None);
    }

    /// Block `me` at `point` until something makes it runnable again or the world's clock reaches `deadline`
    /// (nanoseconds); which of the two it was. A failed run returns [`Wake::Woken`] on the main thread (the other
    /// threads unwind with [`Aborted`]).
    pub(crate) fn block_until(&self, me: usize, point: BlockPoint, deadline: Option<u64>) -> Wake {
        let mut state = self.lock();
        if state.failure.is_some() {
            self.after_failure(state, me);
            return Wake::Woken;
        }
        state.blocks += 1;
        let blocked_at = state.blocks;
        let thread = &mut state.threads[me];
        thread.status = Status::Blocked(point);
        thread.deadline = deadline;
        thread.timed_out = false;
        thread.blocked_at = blocked_at;
        let state = self.pass(state);
        let Some(mut state) = self.wait_turn(state, me) else { return Wake::Woken };
        let timed_out = std::mem::take(&mut state.threads[me].timed_out);
        if timed_out { Wake::TimedOut } else { Wake::Woken }
    }

    /// Make every thread blocked on `resource` runnable (they retry what blocked them).
    pub(crate) fn wake_all(&self, resource: Resource) {
        let mut state = self.lock();
        for thread in &mut state.threads {
            if matches!(thread.status, Status::Blocked(point) if point.resource == resource) {
                thread.resume(false);
            }
        }
    }

    /// Make the first thread (by index) blocked on `resource` runnable; false if none was.
    pub(crate) fn wake_one(&self, resource: Resource) -> bool {
        let mut state = self.lock();
        let waiter =
            state.threads.iter_mut().find(|t| matches!(t.status, Status::Blocked(p) if p.resource == resource));
        waiter.map(|thread| thread.resume(false)).is_some()
    }

    /// Make up to `count` threads blocked on `resource` runnable, those that blocked first first (a futex wakes
    /// in FIFO order); how many it woke.
    pub(crate) fn wake_fifo(&self, resource: Resource, count: usize) -> usize {
        let mut state = self.lock();
        let mut waiters: Vec<(u64, usize)> = (state.threads.iter().enumerate())
            .filter(|(_, t)| matches!(t.status, Status::Blocked(p) if p.resource == resource))
            .map(|(id, t)| (t.blocked_at, id))
            .collect();
        waiters.sort_unstable();
        waiters.truncate(count);
        for &(_, id) in &waiters {
            state.threads[id].resume(false);
        }
        waiters.len()
    }

    /// True when thread `id` has finished.
    pub(crate) fn finished(&self, id: usize) -> bool {
        matches!(self.lock().threads[id].status, Status::Finished)
    }

    /// Choose the next thread among the runnable ones and hand it the baton; no runnable thread is a deadlock.
    /// Threads whose deadline the clock reached run again first; when no thread can run but one waits for a
    /// deadline, the clock moves to the earliest one (ADR-0166).
    fn pass<'a>(&'a self, mut state: Locked<'a>) -> Locked<'a> {
        let now = state.clock.load(Ordering::Acquire);
        expire(&mut state.threads, now);
        let mut runnable = runnable_ids(&state.threads);
        if runnable.is_empty()
            && let Some(next) = state.threads.iter().filter_map(|t| t.deadline).min()
        {
            state.clock.fetch_max(next, Ordering::AcqRel);
            expire(&mut state.threads, next);
            runnable = runnable_ids(&state.threads);
        }
        if runnable.is_empty() {
            let blocked = blocked_threads(&state.threads);
            fail(&mut state, ThreadFailure::Deadlock { blocked }, None);
        } else {
            state.running =
                if runnable.len() == 1 { runnable[0] } else { runnable[choose(&mut state, runnable.len())] };
        }
        self.baton.notify_all();
        state
    }

    /// Wait until `me` holds the baton: the state, or None when the run failed (see [`Sched::after_failure`]).
    fn wait_turn<'a>(&'a self, mut state: Locked<'a>, me: usize) -> Option<Locked<'a>> {
        while state.running != me && state.failure.is_none() {
            state = state.wait(&self.baton);
        }
        if state.failure.is_some() {
            self.after_failure(state, me);
            return None;
        }
        Some(state)
    }

    /// The run failed: the main thread raises the failure once (then carries on unscheduled while it unwinds);
    /// every other thread unwinds silently.
    fn after_failure(&self, mut state: Locked<'_>, me: usize) {
        if me != MAIN_THREAD {
            drop(state);
            if std::thread::panicking() {
                return; // already unwinding: carry on unscheduled
            }
            resume_unwind(Box::new(Aborted));
        }
        if state.raised || std::thread::panicking() {
            return;
        }
        state.raised = true;
        let payload = state.payload.take();
        let failure = state.failure.clone().expect("a failure to raise");
        drop(state);
        match payload {
            Some(payload) => resume_unwind(payload),
            None => std::panic::panic_any(failure),
        }
    }

    /// The body of a spawned thread: wait for the baton, run, record a panic as the run's failure, finish. From
    /// then on this OS thread is no longer one of the world's (its thread-local destructors run unscheduled).
    pub(crate) fn run_thread(self: Arc<Self>, me: usize, body: impl FnOnce()) {
        set_current(&self, me);
        let state = self.lock();
        self.wait_turn_quiet(state, me);
        let outcome = if self.aborted() { Ok(()) } else { catch_unwind(AssertUnwindSafe(body)) };
        if let Err(payload) = outcome {
            self.fail_thread(me, payload);
        }
        self.finish(me);
        clear_current();
    }

    /// Thread `me` panicked with `payload`: the run's failure, unless the run already failed (a work budget
    /// overrun keeps its payload; [`Aborted`] is the unwinding of a failed run, never a failure of its own).
    pub(crate) fn fail_thread(&self, me: usize, payload: Box<dyn Any + Send>) {
        let mut state = self.lock();
        if payload.is::<Aborted>() || state.failure.is_some() {
            return;
        }
        let thread = state.threads[me].name.clone();
        let message = panic_message(payload.as_ref());
        let keep = payload.is::<WorkBudgetExceeded>().then_some(payload);
        fail(&mut state, ThreadFailure::Panicked { thread, message }, keep);
        self.baton.notify_all();
    }

    /// Thread `me` ended: wake its joiners and pass the baton on.
    pub(crate) fn finish(&self, me: usize) {
        let mut state = self.lock();
        state.threads[me].status = Status::Finished;
        for thread in &mut state.threads {
            if matches!(thread.status, Status::Blocked(point) if point.resource == Resource::Thread(me)) {
                thread.resume(false);
            }
        }
        if state.failure.is_none() {
            drop(self.pass(state));
        } else {
            self.baton.notify_all();
        }
    }

    /// [`Sched::wait_turn`] for a thread that has not started its body: a failure before it ran just ends it.
    fn wait_turn_quiet(&self, mut state: Locked<'_>, me: usize) {
        while state.running != me && state.failure.is_none() {
            state = state.wait(&self.baton);
        }
    }

    /// The world's clock in nanoseconds (ADR-0166).
    pub(crate) fn clock_nanos(&self) -> u64 {
        self.lock().clock.load(Ordering::Acquire)
    }

    /// The failure the run ended with, if any.
    pub(crate) fn failure(&self) -> Option<ThreadFailure> {
        self.lock().failure.clone()
    }
}

/// Which of `count` runnable threads continues: a pure function of (seed, how many choices this step has made),
/// like the fault decisions keyed by (file, operation index). A step's interleaving does not depend on the steps
/// before it, so the shrinker can remove steps around a race and the race stays (ADR-0104).
fn choose(state: &mut State, count: usize) -> usize {
    let choice = state.choices_in_step;
    state.choices_in_step += 1;
    let mut draw = 0u64;
    let index = below(count as u64, || {
        draw += 1;
        keyed(&[state.seed, choice, draw])
    });
    usize::try_from(index).expect("below a usize")
}

/// Make every blocked thread whose deadline is at or before `now` runnable, timed out.
fn expire(threads: &mut [ThreadInfo], now: u64) {
    for thread in threads {
        if matches!(thread.status, Status::Blocked(_)) && thread.deadline.is_some_and(|deadline| deadline <= now) {
            thread.resume(true);
        }
    }
}

fn runnable_ids(threads: &[ThreadInfo]) -> Vec<usize> {
    (0..threads.len()).filter(|&id| matches!(threads[id].status, Status::Runnable)).collect()
}

/// Record the run's failure (the first one only) and hand the baton to the main thread to raise it.
fn fail(state: &mut State, failure: ThreadFailure, payload: Option<Box<dyn Any + Send>>) {
    if state.failure.is_none() {
        state.failure = Some(failure);
        state.payload = payload;
        state.running = MAIN_THREAD;
    }
}

fn blocked_threads(threads: &[ThreadInfo]) -> Vec<BlockedThread> {
    let blocked = threads.iter().filter_map(|thread| match thread.status {
        Status::Blocked(point) => Some(BlockedThread {
            thread: thread.name.clone(),
            operation: point.operation,
            location: format!("{}:{}", point.location.file(), point.location.line()),
        }),
        _ => None,
    });
    blocked.collect()
}

/// The text of a panic payload (`&str` or `String`; another type is named as such).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else if let Some(exceeded) = payload.downcast_ref::<WorkBudgetExceeded>() {
        exceeded.to_string()
    } else {
        "<non-string panic payload>".into()
    }
}

impl super::SimEnv {
    /// [`crate::Env::spawn_thread`]: register the thread (and, on the world's first, the caller as its main
    /// thread), start its OS thread, which waits for the baton, then yield.
    pub(super) fn spawn_sim_thread(&self, name: &str, body: Box<dyn FnOnce() + Send>) -> crate::thread::RawThread {
        let (sched, me, index) = self.register_thread(name);
        let runner = Arc::clone(&sched);
        let os = crate::thread::start_os_thread(name, Box::new(move || runner.run_thread(index, body)));
        sched.yield_now(me);
        crate::thread::RawThread::simulated(os, sched, index)
    }

    /// Register a new thread named `name` at the caller's call (a yield point): the world's scheduler (created
    /// now, with the caller as its main thread, on the world's first thread), the caller's index and the new one's.
    pub(crate) fn register_thread(&self, name: &str) -> (Arc<Sched>, usize, usize) {
        let sched = {
            let mut world = self.lock_call("spawn_thread");
            let (seed, clock) = (world.seed, Arc::clone(&world.clock));
            Arc::clone(world.threads.get_or_insert_with(|| Sched::new(seed, clock)))
        };
        let me = index_in(&sched).unwrap_or(MAIN_THREAD);
        let index = sched.register(name);
        // Born in its spawner's crash epoch: after a crash, the old system's threads stay powered off (ADR-0168).
        self.lock_world().note_thread(index, me);
        (sched, me, index)
    }

    /// The world's clock in nanoseconds, read without a yield point or a fault (for deadlines).
    pub(crate) fn clock_nanos_quiet(&self) -> u64 {
        self.lock_world().clock_nanos()
    }

    /// How the world's threads failed, if they did: a deadlock or a thread's panic (see [`crate::thread`]).
    pub fn thread_failure(&self) -> Option<ThreadFailure> {
        let sched = self.lock_world().threads.clone();
        sched.and_then(|sched| sched.failure())
    }
}
