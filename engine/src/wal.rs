//! The write-ahead log (ADR-0011, ADR-0012). Protocol modelled by `specs::Storage`.
//!
//! A log is a sequence of segments `wal-NNNNNN.log`; each is a sequence of records:
//!
//! | bytes | field            | meaning                                                                   |
//! |-------|------------------|---------------------------------------------------------------------------|
//! | 0..4  | `header_crc`     | CRC32 of bytes 4..24                                                      |
//! | 4..8  | `payload_crc`    | CRC32 of the payload                                                      |
//! | 8..12 | `payload_len`    | payload length, at most [`RECORD_PAYLOAD_BYTES_MAX`]                      |
//! | 12    | `kind`           | [`RecordKind`]: 0xA5 batch, 0xB6 seal; no other byte is a record kind     |
//! | 13..15| `pad_bytes`      | u16: zero bytes between the previous record's end and this record (0..512) |
//! | 15    | reserved         | zero                                                                      |
//! | 16..24| `synced_offset`  | how many bytes of this segment were known durable when the record was written |
//! | 24..  | payload          | a batch: first sequence (u64), count (u32), then per write: value kind (u8), key length (u32), key, value length (u32), value |
//!
//! **Torn tail versus corruption.** A crash may keep a later unsynced sector and drop an earlier one, so
//! "bad bytes followed by good bytes" proves nothing by itself. What proves damage to synced data is a valid
//! record *after* the bad one whose `synced_offset` lies beyond the bad offset: that record was written after
//! the bad bytes had been synced. Recovery therefore scans forward past a bad record for any valid record; if one
//! claims a synced boundary beyond the damage, it is [`WalEnd::Corrupt`], otherwise [`WalEnd::TornTail`] and the
//! tail is truncated. A segment that the log moved past ends with a seal record; a non-final segment without
//! one is corrupt.
//!
//! **Sector alignment (ADR-0067).** A crash may garble the whole sector a torn write touches, bytes outside
//! the write included (no "powersafe overwrite"). So an append never starts inside a sector that holds bytes a
//! sync has been issued for: it starts at the next sector boundary instead, the gap left as zeros (never
//! written), and the record's `pad_bytes` says how long the gap is. A record with `pad_bytes > 0` starts at a
//! sector boundary. Recovery reads a record at `end`, or else, when the bytes from `end` to the next boundary are
//! all zero, a record at that boundary whose `pad_bytes` is exactly that gap; anything else at `end` is damage.
//! Synced sectors are therefore never written again, and a garbled torn sector holds only unsynced records.

use crate::error::DecodeError;
use crate::types::{Sequence, ValueKind};

/// Size of a record header.
pub const RECORD_HEADER_BYTES: usize = 24;
/// The largest payload a record may carry: a larger length field is damage.
pub const RECORD_PAYLOAD_BYTES_MAX: usize = 64 * 1024 * 1024;
/// The most writes one batch may carry.
pub const BATCH_WRITES_MAX: u32 = 1 << 20;
/// The smallest sector appends align to after a sync (the common device's atomic unit): every padded record
/// starts at a multiple of it. The writer pads to the sector [`env::Env::sector_size_bytes`] reports (ADR-0110).
pub const WAL_SECTOR_BYTES: u64 = env::SECTOR_SIZE_BYTES;
/// The largest sector the writer pads to (4Kn devices): a record's declared padding is below it.
pub const WAL_SECTOR_BYTES_MAX: u64 = 4096;
/// The sectors a reader tries, smallest first, when a zero gap may be padding.
pub(crate) const WAL_SECTOR_CHOICES: [u64; 2] = [WAL_SECTOR_BYTES, WAL_SECTOR_BYTES_MAX];

/// What a record is. The tag bytes share nothing with [`ValueKind`] tags (ADR-0011).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordKind {
    /// An atomic batch of writes with consecutive sequences (one commit).
    Batch = 0xA5,
    /// The segment is finished: the log continues in the next segment.
    Seal = 0xB6,
}

impl RecordKind {
    fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            0xA5 => Some(RecordKind::Batch),
            0xB6 => Some(RecordKind::Seal),
            _ => None,
        }
    }
}

