//! The planted page-cache bug (`--features planted-page-bug`, DECISIONS.md ADR-0003): checkpoints appended to
//! `data` in place, each a body (the entries) and then a header page that points at it, written in one batch
//! before one `sync_data`. `open` adopts the newest header that verifies **without checking the body it points
//! to**. A page cache may write the header's page back before the body's: after a power cut in that window the
//! header verifies, the body reads as zeros, and the store opens with the wrong contents. ext4's `data=ordered`
//! never shows that image: the appended body is written out before the size that exposes the header commits.
//!
//! Layout: every body and every header starts on a [`PAGE_BYTES`] boundary. A body is `count` entries of
//! `key_len: u32 LE | value_len: u32 LE | key | value`; a header is `HEADER_MAGIC | body_offset: u64 LE |
//! body_len: u64 LE | count: u64 LE | FNV-1a 64 of the 24 bytes before it`.

use std::collections::BTreeMap;
use std::io::{self, Seek, SeekFrom};
use std::path::Path;

use holdfast::env::Env;
use holdfast::env::fs::Fs;

use crate::store::{Error, Result, fnv1a64};

/// The alignment of bodies and headers: the page a page cache writes back whole.
pub const PAGE_BYTES: u64 = 4096;
/// The first eight bytes of a header.
pub const HEADER_MAGIC: &[u8; 8] = b"WALKVHD1";
const HEADER_BYTES: usize = 40;

fn align_up(offset: u64) -> u64 {
    offset.div_ceil(PAGE_BYTES) * PAGE_BYTES
}

/// Append `map` to `path` as a body and a header, then sync the file once.
pub fn write_checkpoint<E: Env>(fs: &Fs<E>, path: &Path, map: &BTreeMap<Vec<u8>, Vec<u8>>) -> Result<()> {
    let mut body = Vec::new();
    for (key, value) in map {
        body.extend_from_slice(&u32::try_from(key.len()).expect("key under 4 GiB").to_le_bytes());
        body.extend_from_slice(&u32::try_from(value.len()).expect("value under 4 GiB").to_le_bytes());
        body.extend_from_slice(key);
        body.extend_from_slice(value);
    }
    let mut file = fs.open_options().read(true).write(true).create(true).open(path)?;
    let body_offset = align_up(file.seek(SeekFrom::End(0))?);
    let header_offset = align_up(body_offset + body.len() as u64).max(body_offset + PAGE_BYTES);
    let mut header = Vec::with_capacity(HEADER_BYTES);
    header.extend_from_slice(HEADER_MAGIC);
    for field in [body_offset, body.len() as u64, map.len() as u64] {
        header.extend_from_slice(&field.to_le_bytes());
    }
    let checksum = fnv1a64(&[&header]);
    header.extend_from_slice(&checksum.to_le_bytes());
    file.seek(SeekFrom::Start(body_offset))?;
    io::Write::write_all(&mut file, &body)?;
    file.seek(SeekFrom::Start(header_offset))?;
    io::Write::write_all(&mut file, &header)?;
    file.sync_data()?;
    Ok(())
}

/// Read `path` twice and insist the reads agree: the body carries no checksum, so a transient read error (a flipped
/// bit in the returned buffer) must not be adopted. Bytes that are wrong on the disk itself read the same twice.
pub fn read_twice<E: Env>(fs: &Fs<E>, path: &Path) -> io::Result<std::result::Result<Vec<u8>, Error>> {
    let first = fs.read(path)?;
    let again = fs.read(path)?;
    if let Some(offset) =
        first.iter().zip(&again).position(|(a, b)| a != b).or((first.len() != again.len()).then_some(0))
    {
        let reason = "two reads of the checkpoint file returned different bytes".to_string();
        return Ok(Err(Error::Corruption { file: path.into(), offset: offset as u64, reason }));
    }
    Ok(Ok(first))
}

/// The header at `offset` of `bytes` when it verifies: (body offset, body length, count).
fn header_at(bytes: &[u8], offset: usize) -> Option<(usize, usize, u64)> {
    let header = bytes.get(offset..offset + HEADER_BYTES)?;
    let field = |index: usize| u64::from_le_bytes(header[8 + 8 * index..16 + 8 * index].try_into().expect("8 bytes"));
    if &header[..8] != HEADER_MAGIC || fnv1a64(&[&header[..32]]) != field(3) {
        return None;
    }
    Some((usize::try_from(field(0)).ok()?, usize::try_from(field(1)).ok()?, field(2)))
}

/// Load the newest checkpoint of `bytes` (read from `path`) into `map`: the body of the newest header that
/// verifies, trusted as it is (the planted bug).
pub fn load(path: &Path, bytes: &[u8], map: &mut BTreeMap<Vec<u8>, Vec<u8>>) -> Result<()> {
    let page = usize::try_from(PAGE_BYTES).expect("fits");
    let newest = (0..bytes.len().div_ceil(page)).rev().find_map(|index| header_at(bytes, index * page));
    let Some((body_offset, body_len, count)) = newest else { return Ok(()) };
    let corrupt = |offset: usize, reason: &str| Error::Corruption {
        file: path.into(),
        offset: offset as u64,
        reason: reason.to_string(),
    };
    let body =
        bytes.get(body_offset..body_offset + body_len).ok_or_else(|| corrupt(body_offset, "body past the end"))?;
    let mut offset = 0;
    for _ in 0..count {
        let lens = body.get(offset..offset + 8).ok_or_else(|| corrupt(body_offset + offset, "entry past the body"))?;
        let key_len = u32::from_le_bytes(lens[..4].try_into().expect("4 bytes")) as usize;
        let value_len = u32::from_le_bytes(lens[4..].try_into().expect("4 bytes")) as usize;
        let start = offset + 8;
        let entry = body
            .get(start..start + key_len + value_len)
            .ok_or_else(|| corrupt(body_offset + start, "entry past the body"))?;
        map.insert(entry[..key_len].to_vec(), entry[key_len..].to_vec());
        offset = start + key_len + value_len;
    }
    Ok(())
}
