//! Replays every seed file in `seeds/` and checks its expectation (one generated test per file), with an insta
//! snapshot of each replay's digest: a changed digest means the seed no longer means the same run (ADR-0003).

use std::path::Path;

use corpus::{Expectation, SeedFile, Signature};
use env::{Env, File, OpenOptions, RealEnv};
use simulator::{RunOptions, Schedule, Target};

fn read(path: &str) -> SeedFile {
    let env = RealEnv::new();
    let bytes = env.open(Path::new(path), OpenOptions::read()).and_then(|file| file.read_all()).expect("readable");
    let text = String::from_utf8(bytes).expect("a seed file is UTF-8");
    SeedFile::parse(Path::new(path), &text).unwrap_or_else(|error| panic!("{error}"))
}

/// A file whose feature is off is still parsed: a broken file fails even when it is skipped.
fn parse_only(path: &str) {
    let seed = read(path);
    assert!(seed.required_feature().is_some(), "{} needs no feature but was skipped", seed.name);
}

/// Replay a seed's schedule against target `T`: its failure signature (if any) and its digest.
fn replay_as<T: Target>(seed: &SeedFile, path: &str) -> (Option<Signature>, Option<String>, String) {
    let schedule_text = serde_json::to_string(&seed.schedule).expect("schedule serializes");
    let schedule = Schedule::<T::Step>::from_json(&schedule_text, T::NAME)
        .unwrap_or_else(|error| panic!("{path}: field `schedule`: {error}"));
    let options = RunOptions { canary: seed.canary.clone(), ..RunOptions::default() };
    let outcome = simulator::run_schedule_target::<T>(&schedule, &options);
    let report = outcome.failure.as_ref().map(simulator::Failure::report);
    let got = outcome.failure.as_ref().map(|f| Signature { invariant: f.invariant.clone(), kind: f.kind.to_string() });
    (got, report, outcome.digest_hex())
}

fn replay_file(path: &str, snapshot: &str) {
    let seed = read(path);
    let (got, report, digest) = match seed.target.as_str() {
        "engine" => replay_as::<simulator::EngineTarget>(&seed, path),
        "txn" => replay_as::<simulator::txn_target::TxnTarget>(&seed, path),
        #[cfg(feature = "redb")]
        "redb" => replay_as::<simulator::redb_target::RedbTarget>(&seed, path),
        other => panic!("{}: target {other} is not built here (build.rs should have skipped it)", seed.name),
    };
    match &seed.expect {
        Expectation::Pass => assert!(got.is_none(), "{}: expected pass, got {}", seed.name, report.unwrap_or_default()),
        Expectation::Fail(signature) => assert_eq!(got.as_ref(), Some(signature), "{}: wrong outcome", seed.name),
    }
    insta::assert_snapshot!(snapshot, digest);
}

include!(concat!(env!("OUT_DIR"), "/seed_tests.rs"));

/// With every feature on no seed is skipped, and `parse_only` has no caller: name it so it is never dead code.
const _: fn(&str) = parse_only;

#[test]
fn seeds_directory_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../seeds");
    assert!(RealEnv::new().list_dir(&root).is_ok(), "seeds/ is missing");
}
