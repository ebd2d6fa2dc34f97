//! The simulator's command line. See `--help`.
//!
//! Structure: [`Cli`] parses; [`Mode::from_cli`] picks one mode; each mode has one function returning an exit
//! code (0 pass, 1 failure, 2 bad input). `--shrink` (and `--save`) follow any mode that found a failure:
//! [`shrink_and_report`] shrinks its schedule and, with `--save`, writes it to `seeds/` as a regression seed.

use std::hash::Hasher;
use std::io::IsTerminal;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use env::{Env, File, OpenOptions, RealEnv, StableHasher};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use simulator::engine_target::Step;
use simulator::engine_target::simplify::EngineSimplify;
use simulator::runner::STEPS_MAX;
use simulator::schedule::SCHEDULE_SIZE_BYTES_MAX;
use simulator::shrink::{Shrunk, render_step, shrink_schedule};
use simulator::txn_target::TxnTarget;
use simulator::{
    EngineTarget, Outcome, RunOptions, Schedule, SwarmConfig, SwarmOptions, SwarmSummary, Target, bench,
    check_determinism, parse_seed, run_schedule_target, run_swarm, run_target,
};

/// Exit code of a run whose invariants all held.
const EXIT_PASS: u8 = 0;
/// Exit code of a failing run (or missing required coverage, or non-determinism).
const EXIT_FAIL: u8 = 1;
/// Exit code of bad input.
const EXIT_BAD_INPUT: u8 = 2;
/// Where `--save` writes seed files unless this environment variable names another directory.
const SEEDS_DIR_ENV_VAR: &str = "SIMULATOR_SEEDS_DIR";

/// A target the command line can run and shrink.
trait CliTarget: Target {
    /// Its shrinking simplifications (ADR-0030).
    type Simplifier: shrinker::Simplify<Step = Self::Step, Config = SwarmConfig> + Default;
    /// Saved findings expect `fail`: the bug is in a system we do not maintain, so the seed pins the behaviour
    /// (ADR-0038) instead of waiting for a fix that turns it green.
    const FINDINGS_EXPECT_FAIL: bool = false;
    /// The cargo feature of `simulator` the target is behind (printed in replay commands).
    const FEATURE: Option<&'static str> = None;
    /// `--fault-profile` applies: the target's `Target::swarm_config` reads it.
    const HAS_FAULT_PROFILES: bool = false;

    /// Run swarms seed by seed in child processes unless told otherwise: the system may abort the process.
    fn isolate_by_default(_fault_profile: Option<&str>) -> bool {
        false
    }

    /// The run's configuration as printed at its start.
    fn describe(_seed: u64, config: &SwarmConfig) -> String {
        config.to_string()
    }
}

impl CliTarget for EngineTarget {
    type Simplifier = EngineSimplify;
}

impl CliTarget for TxnTarget {
    type Simplifier = simulator::txn_target::TxnSimplify;
}

#[cfg(feature = "redb")]
impl CliTarget for simulator::redb_target::RedbTarget {
    type Simplifier = simulator::redb_target::RedbSimplify;
    const FINDINGS_EXPECT_FAIL: bool = true;
    const FEATURE: Option<&'static str> = Some("redb");
    const HAS_FAULT_PROFILES: bool = true;

    fn isolate_by_default(fault_profile: Option<&str>) -> bool {
        // redb can panic inside a destructor while unwinding from a corrupt page, which aborts the process.
        fault_profile == Some("beyond")
    }

    fn describe(seed: u64, config: &SwarmConfig) -> String {
        // The engine's op weights and tuning mean nothing to redb: the plan's weights replace them.
        let lines: Vec<String> = config
            .to_string()
            .lines()
            .filter(|line| !line.starts_with("weights:") && !line.starts_with("tuning:"))
            .map(str::to_string)
            .collect();
        format!("{}\n{}", lines.join("\n"), simulator::redb_target::RedbPlan::derive(seed, config))
    }
}

/// holdfast's deterministic simulator: runs the engine on a simulated disk with seeded faults, crashes and
/// background-work interleavings, checks invariants after every step, and replays any failure exactly.
///
/// Every run ends with `digest: <16 hex digits>`, a hash of every step, its result and the final disk image:
/// the same seed gives the same digest on every machine and in every process.
///
/// Exit codes: 0 pass, 1 an invariant failed (or coverage was missing, or the run was not deterministic),
/// 2 bad input.
#[derive(Debug, Parser)]
#[command(name = "simulator", version, about, long_about)]
struct Cli {
    /// Run this one seed (decimal, or hexadecimal with 0x: `--seed 0xDEADBEEF` is `--seed 3735928559`).
    /// Defaults to 0. Also read from the SIMULATOR_SEED environment variable.
    #[arg(long, env = "SIMULATOR_SEED", value_parser = parse_seed_arg)]
    seed: Option<u64>,

