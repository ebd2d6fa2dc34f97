//! Appending to the write-ahead log (ADR-0011, ADR-0067, ADR-0134): the record layout and how recovery reads it
//! are in [`crate::wal`].
//!
//! **The group write (ADR-0134).** A committer encodes its record under the writer lock: [`WalWriter::append`]
//! decides its offset (the sector padding, ADR-0067) and its `synced_offset`, and copies it into the segment's
//! pending bytes ([`LogTail`]), in sequence order. No IO happens there. After the writer lock, the committer calls
//! [`LogTail::write_through`] with its record's end: under the **log lock** (below the writer lock: writer → log,
//! never the reverse), whoever finds its end not yet written takes *every* pending byte and writes them with one
//! `write_all_at` (the leader); a committer whose end the leader already wrote returns without a syscall (a
//! follower). The bytes on disk are exactly those of one write per record; only the number of calls changes.
//!
//! A failed write leaves the segment's tail unknown: the tail remembers the failure, and every later
//! `write_through` whose end was not written returns it (the caller poisons the database). Before a sync
//! ([`WalWriter::sync`], [`WalWriter::begin_sync`]) every pending byte is written, under the writer lock: a sync
//! covers what was appended before it, and an append after it starts with an empty buffer (a padded record is
//! always the first byte of a group, so the zero gap ADR-0067 leaves is never written).

use std::mem;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use env::{Env, File};

use crate::error::{Error, Result};
use crate::lock_meter::{LockMeter, Metered};
use crate::wal::{RECORD_HEADER_BYTES, RecordKind, encode_record_into, next_append_start};

/// The most bytes waiting to be written before the committer that pushed them past this writes them itself,
/// under the writer lock (the buffer never grows without bound when leaders fall behind).
pub(crate) const LOG_PENDING_BYTES_MAX: usize = 1 << 20;
/// How many times a committer whose record a leader is writing checks the written end, a spin hint between
/// checks, before it blocks on the log lock (ADR-0187): a group's write takes a few µs, less than a sleep and wake.
pub(crate) const LOG_SPINS_MAX: u32 = 512;

/// What the log lock guards: how far the segment is written, and whether a write failed.
#[derive(Debug, Default)]
struct Written {
    /// Every byte of the segment below this offset reached the OS (`write_all_at` returned).
    end: u64,
    /// The first failed write's error: the tail after `end` is unknown, nothing more is written.
    failed: Option<Error>,
    /// The last group's buffer, emptied, to swap in for the next (no allocation per group).
    spare: Vec<u8>,
}

/// Records appended and not yet written, under their own lock (a leaf: a memory copy, no IO).
#[derive(Debug, Default)]
struct Pending {
    /// The segment offset of `bytes[0]`.
    start: u64,
    bytes: Vec<u8>,
    /// Offsets where a write is divided in two (the `wal.split_write` BUGGIFY site: a header and its payload
    /// written by separate calls, more places for a crash to tear).
    splits: Vec<u64>,
}

/// One segment's file, its pending bytes and the log lock (ADR-0134).
#[derive(Debug)]
pub(crate) struct LogTail<E: Env> {
    file: Arc<E::File>,
    written: Mutex<Written>,
    /// `Written::end`, readable without the log lock: a follower whose end is written returns without taking
    /// it (ADR-0187). Stored after each successful write, under the log lock.
    written_end: AtomicU64,
    /// Whether a leader is writing now: a follower watches `written_end` only then (set under the log lock).
    writing: AtomicBool,
    pending: Mutex<Pending>,
    env: E,
    /// The log lock's meter (ADR-0119), shared by every segment of the database.
    meter: Arc<LockMeter>,
    timing: bool,
}

impl<E: Env> LogTail<E> {
    fn new(env: E, file: E::File, meter: Arc<LockMeter>, timing: bool) -> Self {
        let (written, pending) = (Mutex::default(), Mutex::default());
        let (written_end, writing) = (AtomicU64::new(0), AtomicBool::new(false));
        Self { file: Arc::new(file), written, written_end, writing, pending, env, meter, timing }
    }

