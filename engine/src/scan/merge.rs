//! [`MergeIter`]: merges sources of versions, each in internal-key order (or each in reverse internal-key order),
//! into one order. Compaction merges forward; a scan's back end merges in reverse (ADR-0085).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::error::{Error, Result};
use crate::types::{Entry, InternalKey, Sequence, compare_internal};

/// The most sources one merge may combine.
pub const MERGE_SOURCES_MAX: usize = 4096;

/// A source of entries in internal-key order (reverse internal-key order for a reverse merge).
pub type EntrySource<'a> = Box<dyn Iterator<Item = Result<Entry>> + Send + 'a>;

pub use crate::types::Direction;

struct HeapItem {
    entry: Entry,
    source: usize,
    direction: Direction,
}

impl PartialEq for HeapItem {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for HeapItem {}

impl PartialOrd for HeapItem {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for HeapItem {
    /// Reversed (the heap pops the greatest): the first key in the merge's direction pops first; ties go to the
    /// lower (newer) source.
    fn cmp(&self, other: &Self) -> Ordering {
        let order = self.direction.orient(self.entry.key.cmp(&other.entry.key));
        order.reverse().then(other.source.cmp(&self.source))
    }
}

/// Merges sources (each in the merge's direction; sources listed newest first) into one order. An exact
/// duplicate (same key and sequence) from an older source is skipped. Lazy: no source is read before the first
/// `next`, and each `next` reads on the source of the entry the previous `next` returned (a `take(n)` reads no
/// entry past the n-th of its source), plus a source whose duplicate it skips.
///
/// The first head in the merge's order (`current`) stays out of the heap (ADR-0091): while one source supplies a
/// run of entries, each costs one comparison with the heap's top and no heap operation; a switch of source is one
/// replace-top (one sift-down) instead of a pop and a push; with one source left the heap is empty and untouched.
/// A duplicate can only come from another source (each source is strictly ordered): it is the heap's top when it
/// meets `current`, found by the comparison that orders them, so no copy of the last key is kept.
pub struct MergeIter<'a> {
    sources: Vec<EntrySource<'a>>,
    /// The first of the sources' heads in the merge's order: the next entry to return.
    current: Option<HeapItem>,
    /// The other sources' heads; its top is never an exact duplicate of `current`.
    heap: BinaryHeap<HeapItem>,
    direction: Direction,
    /// Each source yields at most one version of a user key (a forward scan's sources): then `repeats_key` is known
    /// without comparing keys within a source.
    distinct_keys: bool,
    /// `current` has the user key of the entry returned before it (meaningful with `distinct_keys`).
    current_repeats: bool,
    /// The heap's top has the user key of `current` (what `current_repeats` becomes when the top is next).
    top_repeats: bool,
    /// The entry returned last has the user key of the one before it (meaningful with `distinct_keys`).
    returned_repeats: bool,
    /// The source of the entry returned last: read on at the next `next`.
    refill: Option<usize>,
    primed: bool,
    /// A source's error: returned after `current` (or at once when there is none).
    pending: Option<Error>,
    failed: bool,
    /// [`crate::EXPENSIVE_CHECKS`] builds: the last key returned, to check the order and `repeats_key`.
    checked_last: Option<(Vec<u8>, Sequence)>,
}

/// How `a` and `b` compare in `direction`: their user keys (unoriented: equal or not) and their internal keys.
fn compare(direction: Direction, a: &InternalKey, b: &InternalKey) -> (Ordering, Ordering) {
    let keys = a.user_key.as_slice().cmp(b.user_key.as_slice());
    (keys, direction.orient(keys.then(b.sequence.cmp(&a.sequence))))
}

impl<'a> MergeIter<'a> {
    /// A forward merge (ascending internal keys).
    pub fn new(sources: Vec<EntrySource<'a>>) -> Self {
        Self::with_direction(sources, Direction::Forward)
    }

    pub fn with_direction(sources: Vec<EntrySource<'a>>, direction: Direction) -> Self {
        assert!(sources.len() <= MERGE_SOURCES_MAX, "too many merge sources");
        Self {
            sources,
            current: None,
            heap: BinaryHeap::new(),
            direction,
            distinct_keys: false,
            current_repeats: false,
            top_repeats: false,
            returned_repeats: false,
            refill: None,
            primed: false,
            pending: None,
            failed: false,
            checked_last: None,
        }
    }