    /// Steps per run (the liveness phase and final crash come after them).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=STEPS_MAX))]
    steps: u64,

    /// Run a swarm: every seed in A..B (end exclusive; decimal or 0x-hex), each with its own configuration,
    /// with a progress bar on stderr and a summary with coverage totals.
    #[arg(long, value_name = "A..B", value_parser = parse_range)]
    seeds: Option<Range<u64>>,

    /// Swarm: stop at the first failing seed.
    #[arg(long)]
    stop_on_failure: bool,

    /// Swarm: run each seed in a child process, so that a seed that aborts the whole process (a panic inside a
    /// destructor while unwinding, which redb does after some corrupt reads) is reported as a failure of that seed
    /// (`no_abort`) instead of ending the swarm. On by default for `--target redb --fault-profile beyond`. The
    /// swarm digest then folds each child's digest, so it differs from an in-process swarm's.
    #[arg(long)]
    isolate: bool,

    /// Swarm: run only this shard, I/N: seed s runs in shard s mod N.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    shard: Option<(u64, u64)>,

    /// Swarm: print the summary as one JSON object on stdout (seeds run, failures, coverage totals, required
    /// and missing coverage, digest), for merging shards.
    #[arg(long)]
    json: bool,

    /// Swarm: exit 1 if any coverage counter the swarm's configurations require is zero (every enabled fault
    /// kind, every crash place, BUGGIFY sites fired, flushes, compactions), printing which.
    #[arg(long)]
    require_coverage: bool,

    /// Replay a schedule JSON file (as written by --save-schedule) or a seed file (as written by --save, e.g.
    /// seeds/NAME.json; detected by its fields, and its canary is turned on). The seed and configuration come
    /// from the file.
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,

    /// Write a JSON-lines trace: one line per step with its result and the running digest.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,

    /// Write the steps that ran as a schedule JSON file (replay it with --replay).
    #[arg(long, value_name = "FILE")]
    save_schedule: Option<PathBuf>,

    /// Run twice in this process and compare the digest after every step; report the first diverging step.
    #[arg(long)]
    check_determinism: bool,

    /// Benchmark: a fixed schedule with every invariant on; prints `steps_per_second: <integer>`, then replays
    /// the same client operations on real IO in a temporary directory and prints `speedup_vs_real_io: <float>`
    /// (real time per operation over simulated time per step).
    #[arg(long)]
    bench: bool,

    /// Shrink the failure found by --seed, --replay or --seeds (the first failing seed): replay smaller schedules
    /// and simpler configurations while the failure keeps its signature (invariant and kind), then print the
    /// minimal schedule, one line per step, `shrunk: <before> -> <after> steps`, the reruns and wall time, and the
    /// fresh replay that confirms it (its digest last).
    #[arg(long)]
    shrink: bool,

    /// Shrink budget, in reruns (not time, so the result does not depend on the machine).
    #[arg(long, value_name = "N", default_value_t = shrinker::RERUNS_DEFAULT)]
    shrink_budget: u64,

    /// With --shrink: save the shrunk failure as the regression seed seeds/NAME.json (needs --adr), then print
    /// its path and replay command. It expects `fail` with its signature when a canary is on (a detection seed),
    /// else `pass`: the bug gets fixed and the seed goes green. `cargo test -p corpus` replays every seed.
    #[arg(long, value_name = "NAME", requires = "shrink")]
    save: Option<String>,

    /// With --save: the decision record that explains the bug (`ADR-0033`). Required with --save.
    #[arg(long, value_name = "ADR-XXXX")]
    adr: Option<String>,

    /// With --save: one sentence on the bug, stored in the seed file.
    #[arg(long, value_name = "TEXT")]
    description: Option<String>,

    /// The system under test: `engine` (single operations, crashes, faults; the default), `txn` (several clients
    /// in interleaved serializable and read-only transactions, checked for serializability every step), or `redb`
    /// (redb on the simulated disk through its StorageBackend; needs a build with `--features redb`).
    #[arg(long, default_value = "engine", value_parser = ["engine", "txn", "redb"])]
    target: String,

    /// Target `redb`: which faults the simulated disk may inject. `assumed` (the default): only what redb's
    /// design document assumes of the media — crashes that keep, drop or tear unsynced writes, never touching bytes
    /// outside a write; a failure is a finding. `beyond`: also garbage sectors, fsync/write/read errors, bit flips,
    /// latent sectors, misdirected writes; failures characterise redb, they are not bugs.
    #[arg(long, value_name = "PROFILE", value_parser = ["assumed", "beyond"])]
    fault_profile: Option<String>,

