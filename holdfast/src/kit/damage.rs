//! Which keys a data-destroying fault excuses, and until when (ADR-0069, ADR-0101): the one copy of the per-key
//! damage rule that key-value targets share. The framework's [`World`](crate::World) says *where* damage landed
//! ([`Damage`]); the target says which keys each file held ([`DamageExcuses::record`]) and which writes were
//! acknowledged ([`DamageExcuses::acknowledged`]); [`DamageExcuses::excuses`] answers per key.
//!
//! # The rule
//!
//! A key is excused — a read of it may return any value it ever had, or none — when a damaged file may hold the
//! version the read should return:
//!
//! * every damaged file is an *event*, numbered in the order it was first seen damaged;
//! * an event excuses a key when the file was seen live holding a key range that covers it (the union over the
//!   run). A damaged file never seen live holding keys (a `MANIFEST`, a table cut before its install, an empty
//!   log segment) excuses no key: its damage must surface as an error (a refusal naming the file) or not at all;
//! * an acknowledged write of the key that cannot have landed in a damaged file (the target names the files it
//!   may have landed in: its live log segments) ends the excuse of every event seen so far, for reads at or
//!   after the write's sequence. The new version shadows every older one, and a damaged file that held only older
//!   versions can make a read or a merge fail, never bring an older version back (checksums turn damage into
//!   errors). A later event excuses the key again if its file held it.
//!
//! `damage` is always the run's own ([`World::damage`](crate::World::damage)), which only grows: files are added
//! to it, or it becomes [`Damage::Anywhere`].
//!
//! Damage with no known file ([`Damage::Anywhere`]) excuses every key for the rest of the run, and so does a map
//! that outgrew [`FILES_REMEMBERED_MAX`]: sound, only weaker.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use super::parse_key;
use crate::world::Damage;

/// The most files the map remembers; past it, damage anywhere excuses every key (sound, only weaker).
pub const FILES_REMEMBERED_MAX: usize = 100_000;
/// The most keys whose excuse an acknowledged write ended are remembered; past it a write ends no excuse (sound).
pub const KEYS_CLEARED_MAX: usize = 1_000_000;

/// Where a key's excuses ended: the events seen when it was last written cleanly, and that write's sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cleared {
    events: usize,
    sequence: u64,
}

/// The per-key damage rule of one run (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct DamageExcuses {
    /// For every file ever seen live, the union of the key ranges (inclusive) it was seen holding. Keyed by the
    /// path's bytes, not `PathBuf`: a lookup per live file per step compared paths component by component, a
    /// tenth of an engine swarm's time (ADR-0114). Paths come from one place (the target's `Path::join`s) in one
    /// spelling.
    ranges: BTreeMap<OsString, (u32, u32)>,
    overflowed: bool,
    /// Damaged files (their path's bytes), each with its event number (the order in which it was first seen
    /// damaged).
    events: BTreeMap<OsString, usize>,
    /// Damage landed where no file is known.
    anywhere: bool,
    /// How many damaged files the last `learn` walked.
    files_learned: usize,
    /// The range of each event's file, by event number (None: the file was never seen holding keys), as `ranges`
    /// and `events` say; rebuilt when either changed (`held_stale`). `excuses` runs once per key read, and looking
    /// each damaged file's path up in `ranges` for every key was 2.4 % of an engine swarm's instructions
    /// (ADR-0137).
    held_by_event: Vec<Option<(u32, u32)>>,
    held_stale: bool,
    /// Keys written cleanly after damage.
    cleared: BTreeMap<u32, Cleared>,
}

impl DamageExcuses {
    /// Add that the live file `path` holds keys from `min_key` to `max_key` (rendered keys; one that does not
    /// parse widens the range to the end of the key space). Call it for every live file after every step that
    /// can change the files, after every recovery, and before the system is dropped, so a file's range covers
    /// every key it held at a step boundary or before a recovery could delete it (a log segment written, damaged
    /// and deleted within one step, ADR-0206).
    pub fn record(&mut self, path: &Path, min_key: &[u8], max_key: &[u8]) {
        let low = parse_key(min_key).unwrap_or(0);
        let high = parse_key(max_key).unwrap_or(u32::MAX);
        if let Some(range) = self.ranges.get_mut(path.as_os_str()) {
            let widened = (range.0.min(low), range.1.max(high));
            self.held_stale |= widened != *range;
            *range = widened;
        } else if self.ranges.len() >= FILES_REMEMBERED_MAX {
            self.overflowed = true;
        } else {
            self.ranges.insert(path.as_os_str().to_owned(), (low, high));
            self.held_stale = true;
        }
    }

