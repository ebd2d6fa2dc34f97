//! What the engine can tell a test harness about where its data lives (ADR-0069): each live file and the
//! range of user keys it may hold, so a simulator can excuse a damaged file's keys and check every other key
//! exactly.

use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use env::Env;

use crate::db::Db;
use crate::error::Result;
use crate::memtable::KeyBound;
use crate::scan::{ScanIter, key_range};
use crate::version::{LiveTable, Version};
use crate::view::{ReadView, ViewSources};

/// A live file and the smallest and largest user key it may hold (inclusive).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileKeyRange {
    pub path: PathBuf,
    pub min_key: Vec<u8>,
    pub max_key: Vec<u8>,
}

/// The live tables a scan passed over ([`Db::scan_skipping`]): which keys its rows may be missing a version of.
pub struct SkippedTables<F: env::File> {
    tables: Vec<Arc<LiveTable<F>>>,
}

impl<F: env::File> SkippedTables<F> {
    /// Whether a skipped table may hold a version of `key` (its key range and Bloom filter, the checks a point read
    /// makes before it reads a block). When none may, the scan's rows hold exactly what a point read of `key` in
    /// the scan's view returns.
    pub fn may_hold(&self, key: &[u8]) -> bool {
        self.tables.iter().any(|live| live.table.may_contain(key))
    }

    /// How many live tables the scan passed over (a path naming no live table is not counted).
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    /// True when the scan passed over no table.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}

impl<F: env::File> std::fmt::Debug for SkippedTables<F> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_list().entries(self.tables.iter().map(|live| live.table.path())).finish()
    }
}

impl<E: Env> Db<E> {
    /// The block cache's blocks and its shard capacity (a block above it is never cached): the simulator's cost
    /// contract checks that a point read which missed leaves a block behind (ADR-0184). Not on any hot path.
    pub fn block_cache_blocks(&self) -> (usize, usize) {
        (self.inner.cache.block_count(), self.inner.cache.shard_capacity_bytes())
    }

    /// How many point reads the live tables' Bloom filters answered "absent", summed over the tables since each
    /// was opened (`TableStats::bloom_negatives`): the simulator compares it before and after one point read to
    /// learn how many tables' filters ruled the key out (its cost contract, ADR-0184). Not on any hot path.
    pub fn bloom_negatives(&self) -> u64 {
        let state = self.inner.state();
        state.version.tables().map(|live| live.table.stats().bloom_negatives).sum()
    }

    /// Every live table, with the key range its manifest record names, and every live log segment, with the key
    /// range of every unflushed memtable together (a commit appended to one segment may be applied to the next
    /// segment's memtable when a rotation falls between its append and its acknowledgement). Files holding no
    /// key are left out. Not on any hot path: for tests and the simulator. The list
    /// [`Db::visit_file_key_ranges`] visits, owned.
    pub fn file_key_ranges(&self) -> Vec<FileKeyRange> {
        let mut out = Vec::new();
        self.visit_file_key_ranges(|path, min_key, max_key| {
            out.push(FileKeyRange { path: path.to_path_buf(), min_key: min_key.to_vec(), max_key: max_key.to_vec() });
        });
        out
    }

    /// Call `visit(path, min_key, max_key)` for each entry of [`Db::file_key_ranges`], in its order, with borrowed
    /// paths and keys: a simulator compares them with the list it holds after every step and copies only an entry
    /// that changed (ADR-0147), where building the owned list was most of that step's bookkeeping. `visit` runs
    /// under the engine's state lock: it must not call into this database.
    pub fn visit_file_key_ranges(&self, mut visit: impl FnMut(&Path, &[u8], &[u8])) {
        let state = self.inner.state();
        for live in state.version.tables() {
            // The path the table was opened by (`Inner::table_path` of its number): borrowed, not formatted.
            visit(live.table.path(), &live.meta.min_key, &live.meta.max_key);
        }
        // The keys borrowed from the memtables' skiplist ends and the segments' paths from their open files: no
        // copy and no formatted path per step (ADR-0158).
        let memtables = std::iter::once(&state.memtable).chain(state.immutables.iter().map(|i| &i.memtable));
        let mut range: Option<(KeyBound<'_>, KeyBound<'_>)> = None;
        for (low, high) in memtables.filter_map(|memtable| memtable.key_bounds()) {
            range = Some(match range {
                None => (low, high),
                Some((min, max)) => (
                    if low.user_key() < min.user_key() { low } else { min },
                    if high.user_key() > max.user_key() { high } else { max },
                ),
            });
        }
        if let Some((min_key, max_key)) = range {
            let segments =
                std::iter::once(state.wal.path()).chain(state.immutables.iter().map(|i| i.wal_path.as_path()));
            for path in segments {
                visit(path, min_key.user_key(), max_key.user_key());
            }
        }
    }

