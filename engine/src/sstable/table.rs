//! [`Table`]: an open table file, and [`decode_table`]: the whole-file validator.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use super::READ_RETRIES_MAX;
use super::block::{Block, BlockCursor, decode_block, decode_block_known};
use super::bloom::{BloomFilter, Probing, decode_bloom};
use super::cache::BlockCache;
use super::codec::partition_point;
use super::footer::{FOOTER_SIZE_BYTES, Footer, TableMeta, decode_footer, decode_meta};
use super::index::{DATA_BLOCK_SIZE_BYTES_MIN, IndexEntry, decode_index};
use super::learned::{KeyDomain, LearnedIndex, SearchPath, decode_learned_index};
use crate::striped::Striped;
use crate::{DecodeError, Entry, Error, Lookup, Sequence, ValueKind, compare_internal};

/// The smallest possible table file: one minimal data block, the metadata blocks' minimum and the footer.
pub const TABLE_SIZE_BYTES_MIN: u64 = DATA_BLOCK_SIZE_BYTES_MIN as u64 + FOOTER_SIZE_BYTES as u64;

/// Counters of one open table's read path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    /// `get` calls the Bloom filter answered "absent" without reading a block.
    pub bloom_negatives: u64,
    /// Block searches the learned index's window answered.
    pub learned_hits: u64,
    /// Block searches that fell back to a binary search of the whole index.
    pub learned_fallbacks: u64,
    /// Index entries compared by block searches (`get` and `iter_from`): the learned index's bracket checks
    /// and binary search. The cross-check of `expensive-checks` builds is not counted.
    pub index_probes: u64,
    /// Reads from the file: the footer and the metadata at open (2), then one per data-block cache miss, retries
    /// included.
    pub block_reads: u64,
    /// Data blocks served by the block cache.
    pub block_cache_hits: u64,
    /// Re-reads after a block failed its checksum.
    pub read_retries: u64,
}

#[derive(Debug, Default)]
struct Counters {
    bloom_negatives: AtomicU64,
    learned_hits: AtomicU64,
    learned_fallbacks: AtomicU64,
    index_probes: AtomicU64,
    block_reads: AtomicU64,
    block_cache_hits: AtomicU64,
    read_retries: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, AtomicOrdering::Relaxed);
}

/// The metadata of a table, validated together: what both [`Table::open`] and [`decode_table`] load.
#[derive(Clone, Debug, PartialEq)]
struct Metadata {
    footer: Footer,
    index: Vec<IndexEntry>,
    bloom: BloomFilter,
    learned: LearnedIndex,
    meta: TableMeta,
    /// How the learned index maps keys: derived from the format version and the meta block's key range.
    domain: KeyDomain,
}

/// Decode the metadata blocks from `region`, the bytes from the index block's start to the footer's start.
/// Errors carry absolute file offsets.
fn decode_metadata(footer: Footer, region: &[u8]) -> Result<Metadata, DecodeError> {
    let base = footer.index.offset;
    assert_eq!(region.len() as u64, footer.meta.end() - base, "region spans the metadata blocks");
    let slice = |handle: super::footer::BlockHandle| {
        let start = (handle.offset - base) as usize;
        &region[start..start + handle.size_bytes as usize]
    };
    let index = decode_index(slice(footer.index)).map_err(|error| error.at(footer.index.offset))?;
    let probing = Probing::for_format(footer.format_version);
    let bloom = decode_bloom(slice(footer.bloom), probing).map_err(|error| error.at(footer.bloom.offset))?;
    let learned = decode_learned_index(slice(footer.learned)).map_err(|error| error.at(footer.learned.offset))?;
    let meta = decode_meta(slice(footer.meta)).map_err(|error| error.at(footer.meta.offset))?;
    let domain = KeyDomain::for_table(footer.format_version, &meta.min_user_key, &meta.max_user_key);
    let metadata = Metadata { footer, index, bloom, learned, meta, domain };
    check_metadata(&metadata)?;
    Ok(metadata)
}

