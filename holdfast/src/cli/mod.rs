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

mod args;
mod bench;
mod checks;
mod export;
mod modes;
pub mod out;
mod save;
mod swarm;

pub use args::{Args, Command};

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::builder::PossibleValuesParser;
use clap::{CommandFactory, FromArgMatches};
use env::{Env, File, OpenOptions, RealEnv};

use crate::config::FaultProfile;
use crate::runner::install_panic_hook;
use crate::schedule::SCHEDULE_SIZE_BYTES_MAX;
use crate::schedule::ScheduleOf;
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
        let name = self.target_name(&args, &matches, &names);
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

impl Cli {
    /// The target to run: `--target` (or its default), or, for `--replay` without an explicit `--target`, the
    /// one the file names when this binary has it (ADR-0171).
    fn target_name(&self, args: &Args, matches: &clap::ArgMatches, names: &[&'static str]) -> String {
        let explicit =
            matches.value_source("target").is_some_and(|source| source != clap::parser::ValueSource::DefaultValue);
        let from_file = args.replay.as_deref().filter(|_| !explicit).and_then(modes::replay_target);
        match from_file {
            Some(name) if names.contains(&name.as_str()) => name,
            _ => args.target.clone().unwrap_or_else(|| names[0].to_string()),
        }
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

    /// `--target NAME` and [`Args::run_flags`] (`--fault-profile P --canary C ...`) as needed to select the same
    /// run again (empty for the default target and options).
    pub fn selection(&self) -> String {
        let mut flags = String::new();
        if self.entry.name != self.cli.entries[0].name {
            flags.push_str(&format!("--target {} ", self.entry.name));
        }
        for (flag, value) in self.args.run_flags() {
            flags.push_str(&format!("{flag} {value} "));
        }
        flags
    }
}
