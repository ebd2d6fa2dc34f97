//! The index block: one entry per data block, in file order.
//!
//! ```text
//! index := block_count u32 LE
//!          | (offset u64 LE | size_bytes u32 LE | entry_count u32 LE
//!             | first_key_size u32 LE | first_key | first_sequence u64 LE
//!             | last_key_size u32 LE | last_key | last_sequence u64 LE) * block_count
//!          | crc32 u32 LE (tag 0x1D)
//! ```

use std::cmp::Ordering;

use super::block::{BLOCK_ENTRIES_MAX, BLOCK_SIZE_BYTES_MAX, ENTRY_SIZE_BYTES_MIN};
use super::codec::{BlockTag, CRC_SIZE_BYTES, Cursor, put_bytes, seal, unseal};
use crate::{DecodeError, InternalKey, KEY_SIZE_BYTES_MAX, SEQUENCE_MAX};

/// The smallest possible data block: one minimal entry, one restart, the counts and the CRC.
pub const DATA_BLOCK_SIZE_BYTES_MIN: u32 = (ENTRY_SIZE_BYTES_MIN + 4 + 4 + 4 + CRC_SIZE_BYTES) as u32;

/// The smallest encoded index entry: offset, size, entry count, two empty keys' sizes and two sequences.
const INDEX_ENTRY_SIZE_BYTES_MIN: usize = 8 + 4 + 4 + (4 + 8) * 2;

/// Where a data block is and which keys it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// Offset of the block in the file.
    pub offset: u64,
    /// Size of the block including its trailer and CRC.
    pub size_bytes: u32,
    /// Entries in the block; at least one.
    pub entry_count: u32,
    /// The block's smallest internal key.
    pub first_key: InternalKey,
    /// The block's largest internal key.
    pub last_key: InternalKey,
}

/// The sealed bytes of an index block.
pub fn encode_index(entries: &[IndexEntry]) -> Vec<u8> {
    assert!(!entries.is_empty(), "a table has at least one data block");
    let keys_size_bytes: usize =
        entries.iter().map(|entry| entry.first_key.user_key.len() + entry.last_key.user_key.len()).sum();
    let size_bytes = 4 + entries.len() * INDEX_ENTRY_SIZE_BYTES_MIN + keys_size_bytes + CRC_SIZE_BYTES;
    let mut bytes = Vec::with_capacity(size_bytes);
    bytes.extend_from_slice(&u32::try_from(entries.len()).expect("block count fits u32").to_le_bytes());
    for entry in entries {
        bytes.extend_from_slice(&entry.offset.to_le_bytes());
        bytes.extend_from_slice(&entry.size_bytes.to_le_bytes());
        bytes.extend_from_slice(&entry.entry_count.to_le_bytes());
        put_bytes(&mut bytes, &entry.first_key.user_key);
        bytes.extend_from_slice(&entry.first_key.sequence.to_le_bytes());
        put_bytes(&mut bytes, &entry.last_key.user_key);
        bytes.extend_from_slice(&entry.last_key.sequence.to_le_bytes());
    }
    seal(BlockTag::Index, &mut bytes, 0);
    assert_eq!(bytes.len(), size_bytes, "an index block is the size its entries make");
    debug_assert_eq!(decode_index(&bytes).as_deref(), Ok(entries), "index block must roundtrip");
    bytes
}

/// Decode and validate an index block: CRC, at least one block, blocks contiguous from offset 0, sizes and
/// counts in range, `first_key <= last_key` in each block and strictly increasing keys across blocks.
pub fn decode_index(bytes: &[u8]) -> Result<Vec<IndexEntry>, DecodeError> {
    let contents = unseal(BlockTag::Index, bytes)?;
    let mut cursor = Cursor::new(contents);
    let block_count = cursor.u32("index block count")? as usize;
    if block_count == 0 {
        return Err(DecodeError::new(0, "index lists no data blocks"));
    }
    // Room for every declared entry the bytes can hold (ADR-0156): no regrowth, and an allocation in proportion to
    // the bytes whatever the count claims.
    let mut entries: Vec<IndexEntry> =
        Vec::with_capacity(block_count.min(cursor.remaining_bytes() / INDEX_ENTRY_SIZE_BYTES_MIN));
    while !cursor.is_at_end() {
        let position = cursor.position() as u64;
        let entry = decode_index_entry(&mut cursor)?;
        let expected_offset = entries.last().map_or(0, |last| last.offset + u64::from(last.size_bytes));
        if entry.offset != expected_offset {
            return Err(DecodeError::new(
                position,
                format!("block at {} but expected at {expected_offset}", entry.offset),
            ));
        }
        if entries.last().is_some_and(|last| last.last_key >= entry.first_key) {
            return Err(DecodeError::new(position, "index keys out of order across blocks"));
        }
        entries.push(entry);
        if entries.len() > block_count {
            return Err(DecodeError::new(position, format!("more index entries than the declared {block_count}")));
        }
    }
    if entries.len() != block_count {
        return Err(DecodeError::new(0, format!("index declares {block_count} blocks, holds {}", entries.len())));
    }
    assert_eq!(entries[0].offset, 0, "the first data block starts the file");
    debug_assert!(entries.windows(2).all(|pair| pair[0].last_key < pair[1].first_key), "index keys increase");
    Ok(entries)
}

