//! Helpers most key-value targets want: values as data ([`ValueSpec`], whose bytes are a pure function of it),
//! rendered keys whose byte order is numeric order, value signatures, a seeded key-value workload shape, the
//! tuning knobs of an LSM tree as data ([`LsmTuning`]), weights drawn on or off ([`weight_or_off`]), "smaller
//! numbers" for shrinking, the per-key damage rule ([`DamageExcuses`], ADR-0101), and the per-key model of
//! acknowledged and in-flight writes a store is judged against ([`KeyModel`]), and which prefixes of the commits
//! acknowledged since a sync give what a crash kept ([`fit_prefixes`]).

mod damage;
mod key_model;
mod prefix;

use env::DeterministicRng;
use env::random::{hash_words, mix64};
use serde::{Deserialize, Serialize};

pub use self::damage::{DamageExcuses, FILES_REMEMBERED_MAX, KEYS_CLEARED_MAX};
pub use self::key_model::{IN_FLIGHT_PER_KEY_MAX, KeyModel};
pub use self::prefix::{KeyWrite, PrefixFit, fit_prefixes, mismatched_after};

/// A value, as a schedule step carries it: the bytes are a pure function of `(id, len)` ([`value_bytes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ValueSpec {
    pub id: u64,
    pub len: u32,
}

/// A value's name in a report (ADR-0171): `v17(33B)`, or, when more than one write made the same bytes
/// (`shared`: every empty value, short values whose bytes collide once shrinking cut their lengths), `a 0B value
/// (bytes several writes made)`, never one id that another write to another key may share.
pub fn value_name(spec: ValueSpec, shared: bool) -> String {
    if shared {
        format!("a {}B value (bytes several writes made)", spec.len)
    } else {
        format!("v{}({}B)", spec.id, spec.len)
    }
}

/// The bytes of value `spec`: a pure function of its id and length.
pub fn value_bytes(spec: ValueSpec) -> Vec<u8> {
    let len = spec.len as usize;
    let mut bytes = Vec::with_capacity(len);
    let mut word_index = 0u64;
    while bytes.len() < len {
        let word = mix64(spec.id ^ mix64(word_index.wrapping_add(0x9e37_79b9_7f4a_7c15))).to_le_bytes();
        let take = (len - bytes.len()).min(word.len());
        bytes.extend_from_slice(&word[..take]);
        word_index += 1;
    }
    assert_eq!(bytes.len(), len, "value_bytes produced the wrong length");
    bytes
}

/// The key bytes of key index `key`: `k` and at least six decimal digits (`k000042`), so byte order is numeric
/// order below a million.
pub fn key_bytes(key: u32) -> Vec<u8> {
    RenderedKey::new(key).as_bytes().to_vec()
}

/// The most bytes a rendered key has: `k` and the ten digits of `u32::MAX`.
const RENDERED_KEY_BYTES_MAX: usize = 11;

/// A rendered key ([`key_bytes`]) held inline, for a read that only borrows it: the verification renders a key
/// per key it checks, and an allocation per key was most of the rendering's cost (ADR-0141).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenderedKey {
    bytes: [u8; RENDERED_KEY_BYTES_MAX],
    len: u8,
}

impl RenderedKey {
    /// `key` rendered: `k` and at least six decimal digits.
    pub fn new(key: u32) -> Self {
        // `format!("k{key:06}")` without the formatter (it was a twentieth of an engine swarm's time, ADR-0114).
        let digits = key.checked_ilog10().map_or(1, |log| log + 1).max(6) as usize;
        let mut bytes = [b'0'; RENDERED_KEY_BYTES_MAX];
        bytes[0] = b'k';
        let mut rest = key;
        for byte in bytes[1..=digits].iter_mut().rev() {
            *byte = b'0' + u8::try_from(rest % 10).expect("a digit");
            rest /= 10;
        }
        debug_assert!(digits >= 6 && rest == 0);
        Self { bytes, len: u8::try_from(1 + digits).expect("at most eleven bytes") }
    }

