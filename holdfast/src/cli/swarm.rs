//! The swarm mode: many seeds in-process or in child processes, a progress bar, a summary (text or JSON).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use env::{ChildOutput, RealEnv};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Deserialize;

use super::{Args, Context, EXIT_FAIL, EXIT_PASS, bad_input, read_file};
use crate::runner::{Failure, PANIC_VERBOSE_ENV_VAR, RunOptions};
use crate::schedule::ScheduleOf;
use crate::swarm::{STUCK_INVARIANT, SwarmOptions, SwarmSummary, required_for_seed, run_swarm, seed_digest};
use crate::target::{FailureKind, Target, probe_counter};

/// The most bytes of a child's stderr a `no_abort` failure quotes.
const CHILD_STDERR_BYTES_MAX: usize = 2000;
/// The most characters of a panic's message the failure list prints under each panic.
const PANIC_MESSAGE_CHARS_MAX: usize = 400;

fn progress_bar(seeds: u64) -> ProgressBar {
    let target =
        if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
    let bar = ProgressBar::with_draw_target(Some(seeds), target);
    let style = ProgressStyle::with_template("{bar:40} {pos}/{len} seeds, {msg} [{elapsed_precise}, eta {eta}]")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// Where the progress bar is hidden (stderr is not a terminal), a plain progress line on stderr when at least
/// `interval` has passed since the last one (`last`: the elapsed time it was printed at), so a CI log of a deep
/// swarm shows it alive.
fn report_progress(bar: &ProgressBar, failures: u64, interval: Duration, last: &Cell<Option<Duration>>) {
    let elapsed = bar.elapsed();
    let due = last.get().is_none_or(|last| elapsed.saturating_sub(last) >= interval);
    if !bar.is_hidden() || !due {
        return;
    }
    last.set(Some(elapsed));
    let total = bar.length().unwrap_or(0);
    eprintln!("swarm progress: {}/{total} seeds, {failures} failed, {} s", bar.position(), elapsed.as_secs());
}

/// Print a line above the progress bar (or plainly when the bar is hidden, e.g. output to a file): on stderr
/// under `--json`, whose stdout is the one summary object (ADR-0097).
fn print_line(bar: &ProgressBar, json: bool, line: String) {
    if !bar.is_hidden() {
        bar.println(line);
    } else if json {
        eprintln!("{line}");
    } else {
        outln!("{line}");
    }
}

pub(super) fn swarm_mode<T: Target>(context: &Context<'_>) -> u8 {
    let args = context.args;
    let seeds = args.seeds.clone().expect("swarm mode has seeds");
    let options = SwarmOptions {
        seeds,
        shard: args.shard,
        stop_on_failure: args.stop_on_failure,
        jobs: args.jobs(),
        run: args.run_options(),
        seed_timeout: args.seed_timeout(),
    };
    let seeds_total = options.shard_seeds().count() as u64;
    let bar = progress_bar(seeds_total);
    let failures = Cell::new(0u64);
    let last_progress = Cell::new(None);
    let interval = Duration::from_secs(args.progress_seconds);
    let tick = || {
        bar.inc(1);
        report_progress(&bar, failures.get(), interval, &last_progress);
    };
    let mut first_failing: Option<ScheduleOf<T>> = None;
    let on_failure = |failure: &Failure, bar: &ProgressBar| {
        failures.set(failures.get() + 1);
        let line = format!(
            "FAIL seed={} step={} invariant={} ({})",
            failure.seed, failure.step, failure.invariant, failure.kind
        );
        print_line(bar, args.json, line);
        bar.set_message(format!("{} failed", failures.get()));
    };
    // A one-seed swarm gains nothing from a child process (and each child is one).
    let forced = T::PARALLELISM == crate::target::SeedParallelism::ChildProcesses;
    let isolate = seeds_total > 1 && (args.isolate || forced || T::isolate_by_default(args.profile()));
    let summary = if isolate {
        isolated_swarm::<T>(context, &options, &tick, |failure| on_failure(failure, &bar))
    } else {
        run_swarm::<T>(&options, |outcome| {
            if let Some(failure) = &outcome.failure {
                // A stuck seed's schedule has no steps: there is nothing to shrink.
                if failure.invariant != STUCK_INVARIANT
                    && first_failing.as_ref().is_none_or(|kept| shorter(&outcome.schedule, kept))
                {
                    first_failing = Some(outcome.schedule.clone());
                }
                on_failure(failure, &bar);
            }
            tick();
        })
    };
    bar.finish_and_clear();
    if summary.seeds_run < seeds_total && !args.stop_on_failure {
        let stuck = summary.failures.iter().filter(|failure| failure.invariant == STUCK_INVARIANT).count();
        eprintln!(
            "swarm stopped after {stuck} stuck seeds (their threads still run): {} of {seeds_total} seeds not run",
            seeds_total - summary.seeds_run
        );
    }
    let replay = replay_commands(context, &summary);
    let code = print_summary(args, &summary, &replay, |summary, missing| print_counts(args, summary, missing));
    if args.shrink
        && let Some(schedule) = &first_failing
    {
        return super::save::shrink_and_report::<T>(context, schedule, &options.run);
    }
    if args.shrink && isolate && !summary.failures.is_empty() {
        outln!("shrink: an isolated swarm does not keep schedules; shrink one seed with --seed N --shrink");
    } else if args.shrink && first_failing.is_none() && !summary.failures.is_empty() {
        outln!("shrink: a stuck seed never finished, so it has no schedule to shrink");
    }
    code
}

/// True when `schedule` ran fewer steps than `kept`, or as many with a lower seed: the failing run a swarm's
/// `--shrink` starts from, the same whatever order its jobs finish in.
fn shorter<C, O>(schedule: &crate::Schedule<C, O>, kept: &crate::Schedule<C, O>) -> bool {
    (schedule.steps.len(), schedule.seed) < (kept.steps.len(), kept.seed)
}

/// The command that replays `seed` of this run: `<command> <selection>--seed N --steps S`, with the
/// `--seed-timeout` when the run set one.
pub(super) fn replay_command(context: &Context<'_>, seed: u64) -> String {
    let args = context.args;
    let timeout = args.seed_timeout.map(|seconds| format!(" --seed-timeout {seconds}")).unwrap_or_default();
    format!("{} {}--seed {seed} --steps {}{timeout}", context.command(), context.selection(), args.steps)
}

/// Each failing seed's replay command.
fn replay_commands(context: &Context<'_>, summary: &SwarmSummary) -> BTreeMap<u64, String> {
    summary.failures.iter().map(|failure| (failure.seed, replay_command(context, failure.seed))).collect()
}

/// Run each seed of the swarm as `<this binary> --target T --seeds N..N+1 --json` in a child process (`--jobs` of
/// them at once) and merge the summaries in seed order. A child that does not exit 0 or 1 with a summary (it
/// aborted) becomes a `no_abort` failure of its seed; a child still running after `--seed-timeout` is killed
/// and becomes a `liveness.stuck` failure (ADR-0098).
fn isolated_swarm<T: Target>(
    context: &Context<'_>,
    options: &SwarmOptions,
    tick: &dyn Fn(),
    mut on_failure: impl FnMut(&Failure),
) -> SwarmSummary {
    let args = context.args;
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from(context.cli.program));
    let child = |seed: u64| {
        let mut command = std::process::Command::new(&exe);
        command.args(["--target", T::NAME, "--seeds", &format!("{seed}..{}", seed + 1), "--json", "--jobs", "1"]);
        command.args(["--steps", &args.steps.to_string()]);
        // The parent's watchdog kills the child; the child runs none of its own.
        command.args(["--seed-timeout", "0"]);
        for (flag, value) in args.run_flags() {
            command.args([flag, value]);
        }
        // Not run flags (they change no run), but the summary reports them.
        if let Some(device) = &args.device {
            command.args(["--device", device]);
        }
        if args.cost_report {
            command.arg("--cost-report");
        }
        command.env(PANIC_VERBOSE_ENV_VAR, "1");
        let output = RealEnv::output_within(&mut command, options.seed_timeout);
        child_summary::<T>(seed, &options.run, options.seed_timeout, output)
    };
    let mut summary = SwarmSummary::for_target::<T>();
    let seeds: Vec<u64> = options.shard_seeds().collect();
    for batch in seeds.chunks(options.jobs.max(1) * crate::swarm::SEEDS_PER_JOB_BATCH_MAX) {
        for child in RealEnv::map_parallel(options.jobs, batch.to_vec(), child) {
            for failure in &child.failures {
                on_failure(failure);
            }
            summary.merge(&child);
            tick();
            if options.stop_on_failure && !child.failures.is_empty() {
                return summary;
            }
        }
    }
    summary
}

