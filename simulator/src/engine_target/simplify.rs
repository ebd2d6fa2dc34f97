//! What the shrinker (ADR-0030) may try on engine schedules: simpler steps, a simpler configuration, and
//! whole-schedule rewrites. Every variant is only a *candidate*: the shrinker keeps it only when a replay still
//! fails with the original signature, so nothing here has to be "safe".

use std::collections::BTreeMap;

use env::{ExplicitFault, FaultConfig};
use shrinker::Simplify;

use super::model::ValueSpec;
use super::step::{Action, Step};
use crate::config::SwarmConfig;

/// The engine target's simplifications.
#[derive(Clone, Copy, Debug, Default)]
pub struct EngineSimplify;

/// Smaller variants of a number, smallest first: `0` (or `floor`), then half way, then one less. Never `n`.
fn smaller(n: u64, floor: u64) -> Vec<u64> {
    let mut out = Vec::new();
    if n <= floor {
        return out;
    }
    for candidate in [floor, floor + (n - floor) / 2, n - 1] {
        if candidate < n && !out.contains(&candidate) {
            out.push(candidate);
        }
    }
    debug_assert!(out.iter().all(|&c| c < n && c >= floor));
    out
}

fn smaller_u32(n: u32, floor: u32) -> Vec<u32> {
    smaller(u64::from(n), u64::from(floor)).into_iter().map(|c| u32::try_from(c).expect("below a u32")).collect()
}

/// The kinds of action, for "remove every step of one kind".
fn kind(action: &Action) -> &'static str {
    match action {
        Action::Put { .. } => "put",
        Action::Delete { .. } => "delete",
        Action::Get { .. } => "get",
        Action::Scan { .. } => "scan",
        Action::Flush => "flush",
        Action::Compact => "compact",
        Action::RunTask { .. } => "run_task",
        Action::Crash => "crash",
        Action::CrashAtIo { .. } => "crash_at_io",
        Action::CrashDuringRecovery { .. } => "crash_during_recovery",
        Action::Fault(_) => "fault",
        Action::Reopen => "reopen",
    }
}

/// Rewrite every key of `action` with `map`.
fn map_keys(action: &Action, map: &impl Fn(u32) -> u32) -> Action {
    match action {
        Action::Put { key, value } => Action::Put { key: map(*key), value: *value },
        Action::Delete { key } => Action::Delete { key: map(*key) },
        Action::Get { key } => Action::Get { key: map(*key) },
        Action::Scan { start, end } => {
            let start_mapped = map(*start);
            // Keep the range non-empty: the width of the mapped keys it covered, at least one.
            let end_mapped = map(end.saturating_sub(1)).saturating_add(1).max(start_mapped.saturating_add(1));
            Action::Scan { start: start_mapped, end: end_mapped }
        }
        other => other.clone(),
    }
}

fn keys_of(action: &Action) -> Vec<u32> {
    match action {
        Action::Put { key, .. } | Action::Delete { key } | Action::Get { key } => vec![*key],
        Action::Scan { start, end } => vec![*start, end.saturating_sub(1)],
        _ => Vec::new(),
    }
}

