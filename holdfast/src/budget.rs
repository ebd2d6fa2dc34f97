//! A hang is a failure (ADR-seeds-perf): every run has a budget of simulated work, counted by the world in units
//! of one call into it (each `Env` and `File` call, each background task step) plus one per open attempt the
//! framework retries — never wall time. The budget grows with the steps that ran, so a generated run and the
//! replay of its schedule have the same budget at every point: [`WORK_UNITS_OPEN_MAX`] for the first open,
//! [`WORK_UNITS_PER_STEP_MAX`] for each step (what a step leaves unused carries over), and
//! [`WORK_UNITS_LIVENESS_MAX`] for the liveness phase and the final crash.
//!
//! The call that passes the budget panics inside the world with [`env::WorkBudgetExceeded`]; the runner turns
//! that into a [`FailureKind::Liveness`] violation of [`WORK_BUDGET_INVARIANT`] whose message names the budget,
//! and the seed replays and shrinks like any other failure. A system that spins without calling into the world
//! at all is beyond any simulated count.

use std::any::Any;

use env::WorkBudgetExceeded;

use crate::target::{FailureKind, Violation};

/// Units of work the first open of a run may take (the most seen: 28, engine target, seeds 0..1000).
pub const WORK_UNITS_OPEN_MAX: u64 = 10_000;
/// Units of work each step adds to the budget. The most any run needed over a prefix of its steps was 2,067 per
/// step, and the largest single step took 11,512 (engine seeds 0..1000; txn seeds 0..300 and redb seeds 0..100
/// needed at most 30 and 105 per step).
pub const WORK_UNITS_PER_STEP_MAX: u64 = 20_000;
/// Units of work the liveness phase and the final crash add to the budget (the most seen: 8,795). Below the
/// liveness phase's own drain bound, [`crate::world::TASK_DRAIN_STEPS_MAX`], so a task that never finishes meets
/// the budget first.
pub const WORK_UNITS_LIVENESS_MAX: u64 = 200_000;
/// The invariant a run violates when its work passes the budget.
pub const WORK_BUDGET_INVARIANT: &str = "liveness.work_budget";

/// The most units of work a run may have done once `steps` steps ran, and with `finale`, its liveness phase and
/// final crash too.
pub fn work_limit(steps: u64, finale: bool) -> u64 {
    let liveness = if finale { WORK_UNITS_LIVENESS_MAX } else { 0 };
    WORK_UNITS_OPEN_MAX.saturating_add(steps.saturating_mul(WORK_UNITS_PER_STEP_MAX)).saturating_add(liveness)
}

/// The violation a panic payload stands for when it is a budget overrun (`None`: another panic).
pub(crate) fn overrun(payload: &(dyn Any + Send)) -> Option<Violation> {
    let exceeded = payload.downcast_ref::<WorkBudgetExceeded>()?;
    Some(Violation::new(
        WORK_BUDGET_INVARIANT,
        FailureKind::Liveness,
        format!(
            "the system's work converges within the run's work budget of {} units ({WORK_UNITS_OPEN_MAX} for the \
             first open, {WORK_UNITS_PER_STEP_MAX} per step, {WORK_UNITS_LIVENESS_MAX} for the liveness phase; a \
             unit is one call into the world, one background task step or one open attempt)",
            exceeded.limit
        ),
        format!("{exceeded}: background work, retries or a loop on the world that does not converge"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_grows_with_steps_and_an_overrun_names_it() {
        assert_eq!(work_limit(0, false), WORK_UNITS_OPEN_MAX);
        assert_eq!(work_limit(2, true) - work_limit(1, true), WORK_UNITS_PER_STEP_MAX);
        assert_eq!(work_limit(u64::MAX, true), u64::MAX, "saturates");
        let payload: Box<dyn Any + Send> = Box::new(WorkBudgetExceeded { limit: 7, done: 8, call: "open" });
        let violation = overrun(payload.as_ref()).expect("a budget overrun");
        assert_eq!((violation.invariant.as_str(), violation.kind), (WORK_BUDGET_INVARIANT, FailureKind::Liveness));
        assert!(violation.expected.contains("work budget of 7 units"), "{}", violation.expected);
        assert!(violation.actual.contains("8 units") && violation.actual.contains("at open"), "{}", violation.actual);
        assert!(overrun(&"a plain panic").is_none());
    }
}
