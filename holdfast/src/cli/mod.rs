//! The command line as a library: a user's `main.rs` names its targets and calls [`Cli::run`].
//!
//! ```text
//! fn main() -> std::process::ExitCode {
//!     holdfast::cli::Cli::new("my-sim", "cargo run --release --").target::<MyTarget>().run()
//! }
//! ```
//!
//! Every flag works for every registered target: `--seed`, `--seeds` (swarm), `--shard`, `--json`, `--shrink`,
//! `--save`, `--replay`, `--trace`, `--check-determinism`, `--require-coverage`, `--require-probes`, `--isolate`,
//! `--seed-timeout`, `--bench`, `--fault-profile` (where the target has the profile), `--canary` (where it has canaries) and `--dot`
//! (where it renders failures). The first registered target is the default `--target`.
//!
//! Structure: [`Args`] parses; `Mode::from_args` picks one mode; each mode is one function returning an exit
//! code (0 pass, 1 failure, 2 bad input). `--shrink` (and `--save`) follow any mode that found a failure.

/// `println!` for the command line's standard output: a closed pipe ends the process with exit code 141 instead
/// of a panic (`out::write`).
macro_rules! outln {
    () => {
        $crate::cli::out::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::out::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for the command line's standard output (see `outln!`).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::out::write(format_args!($($arg)*))
    };
}

mod bench;
mod checks;
mod export;
mod modes;
pub mod out;
mod save;
mod swarm;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::builder::PossibleValuesParser;
use clap::{CommandFactory, FromArgMatches, Parser};
use env::{Env, File, OpenOptions, RealEnv};

use crate::config::FaultProfile;
use crate::runner::{RunOptions, STEPS_MAX, install_panic_hook};
use crate::schedule::SCHEDULE_SIZE_BYTES_MAX;
use crate::schedule::ScheduleOf;
use crate::swarm::SWARM_SEEDS_MAX;
use crate::target::Target;

/// Exit code of a run whose invariants all held.
pub const EXIT_PASS: u8 = 0;
/// Exit code of a failing run (or missing required coverage, or non-determinism).
pub const EXIT_FAIL: u8 = 1;
/// Exit code of bad input.
pub const EXIT_BAD_INPUT: u8 = 2;
/// The default `--seed-timeout`: this many seconds per 1000 steps (ADR-0098)...
pub const SEED_TIMEOUT_S_PER_1000_STEPS: u64 = 300;
/// ...and at least this many.
pub const SEED_TIMEOUT_S_MIN: u64 = 300;
/// The longest `--seed-timeout` (a week).
pub const SEED_TIMEOUT_S_MAX: u64 = 7 * 24 * 3600;
/// Where `--save` writes seed files when this environment variable names a directory.
pub const SEEDS_DIR_ENV_VAR: &str = "SIMULATOR_SEEDS_DIR";

/// Deterministic simulation: runs a system on a simulated disk with seeded faults, crashes and background-work
/// interleavings, checks invariants after every step, and replays any failure exactly.
///
/// Every run ends with `digest: <16 hex digits>`, a hash of every step, its result and the final disk image:
/// the same seed gives the same digest on every machine and in every process.
///
/// Exit codes: 0 pass, 1 an invariant failed (or coverage was missing, or the run was not deterministic),
/// 2 bad input, 3 standard output could not be written, 141 standard output's reader closed it (as SIGPIPE).
#[derive(Debug, Parser)]
#[command(version, long_about)]
pub struct Args {
    /// Run this one seed (decimal, or hexadecimal with 0x: `--seed 0xDEADBEEF` is `--seed 3735928559`).
    /// Defaults to 0. Also read from the SIMULATOR_SEED environment variable.
    #[arg(long, env = "SIMULATOR_SEED", value_parser = crate::parse_seed)]
    pub seed: Option<u64>,

    /// Steps per run (the liveness phase and final crash come after them).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=STEPS_MAX))]
    pub steps: u64,

    /// Run a swarm: every seed in A..B (end exclusive; decimal or 0x-hex), each with its own configuration,
    /// with a progress bar on stderr and a summary with coverage totals.
    #[arg(long, value_name = "A..B", value_parser = parse_range)]
    pub seeds: Option<Range<u64>>,

    /// Swarm: stop at the first failing seed.
    #[arg(long)]
    pub stop_on_failure: bool,

