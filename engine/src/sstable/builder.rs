//! [`TableBuilder`]: sorted entries in, a whole table file's bytes out.

use super::TableOptions;
use super::block::BlockBuilder;
use super::bloom::{BloomFilter, Probing, bloom_hash};
use super::footer::{BlockHandle, FOOTER_SIZE_BYTES, FORMAT_VERSION, Footer, TableMeta};
use super::index::{IndexEntry, encode_index};
use super::learned::{KeyDomain, LearnedIndex};
use crate::{Entry, InternalKey, KEY_SIZE_BYTES_MAX, SEQUENCE_MAX, Sequence, VALUE_SIZE_BYTES_MAX, ValueKind};

/// Builds one table file in memory. Entries must be added in strictly increasing internal-key order (user key
/// ascending, sequence descending); a table holds at least one entry.
#[derive(Debug)]
pub struct TableBuilder {
    options: TableOptions,
    output: Vec<u8>,
    block: BlockBuilder,
    block_first_key: Option<InternalKey>,
    block_entry_count: u32,
    index: Vec<IndexEntry>,
    /// Per data block, its checksum when the build walked it before sealing ([`BlockBuilder::finish_into`]).
    walked_crcs: Vec<Option<u32>>,
    key_hashes: Vec<u64>,
    last_key: Option<InternalKey>,
    entry_count: u64,
    min_sequence: Sequence,
    max_sequence: Sequence,
    format_version: u32,
}

impl TableBuilder {
    /// A builder with `options` (panics on options out of range: see [`TableOptions`]).
    pub fn new(options: TableOptions) -> Self {
        options.assert_valid();
        let mut block = BlockBuilder::new(options.restart_interval);
        // A block closes once it reaches the block size, after an entry that may cross it: room for twice that.
        block.reserve(options.block_size_bytes.saturating_mul(2));
        Self {
            block,
            options,
            output: Vec::new(),
            block_first_key: None,
            block_entry_count: 0,
            index: Vec::new(),
            walked_crcs: Vec::new(),
            key_hashes: Vec::new(),
            last_key: None,
            entry_count: 0,
            min_sequence: SEQUENCE_MAX,
            max_sequence: 0,
            format_version: FORMAT_VERSION,
        }
    }

    /// A builder writing an older format version (tests of the reader's compatibility).
    #[cfg(test)]
    pub(super) fn with_format_version(options: TableOptions, format_version: u32) -> Self {
        assert!((super::FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&format_version), "unknown format version");
        Self { format_version, ..Self::new(options) }
    }

    /// Add the next entry. Panics if it does not sort strictly after the previous one, if a key or value is over
    /// its size limit, if the sequence is above `SEQUENCE_MAX`, or if a tombstone carries a value.
    pub fn add(&mut self, entry: &Entry) {
        let key = &entry.key;
        assert!(key.user_key.len() <= KEY_SIZE_BYTES_MAX, "key of {} bytes over the limit", key.user_key.len());
        assert!(entry.value.len() <= VALUE_SIZE_BYTES_MAX, "value of {} bytes over the limit", entry.value.len());
        assert!(key.sequence <= SEQUENCE_MAX, "sequence {} above SEQUENCE_MAX", key.sequence);
        assert!(entry.kind == ValueKind::Put || entry.value.is_empty(), "a tombstone carries a value");
        let new_user_key = match &self.last_key {
            Some(last) => {
                assert!(last < key, "table entries out of order: {last:?} then {key:?}");
                last.user_key != key.user_key
            }
            None => true,
        };
        if new_user_key {
            self.key_hashes.push(bloom_hash(&key.user_key));
        }
        if self.block.is_empty() {
            self.block_first_key = Some(key.clone());
        }
        self.block.add(entry);
        self.block_entry_count += 1;
        self.entry_count += 1;
        self.min_sequence = self.min_sequence.min(key.sequence);
        self.max_sequence = self.max_sequence.max(key.sequence);
        InternalKey::copy_into(key, &mut self.last_key);
        if self.block.size_estimate_bytes() >= self.options.block_size_bytes {
            self.flush_block();
        }
    }

