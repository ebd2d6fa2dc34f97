//! A learned index (PGM-style piecewise-linear model) from a key to its data block's position in the index.
//!
//! Each data block's first user key is mapped to a `u64` by the table's [`KeyDomain`]: the key's bytes after the
//! prefix every key of the table shares, their first 8 bytes big-endian, zero padded ([`key_to_u64`]). The map
//! is monotone, so sorted keys give non-decreasing numbers. Skipping the shared prefix matters: keys such as
//! YCSB's `user000000123456` share their first 8 bytes, which would map every block to one number (format
//! version 1 did that; its tables are still read with an empty prefix). For each distinct number `x` with first index
//! position `y`, the model guarantees `|predict(x) - y| <= epsilon`. Segments are fitted greedily with a
//! shrinking cone: a segment starts at a point and keeps the interval of slopes that put every later point
//! within `epsilon + 1/4` (the quarter absorbs float rounding before the prediction is rounded to an integer).
//!
//! ```text
//! learned := epsilon u32 LE | position_count u32 LE | segment_count u32 LE
//!            | (start_key u64 LE | start_position u32 LE | slope f64 bits u64 LE) * segment_count
//!            | crc32 u32 LE (tag 0x7E)
//! ```
//!
//! A lookup predicts `p`, then binary searches only positions `[p - epsilon - 1, p + epsilon + 1]`, after
//! checking that this window brackets the answer; when it does not (keys sharing an 8-byte prefix, a query
//! between segments), it falls back to a binary search of the whole index. Correctness never depends on the
//! model: only the number of comparisons does.
//!
//! The shared prefix is not stored: it is the common prefix of the table's smallest and largest user keys (the
//! meta block's), which every key between them shares.

use super::codec::{BlockTag, Cursor, partition_point, seal, unseal};
use crate::DecodeError;

/// The largest accepted error bound.
pub const LEARNED_EPSILON_MAX: u32 = 1 << 16;
/// Encoded size of one segment.
pub const SEGMENT_SIZE_BYTES: usize = 8 + 4 + 8;
/// The model's allowance beyond epsilon for float rounding (the prediction is rounded to an integer after).
const FIT_SLACK: f64 = 0.25;

/// Map a user key to the model's domain: its first 8 bytes, big-endian, zero padded.
pub fn key_to_u64(user_key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let size_bytes = user_key.len().min(8);
    bytes[..size_bytes].copy_from_slice(&user_key[..size_bytes]);
    u64::from_be_bytes(bytes)
}

/// How one table maps user keys into the model's domain: strip the prefix every key of the table shares, then
/// [`key_to_u64`]. A key that does not start with the prefix sorts before or after every key of the table and
/// maps to 0 or `u64::MAX`, which keeps the map monotone over all keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyDomain {
    prefix: Vec<u8>,
}

impl KeyDomain {
    /// The domain of a table whose user keys lie in `min_user_key..=max_user_key`: their common prefix.
    pub fn for_range(min_user_key: &[u8], max_user_key: &[u8]) -> Self {
        assert!(min_user_key <= max_user_key, "a key range's bounds are ordered");
        let size_bytes = min_user_key.iter().zip(max_user_key).take_while(|(low, high)| low == high).count();
        Self { prefix: min_user_key[..size_bytes].to_vec() }
    }

    /// The domain of table format version 1: no prefix is skipped.
    pub fn unprefixed() -> Self {
        Self { prefix: Vec::new() }
    }

    /// The domain of a table of `format_version` whose user keys lie in `min_user_key..=max_user_key`.
    pub fn for_table(format_version: u32, min_user_key: &[u8], max_user_key: &[u8]) -> Self {
        match format_version {
            1 => Self::unprefixed(),
            _ => Self::for_range(min_user_key, max_user_key),
        }
    }

    /// How many leading bytes every key of the table shares (and the map skips).
    pub fn prefix_size_bytes(&self) -> usize {
        self.prefix.len()
    }

    /// The model's number for `user_key`.
    pub fn map(&self, user_key: &[u8]) -> u64 {
        match user_key.strip_prefix(self.prefix.as_slice()) {
            Some(suffix) => key_to_u64(suffix),
            None if user_key < self.prefix.as_slice() => 0,
            None => u64::MAX,
        }
    }
}

/// One linear piece: positions from `start_position` on, for keys from `start_key` on.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Segment {
    start_key: u64,
    start_position: u32,
    slope: f64,
}

/// How a lookup found its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchPath {
    /// The predicted window bracketed the answer.
    Learned,
    /// The window did not: the whole index was searched.
    Fallback,
}

