//! SSTables: immutable sorted files of [`Entry`](crate::Entry) versions.
//!
//! [`TableBuilder`] turns entries (strictly increasing internal-key order) into a file's bytes; [`Table`] reads
//! one through a shared [`BlockCache`]; [`decode_table`] validates a whole file (the fuzz target).
//!
//! # File format (version 2, all integers little-endian; version 1 is read too)
//!
//! ```text
//! offset 0          data block 0 .. data block N-1 (back to back)
//!   data block      entry* | restart_offset u32 * R | R u32 | entry_count u32 | crc32 (tag 0xDA)
//!   entry           shared varint | unshared varint | value_size varint | key_delta | sequence<<8|kind u64 | value
//! index block       block_count u32 | per block: offset u64, size u32, entry_count u32,
//!                   first_key (u32 size + bytes), first_sequence u64, last_key (u32 size + bytes), last_sequence u64
//!                   | crc32 (tag 0x1D)
//! bloom block       hash_count u8 | bit_count u32 | bits [bit_count / 8] | crc32 (tag 0xB1)
//!                   probed with independent hashes (version 3) or by double hashing (versions 1, 2): bloom.rs
//! learned block     epsilon u32 | position_count u32 | segment_count u32
//!                   | per segment: start_key u64, start_position u32, slope f64 bits u64 | crc32 (tag 0x7E)
//!                   start_key: the block's first user key after the prefix shared by min_user_key and
//!                   max_user_key, first 8 bytes big-endian (version 1: no prefix skipped)
//! meta block        entry_count u64 | data_block_count u32 | min_sequence u64 | max_sequence u64
//!                   | min_user_key (u32 size + bytes) | max_user_key (u32 size + bytes) | crc32 (tag 0x3E)
//! footer (64 bytes) (offset u64, size u32) for index, bloom, learned, meta | format_version u32 (3)
//!                   | magic u64 ("HFSSTB01") | crc32 (tag 0xF0)
//! ```
//!
//! Every structure ends with a CRC32 (`crc32fast`) of its bytes, seeded by a one-byte tag that is hashed but not
//! stored, so a valid block of one kind read where another is expected fails. The parts tile the file exactly
//! (no gaps, no padding), so every byte is covered by exactly one checksum: flipping any byte of a table makes
//! [`decode_table`] fail (CRC32 detects every error burst of up to 32 bits).
//!
//! Entry trailer: `sequence << 8 | kind`, kind `0xD1` (delete, empty value) or `0xE7` (put). The entry at each
//! restart offset (every `restart_interval` entries, the first at 0) has `shared == 0`.
//!
//! # Read path
//!
//! `get(user_key, snapshot)`: key range (meta) → Bloom filter → learned index predicts the data block from the
//! key's bytes after the table's shared prefix ([`KeyDomain`]), a binary search of the window `[p - ε - 1,
//! p + ε + 1]` of the index finds the first block whose last internal key is `>= (user_key, snapshot)` (falling
//! back to the whole index when the window does not bracket it; cross-checked against a plain binary search
//! when [`crate::EXPENSIVE_CHECKS`]) → the block (from the cache, else read, verified whole and kept as the bytes
//! read, re-read up to [`READ_RETRIES_MAX`] times on a checksum mismatch; ADR-0089) → binary search of its restart points, then a scan that
//! compares prefix-compressed keys without rebuilding them ([`Block::get_value`]). Searching by internal key
//! finds the newest visible version even when a user key's versions span two blocks.

mod block;
mod bloom;
mod builder;
mod cache;
mod codec;
mod entry;
mod footer;
mod index;
mod learned;
mod table;
#[cfg(test)]
mod tests;

pub use block::{BLOCK_SIZE_BYTES_MAX, Block, BlockCursor, decode_block, decode_block_owned};
pub use bloom::{BLOOM_BITS_PER_KEY_MAX, BloomFilter, Probing, decode_bloom, hash_count_for};
pub use builder::TableBuilder;
pub use cache::BlockCache;
pub use footer::{
    FOOTER_SIZE_BYTES, FORMAT_VERSION, FORMAT_VERSION_MIN, TABLE_MAGIC, TableMeta, decode_footer, decode_meta,
};
pub use index::{IndexEntry, decode_index};
pub use learned::{KeyDomain, LEARNED_EPSILON_MAX, LearnedIndex, SearchPath, decode_learned_index, key_to_u64};
pub use table::{DecodedTable, TABLE_SIZE_BYTES_MIN, Table, TableIter, TableStats, decode_table};

/// How many times a block (or the footer, or the metadata) is re-read after failing its checksum before the
/// read reports [`Error::Corruption`](crate::Error::Corruption).
pub const READ_RETRIES_MAX: u32 = 3;
/// The largest accepted `restart_interval`.
pub const RESTART_INTERVAL_MAX: usize = 1024;

/// How a [`TableBuilder`] lays out a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableOptions {
    /// A data block is closed once it reaches this size (a single large entry can make a block larger).
    /// `1..=BLOCK_SIZE_BYTES_MAX`; default 4096.
    pub block_size_bytes: usize,
    /// Bloom filter bits per distinct user key, `1..=BLOOM_BITS_PER_KEY_MAX`; default 10 (under 2% false
    /// positives).
    pub bloom_bits_per_key: u32,
    /// Entries between restart points in a data block, `1..=RESTART_INTERVAL_MAX`; default 16.
    pub restart_interval: usize,
    /// The learned index's error bound in index positions, `0..=LEARNED_EPSILON_MAX`; default 4.
    pub learned_index_epsilon: u32,
}

impl Default for TableOptions {
    fn default() -> Self {
        Self { block_size_bytes: 4096, bloom_bits_per_key: 10, restart_interval: 16, learned_index_epsilon: 4 }
    }
}

impl TableOptions {
    /// Panic if an option is out of its documented range (a caller bug).
    pub fn assert_valid(&self) {
        assert!((1..=BLOCK_SIZE_BYTES_MAX).contains(&self.block_size_bytes), "block size out of range: {self:?}");
        assert!((1..=BLOOM_BITS_PER_KEY_MAX).contains(&self.bloom_bits_per_key), "bloom bits out of range: {self:?}");
        assert!((1..=RESTART_INTERVAL_MAX).contains(&self.restart_interval), "restart interval out of range: {self:?}");
        assert!(self.learned_index_epsilon <= LEARNED_EPSILON_MAX, "learned epsilon out of range: {self:?}");
    }
}
