//! Tidy checks (as rust-analyzer runs them under `cargo test`): determinism is enforced by source, not hoped for
//! (ADR-0002). Clippy's `disallowed-*` lists are the first line; this test is the second, and also checks that
//! the lists themselves name every entry point the project bans.

use std::path::{Path, PathBuf};

use env::{Env, File, OpenOptions, RealEnv};

/// Packages whose sources must not touch nondeterminism directly.
const PACKAGES: &[&str] = &["env", "engine", "simulator", "shrinker", "corpus", "specs", "interpose"];
/// The only files allowed to use the banned items: the RealEnv door, the approved hash map alias, `env`'s own
/// tests and benchmark of RealEnv, which clean up real temporary directories (`Env` has no `remove_dir`), and the
/// `std::fs` oracle the `env::fs` facade is compared with, the interposition crate's tests, which call `std`'s
/// file system, clock, threads and `RandomState` because those are what the crate answers from a world (ADR-0162;
/// its sources stay checked), and the tests of the hooks for threads `env` did not start (ADR-0165), which start
/// those threads as an unmodified program would.
const ALLOWED: &[&str] = &[
    "env/src/real.rs",
    "env/src/sim/foreign_tests.rs",
    "env/src/random.rs",
    "env/tests/integration/tidy.rs",
    "env/tests/integration/real_env.rs",
    "env/tests/integration/fs_std_oracle.rs",
    "env/examples/io_bench.rs",
    "corpus/build.rs",
    "interpose/tests/integration/binding.rs",
    "interpose/tests/integration/clock_random.rs",
    "interpose/tests/integration/files.rs",
    "interpose/tests/integration/outside.rs",
    "interpose/tests/integration/pthread_c.rs",
    "interpose/tests/integration/raw_syscalls.rs",
    "interpose/tests/integration/refusals.rs",
    "interpose/tests/integration/threads.rs",
    "interpose/tests/integration/unix_vfs.rs",
    "interpose/tests/integration/worlds.rs",
];
/// Source patterns that mean nondeterminism entering outside `env`.
const FORBIDDEN: &[&str] = &[
    "Instant::now",
    "SystemTime::now",
    "thread::spawn",
    "thread::sleep",
    "thread::scope",
    "std::fs::",
    "HashMap<",
    "HashSet<",
    "RandomState",
    "thread_rng",
    "OsRng",
    "from_os_rng",
];
/// The prefix of the approved aliases (`env::DeterministicHashMap<K, V>`, `env::DeterministicHashSet<K>`): a
/// forbidden pattern right after it is the approved type, not `std`'s.
const APPROVED_PREFIX: &str = "Deterministic";

/// The prefix of `env`'s own scheduled threads (`env::thread::spawn`, ADR-0104): not `std`'s.
const APPROVED_THREADS: &str = "env::";

/// Whether `code` uses `pattern` other than as the tail of an approved alias's name or `env::thread::spawn`.
fn offends(code: &str, pattern: &str) -> bool {
    code.match_indices(pattern)
        .any(|(at, _)| !code[..at].ends_with(APPROVED_PREFIX) && !code[..at].ends_with(APPROVED_THREADS))
}

/// Paths clippy.toml must ban (the list, spelled out: clippy ignores wildcards).
const REQUIRED_BANS: &[&str] = &[
    "std::time::Instant::now",
    "std::time::SystemTime::now",
    "std::thread::spawn",
    "std::thread::Builder::spawn",
    "std::thread::scope",
    "std::thread::sleep",
    "std::thread::park",
    "std::sync::Condvar::wait",
    "std::sync::Condvar::wait_timeout",
    "std::fs::read",
    "std::fs::write",
    "std::fs::read_dir",
    "std::fs::create_dir_all",
    "std::fs::remove_file",
    "std::fs::rename",
    "std::fs::File",
    "std::fs::OpenOptions",
    "std::collections::hash_map::RandomState::new",
    "std::collections::HashMap",
    "std::collections::HashSet",
];
/// The most files the walk visits (a runaway walk is a bug).
const FILES_MAX: usize = 10_000;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("env lives in the workspace").to_path_buf()
}

fn read_text(env: &RealEnv, path: &Path) -> String {
    let bytes = env.open(path, OpenOptions::read()).and_then(|file| file.read_all()).expect("readable source");
    String::from_utf8(bytes).expect("sources are UTF-8")
}

fn rust_files(env: &RealEnv, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = env.list_dir(dir) else { return };
    for entry in entries {
        assert!(out.len() < FILES_MAX, "tidy walk visited too many files");
        let name = entry.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name == "target" || name.starts_with('.') {
            continue;
        }
        if name.ends_with(".rs") {
            out.push(entry);
        } else if env.list_dir(&entry).is_ok() {
            rust_files(env, &entry, out);
        }
    }
}

#[test]
fn no_forbidden_calls_outside_env() {
    let env = RealEnv::new();
    let root = workspace_root();
    let mut files = Vec::new();
    for package in PACKAGES {
        rust_files(&env, &root.join(package), &mut files);
    }
    assert!(files.len() > 20, "the walk found only {} files: wrong root?", files.len());
    let mut offences = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&root).expect("under root").to_string_lossy().replace('\\', "/");
        if ALLOWED.contains(&relative.as_str()) {
            continue;
        }
        for (number, line) in read_text(&env, file).lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for pattern in FORBIDDEN {
                if offends(code, pattern) {
                    offences.push(format!("{relative}:{}: `{pattern}` in: {}", number + 1, code));
                }
            }
        }
    }
    assert!(offences.is_empty(), "nondeterminism outside env (route it through Env):\n{}", offences.join("\n"));
}

#[test]
fn approved_hash_map_aliases_pass_and_std_maps_do_not() {
    assert!(!offends("slots: env::DeterministicHashMap<Key, u32>,", "HashMap<"));
    assert!(!offends("let set: DeterministicHashSet<u64> = Default::default();", "HashSet<"));
    assert!(offends("slots: HashMap<Key, u32>,", "HashMap<"));
    assert!(offends("let m: std::collections::HashMap<u8, u8>;", "HashMap<"));
    assert!(offends("type A = DeterministicHashMap<u8, u8>; type B = HashMap<u8, u8>;", "HashMap<"));
    assert!(!offends("let worker = env::thread::spawn(&env, \"w\", work);", "thread::spawn"));
    assert!(offends("let worker = std::thread::spawn(work);", "thread::spawn"));
}

#[test]
fn clippy_toml_bans_every_required_path() {
    let env = RealEnv::new();
    let text = read_text(&env, &workspace_root().join("clippy.toml"));
    let missing: Vec<&&str> =
        REQUIRED_BANS.iter().filter(|path| !text.contains(&format!("path = \"{path}\""))).collect();
    assert!(missing.is_empty(), "clippy.toml does not ban: {missing:?}");
    assert!(!text.contains("::*\""), "clippy ignores wildcard paths: list each item");
}
