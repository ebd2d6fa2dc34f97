//! Whole-table tests: build, write to a simulated disk, open, read; corruption; the cache and the learned index.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use env::{Env, FaultConfig, File, OpenOptions, SimEnv};
use proptest::prelude::*;

use super::*;
use crate::{Entry, Error, InternalKey, Lookup, SEQUENCE_MAX, Sequence, ValueKind};

const TABLE_PATH: &str = "/db/000007.sst";
const FILE_NUMBER: u64 = 7;

fn put(user_key: &[u8], sequence: Sequence, value: &[u8]) -> Entry {
    Entry { key: InternalKey::new(user_key, sequence), kind: ValueKind::Put, value: value.to_vec() }
}

fn delete(user_key: &[u8], sequence: Sequence) -> Entry {
    Entry { key: InternalKey::new(user_key, sequence), kind: ValueKind::Delete, value: Vec::new() }
}

fn build(entries: &[Entry], options: TableOptions) -> Vec<u8> {
    let mut builder = TableBuilder::new(options);
    for entry in entries {
        builder.add(entry);
    }
    assert_eq!(builder.entry_count(), entries.len() as u64);
    builder.finish()
}

fn small_blocks() -> TableOptions {
    TableOptions { block_size_bytes: 64, restart_interval: 3, learned_index_epsilon: 2, ..TableOptions::default() }
}

/// Write `bytes` as a synced file on a fresh simulated disk and open it as a table.
fn open_on_sim(env: &SimEnv, bytes: &[u8], cache: Arc<BlockCache>) -> Result<Table<env::sim::SimFile>, Error> {
    Table::open(write_on_sim(env, bytes), FILE_NUMBER, cache)
}

/// Write `bytes` as a synced file on a fresh simulated disk; the file, open for reading.
fn write_on_sim(env: &SimEnv, bytes: &[u8]) -> env::sim::SimFile {
    let path = Path::new(TABLE_PATH);
    env.create_dir_all(Path::new("/db")).unwrap();
    let file = env.open(path, OpenOptions::create_new()).unwrap();
    file.write_all_at(0, bytes).unwrap();
    file.sync().unwrap();
    drop(file);
    env.open(path, OpenOptions::read()).unwrap()
}

/// The model's answer: the newest version of `user_key` with sequence <= snapshot.
fn model_get(entries: &[Entry], user_key: &[u8], snapshot: Sequence) -> Lookup {
    let newest = entries.iter().find(|entry| entry.key.user_key == user_key && entry.key.sequence <= snapshot);
    match newest {
        None => Lookup::NotFound,
        Some(entry) if entry.kind == ValueKind::Delete => Lookup::Deleted,
        Some(entry) => Lookup::Found(entry.value.clone()),
    }
}

fn sorted_entries() -> impl Strategy<Value = Vec<Entry>> {
    let key = proptest::collection::vec(prop_oneof![Just(b'k'), 0u8..4, any::<u8>()], 0..10);
    let value = proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40));
    proptest::collection::btree_map((key, 0u64..40), value, 1..150).prop_map(|versions| {
        let mut entries: Vec<Entry> = versions
            .into_iter()
            .map(|((key, sequence), value)| match value {
                Some(value) => put(&key, sequence, &value),
                None => delete(&key, sequence),
            })
            .collect();
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        entries
    })
}