/// The summary a child printed; a `liveness.stuck` failure when it was killed after `timeout`, a `no_abort`
/// failure when it exited without a summary.
fn child_summary<T: Target>(
    seed: u64,
    run: &RunOptions,
    timeout: Option<Duration>,
    output: std::io::Result<ChildOutput>,
) -> SwarmSummary {
    let (status, stdout, stderr) = match output {
        Ok(ChildOutput { status: None, .. }) => {
            let timeout = timeout.expect("only a child with a timeout is killed");
            let mut failure = crate::swarm::stuck_failure(seed, &crate::runner::Progress::default(), timeout);
            failure.phase = "process".into();
            failure.actual = "the child process still ran at the timeout and was killed".into();
            return failed_child::<T>(failure, run);
        }
        Ok(output) => {
            (output.status.map(|status| status.to_string()).unwrap_or_default(), output.stdout, output.stderr)
        }
        Err(error) => (format!("could not start: {error}"), Vec::new(), Vec::new()),
    };
    let text = String::from_utf8_lossy(&stdout);
    if let Ok(json) = SwarmJson::parse(text.trim()) {
        return json.summary;
    }
    let stderr = String::from_utf8_lossy(&stderr);
    let tail: String =
        stderr.chars().rev().take(CHILD_STDERR_BYTES_MAX).collect::<Vec<char>>().into_iter().rev().collect();
    let failure = Failure {
        seed,
        step: 0,
        phase: "process".into(),
        invariant: "no_abort".into(),
        kind: FailureKind::Panic,
        expected: "the run returns (exit 0 or 1 with a summary)".into(),
        actual: format!("{status}; stderr ends: {}", tail.trim()),
        evidence: None,
        last_steps: Vec::new(),
    };
    failed_child::<T>(failure, run)
}

