//! Shrinking (ADR-0030): the generic `simulator::shrink::shrink_schedule` on the buggy toy target, and the CLI's
//! `--shrink`, `--save` and `--canary` flags.

use std::process::{Command, Output};

use shrinker::Simplify;
use simulator::config::SwarmConfig;
use simulator::shrink::{render_step, shrink_schedule};
use simulator::{RunOptions, run_schedule_target, run_target};

use crate::toy::{Toy, ToyStep, toy_config};

/// The toy's simplifications: smaller keys and values, a crash armed earlier, no crashes at IO.
#[derive(Debug, Default)]
struct ToySimplify;

impl Simplify for ToySimplify {
    type Step = ToyStep;
    type Config = SwarmConfig;

    fn simplify_step(&self, step: &ToyStep) -> Vec<ToyStep> {
        match step {
            ToyStep::Put { key, value } if *key > 0 => vec![ToyStep::Put { key: 0, value: *value }],
            ToyStep::Get { key } if *key > 0 => vec![ToyStep::Get { key: 0 }],
            ToyStep::CrashAtIo { k } if *k > 1 => vec![ToyStep::CrashAtIo { k: 1 }, ToyStep::CrashAtIo { k: k / 2 }],
            _ => Vec::new(),
        }
    }

    fn rewrite(&self, steps: &[ToyStep]) -> Vec<Vec<ToyStep>> {
        let gets: Vec<ToyStep> = steps.iter().filter(|step| !matches!(step, ToyStep::Get { .. })).cloned().collect();
        if gets.len() < steps.len() { vec![gets] } else { Vec::new() }
    }
}

#[test]
fn a_failing_toy_schedule_shrinks_to_a_validated_one_minimal_schedule() {
    let options = RunOptions { steps: 300, config: Some(toy_config()), ..RunOptions::default() };
    let failing = (0..50)
        .map(|seed| run_target::<Toy<false>>(seed, &options))
        .find(|outcome| !outcome.passed())
        .expect("the buggy toy fails within 50 seeds");
    let original = failing.failure.clone().expect("failed");
    let shrunk = shrink_schedule::<Toy<false>, _>(&ToySimplify, &failing.schedule, &RunOptions::default(), 2_000)
        .expect("shrinks");
    assert_eq!(shrunk.signature.invariant, original.invariant);
    assert_eq!(shrunk.signature.kind, original.kind.to_string());
    assert!(shrunk.steps_after <= shrunk.steps_before, "{} -> {}", shrunk.steps_before, shrunk.steps_after);
    assert!(shrunk.steps_after < failing.schedule.steps.len(), "nothing removed from {}", shrunk.steps_before);
    assert!(shrunk.reached_fixpoint, "budget ran out after {} reruns", shrunk.reruns);
    assert_eq!(shrunk.schedule.steps.len(), shrunk.steps_after);
    // The validation replay is a fresh replay of the result, and replays the same again.
    let again = run_schedule_target::<Toy<false>>(&shrunk.schedule, &RunOptions::default());
    assert_eq!(again.digest, shrunk.validation.digest);
    assert_eq!(again.failure.map(|f| f.invariant), Some(original.invariant.clone()));
    // 1-minimal: removing any single step loses the failure (or changes its signature).
    for index in 0..shrunk.schedule.steps.len() {
        let mut fewer = shrunk.schedule.clone();
        fewer.steps.remove(index);
        let outcome = run_schedule_target::<Toy<false>>(&fewer, &RunOptions::default());
        let same = outcome.failure.is_some_and(|f| f.invariant == original.invariant && f.kind == original.kind);
        assert!(!same, "step {index} ({}) was removable", render_step(&shrunk.schedule.steps[index]));
    }
}

#[test]
fn a_passing_schedule_is_not_shrunk() {
    let options = RunOptions { steps: 50, config: Some(toy_config()), ..RunOptions::default() };
    let passing = run_target::<Toy<true>>(1, &options);
    assert!(passing.passed());
    let error = shrink_schedule::<Toy<true>, _>(&ToySimplify, &passing.schedule, &RunOptions::default(), 10)
        .expect_err("nothing to shrink");
    assert!(error.contains("passes on replay"), "{error}");
}

fn simulator(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_simulator"))
        .args(args)
        .env_remove("SIMULATOR_SEED")
        .env("SIMULATOR_SEEDS_DIR", env!("CARGO_TARGET_TMPDIR"))
        .output()
        .expect("the simulator binary runs")
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn help_explains_the_shrink_and_seed_flags() {
    let help = text(&simulator(&["--help"]));
    for flag in ["--shrink", "--shrink-budget", "--save", "--adr", "--description", "--canary"] {
        assert!(help.contains(flag), "--help does not mention {flag}");
    }
}

#[test]
fn save_without_adr_and_bad_canaries_exit_2_with_a_message() {
    let output = simulator(&["--seed", "1", "--steps", "10", "--shrink", "--save", "x"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("--adr"), "{}", text(&output));
    let output = simulator(&["--seed", "1", "--steps", "10", "--save", "x", "--adr", "ADR-0001"]);
    assert_eq!(output.status.code(), Some(2), "--save without --shrink: {}", text(&output));
    let output = simulator(&["--seed", "1", "--steps", "10", "--canary", "no-such-canary"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    #[cfg(not(feature = "canaries"))]
    assert!(text(&output).contains("--features canaries"), "{}", text(&output));
    #[cfg(feature = "canaries")]
    assert!(text(&output).contains("unknown canary"), "{}", text(&output));
}

#[test]
fn a_passing_seed_with_shrink_just_passes() {
    let output = simulator(&["--seed", "3", "--steps", "100", "--shrink"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(!text(&output).contains("shrunk:"), "{}", text(&output));
}

/// With the canaries compiled in: find a planted bug, shrink it, save it, and replay the seed file.
#[cfg(feature = "canaries")]
#[test]
fn cli_shrinks_and_saves_a_canary_failure() {
    let output = simulator(&[
        "--canary",
        "tombstone-fallthrough",
        "--seeds",
        "0..400",
        "--stop-on-failure",
        "--shrink",
        "--save",
        "cli-test-canary",
        "--adr",
        "ADR-0020",
    ]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    let line = out.lines().find(|line| line.starts_with("shrunk: ")).unwrap_or_else(|| panic!("no shrunk line: {out}"));
    let counts: Vec<usize> = line
        .trim_start_matches("shrunk: ")
        .trim_end_matches(" steps")
        .split(" -> ")
        .map(|n| n.parse().expect("a count"))
        .collect();
    assert!(counts[1] <= counts[0], "{line}");
    assert!(out.lines().last().is_some_and(|last| last.starts_with("digest: ")), "{out}");
    let saved = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-test-canary.json");
    let saved = saved.to_str().expect("utf-8");
    let replay = simulator(&["--replay", saved]);
    assert_eq!(replay.status.code(), Some(1), "the canary is on again on replay: {}", text(&replay));
}
