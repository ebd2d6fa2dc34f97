//! The redb target's fault profiles (ADR-0038) and its own configuration: the key space, the operation mix, the
//! shape of transactions and redb's settings, drawn from the seed's `"redb"` stream, stored in the schedule and
//! simplified by the shrinker.

use std::fmt;

use holdfast::FaultMenu;
use holdfast::env::DeterministicRng;
use holdfast::kit::{Workload, weight_or_off};
use serde::{Deserialize, Serialize};

/// The largest key space the redb target uses (every verification reads it all).
pub const KEY_COUNT_MAX: u32 = 500;
/// The most operations one write transaction carries.
pub const TRANSACTION_OPS_MAX: u64 = 24;
/// The most keys one read step gets.
pub const READ_KEYS_MAX: u64 = 16;

/// `assumed`: only what redb's `docs/design.md` assumes of the media — crashes that keep, drop or tear (old or
/// new bytes per sector, nothing outside the written range) the writes since the last `fdatasync`. Decisions are
/// keyed by (file, offset, sync epoch) (ADR-0039); redb has no background tasks and no BUGGIFY sites.
pub fn assumed_menu() -> FaultMenu {
    FaultMenu::crashes_keyed_by_sync_epoch()
}

/// `beyond`: past those assumptions — torn sectors that turn to garbage (outside the written range too), fsync,
/// write and read errors, short writes, bit flips on read and at rest, latent sectors, misdirected writes, and
/// explicit failed syncs, failed writes and bit flips. The kinds and their largest ppm are the standard menu's
/// but latency (redb reads no clock); each kind is on in half the seeds, as before the port.
pub fn beyond_menu() -> FaultMenu {
    FaultMenu::beyond_media_assumptions()
}

/// Integer weights of the target's own operations (0 turns a kind off).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpWeights {
    /// A write transaction (committed or aborted).
    pub write: u64,
    /// Point reads in one read transaction.
    pub read: u64,
    /// A range read.
    pub range: u64,
    /// Open a long-lived read transaction.
    pub snapshot: u64,
    /// Read through the long-lived read transaction.
    pub snapshot_read: u64,
    /// `Database::compact()`.
    pub compact: u64,
    /// `Database::check_integrity()`.
    pub check_integrity: u64,
}

impl OpWeights {
    /// The weights in a fixed order, for [`DeterministicRng::weighted`].
    pub fn as_array(&self) -> [u64; 7] {
        [self.write, self.read, self.range, self.snapshot, self.snapshot_read, self.compact, self.check_integrity]
    }
}

/// redb's own settings, varied by seed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedbSettings {
    /// redb's 2-phase commit (`set_two_phase_commit`) instead of 1-phase + checksum.
    pub two_phase_commit: bool,
    /// redb's quick repair (`set_quick_repair`): allocator state saved with every commit.
    pub quick_repair: bool,
    /// redb's page cache size.
    pub cache_size_bytes: u64,
}

/// Everything the redb target draws per seed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedbConfig {
    /// The key space (at most [`KEY_COUNT_MAX`] keys), key distribution, value sizes and range widths.
    pub workload: Workload,
    /// How often each operation comes (world steps are the world's: [`holdfast::WorldConfig::weights`]).
    pub weights: OpWeights,
    /// Write transactions carry `1..=ops_max` operations.
    pub ops_max: u64,
    /// The chance an operation of a write transaction is a remove (else an insert).
    pub remove_ppm: u32,
    /// The chance a write transaction is aborted instead of committed.
    pub abort_ppm: u32,
    /// Read steps get `1..=read_keys_max` keys.
    pub read_keys_max: u64,
    /// redb's own settings.
    pub settings: RedbSettings,
}

impl RedbConfig {
    /// Check a configuration read from a file.
    pub fn validate(&self) -> Result<(), String> {
        self.workload.validate()?;
        if self.workload.key_count > KEY_COUNT_MAX {
            return Err(format!("workload.key_count {} is above {KEY_COUNT_MAX}", self.workload.key_count));
        }
        if self.weights.write == 0 {
            return Err("weights.write must be positive (every run writes)".into());
        }
        if !(1..=TRANSACTION_OPS_MAX).contains(&self.ops_max) {
            return Err(format!("ops_max must be in 1..={TRANSACTION_OPS_MAX}"));
        }
        if self.read_keys_max == 0 {
            return Err("read_keys_max must be positive".into());
        }
        Ok(())
    }

    /// The configuration of `seed`: a pure function of its `"redb"` stream.
    pub fn from_seed(seed: u64) -> Self {
        let mut rng = DeterministicRng::stream(seed, "redb");
        let workload = Workload::draw(&mut rng, KEY_COUNT_MAX);
        let write = rng.range_inclusive(20, 60);
        let mut on = |max: u64, off_ppm: u32| weight_or_off(&mut rng, off_ppm, 1, max);
        let weights = OpWeights {
            write,
            read: on(30, 100_000),
            range: on(10, 300_000),
            snapshot: on(3, 400_000),
            snapshot_read: on(10, 400_000),
            compact: on(2, 500_000),
            check_integrity: on(2, 500_000),
        };
        let config = Self {
            workload,
            weights,
            ops_max: rng.range_inclusive(1, TRANSACTION_OPS_MAX),
            remove_ppm: u32::try_from(rng.range_inclusive(0, 400_000)).expect("fits"),
            abort_ppm: u32::try_from(rng.range_inclusive(0, 150_000)).expect("fits"),
            read_keys_max: rng.range_inclusive(1, READ_KEYS_MAX),
            settings: RedbSettings {
                two_phase_commit: rng.chance_ppm(500_000),
                quick_repair: rng.chance_ppm(500_000),
                cache_size_bytes: [0, 64 * 1024, 1024 * 1024, 16 * 1024 * 1024][rng.index(4)],
            },
        };
        config.validate().expect("the redb target generated an invalid configuration");
        config
    }

