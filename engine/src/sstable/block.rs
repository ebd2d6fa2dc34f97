//! Data blocks: prefix-compressed entries with restart points, sealed by a tagged CRC.
//!
//! ```text
//! entry     := shared_size_bytes varint | unshared_size_bytes varint | value_size_bytes varint
//!              | key_delta [unshared_size_bytes] | sequence_and_kind u64 LE (sequence << 8 | kind) | value
//! block     := entry* | restart_offset u32 LE * restart_count | restart_count u32 LE | entry_count u32 LE
//!              | crc32 u32 LE (tag 0xDA)
//! ```
//!
//! The entry at every restart offset has `shared_size_bytes == 0`, so its key can be read alone: a seek binary
//! searches the restart keys, then scans at most one restart interval.

use std::cmp::Ordering;
use std::sync::Arc;

use super::codec::{BlockTag, CRC_SIZE_BYTES, Cursor, partition_point, put_varint, seal, unseal};
use super::entry::{ParsedEntry, parse_entry, parse_entry_checked, parse_entry_parts};
use crate::{DecodeError, Entry, InternalKey, SEQUENCE_MAX, Sequence, ValueKind, compare_internal};

/// The largest block a decoder accepts: one entry of the largest key and value, plus slack.
pub const BLOCK_SIZE_BYTES_MAX: usize = 32 * 1024 * 1024;
/// The smallest possible encoded entry: three one-byte varints and the sequence/kind trailer.
pub const ENTRY_SIZE_BYTES_MIN: usize = 3 + 8;
/// The most entries a block can hold.
pub const BLOCK_ENTRIES_MAX: usize = BLOCK_SIZE_BYTES_MAX / ENTRY_SIZE_BYTES_MIN;
/// Fixed per-block memory counted by the cache on top of the block's bytes.
pub const BLOCK_OVERHEAD_BYTES: usize = 128;

/// Accumulates entries into one data block.
#[derive(Debug)]
pub struct BlockBuilder {
    buffer: Vec<u8>,
    restart_offsets: Vec<u32>,
    restart_interval: usize,
    entries_since_restart: usize,
    entry_count: u32,
    last_key: Option<InternalKey>,
}

impl BlockBuilder {
    /// A builder placing a restart point every `restart_interval` entries (at least 1).
    pub fn new(restart_interval: usize) -> Self {
        assert!(restart_interval >= 1, "restart interval must be at least one entry");
        Self {
            buffer: Vec::new(),
            restart_offsets: Vec::new(),
            restart_interval,
            entries_since_restart: 0,
            entry_count: 0,
            last_key: None,
        }
    }

    /// Room for `additional_bytes` more entry bytes without growing the buffer (kept across blocks).
    pub(super) fn reserve(&mut self, additional_bytes: usize) {
        self.buffer.reserve(additional_bytes);
    }

    /// True until the first entry is added (and again after `finish`).
    pub fn is_empty(&self) -> bool {
        self.entry_count == 0
    }

    /// The size the block would have if finished now.
    pub fn size_estimate_bytes(&self) -> usize {
        self.buffer.len() + self.restart_offsets.len() * 4 + 12
    }

    /// Append an entry; it must sort strictly after the previous one.
    pub fn add(&mut self, entry: &Entry) {
        let key = &entry.key;
        let restart = match &self.last_key {
            Some(last) => {
                assert!(last < key, "block entries out of order: {last:?} then {key:?}");
                self.entries_since_restart >= self.restart_interval
            }
            None => true,
        };
        let shared_size_bytes = match &self.last_key {
            Some(last) if !restart => common_prefix_size_bytes(&last.user_key, &key.user_key),
            _ => 0,
        };
        if restart {
            self.restart_offsets.push(size_u32(self.buffer.len()));
            self.entries_since_restart = 0;
        }
        let unshared = &key.user_key[shared_size_bytes..];
        put_varint(&mut self.buffer, size_u32(shared_size_bytes));
        put_varint(&mut self.buffer, size_u32(unshared.len()));
        put_varint(&mut self.buffer, size_u32(entry.value.len()));
        self.buffer.extend_from_slice(unshared);
        self.buffer.extend_from_slice(&sequence_and_kind(key.sequence, entry.kind).to_le_bytes());
        self.buffer.extend_from_slice(&entry.value);
        self.entries_since_restart += 1;
        self.entry_count += 1;
        InternalKey::copy_into(key, &mut self.last_key);
        assert!(self.buffer.len() <= BLOCK_SIZE_BYTES_MAX, "data block grew past BLOCK_SIZE_BYTES_MAX");
    }

