//! The swarm mode: many seeds in-process or in child processes, a progress bar, a summary (text or JSON).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use env::RealEnv;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{Args, Context, EXIT_FAIL, EXIT_PASS, bad_input, read_file};
use crate::runner::{Failure, PANIC_VERBOSE_ENV_VAR, RunOptions};
use crate::schedule::ScheduleOf;
use crate::swarm::{SwarmOptions, SwarmSummary, required_for_seed, run_swarm, seed_digest};
use crate::target::{FailureKind, Target, probe_counter};

/// The most bytes of a child's stderr a `no_abort` failure quotes.
const CHILD_STDERR_BYTES_MAX: usize = 2000;

fn progress_bar(seeds: u64) -> ProgressBar {
    let target =
        if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
    let bar = ProgressBar::with_draw_target(Some(seeds), target);
    let style = ProgressStyle::with_template("{bar:40} {pos}/{len} seeds, {msg} [{elapsed_precise}, eta {eta}]")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// Print a line above the progress bar (or plainly when the bar is hidden, e.g. output to a file).
fn print_line(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        println!("{line}");
    } else {
        bar.println(line);
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
    };
    let seeds_total = options.shard_seeds().count() as u64;
    let bar = progress_bar(seeds_total);
    let mut failures = 0u64;
    let mut first_failing: Option<ScheduleOf<T>> = None;
    let mut on_failure = |failure: &Failure, bar: &ProgressBar| {
        failures += 1;
        let line = format!(
            "FAIL seed={} step={} invariant={} ({})",
            failure.seed, failure.step, failure.invariant, failure.kind
        );
        print_line(bar, line);
        bar.set_message(format!("{failures} failed"));
    };
    // A one-seed swarm gains nothing from a child process (and each child is one).
    let forced = T::PARALLELISM == crate::target::SeedParallelism::ChildProcesses;
    let isolate = seeds_total > 1 && (args.isolate || forced || T::isolate_by_default(args.profile()));
    let summary = if isolate {
        isolated_swarm::<T>(context, &options, &bar, |failure| on_failure(failure, &bar))
    } else {
        run_swarm::<T>(&options, |outcome| {
            if let Some(failure) = &outcome.failure {
                if first_failing.is_none() {
                    first_failing = Some(outcome.schedule.clone());
                }
                on_failure(failure, &bar);
            }
            bar.inc(1);
        })
    };
    bar.finish_and_clear();
    let code = print_summary(args, &summary, |summary, missing| print_swarm_text(context, summary, missing));
    if args.shrink
        && let Some(schedule) = &first_failing
    {
        return super::save::shrink_and_report::<T>(context, schedule, &options.run);
    }
    if args.shrink && isolate && !summary.failures.is_empty() {
        println!("shrink: an isolated swarm does not keep schedules; shrink one seed with --seed N --shrink");
    }
    code
}

/// Run each seed of the swarm as `<this binary> --target T --seeds N..N+1 --json` in a child process (`--jobs` of
/// them at once) and merge the summaries in seed order. A child that does not exit 0 or 1 with a summary (it
/// aborted) becomes a `no_abort` failure of its seed.
fn isolated_swarm<T: Target>(
    context: &Context<'_>,
    options: &SwarmOptions,
    bar: &ProgressBar,
    mut on_failure: impl FnMut(&Failure),
) -> SwarmSummary {
    let args = context.args;
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from(context.cli.program));
    let child = |seed: u64| {
        let mut command = std::process::Command::new(&exe);
        command.args(["--target", T::NAME, "--seeds", &format!("{seed}..{}", seed + 1), "--json", "--jobs", "1"]);
        command.args(["--steps", &args.steps.to_string()]);
        if let Some(profile) = &args.fault_profile {
            command.args(["--fault-profile", profile]);
        }
        if let Some(canary) = &args.canary {
            command.args(["--canary", canary]);
        }
        command.env(PANIC_VERBOSE_ENV_VAR, "1");
        child_summary::<T>(seed, &options.run, command.output())
    };
    let mut summary = SwarmSummary::for_target::<T>();
    let seeds: Vec<u64> = options.shard_seeds().collect();
    for batch in seeds.chunks(options.jobs.max(1) * crate::swarm::SEEDS_PER_JOB_BATCH_MAX) {
        for child in RealEnv::map_parallel(options.jobs, batch.to_vec(), child) {
            for failure in &child.failures {
                on_failure(failure);
            }
            summary.merge(&child);
            bar.inc(1);
            if options.stop_on_failure && !child.failures.is_empty() {
                return summary;
            }
        }
    }
    summary
}

