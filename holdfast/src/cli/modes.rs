//! One function per mode: a single seed, a replay, a determinism check, the generic benchmark.

use std::path::Path;

use super::{Context, EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS, bad_input, read_file, write_file};
use crate::runner::{Outcome, OutcomeOf, RunOptions, check_determinism, configure_for, run_schedule, run_target};
use crate::schedule::{ScheduleOf, parse_schedule, parse_schedule_value};
use crate::target::Target;

/// What the command line asks for.
enum Mode {
    Bench,
    Replay,
    Swarm,
    Determinism(u64),
    Single(u64),
}

impl Mode {
    fn from_args(args: &super::Args) -> Self {
        if args.bench {
            Mode::Bench
        } else if args.replay.is_some() {
            Mode::Replay
        } else if args.seeds.is_some() {
            Mode::Swarm
        } else if args.check_determinism {
            Mode::Determinism(args.seed.unwrap_or(0))
        } else {
            Mode::Single(args.seed.unwrap_or(0))
        }
    }
}

/// Run the mode the arguments ask for against `T`.
pub(super) fn dispatch<T: Target>(context: &Context<'_>) -> u8 {
    match Mode::from_args(context.args) {
        Mode::Bench => unreachable!("--bench is dispatched before a target is chosen"),
        Mode::Replay => replay_mode::<T>(context),
        Mode::Swarm => super::swarm::swarm_mode::<T>(context),
        Mode::Determinism(seed) => determinism_mode::<T>(context, seed),
        Mode::Single(seed) => single_mode::<T>(context, seed),
    }
}

/// The configuration of a run as printed at its start.
fn describe<T: Target>(schedule: &ScheduleOf<T>) -> String {
    format!("{}\n{}: {}", schedule.world, T::NAME, T::describe(&schedule.config))
}

/// Write the trace and schedule files asked for. False (after printing why) on an IO error. When `shrinks`,
/// the run's failure is about to be shrunk and `--save-schedule` gets the minimal schedule instead (save.rs).
fn write_outputs<T: Target>(context: &Context<'_>, outcome: &OutcomeOf<T>, shrinks: bool) -> bool {
    if let Some(path) = &context.args.trace {
        let mut text = outcome.trace.join("\n");
        text.push('\n');
        if let Err(error) = write_file(path, &text) {
            eprintln!("error: {error}");
            return false;
        }
    }
    if let Some(path) = context.args.save_schedule.as_deref().filter(|_| !shrinks) {
        return save_schedule::<T>(path, &outcome.schedule, "");
    }
    true
}

/// Write `schedule` to `path` for `--save-schedule` and say so (`note` follows the step count). False (after
/// printing why) on an IO error.
pub(super) fn save_schedule<T: Target>(path: &Path, schedule: &ScheduleOf<T>, note: &str) -> bool {
    if let Err(error) = write_file(path, &schedule.to_json()) {
        eprintln!("error: {error}");
        return false;
    }
    outln!("schedule saved: {} ({} steps{note})", path.display(), schedule.steps.len());
    true
}

/// After a failure: the persistence models it can happen on and the replays' evidence (ADR-0173), as the two
/// lines to print.
fn models_line<T: Target>(outcome: &OutcomeOf<T>, options: &RunOptions) -> Option<String> {
    let failure = outcome.failure.as_ref()?;
    let report = crate::models::classify_failure::<T>(&outcome.schedule, &failure.signature(), options);
    Some(format!("{}\n{}", report.line(), report.evidence_line()))
}

/// With `--export-image DIR`, write the run's last crash image. False (after printing why) on an error.
fn write_image<C, O>(context: &Context<'_>, outcome: &Outcome<C, O>) -> bool {
    let Some(dir) = &context.args.export_image else { return true };
    match super::export::export_image(dir, outcome) {
        Ok(message) => {
            outln!("export-image: {message}");
            true
        }
        Err(error) => {
            eprintln!("error: {error}");
            false
        }
    }
}

/// With `--dot FILE`, write the target's rendering of the failure.
fn write_dot<T: Target>(failure: &crate::Failure, dot: Option<&Path>) {
    let Some(path) = dot else { return };
    match T::render_failure(failure) {
        Some(rendering) => match write_file(path, &rendering.text) {
            Ok(()) => outln!("dot: wrote {} to {}", rendering.what, path.display()),
            Err(error) => eprintln!("dot: {error}"),
        },
        None => {
            outln!("dot: target {} has no drawing of this failure; nothing written to {}", T::NAME, path.display())
        }
    }
}

