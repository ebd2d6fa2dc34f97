//! The sqlite target's configuration: the (journal_mode, synchronous) cell and what SQLite's documentation
//! promises in it, page and cache sizes, the workload; and the fault profiles (ADR-0079).

#![forbid(unsafe_code)]

use std::fmt;

use holdfast::FaultMenu;
use holdfast::env::DeterministicRng;
use holdfast::kit::{Workload, weight_or_off};
use serde::{Deserialize, Serialize};

/// The largest key space (every recovery reads the whole table).
pub const KEY_COUNT_MAX: u32 = 300;
/// The most writes one transaction carries.
pub const TRANSACTION_WRITES_MAX: u64 = 16;
/// The most keys one point-read step reads.
pub const READ_KEYS_MAX: u64 = 8;
/// The largest "large" value (overflow pages at every page size).
pub const LARGE_VALUE_BYTES_MAX: u32 = 12 * 1024;

/// `PRAGMA journal_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JournalMode {
    Delete,
    Truncate,
    Persist,
    Wal,
}

/// `PRAGMA synchronous`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Synchronous {
    Off,
    Normal,
    Full,
    Extra,
}

impl JournalMode {
    pub const ALL: [JournalMode; 4] =
        [JournalMode::Delete, JournalMode::Truncate, JournalMode::Persist, JournalMode::Wal];

    /// The pragma's argument.
    pub fn sql(self) -> &'static str {
        match self {
            JournalMode::Delete => "DELETE",
            JournalMode::Truncate => "TRUNCATE",
            JournalMode::Persist => "PERSIST",
            JournalMode::Wal => "WAL",
        }
    }
}

impl Synchronous {
    pub const ALL: [Synchronous; 4] = [Synchronous::Off, Synchronous::Normal, Synchronous::Full, Synchronous::Extra];

    /// The pragma's argument.
    pub fn sql(self) -> &'static str {
        match self {
            Synchronous::Off => "OFF",
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
            Synchronous::Extra => "EXTRA",
        }
    }
}

/// One cell of the guarantee matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Cell {
    pub journal_mode: JournalMode,
    pub synchronous: Synchronous,
}

impl Cell {
    /// The 16 cells, journal mode major.
    pub fn all() -> Vec<Cell> {
        JournalMode::ALL
            .into_iter()
            .flat_map(|journal_mode| {
                Synchronous::ALL.into_iter().map(move |synchronous| Cell { journal_mode, synchronous })
            })
            .collect()
    }

    /// What SQLite's documentation promises after a power loss in this cell.
    ///
    /// * `synchronous=OFF`: nothing (pragma.html: "the database might become corrupted if the operating system
    ///   crashes or the computer loses power").
    /// * WAL + NORMAL: consistency only (pragma.html: "WAL mode is always consistent with synchronous=NORMAL, but
    ///   WAL mode does lose durability. A transaction committed in WAL mode with synchronous=NORMAL might roll
    ///   back following a power loss"; wal.html: the WAL is synced only at checkpoints).
    /// * WAL + FULL/EXTRA: durable (pragma.html: "In WAL mode when synchronous is FULL (2), the WAL file is
    ///   synchronized before each transaction commit").
    /// * DELETE + NORMAL/FULL: consistency; the last commit may be lost (pragma.html: EXTRA "is like FULL with the
    ///   addition that the directory containing a rollback journal is synced after that journal is unlinked to
    ///   commit a transaction in DELETE mode. EXTRA provides additional durability if the commit is followed
    ///   closely by a power loss"). DELETE + EXTRA: durable.
    /// * TRUNCATE + NORMAL: consistency, the last commit may be lost (NORMAL "will still sync at the most
    ///   critical moments, but less often than in FULL mode"; SQLite 3.50.2's `pager_end_transaction` syncs the
    ///   journal's truncation, which commits, only `if( rc==SQLITE_OK && pPager->fullSync )`). + FULL/EXTRA:
    ///   durable (FULL "ensures that all content is safely written to the disk surface prior to continuing").
    /// * PERSIST + NORMAL, FULL, EXTRA: durable. The documentation says no more for NORMAL than for TRUNCATE, but
    ///   SQLite's code is stricter (ADR-0118): the commit is `zeroJournalHdr`, which syncs the zeroed header
    ///   `if( rc==SQLITE_OK && !pPager->noSync )`, and `noSync` is set only by `synchronous=OFF`; the database
    ///   file was synced before it (`sqlite3PagerCommitPhaseOne`, `if( !noSync )`). So an acknowledged commit
    ///   is on the disk surface under NORMAL too.
    pub fn promise(self) -> Promise {
        match (self.journal_mode, self.synchronous) {
            (_, Synchronous::Off) => Promise::Nothing,
            (JournalMode::Wal, Synchronous::Normal) => Promise::Consistent(LossBound::SinceCheckpoint),
            (JournalMode::Wal | JournalMode::Persist, _) => Promise::Durable,
            (JournalMode::Delete, Synchronous::Extra) => Promise::Durable,
            (JournalMode::Delete, _) | (JournalMode::Truncate, Synchronous::Normal) => {
                Promise::Consistent(LossBound::LastCommit)
            }
            (JournalMode::Truncate, _) => Promise::Durable,
        }
    }
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.journal_mode.sql(), self.synchronous.sql())
    }
}