/// Cross-check the metadata blocks: block and entry counts, data blocks ending where the index starts, key
/// range, and the learned index's error bound over the index.
fn check_metadata(metadata: &Metadata) -> Result<(), DecodeError> {
    let Metadata { footer, index, learned, meta, domain, .. } = metadata;
    let last = index.last().expect("a decoded index is not empty");
    assert!(footer.index.offset > 0 && index[0].offset == 0, "decoders validated the layout's start");
    let entry_total: u64 = index.iter().map(|entry| u64::from(entry.entry_count)).sum();
    if last.offset + u64::from(last.size_bytes) != footer.index.offset || entry_total != meta.entry_count {
        return Err(DecodeError::new(footer.index.offset, "index disagrees with the file layout or entry count"));
    }
    let keys_ok = meta.min_user_key == index[0].first_key.user_key && meta.max_user_key == last.last_key.user_key;
    if index.len() != meta.data_block_count as usize || !keys_ok {
        return Err(DecodeError::new(footer.meta.offset, "meta block disagrees with the index"));
    }
    if learned.position_count() as usize != index.len() {
        return Err(DecodeError::new(footer.learned.offset, "learned index fitted to another index"));
    }
    for (position, entry) in index.iter().enumerate() {
        let first_key = domain.map(&entry.first_key.user_key);
        let is_first = position == 0 || domain.map(&index[position - 1].first_key.user_key) != first_key;
        if is_first && learned.predict(first_key).abs_diff(position as u64) > u64::from(learned.epsilon()) {
            return Err(DecodeError::new(footer.learned.offset, format!("learned index misses block {position}")));
        }
    }
    Ok(())
}

/// Check a decoded block against its index entry.
fn check_block_against_index(block: &Block, entry: &IndexEntry) -> Result<(), DecodeError> {
    let matches = block.entry_count() == entry.entry_count as usize
        && *block.first_key() == entry.first_key
        && *block.last_key() == entry.last_key;
    if matches { Ok(()) } else { Err(DecodeError::new(0, "data block disagrees with its index entry")) }
}

/// An open, immutable table file. Metadata (index, bloom filter, learned index) lives in memory; data blocks are
/// read through the shared [`BlockCache`]. `Send + Sync`.
pub struct Table<F: env::File> {
    file: F,
    file_number: u64,
    file_size_bytes: u64,
    cache: Arc<BlockCache>,
    metadata: Metadata,
    /// Bumped by every read, so striped per thread (ADR-0213).
    counters: Striped<Counters>,
    /// Per data block: 0 until a read of it validated, then `VALIDATED_FLAG | its checksum` (ADR-0135).
    validated_crcs: Vec<AtomicU64>,
}

/// Marks a [`Table`]'s `validated_crcs` slot as holding a checksum.
const VALIDATED_FLAG: u64 = 1 << 32;

impl<F: env::File> fmt::Debug for Table<F> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Table")
            .field("path", &self.file.path())
            .field("file_number", &self.file_number)
            .field("file_size_bytes", &self.file_size_bytes)
            .field("data_block_count", &self.metadata.index.len())
            .finish_non_exhaustive()
    }
}

impl<F: env::File> Table<F> {
    /// Open a table: read and validate the footer and the metadata blocks (index, bloom, learned index, meta).
    /// Damage is [`Error::Corruption`] naming the file and the absolute offset; a read that fails its checksum
    /// is retried up to [`READ_RETRIES_MAX`] times first.
    pub fn open(file: F, file_number: u64, cache: Arc<BlockCache>) -> Result<Self, Error> {
        let file_size_bytes = file.len()?;
        if file_size_bytes < TABLE_SIZE_BYTES_MIN {
            let reason = format!("file of {file_size_bytes} bytes is too short to be a table");
            return Err(DecodeError::new(0, reason).in_file(file.path(), 0));
        }
        let footer_offset = file_size_bytes - FOOTER_SIZE_BYTES as u64;
        let counters = Striped::<Counters>::default();
        let footer = read_verified(&file, counters.mine(), footer_offset, FOOTER_SIZE_BYTES, |bytes| {
            decode_footer(bytes.as_slice(), file_size_bytes)
        })?;
        let region_size_bytes = usize::try_from(footer_offset - footer.index.offset).map_err(|_| {
            DecodeError::new(0, "metadata larger than memory").in_file(file.path(), footer.index.offset)
        })?;
        let metadata = read_verified(&file, counters.mine(), footer.index.offset, region_size_bytes, |bytes| {
            let relative =
                |error: DecodeError| DecodeError::new(error.offset.saturating_sub(footer.index.offset), error.reason);
            decode_metadata(footer, bytes.as_slice()).map_err(relative)
        })?;
        assert_eq!(metadata.footer, footer, "metadata decoded from the footer it was given");
        let validated_crcs = metadata.index.iter().map(|_| AtomicU64::new(0)).collect();
        Ok(Self { file, file_number, file_size_bytes, cache, metadata, counters, validated_crcs })
    }