    /// A scan of the live rows in `range`, as [`Db::scan`], over every source but the live tables whose paths are in
    /// `skipped` (a simulator's verification passes over a table with a damaged block, and point-reads only the
    /// keys that table may hold: [`SkippedTables::may_hold`], ADR-0142). The skipped tables are those of the
    /// scan's own view. Not on any hot path: for tests and the simulator.
    pub fn scan_skipping<'a>(
        &self,
        range: impl RangeBounds<&'a [u8]>,
        skipped: &[PathBuf],
    ) -> Result<(ScanIter<'static>, SkippedTables<E::File>)> {
        let view = self.inner.read_view()?;
        let is_skipped = |live: &Arc<LiveTable<E::File>>| skipped.iter().any(|path| path == live.table.path());
        let skipped_tables: Vec<_> = view.version.tables().filter(|live| is_skipped(live)).cloned().collect();
        let levels = view.version.levels.iter();
        let levels = levels.map(|tables| tables.iter().filter(|live| !is_skipped(live)).cloned().collect()).collect();
        let sources = ViewSources {
            memtable: Arc::clone(&view.memtable),
            immutables: view.immutables.clone(),
            version: Arc::new(Version { levels }),
            closed: view.closed.clone(),
        };
        let passed = ReadView::new(Arc::new(sources), view.last_sequence);
        let rows = ScanIter::new(&passed, key_range(&range), view.last_sequence, None, None);
        Ok((rows, SkippedTables { tables: skipped_tables }))
    }

    /// Whether the transaction registry is consistent: the conflict tracker's index equals one rebuilt from its
    /// records (ADR-0123). Part of [`Db::check_invariants`]; a target whose step cannot change the files (a begin,
    /// a read) calls it alone, so a drift is seen at the step that made it. A walk over every tracked
    /// transaction: for tests and the simulator, not a hot path.
    pub fn check_transactions(&self) -> std::result::Result<(), String> {
        self.inner.registry().tracker.check_index()
    }
}

#[cfg(test)]
mod tests {
    use crate::{Db, Options};

    /// `check_invariants`' file checks, one pass over the listing with the live tables marked in bits (ADR-0160),
    /// report what building the two lists did, in the same order: a live table missing on disk before a leaked
    /// table file, and that before a leaked log segment; a directory holding only live files passes.
    #[test]
    fn file_checks_name_a_missing_table_before_a_leaked_table_before_a_leaked_log() {
        use env::{Env, OpenOptions};
        let env = env::SimEnv::new(17);
        let db = Db::open(env.clone(), "/db", Options::default()).unwrap();
        for round in 0..3u32 {
            db.put(format!("key{round}").as_bytes(), b"v").unwrap();
            db.flush().unwrap();
        }
        env.run_tasks(10_000);
        db.check_invariants().unwrap();
        let create = |name: &str| drop(env.open(&db.dir().join(name), OpenOptions::create_new()).unwrap());
        create("wal-000900.log");
        assert_eq!(db.check_invariants().unwrap_err(), "leaked log segment wal-000900.log");
        create("table-000901.sst");
        assert_eq!(db.check_invariants().unwrap_err(), "leaked table file table-000901.sst");
        let live: Vec<u64> = db.inner.state().version.tables().map(|live| live.meta.file_number).collect();
        assert_eq!(live.len(), 3, "{live:?}");
        env.remove_file(&db.inner.table_path(live[1])).unwrap();
        let missing = format!("table {} is in the manifest but missing on disk", live[1]);
        assert_eq!(db.check_invariants().unwrap_err(), missing);
        env.remove_file(&db.dir().join("table-000901.sst")).unwrap();
        env.remove_file(&db.dir().join("wal-000900.log")).unwrap();
        assert_eq!(db.check_invariants().unwrap_err(), missing, "still missing");
    }

    /// The live-table marks are zeroed words on the stack for up to 256 tables, and a zeroed spill beyond.
    #[test]
    fn live_marks_fit_inline_and_spill_beyond() {
        let (mut inline, mut spilled) = ([u64::MAX; 4], Vec::new());
        assert_eq!(crate::db::live_marks(&mut inline, &mut spilled, 0), &[] as &[u64]);
        assert_eq!(crate::db::live_marks(&mut inline, &mut spilled, 65), &[0, 0]);
        assert_eq!(crate::db::live_marks(&mut inline, &mut spilled, 256), &[0; 4]);
        assert!(spilled.is_empty(), "no spill up to 256 tables");
        assert_eq!(crate::db::live_marks(&mut inline, &mut spilled, 257), &[0; 5]);
        assert_eq!(spilled.len(), 5);
    }

