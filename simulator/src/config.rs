//! The per-seed swarm configuration (TigerBeetle VOPR's `options_swarm`): every parameter of a run — operation mix,
//! key space, value sizes, engine tuning, fault probabilities, crash frequencies, BUGGIFY — derived from the seed's
//! `"swarm"` stream, so one seed explores one corner of the space and a swarm of seeds explores many.

use std::fmt;

use env::{DeterministicRng, FaultConfig, FaultKind};
use serde::{Deserialize, Serialize};

/// The largest key space a swarm run uses.
pub const KEY_COUNT_MAX: u32 = 2000;
/// The largest ordinary value a swarm run writes.
pub const VALUE_SIZE_BYTES_MAX: u32 = 512;
/// The largest "large" value a swarm run writes (rare).
pub const LARGE_VALUE_SIZE_BYTES_MAX: u32 = 64 * 1024;
/// The largest scan range, in keys.
pub const SCAN_KEYS_MAX: u32 = 64;
/// The largest `k` of a `CrashAtIo` step.
pub const CRASH_AT_IO_K_MAX: u64 = 64;
/// The largest `k` of a `CrashDuringRecovery` step.
pub const RECOVERY_CRASH_K_MAX: u64 = 40;

/// How keys are drawn from the key space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum KeyDistribution {
    /// Every key equally likely.
    Uniform,
    /// `hot_ppm` of draws go to the first `hot_keys` keys; the rest are uniform over the whole space.
    Hot { hot_keys: u32, hot_ppm: u32 },
}

/// What the workload looks like: key space, distribution, value sizes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadConfig {
    /// Keys are `0..key_count`, rendered as `k000042`.
    pub key_count: u32,
    pub distribution: KeyDistribution,
    /// Ordinary values are `0..=value_size_bytes_max` bytes.
    pub value_size_bytes_max: u32,
    /// The chance a value is "large" instead.
    pub large_value_ppm: u32,
    /// Large values are `0..=large_value_size_bytes_max` bytes.
    pub large_value_size_bytes_max: u32,
    /// A scan covers `1..=scan_keys_max` keys.
    pub scan_keys_max: u32,
}

impl WorkloadConfig {
    /// Draw a key by the distribution (integer arithmetic only).
    pub fn pick_key(&self, rng: &mut DeterministicRng) -> u32 {
        assert!(self.key_count > 0, "empty key space");
        let key = match self.distribution {
            KeyDistribution::Uniform => rng.below(u64::from(self.key_count)),
            KeyDistribution::Hot { hot_keys, hot_ppm } => {
                let hot_keys = hot_keys.clamp(1, self.key_count);
                if rng.chance_ppm(hot_ppm) {
                    rng.below(u64::from(hot_keys))
                } else {
                    rng.below(u64::from(self.key_count))
                }
            }
        };
        let key = u32::try_from(key).expect("key below a u32 bound");
        debug_assert!(key < self.key_count);
        key
    }

    /// Draw a value length.
    pub fn pick_value_len_bytes(&self, rng: &mut DeterministicRng) -> u32 {
        let max = if rng.chance_ppm(self.large_value_ppm) {
            self.large_value_size_bytes_max
        } else {
            self.value_size_bytes_max
        };
        let len = u32::try_from(rng.range_inclusive(0, u64::from(max))).expect("length fits");
        debug_assert!(len <= max);
        len
    }
}

/// Integer weights of each kind of step (0 turns a kind off).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpWeights {
    pub put: u64,
    pub delete: u64,
    pub get: u64,
    pub scan: u64,
    pub flush: u64,
    pub compact: u64,
    pub run_task: u64,
    pub reopen: u64,
    pub fault: u64,
    pub crash: u64,
    pub crash_at_io: u64,
    pub crash_during_recovery: u64,
}

impl OpWeights {
    /// The weights in a fixed order, for [`DeterministicRng::weighted`].
    pub fn as_array(&self) -> [u64; 12] {
        [
            self.put,
            self.delete,
            self.get,
            self.scan,
            self.flush,
            self.compact,
            self.run_task,
            self.reopen,
            self.fault,
            self.crash,
            self.crash_at_io,
            self.crash_during_recovery,
        ]
    }
}

