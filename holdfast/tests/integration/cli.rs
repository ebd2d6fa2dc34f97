//! The command line as a user's binary runs it (the `holdfast-testbed` fixture, whose seeds ending in 3 fail and
//! seeds ending in 7 spin forever without calling `Env`): `--json` stdout is exactly one object even when seeds
//! fail (ADR-0097), `merge` lists every failure of such shards with its replay command, and the wall-clock
//! watchdog turns a stuck seed into `liveness.stuck` while the swarm finishes, in-process, under `--isolate` and
//! for a single `--seed` (ADR-0098).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use holdfast::env::{ChildOutput, Env, File, OpenOptions, RealEnv};
use serde_json::Value;

/// Longer than any of these runs takes (a few seconds, the watchdog's included): a run past it is a hang.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Run the fixture binary, killed (and the test failed) if it hangs.
fn testbed(args: &[&str]) -> Run {
    testbed_with(args, &[])
}

/// [`testbed`] with environment variables set.
fn testbed_with(args: &[&str], vars: &[(&str, &str)]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_holdfast-testbed"));
    command.args(args).env_remove("SIMULATOR_SEED").env_remove("HOLDFAST_TESTBED_BUILT_WITH");
    command.envs(vars.iter().copied());
    let ChildOutput { status, elapsed, stdout, stderr } =
        RealEnv::output_within(&mut command, Some(RUN_TIMEOUT)).expect("the fixture binary starts");
    let status = status.unwrap_or_else(|| panic!("{args:?} hung: killed after {elapsed:?}"));
    let (stdout, stderr) = (String::from_utf8_lossy(&stdout).into_owned(), String::from_utf8_lossy(&stderr).into());
    Run { code: status.code(), stdout, stderr }
}

/// Stdout parsed as exactly one JSON object: nothing before or after it.
fn one_object(run: &Run) -> Value {
    let value: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("stdout is not one JSON object ({error}): {}", run.stdout));
    assert!(value.is_object(), "{value}");
    value
}

fn scratch(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()))
}

fn write(path: &Path, text: &str) {
    let file = RealEnv::new().open(path, OpenOptions::create_truncate()).expect("scratch file");
    file.write_all_at(0, text.as_bytes()).expect("written");
}

/// (seed, step, phase, invariant) of each failure in a JSON summary, in order.
fn failures(summary: &Value) -> Vec<(u64, u64, String, String)> {
    let list = summary["failures"].as_array().expect("a failure list");
    let field = |failure: &Value, name: &str| failure[name].as_str().expect("a string field").to_string();
    let number = |failure: &Value, name: &str| failure[name].as_u64().expect("a number field");
    list.iter()
        .map(|failure| {
            (number(failure, "seed"), number(failure, "step"), field(failure, "phase"), field(failure, "invariant"))
        })
        .collect()
}

fn replay_command(summary: &Value, seed: u64) -> String {
    summary["replay_commands"][seed.to_string()].as_str().unwrap_or_else(|| panic!("no replay for {seed}")).into()
}

