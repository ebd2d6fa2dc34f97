//! The transaction target's own configuration: how many clients, the key space, the shape of transactions, the
//! mix of its own operations, and the engine's tuning (the kit's [`LsmTuning`]). Drawn once per seed from its `"txn"` stream, stored in the
//! schedule, simplified by the shrinker. World steps (crashes, faults, reopens, background tasks) and their
//! weights are the framework's ([`holdfast::WorldConfig`]).

use engine::{Options, SyncMode};
use holdfast::env::DeterministicRng;
use holdfast::kit::{LsmTuning, smaller_u32, weight_or_off};
use serde::{Deserialize, Serialize};

/// The fewest clients a generated run has.
pub const CLIENTS_MIN: u32 = 2;
/// The most clients a generated run has.
pub const CLIENTS_MAX: u32 = 6;
/// The smallest generated key space.
pub const KEY_COUNT_MIN: u32 = 4;
/// The largest generated key space.
pub const KEY_COUNT_MAX: u32 = 32;
/// One in parts per million.
const PPM_MAX: u32 = 1_000_000;
/// The share of seeds that run the engine in `SyncMode::NoSync` (ADR-0205): a commit is visible at once and
/// durable at the next sync (a flush, a close, a recovery), so a crash may take back what clients already read.
pub const UNSYNCED_ON_PPM: u32 = 250_000;

/// Weights of the operations inside a transaction (0 turns one off; a read-only transaction always reads).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpWeights {
    pub get: u64,
    pub put: u64,
    pub delete: u64,
    pub scan: u64,
}

/// Weights of the target's own steps: a client's next move, a flush, a compaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepWeights {
    pub client: u64,
    pub flush: u64,
    pub compact: u64,
}

impl StepWeights {
    /// The weights in a fixed order, for [`DeterministicRng::weighted`].
    pub fn as_array(&self) -> [u64; 3] {
        [self.client, self.flush, self.compact]
    }
}

/// Small thresholds and blocks, so that a few dozen keys still flush, split blocks and compact.
fn draw_tuning(rng: &mut DeterministicRng) -> LsmTuning {
    let pick = |rng: &mut DeterministicRng, choices: &[u64]| choices[rng.index(choices.len())];
    let cached = rng.chance_ppm(700_000);
    LsmTuning {
        flush_threshold_bytes: pick(rng, &[1024, 4096, 16 * 1024, 64 * 1024]),
        block_size_bytes: pick(rng, &[256, 512, 1024, 4096]),
        block_cache_bytes: if cached { pick(rng, &[16 * 1024, 64 * 1024, 512 * 1024]) } else { 0 },
        l0_compaction_trigger: rng.range_inclusive(2, 8),
        level_size_ratio: rng.range_inclusive(2, 10),
        bloom_bits_per_key: u32::try_from(rng.range_inclusive(1, 16)).expect("fits"),
    }
}

/// The engine options of `tuning`, always `SyncMode::Sync` (an acknowledged commit is durable).
pub fn engine_options(tuning: &LsmTuning) -> Options {
    let base = Options::default().with_flush_threshold_bytes(tuning.flush_threshold_bytes.max(1));
    let size = |bytes: u64| usize::try_from(bytes).unwrap_or(usize::MAX);
    Options {
        block_size_bytes: size(tuning.block_size_bytes),
        bloom_bits_per_key: tuning.bloom_bits_per_key,
        level_size_ratio: tuning.level_size_ratio,
        l0_compaction_trigger: size(tuning.l0_compaction_trigger),
        block_cache_bytes: size(tuning.block_cache_bytes),
        sync_mode: SyncMode::Sync,
        ..base
    }
}

/// The per-seed shape of the transaction workload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnConfig {
    pub clients: u32,
    /// Transactions use keys `0..key_count`.
    pub key_count: u32,
    /// The chance a transaction is read-only.
    pub read_only_ppm: u32,
    /// The chance a transaction is long-lived (20..=80 operations: it stays open across flushes and
    /// compactions).
    pub long_ppm: u32,
    /// Ordinary transactions do `1..=ops_max` operations.
    pub ops_max: u32,
    pub rollback_ppm: u32,
    /// The chance a client with a submitted commit waits for it when chosen (else another client moves).
    pub ack_ppm: u32,
    /// A scan covers `1..=scan_keys_max` keys.
    pub scan_keys_max: u32,
    /// Values are `8..=8 + value_len_max` bytes.
    pub value_len_max: u32,
    pub op_weights: OpWeights,
    pub step_weights: StepWeights,
    /// The engine's tuning ([`engine_options`]).
    pub tuning: LsmTuning,
    /// `SyncMode::NoSync` (ADR-0205), drawn from its own `txn.sync` stream; absent from a schedule when false, so
    /// schedules written before it replay synced.
    #[serde(default, skip_serializing_if = "is_false")]
    pub unsynced: bool,
}

fn is_false(flag: &bool) -> bool {
    !*flag
}

