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

// ---------------------------------------------------------------------------------------------------------------
// Findings. Each: what the fuzzer found, the exact input, and a direct reproduction with the engine API.
// ---------------------------------------------------------------------------------------------------------------

use engine::manifest::{Manifest, encode_manifest};
use engine::{Db, Options};
use env::{Env, File, OpenOptions, SimEnv};

/// A fresh `SimEnv` whose `/db` holds exactly `files` (durably).
fn directory(files: &[(&str, &[u8])]) -> SimEnv {
    let files: crate::image::Files = files.iter().map(|(name, bytes)| (name.to_string(), bytes.to_vec())).collect();
    crate::image::write_image(0, &files)
}

/// `recovery` finding 1 (2026-05, open): a file named `wal-18446744073709551615.log` (or
/// `table-18446744073709551615.sst`; any name whose number parses as `u64::MAX`) in the database directory makes
/// `Db::open` panic with "attempt to add with overflow" at `engine/src/recovery.rs` (`open`:
/// `listing.highest_number + 1`). Expected: `Err(Error::Corruption)` (or the file ignored), never a panic.
///
/// Fuzzer input (14 bytes; `Image { files: [RawFile { name: 255, bytes: [] }], .. }`, name 255 % 20 = 15):
/// `2821285cff34ffff34ffff282828`.
#[test]
fn recovery_u64_max_file_number_in_directory() {
    crate::image::check_bytes(&crate::from_hex("2821285cff34ffff34ffff282828"));
}

#[test]
fn recovery_u64_max_file_number_in_directory_direct() {
    for name in ["wal-18446744073709551615.log", "table-18446744073709551615.sst"] {
        let env = directory(&[(name, b"")]);
        let _ = Db::open(env, crate::image::DIR, Options::default());
    }
}

/// Probe (not yet found by the fuzzer when written; same family as finding 1): a valid manifest whose
/// `next_file_number` is `u64::MAX`.
#[test]
fn recovery_manifest_next_file_number_u64_max() {
    let manifest = Manifest { next_file_number: u64::MAX, last_sequence: 0, log_number: 0, tables: Vec::new() };
    let env = directory(&[("MANIFEST", &encode_manifest(&manifest))]);
    let _ = Db::open(env, crate::image::DIR, Options::default());
}

/// Probe: a valid manifest whose `last_sequence` is past `SEQUENCE_MAX`; the database opens, then a write.
#[test]
fn recovery_manifest_last_sequence_past_max_then_put() {
    for last_sequence in [engine::SEQUENCE_MAX, u64::MAX] {
        let manifest = Manifest { next_file_number: 2, last_sequence, log_number: 0, tables: Vec::new() };
        let env = directory(&[("MANIFEST", &encode_manifest(&manifest))]);
        if let Ok(db) = Db::open(env, crate::image::DIR, Options::default()) {
            let _ = db.put(b"k", b"v");
            let _ = db.flush();
            let _ = db.close();
        }
    }
}

fn batch_record(first_sequence: u64, key: &[u8], value: &[u8], synced_offset: u64) -> Vec<u8> {
    use engine::wal::{Batch, BatchWrite, RecordKind, encode_batch, encode_record};
    let write = BatchWrite { kind: engine::ValueKind::Put, key: key.to_vec(), value: value.to_vec() };
    let batch = Batch { first_sequence, writes: vec![write] };
    encode_record(RecordKind::Batch, &encode_batch(&batch), synced_offset)
}

/// `recovery` finding 2 (open): a log record whose batch sequence is above `SEQUENCE_MAX` is replayed, and the
/// recovered memtable's flush panics in `TableBuilder::add` (`engine/src/sstable/builder.rs`: "sequence
/// 72057594037927936 above SEQUENCE_MAX"), via `recovery::open` → `install_recovered` → `jobs::write_table`.
/// `decode_batch` checks only `first_sequence != 0` and no u64 overflow. Expected: `Error::Corruption` naming the
/// segment. (The fuzzer's image: a real database, one bit flipped in its log, checksums recomputed.)
#[test]
fn recovery_wal_sequence_above_sequence_max() {
    let segment = batch_record(engine::SEQUENCE_MAX + 1, b"k", b"v", 0);
    let env = directory(&[("wal-000001.log", &segment)]);
    let _ = Db::open(env, crate::image::DIR, Options::default());
}

/// `recovery` finding 3 (open): a log holding the same batch twice (same key, same sequence) — e.g. a segment
/// duplicated into the next segment number, or a record repeated — panics in `Memtable::insert`
/// (`engine/src/memtable.rs`: "version inserted twice") via `recovery::replay_logs`. Expected:
/// `Error::Corruption` (sequences in the log must strictly increase).
#[test]
fn recovery_wal_duplicate_sequence() {
    let first = batch_record(1, b"k", b"v", 0);
    let mut segment = first.clone();
    segment.extend_from_slice(&batch_record(1, b"k", b"v", first.len() as u64));
    let env = directory(&[("wal-000001.log", &segment)]);
    let _ = Db::open(env, crate::image::DIR, Options::default());
}

/// Finding 3 across two segments: `wal-000001.log` sealed, `wal-000002.log` a copy of its batch.
#[test]
fn recovery_wal_duplicate_sequence_across_segments() {
    let first = batch_record(1, b"k", b"v", 0);
    let mut sealed = first.clone();
    sealed.extend_from_slice(&engine::wal::encode_record(engine::wal::RecordKind::Seal, &[], first.len() as u64));
    let env = directory(&[("wal-000001.log", &sealed), ("wal-000002.log", &first)]);
    let _ = Db::open(env, crate::image::DIR, Options::default());
}

/// `recovery` finding 4 (open; same panic as finding 3, different cause): two directory entries whose names parse
/// to the same log number — `wal-000002.log` and `wal-2.log` (`parse_number` accepts any digits, and
/// `recovery::list` does not deduplicate) — make `replay_logs` replay `wal-000002.log` twice: `Memtable::insert`
/// panics with "version inserted twice" (the segment must be sealed, else the first replay of it reports a missing
/// seal). Expected: the non-canonical name ignored (or `Error::Corruption`).
#[test]
fn recovery_two_names_for_one_log_number() {
    let mut segment = batch_record(1, b"k", b"v", 0);
    segment.extend_from_slice(&engine::wal::encode_record(engine::wal::RecordKind::Seal, &[], segment.len() as u64));
    let env = directory(&[("wal-000002.log", &segment), ("wal-2.log", b"")]);
    let _ = Db::open(env, crate::image::DIR, Options::default());
}
