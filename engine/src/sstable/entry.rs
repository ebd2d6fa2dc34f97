//! Parsing one data-block entry (the format is in [`super::block`]): a fast path for the common shape, and the
//! general parser every other shape and every error goes through.
//!
//! The fast path reads an entry whose key sizes are one-byte varints and whose value size is a one- or two-byte one
//! (keys under 128 bytes and values under 16 KiB: YCSB's keys and values are) with plain slice indexing, and hands
//! anything else, including every malformed entry, to [`parse_entry_general`]. The two agree on every input, errors
//! included: proptests run both on random bytes and on well-formed entries, and builds with
//! [`crate::EXPENSIVE_CHECKS`] compare them on every fast-path parse of a block being validated (every entry any
//! reader parses was in one, ADR-0135).

use super::codec::Cursor;
use crate::{DecodeError, KEY_SIZE_BYTES_MAX, Sequence, VALUE_SIZE_BYTES_MAX, ValueKind};

/// One parsed entry's position: the value and the unshared key bytes are ranges of the entries region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ParsedEntry {
    pub(super) sequence: Sequence,
    pub(super) kind: ValueKind,
    pub(super) value_start: usize,
    pub(super) value_end: usize,
    /// Where the next entry starts (the value's end).
    pub(super) next_offset: usize,
    pub(super) shared_size_bytes: usize,
    /// Where the entry's unshared key bytes are in the entries region.
    pub(super) delta_start: usize,
    pub(super) delta_end: usize,
}

/// The trailer after the key delta: `sequence << 8 | kind`, little-endian.
const TRAILER_SIZE_BYTES: usize = 8;

/// Parse the entry at `offset`; `key` holds the previous key on entry and this entry's key on success.
#[inline]
pub(super) fn parse_entry(entries: &[u8], offset: usize, key: &mut Vec<u8>) -> Result<ParsedEntry, DecodeError> {
    let parsed = parse_entry_parts(entries, offset, key.len())?;
    key.truncate(parsed.shared_size_bytes);
    key.extend_from_slice(&entries[parsed.delta_start..parsed.delta_end]);
    Ok(parsed)
}

/// Parse the entry at `offset` of a block being validated (the first parse of its bytes), without rebuilding its
/// key; the previous key was `previous_key_size_bytes` long. Builds with [`crate::EXPENSIVE_CHECKS`] compare the
/// fast parser's answer with the general parser's here.
#[inline]
pub(super) fn parse_entry_checked(
    entries: &[u8],
    offset: usize,
    previous_key_size_bytes: usize,
) -> Result<ParsedEntry, DecodeError> {
    match parse_entry_fast(entries, offset, previous_key_size_bytes) {
        Some(parsed) => {
            if crate::EXPENSIVE_CHECKS {
                let general = parse_entry_general(entries, offset, previous_key_size_bytes);
                assert_eq!(general.as_ref(), Ok(&parsed), "the fast entry parser agrees with the general one");
            }
            Ok(parsed)
        }
        None => parse_entry_general(entries, offset, previous_key_size_bytes),
    }
}

/// Parse the entry at `offset` without rebuilding its key; the previous key was `previous_key_size_bytes` long.
/// The re-parse of a validated block (a seek, a lookup, a cursor) has no cross-check of its own (ADR-0135): both
/// parsers are pure, and [`parse_entry_checked`] compared them on the same bytes when the block was validated, with
/// the same previous key size, or at a restart point (where a re-parse starts with 0) on an entry that shares no
/// prefix, whose parse does not depend on it.
#[inline]
pub(super) fn parse_entry_parts(
    entries: &[u8],
    offset: usize,
    previous_key_size_bytes: usize,
) -> Result<ParsedEntry, DecodeError> {
    match parse_entry_fast(entries, offset, previous_key_size_bytes) {
        Some(parsed) => Ok(parsed),
        None => parse_entry_general(entries, offset, previous_key_size_bytes),
    }
}