/// Print a run's result (with `models`, the line naming the persistence models a failure reproduces on, before
/// the digest, which stays the last line); returns its exit code.
pub(super) fn report_run<T: Target, C, O>(
    outcome: &Outcome<C, O>,
    replay_command: &str,
    dot: Option<&Path>,
    models: Option<&str>,
) -> u8 {
    outln!("steps: {} (work steps {})", outcome.steps_run, outcome.work_steps);
    let counters: Vec<String> =
        outcome.coverage.counters.iter().map(|(name, count)| format!("{name}={count}")).collect();
    outln!("coverage: {}", counters.join(" "));
    let code = match &outcome.failure {
        None => {
            outln!("result: pass");
            EXIT_PASS
        }
        Some(failure) => {
            out!("{}", failure.report());
            outln!("replay: {replay_command}");
            write_dot::<T>(failure, dot);
            outln!("first failure: seed={} step={} invariant={}", failure.seed, failure.step, failure.invariant);
            if let Some(line) = models {
                outln!("{line}");
            }
            EXIT_FAIL
        }
    };
    outln!("digest: {}", outcome.digest_hex());
    code
}

fn single_mode<T: Target>(context: &Context<'_>, seed: u64) -> u8 {
    let args = context.args;
    let options = args.run_options();
    let (world, config) = match configure_for::<T>(seed, &options) {
        Ok(configured) => configured,
        Err(error) => return bad_input(&error),
    };
    outln!("seed: {seed} (0x{seed:x}) target: {} steps: {}", T::NAME, args.steps);
    outln!("{}", describe::<T>(&crate::Schedule::new(T::NAME, seed, world, config)));
    let outcome = match args.seed_timeout() {
        None => run_target::<T>(seed, &options),
        // Under the watchdog (ADR-0098): the seed runs on a thread of its own, abandoned if it gets stuck.
        Some(timeout) => crate::swarm::watched_outcomes::<T>(1, vec![seed], &options, timeout, 1)
            .pop()
            .flatten()
            .expect("one seed, run or stuck"),
    };
    let stuck = outcome.failure.as_ref().is_some_and(|failure| failure.invariant == crate::swarm::STUCK_INVARIANT);
    let shrinks = args.shrink && !outcome.passed() && !stuck;
    if !write_outputs::<T>(context, &outcome, shrinks) || !write_image(context, &outcome) {
        return EXIT_BAD_INPUT;
    }
    let command = super::swarm::replay_command(context, seed);
    // After --shrink the minimal schedule is labelled instead (save.rs); a stuck seed is not replayed under the
    // other models (each replay could get stuck the same way).
    let models = if args.shrink || stuck { None } else { models_line::<T>(&outcome, &options) };
    let code = report_run::<T, _, _>(&outcome, &command, args.dot.as_deref(), models.as_deref());
    if args.shrink && stuck {
        outln!("shrink: a stuck seed never finished, so it has no schedule to shrink");
        return code;
    }
    if shrinks {
        return super::save::shrink_and_report::<T>(context, &outcome.schedule, &options);
    }
    code
}

/// The target a replay file names (a seed file's `target`, or a bare schedule's), when it can be read: `--replay`
/// without `--target` runs that one (ADR-0171). `None` leaves the choice to the default (the load then says why).
pub(super) fn replay_target(path: &Path) -> Option<String> {
    let text = read_file(path).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value.get("target").and_then(serde_json::Value::as_str).map(str::to_string)
}

/// Is this JSON value a seed file (`seeds/*.json`) rather than a bare schedule? Decided by its fields.
fn is_seed_file(value: &serde_json::Value) -> bool {
    value.get("schedule").is_some_and(serde_json::Value::is_object) && value.get("expect").is_some()
}

