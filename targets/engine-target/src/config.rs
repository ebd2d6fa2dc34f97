//! The engine target's own configuration: the workload, the operation mix and the engine's tuning, drawn from
//! the seed's `"engine"` stream, stored in the schedule, and simplified by the shrinker.

use engine::{Options, SyncMode};
use holdfast::env::DeterministicRng;
use holdfast::kit::{Workload, smaller};
use serde::{Deserialize, Serialize};

/// The engine's tuning knobs (the framework kit's LSM tuning).
pub use holdfast::kit::LsmTuning as TuningConfig;

/// The largest key space a run uses.
pub const KEY_COUNT_MAX: u32 = 2000;

/// The share of seeds whose workload reaches the edges of the API (ADR-0071, ADR-0072, ADR-0073, ADR-0074, ADR-0075, ADR-0076, ADR-0077).
pub const ROBUST_ON_PPM: u32 = 200_000;

/// The share of seeds that run the engine in `SyncMode::NoSync` (ADR-0203): an acknowledged write is durable
/// only once the log is synced (a seal, a flush, a close), so a crash may lose it.
pub const UNSYNCED_ON_PPM: u32 = 250_000;

/// Integer weights of each kind of operation (0 turns a kind off).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpWeights {
    pub put: u64,
    pub delete: u64,
    pub get: u64,
    pub scan: u64,
    pub flush: u64,
    pub compact: u64,
    /// Keys of 0, 1, the run's key limit and one more bytes (ADR-0071 to ADR-0077, ADR-0099; absent from a schedule
    /// when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub odd_key: u64,
    /// Transactions of up to five values at the run's value limit: near and over its record limit (ADR-0099).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub big_txn: u64,
    /// Read-only transactions held across later steps, and their release.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hold_reader: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub release_reader: u64,
    /// `close` with a commit pending and handles held, then every call checked.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub close_racing: u64,
}

fn is_zero(weight: &u64) -> bool {
    *weight == 0
}

impl OpWeights {
    /// The weights in a fixed order, for [`DeterministicRng::weighted`]: the six storage operations, then the
    /// edge-of-the-API ones (zero in most seeds, so those draw exactly as before they existed).
    pub fn as_array(&self) -> [u64; 11] {
        [
            self.put,
            self.delete,
            self.get,
            self.scan,
            self.flush,
            self.compact,
            self.odd_key,
            self.big_txn,
            self.hold_reader,
            self.release_reader,
            self.close_racing,
        ]
    }
}

/// Everything the engine target draws per seed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineConfig {
    pub workload: Workload,
    pub weights: OpWeights,
    pub tuning: TuningConfig,
    /// `Options::with_tracked_transactions_max` when set (small: the conflict tracker's bound is reached within a
    /// run; absent from a schedule when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracked_transactions_max: Option<u64>,
    /// The engine's size limits (ADR-0099): drawn small, so the operations that probe them cost kilobytes.
    /// Absent from schedules written before ADR-0099: those run under the engine's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsConfig>,
    /// `SyncMode::NoSync` (ADR-0203), drawn from its own stream. Absent from a schedule when false: schedules
    /// written before it run synced, as they did.
    #[serde(default, skip_serializing_if = "is_false")]
    pub unsynced: bool,
}

fn is_false(flag: &bool) -> bool {
    !*flag
}

/// The engine's size limits a run uses (`engine::Options` of the same names, ADR-0099).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitsConfig {
    pub key_size_bytes_max: u64,
    pub value_size_bytes_max: u64,
    pub record_payload_bytes_max: u64,
}

/// The largest key limit a seed draws (the workload's own keys are 7 bytes).
pub const KEY_LIMIT_BYTES_MAX: u64 = 4096;
/// The smallest key limit a seed draws.
pub const KEY_LIMIT_BYTES_MIN: u64 = 64;
/// The smallest value limit a seed draws (it is also at least the workload's largest value).
pub const VALUE_LIMIT_BYTES_MIN: u64 = 4096;

impl LimitsConfig {
    /// The engine's defaults: the format's limits.
    pub fn engine_defaults() -> Self {
        let options = Options::default();
        Self {
            key_size_bytes_max: options.key_size_bytes_max as u64,
            value_size_bytes_max: options.value_size_bytes_max as u64,
            record_payload_bytes_max: options.record_payload_bytes_max as u64,
        }
    }

