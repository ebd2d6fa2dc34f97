//! Route A's binding of a simulated world to the calling OS thread: what `std::fs`'s free functions reach.

use std::cell::RefCell;
use std::io;

use holdfast::env::SimEnv;
use holdfast::env::fs::Fs;

thread_local! {
    /// The world this OS thread's store calls go to.
    static WORLD: RefCell<Option<Fs<SimEnv>>> = const { RefCell::new(None) };
}

/// Bind `env` to the calling OS thread until the returned guard drops (then the previous binding, if any, is back).
/// Threads started through [`super::thread`] on a bound thread are bound to the same world.
pub fn enter(env: &SimEnv) -> Entered {
    let previous = WORLD.with(|world| world.replace(Some(Fs::new(env.clone()))));
    Entered { previous }
}

/// A binding made by [`enter`]; dropping it restores what the thread had before.
#[derive(Debug)]
#[must_use = "the world stays bound only while the guard lives"]
pub struct Entered {
    previous: Option<Fs<SimEnv>>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        let previous = self.previous.take();
        WORLD.with(|world| *world.borrow_mut() = previous);
    }
}

/// The world bound to this thread, or the error every call from an unbound thread gets.
pub(super) fn bound() -> io::Result<Fs<SimEnv>> {
    WORLD.with(|world| world.borrow().clone()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotConnected,
            "std-kv (env-fs route): no simulated world is bound to this thread; call sys::enter(&env) first",
        )
    })
}

/// Bind `fs` on a thread the facade started (its body runs inside the binding).
pub(super) fn inherit(fs: Fs<SimEnv>) -> Entered {
    enter(fs.env())
}