    /// [`Table::open`] of a table this process just built, with the checksums of the data blocks its build walked
    /// before sealing them ([`TableBuilder::finish_walked`](super::TableBuilder)): a first read of such a block
    /// whose stored checksum is that one and verifies is those bytes, so it is not walked again, as a block a read
    /// validated before is not (ADR-0135). The bytes read are still checksummed, and any other bytes (a damaged or
    /// rewritten block, another file) are walked. Seeds nothing when the file's index holds another block count.
    pub(crate) fn open_built(
        file: F,
        file_number: u64,
        cache: Arc<BlockCache>,
        walked_crcs: &[Option<u32>],
    ) -> Result<Self, Error> {
        let table = Self::open(file, file_number, cache)?;
        if walked_crcs.len() == table.validated_crcs.len() {
            for (slot, crc) in table.validated_crcs.iter().zip(walked_crcs) {
                if let Some(crc) = crc {
                    slot.store(VALIDATED_FLAG | u64::from(*crc), AtomicOrdering::Relaxed);
                }
            }
        }
        Ok(table)
    }

    /// How many data blocks are known validated (a read of them is not walked).
    #[cfg(test)]
    pub(super) fn validated_block_count(&self) -> usize {
        self.validated_crcs.iter().filter(|slot| slot.load(AtomicOrdering::Relaxed) & VALIDATED_FLAG != 0).count()
    }

    /// The path of the table's file, as it was opened.
    pub fn path(&self) -> &std::path::Path {
        self.file.path()
    }

    /// The number this table was opened with (its block-cache key).
    pub fn file_number(&self) -> u64 {
        self.file_number
    }

    /// The file's size when it was opened.
    pub fn file_size_bytes(&self) -> u64 {
        self.file_size_bytes
    }

    /// How many entries (versions, tombstones included) the table holds.
    pub fn entry_count(&self) -> u64 {
        self.metadata.meta.entry_count
    }

    /// The smallest user key in the table.
    pub fn min_user_key(&self) -> &[u8] {
        &self.metadata.meta.min_user_key
    }

    /// The largest user key in the table.
    pub fn max_user_key(&self) -> &[u8] {
        &self.metadata.meta.max_user_key
    }

    /// The smallest sequence of any entry.
    pub fn min_sequence(&self) -> Sequence {
        self.metadata.meta.min_sequence
    }

    /// The largest sequence of any entry.
    pub fn max_sequence(&self) -> Sequence {
        self.metadata.meta.max_sequence
    }

    /// How many data blocks the table has.
    pub fn data_block_count(&self) -> usize {
        self.metadata.index.len()
    }

    /// The smallest and largest user key of data block `block_index`, from the index (no block read): a scan
    /// stops before a block wholly outside its range.
    pub(crate) fn block_user_key_range(&self, block_index: usize) -> (&[u8], &[u8]) {
        let entry = &self.metadata.index[block_index];
        (&entry.first_key.user_key, &entry.last_key.user_key)
    }

    /// A snapshot of this table's read-path counters.
    pub fn stats(&self) -> TableStats {
        let sum = |counter: fn(&Counters) -> &AtomicU64| {
            self.counters.sum(|stripe| counter(stripe).load(AtomicOrdering::Relaxed))
        };
        TableStats {
            bloom_negatives: sum(|stripe| &stripe.bloom_negatives),
            learned_hits: sum(|stripe| &stripe.learned_hits),
            learned_fallbacks: sum(|stripe| &stripe.learned_fallbacks),
            index_probes: sum(|stripe| &stripe.index_probes),
            block_reads: sum(|stripe| &stripe.block_reads),
            block_cache_hits: sum(|stripe| &stripe.block_cache_hits),
            read_retries: sum(|stripe| &stripe.read_retries),
        }
    }