/// A fitted model over `position_count` index positions.
#[derive(Clone, Debug, PartialEq)]
pub struct LearnedIndex {
    epsilon: u32,
    position_count: u32,
    segments: Vec<Segment>,
}

impl LearnedIndex {
    /// Fit a model to `keys` (non-decreasing, one per index position) with error bound `epsilon`.
    pub fn fit(keys: &[u64], epsilon: u32) -> Self {
        assert!(epsilon <= LEARNED_EPSILON_MAX, "epsilon {epsilon} above LEARNED_EPSILON_MAX");
        assert!(keys.is_sorted(), "learned index keys must be sorted");
        let position_count = u32::try_from(keys.len()).expect("block count fits u32");
        let points: Vec<(u64, u32)> = keys
            .iter()
            .enumerate()
            .filter(|&(position, key)| position == 0 || keys[position - 1] != *key)
            .map(|(position, &key)| (key, position as u32))
            .collect();
        let mut segments = Vec::new();
        let mut start = 0usize;
        while start < points.len() {
            let (segment, next) = fit_segment(&points, start, epsilon);
            assert!(next > start, "every segment covers at least its start point");
            segments.push(segment);
            start = next;
        }
        let model = Self { epsilon, position_count, segments };
        for &(key, position) in &points {
            let error = model.predict(key).abs_diff(u64::from(position));
            assert!(error <= u64::from(epsilon), "learned index error {error} above epsilon {epsilon} at {key}");
        }
        model
    }

    /// The error bound, in index positions.
    pub fn epsilon(&self) -> u32 {
        self.epsilon
    }

    /// How many index positions (data blocks) the model was fitted to.
    pub fn position_count(&self) -> u32 {
        self.position_count
    }

    /// How many linear segments the model has.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The predicted index position of `key`, in `0..position_count` (0 for an empty model).
    pub fn predict(&self, key: u64) -> u64 {
        let following = partition_point(self.segments.len(), |index| self.segments[index].start_key <= key);
        let Some(segment) = following.checked_sub(1).map(|index| self.segments[index]) else {
            return 0;
        };
        let upper = match self.segments.get(following) {
            Some(next) => u64::from(next.start_position),
            None => u64::from(self.position_count.saturating_sub(1)),
        };
        let offset = segment.slope * (key - segment.start_key) as f64;
        let predicted = (f64::from(segment.start_position) + offset).round();
        // Float-to-int casts saturate; the clamp keeps the prediction inside the segment's positions.
        let position = (predicted as u64).clamp(u64::from(segment.start_position), upper);
        assert!(position < u64::from(self.position_count.max(1)), "prediction past the index");
        position
    }

    /// The first position in `0..count` where `is_before` turns false (it must be true on a prefix, then false),
    /// searching only the window around the prediction for `key` when that window brackets the answer. Each call
    /// of `is_before` is one probe: a window costs 2 bracket probes plus a binary search of at most
    /// `2 * epsilon + 3` positions; a fallback costs the 2 bracket probes plus a binary search of `count`.
    pub fn search(&self, key: u64, count: usize, mut is_before: impl FnMut(usize) -> bool) -> (usize, SearchPath) {
        assert_eq!(count, self.position_count as usize, "searching an index the model was not fitted to");
        let predicted = usize::try_from(self.predict(key)).expect("prediction is below count");
        let slack = self.epsilon as usize + 1;
        let low = predicted.saturating_sub(slack);
        let high = predicted.saturating_add(slack + 1).min(count);
        let brackets = (low == 0 || is_before(low - 1)) && (high == count || !is_before(high));
        if !brackets {
            return (partition_point(count, is_before), SearchPath::Fallback);
        }
        let answer = low + partition_point(high - low, |offset| is_before(low + offset));
        assert!((low..=high).contains(&answer), "windowed search left its window");
        (answer, SearchPath::Learned)
    }

    /// The sealed bytes of the learned-index block.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(12 + self.segments.len() * SEGMENT_SIZE_BYTES + 4);
        bytes.extend_from_slice(&self.epsilon.to_le_bytes());
        bytes.extend_from_slice(&self.position_count.to_le_bytes());
        let segment_count = u32::try_from(self.segments.len()).expect("segments are fewer than positions");
        bytes.extend_from_slice(&segment_count.to_le_bytes());
        for segment in &self.segments {
            bytes.extend_from_slice(&segment.start_key.to_le_bytes());
            bytes.extend_from_slice(&segment.start_position.to_le_bytes());
            bytes.extend_from_slice(&segment.slope.to_bits().to_le_bytes());
        }
        seal(BlockTag::Learned, &mut bytes, 0);
        debug_assert_eq!(decode_learned_index(&bytes).as_ref(), Ok(self), "learned index must roundtrip");
        bytes
    }
}

