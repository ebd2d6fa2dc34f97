//! `sstable_decode`: every SSTable decoder never panics; what decodes round-trips; and a table that
//! `decode_table` accepts reads back identically through the real reader (`Table` over a `SimEnv` file).

use std::path::Path;
use std::sync::Arc;

use engine::sstable::{
    BlockCache, BlockCursor, Probing, Table, decode_block, decode_block_owned, decode_bloom, decode_footer,
    decode_index, decode_learned_index, decode_meta, decode_table,
};
use engine::{Entry, Lookup, ValueKind};
use env::{Env, File, OpenOptions, SimEnv};

use crate::reseal::{TAG_BLOOM, TAG_DATA, TAG_FOOTER, TAG_INDEX, TAG_LEARNED, TAG_META, reseal_table, sealed};

/// Entries the reader comparison looks at, at most (keeps one execution fast on large inputs).
const ENTRIES_CHECKED_MAX: usize = 256;

/// The harness. Panics on a finding.
pub fn check(data: &[u8]) {
    // Each block decoder on the input as is, then on the input sealed with that block's tag.
    check_blocks(data, false);
    check_blocks(data, true);
    let _ = decode_footer(data, data.len() as u64);
    // The whole input as a table file, as is and with every checksum recomputed.
    check_table(data);
    let resealed = reseal_table(data);
    if resealed != data {
        check_table(&resealed);
    }
}

fn check_blocks(data: &[u8], seal: bool) {
    let input = |tag: u8| if seal { sealed(tag, data) } else { data.to_vec() };
    let block = decode_block(&input(TAG_DATA));
    assert_eq!(decode_block_owned(input(TAG_DATA)), block, "decoding in place and by copy disagree");
    if let Ok(block) = block {
        let count = block.entry_count();
        let (first, last) = (block.first_key().clone(), block.last_key().clone());
        let entries: Vec<Entry> = BlockCursor::new(Arc::new(block)).collect();
        assert_eq!(entries.len(), count, "a block's cursor yields a different number of entries than it declares");
        assert!(entries.windows(2).all(|pair| pair[0].key < pair[1].key), "a decoded block is not strictly ordered");
        assert_eq!(entries.first().map(|entry| &entry.key), Some(&first), "first_key is not the first entry");
        assert_eq!(entries.last().map(|entry| &entry.key), Some(&last), "last_key is not the last entry");
    }
    if let Ok(index) = decode_index(&input(TAG_INDEX)) {
        assert!(!index.is_empty(), "an index decoded with no entries");
    }
    for probing in [Probing::Double, Probing::Independent] {
        let Ok(bloom) = decode_bloom(&input(TAG_BLOOM), probing) else { continue };
        assert_eq!(decode_bloom(&bloom.encode(), probing).as_ref(), Ok(&bloom), "a bloom block does not round-trip");
        let _ = bloom.may_contain(data);
    }
    if let Ok(learned) = decode_learned_index(&input(TAG_LEARNED)) {
        assert_eq!(
            decode_learned_index(&learned.encode()).as_ref(),
            Ok(&learned),
            "a learned index does not round-trip"
        );
        let key = engine::sstable::key_to_u64(data);
        let _ = learned.predict(key);
        let count = learned.position_count() as usize;
        let (position, _) = learned.search(key, count, |index| index < count / 2);
        assert_eq!(position, count / 2, "the learned index's search misses the partition point");
    }
    if let Ok(meta) = decode_meta(&input(TAG_META)) {
        assert_eq!(decode_meta(&meta.encode()).as_ref(), Ok(&meta), "a meta block does not round-trip");
    }
    let footer_input = if seal { sealed(TAG_FOOTER, &data[..data.len().min(60)]) } else { data.to_vec() };
    // A sealed 60-byte prefix makes a footer with a valid CRC; the file size it needs is whatever its meta handle
    // says, so decode it against that size (and against the input's own length).
    let claimed = if footer_input.len() == 64 {
        let offset = u64::from_le_bytes(footer_input[36..44].try_into().expect("8 bytes"));
        let size = u32::from_le_bytes(footer_input[44..48].try_into().expect("4 bytes"));
        offset.wrapping_add(u64::from(size)).wrapping_add(64)
    } else {
        data.len() as u64
    };
    for file_size in [claimed, data.len() as u64] {
        if let Ok(footer) = decode_footer(&footer_input, file_size) {
            assert_eq!(footer.encode(), footer_input, "a footer does not re-encode to its bytes");
        }
    }
}

