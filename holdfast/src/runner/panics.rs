//! Panic capture for the step loop: a panic in the system under test, or on one of its simulated threads, or a
//! deadlock among them, becomes a [`Violation`] with its message and location instead of ending the process.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::budget::overrun;
use crate::target::{FailureKind, Violation};

/// Set this environment variable to have [`install_panic_hook`] print every panic as it happens (one line each),
/// the ones a run reports as its failure too.
pub const PANIC_VERBOSE_ENV_VAR: &str = "SIMULATOR_PANIC_VERBOSE";

thread_local! {
    /// Where the last panic on this thread happened (`file:line`), recorded by [`install_panic_hook`].
    static LAST_PANIC_LOCATION: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
    /// How many [`guarded`] or [`contained`] calls this thread is inside: a panic there is reported (or
    /// deliberately dropped) by the runner, so the hook need not print it.
    static CAUGHT_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Record every panic's location for the failure report instead of printing the default message and backtrace:
/// a run that panics is reported as a [`FailureKind::Panic`] violation with its message and that location.
/// Every other panic (on a thread the simulator did not start, in the runner itself) is printed on stderr at once,
/// one line with its thread, location and message, so no panic ends a process silently (ADR-0169);
/// `SIMULATOR_PANIC_VERBOSE=1` prints the reported ones too. For the command line; tests keep the default hook.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info.location().map(|location| format!("{}:{}", location.file(), location.line()));
        if std::env::var_os(PANIC_VERBOSE_ENV_VAR).is_some() || !reported_elsewhere() {
            let thread = std::thread::current();
            eprintln!(
                "simulator: thread '{}' panicked at {}: {}",
                thread.name().unwrap_or("<unnamed>"),
                location.as_deref().unwrap_or("<unknown>"),
                panic_text(info.payload())
            );
        }
        LAST_PANIC_LOCATION.with(|slot| slot.borrow_mut().clone_from(&location));
    }));
}

/// True when the panic on this thread is the runner's to report: inside [`guarded`] or [`contained`], or on a
/// thread a simulated world started (its world reports it on the driving thread, inside [`guarded`]).
fn reported_elsewhere() -> bool {
    CAUGHT_DEPTH.with(std::cell::Cell::get) > 0 || env::sim::on_world_thread()
}

/// The text of a panic payload (`&str`, `String`, or a simulated world's [`env::thread::ThreadFailure`]).
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else if let Some(failure) = payload.downcast_ref::<env::thread::ThreadFailure>() {
        failure.to_string()
    } else {
        "<non-string panic payload>".to_string()
    }
}

/// Run `f` with this thread's panics counted as caught ([`reported_elsewhere`]).
fn caught<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    CAUGHT_DEPTH.with(|depth| depth.set(depth.get() + 1));
    let result = catch_unwind(AssertUnwindSafe(f));
    CAUGHT_DEPTH.with(|depth| depth.set(depth.get() - 1));
    result
}

/// Run `f` and drop a panic it raises, unprinted: a system dropped after its run failed may panic again.
pub(super) fn contained(f: impl FnOnce()) {
    let _ = caught(f);
}

/// Run `f`, turning a panic into a [`FailureKind::Panic`] violation (with its location when the hook recorded it).
pub(super) fn guarded<R>(what: &str, f: impl FnOnce() -> Result<R, Violation>) -> Result<R, Violation> {
    LAST_PANIC_LOCATION.with(|slot| slot.borrow_mut().take());
    match caught(f) {
        Ok(result) => result,
        Err(payload) => {
            if let Some(violation) = overrun(payload.as_ref()) {
                return Err(violation);
            }
            if let Some(violation) = thread_failure(what, payload.as_ref()) {
                return Err(violation);
            }
            let mut message = panic_text(payload.as_ref());
            if let Some(location) = LAST_PANIC_LOCATION.with(|slot| slot.borrow_mut().take()) {
                message = format!("{message} (at {location})");
            }
            Err(Violation::new(format!("no_panic_{what}"), FailureKind::Panic, "no panic", message))
        }
    }
}

/// The invariant of a run whose threads all block (ADR-0104).
pub const DEADLOCK_INVARIANT: &str = "liveness.deadlock";

/// The violation a panic payload stands for when the system's threads failed (`None`: another panic): a deadlock
/// names where each thread blocks; a panic on a thread names the thread and its message.
fn thread_failure(what: &str, payload: &(dyn std::any::Any + Send)) -> Option<Violation> {
    match payload.downcast_ref::<env::thread::ThreadFailure>()? {
        failure @ env::thread::ThreadFailure::Deadlock { .. } => Some(Violation::new(
            DEADLOCK_INVARIANT,
            FailureKind::Liveness,
            "a runnable thread until the run ends",
            failure.to_string(),
        )),
        failure => {
            Some(Violation::new(format!("no_panic_{what}"), FailureKind::Panic, "no panic", failure.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use env::thread::{BlockedThread, ThreadFailure};

    use super::*;

    #[test]
    fn a_deadlock_is_a_liveness_failure_and_a_thread_panic_names_its_thread() {
        let blocked =
            vec![BlockedThread { thread: "writer".into(), operation: "Mutex::lock", location: "s.rs:9".into() }];
        let violation = guarded::<()>("step", || std::panic::panic_any(ThreadFailure::Deadlock { blocked }))
            .expect_err("a deadlock fails the run");
        assert_eq!((violation.invariant.as_str(), violation.kind), (DEADLOCK_INVARIANT, FailureKind::Liveness));
        assert_eq!(violation.actual, "deadlock: no thread can run; thread 'writer' blocks in Mutex::lock at s.rs:9");
        let panicked = ThreadFailure::Panicked { thread: "writer".into(), message: "boom".into() };
        let violation = guarded::<()>("step", || std::panic::panic_any(panicked)).expect_err("a thread panic fails");
        assert_eq!((violation.invariant.as_str(), violation.kind), ("no_panic_step", FailureKind::Panic));
        assert_eq!(violation.actual, "thread 'writer' panicked: boom");
    }
}
