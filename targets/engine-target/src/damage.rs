//! Where damage can reach (ADR-0069, ADR-0101): the engine target feeds the shared per-key rule
//! ([`holdfast::kit::DamageExcuses`]) with the key range each live file holds and with every acknowledged write,
//! so a data-destroying fault excuses only the keys of the files it landed in, and only until they are written
//! again where no damage is.

use std::path::{Path, PathBuf};

use engine::{Db, FileKeyRange};
use holdfast::World;
use holdfast::env::SimEnv;
use holdfast::kit::DamageExcuses;

use crate::EngineTarget;

/// How many reads of a damaged run were excused by damage and how many were checked exactly: the
/// `damage.excused_reads` and `damage.exact_reads` counters. Counted in two integers and added to the coverage when
/// it is taken: the verification counts every key it reads, and a counter looked up by name per key cost as much
/// as the model's check of the key (ADR-0141).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadCounts {
    excused: u64,
    exact: u64,
}

impl ReadCounts {
    /// Count one read of a damaged run: `excused` when damage reached its key.
    pub fn count(&mut self, excused: bool) {
        if excused {
            self.excused += 1;
        } else {
            self.exact += 1;
        }
    }

    /// Add the counters to `coverage`; a counter never counted stays absent, as one never added.
    pub fn add_to(&self, coverage: &mut holdfast::Coverage) {
        for (name, count) in [("damage.excused_reads", self.excused), ("damage.exact_reads", self.exact)] {
            if count > 0 {
                coverage.add(name, count);
            }
        }
    }
}

/// What [`record`] last added: the live files with their key ranges, and the newest live log segment among them.
#[derive(Debug, Default)]
pub struct Recorded {
    files: Vec<FileKeyRange>,
    newest_log: Option<u64>,
}

/// Add what the open database's live files hold now; returns the number of the newest live log segment (the one
/// the next write is appended to), if any is listed. An entry equal to the one at its place in `last`'s list is in
/// `excuses` already: recording it again would change nothing (ranges only widen), so only the comparison is paid
/// (ADR-0126, ADR-0137). The engine's entries are compared borrowed, in place, and only an entry that changed is
/// copied into `last` (ADR-0147): most steps change one entry or none, and building the owned list every step was
/// most of this function's cost.
pub fn record(excuses: &mut DamageExcuses, last: &mut Recorded, db: &Db<SimEnv>) -> Option<u64> {
    let (mut index, mut changed) = (0, false);
    db.visit_file_key_ranges(|path, min_key, max_key| {
        let slot = last.files.get_mut(index);
        index += 1;
        // Paths compared as bytes, as `DamageExcuses` keys them (a component walk per entry cost more than the
        // rest of the comparison; the engine spells each file's path one way).
        let same = |file: &FileKeyRange| {
            file.path.as_os_str() == path.as_os_str() && file.min_key == min_key && file.max_key == max_key
        };
        if slot.as_deref().is_some_and(same) {
            return;
        }
        excuses.record(path, min_key, max_key);
        match slot {
            // Copied into the slot's own buffers: a changed entry is most often the live memtable's range widening,
            // and its path and keys fit where the last ones were (ADR-0158).
            Some(slot) => copy_into(slot, path, min_key, max_key),
            None => last.files.push(FileKeyRange {
                path: path.to_path_buf(),
                min_key: min_key.to_vec(),
                max_key: max_key.to_vec(),
            }),
        }
        changed = true;
    });
    if index < last.files.len() {
        last.files.truncate(index);
        changed = true;
    }
    if changed {
        last.newest_log = last.files.iter().filter_map(|file| log_number(&file.path)).max();
    }
    last.newest_log
}

/// Overwrite `file` with `path` and keys, reusing its buffers (no allocation when they fit).
fn copy_into(file: &mut FileKeyRange, path: &Path, min_key: &[u8], max_key: &[u8]) {
    let name = file.path.as_mut_os_string();
    name.clear();
    name.push(path.as_os_str());
    file.min_key.clear();
    file.min_key.extend_from_slice(min_key);
    file.max_key.clear();
    file.max_key.extend_from_slice(max_key);
}

