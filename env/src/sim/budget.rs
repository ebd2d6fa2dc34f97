//! The work budget (ADR-seeds-perf): every call the system under test makes into the world (each `Env` and `File`
//! call, each background task step) is one unit of simulated work, counted whether or not a limit is set. A caller
//! that sets a limit ([`SimEnv::set_work_limit`]) turns a system that spins on the world (a task that re-arms
//! itself forever, an open retried without end, a loop polling `is_finished`) into a panic with a
//! [`WorkBudgetExceeded`] payload at the call that passes the limit, instead of a hang. Counting never changes a
//! run: only reaching the limit does.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use super::SimEnv;
use super::driver::{lock_owned, raise_refusal};
use super::threads::{MAIN_THREAD, index_in, internal};
use super::world::World;

/// The panic payload of a call that passed the world's work limit. The world is halted from then on (every IO
/// fails), so code that runs while the panic unwinds cannot spin again; later calls do not panic while unwinding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkBudgetExceeded {
    /// The limit that was set.
    pub limit: u64,
    /// Units of work done, this call included.
    pub done: u64,
    /// The call that passed the limit (`open`, `write_at`, `step_task`, ...).
    pub call: &'static str,
}

impl fmt::Display for WorkBudgetExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} units of simulated work (at {}) passed the work budget of {}", self.done, self.call, self.limit)
    }
}

impl World {
    /// Count `units` of work by `call`: `Some` when the call passed the limit and must panic.
    fn charge(&mut self, units: u64, call: &'static str) -> Option<WorkBudgetExceeded> {
        self.work_done = self.work_done.saturating_add(units);
        let limit = self.work_limit?;
        if self.work_done <= limit {
            return None;
        }
        self.halted = true;
        (!std::thread::panicking()).then_some(WorkBudgetExceeded { limit, done: self.work_done, call })
    }
}

/// Lock the world for one counted call; panics (after releasing the lock) when the call passes the work limit.
pub(super) fn lock_charged<'a>(world: &'a Arc<Mutex<World>>, units: u64, call: &'static str) -> MutexGuard<'a, World> {
    let mut guard = lock_owned(world);
    if let Some(sched) = guard.threads.clone() {
        // A yield point (ADR-0104): another of the world's threads may run before this call does.
        drop(guard);
        // assert_owner admitted the world's own threads and its owner, the main thread.
        let me = index_in(&sched).unwrap_or(MAIN_THREAD);
        sched.yield_now(me);
        guard = internal(|| world.lock()).expect("SimEnv world poisoned by an earlier panic");
    }
    let mut guard = raise_refusal(guard);
    if let Some(exceeded) = guard.charge(units, call) {
        drop(guard);
        std::panic::panic_any(exceeded);
    }
    guard
}

impl SimEnv {
    /// Lock the world for one counted call of the system under test.
    pub(super) fn lock_call(&self, call: &'static str) -> MutexGuard<'_, World> {
        lock_charged(&self.world, 1, call)
    }

    /// Units of simulated work done so far: calls into the world and background task steps.
    pub fn work_done(&self) -> u64 {
        self.lock_world().work_done
    }

    /// Set (or clear, `None`) the most units of work the run may have done: the call that passes it panics with
    /// [`WorkBudgetExceeded`] and halts the world.
    pub fn set_work_limit(&self, limit: Option<u64>) {
        self.lock_world().work_limit = limit;
    }

    /// Count `units` of work done outside the world's calls (an open attempt the caller retries), under the same
    /// limit: panics with [`WorkBudgetExceeded`] when they pass it.
    pub fn charge_work(&self, units: u64, call: &'static str) {
        drop(lock_charged(&self.world, units, call));
    }
}

#[cfg(test)]
mod tests {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::path::Path;

    use super::*;
    use crate::{Env, TaskStep};

    #[test]
    fn every_call_and_task_step_counts_and_no_limit_never_stops_a_run() {
        let env = SimEnv::new(1);
        env.create_dir_all(Path::new("/d")).expect("mkdir");
        let _ = env.now();
        let handle = env.spawn("once", Box::new(|| TaskStep::Done));
        env.wait(&handle).expect("waits");
        // mkdir, now, spawn, one task step (wait's own polling is not counted).
        assert_eq!(env.work_done(), 4);
        env.charge_work(10, "retries");
        assert_eq!(env.work_done(), 14);
    }

    #[test]
    fn the_call_that_passes_the_limit_panics_and_halts_the_world() {
        let env = SimEnv::new(1);
        env.create_dir_all(Path::new("/d")).expect("mkdir");
        env.set_work_limit(Some(3));
        assert!(env.exists(Path::new("/d")).expect("within the budget"));
        env.charge_work(1, "open attempt");
        let payload = catch_unwind(AssertUnwindSafe(|| env.exists(Path::new("/d")))).expect_err("passes the limit");
        let exceeded = payload.downcast_ref::<WorkBudgetExceeded>().expect("the budget's payload");
        assert_eq!(exceeded, &WorkBudgetExceeded { limit: 3, done: 4, call: "exists" });
        assert_eq!(exceeded.to_string(), "4 units of simulated work (at exists) passed the work budget of 3");
        assert!(env.is_halted(), "nothing unwinding can spin on the disk");
        env.set_work_limit(None);
        assert!(env.exists(Path::new("/d")).is_err(), "every later call fails instead");
    }
}