impl EngineSimplify {
    fn simplify_action(action: &Action) -> Vec<Action> {
        match action {
            Action::Put { key, value } => {
                let mut out: Vec<Action> = smaller_u32(value.len, 0)
                    .into_iter()
                    .map(|len| Action::Put { key: *key, value: ValueSpec { id: value.id, len } })
                    .collect();
                out.extend(smaller_u32(*key, 0).into_iter().map(|key| Action::Put { key, value: *value }));
                out
            }
            Action::Delete { key } => smaller_u32(*key, 0).into_iter().map(|key| Action::Delete { key }).collect(),
            Action::Get { key } => smaller_u32(*key, 0).into_iter().map(|key| Action::Get { key }).collect(),
            Action::Scan { start, end } => {
                let mut out = Vec::new();
                if end.saturating_sub(*start) > 1 {
                    // Narrower: one key at either end, then half the range.
                    out.push(Action::Scan { start: *start, end: start + 1 });
                    out.push(Action::Scan { start: end - 1, end: *end });
                    out.push(Action::Scan { start: *start, end: start + (end - start) / 2 });
                    out.push(Action::Scan { start: start + (end - start) / 2, end: *end });
                }
                // Lower: the same width, starting at smaller keys.
                let width = end.saturating_sub(*start).max(1);
                out.extend(smaller_u32(*start, 0).into_iter().map(|start| Action::Scan { start, end: start + width }));
                out.retain(|candidate| candidate != action);
                out
            }
            Action::CrashAtIo { k } => smaller(*k, 1).into_iter().map(|k| Action::CrashAtIo { k }).collect(),
            Action::CrashDuringRecovery { k } => {
                let mut out = vec![Action::Crash];
                out.extend(smaller(*k, 1).into_iter().map(|k| Action::CrashDuringRecovery { k }));
                out
            }
            Action::Compact => vec![Action::Flush],
            Action::Fault(ExplicitFault::FlipBit { path, offset }) => smaller(*offset, 0)
                .into_iter()
                .map(|offset| Action::Fault(ExplicitFault::FlipBit { path: path.clone(), offset }))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// For each probabilistic fault of `faults` that is on, a copy with only that one off; then one with it certain.
fn faults_off(faults: &FaultConfig) -> Vec<FaultConfig> {
    type Field = fn(&mut FaultConfig) -> &mut u32;
    let fields: [Field; 10] = [
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
        // (file, operation) position that only a long prefix of steps reaches, so far fewer steps are needed.
        if ppm > 0 && ppm < PPM_CERTAIN {
            *field(&mut copy) = PPM_CERTAIN;
            certain.push(copy);
        }
    }
    off.extend(certain);
    off
}

/// A probability of one (in parts per million).
const PPM_CERTAIN: u32 = 1_000_000;

impl Simplify for EngineSimplify {
    type Step = Step;
    type Config = SwarmConfig;

    fn simplify_step(&self, step: &Step) -> Vec<Step> {
        let mut out: Vec<Step> = Self::simplify_action(&step.action)
            .into_iter()
            .map(|action| Step { client: step.client, action })
            .collect();
        if step.client != 0 {
            out.push(Step { client: 0, action: step.action.clone() });
        }
        out
    }

    fn simplify_config(&self, config: &SwarmConfig) -> Vec<SwarmConfig> {
        let mut out = Vec::new();
        // Everything probabilistic off at once first (the cheapest big win), then one fault at a time.
        let quiet = config.quiet();
        if quiet != *config {
            out.push(quiet);
        }
        for faults in faults_off(&config.faults) {
            out.push(SwarmConfig { faults, ..config.clone() });
        }
        if config.faults.disk_quota_bytes.is_some() {
            let mut copy = config.clone();
            copy.faults.disk_quota_bytes = None;
            out.push(copy);
        }
        if config.buggify || config.faults.buggify_site_ppm > 0 || config.faults.buggify_fire_ppm > 0 {
            let mut copy = config.clone();
            copy.buggify = false;
            copy.faults.buggify_site_ppm = 0;
            copy.faults.buggify_fire_ppm = 0;
            out.push(copy);
        }
        // Crash tearing: keep every pending write and metadata operation (a crash that loses only the unsynced).
        for (write, meta) in [(1_000_000, 1_000_000), (1_000_000, config.faults.crash_metadata_kept_ppm)] {
            let mut copy = config.clone();
            copy.faults.crash_write_kept_ppm = write;
            copy.faults.crash_metadata_kept_ppm = meta;
            if copy != *config {
                out.push(copy);
            }
        }
        out.dedup();
        out.retain(|candidate| candidate != config && candidate.validate().is_ok());
        out
    }

    fn rewrite(&self, steps: &[Step]) -> Vec<Vec<Step>> {
        let mut out: Vec<Vec<Step>> = Vec::new();
        // Remove every step of one kind, the most frequent kind first.
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        for step in steps {
            *counts.entry(kind(&step.action)).or_insert(0) += 1;
        }
        let mut kinds: Vec<(&'static str, usize)> = counts.into_iter().collect();
        kinds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        for (name, _) in &kinds {
            out.push(steps.iter().filter(|step| kind(&step.action) != *name).cloned().collect());
        }
        // Merge keys: every key to its rank among the keys used (dense), then everything to one key, then halves.
        let mut used: Vec<u32> = steps.iter().flat_map(|step| keys_of(&step.action)).collect();
        used.sort_unstable();
        used.dedup();
        let rank: BTreeMap<u32, u32> =
            used.iter().enumerate().map(|(index, &key)| (key, u32::try_from(index).expect("fits"))).collect();
        let dense = |key: u32| rank.get(&key).copied().unwrap_or(key);
        let rewrite_keys = |map: &dyn Fn(u32) -> u32| -> Vec<Step> {
            steps.iter().map(|step| Step { client: step.client, action: map_keys(&step.action, &map) }).collect()
        };
        out.push(rewrite_keys(&|_| 0));
        out.push(rewrite_keys(&dense));
        out.push(rewrite_keys(&|key| dense(key) / 2));
        // Every value shortest.
        out.push(
            steps
                .iter()
                .map(|step| match &step.action {
                    Action::Put { key, value } => Step {
                        client: step.client,
                        action: Action::Put { key: *key, value: ValueSpec { len: 0, ..*value } },
                    },
                    _ => step.clone(),
                })
                .collect(),
        );
        out.retain(|candidate| candidate.as_slice() != steps);
        let mut unique: Vec<Vec<Step>> = Vec::new();
        for candidate in out {
            if !unique.contains(&candidate) {
                unique.push(candidate);
            }
        }
        unique
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smaller_numbers_are_smaller() {
        assert_eq!(smaller(10, 0), vec![0, 5, 9]);
        assert_eq!(smaller(1, 1), Vec::<u64>::new());
        assert_eq!(smaller(2, 1), vec![1]);
        assert_eq!(smaller(0, 0), Vec::<u64>::new());
    }

    #[test]
    fn steps_simplify_to_different_steps() {
        let put = Step::new(Action::Put { key: 9, value: ValueSpec { id: 3, len: 100 } });
        let simpler = EngineSimplify.simplify_step(&put);
        assert!(simpler.contains(&Step::new(Action::Put { key: 9, value: ValueSpec { id: 3, len: 0 } })));
        assert!(!simpler.contains(&put));
        let scan = Step::new(Action::Scan { start: 4, end: 10 });
        for step in EngineSimplify.simplify_step(&scan) {
            let Action::Scan { start, end } = step.action else { panic!("not a scan") };
            assert!(start < end, "empty scan {start}..{end}");
        }
        assert!(EngineSimplify.simplify_step(&Step::new(Action::CrashAtIo { k: 1 })).is_empty());
    }

    #[test]
    fn rewrites_change_something_and_configs_validate() {
        let steps = vec![
            Step::new(Action::Put { key: 40, value: ValueSpec { id: 1, len: 5 } }),
            Step::new(Action::Get { key: 40 }),
            Step::new(Action::Scan { start: 30, end: 50 }),
        ];
        let rewrites = EngineSimplify.rewrite(&steps);
        assert!(rewrites.iter().all(|candidate| candidate != &steps));
        assert!(rewrites.iter().any(|candidate| candidate.len() == 2), "remove all gets");
        for config in (0..20).map(SwarmConfig::from_seed) {
            for simpler in EngineSimplify.simplify_config(&config) {
                assert!(simpler.validate().is_ok());
                assert_ne!(simpler, config);
            }
        }
    }
}