    /// The rendered bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

pub fn parse_key(bytes: &[u8]) -> Option<u32> {
    let digits = bytes.strip_prefix(b"k")?;
    if digits.len() < 6 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // The rendering of a key is its digits, zero-padded to six: more than six digits never start with a zero.
    if digits.len() > 6 && digits[0] == b'0' {
        return None;
    }
    digits.iter().try_fold(0_u32, |key, &digit| key.checked_mul(10)?.checked_add(u32::from(digit - b'0')))
}

/// The signature of a value: a stable hash of its bytes.
pub type Sig = u64;

/// The signature of `bytes`: [`env::random::hash_words`], eight bytes a step (ADR-0100; a byte-at-a-time hash
/// made signing large values a third of a big seed's time).
pub fn sig_of(bytes: &[u8]) -> Sig {
    hash_words(bytes)
}

/// The largest ordinary value a workload writes.
pub const VALUE_SIZE_BYTES_MAX: u32 = 512;
/// The largest "large" value a workload writes (rare).
pub const LARGE_VALUE_SIZE_BYTES_MAX: u32 = 64 * 1024;
/// The largest scan range, in keys.
pub const SCAN_KEYS_MAX: u32 = 64;

/// How keys are drawn from the key space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum KeyDistribution {
    /// Every key equally likely.
    Uniform,
    /// `hot_ppm` of draws go to the first `hot_keys` keys; the rest are uniform over the whole space.
    Hot { hot_keys: u32, hot_ppm: u32 },
}

/// The shape of a key-value workload: key space, distribution, value sizes, scan widths.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    /// Keys are `0..key_count`, rendered by [`key_bytes`].
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

impl Workload {
    /// A workload drawn from `rng`, with at most `key_count_max` keys. Tiny key spaces force overwrites and
    /// deletes of live keys; large ones spread data over many files.
    pub fn draw(rng: &mut DeterministicRng, key_count_max: u32) -> Self {
        let key_count_max = u64::from(key_count_max.max(1));
        let key_count = match rng.weighted(&[15, 25, 35, 25]) {
            0 => rng.range_inclusive(1, 8),
            1 => rng.range_inclusive(9, 64),
            2 => rng.range_inclusive(65, 500),
            _ => rng.range_inclusive(501, 2000),
        };
        let key_count = u32::try_from(key_count.min(key_count_max)).expect("key count fits");
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
        Self {
            key_count,
            distribution,
            value_size_bytes_max,
            large_value_ppm,
            large_value_size_bytes_max,
            scan_keys_max,
        }
    }

    /// Check a workload read from a file.
    pub fn validate(&self) -> Result<(), String> {
        if self.key_count == 0 {
            return Err("workload.key_count must be at least 1".into());
        }
        Ok(())
    }

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

    /// Simpler workloads for the shrinker: fewer keys, no large values, shorter values.
    pub fn simpler(&self) -> Vec<Self> {
        let mut out: Vec<Self> =
            smaller_u32(self.key_count, 1).into_iter().map(|key_count| Self { key_count, ..self.clone() }).collect();
        if self.large_value_ppm > 0 {
            out.push(Self { large_value_ppm: 0, ..self.clone() });
        }
        if self.distribution != KeyDistribution::Uniform {
            out.push(Self { distribution: KeyDistribution::Uniform, ..self.clone() });
        }
        out
    }
}

/// The tuning knobs of an LSM-tree engine, as a target's configuration stores them (each target draws them its
/// own way and turns them into its engine's options).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LsmTuning {
    /// Flush the memtable to a table at this many bytes.
    pub flush_threshold_bytes: u64,
    pub block_size_bytes: u64,
    pub bloom_bits_per_key: u32,
    /// Each level is this many times larger than the one above.
    pub level_size_ratio: u64,
    /// Compact level 0 when it holds this many tables.
    pub l0_compaction_trigger: u64,
    /// 0: no block cache.
    pub block_cache_bytes: u64,
}

/// A weight for one kind of step or operation: 0 (off) with probability `off_ppm`, else uniform in `min..=max`.
/// Draws the coin first, then the weight, so a configuration drawn with it stays a pure function of the stream.
pub fn weight_or_off(rng: &mut DeterministicRng, off_ppm: u32, min: u64, max: u64) -> u64 {
    if rng.chance_ppm(off_ppm) { 0 } else { rng.range_inclusive(min, max) }
}

