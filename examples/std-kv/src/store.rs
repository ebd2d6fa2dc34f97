//! A small durable key-value store written only with `std`: `std::fs` for its files, a log writer thread
//! ([`crate::writer`], `std::thread` and `std::sync::{Mutex, Condvar, mpsc}`), and `std::time` for its sync
//! latency. Its `fs`, `thread`, `sync` and `time` come from [`crate::sys`], which on the default route *is* `std`
//! and on the `env-fs` route is holdfast's `std`-shaped facade (DECISIONS.md ADR-0003): the source below is the same
//! on both, and nothing in it knows about the simulator.
//!
//! # On disk
//!
//! One directory holding two files:
//!
//! * `log`: one frame ([`crate::frame`]) per `put` or `delete`, appended by the writer thread, which acknowledges
//!   only after `sync_data` returned (acknowledged means durable).
//! * `snapshot`: the last checkpoint, `MAGIC | entry count u64 LE | one put frame per live key`. Written whole to
//!   `snapshot.tmp`, `sync_all`ed, renamed over `snapshot`, then the directory is synced
//!   (`File::open(dir)?.sync_all()`); only then is the log emptied.
//!
//! # Recovery
//!
//! `open` reads `snapshot` (every frame must verify: a checkpoint is only ever installed complete), then replays
//! `log` over it and stops at the first frame that does not verify, if nothing valid follows it: that is a torn
//! append, truncated away once a second read agrees (a transient read error must not destroy an acknowledged
//! record). A bad frame followed by a valid one is [`Error::Corruption`], never silently dropped. Replaying log
//! records the snapshot already holds is harmless (each sets a key to its final value), which is what makes "rename,
//! sync the directory, then empty the log" crash-safe at every point. Then `open` syncs the log and the directory,
//! so everything a `get` can return is durable.

#![cfg_attr(
    feature = "interposed",
    expect(
        clippy::disallowed_methods,
        clippy::disallowed_types,
        reason = "holdfast issue 38: this store is written with std::fs on purpose; the interpose crate answers its \
                  calls below std (DECISIONS.md ADR-0003)"
    )
)]

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::frame::{Record, claimed_end, read_frame};
use crate::sys::fs::{self, File, OpenOptions};
use crate::writer::{LogWriter, Stats};

/// The first eight bytes of a snapshot.
pub const MAGIC: &[u8; 8] = b"STDKVSN1";
const SNAPSHOT: &str = "snapshot";
const SNAPSHOT_TMP: &str = "snapshot.tmp";
const LOG: &str = "log";

/// What can go wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The file system said no (a failed write or sync, a full disk, a crash, ...).
    Io(io::Error),
    /// Bytes on disk that cannot be data we wrote.
    Corruption { file: PathBuf, offset: u64, reason: String },
    /// An earlier write or sync failed: after a failed fsync the page cache cannot be trusted, so the store refuses
    /// writes until it is reopened and has re-read the disk.
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

/// A durable key-value store in one directory. Its log writes run on a thread of their own ([`LogWriter`]); the
/// store itself is used from one thread at a time.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    log: LogWriter,
    map: BTreeMap<Vec<u8>, Vec<u8>>,
    poisoned: bool,
}

/// `fsync` a directory the `std` way: open it and `sync_all` the handle (makes renames and creations in it durable).
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl Store {
    /// Open (creating if needed) the store in `dir` and recover it: snapshot, then log, then make what was
    /// recovered durable.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir)?;
        // The directory's own name must be durable before anything in it can be.
        if let Some(parent) = dir.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }
        // A snapshot that was never renamed into place is garbage: the log still holds its changes.
        match fs::remove_file(dir.join(SNAPSHOT_TMP)) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error.into()),
            _ => {}
        }
        let mut map = BTreeMap::new();
        match fs::read(dir.join(SNAPSHOT)) {
            Ok(bytes) => load_snapshot(&dir.join(SNAPSHOT), &bytes, &mut map)?,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error.into()),
        }
        let log_path = dir.join(LOG);
        let mut log = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&log_path)?;
        let mut bytes = Vec::new();
        log.read_to_end(&mut bytes)?;
        let valid_end = replay_log(&log_path, &bytes, &mut map)?;
        if valid_end < bytes.len() as u64 {
            log.set_len(valid_end)?; // drop the torn tail, so the next append starts on a frame boundary
        }
        log.seek(SeekFrom::Start(valid_end))?;
        // What we replayed may be only in the page cache (its write's fsync failed, say): make it durable before
        // serving it, and the log's name (and any half-finished rename) with the directory.
        log.sync_data()?;
        sync_dir(&dir)?;
        let log = LogWriter::start(log)?;
        Ok(Self { dir, log, map, poisoned: false })
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

    /// What the log writer has done so far.
    pub fn stats(&self) -> Stats {
        self.log.stats()
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
        if let Err(error) = self.log.append(record.encode_frame()) {
            self.poisoned = true;
            return Err(error.into());
        }
        record.apply(&mut self.map);
        Ok(())
    }

    /// Write the whole map as the new snapshot and start an empty log.
    pub fn checkpoint(&mut self) -> Result<()> {
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        let result = self.write_snapshot();
        self.poisoned = result.is_err();
        result
    }

    fn write_snapshot(&mut self) -> Result<()> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(self.map.len() as u64).to_le_bytes());
        for (key, value) in &self.map {
            bytes.extend_from_slice(&Record::Put(key.clone(), value.clone()).encode_frame());
        }
        let tmp = self.dir.join(SNAPSHOT_TMP);
        let mut file = File::create(&tmp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, self.dir.join(SNAPSHOT))?;
        // The rename is an update of the directory: without this sync a power cut can keep the emptied log below
        // and undo the rename (DECISIONS.md ADR-0001; the planted bug leaves it out).
        #[cfg(not(feature = "planted-bug"))]
        sync_dir(&self.dir)?;
        // The snapshot holds everything the log does: empty the log (in place, so its durable name stays); the
        // writer syncs the new length before it acknowledges.
        self.log.truncate()?;
        Ok(())
    }
}

fn load_snapshot(path: &Path, bytes: &[u8], map: &mut BTreeMap<Vec<u8>, Vec<u8>>) -> Result<()> {
    let corrupt =
        |offset: usize, reason: String| Error::Corruption { file: path.into(), offset: offset as u64, reason };
    if bytes.len() < 16 || bytes.get(..8) != Some(MAGIC.as_slice()) {
        return Err(corrupt(0, "bad snapshot header".into()));
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
fn replay_log(path: &Path, bytes: &[u8], map: &mut BTreeMap<Vec<u8>, Vec<u8>>) -> Result<u64> {
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
        if let Some(next) = claimed_end(bytes, offset).filter(|&next| next < bytes.len())
            && read_frame(bytes, next).is_ok()
        {
            return Err(corrupt(format!("{reason}, but a valid frame follows at offset {next}")));
        }
        // A torn tail. Before destroying it, make sure the disk really holds these bytes.
        let again = fs::read(path)?;
        if again.get(offset..) != Some(&bytes[offset..]) {
            return Err(corrupt(format!("{reason}, and a second read returned different bytes")));
        }
        break;
    }
    Ok(offset as u64)
}