/// The one-seed summary of a child process that failed without a summary of its own.
fn failed_child<T: Target>(failure: Failure, run: &RunOptions) -> SwarmSummary {
    let seed = failure.seed;
    let digest = seed_digest(seed, 0);
    let mut summary = SwarmSummary { seeds_run: 1, failures: vec![failure], digest, ..SwarmSummary::for_target::<T>() };
    summary.required.extend(required_for_seed::<T>(seed, run));
    summary
}

/// The `--json` summary: the swarm summary (its digest and declared probes included), the missing coverage and
/// the declared probes no seed hit, one object.
#[derive(serde::Serialize)]
struct SwarmJson {
    #[serde(flatten)]
    summary: SwarmSummary,
    #[serde(flatten)]
    extras: SwarmJsonExtras,
}

/// The fields of a `--json` summary beside the swarm summary's own.
#[derive(serde::Serialize, serde::Deserialize)]
struct SwarmJsonExtras {
    missing_coverage: Vec<String>,
    #[serde(default)]
    probes_never_hit: Vec<String>,
    /// Each failing seed's replay command, by seed (ADR-0097).
    #[serde(default)]
    replay_commands: BTreeMap<u64, String>,
}

impl SwarmJson {
    /// Read a `--json` summary back. Each part is read from the parsed object on its own: serde's `flatten`
    /// cannot read integer map keys (the cost report's histogram buckets) back from JSON's string keys, so a
    /// derived `Deserialize` refused every summary with a cost report (ADR-0201).
    fn parse(text: &str) -> serde_json::Result<SwarmJson> {
        let value: serde_json::Value = serde_json::from_str(text)?;
        let extras = SwarmJsonExtras::deserialize(&value)?;
        Ok(SwarmJson { summary: SwarmSummary::deserialize(&value)?, extras })
    }
}

/// Required counters at zero: the configurations' (`SwarmSummary::missing_coverage`), and with `--require-probes`
/// the counters of declared probes never hit.
fn missing_coverage(args: &Args, summary: &SwarmSummary) -> Vec<String> {
    let mut missing = summary.missing_coverage();
    if args.require_probes {
        missing.extend(summary.probes_never_hit().iter().map(|name| probe_counter(name)));
    }
    missing
}

