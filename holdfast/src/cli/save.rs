//! `--shrink` and `--save`: the minimal failing schedule, printed, confirmed, and pinned as a seed file.

use std::path::PathBuf;

use env::{Env, RealEnv};

use super::{Context, EXIT_BAD_INPUT, EXIT_FAIL, SEEDS_DIR_ENV_VAR, write_file};
use crate::runner::RunOptions;
use crate::schedule::ScheduleOf;
use crate::seeds::ident;
use crate::shrink::{Shrunk, render_step, shrink_schedule};
use crate::target::Target;

/// Shrink a failing schedule, print the minimal one and its confirming replay, and save it with `--save`.
/// Returns the exit code: 1 (the failure stands), 2 when saving failed, or 1 after an error shrinking.
pub(super) fn shrink_and_report<T: Target>(
    context: &Context<'_>,
    schedule: &ScheduleOf<T>,
    options: &RunOptions,
) -> u8 {
    let args = context.args;
    let clock = RealEnv::new();
    let started = clock.now();
    outln!();
    outln!("shrinking: seed {} ({} steps), budget {} reruns", schedule.seed, schedule.steps.len(), args.shrink_budget);
    let shrunk = match shrink_schedule::<T>(schedule, options, args.shrink_budget) {
        Ok(shrunk) => shrunk,
        Err(error) => {
            eprintln!("error: shrink: {error}");
            // `--save-schedule` still gets the failing schedule, marked as not shrunk.
            let saved = args
                .save_schedule
                .as_deref()
                .is_none_or(|path| super::modes::save_schedule::<T>(path, schedule, ", not shrunk: the shrink failed"));
            return if saved { EXIT_FAIL } else { EXIT_BAD_INPUT };
        }
    };
    let wall = clock.now().saturating_sub(started);
    outln!("minimal schedule ({} steps, signature {}):", shrunk.steps_after, shrunk.signature);
    for (index, step) in shrunk.schedule.steps.iter().enumerate() {
        outln!("  #{index} {}", render_step(step));
    }
    outln!("config:");
    for line in shrunk.schedule.world.to_string().lines() {
        outln!("  {line}");
    }
    outln!("  {}: {}", T::NAME, T::describe(&shrunk.schedule.config));
    outln!("shrunk: {} -> {} steps", shrunk.steps_before, shrunk.steps_after);
    let fixpoint = match (shrunk.reached_fixpoint, shrunk.one_minimal) {
        (true, _) => "fixpoint reached (1-minimal)",
        (false, true) => "budget exhausted; 1-minimal by the final single-step pass",
        (false, false) => "budget exhausted; not shown 1-minimal",
    };
    outln!("reruns: {} ({fixpoint}), wall time: {:.2} s", shrunk.reruns, wall.as_secs_f64());
    let mut code = EXIT_FAIL;
    if let Some(path) = &args.save_schedule
        && !super::modes::save_schedule::<T>(path, &shrunk.schedule, ", the minimal schedule")
    {
        code = EXIT_BAD_INPUT;
    }
    let models = shrunk
        .validation
        .failure
        .as_ref()
        .map(|failure| crate::models::classify_failure::<T>(&shrunk.schedule, &failure.signature(), options));
    if let Some(name) = &args.save
        && let Err(error) = save_seed::<T>(context, name, &shrunk, models.as_ref())
    {
        eprintln!("error: --save: {error}");
        code = EXIT_BAD_INPUT;
    }
    outln!("confirmed by a fresh replay:");
    if let Some(report) = &models {
        outln!("{}", report.line());
        outln!("{}", report.evidence_line());
    }
    let validation = &shrunk.validation;
    if let Some(failure) = &validation.failure {
        out!("{}", failure.report());
    }
    outln!("digest: {}", validation.digest_hex());
    code
}

/// The directory `--save` writes target `T`'s seeds to: `$SIMULATOR_SEEDS_DIR`, else the command line's seeds
/// directory, then the target's `SEEDS_SUBDIR`.
fn seeds_dir<T: Target>(context: &Context<'_>) -> PathBuf {
    let root = std::env::var_os(SEEDS_DIR_ENV_VAR).map_or_else(|| context.cli.seeds_dir.clone(), PathBuf::from);
    if T::SEEDS_SUBDIR.is_empty() { root } else { root.join(T::SEEDS_SUBDIR) }
}

fn save_seed<T: Target>(
    context: &Context<'_>,
    name: &str,
    shrunk: &Shrunk<T>,
    models: Option<&crate::models::ModelReport>,
) -> Result<(), String> {
    let args = context.args;
    let adr = args.adr.clone().ok_or("--save needs --adr ADR-XXXX")?;
    let canary = args.canary.as_deref();
    let expect = if canary.is_some() || T::FINDINGS_EXPECT_FAIL {
        corpus::Expectation::Fail(shrunk.signature.clone())
    } else {
        corpus::Expectation::Pass
    };
    let description = args.description.clone().unwrap_or_else(|| {
        format!("{} found by seed {}, shrunk to {} steps", shrunk.signature, shrunk.schedule.seed, shrunk.steps_after)
    });
    let digest = matches!(expect, corpus::Expectation::Fail(_)).then(|| shrunk.validation.digest_hex());
    let (can_happen_on, cannot_on) = models.map(crate::models::ModelReport::names).unwrap_or_default();
    let (replay_fails_on, replay_differs_on) = models.map(crate::models::ModelReport::replay_names).unwrap_or_default();
    let seed = corpus::SeedFile {
        format_version: corpus::FORMAT_VERSION,
        name: name.to_string(),
        target: T::NAME.to_string(),
        seed: shrunk.schedule.seed,
        canary: canary.map(str::to_string),
        signature: shrunk.signature.clone(),
        expect,
        adr,
        description,
        // A seed that expects to fail pins this very run; one that expects `pass` will run differently once the
        // bug is fixed, so it records no digest (replay it after the fix and add the printed one to pin it).
        digest,
        reproduces_on: Vec::new(),
        not_on: Vec::new(),
        can_happen_on,
        cannot_on,
        replay_fails_on,
        replay_differs_on,
        schedule: serde_json::to_value(&shrunk.schedule).map_err(|error| error.to_string())?,
    };
    let text = seed.to_json();
    corpus::SeedFile::parse(std::path::Path::new(name), &text).map_err(|error| error.to_string())?;
    let dir = seeds_dir::<T>(context);
    let path = dir.join(format!("{name}.json"));
    RealEnv::new().create_dir_all(&dir).map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    write_file(&path, &text)?;
    outln!("saved: {}", path.display());
    outln!("replay: {} {}--replay {}", context.command(), context.selection(), path.display());
    let package = context.entry.package.map(|package| format!(" -p {package}")).unwrap_or_default();
    let features = context.test_features();
    outln!("test: cargo test{package}{features} --test seeds seed_{}", ident(name));
    Ok(())
}
