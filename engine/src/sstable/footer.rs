//! The fixed-size footer and the meta block it points to.
//!
//! ```text
//! meta   := entry_count u64 LE | data_block_count u32 LE | min_sequence u64 LE | max_sequence u64 LE
//!           | min_user_key_size u32 LE | min_user_key | max_user_key_size u32 LE | max_user_key
//!           | crc32 u32 LE (tag 0x3E)
//! footer := index_offset u64 | index_size u32 | bloom_offset u64 | bloom_size u32
//!           | learned_offset u64 | learned_size u32 | meta_offset u64 | meta_size u32
//!           | format_version u32 | magic u64 | crc32 u32 (tag 0xF0, over the 60 bytes before it)   (64 bytes, LE)
//! ```

use super::codec::{BlockTag, Cursor, put_bytes, seal, unseal};
use crate::{DecodeError, KEY_SIZE_BYTES_MAX, SEQUENCE_MAX, Sequence};

/// The footer's size: always the last bytes of a table file.
pub const FOOTER_SIZE_BYTES: usize = 64;
/// "HFSSTB01": identifies a holdfast table file.
pub const TABLE_MAGIC: u64 = u64::from_be_bytes(*b"HFSSTB01");
/// The format version this code writes. Version 3 probes the Bloom filter with independent hashes (ADR-0209;
/// versions 1 and 2 double-hash). Version 2 fits the learned index on the keys' bytes after the table's shared
/// prefix (ADR-0063); version 1 fitted it on the keys' first bytes.
pub const FORMAT_VERSION: u32 = 3;
/// The oldest format version this code reads.
pub const FORMAT_VERSION_MIN: u32 = 1;

/// Offset and size of one metadata block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockHandle {
    /// Offset of the block in the file.
    pub offset: u64,
    /// Size of the block including its CRC.
    pub size_bytes: u32,
}

impl BlockHandle {
    /// The offset just past the block. Only for validated handles (panics on overflow).
    pub fn end(self) -> u64 {
        self.checked_end().expect("a validated block handle does not overflow")
    }

    /// The offset just past the block, or None if it overflows.
    pub fn checked_end(self) -> Option<u64> {
        self.offset.checked_add(u64::from(self.size_bytes))
    }
}

/// Where the metadata blocks are. They follow the data blocks in this order, back to back, up to the footer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footer {
    /// The index block.
    pub index: BlockHandle,
    /// The Bloom filter block.
    pub bloom: BlockHandle,
    /// The learned-index block.
    pub learned: BlockHandle,
    /// The meta block.
    pub meta: BlockHandle,
    /// The table's format version, `FORMAT_VERSION_MIN..=FORMAT_VERSION`.
    pub format_version: u32,
}

impl Footer {
    /// The footer's 64 bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(FOOTER_SIZE_BYTES);
        for handle in [self.index, self.bloom, self.learned, self.meta] {
            bytes.extend_from_slice(&handle.offset.to_le_bytes());
            bytes.extend_from_slice(&handle.size_bytes.to_le_bytes());
        }
        assert!((FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&self.format_version), "unknown format version");
        bytes.extend_from_slice(&self.format_version.to_le_bytes());
        bytes.extend_from_slice(&TABLE_MAGIC.to_le_bytes());
        seal(BlockTag::Footer, &mut bytes, 0);
        assert_eq!(bytes.len(), FOOTER_SIZE_BYTES, "footer has a fixed size");
        debug_assert_eq!(decode_footer(&bytes, self.meta.end() + FOOTER_SIZE_BYTES as u64), Ok(*self));
        bytes
    }
}