    /// Seal the block and reset the builder. The block must not be empty. (Tests: a table appends its blocks with
    /// [`BlockBuilder::finish_into`].)
    #[cfg(test)]
    pub fn finish(&mut self) -> Vec<u8> {
        let mut block = Vec::new();
        self.finish_into(&mut block);
        block
    }

    /// As [`BlockBuilder::finish`], appending the sealed block to `output` (a table's bytes): no block-sized
    /// vector per block, and the builder keeps its buffers for the next block (ADR-0136). Returns the block's
    /// checksum when this build walked the contents before sealing them ([`BUILT_BLOCKS_WALKED`]): the walk a read
    /// makes ([`decode_block`]) found them whole, holding the entries added, first to last (ADR-0149).
    pub fn finish_into(&mut self, output: &mut Vec<u8>) -> Option<u32> {
        assert!(!self.is_empty(), "finishing an empty block");
        let start = output.len();
        output.extend_from_slice(&self.buffer);
        for offset in &self.restart_offsets {
            output.extend_from_slice(&offset.to_le_bytes());
        }
        output.extend_from_slice(&size_u32(self.restart_offsets.len()).to_le_bytes());
        output.extend_from_slice(&self.entry_count.to_le_bytes());
        // The structure is checked before sealing: the checksum `seal` appends is over exactly these bytes, so
        // checking it again here would compute the same CRC twice over the same bytes (ADR-0140).
        if BUILT_BLOCKS_WALKED {
            self.check_built(&output[start..]);
        }
        let crc = seal(BlockTag::Data, output, start);
        self.buffer.clear();
        self.restart_offsets.clear();
        (self.entries_since_restart, self.entry_count, self.last_key) = (0, 0, None);
        BUILT_BLOCKS_WALKED.then_some(crc)
    }

    /// The self-check of a built block's contents: [`validate_contents`] accepts them, with the entry count and
    /// the first and last keys of the entries added (the first read in place: a restart entry shares no prefix).
    fn check_built(&self, contents: &[u8]) {
        let layout = validate_contents(contents).expect("a freshly built block must decode");
        let first = parse_entry_parts(&self.buffer, 0, 0).expect("the first entry parses");
        let first_key = (&self.buffer[first.delta_start..first.delta_end], first.sequence);
        assert_eq!(layout.entry_count, self.entry_count as usize, "a built block holds the entries added");
        assert_eq!(Some(&layout.last_key), self.last_key.as_ref(), "a built block ends with the last key added");
        assert_eq!(
            (layout.first_key.user_key.as_slice(), layout.first_key.sequence),
            first_key,
            "a built block starts with the first key added"
        );
    }
}

/// Builds with debug assertions (every build the project runs: ADR-0001) walk each block they build before
/// sealing it ([`BlockBuilder::finish_into`]), so a table they write can skip that walk on its first read
/// (ADR-0149).
pub const BUILT_BLOCKS_WALKED: bool = cfg!(debug_assertions);

fn size_u32(size_bytes: usize) -> u32 {
    u32::try_from(size_bytes).expect("sizes inside a block fit u32 (BLOCK_SIZE_BYTES_MAX)")
}

fn common_prefix_size_bytes(left: &[u8], right: &[u8]) -> usize {
    left.iter().zip(right).take_while(|(a, b)| a == b).count()
}

/// Pack a sequence and a kind into the 8-byte entry trailer.
pub fn sequence_and_kind(sequence: Sequence, kind: ValueKind) -> u64 {
    assert!(sequence <= SEQUENCE_MAX, "sequence {sequence} above SEQUENCE_MAX");
    (sequence << 8) | u64::from(kind.to_byte())
}

/// A validated data block, kept as the bytes it was read as (entries, restart array and counts; the CRC is cut
/// off): searched in place, never decoded into entries. Shared through the block cache as `Arc<Block>`.
#[derive(Debug, PartialEq, Eq)]
pub struct Block {
    /// The sealed block's contents without its CRC: `entries | restart offsets | counts`.
    bytes: Vec<u8>,
    /// Where the entries region ends and the restart array starts.
    entries_end: usize,
    restart_count: usize,
    entry_count: usize,
    first_key: InternalKey,
    last_key: InternalKey,
}