/// What survives a power loss, per SQLite's documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Promise {
    /// Every acknowledged commit survives; the database is never corrupt.
    Durable,
    /// The state after recovery is the state after some prefix of the acknowledged commits, no earlier than the
    /// bound allows; never a partial transaction, never corrupt.
    Consistent(LossBound),
    /// Nothing: results are recorded, not judged.
    Nothing,
}

/// How far back a consistent-only cell may roll.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossBound {
    /// The most recent acknowledged commit may be lost.
    LastCommit,
    /// Any commit since the last completed checkpoint (or recovery) may be lost.
    SinceCheckpoint,
}

impl fmt::Display for Promise {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Promise::Durable => "durable: every acknowledged commit survives",
            Promise::Consistent(LossBound::LastCommit) => "consistent: the last commit may roll back",
            Promise::Consistent(LossBound::SinceCheckpoint) => {
                "consistent: commits since the last checkpoint may roll back"
            }
            Promise::Nothing => "none (may corrupt): recorded, not judged",
        })
    }
}

/// `assumed`: what atomiccommit.html ("Hardware Assumptions") says SQLite assumes of the media: writes are
/// buffered and reordered until a flush, a flush works, a torn sector write changes only the bytes written (we
/// report `SQLITE_IOCAP_POWERSAFE_OVERWRITE`, true of this disk), file deletion is atomic; no media errors.
/// Crash decisions keyed by (file, offset, sync epoch) (ADR-0039): the order of SQLite's writes between two
/// syncs is its own business. No background tasks.
pub fn assumed_menu() -> FaultMenu {
    FaultMenu::crashes_keyed_by_sync_epoch()
}

/// `beyond`: the rest of the fault model — torn sectors that turn to garbage (then the VFS stops claiming
/// powersafe overwrite, and SQLite's own answer to garbled sectors is tested), fsync, write and read errors,
/// short writes, bit flips, latent sectors, misdirected writes, explicit faults. No latency (SQLite waits on no
/// clock here) and no disk quota.
pub fn beyond_menu() -> FaultMenu {
    FaultMenu::beyond_media_assumptions()
}

/// Integer weights of the target's operations (0 turns one off).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpWeights {
    pub transaction: u64,
    pub get: u64,
    pub range: u64,
    pub checkpoint: u64,
    pub integrity_check: u64,
}

impl OpWeights {
    /// In a fixed order, for [`DeterministicRng::weighted`].
    pub fn as_array(&self) -> [u64; 5] {
        [self.transaction, self.get, self.range, self.checkpoint, self.integrity_check]
    }
}