    /// A merge of sources each of which yields at most one version of a user key (asserted in
    /// [`crate::EXPENSIVE_CHECKS`] builds), so [`Self::repeats_key`] is known.
    pub(crate) fn with_distinct_keys(sources: Vec<EntrySource<'a>>, direction: Direction) -> Self {
        Self { distinct_keys: true, ..Self::with_direction(sources, direction) }
    }

    /// The entry returned last has the same user key as the entry returned before it. Only for a merge made by
    /// [`Self::with_distinct_keys`] (a panic otherwise: the merge does not compare keys within a source).
    pub(crate) fn repeats_key(&self) -> bool {
        assert!(self.distinct_keys, "repeats_key needs sources of distinct keys");
        self.returned_repeats
    }

    /// The next entry of `source` as a heap item; an error is kept in `pending`.
    fn read(&mut self, source: usize) -> Option<HeapItem> {
        match self.sources[source].next()? {
            Ok(entry) => Some(HeapItem { entry, source, direction: self.direction }),
            Err(error) => {
                self.pending = Some(error);
                None
            }
        }
    }

    fn prime(&mut self) -> Result<()> {
        self.primed = true;
        for source in 0..self.sources.len() {
            if let Some(item) = self.read(source) {
                self.heap.push(item);
            }
            if let Some(error) = self.pending.take() {
                return Err(error);
            }
        }
        self.current = self.heap.pop();
        self.settle();
        Ok(())
    }

    /// `current` is new: drop the heap's top while it is an exact duplicate of it (from an older source: the
    /// heap's order puts the newer first), reading its source on; then note whether the top repeats its user key.
    fn settle(&mut self) {
        // Each round but the last drops one duplicate, at most one per other source.
        for _ in 0..=self.sources.len() {
            let Some(current) = &self.current else { return };
            let Some(top) = self.heap.peek() else {
                self.top_repeats = false;
                return;
            };
            let (keys, order) = compare(self.direction, &current.entry.key, &top.entry.key);
            if order.is_ne() {
                self.top_repeats = keys.is_eq();
                return;
            }
            let duplicate = self.heap.pop().expect("peeked");
            if let Some(item) = self.read(duplicate.source) {
                self.heap.push(item);
            }
            if self.pending.is_some() {
                return;
            }
        }
        unreachable!("a merge skipped more duplicates than it has sources")
    }

    /// The entry of `source` was returned: read it on and choose the new `current`. Compares the new head with the
    /// heap's top only; a switch of source (or a duplicate) also settles the new `current`.
    fn advance(&mut self, source: usize) {
        let top_repeats = self.top_repeats;
        // A second round only after a duplicate of the top (the top is newer), read past.
        for round in 0..=self.sources.len() {
            let next = self.read(source);
            if self.pending.is_some() {
                if round > 0 {
                    // The top precedes the duplicate whose read failed: it comes before the error.
                    (self.current, self.current_repeats) = (self.heap.pop(), top_repeats);
                }
                return;
            }
            let Some(next) = next else {
                (self.current, self.current_repeats) = (self.heap.pop(), top_repeats);
                return self.settle();
            };
            let Some(mut top) = self.heap.peek_mut() else {
                (self.current, self.current_repeats, self.top_repeats) = (Some(next), false, false);
                return;
            };
            let (keys, order) = compare(self.direction, &next.entry.key, &top.entry.key);
            if order.is_eq() && top.source < source {
                continue;
            }
            if order.is_gt() {
                // A switch: the top comes first and the new head takes its place in the heap.
                let first = std::mem::replace(&mut *top, next);
                drop(top);
                (self.current, self.current_repeats) = (Some(first), top_repeats);
                return self.settle();
            }
            drop(top);
            (self.current, self.current_repeats, self.top_repeats) = (Some(next), false, keys.is_eq());
            if order.is_eq() {
                self.settle();
            }
            return;
        }
        unreachable!("a merge read past more duplicates than it has sources")
    }