/// The summary a child printed, or a `no_abort` failure when it printed none.
fn child_summary<T: Target>(
    seed: u64,
    run: &RunOptions,
    output: std::io::Result<std::process::Output>,
) -> SwarmSummary {
    let (status, stdout, stderr) = match output {
        Ok(output) => (format!("{}", output.status), output.stdout, output.stderr),
        Err(error) => (format!("could not start: {error}"), Vec::new(), Vec::new()),
    };
    let text = String::from_utf8_lossy(&stdout);
    let parsed = text.lines().last().and_then(|line| serde_json::from_str::<SwarmJson>(line).ok());
    if let Some(json) = parsed {
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
    let digest = seed_digest(seed, 0);
    let mut summary = SwarmSummary { seeds_run: 1, failures: vec![failure], digest, ..SwarmSummary::for_target::<T>() };
    summary.required.extend(required_for_seed::<T>(seed, run));
    summary
}

/// The `--json` summary: the swarm summary (its digest and declared probes included), the missing coverage and
/// the declared probes no seed hit, one object.
#[derive(serde::Serialize, serde::Deserialize)]
struct SwarmJson {
    #[serde(flatten)]
    summary: SwarmSummary,
    missing_coverage: Vec<String>,
    #[serde(default)]
    probes_never_hit: Vec<String>,
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

/// Print a summary as `--json` or text (`text` prints the body), then the digest; the exit code.
fn print_summary(args: &Args, summary: &SwarmSummary, text: impl FnOnce(&SwarmSummary, &[String])) -> u8 {
    let missing = missing_coverage(args, summary);
    let coverage_failed = args.requires_coverage() && !missing.is_empty();
    let code = if !summary.failures.is_empty() || coverage_failed { EXIT_FAIL } else { EXIT_PASS };
    if args.json {
        let probes_never_hit = summary.probes_never_hit();
        let json = SwarmJson { summary: summary.clone(), missing_coverage: missing, probes_never_hit };
        println!("{}", serde_json::to_string(&json).expect("a summary serializes"));
        return code;
    }
    text(summary, &missing);
    println!("digest: {:016x}", summary.digest);
    code
}

/// `merge FILE...`: fold shard summaries into one, printed as a swarm's.
pub(super) fn merge_mode(args: &Args, files: &[PathBuf]) -> u8 {
    let mut merged = SwarmSummary::default();
    for path in files {
        match read_shard(path) {
            Ok(shard) => merged.merge(&shard),
            Err(error) => return bad_input(&error),
        }
    }
    print_summary(args, &merged, |summary, missing| {
        print_counts(args, summary, missing);
        for failure in &summary.failures {
            let line = format!("{} (run with --seed {} to replay)", failure.invariant, failure.seed);
            println!("failed: seed={} step={} kind={} invariant={line}", failure.seed, failure.step, failure.kind);
        }
    })
}

/// One shard's `--json` summary (its last line).
fn read_shard(path: &Path) -> Result<SwarmSummary, String> {
    let text = read_file(path)?;
    let line = text.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or_default();
    serde_json::from_str::<SwarmJson>(line)
        .map(|json| json.summary)
        .map_err(|error| format!("{}: not a swarm --json summary: {error}", path.display()))
}

/// Seeds, coverage totals, probes and required coverage.
fn print_counts(args: &Args, summary: &SwarmSummary, missing: &[String]) {
    println!("seeds: run={} passed={} failed={}", summary.seeds_run, summary.seeds_passed, summary.failures.len());
    println!("coverage totals:");
    for (name, count) in &summary.coverage.counters {
        let required = if summary.required.contains(name) { " (required)" } else { "" };
        println!("  {name}: {count}{required}");
    }
    print_probes(summary);
    if args.requires_coverage() {
        if missing.is_empty() {
            let probes = if args.require_probes { summary.declared_probes.len() } else { 0 };
            println!("required coverage: all {} counters above zero", summary.required.len() + probes);
        } else {
            println!("MISSING coverage (required, zero): {}", missing.join(", "));
        }
    }
}

/// `probes: H of D hit`, then the declared probes no seed hit (and any probe hit that was not declared).
fn print_probes(summary: &SwarmSummary) {
    let undeclared = summary.probes_undeclared();
    if !undeclared.is_empty() {
        println!("probes hit but not declared by the target: {}", undeclared.join(", "));
    }
    if summary.declared_probes.is_empty() {
        return;
    }
    let never = summary.probes_never_hit();
    println!("probes: {} of {} hit", summary.declared_probes.len() - never.len(), summary.declared_probes.len());
    if !never.is_empty() {
        println!("never hit: {}", never.join(", "));
    }
}

fn print_swarm_text(context: &Context<'_>, summary: &SwarmSummary, missing: &[String]) {
    let args = context.args;
    print_counts(args, summary, missing);
    for failure in &summary.failures {
        println!(
            "failed: seed={} step={} invariant={} kind={} replay: {} {}--seed {} --steps {}",
            failure.seed,
            failure.step,
            failure.invariant,
            failure.kind,
            context.command(),
            context.selection(),
            failure.seed,
            args.steps,
        );
    }
    if let Some(first) = summary.failures.first() {
        println!("first failure: seed={} step={} invariant={}", first.seed, first.step, first.invariant);
    }
}
