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
use env::sim::{Fate, Marks};
use env::{CrashShape, ExplicitFault, FaultConfig};
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

/// The shapes a crash that keyed draws decided is tried with (ADR-0172), simplest first: nothing pending kept,
/// everything kept, only the newest operation kept (the interrupted write), all but the newest, and the two
/// newest split either way.
fn keyed_crash_shapes() -> Vec<CrashShape> {
    let marks = |text: &str| Marks::try_from(text.to_string()).expect("valid marks");
    vec![
        CrashShape::all(false),
        CrashShape::all(true),
        CrashShape { newest: marks("k"), older: Fate::Dropped },
        CrashShape { newest: marks("d"), older: Fate::Kept },
        CrashShape { newest: marks("dk"), older: Fate::Dropped },
        CrashShape { newest: marks("kd"), older: Fate::Kept },
    ]
}

/// Simpler shapes of a crash: from keyed draws, [`keyed_crash_shapes`]; from a shape, [`CrashShape::simpler`].
pub(crate) fn simpler_shapes(shape: Option<&CrashShape>) -> Vec<CrashShape> {
    shape.map_or_else(keyed_crash_shapes, CrashShape::simpler)
}

fn simplify_world_step(step: &WorldStep) -> Vec<WorldStep> {
    let shaped: Vec<WorldStep> = if step.is_crash() {
        simpler_shapes(step.crash_shape()).into_iter().map(|shape| step.with_crash_shape(Some(shape))).collect()
    } else {
        Vec::new()
    };
    match step {
        WorldStep::Crash { .. } => shaped,
        WorldStep::CrashAtIo { k, shape } => {
            let mut out = shaped;
            out.extend(smaller(*k, 1).into_iter().map(|k| WorldStep::CrashAtIo { k, shape: shape.clone() }));
            out
        }
        WorldStep::CrashDuringRecovery { k, shape } => {
            let mut out = vec![WorldStep::Crash { shape: shape.clone() }];
            out.extend(shaped);
            out.extend(smaller(*k, 1).into_iter().map(|k| WorldStep::CrashDuringRecovery { k, shape: shape.clone() }));
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
    for shape in simpler_shapes(world.final_crash.as_ref()) {
        out.push(WorldConfig { final_crash: Some(shape), ..world.clone() });
    }
    out.retain(|candidate| candidate != world);
    out.dedup();
    out
}

/// Crash steps the pre-pass tries to give a shape, newest first (ADR-0172).
const PIN_CRASHES_MAX: usize = 3;
/// The pre-pass spends at most this fraction (1/n) of the budget.
const PIN_BUDGET_DIVISOR: u64 = 8;

/// Before shrinking (ADR-0172): give the newest crashes that keyed draws decided a shape that keeps the failure,
/// so that removing unrelated steps keeps their images — the final power cut first when the failure came after
/// it. Each is tried first with the shape its draws made (`recorded`: step, shape), then with
/// [`keyed_crash_shapes`]. Returns the candidate and the reruns spent (at most `budget`).
fn pin_crashes<S: Clone + PartialEq, C: Clone>(
    mut best: Candidate<Step<S>, (WorldConfig, C)>,
    (phase, recorded): (&str, &[(u64, CrashShape)]),
    fails: &mut impl FnMut(&Candidate<Step<S>, (WorldConfig, C)>) -> bool,
    budget: u64,
) -> (Candidate<Step<S>, (WorldConfig, C)>, u64) {
    let crash_steps = best.steps.iter().enumerate().rev().filter_map(|(index, step)| match step {
        Step::World(world) if world.is_crash() && world.crash_shape().is_none() => Some(Some(index)),
        _ => None,
    });
    let final_first = (phase == "final_crash" && best.config.0.final_crash.is_none()).then_some(None);
    let sites: Vec<Option<usize>> = final_first.into_iter().chain(crash_steps.take(PIN_CRASHES_MAX)).collect();
    let mut reruns = 0;
    let steps = best.steps.len() as u64;
    for site in sites {
        // The shape the original run's draws made at this crash first: a crash step's in its own step (an armed
        // crash's in the next), the final power cut's after the last step.
        let step_of_crash = match site {
            None => steps,
            Some(index) => match &best.steps[index] {
                Step::World(WorldStep::CrashAtIo { .. }) => index as u64 + 1,
                _ => index as u64,
            },
        };
        let mut at_step = recorded.iter().filter(|(step, _)| *step == step_of_crash);
        let own = if site.is_none() { at_step.next_back() } else { at_step.next() };
        for shape in own.map(|(_, shape)| shape.clone()).into_iter().chain(keyed_crash_shapes()) {
            if reruns >= budget {
                return (best, reruns);
            }
            let mut candidate = best.clone();
            match site {
                None => candidate.config.0.final_crash = Some(shape),
                Some(index) => {
                    let Step::World(world) = &candidate.steps[index] else { unreachable!("a crash step") };
                    candidate.steps[index] = Step::World(world.with_crash_shape(Some(shape)));
                }
            }
            reruns += 1;
            if fails(&candidate) {
                best = candidate;
                break;
            }
        }
    }
    (best, reruns)
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
    let original = run_schedule::<T>(schedule, &RunOptions { record_crash_shapes: true, ..replay.clone() });
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
    let phase = original.failure.as_ref().map(|failure| failure.phase.clone()).unwrap_or_default();
    let mut fails = fails;
    let recorded = &original.recorded_crash_shapes;
    let (initial, pinning_reruns) = pin_crashes(initial, (&phase, recorded), &mut fails, budget / PIN_BUDGET_DIVISOR);
    let mut report = shrinker::shrink(&Simplifier::<T>(PhantomData), initial, fails, budget - pinning_reruns);
    report.reruns += pinning_reruns;
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
        let none = CrashShape::all(false);
        let at = |k: u64, shape: &Option<CrashShape>| WorldStep::CrashAtIo { k, shape: shape.clone() };
        let shaped = Some(CrashShape { newest: Marks::new(vec![true]), older: Fate::Dropped });
        let simpler = simplify_world_step(&at(10, &shaped));
        assert_eq!(simpler[..2], [at(10, &Some(none.clone())), at(10, &Some(CrashShape::all(true)))]);
        assert_eq!(simpler[2..], [at(1, &shaped), at(5, &shaped), at(9, &shaped)], "then smaller k, same shape");
        let keyed = simplify_world_step(&at(1, &None));
        assert_eq!(keyed.len(), keyed_crash_shapes().len(), "a keyed crash is tried with each shape: {keyed:?}");
        assert!(simplify_world_step(&at(1, &Some(none.clone()))).iter().all(|step| step.crash_shape() != Some(&none)));
        assert_eq!(simplify_world_step(&WorldStep::CrashDuringRecovery { k: 1, shape: None })[0], WorldStep::CRASH);
        assert_eq!(render_step(&at(2, &None)), "crash_at_io k=2");
        assert_eq!(render_step(&WorldStep::CRASH), "crash");
        assert_eq!(render_step(&at(2, &shaped)), r#"crash_at_io k=2 shape={"newest":"k","older":"dropped"}"#);
    }

    #[test]
    fn removing_a_kind_removes_exactly_that_kind() {
        let steps = vec![WorldStep::CRASH, WorldStep::Reopen, WorldStep::CRASH];
        let candidates = without_each_kind(&steps);
        assert_eq!(candidates, vec![vec![WorldStep::Reopen], vec![WorldStep::CRASH, WorldStep::CRASH]]);
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
