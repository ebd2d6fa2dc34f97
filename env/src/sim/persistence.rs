//! Persistence models (ADR-0109): what a crash may leave of the state a system has not synced, and the simulated
//! device's sector size (ADR-0110). Part of every world's configuration; `posix` with 512-byte sectors is the
//! default, and what every schedule written before the models existed replays under.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The default page of the page-cache models.
pub const PAGE_BYTES_DEFAULT: u64 = 4096;
/// The largest page a model may configure.
pub const PAGE_BYTES_MAX: u64 = 1 << 20;
/// The sector sizes a simulated device may have: 512 (512n, 512e) and 4096 (4Kn).
pub const SECTOR_BYTES_CHOICES: [u64; 2] = [512, 4096];

/// How a crash treats unsynced state, weakest (grants least) first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Persistence {
    /// ADR-0004's reading of POSIX: every pending write, and every sector of it, has its own fate; every pending
    /// `set_len` and directory operation is kept or dropped alone. Produces images no page cache can.
    #[default]
    Posix,
    /// A page cache: each dirty page holds the state after some prefix of the operations into it (never a later
    /// write without an earlier one in the same page); a file's size is its size after some prefix of its
    /// operations; pages, files and directory entries are otherwise independent.
    Page,
    /// `page`, plus ext4 `data=ordered`: metadata (directory operations and file sizes) persists as a prefix of
    /// one journal, every sync commits the journal, and a size the journal exposes never shows blocks whose data
    /// was not written before it.
    Ext4Ordered,
}

impl Persistence {
    /// Every model, weakest first.
    pub const ALL: [Persistence; 3] = [Persistence::Posix, Persistence::Page, Persistence::Ext4Ordered];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Persistence::Posix => "posix",
            Persistence::Page => "page",
            Persistence::Ext4Ordered => "ext4-ordered",
        }
    }

    /// Parse a command-line name.
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|model| model.name() == text)
            .ok_or_else(|| format!("unknown persistence model {text:?} (posix, page, ext4-ordered)"))
    }

    /// Is this a page-cache model (whole pages, prefixes of the writes into each)?
    pub fn is_paged(self) -> bool {
        matches!(self, Persistence::Page | Persistence::Ext4Ordered)
    }

    /// Does every sync commit one global metadata journal (ext4's jbd2)?
    pub fn is_journaled(self) -> bool {
        self == Persistence::Ext4Ordered
    }
}

impl fmt::Display for Persistence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The simulated device and the filesystem's crash behaviour: stored in every schedule (absent while default).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DiskModel {
    pub persistence: Persistence,
    /// The page of the page-cache models (unused by `posix`).
    pub page_bytes: u64,
    /// The device's sector: the unit `posix` tears at, latent sectors and misdirected writes are measured in,
    /// and what [`crate::Env::sector_size_bytes`] reports.
    pub sector_bytes: u64,
}

impl Default for DiskModel {
    fn default() -> Self {
        Self { persistence: Persistence::Posix, page_bytes: PAGE_BYTES_DEFAULT, sector_bytes: 512 }
    }
}

impl DiskModel {
    /// The default model with `persistence`.
    pub fn with_persistence(persistence: Persistence) -> Self {
        Self { persistence, ..Self::default() }
    }

    /// True for the default (`posix`, 512-byte sectors, 4 KiB pages): left out of schedules and digests.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Check sizes: a sector of 512 or 4096 bytes, a page a power of two from the sector up to [`PAGE_BYTES_MAX`].
    pub fn validate(&self) -> Result<(), String> {
        if !SECTOR_BYTES_CHOICES.contains(&self.sector_bytes) {
            return Err(format!("disk.sector_bytes: {} (want 512 or 4096)", self.sector_bytes));
        }
        let page = self.page_bytes;
        if !page.is_power_of_two() || page < self.sector_bytes || page > PAGE_BYTES_MAX {
            return Err(format!(
                "disk.page_bytes: {page} (want a power of two from the sector, {}, up to {PAGE_BYTES_MAX})",
                self.sector_bytes
            ));
        }
        Ok(())
    }
}

impl fmt::Display for DiskModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "persistence={} page={}B sector={}B", self.persistence, self.page_bytes, self.sector_bytes)
    }
}

/// The disk as a crash left it, for `--export-image` (ADR-0111): every durable directory and file with its bytes,
/// and what the crash did to each pending operation. Kept only when asked for ([`crate::SimEnv::keep_crash_images`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrashImage {
    /// Which crash of the world this was (0-based).
    pub crash: u64,
    pub model: DiskModel,
    pub dirs: Vec<std::path::PathBuf>,
    pub files: Vec<(std::path::PathBuf, Vec<u8>)>,
    /// Pending writes, by (file, offset): kept whole, dropped, torn (some sectors or pages only).
    pub writes_kept: Vec<(std::path::PathBuf, u64)>,
    pub writes_dropped: Vec<(std::path::PathBuf, u64)>,
    pub writes_torn: Vec<(std::path::PathBuf, u64)>,
    /// (file, sector offset) of each sector a torn write left as garbage.
    pub sectors_garbled: Vec<(std::path::PathBuf, u64)>,
    /// Pending creates, removes and renames (by the path they name) kept and dropped.
    pub meta_kept: Vec<std::path::PathBuf>,
    pub meta_dropped: Vec<std::path::PathBuf>,
    /// `ext4-ordered`: journal events committed of those pending.
    pub journal: Option<(u64, u64)>,
    /// Per file the crash could change: its pages (or sectors) kept, dropped and torn, and its sizes (ADR-0170).
    pub file_crashes: Vec<super::image::FileCrash>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_parse_print_and_validate() {
        for model in Persistence::ALL {
            assert_eq!(Persistence::parse(model.name()), Ok(model));
            assert_eq!(model.to_string(), model.name());
        }
        assert!(Persistence::parse("zfs").is_err());
        assert!(DiskModel::default().validate().is_ok() && DiskModel::default().is_default());
        let bad_sector = DiskModel { sector_bytes: 1024, ..DiskModel::default() };
        let bad_page = DiskModel { sector_bytes: 4096, page_bytes: 2048, ..DiskModel::default() };
        assert!(bad_sector.validate().is_err() && bad_page.validate().is_err());
        assert!(!DiskModel::with_persistence(Persistence::Page).is_default());
    }
}
