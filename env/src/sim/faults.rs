//! Fault configuration, kinds, the fault log, and the keyed decision function (ADR-0004).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::random::{chance_ppm, keyed};

/// Every kind of fault the simulated world can inject, and the crash effects it records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FaultKind {
    /// `sync` returns EIO and the file's unsynced data is lost (Linux after a failed fsync).
    FsyncError,
    /// `write_at` returns EIO; nothing is written.
    WriteError,
    /// `write_at` writes fewer bytes than asked.
    ShortWrite,
    /// `read_at` returns EIO.
    ReadError,
    /// A write past the disk quota returns ENOSPC.
    DiskFull,
    /// A read returns one flipped bit (the media is fine; a re-read is correct).
    ReadCorruption,
    /// A written sector goes bad: reads of it return garbage until it is rewritten.
    LatentSector,
    /// A write lands at the wrong offset; the intended range keeps its old bytes.
    MisdirectedWrite,
    /// An IO takes simulated time.
    Latency,
    /// The clock jumps forward.
    ClockJump,
    /// A crash dropped a pending write whole.
    CrashDroppedWrite,
    /// A crash kept some sectors of a pending write and dropped others.
    CrashTornWrite,
    /// A crash dropped a pending create, remove or rename.
    CrashDroppedMetadata,
    /// An explicit fault step: the next sync of a file fails.
    ExplicitSyncError,
    /// An explicit fault step: the next write of a file fails.
    ExplicitWriteError,
    /// An explicit fault step: bits of a durable sector flipped.
    ExplicitCorruption,
    /// A crash left a sector of a torn write full of garbage — neither its old nor its new bytes, and the bytes
    /// of that sector *outside* the written range too (breaks "powersafe overwrite"; ADR-0039). Only with
    /// `crash_torn_garbage_ppm > 0`. A kind's key is its position (never reorder; add new kinds last).
    CrashGarbledSector,
    /// `sync_dir` returns EIO; the directory's pending creates, removes and renames stay pending (a later crash
    /// may still drop them, a later successful sync makes them durable).
    DirSyncError,
    /// A create, rename or remove returns EIO and changes nothing.
    MetadataError,
    /// A create, rename or remove returns ENOSPC (no room for the directory entry) and changes nothing.
    MetadataNoSpace,
}

impl FaultKind {
    /// Every kind, in a fixed order.
    pub const ALL: [FaultKind; 20] = [
        FaultKind::FsyncError,
        FaultKind::WriteError,
        FaultKind::ShortWrite,
        FaultKind::ReadError,
        FaultKind::DiskFull,
        FaultKind::ReadCorruption,
        FaultKind::LatentSector,
        FaultKind::MisdirectedWrite,
        FaultKind::Latency,
        FaultKind::ClockJump,
        FaultKind::CrashDroppedWrite,
        FaultKind::CrashTornWrite,
        FaultKind::CrashDroppedMetadata,
        FaultKind::ExplicitSyncError,
        FaultKind::ExplicitWriteError,
        FaultKind::ExplicitCorruption,
        FaultKind::CrashGarbledSector,
        FaultKind::DirSyncError,
        FaultKind::MetadataError,
        FaultKind::MetadataNoSpace,
    ];

    /// True when the fault can destroy or hide data that was already durable (the simulator weakens durability
    /// for it, ADR-0010). A failed sync is not one: it loses only unsynced data, which nobody may have been told
    /// is durable.
    pub fn destroys_data(self) -> bool {
        matches!(
            self,
            FaultKind::LatentSector
                | FaultKind::MisdirectedWrite
                | FaultKind::ExplicitCorruption
                | FaultKind::CrashGarbledSector
        )
    }