/// The number of a log segment's file (`wal-000009.log` is 9); `None` for any other file. Reads the name in place
/// (a name that is not UTF-8 is no segment's): it runs for every live file of every changed list (ADR-0137). The
/// name is the bytes after the last `/`, as the engine writes its paths (`Path::file_name`'s component walk was
/// most of this function's cost, ADR-0141); a path ending in `/` names a directory, no segment.
fn log_number(path: &Path) -> Option<u64> {
    let bytes = path.as_os_str().as_encoded_bytes();
    let name = bytes.rsplit(|&byte| byte == b'/').next()?;
    let digits = name.strip_prefix(b"wal-")?.strip_suffix(b".log")?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// The live log segments numbered `from` or above: where a write acknowledged now may have been appended, when
/// the newest segment at the last step boundary was `from` (the write went to it, or, if rotations fell inside
/// the write, to a newer one).
pub fn logs_from(db: &Db<SimEnv>, from: u64) -> Vec<PathBuf> {
    let mut logs = Vec::new();
    db.visit_file_key_ranges(|path, _, _| {
        if log_number(path).is_some_and(|number| number >= from) {
            logs.push(path.to_path_buf());
        }
    });
    logs
}

impl EngineTarget {
    /// A write of `key` was acknowledged: in a damaged run, it ends the key's excuses unless it may have landed in
    /// a damaged log segment (counted `damage.excuses_ended`). It landed in the segment that was newest at the
    /// last step boundary or a newer one; with none known, any live one.
    pub(crate) fn damage_acknowledged(&mut self, world: &mut World, key: u32) {
        let damage = world.damage();
        if *damage == holdfast::Damage::None {
            return;
        }
        let db = self.db.as_ref().expect("a write was acknowledged by an open database");
        let (logs, sequence) = (logs_from(db, self.newest_log.unwrap_or(0)), db.last_sequence());
        if self.excuses.acknowledged(damage, key, sequence, logs.iter().map(PathBuf::as_path)) {
            self.counters.add("damage.excuses_ended", 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use engine::Options;
    use holdfast::Damage;
    use holdfast::kit::key_bytes;

    use super::*;

    /// A segment's number from its path; any other file, or a name that is not a segment's, has none.
    #[test]
    fn log_numbers_come_only_from_segment_names() {
        assert_eq!(log_number(Path::new("/db/wal-000009.log")), Some(9));
        assert_eq!(log_number(Path::new("/db/wal-1234567.log")), Some(1_234_567));
        assert_eq!(log_number(Path::new("wal-000003.log")), Some(3), "a bare name");
        let others = ["/db/table-000009.sst", "/db/MANIFEST", "/db/wal-.log", "/db/wal-00x9.log", "/db/wal-000009"];
        for other in others.into_iter().chain(["/db/wal-000009.log/", "/db/wal-000009.log.tmp", "/wal-1.log/x"]) {
            assert_eq!(log_number(Path::new(other)), None, "{other}");
        }
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let not_utf8 = std::ffi::OsStr::from_bytes(b"/db/wal-00\xff9.log");
            assert_eq!(log_number(Path::new(not_utf8)), None);
        }
    }

    /// A changed entry is copied into the slot it replaces (ADR-0158): the slot then equals the freshly built
    /// entry, longer or shorter, and its buffers are reused when the new path and keys fit.
    #[test]
    fn copy_into_overwrites_in_place() {
        let mut file = FileKeyRange {
            path: PathBuf::from("/db/wal-000012.log"),
            min_key: b"k00000001".to_vec(),
            max_key: b"k00000099".to_vec(),
        };
        let pointers = |file: &FileKeyRange| (file.min_key.as_ptr(), file.max_key.as_ptr());
        let before = pointers(&file);
        copy_into(&mut file, Path::new("/db/wal-000013.log"), b"k00000000", b"k0000012");
        let expected = FileKeyRange {
            path: PathBuf::from("/db/wal-000013.log"),
            min_key: b"k00000000".to_vec(),
            max_key: b"k0000012".to_vec(),
        };
        assert_eq!(file, expected);
        assert_eq!(pointers(&file), before, "keys that fit are copied into the same buffers");
        copy_into(&mut file, Path::new("/db/table-000001234567.sst"), b"a", b"a much longer key than before");
        assert_eq!(file.path, Path::new("/db/table-000001234567.sst"));
        assert_eq!((&file.min_key[..], &file.max_key[..]), (&b"a"[..], &b"a much longer key than before"[..]));
    }

    /// `record` skips a list equal to the last one (ADR-0126), and still records every file and range: through
    /// writes, memtable rotations, flushes, compactions and background tasks, each file is excused exactly over
    /// the range it was seen holding, and `record` names the newest live log segment.
    #[test]
    fn record_skips_only_what_it_already_holds() {
        let env = SimEnv::new(7);
        let options = Options { flush_threshold_bytes: 2048, l0_compaction_trigger: 2, ..Options::default() };
        let db = Db::open(env.clone(), "/db", options).expect("open");
        let (mut excuses, mut last, mut skipped) = (DamageExcuses::default(), Recorded::default(), 0);
        let mut seen: Vec<FileKeyRange> = Vec::new();
        for step in 0..400u32 {
            match step % 50 {
                17 => db.flush().expect("flush"),
                41 => db.compact().expect("compact"),
                _ if step % 7 == 3 => db.delete(&key_bytes(step * 13 % 97)).expect("delete"),
                _ => db.put(&key_bytes(step * 31 % 97), &[b'v'; 40]).expect("put"),
            }
            if step % 5 == 0 {
                env.run_tasks(100);
            }
            let now = db.file_key_ranges();
            skipped += usize::from(now == last.files);
            let newest = record(&mut excuses, &mut last, &db);
            assert_eq!(newest, now.iter().filter_map(|file| log_number(&file.path)).max(), "step {step}");
            assert_eq!(last.files, now, "step {step}: the list held is the engine's, entry for entry (ADR-0147)");
            seen.extend(now);
        }
        assert!(skipped > 50 && skipped < 350, "{skipped} of 400 steps skipped");
        assert!(db.stats().flush_count > 2 && db.stats().compaction_count > 0, "{:?}", db.stats());
        for file in &seen {
            let (low, high) = (holdfast::kit::parse_key(&file.min_key), holdfast::kit::parse_key(&file.max_key));
            let (low, high) = (low.expect("a rendered key"), high.expect("a rendered key"));
            // A run's damage only grows: each file is damaged in a run of its own.
            let (damage, mut run) = (Damage::Files([file.path.clone()].into()), excuses.clone());
            assert!(run.excuses(&damage, low, u64::MAX) && run.excuses(&damage, high, u64::MAX), "{file:?}");
        }
    }
}
