//! The shape of background work (ADR-0005).
//!
//! A task is a step function: each call does one bounded unit of work and says whether more remains. `RealEnv`
//! calls it in a loop on its own thread; `SimEnv` calls it once each time the simulator chooses to step it, so
//! background work interleaves with client operations at step granularity, chosen by the seed.

use std::fmt;

/// What one step of a task reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStep {
    /// More work remains: call again.
    Continue,
    /// The task is finished: never called again.
    Done,
}

/// Background work: called once per step until it returns [`TaskStep::Done`].
pub type Task = Box<dyn FnMut() -> TaskStep + Send + 'static>;

/// A handle to a spawned task, for [`crate::Env::wait`] and [`crate::Env::is_finished`].
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskHandle {
    pub(crate) id: u64,
    pub(crate) name: String,
    /// The crash epoch the task was spawned in (always 0 on `RealEnv`).
    pub(crate) epoch: u64,
}

impl TaskHandle {
    /// The task's id, unique within its environment.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The name the task was spawned with.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Task#{}({})", self.id, self.name)
    }
}
