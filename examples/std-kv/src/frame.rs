//! The store's record format, shared by the log and the snapshot (pure: no IO).
//!
//! A frame is `len: u32 LE | crc: u32 LE | payload (len bytes)`, where `crc` is CRC-32 (crc32fast) over the four
//! length bytes and the payload. A payload is `tag: u8 (1 put, 2 delete) | key_len: u32 LE | key | value`.

use std::collections::BTreeMap;

/// Bytes before a frame's payload: length and CRC.
pub const FRAME_HEADER_BYTES: usize = 8;
/// The largest payload a frame may claim; anything longer is damage, not data.
pub const PAYLOAD_BYTES_MAX: usize = 16 << 20;

const TAG_PUT: u8 = 1;
const TAG_DELETE: u8 = 2;

/// One logged change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

fn crc(len: [u8; 4], payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&len);
    hasher.update(payload);
    hasher.finalize()
}

impl Record {
    /// The record as one frame.
    pub fn encode_frame(&self) -> Vec<u8> {
        let (tag, key, value): (u8, &[u8], &[u8]) = match self {
            Record::Put(key, value) => (TAG_PUT, key, value),
            Record::Delete(key) => (TAG_DELETE, key, &[]),
        };
        let mut payload = Vec::with_capacity(5 + key.len() + value.len());
        payload.push(tag);
        payload.extend_from_slice(&u32::try_from(key.len()).expect("key under 4 GiB").to_le_bytes());
        payload.extend_from_slice(key);
        payload.extend_from_slice(value);
        let len = u32::try_from(payload.len()).expect("record under 4 GiB").to_le_bytes();
        let mut frame = Vec::with_capacity(FRAME_HEADER_BYTES + payload.len());
        frame.extend_from_slice(&len);
        frame.extend_from_slice(&crc(len, &payload).to_le_bytes());
        frame.extend_from_slice(&payload);
        frame
    }

    fn decode(payload: &[u8]) -> Option<Record> {
        let (&tag, rest) = payload.split_first()?;
        let key_len = usize::try_from(u32::from_le_bytes(rest.get(..4)?.try_into().ok()?)).ok()?;
        let key = rest.get(4..4usize.checked_add(key_len)?)?.to_vec();
        let value = &rest[4 + key_len..];
        match tag {
            TAG_PUT => Some(Record::Put(key, value.to_vec())),
            TAG_DELETE if value.is_empty() => Some(Record::Delete(key)),
            _ => None,
        }
    }

    /// Apply the change to `map`.
    pub fn apply(self, map: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
        match self {
            Record::Put(key, value) => map.insert(key, value),
            Record::Delete(key) => map.remove(&key),
        };
    }
}

/// The frame at `offset` of `bytes`: `Ok((record, next offset))`, or `Err(reason)` when it does not verify.
pub fn read_frame(bytes: &[u8], offset: usize) -> Result<(Record, usize), String> {
    let header = bytes.get(offset..offset.saturating_add(FRAME_HEADER_BYTES)).ok_or("incomplete frame header")?;
    let len: [u8; 4] = header[..4].try_into().expect("4 bytes");
    let stored = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
    let len_bytes = usize::try_from(u32::from_le_bytes(len)).map_err(|_| "length overflows")?;
    if len_bytes > PAYLOAD_BYTES_MAX {
        return Err(format!("implausible length {len_bytes}"));
    }
    let start = offset + FRAME_HEADER_BYTES;
    let payload = bytes.get(start..start + len_bytes).ok_or("frame runs past the end of the file")?;
    if crc(len, payload) != stored {
        return Err("CRC mismatch".into());
    }
    let record = Record::decode(payload).ok_or("CRC matches but the payload does not decode")?;
    Ok((record, start + len_bytes))
}

/// Where the frame at `offset` claims to end (`None` past the end of `bytes` or for an implausible length): used to
/// tell a torn tail (nothing valid after it) from damage in the middle of the log.
pub fn claimed_end(bytes: &[u8], offset: usize) -> Option<usize> {
    let len = u32::from_le_bytes(bytes.get(offset..offset.checked_add(4)?)?.try_into().ok()?);
    let len_bytes = usize::try_from(len).ok().filter(|&len| len <= PAYLOAD_BYTES_MAX)?;
    Some(offset + FRAME_HEADER_BYTES + len_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_round_trips_and_any_flipped_bit_is_caught() {
        let record = Record::Put(b"key".to_vec(), b"value".to_vec());
        let frame = record.encode_frame();
        assert_eq!(read_frame(&frame, 0), Ok((record, frame.len())));
        for bit in 0..frame.len() * 8 {
            let mut damaged = frame.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(read_frame(&damaged, 0).is_err(), "bit {bit} flipped and the frame still verified");
        }
    }

    #[test]
    fn a_cut_frame_is_reported_not_panicked_on() {
        let frame = Record::Delete(b"k".to_vec()).encode_frame();
        for cut in 0..frame.len() {
            assert!(read_frame(&frame[..cut], 0).is_err(), "a frame cut at {cut} verified");
        }
        assert_eq!(claimed_end(&frame, 0), Some(frame.len()));
        assert_eq!(claimed_end(&frame[..3], 0), None);
    }
}
