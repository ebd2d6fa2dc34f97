//! The `posix` crash of one file (ADR-0004): every pending write kept whole, dropped, or torn at sector
//! granularity (a torn sector may turn to garbage), every pending `set_len` kept or dropped, each on its own.

use super::disk::{CrashDecisions, CrashEffects, Inode, InodeId, PendingData, WriteFate, unit_pieces, write_into};

/// The `posix` crash of one file (ADR-0004): every pending write kept, dropped or torn at `sector_bytes`.
pub(super) fn crash_inode(
    id: InodeId,
    inode: &mut Inode,
    decisions: &mut dyn CrashDecisions,
    effects: &mut CrashEffects,
    sector_bytes: u64,
) {
    let mut image = std::mem::take(&mut inode.durable);
    for op in std::mem::take(&mut inode.pending) {
        match op {
            PendingData::Write { offset, data, key, seq } => {
                match decisions.write_fate(key, seq, offset, data.len() as u64) {
                    WriteFate::Kept => {
                        write_into(&mut image, offset, &data);
                        effects.writes_kept.push((id, offset));
                    }
                    WriteFate::Dropped => effects.writes_dropped.push((id, offset)),
                    WriteFate::Torn => {
                        effects.writes_torn.push((id, offset));
                        for (piece_offset, piece) in unit_pieces(offset, &data, sector_bytes) {
                            let sector = piece_offset / sector_bytes;
                            if decisions.keep_sector(key, seq, sector) {
                                write_into(&mut image, piece_offset, piece);
                            } else if let Some(fill) = decisions.garble_sector(key, sector) {
                                let piece_end = piece_offset + piece.len() as u64;
                                garble_sector(&mut image, (sector, sector_bytes), piece_end, fill);
                                effects.sectors_garbled.push((id, sector * sector_bytes));
                            }
                        }
                    }
                }
            }
            PendingData::SetLen { len, key, seq } => {
                if decisions.keep_set_len(key, seq) {
                    image.resize(usize::try_from(len).expect("file length fits in memory"), 0);
                }
            }
        }
    }
    inode.current = image.clone();
    inode.durable = image;
}

/// Fill sector `sector` of `image` with garbage from `fill`: the whole sector as far as the image reaches, and at
/// least up to `piece_end` (the end of the write that tore there). Bytes outside the write change too.
fn garble_sector(image: &mut Vec<u8>, (sector, sector_bytes): (u64, u64), piece_end: u64, fill: u64) {
    let start = usize::try_from(sector * sector_bytes).expect("offset fits in memory");
    let piece_end = usize::try_from(piece_end).expect("offset fits in memory");
    assert!(piece_end > start, "the torn piece lies inside its sector");
    let sector_end = start + usize::try_from(sector_bytes).expect("sector fits");
    if image.len() < piece_end {
        image.resize(piece_end, 0);
    }
    let end = sector_end.min(image.len());
    let mut state = fill | 1;
    for byte in &mut image[start..end] {
        // xorshift64: cheap, deterministic garbage.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        *byte = (state >> 24) as u8;
    }
    debug_assert!(image.len() >= piece_end);
}
