//! Scans against a `BTreeMap` model: random versions spread over memtables and tables of several levels, random
//! ranges, snapshots, own writes and mixes of `next` / `next_back`; errors as items; prefix ranges.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use env::sim::SimFile;
use env::{Env, File, OpenOptions, SimEnv};
use proptest::prelude::*;

use super::*;
use crate::manifest::{LEVELS, TableMeta};
use crate::memtable::Memtable;
use crate::sstable::{BlockCache, Table, TableBuilder, TableOptions};
use crate::types::{Entry, InternalKey, ValueKind};
use crate::version::{LiveTable, Version};
use crate::view::{ClosedFlag, ViewSources};

/// One write: a key from a small alphabet (so versions collide), a put (`Some`) or a delete.
type Write = (Vec<u8>, Option<Vec<u8>>);

/// Writes over keys of `1..key_size_max` bytes from `b'a'..last`: few keys make hot keys with many versions (a
/// table cursor then seeks past a key's versions instead of reading them).
fn writes(last: u8, key_size_max: usize, count_max: usize) -> impl Strategy<Value = Vec<Write>> {
    let key = proptest::collection::vec(b'a'..last, 1..key_size_max);
    let value = proptest::option::weighted(0.75, proptest::collection::vec(any::<u8>(), 0..6));
    proptest::collection::vec((key, value), 0..count_max)
}

fn entry(user_key: &[u8], sequence: Sequence, value: &Option<Vec<u8>>) -> Entry {
    let kind = if value.is_some() { ValueKind::Put } else { ValueKind::Delete };
    Entry { key: InternalKey::new(user_key, sequence), kind, value: value.clone().unwrap_or_default() }
}

/// Write `entries` (any order) as table `file_number` at `level` and open it.
fn table(env: &SimEnv, mut entries: Vec<Entry>, level: u8, file_number: u64) -> Arc<LiveTable<SimFile>> {
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    let options = TableOptions { block_size_bytes: 48, restart_interval: 2, ..TableOptions::default() };
    let mut builder = TableBuilder::new(options);
    for entry in &entries {
        builder.add(entry);
    }
    let bytes = builder.finish();
    let path = PathBuf::from(format!("/db/{file_number:06}.sst"));
    let file = env.open(&path, OpenOptions::create_new()).unwrap();
    file.write_all_at(0, &bytes).unwrap();
    file.sync().unwrap();
    let table =
        Table::open(env.open(&path, OpenOptions::read()).unwrap(), file_number, Arc::new(BlockCache::new(1 << 16)));
    let (first, last) = (entries.first().unwrap(), entries.last().unwrap());
    let meta = TableMeta {
        level,
        file_number,
        size_bytes: bytes.len() as u64,
        min_sequence: entries.iter().map(|e| e.key.sequence).min().unwrap(),
        max_sequence: entries.iter().map(|e| e.key.sequence).max().unwrap(),
        min_key: first.key.user_key.clone(),
        max_key: last.key.user_key.clone(),
    };
    Arc::new(LiveTable { meta, table: table.unwrap() })
}

/// Split a level's entries into tables at user-key boundaries (each key's versions in one table).
fn level_tables(env: &SimEnv, entries: Vec<Entry>, level: u8, next_file: &mut u64) -> Vec<Arc<LiveTable<SimFile>>> {
    let mut by_key: BTreeMap<Vec<u8>, Vec<Entry>> = BTreeMap::new();
    for entry in entries {
        by_key.entry(entry.key.user_key.clone()).or_default().push(entry);
    }
    let groups: Vec<Vec<Entry>> = by_key.into_values().collect();
    groups
        .chunks(3)
        .map(|chunk| {
            *next_file += 1;
            table(env, chunk.concat(), level, *next_file)
        })
        .collect()
}

