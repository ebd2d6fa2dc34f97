//! The owned, lazy, bounded cursors a scan merges: one per memtable, one per level-0 table overlapping the range,
//! one per deeper level (opening only the tables overlapping the range, in order). Each runs in one direction and
//! stops at the range's bound in that direction (ADR-0085).

use std::ops::Bound;
use std::sync::Arc;

use env::File;

use super::merge::{Direction, EntrySource};
use super::same_key;
use crate::error::Result;
use crate::memtable::Memtable;
use crate::ssi::KeyRange;
use crate::sstable::BlockCursor;
use crate::types::{Entry, Sequence};
use crate::version::{LiveTable, Version};
use crate::view::ReadView;

/// `key` lies past the range's bound in `direction` (at or after the end forward; before the start in reverse).
pub(crate) fn past_bound(bounds: &KeyRange, direction: Direction, key: &[u8]) -> bool {
    match direction {
        Direction::Forward => bounds.end.as_deref().is_some_and(|end| key >= end),
        Direction::Reverse => key < bounds.start.as_slice(),
    }
}

/// True when no key lies in `[min_key, max_key]` and the range both.
fn misses(bounds: &KeyRange, min_key: &[u8], max_key: &[u8]) -> bool {
    if crate::canary::active("scan-reads-every-table") {
        return false;
    }
    max_key < bounds.start.as_slice() || bounds.end.as_deref().is_some_and(|end| min_key >= end)
}

/// The sources of a scan of `view` over `bounds` at `snapshot` in `direction`, newest first.
pub(crate) fn sources<F: File>(
    view: &ReadView<F>,
    bounds: &Arc<KeyRange>,
    direction: Direction,
    snapshot: Sequence,
) -> Vec<EntrySource<'static>> {
    let mut sources: Vec<EntrySource<'static>> = Vec::new();
    for memtable in view.memtables() {
        let cursor = MemtableCursor {
            memtable: Arc::clone(memtable),
            bounds: Arc::clone(bounds),
            direction,
            snapshot,
            position: None,
            ended: false,
        };
        sources.push(Box::new(cursor));
    }
    for live in &view.version.levels[0] {
        if !misses(bounds, &live.meta.min_key, &live.meta.max_key) {
            sources.push(Box::new(TableCursor::new(Arc::clone(live), Arc::clone(bounds), direction, snapshot)));
        }
    }
    for (level, tables) in view.version.levels.iter().enumerate().skip(1) {
        if let Some(cursor) = LevelCursor::new(&view.version, level, tables, bounds, (direction, snapshot)) {
            sources.push(Box::new(cursor));
        }
    }
    sources
}

/// A memtable's versions in `bounds`, one direction, one per user key: its newest at or below the snapshot (the
/// only one a scan can return; older ones are skipped by the skiplist search, not read: a hot key's thousands of
/// versions cost one search). Owns its memtable and re-seeks from the last user key it returned (an `O(log n)`
/// search, no allocation for it).
struct MemtableCursor {
    memtable: Arc<Memtable>,
    bounds: Arc<KeyRange>,
    direction: Direction,
    snapshot: Sequence,
    /// The last user key returned: a buffer reused from entry to entry.
    position: Option<Vec<u8>>,
    ended: bool,
}

impl Iterator for MemtableCursor {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.ended {
            return None;
        }
        // Past every version of the last key: forward after its oldest (sequence 0), reverse before its newest.
        let from = match (&self.position, self.direction) {
            (Some(key), Direction::Forward) => Bound::Excluded((key.as_slice(), 0)),
            (Some(key), Direction::Reverse) => Bound::Excluded((key.as_slice(), Sequence::MAX)),
            (None, Direction::Forward) => Bound::Included((self.bounds.start.as_slice(), Sequence::MAX)),
            (None, Direction::Reverse) => match &self.bounds.end {
                Some(end) => Bound::Excluded((end.as_slice(), Sequence::MAX)),
                None => Bound::Unbounded,
            },
        };
        let entry = self.memtable.next_visible(from, self.direction, self.snapshot);
        let Some(entry) = entry.filter(|entry| !past_bound(&self.bounds, self.direction, &entry.key.user_key)) else {
            self.ended = true;
            return None;
        };
        let position = self.position.get_or_insert_with(Vec::new);
        position.clear();
        position.extend_from_slice(&entry.key.user_key);
        Some(Ok(entry))
    }
}