    /// The log lock: held across a group's write, never while taking the writer lock.
    fn written(&self) -> Metered<'_, Written, E> {
        let lock = || self.written.lock().expect("log lock poisoned by a panic");
        Metered::take(&self.env, &self.meter, self.timing, lock)
    }

    /// Whether every byte below `end` was written, watched without the log lock while a leader writes, for at
    /// most [`LOG_SPINS_MAX`] checks (ADR-0187). False when no leader is writing: the caller takes the lock.
    fn written_without_lock(&self, end: u64) -> bool {
        for _ in 0..LOG_SPINS_MAX {
            if self.written_end.load(Ordering::Acquire) >= end {
                return true;
            }
            if !self.writing.load(Ordering::Acquire) {
                return false;
            }
            std::hint::spin_loop();
        }
        self.written_end.load(Ordering::Acquire) >= end
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().expect("log buffer poisoned by a panic")
    }

    /// Queue the record `encode` appends to the pending bytes (encoded in place, ADR-0152), which starts at
    /// `start`: right after the pending bytes, or (nothing pending) anywhere at or after the written end. `split`
    /// divides its write after the header. The record's end.
    fn push(&self, start: u64, split: bool, encode: impl FnOnce(&mut Vec<u8>)) -> (u64, usize) {
        let mut pending = self.pending();
        if pending.bytes.is_empty() {
            pending.start = start;
        }
        assert_eq!(pending.start + pending.bytes.len() as u64, start, "a log record not after the pending ones");
        if split {
            pending.splits.push(start + RECORD_HEADER_BYTES as u64);
        }
        encode(&mut pending.bytes);
        (pending.start + pending.bytes.len() as u64, pending.bytes.len())
    }

    /// Return once every byte below `end` reached the OS: at once when a leader already wrote them (a follower),
    /// else by writing every pending byte in one call (the leader). The failure of this or any earlier write
    /// when `end` was not reached. `u64::MAX` writes everything pending.
    pub(crate) fn write_through(&self, end: u64) -> Result<()> {
        if self.written_without_lock(end) {
            return Ok(());
        }
        let mut written = self.written();
        if end <= written.end {
            return Ok(());
        }
        if let Some(error) = &written.failed {
            return Err(error.clone());
        }
        self.write_pending(&mut written)
    }

    /// The leader: take every pending byte and write it, under the log lock.
    fn write_pending(&self, written: &mut Written) -> Result<()> {
        let (start, bytes, splits) = {
            let mut pending = self.pending();
            let bytes = mem::replace(&mut pending.bytes, mem::take(&mut written.spare));
            (pending.start, bytes, mem::take(&mut pending.splits))
        };
        if bytes.is_empty() {
            written.spare = bytes;
            return Ok(());
        }
        assert!(start >= written.end, "a log group at {start} starts below the written end {}", written.end);
        self.writing.store(true, Ordering::Release);
        let wrote = write_pieces(&*self.file, start, &bytes, &splits);
        if wrote.is_ok() {
            self.written_end.store(start + bytes.len() as u64, Ordering::Release);
        }
        self.writing.store(false, Ordering::Release);
        match wrote {
            Ok(()) => {
                written.end = start + bytes.len() as u64;
                written.spare = bytes;
                written.spare.clear();
                Ok(())
            }
            Err(error) => {
                let error = Error::from(error);
                written.failed = Some(error.clone());
                Err(error)
            }
        }
    }
}

/// Write `bytes` at `start`, one call per piece between the `splits` (absolute offsets, ascending).
fn write_pieces<F: File>(file: &F, start: u64, bytes: &[u8], splits: &[u64]) -> env::Result<()> {
    let mut from = 0usize;
    for &split in splits {
        let at = usize::try_from(split - start).expect("a split inside the group");
        file.write_all_at(start + from as u64, &bytes[from..at])?;
        from = at;
    }
    file.write_all_at(start + from as u64, &bytes[from..])
}

/// Appends records to one segment and tracks its synced boundary. Under the writer lock; its bytes are written
/// by [`LogTail::write_through`] after it, or by a sync under it.
#[derive(Debug)]
pub(crate) struct WalWriter<E: Env> {
    tail: Arc<LogTail<E>>,
    number: u64,
    /// The end of the last appended record (written or still pending).
    end_offset: u64,
    synced_offset: u64,
    /// How many bytes a sync has been issued for (done or not): no append starts in a sector holding any of them.
    sync_issued_offset: u64,
    /// The device's sector ([`env::Env::sector_size_bytes`]): appends after a sync start at its boundaries.
    sector_bytes: u64,
}