/// Everything the sqlite target draws per seed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SqliteConfig {
    pub cell: Cell,
    /// `PRAGMA page_size` (set before the database's first write).
    pub page_size_bytes: u32,
    /// `PRAGMA cache_size` in pages (small caches spill dirty pages mid-transaction).
    pub cache_size_pages: u32,
    /// `PRAGMA wal_autocheckpoint` in pages (0: only explicit checkpoints).
    pub wal_autocheckpoint_pages: u32,
    pub workload: Workload,
    pub weights: OpWeights,
    /// Transactions carry `1..=writes_max` writes.
    pub writes_max: u64,
    /// The chance a write is a delete.
    pub delete_ppm: u32,
    /// The chance a transaction ends in ROLLBACK instead of COMMIT.
    pub rollback_ppm: u32,
}

impl SqliteConfig {
    /// Check a configuration read from a file.
    pub fn validate(&self) -> Result<(), String> {
        self.workload.validate()?;
        if self.workload.key_count > KEY_COUNT_MAX {
            return Err(format!("workload.key_count {} is above {KEY_COUNT_MAX}", self.workload.key_count));
        }
        if !self.page_size_bytes.is_power_of_two() || !(512..=65_536).contains(&self.page_size_bytes) {
            return Err(format!("page_size_bytes {} is not a power of two in 512..=65536", self.page_size_bytes));
        }
        if self.weights.transaction == 0 {
            return Err("weights.transaction must be positive".into());
        }
        if !(1..=TRANSACTION_WRITES_MAX).contains(&self.writes_max) {
            return Err(format!("writes_max must be in 1..={TRANSACTION_WRITES_MAX}"));
        }
        Ok(())
    }

    /// The configuration of `seed`: a pure function of its `"sqlite"` stream.
    pub fn from_seed(seed: u64) -> Self {
        let mut rng = DeterministicRng::stream(seed, "sqlite");
        let cell = Cell { journal_mode: JournalMode::ALL[rng.index(4)], synchronous: Synchronous::ALL[rng.index(4)] };
        let mut workload = Workload::draw(&mut rng, KEY_COUNT_MAX);
        workload.large_value_size_bytes_max = workload.large_value_size_bytes_max.min(LARGE_VALUE_BYTES_MAX);
        let page_size_bytes = [512, 1024, 4096, 8192][rng.index(4)];
        let cache_size_pages = [10, 32, 200, 2000][rng.index(4)];
        let wal_autocheckpoint_pages = [0, 8, 100, 1000][rng.index(4)];
        let mut on = |max: u64, off_ppm: u32| weight_or_off(&mut rng, off_ppm, 1, max);
        let weights = OpWeights {
            transaction: 40,
            get: on(20, 100_000),
            range: on(10, 300_000),
            checkpoint: on(4, 300_000),
            integrity_check: on(2, 500_000),
        };
        let config = Self {
            cell,
            page_size_bytes,
            cache_size_pages,
            wal_autocheckpoint_pages,
            workload,
            weights,
            writes_max: rng.range_inclusive(1, TRANSACTION_WRITES_MAX),
            delete_ppm: u32::try_from(rng.range_inclusive(0, 400_000)).expect("fits"),
            rollback_ppm: u32::try_from(rng.range_inclusive(0, 150_000)).expect("fits"),
        };
        config.validate().expect("the sqlite target generated an invalid configuration");
        config
    }

    /// The configuration of `seed` in a fixed cell (the guarantee matrix).
    pub fn in_cell(seed: u64, cell: Cell) -> Self {
        Self { cell, ..Self::from_seed(seed) }
    }

    /// Simpler configurations for the shrinker: SQLite's defaults one setting at a time. The cell never changes
    /// (it is what a finding is about).
    pub fn simpler(&self) -> Vec<Self> {
        let candidates = [
            Self { page_size_bytes: 4096, ..self.clone() },
            Self { cache_size_pages: 2000, ..self.clone() },
            Self { wal_autocheckpoint_pages: 1000, ..self.clone() },
        ];
        let mut out: Vec<Self> = candidates.into_iter().filter(|candidate| candidate != self).collect();
        out.extend(self.workload.simpler().into_iter().map(|workload| Self { workload, ..self.clone() }));
        out
    }
}

