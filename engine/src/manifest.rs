//! The manifest: the live set of tables per level, installed atomically (ADR-0014). Protocol modelled by
//! `specs::Storage`.
//!
//! Installing a new version: write `MANIFEST.tmp`, sync it, rename it over `MANIFEST`, sync the directory. A
//! crash at any point leaves either the old or the new manifest. Every table the new manifest names was synced
//! (file and directory entry) before the rename; a table is deleted only after a manifest without it is durable.
//!
//! | bytes   | field              |
//! |---------|--------------------|
//! | 0..8    | magic `HFMANIF1`   |
//! | 8..12   | format version (1) |
//! | 12..16  | body length        |
//! | 16..20  | CRC32 of the body  |
//! | 20..    | body: next file number (u64), last sequence (u64), log number (u64), table count (u32), then per table: level (u8), file number (u64), size (u64), min sequence (u64), max sequence (u64), min key (u32 length + bytes), max key (u32 length + bytes) |

use std::path::Path;

use env::{Env, File, OpenOptions};

use crate::error::{DecodeError, Error, Result};
use crate::types::Sequence;

/// File numbers above this are not ours (a hostile or damaged directory): such names are ignored.
pub const FILE_NUMBER_MAX: u64 = 1 << 48;

pub const MANIFEST_MAGIC: [u8; 8] = *b"HFMANIF1";
pub const MANIFEST_FORMAT_VERSION: u32 = 1;
pub const MANIFEST_FILE: &str = "MANIFEST";
pub const MANIFEST_TEMP_FILE: &str = "MANIFEST.tmp";
/// The most tables a manifest may list.
pub const MANIFEST_TABLES_MAX: u32 = 1 << 20;
/// The number of levels (L0 ..= L3).
pub const LEVELS: usize = 4;

/// One table as the manifest records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableMeta {
    pub level: u8,
    pub file_number: u64,
    pub size_bytes: u64,
    pub min_sequence: Sequence,
    pub max_sequence: Sequence,
    pub min_key: Vec<u8>,
    pub max_key: Vec<u8>,
}

/// A version of the database's durable structure.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    pub next_file_number: u64,
    /// Every sequence up to this one is in a table or in a log segment numbered >= `log_number`.
    pub last_sequence: Sequence,
    /// The oldest log segment recovery must replay.
    pub log_number: u64,
    pub tables: Vec<TableMeta>,
}

fn push_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// The manifest's header: magic, format version, body size and body CRC.
const HEADER_SIZE_BYTES: usize = 20;
/// A table's fixed fields in the body: level, four u64s and the two key sizes.
const TABLE_FIXED_SIZE_BYTES: usize = 1 + 4 * 8 + 2 * 4;

/// Encode a manifest. The body is written in place after the header, into a buffer of the manifest's exact size
/// (one allocation, no copy of the body); the header's size and CRC are filled in once the body is written
/// (ADR-0157).
pub fn encode_manifest(manifest: &Manifest) -> Vec<u8> {
    let keys_size_bytes: usize = manifest.tables.iter().map(|table| table.min_key.len() + table.max_key.len()).sum();
    let body_size_bytes = 3 * 8 + 4 + manifest.tables.len() * TABLE_FIXED_SIZE_BYTES + keys_size_bytes;
    let mut out = Vec::with_capacity(HEADER_SIZE_BYTES + body_size_bytes);
    out.extend_from_slice(&MANIFEST_MAGIC);
    out.extend_from_slice(&MANIFEST_FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    assert_eq!(out.len(), HEADER_SIZE_BYTES, "the body starts after the header");
    out.extend_from_slice(&manifest.next_file_number.to_le_bytes());
    out.extend_from_slice(&manifest.last_sequence.to_le_bytes());
    out.extend_from_slice(&manifest.log_number.to_le_bytes());
    out.extend_from_slice(&(manifest.tables.len() as u32).to_le_bytes());
    for table in &manifest.tables {
        assert!((table.level as usize) < LEVELS, "table level out of range");
        assert!(table.min_key <= table.max_key, "table key range inverted");
        out.push(table.level);
        for value in [table.file_number, table.size_bytes, table.min_sequence, table.max_sequence] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        push_bytes(&mut out, &table.min_key);
        push_bytes(&mut out, &table.max_key);
    }
    assert_eq!(out.len(), HEADER_SIZE_BYTES + body_size_bytes, "a manifest is the size its tables make");
    let body_len = (out.len() - HEADER_SIZE_BYTES) as u32;
    let body_crc = crc32fast::hash(&out[HEADER_SIZE_BYTES..]);
    out[12..16].copy_from_slice(&body_len.to_le_bytes());
    out[16..20].copy_from_slice(&body_crc.to_le_bytes());
    debug_assert_eq!(decode_manifest(&out).as_ref(), Ok(manifest), "manifest encoding does not round-trip");
    out
}

struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.position.checked_add(count).filter(|&end| end <= self.bytes.len());
        let Some(end) = end else {
            return Err(DecodeError::new(self.position as u64, format!("{count} bytes needed past the end")));
        };
        let slice = &self.bytes[self.position..end];
        self.position = end;
        Ok(slice)
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    fn bytes(&mut self) -> Result<Vec<u8>, DecodeError> {
        let len = self.u32()? as usize;
        Ok(self.take(len)?.to_vec())
    }
}

