//! Hooks for threads that [`crate::thread::spawn`] did not start (ADR-0165): an interposition layer enrolls the
//! threads an unmodified program starts with `pthread_create` in a world's scheduler (ADR-0104), and turns the
//! futex waits, sleeps and joins of its C library calls into the scheduler's blocking points. Not an API for
//! systems under test: they use [`crate::thread`] and [`crate::sync`].
//!
//! A hook runs on the calling OS thread. [`current`] says whether that thread is one of a live world's threads
//! ([`Member`]); the methods of `Member` then act as that thread: [`Member::block`] on an address with an
//! optional deadline on the world's clock, [`Member::wake`], [`Member::yield_now`], [`Member::join`]. A new
//! thread is registered at its parent's call ([`register`], deterministic because the parent holds the baton)
//! and runs its body as that thread on its own OS thread ([`run`]).
//!
//! Once the run failed (a deadlock, a panic), a blocking method does not return to the caller: on the world's
//! main thread it panics with the [`crate::thread::ThreadFailure`], on any other thread it unwinds with an opaque
//! payload ([`is_unwinding_a_failed_run`]). A hook that is an `extern "C"` function catches both and must not
//! return into the program: the failure is already the run's.

use std::any::Any;
use std::fmt;
use std::panic::Location;
use std::sync::Arc;
use std::time::Duration;

use super::SimEnv;
use super::threads::{Aborted, BlockPoint, MAIN_THREAD, Resource, Sched, clear_current, in_internal, member};
pub use super::threads::{THREADS_MAX, Wake};

/// One OS thread's place in a simulated world: the world's scheduler and its index there.
#[derive(Clone)]
pub struct Member {
    sched: Arc<Sched>,
    index: usize,
}

impl fmt::Debug for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Member").field("index", &self.index).finish_non_exhaustive()
    }
}

/// The calling OS thread's place in a world, if it is one of a live world's threads (its run may have failed:
/// [`Member::run_failed`]). None while the thread's thread-locals are being destroyed.
pub fn current() -> Option<Member> {
    member().map(|(sched, index)| Member { sched, index })
}

/// Register a new thread named `name` in `sim`'s world, at the caller's call: a yield point, charged as one call.
/// On the world's first thread the caller becomes its main thread (index 0), as with [`crate::thread::spawn`].
/// Start its OS thread next and run it with [`run`]; then let the parent [`Member::yield_now`].
///
/// Panics (as every `SimEnv` call does) when the caller is neither the world's owner nor one of its threads.
pub fn register(sim: &SimEnv, name: &str) -> Member {
    let (sched, _, index) = sim.register_thread(name);
    Member { sched, index }
}

/// Run `body` on the calling OS thread as `member` (from [`register`]): wait for the baton, run, finish (waking
/// its joiners and passing the baton on), then leave the world, so that what this OS thread does afterwards
/// (thread-local destructors, its exit) is not scheduled. A panic out of `body` is the run's failure. False when
/// the run failed before the thread's turn came: `body` did not run.
pub fn run(member: Member, body: impl FnOnce()) -> bool {
    let mut ran = false;
    let Member { sched, index } = member;
    sched.run_thread(index, || {
        ran = true;
        body();
    });
    ran
}

/// Let `nanos` pass for the calling thread on `sim`'s clock (ADR-0166): a thread of the world blocks until the
/// clock reaches the deadline (others run meanwhile; with nobody else runnable the clock jumps there); any other
/// thread (a world without threads) moves the clock on at once, as [`crate::Env::sleep`] does.
#[track_caller]
pub fn sleep(sim: &SimEnv, nanos: u64) {
    let location = Location::caller();
    sim.charge_work(1, "sleep");
    match current().filter(|member| !member.run_failed() && member.is_of(sim)) {
        Some(member) => {
            let deadline = sim.clock_nanos_quiet().saturating_add(nanos);
            let point = BlockPoint { resource: Resource::Timer, operation: "sleep", location };
            member.sched.block_until(member.index, point, Some(deadline));
        }
        None => sim.advance_clock(Duration::from_nanos(nanos)),
    }
}

/// The world's clock in nanoseconds, read with no yield point and no clock fault: the base of a deadline.
pub fn now_nanos(sim: &SimEnv) -> u64 {
    sim.clock_nanos_quiet()
}