    /// The newest version of `user_key` with sequence `<= snapshot`: [`Lookup::Found`], [`Lookup::Deleted`] for
    /// a tombstone, or [`Lookup::NotFound`]. Checks the key range and the Bloom filter before reading a block.
    pub fn get(&self, user_key: &[u8], snapshot: Sequence) -> Result<Lookup, Error> {
        if user_key < self.min_user_key() || user_key > self.max_user_key() {
            return Ok(Lookup::NotFound);
        }
        if !self.metadata.bloom.may_contain(user_key) {
            bump(&self.counters.mine().bloom_negatives);
            return Ok(Lookup::NotFound);
        }
        let Some(block_index) = self.find_block(user_key, snapshot) else {
            return Ok(Lookup::NotFound);
        };
        let block = self.load_block(block_index)?;
        Ok(match block.get_value(user_key, snapshot) {
            None => Lookup::NotFound,
            Some((ValueKind::Put, value)) => Lookup::Found(value.to_vec()),
            Some((ValueKind::Delete, _)) => Lookup::Deleted,
        })
    }

    /// Whether the table may hold a version of `user_key`: inside its key range and not ruled out by its Bloom
    /// filter, the checks [`Table::get`] makes before it reads a block (no false negatives; counts nothing).
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        (self.min_user_key()..=self.max_user_key()).contains(&user_key) && self.metadata.bloom.may_contain(user_key)
    }

    /// The data block holding the first entry `>= (user_key, sequence)`, through the learned index. With
    /// [`crate::EXPENSIVE_CHECKS`] (simulation and tests) the answer is cross-checked by a binary search of the
    /// whole index (ADR-0063).
    pub(crate) fn find_block(&self, user_key: &[u8], sequence: Sequence) -> Option<usize> {
        let index = &self.metadata.index;
        let is_before = |position: usize| {
            let last_key = &index[position].last_key;
            compare_internal(&last_key.user_key, last_key.sequence, user_key, sequence) == Ordering::Less
        };
        let mut probes = 0u64;
        let counted = |position: usize| {
            probes += 1;
            is_before(position)
        };
        let (answer, path) = self.metadata.learned.search(self.metadata.domain.map(user_key), index.len(), counted);
        let counters = self.counters.mine();
        counters.index_probes.fetch_add(probes, AtomicOrdering::Relaxed);
        bump(match path {
            SearchPath::Learned => &counters.learned_hits,
            SearchPath::Fallback => &counters.learned_fallbacks,
        });
        if crate::EXPENSIVE_CHECKS {
            assert_eq!(answer, partition_point(index.len(), is_before), "learned search agrees with binary search");
        }
        (answer < index.len()).then_some(answer)
    }

    /// Data block `block_index`, from the cache or the file (verified against its index entry).
    pub(crate) fn load_block(&self, block_index: usize) -> Result<Arc<Block>, Error> {
        assert!(block_index < self.metadata.index.len(), "block {block_index} past the index");
        let entry = &self.metadata.index[block_index];
        if let Some(block) = self.cache.get(self.file_number, entry.offset) {
            bump(&self.counters.mine().block_cache_hits);
            assert_eq!(block.entry_count(), entry.entry_count as usize, "cached block belongs to another file");
            return Ok(block);
        }
        let slot = &self.validated_crcs[block_index];
        let known = slot.load(AtomicOrdering::Relaxed);
        let known_crc = (known & VALIDATED_FLAG != 0).then_some(known as u32);
        let (block, crc) =
            read_verified(&self.file, self.counters.mine(), entry.offset, entry.size_bytes as usize, |bytes| {
                // The buffer becomes the block (no copy); a failed attempt's buffer is dropped and the next re-read
                // allocates a fresh one. A block read before is not walked again (ADR-0135).
                let keys = (&entry.first_key, &entry.last_key);
                let (block, crc) = decode_block_known(bytes, known_crc, keys)?;
                check_block_against_index(&block, entry)?;
                Ok((block, crc))
            })?;
        slot.store(VALIDATED_FLAG | u64::from(crc), AtomicOrdering::Relaxed);
        let block = Arc::new(block);
        self.cache.insert(self.file_number, entry.offset, Arc::clone(&block));
        Ok(block)
    }

    /// Every entry in internal-key order.
    pub fn iter(&self) -> TableIter<'_, F> {
        TableIter { table: self, next_block: 0, cursor: None, seek_user_key: None, failed: false }
    }

    /// Every entry whose user key is `>= start_user_key`, in internal-key order.
    pub fn iter_from(&self, start_user_key: &[u8]) -> TableIter<'_, F> {
        let next_block = self.find_block(start_user_key, u64::MAX).unwrap_or(self.metadata.index.len());
        TableIter { table: self, next_block, cursor: None, seek_user_key: Some(start_user_key.to_vec()), failed: false }
    }
}

