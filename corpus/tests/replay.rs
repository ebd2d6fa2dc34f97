//! Replays every seed file in `seeds/` and checks its expectation (one generated test per file), with an insta
//! snapshot of each replay's digest: a changed digest means the seed no longer means the same run (ADR-0003).

use std::path::Path;

use corpus::{Expectation, SeedFile, Signature};
use env::{Env, File, OpenOptions, RealEnv};
use simulator::{RunOptions, Schedule, engine_target};

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

fn replay_file(path: &str, snapshot: &str) {
    let seed = read(path);
    assert_eq!(seed.target, "engine", "{}: only the engine target is built here", seed.name);
    let schedule_text = serde_json::to_string(&seed.schedule).expect("schedule serializes");
    let schedule = Schedule::<engine_target::Step>::from_json(&schedule_text, "engine")
        .unwrap_or_else(|error| panic!("{path}: field `schedule`: {error}"));
    let options = RunOptions { canary: seed.canary.clone(), ..RunOptions::default() };
    let outcome = simulator::run_schedule(&schedule, &options);
    let got = outcome.failure.as_ref().map(|f| Signature { invariant: f.invariant.clone(), kind: f.kind.to_string() });
    match &seed.expect {
        Expectation::Pass => {
            assert!(got.is_none(), "{}: expected pass, got {}", seed.name, outcome.failure.unwrap().report())
        }
        Expectation::Fail(signature) => assert_eq!(got.as_ref(), Some(signature), "{}: wrong outcome", seed.name),
    }
    insta::assert_snapshot!(snapshot, outcome.digest_hex());
}

include!(concat!(env!("OUT_DIR"), "/seed_tests.rs"));

/// With every feature on no seed is skipped, and `parse_only` has no caller: name it so it is never dead code.
const _: fn(&str) = parse_only;

#[test]
fn seeds_directory_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../seeds");
    assert!(RealEnv::new().list_dir(&root).is_ok(), "seeds/ is missing");
}
