//! Generates one test per seed file in `seeds/` (ADR-0031). A file whose target or canary needs a cargo feature
//! that is off becomes a `skipped_<name>_needs_<feature>` test that only parses it, so skipped files are listed
//! by name. Build scripts run at build time, outside any simulated world.
#![expect(clippy::disallowed_methods, reason = "a build script reads the seeds directory")]

use std::path::{Path, PathBuf};

const SEED_FILES_MAX: usize = 10_000;

fn seed_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut paths: Vec<PathBuf> = entries.filter_map(|entry| entry.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        assert!(out.len() < SEED_FILES_MAX, "too many seed files");
        if path.is_dir() {
            seed_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "json") {
            out.push(path);
        }
    }
}

fn ident(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect()
}

fn main() {
    let root = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo")).join("..").join("seeds");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    seed_files(&root, &mut files);
    let features = [
        ("canaries", std::env::var_os("CARGO_FEATURE_CANARIES").is_some()),
        ("redb", std::env::var_os("CARGO_FEATURE_REDB").is_some()),
    ];
    let mut out = String::new();
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
        let relative = file.strip_prefix(&root).expect("under seeds/").with_extension("");
        let name = ident(&relative.to_string_lossy());
        let text = std::fs::read_to_string(file).expect("readable seed file");
        let needs = if text.contains("\"target\": \"redb\"") {
            Some("redb")
        } else if text.contains("\"canary\": \"") {
            Some("canaries")
        } else {
            None
        };
        let path = file.display().to_string().replace('\\', "/");
        match needs.filter(|needed| !features.iter().any(|(feature, on)| feature == needed && *on)) {
            Some(feature) => {
                out.push_str(&format!("#[test]\nfn skipped_{name}_needs_{feature}() {{ parse_only({path:?}); }}\n\n"))
            }
            None => out.push_str(&format!("#[test]\nfn seed_{name}() {{ replay_file({path:?}, {name:?}); }}\n\n")),
        }
    }
    let target = Path::new(&std::env::var("OUT_DIR").expect("set by cargo")).join("seed_tests.rs");
    std::fs::write(target, out).expect("write generated tests");
}