/// What validating a block's bytes found: where its parts are and its first and last keys.
#[derive(Debug)]
struct Layout {
    entries_end: usize,
    restart_count: usize,
    entry_count: usize,
    first_key: InternalKey,
    last_key: InternalKey,
}

/// Decode and validate a data block (CRC, restart offsets, varints, kinds, strict key order), copying its bytes.
///
/// A checksum mismatch is reported at offset 0 (the start of the block); other errors at the bad bytes.
pub fn decode_block(bytes: &[u8]) -> Result<Block, DecodeError> {
    let layout = validate_block(bytes)?;
    Ok(Block::from_parts(bytes[..bytes.len() - CRC_SIZE_BYTES].to_vec(), layout))
}

/// [`decode_block`] keeping the buffer the block was read into: no copy (the read path's cache miss).
pub fn decode_block_owned(mut bytes: Vec<u8>) -> Result<Block, DecodeError> {
    decode_block_taking(&mut bytes)
}

/// [`decode_block_owned`] that takes the buffer only when it decodes: on an error it is left as it was.
fn decode_block_taking(bytes: &mut Vec<u8>) -> Result<Block, DecodeError> {
    let layout = validate_block(bytes)?;
    let mut owned = std::mem::take(bytes);
    owned.truncate(owned.len() - CRC_SIZE_BYTES);
    Ok(Block::from_parts(owned, layout))
}

/// [`decode_block_owned`] for a block an earlier read of which validated with checksum `known_crc` (ADR-0135).
/// When these bytes carry that checksum and it verifies, they are those bytes (a table is immutable; a read that
/// flips bits fails its checksum), so the structural walk is not repeated: the counts come from the trailer and the
/// first and last keys are `keys`, the index entry's (which the earlier validation matched). Any other bytes take
/// the whole [`decode_block_owned`]. A failing checksum is the same error either way. Returns the block, which
/// takes the buffer, and its checksum; on an error the buffer is left as it was (ADR-0140: a retry compares it).
pub(crate) fn decode_block_known(
    bytes: &mut Vec<u8>,
    known_crc: Option<u32>,
    keys: (&InternalKey, &InternalKey),
) -> Result<(Block, u32), DecodeError> {
    let stored = bytes
        .len()
        .checked_sub(CRC_SIZE_BYTES)
        .map(|at| u32::from_le_bytes(bytes[at..].try_into().expect("the checksum is CRC_SIZE_BYTES long")));
    let Some(crc) = stored else { return Err(validate_block(bytes).expect_err("a block shorter than its CRC")) };
    if known_crc != Some(crc) || bytes.len() > BLOCK_SIZE_BYTES_MAX {
        return decode_block_taking(bytes).map(|block| (block, crc));
    }
    let contents_size_bytes = unseal(BlockTag::Data, bytes)?.len();
    let mut bytes = std::mem::take(bytes);
    bytes.truncate(contents_size_bytes);
    let counts_offset = contents_size_bytes.checked_sub(8).expect("a validated block holds its counts");
    let count = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("a count is 4 bytes")) as usize;
    let (restart_count, entry_count) = (count(counts_offset), count(counts_offset + 4));
    let entries_end = counts_offset.checked_sub(restart_count * 4).expect("a validated block holds its restarts");
    let (first_key, last_key) = (keys.0.clone(), keys.1.clone());
    Ok((Block::from_parts(bytes, Layout { entries_end, restart_count, entry_count, first_key, last_key }), crc))
}

/// Check everything [`decode_block`] promises; returns where the parts are.
fn validate_block(bytes: &[u8]) -> Result<Layout, DecodeError> {
    if bytes.len() > BLOCK_SIZE_BYTES_MAX {
        return Err(DecodeError::new(0, format!("block of {} bytes exceeds BLOCK_SIZE_BYTES_MAX", bytes.len())));
    }
    validate_contents(unseal(BlockTag::Data, bytes)?)
}