/// Decode a manifest. Pure: any input gives a manifest or a [`DecodeError`], never a panic.
pub fn decode_manifest(bytes: &[u8]) -> Result<Manifest, DecodeError> {
    let mut header = Reader { bytes, position: 0 };
    if header.take(8)? != MANIFEST_MAGIC {
        return Err(DecodeError::new(0, "bad manifest magic"));
    }
    let version = header.u32()?;
    if version != MANIFEST_FORMAT_VERSION {
        return Err(DecodeError::new(8, format!("unknown manifest format version {version}")));
    }
    let body_len = header.u32()? as usize;
    let body_crc = header.u32()?;
    if bytes.len() - 20 != body_len {
        return Err(DecodeError::new(12, format!("body length {body_len} but {} bytes follow", bytes.len() - 20)));
    }
    if crc32fast::hash(&bytes[20..]) != body_crc {
        return Err(DecodeError::new(16, "manifest checksum mismatch"));
    }
    let mut body = Reader { bytes: &bytes[20..], position: 0 };
    decode_body(&mut body).map_err(|error| error.at(20))
}

fn decode_body(body: &mut Reader<'_>) -> Result<Manifest, DecodeError> {
    let next_file_number = body.u64()?;
    let last_sequence = body.u64()?;
    let log_number = body.u64()?;
    if next_file_number > FILE_NUMBER_MAX || last_sequence > crate::types::SEQUENCE_MAX {
        return Err(DecodeError::new(0, "file number or sequence counter out of range"));
    }
    let count = body.u32()?;
    if count > MANIFEST_TABLES_MAX {
        return Err(DecodeError::new(24, format!("table count {count} out of range")));
    }
    let mut tables = Vec::with_capacity((count as usize).min(body.bytes.len() / 45));
    for _ in 0..count {
        let at = body.position as u64;
        let level = body.take(1)?[0];
        let (file_number, size_bytes, min_sequence, max_sequence) =
            (body.u64()?, body.u64()?, body.u64()?, body.u64()?);
        let (min_key, max_key) = (body.bytes()?, body.bytes()?);
        if level as usize >= LEVELS || min_key > max_key || min_sequence > max_sequence {
            return Err(DecodeError::new(at, "table entry out of range"));
        }
        if file_number >= next_file_number || max_sequence > last_sequence {
            return Err(DecodeError::new(at, "table entry beyond the manifest's counters"));
        }
        tables.push(TableMeta { level, file_number, size_bytes, min_sequence, max_sequence, min_key, max_key });
    }
    if body.position != body.bytes.len() {
        return Err(DecodeError::new(body.position as u64, "trailing bytes after the manifest"));
    }
    Ok(Manifest { next_file_number, last_sequence, log_number, tables })
}