    /// Swarm: run this many seeds at once, each on its own thread with its own simulated world (or, with
    /// --isolate, its own child process). Defaults to the number of cores. The summary, the failure list and
    /// the swarm digest are the same for every value.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    pub jobs: Option<u64>,

    /// Swarm: run each seed in a child process, so that a seed that aborts the whole process (a panic inside a
    /// destructor while unwinding, say) is reported as a failure of that seed (`no_abort`) instead of ending the
    /// swarm. On by default where the target asks for it (redb under `--fault-profile beyond`). The swarm digest
    /// folds each child's digest.
    #[arg(long)]
    pub isolate: bool,

    /// Swarm: run only this shard, I/N: seed s runs in shard s mod N.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    pub shard: Option<(u64, u64)>,

    /// Swarm: print the summary as one JSON object on stdout (seeds run, failures, their replay commands,
    /// coverage totals, required and missing coverage, digest), for merging shards. Stdout then holds that one
    /// object and nothing else: progress and failure lines go to stderr.
    #[arg(long, global = true)]
    pub json: bool,

    /// Wall-clock watchdog, in seconds per seed (0 turns it off): a seed still running after this long fails as
    /// `liveness.stuck`, with the phase and step it reached and its replay command, and the swarm goes on. Its
    /// thread cannot be stopped: it is abandoned and runs until the process exits, after the summary (with
    /// --isolate the child process is killed instead); after 16 stuck seeds the swarm stops. Applies to --seeds
    /// and --seed runs, not to --replay, --check-determinism or --bench. Default: 300 s per 1000 --steps, and at
    /// least 300 s (ADR-0098).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(0..=SEED_TIMEOUT_S_MAX))]
    pub seed_timeout: Option<u64>,

    /// Swarm: when stderr is not a terminal (a CI log, a file), print `swarm progress: N/M seeds, F failed, S s`
    /// on stderr at most every this many seconds (0: after every seed). A terminal gets the progress bar instead.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub progress_seconds: u64,

    /// Swarm: exit 1 if any coverage counter the swarm's configurations require is zero (every enabled fault
    /// kind, every crash place, BUGGIFY sites fired, the target's own), printing which.
    #[arg(long, global = true)]
    pub require_coverage: bool,

    /// Swarm: --require-coverage (implied), and also every probe the target declares: the rare paths its code
    /// marks with `env::probe!` (the summary's `probes: H of D hit` and `never hit:` lines). Exit 1 if some
    /// declared probe no seed hit, printing which. Rare probes need big swarms (thousands of seeds, or more):
    /// a never-hit probe in a short swarm says where the simulation does not reach, not that something broke.
    #[arg(long, global = true)]
    pub require_probes: bool,

    /// Replay a schedule JSON file (as written by --save-schedule) or a seed file (as written by --save;
    /// detected by its fields, and its canary is turned on). The seed and configuration come from the file.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,

    /// Write a JSON-lines trace: one line per step with its result and the running digest.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,

    /// Write the steps that ran as a schedule JSON file (replay it with --replay). With --shrink, after a
    /// failure: the minimal schedule the shrink printed.
    #[arg(long, value_name = "FILE")]
    pub save_schedule: Option<PathBuf>,

    /// Run twice in this process and compare the digest after every step; report the first diverging step.
    #[arg(long)]
    pub check_determinism: bool,

    /// Benchmark every target this binary has: each runs its standard swarm (seeds 0..1000, or --seeds A..B;
    /// default steps; one job), through the same code as any swarm, and prints one line per target:
    /// `swarm target=T seeds=N seeds_per_second=X work_steps_per_second=Y median_seed_ms=A max_seed_ms=B
    /// idle_share=C cpu_work_steps_per_second=D` (seed times are CPU time of the thread that ran the seed; D is
    /// the work steps over the seeds' summed CPU time). Then `steps_per_second:` (the
    /// first target's work steps per second) and, where the binary can replay operations on real IO,
    /// `speedup_vs_real_io:`.
    #[arg(long)]
    pub bench: bool,

    /// With --bench: exit 1 when target T's slowest seed costs more than R times its median seed, in CPU time
    /// (`--max-seed-ratio engine=20`). Repeatable.
    #[arg(long, value_name = "T=R", value_parser = bench::parse_seed_ratio, requires = "bench")]
    pub max_seed_ratio: Vec<bench::SeedRatioGuard>,

    /// With --bench: exit 1 when target A's work steps per CPU second fall below R times target B's in the same
    /// run, so the machine's speed cancels (`--min-steps-ratio engine/txn=0.3`). Repeatable.
    #[arg(long, value_name = "A/B=R", value_parser = bench::parse_steps_ratio, requires = "bench")]
    pub min_steps_ratio: Vec<bench::StepsRatioGuard>,

