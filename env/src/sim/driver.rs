//! Who may drive a world, and what a wait means when nobody else can (ADR-0169).
//!
//! * The thread that first calls into a world owns it; the world's own threads (`env::thread::spawn`) may call it
//!   too. Any other thread is refused: its call panics (without poisoning the world), and the world remembers it,
//!   so the owner's next counted call and the framework's check after each step fail the run with the refused
//!   thread's name and the reason, instead of the process ending with nothing said.
//! * A thread that drives a world which never started a thread is the world's only thread. When it blocks on an
//!   [`crate::sync`] object (a `Condvar` wait, a contended `Mutex`, a `Receiver::recv`), nothing in the world
//!   can ever release it: that is a deadlock at once ([`ThreadFailure::Deadlock`], naming the wait's location),
//!   as it is for a world with many threads whose every thread blocks (ADR-0104).

use std::cell::RefCell;
use std::panic::Location;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::world::World;
use crate::thread::{BlockedThread, ThreadFailure};

thread_local! {
    /// The world this OS thread owns (the last one it claimed), for [`deadlock_if_alone`].
    static DRIVES: RefCell<Weak<Mutex<World>>> = const { RefCell::new(Weak::new()) };
}

/// Lock `world` for the calling thread: claims it for a thread that is the first to call, and refuses a thread
/// that may not drive it (recorded in the world, then a panic after the lock is released: the world stays usable).
pub(super) fn lock_owned(world: &Arc<Mutex<World>>) -> MutexGuard<'_, World> {
    let mut guard = super::threads::internal(|| world.lock()).expect("SimEnv world poisoned by an earlier panic");
    match guard.check_owner() {
        Ok(false) => guard,
        Ok(true) => {
            DRIVES.with(|drives| *drives.borrow_mut() = Arc::downgrade(world));
            guard
        }
        Err(failure) => {
            let message = match &failure {
                ThreadFailure::Panicked { message, .. } => message.clone(),
                other => other.to_string(),
            };
            guard.refused.get_or_insert(failure);
            drop(guard);
            panic!("{message}");
        }
    }
}

/// A refused thread's failure, raised on the driving thread at its next counted call: the run fails there with the
/// refused thread's name and reason. Never while already unwinding, and never on one of the world's own threads
/// (its panic would be reported as its own, without the refused thread's name).
pub(super) fn raise_refusal(guard: MutexGuard<'_, World>) -> MutexGuard<'_, World> {
    if guard.refused.is_none() || std::thread::panicking() || super::threads::is_world_thread() {
        return guard;
    }
    let failure = guard.refused.clone().expect("checked above");
    drop(guard);
    std::panic::panic_any(failure);
}

/// Called where a thread that no world schedules is about to block on a `sync` object: when it drives a world that
/// never started a thread, nothing can wake it, so it panics with [`ThreadFailure::Deadlock`] naming `operation`
/// at `location` (not while already unwinding: then it blocks as `std` does).
pub(crate) fn deadlock_if_alone(operation: &'static str, location: &'static Location<'static>) {
    let Some(world) = DRIVES.with(|drives| drives.borrow().upgrade()) else { return };
    // A world locked right now (by a refused thread, say) is not judged: the wait goes ahead as std's.
    let alone = world.try_lock().is_ok_and(|world| world.threads.is_none());
    drop(world);
    if !alone || std::thread::panicking() {
        return;
    }
    let blocked = BlockedThread {
        thread: "main".to_string(),
        operation,
        location: format!("{}:{}", location.file(), location.line()),
    };
    std::panic::panic_any(ThreadFailure::Deadlock { blocked: vec![blocked] });
}

/// True on a thread a simulated world started (`env::thread::spawn` on `SimEnv`), live or not: its panic is the
/// world's to report, on the driving thread, so a panic hook need not print it (ADR-0169).
pub fn on_world_thread() -> bool {
    super::threads::is_world_thread()
}