/// One table's versions in `bounds`, one direction: seeks with the block index (and its learned index), reads a
/// block at a time through the block cache, stops before a block wholly past the bound. Reverse decodes one block
/// at a time into its entries and returns them last first. Versions a scan at `snapshot` cannot return (above the
/// snapshot; forward, older than a key's version already returned; reverse, older than the newest visible one of
/// the same block) are passed over without copying. After an error it yields nothing more.
pub(crate) struct TableCursor<F: File> {
    live: Arc<LiveTable<F>>,
    bounds: Arc<KeyRange>,
    direction: Direction,
    snapshot: Sequence,
    /// Forward: the user key of the last entry returned (a reused buffer), and whether there is one.
    last: Vec<u8>,
    has_last: bool,
    /// Forward: the next block read seeks past every version of `last` (a hot key's versions are skipped by a seek
    /// through the index, not read).
    seek_past_last: bool,
    /// Forward: versions of `last` passed over so far (across blocks).
    skipped: usize,
    /// Forward: the next block to read. Reverse: one past it (0: none left). `None` before the first read.
    next_block: Option<usize>,
    forward: Option<BlockCursor>,
    /// Reverse: the current block's entries not yet returned, popped from the back.
    backward: Vec<Entry>,
    /// The current block lies wholly inside the bound in the direction (by the index's key range): its entries
    /// need no `past_bound` check each.
    block_inside: bool,
    ended: bool,
}

impl<F: File> TableCursor<F> {
    pub(crate) fn new(
        live: Arc<LiveTable<F>>,
        bounds: Arc<KeyRange>,
        direction: Direction,
        snapshot: Sequence,
    ) -> Self {
        let (last, has_last, backward) = (Vec::new(), false, Vec::new());
        Self {
            live,
            bounds,
            direction,
            snapshot,
            last,
            has_last,
            seek_past_last: false,
            skipped: 0,
            next_block: None,
            forward: None,
            backward,
            block_inside: false,
            ended: false,
        }
    }

    /// The first block to read: forward, the block holding the first version at or after the start; reverse, the
    /// block holding the last version before the end (one past it, as `next_block` counts in reverse).
    fn first_block(&self) -> usize {
        let table = &self.live.table;
        let block_count = table.data_block_count();
        match (self.direction, &self.bounds.end) {
            (Direction::Forward, _) => table.find_block(&self.bounds.start, Sequence::MAX).unwrap_or(block_count),
            (Direction::Reverse, Some(end)) => table.find_block(end, Sequence::MAX).map_or(block_count, |at| at + 1),
            (Direction::Reverse, None) => block_count,
        }
    }

    /// The next block in the direction, unless none is left or it lies wholly past the bound.
    fn take_block(&mut self) -> Option<usize> {
        let next = match self.next_block {
            Some(next) => next,
            None => self.first_block(),
        };
        let block = match self.direction {
            Direction::Forward => (next < self.live.table.data_block_count()).then_some(next)?,
            Direction::Reverse => next.checked_sub(1)?,
        };
        let (first_key, last_key) = self.live.table.block_user_key_range(block);
        let edge = if self.direction == Direction::Forward { first_key } else { last_key };
        if past_bound(&self.bounds, self.direction, edge) {
            return None;
        }
        let far_edge = if self.direction == Direction::Forward { last_key } else { first_key };
        self.block_inside = !past_bound(&self.bounds, self.direction, far_edge);
        self.next_block = Some(if self.direction == Direction::Forward { block + 1 } else { block });
        Some(block)
    }

