//! Versions (the live tables per level), merging iteration, the garbage-collection rule, compaction picking.

use std::sync::Arc;

use env::File;

use crate::error::Result;
use crate::manifest::{LEVELS, TableMeta};
use crate::sstable::Table;
use crate::types::{Entry, Lookup, Sequence, ValueKind};

/// A table in a version: its manifest record and its open reader.
#[derive(Debug)]
pub struct LiveTable<F: File> {
    pub meta: TableMeta,
    pub table: Table<F>,
}

/// An immutable snapshot of the tables per level. L0 is newest first (its tables may overlap); every deeper level
/// is sorted by key and its tables do not overlap, and a user key lives in at most one table per level.
#[derive(Debug)]
pub struct Version<F: File> {
    pub levels: Vec<Vec<Arc<LiveTable<F>>>>,
}

impl<F: File> Default for Version<F> {
    fn default() -> Self {
        Self { levels: (0..LEVELS).map(|_| Vec::new()).collect() }
    }
}

impl<F: File> Version<F> {
    /// Every table, level by level.
    pub fn tables(&self) -> impl Iterator<Item = &Arc<LiveTable<F>>> {
        self.levels.iter().flatten()
    }

    pub fn metas(&self) -> Vec<TableMeta> {
        self.tables().map(|live| live.meta.clone()).collect()
    }

    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|live| live.meta.size_bytes).sum()
    }

    /// Look `user_key` up at `snapshot`, newest source first; stops at the first Found or Deleted (ADR-0013).
    pub fn get(&self, user_key: &[u8], snapshot: Sequence) -> Result<Lookup> {
        for live in &self.levels[0] {
            if !covers(&live.meta, user_key) {
                continue;
            }
            match live.table.get(user_key, snapshot)? {
                Lookup::NotFound => continue,
                found => return Ok(found),
            }
        }
        for level in &self.levels[1..] {
            let index = level.partition_point(|live| live.meta.max_key.as_slice() < user_key);
            let Some(live) = level.get(index) else { continue };
            if !covers(&live.meta, user_key) {
                continue;
            }
            match live.table.get(user_key, snapshot)? {
                Lookup::NotFound => continue,
                found => return Ok(found),
            }
        }
        Ok(Lookup::NotFound)
    }

    /// A new version with `removed` file numbers taken out and `added` tables put in their levels.
    pub fn apply(&self, removed: &[u64], added: Vec<Arc<LiveTable<F>>>) -> Self {
        let mut levels: Vec<Vec<Arc<LiveTable<F>>>> = self
            .levels
            .iter()
            .map(|level| level.iter().filter(|t| !removed.contains(&t.meta.file_number)).cloned().collect())
            .collect();
        let kept: usize = levels.iter().map(Vec::len).sum();
        assert_eq!(kept + removed.len(), self.tables().count(), "removed a table that was not in the version");
        for live in added {
            levels[live.meta.level as usize].push(live);
        }
        levels[0].sort_by_key(|live| std::cmp::Reverse(live.meta.max_sequence));
        for level in &mut levels[1..] {
            level.sort_by(|a, b| a.meta.min_key.cmp(&b.meta.min_key));
        }
        Self { levels }
    }

    /// Structural invariants: level order, no overlap in levels >= 1, meta agrees with the table.
    pub fn check(&self, last_sequence: Sequence) -> std::result::Result<(), String> {
        for (level, tables) in self.levels.iter().enumerate() {
            for live in tables {
                let meta = &live.meta;
                if meta.level as usize != level || meta.min_key > meta.max_key || meta.max_sequence > last_sequence {
                    return Err(format!("table {} has a bad record {meta:?}", meta.file_number));
                }
                if live.table.min_user_key() != meta.min_key.as_slice()
                    || live.table.max_user_key() != meta.max_key.as_slice()
                {
                    return Err(format!("table {} key range disagrees with its manifest record", meta.file_number));
                }
            }
            for pair in tables.windows(2) {
                let (a, b) = (&pair[0].meta, &pair[1].meta);
                if level == 0 && a.max_sequence < b.max_sequence {
                    return Err(format!("L0 tables {} and {} out of sequence order", a.file_number, b.file_number));
                }
                if level > 0 && a.max_key >= b.min_key {
                    return Err(format!("L{level} tables {} and {} overlap", a.file_number, b.file_number));
                }
            }
        }
        Ok(())
    }
}

fn covers(meta: &TableMeta, user_key: &[u8]) -> bool {
    meta.min_key.as_slice() <= user_key && user_key <= meta.max_key.as_slice()
}

/// True when the two key ranges overlap.
pub fn overlaps(meta: &TableMeta, min_key: &[u8], max_key: &[u8]) -> bool {
    meta.min_key.as_slice() <= max_key && min_key <= meta.max_key.as_slice()
}

