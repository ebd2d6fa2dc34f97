//! The engine's own sources, read through `RealEnv`, for the tidy checks (`probes`, `layers`).

use std::path::{Path, PathBuf};

use env::{Env, RealEnv};

/// The most source files the walk visits (a runaway walk is a bug).
const FILES_MAX: usize = 1_000;

pub fn rust_files(env: &RealEnv, dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in env.list_dir(dir).expect("engine/src is listable") {
        assert!(out.len() < FILES_MAX, "the walk visited too many files");
        if entry.extension().is_some_and(|extension| extension == "rs") {
            out.push(entry);
        } else if env.list_dir(&entry).is_ok() {
            rust_files(env, &entry, out);
        }
    }
}

/// Every `.rs` file under `engine/src`, with its text.
pub fn engine_sources(env: &RealEnv) -> Vec<(PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(env, &src, &mut paths);
    assert!(paths.len() > 10, "the walk found only {} files: wrong directory?", paths.len());
    paths
        .into_iter()
        .map(|path| {
            let bytes = env.open(&path, env::OpenOptions::read()).and_then(|file| env::File::read_all(&file));
            let text = String::from_utf8(bytes.expect("readable")).expect("sources are UTF-8");
            (path, text)
        })
        .collect()
}
