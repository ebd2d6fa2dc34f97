//! The binary: digests across processes, seed syntax, exit codes, replay files, JSON summaries.

use std::path::PathBuf;
use std::process::{Command, Output};

fn simulator(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_simulator"))
        .args(args)
        .env_remove("SIMULATOR_SEED")
        .output()
        .expect("the simulator binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The run's digest: its final line, `digest: <16 hex digits>`.
fn digest(output: &Output) -> String {
    let text = stdout(output);
    let last = text.lines().last().unwrap_or_default().to_string();
    let hex = last.strip_prefix("digest: ").unwrap_or_else(|| panic!("last line is not a digest: {text}"));
    assert_eq!(hex.len(), 16, "{last}");
    assert!(hex.chars().all(|c| c.is_ascii_hexdigit()), "{last}");
    hex.to_string()
}

fn scratch(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()))
}

#[test]
fn same_seed_same_digest_across_processes() {
    let first = simulator(&["--seed", "42", "--steps", "300"]);
    let second = simulator(&["--seed", "42", "--steps", "300"]);
    assert_eq!(first.status.code(), Some(0), "{}", stdout(&first));
    assert_eq!(digest(&first), digest(&second));
    let other = simulator(&["--seed", "43", "--steps", "300"]);
    assert_ne!(digest(&first), digest(&other), "different seeds gave one digest");
}

#[test]
fn hex_and_decimal_seeds_are_the_same_seed() {
    let hex = simulator(&["--seed", "0xDEADBEEF", "--steps", "200"]);
    let decimal = simulator(&["--seed", "3735928559", "--steps", "200"]);
    assert_eq!(digest(&hex), digest(&decimal));
    let from_env = Command::new(env!("CARGO_BIN_EXE_simulator"))
        .args(["--steps", "200"])
        .env("SIMULATOR_SEED", "0xdeadbeef")
        .output()
        .expect("runs");
    assert_eq!(digest(&from_env), digest(&hex), "SIMULATOR_SEED is not honoured");
}

#[test]
fn bad_input_exits_2_with_a_message() {
    for args in [
        vec!["--seed", "banana"],
        vec!["--seeds", "5..2"],
        vec!["--seeds", "1-3"],
        vec!["--seeds", "0..4", "--shard", "3/2"],
        vec!["--replay", "/nonexistent/schedule.json"],
        vec!["--no-such-flag"],
        vec!["--target", "txn", "--fault-profile", "beyond"],
        vec!["--target", "redb", "--fault-profile", "everything"],
        vec!["--target", "nosuch"],
        vec!["--canary", "nosuch"],
        vec!["--seed", "1", "--save", "x"],
    ] {
        let output = simulator(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stdout(&output));
        assert!(!output.stderr.is_empty(), "{args:?} printed no message");
    }
}