impl TxnConfig {
    /// The configuration of `seed`: a pure function of its `"txn"` stream.
    pub fn from_seed(seed: u64) -> Self {
        let mut rng = DeterministicRng::stream(seed, "txn");
        let clients = u32::try_from(rng.range_inclusive(u64::from(CLIENTS_MIN), u64::from(CLIENTS_MAX))).expect("fits");
        let key_count = match rng.weighted(&[40, 35, 25]) {
            0 => rng.range_inclusive(u64::from(KEY_COUNT_MIN), 8),
            1 => rng.range_inclusive(9, 16),
            _ => rng.range_inclusive(17, u64::from(KEY_COUNT_MAX)),
        };
        let key_count = u32::try_from(key_count).expect("fits");
        let mut below = |low: u64, high: u64| u32::try_from(rng.range_inclusive(low, high)).expect("fits");
        let (read_only_ppm, long_ppm, ops_max) = (below(50_000, 400_000), below(30_000, 250_000), below(2, 8));
        let (rollback_ppm, ack_ppm) = (below(0, 80_000), below(200_000, 1_000_000));
        let scan_keys_max = below(1, u64::from(key_count));
        let value_len_max = [0, 8, 64, 256][rng.index(4)];
        let op_weights = OpWeights {
            get: rng.range_inclusive(10, 40),
            put: rng.range_inclusive(10, 40),
            delete: rng.range_inclusive(0, 10),
            scan: weight_or_off(&mut rng, 200_000, 2, 15),
        };
        let flush = rng.range_inclusive(1, 4);
        let compact = weight_or_off(&mut rng, 100_000, 1, 4);
        let config = Self {
            clients,
            key_count,
            read_only_ppm,
            long_ppm,
            ops_max,
            rollback_ppm,
            ack_ppm,
            scan_keys_max,
            value_len_max,
            op_weights,
            step_weights: StepWeights { client: 100, flush, compact },
            tuning: draw_tuning(&mut rng),
            unsynced: DeterministicRng::stream(seed, "txn.sync").chance_ppm(UNSYNCED_ON_PPM),
        };
        config.validate().expect("the txn target generated an invalid configuration");
        config
    }

    /// Check a configuration read from a file.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("clients", u64::from(self.clients)),
            ("key_count", u64::from(self.key_count)),
            ("ops_max", u64::from(self.ops_max)),
            ("scan_keys_max", u64::from(self.scan_keys_max)),
            ("step_weights.client", self.step_weights.client),
            ("tuning.flush_threshold_bytes", self.tuning.flush_threshold_bytes),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(format!("{name} must be positive"));
        }
        let ppms = [self.read_only_ppm, self.long_ppm, self.rollback_ppm, self.ack_ppm];
        if ppms.iter().any(|&ppm| ppm > PPM_MAX) {
            return Err(format!("a probability is above {PPM_MAX} ppm: {ppms:?}"));
        }
        let w = &self.op_weights;
        if w.get + w.put + w.delete + w.scan == 0 {
            return Err("op_weights: every weight is zero".into());
        }
        engine_options(&self.tuning).validate().map_err(|error| format!("tuning: {error}"))
    }

    /// The engine options of this run: [`engine_options`], unsynced when drawn so.
    pub fn options(&self) -> Options {
        let options = engine_options(&self.tuning);
        if self.unsynced { options.with_sync_mode(SyncMode::NoSync) } else { options }
    }

    /// Simpler configurations for the shrinker: a smaller key space (fewer keys to verify), no block cache,
    /// synced commits.
    pub fn simpler(&self) -> Vec<Self> {
        let mut out: Vec<Self> =
            smaller_u32(self.key_count, 1).into_iter().map(|key_count| Self { key_count, ..self.clone() }).collect();
        if self.unsynced {
            out.push(Self { unsynced: false, ..self.clone() });
        }
        let uncached = LsmTuning { block_cache_bytes: 0, ..self.tuning.clone() };
        out.push(Self { tuning: uncached, ..self.clone() });
        out.retain(|candidate| candidate != self && candidate.validate().is_ok());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_are_pure_valid_varied_and_in_range() {
        let configs: Vec<TxnConfig> = (0..60).map(TxnConfig::from_seed).collect();
        for (seed, config) in configs.iter().enumerate() {
            assert_eq!(config, &TxnConfig::from_seed(seed as u64), "seed {seed} is not pure");
            assert!((CLIENTS_MIN..=CLIENTS_MAX).contains(&config.clients));
            assert!((KEY_COUNT_MIN..=KEY_COUNT_MAX).contains(&config.key_count));
            assert!(config.scan_keys_max <= config.key_count);
            assert_eq!(config.validate(), Ok(()));
            for simpler in config.simpler() {
                assert!(simpler.validate().is_ok() && &simpler != config);
            }
        }
        assert!(configs.iter().any(|c| c.op_weights.scan == 0) && configs.iter().any(|c| c.op_weights.scan > 0));
        assert!(configs.iter().any(|c| c.tuning.block_cache_bytes == 0));
        assert!(configs.iter().any(|c| c.key_count <= 8) && configs.iter().any(|c| c.key_count > 16));
    }

    #[test]
    fn configs_round_trip_and_bad_ones_are_refused() {
        let config = TxnConfig::from_seed(3);
        let json = serde_json::to_string(&config).expect("serializes");
        assert_eq!(serde_json::from_str::<TxnConfig>(&json).expect("parses"), config);
        assert!(TxnConfig { clients: 0, ..config.clone() }.validate().is_err());
        assert!(TxnConfig { ack_ppm: 2_000_000, ..config.clone() }.validate().is_err());
        let tuning = LsmTuning { level_size_ratio: 1, ..config.tuning.clone() };
        assert!(TxnConfig { tuning, ..config.clone() }.validate().unwrap_err().contains("level_size_ratio"));
        let options = engine_options(&config.tuning);
        assert_eq!(options.sync_mode, SyncMode::Sync);
        assert_eq!(TxnConfig { unsynced: true, ..config.clone() }.options().sync_mode, SyncMode::NoSync);
        assert_eq!(options.flush_threshold_bytes, config.tuning.flush_threshold_bytes);
    }
}
