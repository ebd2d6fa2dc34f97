//! Which persistence models a failure can happen on (ADR-0173, replacing ADR-0112's labels): the failing run's
//! crash images are classified by the models that admit them (`env`'s check: could that model have left exactly
//! these bytes and names?), and the schedule is replayed under each model only as supporting evidence. A model
//! that admits every crash image of the run can produce this very run; one that refuses an image cannot. The
//! models are ordered, `posix` ⊇ `page` ⊇ `ext4-ordered`, so a failure found under `page` is never "cannot on
//! posix"; a replay under `posix` draws other crash decisions, so its passing says nothing against that.

use env::Persistence;

use crate::runner::{RunOptions, run_schedule};
use crate::schedule::ScheduleOf;
use crate::target::Target;

/// Where a failure can happen, and what replays under each model showed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelReport {
    /// The models that admit every crash image of the failing run, weakest first.
    pub can_happen_on: Vec<Persistence>,
    /// The models that refuse at least one of them.
    pub cannot_on: Vec<Persistence>,
    /// How many crash images were classified.
    pub crashes: usize,
    /// Evidence only: the models whose replay (with that model's own crash decisions) failed the same way...
    pub replay_fails_on: Vec<Persistence>,
    /// ...and those whose replay passed or failed otherwise.
    pub replay_differs_on: Vec<Persistence>,
}

/// `posix, page` (or `none`).
fn names(models: &[Persistence]) -> String {
    if models.is_empty() {
        "none".into()
    } else {
        models.iter().map(|model| model.name()).collect::<Vec<_>>().join(", ")
    }
}

/// The names of `models`, for a seed file.
fn name_list(models: &[Persistence]) -> Vec<String> {
    models.iter().map(|model| model.name().to_string()).collect()
}

impl ModelReport {
    /// `can happen on: posix, page; cannot on: ext4-ordered`.
    pub fn line(&self) -> String {
        format!("can happen on: {}; cannot on: {}", names(&self.can_happen_on), names(&self.cannot_on))
    }

    /// The supporting evidence, one line: what the classification rests on and what the replays did.
    pub fn evidence_line(&self) -> String {
        format!(
            "crash images classified: {}; replays with each model's own crash decisions (evidence only): same \
             failure on {}; other outcome on {}",
            self.crashes,
            names(&self.replay_fails_on),
            names(&self.replay_differs_on)
        )
    }

    /// The classification's model names, for a seed file: (can happen on, cannot on).
    pub fn names(&self) -> (Vec<String>, Vec<String>) {
        (name_list(&self.can_happen_on), name_list(&self.cannot_on))
    }

    /// The replays' model names, for a seed file: (same failure, other outcome).
    pub fn replay_names(&self) -> (Vec<String>, Vec<String>) {
        (name_list(&self.replay_fails_on), name_list(&self.replay_differs_on))
    }
}

/// The models that admit every image in `classes` (each crash's admitting models, weakest first).
pub fn admitting_all(classes: &[Vec<Persistence>]) -> Vec<Persistence> {
    Persistence::ALL.into_iter().filter(|model| classes.iter().all(|class| class.contains(model))).collect()
}

/// Classify the failure of `schedule` (whose run failed with `signature`): one replay under its own model with
/// crash classification on, then one replay per model for the evidence. Costs four replays.
pub fn classify_failure<T: Target>(
    schedule: &ScheduleOf<T>,
    signature: &corpus::Signature,
    options: &RunOptions,
) -> ModelReport {
    let replay =
        RunOptions { keep_crash_image: false, record_trace: false, classify_crashes: false, ..options.clone() };
    let classified = run_schedule::<T>(schedule, &RunOptions { classify_crashes: true, ..replay.clone() });
    let can_happen_on = admitting_all(&classified.crash_classes);
    let cannot_on = Persistence::ALL.into_iter().filter(|model| !can_happen_on.contains(model)).collect();
    let mut report =
        ModelReport { can_happen_on, cannot_on, crashes: classified.crash_classes.len(), ..ModelReport::default() };
    for model in Persistence::ALL {
        let mut variant = schedule.clone();
        variant.world.disk.persistence = model;
        let outcome = run_schedule::<T>(&variant, &replay);
        let same = outcome.failure.as_ref().is_some_and(|failure| failure.signature() == *signature);
        if same { report.replay_fails_on.push(model) } else { report.replay_differs_on.push(model) }
    }
    debug_assert_eq!(report.can_happen_on.len() + report.cannot_on.len(), Persistence::ALL.len());
    debug_assert!(report.can_happen_on.first() == Some(&Persistence::Posix), "posix admits every image");
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_can_happen_on_the_models_that_admit_every_crash_image() {
        let all = Persistence::ALL.to_vec();
        let page = vec![Persistence::Posix, Persistence::Page];
        assert_eq!(admitting_all(&[]), all, "no crash: every model");
        assert_eq!(admitting_all(&[all.clone(), page.clone()]), page);
        let report = ModelReport {
            can_happen_on: page,
            cannot_on: vec![Persistence::Ext4Ordered],
            crashes: 2,
            replay_fails_on: vec![Persistence::Page],
            replay_differs_on: vec![Persistence::Posix, Persistence::Ext4Ordered],
        };
        assert_eq!(report.line(), "can happen on: posix, page; cannot on: ext4-ordered");
        assert!(!report.line().contains("not on: posix") && !report.evidence_line().contains("not on"));
        assert!(report.evidence_line().contains("same failure on page; other outcome on posix, ext4-ordered"));
    }
}