    /// The log segments' entries, borrowed (ADR-0158), are what formatting each segment's path and copying every
    /// memtable's smallest and largest user key gave: the live segment and each immutable memtable's, named by
    /// their numbered paths, with the key range of every unflushed memtable together, through rotations, flushes
    /// and deletes.
    #[test]
    fn log_ranges_name_numbered_paths_and_span_every_unflushed_memtable() {
        let env = env::SimEnv::new(13);
        let options = Options { flush_threshold_bytes: 512, ..Options::default() };
        let db = Db::open(env.clone(), "/db", options).unwrap();
        let mut with_immutables = 0;
        for index in 0..300u32 {
            let key = format!("key{:04}", index * 37 % 211);
            if index % 9 == 4 {
                db.delete(key.as_bytes()).unwrap()
            } else {
                db.put(key.as_bytes(), &[b'v'; 24]).unwrap()
            }
            if index % 50 == 49 {
                env.run_tasks(1000);
            }
            let expected = {
                let state = db.inner.state();
                with_immutables += usize::from(!state.immutables.is_empty());
                let memtables = std::iter::once(&state.memtable).chain(state.immutables.iter().map(|i| &i.memtable));
                let keys: Vec<Vec<u8>> = memtables.flat_map(|m| m.entries().map(|e| e.key.user_key)).collect();
                let numbers = std::iter::once(state.wal.number()).chain(state.immutables.iter().map(|i| i.wal_number));
                let paths: Vec<_> = numbers.map(|number| db.inner.wal_path(number)).collect();
                match (keys.iter().min(), keys.iter().max()) {
                    (Some(min), Some(max)) => paths.into_iter().map(|path| (path, min.clone(), max.clone())).collect(),
                    _ => Vec::new(),
                }
            };
            let logs: Vec<_> = db
                .file_key_ranges()
                .into_iter()
                .filter(|range| range.path.to_string_lossy().contains("/wal-"))
                .map(|range| (range.path, range.min_key, range.max_key))
                .collect();
            assert_eq!(logs, expected, "step {index}");
        }
        assert!(with_immutables > 10, "rotations left memtables unflushed at {with_immutables} steps");
    }

    /// Each table's range is named by the path its number formats to (the table's own path, copied: ADR-0135), and
    /// a recovered database names them the same way.
    #[test]
    fn table_ranges_are_named_by_their_numbered_paths() {
        let env = env::SimEnv::new(11);
        let options = Options { flush_threshold_bytes: 1024, ..Options::default() };
        let db = Db::open(env.clone(), "/db", options.clone()).unwrap();
        for index in 0..200u32 {
            db.put(format!("key{index:04}").as_bytes(), &[b'v'; 32]).unwrap();
        }
        db.flush().unwrap();
        for reopened in [false, true] {
            let db = if reopened { Db::open(env.clone(), "/db", options.clone()).unwrap() } else { db.clone() };
            let state = db.inner.state();
            let tables: Vec<_> =
                state.version.tables().map(|live| db.inner.table_path(live.meta.file_number)).collect();
            drop(state);
            assert!(!tables.is_empty(), "the flush wrote a table");
            let ranges = db.file_key_ranges();
            let named: Vec<_> = ranges.iter().take(tables.len()).map(|range| range.path.clone()).collect();
            assert_eq!(named, tables, "reopened: {reopened}");
            if !reopened {
                db.close().unwrap();
            }
        }
    }

