//! Recompute the checksums of (mutated) holdfast files, so decoding reaches past the CRC checks.
//!
//! These mirror the formats documented in `engine/src/wal.rs`, `engine/src/manifest.rs` and
//! `engine/src/sstable/mod.rs`; the engine keeps its CRC helpers private, so they are restated here.

/// The tags the SSTable format hashes into each structure's CRC (never stored).
pub const TAG_DATA: u8 = 0xDA;
pub const TAG_INDEX: u8 = 0x1D;
pub const TAG_BLOOM: u8 = 0xB1;
pub const TAG_LEARNED: u8 = 0x7E;
pub const TAG_META: u8 = 0x3E;
pub const TAG_FOOTER: u8 = 0xF0;

const CRC_BYTES: usize = 4;
const FOOTER_BYTES: usize = 64;
const WAL_HEADER_BYTES: usize = 24;
const MANIFEST_HEADER_BYTES: usize = 20;

/// The CRC32 of `contents` seeded by `tag`, as the SSTable format computes it.
pub fn tagged_crc(tag: u8, contents: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&[tag]);
    hasher.update(contents);
    hasher.finalize()
}

/// `contents` followed by its tagged CRC: a block that passes its checksum.
pub fn sealed(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = contents.to_vec();
    out.extend_from_slice(&tagged_crc(tag, contents).to_le_bytes());
    out
}

/// Rewrite the trailing CRC of `block` (whose last 4 bytes are the CRC) in place. Too short: left alone.
pub fn reseal_block(tag: u8, block: &mut [u8]) {
    if let Some(contents_len) = block.len().checked_sub(CRC_BYTES) {
        let crc = tagged_crc(tag, &block[..contents_len]);
        block[contents_len..].copy_from_slice(&crc.to_le_bytes());
    }
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// The byte range `offset .. offset + size` if it lies inside a file of `len` bytes.
fn range(offset: u64, size: u32, len: usize) -> Option<std::ops::Range<usize>> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(size as usize)?;
    (end <= len).then_some(start..end)
}

/// A copy of a table file with every checksum recomputed: the footer, the four metadata blocks the footer points
/// at, and every data block the (resealed) index lists. Whatever cannot be located is left as it is.
pub fn reseal_table(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let len = out.len();
    if len < FOOTER_BYTES {
        return out;
    }
    let footer_at = len - FOOTER_BYTES;
    reseal_block(TAG_FOOTER, &mut out[footer_at..]);
    let footer = out[footer_at..].to_vec();
    let handles: Vec<(u64, u32)> = (0..4).map(|i| (u64_at(&footer, i * 12), u32_at(&footer, i * 12 + 8))).collect();
    for (&(offset, size), tag) in handles.iter().zip([TAG_INDEX, TAG_BLOOM, TAG_LEARNED, TAG_META]) {
        if let Some(block) = range(offset, size, footer_at) {
            reseal_block(tag, &mut out[block]);
        }
    }
    let (index_offset, index_size) = handles[0];
    let Some(index) = range(index_offset, index_size, footer_at) else { return out };
    let Ok(entries) = engine::sstable::decode_index(&out[index]) else { return out };
    for entry in entries {
        if let Some(block) = range(entry.offset, entry.size_bytes, footer_at) {
            reseal_block(TAG_DATA, &mut out[block]);
        }
    }
    out
}

/// A copy of a WAL segment with each record's payload CRC and header CRC recomputed, walking records by their
/// length fields; stops at the first header that does not fit or whose payload runs past the end.
pub fn reseal_wal(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let mut position = 0usize;
    while position + WAL_HEADER_BYTES <= out.len() {
        // A zero gap up to the next sector boundary is padding (ADR-0067): the next record starts there.
        let boundary = usize::try_from(engine::wal::sector_ceil(position as u64, engine::wal::WAL_SECTOR_BYTES)).unwrap_or(usize::MAX);
        if boundary > position && boundary < out.len() && out[position..boundary].iter().all(|&byte| byte == 0) {
            position = boundary;
            continue;
        }
        let payload_len = u32_at(&out, position + 8) as usize;
        let start = position + WAL_HEADER_BYTES;
        let Some(end) = start.checked_add(payload_len).filter(|&end| end <= out.len()) else { break };
        let payload_crc = crc32fast::hash(&out[start..end]);
        out[position + 4..position + 8].copy_from_slice(&payload_crc.to_le_bytes());
        let header_crc = crc32fast::hash(&out[position + 4..start]);
        out[position..position + 4].copy_from_slice(&header_crc.to_le_bytes());
        position = end;
    }
    out
}

/// A copy of a manifest with its body length and body CRC recomputed (when the 20-byte header fits).
pub fn reseal_manifest(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if out.len() >= MANIFEST_HEADER_BYTES {
        let body_len = (out.len() - MANIFEST_HEADER_BYTES) as u32;
        out[12..16].copy_from_slice(&body_len.to_le_bytes());
        let crc = crc32fast::hash(&out[MANIFEST_HEADER_BYTES..]);
        out[16..20].copy_from_slice(&crc.to_le_bytes());
    }
    out
}

/// Reseal a file by what its name says it is (used on the recovery target's disk images).
pub fn reseal_by_name(name: &str, bytes: &[u8]) -> Vec<u8> {
    if name.ends_with(".sst") {
        reseal_table(bytes)
    } else if name.ends_with(".log") {
        reseal_wal(bytes)
    } else if name.starts_with("MANIFEST") {
        reseal_manifest(bytes)
    } else {
        bytes.to_vec()
    }
}