/// Read `size_bytes` at `offset` and decode them, re-reading up to [`READ_RETRIES_MAX`] times while the decoder
/// fails (a transient read corruption heals on a re-read; damage on the media does not). The decoder may take the
/// buffer it is given (leaving it empty). When it fails and leaves the bytes whole, a re-read that returns those
/// very bytes would fail the same way (the decoder is pure), so it is not decoded again (ADR-0140). Every attempt
/// is read, so the reads and their fault decisions are the same.
fn read_verified<F: env::File, T>(
    file: &F,
    counters: &Counters,
    offset: u64,
    size_bytes: usize,
    mut decode: impl FnMut(&mut Vec<u8>) -> Result<T, DecodeError>,
) -> Result<T, Error> {
    let (mut buffer, mut failed_bytes) = (Vec::new(), Vec::new());
    // `failed_bytes` holds the bytes the last failed decode was given (it left them whole).
    let mut has_failed_bytes = false;
    let mut last_error: Option<DecodeError> = None;
    for attempt in 0..=READ_RETRIES_MAX {
        if attempt > 0 {
            bump(&counters.read_retries);
        }
        // Filled without zeroing first (ADR-0140): the same reads, so the same fault decisions.
        file.read_exact_at_into(offset, size_bytes, &mut buffer)?;
        bump(&counters.block_reads);
        if has_failed_bytes && buffer == failed_bytes {
            continue;
        }
        match decode(&mut buffer) {
            Ok(value) => return Ok(value),
            Err(error) => last_error = Some(error),
        }
        has_failed_bytes = buffer.len() == size_bytes;
        std::mem::swap(&mut buffer, &mut failed_bytes);
    }
    let error = last_error.expect("every failed attempt records its error");
    assert!(error.offset <= size_bytes as u64, "decode error offset past the bytes decoded");
    Err(error.in_file(file.path(), offset))
}

/// An iterator over a table's entries, yielding `Result<Entry, Error>`. After an error it yields nothing more.
pub struct TableIter<'a, F: env::File> {
    table: &'a Table<F>,
    next_block: usize,
    cursor: Option<BlockCursor>,
    seek_user_key: Option<Vec<u8>>,
    failed: bool,
}

impl<F: env::File> fmt::Debug for TableIter<'_, F> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("TableIter")
            .field("table", self.table)
            .field("next_block", &self.next_block)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl<F: env::File> Iterator for TableIter<'_, F> {
    type Item = Result<Entry, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let block_count = self.table.metadata.index.len();
        // Every block holds an entry, so one block load always yields one: two rounds suffice.
        for _ in 0..2 {
            if self.failed {
                return None;
            }
            if let Some(entry) = self.cursor.as_mut().and_then(BlockCursor::next_entry) {
                return Some(Ok(entry));
            }
            if self.next_block >= block_count {
                return None;
            }
            match self.table.load_block(self.next_block) {
                Ok(block) => {
                    self.cursor = Some(match self.seek_user_key.take() {
                        Some(start) => BlockCursor::seek(block, &start, u64::MAX),
                        None => BlockCursor::new(block),
                    });
                    self.next_block += 1;
                }
                Err(error) => {
                    self.failed = true;
                    return Some(Err(error));
                }
            }
        }
        unreachable!("a loaded block yielded no entry: blocks are never empty");
    }
}

/// Every part of a table file, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodedTable {
    /// The meta block.
    pub meta: TableMeta,
    /// The index block: one entry per data block.
    pub index: Vec<IndexEntry>,
    /// The Bloom filter.
    pub bloom: BloomFilter,
    /// The learned index over the data blocks' first keys.
    pub learned: LearnedIndex,
    /// Every entry, in internal-key order.
    pub entries: Vec<Entry>,
}

