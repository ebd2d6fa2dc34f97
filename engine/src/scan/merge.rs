//! [`MergeIter`]: merges sources of versions, each in internal-key order (or each in reverse internal-key order),
//! into one order. Compaction merges forward; a scan's back end merges in reverse (ADR-0085).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::error::{Error, Result};
use crate::types::{Entry, Sequence, compare_internal};

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
/// `next`, and each `next` reads one entry from the source it popped.
pub struct MergeIter<'a> {
    sources: Vec<EntrySource<'a>>,
    heap: BinaryHeap<HeapItem>,
    direction: Direction,
    /// The last key returned: its user key (a buffer reused from row to row) and sequence.
    last: Option<(Vec<u8>, Sequence)>,
    primed: bool,
    /// A refill's error, returned after the entry popped before it.
    pending: Option<Error>,
    failed: bool,
}

impl<'a> MergeIter<'a> {
    /// A forward merge (ascending internal keys).
    pub fn new(sources: Vec<EntrySource<'a>>) -> Self {
        Self::with_direction(sources, Direction::Forward)
    }

    pub fn with_direction(sources: Vec<EntrySource<'a>>, direction: Direction) -> Self {
        assert!(sources.len() <= MERGE_SOURCES_MAX, "too many merge sources");
        Self { sources, heap: BinaryHeap::new(), direction, last: None, primed: false, pending: None, failed: false }
    }

    fn refill(&mut self, source: usize) -> Result<()> {
        if let Some(next) = self.sources[source].next() {
            self.heap.push(HeapItem { entry: next?, source, direction: self.direction });
        }
        Ok(())
    }

    fn prime(&mut self) -> Result<()> {
        self.primed = true;
        for source in 0..self.sources.len() {
            self.refill(source)?;
        }
        Ok(())
    }

    /// Remember `entry` as the last returned; false if it repeats the last one (a duplicate to skip).
    fn advance_last(&mut self, entry: &Entry) -> bool {
        let (user_key, sequence) = (entry.key.user_key.as_slice(), entry.key.sequence);
        let Some(last) = &mut self.last else {
            self.last = Some((user_key.to_vec(), sequence));
            return true;
        };
        let order = self.direction.orient(compare_internal(&last.0, last.1, user_key, sequence));
        if order == Ordering::Equal {
            return false;
        }
        assert_eq!(order, Ordering::Less, "merge produced keys out of order");
        last.0.clear();
        last.0.extend_from_slice(user_key);
        last.1 = sequence;
        true
    }
}

impl Iterator for MergeIter<'_> {
    type Item = Result<Entry>;

    /// A source's error comes after the entry whose refill met it, and the merge yields nothing after the error.
    fn next(&mut self) -> Option<Result<Entry>> {
        if let Some(error) = self.pending.take() {
            self.failed = true;
            return Some(Err(error));
        }
        if self.failed {
            return None;
        }
        if !self.primed
            && let Err(error) = self.prime()
        {
            self.failed = true;
            return Some(Err(error));
        }
        loop {
            let item = self.heap.pop()?;
            if let Err(error) = self.refill(item.source) {
                self.pending = Some(error);
            }
            if self.advance_last(&item.entry) {
                return Some(Ok(item.entry));
            }
            if let Some(error) = self.pending.take() {
                self.failed = true;
                return Some(Err(error));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{InternalKey, ValueKind};

    fn entry(key: &str, sequence: u64) -> Result<Entry> {
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
        let newer = vec![entry("a", 5), entry("c", 6)];
        let older = vec![entry("a", 5), entry("a", 3), entry("b", 1)];
        let forward = vec![("a".into(), 5), ("a".into(), 3), ("b".into(), 1), ("c".into(), 6)];
        assert_eq!(merged(Direction::Forward, newer.clone(), older.clone()), forward);
        let reverse_of = |entries: Vec<Result<Entry>>| entries.into_iter().rev().collect::<Vec<_>>();
        let backward = merged(Direction::Reverse, reverse_of(newer), reverse_of(older));
        assert_eq!(backward, forward.into_iter().rev().collect::<Vec<_>>());
    }

    #[test]
    fn an_error_ends_the_merge() {
        let failing: Vec<Result<Entry>> = vec![entry("a", 1), Err(Error::Closed { reason: "test".into() })];
        let sources: Vec<EntrySource<'_>> =
            vec![Box::new(failing.into_iter()), Box::new(vec![entry("b", 2)].into_iter())];
        let results: Vec<bool> = MergeIter::new(sources).map(|item| item.is_ok()).collect();
        assert_eq!(results, vec![true, false], "the entry before the error, the error, nothing after it");
    }
}
