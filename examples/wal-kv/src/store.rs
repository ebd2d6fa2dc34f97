//! A small durable key-value store: the kind of code a storage engineer writes against `std::fs`, ported to
//! holdfast's `std::fs`-shaped facade (`holdfast::env::fs`) by changing imports and taking an `Fs<E>` handle
//! where `std::fs` has free functions. Nothing in here knows about the simulator.
//!
//! # On disk
//!
//! One directory holding two files:
//!
//! * `wal` — the write-ahead log: a sequence of frames, one per `put` or `delete`, appended and `fdatasync`ed
//!   before the call returns (acknowledged means durable).
//! * `data` — the last checkpoint: a header (`MAGIC`, entry count) and one frame per live key. Written whole to
//!   `data.tmp`, synced, renamed over `data`, then the directory is synced; only then is the log emptied.
//!
//! A frame is `len: u32 LE | checksum: u64 LE | payload (len bytes)`, where the checksum is FNV-1a 64 over the
//! four length bytes and the payload. A payload is `tag: u8 (1 put, 2 delete) | key_len: u32 LE | key | value`.
//!
//! # Recovery
//!
//! `open` reads `data` (every frame must verify: a checkpoint is only ever installed complete), then replays
//! `wal` over it. A frame that does not verify at the *end* of the log is a torn append (a crash cut the last
//! write): it is truncated away, after a second read confirms the disk really holds those bytes (a transient
//! read error must not make us destroy an acknowledged record). A bad frame *followed by a valid one* is not a
//! torn append: that is corruption, and `open` fails rather than silently drop acknowledged data. Replaying a
//! log over a checkpoint that already contains it is harmless (each record sets a key to its final value), which
//! is what makes "rename, sync the directory, then empty the log" crash-safe at every point.
//!
//! After replay `open` syncs the log and the directory, so everything a `get` can return is durable.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use holdfast::env::Env;
use holdfast::env::fs::Fs;

use crate::writer::LogWriter;

/// The first eight bytes of a checkpoint file.
pub const MAGIC: &[u8; 8] = b"WALKVCP1";
/// Bytes before a frame's payload: length and checksum.
pub const FRAME_HEADER_BYTES: usize = 12;
/// The largest payload a frame may claim; anything longer is damage, not data.
pub const PAYLOAD_BYTES_MAX: usize = 16 << 20;

const TAG_PUT: u8 = 1;
const TAG_DELETE: u8 = 2;

