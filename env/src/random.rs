//! Seeded randomness by integer arithmetic only (ADR-0003).
//!
//! * [`DeterministicRng`] wraps `rand_chacha::ChaCha8Rng` (pinned exactly in the workspace) and derives every
//!   choice with integers: no float distributions, whose results may change between library versions.
//! * [`stream_seed`] derives independent streams (workload, faults, scheduling, engine) from one seed by a stable
//!   function, so adding a workload step does not shift every fault decision.
//! * [`keyed`] is a pure function of its inputs, used where a decision must survive shrinking: a fault decision
//!   depends on (seed, file, that file's operation index, fault kind), never on the position in a shared stream.

use std::hash::{BuildHasherDefault, Hasher};

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// Parts per million: the unit of every probability in the simulator.
pub const PPM_MAX: u32 = 1_000_000;

/// How many rejection rounds [`below`] may take before it falls back to a modulo (never reached in practice:
/// each round succeeds with probability above one half).
pub const REJECTION_ROUNDS_MAX: u32 = 64;

/// The splitmix64 finalizer: a stable bijective mix of 64 bits.
pub const fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    x
}

/// A stable hash of bytes (FNV-1a folded through [`mix64`]). Same input, same output, on every machine and
/// every version of this crate.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut hasher = StableHasher::new();
    hasher.write(bytes);
    hasher.finish()
}

/// The lanes [`hash_words`] runs side by side (independent chains, so the processor overlaps their multiplies).
const WORD_LANES: usize = 4;
/// The bytes [`hash_words`] reads per round: one little-endian `u64` per lane.
const WORD_BLOCK_BYTES: usize = 8 * WORD_LANES;
/// The odd constant every [`hash_words`] step adds (the golden ratio's 64 bits).
const WORD_STEP: u64 = 0x9e37_79b9_7f4a_7c15;

/// A little-endian word from up to eight bytes (a short tail is zero-padded; the length is hashed separately).
fn le_word(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(word)
}

/// A stable hash of bytes that reads them eight at a time (ADR-0100): four lanes over 32-byte blocks, each step
/// `lane = mix64(lane + word + WORD_STEP)`; then the length, the lanes and the zero-padded tail words are folded
/// through [`mix64`]. Same input, same output, on every machine and every version of this crate (pinned by a
/// test). One `mix64` per eight bytes where [`hash_bytes`] multiplies per byte; not a replacement for it (its values
/// are on disk).
pub fn hash_words(bytes: &[u8]) -> u64 {
    let mut lanes: [u64; WORD_LANES] =
        [0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344, 0xa409_3822_299f_31d0, 0x082e_fa98_ec4e_6c89];
    let mut blocks = bytes.chunks_exact(WORD_BLOCK_BYTES);
    for block in &mut blocks {
        for (lane, word) in lanes.iter_mut().zip(block.chunks_exact(8)) {
            *lane = mix64(lane.wrapping_add(le_word(word)).wrapping_add(WORD_STEP));
        }
    }
    let mut state = mix64((bytes.len() as u64).wrapping_add(WORD_STEP));
    for word in lanes.into_iter().chain(blocks.remainder().chunks(8).map(le_word)) {
        state = mix64(state.wrapping_add(word).wrapping_add(WORD_STEP));
    }
    state
}

/// A pure decision value from a list of keys. Order matters.
pub fn keyed(keys: &[u64]) -> u64 {
    let mut state = 0x6a09_e667_f3bc_c908u64;
    for &key in keys {
        state = mix64(state ^ mix64(key.wrapping_add(0x9e37_79b9_7f4a_7c15)));
    }
    state
}

/// The seed of a named stream derived from a run's seed.
pub fn stream_seed(seed: u64, stream: &str) -> u64 {
    keyed(&[seed, hash_bytes(stream.as_bytes())])
}

/// True with probability `ppm` parts per million, decided by the random value `value`.
pub fn chance_ppm(ppm: u32, value: u64) -> bool {
    debug_assert!(ppm <= PPM_MAX, "probability above one million ppm");
    if ppm == 0 {
        return false;
    }
    (value % u64::from(PPM_MAX)) < u64::from(ppm)
}