fn options() -> impl Strategy<Value = TableOptions> {
    (1usize..400, 1u32..16, 1usize..8, 0u32..6).prop_map(|(block_size_bytes, bits, restart_interval, epsilon)| {
        TableOptions { block_size_bytes, bloom_bits_per_key: bits, restart_interval, learned_index_epsilon: epsilon }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn roundtrip_agrees_with_a_model(entries in sorted_entries(), options in options()) {
        let bytes = build(&entries, options);
        prop_assert_eq!(decode_table(&bytes).unwrap().entries, entries.clone());
        let env = SimEnv::new(1);
        let table = open_on_sim(&env, &bytes, Arc::new(BlockCache::new(1 << 20))).unwrap();
        prop_assert_eq!(table.entry_count(), entries.len() as u64);
        prop_assert_eq!(table.min_user_key(), &entries[0].key.user_key[..]);
        prop_assert_eq!(table.max_user_key(), &entries[entries.len() - 1].key.user_key[..]);
        prop_assert_eq!(table.min_sequence(), entries.iter().map(|e| e.key.sequence).min().unwrap());
        prop_assert_eq!(table.max_sequence(), entries.iter().map(|e| e.key.sequence).max().unwrap());
        prop_assert_eq!(table.file_size_bytes(), bytes.len() as u64);
        prop_assert_eq!(table.iter().collect::<Result<Vec<_>, _>>().unwrap(), entries.clone());
        let mut probes: Vec<Vec<u8>> = entries.iter().map(|e| e.key.user_key.clone()).collect();
        probes.extend([b"".to_vec(), b"k".to_vec(), b"\xff\xff".to_vec(), b"absent".to_vec()]);
        for user_key in &probes {
            for snapshot in [0, 1, 5, 17, 39, 40, SEQUENCE_MAX] {
                prop_assert_eq!(table.get(user_key, snapshot).unwrap(), model_get(&entries, user_key, snapshot));
            }
            let expected: Vec<Entry> = entries.iter().filter(|e| e.key.user_key >= *user_key).cloned().collect();
            prop_assert_eq!(table.iter_from(user_key).collect::<Result<Vec<_>, _>>().unwrap(), expected);
        }
    }

    #[test]
    fn flipping_any_byte_makes_decode_table_fail(
        entries in sorted_entries(),
        options in options(),
        position_seed in any::<usize>(),
        mask in 1u8..=255,
    ) {
        let mut bytes = build(&entries, options);
        let position = position_seed % bytes.len();
        bytes[position] ^= mask;
        prop_assert!(decode_table(&bytes).is_err(), "flip at {} of {} decoded", position, bytes.len());
    }

    #[test]
    fn decode_table_never_panics_on_damaged_tables(
        entries in sorted_entries(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        truncate_to in proptest::option::of(any::<usize>()),
    ) {
        let mut bytes = build(&entries, small_blocks());
        for (position, value) in edits {
            let position = position % bytes.len();
            bytes[position] = value;
        }
        if let Some(size) = truncate_to {
            bytes.truncate(size % (bytes.len() + 1));
        }
        let _ = decode_table(&bytes);
    }

    #[test]
    fn decode_table_never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        prop_assert!(decode_table(&bytes).is_err());
    }
}

#[test]
fn flipping_each_byte_of_a_table_makes_decode_table_fail() {
    let entries: Vec<Entry> =
        (0..30u32).map(|index| put(format!("key{index:02}").as_bytes(), u64::from(index), b"value")).collect();
    let bytes = build(&entries, small_blocks());
    assert!(decode_table(&bytes).is_ok());
    for position in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[position] ^= 0x01;
        assert!(decode_table(&damaged).is_err(), "flip at byte {position} went unnoticed");
    }
}

fn many_entries(count: u32) -> Vec<Entry> {
    // Keys whose first 8 bytes vary: the learned index can tell the blocks apart.
    (0..count).map(|index| put(&(u64::from(index) * 7919).to_be_bytes(), 1, format!("v{index}").as_bytes())).collect()
}

#[test]
fn damaged_data_block_is_corruption_naming_the_file_and_the_block() {
    let entries = many_entries(100);
    let mut bytes = build(&entries, small_blocks());
    let decoded = decode_table(&bytes).unwrap();
    let damaged = &decoded.index[3];
    bytes[damaged.offset as usize + 5] ^= 0x10;
    let env = SimEnv::new(2);
    let table = open_on_sim(&env, &bytes, Arc::new(BlockCache::new(1 << 20))).unwrap();
    let expect_corruption = |result: Error| match result {
        Error::Corruption { file, offset, .. } => {
            assert_eq!(file, PathBuf::from(TABLE_PATH));
            assert_eq!(offset, damaged.offset);
        }
        other => panic!("expected corruption, got {other:?}"),
    };
    expect_corruption(table.get(&damaged.first_key.user_key, SEQUENCE_MAX).unwrap_err());
    assert_eq!(table.stats().read_retries, u64::from(READ_RETRIES_MAX), "the damaged block was re-read");
    let good_key = &decoded.index[0].first_key.user_key;
    assert!(matches!(table.get(good_key, SEQUENCE_MAX), Ok(Lookup::Found(_))), "other blocks still read");
    let results: Vec<Result<Entry, Error>> = table.iter().collect();
    let good = decoded.index[..3].iter().map(|entry| entry.entry_count as usize).sum::<usize>();
    assert_eq!(results.len(), good + 1, "the iterator stops after the error");
    assert!(results[..good].iter().all(Result::is_ok));
    expect_corruption(results[good].clone().unwrap_err());
}

/// A table opened with its build's walked checksums (ADR-0149) knows every block validated before any read and
/// answers every get as the model does; damage is still found and named by file and block: a flipped byte (the
/// checksum fails) and a block whose entry count was changed and then sealed again with a valid checksum (not the
/// walked one, so the read walks it and rejects it).
#[test]
fn a_built_tables_blocks_skip_the_walk_and_damage_is_still_found() {
    let entries = many_entries(100);
    let mut builder = TableBuilder::new(small_blocks());
    entries.iter().for_each(|entry| builder.add(entry));
    let (bytes, walked_crcs) = builder.finish_walked();
    assert_eq!(bytes, build(&entries, small_blocks()), "the same file as finish");
    let decoded = decode_table(&bytes).unwrap();
    let block_end = |entry: &IndexEntry| (entry.offset + u64::from(entry.size_bytes)) as usize;
    let stored: Vec<Option<u32>> = decoded
        .index
        .iter()
        .map(|entry| Some(u32::from_le_bytes(bytes[block_end(entry) - 4..block_end(entry)].try_into().unwrap())))
        .collect();
    assert_eq!(walked_crcs, stored, "each block's stored checksum, walked (test builds assert debug)");
    let open_built = |bytes: &[u8]| {
        let cache = Arc::new(BlockCache::new(0));
        Table::open_built(write_on_sim(&SimEnv::new(11), bytes), FILE_NUMBER, cache, &walked_crcs).unwrap()
    };
    let table = open_built(&bytes);
    assert_eq!(table.validated_block_count(), decoded.index.len(), "known before any read");
    for entry in &entries {
        assert_eq!(table.get(&entry.key.user_key, SEQUENCE_MAX).unwrap(), Lookup::Found(entry.value.clone()));
    }
    let damaged = &decoded.index[3];
    let (start, end) = (damaged.offset as usize, block_end(damaged));
    let mut flipped = bytes.clone();
    flipped[start + 5] ^= 0x10;
    let mut resealed = bytes.clone();
    let mut contents = bytes[start..end - 4].to_vec();
    let count_at = contents.len() - 4;
    contents[count_at] ^= 0x01;
    super::codec::seal(super::codec::BlockTag::Data, &mut contents, 0);
    resealed[start..end].copy_from_slice(&contents);
    for (bad, reason) in [(flipped, "checksum"), (resealed, "trailer says")] {
        let table = open_built(&bad);
        match table.get(&damaged.first_key.user_key, SEQUENCE_MAX) {
            Err(Error::Corruption { file, offset, reason: found }) => {
                assert_eq!(file, PathBuf::from(TABLE_PATH));
                assert!((damaged.offset..end as u64).contains(&offset), "{offset} in block {damaged:?}");
                assert!(found.contains(reason), "{found}");
            }
            other => panic!("expected corruption, got {other:?}"),
        }
        let good = &decoded.index[0].first_key.user_key;
        assert!(matches!(table.get(good, SEQUENCE_MAX), Ok(Lookup::Found(_))), "other blocks still read");
    }
}

#[test]
fn damaged_metadata_fails_open_with_the_file_named() {
    let bytes = build(&many_entries(50), small_blocks());
    let decoded_size = bytes.len();
    for position in [decoded_size - 3, decoded_size - 70, 0] {
        let mut damaged = bytes.clone();
        damaged[position] ^= 0x40;
        let env = SimEnv::new(3);
        let result = open_on_sim(&env, &damaged, Arc::new(BlockCache::new(1 << 20)));
        if position == 0 {
            // Data blocks are not read at open: the damage surfaces on the first read of that block.
            let table = result.unwrap();
            let first = table.iter().next().unwrap();
            assert!(matches!(first, Err(Error::Corruption { offset: 0, .. })), "{first:?}");
        } else {
            match result {
                Err(Error::Corruption { file, .. }) => assert_eq!(file, PathBuf::from(TABLE_PATH)),
                other => panic!("expected corruption, got {other:?}"),
            }
        }
    }
    let env = SimEnv::new(4);
    assert!(matches!(open_on_sim(&env, b"short", Arc::new(BlockCache::new(0))), Err(Error::Corruption { .. })));
}

#[test]
fn transient_read_corruption_heals_on_a_re_read() {
    let entries = many_entries(300);
    let bytes = build(&entries, small_blocks());
    let config = FaultConfig { read_corruption_ppm: 50_000, ..FaultConfig::default() };
    let env = SimEnv::with_faults(5, config);
    // A cache too small to hold anything: every get reads its block from the (flaky) disk.
    let table = open_on_sim(&env, &bytes, Arc::new(BlockCache::new(0))).unwrap();
    for entry in &entries {
        assert_eq!(table.get(&entry.key.user_key, SEQUENCE_MAX).unwrap(), Lookup::Found(entry.value.clone()));
    }
    assert!(table.stats().read_retries > 0, "the seed injected read corruption");
}

#[test]
fn hot_reads_are_served_by_the_cache_without_io() {
    let entries = many_entries(200);
    let env = SimEnv::new(6);
    let cache = Arc::new(BlockCache::new(1 << 20));
    let table = open_on_sim(&env, &build(&entries, small_blocks()), Arc::clone(&cache)).unwrap();
    let key = &entries[123].key.user_key;
    assert_eq!(table.get(key, SEQUENCE_MAX).unwrap(), Lookup::Found(entries[123].value.clone()));
    let io_after_first_read = env.io_count();
    let reads_after_first_read = table.stats().block_reads;
    for _ in 0..50 {
        assert_eq!(table.get(key, SEQUENCE_MAX).unwrap(), Lookup::Found(entries[123].value.clone()));
    }
    assert_eq!(env.io_count(), io_after_first_read, "cache hits touch no file");
    assert_eq!(table.stats().block_reads, reads_after_first_read);
    assert_eq!(table.stats().block_cache_hits, 50);
    assert!(cache.hits() >= 50);
}

#[test]
fn cache_stays_within_capacity_under_table_reads() {
    let entries = many_entries(500);
    let env = SimEnv::new(7);
    let cache = Arc::new(BlockCache::new(2000));
    let table = open_on_sim(&env, &build(&entries, small_blocks()), Arc::clone(&cache)).unwrap();
    for entry in entries.iter().rev().chain(&entries) {
        assert_eq!(table.get(&entry.key.user_key, SEQUENCE_MAX).unwrap(), Lookup::Found(entry.value.clone()));
        assert!(cache.size_bytes() <= 2000);
    }
    assert!(cache.block_count() > 1, "the cache holds several blocks");
    cache.evict_file(FILE_NUMBER);
    assert_eq!((cache.block_count(), cache.size_bytes()), (0, 0));
}

#[test]
fn learned_index_serves_lookups_on_distinct_prefixes() {
    let entries = many_entries(2000);
    let env = SimEnv::new(8);
    let table = open_on_sim(&env, &build(&entries, small_blocks()), Arc::new(BlockCache::new(1 << 22))).unwrap();
    assert!(table.data_block_count() > 100);
    for entry in &entries {
        assert_eq!(table.get(&entry.key.user_key, SEQUENCE_MAX).unwrap(), Lookup::Found(entry.value.clone()));
    }
    let stats = table.stats();
    assert_eq!(stats.learned_hits, 2000, "{stats:?}");
    assert_eq!(stats.learned_fallbacks, 0, "{stats:?}");
}

/// A table of format version 1, whose learned index skips no prefix.
fn build_format_version_1(entries: &[Entry], options: TableOptions) -> Vec<u8> {
    let mut builder = TableBuilder::with_format_version(options, 1);
    entries.iter().for_each(|entry| builder.add(entry));
    builder.finish()
}

/// `bytes` (a table) relabelled as format version `format_version` under a valid footer checksum.
fn relabelled(mut bytes: Vec<u8>, format_version: u32) -> Vec<u8> {
    let footer_start = bytes.len() - FOOTER_SIZE_BYTES;
    bytes.truncate(bytes.len() - 4);
    bytes[footer_start + 48..footer_start + 52].copy_from_slice(&format_version.to_le_bytes());
    super::codec::seal(super::codec::BlockTag::Footer, &mut bytes, footer_start);
    bytes
}

/// YCSB's keys (`user` + 12 digits) with 100-byte values: every key shares its first 10 bytes.
fn ycsb_entries(count: u64) -> Vec<Entry> {
    (0..count).map(|index| put(format!("user{index:012}").as_bytes(), 1, &[b'v'; 100])).collect()
}

/// Look every entry up; the table's stats after.
fn get_all(table: &Table<env::sim::SimFile>, entries: &[Entry]) -> TableStats {
    for entry in entries {
        assert_eq!(table.get(&entry.key.user_key, SEQUENCE_MAX).unwrap(), Lookup::Found(entry.value.clone()));
    }
    table.stats()
}

#[test]
fn shared_prefixes_are_skipped_and_format_1_tables_fall_back_and_stay_correct() {
    let entries: Vec<Entry> =
        (0..500u32).map(|index| put(format!("prefix__{index:05}").as_bytes(), 1, b"value")).collect();
    let table =
        open_on_sim(&SimEnv::new(9), &build(&entries, small_blocks()), Arc::new(BlockCache::new(1 << 22))).unwrap();
    let stats = get_all(&table, &entries);
    assert_eq!((stats.learned_hits, stats.learned_fallbacks), (500, 0), "{stats:?}");
    let legacy = build_format_version_1(&entries, small_blocks());
    assert_eq!(decode_table(&legacy).map(|table| table.entries), Ok(entries.clone()));
    let legacy = open_on_sim(&SimEnv::new(9), &legacy, Arc::new(BlockCache::new(1 << 22))).unwrap();
    let stats = get_all(&legacy, &entries);
    // Format 1 maps every key to `prefix_`: only lookups in the first blocks land in the window.
    assert!(stats.learned_fallbacks > 450, "{stats:?}");
}

#[test]
fn format_1_label_on_a_prefixed_model_is_corruption() {
    // A version-2 learned index read with version 1's key map no longer bounds its error: open says so.
    let bytes = relabelled(build(&ycsb_entries(2000), TableOptions::default()), 1);
    let error = open_on_sim(&SimEnv::new(9), &bytes, Arc::new(BlockCache::new(1 << 22))).unwrap_err();
    assert!(matches!(&error, Error::Corruption { reason, .. } if reason.contains("learned index misses")), "{error}");
    assert!(decode_table(&bytes).is_err());
}

/// The probe counts `engine/BENCH.md` cites for 20 000 YCSB keys (the `learned_probes` example measures 1M).
#[test]
fn ycsb_lookups_take_few_index_probes_with_the_prefix_skipped() {
    let entries = ycsb_entries(20_000);
    let table =
        open_on_sim(&SimEnv::new(11), &build(&entries, TableOptions::default()), Arc::new(BlockCache::new(1 << 26)))
            .unwrap();
    let stats = get_all(&table, &entries);
    assert_eq!((stats.learned_hits, stats.learned_fallbacks), (20_000, 0), "{stats:?}");
    // At most the 2 bracket probes and a binary search of the window's 2 * 4 + 3 positions (4 probes) each.
    assert!(stats.index_probes <= 20_000 * 6, "{stats:?}");
    let legacy = build_format_version_1(&entries, TableOptions::default());
    let legacy = open_on_sim(&SimEnv::new(11), &legacy, Arc::new(BlockCache::new(1 << 26))).unwrap();
    let legacy_stats = get_all(&legacy, &entries);
    assert!(legacy_stats.learned_fallbacks > 19_000, "{legacy_stats:?}");
    let block_count = table.data_block_count();
    assert_eq!(
        (block_count, stats.index_probes, legacy_stats.index_probes),
        (556, 112_034, 201_620),
        "blocks, probes with the prefix skipped (5.6 a lookup), probes without (format 1: 10.1 a lookup)"
    );
}

#[test]
fn versions_spanning_blocks_are_found_at_every_snapshot() {
    let mut entries = vec![put(b"a", 3, b"before")];
    entries.extend((1..=60u64).rev().map(|sequence| match sequence % 5 {
        0 => delete(b"hot", sequence * 2),
        _ => put(b"hot", sequence * 2, format!("v{sequence}").as_bytes()),
    }));
    entries.push(put(b"z", 1, b"after"));
    let options = TableOptions { block_size_bytes: 1, ..TableOptions::default() };
    let env = SimEnv::new(10);
    let table = open_on_sim(&env, &build(&entries, options), Arc::new(BlockCache::new(1 << 20))).unwrap();
    assert_eq!(table.data_block_count(), entries.len(), "one entry per block");
    for snapshot in 0..=125 {
        assert_eq!(table.get(b"hot", snapshot).unwrap(), model_get(&entries, b"hot", snapshot), "at {snapshot}");
    }
    let from_hot: Vec<Entry> = table.iter_from(b"hot").map(Result::unwrap).collect();
    assert_eq!(from_hot, entries[1..].to_vec());
}

#[test]
fn bloom_filter_answers_absent_keys_without_block_reads() {
    let entries = many_entries(1000);
    let env = SimEnv::new(11);
    let table = open_on_sim(&env, &build(&entries, small_blocks()), Arc::new(BlockCache::new(1 << 22))).unwrap();
    for index in 0..1000u64 {
        let absent = (index * 7919 + 1).to_be_bytes();
        assert_eq!(table.get(&absent, SEQUENCE_MAX).unwrap(), Lookup::NotFound);
    }
    let stats = table.stats();
    assert!(stats.bloom_negatives > 950, "{stats:?}");
    assert!(stats.block_reads < 60, "{stats:?}");
}

#[test]
fn builder_estimates_size_and_rejects_out_of_order_entries() {
    let mut builder = TableBuilder::new(TableOptions::default());
    assert!(builder.is_empty());
    builder.add(&put(b"b", 5, b"value"));
    assert!(builder.estimated_size_bytes() > 0);
    let result = std::panic::catch_unwind(move || builder.add(&put(b"a", 5, b"value")));
    assert!(result.is_err(), "out-of-order add must panic");
    let same_key_older = std::panic::catch_unwind(|| {
        let mut builder = TableBuilder::new(TableOptions::default());
        builder.add(&put(b"b", 5, b"value"));
        builder.add(&put(b"b", 6, b"value"));
    });
    assert!(same_key_older.is_err(), "a newer version after an older one must panic");
}

#[test]
fn table_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Table<env::sim::SimFile>>();
    assert_send_sync::<BlockCache>();
}