/// The common, well-formed entry: one-byte key sizes, a value size of one or two bytes (a canonical varint: values
/// under 16 KiB, ADR-0135), a valid kind, every byte inside `entries`. `None` for anything else (the general parser
/// decides it). Pure; never panics.
#[inline]
fn parse_entry_fast(entries: &[u8], offset: usize, previous_key_size_bytes: usize) -> Option<ParsedEntry> {
    let sizes = entries.get(offset..offset.checked_add(3)?)?;
    let (shared, unshared) = (sizes[0], sizes[1]);
    if (shared | unshared) & 0x80 != 0 || usize::from(shared) > previous_key_size_bytes {
        return None;
    }
    let (value, value_size_size_bytes) = fast_value_size(entries, offset + 2)?;
    let delta_start = offset + 2 + value_size_size_bytes;
    let delta_end = delta_start + usize::from(unshared);
    let value_start = delta_end + TRAILER_SIZE_BYTES;
    let value_end = value_start + value;
    let trailer = entries.get(delta_end..value_start)?;
    if value_end > entries.len() {
        return None;
    }
    let trailer = u64::from_le_bytes(trailer.try_into().expect("the trailer range is TRAILER_SIZE_BYTES long"));
    let kind = ValueKind::from_byte((trailer & 0xFF) as u8)?;
    if kind == ValueKind::Delete && value != 0 {
        return None;
    }
    Some(ParsedEntry {
        sequence: trailer >> 8,
        kind,
        value_start,
        value_end,
        next_offset: value_end,
        shared_size_bytes: usize::from(shared),
        delta_start,
        delta_end,
    })
}

/// The value size at `at`, a canonical varint of one byte, or of two (the second non-zero and below 0x80): the
/// size and how many bytes it took. `None` for a longer, non-canonical or truncated one (the general parser decides
/// it). The largest two-byte size, 16,383, is under [`VALUE_SIZE_BYTES_MAX`] (asserted at compile time).
#[inline]
fn fast_value_size(entries: &[u8], at: usize) -> Option<(usize, usize)> {
    const _: () = assert!(VALUE_SIZE_BYTES_MAX >= 0x3FFF, "a two-byte value size is always within the limit");
    let low = *entries.get(at)?;
    if low & 0x80 == 0 {
        return Some((usize::from(low), 1));
    }
    let high = *entries.get(at + 1)?;
    if high & 0x80 != 0 || high == 0 {
        return None;
    }
    Some((usize::from(low & 0x7F) | usize::from(high) << 7, 2))
}