    /// Shrink the failure found by --seed, --replay or --seeds (the first failing seed): replay smaller schedules
    /// and simpler configurations while the failure keeps its signature (invariant and kind), then print the
    /// minimal schedule, one line per step, `shrunk: <before> -> <after> steps`, and the fresh replay that
    /// confirms it (its digest last).
    #[arg(long)]
    pub shrink: bool,

    /// Shrink budget, in reruns (not time, so the result does not depend on the machine). A budget of at least
    /// twice 230 keeps 230 back for a final single-step-removal pass, so a failure shrunk to at most 20 steps
    /// always ends 1-minimal (ADR-0116).
    #[arg(long, value_name = "N", default_value_t = shrinker::RERUNS_DEFAULT)]
    pub shrink_budget: u64,

    /// With --shrink: save the shrunk failure as the regression seed NAME.json in the target's seeds directory
    /// (needs --adr), then print its path, replay command and test command. It expects `fail` with its
    /// signature when a canary is on (a detection seed) or the target pins findings in a system it does not
    /// maintain, else `pass`: the bug gets fixed and the seed goes green.
    #[arg(long, value_name = "NAME", requires = "shrink")]
    pub save: Option<String>,

    /// With --save: the decision record that explains the bug (`ADR-0033`). Required with --save.
    #[arg(long, value_name = "ADR-XXXX")]
    pub adr: Option<String>,

    /// With --save: one sentence on the bug, stored in the seed file.
    #[arg(long, value_name = "TEXT")]
    pub description: Option<String>,

    /// The system under test (see the list of targets below).
    #[arg(long)]
    pub target: Option<String>,

    /// Which faults the simulated disk may inject: `assumed` (the default: what the system's documentation
    /// assumes of the media; a failure is a bug) or `beyond` (more than that; failures characterise the system,
    /// except for faults the target claims to survive there: the engine's garbled torn sectors). Only for targets
    /// that define the profile.
    #[arg(long, value_name = "PROFILE", value_parser = ["assumed", "beyond"])]
    pub fault_profile: Option<String>,

    /// On a failure the target can draw (a serializability cycle, for the txn target), write the drawing as a
    /// Graphviz DOT file.
    #[arg(long, value_name = "FILE")]
    pub dot: Option<PathBuf>,

    /// The persistence model of the simulated disk (ADR-0109): what a crash may leave of unsynced state.
    /// `posix` (the default unless the target's fault menu names another: every unsynced write and every sector
    /// of it has its own fate, the most adversarial
    /// reading of POSIX), `page` (a page cache: each dirty page holds a prefix of the writes into it; pages, files
    /// and directory entries are otherwise independent), `ext4-ordered` (`page`, plus ext4 data=ordered:
    /// metadata persists as a prefix of one journal that every sync commits, and a size never exposes unwritten
    /// blocks). Applies to generated runs (`--seed`, `--seeds`); a replay uses the model its schedule stores unless
    /// this flag replaces it.
    #[arg(long, value_name = "MODEL", value_parser = ["posix", "page", "ext4-ordered"])]
    pub persistence: Option<String>,

    /// The simulated device's sector in bytes (ADR-0110): 512 (the default) or 4096. `posix` tears writes at
    /// it, and `Env::sector_size_bytes` reports it (the engine's WAL pads records to it).
    #[arg(long, value_name = "BYTES", value_parser = ["512", "4096"])]
    pub sector_size: Option<String>,

    /// With --seed or --replay (a schedule or seed file): write the disk as recovery saw it after the run's last
    /// crash (for a failing run, the crash whose recovery failed or preceded the failure) as ordinary files under
    /// DIR/disk/, and DIR/CRASH.txt: seed, target, model, the failure, and which pending writes the crash kept,
    /// dropped or tore and which directory operations it kept or dropped (ADR-0111).
    #[arg(long, value_name = "DIR")]
    pub export_image: Option<PathBuf>,