/// Smaller variants of a number, smallest first: `floor`, then half way, then one less. Never `n`.
pub fn smaller(n: u64, floor: u64) -> Vec<u64> {
    let mut out = Vec::new();
    if n <= floor {
        return out;
    }
    for candidate in [floor, floor + (n - floor) / 2, n - 1] {
        if candidate < n && !out.contains(&candidate) {
            out.push(candidate);
        }
    }
    debug_assert!(out.iter().all(|&c| c < n && c >= floor));
    out
}

/// [`smaller`] for `u32`.
pub fn smaller_u32(n: u32, floor: u32) -> Vec<u32> {
    smaller(u64::from(n), u64::from(floor)).into_iter().map(|c| u32::try_from(c).expect("below a u32")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_weight_is_off_at_the_given_odds_and_in_range_when_on() {
        let mut rng = DeterministicRng::stream(7, "weights");
        assert!((0..100).all(|_| weight_or_off(&mut rng, 1_000_000, 1, 5) == 0));
        let on: Vec<u64> = (0..1000).map(|_| weight_or_off(&mut rng, 0, 2, 15)).collect();
        assert!(on.iter().all(|&weight| (2..=15).contains(&weight)));
        assert!(on.contains(&2) && on.contains(&15), "both ends are drawn");
        let off = (0..10_000).filter(|_| weight_or_off(&mut rng, 300_000, 1, 3) == 0).count();
        assert!((2_500..3_500).contains(&off), "about 30% off: {off}");
    }

    #[test]
    fn keys_render_and_parse_back_in_numeric_byte_order() {
        for key in [0u32, 7, 999_999, 1_000_000, u32::MAX] {
            assert_eq!(parse_key(&key_bytes(key)), Some(key));
        }
        assert!(key_bytes(9) < key_bytes(10));
        assert_eq!(RenderedKey::new(u32::MAX).as_bytes(), b"k4294967295");
        let (zero, six_nines) = (RenderedKey::new(0), RenderedKey::new(999_999));
        assert_eq!((zero.as_bytes(), six_nines.as_bytes()), (&b"k000000"[..], &b"k999999"[..]));
        assert_eq!(parse_key(b"k00001"), None);
        assert_eq!(parse_key(b"k0000001"), None, "not the canonical rendering");
        assert_eq!(parse_key(b"x000001"), None);
        assert_eq!(parse_key(b"k4294967296"), None, "past u32");
        assert_eq!(parse_key(b"k00000a"), None);
    }

    proptest::proptest! {
        /// The formatter-free rendering and parse are exactly `format!("k{key:06}")` and its inverse (ADR-0114).
        #[test]
        fn keys_render_as_the_formatter_did(key: u32, digits in "[0-9]{0,11}") {
            proptest::prop_assert_eq!(key_bytes(key), format!("k{key:06}").into_bytes());
            proptest::prop_assert_eq!(RenderedKey::new(key).as_bytes().to_vec(), format!("k{key:06}").into_bytes());
            let text = format!("k{digits}");
            let reference = digits.parse::<u32>().ok().filter(|&key| format!("k{key:06}") == text);
            proptest::prop_assert_eq!(parse_key(text.as_bytes()), reference);
        }
    }

    #[test]
    fn values_are_pure_functions_of_their_spec() {
        let spec = ValueSpec { id: 3, len: 37 };
        assert_eq!(value_bytes(spec), value_bytes(spec));
        assert_eq!(value_bytes(spec).len(), 37);
        assert_ne!(sig_of(&value_bytes(spec)), sig_of(&value_bytes(ValueSpec { id: 4, len: 37 })));
    }

    #[test]
    fn smaller_numbers_are_smaller() {
        assert_eq!(smaller(10, 0), vec![0, 5, 9]);
        assert_eq!(smaller(1, 1), Vec::<u64>::new());
        assert_eq!(smaller(2, 1), vec![1]);
        assert_eq!(smaller(0, 0), Vec::<u64>::new());
    }

    #[test]
    fn workloads_respect_their_bounds() {
        for seed in 0..50 {
            let mut rng = DeterministicRng::stream(seed, "workload-test");
            let workload = Workload::draw(&mut rng, 500);
            assert!(workload.validate().is_ok() && workload.key_count <= 500);
            for _ in 0..20 {
                assert!(workload.pick_key(&mut rng) < workload.key_count);
            }
            assert!(workload.simpler().iter().all(|simpler| simpler != &workload && simpler.validate().is_ok()));
        }
    }
}