fn check_table(data: &[u8]) {
    let decoded = decode_table(data);
    let env = SimEnv::new(0);
    let dir = Path::new("/t");
    env.create_dir_all(dir).expect("create /t");
    let path = dir.join("table-000001.sst");
    let file = env.open(&path, OpenOptions::create_truncate()).expect("create the table file");
    file.write_all_at(0, data).expect("write the table file");
    drop(file);
    let file = env.open(&path, OpenOptions::read()).expect("reopen the table file");
    let cache = Arc::new(BlockCache::new(1 << 20));
    let table = Table::open(file, 1, cache);
    match (decoded, table) {
        (Ok(decoded), Ok(table)) => compare_reader(&decoded, &table),
        (Ok(_), Err(error)) => panic!("decode_table accepts the file but Table::open fails: {error:?}"),
        // The reader checks less up front (it reads data blocks lazily): whatever it opened must not panic.
        (Err(_), Ok(table)) => exercise_reader(&table, data),
        (Err(_), Err(_)) => {}
    }
}

/// A table `decode_table` validated: the reader must iterate the same entries and find each one.
fn compare_reader<F: File>(decoded: &engine::sstable::DecodedTable, table: &Table<F>) {
    assert_eq!(table.entry_count(), decoded.meta.entry_count, "reader and decoder disagree on the entry count");
    assert_eq!(table.min_user_key(), decoded.meta.min_user_key.as_slice(), "min user key differs");
    assert_eq!(table.max_user_key(), decoded.meta.max_user_key.as_slice(), "max user key differs");
    let read: Vec<Entry> = table
        .iter()
        .take(ENTRIES_CHECKED_MAX + 1)
        .map(|entry| entry.expect("iterating a table decode_table accepted fails"))
        .collect();
    let expected: Vec<&Entry> = decoded.entries.iter().take(ENTRIES_CHECKED_MAX + 1).collect();
    assert_eq!(read.iter().collect::<Vec<_>>(), expected, "Table::iter and decode_table disagree");
    let entries = &decoded.entries;
    for (position, entry) in entries.iter().enumerate().take(ENTRIES_CHECKED_MAX) {
        let user_key = &entry.key.user_key;
        let found = table.get(user_key, entry.key.sequence).expect("get on a table decode_table accepted fails");
        assert_eq!(found, lookup_of(entry), "Table::get at an entry's own sequence misses it: {entry:?}");
        // One sequence older: the next older version of the same key, if any (entries are newest first).
        if let Some(older) = entry.key.sequence.checked_sub(1) {
            let expected = entries[position + 1..]
                .iter()
                .take_while(|next| &next.key.user_key == user_key)
                .find(|next| next.key.sequence <= older)
                .map_or(Lookup::NotFound, lookup_of);
            let found = table.get(user_key, older).expect("get on a table decode_table accepted fails");
            assert_eq!(found, expected, "Table::get one sequence below {entry:?} is wrong");
        }
        let _ = table.iter_from(user_key).next();
    }
}

fn lookup_of(entry: &Entry) -> Lookup {
    match entry.kind {
        ValueKind::Put => Lookup::Found(entry.value.clone()),
        ValueKind::Delete => Lookup::Deleted,
    }
}

/// A table that opened though it does not fully decode: reads may fail, never panic.
fn exercise_reader<F: File>(table: &Table<F>, data: &[u8]) {
    let mut keys: Vec<Vec<u8>> = vec![Vec::new(), table.min_user_key().to_vec(), table.max_user_key().to_vec()];
    keys.push(data.iter().take(16).copied().collect());
    for entry in table.iter().take(ENTRIES_CHECKED_MAX) {
        match entry {
            Ok(entry) => keys.push(entry.key.user_key),
            Err(_) => break,
        }
    }
    for key in keys.iter().take(ENTRIES_CHECKED_MAX) {
        for snapshot in [0, 1, engine::SEQUENCE_MAX] {
            let _ = table.get(key, snapshot);
        }
        let _ = table.iter_from(key).take(4).count();
    }
    let _ = table.stats();
}