    /// Simpler configurations for the shrinker: redb's defaults, one setting at a time (no page cache, no quick
    /// repair, 1-phase commit). Only settings: the rest shapes generation, which a replay never consults.
    pub fn simpler(&self) -> Vec<Self> {
        let settings = &self.settings;
        let candidates = [
            RedbSettings { cache_size_bytes: 0, ..settings.clone() },
            RedbSettings { quick_repair: false, ..settings.clone() },
            RedbSettings { two_phase_commit: false, ..settings.clone() },
        ];
        let mut out: Vec<Self> = candidates.into_iter().map(|settings| Self { settings, ..self.clone() }).collect();
        out.retain(|candidate| candidate != self);
        out
    }
}

impl fmt::Display for RedbConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (w, s, load) = (&self.weights, &self.settings, &self.workload);
        write!(
            f,
            "commit={} quick_repair={} cache={}B keys={} dist={:?} value_max={}B txn_ops<={} remove={}% abort={}% \
             read_keys<={} range<={}; write={} read={} range={} snapshot={} snapshot_read={} compact={} integrity={}",
            if s.two_phase_commit { "2pc" } else { "1pc+checksum" },
            s.quick_repair,
            s.cache_size_bytes,
            load.key_count,
            load.distribution,
            load.value_size_bytes_max,
            self.ops_max,
            self.remove_ppm / 10_000,
            self.abort_ppm / 10_000,
            self.read_keys_max,
            load.scan_keys_max,
            w.write,
            w.read,
            w.range,
            w.snapshot,
            w.snapshot_read,
            w.compact,
            w.check_integrity
        )
    }
}

#[cfg(test)]
mod tests {
    use holdfast::env::{FaultKeying, FaultKind};
    use holdfast::{ExplicitFaults, FaultProfile, WorldConfig};

    use super::*;

    #[test]
    fn configuration_is_a_pure_function_of_the_seed_within_its_bounds() {
        let configs: Vec<RedbConfig> = (0..50).map(RedbConfig::from_seed).collect();
        assert!((0..50).all(|seed| RedbConfig::from_seed(seed) == configs[seed as usize]), "not pure");
        assert!(configs.iter().all(|config| config.validate().is_ok() && config.workload.key_count <= KEY_COUNT_MAX));
        let varied = |f: fn(&RedbConfig) -> bool| configs.iter().any(f) && !configs.iter().all(f);
        assert!(varied(|config| config.workload.key_count <= 8), "key spaces do not vary down to tiny ones");
        assert!(varied(|config| config.settings.two_phase_commit), "one commit strategy only");
        assert!(varied(|config| config.settings.quick_repair), "quick repair never varies");
        assert!(varied(|config| config.weights.compact == 0), "compaction never varies");
        let simpler: Vec<RedbConfig> = configs.iter().flat_map(RedbConfig::simpler).collect();
        assert!(!simpler.is_empty() && simpler.iter().all(|config| config.validate().is_ok()));
        assert!(configs.iter().all(|config| !config.simpler().contains(config)), "a simplification changes nothing");
    }

    #[test]
    fn assumed_profile_injects_nothing_beyond_crashes() {
        for seed in 0..50 {
            let world = WorldConfig::from_seed(seed, FaultProfile::Assumed, &assumed_menu());
            assert!(world.faults.is_quiet(), "seed {seed}: {world}");
            assert!(world.enabled_fault_kinds().is_empty(), "seed {seed}: {world}");
            assert_eq!(world.faults.crash_torn_garbage_ppm, 0);
            assert_eq!(world.faults.keying, FaultKeying::OffsetSyncEpoch);
            assert_eq!(world.weights.fault, 0, "no explicit faults under assumed");
            assert_eq!(world.weights.run_task, 0, "redb has no background tasks");
            assert!(!world.buggify);
        }
    }

    #[test]
    fn beyond_profile_turns_faults_on_in_some_seeds() {
        let worlds: Vec<WorldConfig> =
            (0..50).map(|seed| WorldConfig::from_seed(seed, FaultProfile::Beyond, &beyond_menu())).collect();
        assert!(worlds.iter().any(|world| world.faults.fsync_error_ppm > 0));
        assert!(worlds.iter().any(|world| world.faults.crash_torn_garbage_ppm > 0));
        assert!(worlds.iter().any(|world| world.weights.fault > 0 && world.explicit == ExplicitFaults::All));
        assert!(worlds.iter().all(|world| world.faults.latency_ppm == 0 && world.faults.disk_quota_bytes.is_none()));
        assert!(worlds.iter().all(|world| world.faults.keying == FaultKeying::OffsetSyncEpoch && !world.buggify));
        // The largest ppm of each kind, as the redb target had them before the port.
        let maxima = [(FaultKind::FsyncError, 3_000), (FaultKind::ShortWrite, 20_000), (FaultKind::LatentSector, 300)];
        assert!(maxima.iter().all(|maximum| beyond_menu().kinds.contains(maximum)));
        assert_eq!(beyond_menu().kinds.len(), 7, "{:?}", beyond_menu().kinds);
        for (kind, ppm_max) in beyond_menu().kinds {
            assert!(worlds.iter().all(|world| world.faults.ppm(kind) <= ppm_max), "{} above its maximum", kind.name());
        }
    }
}
