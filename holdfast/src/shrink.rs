//! Shrinking a failing schedule (ADR-0030) with the generic [`shrinker`], for any [`Target`].
//!
//! The framework simplifies what it owns — world steps (smaller `k`, a crash during recovery made a plain crash,
//! lower bit-flip offsets), the world configuration (faults off one at a time or made certain, BUGGIFY and disk
//! quotas off, crashes that keep every write), and "remove every step of one kind" — and asks the target for the
//! rest ([`Target::simplify_op`], [`Target::simplify_config`], [`Target::rewrite`], [`Target::dependents`]).
//! The predicate replays a candidate (with the same canary) and compares its failure signature — invariant and
//! [`crate::FailureKind`] — with the original's; the result is confirmed by one more fresh replay.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use corpus::Signature;
use env::{ExplicitFault, FaultConfig};
use serde::Serialize;
use shrinker::{Candidate, Simplify};

use crate::config::WorldConfig;
use crate::kit::smaller;
use crate::runner::{OutcomeOf, RunOptions, run_schedule};
use crate::schedule::{Schedule, ScheduleOf};
use crate::step::{FaultAction, FaultOn, Step, WorldStep};
use crate::target::Target;

/// What a shrink produced.
#[derive(Clone, Debug)]
pub struct Shrunk<T: Target> {
    /// The failure every candidate had to reproduce.
    pub signature: Signature,
    /// The smallest schedule found that still fails with `signature`.
    pub schedule: ScheduleOf<T>,
    pub steps_before: usize,
    pub steps_after: usize,
    /// Replays the shrinker ran (the two validation replays not included).
    pub reruns: u64,
    /// True when every simplification reached its fixpoint (the budget did not run out first).
    pub reached_fixpoint: bool,
    /// True when the result is 1-minimal under single-step removal: the fixpoint was reached, or the shrinker's
    /// final single-step pass reached its own (always, for at most 20 steps and the default budget: ADR-0116).
    pub one_minimal: bool,
    /// The fresh replay of `schedule` that confirmed it fails with `signature`.
    pub validation: OutcomeOf<T>,
}

/// The framework's and the target's simplifications together.
struct Simplifier<T>(PhantomData<T>);

impl<T: Target> Simplify for Simplifier<T> {
    type Step = Step<T::Op>;
    type Config = (WorldConfig, T::Config);

    fn simplify_step(&self, step: &Step<T::Op>) -> Vec<Step<T::Op>> {
        match step {
            Step::World(world) => simplify_world_step(world).into_iter().map(Step::World).collect(),
            Step::Op(op) => T::simplify_op(op).into_iter().map(Step::Op).collect(),
        }
    }

    fn simplify_config(&self, (world, config): &Self::Config) -> Vec<Self::Config> {
        let mut out: Vec<Self::Config> =
            simplify_world(world).into_iter().map(|world| (world, config.clone())).collect();
        out.extend(T::simplify_config(config).into_iter().map(|config| (world.clone(), config)));
        out.retain(|(world, config)| world.validate().is_ok() && T::validate_config(config).is_ok());
        out
    }

    fn rewrite(&self, steps: &[Step<T::Op>]) -> Vec<Vec<Step<T::Op>>> {
        let mut out = without_each_kind(steps);
        out.extend(T::rewrite(steps));
        out.retain(|candidate| candidate.as_slice() != steps);
        let mut unique: Vec<Vec<Step<T::Op>>> = Vec::new();
        for candidate in out {
            if !unique.contains(&candidate) {
                unique.push(candidate);
            }
        }
        unique
    }

    fn dependents(&self, steps: &[Step<T::Op>], index: usize) -> Vec<usize> {
        T::dependents(steps, index)
    }
}

