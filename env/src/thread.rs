//! Threads for systems that have their own (ADR-0104): `env::thread::spawn(&env, name, f)` is `std::thread::spawn`
//! on [`crate::RealEnv`]; on [`crate::SimEnv`] it starts a real OS thread that runs only when the seed chooses it.
//!
//! Under `SimEnv` exactly one of a world's threads runs at a time. At every yield point (each [`Env`] call and each
//! [`crate::sync`] operation) the seed's `threads` stream chooses which runnable thread continues, so a seed replays
//! exactly and `--check-determinism` holds. Threads block only through [`crate::sync`] (`Mutex`, `Condvar`,
//! `mpsc`) and [`JoinHandle::join`]; `std`'s blocking primitives would block the OS thread holding the baton.
//!
//! * No runnable thread left is a **deadlock**: the main thread panics with [`ThreadFailure::Deadlock`], naming
//!   where each thread blocks (holdfast reports it as `liveness.deadlock`).
//! * A **panic on any thread** is the run's failure: the main thread panics with [`ThreadFailure::Panicked`],
//!   naming the thread and its message (a work-budget overrun keeps its own payload).
//!
//! Either way the world's other threads unwind silently. A thread started with `std::thread` that calls into a
//! driven `SimEnv` panics with a message naming this module.
//!
//! ```
//! use env::{SimEnv, sync::mpsc};
//!
//! let sim = SimEnv::new(7);
//! let (tx, rx) = mpsc::channel();
//! let worker = env::thread::spawn(&sim, "summer", move || rx.iter().sum::<u64>());
//! for value in 1..=4 {
//!     tx.send(value).expect("the worker is alive");
//! }
//! drop(tx);
//! assert_eq!(worker.join().expect("no panic"), 10);
//! ```

#![expect(clippy::disallowed_methods, reason = "RealEnv's threads are std's (ADR-0104)")]

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use crate::Env;
#[cfg(feature = "sim")]
use crate::sim::threads::{BlockPoint, Resource, Sched, index_in};

/// A failed run's cause, raised on the main thread as a panic payload (`std::panic::panic_any`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ThreadFailure {
    /// No thread could run: each one is blocked.
    Deadlock { blocked: Vec<BlockedThread> },
    /// A thread panicked.
    Panicked { thread: String, message: String },
}

/// Where one thread of a deadlock waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedThread {
    /// The name it was spawned with (`main` for the driving thread).
    pub thread: String,
    /// The operation it blocks in (`Mutex::lock`, `Condvar::wait`, `Receiver::recv`, `JoinHandle::join`).
    pub operation: &'static str,
    /// Its caller, `file:line`.
    pub location: String,
}

impl fmt::Display for ThreadFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThreadFailure::Deadlock { blocked } => {
                f.write_str("deadlock: no thread can run;")?;
                for (index, point) in blocked.iter().enumerate() {
                    let separator = if index == 0 { " " } else { "; " };
                    write!(
                        f,
                        "{separator}thread '{}' blocks in {} at {}",
                        point.thread, point.operation, point.location
                    )?;
                }
                Ok(())
            }
            ThreadFailure::Panicked { thread, message } => write!(f, "thread '{thread}' panicked: {message}"),
        }
    }
}

/// A thread as [`Env::spawn_thread`] started it; wrapped by [`JoinHandle`].
#[derive(Debug)]
pub struct RawThread {
    os: std::thread::JoinHandle<()>,
    #[cfg(feature = "sim")]
    sim: Option<(Arc<Sched>, usize)>,
}

impl RawThread {
    /// A thread `std` schedules.
    pub(crate) fn os(os: std::thread::JoinHandle<()>) -> Self {
        Self {
            os,
            #[cfg(feature = "sim")]
            sim: None,
        }
    }

    /// A thread of a simulated world, at `index` of its scheduler.
    #[cfg(feature = "sim")]
    pub(crate) fn simulated(os: std::thread::JoinHandle<()>, sched: Arc<Sched>, index: usize) -> Self {
        Self { os, sim: Some((sched, index)) }
    }
}

/// Start an OS thread named `name` running `body` (what [`Env::spawn_thread`] does on `RealEnv`).
pub(crate) fn start_os_thread(name: &str, body: Box<dyn FnOnce() + Send + 'static>) -> std::thread::JoinHandle<()> {
    let builder = std::thread::Builder::new().name(name.to_string());
    let spawned = {
        #[cfg(feature = "sim")]
        {
            crate::sim::threads::internal(|| builder.spawn(body))
        }
        #[cfg(not(feature = "sim"))]
        {
            builder.spawn(body)
        }
    };
    spawned.unwrap_or_else(|error| panic!("the OS refused to start thread '{name}': {error}"))
}

/// Own a thread: [`JoinHandle::join`] waits for it and returns its result.
#[derive(Debug)]
pub struct JoinHandle<T> {
    raw: RawThread,
    result: Arc<Mutex<Option<T>>>,
    name: String,
}

/// Start a thread named `name` running `f`: `std::thread::spawn` on `RealEnv`, a scheduled thread on `SimEnv`.
pub fn spawn<E, F, T>(env: &E, name: &str, f: F) -> JoinHandle<T>
where
    E: Env,
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let result = Arc::new(Mutex::new(None));
    let slot = Arc::clone(&result);
    let body = Box::new(move || {
        let value = f();
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(value);
    });
    JoinHandle { raw: env.spawn_thread(name, body), result, name: name.to_string() }
}

impl<T> JoinHandle<T> {
    /// The name the thread was spawned with.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Wait for the thread to finish: its result, or its panic's payload (on `SimEnv` a panic is the run's failure
    /// and surfaces on the main thread first, see the module docs).
    #[track_caller]
    pub fn join(self) -> std::thread::Result<T> {
        #[cfg(feature = "sim")]
        if let Some((sched, index)) = &self.raw.sim {
            wait_finished(sched, *index, std::panic::Location::caller());
        }
        self.raw.os.join()?;
        let value = self.result.lock().unwrap_or_else(PoisonError::into_inner).take();
        value.ok_or_else(|| Box::new("the thread ended without a result") as Box<dyn Any + Send>)
    }

    /// True once the thread's body has returned or panicked.
    pub fn is_finished(&self) -> bool {
        #[cfg(feature = "sim")]
        if let Some((sched, index)) = &self.raw.sim {
            return sched.finished(*index);
        }
        self.raw.os.is_finished()
    }
}

/// Block the calling thread of `sched` until thread `index` finished (a no-op once the run failed).
#[cfg(feature = "sim")]
fn wait_finished(sched: &Arc<Sched>, index: usize, location: &'static std::panic::Location<'static>) {
    let me = index_in(sched).unwrap_or(crate::sim::threads::MAIN_THREAD);
    let point = BlockPoint { resource: Resource::Thread(index), operation: "JoinHandle::join", location };
    sched.yield_now(me);
    while !sched.finished(index) && !sched.aborted() {
        sched.block(me, point);
    }
}