    /// Small limits for a run of `workload`: a key limit of [`KEY_LIMIT_BYTES_MIN`]..=[`KEY_LIMIT_BYTES_MAX`],
    /// a value limit at least the workload's largest value (so its ordinary writes are never refused), and a
    /// record limit from one write of the largest key and value to four largest values (so a big transaction of
    /// four or five values is always over it).
    pub fn draw(rng: &mut DeterministicRng, workload: &Workload) -> Self {
        let key_size_bytes_max = rng.range_inclusive(KEY_LIMIT_BYTES_MIN, KEY_LIMIT_BYTES_MAX);
        let largest = u64::from(workload.value_size_bytes_max.max(workload.large_value_size_bytes_max));
        let value_size_bytes_max = largest.max(VALUE_LIMIT_BYTES_MIN) + rng.below(1024);
        let single = Self { key_size_bytes_max, value_size_bytes_max, record_payload_bytes_max: 0 }.single_write();
        let record_payload_bytes_max = rng.range_inclusive(single, 4 * value_size_bytes_max);
        Self { key_size_bytes_max, value_size_bytes_max, record_payload_bytes_max }
    }

    /// The least record limit the engine accepts with these key and value limits.
    fn single_write(&self) -> u64 {
        let options = Options::default()
            .with_key_size_bytes_max(usize::try_from(self.key_size_bytes_max).unwrap_or(usize::MAX))
            .with_value_size_bytes_max(usize::try_from(self.value_size_bytes_max).unwrap_or(usize::MAX));
        options.single_write_payload_bytes() as u64
    }

    /// These limits on `options`.
    pub fn apply(&self, options: Options) -> Options {
        let bytes = |limit: u64| usize::try_from(limit).unwrap_or(usize::MAX);
        options
            .with_key_size_bytes_max(bytes(self.key_size_bytes_max))
            .with_value_size_bytes_max(bytes(self.value_size_bytes_max))
            .with_record_payload_bytes_max(bytes(self.record_payload_bytes_max))
    }
}

impl EngineConfig {
    /// The configuration of `seed`: a pure function of its `"engine"` stream.
    pub fn from_seed(seed: u64) -> Self {
        let mut rng = DeterministicRng::stream(seed, "engine");
        let workload = Workload::draw(&mut rng, KEY_COUNT_MAX);
        let mut on = |max: u64, off_ppm: u32| if rng.chance_ppm(off_ppm) { 0 } else { rng.range_inclusive(1, max) };
        let weights = OpWeights {
            put: on(100, 0),
            delete: on(40, 200_000),
            get: on(100, 100_000),
            scan: on(20, 300_000),
            flush: on(5, 300_000),
            compact: on(3, 400_000),
            ..OpWeights::default()
        };
        let tuning = TuningConfig {
            // 4 KiB .. 256 KiB, by powers of two: flushes and compactions really happen within a run.
            flush_threshold_bytes: 4096 << rng.below(7),
            block_size_bytes: 256 << rng.below(5),
            bloom_bits_per_key: u32::try_from(rng.range_inclusive(1, 16)).expect("fits"),
            level_size_ratio: rng.range_inclusive(2, 10),
            l0_compaction_trigger: rng.range_inclusive(2, 8),
            block_cache_bytes: if rng.chance_ppm(300_000) { 0 } else { (16 * 1024) << rng.below(6) },
        };
        let limits = Some(LimitsConfig::draw(&mut DeterministicRng::stream(seed, "engine.limits"), &workload));
        let unsynced = DeterministicRng::stream(seed, "engine.sync").chance_ppm(UNSYNCED_ON_PPM);
        let mut config = Self { workload, weights, tuning, tracked_transactions_max: None, limits, unsynced };
        config.draw_robust(seed);
        config.validate().expect("the engine target generated an invalid configuration");
        config
    }

