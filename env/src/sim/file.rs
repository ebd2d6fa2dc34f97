//! [`SimFile`]: an open file of the simulated disk, and where data faults (read, write, sync, `set_len`) fire.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::MISDIRECT_SECTORS_MAX;
use super::budget::lock_charged;
use super::cost::IoKind;
use super::disk::{InodeId, PendingData, write_into};
use super::faults::{FaultKind, detail};
use super::world::World;
use crate::random::keyed;
use crate::{Error, File, Op, Result};

/// An open file of the simulated disk. Dead (every call errors) after a crash.
pub struct SimFile {
    pub(super) world: Arc<Mutex<World>>,
    pub(super) inode: InodeId,
    pub(super) path: PathBuf,
    pub(super) path_id: usize,
    pub(super) epoch: u64,
    pub(super) writable: bool,
}

impl fmt::Debug for SimFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimFile").field("path", &self.path).field("epoch", &self.epoch).finish_non_exhaustive()
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut world =
            super::threads::internal(|| self.world.lock()).unwrap_or_else(std::sync::PoisonError::into_inner);
        if world.epoch == self.epoch
            && let Some(mut inode) = world.disk.inode_mut(self.inode)
        {
            assert!(inode.open_handles > 0, "open handle count underflow");
            inode.open_handles -= 1;
        }
    }
}

impl SimFile {
    /// Lock the world for one counted call ([`super::budget`]).
    fn lock(&self, call: &'static str) -> MutexGuard<'_, World> {
        lock_charged(&self.world, 1, call)
    }

    /// One `read_at` of up to `want` bytes at `offset`: the fault decisions (read error, latency), then `place`
    /// copies the image's bytes where the caller wants them and returns them, and latent sectors and a read
    /// corruption are applied to those bytes. Returns how many bytes were read (0 at or past the end).
    fn read_with<'buf>(&self, offset: u64, want: usize, place: impl FnOnce(&[u8]) -> &'buf mut [u8]) -> Result<usize> {
        let mut world = self.lock("read_at");
        world.begin_io(Op::Read, &self.path, Some(self.epoch))?;
        let (path_hash, op_index) = world.data_key(self.path_id, offset, false);
        world.maybe_latency(&self.path, path_hash, op_index);
        if world.fires(FaultKind::ReadError, path_hash, op_index) {
            world.log_fault(FaultKind::ReadError, &self.path, offset);
            return Err(self.io_error(Op::Read, "read error"));
        }
        let len = world.disk.inode(self.inode).expect("open inode exists").current.len() as u64;
        let count = usize::try_from(len.saturating_sub(offset)).expect("length fits").min(want);
        world.cost.charge(IoKind::Read, Some(self.path_id), offset, count as u64);
        if offset >= len {
            return Ok(0);
        }
        let start = usize::try_from(offset).expect("offset fits");
        let inode = world.disk.inode(self.inode).expect("open inode exists");
        let buf = place(&inode.current[start..start + count]);
        assert_eq!(buf.len(), count, "the read's bytes were placed whole");
        if !inode.latent_sectors.is_empty() {
            garble_latent(&inode.latent_sectors, offset, buf, world.disk.model.sector_bytes);
        }
        if count > 0 && world.fires(FaultKind::ReadCorruption, path_hash, op_index) {
            let bit = detail(world.seed, FaultKind::ReadCorruption, path_hash, op_index) % (count as u64 * 8);
            buf[(bit / 8) as usize] ^= 1 << (bit % 8);
            world.log_fault(FaultKind::ReadCorruption, &self.path, offset + bit / 8);
        }
        Ok(count)
    }

    fn io_error(&self, op: Op, what: &str) -> Error {
        Error::Io { op, path: self.path.clone(), message: format!("injected {what}") }
    }
}

/// Garble the bytes of latent sectors inside a read: a bad sector reads back as garbage, every time.
fn garble_latent(latent: &BTreeSet<u64>, offset: u64, buf: &mut [u8], sector_bytes: u64) {
    let end = offset + buf.len() as u64;
    for &sector in latent.range(offset / sector_bytes..=end.saturating_sub(1) / sector_bytes) {
        let start = (sector * sector_bytes).max(offset);
        let stop = ((sector + 1) * sector_bytes).min(end);
        for position in start..stop {
            let index = usize::try_from(position - offset).expect("index fits");
            buf[index] = !buf[index] ^ 0x5a;
        }
    }
}