/// [`validate_block`]'s structural checks of a block's contents (its CRC cut off, or not yet appended).
fn validate_contents(contents: &[u8]) -> Result<Layout, DecodeError> {
    let Some(counts_offset) = contents.len().checked_sub(8) else {
        return Err(DecodeError::new(0, "block too short for its restart and entry counts"));
    };
    let mut cursor = Cursor::at(contents, counts_offset);
    let restart_count = cursor.u32("restart count")? as usize;
    let entry_count = cursor.u32("entry count")? as usize;
    if restart_count == 0 || restart_count > counts_offset / 4 || entry_count == 0 || entry_count > BLOCK_ENTRIES_MAX {
        return Err(DecodeError::new(
            counts_offset as u64,
            format!("bad counts: {restart_count} restarts, {entry_count} entries"),
        ));
    }
    let entries_end = counts_offset - restart_count * 4;
    assert!(entries_end <= counts_offset, "restart array lies inside the block");
    let mut restart_cursor = Cursor::at(contents, entries_end);
    let mut previous_restart = None;
    while restart_cursor.position() < counts_offset {
        let position = restart_cursor.position() as u64;
        let restart = restart_cursor.u32("restart offset")?;
        let in_order = previous_restart.is_none_or(|last| last < restart) && (restart as usize) < entries_end;
        if !in_order || (previous_restart.is_none() && restart != 0) {
            return Err(DecodeError::new(position, format!("bad restart offset {restart}")));
        }
        previous_restart = Some(restart);
    }
    let restart_offset = |index: usize| restart_at(contents, entries_end, index);
    let (first_key, last_key) = validate_entries(&contents[..entries_end], restart_count, restart_offset, entry_count)?;
    Ok(Layout { entries_end, restart_count, entry_count, first_key, last_key })
}

/// Restart offset `index` of a block whose restart array starts at `entries_end` of `contents`.
#[inline]
fn restart_at(contents: &[u8], entries_end: usize, index: usize) -> usize {
    let start = entries_end + index * 4;
    u32::from_le_bytes(contents[start..start + 4].try_into().expect("a restart offset is 4 bytes")) as usize
}

/// Walk every entry: restarts land on entry boundaries with no shared prefix, keys strictly increase, the count
/// matches. Returns the first and last keys. One key buffer for the walk: an entry is ordered against the previous
/// key by its unshared bytes alone (the shared ones are equal), so no entry's key is copied.
fn validate_entries(
    entries: &[u8],
    restart_count: usize,
    restart_offset: impl Fn(usize) -> usize,
    entry_count: usize,
) -> Result<(InternalKey, InternalKey), DecodeError> {
    let mut key = Vec::new();
    let mut previous_sequence = None;
    let mut first = None;
    let (mut offset, mut next_restart, mut seen) = (0usize, 0usize, 0usize);
    while offset < entries.len() {
        // The next restart point, read once per entry: it must lie at this entry or after it.
        let restart = (next_restart < restart_count).then(|| restart_offset(next_restart));
        let at_restart = restart == Some(offset);
        if let Some(restart) = restart.filter(|&restart| restart < offset) {
            return Err(DecodeError::new(restart as u64, "restart inside an entry"));
        }
        let parsed = parse_entry_checked(entries, offset, key.len())?;
        if at_restart && parsed.shared_size_bytes != 0 {
            return Err(DecodeError::new(offset as u64, "entry at a restart point shares a prefix"));
        }
        next_restart += usize::from(at_restart);
        let delta = &entries[parsed.delta_start..parsed.delta_end];
        if let Some(previous_sequence) = previous_sequence
            && compare_internal(&key[parsed.shared_size_bytes..], previous_sequence, delta, parsed.sequence)
                != Ordering::Less
        {
            return Err(DecodeError::new(offset as u64, "keys out of order inside the block"));
        }
        key.truncate(parsed.shared_size_bytes);
        key.extend_from_slice(delta);
        if first.is_none() {
            first = Some(InternalKey::new(key.clone(), parsed.sequence));
        }
        previous_sequence = Some(parsed.sequence);
        seen += 1;
        assert!(parsed.next_offset > offset && parsed.next_offset <= entries.len(), "entry parse overran");
        offset = parsed.next_offset;
    }
    assert_eq!(offset, entries.len(), "entries parse exactly to the end of their region");
    if seen != entry_count || next_restart != restart_count {
        return Err(DecodeError::new(
            entries.len() as u64,
            format!(
                "block holds {seen} entries and {next_restart} restarts, trailer says {entry_count} and {restart_count}"
            ),
        ));
    }
    let (Some(first), Some(last_sequence)) = (first, previous_sequence) else {
        return Err(DecodeError::new(0, "block has no entries"));
    };
    Ok((first, InternalKey::new(key, last_sequence)))
}