fn decode_index_entry(cursor: &mut Cursor<'_>) -> Result<IndexEntry, DecodeError> {
    let position = cursor.position() as u64;
    let offset = cursor.u64("block offset")?;
    let size_bytes = cursor.u32("block size")?;
    let entry_count = cursor.u32("block entry count")?;
    let first_user_key = cursor.bytes(KEY_SIZE_BYTES_MAX, "first key")?;
    let first_sequence = cursor.u64("first sequence")?;
    let last_user_key = cursor.bytes(KEY_SIZE_BYTES_MAX, "last key")?;
    let last_sequence = cursor.u64("last sequence")?;
    let size_ok = (DATA_BLOCK_SIZE_BYTES_MIN..=BLOCK_SIZE_BYTES_MAX as u32).contains(&size_bytes);
    let count_ok = entry_count >= 1 && entry_count as usize <= BLOCK_ENTRIES_MAX;
    if !size_ok || !count_ok || first_sequence > SEQUENCE_MAX || last_sequence > SEQUENCE_MAX {
        return Err(DecodeError::new(position, format!("bad index entry: {size_bytes} bytes, {entry_count} entries")));
    }
    let first_key = InternalKey::new(first_user_key, first_sequence);
    let last_key = InternalKey::new(last_user_key, last_sequence);
    let order = first_key.cmp(&last_key);
    if order == Ordering::Greater || (order == Ordering::Equal) != (entry_count == 1) {
        return Err(DecodeError::new(position, "index entry's first and last keys disagree with its entry count"));
    }
    Ok(IndexEntry { offset, size_bytes, entry_count, first_key, last_key })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn entry(offset: u64, first: &[u8], last: &[u8]) -> IndexEntry {
        IndexEntry {
            offset,
            size_bytes: 100,
            entry_count: 3,
            first_key: InternalKey::new(first, 9),
            last_key: InternalKey::new(last, 1),
        }
    }

    #[test]
    fn index_roundtrips_and_rejects_gaps_and_disorder() {
        let entries = vec![entry(0, b"a", b"c"), entry(100, b"d", b"f")];
        assert_eq!(decode_index(&encode_index(&entries)), Ok(entries.clone()));
        let gap = vec![entry(0, b"a", b"c"), entry(101, b"d", b"f")];
        let disorder = vec![entry(0, b"a", b"e"), entry(100, b"d", b"f")];
        let not_at_zero = vec![entry(5, b"a", b"c")];
        let inverted = vec![entry(0, b"c", b"a")];
        for bad in [gap, disorder, not_at_zero, inverted] {
            let mut bytes = Vec::new();
            bytes.extend_from_slice(&(bad.len() as u32).to_le_bytes());
            for item in &bad {
                bytes.extend_from_slice(&item.offset.to_le_bytes());
                bytes.extend_from_slice(&item.size_bytes.to_le_bytes());
                bytes.extend_from_slice(&item.entry_count.to_le_bytes());
                put_bytes(&mut bytes, &item.first_key.user_key);
                bytes.extend_from_slice(&item.first_key.sequence.to_le_bytes());
                put_bytes(&mut bytes, &item.last_key.user_key);
                bytes.extend_from_slice(&item.last_key.sequence.to_le_bytes());
            }
            seal(BlockTag::Index, &mut bytes, 0);
            assert!(decode_index(&bytes).is_err(), "{bad:?}");
        }
    }

    /// The encoder allocates the block's exact size once; the decoder reserves only what the bytes can hold, so
    /// a count claiming more blocks than the bytes hold is an error, not a large allocation (ADR-0156).
    #[test]
    fn index_buffers_are_sized_by_their_bytes() {
        let entries = vec![entry(0, b"a", b"c"), entry(100, b"dd", b"ffff"), entry(200, b"g", b"g")];
        let bytes = encode_index(&entries);
        assert_eq!(bytes.capacity(), bytes.len(), "one allocation of the exact size");
        let decoded = decode_index(&bytes).unwrap();
        assert_eq!(decoded, entries);
        assert_eq!(decoded.capacity(), entries.len(), "no regrowth while decoding");
        let mut claims_more = bytes[..bytes.len() - CRC_SIZE_BYTES].to_vec();
        claims_more[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        seal(BlockTag::Index, &mut claims_more, 0);
        let error = decode_index(&claims_more).unwrap_err();
        assert!(error.reason.contains("declares"), "{error}");
    }

    proptest! {
        #[test]
        fn decode_index_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = decode_index(&bytes);
        }
    }
}