/// Tuning of the system under test (the engine reads these; other targets may ignore them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TuningConfig {
    pub flush_threshold_bytes: u64,
    pub block_size_bytes: u64,
    pub bloom_bits_per_key: u32,
    pub level_size_ratio: u64,
    pub l0_compaction_trigger: u64,
    pub block_cache_bytes: u64,
}

/// Everything one seed's run is configured with. Derived from the seed by [`SwarmConfig::from_seed`], stored in
/// every [`crate::Schedule`], printed at the start of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwarmConfig {
    pub workload: WorkloadConfig,
    pub weights: OpWeights,
    pub tuning: TuningConfig,
    /// Probabilistic faults, disk quota, crash tearing odds, BUGGIFY odds, handed to `SimEnv`.
    pub faults: FaultConfig,
    /// BUGGIFY on for this run.
    pub buggify: bool,
    /// `CrashAtIo{k}` steps draw `k` from `1..=crash_at_io_k_max`.
    pub crash_at_io_k_max: u64,
    /// `CrashDuringRecovery{k}` steps draw `k` from `1..=recovery_crash_k_max`.
    pub recovery_crash_k_max: u64,
    /// The fault profile of a target that has profiles (the redb target: `assumed` or `beyond`, ADR-0038);
    /// `faults` was built from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_profile: Option<String>,
}

/// Probabilistic fault kinds a swarm may turn on, with the largest ppm each may get.
const SWARM_FAULTS: [(FaultKind, u32); 8] = [
    (FaultKind::FsyncError, 3_000),
    (FaultKind::WriteError, 3_000),
    (FaultKind::ShortWrite, 20_000),
    (FaultKind::ReadError, 3_000),
    (FaultKind::ReadCorruption, 3_000),
    (FaultKind::LatentSector, 300),
    (FaultKind::MisdirectedWrite, 300),
    (FaultKind::Latency, 50_000),
];

impl SwarmConfig {
    /// The configuration of `seed`: a pure function of the seed (its `"swarm"` stream).
    pub fn from_seed(seed: u64) -> Self {
        let mut rng = DeterministicRng::stream(seed, "swarm");
        let workload = swarm_workload(&mut rng);
        let weights = swarm_weights(&mut rng);
        let tuning = swarm_tuning(&mut rng);
        let buggify = rng.chance_ppm(500_000);
        let faults = swarm_faults(&mut rng, buggify);
        let config = Self {
            workload,
            weights,
            tuning,
            faults,
            buggify,
            crash_at_io_k_max: rng.range_inclusive(1, CRASH_AT_IO_K_MAX),
            recovery_crash_k_max: rng.range_inclusive(1, RECOVERY_CRASH_K_MAX),
            fault_profile: None,
        };
        config.validate().expect("swarm generated an invalid configuration");
        config
    }

    /// Check the configuration is usable (replayed schedules may have been edited by hand).
    pub fn validate(&self) -> Result<(), String> {
        if self.workload.key_count == 0 {
            return Err("workload.key_count must be at least 1".into());
        }
        if self.weights.as_array().iter().all(|&weight| weight == 0) {
            return Err("every op weight is zero".into());
        }
        if self.crash_at_io_k_max == 0 || self.recovery_crash_k_max == 0 {
            return Err("crash k ranges must be at least 1".into());
        }
        if self.tuning.flush_threshold_bytes == 0 {
            return Err("tuning.flush_threshold_bytes must be positive".into());
        }
        Ok(())
    }

    /// Probabilistic fault kinds this configuration turns on (ppm > 0, or a disk quota for `DiskFull`).
    pub fn enabled_fault_kinds(&self) -> Vec<FaultKind> {
        let mut kinds: Vec<FaultKind> =
            FaultKind::ALL.iter().copied().filter(|&kind| self.faults.ppm(kind) > 0).collect();
        if self.faults.disk_quota_bytes.is_some() {
            kinds.push(FaultKind::DiskFull);
        }
        kinds
    }

    /// The configuration with every probabilistic fault and BUGGIFY off (crash tearing odds kept).
    pub fn quiet(&self) -> Self {
        let mut quiet = self.clone();
        quiet.faults = healed_faults(&self.faults);
        quiet.buggify = false;
        quiet
    }
}