    /// A scan passing over a table answers every key that table cannot hold (by its range and Bloom filter)
    /// exactly as a point read does, newer versions, older ones and tombstones alike; passing over no live table is
    /// the plain scan (ADR-0142).
    #[test]
    fn a_scan_passing_over_a_table_agrees_with_point_reads_where_the_table_holds_nothing() {
        let db = Db::open(env::SimEnv::new(7), "/db", Options::default()).unwrap();
        let key = |index: u32| format!("key{index:04}").into_bytes();
        // Three tables: every key, then every third key rewritten, then every fifth key deleted.
        for round in 0..3u32 {
            for index in
                (0..120u32).filter(|index| [1, 3, 5][round as usize] == 1 || index % [1, 3, 5][round as usize] == 0)
            {
                match round {
                    2 => db.delete(&key(index)).unwrap(),
                    _ => db.put(&key(index), format!("v{round}-{index}").as_bytes()).unwrap(),
                }
            }
            db.flush().unwrap();
        }
        let tables: Vec<_> = db
            .file_key_ranges()
            .into_iter()
            .map(|range| range.path)
            .filter(|path| path.file_name().is_some_and(|name| name.to_string_lossy().starts_with("table-")))
            .collect();
        assert!(tables.len() >= 2, "the flushes wrote tables: {tables:?}");
        let plain: Vec<_> = db.scan(&b""[..]..).unwrap().map(Result::unwrap).collect();
        let (rows, passed) = db.scan_skipping(&b""[..].., &[std::path::PathBuf::from("/db/none.sst")]).unwrap();
        assert!(passed.is_empty(), "{passed:?}");
        assert_eq!(rows.map(Result::unwrap).collect::<Vec<_>>(), plain, "passing over no live table");
        let (mut exact, mut held, mut differ) = (0, 0, 0);
        for table in &tables {
            let (rows, passed) = db.scan_skipping(&b""[..].., std::slice::from_ref(table)).unwrap();
            assert_eq!(passed.len(), 1, "{table:?}");
            let rows: std::collections::BTreeMap<_, _> = rows.map(Result::unwrap).collect();
            for index in 0..120u32 {
                if passed.may_hold(&key(index)) {
                    held += 1;
                    differ += usize::from(rows.get(&key(index)).cloned() != db.get(&key(index)).unwrap());
                } else {
                    assert_eq!(rows.get(&key(index)).cloned(), db.get(&key(index)).unwrap(), "{table:?} {index}");
                    exact += 1;
                }
            }
        }
        assert!(exact > 0 && held > 0, "{exact} keys answered by the scans, {held} held by a table passed over");
        assert!(differ > 0, "passing over a table hides its newer versions and tombstones from the rows");
    }

    /// A table with a damaged data block fails a plain scan, naming the table; a scan passing over it reads every
    /// other source to the end, and only keys the table may hold are left to point reads (ADR-0142).
    #[test]
    fn a_scan_passes_over_a_table_with_a_damaged_block() {
        let env = env::SimEnv::new(9);
        let options = Options { block_cache_bytes: 0, ..Options::default() };
        let db = Db::open(env.clone(), "/db", options).unwrap();
        let key = |index: u32| format!("key{index:04}").into_bytes();
        for index in (0..60u32).step_by(6) {
            db.put(&key(index), b"old").unwrap();
        }
        db.flush().unwrap();
        let damaged = db.file_key_ranges().into_iter().map(|range| range.path).next().expect("a table");
        for index in (0..60u32).filter(|index| index % 6 != 0) {
            db.put(&key(index), b"new").unwrap();
        }
        env.inject(env::ExplicitFault::FlipBit { path: damaged.clone(), offset: 8 });
        let failed = db.scan(&b""[..]..).unwrap().find_map(Result::err).expect("the damaged block fails the scan");
        assert!(matches!(&failed, crate::Error::Corruption { file, .. } if *file == damaged), "{failed}");
        let (rows, passed) = db.scan_skipping(&b""[..].., std::slice::from_ref(&damaged)).unwrap();
        let rows: Vec<_> = rows.collect::<crate::Result<_>>().expect("no other source is damaged");
        let expected: Vec<_> =
            (0..60u32).filter(|index| index % 6 != 0).map(|index| (key(index), b"new".to_vec())).collect();
        assert_eq!(rows, expected);
        let held: Vec<u32> = (0..60u32).filter(|&index| passed.may_hold(&key(index))).collect();
        assert!((0..60u32).step_by(6).all(|index| held.contains(&index)), "every key it holds: {held:?}");
        assert!(held.len() < 60, "the Bloom filter rules keys out: {held:?}");
    }

    /// A planted drift of the conflict tracker's index (an active transaction unindexed) fails both checks the
    /// simulator runs after a step, and nothing else does.
    #[test]
    fn a_drifted_tracker_index_fails_the_invariant_check() {
        let db = Db::open(env::SimEnv::new(5), "/db", Options::default()).unwrap();
        db.put(b"k", b"v").unwrap();
        let mut txn = db.begin().unwrap();
        assert_eq!(txn.get(b"k").unwrap(), Some(b"v".to_vec()));
        db.check_invariants().unwrap();
        db.check_transactions().unwrap();
        db.inner.registry().tracker.corrupt_index_for_test();
        let drift = db.check_transactions().unwrap_err();
        assert!(drift.contains("index drifted from its"), "{drift}");
        assert_eq!(db.check_invariants().unwrap_err(), drift, "check_invariants runs the same check");
        // Ending the transaction would meet the drift again in the tracker's per-call test check (a panic).
        std::mem::forget(txn);
    }
}