/// One write inside a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchWrite {
    pub kind: ValueKind,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// An atomic batch: writes `i` gets sequence `first_sequence + i`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub first_sequence: Sequence,
    pub writes: Vec<BatchWrite>,
}

impl Batch {
    /// The sequence of the batch's last write.
    pub fn last_sequence(&self) -> Sequence {
        assert!(!self.writes.is_empty(), "empty batch");
        self.first_sequence + self.writes.len() as u64 - 1
    }
}

/// A decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Batch(Batch),
    Seal,
}

/// How a segment's bytes end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WalEnd {
    /// Every byte belongs to a valid record.
    Clean,
    /// Bytes from `offset` on are an unsynced tail a crash damaged: truncate there.
    TornTail { offset: u64 },
    /// Damage at `offset` inside the synced part of the log.
    Corrupt { offset: u64, reason: String },
}

/// The result of scanning a segment's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalScan {
    /// Valid records in order, with their offsets.
    pub records: Vec<(u64, Record)>,
    pub end: WalEnd,
}

/// A batch payload's bytes before its writes: the first sequence and the write count.
pub const BATCH_HEADER_BYTES: usize = 12;

/// A write's bytes in a batch payload: kind, key length, key, value length, value.
pub fn batch_write_bytes(key_len: usize, value_len: usize) -> usize {
    9 + key_len + value_len
}

/// Set the first sequence of an encoded batch payload: a commit encodes its payload before the writer lock and
/// learns its sequence under it (ADR-0132).
pub fn set_batch_first_sequence(payload: &mut [u8], first_sequence: Sequence) {
    payload[..8].copy_from_slice(&first_sequence.to_le_bytes());
}

/// Encode a batch payload.
pub fn encode_batch(batch: &Batch) -> Vec<u8> {
    assert!(!batch.writes.is_empty(), "empty batch");
    assert!(batch.writes.len() <= BATCH_WRITES_MAX as usize, "batch too large");
    let size: usize = batch.writes.iter().map(|w| batch_write_bytes(w.key.len(), w.value.len())).sum();
    let mut out = Vec::with_capacity(BATCH_HEADER_BYTES + size);
    out.extend_from_slice(&batch.first_sequence.to_le_bytes());
    out.extend_from_slice(&(batch.writes.len() as u32).to_le_bytes());
    for write in &batch.writes {
        assert!(write.kind == ValueKind::Put || write.value.is_empty(), "tombstone with a value");
        out.push(write.kind.to_byte());
        out.extend_from_slice(&(write.key.len() as u32).to_le_bytes());
        out.extend_from_slice(&write.key);
        out.extend_from_slice(&(write.value.len() as u32).to_le_bytes());
        out.extend_from_slice(&write.value);
    }
    debug_assert_eq!(decode_batch(&out).as_ref(), Ok(batch), "batch encoding does not round-trip");
    out
}

fn take<'a>(bytes: &'a [u8], position: &mut usize, count: usize) -> Result<&'a [u8], DecodeError> {
    let end = position.checked_add(count).filter(|&end| end <= bytes.len());
    let Some(end) = end else {
        return Err(DecodeError::new(*position as u64, format!("{count} bytes needed past the end")));
    };
    let slice = &bytes[*position..end];
    *position = end;
    Ok(slice)
}

fn take_u32(bytes: &[u8], position: &mut usize) -> Result<u32, DecodeError> {
    Ok(u32::from_le_bytes(take(bytes, position, 4)?.try_into().expect("4 bytes")))
}