#[test]
fn a_failing_shard_prints_one_json_object_and_merge_lists_its_failures_with_replay_commands() {
    // Seeds 1, 3, 5: seed 3 fails at its third operation; seeds 0, 2, 4, 6 pass.
    let failing = testbed(&["--seeds", "0..7", "--shard", "1/2", "--steps", "10", "--json"]);
    assert_eq!(failing.code, Some(1), "{}", failing.stderr);
    let summary = one_object(&failing);
    assert_eq!((summary["seeds_run"].as_u64(), summary["seeds_passed"].as_u64()), (Some(3), Some(2)));
    let planted = failures(&summary);
    assert_eq!(planted.len(), 1, "{planted:?}");
    assert_eq!((planted[0].0, planted[0].2.as_str(), planted[0].3.as_str()), (3, "step", "testbed.planted"));
    assert!(failing.stderr.contains("FAIL seed=3"), "the failure line goes to stderr: {}", failing.stderr);
    assert!(replay_command(&summary, 3).ends_with("--seed 3 --steps 10"), "{}", replay_command(&summary, 3));
    let passing = testbed(&["--seeds", "0..7", "--shard", "0/2", "--steps", "10", "--json"]);
    assert_eq!(passing.code, Some(0), "{}", passing.stderr);
    assert_eq!(failures(&one_object(&passing)), Vec::new());
    let paths = [scratch("testbed-shard-0.json"), scratch("testbed-shard-1.json")];
    write(&paths[0], &passing.stdout);
    write(&paths[1], &failing.stdout);
    let files: Vec<&str> = paths.iter().map(|path| path.to_str().expect("utf-8")).collect();
    let merged = testbed(&[&["merge"][..], &files].concat());
    assert_eq!(merged.code, Some(1), "a merge of a failing shard fails: {}", merged.stdout);
    let line = format!(
        "failed: seed=3 step={} invariant=testbed.planted kind=safety replay: {}",
        planted[0].1,
        replay_command(&summary, 3)
    );
    assert!(merged.stdout.contains(&line), "merge does not list {line:?}: {}", merged.stdout);
    assert!(merged.stdout.contains("seeds: run=7 passed=6 failed=1"), "{}", merged.stdout);
    let whole = testbed(&["--seeds", "0..7", "--steps", "10", "--json"]);
    let merged_json = testbed(&[&["merge", "--json"][..], &files].concat());
    assert_eq!(merged_json.code, Some(1));
    assert_eq!(one_object(&merged_json), one_object(&whole), "merged shards differ from the unsharded swarm");
}

/// Shards run with `--cost-report` merge to the unsharded swarm's summary, cost report included (ADR-0201: the
/// summary's reader refused the report's histograms before).
#[test]
fn merged_shards_keep_their_cost_report() {
    let args = ["--target", "testbed-checkpointer", "--seeds", "0..4", "--steps", "100", "--json", "--cost-report"];
    let mut files = Vec::new();
    for shard in ["0/2", "1/2"] {
        let run = testbed(&[&args[..], &["--shard", shard]].concat());
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        let path = scratch(&format!("testbed-cost-shard-{}.json", &shard[..1]));
        write(&path, &run.stdout);
        files.push(path.to_str().expect("utf-8").to_owned());
    }
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let merged = testbed(&[&["merge", "--json"][..], &files].concat());
    assert_eq!(merged.code, Some(0), "{}", merged.stderr);
    let whole = one_object(&testbed(&args));
    assert!(whole["cost_report"]["latencies"].as_object().is_some_and(|latencies| !latencies.is_empty()), "{whole}");
    assert_eq!(one_object(&merged), whole, "merged shards differ from the unsharded swarm");
}

#[test]
fn merge_refuses_a_shard_file_that_is_not_one_json_object() {
    let shard = testbed(&["--seeds", "0..3", "--steps", "10", "--json"]);
    assert_eq!(shard.code, Some(0), "{}", shard.stderr);
    let path = scratch("testbed-shard-with-text.json");
    write(&path, &format!("FAIL seed=3 step=3 invariant=testbed.planted (safety)\n{}", shard.stdout));
    let merged = testbed(&["merge", path.to_str().expect("utf-8")]);
    assert_eq!(merged.code, Some(2), "{}", merged.stdout);
    assert!(merged.stderr.contains("not a swarm --json summary"), "{}", merged.stderr);
}