/// A uniform integer in `0..bound` by rejection sampling on integers.
pub fn below(bound: u64, mut next: impl FnMut() -> u64) -> u64 {
    assert!(bound > 0, "below(0) has no values");
    // Largest multiple of `bound` that fits: values at or above it are rejected to avoid modulo bias.
    let zone = u64::MAX - (u64::MAX % bound);
    for _ in 0..REJECTION_ROUNDS_MAX {
        let value = next();
        if value < zone {
            let result = value % bound;
            debug_assert!(result < bound);
            return result;
        }
    }
    next() % bound
}

/// The project's one random number generator: ChaCha8 from a `u64` seed, with integer helpers.
#[derive(Clone, Debug)]
pub struct DeterministicRng {
    inner: ChaCha8Rng,
}

impl DeterministicRng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self { inner: ChaCha8Rng::seed_from_u64(seed) }
    }

    /// A generator for the named stream of `seed` (see [`stream_seed`]).
    pub fn stream(seed: u64, stream: &str) -> Self {
        Self::new(stream_seed(seed, stream))
    }

    /// A random `u64`.
    pub fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// A uniform integer in `0..bound`.
    pub fn below(&mut self, bound: u64) -> u64 {
        below(bound, || self.inner.next_u64())
    }

    /// A uniform integer in `low..=high`.
    pub fn range_inclusive(&mut self, low: u64, high: u64) -> u64 {
        assert!(low <= high, "empty range {low}..={high}");
        if low == 0 && high == u64::MAX {
            return self.next_u64();
        }
        low + self.below(high - low + 1)
    }

    /// A uniform index into a collection of `len` items.
    pub fn index(&mut self, len: usize) -> usize {
        assert!(len > 0, "index into an empty collection");
        let index = self.below(len as u64) as usize;
        debug_assert!(index < len);
        index
    }

    /// True with probability `ppm` parts per million.
    pub fn chance_ppm(&mut self, ppm: u32) -> bool {
        chance_ppm(ppm, self.inner.next_u64())
    }

    /// Fill `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        self.inner.fill_bytes(buf);
    }

    /// Pick one of `weights` (integer weights, at least one non-zero) and return its index.
    pub fn weighted(&mut self, weights: &[u64]) -> usize {
        let total: u64 = weights.iter().sum();
        assert!(total > 0, "weighted choice with all weights zero");
        let mut point = self.below(total);
        for (index, &weight) in weights.iter().enumerate() {
            if point < weight {
                return index;
            }
            point -= weight;
        }
        unreachable!("point {point} beyond total weight {total}");
    }
}

/// A stable streaming 64-bit hasher: FNV-1a over the bytes, finished through [`mix64`].
/// Used for digests and as the fixed hasher of [`DeterministicHashMap`].
#[derive(Clone, Copy, Debug)]
pub struct StableHasher {
    state: u64,
}

impl StableHasher {
    /// A fresh hasher.
    pub const fn new() -> Self {
        Self { state: 0xcbf2_9ce4_8422_2325 }
    }
}

impl Default for StableHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl Hasher for StableHasher {
    fn finish(&self) -> u64 {
        mix64(self.state)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.state ^= u64::from(byte);
            self.state = self.state.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.state = mix64(self.state ^ value);
    }
}

/// The approved hash map: `std`'s map with a fixed hasher, so iteration order depends only on the history of
/// inserts and removes, never on per-process random state. Prefer `BTreeMap` where order is observable.
#[expect(clippy::disallowed_types, reason = "this alias is the one approved use of std's HashMap (ADR-0002)")]
pub type DeterministicHashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<StableHasher>>;

/// A path's identity bytes ([`crate::sim`]'s `names::identity`) to values: the simulated disk's path interner,
/// which only looks paths up and never iterates the map, so its hasher shapes nothing a run can observe. Keyed by
/// bytes and hashed a word at a time ([`WordHasher`], ADR-0151), where a `PathBuf` key hashed component by component
/// and byte by byte.
#[cfg(feature = "sim")]
#[expect(
    clippy::disallowed_types,
    reason = "a fixed hasher and never iterated: the interner's lookups only (ADR-0151)"
)]
pub(crate) type PathMap<V> = std::collections::HashMap<Box<[u8]>, V, BuildHasherDefault<WordHasher>>;

