//! The swarm mode: many seeds in-process or in child processes, a progress bar, a summary (text or JSON).

use std::hash::Hasher;
use std::io::IsTerminal;
use std::path::PathBuf;

use env::StableHasher;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{Context, EXIT_FAIL, EXIT_PASS};
use crate::runner::{Failure, PANIC_VERBOSE_ENV_VAR, RunOptions};
use crate::schedule::ScheduleOf;
use crate::swarm::{SwarmOptions, SwarmSummary, required_for_seed, run_swarm};
use crate::target::{FailureKind, Target};

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
    let options =
        SwarmOptions { seeds, shard: args.shard, stop_on_failure: args.stop_on_failure, run: args.run_options() };
    let seeds_total = options.shard_seeds().count() as u64;
    let bar = progress_bar(seeds_total);
    let mut failures = 0u64;
    let mut digests = StableHasher::new();
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
    let isolate = seeds_total > 1 && (args.isolate || T::isolate_by_default(args.profile()));
    let summary = if isolate {
        isolated_swarm::<T>(context, &options, &bar, &mut digests, |failure| on_failure(failure, &bar))
    } else {
        run_swarm::<T>(&options, |outcome| {
            digests.write_u64(outcome.seed);
            digests.write_u64(outcome.digest);
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
    let digest = digests.finish();
    let missing = summary.missing_coverage();
    let coverage_failed = args.require_coverage && !missing.is_empty();
    let code = if !summary.failures.is_empty() || coverage_failed { EXIT_FAIL } else { EXIT_PASS };
    if args.json {
        print_swarm_json(&summary, &missing, digest);
        return code;
    }
    print_swarm_text(context, &summary, &missing);
    println!("digest: {digest:016x}");
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

/// Run each seed of the swarm as `<this binary> --target T --seeds N..N+1 --json` in a child process and merge
/// the summaries. A child that does not exit 0 or 1 with a summary (it aborted) becomes a `no_abort` failure.
fn isolated_swarm<T: Target>(
    context: &Context<'_>,
    options: &SwarmOptions,
    bar: &ProgressBar,
    digests: &mut StableHasher,
    mut on_failure: impl FnMut(&Failure),
) -> SwarmSummary {
    let args = context.args;
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from(context.cli.program));
    let mut summary = SwarmSummary::default();
    for seed in options.shard_seeds() {
        let mut command = std::process::Command::new(&exe);
        command.args(["--target", T::NAME, "--seeds", &format!("{seed}..{}", seed + 1), "--json"]);
        command.args(["--steps", &args.steps.to_string()]);
        if let Some(profile) = &args.fault_profile {
            command.args(["--fault-profile", profile]);
        }
        if let Some(canary) = &args.canary {
            command.args(["--canary", canary]);
        }
        command.env(PANIC_VERBOSE_ENV_VAR, "1");
        let child = child_summary::<T>(seed, &options.run, command.output());
        digests.write_u64(seed);
        digests.write_u64(child.1);
        for failure in &child.0.failures {
            on_failure(failure);
        }
        summary.merge(&child.0);
        bar.inc(1);
        if options.stop_on_failure && !child.0.failures.is_empty() {
            break;
        }
    }
    summary
}

/// The summary (and digest) a child printed, or a `no_abort` failure when it printed none.
fn child_summary<T: Target>(
    seed: u64,
    run: &RunOptions,
    output: std::io::Result<std::process::Output>,
) -> (SwarmSummary, u64) {
    let (status, stdout, stderr) = match output {
        Ok(output) => (format!("{}", output.status), output.stdout, output.stderr),
        Err(error) => (format!("could not start: {error}"), Vec::new(), Vec::new()),
    };
    let text = String::from_utf8_lossy(&stdout);
    let parsed = text.lines().last().and_then(|line| serde_json::from_str::<SwarmJson>(line).ok());
    if let Some(json) = parsed {
        return (json.summary, u64::from_str_radix(&json.digest, 16).unwrap_or(0));
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
    let mut summary = SwarmSummary { seeds_run: 1, failures: vec![failure], ..SwarmSummary::default() };
    summary.required.extend(required_for_seed::<T>(seed, run));
    (summary, 0)
}

/// The `--json` summary: the swarm summary, the missing coverage and the digest, one object.
#[derive(serde::Serialize, serde::Deserialize)]
struct SwarmJson {
    #[serde(flatten)]
    summary: SwarmSummary,
    missing_coverage: Vec<String>,
    digest: String,
}

fn print_swarm_json(summary: &SwarmSummary, missing: &[String], digest: u64) {
    let json =
        SwarmJson { summary: summary.clone(), missing_coverage: missing.to_vec(), digest: format!("{digest:016x}") };
    println!("{}", serde_json::to_string(&json).expect("a summary serializes"));
}

fn print_swarm_text(context: &Context<'_>, summary: &SwarmSummary, missing: &[String]) {
    let args = context.args;
    println!("seeds: run={} passed={} failed={}", summary.seeds_run, summary.seeds_passed, summary.failures.len());
    println!("coverage totals:");
    for (name, count) in &summary.coverage.counters {
        let required = if summary.required.contains(name) { " (required)" } else { "" };
        println!("  {name}: {count}{required}");
    }
    if args.require_coverage {
        if missing.is_empty() {
            println!("required coverage: all {} counters above zero", summary.required.len());
        } else {
            println!("MISSING coverage (required, zero): {}", missing.join(", "));
        }
    }
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