    /// On a serializability failure (target `txn`), write the offending dependency cycle as a Graphviz DOT file.
    #[arg(long, value_name = "FILE")]
    dot: Option<PathBuf>,

    /// Turn this planted bug (ADR-0020, engine/src/canary.rs) on for every run, replay and shrink. Only in a build
    /// with `--features canaries`; otherwise the simulator exits 2 and says so.
    #[arg(long, value_name = "NAME")]
    canary: Option<String>,
}

fn parse_seed_arg(text: &str) -> Result<u64, String> {
    parse_seed(text)
}

fn parse_range(text: &str) -> Result<Range<u64>, String> {
    let (start, end) = text.split_once("..").ok_or_else(|| format!("invalid range {text:?}: want A..B"))?;
    let (start, end) = (parse_seed(start)?, parse_seed(end)?);
    if start >= end {
        return Err(format!("invalid range {text:?}: empty (A must be below B)"));
    }
    if end - start > simulator::swarm::SWARM_SEEDS_MAX {
        return Err(format!("invalid range {text:?}: more than {} seeds", simulator::swarm::SWARM_SEEDS_MAX));
    }
    Ok(start..end)
}

fn parse_shard(text: &str) -> Result<(u64, u64), String> {
    let (index, count) = text.split_once('/').ok_or_else(|| format!("invalid shard {text:?}: want I/N"))?;
    let index: u64 = index.trim().parse().map_err(|_| format!("invalid shard index in {text:?}"))?;
    let count: u64 = count.trim().parse().map_err(|_| format!("invalid shard count in {text:?}"))?;
    if count == 0 || index >= count {
        return Err(format!("invalid shard {text:?}: need 0 <= I < N"));
    }
    Ok((index, count))
}

/// What the command line asks for.
enum Mode {
    Bench,
    Replay(PathBuf),
    Swarm(Range<u64>),
    Determinism(u64),
    Single(u64),
}