/// The stuck seed 7 and the failing seed 3 of a ten-seed swarm, as a JSON summary lists them.
fn assert_stuck_and_planted(run: &Run, stuck_phase: &str) -> Value {
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let summary = one_object(run);
    assert_eq!((summary["seeds_run"].as_u64(), summary["seeds_passed"].as_u64()), (Some(10), Some(8)));
    let found = failures(&summary);
    let names: Vec<(u64, &str, &str)> =
        found.iter().map(|(seed, _, phase, name)| (*seed, phase.as_str(), name.as_str())).collect();
    assert_eq!(names, vec![(3, "step", "testbed.planted"), (7, stuck_phase, "liveness.stuck")]);
    assert_eq!(summary["failures"][1]["kind"], "liveness");
    assert!(replay_command(&summary, 7).ends_with("--seed 7 --steps 10 --seed-timeout 3"), "{summary}");
    summary
}

#[test]
fn a_seed_spinning_without_env_is_reported_stuck_and_the_swarm_finishes() {
    let run = testbed(&["--seeds", "0..10", "--steps", "10", "--jobs", "2", "--seed-timeout", "3", "--json"]);
    let summary = assert_stuck_and_planted(&run, "step");
    // In-process, the watchdog knows where the seed got stuck: the step of its third operation.
    let step = summary["failures"][1]["step"].as_u64().expect("a step");
    assert!(step >= 2, "stuck at step {step}, before its third operation could run");
    assert!(run.stderr.contains("FAIL seed=7") && run.stderr.contains("liveness.stuck"), "{}", run.stderr);
    let one_job = testbed(&["--seeds", "0..10", "--steps", "10", "--jobs", "1", "--seed-timeout", "3", "--json"]);
    assert_eq!(one_object(&one_job), summary, "--jobs changed the summary of a swarm with a stuck seed");
}

#[test]
fn an_isolated_swarm_kills_the_stuck_child_and_finishes() {
    let args = ["--seeds", "0..10", "--steps", "10", "--jobs", "2", "--seed-timeout", "3", "--json"];
    let isolated = testbed(&[&args[..], &["--isolate"]].concat());
    let summary = assert_stuck_and_planted(&isolated, "process");
    assert!(summary["failures"][1]["actual"].as_str().expect("actual").contains("was killed"), "{summary}");
    let in_process = one_object(&testbed(&args));
    assert_eq!(summary["digest"], in_process["digest"], "a stuck seed counts the same in and out of process");
}

/// An isolated swarm's children run with every option the swarm was given (the persistence model, the sector
/// size, the device, the cost report): their merged summary is the in-process swarm's (ADR-0201). The two models
/// differ on these seeds, so a child that ran the default model would not agree.
#[test]
fn an_isolated_swarm_runs_its_children_with_the_options_it_was_given() {
    let args =
        ["--target", "testbed-checkpointer", "--seeds", "0..4", "--steps", "200", "--json", "--sector-size", "4096"];
    let summary = |extra: &[&str]| {
        let run = testbed(&[&args[..], &["--device", "hdd", "--cost-report"], extra].concat());
        assert_eq!(run.code, Some(0), "{extra:?}: {}\n{}", run.stdout, run.stderr);
        one_object(&run)
    };
    let posix = summary(&["--persistence", "posix"]);
    let ordered = summary(&["--persistence", "ext4-ordered"]);
    let isolated = summary(&["--persistence", "ext4-ordered", "--isolate"]);
    assert_ne!(posix["coverage"], ordered["coverage"], "these seeds must tell the two models apart");
    assert_eq!(isolated["coverage"], ordered["coverage"], "a child ran another model");
    assert_eq!(isolated["cost_report"], ordered["cost_report"], "a child priced its IO on another device");
    assert!(ordered["cost_report"].as_object().is_some_and(|report| !report.is_empty()), "{ordered}");
    assert_eq!((isolated["seeds_run"].as_u64(), isolated["digest"].clone()), (Some(4), ordered["digest"].clone()));
}

