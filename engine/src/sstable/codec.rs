//! Little-endian integers, LEB128 varints and tagged CRC trailers: the byte-level helpers every block uses.
//!
//! Encoding appends to a `Vec<u8>`. Decoding goes through [`Cursor`], which never reads past its slice and
//! reports every failure as a [`DecodeError`] at the offset of the bad bytes.

use crate::DecodeError;

/// A varint (LEB128, u32) is at most this many bytes long.
pub const VARINT_SIZE_BYTES_MAX: usize = 5;
/// Size of the CRC32 that ends every block and the footer.
pub const CRC_SIZE_BYTES: usize = 4;

/// Which structure a checksum protects. The tag is hashed into the CRC (never stored), so a valid block of one
/// kind read where another kind is expected fails its checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum BlockTag {
    Data = 0xDA,
    Index = 0x1D,
    Bloom = 0xB1,
    Learned = 0x7E,
    Meta = 0x3E,
    Footer = 0xF0,
}

/// The CRC32 of `contents`, seeded by the structure's tag.
pub fn tagged_crc(tag: BlockTag, contents: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&[tag as u8]);
    hasher.update(contents);
    hasher.finalize()
}

/// Append the tagged CRC of everything in `buffer` from `start` on; returns it.
pub fn seal(tag: BlockTag, buffer: &mut Vec<u8>, start: usize) -> u32 {
    assert!(start <= buffer.len(), "seal start {start} past the buffer end {}", buffer.len());
    let crc = tagged_crc(tag, &buffer[start..]);
    // No check that the result unseals: it would compute the same CRC over the same bytes again (ADR-0140);
    // `seal_detects_a_wrong_tag_and_any_flipped_byte` holds the round trip.
    buffer.extend_from_slice(&crc.to_le_bytes());
    crc
}

/// Check the trailing tagged CRC of `bytes`; returns the contents without it. A mismatch is reported at offset 0:
/// the whole structure is suspect.
pub fn unseal(tag: BlockTag, bytes: &[u8]) -> Result<&[u8], DecodeError> {
    let Some(contents_size_bytes) = bytes.len().checked_sub(CRC_SIZE_BYTES) else {
        return Err(DecodeError::new(0, format!("{tag:?} block of {} bytes is shorter than its CRC", bytes.len())));
    };
    let (contents, trailer) = bytes.split_at(contents_size_bytes);
    let stored = u32::from_le_bytes(trailer.try_into().expect("trailer is CRC_SIZE_BYTES long"));
    let computed = tagged_crc(tag, contents);
    if stored != computed {
        return Err(DecodeError::new(
            0,
            format!(
                "{tag:?} block checksum mismatch over {} bytes: stored {stored:#010x}, computed {computed:#010x}",
                bytes.len()
            ),
        ));
    }
    Ok(contents)
}

/// Append a LEB128 varint.
pub fn put_varint(buffer: &mut Vec<u8>, mut value: u32) {
    let start = buffer.len();
    while value >= 0x80 {
        buffer.push((value as u8 & 0x7F) | 0x80);
        value >>= 7;
    }
    buffer.push(value as u8);
    assert!(buffer.len() - start <= VARINT_SIZE_BYTES_MAX, "varint grew past its maximum size");
}

/// Append a length-prefixed byte string (u32 LE length).
pub fn put_bytes(buffer: &mut Vec<u8>, bytes: &[u8]) {
    let size_bytes = u32::try_from(bytes.len()).expect("byte strings are bounded by KEY_SIZE_BYTES_MAX");
    buffer.extend_from_slice(&size_bytes.to_le_bytes());
    buffer.extend_from_slice(bytes);
}

