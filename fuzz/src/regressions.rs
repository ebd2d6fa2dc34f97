//! Regression tests: every crash the fuzzers found, as its exact input bytes, plus a replay of the committed seed
//! corpus and of `fuzz/regressions/<target>/` (crash artifacts copied there verbatim).
//!
//! Run with `cargo test` from `fuzz/` (stable is enough). To turn a crash artifact into a regression test, either
//! copy the file to `fuzz/regressions/<target>/<short-name>` (replayed by [`replay_regression_files`]), or add a
//! `#[test]` below with the bytes as hex (`xxd -p artifact`), a comment saying what the bug was, and a call to the
//! target's `check` (for `recovery`, `image::check_bytes`).

use std::path::{Path, PathBuf};

const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("wal_decode", crate::wal::check),
    ("sstable_decode", crate::sstable::check),
    ("manifest_decode", crate::manifest::check),
    ("recovery", crate::image::check_bytes),
];

fn files_under(dir: &Path) -> Vec<PathBuf> {
    #[expect(clippy::disallowed_methods, reason = "test fixtures are real files, not simulated IO")]
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> = entries.filter_map(|entry| entry.ok().map(|entry| entry.path())).collect();
    files.sort();
    files
}

fn replay(kind: &str) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(kind);
    let mut count = 0;
    for (target, check) in TARGETS {
        for path in files_under(&root.join(target)) {
            #[expect(clippy::disallowed_methods, reason = "test fixtures are real files, not simulated IO")]
            let bytes = std::fs::read(&path).expect("read a fixture");
            check(&bytes);
            count += 1;
        }
    }
    count
}

#[test]
fn replay_seed_corpus() {
    assert!(replay("corpus") > 0, "no seed corpus found under fuzz/corpus/");
}

#[test]
fn replay_regression_files() {
    replay("regressions");
}
