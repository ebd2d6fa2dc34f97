//! Engine options.

/// When a write is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// Every write returns after its WAL record is synced: durable when it returns (the default).
    #[default]
    Sync,
    /// Writes return after the WAL append, unsynced. **Unsafe on crash**: acknowledged writes since the last sync
    /// may be lost (never torn: a torn tail is truncated). The WAL is synced when a segment is sealed and on close.
    NoSync,
}

/// The smallest bound [`Options::with_tracked_transactions_max`] accepts.
pub const TRACKED_TRANSACTIONS_MIN: usize = 16;

/// Engine options. Build with `Options::default().with_...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub flush_threshold_bytes: u64,
    pub block_size_bytes: usize,
    pub bloom_bits_per_key: u32,
    pub level_size_ratio: u64,
    pub level1_size_bytes: u64,
    pub sync_mode: SyncMode,
    pub block_cache_bytes: usize,
    pub l0_compaction_trigger: usize,
    /// Writes stall (wait for a flush) when this many memtables are waiting to be flushed.
    pub immutable_memtables_max: usize,
    /// Target size of a compaction output table.
    pub table_size_bytes_target: u64,
    /// The most transactions the conflict tracker holds records for, active and retained (ADR-0072).
    pub tracked_transactions_max: usize,
    /// How long a group-commit batch waits before capturing the log's end when the batch before it acknowledged
    /// more than one commit, so the committers it just released can join (ADR-0092). 0 disables the pause; at most
    /// [`GROUP_COMMIT_GATHER_US_MAX`].
    pub group_commit_gather_us: u64,
}

/// The longest group-commit gather pause [`Options::validate`] accepts: 10 ms.
pub const GROUP_COMMIT_GATHER_US_MAX: u64 = 10_000;

impl Default for Options {
    fn default() -> Self {
        Self {
            flush_threshold_bytes: 64 * 1024 * 1024,
            block_size_bytes: 4096,
            bloom_bits_per_key: 10,
            level_size_ratio: 10,
            level1_size_bytes: 256 * 1024 * 1024,
            sync_mode: SyncMode::Sync,
            block_cache_bytes: 64 * 1024 * 1024,
            l0_compaction_trigger: 4,
            immutable_memtables_max: 2,
            table_size_bytes_target: 64 * 1024 * 1024,
            tracked_transactions_max: crate::ssi::TRACKED_TRANSACTIONS_MAX,
            group_commit_gather_us: 20,
        }
    }
}

impl Options {
    /// The table builder's options these engine options imply.
    pub(crate) fn table_options(&self) -> crate::sstable::TableOptions {
        crate::sstable::TableOptions {
            block_size_bytes: self.block_size_bytes,
            bloom_bits_per_key: self.bloom_bits_per_key,
            ..crate::sstable::TableOptions::default()
        }
    }

    /// Check every option is in range (`Db::open` calls this): `InvalidArgument` names the option.
    pub fn validate(&self) -> crate::Result<()> {
        let table = self.table_options();
        let checks = [
            ("bloom_bits_per_key", (1..=crate::sstable::BLOOM_BITS_PER_KEY_MAX).contains(&table.bloom_bits_per_key)),
            ("block_size_bytes", (64..=crate::sstable::BLOCK_SIZE_BYTES_MAX).contains(&table.block_size_bytes)),
            ("flush_threshold_bytes", self.flush_threshold_bytes > 0),
            ("level_size_ratio", self.level_size_ratio >= 2),
            ("l0_compaction_trigger", self.l0_compaction_trigger >= 1),
            ("immutable_memtables_max", self.immutable_memtables_max >= 1),
            ("group_commit_gather_us", self.group_commit_gather_us <= GROUP_COMMIT_GATHER_US_MAX),
            (
                "tracked_transactions_max",
                (TRACKED_TRANSACTIONS_MIN..=crate::ssi::TRACKED_TRANSACTIONS_MAX)
                    .contains(&self.tracked_transactions_max),
            ),
        ];
        match checks.iter().find(|(_, ok)| !ok) {
            Some((name, _)) => {
                Err(crate::Error::InvalidArgument { message: format!("option {name} out of range: {self:?}") })
            }
            None => Ok(()),
        }
    }

    /// Flush the memtable to an SSTable when it holds this many bytes (also scales the level sizes).
    pub fn with_flush_threshold_bytes(mut self, bytes: u64) -> Self {
        assert!(bytes > 0, "flush threshold must be positive");
        self.flush_threshold_bytes = bytes;
        self.level1_size_bytes = bytes.saturating_mul(4);
        self.table_size_bytes_target = bytes;
        self
    }

    pub fn with_block_size_bytes(mut self, bytes: usize) -> Self {
        assert!(bytes >= 64, "block size below 64 bytes");
        self.block_size_bytes = bytes;
        self
    }

    pub fn with_bloom_bits_per_key(mut self, bits: u32) -> Self {
        self.bloom_bits_per_key = bits;
        self
    }

    pub fn with_level_size_ratio(mut self, ratio: u64) -> Self {
        assert!(ratio >= 2, "level size ratio below 2");
        self.level_size_ratio = ratio;
        self
    }

    pub fn with_sync_mode(mut self, mode: SyncMode) -> Self {
        self.sync_mode = mode;
        self
    }

    pub fn with_block_cache_bytes(mut self, bytes: usize) -> Self {
        self.block_cache_bytes = bytes;
        self
    }

    /// Bound the conflict tracker to `transactions` records (active transactions plus the committed ones an
    /// active transaction still overlaps), at least [`TRACKED_TRANSACTIONS_MIN`], at most
    /// [`crate::ssi::TRACKED_TRANSACTIONS_MAX`] (the default).
    pub fn with_tracked_transactions_max(mut self, transactions: usize) -> Self {
        self.tracked_transactions_max = transactions;
        self
    }

    /// The group-commit gather pause (ADR-0092): 0 turns it off.
    pub fn with_group_commit_gather_us(mut self, micros: u64) -> Self {
        self.group_commit_gather_us = micros;
        self
    }

    pub fn with_l0_compaction_trigger(mut self, tables: usize) -> Self {
        assert!(tables >= 1, "L0 compaction trigger below 1");
        self.l0_compaction_trigger = tables;
        self
    }
}