/// The first index in `0..count` for which `is_before` is false, given that it is true on a prefix and false
/// after (a binary search: at most `usize::BITS` probes).
pub fn partition_point(count: usize, mut is_before: impl FnMut(usize) -> bool) -> usize {
    let (mut low, mut high) = (0usize, count);
    for _ in 0..=usize::BITS {
        if low >= high {
            break;
        }
        let middle = low + (high - low) / 2;
        if is_before(middle) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    assert!(low == high && low <= count, "binary search did not converge");
    low
}

/// A bounds-checked reader over a slice; errors carry offsets relative to the slice start.
#[derive(Debug)]
pub struct Cursor<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, position: 0 }
    }

    /// A cursor starting at `position` (which must be within the slice).
    pub fn at(bytes: &'a [u8], position: usize) -> Self {
        assert!(position <= bytes.len(), "cursor position {position} past the end {}", bytes.len());
        Self { bytes, position }
    }

    /// The offset of the next byte to read.
    pub fn position(&self) -> usize {
        self.position
    }

    /// How many bytes are left.
    pub fn remaining_bytes(&self) -> usize {
        self.bytes.len() - self.position
    }

    /// True when every byte was read.
    pub fn is_at_end(&self) -> bool {
        self.position == self.bytes.len()
    }

    /// An error at the cursor's current position.
    pub fn error(&self, reason: impl Into<String>) -> DecodeError {
        DecodeError::new(self.position as u64, reason)
    }

    /// The next `count` bytes. Checks the length against what is left before touching anything.
    #[inline(always)]
    pub fn take(&mut self, count: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        if count > self.remaining_bytes() {
            return Err(self.short_error(count, what));
        }
        let taken = &self.bytes[self.position..self.position + count];
        self.position += count;
        assert!(self.position <= self.bytes.len(), "cursor moved past the end");
        Ok(taken)
    }

    #[cold]
    fn short_error(&self, count: usize, what: &str) -> DecodeError {
        self.error(format!("{what}: needs {count} bytes, only {} left", self.remaining_bytes()))
    }

    /// The next byte.
    #[inline(always)]
    pub fn u8(&mut self, what: &str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }

    /// The next little-endian u32.
    #[inline(always)]
    pub fn u32(&mut self, what: &str) -> Result<u32, DecodeError> {
        let bytes = self.take(4, what)?;
        Ok(u32::from_le_bytes(bytes.try_into().expect("took 4 bytes")))
    }

    /// The next little-endian u64.
    #[inline(always)]
    pub fn u64(&mut self, what: &str) -> Result<u64, DecodeError> {
        let bytes = self.take(8, what)?;
        Ok(u64::from_le_bytes(bytes.try_into().expect("took 8 bytes")))
    }

    /// A canonical LEB128 u32: at most [`VARINT_SIZE_BYTES_MAX`] bytes, no overflow, no redundant zero byte.
    ///
    /// A one-byte varint (below 0x80: always canonical, always a u32) is read inline; any other, and every error,
    /// goes through [`Cursor::varint_long`] from the same position, so both paths give the same answer (ADR-0155).
    #[inline]
    pub fn varint(&mut self, what: &str) -> Result<u32, DecodeError> {
        if let Some(&byte) = self.bytes.get(self.position)
            && byte & 0x80 == 0
        {
            self.position += 1;
            return Ok(u32::from(byte));
        }
        self.varint_long(what)
    }

    /// [`Cursor::varint`] of any length, byte by byte.
    fn varint_long(&mut self, what: &str) -> Result<u32, DecodeError> {
        let start = self.position;
        let mut value: u64 = 0;
        for index in 0..VARINT_SIZE_BYTES_MAX {
            let byte = self.u8(what)?;
            value |= u64::from(byte & 0x7F) << (7 * index);
            if byte & 0x80 == 0 {
                if index > 0 && byte == 0 {
                    return Err(DecodeError::new(start as u64, format!("{what}: non-canonical varint")));
                }
                return u32::try_from(value)
                    .map_err(|_| DecodeError::new(start as u64, format!("{what}: varint overflows u32")));
            }
        }
        Err(DecodeError::new(start as u64, format!("{what}: varint longer than {VARINT_SIZE_BYTES_MAX} bytes")))
    }

    /// A length-prefixed byte string of at most `size_bytes_max` bytes.
    #[inline]
    pub fn bytes(&mut self, size_bytes_max: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        let start = self.position;
        let size_bytes = self.u32(what)? as usize;
        if size_bytes > size_bytes_max {
            return Err(DecodeError::new(start as u64, format!("{what}: {size_bytes} bytes exceeds {size_bytes_max}")));
        }
        self.take(size_bytes, what)
    }

    /// Fail unless every byte was consumed.
    pub fn expect_end(&self, what: &str) -> Result<(), DecodeError> {
        if self.is_at_end() {
            Ok(())
        } else {
            Err(self.error(format!("{what}: {} trailing bytes", self.remaining_bytes())))
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn varint_roundtrips(value in any::<u32>()) {
            let mut buffer = Vec::new();
            put_varint(&mut buffer, value);
            let mut cursor = Cursor::new(&buffer);
            prop_assert_eq!(cursor.varint("v").unwrap(), value);
            prop_assert!(cursor.is_at_end());
        }

        #[test]
        fn varint_decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..8)) {
            let _ = Cursor::new(&bytes).varint("v");
        }
    }

    /// The inline one-byte path and the byte-by-byte reader agree on every input: value, position and error.
    #[test]
    fn the_one_byte_varint_path_agrees_with_the_long_reader() {
        for first in 0..=u8::MAX {
            for rest in [&[][..], &[0x00], &[0x01], &[0x80, 0x01], &[0xFF, 0xFF, 0xFF, 0x0F]] {
                let bytes = [&[first][..], rest].concat();
                for start in 0..=bytes.len() {
                    let (mut fast, mut long) = (Cursor::at(&bytes, start), Cursor::at(&bytes, start));
                    let (fast_value, long_value) = (fast.varint("v"), long.varint_long("v"));
                    assert_eq!(fast_value, long_value, "{bytes:?} from {start}");
                    if fast_value.is_ok() {
                        assert_eq!(fast.position(), long.position(), "{bytes:?} from {start}");
                    }
                }
            }
        }
    }

    #[test]
    fn varint_rejects_overflow_truncation_and_non_canonical() {
        assert!(Cursor::new(&[0xFF, 0xFF, 0xFF, 0xFF, 0x1F]).varint("v").is_err());
        assert!(Cursor::new(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]).varint("v").is_err());
        assert!(Cursor::new(&[0x80]).varint("v").is_err());
        assert!(Cursor::new(&[0x80, 0x00]).varint("v").is_err());
        assert_eq!(Cursor::new(&[0xFF, 0xFF, 0xFF, 0xFF, 0x0F]).varint("v"), Ok(u32::MAX));
    }

    #[test]
    fn seal_detects_a_wrong_tag_and_any_flipped_byte() {
        let mut buffer = b"some block contents".to_vec();
        seal(BlockTag::Index, &mut buffer, 0);
        assert!(unseal(BlockTag::Index, &buffer).is_ok());
        assert!(unseal(BlockTag::Data, &buffer).is_err());
        for position in 0..buffer.len() {
            let mut broken = buffer.clone();
            broken[position] ^= 0x01;
            assert_eq!(unseal(BlockTag::Index, &broken).unwrap_err().offset, 0);
        }
        assert!(unseal(BlockTag::Index, &[1, 2, 3]).is_err());
        // Sealed from a start inside the buffer: the CRC covers the bytes from there on, and they unseal alone.
        let mut framed = b"header|contents".to_vec();
        seal(BlockTag::Meta, &mut framed, 7);
        assert_eq!(unseal(BlockTag::Meta, &framed[7..]), Ok(&b"contents"[..]));
        assert!(unseal(BlockTag::Meta, &framed).is_err(), "the header is not under the CRC");
    }

    /// CRC-32 (IEEE, reflected, polynomial 0xEDB88320) one bit at a time: the reference `crc32fast`'s SIMD paths
    /// are checked against, since release builds compile `crc32fast` without its own assertions (ADR-0154).
    fn bitwise_crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &byte in bytes {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }

    #[test]
    fn crc32fast_agrees_with_a_bitwise_crc32_at_every_length() {
        assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926, "the CRC-32 check value");
        assert_eq!(bitwise_crc32(b"123456789"), 0xCBF4_3926, "the reference's check value");
        // Lengths across the SIMD loop's 64-byte folds and its tails, at every alignment of the first byte.
        let bytes: Vec<u8> = (0..1100u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for start in 0..16 {
            for end in (start..bytes.len()).step_by(7) {
                let slice = &bytes[start..end];
                assert_eq!(crc32fast::hash(slice), bitwise_crc32(slice), "bytes {start}..{end}");
                let mut hasher = crc32fast::Hasher::new();
                let (head, tail) = slice.split_at(slice.len() / 3);
                hasher.update(head);
                hasher.update(tail);
                assert_eq!(hasher.finalize(), bitwise_crc32(slice), "bytes {start}..{end} in two updates");
            }
        }
    }
}