    /// A short stable name.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::FsyncError => "fsync_error",
            FaultKind::WriteError => "write_error",
            FaultKind::ShortWrite => "short_write",
            FaultKind::ReadError => "read_error",
            FaultKind::DiskFull => "disk_full",
            FaultKind::ReadCorruption => "read_corruption",
            FaultKind::LatentSector => "latent_sector",
            FaultKind::MisdirectedWrite => "misdirected_write",
            FaultKind::Latency => "latency",
            FaultKind::ClockJump => "clock_jump",
            FaultKind::CrashDroppedWrite => "crash_dropped_write",
            FaultKind::CrashTornWrite => "crash_torn_write",
            FaultKind::CrashDroppedMetadata => "crash_dropped_metadata",
            FaultKind::ExplicitSyncError => "explicit_sync_error",
            FaultKind::ExplicitWriteError => "explicit_write_error",
            FaultKind::ExplicitCorruption => "explicit_corruption",
            FaultKind::CrashGarbledSector => "crash_garbled_sector",
            FaultKind::DirSyncError => "dir_sync_error",
            FaultKind::MetadataError => "metadata_error",
            FaultKind::MetadataNoSpace => "metadata_no_space",
        }
    }

    fn key(self) -> u64 {
        self as u64 + 1
    }
}

/// One fault that fired.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultRecord {
    /// The simulator step it fired in (see [`crate::SimEnv::set_step`]).
    pub step: u64,
    pub file: PathBuf,
    pub offset: u64,
    pub kind: FaultKind,
}

/// A fault given explicitly, as a schedule step, rather than by probability.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "fault")]
pub enum ExplicitFault {
    /// The next `sync` of this file fails (and loses its unsynced data).
    FailNextSync { path: PathBuf },
    /// The next `write_at` of this file fails.
    FailNextWrite { path: PathBuf },
    /// Flip one bit of the file's durable and current bytes at `offset` (if the file is that long).
    FlipBit { path: PathBuf, offset: u64 },
}

/// What a fault decision on file data is keyed by, besides the seed, the file's path and the fault kind (ADR-0039).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKeying {
    /// The file's operation index (its n-th read, write, sync or `set_len`): removing an unrelated step changes
    /// no decision, but reordering two writes to one file swaps their fates.
    #[default]
    OperationIndex,
    /// The operation's offset (its length for `set_len`), the file's sync epoch (how many syncs it has had), and
    /// how many operations at that offset the epoch has already seen: a system that issues the same writes between
    /// two syncs in a different order gets the same faults and the same crash image, and a retry of a failed write
    /// gets a fresh decision.
    OffsetSyncEpoch,
}

/// Probabilities of every fault, in parts per million. All off by default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FaultConfig {
    pub fsync_error_ppm: u32,
    pub write_error_ppm: u32,
    pub short_write_ppm: u32,
    pub read_error_ppm: u32,
    pub read_corruption_ppm: u32,
    pub latent_sector_ppm: u32,
    pub misdirected_write_ppm: u32,
    pub latency_ppm: u32,
    pub latency_nanos_max: u64,
    pub clock_jump_ppm: u32,
    pub clock_jump_nanos_max: u64,
    /// Writes that would grow the disk past this many bytes fail with ENOSPC.
    pub disk_quota_bytes: Option<u64>,
    /// At a crash: the chance a pending write survives whole; of the rest, half are dropped and half torn.
    pub crash_write_kept_ppm: u32,
    /// At a crash: the chance a pending metadata operation survives.
    pub crash_metadata_kept_ppm: u32,
    /// At a crash: the chance a dropped sector of a torn write becomes garbage instead of keeping its old bytes
    /// (whole sector, beyond the written range: [`FaultKind::CrashGarbledSector`]).
    pub crash_torn_garbage_ppm: u32,
    /// `sync_dir` fails with EIO ([`FaultKind::DirSyncError`]). Absent from a schedule while zero, so schedules
    /// from before directory faults keep their digests.
    #[serde(skip_serializing_if = "is_zero")]
    pub dir_sync_error_ppm: u32,
    /// A create, rename or remove fails with EIO ([`FaultKind::MetadataError`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub metadata_error_ppm: u32,
    /// A create, rename or remove fails with ENOSPC ([`FaultKind::MetadataNoSpace`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub metadata_no_space_ppm: u32,
    /// What fault and crash decisions on file data are keyed by.
    pub keying: FaultKeying,
    /// The chance a BUGGIFY site is enabled for the run.
    pub buggify_site_ppm: u32,
    /// The chance an enabled BUGGIFY site fires each time it is reached.
    pub buggify_fire_ppm: u32,
}

