//! The CLI's `--shrink`, `--save` and `--canary` flags (the shrinker itself is tested on a toy target in
//! holdfast/tests/integration/toy.rs).

use std::process::{Command, Output};

fn simulator(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_simulator"))
        .args(args)
        .env_remove("SIMULATOR_SEED")
        .env("SIMULATOR_SEEDS_DIR", env!("CARGO_TARGET_TMPDIR"))
        .output()
        .expect("the simulator binary runs")
}

#[cfg(feature = "canaries")]
fn read(path: &std::path::Path) -> Vec<u8> {
    use holdfast::env::{Env, File, OpenOptions, RealEnv};
    RealEnv::new().open(path, OpenOptions::read()).and_then(|file| file.read_all()).expect("readable")
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
    let file: serde_json::Value = serde_json::from_slice(&read(std::path::Path::new(saved))).expect("a JSON seed file");
    let digest = text(&replay).lines().last().unwrap_or_default().trim_start_matches("digest: ").to_string();
    assert_eq!(file["digest"].as_str(), Some(digest.as_str()), "the seed file records its replay's digest");
    assert_eq!(file["schedule"]["format_version"], 2);
}