/// What can go wrong.
#[derive(Debug)]
pub enum Error {
    /// The file system said no (a failed write or sync, a full disk, a crash, ...).
    Io(io::Error),
    /// Bytes on disk that cannot be data we wrote.
    Corruption { file: PathBuf, offset: u64, reason: String },
    /// An earlier write or sync failed: after a failed fsync the page cache cannot be trusted (fsyncgate), so
    /// the store refuses writes until it is reopened and has re-read the disk.
    Poisoned,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(error) => write!(f, "io: {error}"),
            Error::Corruption { file, offset, reason } => {
                write!(f, "corruption in {} at offset {offset}: {reason}", file.display())
            }
            Error::Poisoned => f.write_str("an earlier write failed: reopen the store"),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(error: io::Error) -> Self {
        Error::Io(error)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// FNV-1a, 64 bits: simple, fast enough, and good at catching torn and flipped bytes.
pub fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &byte in *part {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

/// One logged change.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Record {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

impl Record {
    fn encode_frame(&self) -> Vec<u8> {
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
        frame.extend_from_slice(&fnv1a64(&[&len, &payload]).to_le_bytes());
        frame.extend_from_slice(&payload);
        frame
    }

    fn decode(payload: &[u8]) -> Option<Record> {
        let (&tag, rest) = payload.split_first()?;
        let key_len = usize::try_from(u32::from_le_bytes(rest.get(..4)?.try_into().ok()?)).ok()?;
        let key = rest.get(4..4 + key_len)?.to_vec();
        let value = &rest[4 + key_len..];
        match tag {
            TAG_PUT => Some(Record::Put(key, value.to_vec())),
            TAG_DELETE if value.is_empty() => Some(Record::Delete(key)),
            _ => None,
        }
    }

    fn apply(self, map: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
        match self {
            Record::Put(key, value) => map.insert(key, value),
            Record::Delete(key) => map.remove(&key),
        };
    }
}

/// The frame at `offset` of `bytes`: `Ok((record, next offset))`, or `Err(reason)` when it does not verify.
fn read_frame(bytes: &[u8], offset: usize) -> std::result::Result<(Record, usize), String> {
    let header = bytes.get(offset..offset + FRAME_HEADER_BYTES).ok_or("incomplete frame header")?;
    let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes"));
    let checksum = u64::from_le_bytes(header[4..].try_into().expect("8 bytes"));
    let len_bytes = usize::try_from(len).map_err(|_| "length overflows")?;
    if len_bytes > PAYLOAD_BYTES_MAX {
        return Err(format!("implausible length {len}"));
    }
    let start = offset + FRAME_HEADER_BYTES;
    let payload = bytes.get(start..start + len_bytes).ok_or("frame runs past the end of the file")?;
    if fnv1a64(&[&len.to_le_bytes(), payload]) != checksum {
        return Err("checksum mismatch".into());
    }
    let record = Record::decode(payload).ok_or("checksum matches but the payload does not decode")?;
    Ok((record, start + len_bytes))
}

/// A durable key-value store in one directory. Its log writes run on a thread of their own ([`LogWriter`]); the
/// store itself is used from one thread at a time.
#[derive(Debug)]
pub struct Store<E: Env> {
    fs: Fs<E>,
    dir: PathBuf,
    /// The thread that owns the open log and appends, syncs and empties it.
    log: LogWriter,
    map: BTreeMap<Vec<u8>, Vec<u8>>,
    poisoned: bool,
}

impl<E: Env> Store<E> {
    /// Open (creating if needed) the store in `dir` and recover it: checkpoint, then log, then make what was
    /// recovered durable.
    pub fn open(fs: Fs<E>, dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        fs.create_dir_all(&dir)?;
        // The directory's own name must be durable before anything in it can be (a no-op when it already is).
        if let Some(parent) = dir.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            fs.sync_dir(parent)?;
        }
        // A checkpoint that was never renamed into place is garbage: the log still holds its changes.
        match fs.remove_file(dir.join("data.tmp")) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error.into()),
            _ => {}
        }
        let mut map = BTreeMap::new();
        #[cfg(feature = "planted-page-bug")]
        let read = crate::appended::read_twice(&fs, &dir.join("data"));
        #[cfg(not(feature = "planted-page-bug"))]
        let read = fs.read(dir.join("data"));
        match read {
            #[cfg(feature = "planted-page-bug")]
            Ok(bytes) => crate::appended::load(&dir.join("data"), &bytes?, &mut map)?,
            #[cfg(not(feature = "planted-page-bug"))]
            Ok(bytes) => load_checkpoint(&dir.join("data"), &bytes, &mut map)?,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error.into()),
        }
        let log_path = dir.join("wal");
        let mut log = fs.open_options().read(true).write(true).create(true).open(&log_path)?;
        let bytes = fs.read(&log_path)?;
        let valid_end = replay_log(&fs, &log_path, &bytes, &mut map)?;
        if valid_end < bytes.len() as u64 {
            log.set_len(valid_end)?; // Drop the torn tail, so the next append starts on a frame boundary.
        }
        log.seek(SeekFrom::Start(valid_end))?;
        // The planted layout appends checkpoints to `data` in place: its name must be durable (with the log's,
        // by the directory sync below) before the first checkpoint.
        #[cfg(feature = "planted-page-bug")]
        drop(fs.open_options().write(true).create(true).open(dir.join("data"))?);
        // Whatever we replayed may still be only in the page cache (its write's fsync failed, say): make it durable
        // before serving it, and make the log's name (and any half-finished rename) durable with the directory.
        log.sync_data()?;
        fs.sync_dir(&dir)?;
        let log = LogWriter::start(fs.env(), log);
        Ok(Self { fs, dir, log, map, poisoned: false })
    }

    /// The value of `key`, if any.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.map.get(key).map(Vec::as_slice)
    }

    /// How many keys are live.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when no key is live.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Set `key` to `value`, durably: when this returns `Ok`, a crash cannot lose it.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.append(Record::Put(key.to_vec(), value.to_vec()))
    }

    /// Remove `key`, durably.
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.append(Record::Delete(key.to_vec()))
    }

    fn append(&mut self, record: Record) -> Result<()> {
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        let written = self.log.append(record.encode_frame());
        if let Err(error) = written {
            self.poisoned = true;
            return Err(error.into());
        }
        record.apply(&mut self.map);
        Ok(())
    }

    /// Write the whole map as the new checkpoint and start an empty log.
    pub fn checkpoint(&mut self) -> Result<()> {
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        let result = self.write_checkpoint();
        self.poisoned = result.is_err();
        result
    }

    #[cfg(feature = "planted-page-bug")]
    fn write_checkpoint(&mut self) -> Result<()> {
        crate::appended::write_checkpoint(&self.fs, &self.dir.join("data"), &self.map)?;
        self.log.truncate()?;
        Ok(())
    }

    #[cfg(not(feature = "planted-page-bug"))]
    fn write_checkpoint(&mut self) -> Result<()> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(self.map.len() as u64).to_le_bytes());
        for (key, value) in &self.map {
            bytes.extend_from_slice(&Record::Put(key.clone(), value.clone()).encode_frame());
        }
        let tmp = self.dir.join("data.tmp");
        let mut file = self.fs.create(&tmp)?;
        io::Write::write_all(&mut file, &bytes)?;
        file.sync_all()?;
        drop(file);
        self.fs.rename(&tmp, self.dir.join("data"))?;
        #[cfg(not(feature = "planted-bug"))]
        self.fs.sync_dir(&self.dir)?;
        // The checkpoint holds everything the log does: start a fresh, empty log. Truncated in place, so its name
        // is unchanged and already durable; the writer syncs the new length before it acknowledges.
        self.log.truncate()?;
        Ok(())
    }
}