/// Decode a footer (exactly [`FOOTER_SIZE_BYTES`]) of a file of `file_size_bytes`: CRC, magic, version, and the
/// layout: the index starts after at least one data block, the metadata blocks are back to back, and the meta
/// block ends where the footer starts.
pub fn decode_footer(bytes: &[u8], file_size_bytes: u64) -> Result<Footer, DecodeError> {
    if bytes.len() != FOOTER_SIZE_BYTES {
        return Err(DecodeError::new(0, format!("footer is {} bytes, expected {FOOTER_SIZE_BYTES}", bytes.len())));
    }
    let contents = unseal(BlockTag::Footer, bytes)?;
    let mut cursor = Cursor::new(contents);
    let mut handles = [BlockHandle { offset: 0, size_bytes: 0 }; 4];
    for handle in &mut handles {
        *handle = BlockHandle { offset: cursor.u64("block offset")?, size_bytes: cursor.u32("block size")? };
    }
    let version = cursor.u32("format version")?;
    let magic = cursor.u64("magic")?;
    cursor.expect_end("footer")?;
    if magic != TABLE_MAGIC {
        return Err(DecodeError::new(52, format!("bad magic {magic:#018x}: not a table file")));
    }
    if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&version) {
        return Err(DecodeError::new(48, format!("unknown format version {version}")));
    }
    let [index, bloom, learned, meta] = handles;
    let footer_offset = file_size_bytes.checked_sub(FOOTER_SIZE_BYTES as u64);
    let contiguous = index.offset > 0
        && index.checked_end() == Some(bloom.offset)
        && bloom.checked_end() == Some(learned.offset)
        && learned.checked_end() == Some(meta.offset)
        && meta.checked_end().is_some()
        && meta.checked_end() == footer_offset;
    if !contiguous {
        return Err(DecodeError::new(0, format!("metadata blocks are not back to back up to the footer: {handles:?}")));
    }
    assert!(index.offset < bloom.offset || index.size_bytes == 0, "metadata blocks follow the index");
    assert_eq!(meta.end() + FOOTER_SIZE_BYTES as u64, file_size_bytes, "the footer ends the file");
    Ok(Footer { index, bloom, learned, meta, format_version: version })
}

/// Table-wide facts, stored in the meta block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableMeta {
    /// Entries (versions, tombstones included) in the table; at least `data_block_count`.
    pub entry_count: u64,
    /// Data blocks in the table; at least one.
    pub data_block_count: u32,
    /// The smallest sequence of any entry.
    pub min_sequence: Sequence,
    /// The largest sequence of any entry.
    pub max_sequence: Sequence,
    /// The first entry's user key.
    pub min_user_key: Vec<u8>,
    /// The last entry's user key.
    pub max_user_key: Vec<u8>,
}

impl TableMeta {
    /// The sealed bytes of the meta block.
    pub fn encode(&self) -> Vec<u8> {
        // Counts, sequences, two sized keys and the CRC: the exact size, allocated once (ADR-0156).
        let size_bytes = 8 + 4 + 8 + 8 + (4 + self.min_user_key.len()) + (4 + self.max_user_key.len()) + 4;
        let mut bytes = Vec::with_capacity(size_bytes);
        bytes.extend_from_slice(&self.entry_count.to_le_bytes());
        bytes.extend_from_slice(&self.data_block_count.to_le_bytes());
        bytes.extend_from_slice(&self.min_sequence.to_le_bytes());
        bytes.extend_from_slice(&self.max_sequence.to_le_bytes());
        put_bytes(&mut bytes, &self.min_user_key);
        put_bytes(&mut bytes, &self.max_user_key);
        seal(BlockTag::Meta, &mut bytes, 0);
        assert_eq!(bytes.len(), size_bytes, "a meta block is the size its keys make");
        debug_assert_eq!(decode_meta(&bytes).as_ref(), Ok(self), "meta block must roundtrip");
        bytes
    }
}