/// Print a summary as `--json` (one object, the only thing on stdout) or text (`text` prints the counts, then
/// every failure with its replay command), then the digest; the exit code.
fn print_summary(
    args: &Args,
    summary: &SwarmSummary,
    replay: &BTreeMap<u64, String>,
    text: impl FnOnce(&SwarmSummary, &[String]),
) -> u8 {
    let missing = missing_coverage(args, summary);
    let coverage_failed = args.requires_coverage() && !missing.is_empty();
    let code = if !summary.failures.is_empty() || coverage_failed { EXIT_FAIL } else { EXIT_PASS };
    if args.json {
        let probes_never_hit = summary.probes_never_hit();
        let extras = SwarmJsonExtras { missing_coverage: missing, probes_never_hit, replay_commands: replay.clone() };
        let json = SwarmJson { summary: summary.clone(), extras };
        outln!("{}", serde_json::to_string(&json).expect("a summary serializes"));
        return code;
    }
    text(summary, &missing);
    for failure in &summary.failures {
        let command = replay.get(&failure.seed).cloned().unwrap_or_else(|| format!("--seed {}", failure.seed));
        outln!(
            "failed: seed={} step={} invariant={} kind={} replay: {command}",
            failure.seed,
            failure.step,
            failure.invariant,
            failure.kind
        );
        if failure.kind == FailureKind::Panic {
            // The panic's message (a child's, under --isolate): the invariant alone says nothing (ADR-0169).
            let message: String = failure.actual.chars().take(PANIC_MESSAGE_CHARS_MAX).collect();
            outln!("  message: {message}");
        }
    }
    if let Some(first) = summary.failures.first() {
        outln!("first failure: seed={} step={} invariant={}", first.seed, first.step, first.invariant);
    }
    outln!("digest: {:016x}", summary.digest);
    code
}

/// `merge FILE...`: fold shard summaries (and their replay commands) into one, printed as a swarm's.
pub(super) fn merge_mode(args: &Args, files: &[PathBuf]) -> u8 {
    let mut merged = SwarmSummary::default();
    let mut replay = BTreeMap::new();
    for path in files {
        match read_shard(path) {
            Ok(shard) => {
                merged.merge(&shard.summary);
                replay.extend(shard.extras.replay_commands);
            }
            Err(error) => return bad_input(&error),
        }
    }
    print_summary(args, &merged, &replay, |summary, missing| print_counts(args, summary, missing))
}

/// One shard's `--json` summary: the whole file is one JSON object (ADR-0097).
fn read_shard(path: &Path) -> Result<SwarmJson, String> {
    let text = read_file(path)?;
    SwarmJson::parse(text.trim())
        .map_err(|error| format!("{}: not a swarm --json summary (one JSON object): {error}", path.display()))
}

/// Seeds, coverage totals, probes and required coverage.
fn print_counts(args: &Args, summary: &SwarmSummary, missing: &[String]) {
    outln!("seeds: run={} passed={} failed={}", summary.seeds_run, summary.seeds_passed, summary.failures.len());
    outln!("coverage totals:");
    for (name, count) in &summary.coverage.counters {
        let required = if summary.required.contains(name) { " (required)" } else { "" };
        outln!("  {name}: {count}{required}");
    }
    print_probes(summary);
    if !summary.cost_report.is_empty() {
        outln!("{}", summary.cost_report.render().trim_end());
    }
    if args.requires_coverage() {
        if missing.is_empty() {
            let probes = if args.require_probes { summary.declared_probes.len() } else { 0 };
            outln!("required coverage: all {} counters above zero", summary.required.len() + probes);
        } else {
            outln!("MISSING coverage (required, zero): {}", missing.join(", "));
        }
    }
}

/// `probes: H of D hit`, then the declared probes no seed hit (and any probe hit that was not declared).
fn print_probes(summary: &SwarmSummary) {
    let undeclared = summary.probes_undeclared();
    if !undeclared.is_empty() {
        outln!("probes hit but not declared by the target: {}", undeclared.join(", "));
    }
    if summary.declared_probes.is_empty() {
        return;
    }
    let never = summary.probes_never_hit();
    outln!("probes: {} of {} hit", summary.declared_probes.len() - never.len(), summary.declared_probes.len());
    if !never.is_empty() {
        outln!("never hit: {}", never.join(", "));
    }
}
