//! The simulated scheduler (ADR-0005): background tasks run only when stepped, in an order the seed chooses.

use std::path::PathBuf;

use super::SimEnv;
use super::TASK_INLINE_STEPS_MAX;
use crate::{Error, Op, Result, Task, TaskHandle, TaskStep};

/// A spawned task: its name, and its body (None while a step of it runs).
pub(super) struct TaskSlot {
    pub(super) name: String,
    pub(super) task: Option<Task>,
}

impl SimEnv {
    /// Tasks that can be stepped, as (id, name), by id.
    pub fn runnable_tasks(&self) -> Vec<(u64, String)> {
        let world = self.lock_world();
        world.tasks.iter().filter(|(_, slot)| slot.task.is_some()).map(|(&id, slot)| (id, slot.name.clone())).collect()
    }

    /// Run one step of task `id`. None if there is no such runnable task.
    /// One unit of work ([`SimEnv::work_done`]), charged whether or not the task is runnable.
    pub fn step_task(&self, id: u64) -> Option<TaskStep> {
        let (mut task, epoch) = {
            let mut world = self.lock_call("step_task");
            let epoch = world.epoch;
            let slot = world.tasks.get_mut(&id)?;
            (slot.task.take()?, epoch)
        };
        let step = task();
        let mut world = self.lock_world();
        if world.epoch != epoch {
            // A crash during the step cancelled every task, this one included.
            return Some(TaskStep::Done);
        }
        match step {
            TaskStep::Done => {
                let removed = world.tasks.remove(&id);
                assert!(removed.is_some(), "finished task {id} vanished");
            }
            TaskStep::Continue => {
                let slot = world.tasks.get_mut(&id).expect("running task vanished");
                assert!(slot.task.is_none(), "task {id} stepped twice at once");
                slot.task = Some(task);
            }
        }
        Some(step)
    }

    /// Step one runnable task chosen by the seed's scheduling stream: (id, name, what it reported).
    pub fn step_random_task(&self) -> Option<(u64, String, TaskStep)> {
        let (id, name) = {
            let mut world = self.lock_world();
            let runnable: Vec<(u64, String)> = world
                .tasks
                .iter()
                .filter(|(_, slot)| slot.task.is_some())
                .map(|(&id, slot)| (id, slot.name.clone()))
                .collect();
            if runnable.is_empty() {
                return None;
            }
            let index = world.scheduler_rng.index(runnable.len());
            runnable[index].clone()
        };
        let step = self.step_task(id)?;
        Some((id, name, step))
    }

    /// Step tasks until none is runnable or `steps_max` steps ran; returns the steps run.
    pub fn run_tasks(&self, steps_max: u64) -> u64 {
        let mut steps = 0;
        while steps < steps_max && self.step_random_task().is_some() {
            steps += 1;
        }
        steps
    }

    /// [`Env::spawn`](crate::Env::spawn): queue the task; it runs only when stepped.
    pub(super) fn spawn_task(&self, name: &str, task: Task) -> TaskHandle {
        let mut world = self.lock_call("spawn");
        let id = world.next_task_id;
        world.next_task_id += 1;
        // A thread of a system a crash ended starts nothing: its task is cancelled at once (ADR-0168).
        let epoch = world.caller_epoch();
        if epoch == world.epoch {
            world.tasks.insert(id, TaskSlot { name: name.to_string(), task: Some(task) });
        } else {
            world.cancelled.push(task);
        }
        TaskHandle { id, name: name.to_string(), epoch }
    }

    /// [`Env::wait`](crate::Env::wait): run the task's remaining steps inline, on the caller's stack.
    pub(super) fn wait_task(&self, handle: &TaskHandle) -> Result<()> {
        for _ in 0..TASK_INLINE_STEPS_MAX {
            {
                let world = self.lock_world();
                match world.tasks.get(&handle.id) {
                    None if handle.epoch == world.epoch => return Ok(()),
                    None => {
                        return Err(Error::TaskCancelled { op: Op::Wait, path: PathBuf::from(&handle.name) });
                    }
                    Some(slot) => {
                        assert!(slot.task.is_some(), "{handle:?} waits on itself or on a task running above it");
                    }
                }
            }
            self.step_task(handle.id);
        }
        panic!("{handle:?} did not finish within {TASK_INLINE_STEPS_MAX} steps: livelock");
    }

    /// [`Env::is_finished`](crate::Env::is_finished).
    pub(super) fn task_finished(&self, handle: &TaskHandle) -> bool {
        !self.lock_call("is_finished").tasks.contains_key(&handle.id)
    }
}