/// The fault configuration of the liveness phase: no probabilistic faults, no quota, no BUGGIFY, no garbage
/// sectors; the crash model (tearing odds) and the keying of decisions are kept.
pub fn healed_faults(faults: &FaultConfig) -> FaultConfig {
    FaultConfig {
        crash_write_kept_ppm: faults.crash_write_kept_ppm,
        crash_metadata_kept_ppm: faults.crash_metadata_kept_ppm,
        keying: faults.keying,
        ..FaultConfig::none()
    }
}

fn swarm_workload(rng: &mut DeterministicRng) -> WorkloadConfig {
    // Tiny key spaces force overwrites and deletes of live keys; large ones spread data over many tables.
    let key_count = match rng.weighted(&[15, 25, 35, 25]) {
        0 => rng.range_inclusive(1, 8),
        1 => rng.range_inclusive(9, 64),
        2 => rng.range_inclusive(65, 500),
        _ => rng.range_inclusive(501, u64::from(KEY_COUNT_MAX)),
    };
    let key_count = u32::try_from(key_count).expect("key count fits");
    let distribution = if rng.chance_ppm(500_000) {
        KeyDistribution::Uniform
    } else {
        let hot_keys = u32::try_from(rng.range_inclusive(1, u64::from(key_count.div_ceil(10)))).expect("fits");
        let hot_ppm = u32::try_from(rng.range_inclusive(500_000, 950_000)).expect("fits");
        KeyDistribution::Hot { hot_keys, hot_ppm }
    };
    let value_size_bytes_max = [0u32, 8, 64, 256, VALUE_SIZE_BYTES_MAX][rng.index(5)];
    let large_value_ppm =
        if rng.chance_ppm(300_000) { u32::try_from(rng.range_inclusive(1_000, 50_000)).expect("fits") } else { 0 };
    let large_value_size_bytes_max =
        u32::try_from(rng.range_inclusive(4096, u64::from(LARGE_VALUE_SIZE_BYTES_MAX))).expect("fits");
    let scan_keys_max = u32::try_from(rng.range_inclusive(1, u64::from(SCAN_KEYS_MAX))).expect("fits");
    WorkloadConfig {
        key_count,
        distribution,
        value_size_bytes_max,
        large_value_ppm,
        large_value_size_bytes_max,
        scan_keys_max,
    }
}

fn swarm_weights(rng: &mut DeterministicRng) -> OpWeights {
    let mut on = |max: u64, off_ppm: u32| if rng.chance_ppm(off_ppm) { 0 } else { rng.range_inclusive(1, max) };
    OpWeights {
        put: on(100, 0),
        delete: on(40, 200_000),
        get: on(100, 100_000),
        scan: on(20, 300_000),
        flush: on(5, 300_000),
        compact: on(3, 400_000),
        run_task: on(60, 100_000),
        reopen: on(2, 500_000),
        fault: on(3, 600_000),
        crash: on(3, 300_000),
        crash_at_io: on(5, 300_000),
        crash_during_recovery: on(2, 500_000),
    }
}

fn swarm_tuning(rng: &mut DeterministicRng) -> TuningConfig {
    TuningConfig {
        // 4 KiB .. 256 KiB, by powers of two: flushes and compactions really happen within a run.
        flush_threshold_bytes: 4096 << rng.below(7),
        block_size_bytes: 256 << rng.below(5),
        bloom_bits_per_key: u32::try_from(rng.range_inclusive(1, 16)).expect("fits"),
        level_size_ratio: rng.range_inclusive(2, 10),
        l0_compaction_trigger: rng.range_inclusive(2, 8),
        block_cache_bytes: if rng.chance_ppm(300_000) { 0 } else { (16 * 1024) << rng.below(6) },
    }
}