    /// Read `block` into the cursor. The first forward block is sought to the start; every reverse block keeps
    /// only the entries before the end.
    fn load(&mut self, block: usize, first: bool) -> Result<()> {
        let loaded = self.live.table.load_block(block)?;
        match self.direction {
            Direction::Forward if first => {
                self.forward = Some(BlockCursor::seek(loaded, &self.bounds.start, Sequence::MAX));
            }
            Direction::Forward if std::mem::take(&mut self.seek_past_last) => {
                // The first entry at or after the key's oldest possible version: at most that one version of it.
                self.forward = Some(BlockCursor::seek(loaded, &self.last, 0));
            }
            Direction::Forward => self.forward = Some(BlockCursor::new(loaded)),
            Direction::Reverse => {
                let (end, snapshot) = (self.bounds.end.as_deref(), self.snapshot);
                let mut cursor = BlockCursor::new(loaded);
                // Per user key, its newest version at or below the snapshot in this block (entries come newest first).
                let (mut kept, mut has_kept) = (Vec::new(), false);
                let mut keep = |key: &[u8], sequence: Sequence| {
                    let wanted =
                        sequence <= snapshot && end.is_none_or(|end| key < end) && !(has_kept && same_key(&kept, key));
                    if wanted {
                        kept.clear();
                        kept.extend_from_slice(key);
                        has_kept = true;
                    }
                    wanted
                };
                self.backward.clear();
                while let Some(entry) = cursor.next_entry_where(&mut keep) {
                    self.backward.push(entry);
                }
            }
        }
        Ok(())
    }

    fn buffered(&mut self) -> Option<Entry> {
        match self.direction {
            Direction::Forward => {
                let (snapshot, last, has_last) = (self.snapshot, self.last.as_slice(), self.has_last);
                let skipped = &mut self.skipped;
                // Stops on an older version of the last key once `SKIPS_BEFORE_SEEK` were passed over: then seek.
                let keep = |key: &[u8], sequence: Sequence| {
                    if has_last && same_key(key, last) {
                        *skipped += 1;
                        return *skipped > SKIPS_BEFORE_SEEK;
                    }
                    sequence <= snapshot
                };
                let entry = self.forward.as_mut()?.next_entry_where(keep)?;
                // Only a version of the last key can be kept past `SKIPS_BEFORE_SEEK` skips (no second comparison).
                if std::mem::take(&mut self.skipped) > SKIPS_BEFORE_SEEK {
                    let table = &self.live.table;
                    let past = table.find_block(&self.last, 0).unwrap_or(table.data_block_count());
                    (self.next_block, self.forward, self.seek_past_last) = (Some(past), None, true);
                    return None;
                }
                self.last.clear();
                self.last.extend_from_slice(&entry.key.user_key);
                self.has_last = true;
                Some(entry)
            }
            Direction::Reverse => self.backward.pop(),
        }
    }
}

/// Versions of one key a forward table cursor passes over before it seeks past the key instead.
const SKIPS_BEFORE_SEEK: usize = 16;

impl<F: File> Iterator for TableCursor<F> {
    type Item = Result<Entry>;

    /// The common case, an entry of the current block, is the short path; else [`TableCursor::next_block_entry`].
    fn next(&mut self) -> Option<Result<Entry>> {
        if self.ended {
            return None;
        }
        match self.buffered() {
            Some(entry) => self.within_bound(entry).map(Ok),
            None => self.next_block_entry(),
        }
    }
}

impl<F: File> TableCursor<F> {
    /// `entry`, unless it lies past the bound (then the cursor ends).
    fn within_bound(&mut self, entry: Entry) -> Option<Entry> {
        if !self.block_inside && past_bound(&self.bounds, self.direction, &entry.key.user_key) {
            self.ended = true;
            return None;
        }
        Some(entry)
    }

