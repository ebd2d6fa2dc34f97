//! Shrinking a failing schedule (ADR-0030) with the generic [`shrinker`], for any [`Target`].
//!
//! The predicate replays a candidate (with the same canary, if any) and compares its failure signature —
//! invariant name and [`crate::FailureKind`] — with the original's. The result is re-validated by one more fresh
//! replay before it is returned; that replay's outcome (and digest) is what callers report and save.

use corpus::Signature;
use serde::Serialize;
use shrinker::{Candidate, Simplify};

use crate::config::SwarmConfig;
use crate::runner::{Failure, Outcome, RunOptions, run_schedule_target};
use crate::schedule::Schedule;
use crate::target::Target;

/// What a shrink produced.
#[derive(Clone, Debug)]
pub struct Shrunk<S> {
    /// The failure every candidate had to reproduce.
    pub signature: Signature,
    /// The smallest schedule found that still fails with `signature`.
    pub schedule: Schedule<S>,
    pub steps_before: usize,
    pub steps_after: usize,
    /// Replays the shrinker ran (the two validation replays not included).
    pub reruns: u64,
    /// True when the result is 1-minimal under single-step removal (the budget did not run out first).
    pub reached_fixpoint: bool,
    /// The fresh replay of `schedule` that confirmed it fails with `signature`.
    pub validation: Outcome<S>,
}

/// The signature of a failure: its invariant and its kind.
pub fn signature_of(failure: &Failure) -> Signature {
    Signature { invariant: failure.invariant.clone(), kind: failure.kind.to_string() }
}

/// The options each shrinking replay runs with: the caller's canary, nothing recorded.
fn replay_options(options: &RunOptions) -> RunOptions {
    RunOptions { history_steps: 1, canary: options.canary.clone(), ..RunOptions::default() }
}

/// Replay `schedule` and return its failure signature, if it fails.
pub fn replay_signature<T: Target>(schedule: &Schedule<T::Step>, options: &RunOptions) -> Option<Signature> {
    run_schedule_target::<T>(schedule, &replay_options(options)).failure.as_ref().map(signature_of)
}

/// Shrink `schedule`, which must fail when replayed with `options` (its canary), within `budget` reruns.
///
/// Errors when the schedule does not fail on replay, or when the shrunk schedule does not fail the same way on a
/// fresh replay (either is a determinism bug worth a report of its own).
pub fn shrink_schedule<T, X>(
    simplify: &X,
    schedule: &Schedule<T::Step>,
    options: &RunOptions,
    budget: u64,
) -> Result<Shrunk<T::Step>, String>
where
    T: Target,
    X: Simplify<Step = T::Step, Config = SwarmConfig>,
{
    let replay = replay_options(options);
    let original = run_schedule_target::<T>(schedule, &replay);
    let Some(signature) = original.failure.as_ref().map(signature_of) else {
        return Err(format!(
            "the schedule (seed {}, {} steps) passes on replay: nothing to shrink",
            schedule.seed,
            schedule.steps.len()
        ));
    };
    // Steps after the failing one never ran: start from what did.
    let initial = Candidate { steps: original.schedule.steps.clone(), config: schedule.config.clone() };
    let candidate_schedule = |candidate: &Candidate<T::Step, SwarmConfig>| Schedule {
        format_version: schedule.format_version,
        target: schedule.target.clone(),
        seed: schedule.seed,
        config: candidate.config.clone(),
        steps: candidate.steps.clone(),
    };
    let fails = |candidate: &Candidate<T::Step, SwarmConfig>| {
        if candidate.config.validate().is_err() {
            return false;
        }
        let outcome = run_schedule_target::<T>(&candidate_schedule(candidate), &replay);
        outcome.failure.as_ref().map(signature_of).as_ref() == Some(&signature)
    };
    let report = shrinker::shrink(simplify, initial, fails, budget);
    let shrunk = candidate_schedule(&report.result);
    let validation = run_schedule_target::<T>(&shrunk, &RunOptions { history_steps: 10, ..replay.clone() });
    let got = validation.failure.as_ref().map(signature_of);
    if got.as_ref() != Some(&signature) {
        return Err(format!(
            "the shrunk schedule ({} steps) did not fail with {signature} on a fresh replay: got {}",
            shrunk.steps.len(),
            got.map_or_else(|| "pass".to_string(), |got| got.to_string())
        ));
    }
    Ok(Shrunk {
        signature,
        schedule: shrunk,
        steps_before: schedule.steps.len(),
        steps_after: report.steps_after,
        reruns: report.reruns,
        reached_fixpoint: report.reached_fixpoint,
        validation,
    })
}

/// One readable line for a step: its `op`, then `field=value` for each other field (`put key=3 value={..}`).
pub fn render_step<S: Serialize>(step: &S) -> String {
    let value = serde_json::to_value(step).unwrap_or_else(|error| serde_json::Value::String(error.to_string()));
    let serde_json::Value::Object(fields) = value else { return value.to_string() };
    let mut parts: Vec<String> = Vec::with_capacity(fields.len());
    if let Some(op) = fields.get("op") {
        parts.push(op.as_str().map_or_else(|| op.to_string(), str::to_string));
    }
    for (name, field) in fields.iter().filter(|(name, _)| name.as_str() != "op") {
        let rendered = match field {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        parts.push(format!("{name}={rendered}"));
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine_target::{Action, Step, ValueSpec};

    #[test]
    fn steps_render_on_one_line() {
        let step = Step::new(Action::Put { key: 3, value: ValueSpec { id: 9, len: 4 } });
        assert_eq!(render_step(&step), r#"put key=3 value={"id":9,"len":4}"#);
        assert_eq!(render_step(&Step::new(Action::Crash)), "crash");
        assert_eq!(render_step(&Step::new(Action::CrashAtIo { k: 2 })), "crash_at_io k=2");
    }
}