/// The writes (sequence = position + 1) spread oldest to newest over L2, L1, two L0 tables, an immutable memtable
/// and the active one, at the cut points `cuts` (fractions of the writes).
fn view(env: &SimEnv, writes: &[Write], cuts: [usize; 5]) -> ReadView<SimFile> {
    env.create_dir_all(std::path::Path::new("/db")).unwrap();
    let entries: Vec<Entry> =
        writes.iter().enumerate().map(|(index, (key, value))| entry(key, index as Sequence + 1, value)).collect();
    let mut bounds: Vec<usize> = cuts.iter().map(|cut| cut * entries.len() / 100).collect();
    bounds.sort_unstable();
    let part = |index: usize| {
        let start = if index == 0 { 0 } else { bounds[index - 1] };
        let end = bounds.get(index).copied().unwrap_or(entries.len());
        entries[start..end].to_vec()
    };
    let mut levels: Vec<Vec<Arc<LiveTable<SimFile>>>> = (0..LEVELS).map(|_| Vec::new()).collect();
    let mut next_file = 0;
    levels[2] = level_tables(env, part(0), 2, &mut next_file);
    levels[1] = level_tables(env, part(1), 1, &mut next_file);
    for index in [3, 2] {
        let l0 = part(index);
        if !l0.is_empty() {
            next_file += 1;
            levels[0].push(table(env, l0, 0, next_file));
        }
    }
    let memtable_of = |entries: Vec<Entry>| {
        let memtable = Memtable::new();
        for entry in entries {
            memtable.insert(&entry.key.user_key, entry.key.sequence, entry.kind, &entry.value);
        }
        Arc::new(memtable)
    };
    let version = Version { levels };
    version.check(entries.len() as Sequence).expect("a valid version");
    let sources = ViewSources {
        memtable: memtable_of(part(5)),
        immutables: vec![memtable_of(part(4))],
        version: Arc::new(version),
        closed: ClosedFlag::default(),
    };
    ReadView::new(Arc::new(sources), entries.len() as Sequence)
}

/// The model: the rows visible at `snapshot` in `range`, with `own` writes applied.
fn model(writes: &[Write], snapshot: Sequence, range: &KeyRange, own: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) -> Vec<Row> {
    let mut state: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    for (key, value) in writes.iter().take(snapshot as usize) {
        state.insert(key.clone(), value.clone());
    }
    for (key, value) in own {
        state.insert(key.clone(), value.clone());
    }
    state.into_iter().filter(|(key, _)| range.contains(key)).filter_map(|(key, value)| Some((key, value?))).collect()
}

fn key_range_of(start: Vec<u8>, end: Option<Vec<u8>>) -> KeyRange {
    KeyRange { start, end }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn scans_match_the_model_in_any_mix_of_directions(
        writes in prop_oneof![writes(b'e', 3, 120), writes(b'd', 2, 240)],
        cuts in proptest::array::uniform5(0usize..=100),
        snapshot_percent in 0u64..=100,
        start in proptest::collection::vec(b'a'..b'f', 0..3),
        end in proptest::option::of(proptest::collection::vec(b'a'..b'f', 0..3)),
        own in proptest::collection::btree_map(
            proptest::collection::vec(b'a'..b'e', 1..3),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..3)),
            0..4,
        ),
        use_own in any::<bool>(),
        steps in proptest::collection::vec(any::<bool>(), 0..40),
    ) {
        let env = SimEnv::new(1);
        let view = view(&env, &writes, cuts);
        let snapshot = snapshot_percent * view.last_sequence / 100;
        let range = key_range_of(start, end);
        let own = if use_own { own } else { BTreeMap::new() };
        let mut expected = std::collections::VecDeque::from(model(&writes, snapshot, &range, &own));
        let mut scan = ScanIter::new(&view, range.clone(), snapshot, use_own.then_some(&own), None);
        for (step, forward) in steps.into_iter().enumerate() {
            let (got, want) = if forward {
                (scan.next(), expected.pop_front())
            } else {
                (scan.next_back(), expected.pop_back())
            };
            prop_assert_eq!(got.map(Result::unwrap), want, "step {} ({}) of {:?}", step, forward, range);
        }
        // The rest, forward: every row once, then the end (fused).
        let rest: Vec<Row> = scan.by_ref().map(Result::unwrap).collect();
        prop_assert_eq!(rest, Vec::from(expected));
        prop_assert!(scan.next().is_none() && scan.next_back().is_none());
    }
}

#[test]
fn a_damaged_block_is_an_item_and_then_the_scan_ends() {
    let env = SimEnv::new(2);
    let writes: Vec<Write> = (0..60u8).map(|index| (vec![b'k', index], Some(vec![index; 8]))).collect();
    let view = view(&env, &writes, [100, 100, 100, 100, 100]);
    assert_eq!(view.version.levels[2].len(), 20, "every write is in L2, three keys a table");
    // Damage the first data block of the fourth table (keys k9..k11): the scan reads nine rows, then fails.
    let path = PathBuf::from("/db/000004.sst");
    let file = env.open(&path, OpenOptions::read_write()).unwrap();
    let mut byte = [0u8; 1];
    file.read_exact_at(5, &mut byte).unwrap();
    file.write_all_at(5, &[byte[0] ^ 0x10]).unwrap();
    let results: Vec<Result<Row>> = ScanIter::new(&view, key_range_of(Vec::new(), None), 60, None, None).collect();
    assert_eq!(results.len(), 10, "nine rows, the error, nothing after it");
    assert!(results[..9].iter().all(Result::is_ok));
    assert!(matches!(&results[9], Err(Error::Corruption { file, .. }) if *file == path), "{:?}", results[9]);
    // From the back: the rows after the damaged table, then the error.
    let back: Vec<Result<Row>> = ScanIter::new(&view, key_range_of(Vec::new(), None), 60, None, None).rev().collect();
    assert_eq!(back.len(), 60 - 12 + 1);
    assert!(back.last().is_some_and(Result::is_err));
}