impl Mode {
    fn from_cli(cli: &Cli) -> Self {
        if cli.bench {
            Mode::Bench
        } else if let Some(path) = &cli.replay {
            Mode::Replay(path.clone())
        } else if let Some(seeds) = &cli.seeds {
            Mode::Swarm(seeds.clone())
        } else if cli.check_determinism {
            Mode::Determinism(cli.seed.unwrap_or(0))
        } else {
            Mode::Single(cli.seed.unwrap_or(0))
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    simulator::runner::install_panic_hook();
    if let Err(error) = check_flags(&cli) {
        return ExitCode::from(bad_input(&error));
    }
    let code = match cli.target.as_str() {
        "txn" => dispatch::<TxnTarget>(&cli),
        #[cfg(feature = "redb")]
        "redb" => dispatch::<simulator::redb_target::RedbTarget>(&cli),
        _ => dispatch::<EngineTarget>(&cli),
    };
    ExitCode::from(code)
}

fn dispatch<T: CliTarget>(cli: &Cli) -> u8 {
    if cli.fault_profile.is_some() && !T::HAS_FAULT_PROFILES {
        return bad_input(&format!("--fault-profile: target {} has no fault profiles", T::NAME));
    }
    match Mode::from_cli(cli) {
        Mode::Bench => bench_mode(),
        Mode::Replay(path) => replay_mode::<T>(cli, &path),
        Mode::Swarm(seeds) => swarm_mode::<T>(cli, seeds),
        Mode::Determinism(seed) => determinism_mode::<T>(cli, seed),
        Mode::Single(seed) => single_mode::<T>(cli, seed),
    }
}

/// Flag combinations clap cannot check.
fn check_flags(cli: &Cli) -> Result<(), String> {
    if let Some(name) = &cli.canary {
        check_canary(name)?;
    }
    if cli.save.is_some() {
        match &cli.adr {
            None => return Err("--save needs --adr ADR-XXXX: the decision record that explains the bug".into()),
            Some(adr) if !adr.starts_with("ADR-") => {
                return Err(format!("--adr {adr:?}: want a decision record like ADR-0033"));
            }
            Some(_) => {}
        }
    }
    if cli.shrink && (cli.bench || cli.check_determinism) {
        return Err(
            "--shrink shrinks a failure of --seed, --replay or --seeds, not of --bench or --check-determinism".into()
        );
    }
    if cli.shrink && cli.json {
        return Err("--shrink prints a human report; it cannot be combined with --json".into());
    }
    if cli.shrink_budget == 0 {
        return Err("--shrink-budget must be at least 1".into());
    }
    if cli.target == "redb" && !cfg!(feature = "redb") {
        return Err("--target redb: this simulator was built without redb; build it with --features redb \
                    (cargo run --release -p simulator --features redb -- --target redb ...)"
            .into());
    }
    if cli.target != "engine" && cli.bench {
        return Err("--bench runs the engine's fixed schedule; it takes no --target".into());
    }
    Ok(())
}

#[cfg(feature = "canaries")]
fn check_canary(name: &str) -> Result<(), String> {
    let known: Vec<&str> =
        engine::canary::CANARIES.iter().chain(engine::canary::TRANSACTION_CANARIES).copied().collect();
    if known.contains(&name) { Ok(()) } else { Err(format!("unknown canary {name:?}; known: {}", known.join(", "))) }
}

#[cfg(not(feature = "canaries"))]
fn check_canary(name: &str) -> Result<(), String> {
    Err(format!(
        "--canary {name}: this simulator has no canaries compiled in; build it with --features canaries \
         (cargo run -p simulator --features canaries -- --canary {name} ...)"
    ))
}

fn bad_input(message: &str) -> u8 {
    eprintln!("error: {message}");
    EXIT_BAD_INPUT
}

fn read_file(path: &Path) -> Result<String, String> {
    let env = RealEnv::new();
    let file =
        env.open(path, OpenOptions::read()).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let len = file.len().map_err(|error| error.to_string())?;
    if len > SCHEDULE_SIZE_BYTES_MAX {
        return Err(format!("{} is {len} bytes, above {SCHEDULE_SIZE_BYTES_MAX}", path.display()));
    }
    let bytes = file.read_all().map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8", path.display()))
}

fn write_file(path: &Path, text: &str) -> Result<(), String> {
    let env = RealEnv::new();
    let file = env
        .open(path, OpenOptions::create_truncate())
        .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    file.write_all_at(0, text.as_bytes()).map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    file.sync().map_err(|error| format!("cannot sync {}: {error}", path.display()))
}

fn run_options(cli: &Cli) -> RunOptions {
    RunOptions {
        steps: cli.steps,
        record_trace: cli.trace.is_some(),
        canary: cli.canary.clone(),
        fault_profile: cli.fault_profile.clone(),
        ..RunOptions::default()
    }
}

/// ` --canary NAME` when a canary is on (for printed commands).
fn canary_flag(canary: Option<&str>) -> String {
    canary.map(|name| format!(" --canary {name}")).unwrap_or_default()
}

/// `cargo run ... -p simulator` with the canaries feature when a canary is on.
/// `--target NAME ` for a target other than the default (and its `--fault-profile`), so a printed replay command
/// replays the same target.
fn target_flag(cli: &Cli) -> String {
    let profile = cli.fault_profile.as_ref().map(|profile| format!("--fault-profile {profile} ")).unwrap_or_default();
    if cli.target == "engine" { String::new() } else { format!("--target {} {profile}", cli.target) }
}

/// `cargo run ... -p simulator` with the features the command needs: `canaries` when a canary is on, and the
/// target's own feature.
fn cargo_run<T: CliTarget>(canary: Option<&str>) -> String {
    let mut features: Vec<&str> = Vec::new();
    if canary.is_some() {
        features.push("canaries");
    }
    features.extend(T::FEATURE);
    if features.is_empty() {
        "cargo run --release -p simulator --".to_string()
    } else {
        format!("cargo run --release -p simulator --features {} --", features.join(","))
    }
}

/// Write the trace and schedule files asked for. False (after printing why) on an IO error.
fn write_outputs<S: serde::Serialize + serde::de::DeserializeOwned>(cli: &Cli, outcome: &Outcome<S>) -> bool {
    if let Some(path) = &cli.trace {
        let mut text = outcome.trace.join("\n");
        text.push('\n');
        if let Err(error) = write_file(path, &text) {
            eprintln!("error: {error}");
            return false;
        }
    }
    if let Some(path) = &cli.save_schedule {
        if let Err(error) = write_file(path, &outcome.schedule.to_json()) {
            eprintln!("error: {error}");
            return false;
        }
        println!("schedule saved: {} ({} steps)", path.display(), outcome.schedule.steps.len());
    }
    true
}

/// With `--dot FILE`, write a serializability failure's dependency cycle as Graphviz DOT (ADR-0032).
fn write_dot(failure: &simulator::Failure, dot: Option<&Path>) {
    let Some(path) = dot else { return };
    match simulator::txn_target::failure_dot(failure) {
        Some(graph) => {
            let written = env::RealEnv::new().open(path, env::OpenOptions::create_truncate()).and_then(|file| {
                env::File::write_all_at(&file, 0, graph.as_bytes()).and_then(|()| env::File::sync(&file))
            });
            match written {
                Ok(()) => println!("dot: wrote the cycle to {}", path.display()),
                Err(error) => eprintln!("dot: could not write {}: {error}", path.display()),
            }
        }
        None => println!("dot: the failure is not a dependency cycle; nothing written to {}", path.display()),
    }
}

/// Print a run's result; returns its exit code.
fn report_run<S>(outcome: &Outcome<S>, replay_command: &str, dot: Option<&Path>) -> u8 {
    println!("steps: {} (work steps {})", outcome.steps_run, outcome.work_steps);
    let counters: Vec<String> =
        outcome.coverage.counters.iter().map(|(name, count)| format!("{name}={count}")).collect();
    println!("coverage: {}", counters.join(" "));
    let code = match &outcome.failure {
        None => {
            println!("result: pass");
            EXIT_PASS
        }
        Some(failure) => {
            print!("{}", failure.report());
            println!("replay: {replay_command}");
            write_dot(failure, dot);
            println!("first failure: seed={} step={} invariant={}", failure.seed, failure.step, failure.invariant);
            EXIT_FAIL
        }
    };
    println!("digest: {}", outcome.digest_hex());
    code
}

fn single_mode<T: CliTarget>(cli: &Cli, seed: u64) -> u8 {
    let options = run_options(cli);
    let config = T::swarm_config(seed, &options);
    println!("seed: {seed} (0x{seed:x}) target: {} steps: {}", T::NAME, cli.steps);
    println!("{}", T::describe(seed, &config));
    let outcome = run_target::<T>(seed, &options);
    if !write_outputs(cli, &outcome) {
        return EXIT_BAD_INPUT;
    }
    let canary = options.canary.as_deref();
    let command = format!(
        "{} {}--seed {seed} --steps {}{}",
        cargo_run::<T>(canary),
        target_flag(cli),
        cli.steps,
        canary_flag(canary)
    );
    let code = report_run(&outcome, &command, cli.dot.as_deref());
    if cli.shrink && !outcome.passed() {
        return shrink_and_report::<T>(cli, &outcome.schedule, &options);
    }
    code
}

/// Is this JSON text a seed file (`seeds/*.json`) rather than a bare schedule? Decided by its fields.
fn is_seed_file(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text).is_ok_and(|value| {
        value.get("schedule").is_some_and(serde_json::Value::is_object) && value.get("expect").is_some()
    })
}

/// A replayable file: a bare schedule, or a seed file's schedule with its canary and expectation.
fn load_replay<T: Target>(path: &Path, text: &str) -> Result<(Schedule<T::Step>, Option<corpus::SeedFile>), String> {
    if !is_seed_file(text) {
        let schedule = Schedule::<T::Step>::from_json(text, T::NAME).map_err(|e| format!("{}: {e}", path.display()))?;
        return Ok((schedule, None));
    }
    let seed = corpus::SeedFile::parse(path, text).map_err(|error| error.to_string())?;
    if seed.target != T::NAME {
        return Err(format!("{}: seed file for target {:?}, not {:?}", path.display(), seed.target, T::NAME));
    }
    let schedule = Schedule::<T::Step>::from_json(&seed.schedule.to_string(), T::NAME)
        .map_err(|error| format!("{}: field `schedule`: {error}", path.display()))?;
    Ok((schedule, Some(seed)))
}

fn replay_mode<T: CliTarget>(cli: &Cli, path: &Path) -> u8 {
    let text = match read_file(path) {
        Ok(text) => text,
        Err(error) => return bad_input(&error),
    };
    let (schedule, seed_file) = match load_replay::<T>(path, &text) {
        Ok(loaded) => loaded,
        Err(error) => return bad_input(&error),
    };
    let mut options = run_options(cli);
    if let Some(seed) = &seed_file {
        if let Some(name) = &seed.canary {
            if cli.canary.as_ref().is_some_and(|flag| flag != name) {
                return bad_input(&format!("{}: the seed file's canary is {name}, not --canary", path.display()));
            }
            if let Err(error) = check_canary(name) {
                return bad_input(&format!("{}: {error}", path.display()));
            }
            options.canary = Some(name.clone());
        }
        let expect = match &seed.expect {
            corpus::Expectation::Pass => "pass".to_string(),
            corpus::Expectation::Fail(signature) => format!("fail with {signature}"),
        };
        println!("seed file: {} ({}): expects {expect}", seed.name, seed.adr);
        println!("description: {}", seed.description);
    }
    let canary = options.canary.as_deref();
    println!(
        "replay: {} seed: {} steps: {}{}",
        path.display(),
        schedule.seed,
        schedule.steps.len(),
        canary_flag(canary)
    );
    println!("{}", T::describe(schedule.seed, &schedule.config));
    let outcome = run_schedule_target::<T>(&schedule, &options);
    if !write_outputs(cli, &outcome) {
        return EXIT_BAD_INPUT;
    }
    let command = format!("{} {}--replay {}", cargo_run::<T>(canary), target_flag(cli), path.display());
    let code = report_run(&outcome, &command, cli.dot.as_deref());
    if cli.shrink && !outcome.passed() {
        return shrink_and_report::<T>(cli, &outcome.schedule, &options);
    }
    code
}

fn determinism_mode<T: CliTarget>(cli: &Cli, seed: u64) -> u8 {
    let options = RunOptions { record_step_digests: true, ..run_options(cli) };
    let mut digest = 0;
    let result = check_determinism(|| {
        let outcome = run_target::<T>(seed, &options);
        digest = outcome.digest;
        outcome
    });
    let code = match result {
        Ok(steps) => {
            println!("determinism: ok (seed {seed}, {steps} steps, two runs identical)");
            EXIT_PASS
        }
        Err((step, first, second)) => {
            println!("determinism: DIVERGED at step {step} (digest {first:016x} then {second:016x})");
            EXIT_FAIL
        }
    };
    println!("digest: {digest:016x}");
    code
}

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

fn swarm_mode<T: CliTarget>(cli: &Cli, seeds: Range<u64>) -> u8 {
    let options = SwarmOptions { seeds, shard: cli.shard, stop_on_failure: cli.stop_on_failure, run: run_options(cli) };
    let seeds_total = options.shard_seeds().count() as u64;
    let bar = progress_bar(seeds_total);
    let mut failures = 0u64;
    let mut digests = StableHasher::new();
    let mut first_failing: Option<Schedule<T::Step>> = None;
    let mut on_failure = |failure: &simulator::Failure, bar: &ProgressBar| {
        failures += 1;
        print_line(
            bar,
            format!(
                "FAIL seed={} step={} invariant={} ({})",
                failure.seed, failure.step, failure.invariant, failure.kind
            ),
        );
        bar.set_message(format!("{failures} failed"));
    };
    // A one-seed swarm gains nothing from a child process (and each child is one).
    let isolate = seeds_total > 1 && (cli.isolate || T::isolate_by_default(cli.fault_profile.as_deref()));
    let summary = if isolate {
        isolated_swarm::<T>(cli, &options, &bar, &mut digests, |failure| on_failure(failure, &bar))
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
    let coverage_failed = cli.require_coverage && !missing.is_empty();
    let code = if !summary.failures.is_empty() || coverage_failed { EXIT_FAIL } else { EXIT_PASS };
    if cli.json {
        print_swarm_json(&summary, &missing, digest);
        return code;
    }
    print_swarm_text::<T>(cli, &summary, &missing);
    println!("digest: {digest:016x}");
    if cli.shrink
        && let Some(schedule) = &first_failing
    {
        return shrink_and_report::<T>(cli, schedule, &options.run);
    }
    if cli.shrink && isolate && !summary.failures.is_empty() {
        println!("shrink: an isolated swarm does not keep schedules; shrink one seed with --seed N --shrink");
    }
    code
}

/// The most bytes of a child's stderr a `no_abort` failure quotes.
const CHILD_STDERR_BYTES_MAX: usize = 2000;

/// Run each seed of the swarm as `simulator --seeds N..N+1 --json` in a child process and merge the summaries.
/// A child that does not exit 0 or 1 with a summary (it aborted) becomes a `no_abort` failure of its seed.
fn isolated_swarm<T: CliTarget>(
    cli: &Cli,
    options: &SwarmOptions,
    bar: &ProgressBar,
    digests: &mut StableHasher,
    mut on_failure: impl FnMut(&simulator::Failure),
) -> SwarmSummary {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("simulator"));
    let mut summary = SwarmSummary::default();
    for seed in options.shard_seeds() {
        let mut command = std::process::Command::new(&exe);
        command.args(["--target", &cli.target, "--seeds", &format!("{seed}..{}", seed + 1), "--json"]);
        command.args(["--steps", &cli.steps.to_string()]);
        if let Some(profile) = &cli.fault_profile {
            command.args(["--fault-profile", profile]);
        }
        if let Some(canary) = &cli.canary {
            command.args(["--canary", canary]);
        }
        command.env(simulator::runner::PANIC_VERBOSE_ENV_VAR, "1");
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
fn child_summary<T: CliTarget>(
    seed: u64,
    run: &RunOptions,
    output: std::io::Result<std::process::Output>,
) -> (SwarmSummary, u64) {
    let (status, stdout, stderr) = match output {
        Ok(output) => (format!("{}", output.status), output.stdout, output.stderr),
        Err(error) => (format!("could not start: {error}"), Vec::new(), Vec::new()),
    };
    let text = String::from_utf8_lossy(&stdout);
    let parsed = text.lines().last().and_then(|line| serde_json::from_str::<serde_json::Value>(line).ok());
    if let Some(value) = parsed
        && let Ok(summary) = serde_json::from_value::<SwarmSummary>(value.clone())
    {
        let digest = value.get("digest").and_then(|digest| digest.as_str()).unwrap_or("0");
        return (summary, u64::from_str_radix(digest, 16).unwrap_or(0));
    }
    let stderr = String::from_utf8_lossy(&stderr);
    let tail: String =
        stderr.chars().rev().take(CHILD_STDERR_BYTES_MAX).collect::<Vec<char>>().into_iter().rev().collect();
    let failure = simulator::Failure {
        seed,
        step: 0,
        phase: "process".into(),
        invariant: "no_abort".into(),
        kind: simulator::FailureKind::Panic,
        expected: "the run returns (exit 0 or 1 with a summary)".into(),
        actual: format!("{status}; stderr ends: {}", tail.trim()),
        last_steps: Vec::new(),
    };
    let mut summary = SwarmSummary { seeds_run: 1, failures: vec![failure], ..SwarmSummary::default() };
    let config = run.config.clone().unwrap_or_else(|| T::swarm_config(seed, run));
    summary.required.extend(T::required_coverage(&config));
    (summary, 0)
}

/// Shrink a failing schedule, print the minimal one and its confirming replay, and save it with `--save`.
/// Returns the exit code: 1 (the failure stands), 2 when saving failed, or 1 after an error shrinking.
fn shrink_and_report<T: CliTarget>(cli: &Cli, schedule: &Schedule<T::Step>, options: &RunOptions) -> u8 {
    let clock = RealEnv::new();
    let started = clock.now();
    println!();
    println!("shrinking: seed {} ({} steps), budget {} reruns", schedule.seed, schedule.steps.len(), cli.shrink_budget);
    let shrunk = match shrink_schedule::<T, _>(&T::Simplifier::default(), schedule, options, cli.shrink_budget) {
        Ok(shrunk) => shrunk,
        Err(error) => {
            eprintln!("error: shrink: {error}");
            return EXIT_FAIL;
        }
    };
    let wall = clock.now().saturating_sub(started);
    println!("minimal schedule ({} steps, signature {}):", shrunk.steps_after, shrunk.signature);
    for (index, step) in shrunk.schedule.steps.iter().enumerate() {
        println!("  #{index} {}", render_step(step));
    }
    println!("config:");
    for line in shrunk.schedule.config.to_string().lines() {
        println!("  {line}");
    }
    println!("shrunk: {} -> {} steps", shrunk.steps_before, shrunk.steps_after);
    let fixpoint = if shrunk.reached_fixpoint { "fixpoint reached (1-minimal)" } else { "budget exhausted" };
    println!("reruns: {} ({fixpoint}), wall time: {:.2} s", shrunk.reruns, wall.as_secs_f64());
    let mut code = EXIT_FAIL;
    if let Some(name) = &cli.save {
        match save_seed::<T>(cli, name, &shrunk, options.canary.as_deref()) {
            Ok(()) => {}
            Err(error) => {
                eprintln!("error: --save: {error}");
                code = EXIT_BAD_INPUT;
            }
        }
    }
    println!("confirmed by a fresh replay:");
    let validation = &shrunk.validation;
    if let Some(failure) = &validation.failure {
        print!("{}", failure.report());
    }
    println!("digest: {}", validation.digest_hex());
    code
}

/// The directory `--save` writes to: `$SIMULATOR_SEEDS_DIR`, else the workspace's `seeds/`.
fn seeds_dir() -> PathBuf {
    match std::env::var_os(SEEDS_DIR_ENV_VAR) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
            manifest_dir.parent().unwrap_or(manifest_dir).join("seeds")
        }
    }
}

fn save_seed<T: CliTarget>(
    cli: &Cli,
    name: &str,
    shrunk: &Shrunk<T::Step>,
    canary: Option<&str>,
) -> Result<(), String> {
    let adr = cli.adr.clone().ok_or("--save needs --adr ADR-XXXX")?;
    let expect = if canary.is_some() || T::FINDINGS_EXPECT_FAIL {
        corpus::Expectation::Fail(shrunk.signature.clone())
    } else {
        corpus::Expectation::Pass
    };
    let description = cli.description.clone().unwrap_or_else(|| {
        format!("{} found by seed {}, shrunk to {} steps", shrunk.signature, shrunk.schedule.seed, shrunk.steps_after)
    });
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
        schedule: serde_json::to_value(&shrunk.schedule).map_err(|error| error.to_string())?,
    };
    let text = seed.to_json();
    corpus::SeedFile::parse(Path::new(name), &text).map_err(|error| error.to_string())?;
    // Seeds of a target other than the engine live in their own directory (`seeds/redb/`, `seeds/txn/`).
    let dir = if T::NAME == "engine" { seeds_dir() } else { seeds_dir().join(T::NAME) };
    let path = dir.join(format!("{name}.json"));
    if let Some(parent) = path.parent() {
        RealEnv::new()
            .create_dir_all(parent)
            .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
    }
    write_file(&path, &text)?;
    let features = match (canary.is_some(), T::FEATURE) {
        (true, _) => " --features canaries".to_string(),
        (false, Some(feature)) => format!(" --features {feature}"),
        (false, None) => String::new(),
    };
    let relative = if T::NAME == "engine" { name.to_string() } else { format!("{}/{name}", T::NAME) };
    let test = relative.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' });
    println!("saved: {}", path.display());
    println!("replay: cargo run -p simulator{features} -- {}--replay seeds/{relative}.json", target_flag(cli));
    println!("test: cargo test -p corpus{features} seed_{}", test.collect::<String>());
    Ok(())
}