fn swarm_faults(rng: &mut DeterministicRng, buggify: bool) -> FaultConfig {
    let mut faults = FaultConfig::none();
    if rng.chance_ppm(400_000) {
        // Which kinds are on is itself chosen per seed.
        for (kind, ppm_max) in SWARM_FAULTS {
            if rng.chance_ppm(500_000) {
                let ppm = u32::try_from(rng.range_inclusive(1, u64::from(ppm_max))).expect("fits");
                set_ppm(&mut faults, kind, ppm);
            }
        }
        if rng.chance_ppm(300_000) {
            faults.disk_quota_bytes = Some(rng.range_inclusive(16 * 1024, 512 * 1024));
        }
    }
    faults.crash_write_kept_ppm = u32::try_from(rng.range_inclusive(0, 1_000_000)).expect("fits");
    faults.crash_metadata_kept_ppm = u32::try_from(rng.range_inclusive(0, 1_000_000)).expect("fits");
    if buggify {
        // FoundationDB: each site enabled once per run with p=0.25, then fires with p=0.25.
        faults.buggify_site_ppm = 250_000;
        faults.buggify_fire_ppm = 250_000;
    }
    faults
}

/// Set the probability of one probabilistic swarm fault kind.
pub(crate) fn set_ppm(faults: &mut FaultConfig, kind: FaultKind, ppm: u32) {
    match kind {
        FaultKind::FsyncError => faults.fsync_error_ppm = ppm,
        FaultKind::WriteError => faults.write_error_ppm = ppm,
        FaultKind::ShortWrite => faults.short_write_ppm = ppm,
        FaultKind::ReadError => faults.read_error_ppm = ppm,
        FaultKind::ReadCorruption => faults.read_corruption_ppm = ppm,
        FaultKind::LatentSector => faults.latent_sector_ppm = ppm,
        FaultKind::MisdirectedWrite => faults.misdirected_write_ppm = ppm,
        FaultKind::Latency => faults.latency_ppm = ppm,
        other => panic!("{} is not a swarm fault", other.name()),
    }
    assert_eq!(faults.ppm(kind), ppm, "set_ppm did not take");
}

impl fmt::Display for SwarmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = &self.workload;
        let distribution = match w.distribution {
            KeyDistribution::Uniform => "uniform".to_string(),
            KeyDistribution::Hot { hot_keys, hot_ppm } => format!("hot({hot_keys}@{}%)", hot_ppm / 10_000),
        };
        writeln!(
            f,
            "workload: keys={} dist={distribution} value_max={}B large={}ppm/{}B scan_max={}",
            w.key_count, w.value_size_bytes_max, w.large_value_ppm, w.large_value_size_bytes_max, w.scan_keys_max
        )?;
        let o = &self.weights;
        writeln!(
            f,
            "weights: put={} del={} get={} scan={} flush={} compact={} task={} reopen={} fault={} crash={} \
             crash_at_io={}(k<={}) crash_in_recovery={}(k<={})",
            o.put,
            o.delete,
            o.get,
            o.scan,
            o.flush,
            o.compact,
            o.run_task,
            o.reopen,
            o.fault,
            o.crash,
            o.crash_at_io,
            self.crash_at_io_k_max,
            o.crash_during_recovery,
            self.recovery_crash_k_max
        )?;
        let t = &self.tuning;
        writeln!(
            f,
            "tuning: flush_threshold={}B block={}B bloom={}b/key ratio={} l0_trigger={} cache={}B",
            t.flush_threshold_bytes,
            t.block_size_bytes,
            t.bloom_bits_per_key,
            t.level_size_ratio,
            t.l0_compaction_trigger,
            t.block_cache_bytes
        )?;
        let kinds: Vec<String> = self
            .enabled_fault_kinds()
            .iter()
            .map(|&kind| match kind {
                FaultKind::DiskFull => format!("disk_full@{}B", self.faults.disk_quota_bytes.unwrap_or(0)),
                kind => format!("{}={}ppm", kind.name(), self.faults.ppm(kind)),
            })
            .collect();
        let faults = if kinds.is_empty() { "none".to_string() } else { kinds.join(" ") };
        write!(
            f,
            "faults: {faults}; crash_kept write={}ppm meta={}ppm; buggify={}",
            self.faults.crash_write_kept_ppm,
            self.faults.crash_metadata_kept_ppm,
            if self.buggify { "on" } else { "off" }
        )?;
        if let Some(profile) = &self.fault_profile {
            write!(f, "; fault_profile={profile} keying={:?}", self.faults.keying)?;
        }
        Ok(())
    }
}