#[cfg_attr(feature = "planted-page-bug", expect(dead_code, reason = "the planted layout loads its own"))]
fn load_checkpoint(path: &Path, bytes: &[u8], map: &mut BTreeMap<Vec<u8>, Vec<u8>>) -> Result<()> {
    let corrupt =
        |offset: usize, reason: String| Error::Corruption { file: path.into(), offset: offset as u64, reason };
    if bytes.get(..8) != Some(MAGIC.as_slice()) || bytes.len() < 16 {
        return Err(corrupt(0, "bad checkpoint header".into()));
    }
    let count = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    let mut offset = 16;
    let mut loaded = 0u64;
    while offset < bytes.len() {
        let (record, next) = read_frame(bytes, offset).map_err(|reason| corrupt(offset, reason))?;
        record.apply(map);
        loaded += 1;
        offset = next;
    }
    if loaded != count {
        return Err(corrupt(offset, format!("header says {count} entries, file holds {loaded}")));
    }
    Ok(())
}

/// Replay the log `bytes` (read from `path`) into `map`; the length of its valid prefix.
fn replay_log<E: Env>(fs: &Fs<E>, path: &Path, bytes: &[u8], map: &mut BTreeMap<Vec<u8>, Vec<u8>>) -> Result<u64> {
    let mut offset = 0;
    while offset < bytes.len() {
        let reason = match read_frame(bytes, offset) {
            Ok((record, next)) => {
                record.apply(map);
                offset = next;
                continue;
            }
            Err(reason) => reason,
        };
        let corrupt = |reason: String| Error::Corruption { file: path.into(), offset: offset as u64, reason };
        // A bad frame with a valid frame right after it was not cut by a crash: refuse to drop what follows.
        let claimed = u32::from_le_bytes(bytes[offset..].get(..4).unwrap_or(&[0; 4]).try_into().expect("4 bytes"));
        let next = offset + FRAME_HEADER_BYTES + claimed as usize;
        if next < bytes.len() && read_frame(bytes, next).is_ok() {
            return Err(corrupt(format!("{reason}, but a valid frame follows at offset {next}")));
        }
        // A torn tail. Before destroying it, make sure the disk really holds these bytes.
        let again = fs.read(path)?;
        if again.get(offset..) != Some(&bytes[offset..]) {
            return Err(corrupt(format!("{reason}, and a second read returned different bytes")));
        }
        break;
    }
    Ok(offset as u64)
}

#[cfg(test)]
mod tests {
    use holdfast::env::SimEnv;

    use super::*;

    fn fresh() -> (Fs<SimEnv>, Store<SimEnv>) {
        let fs = Fs::new(SimEnv::new(1));
        let store = Store::open(fs.clone(), "/kv").expect("open");
        (fs, store)
    }

    #[test]
    fn writes_survive_a_reopen_and_a_checkpoint() {
        let (fs, mut store) = fresh();
        store.put(b"a", b"1").expect("put");
        store.put(b"b", b"2").expect("put");
        store.checkpoint().expect("checkpoint");
        store.delete(b"a").expect("delete");
        store.put(b"c", b"3").expect("put");
        drop(store);
        let store = Store::open(fs, "/kv").expect("reopen");
        assert_eq!((store.get(b"a"), store.get(b"b"), store.get(b"c")), (None, Some(&b"2"[..]), Some(&b"3"[..])));
    }

    #[test]
    fn a_torn_tail_is_truncated_but_a_bad_frame_before_a_good_one_is_corruption() {
        let (fs, mut store) = fresh();
        store.put(b"a", b"1").expect("put");
        store.put(b"b", b"2").expect("put");
        drop(store);
        let mut log = fs.read("/kv/wal").expect("read");
        let first = FRAME_HEADER_BYTES + 5 + 1 + 1;
        fs.write("/kv/wal", &log[..log.len() - 2]).expect("tear the last frame");
        let store = Store::open(fs.clone(), "/kv").expect("a torn tail recovers");
        assert_eq!((store.get(b"a"), store.get(b"b")), (Some(&b"1"[..]), None));
        drop(store);
        assert_eq!(fs.read("/kv/wal").expect("read").len(), first, "the torn tail was truncated");
        log[first - 1] ^= 1; // damage the first frame's value; the second frame is intact
        fs.write("/kv/wal", &log).expect("write");
        let error = Store::open(fs, "/kv").expect_err("corruption");
        assert!(matches!(error, Error::Corruption { offset: 0, .. }), "{error}");
    }
}