/// Decode a batch payload. Pure: any input gives a batch or a [`DecodeError`], never a panic.
pub fn decode_batch(bytes: &[u8]) -> Result<Batch, DecodeError> {
    let mut position = 0usize;
    let first_sequence = u64::from_le_bytes(take(bytes, &mut position, 8)?.try_into().expect("8 bytes"));
    let count = take_u32(bytes, &mut position)?;
    if count == 0 || count > BATCH_WRITES_MAX {
        return Err(DecodeError::new(8, format!("batch write count {count} out of range")));
    }
    let last_sequence = first_sequence.checked_add(u64::from(count) - 1);
    if first_sequence == 0 || last_sequence.is_none_or(|last| last > crate::types::SEQUENCE_MAX) {
        return Err(DecodeError::new(0, format!("batch sequences from {first_sequence} out of range")));
    }
    let mut writes = Vec::with_capacity((count as usize).min(bytes.len() / 9));
    for _ in 0..count {
        let kind_at = position;
        let kind_byte = take(bytes, &mut position, 1)?[0];
        let kind = ValueKind::from_byte(kind_byte)
            .ok_or_else(|| DecodeError::new(kind_at as u64, format!("bad value kind 0x{kind_byte:02x}")))?;
        let key_len = take_u32(bytes, &mut position)? as usize;
        let key = take(bytes, &mut position, key_len)?.to_vec();
        let value_at = position;
        let value_len = take_u32(bytes, &mut position)? as usize;
        let value = take(bytes, &mut position, value_len)?.to_vec();
        if kind == ValueKind::Delete && !value.is_empty() {
            return Err(DecodeError::new(value_at as u64, "tombstone carries a value"));
        }
        writes.push(BatchWrite { kind, key, value });
    }
    if position != bytes.len() {
        return Err(DecodeError::new(position as u64, "trailing bytes after the batch"));
    }
    Ok(Batch { first_sequence, writes })
}

/// Encode a whole record (header + payload) that follows the previous record directly.
pub fn encode_record(kind: RecordKind, payload: &[u8], synced_offset: u64) -> Vec<u8> {
    encode_record_padded(kind, payload, synced_offset, 0)
}

/// Encode a whole record that starts `pad_bytes` zero bytes after the previous record's end, at a sector boundary.
pub fn encode_record_padded(kind: RecordKind, payload: &[u8], synced_offset: u64, pad_bytes: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(RECORD_HEADER_BYTES + payload.len());
    encode_record_into(&mut out, kind, payload, synced_offset, pad_bytes);
    out
}