impl<E: Env> WalWriter<E> {
    /// A writer for a new, empty segment; its log lock is timed against `meter` when `timing` is on.
    pub(crate) fn new(env: &E, file: E::File, number: u64, meter: Arc<LockMeter>, timing: bool) -> Self {
        let sector_bytes = env.sector_size_bytes();
        let tail = Arc::new(LogTail::new(env.clone(), file, meter, timing));
        Self { tail, number, end_offset: 0, synced_offset: 0, sync_issued_offset: 0, sector_bytes }
    }

    /// A writer for the segment after this one, on `file`, sharing this one's log-lock meter.
    pub(crate) fn successor(&self, file: E::File, number: u64) -> Self {
        let tail = &self.tail;
        Self::new(&tail.env, file, number, Arc::clone(&tail.meter), tail.timing)
    }

    pub(crate) fn number(&self) -> u64 {
        self.number
    }

    /// The segment's path: the one its file was opened by (`Inner::wal_path` of its number).
    pub(crate) fn path(&self) -> &std::path::Path {
        self.tail.file.path()
    }

    /// The end of the last appended record (written or still pending).
    pub(crate) fn end_offset(&self) -> u64 {
        self.end_offset
    }

    /// The segment's pending bytes and log lock, for a committer to write its record after the writer lock.
    pub(crate) fn tail(&self) -> &Arc<LogTail<E>> {
        &self.tail
    }

    /// The log lock's meter (every segment's).
    pub(crate) fn meter(&self) -> &Arc<LockMeter> {
        &self.tail.meter
    }

    /// Append one record: encode it at its place and queue it; no IO unless the pending bytes pass
    /// [`LOG_PENDING_BYTES_MAX`] (then they are written here). `split` writes its header and payload with
    /// separate calls. The record's end, for [`LogTail::write_through`]. On error the segment's tail is unknown:
    /// the caller must stop using the log.
    pub(crate) fn append(&mut self, kind: RecordKind, payload: &[u8], split: bool) -> Result<u64> {
        let (start, pad_bytes) = next_append_start(self.end_offset, self.sync_issued_offset, self.sector_bytes);
        let synced_offset = self.synced_offset;
        let encode = |bytes: &mut Vec<u8>| encode_record_into(bytes, kind, payload, synced_offset, pad_bytes);
        let (end_offset, pending_bytes) = self.tail.push(start, split, encode);
        self.end_offset = end_offset;
        assert!(self.synced_offset <= self.end_offset);
        if pending_bytes > LOG_PENDING_BYTES_MAX {
            self.write_out()?;
        }
        Ok(self.end_offset)
    }

    /// Write every pending byte (under the writer lock: nothing is appended meanwhile).
    pub(crate) fn write_out(&self) -> Result<()> {
        self.tail.write_through(u64::MAX)
    }

    /// Make every appended record durable.
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.write_out()?;
        self.sync_issued_offset = self.end_offset;
        self.tail.file.sync()?;
        self.synced_offset = self.end_offset;
        Ok(())
    }

    /// Write every pending byte, then hand out the segment's file and its end, to sync outside the engine's lock
    /// (group commit): from now on no append starts in a sector holding any of those bytes.
    pub(crate) fn begin_sync(&mut self) -> Result<(Arc<E::File>, u64)> {
        self.write_out()?;
        self.sync_issued_offset = self.end_offset;
        Ok((Arc::clone(&self.tail.file), self.end_offset))
    }

    /// Everything up to `end` was synced through the file [`WalWriter::begin_sync`] handed out.
    pub(crate) fn mark_synced(&mut self, end: u64) {
        assert!(end <= self.end_offset, "synced past the end of the segment");
        self.synced_offset = self.synced_offset.max(end);
    }

    pub(crate) fn synced_offset(&self) -> u64 {
        self.synced_offset
    }
}

#[cfg(test)]
mod tests {
    use env::Env as _;