/// A fixed hasher that folds eight bytes per multiply, for maps that are only looked up ([`PathMap`]): a pure
/// function of what is written, never stored, never part of a digest (that is [`StableHasher`]).
#[cfg(feature = "sim")]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WordHasher {
    state: u64,
}

#[cfg(feature = "sim")]
impl WordHasher {
    /// Fold one word into the state (FxHash's step: rotate, xor, multiply by an odd constant).
    fn fold(&mut self, word: u64) {
        self.state = (self.state.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

#[cfg(feature = "sim")]
impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        // The fold leaves the low bits weak, and the map picks its bucket from them.
        mix64(self.state)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.fold(le_word(word));
        }
        if !words.remainder().is_empty() {
            self.fold(le_word(words.remainder()));
        }
    }

    fn write_usize(&mut self, value: usize) {
        self.fold(value as u64);
    }
}

/// The approved hash set; see [`DeterministicHashMap`].
#[expect(clippy::disallowed_types, reason = "this alias is the one approved use of std's HashSet (ADR-0002)")]
pub type DeterministicHashSet<K> = std::collections::HashSet<K, BuildHasherDefault<StableHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_hashes_are_pinned_and_tell_inputs_apart() {
        // Pinned values: if these change, value signatures change silently (ADR-0100).
        let long: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let inputs: [&[u8]; 6] = [b"", b"a", b"abcdefgh", b"abcdefghi", &long[..32], &long];
        let hashes: Vec<u64> = inputs.iter().map(|input| hash_words(input)).collect();
        // The same six values come out of an independent Python rendering of the doc comment's algorithm.
        let pinned = [
            0x7da1_bcf2_6eb3_8e40,
            0x5169_2802_aa9e_7acf,
            0x1e63_8ee4_c886_b2ea,
            0x4f67_e71f_f13e_d4a1,
            0x81b6_69ee_76f1_cca4,
            0x3fdf_44ee_491c_f1d2,
        ];
        assert_eq!(hashes, pinned);
        // The length is hashed: zero bytes of different lengths differ, and so does every single-byte change.
        let zeros: Vec<u64> = (0..40).map(|len| hash_words(&vec![0u8; len])).collect();
        assert!(zeros.iter().enumerate().all(|(i, a)| zeros[i + 1..].iter().all(|b| a != b)), "{zeros:x?}");
        let mut changed = long.clone();
        for index in [0, 7, 8, 31, 32, 995, 999] {
            changed[index] ^= 1;
            assert_ne!(hash_words(&changed), hash_words(&long), "a flip at {index}");
            changed[index] ^= 1;
        }
        assert_ne!(hash_words(b"abc"), hash_bytes(b"abc"), "a different function from hash_bytes");
    }

    #[test]
    fn streams_are_stable_and_distinct() {
        // Pinned values: if these change, every saved seed means a different run (ADR-0003).
        assert_eq!(mix64(0), 0);
        assert_eq!(mix64(1), 0x5692_161d_100b_05e5);
        let workload = stream_seed(7, "workload");
        let faults = stream_seed(7, "faults");
        assert_ne!(workload, faults);
        assert_eq!(workload, stream_seed(7, "workload"));
        let mut a = DeterministicRng::stream(7, "workload");
        let mut b = DeterministicRng::stream(7, "workload");
        assert_eq!(a.next_u64(), b.next_u64());
        assert_eq!(DeterministicRng::new(0).next_u64(), DeterministicRng::new(0).next_u64());
    }

    #[test]
    fn below_stays_in_bounds() {
        let mut rng = DeterministicRng::new(1);
        let mut seen = [0u32; 7];
        for _ in 0..7000 {
            let value = rng.below(7);
            assert!(value < 7);
            seen[value as usize] += 1;
        }
        assert!(seen.iter().all(|&count| count > 800), "skewed: {seen:?}");
    }

    #[test]
    fn chance_extremes() {
        assert!(!chance_ppm(0, 0));
        assert!(chance_ppm(PPM_MAX, u64::MAX));
        assert!(chance_ppm(1, 0));
        assert!(!chance_ppm(1, 1));
    }
}
