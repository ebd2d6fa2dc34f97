//! The redb target's per-seed configuration: the fault profile applied to the world (ADR-0038), and a plan of
//! step weights and redb settings drawn from the seed's `"redb"` stream.

use std::fmt;

use env::{DeterministicRng, FaultConfig, FaultKeying};
use serde::{Deserialize, Serialize};

use crate::config::{SwarmConfig, set_ppm};

/// The largest key space the redb target uses (every verification reads it all).
pub const KEY_COUNT_MAX: u32 = 500;
/// The most operations one write transaction carries.
pub const TRANSACTION_OPS_MAX: u64 = 24;

/// Which faults the world may inject into redb's file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultProfile {
    /// Only what redb's `docs/design.md` assumes of the media: crashes that keep, drop or tear (old-or-new bytes
    /// per sector, nothing outside the written range) the writes since the last `fdatasync`. A failure here is a
    /// finding.
    Assumed,
    /// Beyond those assumptions: torn sectors that turn to garbage (outside the written range too), fsync, write
    /// and read errors, short writes, bit flips on read and at rest, latent sectors, misdirected writes. Failures
    /// here characterise redb; they are not bugs.
    Beyond,
}

impl FaultProfile {
    /// The profile's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            FaultProfile::Assumed => "assumed",
            FaultProfile::Beyond => "beyond",
        }
    }

    /// Parse a command-line name.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "assumed" => Ok(FaultProfile::Assumed),
            "beyond" => Ok(FaultProfile::Beyond),
            other => Err(format!("unknown fault profile {other:?} (assumed, beyond)")),
        }
    }
}

impl fmt::Display for FaultProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Probabilistic faults of the `beyond` profile, with the largest ppm each may get.
const BEYOND_FAULTS_PPM_MAX: [(env::FaultKind, u32); 7] = [
    (env::FaultKind::FsyncError, 3_000),
    (env::FaultKind::WriteError, 3_000),
    (env::FaultKind::ShortWrite, 20_000),
    (env::FaultKind::ReadError, 3_000),
    (env::FaultKind::ReadCorruption, 3_000),
    (env::FaultKind::LatentSector, 300),
    (env::FaultKind::MisdirectedWrite, 300),
];

/// The swarm configuration of `seed` for the redb target under `profile`: the seed's workload (key space capped
/// at [`KEY_COUNT_MAX`]), and a fault configuration keyed by (file, offset, sync epoch) (ADR-0039).
pub fn swarm_config(seed: u64, profile: FaultProfile) -> SwarmConfig {
    let mut config = SwarmConfig::from_seed(seed);
    config.workload.key_count = config.workload.key_count.min(KEY_COUNT_MAX);
    let mut rng = DeterministicRng::stream(seed, "redb-faults");
    let mut faults = FaultConfig {
        keying: FaultKeying::OffsetSyncEpoch,
        crash_write_kept_ppm: config.faults.crash_write_kept_ppm,
        crash_metadata_kept_ppm: config.faults.crash_metadata_kept_ppm,
        ..FaultConfig::none()
    };
    if profile == FaultProfile::Beyond {
        for (kind, ppm_max) in BEYOND_FAULTS_PPM_MAX {
            if rng.chance_ppm(500_000) {
                let ppm = u32::try_from(rng.range_inclusive(1, u64::from(ppm_max))).expect("fits");
                set_ppm(&mut faults, kind, ppm);
            }
        }
        if rng.chance_ppm(500_000) {
            faults.crash_torn_garbage_ppm = u32::try_from(rng.range_inclusive(1, 1_000_000)).expect("fits");
        }
    }
    config.faults = faults;
    // redb reads no clock and has no BUGGIFY sites: nothing to turn on.
    config.buggify = false;
    config.fault_profile = Some(profile.name().to_string());
    config.validate().expect("redb swarm configuration is valid");
    config
}

/// The profile a configuration was made for (`assumed` when it names none).
pub fn profile_of(config: &SwarmConfig) -> FaultProfile {
    config.fault_profile.as_deref().and_then(|name| FaultProfile::parse(name).ok()).unwrap_or(FaultProfile::Assumed)
}