fn print_swarm_json(summary: &SwarmSummary, missing: &[String], digest: u64) {
    let json = serde_json::json!({
        "seeds_run": summary.seeds_run,
        "seeds_passed": summary.seeds_passed,
        "failures": summary.failures,
        "coverage": summary.coverage,
        "required": summary.required,
        "missing_coverage": missing,
        "digest": format!("{digest:016x}"),
    });
    println!("{json}");
}

fn print_swarm_text<T: CliTarget>(cli: &Cli, summary: &SwarmSummary, missing: &[String]) {
    println!("seeds: run={} passed={} failed={}", summary.seeds_run, summary.seeds_passed, summary.failures.len());
    println!("coverage totals:");
    for (name, count) in &summary.coverage.counters {
        let required = if summary.required.contains(name) { " (required)" } else { "" };
        println!("  {name}: {count}{required}");
    }
    if cli.require_coverage {
        if missing.is_empty() {
            println!("required coverage: all {} counters above zero", summary.required.len());
        } else {
            println!("MISSING coverage (required, zero): {}", missing.join(", "));
        }
    }
    for failure in &summary.failures {
        println!(
            "failed: seed={} step={} invariant={} kind={} replay: {} {}--seed {} --steps {}{}",
            failure.seed,
            failure.step,
            failure.invariant,
            failure.kind,
            cargo_run::<T>(cli.canary.as_deref()),
            target_flag(cli),
            failure.seed,
            cli.steps,
            canary_flag(cli.canary.as_deref())
        );
    }
    if let Some(first) = summary.failures.first() {
        println!("first failure: seed={} step={} invariant={}", first.seed, first.step, first.invariant);
    }
}

fn bench_mode() -> u8 {
    let env = RealEnv::new();
    let dir = PathBuf::from(format!("/tmp/holdfast-bench-{}", std::process::id()));
    if let Err(error) = env.create_dir_all(&dir) {
        return bad_input(&format!("cannot create {}: {error}", dir.display()));
    }
    let result = bench::run_bench(bench::BENCH_STEPS, &dir);
    let (report, outcome): (bench::BenchReport, Outcome<Step>) = match result {
        Ok(result) => result,
        Err(error) => {
            eprintln!("error: bench: {error}");
            return EXIT_FAIL;
        }
    };
    println!("steps_per_second: {}", report.steps_per_second);
    println!("speedup_vs_real_io: {:.1}", report.speedup_vs_real_io);
    println!(
        "(sim: {} steps in {} ms; real IO: {} ops in {} ms, {} ops/s)",
        report.sim_work_steps,
        report.sim_nanos / 1_000_000,
        report.real_ops,
        report.real_nanos / 1_000_000,
        report.real_ops_per_second
    );
    let code = report_run(&outcome, "cargo run --release -p simulator -- --bench", None);
    if report.passed { code } else { EXIT_FAIL }
}
