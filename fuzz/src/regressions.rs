//! Regression tests: every crash the fuzzers found, as its exact input bytes, plus a replay of the committed seed
//! corpus and of `fuzz/regressions/<target>/` (crash artifacts copied there verbatim).
//!
//! Run with `cargo test` from `fuzz/` (stable is enough). To turn a crash artifact into a regression test, either
//! copy the file to `fuzz/regressions/<target>/<short-name>` (replayed by [`replay_regression_files`]), or add a
//! `#[test]` below with the bytes as hex (`xxd -p artifact`), a comment saying what the bug was, and a call to the
//! target's `check` (for `recovery`, `image::check_bytes`).

use std::path::{Path, PathBuf};

/// A harness on raw bytes.
type Check = fn(&[u8]);

const TARGETS: &[(&str, Check)] = &[
    ("wal_decode", crate::wal::check),
    ("sstable_decode", crate::sstable::check),
    ("manifest_decode", crate::manifest::check),
    ("recovery", crate::image::check_bytes),
    ("schedule", crate::schedule::check),
    ("seed_file", crate::seed_file::check),
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
use env::SimEnv;

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
/// Fuzzer input (12 bytes, minimised; also `regressions/recovery/u64-max-file-number`):
/// `Image { files: [RawFile { name: 255, bytes: [] }], .. }`, and `NAMES[255 % 20]` is that log name.
#[test]
fn recovery_u64_max_file_number_in_directory() {
    crate::image::check_bytes(&crate::from_hex("8e8e9e8e0bff8e8e8e0bff8e"));
}

#[test]
fn recovery_u64_max_file_number_in_directory_direct() {
    for name in ["wal-18446744073709551615.log", "table-18446744073709551615.sst"] {
        let env = directory(&[(name, b"")]);
        let _ = Db::open(env, crate::image::DIR, Options::default());
    }
}

/// Finding 1b (open; a direct probe of the same family, not found by the fuzzer itself): a valid manifest whose
/// `next_file_number` is `u64::MAX` makes `Db::open` panic with "attempt to add with overflow" in
/// `recovery::open` (`next_file_number: wal_number + 1`). `decode_manifest` accepts any counter values.
#[test]
fn recovery_manifest_next_file_number_u64_max() {
    let manifest = forged_manifest(u64::MAX, 0);
    assert!(engine::manifest::decode_manifest(&manifest).is_err(), "an out-of-range counter must not decode");
    let env = directory(&[("MANIFEST", &manifest)]);
    let result = Db::open(env, crate::image::DIR, Options::default());
    assert!(matches!(result, Err(engine::Error::Corruption { .. })), "{result:?}");
}

/// A manifest with the given counters and no tables, forged byte by byte: the engine's encoder refuses
/// out-of-range counters (its paired decode check), so hostile inputs are built here.
fn forged_manifest(next_file_number: u64, last_sequence: u64) -> Vec<u8> {
    let valid = Manifest { next_file_number: 2, last_sequence: 0, log_number: 0, tables: Vec::new() };
    let mut bytes = encode_manifest(&valid);
    bytes[20..28].copy_from_slice(&next_file_number.to_le_bytes());
    bytes[28..36].copy_from_slice(&last_sequence.to_le_bytes());
    let crc = crc32fast::hash(&bytes[20..]);
    bytes[16..20].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// Finding 5 (open; a direct probe, reachable by the fuzzer through `write_after_open`): a manifest whose
/// `last_sequence` is `SEQUENCE_MAX` decodes and opens; the next `put` is acknowledged with sequence
/// `SEQUENCE_MAX + 1`, and the `flush` then panics in `TableBuilder::add` (`engine/src/sstable/builder.rs`:
/// "sequence 72057594037927936 above SEQUENCE_MAX"). Expected: `decode_manifest` (or recovery) rejects a
/// `last_sequence` above `SEQUENCE_MAX`, and a write that would exceed `SEQUENCE_MAX` fails with a typed error.
#[test]
fn recovery_manifest_last_sequence_past_max_then_put() {
    for last_sequence in [engine::SEQUENCE_MAX, u64::MAX] {
        let env = directory(&[("MANIFEST", &forged_manifest(2, last_sequence))]);
        if let Ok(db) = Db::open(env, crate::image::DIR, Options::default()) {
            assert_eq!(last_sequence, engine::SEQUENCE_MAX, "a counter above SEQUENCE_MAX must not open");
            let put = db.put(b"k", b"v");
            assert!(matches!(put, Err(engine::Error::Closed { .. })), "sequence exhaustion is a typed error: {put:?}");
            let _ = db.flush();
            let _ = db.close();
        }
    }
}

/// A manifest naming no tables and log number 0 (replay every segment): without one, a directory holding log data
/// is refused before replay (ADR-0073), and these regressions must still reach the replay.
fn manifest() -> Vec<u8> {
    forged_manifest(2, 0)
}

fn batch_record(first_sequence: u64, key: &[u8], value: &[u8], synced_offset: u64) -> Vec<u8> {
    use engine::wal::{Batch, BatchWrite, RecordKind, encode_batch, encode_record};
    let write = BatchWrite { kind: engine::ValueKind::Put, key: key.to_vec(), value: value.to_vec() };
    // Encode a valid batch, then forge its sequence (the encoder refuses out-of-range sequences).
    let mut payload = encode_batch(&Batch { first_sequence: 1, writes: vec![write] });
    payload[0..8].copy_from_slice(&first_sequence.to_le_bytes());
    // A seal's header (a valid empty record), retagged as a batch below.
    let mut record = encode_record(RecordKind::Seal, &[], synced_offset);
    record.truncate(engine::wal::RECORD_HEADER_BYTES);
    record[12] = RecordKind::Batch as u8;
    record[4..8].copy_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    record[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    let header_crc = crc32fast::hash(&record[4..engine::wal::RECORD_HEADER_BYTES]);
    record[0..4].copy_from_slice(&header_crc.to_le_bytes());
    record.extend_from_slice(&payload);
    record
}

/// `recovery` finding 2 (open): a log record whose batch sequence is above `SEQUENCE_MAX` is replayed, and the
/// recovered memtable's flush panics in `TableBuilder::add` (`engine/src/sstable/builder.rs`: "sequence
/// 72057594037927936 above SEQUENCE_MAX"), via `recovery::open` → `install_recovered` → `jobs::write_table`.
/// `decode_batch` checks only `first_sequence != 0` and no u64 overflow. Expected: `Error::Corruption` naming the
/// segment. (The fuzzer's image: a real database, one bit flipped in its log, checksums recomputed.)
#[test]
fn recovery_wal_sequence_above_sequence_max() {
    let segment = batch_record(engine::SEQUENCE_MAX + 1, b"k", b"v", 0);
    let env = directory(&[("MANIFEST", &manifest()), ("wal-000001.log", &segment)]);
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
    let env = directory(&[("MANIFEST", &manifest()), ("wal-000001.log", &segment)]);
    let _ = Db::open(env, crate::image::DIR, Options::default());
}

/// Finding 3 across two segments: `wal-000001.log` sealed, `wal-000002.log` a copy of its batch.
#[test]
fn recovery_wal_duplicate_sequence_across_segments() {
    let first = batch_record(1, b"k", b"v", 0);
    let mut sealed = first.clone();
    sealed.extend_from_slice(&engine::wal::encode_record(engine::wal::RecordKind::Seal, &[], first.len() as u64));
    let env = directory(&[("MANIFEST", &manifest()), ("wal-000001.log", &sealed), ("wal-000002.log", &first)]);
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
    let env = directory(&[("MANIFEST", &manifest()), ("wal-000002.log", &segment), ("wal-2.log", b"")]);
    let _ = Db::open(env, crate::image::DIR, Options::default());
}
