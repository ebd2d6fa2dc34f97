//! Which source files each model mirrors, and the hash of them a committed check log records (ADR-0060).
//!
//! The files are compiled into this crate (`include_bytes!`), so the hash a log records is the hash of the very
//! code the checker that wrote it ran — the engine code the model calls or mirrors, and the model itself — and
//! `cargo` rebuilds the crate whenever one of them changes. A log whose recorded hash differs from the current one
//! was checked against other code: `tests/models.rs` fails and names the command that regenerates it.

use std::hash::Hasher as _;

use env::StableHasher;

/// One source file a model mirrors: its path from the workspace root and its bytes as compiled.
#[derive(Clone, Copy, Debug)]
pub struct Source {
    pub path: &'static str,
    pub bytes: &'static [u8],
}

macro_rules! source {
    ($path:literal) => {
        Source { path: $path, bytes: include_bytes!(concat!("../../", $path)) }
    };
}

/// `Mvcc`: the transactions, the commit pipeline and the registry (snapshots), the visible sequence readers see
/// (`read_cache.rs`, ADR-0127), the visibility watermark that publishes commits in sequence order (ADR-0133), the
/// write-write check it drives, the read path, and the model.
const MVCC: &[Source] = &[
    source!("engine/src/txn.rs"),
    source!("engine/src/commit.rs"),
    source!("engine/src/state.rs"),
    source!("engine/src/watermark.rs"),
    source!("engine/src/read_cache.rs"),
    source!("engine/src/ssi.rs"),
    source!("engine/src/ssi/cause.rs"),
    source!("engine/src/ssi/index.rs"),
    source!("engine/src/ssi/rules.rs"),
    source!("engine/src/db.rs"),
    source!("specs/src/db/mod.rs"),
    source!("specs/src/db/types.rs"),
    source!("specs/src/db/serial.rs"),
    source!("specs/src/mvcc.rs"),
    source!("specs/src/check.rs"),
];

/// `Ssi`: the conflict tracker it calls, the transactions whose calls it repeats, and the model.
const SSI: &[Source] = &[
    source!("engine/src/ssi.rs"),
    source!("engine/src/ssi/cause.rs"),
    source!("engine/src/ssi/index.rs"),
    source!("engine/src/ssi/rules.rs"),
    source!("engine/src/txn.rs"),
    source!("engine/src/commit.rs"),
    source!("engine/src/state.rs"),
    source!("engine/src/watermark.rs"),
    source!("specs/src/db/mod.rs"),
    source!("specs/src/db/types.rs"),
    source!("specs/src/db/serial.rs"),
    source!("specs/src/ssi.rs"),
    source!("specs/src/check.rs"),
];

/// `Storage`: the log format and its writer (one write per group of pending records, ADR-0134), the manifest,
/// recovery and its pure rules, the flush and install protocol, the simulated disk's crash rules it abstracts, and
/// the model.
const STORAGE: &[Source] = &[
    source!("engine/src/wal.rs"),
    source!("engine/src/wal_writer.rs"),
    source!("engine/src/manifest.rs"),
    source!("engine/src/recovery.rs"),
    source!("engine/src/recovery_rules.rs"),
    source!("engine/src/commit.rs"),
    source!("engine/src/jobs.rs"),
    source!("env/src/sim/disk.rs"),
    source!("specs/src/storage/mod.rs"),
    source!("specs/src/storage/disk.rs"),
    source!("specs/src/storage/recover.rs"),
    source!("specs/src/check.rs"),
];

/// The models with a committed log.
pub const MODELS: [&str; 3] = ["Mvcc", "Ssi", "Storage"];

/// The first line of a log's header.
const HASH_PREFIX: &str = "source_hash: ";

/// The source files `model` mirrors (None: no such model).
pub fn sources(model: &str) -> Option<&'static [Source]> {
    match model {
        "Mvcc" => Some(MVCC),
        "Ssi" => Some(SSI),
        "Storage" => Some(STORAGE),
        _ => None,
    }
}

/// A stable hash of `sources`: each file's path, length and bytes, in order.
pub fn hash_of(sources: &[Source]) -> u64 {
    let mut hasher = StableHasher::new();
    for source in sources {
        hasher.write(source.path.as_bytes());
        hasher.write_u64(source.bytes.len() as u64);
        hasher.write(source.bytes);
    }
    hasher.finish()
}

/// The hash of the sources `model` mirrors, as compiled into this crate.
pub fn source_hash(model: &str) -> Option<u64> {
    sources(model).map(hash_of)
}

/// The command that regenerates `model`'s committed log.
pub fn regenerate_command(model: &str) -> String {
    format!("cargo run -p specs --bin check -- {model}")
}

/// The header a committed log starts with: the source hash, the files it covers, the regeneration command.
pub fn log_header(model: &str) -> Option<String> {
    let sources = sources(model)?;
    let paths: Vec<&str> = sources.iter().map(|source| source.path).collect();
    Some(format!(
        "{HASH_PREFIX}{:016x}\nsource_files: {}\nregenerate: {}\n",
        hash_of(sources),
        paths.join(" "),
        regenerate_command(model)
    ))
}

/// The source hash a log's header records (None: the log has no header, or a malformed one).
pub fn recorded_hash(log: &str) -> Option<u64> {
    let hex = log.lines().next()?.strip_prefix(HASH_PREFIX)?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_records_the_hash_it_is_read_back_as() {
        for model in MODELS {
            let header = log_header(model).expect("a model");
            assert_eq!(recorded_hash(&header), source_hash(model), "{header}");
            assert!(header.contains(&regenerate_command(model)), "{header}");
        }
        assert_eq!(log_header("Nope"), None);
        assert_eq!(recorded_hash("model: Ssi\n"), None);
        assert_eq!(recorded_hash("source_hash: 12\n"), None);
    }

    #[test]
    fn the_hash_changes_with_any_byte_and_with_a_path() {
        let a = [Source { path: "a.rs", bytes: b"fn a() {}" }];
        let edited = [Source { path: "a.rs", bytes: b"fn a() { }" }];
        let moved = [Source { path: "b.rs", bytes: b"fn a() {}" }];
        assert_eq!(hash_of(&a), hash_of(&a));
        assert_ne!(hash_of(&a), hash_of(&edited));
        assert_ne!(hash_of(&a), hash_of(&moved));
        assert_ne!(source_hash("Ssi"), source_hash("Storage"));
    }
}