    /// The current block is used up: read blocks until one holds an entry. A block may hold nothing the scan can
    /// return (versions above the snapshot, older versions of a key): the table's block count bounds the blocks
    /// read for one entry, plus one seek past a key's versions.
    fn next_block_entry(&mut self) -> Option<Result<Entry>> {
        for _ in 0..self.live.table.data_block_count() + 2 {
            let first = self.next_block.is_none();
            let Some(block) = self.take_block() else {
                self.ended = true;
                return None;
            };
            if let Err(error) = self.load(block, first) {
                self.ended = true;
                return Some(Err(error));
            }
            if let Some(entry) = self.buffered() {
                return self.within_bound(entry).map(Ok);
            }
        }
        unreachable!("a table cursor read more blocks than its table has")
    }
}

/// One level below 0 (sorted tables, no overlaps): opens only the tables overlapping `bounds`, one at a time, in
/// the direction's order. Found by a binary search of the level's key ranges.
struct LevelCursor<F: File> {
    version: Arc<Version<F>>,
    level: usize,
    bounds: Arc<KeyRange>,
    direction: Direction,
    snapshot: Sequence,
    /// Forward: the next table to open. Reverse: one past it.
    next_table: usize,
    current: Option<TableCursor<F>>,
}

impl<F: File> LevelCursor<F> {
    /// `None` when no table of the level overlaps the range.
    fn new(
        version: &Arc<Version<F>>,
        level: usize,
        tables: &[Arc<LiveTable<F>>],
        bounds: &Arc<KeyRange>,
        (direction, snapshot): (Direction, Sequence),
    ) -> Option<Self> {
        let next_table = match direction {
            Direction::Forward => tables.partition_point(|live| live.meta.max_key < bounds.start),
            Direction::Reverse => match &bounds.end {
                Some(end) => tables.partition_point(|live| live.meta.min_key < *end),
                None => tables.len(),
            },
        };
        let candidate = match direction {
            Direction::Forward => tables.get(next_table),
            Direction::Reverse => next_table.checked_sub(1).and_then(|index| tables.get(index)),
        }?;
        if misses(bounds, &candidate.meta.min_key, &candidate.meta.max_key) {
            return None;
        }
        let (version, bounds) = (Arc::clone(version), Arc::clone(bounds));
        Some(Self { version, level, bounds, direction, snapshot, next_table, current: None })
    }

    /// Open the next table in the direction, unless none is left or it lies wholly past the bound.
    fn open_next(&mut self) -> Option<TableCursor<F>> {
        let tables = &self.version.levels[self.level];
        let index = match self.direction {
            Direction::Forward => self.next_table,
            Direction::Reverse => self.next_table.checked_sub(1)?,
        };
        let live = tables.get(index)?;
        if misses(&self.bounds, &live.meta.min_key, &live.meta.max_key) {
            return None;
        }
        self.next_table = if self.direction == Direction::Forward { index + 1 } else { index };
        Some(TableCursor::new(Arc::clone(live), Arc::clone(&self.bounds), self.direction, self.snapshot))
    }
}

impl<F: File> Iterator for LevelCursor<F> {
    type Item = Result<Entry>;

    /// A table overlapping the range holds an entry in it unless the range falls in a gap between two of its
    /// keys, and then no other table of the level overlaps: the loop ends by the second table; the level's table
    /// count bounds it. The common case, an entry of the open table, is the short path.
    fn next(&mut self) -> Option<Result<Entry>> {
        if let Some(item) = self.current.as_mut().and_then(Iterator::next) {
            return Some(item);
        }
        for _ in 0..self.version.levels[self.level].len() {
            let opened = self.open_next()?;
            if let Some(item) = self.current.insert(opened).next() {
                return Some(item);
            }
        }
        None
    }
}