/// The versions compaction keeps of one user key, given newest-first `versions`:
/// every version newer than `watermark`, plus the newest at or below it (what the oldest live snapshot sees),
/// minus that one if it is a tombstone and nothing older can exist below (`is_bottom`). ADR-0016. In place:
/// `versions` is truncated to them (the compaction loop reuses its buffer from key to key, ADR-0135).
pub(crate) fn retain_versions(versions: &mut Vec<Entry>, watermark: Sequence, is_bottom: bool) {
    if let Some(at) = versions.iter().position(|entry| entry.key.sequence <= watermark) {
        let keeps_it = !(is_bottom && versions[at].kind == ValueKind::Delete);
        versions.truncate(at + usize::from(keeps_it));
    }
    debug_assert!(versions.windows(2).all(|pair| pair[0].key.sequence > pair[1].key.sequence));
}

/// What one compaction job does.
#[derive(Debug)]
pub struct CompactionPick<F: File> {
    pub inputs: Vec<Arc<LiveTable<F>>>,
    pub output_level: usize,
    /// The level the job compacts into `output_level` (`None`: a full compaction of every level), and how many of
    /// `inputs` are that level's (the rest overlap them in `output_level`).
    pub source_level: Option<usize>,
    pub source_tables: usize,
}

/// Pick the next compaction, if any is due: all of L0 once it has `l0_trigger` tables; else the first level over
/// its size budget. `force` picks something whenever L0 has a table (a BUGGIFY site).
pub fn pick_compaction<F: File>(
    version: &Version<F>,
    l0_trigger: usize,
    level1_size_bytes: u64,
    level_size_ratio: u64,
    force: bool,
) -> Option<CompactionPick<F>> {
    if version.levels[0].len() >= l0_trigger.max(1) || (force && !version.levels[0].is_empty()) {
        return Some(with_overlaps(version, version.levels[0].clone(), 0));
    }
    let mut budget = level1_size_bytes;
    for level in 1..LEVELS - 1 {
        if version.level_bytes(level) > budget {
            // One table of the level (ADR-0193): a job's size stays one table and what overlaps it below.
            let sources = if crate::canary::active("compaction-picks-whole-level") {
                version.levels[level].clone()
            } else {
                vec![version.levels[level][0].clone()]
            };
            return Some(with_overlaps(version, sources, level));
        }
        budget = budget.saturating_mul(level_size_ratio);
    }
    None
}

/// Every table of the whole version, into the last level.
pub fn pick_full<F: File>(version: &Version<F>) -> Option<CompactionPick<F>> {
    let inputs: Vec<Arc<LiveTable<F>>> = version.tables().cloned().collect();
    if inputs.is_empty() {
        return None;
    }
    let source_tables = inputs.len();
    Some(CompactionPick { inputs, output_level: LEVELS - 1, source_level: None, source_tables })
}

/// `inputs`, tables of `source_level`, and the tables of the level below that overlap them.
fn with_overlaps<F: File>(
    version: &Version<F>,
    mut inputs: Vec<Arc<LiveTable<F>>>,
    source_level: usize,
) -> CompactionPick<F> {
    let output_level = source_level + 1;
    assert!(!inputs.is_empty() && output_level < LEVELS, "empty compaction");
    let source_tables = inputs.len();
    let min_key = inputs.iter().map(|t| t.meta.min_key.clone()).min().expect("inputs");
    let max_key = inputs.iter().map(|t| t.meta.max_key.clone()).max().expect("inputs");
    for live in &version.levels[output_level] {
        if overlaps(&live.meta, &min_key, &max_key) {
            inputs.push(live.clone());
        }
    }
    CompactionPick { inputs, output_level, source_level: Some(source_level), source_tables }
}

/// True when no level below `output_level` holds a table overlapping the key range: tombstones can go.
pub fn is_bottom<F: File>(version: &Version<F>, output_level: usize, min_key: &[u8], max_key: &[u8]) -> bool {
    version.levels[output_level + 1..].iter().flatten().all(|live| !overlaps(&live.meta, min_key, max_key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::InternalKey;

    fn entry(key: &str, sequence: u64, kind: ValueKind) -> Entry {
        let value = if kind == ValueKind::Put { format!("{key}@{sequence}").into_bytes() } else { Vec::new() };
        Entry { key: InternalKey::new(key.as_bytes(), sequence), kind, value }
    }

    #[test]
    fn retain_keeps_what_snapshots_need_and_drops_bottom_tombstones() {
        let versions = vec![
            entry("a", 9, ValueKind::Put),
            entry("a", 7, ValueKind::Delete),
            entry("a", 4, ValueKind::Put),
            entry("a", 2, ValueKind::Put),
        ];
        let seqs = |mut kept: Vec<Entry>, watermark: Sequence, is_bottom: bool| {
            retain_versions(&mut kept, watermark, is_bottom);
            kept.iter().map(|e| e.key.sequence).collect::<Vec<_>>()
        };
        assert_eq!(seqs(versions.clone(), 9, false), vec![9]);
        assert_eq!(seqs(versions.clone(), 5, false), vec![9, 7, 4]);
        assert_eq!(seqs(versions.clone(), 7, false), vec![9, 7]);
        assert_eq!(seqs(versions.clone(), 7, true), vec![9]);
        assert_eq!(seqs(versions, 1, true), vec![9, 7, 4, 2]);
    }
}