    use super::*;
    use crate::wal::tests::batch;
    use crate::wal::{
        Record, WAL_SECTOR_BYTES, WAL_SECTOR_CHOICES, WalEnd, decode_segment, encode_batch, record_padding, sector_ceil,
    };

    fn sim_writer(env: &env::SimEnv) -> WalWriter<env::SimEnv> {
        let file = env.open(std::path::Path::new("/wal-000001.log"), env::OpenOptions::create_new()).expect("open");
        WalWriter::new(env, file, 1, Arc::default(), false)
    }

    /// A writer's segment bytes after appending `records` payload lengths, syncing after the ones marked, on a
    /// device with `sector_bytes` sectors.
    fn written(appends: &[(usize, bool)], sector_bytes: u64) -> (Vec<u8>, Vec<u64>) {
        use env::Env as _;
        let model = env::DiskModel { sector_bytes, ..env::DiskModel::default() };
        let env = env::SimEnv::with_model(1, env::FaultConfig::default(), model);
        let file = env.open(std::path::Path::new("/wal-000001.log"), env::OpenOptions::create_new()).expect("open");
        let mut writer = WalWriter::new(&env, file, 1, Arc::default(), false);
        let mut synced_ends = Vec::new();
        for (index, &(len, sync)) in appends.iter().enumerate() {
            let batch = batch(index as u64 + 1, &[&"k".repeat(len.max(1))]);
            writer.append(RecordKind::Batch, &encode_batch(&batch), index % 3 == 0).expect("append");
            if sync {
                writer.sync().expect("sync");
                synced_ends.push(writer.end_offset());
            }
        }
        writer.write_out().expect("write out");
        (writer.tail.file.read_all().expect("read back"), synced_ends)
    }

    #[test]
    fn appends_after_a_sync_start_at_a_sector_boundary_and_decode() {
        let appends = [(10, true), (700, false), (3, true), (1, false), (2, false), (5, true), (40, true)];
        for sector in WAL_SECTOR_CHOICES {
            let (bytes, synced_ends) = written(&appends, sector);
            let scan = decode_segment(&bytes);
            assert_eq!((scan.end, scan.records.len()), (WalEnd::Clean, appends.len()), "sector {sector}");
            // Every synced end's sector is never written again: the next record starts at a boundary.
            for end in synced_ends {
                let next = scan.records.iter().map(|(offset, _)| *offset).find(|&offset| offset >= end);
                assert!(
                    next.is_none_or(|offset| offset.is_multiple_of(sector)),
                    "append into a synced {sector} at {end}"
                );
            }
            let padding = scan.records.iter().map(|(offset, _)| record_padding(&bytes, *offset as usize));
            assert!(padding.clone().any(|pad| u64::from(pad) >= WAL_SECTOR_BYTES) == (sector > WAL_SECTOR_BYTES));
            assert!(padding.into_iter().any(|pad| pad > 0), "no padding at sector {sector}");
        }
    }

    #[test]
    fn a_garbled_sector_after_a_sync_keeps_every_synced_record() {
        for sector in WAL_SECTOR_CHOICES {
            let (bytes, synced_ends) = written(&[(10, true), (20, true), (30, false)], sector);
            let synced = *synced_ends.last().expect("synced");
            // Garble from the unsynced record's start to the end of its sector, as a torn crash may.
            let mut garbled = bytes.clone();
            let start = usize::try_from(sector_ceil(synced, sector)).expect("fits");
            for byte in &mut garbled[start..] {
                *byte = 0x5a;
            }
            let scan = decode_segment(&garbled);
            assert_eq!(scan.records.len(), 2, "sector {sector}: {:?}", scan.end);
            assert!(matches!(scan.end, WalEnd::TornTail { .. }), "{:?}", scan.end);
        }
    }