/// Decode and validate a meta block: CRC, at least one entry and block, ordered sequence and key ranges.
pub fn decode_meta(bytes: &[u8]) -> Result<TableMeta, DecodeError> {
    let contents = unseal(BlockTag::Meta, bytes)?;
    let mut cursor = Cursor::new(contents);
    let meta = TableMeta {
        entry_count: cursor.u64("entry count")?,
        data_block_count: cursor.u32("data block count")?,
        min_sequence: cursor.u64("min sequence")?,
        max_sequence: cursor.u64("max sequence")?,
        min_user_key: cursor.bytes(KEY_SIZE_BYTES_MAX, "min user key")?.to_vec(),
        max_user_key: cursor.bytes(KEY_SIZE_BYTES_MAX, "max user key")?.to_vec(),
    };
    cursor.expect_end("meta block")?;
    let counts_ok = meta.data_block_count >= 1 && meta.entry_count >= u64::from(meta.data_block_count);
    let ranges_ok = meta.min_sequence <= meta.max_sequence
        && meta.max_sequence <= SEQUENCE_MAX
        && meta.min_user_key <= meta.max_user_key;
    if !counts_ok || !ranges_ok {
        return Err(DecodeError::new(0, format!("inconsistent table meta: {meta:?}")));
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn footer() -> Footer {
        Footer {
            index: BlockHandle { offset: 100, size_bytes: 50 },
            bloom: BlockHandle { offset: 150, size_bytes: 20 },
            learned: BlockHandle { offset: 170, size_bytes: 36 },
            meta: BlockHandle { offset: 206, size_bytes: 60 },
            format_version: FORMAT_VERSION,
        }
    }

    #[test]
    fn footer_roundtrips_and_checks_the_layout_against_the_file_size() {
        let bytes = footer().encode();
        assert_eq!(decode_footer(&bytes, 266 + 64), Ok(footer()));
        assert!(decode_footer(&bytes, 266 + 65).is_err());
        assert!(decode_footer(&bytes[1..], 266 + 64).is_err());
        let mut gap = footer();
        gap.bloom.offset += 1;
        let mut unsealed = gap.encode_unchecked();
        seal(BlockTag::Footer, &mut unsealed, 0);
        assert!(decode_footer(&unsealed, 266 + 64).is_err());
    }

    #[test]
    fn footer_rejects_bad_magic_and_version_under_a_valid_checksum() {
        for (position, value) in [(52usize, 0u8), (48, 0), (48, FORMAT_VERSION as u8 + 1)] {
            let mut bytes = footer().encode()[..60].to_vec();
            bytes[position] = value;
            seal(BlockTag::Footer, &mut bytes, 0);
            let error = decode_footer(&bytes, 266 + 64).unwrap_err();
            assert_eq!(error.offset, position as u64, "{error}");
        }
    }

    #[test]
    fn footer_reads_every_supported_version() {
        for format_version in FORMAT_VERSION_MIN..=FORMAT_VERSION {
            let footer = Footer { format_version, ..footer() };
            assert_eq!(decode_footer(&footer.encode(), 266 + 64), Ok(footer));
        }
    }

    #[test]
    fn meta_rejects_inverted_ranges() {
        let meta = TableMeta {
            entry_count: 3,
            data_block_count: 1,
            min_sequence: 1,
            max_sequence: 5,
            min_user_key: b"a".to_vec(),
            max_user_key: b"c".to_vec(),
        };
        assert_eq!(decode_meta(&meta.encode()), Ok(meta.clone()));
        let long_keys = TableMeta { min_user_key: vec![b'a'; 300], max_user_key: vec![b'z'; 7], ..meta.clone() };
        let bytes = long_keys.encode();
        assert_eq!(bytes.capacity(), bytes.len(), "one allocation of the exact size (ADR-0156)");
        assert_eq!(decode_meta(&bytes), Ok(long_keys));
        let inverted = TableMeta { min_sequence: 6, ..meta.clone() };
        let mut bytes = inverted.encode_unchecked();
        seal(BlockTag::Meta, &mut bytes, 0);
        assert!(decode_meta(&bytes).is_err());
    }

    impl Footer {
        fn encode_unchecked(&self) -> Vec<u8> {
            let mut bytes = Vec::new();
            for handle in [self.index, self.bloom, self.learned, self.meta] {
                bytes.extend_from_slice(&handle.offset.to_le_bytes());
                bytes.extend_from_slice(&handle.size_bytes.to_le_bytes());
            }
            bytes.extend_from_slice(&self.format_version.to_le_bytes());
            bytes.extend_from_slice(&TABLE_MAGIC.to_le_bytes());
            bytes
        }
    }

    impl TableMeta {
        fn encode_unchecked(&self) -> Vec<u8> {
            let mut bytes = Vec::new();
            bytes.extend_from_slice(&self.entry_count.to_le_bytes());
            bytes.extend_from_slice(&self.data_block_count.to_le_bytes());
            bytes.extend_from_slice(&self.min_sequence.to_le_bytes());
            bytes.extend_from_slice(&self.max_sequence.to_le_bytes());
            put_bytes(&mut bytes, &self.min_user_key);
            put_bytes(&mut bytes, &self.max_user_key);
            bytes
        }
    }

    proptest! {
        #[test]
        fn decode_footer_and_meta_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..80),
            size in any::<u64>(),
        ) {
            let _ = decode_footer(&bytes, size);
            let _ = decode_meta(&bytes);
        }
    }
}
