//! Route A's `std::thread`: `spawn` and `Builder` over [`holdfast::env::thread::spawn`] (holdfast's ADR-0104), which
//! takes the world as an argument where `std` takes none. The world is the one bound to the spawning thread
//! ([`super::enter`]); the new thread runs inside the same binding.

use std::io;

use super::world::{bound, inherit};

/// `std::thread::JoinHandle`.
#[derive(Debug)]
pub struct JoinHandle<T>(holdfast::env::thread::JoinHandle<T>);

impl<T> JoinHandle<T> {
    /// Wait for the thread: its result, or its panic's payload.
    pub fn join(self) -> std::thread::Result<T> {
        self.0.join()
    }
}

/// `std::thread::Builder`: a name, then `spawn`.
#[derive(Debug, Default)]
pub struct Builder {
    name: Option<String>,
}

impl Builder {
    /// No name yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The thread's name.
    pub fn name(mut self, name: String) -> Self {
        self.name = Some(name);
        self
    }

    /// Start the thread on the world bound to this one; `NotConnected` when none is.
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let fs = bound()?;
        let env = fs.env().clone();
        let name = self.name.unwrap_or_else(|| "unnamed".into());
        Ok(JoinHandle(holdfast::env::thread::spawn(&env, &name, move || {
            let _bound = inherit(fs);
            f()
        })))
    }
}

/// `std::thread::spawn`: panics when no world is bound, as `std`'s panics when the OS refuses a thread.
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Builder::new().spawn(f).unwrap_or_else(|error| panic!("failed to spawn thread: {error}"))
}

#[cfg(test)]
mod tests {
    use holdfast::env::SimEnv;

    use super::*;
    use crate::sys::{enter, fs};

    #[test]
    fn a_spawned_thread_runs_in_its_parents_world() {
        let world = SimEnv::new(8);
        let _entered = enter(&world);
        let child = spawn(|| fs::write("/from-child", b"hi"));
        child.join().expect("no panic").expect("the child's write reached the world");
        assert_eq!(world.read_current(std::path::Path::new("/from-child")).as_deref(), Some(&b"hi"[..]));
    }

    #[test]
    fn spawning_with_no_world_bound_is_an_error() {
        let error = Builder::new().name("orphan".into()).spawn(|| ()).expect_err("no world");
        assert_eq!(error.kind(), io::ErrorKind::NotConnected);
    }
}