    /// Turn this planted bug on for every run, replay and shrink. Only for targets built with canaries.
    #[arg(long, value_name = "NAME")]
    pub canary: Option<String>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Commands besides running seeds.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Fold swarm shards' `--json` summaries into the unsharded swarm's summary.
    ///
    /// Each FILE is the output of `--seeds A..B --shard I/N --json`. The result has the shards' seeds, failures,
    /// coverage totals, required and missing coverage, and a digest equal to the unsharded swarm's. Printed like a swarm's summary (`--json`: as one JSON object); exits 1 when a shard failed or,
    /// with --require-coverage, coverage is missing.
    Merge {
        /// The shard summaries to fold.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
}

impl Args {
    /// The fault profile asked for (`assumed` unless `--fault-profile` says otherwise).
    pub fn profile(&self) -> FaultProfile {
        self.fault_profile.as_deref().map_or(FaultProfile::Assumed, |name| {
            FaultProfile::parse(name).expect("clap allows only known profile names")
        })
    }

    /// Is coverage checked (`--require-coverage`, or `--require-probes`, which implies it)?
    pub fn requires_coverage(&self) -> bool {
        self.require_coverage || self.require_probes
    }

    /// Seeds run at once (`--jobs`, else the number of cores).
    pub fn jobs(&self) -> usize {
        self.jobs.map_or_else(RealEnv::cores, |jobs| usize::try_from(jobs).expect("at most 256"))
    }

    /// The watchdog's limit per seed: `--seed-timeout` (0: none), else the default for `--steps` (ADR-0098).
    pub fn seed_timeout(&self) -> Option<std::time::Duration> {
        let default_s =
            (self.steps.div_ceil(1000) * SEED_TIMEOUT_S_PER_1000_STEPS).clamp(SEED_TIMEOUT_S_MIN, SEED_TIMEOUT_S_MAX);
        let seconds = self.seed_timeout.unwrap_or(default_s);
        (seconds > 0).then(|| std::time::Duration::from_secs(seconds))
    }