/// Step weights and redb settings of one seed: a pure function of the seed and its configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedbPlan {
    /// Write transactions carry `1..=ops_max` operations.
    pub ops_max: u64,
    /// The chance an operation of a write transaction is a remove (else an insert).
    pub remove_ppm: u32,
    /// The chance a write transaction is aborted instead of committed.
    pub abort_ppm: u32,
    /// Read steps get `1..=read_keys_max` keys.
    pub read_keys_max: u64,
    /// redb's 2-phase commit (`set_two_phase_commit`) instead of 1-phase + checksum.
    pub two_phase_commit: bool,
    /// redb's quick repair (`set_quick_repair`): allocator state saved with every commit.
    pub quick_repair: bool,
    /// redb's page cache size.
    pub cache_size_bytes: u64,
    /// Step weights: write, read, range, snapshot, snapshot read, compact, check integrity, reopen, crash,
    /// crash at IO, crash during recovery, fault.
    pub weights: [u64; 12],
}

impl RedbPlan {
    /// The plan of `seed` under `config`.
    pub fn derive(seed: u64, config: &SwarmConfig) -> Self {
        let mut rng = DeterministicRng::stream(seed, "redb");
        let on = |max: u64, off_ppm: u32, rng: &mut DeterministicRng| {
            if rng.chance_ppm(off_ppm) { 0 } else { rng.range_inclusive(1, max) }
        };
        let beyond = profile_of(config) == FaultProfile::Beyond;
        let weights = [
            rng.range_inclusive(20, 60),
            on(30, 100_000, &mut rng),
            on(10, 300_000, &mut rng),
            on(3, 400_000, &mut rng),
            on(10, 400_000, &mut rng),
            on(2, 500_000, &mut rng),
            on(2, 500_000, &mut rng),
            on(3, 300_000, &mut rng),
            on(4, 200_000, &mut rng),
            on(6, 200_000, &mut rng),
            on(2, 500_000, &mut rng),
            if beyond { on(3, 300_000, &mut rng) } else { 0 },
        ];
        let plan = Self {
            ops_max: rng.range_inclusive(1, TRANSACTION_OPS_MAX),
            remove_ppm: u32::try_from(rng.range_inclusive(0, 400_000)).expect("fits"),
            abort_ppm: u32::try_from(rng.range_inclusive(0, 150_000)).expect("fits"),
            read_keys_max: rng.range_inclusive(1, 16),
            two_phase_commit: rng.chance_ppm(500_000),
            quick_repair: rng.chance_ppm(500_000),
            cache_size_bytes: [0, 64 * 1024, 1024 * 1024, 16 * 1024 * 1024][rng.index(4)],
            weights,
        };
        assert!(plan.weights[0] > 0, "every plan writes");
        assert!(plan.ops_max >= 1 && plan.ops_max <= TRANSACTION_OPS_MAX);
        plan
    }
}

impl fmt::Display for RedbPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = &self.weights;
        write!(
            f,
            "redb: commit={} quick_repair={} cache={}B txn_ops<={} remove={}% abort={}% read_keys<={}\n\
             weights: write={} read={} range={} snapshot={} snapshot_read={} compact={} integrity={} reopen={} \
             crash={} crash_at_io={} crash_in_recovery={} fault={}",
            if self.two_phase_commit { "2pc" } else { "1pc+checksum" },
            self.quick_repair,
            self.cache_size_bytes,
            self.ops_max,
            self.remove_ppm / 10_000,
            self.abort_ppm / 10_000,
            self.read_keys_max,
            w[0],
            w[1],
            w[2],
            w[3],
            w[4],
            w[5],
            w[6],
            w[7],
            w[8],
            w[9],
            w[10],
            w[11]
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assumed_profile_injects_nothing_beyond_crashes() {
        for seed in 0..50 {
            let config = swarm_config(seed, FaultProfile::Assumed);
            assert!(config.faults.is_quiet(), "seed {seed}: {config}");
            assert_eq!(config.faults.keying, FaultKeying::OffsetSyncEpoch);
            assert_eq!(RedbPlan::derive(seed, &config).weights[11], 0, "no explicit faults under assumed");
            assert_eq!(profile_of(&config), FaultProfile::Assumed);
        }
    }

    #[test]
    fn beyond_profile_turns_faults_on_in_some_seeds() {
        let configs: Vec<SwarmConfig> = (0..50).map(|seed| swarm_config(seed, FaultProfile::Beyond)).collect();
        assert!(configs.iter().any(|config| config.faults.fsync_error_ppm > 0));
        assert!(configs.iter().any(|config| config.faults.crash_torn_garbage_ppm > 0));
        assert!(configs.iter().all(|config| profile_of(config) == FaultProfile::Beyond));
        assert_eq!(swarm_config(3, FaultProfile::Beyond), swarm_config(3, FaultProfile::Beyond));
        assert_eq!(FaultProfile::parse("beyond"), Ok(FaultProfile::Beyond));
        assert!(FaultProfile::parse("all").is_err());
    }
}