/// True while the calling OS thread acquires or waits on one of `env`'s own locks (a world's, a scheduler's) or
/// starts an OS thread for [`crate::thread::spawn`]: a futex wait or a `pthread_create` seen then is `env`'s, and
/// must go to the C library as it is, not to the scheduler.
pub fn in_env_internals() -> bool {
    in_internal()
}

/// True for the payload a failed run's other threads unwind with (never the run's failure itself).
pub fn is_unwinding_a_failed_run(payload: &(dyn Any + Send)) -> bool {
    payload.is::<Aborted>()
}

impl Member {
    /// The thread's index in its world (0: the main thread).
    pub fn index(&self) -> usize {
        self.index
    }

    /// True for the world's main thread: the one that raises the run's failure.
    pub fn is_main(&self) -> bool {
        self.index == MAIN_THREAD
    }

    /// True once the world's run failed: from then on nothing is scheduled.
    pub fn run_failed(&self) -> bool {
        self.sched.aborted()
    }

    /// The world's clock in nanoseconds, read with no yield point and no clock fault: the base of a deadline.
    pub fn now_nanos(&self) -> u64 {
        self.sched.clock_nanos()
    }

    /// True when `sim` is this thread's world.
    pub fn is_of(&self, sim: &SimEnv) -> bool {
        sim.lock_world().threads.as_ref().is_some_and(|sched| Arc::ptr_eq(sched, &self.sched))
    }

    /// True when `other` is a thread of this thread's world (the same scheduler).
    pub fn same_world(&self, other: &Member) -> bool {
        Arc::ptr_eq(&self.sched, &other.sched)
    }

    /// Block this thread on `address` (only ever compared) at `operation` until [`Member::wake`] on the same
    /// address, or until the world's clock reaches `deadline_nanos`. No thread left runnable and no deadline is a
    /// deadlock that names `operation` at `location` for each blocked thread.
    pub fn block(
        &self,
        address: usize,
        operation: &'static str,
        location: &'static Location<'static>,
        deadline_nanos: Option<u64>,
    ) -> Wake {
        let point = BlockPoint { resource: Resource::Address(address), operation, location };
        self.sched.block_until(self.index, point, deadline_nanos)
    }

    /// Make up to `count` threads blocked on `address` runnable, in the order they blocked; how many. Not a
    /// yield point: call [`Member::yield_now`] after it.
    pub fn wake(&self, address: usize, count: usize) -> usize {
        self.sched.wake_fifo(Resource::Address(address), count)
    }

    /// A yield point: the seed chooses which runnable thread continues.
    pub fn yield_now(&self) {
        self.sched.yield_now(self.index);
    }

    /// Block until thread `index` of this world finished (a deadlock report names `operation`), then free its slot
    /// for a later thread.
    #[track_caller]
    pub fn join(&self, index: usize, operation: &'static str) {
        let point = BlockPoint { resource: Resource::Thread(index), operation, location: Location::caller() };
        self.sched.yield_now(self.index);
        while !self.sched.finished(index) && !self.sched.aborted() {
            self.sched.block(self.index, point);
        }
        self.sched.release(index);
    }

    /// Nobody will join thread `index` (detached): its slot is freed once it finished.
    pub fn release(&self, index: usize) {
        self.sched.release(index);
    }

    /// Name this thread (deadlock reports and panic failures use the name).
    pub fn rename(&self, name: &str) {
        self.sched.rename(self.index, name);
    }

    /// This thread panicked with `payload` where it cannot unwind (inside an `extern "C"` hook): the run's
    /// failure, as a panic out of a thread's body is (a work budget overrun keeps its payload).
    pub fn fail(&self, payload: Box<dyn Any + Send>) {
        self.sched.fail_thread(self.index, payload);
    }

    /// Thread `index` (registered, never started: its OS thread could not be created) will never run.
    pub fn abandon(&self, index: usize) {
        self.sched.abandon(index);
    }

    /// The calling OS thread stops being this world's thread (what [`run`] does when its body returned).
    pub fn leave(self) {
        clear_current();
    }
}

#[cfg(test)]
#[path = "foreign_tests.rs"]
mod tests;