impl Default for FaultConfig {
    fn default() -> Self {
        Self {
            fsync_error_ppm: 0,
            write_error_ppm: 0,
            short_write_ppm: 0,
            read_error_ppm: 0,
            read_corruption_ppm: 0,
            latent_sector_ppm: 0,
            misdirected_write_ppm: 0,
            latency_ppm: 0,
            latency_nanos_max: 1_000_000,
            clock_jump_ppm: 0,
            clock_jump_nanos_max: 1_000_000_000,
            disk_quota_bytes: None,
            crash_write_kept_ppm: 333_333,
            crash_metadata_kept_ppm: 500_000,
            crash_torn_garbage_ppm: 0,
            dir_sync_error_ppm: 0,
            metadata_error_ppm: 0,
            metadata_no_space_ppm: 0,
            keying: FaultKeying::OperationIndex,
            buggify_site_ppm: 0,
            buggify_fire_ppm: 0,
        }
    }
}

impl FaultConfig {
    /// No faults at all (the default).
    pub fn none() -> Self {
        Self::default()
    }

    /// The probability configured for a probabilistic fault kind (0 for kinds that are not probabilistic).
    pub fn ppm(&self, kind: FaultKind) -> u32 {
        match kind {
            FaultKind::FsyncError => self.fsync_error_ppm,
            FaultKind::WriteError => self.write_error_ppm,
            FaultKind::ShortWrite => self.short_write_ppm,
            FaultKind::ReadError => self.read_error_ppm,
            FaultKind::ReadCorruption => self.read_corruption_ppm,
            FaultKind::LatentSector => self.latent_sector_ppm,
            FaultKind::MisdirectedWrite => self.misdirected_write_ppm,
            FaultKind::Latency => self.latency_ppm,
            FaultKind::ClockJump => self.clock_jump_ppm,
            FaultKind::CrashGarbledSector => self.crash_torn_garbage_ppm,
            FaultKind::DirSyncError => self.dir_sync_error_ppm,
            FaultKind::MetadataError => self.metadata_error_ppm,
            FaultKind::MetadataNoSpace => self.metadata_no_space_ppm,
            _ => 0,
        }
    }

    /// True when no probabilistic fault can fire (crashes may still happen).
    pub fn is_quiet(&self) -> bool {
        FaultKind::ALL.iter().all(|&kind| self.ppm(kind) == 0) && self.disk_quota_bytes.is_none()
    }
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// Stream tags for keyed decisions. Never renumber: saved seeds depend on them (ADR-0003).
pub(crate) mod tag {
    pub const FAULT: u64 = 0x4641_554c;
    pub const CRASH_META: u64 = 0x4d45_5441;
    pub const CRASH_WRITE: u64 = 0x5752_4954;
    pub const CRASH_SECTOR: u64 = 0x5345_4354;
    pub const CRASH_SET_LEN: u64 = 0x534c_454e;
    pub const BUGGIFY_SITE: u64 = 0x4255_4753;
    pub const BUGGIFY_FIRE: u64 = 0x4255_4746;
    pub const CLOCK: u64 = 0x434c_4f43;
    pub const DETAIL: u64 = 0x4445_5441;
    pub const CRASH_GARBLE: u64 = 0x4741_5242;
    pub const OFFSET_EPOCH: u64 = 0x4f46_4550;
    pub const CRASH_PAGE: u64 = 0x5041_4745;
    pub const CRASH_SIZE: u64 = 0x5349_5a45;
    pub const CRASH_JOURNAL: u64 = 0x4a52_4e4c;
}

/// Does fault `kind` fire on operation `op_index` of the file whose path hashes to `path_hash`? A pure function
/// of (seed, file, that file's operation index, kind): deleting an unrelated step changes no other decision.
pub(crate) fn fires(seed: u64, config: &FaultConfig, kind: FaultKind, path_hash: u64, op_index: u64) -> bool {
    let ppm = config.ppm(kind);
    ppm > 0 && chance_ppm(ppm, keyed(&[seed, tag::FAULT, kind.key(), path_hash, op_index]))
}

/// A detail value for a fault that fired (which bit to flip, how far to misdirect), keyed like [`fires`].
pub(crate) fn detail(seed: u64, kind: FaultKind, path_hash: u64, op_index: u64) -> u64 {
    keyed(&[seed, tag::DETAIL, kind.key(), path_hash, op_index])
}