    /// The options every run of this command uses.
    pub fn run_options(&self) -> RunOptions {
        RunOptions {
            steps: self.steps,
            record_trace: self.trace.is_some(),
            canary: self.canary.clone(),
            profile: self.profile(),
            persistence: self
                .persistence
                .as_deref()
                .map(|name| env::Persistence::parse(name).expect("clap allows only known model names")),
            sector_bytes: self.sector_size.as_deref().map(|bytes| bytes.parse().expect("clap allows 512, 4096")),
            keep_crash_image: self.export_image.is_some(),
            ..RunOptions::default()
        }
    }
}

fn parse_range(text: &str) -> Result<Range<u64>, String> {
    let (start, end) = text.split_once("..").ok_or_else(|| format!("invalid range {text:?}: want A..B"))?;
    let (start, end) = (crate::parse_seed(start)?, crate::parse_seed(end)?);
    if start >= end {
        return Err(format!("invalid range {text:?}: empty (A must be below B)"));
    }
    if end - start > SWARM_SEEDS_MAX {
        return Err(format!("invalid range {text:?}: more than {SWARM_SEEDS_MAX} seeds"));
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

/// Client operations replayed on real IO for `--bench`'s comparison: (operations, nanoseconds).
pub type RealIo = (u64, u64);

/// A registered target, its type erased.
struct Entry {
    name: &'static str,
    about: &'static str,
    /// The cargo feature the binary needs for this target (printed in commands).
    feature: Option<&'static str>,
    /// The package whose `seeds` test replays this target's seed files (printed after `--save`).
    package: Option<&'static str>,
    profiles: Vec<FaultProfile>,
    /// [`Target::fault_menu`], checked for the chosen profile before anything runs (ADR-0139).
    fault_menu: fn(FaultProfile) -> Option<crate::FaultMenu>,
    /// [`Target::FINDINGS_EXPECT_FAIL`]: `--save` pins findings as `fail`.
    findings_expect_fail: bool,
    canaries: fn() -> Vec<&'static str>,
    /// `fn(&ScheduleOf<T>) -> Result<RealIo, String>` for this entry's `T`, type-erased (`Cli::real_io`).
    real_io: Option<Box<dyn std::any::Any>>,
    bench: fn(&Context<'_>) -> Option<bench::BenchLine>,
    /// Not compiled into this binary: how to build it.
    unbuilt: Option<&'static str>,
    dispatch: fn(&Context<'_>) -> u8,
}

/// What a mode needs besides its target type: the arguments and how to print commands.
pub(crate) struct Context<'a> {
    pub args: &'a Args,
    cli: &'a Cli,
    entry: &'a Entry,
}

/// The command line: a program name, how to re-run it, and its targets.
pub struct Cli {
    program: &'static str,
    command: String,
    canaries_feature: Option<&'static str>,
    /// Cargo features this binary was built with that a printed command must repeat (`built_with`).
    built_with: Vec<&'static str>,
    seeds_dir: PathBuf,
    entries: Vec<Entry>,
}

impl std::fmt::Debug for Cli {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.entries.iter().map(|entry| entry.name).collect();
        f.debug_struct("Cli").field("program", &self.program).field("targets", &names).finish_non_exhaustive()
    }
}

impl Cli {
    /// A command line named `program`, re-run (in printed replay commands) as `command`, e.g.
    /// `cargo run --release --`. Seeds are saved to `./seeds` unless [`Cli::seeds_dir`] says otherwise.
    pub fn new(program: &'static str, command: &str) -> Self {
        Self {
            program,
            command: command.trim_end_matches(" --").to_string(),
            canaries_feature: None,
            built_with: Vec::new(),
            seeds_dir: PathBuf::from("seeds"),
            entries: Vec::new(),
        }
    }

    /// Where `--save` writes seed files (each target in its `SEEDS_SUBDIR`); `$SIMULATOR_SEEDS_DIR` overrides.
    pub fn seeds_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.seeds_dir = dir.into();
        self
    }

    /// The cargo feature that compiles canaries in (added to printed commands when `--canary` is on).
    pub fn canaries_feature(mut self, feature: &'static str) -> Self {
        self.canaries_feature = Some(feature);
        self
    }

    /// This binary was built with cargo feature `feature`, which every printed command (replay, test) repeats:
    /// `#[cfg(feature = "planted-bug")] let cli = cli.built_with("planted-bug");`.
    pub fn built_with(mut self, feature: &'static str) -> Self {
        self.built_with.push(feature);
        self
    }

    /// Register target `T` (the first registered is the default `--target`).
    pub fn target<T: Target>(mut self) -> Self {
        assert!(self.entries.iter().all(|entry| entry.name != T::NAME), "target {} registered twice", T::NAME);
        self.entries.push(Entry {
            name: T::NAME,
            about: T::ABOUT,
            feature: None,
            package: None,
            profiles: FaultProfile::ALL.into_iter().filter(|&profile| T::fault_menu(profile).is_some()).collect(),
            fault_menu: T::fault_menu,
            findings_expect_fail: T::FINDINGS_EXPECT_FAIL,
            canaries: T::canaries,
            real_io: None,
            bench: bench::bench_target::<T>,
            unbuilt: None,
            dispatch: modes::dispatch::<T>,
        });
        self
    }

    /// A target this build leaves out (behind a cargo feature): `--target name` exits 2 with `hint`, which says
    /// how to build it.
    pub fn unbuilt(mut self, name: &'static str, hint: &'static str) -> Self {
        assert!(self.entries.iter().all(|entry| entry.name != name), "target {name} registered twice");
        let dispatch: fn(&Context<'_>) -> u8 = |_| EXIT_BAD_INPUT;
        self.entries.push(Entry {
            name,
            about: "(not in this build)",
            feature: None,
            package: None,
            profiles: Vec::new(),
            fault_menu: |_| None,
            findings_expect_fail: false,
            canaries: Vec::new,
            real_io: None,
            bench: |_| None,
            unbuilt: Some(hint),
            dispatch,
        });
        self
    }

    /// The last registered target is compiled in by cargo feature `feature` (printed in commands).
    pub fn feature(mut self, feature: &'static str) -> Self {
        self.last().feature = Some(feature);
        self
    }

    /// The last registered target's seed files are replayed by package `package`'s `seeds` test.
    pub fn package(mut self, package: &'static str) -> Self {
        self.last().package = Some(package);
        self
    }

    /// `--bench` replays the first client operations of target `T`'s first standard-swarm schedule on real IO
    /// with `replay` (bounded by the caller) and prints `speedup_vs_real_io:`. `T` must be the last registered.
    pub fn real_io<T: Target>(mut self, replay: fn(&ScheduleOf<T>) -> Result<RealIo, String>) -> Self {
        let last = self.last();
        assert_eq!(last.name, T::NAME, "real_io::<{}> after registering {}", T::NAME, last.name);
        last.real_io = Some(Box::new(replay));
        self
    }

    fn last(&mut self) -> &mut Entry {
        self.entries.last_mut().expect("register a target first")
    }

    /// Parse the process's arguments, run, and exit with the mode's code.
    pub fn run(self) -> ExitCode {
        ExitCode::from(self.run_from(std::env::args_os()))
    }

    /// Parse `args` (the program name first), run, and return the exit code.
    pub fn run_from<I, S>(self, args: I) -> u8
    where
        I: IntoIterator<Item = S>,
        S: Into<std::ffi::OsString> + Clone,
    {
        assert!(!self.entries.is_empty(), "a command line needs at least one target");
        let names: Vec<&'static str> = self.entries.iter().map(|entry| entry.name).collect();
        let mut targets_help = String::from("Targets:\n");
        for entry in &self.entries {
            targets_help.push_str(&format!("  {:<10} {}\n", entry.name, entry.about));
        }
        let command = Args::command().name(self.program).after_long_help(targets_help).mut_arg("target", |arg| {
            arg.value_parser(PossibleValuesParser::new(names.clone())).default_value(names[0])
        });
        let matches = match command.try_get_matches_from(args) {
            Ok(matches) => matches,
            Err(error) => {
                let _ = error.print();
                return if error.use_stderr() { EXIT_BAD_INPUT } else { EXIT_PASS };
            }
        };
        let args = Args::from_arg_matches(&matches).expect("clap checked the arguments");
        install_panic_hook();
        if let Some(Command::Merge { files }) = &args.command {
            return swarm::merge_mode(&args, files);
        }
        if args.bench {
            return bench::bench_all(&self, &args);
        }
        let name = args.target.clone().unwrap_or_else(|| names[0].to_string());
        let entry = self.entries.iter().find(|entry| entry.name == name).expect("clap allows only known targets");
        if let Some(hint) = entry.unbuilt {
            return bad_input(&format!("--target {name}: this binary was built without it; {hint}"));
        }
        if let Err(error) = checks::check_flags(&self, &args, entry) {
            return bad_input(&error);
        }
        (entry.dispatch)(&Context { args: &args, cli: &self, entry })
    }
}

/// Print `error: message` on stderr; the bad-input exit code.
pub(crate) fn bad_input(message: &str) -> u8 {
    eprintln!("error: {message}");
    EXIT_BAD_INPUT
}

/// Read a text file of at most [`SCHEDULE_SIZE_BYTES_MAX`] bytes.
pub(crate) fn read_file(path: &Path) -> Result<String, String> {
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

/// Write (and sync) a text file.
pub(crate) fn write_file(path: &Path, text: &str) -> Result<(), String> {
    let env = RealEnv::new();
    let file = env
        .open(path, OpenOptions::create_truncate())
        .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    file.write_all_at(0, text.as_bytes()).map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    file.sync().map_err(|error| format!("cannot sync {}: {error}", path.display()))
}

impl Context<'_> {
    /// The command that re-runs this binary with the features a run needs, ending in `--`.
    pub fn command(&self) -> String {
        let mut features: Vec<&str> = self.cli.built_with.clone();
        if self.args.canary.is_some() {
            features.extend(self.cli.canaries_feature.filter(|feature| !features.contains(feature)));
        }
        features.extend(self.entry.feature.filter(|feature| !features.contains(feature)));
        match features.is_empty() {
            true => format!("{} --", self.cli.command),
            false => format!("{} --features {} --", self.cli.command, features.join(",")),
        }
    }

    /// ` --features A,B` for a test command: the binary's `built_with` features, and the canaries feature when a
    /// canary is on (a target crate names its canaries feature as the binary does).
    pub fn test_features(&self) -> String {
        let mut features = self.cli.built_with.clone();
        if self.args.canary.is_some() {
            features.extend(self.cli.canaries_feature.filter(|feature| !features.contains(feature)));
        }
        if features.is_empty() { String::new() } else { format!(" --features {}", features.join(",")) }
    }

    /// `--target NAME --fault-profile P --canary C ` as needed to select the same run again (empty for the
    /// default target and profile).
    pub fn selection(&self) -> String {
        let mut flags = String::new();
        if self.entry.name != self.cli.entries[0].name {
            flags.push_str(&format!("--target {} ", self.entry.name));
        }
        if let Some(profile) = &self.args.fault_profile {
            flags.push_str(&format!("--fault-profile {profile} "));
        }
        if let Some(canary) = &self.args.canary {
            flags.push_str(&format!("--canary {canary} "));
        }
        if let Some(model) = &self.args.persistence {
            flags.push_str(&format!("--persistence {model} "));
        }
        if let Some(bytes) = &self.args.sector_size {
            flags.push_str(&format!("--sector-size {bytes} "));
        }
        flags
    }
}