impl fmt::Display for SqliteConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = &self.weights;
        write!(
            f,
            "cell={} promise=[{}] page={}B cache={}p autocheckpoint={}p keys={} value_max={}B writes<={} \
             delete={}% rollback={}%; txn={} get={} range={} checkpoint={} integrity={}",
            self.cell,
            self.cell.promise(),
            self.page_size_bytes,
            self.cache_size_pages,
            self.wal_autocheckpoint_pages,
            self.workload.key_count,
            self.workload.value_size_bytes_max,
            self.writes_max,
            self.delete_ppm / 10_000,
            self.rollback_ppm / 10_000,
            w.transaction,
            w.get,
            w.range,
            w.checkpoint,
            w.integrity_check
        )
    }
}

#[cfg(test)]
mod tests {
    use holdfast::{FaultProfile, WorldConfig};

    use super::*;

    #[test]
    fn configuration_is_pure_varied_and_valid() {
        let configs: Vec<SqliteConfig> = (0..80).map(SqliteConfig::from_seed).collect();
        assert!((0..80).all(|seed| SqliteConfig::from_seed(seed) == configs[seed as usize]), "not pure");
        assert!(configs.iter().all(|config| config.validate().is_ok()));
        for cell in Cell::all() {
            assert!(configs.iter().any(|config| config.cell == cell) || cell.synchronous == Synchronous::Extra);
        }
        let simpler: Vec<SqliteConfig> = configs.iter().flat_map(SqliteConfig::simpler).collect();
        assert!(
            simpler.iter().all(|config| config.validate().is_ok() && configs.iter().any(|c| c.cell == config.cell))
        );
        assert!(configs.iter().all(|config| !config.simpler().contains(config)));
    }

    #[test]
    fn promises_follow_the_documentation() {
        let cell = |journal_mode, synchronous| Cell { journal_mode, synchronous }.promise();
        assert_eq!(Cell::all().len(), 16);
        assert_eq!(cell(JournalMode::Wal, Synchronous::Normal), Promise::Consistent(LossBound::SinceCheckpoint));
        assert_eq!(cell(JournalMode::Wal, Synchronous::Full), Promise::Durable);
        assert_eq!(cell(JournalMode::Delete, Synchronous::Full), Promise::Consistent(LossBound::LastCommit));
        assert_eq!(cell(JournalMode::Delete, Synchronous::Extra), Promise::Durable);
        assert_eq!(cell(JournalMode::Truncate, Synchronous::Full), Promise::Durable);
        assert_eq!(cell(JournalMode::Truncate, Synchronous::Normal), Promise::Consistent(LossBound::LastCommit));
        // ADR-0118: zeroJournalHdr syncs the commit under NORMAL (only synchronous=OFF sets noSync).
        assert_eq!(cell(JournalMode::Persist, Synchronous::Normal), Promise::Durable);
        assert!(JournalMode::ALL.iter().all(|&mode| cell(mode, Synchronous::Off) == Promise::Nothing));
        let durable = Cell::all().into_iter().filter(|cell| cell.promise() == Promise::Durable).count();
        assert_eq!(durable, 8, "WAL FULL/EXTRA, DELETE EXTRA, TRUNCATE FULL/EXTRA, PERSIST NORMAL/FULL/EXTRA");
    }

    #[test]
    fn assumed_is_crashes_only_and_beyond_garbles_sectors() {
        for seed in 0..50 {
            let world = WorldConfig::from_seed(seed, FaultProfile::Assumed, &assumed_menu());
            assert!(world.faults.is_quiet() && world.enabled_fault_kinds().is_empty(), "seed {seed}: {world}");
            assert_eq!(world.faults.crash_torn_garbage_ppm, 0);
            assert_eq!(world.weights.fault, 0);
        }
        let beyond: Vec<WorldConfig> =
            (0..50).map(|seed| WorldConfig::from_seed(seed, FaultProfile::Beyond, &beyond_menu())).collect();
        assert!(beyond.iter().any(|world| world.faults.crash_torn_garbage_ppm > 0));
        assert!(beyond.iter().any(|world| world.faults.crash_torn_garbage_ppm == 0));
        assert!(beyond.iter().all(|world| world.faults.latency_ppm == 0));
    }
}