impl Block {
    fn from_parts(bytes: Vec<u8>, layout: Layout) -> Self {
        let Layout { entries_end, restart_count, entry_count, first_key, last_key } = layout;
        assert_eq!(bytes.len(), entries_end + restart_count * 4 + 8, "the block's bytes are what was validated");
        Self { bytes, entries_end, restart_count, entry_count, first_key, last_key }
    }

    /// The entries region.
    #[inline]
    fn entries(&self) -> &[u8] {
        &self.bytes[..self.entries_end]
    }

    /// Restart offset `index` (`< restart_count`).
    #[inline]
    fn restart_offset(&self, index: usize) -> usize {
        assert!(index < self.restart_count, "restart {index} past the restart array");
        restart_at(&self.bytes, self.entries_end, index)
    }

    /// How many entries the block holds (at least one).
    pub fn entry_count(&self) -> usize {
        self.entry_count
    }

    /// The block's smallest internal key.
    pub fn first_key(&self) -> &InternalKey {
        &self.first_key
    }

    /// The block's largest internal key.
    pub fn last_key(&self) -> &InternalKey {
        &self.last_key
    }

    /// Memory the block occupies, as charged by the block cache.
    pub fn charge_bytes(&self) -> usize {
        self.bytes.len() + self.first_key.user_key.len() + self.last_key.user_key.len() + BLOCK_OVERHEAD_BYTES
    }

    /// The first entry whose internal key is `>= (user_key, sequence)`, its key left in `key` (one buffer for
    /// the whole search: no allocation per probe or per scanned entry once it has grown to the key size).
    fn seek_entry(&self, user_key: &[u8], sequence: Sequence, key: &mut Vec<u8>) -> Option<ParsedEntry> {
        let mut offset = self.restart_offset(self.restart_at_or_before(user_key, sequence));
        key.clear();
        let mut scanned = 0usize;
        while offset < self.entries().len() {
            scanned += 1;
            assert!(scanned <= BLOCK_ENTRIES_MAX, "seek scanned past BLOCK_ENTRIES_MAX");
            let parsed = parse_entry(self.entries(), offset, key).expect("a validated block parses");
            assert!(parsed.next_offset > offset && parsed.next_offset <= self.entries().len(), "entry out of bounds");
            offset = parsed.next_offset;
            if compare_internal(key, parsed.sequence, user_key, sequence) != Ordering::Less {
                return Some(parsed);
            }
        }
        None
    }

    /// The value a point lookup finds: the first entry `>= (user_key, sequence)` if its user key is `user_key`,
    /// as its kind and its value's bytes (borrowed: nothing is copied, and no key is rebuilt: each entry's key is
    /// compared with `user_key` from the previous comparison, ADR-0065). The block must hold an entry
    /// `>= (user_key, sequence)` (the index chose it for that): panics otherwise.
    pub fn get_value(&self, user_key: &[u8], sequence: Sequence) -> Option<(ValueKind, &[u8])> {
        let mut offset = self.restart_offset(self.restart_at_or_before(user_key, sequence));
        // The previous entry's key: its order against `user_key`, how many leading bytes the two share, its size.
        let (mut order, mut matched, mut key_size_bytes) = (Ordering::Equal, 0usize, 0usize);
        for _ in 0..BLOCK_ENTRIES_MAX {
            assert!(
                offset < self.entries().len(),
                "the index promised an entry at or after the seek key in this block"
            );
            let parsed = parse_entry_parts(self.entries(), offset, key_size_bytes).expect("a validated block parses");
            let delta = &self.entries()[parsed.delta_start..parsed.delta_end];
            let shared = parsed.shared_size_bytes;
            // A key that keeps more than the matched bytes of the previous one differs from `user_key` where the
            // previous one did, the same way; otherwise its first `shared` bytes equal `user_key`'s.
            if shared <= matched {
                let rest = &user_key[shared..];
                let common = delta.iter().zip(rest).take_while(|(left, right)| left == right).count();
                matched = shared + common;
                // The first differing byte decides, else the shorter is first: `delta.cmp(rest)` without a call.
                order = match (delta.get(common), rest.get(common)) {
                    (Some(left), Some(right)) => left.cmp(right),
                    _ => delta.len().cmp(&rest.len()),
                };
                debug_assert_eq!(order, delta.cmp(rest), "the first differing byte orders the keys");
            }
            key_size_bytes = shared + delta.len();
            offset = parsed.next_offset;
            if order.then(sequence.cmp(&parsed.sequence)) != Ordering::Less {
                let found = (order == Ordering::Equal)
                    .then(|| (parsed.kind, &self.entries()[parsed.value_start..parsed.value_end]));
                if crate::EXPENSIVE_CHECKS {
                    let mut key = Vec::new();
                    let paired = self.seek_entry(user_key, sequence, &mut key).map(|entry| entry.value_start);
                    assert_eq!(paired, Some(parsed.value_start), "lookup without a key buffer agrees with seek");
                }
                return found;
            }
        }
        panic!("a block holds at most BLOCK_ENTRIES_MAX entries");
    }

