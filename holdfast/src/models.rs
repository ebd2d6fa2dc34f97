//! Which persistence models a failure reproduces on (ADR-0112): replay its schedule under each model, weakest
//! first, and compare signatures. A failure that needs `posix` relies on an image no page cache produces.

use env::Persistence;

use crate::runner::{RunOptions, run_schedule};
use crate::schedule::ScheduleOf;
use crate::target::Target;

/// Where a failure reproduces: the models whose replay fails with the same signature, and the others.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelReport {
    pub reproduces_on: Vec<Persistence>,
    pub not_on: Vec<Persistence>,
}

impl ModelReport {
    /// `reproduces on: posix; not on: page, ext4-ordered`.
    pub fn line(&self) -> String {
        let names = |models: &[Persistence]| -> String {
            if models.is_empty() {
                "none".into()
            } else {
                models.iter().map(|model| model.name()).collect::<Vec<_>>().join(", ")
            }
        };
        format!("reproduces on: {}; not on: {}", names(&self.reproduces_on), names(&self.not_on))
    }

    /// The names of the models it reproduces on and of those it does not (for a seed file).
    pub fn names(&self) -> (Vec<String>, Vec<String>) {
        let names = |models: &[Persistence]| models.iter().map(|model| model.name().to_string()).collect();
        (names(&self.reproduces_on), names(&self.not_on))
    }
}

/// Replay `schedule` (whose run failed with `signature`) under every persistence model, keeping its sector size.
/// Costs one replay per model.
pub fn models_reproducing<T: Target>(
    schedule: &ScheduleOf<T>,
    signature: &corpus::Signature,
    options: &RunOptions,
) -> ModelReport {
    let mut report = ModelReport::default();
    let replay = RunOptions { keep_crash_image: false, record_trace: false, ..options.clone() };
    for model in Persistence::ALL {
        let mut variant = schedule.clone();
        variant.world.disk.persistence = model;
        let outcome = run_schedule::<T>(&variant, &replay);
        let same = outcome.failure.as_ref().is_some_and(|failure| failure.signature() == *signature);
        if same { report.reproduces_on.push(model) } else { report.not_on.push(model) }
    }
    debug_assert_eq!(report.reproduces_on.len() + report.not_on.len(), Persistence::ALL.len());
    report
}
