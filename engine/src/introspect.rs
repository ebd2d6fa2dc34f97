//! What the engine can tell a test harness about where its data lives (ADR-0069): each live file and the
//! range of user keys it may hold, so a simulator can excuse a damaged file's keys and check every other key
//! exactly.

use std::path::PathBuf;

use env::Env;

use crate::db::Db;

/// A live file and the smallest and largest user key it may hold (inclusive).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileKeyRange {
    pub path: PathBuf,
    pub min_key: Vec<u8>,
    pub max_key: Vec<u8>,
}

impl<E: Env> Db<E> {
    /// Every live table, with the key range its manifest record names, and every live log segment, with the key
    /// range of every unflushed memtable together (a commit appended to one segment may be applied to the next
    /// segment's memtable when a rotation falls between its append and its acknowledgement). Files holding no
    /// key are left out. Not on any hot path: for tests and the simulator.
    pub fn file_key_ranges(&self) -> Vec<FileKeyRange> {
        let state = self.inner.state();
        let mut out: Vec<FileKeyRange> = state
            .version
            .tables()
            .map(|live| FileKeyRange {
                // The path the table was opened by (`Inner::table_path` of its number): copied, not formatted.
                path: live.table.path().to_path_buf(),
                min_key: live.meta.min_key.clone(),
                max_key: live.meta.max_key.clone(),
            })
            .collect();
        let memtables = std::iter::once(&state.memtable).chain(state.immutables.iter().map(|i| &i.memtable));
        let mut range: Option<(Vec<u8>, Vec<u8>)> = None;
        for (low, high) in memtables.filter_map(|memtable| memtable.key_range()) {
            range = Some(match range {
                None => (low, high),
                Some((min, max)) => (min.min(low), max.max(high)),
            });
        }
        if let Some((min_key, max_key)) = range {
            let segments = std::iter::once(state.wal.number()).chain(state.immutables.iter().map(|i| i.wal_number));
            for number in segments {
                let path = self.inner.wal_path(number);
                out.push(FileKeyRange { path, min_key: min_key.clone(), max_key: max_key.clone() });
            }
        }
        out
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