#[test]
fn a_scan_opens_only_the_tables_of_its_range() {
    let env = SimEnv::new(3);
    let writes: Vec<Write> = (0..60u8).map(|index| (vec![b'k', index], Some(vec![index; 8]))).collect();
    let view = view(&env, &writes, [100, 100, 100, 100, 100]);
    let (start, end) = (vec![b'k', 30], vec![b'k', 33]);
    let rows: Vec<Row> =
        ScanIter::new(&view, key_range_of(start, Some(end)), 60, None, None).map(Result::unwrap).collect();
    assert_eq!(rows.iter().map(|row| row.0[1]).collect::<Vec<_>>(), vec![30, 31, 32]);
    let read: Vec<u64> = view.version.levels[2]
        .iter()
        .filter(|live| live.table.stats().block_reads > 2)
        .map(|live| live.meta.file_number)
        .collect();
    assert_eq!(read, vec![11], "only the table holding k30..k32 read a data block");
}

#[test]
fn prefix_ranges_end_at_the_prefix_successor() {
    let range = |prefix: &[u8]| {
        let KeyRange { start, end } = prefix_range(prefix);
        (start, end)
    };
    assert_eq!(range(b"ab"), (b"ab".to_vec(), Some(b"ac".to_vec())));
    assert_eq!(range(b"a\xff\xff"), (b"a\xff\xff".to_vec(), Some(b"b".to_vec())));
    assert_eq!(range(b"\xff"), (b"\xff".to_vec(), None));
    assert_eq!(range(b""), (Vec::new(), None));
    let contains = |prefix: &[u8], key: &[u8]| prefix_range(prefix).contains(key);
    assert!(contains(b"a\xff", b"a\xff\x00") && !contains(b"a\xff", b"b") && contains(b"", b"\xff\xff"));
}

#[test]
fn a_hot_key_s_older_versions_are_skipped_by_a_seek_not_read() {
    let env = SimEnv::new(4);
    // 400 versions of `a`, then `b`: all in one L2 table of many blocks.
    let mut writes: Vec<Write> = (0..400u32).map(|index| (b"a".to_vec(), Some(index.to_be_bytes().to_vec()))).collect();
    writes.push((b"b".to_vec(), Some(b"last".to_vec())));
    let view = view(&env, &writes, [100, 100, 100, 100, 100]);
    let live = &view.version.levels[2][0];
    let before = live.table.stats().block_reads;
    let rows: Vec<Row> =
        ScanIter::new(&view, key_range_of(Vec::new(), None), 401, None, None).map(Result::unwrap).collect();
    assert_eq!(rows, vec![(b"a".to_vec(), 399u32.to_be_bytes().to_vec()), (b"b".to_vec(), b"last".to_vec())]);
    let read = live.table.stats().block_reads - before;
    let blocks = live.table.data_block_count() as u64;
    // The 16 versions passed over before the seek span a few of these tiny blocks; then one seek to `b`.
    assert!(blocks > 100 && read <= 10, "read {read} of {blocks} blocks");
}

#[test]
fn same_key_compares_the_last_byte_first_and_then_all() {
    assert!(same_key(b"user0001", b"user0001") && same_key(b"", b""));
    assert!(!same_key(b"user0001", b"user0002") && !same_key(b"auser001", b"buser001"));
    assert!(!same_key(b"user", b"user0") && !same_key(b"", b"a"));
}

#[test]
fn a_scan_taken_to_n_rows_reads_no_block_past_its_last_row() {
    let env = SimEnv::new(5);
    let writes: Vec<Write> = (0..60u8).map(|index| (vec![b'k', index], Some(vec![index; 8]))).collect();
    let view = view(&env, &writes, [100, 100, 100, 100, 100]);
    // The first L2 table holds k0..k2, the second k3..k5.
    let reads = || view.version.levels[2][1].table.stats().block_reads;
    let before = reads();
    let scan = |count: usize| {
        let rows = ScanIter::new(&view, key_range_of(Vec::new(), None), 60, None, None).take(count);
        rows.map(|row| row.unwrap().0[1]).collect::<Vec<u8>>()
    };
    assert_eq!(scan(3), vec![0, 1, 2]);
    assert_eq!(reads(), before, "three rows read nothing of the second table (the merge reads on lazily)");
    assert_eq!(scan(4), vec![0, 1, 2, 3]);
    assert!(reads() > before, "the fourth row is read from the second table");
}