/// Read and decode `dir/MANIFEST`; `Ok(None)` when there is none.
pub fn read_manifest<E: Env>(env: &E, dir: &Path) -> Result<Option<Manifest>> {
    let path = dir.join(MANIFEST_FILE);
    let file = match env.open(&path, OpenOptions::read()) {
        Ok(file) => file,
        Err(error) if error.is_not_found() => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    let bytes = file.read_all()?;
    match decode_manifest(&bytes) {
        Ok(manifest) => Ok(Some(manifest)),
        // A transient read flip looks like damage: read once more before calling it corruption.
        Err(_) => {
            let again = file.read_all()?;
            let manifest = decode_manifest(&again).map_err(|error| error.in_file(&path, 0))?;
            env::probe!(env, "manifest.reread_recovered");
            Ok(Some(manifest))
        }
    }
}

/// Install `manifest` atomically: temp file, sync, rename, directory sync.
pub fn write_manifest<E: Env>(env: &E, dir: &Path, manifest: &Manifest, split_write: bool) -> Result<()> {
    let bytes = encode_manifest(manifest);
    let temp = dir.join(MANIFEST_TEMP_FILE);
    let file = env.open(&temp, OpenOptions::create_truncate())?;
    if split_write && bytes.len() > 1 {
        let half = bytes.len() / 2;
        file.write_all_at(0, &bytes[..half])?;
        file.write_all_at(half as u64, &bytes[half..])?;
    } else {
        file.write_all_at(0, &bytes)?;
    }
    file.sync()?;
    drop(file);
    env.rename(&temp, &dir.join(MANIFEST_FILE))?;
    env.sync_dir(dir).map_err(Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            next_file_number: 9,
            last_sequence: 100,
            log_number: 7,
            tables: vec![TableMeta {
                level: 1,
                file_number: 4,
                size_bytes: 4096,
                min_sequence: 3,
                max_sequence: 90,
                min_key: b"a".to_vec(),
                max_key: b"z".to_vec(),
            }],
        }
    }

    #[test]
    fn round_trips_and_rejects_every_flipped_byte() {
        let bytes = encode_manifest(&sample());
        assert_eq!(decode_manifest(&bytes), Ok(sample()));
        for index in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[index] ^= 0x10;
            assert!(decode_manifest(&damaged).is_err(), "flip at {index} accepted");
        }
    }

    /// The encoder before ADR-0157, verbatim: the body into its own vector, then copied after the header.
    fn encode_manifest_two_buffers(manifest: &Manifest) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&manifest.next_file_number.to_le_bytes());
        body.extend_from_slice(&manifest.last_sequence.to_le_bytes());
        body.extend_from_slice(&manifest.log_number.to_le_bytes());
        body.extend_from_slice(&(manifest.tables.len() as u32).to_le_bytes());
        for table in &manifest.tables {
            body.push(table.level);
            for value in [table.file_number, table.size_bytes, table.min_sequence, table.max_sequence] {
                body.extend_from_slice(&value.to_le_bytes());
            }
            push_bytes(&mut body, &table.min_key);
            push_bytes(&mut body, &table.max_key);
        }
        let mut out = Vec::with_capacity(20 + body.len());
        out.extend_from_slice(&MANIFEST_MAGIC);
        out.extend_from_slice(&MANIFEST_FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// The in-place encoder writes the very bytes the two-buffer one wrote, in one allocation of their size.
    #[test]
    fn the_in_place_encoder_writes_the_bytes_the_two_buffer_one_wrote() {
        let table = |level: u8, number: u64, min: &[u8], max: &[u8]| TableMeta {
            level,
            file_number: number,
            size_bytes: number * 1000,
            min_sequence: number,
            max_sequence: number * 3,
            min_key: min.to_vec(),
            max_key: max.to_vec(),
        };
        let many = vec![table(0, 12, b"", b"k"), table(1, 4, b"a", b"m"), table(3, 200, &[7; 300], &[9; 301])];
        for tables in [Vec::new(), sample().tables, many] {
            let manifest = Manifest { next_file_number: 1_000, last_sequence: 1_000, log_number: 900, tables };
            let bytes = encode_manifest(&manifest);
            assert_eq!(bytes, encode_manifest_two_buffers(&manifest));
            assert_eq!(bytes.capacity(), bytes.len(), "one allocation of the exact size");
            assert_eq!(decode_manifest(&bytes), Ok(manifest));
        }
    }

    #[test]
    fn written_manifest_reads_back_from_durable_bytes() {
        let env = env::SimEnv::new(1);
        let dir = Path::new("/db");
        env.create_dir_all(dir).unwrap();
        env.sync_dir(Path::new("/")).unwrap();
        write_manifest(&env, dir, &sample(), false).unwrap();
        let durable = env.read_durable(&dir.join(MANIFEST_FILE)).expect("manifest is durable");
        assert_eq!(decode_manifest(&durable), Ok(sample()));
        assert_eq!(read_manifest(&env, dir).unwrap(), Some(sample()));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = decode_manifest(&bytes);
            let original = encode_manifest(&sample());
            let mut framed = original[..20].to_vec();
            framed.extend_from_slice(&bytes);
            // A different body under the original header fails its checksum (or its length check).
            proptest::prop_assert!(decode_manifest(&framed).is_err() || bytes[..] == original[20..]);
        }
    }
}