impl File for SimFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.read_with(offset, buf.len(), |image| {
            let read = &mut buf[..image.len()];
            read.copy_from_slice(image);
            read
        })
    }

    /// As [`File::read_exact_at`] into a zeroed buffer of `len` bytes (the same `read_at` calls, so the same
    /// fault decisions and bytes), but the image's bytes are appended to `buf` without zeroing it first (ADR-0140).
    fn read_exact_at_into(&self, offset: u64, len: usize, buf: &mut Vec<u8>) -> Result<()> {
        buf.clear();
        buf.reserve_exact(len);
        // Each round reads at least one byte or ends: `len` bounds the rounds.
        for _ in 0..=len {
            let done = buf.len();
            if done == len {
                return Ok(());
            }
            let sink = &mut *buf;
            let count = self.read_with(offset + done as u64, len - done, move |image| {
                sink.extend_from_slice(image);
                &mut sink[done..]
            })?;
            if count == 0 {
                return Err(Error::UnexpectedEof { op: Op::Read, path: self.path.clone(), offset });
            }
            assert_eq!(buf.len(), done + count, "a read appended what it counted");
        }
        unreachable!("a read of {len} bytes took more than {len} reads")
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<usize> {
        let mut world = self.lock("write_at");
        world.begin_io(Op::Write, &self.path, Some(self.epoch))?;
        if !self.writable {
            return Err(Error::InvalidInput {
                op: Op::Write,
                path: self.path.clone(),
                message: "handle opened read-only".into(),
            });
        }
        if data.is_empty() {
            // Nothing to write, as POSIX write(2) with a count of zero: no fault decision, no pending write.
            return Ok(0);
        }
        let (path_hash, op_index) = world.data_key(self.path_id, offset, false);
        world.maybe_latency(&self.path, path_hash, op_index);
        if world.fail_next_write.remove(&self.path) {
            world.log_fault(FaultKind::ExplicitWriteError, &self.path, offset);
            return Err(self.io_error(Op::Write, "write error (explicit)"));
        }
        if world.fires(FaultKind::WriteError, path_hash, op_index) {
            world.log_fault(FaultKind::WriteError, &self.path, offset);
            return Err(self.io_error(Op::Write, "write error"));
        }
        let current_len = world.disk.inode(self.inode).expect("open inode exists").current.len() as u64;
        let growth = (offset + data.len() as u64).saturating_sub(current_len);
        if let Some(quota) = world.config.disk_quota_bytes
            && growth > 0
            && world.disk.used_bytes() + growth > quota
        {
            world.log_fault(FaultKind::DiskFull, &self.path, offset);
            return Err(Error::NoSpace { op: Op::Write, path: self.path.clone() });
        }
        let mut count = data.len();
        if count > 1 && world.fires(FaultKind::ShortWrite, path_hash, op_index) {
            count = 1 + (detail(world.seed, FaultKind::ShortWrite, path_hash, op_index) % (count as u64 - 1)) as usize;
            world.log_fault(FaultKind::ShortWrite, &self.path, offset);
        }
        let mut target = offset;
        if world.fires(FaultKind::MisdirectedWrite, path_hash, op_index) {
            let value = detail(world.seed, FaultKind::MisdirectedWrite, path_hash, op_index);
            let shift = (1 + value % MISDIRECT_SECTORS_MAX) * world.disk.model.sector_bytes;
            target = if (value >> 32) & 1 == 0 || offset < shift { offset + shift } else { offset - shift };
            world.log_fault(FaultKind::MisdirectedWrite, &self.path, offset);
        }
        let written = &data[..count];
        world.cost.charge(IoKind::Write, Some(self.path_id), target, count as u64);
        let key = keyed(&[path_hash, op_index]);
        let latent = world.fires(FaultKind::LatentSector, path_hash, op_index);
        let seed = world.seed;
        let (seq, sector_bytes) = (world.disk.next_seq(), world.disk.model.sector_bytes);
        let mut inode = world.disk.inode_mut(self.inode).expect("open inode exists");
        write_into(&mut inode.current, target, written);
        inode.pending.push(PendingData::Write { offset: target, data: written.to_vec(), key, seq });
        let first_sector = target / sector_bytes;
        let last_sector = (target + count as u64 - 1) / sector_bytes;
        let rewritten: Vec<u64> = inode.latent_sectors.range(first_sector..=last_sector).copied().collect();
        for sector in rewritten {
            inode.latent_sectors.remove(&sector);
        }
        if latent {
            let span = last_sector - first_sector + 1;
            let sector = first_sector + detail(seed, FaultKind::LatentSector, path_hash, op_index) % span;
            inode.latent_sectors.insert(sector);
            drop(inode);
            world.log_fault(FaultKind::LatentSector, &self.path, sector * sector_bytes);
        }
        Ok(count)
    }

    fn sync(&self) -> Result<()> {
        let mut world = self.lock("sync");
        world.begin_io(Op::Sync, &self.path, Some(self.epoch))?;
        let (path_hash, op_index) = world.sync_key(self.path_id);
        world.maybe_latency(&self.path, path_hash, op_index);
        world.cost.charge(IoKind::FileSync, Some(self.path_id), 0, 0);
        let explicit = world.fail_next_sync.remove(&self.path);
        if explicit || world.fires(FaultKind::FsyncError, path_hash, op_index) {
            let kind = if explicit { FaultKind::ExplicitSyncError } else { FaultKind::FsyncError };
            world.log_fault(kind, &self.path, 0);
            // As Linux does after a failed fsync: the unsynced data is gone.
            let mut inode = world.disk.inode_mut(self.inode).expect("open inode exists");
            inode.current = inode.durable.clone();
            inode.pending.clear();
            return Err(self.io_error(Op::Sync, "fsync error"));
        }
        world.disk.file_synced(self.inode);
        let mut inode = world.disk.inode_mut(self.inode).expect("open inode exists");
        let mut last_write: Option<(usize, usize)> = None;
        for op in std::mem::take(&mut inode.pending) {
            match op {
                PendingData::Write { offset, data, .. } => {
                    write_into(&mut inode.durable, offset, &data);
                    last_write = Some((offset as usize, data.len()));
                }
                PendingData::SetLen { len, .. } => inode.durable.resize(len as usize, 0),
            }
        }
        assert_eq!(inode.durable.len(), inode.current.len(), "sync left durable and current lengths apart");
        // Paired check on what this sync applied (a whole-file compare would make every sync O(file size)).
        if let Some((start, len)) = last_write {
            let end = (start + len).min(inode.current.len());
            let start = start.min(end);
            assert!(inode.durable[start..end] == inode.current[start..end], "sync left durable and current apart");
        }
        Ok(())
    }

    fn set_len(&self, len_bytes: u64) -> Result<()> {
        let mut world = self.lock("set_len");
        world.begin_io(Op::SetLen, &self.path, Some(self.epoch))?;
        if !self.writable {
            return Err(Error::InvalidInput {
                op: Op::SetLen,
                path: self.path.clone(),
                message: "handle opened read-only".into(),
            });
        }
        let (path_hash, op_index) = world.data_key(self.path_id, len_bytes, true);
        let current_len = world.disk.inode(self.inode).expect("open inode exists").current.len() as u64;
        if let Some(quota) = world.config.disk_quota_bytes
            && len_bytes > current_len
            && world.disk.used_bytes() + (len_bytes - current_len) > quota
        {
            world.log_fault(FaultKind::DiskFull, &self.path, current_len);
            return Err(Error::NoSpace { op: Op::SetLen, path: self.path.clone() });
        }
        let len = usize::try_from(len_bytes).map_err(|_| Error::InvalidInput {
            op: Op::SetLen,
            path: self.path.clone(),
            message: format!("length {len_bytes} does not fit in memory"),
        })?;
        let seq = world.disk.next_seq();
        let mut inode = world.disk.inode_mut(self.inode).expect("open inode exists");
        inode.current.resize(len, 0);
        inode.pending.push(PendingData::SetLen { len: len_bytes, key: keyed(&[path_hash, op_index]), seq });
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        let world = self.lock("len");
        if world.epoch != self.epoch {
            return Err(Error::StaleHandle { op: Op::Len, path: self.path.clone() });
        }
        if world.halted || world.caller_outlived() {
            return Err(Error::Crashed { op: Op::Len, path: self.path.clone() });
        }
        Ok(world.disk.inode(self.inode).expect("open inode exists").current.len() as u64)
    }
}
