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
    /// Keys longer than this are `InvalidArgument`: 1 ..= [`crate::types::KEY_SIZE_BYTES_MAX`], the format's limit and
    /// the default (ADR-0099).
    pub key_size_bytes_max: usize,
    /// Values longer than this are `InvalidArgument`: 1 ..= [`crate::types::VALUE_SIZE_BYTES_MAX`], the format's limit
    /// and the default (ADR-0099).
    pub value_size_bytes_max: usize,
    /// A commit whose log record would carry more payload than this is `InvalidArgument` (ADR-0071, ADR-0099):
    /// at least one write of the largest key and value ([`Options::single_write_payload_bytes`]), at most
    /// [`crate::wal::RECORD_PAYLOAD_BYTES_MAX`], the format's limit and the default.
    pub record_payload_bytes_max: usize,
    /// Count how long the writer, registry and view locks are held ([`crate::Stats::lock_holds`], ADR-0119): two
    /// clock reads per lock taken. Off by default; never on in simulation (`SimEnv`'s clock reads are part of a
    /// run's schedule).
    pub lock_timing: bool,
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
            key_size_bytes_max: crate::types::KEY_SIZE_BYTES_MAX,
            value_size_bytes_max: crate::types::VALUE_SIZE_BYTES_MAX,
            record_payload_bytes_max: crate::wal::RECORD_PAYLOAD_BYTES_MAX,
            lock_timing: false,
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

    /// (key, value) size limits, as `types::check_write` takes them.
    pub(crate) fn write_limits(&self) -> (usize, usize) {
        (self.key_size_bytes_max, self.value_size_bytes_max)
    }

    /// The log payload of a commit of one write with the largest key and value these options allow: the least
    /// `record_payload_bytes_max` may be (saturating, so absurd limits stay comparable).
    pub fn single_write_payload_bytes(&self) -> usize {
        let write = crate::wal::batch_write_bytes(0, 0);
        crate::wal::BATCH_HEADER_BYTES
            .saturating_add(write)
            .saturating_add(self.key_size_bytes_max)
            .saturating_add(self.value_size_bytes_max)
    }

    /// Check every option is in range (`Db::open` calls this): `InvalidArgument` names the option.
    pub fn validate(&self) -> crate::Result<()> {
        let table = self.table_options();
        let record_min = self.single_write_payload_bytes();
        let checks = [
            ("key_size_bytes_max", (1..=crate::types::KEY_SIZE_BYTES_MAX).contains(&self.key_size_bytes_max)),
            ("value_size_bytes_max", (1..=crate::types::VALUE_SIZE_BYTES_MAX).contains(&self.value_size_bytes_max)),
            (
                "record_payload_bytes_max",
                (record_min..=crate::wal::RECORD_PAYLOAD_BYTES_MAX).contains(&self.record_payload_bytes_max),
            ),
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

    pub fn with_lock_timing(mut self, on: bool) -> Self {
        self.lock_timing = on;
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

    /// Refuse keys longer than `bytes` (ADR-0099; `Db::open` checks the range).
    pub fn with_key_size_bytes_max(mut self, bytes: usize) -> Self {
        self.key_size_bytes_max = bytes;
        self
    }

    /// Refuse values longer than `bytes` (ADR-0099; `Db::open` checks the range).
    pub fn with_value_size_bytes_max(mut self, bytes: usize) -> Self {
        self.value_size_bytes_max = bytes;
        self
    }

    /// Refuse commits whose log record would carry more than `bytes` of payload (ADR-0099; `Db::open` checks
    /// the range).
    pub fn with_record_payload_bytes_max(mut self, bytes: usize) -> Self {
        self.record_payload_bytes_max = bytes;
        self
    }

    pub fn with_l0_compaction_trigger(mut self, tables: usize) -> Self {
        assert!(tables >= 1, "L0 compaction trigger below 1");
        self.l0_compaction_trigger = tables;
        self
    }
}