/// A replayable file: a bare schedule, or a seed file's schedule with its canary and expectation.
fn load_replay<T: Target>(path: &Path, text: &str) -> Result<(ScheduleOf<T>, Option<corpus::SeedFile>), String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|error| format!("{}: not JSON: {error}", path.display()))?;
    if !is_seed_file(&value) {
        let schedule = parse_schedule::<T>(text).map_err(|error| format!("{}: {error}", path.display()))?;
        return Ok((schedule, None));
    }
    let seed = corpus::SeedFile::parse(path, text).map_err(|error| error.to_string())?;
    if seed.target != T::NAME {
        // Without --target the file's own target runs (`replay_target`): only a conflicting flag gets here.
        return Err(format!(
            "{}: seed file for target {:?}, but --target {} (leave --target out: the file names its target)",
            path.display(),
            seed.target,
            T::NAME
        ));
    }
    let schedule = parse_schedule_value::<T>(seed.schedule.clone())
        .map_err(|error| format!("{}: field `schedule`: {error}", path.display()))?;
    Ok((schedule, Some(seed)))
}

fn replay_mode<T: Target>(context: &Context<'_>) -> u8 {
    let args = context.args;
    let path = args.replay.as_deref().expect("replay mode has a file");
    let loaded = read_file(path).and_then(|text| load_replay::<T>(path, &text));
    let (mut schedule, seed_file) = match loaded {
        Ok(loaded) => loaded,
        Err(error) => return bad_input(&error),
    };
    let mut options = args.run_options();
    if args.persistence.is_some() || args.sector_size.is_some() {
        // Replay (and shrink) under another model: the parts of the schedule's own that a flag names are
        // replaced (ADR-0112).
        schedule.world.disk = options.disk_over(&schedule.world.disk);
        outln!("disk model replaced: {}", schedule.world.disk);
    }
    if let Some(seed) = &seed_file {
        if let Some(name) = &seed.canary {
            if args.canary.as_ref().is_some_and(|flag| flag != name) {
                return bad_input(&format!("{}: the seed file's canary is {name}, not --canary", path.display()));
            }
            if let Err(error) = super::checks::check_canary(context.cli, context.entry, name) {
                return bad_input(&format!("{}: {error}", path.display()));
            }
            options.canary = Some(name.clone());
        }
        let expect = match &seed.expect {
            corpus::Expectation::Pass => "pass".to_string(),
            corpus::Expectation::Fail(signature) => format!("fail with {signature}"),
        };
        outln!("seed file: {} ({}): expects {expect}", seed.name, seed.adr);
        outln!("description: {}", seed.description);
    }
    outln!("replay: {} seed: {} steps: {}", path.display(), schedule.seed, schedule.steps.len());
    outln!("{}", describe::<T>(&schedule));
    let outcome = run_schedule::<T>(&schedule, &options);
    let shrinks = args.shrink && !outcome.passed();
    if !write_outputs::<T>(context, &outcome, shrinks) || !write_image(context, &outcome) {
        return EXIT_BAD_INPUT;
    }
    let command = format!("{} {}--replay {}", context.command(), context.selection(), path.display());
    // After --shrink the minimal schedule is labelled instead (save.rs).
    let models = if args.shrink { None } else { models_line::<T>(&outcome, &options) };
    let code = report_run::<T, _, _>(&outcome, &command, args.dot.as_deref(), models.as_deref());
    if shrinks {
        return super::save::shrink_and_report::<T>(context, &outcome.schedule, &options);
    }
    code
}

fn determinism_mode<T: Target>(context: &Context<'_>, seed: u64) -> u8 {
    let options = RunOptions { record_step_digests: true, ..context.args.run_options() };
    let mut digest = 0;
    let mut failures = Vec::new();
    let result = check_determinism(|| {
        let outcome = run_target::<T>(seed, &options);
        digest = outcome.digest;
        failures.push(outcome.failure.clone());
        outcome
    });
    let mut code = match result {
        Ok(steps) => {
            outln!("determinism: ok (seed {seed}, {steps} steps, two runs identical)");
            EXIT_PASS
        }
        Err((step, first, second)) => {
            outln!("determinism: DIVERGED at step {step} (digest {first:016x} then {second:016x})");
            EXIT_FAIL
        }
    };
    // Identical runs can both fail: say so, and with what (ADR-0171).
    for (run, failure) in ["first", "second"].iter().zip(&failures) {
        if let Some(failure) = failure {
            outln!(
                "{run} run failed: {} ({}) at step {} phase {}: {}",
                failure.invariant,
                failure.kind,
                failure.step,
                failure.phase,
                failure.actual
            );
            code = EXIT_FAIL;
        }
    }
    outln!("digest: {digest:016x}");
    code
}