/// Every entry shape, and the error for a malformed one at the offset of its bad bytes.
#[cold]
pub(super) fn parse_entry_general(
    entries: &[u8],
    offset: usize,
    previous_key_size_bytes: usize,
) -> Result<ParsedEntry, DecodeError> {
    let mut cursor = Cursor::at(entries, offset);
    let shared_size_bytes = cursor.varint("shared key size")? as usize;
    let unshared_size_bytes = cursor.varint("unshared key size")? as usize;
    let value_size_bytes = cursor.varint("value size")? as usize;
    if shared_size_bytes > previous_key_size_bytes {
        return Err(DecodeError::new(
            offset as u64,
            format!("shares {shared_size_bytes} bytes of a {previous_key_size_bytes}-byte key"),
        ));
    }
    if shared_size_bytes + unshared_size_bytes > KEY_SIZE_BYTES_MAX {
        return Err(DecodeError::new(offset as u64, "key longer than KEY_SIZE_BYTES_MAX"));
    }
    if value_size_bytes > VALUE_SIZE_BYTES_MAX {
        return Err(DecodeError::new(offset as u64, "value longer than VALUE_SIZE_BYTES_MAX"));
    }
    let delta_start = cursor.position();
    cursor.take(unshared_size_bytes, "key delta")?;
    let delta_end = cursor.position();
    let trailer_offset = delta_end as u64;
    let trailer = cursor.u64("sequence and kind")?;
    let Some(kind) = ValueKind::from_byte((trailer & 0xFF) as u8) else {
        return Err(DecodeError::new(trailer_offset, format!("bad value kind {:#04x}", trailer & 0xFF)));
    };
    let value_start = cursor.position();
    cursor.take(value_size_bytes, "value")?;
    if kind == ValueKind::Delete && value_size_bytes != 0 {
        return Err(DecodeError::new(trailer_offset, "a tombstone carries a value"));
    }
    assert!(cursor.position() > offset, "parsing an entry must make progress");
    Ok(ParsedEntry {
        sequence: trailer >> 8,
        kind,
        value_start,
        value_end: cursor.position(),
        next_offset: cursor.position(),
        shared_size_bytes,
        delta_start,
        delta_end,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// An entry's bytes in the block format: sizes as given (one byte each), then the parts.
    fn entry_bytes(sizes: [u8; 3], delta: &[u8], trailer: u64, value: &[u8]) -> Vec<u8> {
        [&sizes[..], delta, &trailer.to_le_bytes(), value].concat()
    }

    proptest! {
        #[test]
        fn the_fast_parser_agrees_with_the_general_one_on_any_bytes(
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
            offset in 0usize..70,
            previous_key_size_bytes in 0usize..200,
        ) {
            let offset = offset.min(bytes.len());
            let general = parse_entry_general(&bytes, offset, previous_key_size_bytes);
            if let Some(fast) = parse_entry_fast(&bytes, offset, previous_key_size_bytes) {
                prop_assert_eq!(general, Ok(fast));
            }
        }

        #[test]
        fn the_fast_parser_takes_every_well_formed_small_entry(
            shared in 0u8..128,
            delta in proptest::collection::vec(any::<u8>(), 0..128),
            value in proptest::collection::vec(any::<u8>(), 0..128),
            sequence in 0u64..1 << 56,
            tail in proptest::collection::vec(any::<u8>(), 0..4),
        ) {
            let trailer = sequence << 8 | u64::from(ValueKind::Put.to_byte());
            let bytes = [entry_bytes([shared, delta.len() as u8, value.len() as u8], &delta, trailer, &value), tail]
                .concat();
            let fast = parse_entry_fast(&bytes, 0, usize::from(shared)).expect("a well-formed small entry");
            prop_assert_eq!(&fast.sequence, &sequence);
            prop_assert_eq!(&bytes[fast.delta_start..fast.delta_end], delta.as_slice());
            prop_assert_eq!(&bytes[fast.value_start..fast.value_end], value.as_slice());
            prop_assert_eq!(Ok(fast), parse_entry_general(&bytes, 0, usize::from(shared)));
        }

        #[test]
        fn the_fast_parser_takes_two_byte_value_sizes_as_the_general_one_does(
            shared in 0u8..128,
            delta in proptest::collection::vec(any::<u8>(), 0..128),
            value_size_bytes in 128usize..0x4000,
            sequence in 0u64..1 << 56,
        ) {
            let trailer = sequence << 8 | u64::from(ValueKind::Put.to_byte());
            let value: Vec<u8> = (0..value_size_bytes).map(|index| index as u8).collect();
            let mut bytes = vec![shared, delta.len() as u8];
            super::super::codec::put_varint(&mut bytes, value_size_bytes as u32);
            prop_assert_eq!(bytes.len(), 4, "a two-byte value size");
            bytes.extend_from_slice(&delta);
            bytes.extend_from_slice(&trailer.to_le_bytes());
            bytes.extend_from_slice(&value);
            let fast = parse_entry_fast(&bytes, 0, usize::from(shared)).expect("a well-formed two-byte-size entry");
            prop_assert_eq!(&bytes[fast.value_start..fast.value_end], value.as_slice());
            prop_assert_eq!(fast.next_offset, bytes.len());
            prop_assert_eq!(Ok(fast), parse_entry_general(&bytes, 0, usize::from(shared)));
        }
    }

    #[test]
    fn malformed_entries_go_to_the_general_parser_and_fail_there() {
        let put = u64::from(ValueKind::Put.to_byte());
        let delete = u64::from(ValueKind::Delete.to_byte());
        let cases = [
            entry_bytes([2, 1, 0], b"k", put, b""), // shares more than the previous key (1 byte)
            entry_bytes([0, 1, 0], b"k", 0x42, b""), // bad kind
            entry_bytes([0, 1, 1], b"k", delete, b"v"), // a tombstone with a value
            entry_bytes([0, 1, 5], b"k", put, b"vv"), // value past the end
            vec![0, 1],                             // truncated sizes
            [&[0, 1, 0x80, 0x00][..], b"k", &put.to_le_bytes()].concat(), // non-canonical two-byte value size
            [&[0, 1, 0x81, 0x01][..], b"k", &put.to_le_bytes(), b"v"].concat(), // value (129 bytes) past the end
            [&[0, 1, 0x80, 0x80, 0x01][..], b"k", &put.to_le_bytes()].concat(), // a three-byte value size, truncated
        ];
        for bytes in cases {
            assert_eq!(parse_entry_fast(&bytes, 0, 1), None, "{bytes:?}");
            assert!(parse_entry_general(&bytes, 0, 1).is_err(), "{bytes:?}");
            assert!(parse_entry_parts(&bytes, 0, 1).is_err(), "{bytes:?}");
        }
    }
}
