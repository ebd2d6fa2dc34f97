//! Replaying a directory of seed files as tests: one test per file, in the user's own `cargo test`.
//!
//! ```toml
//! # Cargo.toml of the crate with your target
//! [[test]]
//! name = "seeds"
//! harness = false
//! ```
//!
//! ```text
//! // tests/seeds.rs
//! fn main() -> std::process::ExitCode {
//!     holdfast::seeds::replay::<my_target::MyTarget>(concat!(env!("CARGO_MANIFEST_DIR"), "/seeds"))
//! }
//! ```
//!
//! Each `*.json` file in the directory (not its subdirectories: one directory per target) becomes a test named
//! `seed_<file name>` that replays the schedule and checks what the file expects (`pass`, or `fail` with its
//! signature) and, when the file records one, the digest. A file this build cannot replay still becomes a test,
//! named `skipped_<file name>_needs_<what>`, that parses it and prints why it was skipped: a seed whose canary is
//! not compiled in (`needs_canaries`), or a file of another target (`needs_target_<name>`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use corpus::{Expectation, SeedFile};
use env::{Env, File, OpenOptions, RealEnv};
use libtest_mimic::{Arguments, Failed, Trial};

use crate::runner::{RunOptions, run_schedule};
use crate::schedule::parse_schedule_value;
use crate::target::Target;

/// The most seed files one directory may hold.
pub const SEED_FILES_MAX: usize = 10_000;

/// Replay every seed file in `dir` against `T`, as a test harness (`harness = false`): parses the test
/// arguments (`cargo test -- NAME` filters as usual), runs one test per file, exits non-zero if any failed.
pub fn replay<T: Target>(dir: impl AsRef<Path>) -> ExitCode {
    let mut arguments = Arguments::from_args();
    // A target whose seeds share process-wide state (SQLite's PRNG) replays them one at a time (ADR-0078).
    if T::PARALLELISM != crate::target::SeedParallelism::Threads {
        arguments.test_threads = Some(1);
    }
    // A seed that expects a panic would print a backtrace: the failure report carries its message and location.
    crate::runner::install_panic_hook();
    let trials = match trials::<T>(dir.as_ref()) {
        Ok(trials) => trials,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    libtest_mimic::run(&arguments, trials).exit_code()
}

/// The seed files of `dir`, sorted.
pub fn seed_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let dir = &normalize(dir);
    let entries = RealEnv::new().list_dir(dir).map_err(|error| format!("cannot list {}: {error}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries
        .into_iter()
        .filter(|name| name.extension().is_some_and(|ext| ext == "json"))
        .map(|name| dir.join(name))
        .collect();
    files.sort();
    if files.len() > SEED_FILES_MAX {
        return Err(format!("{} holds {} seed files, above {SEED_FILES_MAX}", dir.display(), files.len()));
    }
    Ok(files)
}

/// Read and parse one seed file.
pub fn read_seed_file(path: &Path) -> Result<SeedFile, String> {
    let bytes = RealEnv::new()
        .open(path, OpenOptions::read())
        .and_then(|file| file.read_all())
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8", path.display()))?;
    SeedFile::parse(path, &text).map_err(|error| error.to_string())
}

/// The tests for `dir`: what [`replay`] runs.
pub fn trials<T: Target>(dir: &Path) -> Result<Vec<Trial>, String> {
    let mut trials = Vec::new();
    for path in seed_files(dir)? {
        let stem = path.file_stem().map(|stem| ident(&stem.to_string_lossy())).unwrap_or_default();
        let seed = read_seed_file(&path);
        let skip = seed.as_ref().ok().and_then(skip_reason::<T>);
        let trial = match skip {
            Some((needs, why)) => Trial::test(format!("skipped_{stem}_needs_{needs}"), move || {
                println!("skipped {}: {why}", path.display());
                seed.map(drop).map_err(Failed::from)
            }),
            None => Trial::test(format!("seed_{stem}"), move || replay_one::<T>(&path, seed?).map_err(Failed::from)),
        };
        trials.push(trial);
    }
    Ok(trials)
}

/// Why this build cannot replay `seed`: `(short name, sentence)`.
fn skip_reason<T: Target>(seed: &SeedFile) -> Option<(String, String)> {
    if seed.target != T::NAME {
        let why = format!("a seed of target {:?}; this test replays {:?}", seed.target, T::NAME);
        return Some((format!("target_{}", ident(&seed.target)), why));
    }
    let canary = seed.canary.as_deref()?;
    if T::canaries().contains(&canary) {
        return None;
    }
    let why = format!("canary {canary:?} is not compiled into this build (turn on the target's canaries feature)");
    Some(("canaries".to_string(), why))
}

/// Replay one seed file and check its expectation and digest.
pub fn replay_one<T: Target>(path: &Path, seed: SeedFile) -> Result<(), String> {
    let at = path.display();
    let schedule =
        parse_schedule_value::<T>(seed.schedule.clone()).map_err(|e| format!("{at}: field `schedule`: {e}"))?;
    let options = RunOptions { canary: seed.canary.clone(), ..RunOptions::default() };
    let outcome = run_schedule::<T>(&schedule, &options);
    let got = outcome.failure.as_ref().map(crate::Failure::signature);
    match (&seed.expect, &got) {
        (Expectation::Pass, None) => {}
        (Expectation::Pass, Some(_)) => {
            let report = outcome.failure.as_ref().map(crate::Failure::report).unwrap_or_default();
            return Err(format!("{at}: expected pass, got:\n{report}"));
        }
        (Expectation::Fail(want), got) if got.as_ref() != Some(want) => {
            let got = got.as_ref().map_or_else(|| "pass".to_string(), ToString::to_string);
            return Err(format!("{at}: expected a failure with {want}, got {got}"));
        }
        (Expectation::Fail(_), _) => {}
    }
    if let Some(recorded) = &seed.digest
        && *recorded != outcome.digest_hex()
    {
        return Err(format!(
            "{at}: digest {} differs from the recorded {recorded}: the seed no longer means the same run \
             (ADR-0003); if a change was meant to alter runs, record the new digest with an ADR that says why",
            outcome.digest_hex()
        ));
    }
    Ok(())
}

/// `dir` with `.` and `name/..` pairs removed, lexically (for readable paths in messages).
fn normalize(dir: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in dir.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir if out.file_name().is_some() => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// A test-name fragment: lowercase alphanumerics, everything else `_`.
pub fn ident(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect()
}