#[test]
fn the_engine_has_a_beyond_profile() {
    let output = simulator(&["--fault-profile", "beyond", "--seed", "58", "--steps", "200"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert!(stdout(&output).contains("profile=beyond"), "{}", stdout(&output));
}

#[test]
fn saved_schedules_replay_and_traces_have_one_line_per_step() {
    let schedule = scratch("schedule.json");
    let trace = scratch("trace.jsonl");
    let schedule_arg = schedule.to_str().expect("utf-8");
    let trace_arg = trace.to_str().expect("utf-8");
    let generated =
        simulator(&["--seed", "8", "--steps", "150", "--save-schedule", schedule_arg, "--trace", trace_arg]);
    assert_eq!(generated.status.code(), Some(0), "{}", stdout(&generated));
    let replayed = simulator(&["--replay", schedule_arg]);
    assert_eq!(replayed.status.code(), Some(0), "{}", stdout(&replayed));
    assert_eq!(digest(&generated), digest(&replayed));
    let lines = simulator_read(&trace);
    assert_eq!(lines.lines().count(), 150);
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().expect("a line")).expect("json line");
    assert_eq!(first["step"], 0);
    assert!(first["op"]["op"].is_string() && first["result"]["result"].is_string(), "{first}");
}

fn simulator_read(path: &std::path::Path) -> String {
    use holdfast::env::{Env, File, OpenOptions, RealEnv};
    let file = RealEnv::new().open(path, OpenOptions::read()).expect("trace exists");
    String::from_utf8(file.read_all().expect("readable")).expect("utf-8")
}

#[test]
fn swarm_json_summary_and_determinism_check() {
    let output = simulator(&["--seeds", "0..4", "--steps", "100", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    let summary: serde_json::Value = serde_json::from_str(stdout(&output).trim()).expect("one JSON object");
    assert_eq!(summary["seeds_run"], 4);
    assert_eq!(summary["failures"].as_array().map(Vec::len), Some(0));
    assert!(summary["coverage"]["flushes"].is_u64(), "{summary}");
    let text = simulator(&["--seeds", "0..3", "--shard", "1/2", "--steps", "100"]);
    assert!(stdout(&text).contains("seeds: run=1 passed=1 failed=0"), "{}", stdout(&text));
    let check = simulator(&["--seed", "5", "--steps", "200", "--check-determinism"]);
    assert_eq!(check.status.code(), Some(0));
    assert!(stdout(&check).contains("determinism: ok"), "{}", stdout(&check));
}

#[test]
fn help_explains_every_flag() {
    let output = simulator(&["--help"]);
    assert_eq!(output.status.code(), Some(0));
    let help = stdout(&output);
    for flag in [
        "--seed",
        "--steps",
        "--seeds",
        "--stop-on-failure",
        "--shard",
        "--json",
        "--require-coverage",
        "--require-probes",
        "--replay",
        "--trace",
        "--save-schedule",
        "--check-determinism",
        "--bench",
        "--fault-profile",
        "--isolate",
        "--seed-timeout",
        "--dot",
        "--canary",
        "--persistence",
        "--sector-size",
        "--export-image",
        "Targets:",
        "engine",
        "txn",
    ] {
        assert!(help.contains(flag), "--help does not mention {flag}");
    }
}

/// A default build refuses `--target redb` with a message that says how to build it; a `redb` build runs it, and
/// an isolated swarm (each seed a child process) agrees seed by seed with the in-process one.
#[test]
fn redb_target_needs_its_feature_and_isolated_swarms_agree() {
    let run = simulator(&["--target", "redb", "--seed", "3", "--steps", "100"]);
    if cfg!(not(feature = "redb")) {
        assert_eq!(run.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&run.stderr).contains("--features redb"), "no build hint");
        return;
    }
    assert_eq!(run.status.code(), Some(0), "{}", stdout(&run));
    let in_process = simulator(&["--target", "redb", "--seeds", "0..4", "--steps", "100", "--json"]);
    let isolated = simulator(&["--target", "redb", "--seeds", "0..4", "--steps", "100", "--json", "--isolate"]);
    let summary = |output: &Output| -> serde_json::Value {
        serde_json::from_str(stdout(output).lines().last().unwrap_or_default()).expect("a JSON summary")
    };
    let (a, b) = (summary(&in_process), summary(&isolated));
    assert_eq!(a["seeds_run"], 4);
    assert_eq!(a["seeds_passed"], b["seeds_passed"]);
    assert_eq!(a["coverage"], b["coverage"], "coverage differs between in-process and isolated runs");
}

/// `--jobs N` changes nothing but the wall time: the JSON summary (failures, coverage, digest) is the same.
#[test]
fn jobs_do_not_change_the_summary() {
    let one = simulator(&["--seeds", "0..6", "--steps", "150", "--json", "--jobs", "1"]);
    let two = simulator(&["--seeds", "0..6", "--steps", "150", "--json", "--jobs", "2"]);
    let three = simulator(&["--target", "txn", "--seeds", "0..6", "--steps", "150", "--json", "--jobs", "3"]);
    let one_txn = simulator(&["--target", "txn", "--seeds", "0..6", "--steps", "150", "--json", "--jobs", "1"]);
    assert_eq!(one.status.code(), Some(0), "{}", stdout(&one));
    assert_eq!(stdout(&one), stdout(&two), "--jobs 2 changed the engine swarm's summary");
    assert_eq!(stdout(&one_txn), stdout(&three), "--jobs 3 changed the txn swarm's summary");
    let bad = simulator(&["--seeds", "0..2", "--jobs", "0"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// `merge` folds shard summaries into the unsharded one: the same seeds, coverage and digest.
#[test]
fn merged_shards_equal_the_unsharded_swarm() {
    let whole = simulator(&["--seeds", "0..7", "--steps", "120", "--json"]);
    let mut files = Vec::new();
    for shard in ["0/2", "1/2"] {
        let output = simulator(&["--seeds", "0..7", "--steps", "120", "--json", "--shard", shard]);
        assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
        let path = scratch(&format!("shard-{}.json", shard.replace('/', "-")));
        write(&path, &stdout(&output));
        files.push(path);
    }
    let paths: Vec<&str> = files.iter().map(|path| path.to_str().expect("utf-8")).collect();
    let merged = simulator(&[&["merge", "--json"][..], &paths].concat());
    assert_eq!(merged.status.code(), Some(0), "{}", stdout(&merged));
    let value = |output: &Output| -> serde_json::Value { serde_json::from_str(stdout(output).trim()).expect("JSON") };
    assert_eq!(value(&merged), value(&whole), "merged shards differ from the unsharded swarm");
    let text = simulator(&[&["merge"][..], &paths].concat());
    let digest_line = stdout(&text).lines().last().unwrap_or_default().to_string();
    assert_eq!(digest_line, format!("digest: {}", value(&whole)["digest"].as_str().expect("a digest")));
    let missing = simulator(&["merge", "/nonexistent/shard.json"]);
    assert_eq!(missing.status.code(), Some(2), "{}", stdout(&missing));
}

fn write(path: &std::path::Path, text: &str) {
    use holdfast::env::{Env, File, OpenOptions, RealEnv};
    let file = RealEnv::new().open(path, OpenOptions::create_truncate()).expect("scratch file");
    file.write_all_at(0, text.as_bytes()).expect("written");
}

/// `--bench` prints one line per target in the documented form, then the figures older tools read.
#[test]
fn bench_prints_one_line_per_target_and_the_totals() {
    let output = simulator(&["--bench", "--seeds", "0..3", "--steps", "100"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    let text = stdout(&output);
    for target in ["engine", "txn"] {
        let prefix = format!("swarm target={target} seeds=3 seeds_per_second=");
        let line = text.lines().find(|line| line.starts_with(&prefix)).unwrap_or_else(|| panic!("{text}"));
        let keys: Vec<&str> =
            line.split(' ').skip(1).map(|field| field.split('=').next().unwrap_or_default()).collect();
        let want = ["target", "seeds", "seeds_per_second", "work_steps_per_second", "median_seed_ms", "max_seed_ms"];
        assert_eq!(keys, [&want[..], &["idle_share", "cpu_work_steps_per_second"]].concat(), "{line}");
        let field = |key: &str| -> f64 {
            let value = line.split(' ').find_map(|field| field.strip_prefix(key)?.strip_prefix('='));
            value.and_then(|value| value.parse().ok()).unwrap_or_else(|| panic!("{key} in {line}"))
        };
        assert!((0.0..=1.0).contains(&field("idle_share")), "{line}");
        assert!(field("cpu_work_steps_per_second") > 0.0, "{line}");
    }
    assert!(text.lines().any(|line| line.starts_with("steps_per_second: ")), "{text}");
    assert!(text.lines().any(|line| line.starts_with("speedup_vs_real_io: ")), "{text}");
}

/// `--bench`'s guards (ADR-0100): loose bounds pass; a steps floor no engine meets, or a guard naming a target
/// the run did not bench (none is named `no-such-target`, whatever features the binary has), exits 1 with a message naming the guard.
#[test]
fn bench_guards_pass_within_bounds_and_exit_1_past_them() {
    let bench = ["--bench", "--seeds", "0..3", "--steps", "100"];
    let loose = simulator(
        &[&bench[..], &["--max-seed-ratio", "engine=1000", "--min-steps-ratio", "engine/txn=0.001"]].concat(),
    );
    assert_eq!(loose.status.code(), Some(0), "{}", String::from_utf8_lossy(&loose.stderr));
    let tight = simulator(
        &[&bench[..], &["--min-steps-ratio", "engine/txn=1000", "--max-seed-ratio", "no-such-target=5"]].concat(),
    );
    let stderr = String::from_utf8_lossy(&tight.stderr);
    assert_eq!(tight.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("error: --min-steps-ratio: engine ran "), "{stderr}");
    assert!(stderr.contains("error: --max-seed-ratio: target no-such-target was not benched"), "{stderr}");
    let bad = simulator(&[&bench[..], &["--min-steps-ratio", "engine=0.3"]].concat());
    assert_eq!(bad.status.code(), Some(2), "a malformed guard is bad input");
}

/// The probes the engine target declares: the engine's, less the ones only transactions reach (ADR-0103).
fn engine_probes_declared() -> Vec<&'static str> {
    let declared: Vec<&str> =
        engine::PROBES.iter().copied().filter(|probe| !engine_target::TRANSACTION_PROBES.contains(probe)).collect();
    assert!(!declared.is_empty() && declared.len() < engine::PROBES.len());
    declared
}

/// A swarm's summary says how many of the engine's declared probes some seed hit and names the others; `--json`
/// carries the declared list and the never-hit list; `--require-probes` fails while some probe is never hit.
#[test]
fn swarm_summary_reports_probes_hit_and_never_hit() {
    let text = simulator(&["--seeds", "0..20", "--steps", "200"]);
    assert_eq!(text.status.code(), Some(0), "{}", stdout(&text));
    let out = stdout(&text);
    let line = out.lines().find(|line| line.starts_with("probes: ")).unwrap_or_else(|| panic!("no probes line: {out}"));
    let counts: Vec<u64> = line.split(' ').filter_map(|word| word.parse().ok()).collect();
    let [hit, declared] = counts[..] else { panic!("not `probes: H of D hit`: {line}") };
    assert!(line.ends_with(" hit") && hit > 0 && hit < declared, "{line}");
    assert_eq!(declared, engine_probes_declared().len() as u64);
    let never: Vec<&str> = out
        .lines()
        .find_map(|line| line.strip_prefix("never hit: "))
        .unwrap_or_else(|| panic!("no never-hit line: {out}"))
        .split(", ")
        .collect();
    assert_eq!(never.len() as u64, declared - hit);
    assert!(never.windows(2).all(|pair| pair[0] < pair[1]), "never-hit probes not sorted: {never:?}");
    let json = simulator(&["--seeds", "0..20", "--steps", "200", "--json", "--require-probes"]);
    assert_eq!(json.status.code(), Some(1), "--require-probes passed with probes never hit: {}", stdout(&json));
    let summary: serde_json::Value = serde_json::from_str(stdout(&json).trim()).expect("one JSON object");
    assert_eq!(summary["declared_probes"].as_array().map(Vec::len), Some(engine_probes_declared().len()));
    let never_json: Vec<&str> =
        summary["probes_never_hit"].as_array().expect("a list").iter().filter_map(|name| name.as_str()).collect();
    assert_eq!(never_json, never);
    let missing = summary["missing_coverage"].as_array().expect("a list");
    assert!(never.iter().all(|name| missing.contains(&serde_json::json!(format!("probe.{name}")))), "{missing:?}");
}

/// `--persistence` and `--sector-size` go into the schedule (a posix one is as before), replay from it, and
/// `--export-image` writes the disk after the last crash and `CRASH.txt` (ADR-0109, ADR-0110, ADR-0111).
#[test]
fn persistence_models_sector_sizes_and_exported_images() {
    let posix = simulator(&["--seed", "4", "--steps", "200"]);
    let page = simulator(&["--seed", "4", "--steps", "200", "--persistence", "page", "--sector-size", "4096"]);
    assert_eq!((posix.status.code(), page.status.code()), (Some(0), Some(0)), "{}", stdout(&page));
    assert!(stdout(&page).contains("disk: persistence=page page=4096B sector=4096B"), "{}", stdout(&page));
    // Seed 4 keeps every unsynced write whole at its crashes, so `page` images equal `posix` ones; the journal's
    // in-order metadata of `ext4-ordered` keeps different directory entries.
    let ext4 = simulator(&["--seed", "4", "--steps", "200", "--persistence", "ext4-ordered"]);
    assert_ne!(digest(&posix), digest(&ext4), "the model changed nothing");
    let schedule = scratch("page-schedule.json");
    let schedule_arg = schedule.to_str().expect("utf-8");
    let saved =
        simulator(&["--seed", "4", "--steps", "200", "--persistence", "ext4-ordered", "--save-schedule", schedule_arg]);
    assert!(simulator_read(&schedule).contains("\"ext4-ordered\""), "the model is not in the schedule");
    let image = scratch("image");
    let image_arg = image.to_str().expect("utf-8");
    let replayed = simulator(&["--replay", schedule_arg, "--export-image", image_arg]);
    assert_eq!(digest(&replayed), digest(&saved), "{}", stdout(&replayed));
    assert!(stdout(&replayed).contains("export-image: exported crash"), "{}", stdout(&replayed));
    let report = simulator_read(&image.join("CRASH.txt"));
    assert!(report.contains("seed: 4 (0x4)") && report.contains("model: persistence=ext4-ordered"), "{report}");
    assert!(report.contains("writes kept:") && report.contains("journal:"), "{report}");
    let bad = simulator(&["--seeds", "0..2", "--export-image", image_arg]);
    assert_eq!(bad.status.code(), Some(2), "--export-image with a swarm is bad input");
}

/// `--cost-report` (ADR-0183) prints each cost per kind of step and the simulated latency per kind of IO call;
/// the swarm's digest is the one without it, and `--device` changes the latencies, not the digest (ADR-0181).
#[test]
fn cost_report_prints_each_cost_per_kind_of_step() {
    let plain = simulator(&["--seeds", "0..3", "--steps", "200", "--jobs", "1"]);
    let report = simulator(&["--seeds", "0..3", "--steps", "200", "--jobs", "1", "--cost-report"]);
    assert_eq!(report.status.code(), Some(0), "{}", stdout(&report));
    let text = stdout(&report);
    assert!(text.contains("cost report (per step: p50 p90 p99 max)"), "{text}");
    assert!(text.contains("\n  put (") && text.contains("\n    bytes_written "), "{text}");
    assert!(text.contains("simulated latency per IO call") && text.contains("\n  file_sync "), "{text}");
    assert!(!stdout(&plain).contains("cost report"), "the report is printed only when asked for");
    assert_eq!(digest(&plain), digest(&report), "the report changed the swarm");
    let hdd = simulator(&["--seeds", "0..3", "--steps", "200", "--jobs", "1", "--cost-report", "--device", "hdd"]);
    assert_eq!(digest(&hdd), digest(&plain), "a device profile changed the swarm");
    let sync_line = |text: &str| text.lines().find(|line| line.starts_with("  file_sync ")).map(str::to_string);
    assert_ne!(sync_line(&stdout(&hdd)), sync_line(&text), "hdd syncs priced as nvme's");
    let json = simulator(&["--seeds", "0..2", "--steps", "100", "--jobs", "1", "--cost-report", "--json"]);
    let value: serde_json::Value = serde_json::from_str(stdout(&json).trim()).expect("one JSON object");
    assert!(value["cost_report"]["steps"]["put"]["writes"]["calls"].as_u64().unwrap_or(0) > 0, "{value}");
}
