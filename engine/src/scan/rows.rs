//! From versions to rows: [`VisibleRows`] keeps the newest version of each user key visible at the snapshot
//! (tombstones hide the key), in one direction; [`OwnWrites`] lays a transaction's own writes over them.

use std::collections::btree_map;

use super::merge::{Direction, MergeIter};
use super::same_key;
use crate::error::Result;
use crate::types::TRANSACTION_WRITES_MAX;
use crate::types::{Entry, Sequence, ValueKind};

/// A visible row: its key and value.
pub type Row = (Vec<u8>, Vec<u8>);

/// The rows of a merge, one direction, at a snapshot. After an error it yields nothing more.
pub(crate) struct VisibleRows<'a> {
    merge: MergeIter<'a>,
    direction: Direction,
    snapshot: Sequence,
    /// Forward: a version of the current user key (the merge's last) was taken: the key's older versions are
    /// skipped. The merge says when the user key changes (its sources yield one version per key, ADR-0091), so
    /// no key is copied or compared here.
    taken: bool,
    /// Reverse: the first version of the next user key, read while finishing the previous one.
    peeked: Option<Entry>,
    failed: bool,
}

impl<'a> VisibleRows<'a> {
    /// Forward, `merge` must be made by [`MergeIter::with_distinct_keys`].
    pub(crate) fn new(merge: MergeIter<'a>, direction: Direction, snapshot: Sequence) -> Self {
        Self { merge, direction, snapshot, taken: false, peeked: None, failed: false }
    }

    fn pull(&mut self) -> Option<Result<Entry>> {
        if let Some(entry) = self.peeked.take() {
            return Some(Ok(entry));
        }
        let item = self.merge.next();
        self.failed = matches!(item, Some(Err(_)));
        item
    }

    /// Forward: a user key's versions come newest first; the first at or below the snapshot decides it.
    fn next_forward(&mut self) -> Option<Result<Row>> {
        loop {
            let entry = match self.pull()? {
                Ok(entry) => entry,
                Err(error) => return Some(Err(error)),
            };
            self.taken &= self.merge.repeats_key();
            if entry.key.sequence > self.snapshot || self.taken {
                continue;
            }
            self.taken = true;
            if entry.kind == ValueKind::Put {
                return Some(Ok((entry.key.user_key, entry.value)));
            }
        }
    }

    /// Reverse: a user key's versions come oldest first; the last at or below the snapshot decides it, known once
    /// the next user key's first version is read (kept in `peeked`).
    fn next_reverse(&mut self) -> Option<Result<Row>> {
        loop {
            let mut best = match self.pull()? {
                Ok(entry) => entry,
                Err(error) => return Some(Err(error)),
            };
            loop {
                match self.pull() {
                    None => break,
                    Some(Err(error)) => return Some(Err(error)),
                    Some(Ok(entry)) if !same_key(&entry.key.user_key, &best.key.user_key) => {
                        self.peeked = Some(entry);
                        break;
                    }
                    Some(Ok(entry)) if entry.key.sequence <= self.snapshot => best = entry,
                    Some(Ok(_)) => {}
                }
            }
            if best.key.sequence <= self.snapshot && best.kind == ValueKind::Put {
                return Some(Ok((best.key.user_key, best.value)));
            }
        }
    }
}

impl Iterator for VisibleRows<'_> {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        if self.failed {
            return None;
        }
        match self.direction {
            Direction::Forward => self.next_forward(),
            Direction::Reverse => self.next_reverse(),
        }
    }
}

/// A transaction's own writes in the scanned range (`None`: a delete), laid over the snapshot's rows in one
/// direction: an own write replaces the row of its key, an own delete hides it.
pub(crate) struct OwnWrites<'txn> {
    writes: btree_map::Range<'txn, Vec<u8>, Option<Vec<u8>>>,
    direction: Direction,
    peeked_write: Option<(&'txn Vec<u8>, &'txn Option<Vec<u8>>)>,
    peeked_row: Option<Row>,
}

impl<'txn> OwnWrites<'txn> {
    pub(crate) fn new(writes: btree_map::Range<'txn, Vec<u8>, Option<Vec<u8>>>, direction: Direction) -> Self {
        Self { writes, direction, peeked_write: None, peeked_row: None }
    }

    /// The next row of `rows` with the own writes applied.
    pub(crate) fn next_row(&mut self, rows: &mut impl Iterator<Item = Result<Row>>) -> Option<Result<Row>> {
        // Each round returns a row or consumes one own delete: the write count bounds the rounds.
        for _ in 0..=TRANSACTION_WRITES_MAX {
            if self.peeked_row.is_none() {
                self.peeked_row = match rows.next() {
                    Some(Ok(row)) => Some(row),
                    Some(Err(error)) => return Some(Err(error)),
                    None => None,
                };
            }
            if self.peeked_write.is_none() {
                self.peeked_write = match self.direction {
                    Direction::Forward => self.writes.next(),
                    Direction::Reverse => self.writes.next_back(),
                };
            }
            let order = match (&self.peeked_row, self.peeked_write) {
                (None, None) => return None,
                (Some(_), None) => return self.peeked_row.take().map(Ok),
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(row), Some((key, _))) => self.direction.orient(row.0.as_slice().cmp(key.as_slice())),
            };
            if order == std::cmp::Ordering::Less {
                return self.peeked_row.take().map(Ok);
            }
            if order == std::cmp::Ordering::Equal {
                self.peeked_row = None;
            }
            let (key, write) = self.peeked_write.take().expect("an own write was compared");
            if let Some(value) = write {
                return Some(Ok((key.clone(), value.clone())));
            }
        }
        unreachable!("more own deletes than TRANSACTION_WRITES_MAX")
    }
}