fn simplify_world_step(step: &WorldStep) -> Vec<WorldStep> {
    match step {
        WorldStep::CrashAtIo { k } => smaller(*k, 1).into_iter().map(|k| WorldStep::CrashAtIo { k }).collect(),
        WorldStep::CrashDuringRecovery { k } => {
            let mut out = vec![WorldStep::Crash];
            out.extend(smaller(*k, 1).into_iter().map(|k| WorldStep::CrashDuringRecovery { k }));
            out
        }
        WorldStep::Fault(ExplicitFault::FlipBit { path, offset }) => smaller(*offset, 0)
            .into_iter()
            .map(|offset| WorldStep::Fault(ExplicitFault::FlipBit { path: path.clone(), offset }))
            .collect(),
        WorldStep::FaultOn(fault) => {
            let mut out: Vec<FaultOn> = smaller(u64::from(fault.newest), 0)
                .into_iter()
                .map(|newest| FaultOn { newest: u32::try_from(newest).expect("below a u32"), ..fault.clone() })
                .collect();
            if let FaultAction::FlipBit { offset } = fault.action {
                out.extend(
                    smaller(offset, 0)
                        .into_iter()
                        .map(|offset| FaultOn { action: FaultAction::FlipBit { offset }, ..fault.clone() }),
                );
            }
            out.into_iter().map(WorldStep::FaultOn).collect()
        }
        _ => Vec::new(),
    }
}

/// The `op` name of a step (its serde tag), for "remove every step of one kind".
fn kind_of(step: &impl Serialize) -> String {
    serde_json::to_value(step)
        .ok()
        .and_then(|value| value.get("op").and_then(serde_json::Value::as_str).map(str::to_string))
        .unwrap_or_default()
}

/// For each kind of step, the schedule without it, the most frequent kind first.
fn without_each_kind<S: Clone + Serialize>(steps: &[S]) -> Vec<Vec<S>> {
    let kinds: Vec<String> = steps.iter().map(kind_of).collect();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for kind in &kinds {
        *counts.entry(kind.as_str()).or_insert(0) += 1;
    }
    let mut order: Vec<(&str, usize)> = counts.into_iter().collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    order
        .iter()
        .map(|(name, _)| {
            steps.iter().zip(&kinds).filter(|(_, kind)| kind != name).map(|(step, _)| step.clone()).collect()
        })
        .collect()
}

/// A probability of one (in parts per million).
const PPM_CERTAIN: u32 = 1_000_000;

/// For each probabilistic fault that is on, a copy with only that one off; then each made certain.
fn faults_off(faults: &FaultConfig) -> Vec<FaultConfig> {
    type Field = fn(&mut FaultConfig) -> &mut u32;
    let fields: [Field; 13] = [
        |f| &mut f.fsync_error_ppm,
        |f| &mut f.write_error_ppm,
        |f| &mut f.short_write_ppm,
        |f| &mut f.read_error_ppm,
        |f| &mut f.read_corruption_ppm,
        |f| &mut f.latent_sector_ppm,
        |f| &mut f.misdirected_write_ppm,
        |f| &mut f.latency_ppm,
        |f| &mut f.clock_jump_ppm,
        |f| &mut f.crash_torn_garbage_ppm,
        |f| &mut f.dir_sync_error_ppm,
        |f| &mut f.metadata_error_ppm,
        |f| &mut f.metadata_no_space_ppm,
    ];
    let mut off = Vec::new();
    let mut certain = Vec::new();
    for field in fields {
        let mut copy = faults.clone();
        let ppm = *field(&mut copy);
        if ppm > 0 {
            *field(&mut copy) = 0;
            off.push(copy.clone());
        }
        // A fault the failure needs, made certain: it then fires at the first chance instead of at the one keyed
        // position that only a long prefix of steps reaches, so far fewer steps are needed.
        if ppm > 0 && ppm < PPM_CERTAIN {
            *field(&mut copy) = PPM_CERTAIN;
            certain.push(copy);
        }
    }
    off.extend(certain);
    off
}

/// Simpler worlds: everything probabilistic off, then one fault at a time, quota and BUGGIFY off, crashes that
/// keep every pending write.
fn simplify_world(world: &WorldConfig) -> Vec<WorldConfig> {
    let mut out = vec![world.quiet()];
    out.extend(faults_off(&world.faults).into_iter().map(|faults| WorldConfig { faults, ..world.clone() }));
    let mut no_quota = world.clone();
    no_quota.faults.disk_quota_bytes = None;
    out.push(no_quota);
    let mut no_buggify = world.clone();
    no_buggify.buggify = false;
    no_buggify.faults.buggify_site_ppm = 0;
    no_buggify.faults.buggify_fire_ppm = 0;
    out.push(no_buggify);
    for (write, meta) in [(PPM_CERTAIN, PPM_CERTAIN), (PPM_CERTAIN, world.faults.crash_metadata_kept_ppm)] {
        let mut copy = world.clone();
        copy.faults.crash_write_kept_ppm = write;
        copy.faults.crash_metadata_kept_ppm = meta;
        out.push(copy);
    }
    out.retain(|candidate| candidate != world);
    out.dedup();
    out
}

