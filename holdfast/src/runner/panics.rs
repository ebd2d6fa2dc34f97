//! Panic capture for the step loop: a panic in the system under test, or on one of its simulated threads, or a
//! deadlock among them, becomes a [`Violation`] with its message and location instead of ending the process.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::budget::overrun;
use crate::target::{FailureKind, Violation};

/// Set this environment variable to have [`install_panic_hook`] print every panic as it happens (one line each).
pub const PANIC_VERBOSE_ENV_VAR: &str = "SIMULATOR_PANIC_VERBOSE";

thread_local! {
    /// Where the last panic on this thread happened (`file:line`), recorded by [`install_panic_hook`].
    static LAST_PANIC_LOCATION: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Record every panic's location for the failure report instead of printing the default message and backtrace:
/// a run that panics is reported as a [`FailureKind::Panic`] violation with its message and that location
/// (`SIMULATOR_PANIC_VERBOSE=1` prints each panic too). For the command line; tests keep the default hook.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info.location().map(|location| format!("{}:{}", location.file(), location.line()));
        if std::env::var_os(PANIC_VERBOSE_ENV_VAR).is_some() {
            eprintln!("simulator: panic at {}: {info}", location.as_deref().unwrap_or("<unknown>"));
        }
        LAST_PANIC_LOCATION.with(|slot| slot.borrow_mut().clone_from(&location));
    }));
}

/// Run `f`, turning a panic into a [`FailureKind::Panic`] violation (with its location when the hook recorded it).
pub(super) fn guarded<R>(what: &str, f: impl FnOnce() -> Result<R, Violation>) -> Result<R, Violation> {
    LAST_PANIC_LOCATION.with(|slot| slot.borrow_mut().take());
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            if let Some(violation) = overrun(payload.as_ref()) {
                return Err(violation);
            }
            if let Some(violation) = thread_failure(what, payload.as_ref()) {
                return Err(violation);
            }
            let mut message = payload
                .downcast_ref::<&str>()
                .map(|text| (*text).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "<non-string panic payload>".to_string());
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