    /// Appends queue their records without IO; the first committer to write through its end writes the whole
    /// group in one call (the others' ends are then written: they return at once), and the bytes are those of one
    /// write per record (ADR-0134).
    #[test]
    fn one_write_through_writes_the_whole_group_and_followers_find_theirs_written() {
        let env = env::SimEnv::new(3);
        let mut writer = sim_writer(&env);
        let ends: Vec<u64> = (1..=3)
            .map(|first| writer.append(RecordKind::Batch, &encode_batch(&batch(first, &["k"])), first == 2).unwrap())
            .collect();
        assert_eq!(writer.tail.file.len().unwrap(), 0, "an append wrote before its write-through");
        writer.tail.write_through(ends[1]).unwrap();
        assert_eq!((writer.tail.written().end, writer.tail.file.len().unwrap()), (ends[2], ends[2]));
        for end in ends.iter().rev() {
            writer.tail.write_through(*end).unwrap();
        }
        let scan = decode_segment(&writer.tail.file.read_all().unwrap());
        let firsts: Vec<u64> = scan
            .records
            .iter()
            .filter_map(|(_, record)| match record {
                Record::Batch(batch) => Some(batch.first_sequence),
                Record::Seal => None,
            })
            .collect();
        assert_eq!((scan.end, firsts), (WalEnd::Clean, vec![1, 2, 3]));
    }

    /// ADR-0187: a follower whose end a leader wrote returns without taking the log lock; one whose end is not
    /// written, with no leader writing, takes it at once and writes (no spin).
    #[test]
    fn a_follower_whose_end_is_written_takes_no_log_lock() {
        let env = env::SimEnv::new(4);
        let file = env.open(std::path::Path::new("/wal-000001.log"), env::OpenOptions::create_new()).expect("open");
        let mut writer = WalWriter::new(&env, file, 1, Arc::default(), true);
        let ends: Vec<u64> = (1..=3)
            .map(|first| writer.append(RecordKind::Batch, &encode_batch(&batch(first, &["k"])), false).unwrap())
            .collect();
        let takes = |writer: &WalWriter<env::SimEnv>| writer.tail.meter.read().acquisitions;
        writer.tail.write_through(ends[2]).unwrap();
        let after_leader = takes(&writer);
        assert_eq!(after_leader, 1, "the leader took the log lock once");
        for end in &ends {
            writer.tail.write_through(*end).unwrap();
        }
        assert_eq!(takes(&writer), after_leader, "a follower whose end was written took the log lock");
        let end = writer.append(RecordKind::Batch, &encode_batch(&batch(4, &["k"])), false).unwrap();
        writer.tail.write_through(end).unwrap();
        assert_eq!((takes(&writer), writer.tail.file.len().unwrap()), (after_leader + 1, end));
    }

    /// A failed group write fails every committer whose record it held and every later one, and a committer whose
    /// record an earlier group wrote still succeeds; a sync writes nothing more.
    #[test]
    fn a_failed_group_write_fails_every_record_after_the_written_end() {
        let env = env::SimEnv::new(4);
        let mut writer = sim_writer(&env);
        let first = writer.append(RecordKind::Batch, &encode_batch(&batch(1, &["a"])), false).unwrap();
        writer.tail.write_through(first).unwrap();
        let ends: Vec<u64> = (2..=4)
            .map(|s| writer.append(RecordKind::Batch, &encode_batch(&batch(s, &["b"])), false).unwrap())
            .collect();
        env.set_fault_config(env::FaultConfig { write_error_ppm: 1_000_000, ..env::FaultConfig::default() });
        let failed = writer.tail.write_through(ends[0]).unwrap_err();
        env.set_fault_config(env::FaultConfig::default());
        for end in &ends {
            assert_eq!(writer.tail.write_through(*end).unwrap_err(), failed);
        }
        writer.tail.write_through(first).unwrap();
        assert_eq!(writer.sync().unwrap_err(), failed);
        assert_eq!(decode_segment(&writer.tail.file.read_all().unwrap()).records.len(), 1);
    }

    #[test]
    fn pending_bytes_past_the_limit_are_written_by_the_append() {
        let env = env::SimEnv::new(5);
        let mut writer = sim_writer(&env);
        let key = "k".repeat(LOG_PENDING_BYTES_MAX / 4);
        let mut ends = Vec::new();
        for first in 1..=5 {
            ends.push(writer.append(RecordKind::Batch, &encode_batch(&batch(first, &[&key])), false).unwrap());
        }
        let written = writer.tail.written().end;
        assert!(written > 0 && written < ends[4], "written {written} of {ends:?}");
        assert!(ends[4] - written <= LOG_PENDING_BYTES_MAX as u64, "{} bytes pending", ends[4] - written);
    }
}