/// Grow one segment from `points[start]` while the cone of admissible slopes stays non-empty. Returns the
/// segment and the index of the first point it does not cover.
fn fit_segment(points: &[(u64, u32)], start: usize, epsilon: u32) -> (Segment, usize) {
    let (start_key, start_position) = points[start];
    let tolerance = f64::from(epsilon) + FIT_SLACK;
    let (mut slope_low, mut slope_high) = (0.0f64, f64::INFINITY);
    let mut next = start + 1;
    while next < points.len() {
        let (key, position) = points[next];
        assert!(key > start_key && position > start_position, "points strictly increase");
        let key_delta = (key - start_key) as f64;
        let position_delta = f64::from(position - start_position);
        let low = slope_low.max((position_delta - tolerance) / key_delta);
        let high = slope_high.min((position_delta + tolerance) / key_delta);
        if low > high {
            break;
        }
        (slope_low, slope_high) = (low, high);
        next += 1;
    }
    let slope = if slope_high.is_finite() { (slope_low + slope_high) / 2.0 } else { 0.0 };
    assert!(slope.is_finite() && slope >= 0.0, "a fitted slope is finite and non-negative");
    (Segment { start_key, start_position, slope }, next)
}

/// Decode and validate a learned-index block: CRC, epsilon bound, segment count against the block's length,
/// strictly increasing segment starts beginning at position 0, finite non-negative slopes.
pub fn decode_learned_index(bytes: &[u8]) -> Result<LearnedIndex, DecodeError> {
    let contents = unseal(BlockTag::Learned, bytes)?;
    let mut cursor = Cursor::new(contents);
    let epsilon = cursor.u32("learned epsilon")?;
    let position_count = cursor.u32("learned position count")?;
    let segment_count = cursor.u32("learned segment count")? as usize;
    if epsilon > LEARNED_EPSILON_MAX {
        return Err(DecodeError::new(0, format!("learned epsilon {epsilon} above {LEARNED_EPSILON_MAX}")));
    }
    let size_ok = segment_count.checked_mul(SEGMENT_SIZE_BYTES) == Some(cursor.remaining_bytes());
    if !size_ok || segment_count > position_count as usize || (segment_count == 0) != (position_count == 0) {
        return Err(DecodeError::new(8, format!("{segment_count} segments for {position_count} positions")));
    }
    let mut segments: Vec<Segment> = Vec::new();
    while !cursor.is_at_end() {
        let offset = cursor.position() as u64;
        let start_key = cursor.u64("segment start key")?;
        let start_position = cursor.u32("segment start position")?;
        let slope = f64::from_bits(cursor.u64("segment slope")?);
        let follows = match segments.last() {
            Some(last) => last.start_key < start_key && last.start_position < start_position,
            None => start_position == 0,
        };
        if !follows || start_position >= position_count || !slope.is_finite() || slope < 0.0 {
            return Err(DecodeError::new(offset, "bad learned-index segment"));
        }
        segments.push(Segment { start_key, start_position, slope });
    }
    assert_eq!(segments.len(), segment_count, "read exactly the declared segments");
    Ok(LearnedIndex { epsilon, position_count, segments })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn key_to_u64_is_big_endian_zero_padded_and_monotone() {
        assert_eq!(key_to_u64(b""), 0);
        assert_eq!(key_to_u64(b"\x01"), 1 << 56);
        assert_eq!(key_to_u64(b"abcdefghij"), key_to_u64(b"abcdefgh"));
        assert!(key_to_u64(b"ab") <= key_to_u64(b"ab\x00"));
        assert!(key_to_u64(b"a\xff") < key_to_u64(b"b"));
    }

    #[test]
    fn key_domain_skips_the_shared_prefix_and_stays_monotone() {
        let domain = KeyDomain::for_range(b"user000000000100", b"user000000999999");
        assert_eq!(domain.prefix_size_bytes(), 10);
        assert_eq!(domain.map(b"user000000123456"), key_to_u64(b"123456"));
        assert!(domain.map(b"user000000123456") < domain.map(b"user000000123457"));
        assert_eq!(domain.map(b"user00"), 0, "a key before the prefix maps to the bottom");
        assert_eq!(domain.map(b"user1"), u64::MAX, "a key after the prefix maps to the top");
        assert_eq!(KeyDomain::unprefixed().map(b"user000000123456"), key_to_u64(b"user0000"));
        assert_eq!(KeyDomain::for_range(b"k", b"k").prefix_size_bytes(), 1);
    }

    #[test]
    fn evenly_spaced_keys_need_one_segment_and_always_hit() {
        let keys: Vec<u64> = (0..1000u64).map(|index| index * 4096).collect();
        let model = LearnedIndex::fit(&keys, 2);
        assert_eq!(model.segment_count(), 1);
        for (position, &key) in keys.iter().enumerate() {
            let (answer, path) = model.search(key + 1, keys.len(), |index| keys[index] <= key);
            assert_eq!((answer, path), (position + 1, SearchPath::Learned));
        }
    }

    #[test]
    fn wide_runs_of_equal_keys_fall_back_and_stay_correct() {
        let keys: Vec<u64> = [vec![5u64; 40], vec![9u64; 40]].concat();
        let model = LearnedIndex::fit(&keys, 1);
        let (answer, path) = model.search(5, keys.len(), |index| index < 20);
        assert_eq!((answer, path), (20, SearchPath::Fallback));
    }

    #[test]
    fn empty_model_roundtrips_and_predicts_zero() {
        let model = LearnedIndex::fit(&[], 4);
        assert_eq!(model.predict(77), 0);
        assert_eq!(decode_learned_index(&model.encode()), Ok(model));
    }

    #[test]
    fn decode_rejects_bad_segments_under_a_valid_checksum() {
        let model = LearnedIndex::fit(&[1, 100, 5000, 5001, 1 << 40], 0);
        let bytes = model.encode();
        let contents = &bytes[..bytes.len() - 4];
        // (first byte, replacement bytes): epsilon too big, zero positions, too many segments, a first segment
        // not at position 0, a NaN slope.
        let damages: [(usize, &[u8]); 5] =
            [(0, &[0xFF; 4]), (4, &[0; 4]), (8, &[9, 0, 0, 0]), (20, &[1, 0, 0, 0]), (24, &[0xFF; 8])];
        for (start, replacement) in damages {
            let mut broken = contents.to_vec();
            broken[start..start + replacement.len()].copy_from_slice(replacement);
            seal(BlockTag::Learned, &mut broken, 0);
            assert!(decode_learned_index(&broken).is_err(), "damage at byte {start}");
        }
    }

    fn sorted_keys() -> impl Strategy<Value = Vec<u64>> {
        let clustered = (0u64..64, 0u64..1_000_000).prop_map(|(cluster, offset)| (cluster << 50) + offset);
        prop_oneof![proptest::collection::vec(any::<u64>(), 0..400), proptest::collection::vec(clustered, 0..400)]
            .prop_map(|mut keys| {
                keys.sort_unstable();
                keys
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn prediction_error_never_exceeds_epsilon(keys in sorted_keys(), epsilon in 0u32..9) {
            let model = decode_learned_index(&LearnedIndex::fit(&keys, epsilon).encode()).unwrap();
            for (position, &key) in keys.iter().enumerate() {
                if position == 0 || keys[position - 1] != key {
                    prop_assert!(model.predict(key).abs_diff(position as u64) <= u64::from(epsilon));
                }
            }
        }

        #[test]
        fn search_agrees_with_plain_binary_search(
            keys in sorted_keys(),
            epsilon in 0u32..9,
            queries in proptest::collection::vec(any::<u64>(), 1..40),
        ) {
            let model = LearnedIndex::fit(&keys, epsilon);
            let near: Vec<u64> = keys.iter().flat_map(|&key| [key.wrapping_sub(1), key, key.wrapping_add(1)]).collect();
            for query in queries.into_iter().chain(near) {
                let expected = keys.partition_point(|&key| key < query);
                let (answer, _) = model.search(query, keys.len(), |index| keys[index] < query);
                prop_assert_eq!(answer, expected);
            }
        }

        #[test]
        fn key_domain_is_monotone(
            mut keys in proptest::collection::vec(proptest::collection::vec(prop_oneof![Just(b'u'), any::<u8>()], 0..12), 2..40),
            queries in proptest::collection::vec(proptest::collection::vec(prop_oneof![Just(b'u'), any::<u8>()], 0..12), 0..40),
        ) {
            keys.sort();
            let domain = KeyDomain::for_range(&keys[0], &keys[keys.len() - 1]);
            let mut all: Vec<&Vec<u8>> = keys.iter().chain(&queries).collect();
            all.sort();
            prop_assert!(all.windows(2).all(|pair| domain.map(pair[0]) <= domain.map(pair[1])));
            prop_assert!(keys.iter().all(|key| key.starts_with(&keys[0][..domain.prefix_size_bytes()])));
        }

        #[test]
        fn decode_learned_index_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = decode_learned_index(&bytes);
        }
    }
}
