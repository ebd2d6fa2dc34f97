//! A crash stops the world (ADR-0168): from the instant of a crash no thread of the system that was running
//! touches the disk again, as a real process killed by the power cut never makes another call.
//!
//! Two rules, both checked in the IO gate ([`World::begin_io`]) and by the calls that read the disk without it:
//!
//! * **Power off until recovery.** [`SimEnv::cut_power`] applies the crash and leaves the world halted, like an
//!   armed crash ([`SimEnv::crash_at_io`]) that fired: every call that touches the disk fails with
//!   [`crate::Error::Crashed`], by path as well as by handle, on every thread, the driving one included (the old
//!   system's `Drop`, run while the framework drops it, is the old system too). [`SimEnv::restart`] powers the
//!   world on for the next system's recovery.
//! * **Old threads stay dead.** Every thread started with `env::thread::spawn` is born in the world's current
//!   crash epoch (a thread it starts inherits its own). Once a crash moved the epoch on, each of its calls that
//!   touches the disk fails the same way, after the restart too; a task it spawns never runs. The driving thread
//!   (the scheduler's main thread) is the framework's and runs the next system, so only the power-off rule
//!   applies to it.

use std::sync::PoisonError;

use super::SimEnv;
use super::threads::{MAIN_THREAD, index_in};
use super::world::World;

impl World {
    /// Record that thread `index` of the world's scheduler was started by thread `spawner`: it is born in the
    /// spawner's epoch when the spawner is one of the world's threads, else in the current one.
    pub(super) fn note_thread(&mut self, index: usize, spawner: usize) {
        let born = if spawner == MAIN_THREAD { self.epoch } else { self.birth_of(spawner) };
        if self.thread_births.len() <= index {
            self.thread_births.resize(index + 1, self.epoch);
        }
        self.thread_births[index] = born;
    }

    fn birth_of(&self, index: usize) -> u64 {
        self.thread_births.get(index).copied().unwrap_or(self.epoch)
    }

    /// The crash epoch of the calling thread's system: the epoch its `env::thread` was born in, or the current
    /// one for the driving thread (and any thread that is not one of the world's).
    pub(super) fn caller_epoch(&self) -> u64 {
        match self.threads.as_ref().and_then(index_in) {
            Some(index) if index != MAIN_THREAD => self.birth_of(index),
            _ => self.epoch,
        }
    }

    /// True when the calling thread belongs to a system a crash ended: its calls must not touch the disk.
    pub(super) fn caller_outlived(&self) -> bool {
        self.threads.is_some() && self.caller_epoch() != self.epoch
    }
}

impl SimEnv {
    /// Cut the power now: the crash is applied as [`SimEnv::crash`] applies it, and the world stays off until
    /// [`SimEnv::restart`]. Until then every call that touches the disk fails, on every thread; the threads of the
    /// system that was running fail so for good (ADR-0168). The framework drops the old system in between.
    pub fn cut_power(&self) {
        let mut world = self.lock_world();
        world.apply_crash();
        world.last_crash = None;
        world.halted = true;
    }

    /// True when a panic while holding the world's lock poisoned it: nothing may read the world any more
    /// (ADR-0169). Takes no lock.
    pub fn is_poisoned(&self) -> bool {
        self.world.is_poisoned()
    }

    /// The thread the world refused (a thread it did not start that called into it), and why, if any: the run's
    /// failure (ADR-0169). Reads the world even when poisoned.
    pub fn refused_thread(&self) -> Option<crate::thread::ThreadFailure> {
        super::threads::internal(|| self.world.lock()).unwrap_or_else(PoisonError::into_inner).refused.clone()
    }
}