    /// The key at restart point `index` (restart entries share no prefix: their key is in one piece) and its
    /// sequence.
    fn restart_key(&self, index: usize) -> (&[u8], Sequence) {
        let parsed = parse_entry_parts(self.entries(), self.restart_offset(index), 0);
        let parsed = parsed.expect("a validated block parses");
        assert_eq!(parsed.shared_size_bytes, 0, "restart entries share no prefix");
        (&self.entries()[parsed.delta_start..parsed.delta_end], parsed.sequence)
    }

    /// The last restart point whose key is `< (user_key, sequence)` (0 if none is): where a search for the first
    /// entry `>= (user_key, sequence)` starts. A binary search comparing the restart keys in place.
    fn restart_at_or_before(&self, user_key: &[u8], sequence: Sequence) -> usize {
        partition_point(self.restart_count, |index| {
            let (key, key_sequence) = self.restart_key(index);
            compare_internal(key, key_sequence, user_key, sequence) == Ordering::Less
        })
        .saturating_sub(1)
    }
}

/// A position in a block, yielding entries in order. Owns its block through an `Arc`.
#[derive(Debug)]
pub struct BlockCursor {
    block: Arc<Block>,
    offset: usize,
    key: Vec<u8>,
    peeked: Option<Entry>,
}

impl BlockCursor {
    /// A cursor before the block's first entry.
    pub fn new(block: Arc<Block>) -> Self {
        Self { block, offset: 0, key: Vec::new(), peeked: None }
    }

    /// A cursor at the first entry whose internal key is `>= (user_key, sequence)` (exhausted if none is):
    /// binary search of the restart keys, then a scan of one restart interval.
    pub fn seek(block: Arc<Block>, user_key: &[u8], sequence: Sequence) -> Self {
        let mut key = Vec::new();
        let (offset, peeked) = match block.seek_entry(user_key, sequence, &mut key) {
            Some(found) => {
                let value = block.entries()[found.value_start..found.value_end].to_vec();
                let entry = Entry { key: InternalKey::new(key.clone(), found.sequence), kind: found.kind, value };
                (found.next_offset, Some(entry))
            }
            None => (block.entries().len(), None),
        };
        Self { block, offset, key, peeked }
    }

    /// The next entry, or None at the end of the block.
    pub fn next_entry(&mut self) -> Option<Entry> {
        self.next_entry_where(|_, _| true)
    }

    /// The next entry `keep` accepts by its user key and sequence, or None at the end of the block. The entries it
    /// passes over are parsed but not copied (a scan skips a key's older versions so, ADR-0085).
    pub fn next_entry_where(&mut self, mut keep: impl FnMut(&[u8], Sequence) -> bool) -> Option<Entry> {
        if let Some(entry) = self.peeked.take()
            && keep(&entry.key.user_key, entry.key.sequence)
        {
            return Some(entry);
        }
        while self.offset < self.block.entries().len() {
            let parsed =
                parse_entry(self.block.entries(), self.offset, &mut self.key).expect("a validated block parses");
            assert!(
                parsed.next_offset > self.offset && parsed.next_offset <= self.block.entries().len(),
                "entry bounds"
            );
            self.offset = parsed.next_offset;
            if keep(&self.key, parsed.sequence) {
                return Some(Entry {
                    key: InternalKey::new(self.key.clone(), parsed.sequence),
                    kind: parsed.kind,
                    value: self.block.entries()[parsed.value_start..parsed.value_end].to_vec(),
                });
            }
        }
        None
    }
}

impl Iterator for BlockCursor {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        self.next_entry()
    }
}

#[cfg(test)]
mod tests;