    /// [`crate::EXPENSIVE_CHECKS`] builds: `entry` follows the last one returned, and `repeats_key` is right.
    fn check(&mut self, entry: &Entry) {
        let (user_key, sequence) = (entry.key.user_key.as_slice(), entry.key.sequence);
        if let Some((last, last_sequence)) = &self.checked_last {
            let order = self.direction.orient(compare_internal(last, *last_sequence, user_key, sequence));
            assert_eq!(order, Ordering::Less, "merge produced keys out of order or a duplicate");
            if self.distinct_keys {
                assert_eq!(self.returned_repeats, last.as_slice() == user_key, "a source repeated a user key");
            }
        }
        // One buffer reused from entry to entry: the check allocates nothing per row (the allocations test counts
        // rows in an expensive-checks build too).
        let last = self.checked_last.get_or_insert_with(|| (Vec::new(), sequence));
        last.0.clear();
        last.0.extend_from_slice(user_key);
        last.1 = sequence;
    }
}

impl Iterator for MergeIter<'_> {
    type Item = Result<Entry>;

    /// A source's error comes after the entry whose source read met it (reading past that entry, or past a
    /// duplicate of it), and the merge yields nothing after the error.
    fn next(&mut self) -> Option<Result<Entry>> {
        if self.failed {
            return None;
        }
        if let Some(error) = self.pending.take() {
            self.failed = true;
            return Some(Err(error));
        }
        if !self.primed {
            if let Err(error) = self.prime() {
                self.failed = true;
                return Some(Err(error));
            }
        } else if let Some(source) = self.refill.take() {
            self.advance(source);
        }
        let Some(item) = self.current.take() else {
            self.failed = self.pending.is_some();
            return self.pending.take().map(Err);
        };
        self.refill = Some(item.source);
        self.returned_repeats = std::mem::take(&mut self.current_repeats);
        if crate::EXPENSIVE_CHECKS {
            self.check(&item.entry);
        }
        Some(Ok(item.entry))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::{Just, Strategy, any};

    use super::*;
    use crate::types::{InternalKey, ValueKind};

    fn entry_of(key: &str, sequence: u64) -> Result<Entry> {
        let value = format!("{key}@{sequence}").into_bytes();
        Ok(Entry { key: InternalKey::new(key.as_bytes(), sequence), kind: ValueKind::Put, value })
    }

    fn merged(direction: Direction, newer: Vec<Result<Entry>>, older: Vec<Result<Entry>>) -> Vec<(String, u64)> {
        let sources: Vec<EntrySource<'_>> = vec![Box::new(newer.into_iter()), Box::new(older.into_iter())];
        MergeIter::with_direction(sources, direction)
            .map(|e| {
                let e = e.unwrap();
                (String::from_utf8(e.key.user_key).unwrap(), e.key.sequence)
            })
            .collect()
    }

    #[test]
    fn merge_orders_and_skips_duplicates_both_ways() {
        let newer = vec![entry_of("a", 5), entry_of("c", 6)];
        let older = vec![entry_of("a", 5), entry_of("a", 3), entry_of("b", 1)];
        let forward = vec![("a".into(), 5), ("a".into(), 3), ("b".into(), 1), ("c".into(), 6)];
        assert_eq!(merged(Direction::Forward, newer.clone(), older.clone()), forward);
        let reverse_of = |entries: Vec<Result<Entry>>| entries.into_iter().rev().collect::<Vec<_>>();
        let backward = merged(Direction::Reverse, reverse_of(newer), reverse_of(older));
        assert_eq!(backward, forward.into_iter().rev().collect::<Vec<_>>());
    }

    #[test]
    fn an_error_ends_the_merge() {
        let failing: Vec<Result<Entry>> = vec![entry_of("a", 1), Err(Error::Closed { reason: "test".into() })];
        let sources: Vec<EntrySource<'_>> =
            vec![Box::new(failing.into_iter()), Box::new(vec![entry_of("b", 2)].into_iter())];
        let results: Vec<bool> = MergeIter::new(sources).map(|item| item.is_ok()).collect();
        assert_eq!(results, vec![true, false], "the entry before the error, the error, nothing after it");
    }

    /// A source: its versions `(user key, sequence)` in internal-key order, and an error after `fail_at` of them.
    type ModelSource = (Vec<(u8, u64)>, Option<usize>);

    fn oriented(direction: Direction, versions: &[(u8, u64)]) -> Vec<(u8, u64)> {
        let mut versions = versions.to_vec();
        versions.sort_by(|a, b| direction.orient(compare_internal(&[a.0], a.1, &[b.0], b.1)));
        versions
    }

    /// The model: every version of every source (up to its error) ordered by key in `direction` then source,
    /// exact duplicates dropped; it stops after the last entry before the first error met, where an error is met
    /// once the version before it was reached (at the start when a source fails before its first version; sources
    /// are read in order at the start).
    fn model(direction: Direction, sources: &[ModelSource]) -> Vec<Option<(u8, u64)>> {
        if sources.iter().any(|(_, fail_at)| *fail_at == Some(0)) {
            return vec![None];
        }
        let mut all: Vec<(usize, usize, (u8, u64))> = Vec::new();
        for (source, (versions, fail_at)) in sources.iter().enumerate() {
            let versions = oriented(direction, versions);
            let kept = fail_at.map_or(versions.len(), |at| at.min(versions.len()));
            all.extend(versions[..kept].iter().enumerate().map(|(index, version)| (source, index, *version)));
        }
        all.sort_by(|a, b| {
            let order = compare_internal(&[a.2.0], a.2.1, &[b.2.0], b.2.1);
            direction.orient(order).then(a.0.cmp(&b.0))
        });
        let mut out: Vec<Option<(u8, u64)>> = Vec::new();
        for (source, index, version) in all {
            if out.last() != Some(&Some(version)) {
                out.push(Some(version));
            }
            if sources[source].1 == Some(index + 1) {
                out.push(None);
                break;
            }
        }
        out
    }

    fn run(direction: Direction, sources: &[ModelSource], distinct_keys: bool) -> Vec<Option<(u8, u64)>> {
        let boxed: Vec<EntrySource<'_>> = sources
            .iter()
            .map(|(versions, fail_at)| {
                let mut items: Vec<Result<Entry>> =
                    oriented(direction, versions).iter().map(|&(key, sequence)| entry(&[key], sequence)).collect();
                if let Some(at) = *fail_at {
                    items.truncate(at);
                    items.push(Err(Error::Closed { reason: "test".into() }));
                }
                Box::new(items.into_iter()) as EntrySource<'_>
            })
            .collect();
        let mut merge = if distinct_keys {
            MergeIter::with_distinct_keys(boxed, direction)
        } else {
            MergeIter::with_direction(boxed, direction)
        };
        let mut out: Vec<Option<(u8, u64)>> = Vec::new();
        while let Some(item) = merge.next() {
            let Ok(entry) = item else {
                out.push(None);
                continue;
            };
            let version = (entry.key.user_key[0], entry.key.sequence);
            if distinct_keys {
                let repeats = matches!(out.last(), Some(Some((key, _))) if *key == version.0);
                assert_eq!(merge.repeats_key(), repeats, "repeats_key after {version:?}");
            }
            out.push(Some(version));
        }
        out
    }

    fn entry(key: &[u8], sequence: u64) -> Result<Entry> {
        Ok(Entry { key: InternalKey::new(key, sequence), kind: ValueKind::Put, value: vec![key[0]] })
    }

    fn source(distinct_keys: bool) -> impl Strategy<Value = ModelSource> {
        // Few keys and sequences: sources share versions (exact duplicates) and keys; runs from one source.
        let versions = if distinct_keys {
            proptest::collection::btree_map(0u8..24, 0u64..4, 0..16).prop_map(|map| map.into_iter().collect()).boxed()
        } else {
            proptest::collection::btree_set((0u8..24, 0u64..4), 0..24).prop_map(|set| set.into_iter().collect()).boxed()
        };
        let fail_at = proptest::option::weighted(0.15, 0usize..20);
        (versions, fail_at).prop_map(|(versions, fail_at): (Vec<(u8, u64)>, Option<usize>)| {
            let fail_at = fail_at.map(|at| at.min(versions.len()));
            (versions, fail_at)
        })
    }

    fn merge_case() -> impl Strategy<Value = (bool, bool, Vec<ModelSource>)> {
        (any::<bool>(), any::<bool>()).prop_flat_map(|(forward, distinct_keys)| {
            (Just(forward), Just(distinct_keys), proptest::collection::vec(source(distinct_keys), 0..6))
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// One source, sources that interleave or run, exact duplicates across sources, errors, both directions:
        /// the merge (its first head kept out of the heap) equals the model, and `repeats_key` is right.
        #[test]
        fn the_merge_matches_the_model((forward, distinct_keys, sources) in merge_case()) {
            let direction = if forward { Direction::Forward } else { Direction::Reverse };
            proptest::prop_assert_eq!(run(direction, &sources, distinct_keys), model(direction, &sources));
        }
    }
}