    /// The edge-of-the-API knobs, from their own stream (ADR-0071, ADR-0072, ADR-0073, ADR-0074, ADR-0075, ADR-0076, ADR-0077): on in [`ROBUST_ON_PPM`] of seeds, each kind
    /// then at a low weight; the tracker bound small in some of those.
    fn draw_robust(&mut self, seed: u64) {
        let mut rng = DeterministicRng::stream(seed, "engine.robust");
        if !rng.chance_ppm(ROBUST_ON_PPM) {
            return;
        }
        let mut on = |max: u64, off_ppm: u32| if rng.chance_ppm(off_ppm) { 0 } else { rng.range_inclusive(1, max) };
        self.weights.odd_key = on(2, 500_000);
        self.weights.big_txn = on(1, 700_000);
        self.weights.hold_reader = on(3, 400_000);
        self.weights.release_reader = on(1, 500_000);
        self.weights.close_racing = on(2, 500_000);
        if self.weights.hold_reader > 0 && rng.chance_ppm(500_000) {
            let min = engine::TRACKED_TRANSACTIONS_MIN as u64;
            self.tracked_transactions_max = Some(rng.range_inclusive(min, 8 * min));
        }
    }

    /// Check a configuration read from a file.
    pub fn validate(&self) -> Result<(), String> {
        self.workload.validate()?;
        if self.weights.put == 0 {
            return Err("weights.put must be positive (every run writes)".into());
        }
        if self.tuning.flush_threshold_bytes == 0 {
            return Err("tuning.flush_threshold_bytes must be positive".into());
        }
        if let Some(max) = self.tracked_transactions_max
            && !(engine::TRACKED_TRANSACTIONS_MIN as u64..=engine::ssi::TRACKED_TRANSACTIONS_MAX as u64).contains(&max)
        {
            return Err(format!("tracked_transactions_max {max} out of range"));
        }
        let limits = self.limits();
        let w = &self.workload;
        if u64::from(w.value_size_bytes_max.max(w.large_value_size_bytes_max)) > limits.value_size_bytes_max {
            return Err(format!(
                "limits.value_size_bytes_max {} below the workload's values",
                limits.value_size_bytes_max
            ));
        }
        self.options().validate().map_err(|error| error.to_string())
    }

    /// The size limits the run uses: the drawn ones, else the engine's defaults.
    pub fn limits(&self) -> LimitsConfig {
        self.limits.unwrap_or_else(LimitsConfig::engine_defaults)
    }

    /// Engine options: `SyncMode::Sync`, or `SyncMode::NoSync` when `unsynced` (the model then keeps what a crash
    /// may bring back, ADR-0203).
    pub fn options(&self) -> Options {
        let tuning = &self.tuning;
        let options = Options::default()
            .with_flush_threshold_bytes(tuning.flush_threshold_bytes)
            .with_block_size_bytes(usize::try_from(tuning.block_size_bytes).unwrap_or(4096))
            .with_bloom_bits_per_key(tuning.bloom_bits_per_key)
            .with_level_size_ratio(tuning.level_size_ratio.max(2))
            .with_l0_compaction_trigger(usize::try_from(tuning.l0_compaction_trigger).unwrap_or(4).max(1))
            .with_block_cache_bytes(usize::try_from(tuning.block_cache_bytes).unwrap_or(0))
            .with_sync_mode(if self.unsynced { SyncMode::NoSync } else { SyncMode::Sync })
            .with_tracked_transactions_max(
                self.tracked_transactions_max.map_or(engine::ssi::TRACKED_TRANSACTIONS_MAX, |max| {
                    usize::try_from(max).unwrap_or(engine::ssi::TRACKED_TRANSACTIONS_MAX)
                }),
            );
        self.limits().apply(options)
    }

    /// Simpler configurations for the shrinker: a simpler workload, no block cache, the engine's default limits, a
    /// lower level-0 trigger.
    pub fn simpler(&self) -> Vec<Self> {
        let mut out: Vec<Self> =
            self.workload.simpler().into_iter().map(|workload| Self { workload, ..self.clone() }).collect();
        if self.tuning.block_cache_bytes > 0 {
            let mut copy = self.clone();
            copy.tuning.block_cache_bytes = 0;
            out.push(copy);
        }
        if self.unsynced {
            // Synced: a crash then loses no acknowledged write, so fewer outcomes to reason about.
            out.push(Self { unsynced: false, ..self.clone() });
        }
        if self.limits.is_some() {
            // The engine's defaults: no drawn limit in the way of a merged put (`ops::rewrite`).
            out.push(Self { limits: None, ..self.clone() });
        }
        for l0 in smaller(self.tuning.l0_compaction_trigger, 2) {
            let mut copy = self.clone();
            copy.tuning.l0_compaction_trigger = l0;
            out.push(copy);
        }
        out.retain(|candidate| candidate != self && candidate.validate().is_ok());
        out
    }
}