/// The options each shrinking replay runs with: the caller's canary, nothing recorded.
fn replay_options(options: &RunOptions) -> RunOptions {
    RunOptions { history_steps: 1, canary: options.canary.clone(), ..RunOptions::default() }
}

/// Shrink `schedule`, which must fail when replayed with `options` (its canary), within `budget` reruns.
///
/// Errors when the schedule does not fail on replay, or when the shrunk schedule does not fail the same way on a
/// fresh replay (either is a determinism bug worth a report of its own).
pub fn shrink_schedule<T: Target>(
    schedule: &ScheduleOf<T>,
    options: &RunOptions,
    budget: u64,
) -> Result<Shrunk<T>, String> {
    let replay = replay_options(options);
    let original = run_schedule::<T>(schedule, &replay);
    let Some(signature) = original.failure.as_ref().map(crate::Failure::signature) else {
        return Err(format!(
            "the schedule (seed {}, {} steps) passes on replay: nothing to shrink",
            schedule.seed,
            schedule.steps.len()
        ));
    };
    // Steps after the failing one never ran: start from what did.
    let initial =
        Candidate { steps: original.schedule.steps.clone(), config: (schedule.world.clone(), schedule.config.clone()) };
    let candidate_schedule = |candidate: &Candidate<Step<T::Op>, (WorldConfig, T::Config)>| Schedule {
        format_version: schedule.format_version,
        target: schedule.target.clone(),
        seed: schedule.seed,
        world: candidate.config.0.clone(),
        config: candidate.config.1.clone(),
        steps: candidate.steps.clone(),
    };
    let fails = |candidate: &Candidate<Step<T::Op>, (WorldConfig, T::Config)>| {
        let outcome = run_schedule::<T>(&candidate_schedule(candidate), &replay);
        outcome.failure.as_ref().map(crate::Failure::signature).as_ref() == Some(&signature)
    };
    let report = shrinker::shrink(&Simplifier::<T>(PhantomData), initial, fails, budget);
    let shrunk = candidate_schedule(&report.result);
    let validation = run_schedule::<T>(&shrunk, &RunOptions { history_steps: 10, ..replay.clone() });
    let got = validation.failure.as_ref().map(crate::Failure::signature);
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
        one_minimal: report.one_minimal,
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

    #[test]
    fn world_steps_simplify_to_simpler_world_steps() {
        assert_eq!(
            simplify_world_step(&WorldStep::CrashAtIo { k: 10 }),
            vec![WorldStep::CrashAtIo { k: 1 }, WorldStep::CrashAtIo { k: 5 }, WorldStep::CrashAtIo { k: 9 }]
        );
        assert!(simplify_world_step(&WorldStep::CrashAtIo { k: 1 }).is_empty());
        assert_eq!(simplify_world_step(&WorldStep::CrashDuringRecovery { k: 1 }), vec![WorldStep::Crash]);
        assert_eq!(render_step(&WorldStep::CrashAtIo { k: 2 }), "crash_at_io k=2");
        assert_eq!(render_step(&WorldStep::Crash), "crash");
    }

    #[test]
    fn removing_a_kind_removes_exactly_that_kind() {
        let steps = vec![WorldStep::Crash, WorldStep::Reopen, WorldStep::Crash];
        let candidates = without_each_kind(&steps);
        assert_eq!(candidates, vec![vec![WorldStep::Reopen], vec![WorldStep::Crash, WorldStep::Crash]]);
    }

    #[test]
    fn simpler_worlds_differ_and_validate() {
        let menu = crate::FaultMenu::standard();
        for seed in 0..20 {
            let world = WorldConfig::from_seed(seed, crate::FaultProfile::Assumed, &menu);
            for simpler in simplify_world(&world) {
                assert!(simpler.validate().is_ok());
                assert_ne!(simpler, world);
            }
        }
    }
}