/// Decode and validate a whole table file: footer, metadata blocks and their cross-checks, every data block
/// against its index entry (so keys are strictly ordered across the file), the Bloom filter holding every key,
/// and the sequence range. Pure; never panics; allocates only in proportion to `bytes.len()`.
pub fn decode_table(bytes: &[u8]) -> Result<DecodedTable, DecodeError> {
    let file_size_bytes = bytes.len() as u64;
    if file_size_bytes < TABLE_SIZE_BYTES_MIN {
        return Err(DecodeError::new(0, format!("file of {file_size_bytes} bytes is too short to be a table")));
    }
    let footer_offset = bytes.len() - FOOTER_SIZE_BYTES;
    let footer =
        decode_footer(&bytes[footer_offset..], file_size_bytes).map_err(|error| error.at(footer_offset as u64))?;
    let metadata = decode_metadata(footer, &bytes[footer.index.offset as usize..footer_offset])?;
    let mut entries = Vec::new();
    let (mut min_sequence, mut max_sequence) = (u64::MAX, 0u64);
    for entry in &metadata.index {
        let start = entry.offset as usize;
        let block =
            decode_block(&bytes[start..start + entry.size_bytes as usize]).map_err(|error| error.at(entry.offset))?;
        check_block_against_index(&block, entry).map_err(|error| error.at(entry.offset))?;
        for item in BlockCursor::new(Arc::new(block)) {
            if !metadata.bloom.may_contain(&item.key.user_key) {
                return Err(DecodeError::new(footer.bloom.offset, "Bloom filter misses a key of the table"));
            }
            min_sequence = min_sequence.min(item.key.sequence);
            max_sequence = max_sequence.max(item.key.sequence);
            entries.push(item);
        }
    }
    if (min_sequence, max_sequence) != (metadata.meta.min_sequence, metadata.meta.max_sequence) {
        return Err(DecodeError::new(footer.meta.offset, "meta block's sequence range disagrees with the entries"));
    }
    let Metadata { index, bloom, learned, meta, .. } = metadata;
    assert_eq!(entries.len() as u64, meta.entry_count, "validated entry counts add up");
    Ok(DecodedTable { meta, index, bloom, learned, entries })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use env::{Env, FaultConfig, File, OpenOptions, SimEnv};

    use super::*;

    /// A file of 64 bytes in a fresh world with `config`'s faults.
    fn file_in(config: FaultConfig) -> env::sim::SimFile {
        let env = SimEnv::with_faults(9, config);
        env.create_dir_all(Path::new("/t")).unwrap();
        let file = env.open(Path::new("/t/f"), OpenOptions::create_new()).unwrap();
        file.write_all_at(0, &[7u8; 64]).unwrap();
        file
    }

    /// How many times `read_verified` decoded, its counters and its error, with a decoder that always fails
    /// (damage on the media), taking the buffer or leaving it whole.
    fn always_failing(file: &env::sim::SimFile, takes: bool) -> (usize, TableStats, Error) {
        let (counters, mut decodes) = (Counters::default(), 0);
        let result: Result<(), Error> = read_verified(file, &counters, 8, 32, |bytes| {
            decodes += 1;
            if takes {
                drop(std::mem::take(bytes));
            }
            Err(DecodeError::new(3, "damaged"))
        });
        let stats = TableStats {
            block_reads: counters.block_reads.load(AtomicOrdering::Relaxed),
            read_retries: counters.read_retries.load(AtomicOrdering::Relaxed),
            ..TableStats::default()
        };
        (decodes, stats, result.unwrap_err())
    }

    /// A re-read of the very bytes that failed is read (its fault decisions made) but not decoded again
    /// (ADR-0140); bytes a decoder took, or bytes that differ, are decoded; the error is the same either way.
    #[test]
    fn a_retry_of_the_same_failed_bytes_is_read_but_not_decoded_again() {
        let reads = u64::from(READ_RETRIES_MAX) + 1;
        let expected = TableStats { block_reads: reads, read_retries: reads - 1, ..TableStats::default() };
        let (decodes, stats, error) = always_failing(&file_in(FaultConfig::none()), false);
        assert_eq!((decodes, stats), (1, expected), "the same bytes each time: decoded once, read every time");
        let named = matches!(&error, Error::Corruption { offset: 11, reason, .. } if reason.contains("damaged"));
        assert!(named, "the decoder's error at its absolute offset: {error:?}");
        let (decodes, stats, taken_error) = always_failing(&file_in(FaultConfig::none()), true);
        assert_eq!(
            (decodes, stats),
            (reads as usize, expected),
            "a taken buffer cannot be compared: decoded each time"
        );
        assert_eq!(taken_error.to_string(), error.to_string());
        let flips = FaultConfig { read_corruption_ppm: 1_000_000, ..FaultConfig::none() };
        let (decodes, stats, _) = always_failing(&file_in(flips), false);
        assert_eq!((decodes, stats), (reads as usize, expected), "a bit flipped on every read: new bytes each time");
    }
}