/// [`encode_record_padded`], appended to `out` (the log writer's pending bytes: no buffer per record, ADR-0152).
pub fn encode_record_into(out: &mut Vec<u8>, kind: RecordKind, payload: &[u8], synced_offset: u64, pad_bytes: u16) {
    assert!(payload.len() <= RECORD_PAYLOAD_BYTES_MAX, "record payload too large");
    assert!(u64::from(pad_bytes) < WAL_SECTOR_BYTES_MAX, "padding reaches a whole sector");
    let mut header = [0u8; RECORD_HEADER_BYTES];
    header[4..8].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
    header[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    header[12] = kind as u8;
    header[13..15].copy_from_slice(&pad_bytes.to_le_bytes());
    header[16..24].copy_from_slice(&synced_offset.to_le_bytes());
    let header_crc = crc32fast::hash(&header[4..RECORD_HEADER_BYTES]);
    header[0..4].copy_from_slice(&header_crc.to_le_bytes());
    debug_assert_eq!(record_padding(&header, 0), pad_bytes);
    out.extend_from_slice(&header);
    out.extend_from_slice(payload);
}

/// The `pad_bytes` of the record header at `offset` (0 when there is no header there). Meaningful only for a
/// record [`decode_record_at`] accepts.
pub fn record_padding(bytes: &[u8], offset: usize) -> u16 {
    bytes.get(offset + 13..offset + 15).map_or(0, |field| u16::from_le_bytes(field.try_into().expect("2 bytes")))
}

/// Where a record appended to a segment ending at `end_offset` starts, and the zero gap before it, given how many
/// bytes a sync has been issued for: the next boundary of a `sector_bytes` sector when the sector at the end holds
/// such bytes (a torn, garbled append there could destroy them), else the end (ADR-0067, ADR-0110). Pure: the
/// writer and `specs::Storage` share it.
pub fn next_append_start(end_offset: u64, sync_issued_offset: u64, sector_bytes: u64) -> (u64, u16) {
    assert!(WAL_SECTOR_CHOICES.contains(&sector_bytes), "a WAL sector of {sector_bytes} bytes");
    let sector_start = end_offset / sector_bytes * sector_bytes;
    if sync_issued_offset > sector_start {
        let start = sector_ceil(end_offset, sector_bytes);
        (start, u16::try_from(start - end_offset).expect("a gap is shorter than a sector"))
    } else {
        (end_offset, 0)
    }
}

/// The next boundary of a `sector_bytes` sector at or after `offset`.
pub fn sector_ceil(offset: u64, sector_bytes: u64) -> u64 {
    offset.div_ceil(sector_bytes) * sector_bytes
}

/// Decode the record at `offset`: (record, its synced_offset, the offset just past it).
pub fn decode_record_at(bytes: &[u8], offset: usize) -> Result<(Record, u64, usize), DecodeError> {
    let at = |reason: &str| DecodeError::new(offset as u64, reason.to_string());
    let header = bytes.get(offset..offset + RECORD_HEADER_BYTES).ok_or_else(|| at("truncated record header"))?;
    let header_crc = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes"));
    if crc32fast::hash(&header[4..]) != header_crc {
        return Err(at("record header checksum mismatch"));
    }
    let payload_crc = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
    let payload_len = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes")) as usize;
    let kind = RecordKind::from_byte(header[12]).ok_or_else(|| at("unknown record kind"))?;
    if header[15] != 0 {
        return Err(at("reserved header byte is not zero"));
    }
    let pad_bytes = u64::from(record_padding(header, 0));
    if pad_bytes >= WAL_SECTOR_BYTES_MAX || (pad_bytes > 0 && !(offset as u64).is_multiple_of(WAL_SECTOR_BYTES)) {
        return Err(at("record padding out of range or not ending at a sector boundary"));
    }
    let synced_offset = u64::from_le_bytes(header[16..24].try_into().expect("8 bytes"));
    if payload_len > RECORD_PAYLOAD_BYTES_MAX {
        return Err(at("record length out of range"));
    }
    let start = offset + RECORD_HEADER_BYTES;
    let payload = bytes.get(start..start + payload_len).ok_or_else(|| at("truncated record payload"))?;
    if crc32fast::hash(payload) != payload_crc {
        return Err(at("record payload checksum mismatch"));
    }
    let record = match kind {
        RecordKind::Batch => Record::Batch(decode_batch(payload).map_err(|e| e.at(start as u64))?),
        RecordKind::Seal if payload.is_empty() => Record::Seal,
        RecordKind::Seal => return Err(at("seal record with a payload")),
    };
    Ok((record, synced_offset, start + payload_len))
}

/// Scan a segment's bytes: every valid record, and how the segment ends. Pure; never panics.
pub fn decode_segment(bytes: &[u8]) -> WalScan {
    let mut records = Vec::new();
    let mut position = 0usize;
    while position < bytes.len() {
        let decoded = decode_record_at(bytes, position).and_then(|decoded| {
            // A record reached directly must not claim a gap before it.
            if record_padding(bytes, position) == 0 {
                Ok((position, decoded))
            } else {
                Err(DecodeError::new(position as u64, "record claims padding but follows its predecessor directly"))
            }
        });
        match decoded.or_else(|error| padded_record_after(bytes, position).ok_or(error)) {
            Ok((start, (record, synced_offset, next))) => {
                let position_before = position;
                position = start;
                if synced_offset > position as u64 {
                    // A record cannot claim more was synced than existed before it.
                    let reason = format!("record claims {synced_offset} bytes synced before offset {position}");
                    return WalScan { records, end: WalEnd::Corrupt { offset: position as u64, reason } };
                }
                records.push((position as u64, record));
                assert!(next > position && position >= position_before, "record decoding made no progress");
                position = next;
            }
            Err(error) => {
                let end = classify_damage(bytes, position, error);
                return WalScan { records, end };
            }
        }
    }
    WalScan { records, end: WalEnd::Clean }
}

/// The record after the padding that starts at `end`: for some sector size a writer may use (smallest first), the
/// bytes from `end` to that sector's next boundary are all zero and the record there decodes and says it was
/// padded by exactly that many bytes. Its offset and decoding.
fn padded_record_after(bytes: &[u8], end: usize) -> Option<(usize, (Record, u64, usize))> {
    WAL_SECTOR_CHOICES.into_iter().find_map(|sector_bytes| {
        let boundary = usize::try_from(sector_ceil(end as u64, sector_bytes)).ok()?;
        if boundary == end || boundary >= bytes.len() || bytes[end..boundary].iter().any(|&byte| byte != 0) {
            return None;
        }
        let decoded = decode_record_at(bytes, boundary).ok()?;
        (usize::from(record_padding(bytes, boundary)) == boundary - end).then_some((boundary, decoded))
    })
}

/// Bad bytes at `damage`: corruption if a later valid record proves they had been synced, else a torn tail.
fn classify_damage(bytes: &[u8], damage: usize, error: DecodeError) -> WalEnd {
    for candidate in damage + 1..bytes.len().saturating_sub(RECORD_HEADER_BYTES - 1) {
        if let Ok((_, synced_offset, _)) = decode_record_at(bytes, candidate)
            && synced_offset > damage as u64
            && synced_offset <= candidate as u64
        {
            return WalEnd::Corrupt { offset: error.offset, reason: error.reason };
        }
    }
    WalEnd::TornTail { offset: damage as u64 }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn batch(first: u64, keys: &[&str]) -> Batch {
        Batch {
            first_sequence: first,
            writes: keys
                .iter()
                .map(|k| BatchWrite { kind: ValueKind::Put, key: k.as_bytes().to_vec(), value: b"v".to_vec() })
                .collect(),
        }
    }

    fn log_of(batches: &[Batch], sync_after_each: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut synced = 0u64;
        for b in batches {
            out.extend(encode_record(RecordKind::Batch, &encode_batch(b), synced));
            if sync_after_each {
                synced = out.len() as u64;
            }
        }
        out
    }

    #[test]
    fn clean_log_round_trips() {
        let batches = [batch(1, &["a", "b"]), batch(3, &["c"])];
        let bytes = log_of(&batches, true);
        let scan = decode_segment(&bytes);
        assert_eq!(scan.end, WalEnd::Clean);
        let decoded: Vec<Record> = scan.records.into_iter().map(|(_, r)| r).collect();
        assert_eq!(decoded, batches.iter().cloned().map(Record::Batch).collect::<Vec<_>>());
    }

    #[test]
    fn damaged_unsynced_tail_is_torn_not_corrupt() {
        let batches = [batch(1, &["a"]), batch(2, &["b"]), batch(3, &["c"])];
        let mut bytes = log_of(&batches, false);
        let second = decode_segment(&bytes).records[1].0 as usize;
        // The second record's first byte lost, the third survives: legal after a crash (nothing synced).
        bytes[second] ^= 0xff;
        let scan = decode_segment(&bytes);
        assert_eq!(scan.end, WalEnd::TornTail { offset: second as u64 });
        assert_eq!(scan.records.len(), 1);
    }

    #[test]
    fn damage_before_a_later_synced_claim_is_corruption() {
        let batches = [batch(1, &["a"]), batch(2, &["b"]), batch(3, &["c"])];
        let mut bytes = log_of(&batches, true);
        let second = decode_segment(&bytes).records[1].0 as usize;
        bytes[second + 30] ^= 0x01;
        let scan = decode_segment(&bytes);
        assert!(matches!(scan.end, WalEnd::Corrupt { offset, .. } if offset == second as u64), "{:?}", scan.end);
    }

    #[test]
    fn every_truncation_is_a_torn_tail() {
        let bytes = log_of(&[batch(1, &["a", "b"]), batch(3, &["c"])], false);
        for len in 0..bytes.len() {
            let scan = decode_segment(&bytes[..len]);
            assert!(!matches!(scan.end, WalEnd::Corrupt { .. }), "cut at {len}: {:?}", scan.end);
        }
    }

    #[test]
    fn a_payload_encoded_before_its_sequence_is_known_decodes_with_the_one_set_later() {
        let late = batch(1, &["a", "b"]);
        let mut payload = encode_batch(&late);
        set_batch_first_sequence(&mut payload, 41);
        assert_eq!(payload, encode_batch(&batch(41, &["a", "b"])));
        assert_eq!(decode_batch(&payload).map(|b| (b.first_sequence, b.last_sequence())), Ok((41, 42)));
    }

    #[test]
    fn kinds_are_distinct_from_value_kinds() {
        for kind in [RecordKind::Batch, RecordKind::Seal] {
            assert!(ValueKind::from_byte(kind as u8).is_none());
        }
        assert!(RecordKind::from_byte(ValueKind::Put.to_byte()).is_none());
        assert!(RecordKind::from_byte(ValueKind::Delete.to_byte()).is_none());
    }

    /// The encoder as it was before ADR-0152 (a buffer per record), verbatim: the reference for the on-disk bytes.
    fn encode_record_padded_before(kind: RecordKind, payload: &[u8], synced_offset: u64, pad_bytes: u16) -> Vec<u8> {
        let mut out = vec![0u8; RECORD_HEADER_BYTES];
        out[4..8].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
        out[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        out[12] = kind as u8;
        out[13..15].copy_from_slice(&pad_bytes.to_le_bytes());
        out[16..24].copy_from_slice(&synced_offset.to_le_bytes());
        let header_crc = crc32fast::hash(&out[4..RECORD_HEADER_BYTES]);
        out[0..4].copy_from_slice(&header_crc.to_le_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// Encoding in place after bytes already pending leaves them alone and appends exactly the bytes the old
    /// encoder made, for every kind, size, padding and synced offset tried (ADR-0152).
    #[test]
    fn the_in_place_encoder_appends_the_bytes_the_old_one_made() {
        let payloads: Vec<Vec<u8>> =
            [0usize, 1, 100, 5000].iter().map(|&n| (0..n).map(|i| i as u8).collect()).collect();
        let mut pending = b"earlier records".to_vec();
        let mut expected = pending.clone();
        for kind in [RecordKind::Batch, RecordKind::Seal] {
            for payload in &payloads {
                for (pad_bytes, synced_offset) in [(0, 0), (7, 123), (511, u64::MAX >> 1)] {
                    encode_record_into(&mut pending, kind, payload, synced_offset, pad_bytes);
                    expected.extend(encode_record_padded_before(kind, payload, synced_offset, pad_bytes));
                    assert_eq!(pending, expected, "{kind:?} {} bytes pad {pad_bytes}", payload.len());
                    let alone = encode_record_padded(kind, payload, synced_offset, pad_bytes);
                    assert_eq!(alone, encode_record_padded_before(kind, payload, synced_offset, pad_bytes));
                }
            }
        }
        assert_eq!(pending.len(), expected.len());
    }

    #[test]
    fn padding_is_accepted_only_where_it_is_declared_and_zero() {
        let first = encode_record(RecordKind::Batch, &encode_batch(&batch(1, &["a"])), 0);
        let gap = sector_ceil(first.len() as u64, WAL_SECTOR_BYTES) as usize - first.len();
        let padded = encode_record_padded(RecordKind::Seal, &[], first.len() as u64, gap as u16);
        let mut bytes = first.clone();
        bytes.resize(first.len() + gap, 0);
        bytes.extend_from_slice(&padded);
        assert_eq!(decode_segment(&bytes).end, WalEnd::Clean);
        // A non-zero byte in the gap: the record after it is not believed.
        let mut dirty = bytes.clone();
        dirty[first.len() + 1] = 1;
        assert_eq!(decode_segment(&dirty).records.len(), 1);
        // A record that claims padding but follows directly is damage.
        let mut direct = first.clone();
        direct.extend_from_slice(&encode_record_padded(RecordKind::Seal, &[], 0, 0));
        assert_eq!(decode_segment(&direct).end, WalEnd::Clean);
        let claimed = encode_record_padded(RecordKind::Seal, &[], 0, 7);
        assert!(decode_record_at(&claimed, 0).is_ok(), "aligned offset 0 with padding decodes alone");
        let mut unaligned = first;
        unaligned.extend_from_slice(&claimed);
        assert_ne!(decode_segment(&unaligned).end, WalEnd::Clean);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        #[test]
        fn decode_segment_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600)) {
            let scan = decode_segment(&bytes);
            let covered = match scan.end { WalEnd::Clean => bytes.len() as u64, WalEnd::TornTail { offset } => offset,
                WalEnd::Corrupt { offset, .. } => offset };
            proptest::prop_assert!(covered <= bytes.len() as u64);
        }
    }
}