impl std::fmt::Display for EngineConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w = &self.workload;
        let o = &self.weights;
        let t = &self.tuning;
        write!(
            f,
            "keys={} dist={:?} value_max={}B large={}ppm/{}B scan_max={}; put={} del={} get={} scan={} flush={} \
             compact={}; flush_threshold={}B block={}B bloom={}b/key ratio={} l0_trigger={} cache={}B",
            w.key_count,
            w.distribution,
            w.value_size_bytes_max,
            w.large_value_ppm,
            w.large_value_size_bytes_max,
            w.scan_keys_max,
            o.put,
            o.delete,
            o.get,
            o.scan,
            o.flush,
            o.compact,
            t.flush_threshold_bytes,
            t.block_size_bytes,
            t.bloom_bits_per_key,
            t.level_size_ratio,
            t.l0_compaction_trigger,
            t.block_cache_bytes
        )?;
        if self.unsynced { write!(f, " unsynced") } else { Ok(()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_are_pure_varied_and_simplify_to_valid_configs() {
        assert_eq!(EngineConfig::from_seed(5), EngineConfig::from_seed(5));
        let configs: Vec<EngineConfig> = (0..50).map(EngineConfig::from_seed).collect();
        assert!(configs.iter().any(|config| config.workload.key_count <= 8), "no tiny key space in 50 seeds");
        assert!(configs.iter().any(|config| config.weights.scan == 0) && configs.iter().any(|c| c.weights.scan > 0));
        for config in &configs {
            for simpler in config.simpler() {
                assert!(simpler.validate().is_ok());
                assert_ne!(&simpler, config);
            }
        }
    }

    #[test]
    fn drawn_limits_are_small_valid_and_keep_big_transactions_over_the_record_limit() {
        for seed in 0..200 {
            let config = EngineConfig::from_seed(seed);
            let limits = config.limits.expect("every drawn seed has limits");
            let w = &config.workload;
            let largest = u64::from(w.value_size_bytes_max.max(w.large_value_size_bytes_max));
            assert!((KEY_LIMIT_BYTES_MIN..=KEY_LIMIT_BYTES_MAX).contains(&limits.key_size_bytes_max), "{limits:?}");
            assert!(limits.value_size_bytes_max >= largest, "seed {seed}: the workload's values are never refused");
            assert!(limits.value_size_bytes_max <= 128 * 1024, "seed {seed}: kilobytes, not MiB: {limits:?}");
            // Four values at the value limit are over the record limit: the oversize path is reached.
            assert!(4 * limits.value_size_bytes_max >= limits.record_payload_bytes_max, "{limits:?}");
            assert!(limits.record_payload_bytes_max >= limits.single_write(), "{limits:?}");
            assert_eq!(config.validate(), Ok(()));
        }
    }

    #[test]
    fn a_config_without_limits_runs_under_the_engine_defaults_and_bad_limits_are_refused() {
        let mut config = EngineConfig::from_seed(3);
        config.limits = None;
        let json = serde_json::to_string(&config).expect("serialises");
        assert!(!json.contains("limits"), "an absent field stays absent: {json}");
        let read: EngineConfig = serde_json::from_str(&json).expect("a schedule from before ADR-0099 loads");
        assert_eq!(read.limits(), LimitsConfig::engine_defaults());
        assert_eq!(read.options().record_payload_bytes_max, engine::wal::RECORD_PAYLOAD_BYTES_MAX);
        let mut small = EngineConfig::from_seed(3);
        let limits = small.limits.as_mut().expect("drawn");
        limits.value_size_bytes_max = 1;
        assert!(small.validate().is_err(), "a value limit below the workload's values is refused");
        let mut zero = EngineConfig::from_seed(3);
        zero.limits.as_mut().expect("drawn").record_payload_bytes_max = 0;
        assert!(zero.validate().expect_err("a record limit of 0").contains("record_payload_bytes_max"));
    }
}
