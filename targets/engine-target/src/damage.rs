//! Where damage can reach (ADR-0069): which keys each database file may have held over the run, so a
//! data-destroying fault excuses only the keys of the files it landed in ([`holdfast::Damage`]) and every other
//! key is still checked exactly.

use std::collections::BTreeMap;
use std::path::PathBuf;

use engine::Db;
use holdfast::Damage;
use holdfast::env::SimEnv;
use holdfast::kit::parse_key;

/// The most files the map remembers; past it, damage anywhere excuses every key (sound, only weaker).
pub const FILES_REMEMBERED_MAX: usize = 100_000;

/// For every database file ever seen live, the union of the key ranges (inclusive) it was seen holding.
#[derive(Clone, Debug, Default)]
pub struct FileKeys {
    ranges: BTreeMap<PathBuf, (u32, u32)>,
    overflowed: bool,
}

impl FileKeys {
    /// Add what the open database's live files hold now. Called after every step and every recovery, so a
    /// file's range covers every key it held at a step boundary.
    pub fn record(&mut self, db: &Db<SimEnv>) {
        for file in db.file_key_ranges() {
            let low = parse_key(&file.min_key).unwrap_or(0);
            let high = parse_key(&file.max_key).unwrap_or(u32::MAX);
            if self.ranges.len() >= FILES_REMEMBERED_MAX && !self.ranges.contains_key(&file.path) {
                self.overflowed = true;
                continue;
            }
            let range = self.ranges.entry(file.path).or_insert((low, high));
            *range = (range.0.min(low), range.1.max(high));
        }
    }

    /// May `damage` have destroyed or hidden `key`'s data? A damaged file never seen live (a manifest, a table
    /// cut before it was installed) may have held anything.
    pub fn excuses(&self, damage: &Damage, key: u32) -> bool {
        match damage {
            Damage::None => false,
            Damage::Files(_) if self.overflowed => true,
            Damage::Files(files) => files.iter().any(|file| match self.ranges.get(file) {
                Some(&(low, high)) => (low..=high).contains(&key),
                None => true,
            }),
            // Damage::Anywhere, and any finer kind a later framework adds: every key.
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn damage_excuses_only_the_keys_its_files_held() {
        let mut keys = FileKeys::default();
        keys.ranges.insert("/db/table-000007.sst".into(), (10, 20));
        keys.ranges.insert("/db/wal-000009.log".into(), (30, 30));
        let table = Damage::Files(BTreeSet::from([PathBuf::from("/db/table-000007.sst")]));
        assert!(keys.excuses(&table, 10) && keys.excuses(&table, 20));
        assert!(!keys.excuses(&table, 9) && !keys.excuses(&table, 21) && !keys.excuses(&table, 30));
        let unknown = Damage::Files(BTreeSet::from([PathBuf::from("/db/MANIFEST")]));
        assert!(keys.excuses(&unknown, 0) && keys.excuses(&unknown, 1_000));
        assert!(!keys.excuses(&Damage::None, 15));
        assert!(keys.excuses(&Damage::Anywhere, 15));
    }
}