    /// Room for a table of about `entries_size_bytes` of keys and values without growing the output buffer
    /// (a caller that knows its entries: no copy of the file's bytes as the buffer doubles).
    pub(crate) fn reserve_for_entries(&mut self, entries_size_bytes: usize) {
        self.output.reserve(entries_size_bytes);
    }

    /// How many entries were added.
    pub fn entry_count(&self) -> u64 {
        self.entry_count
    }

    /// True until the first [`TableBuilder::add`].
    pub fn is_empty(&self) -> bool {
        self.entry_count == 0
    }

    /// The size of the data written so far plus the open block: what compaction compares with its target file
    /// size (the metadata blocks come on top).
    pub fn estimated_size_bytes(&self) -> u64 {
        (self.output.len() + self.block.size_estimate_bytes()) as u64
    }

    fn flush_block(&mut self) {
        assert!(!self.block.is_empty(), "flushing an empty block");
        let offset = self.output.len();
        let walked_crc = self.block.finish_into(&mut self.output);
        self.walked_crcs.push(walked_crc);
        let first_key = self.block_first_key.take().expect("a non-empty block has a first key");
        let last_key = self.last_key.clone().expect("a non-empty block has a last key");
        self.index.push(IndexEntry {
            offset: offset as u64,
            size_bytes: u32::try_from(self.output.len() - offset).expect("blocks are below BLOCK_SIZE_BYTES_MAX"),
            entry_count: std::mem::take(&mut self.block_entry_count),
            first_key,
            last_key,
        });
        assert!(self.block.is_empty() && self.block_entry_count == 0, "block state reset after a flush");
    }

    /// Finish the table: the data blocks, then the index, bloom, learned-index and meta blocks, then the footer.
    /// Returns the whole file; the caller writes and syncs it. Panics if no entry was added.
    pub fn finish(self) -> Vec<u8> {
        self.finish_walked().0
    }

    /// [`TableBuilder::finish`], with each data block's checksum when the build walked the block before sealing
    /// it (in index order): what [`Table::open_built`](super::Table::open_built) takes (ADR-0149).
    pub(crate) fn finish_walked(mut self) -> (Vec<u8>, Vec<Option<u32>>) {
        assert!(self.entry_count > 0, "a table holds at least one entry");
        if !self.block.is_empty() {
            self.flush_block();
        }
        let meta = TableMeta {
            entry_count: self.entry_count,
            data_block_count: u32::try_from(self.index.len()).expect("block count fits u32"),
            min_sequence: self.min_sequence,
            max_sequence: self.max_sequence,
            min_user_key: self.index[0].first_key.user_key.clone(),
            max_user_key: self.last_key.clone().expect("non-empty table").user_key,
        };
        let domain = KeyDomain::for_table(self.format_version, &meta.min_user_key, &meta.max_user_key);
        let first_keys: Vec<u64> = self.index.iter().map(|entry| domain.map(&entry.first_key.user_key)).collect();
        let learned = LearnedIndex::fit(&first_keys, self.options.learned_index_epsilon);
        let mut handles = Vec::new();
        for block in [
            encode_index(&self.index),
            BloomFilter::build(
                &self.key_hashes,
                self.options.bloom_bits_per_key,
                Probing::for_format(self.format_version),
            )
            .encode(),
            learned.encode(),
            meta.encode(),
        ] {
            let size_bytes = u32::try_from(block.len()).expect("a metadata block is below 4 GiB");
            handles.push(BlockHandle { offset: self.output.len() as u64, size_bytes });
            self.output.extend_from_slice(&block);
        }
        let footer = Footer {
            index: handles[0],
            bloom: handles[1],
            learned: handles[2],
            meta: handles[3],
            format_version: self.format_version,
        };
        self.output.extend_from_slice(&footer.encode());
        assert_eq!(footer.meta.end() + FOOTER_SIZE_BYTES as u64, self.output.len() as u64, "footer ends the file");
        assert_eq!(self.walked_crcs.len(), self.index.len(), "one checksum slot per data block");
        (self.output, self.walked_crcs)
    }
}