    /// Number the damaged files not seen before. A run's damage only grows (files are added, or it becomes
    /// `Anywhere`), so a set of the size learned last is that set: asked once per key read, it is not walked again
    /// (ADR-0126).
    fn learn(&mut self, damage: &Damage) {
        match damage {
            Damage::None => {}
            Damage::Files(files) if files.len() == self.files_learned => {}
            Damage::Files(files) => {
                self.files_learned = files.len();
                for file in files {
                    if !self.events.contains_key(file.as_os_str()) {
                        self.events.insert(file.as_os_str().to_owned(), self.events.len());
                        self.held_stale = true;
                    }
                }
            }
            // Damage::Anywhere, and any finer kind a later framework adds.
            _ => self.anywhere = true,
        }
    }

    /// A write of `key` at `sequence` was acknowledged; `landed_in` are the files it may have been written to
    /// (the live log segments). Unless one of them is damaged, the key's excuses so far end for reads at or
    /// after `sequence`. Returns whether they ended.
    pub fn acknowledged<'a>(
        &mut self,
        damage: &Damage,
        key: u32,
        sequence: u64,
        landed_in: impl IntoIterator<Item = &'a Path>,
    ) -> bool {
        self.learn(damage);
        if self.events.is_empty() || self.anywhere {
            return false;
        }
        if landed_in.into_iter().any(|file| self.events.contains_key(file.as_os_str())) {
            return false;
        }
        if self.cleared.len() >= KEYS_CLEARED_MAX && !self.cleared.contains_key(&key) {
            return false;
        }
        self.cleared.insert(key, Cleared { events: self.events.len(), sequence });
        true
    }

    /// May damage have destroyed or hidden the version of `key` a read at `snapshot` (`u64::MAX`: the latest)
    /// should return?
    pub fn excuses(&mut self, damage: &Damage, key: u32, snapshot: u64) -> bool {
        self.learn(damage);
        if self.events.is_empty() && !self.anywhere {
            return false;
        }
        if self.anywhere || self.overflowed {
            return true;
        }
        let from = match self.cleared.get(&key) {
            Some(cleared) if snapshot >= cleared.sequence => cleared.events,
            _ => 0,
        };
        if self.held_stale {
            self.held_by_event = self.held_by_event();
            self.held_stale = false;
        }
        let later = self.held_by_event.get(from..).unwrap_or_default();
        later.iter().flatten().any(|&(low, high)| (low..=high).contains(&key))
    }

    /// The range each event's file was seen live holding, by event number (None: never seen holding keys).
    fn held_by_event(&self) -> Vec<Option<(u32, u32)>> {
        let mut held = vec![None; self.events.len()];
        for (file, &event) in &self.events {
            held[event] = self.ranges.get(file.as_os_str()).copied();
        }
        held
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::PathBuf;

    use super::super::key_bytes;
    use super::*;

    fn files(paths: &[&str]) -> Damage {
        Damage::Files(paths.iter().map(PathBuf::from).collect::<BTreeSet<_>>())
    }

    fn excuses_with(ranges: &[(&str, u32, u32)]) -> DamageExcuses {
        let mut excuses = DamageExcuses::default();
        for &(path, low, high) in ranges {
            excuses.record(Path::new(path), &key_bytes(low), &key_bytes(high));
        }
        excuses
    }

    #[test]
    fn damage_excuses_only_the_keys_its_files_held() {
        let mut excuses = excuses_with(&[("/db/table-000007.sst", 10, 20), ("/db/wal-000009.log", 30, 30)]);
        let table = files(&["/db/table-000007.sst"]);
        assert!(excuses.excuses(&table, 10, u64::MAX) && excuses.excuses(&table, 20, u64::MAX));
        assert!(!excuses.excuses(&table, 9, u64::MAX) && !excuses.excuses(&table, 21, u64::MAX));
        assert!(!excuses.excuses(&table, 30, u64::MAX));
        let mut undamaged = excuses_with(&[("/db/table-000007.sst", 10, 20)]);
        assert!(!undamaged.excuses(&Damage::None, 15, u64::MAX));
        let mut anywhere = excuses_with(&[]);
        assert!(anywhere.excuses(&Damage::Anywhere, 15, u64::MAX) && anywhere.excuses(&Damage::None, 0, 0));
    }

    #[test]
    fn damage_to_a_file_never_seen_holding_keys_excuses_no_key() {
        let mut excuses = excuses_with(&[("/db/table-000007.sst", 10, 20)]);
        let manifest = files(&["/db/MANIFEST"]);
        assert!(!excuses.excuses(&manifest, 0, u64::MAX) && !excuses.excuses(&manifest, 15, u64::MAX));
        let both = files(&["/db/MANIFEST", "/db/table-000007.sst"]);
        assert!(excuses.excuses(&both, 15, u64::MAX) && !excuses.excuses(&both, 0, u64::MAX));
    }

    #[test]
    fn a_clean_write_after_damage_ends_the_excuse_until_new_damage_reaches_the_key() {
        let mut excuses = excuses_with(&[("/db/table-000007.sst", 10, 20), ("/db/wal-000009.log", 0, 50)]);
        let table = files(&["/db/table-000007.sst"]);
        let logs = [Path::new("/db/wal-000009.log")];
        assert!(excuses.excuses(&table, 15, u64::MAX));
        assert!(excuses.acknowledged(&table, 15, 40, logs));
        assert!(!excuses.excuses(&table, 15, u64::MAX) && !excuses.excuses(&table, 15, 40));
        // A read at a snapshot below the new write reads an older version: still excused.
        assert!(excuses.excuses(&table, 15, 39));
        assert!(excuses.excuses(&table, 16, u64::MAX), "another key of the damaged table stays excused");
        // The same file damaged again is no new event; a new file holding the key is.
        let again = files(&["/db/table-000007.sst"]);
        assert!(!excuses.excuses(&again, 15, u64::MAX));
        excuses.record(Path::new("/db/table-000011.sst"), &key_bytes(15), &key_bytes(15));
        let newer = files(&["/db/table-000007.sst", "/db/table-000011.sst"]);
        assert!(excuses.excuses(&newer, 15, u64::MAX));
    }

    /// The per-event ranges `excuses` reads (ADR-0137) follow every change: a new file, a widened range, a newly
    /// damaged file, a range recorded after its file was damaged; a repeated record changes nothing.
    #[test]
    fn the_events_ranges_follow_every_record_and_new_damage() {
        let mut excuses = excuses_with(&[("/db/table-000007.sst", 10, 20)]);
        let (one, two) = (files(&["/db/wal-000009.log"]), files(&["/db/wal-000009.log", "/db/table-000007.sst"]));
        assert!(!excuses.excuses(&one, 30, u64::MAX), "a damaged file never seen holding keys excuses nothing");
        excuses.record(Path::new("/db/wal-000009.log"), &key_bytes(30), &key_bytes(30));
        assert!(excuses.excuses(&one, 30, u64::MAX) && !excuses.excuses(&one, 31, u64::MAX));
        excuses.record(Path::new("/db/wal-000009.log"), &key_bytes(31), &key_bytes(35));
        assert!(excuses.excuses(&one, 31, u64::MAX) && excuses.excuses(&one, 35, u64::MAX));
        assert!(!excuses.excuses(&one, 15, u64::MAX) && excuses.excuses(&two, 15, u64::MAX));
        assert!(!excuses.held_stale && excuses.held_by_event == excuses.held_by_event());
        excuses.record(Path::new("/db/table-000007.sst"), &key_bytes(12), &key_bytes(18));
        assert!(!excuses.held_stale, "a range already covered changes nothing");
        assert_eq!(excuses.held_by_event, [Some((30, 35)), Some((10, 20))]);
    }

    #[test]
    fn a_write_that_may_have_landed_in_a_damaged_log_ends_no_excuse() {
        let mut excuses = excuses_with(&[("/db/wal-000009.log", 0, 50)]);
        let log = files(&["/db/wal-000009.log"]);
        assert!(!excuses.acknowledged(&log, 15, 40, [Path::new("/db/wal-000009.log")]));
        assert!(excuses.excuses(&log, 15, u64::MAX));
        let mut anywhere = excuses_with(&[]);
        assert!(!anywhere.acknowledged(&Damage::Anywhere, 15, 40, []));
        assert!(anywhere.excuses(&Damage::Anywhere, 15, u64::MAX));
        let mut undamaged = excuses_with(&[]);
        assert!(!undamaged.acknowledged(&Damage::None, 15, 40, []), "nothing to end before any damage");
    }
}