#[test]
fn a_single_stuck_seed_fails_with_its_replay_command() {
    let run = testbed(&["--seed", "7", "--steps", "10", "--seed-timeout", "3"]);
    assert_eq!(run.code, Some(1), "{}", run.stdout);
    assert!(run.stdout.contains("invariant: liveness.stuck (liveness)"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("replay: cargo run -p holdfast --bin holdfast-testbed -- --seed 7 --steps 10 --seed-timeout 3"),
        "{}",
        run.stdout
    );
    let passing = testbed(&["--seed", "6", "--steps", "10", "--seed-timeout", "3"]);
    assert_eq!(passing.code, Some(0), "{}", passing.stdout);
    assert!(passing.stdout.contains("result: pass"), "{}", passing.stdout);
}

#[test]
fn the_watchdog_is_on_by_default_scaled_by_steps_and_off_with_zero() {
    let parse = |args: &[&str]| {
        <holdfast::cli::Args as clap::Parser>::try_parse_from([&["testbed"][..], args].concat()).expect("valid flags")
    };
    assert_eq!(parse(&[]).seed_timeout(), Some(Duration::from_secs(300)), "1000 steps");
    assert_eq!(parse(&["--steps", "10"]).seed_timeout(), Some(Duration::from_secs(300)), "the floor");
    assert_eq!(parse(&["--steps", "5000"]).seed_timeout(), Some(Duration::from_secs(1500)), "300 s per 1000 steps");
    assert_eq!(parse(&["--steps", "5001"]).seed_timeout(), Some(Duration::from_secs(1800)), "rounded up");
    assert_eq!(parse(&["--seed-timeout", "5"]).seed_timeout(), Some(Duration::from_secs(5)));
    assert_eq!(parse(&["--seed-timeout", "0"]).seed_timeout(), None);
    let help = testbed(&["--help"]);
    assert!(help.stdout.contains("--seed-timeout <SECONDS>"), "{}", help.stdout);
}

/// `(before, after)` of the `shrunk: <before> -> <after> steps` line.
fn shrunk_counts(stdout: &str) -> (usize, usize) {
    let line = stdout.lines().find_map(|line| line.strip_prefix("shrunk: ")).expect("a shrunk line");
    let (before, after) = line.trim_end_matches(" steps").split_once(" -> ").expect("A -> B");
    (before.parse().expect("a count"), after.parse().expect("a count"))
}

/// A swarm's `--shrink` starts from its shortest failing run (ADR-0193): the seed whose failure came at the
/// fewest steps, whatever its place in the range; with `--stop-on-failure`, the first failure.
#[test]
fn a_swarm_shrinks_its_shortest_failing_run() {
    let args = ["--target", "testbed-pinned", "--seeds", "0..10", "--steps", "200", "--jobs", "2", "--shrink"];
    let run = testbed(&args);
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let failed: Vec<(u64, u64)> = run
        .stdout
        .lines()
        .filter_map(|line| line.strip_prefix("failed: seed="))
        .map(|rest| {
            let (seed, rest) = rest.split_once(" step=").expect("seed then step");
            let step = rest.split_once(' ').expect("fields after the step").0;
            (step.parse().expect("a step"), seed.parse().expect("a seed"))
        })
        .collect();
    assert!(failed.len() >= 3, "several seeds of 0..10 fail: {}", run.stdout);
    let (step, seed) = *failed.iter().min().expect("failures");
    assert_ne!(
        seed,
        failed.iter().map(|(_, seed)| *seed).min().expect("failures"),
        "the lowest seed is not the shortest"
    );
    let expected = format!("shrinking: seed {seed} ({} steps)", step + 1);
    assert!(run.stdout.contains(&expected), "wanted {expected:?} in {}", run.stdout);
    let first = testbed(&[&args[..6], &["--shrink", "--stop-on-failure"]].concat());
    assert!(first.stdout.contains("shrinking: seed 0 ("), "--stop-on-failure shrinks the first: {}", first.stdout);
}

/// `--shrink --save-schedule FILE` writes the minimal schedule, not the one that first failed: its replay runs
/// exactly the shrunk count of steps and fails the same way.
#[test]
fn shrink_with_save_schedule_writes_the_minimal_schedule() {
    let path = scratch("testbed-shrunk-schedule.json");
    let file = path.to_str().expect("utf-8");
    let args = ["--target", "testbed-pinned", "--seed", "0", "--steps", "200", "--shrink", "--save-schedule", file];
    let run = testbed(&args);
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let (before, after) = shrunk_counts(&run.stdout);
    assert!(after < before, "seed 0 must shrink: {before} -> {after}");
    assert!(
        run.stdout.contains(&format!("schedule saved: {file} ({after} steps, the minimal schedule)")),
        "{}",
        run.stdout
    );
    let replay = testbed(&["--target", "testbed-pinned", "--replay", file]);
    assert_eq!(replay.code, Some(1), "the minimal schedule still fails: {}", replay.stdout);
    assert!(replay.stdout.contains(&format!("replay: {file} seed: 0 steps: {after}\n")), "{}", replay.stdout);
    assert!(replay.stdout.contains("invariant: testbed.drew_zero"), "{}", replay.stdout);
    let unshrunk = testbed(&["--target", "testbed-pinned", "--seed", "0", "--steps", "200", "--save-schedule", file]);
    assert!(unshrunk.stdout.contains(&format!("schedule saved: {file} ({before} steps)")), "{}", unshrunk.stdout);
}

/// A target that pins findings as `fail`, in a binary built with a feature (`built_with`): `--save` is refused
/// before anything runs, saying why and what to do (ADR-0115); the same target saves in a build without the
/// feature, and a target that expects `pass` saves in the build with it.
#[test]
fn save_refuses_to_pin_fail_in_a_build_with_features() {
    let dir = scratch("testbed-seeds");
    let seeds = dir.to_str().expect("utf-8");
    let save = |target: &str, seed: &str, name: &str, built_with: bool| {
        let args =
            ["--target", target, "--seed", seed, "--steps", "200", "--shrink", "--save", name, "--adr", "ADR-0115"];
        let mut vars = vec![("SIMULATOR_SEEDS_DIR", seeds)];
        if built_with {
            vars.push(("HOLDFAST_TESTBED_BUILT_WITH", "1"));
        }
        testbed_with(&args, &vars)
    };
    let refused = save("testbed-pinned", "0", "pinned-featured", true);
    assert_eq!(refused.code, Some(2), "{}{}", refused.stdout, refused.stderr);
    for needed in ["FINDINGS_EXPECT_FAIL", "--features planted-bug", "canary", "ADR-0115", "without --features"] {
        assert!(refused.stderr.contains(needed), "the refusal does not say {needed:?}: {}", refused.stderr);
    }
    assert!(refused.stdout.is_empty(), "refused before running: {}", refused.stdout);
    assert!(!RealEnv::new().exists(&dir.join("pinned-featured.json")).expect("stat"), "nothing saved");
    let pinned = save("testbed-pinned", "0", "pinned-plain", false);
    assert_eq!(pinned.code, Some(1), "{}{}", pinned.stdout, pinned.stderr);
    let file = read_json(&dir.join("pinned-plain.json"));
    assert_eq!(file["expect"]["fail"]["invariant"], "testbed.drew_zero", "{file}");
    let pass = save("testbed", "3", "pass-featured", true);
    assert_eq!(pass.code, Some(1), "{}{}", pass.stdout, pass.stderr);
    assert!(pass.stdout.contains("test: cargo test --features planted-bug --test seeds"), "{}", pass.stdout);
    assert_eq!(read_json(&dir.join("pass-featured.json"))["expect"], "pass");
}

fn read_json(path: &Path) -> Value {
    let bytes = RealEnv::new().open(path, OpenOptions::read()).and_then(|file| file.read_all()).expect("readable");
    serde_json::from_slice(&bytes).expect("JSON")
}

#[test]
fn a_swarm_whose_stderr_is_not_a_terminal_prints_progress_lines() {
    // The test's stderr is a pipe: the bar is hidden, and plain lines take its place.
    let every_seed = testbed(&["--seeds", "0..7", "--steps", "10", "--progress-seconds", "0"]);
    assert_eq!(every_seed.code, Some(1), "{}", every_seed.stderr);
    let lines: Vec<&str> = every_seed.stderr.lines().filter(|line| line.starts_with("swarm progress: ")).collect();
    assert_eq!(lines.len(), 7, "one line per seed: {}", every_seed.stderr);
    assert!(lines[6].starts_with("swarm progress: 7/7 seeds, 1 failed, "), "{}", lines[6]);
    assert!(!every_seed.stdout.contains("swarm progress"), "progress stays off stdout: {}", every_seed.stdout);
    // The default interval (10 s) prints the first seed's line and no more in a run this short.
    let default = testbed(&["--seeds", "0..7", "--steps", "10", "--json"]);
    let count = default.stderr.lines().filter(|line| line.starts_with("swarm progress: ")).count();
    assert_eq!(count, 1, "{}", default.stderr);
    assert!(default.stderr.contains("swarm progress: 1/7 seeds, 0 failed, "), "{}", default.stderr);
    one_object(&default);
}

/// A target whose menu cannot be drawn from (its `beyond` quota range is backwards, a target author's mistake) is
/// refused before anything runs: exit 2 with the target, the profile and the field named, for one seed and for a
/// swarm alike, while its valid profile still runs (ADR-0139).
#[test]
fn a_target_whose_fault_menu_is_invalid_is_refused_by_name_before_any_seed_runs() {
    for args in [
        &["--target", "testbed-pinned", "--fault-profile", "beyond", "--seed", "1"][..],
        &["--target", "testbed-pinned", "--fault-profile", "beyond", "--seeds", "0..4", "--jobs", "1"][..],
    ] {
        let run = testbed(args);
        assert_eq!(run.code, Some(2), "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stdout.is_empty(), "{args:?} ran something: {}", run.stdout);
        for named in ["testbed-pinned", "beyond", "disk_quota_bytes", "8192..=4096"] {
            assert!(run.stderr.contains(named), "{args:?}: {named} not in {}", run.stderr);
        }
        assert!(!run.stderr.contains("panicked"), "{args:?}: {}", run.stderr);
    }
    let assumed = testbed(&["--target", "testbed-pinned", "--seed", "1", "--steps", "3"]);
    assert!(assumed.stdout.contains("digest: "), "{}{}", assumed.stdout, assumed.stderr);
}

/// Standard output whose reader is gone (`simulator ... | head` once head exits) ends the run the way SIGPIPE ends
/// a C tool: exit code 141, nothing on stderr, no panic (exit 101 before); the same run with a reader passes.
#[test]
fn a_closed_standard_output_ends_with_sigpipes_exit_code_not_a_panic() {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let output = Command::new(env!("CARGO_BIN_EXE_holdfast-testbed"))
        .args(["--seed", "1", "--steps", "10"])
        .env_remove("SIMULATOR_SEED")
        .stdin(std::process::Stdio::null())
        .stdout(writer)
        .output()
        .expect("the fixture binary starts");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(i32::from(holdfast::cli::out::EXIT_OUTPUT_CLOSED)), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.is_empty(), "a closed pipe is not an error to report: {stderr}");
    let read = testbed(&["--seed", "1", "--steps", "10"]);
    assert_eq!(read.code, Some(0), "{}", read.stderr);
    assert!(read.stdout.contains("digest: "), "{}", read.stdout);
}

/// A plain `std::thread` that calls into a world (`testbed-foreign`) is refused: its panic is printed on stderr
/// with the thread's name by default, and the run fails with its message, exit 1 and not a silent 101; under
/// `--isolate` the failure list shows the child's message (ADR-0169).
#[test]
fn a_foreign_threads_panic_is_printed_and_fails_the_run() {
    let run = testbed(&["--target", "testbed-foreign", "--seed", "0"]);
    assert_eq!(run.code, Some(1), "stdout: {}\nstderr: {}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("simulator: thread 'log-writer' panicked at ")
            && run.stderr.contains("Start threads with env::thread::spawn"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.contains("actual:    thread 'log-writer' panicked: SimEnv driven"), "{}", run.stdout);
    assert!(run.stdout.contains("replay: "), "{}", run.stdout);
    let isolated = testbed(&["--target", "testbed-foreign", "--seeds", "0..3", "--isolate"]);
    assert_eq!(isolated.code, Some(1), "stdout: {}\nstderr: {}", isolated.stdout, isolated.stderr);
    let listed = isolated.stdout.matches("  message: thread 'log-writer' panicked: SimEnv driven").count();
    assert_eq!(listed, 2, "seeds 0 and 2: {}", isolated.stdout);
    // Seed 1 poisons the world: a failure with a verdict and a replay line, exit 1, not a second panic.
    let poisoned = testbed(&["--target", "testbed-foreign", "--seed", "1"]);
    assert_eq!(poisoned.code, Some(1), "stdout: {}\nstderr: {}", poisoned.stdout, poisoned.stderr);
    assert!(poisoned.stdout.contains("actual:    a visitor panicked under the lock"), "{}", poisoned.stdout);
    assert!(poisoned.stdout.contains("replay: ") && !poisoned.stderr.contains("poisoned"), "{}", poisoned.stderr);
}

/// A correct store whose checkpointer thread removes covered segments by path after its directory sync passes:
/// a crash stops the world, so the checkpointer never removes them after the power cut (ADR-0168). Without that,
/// 414 of seeds 0..2000 failed `checkpointer.lost`.
#[test]
fn a_checkpointer_that_removes_files_after_its_directory_sync_passes() {
    let run = testbed(&["--target", "testbed-checkpointer", "--seeds", "0..100"]);
    assert_eq!(run.code, Some(0), "stdout: {}\nstderr: {}", run.stdout, run.stderr);
    assert!(run.stdout.contains("seeds: run=100 passed=100 failed=0"), "{}", run.stdout);
}

/// Papercuts (ADR-0171): `--replay FILE` runs the target the file names (a conflicting `--target` is refused by
/// name), `--check-determinism` on a failing seed says both runs failed and with what (exit 1), and `--help`
/// documents SIMULATOR_PANIC_VERBOSE.
#[test]
fn replay_takes_the_files_target_and_determinism_says_both_runs_failed() {
    let dir = scratch("replay-target");
    RealEnv::new().create_dir_all(&dir).expect("scratch dir");
    let file = dir.join("pinned.json");
    let file_arg = file.to_str().expect("utf-8");
    testbed(&["--target", "testbed-pinned", "--seed", "1", "--save-schedule", file_arg]);
    let replay = testbed(&["--replay", file_arg]);
    assert!(replay.stdout.contains("testbed-pinned: null"), "the file's target ran: {}", replay.stdout);
    let conflict = testbed(&["--replay", file_arg, "--target", "testbed"]);
    assert_eq!(conflict.code, Some(2), "{}", conflict.stderr);
    assert!(conflict.stderr.contains("\"testbed-pinned\""), "{}", conflict.stderr);
    let determinism = testbed(&["--seed", "3", "--check-determinism"]);
    assert_eq!(determinism.code, Some(1), "{}", determinism.stdout);
    for run in ["first", "second"] {
        let line = format!("{run} run failed: testbed.planted (safety)");
        assert!(determinism.stdout.contains(&line), "{line} not in {}", determinism.stdout);
    }
    assert!(testbed(&["--help"]).stdout.contains("SIMULATOR_PANIC_VERBOSE=1"));
}
