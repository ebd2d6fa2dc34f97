//! Where damage can reach (ADR-0069, ADR-0101): the engine target feeds the shared per-key rule
//! ([`holdfast::kit::DamageExcuses`]) with the key range each live file holds and with every acknowledged write,
//! so a data-destroying fault excuses only the keys of the files it landed in, and only until they are written
//! again where no damage is.

use std::path::{Path, PathBuf};

use engine::Db;
use holdfast::World;
use holdfast::env::SimEnv;
use holdfast::kit::DamageExcuses;
use holdfast::protocol::file_name;

use crate::EngineTarget;

/// Add what the open database's live files hold now; returns the number of the newest live log segment (the one
/// the next write is appended to), if any is listed.
pub fn record(excuses: &mut DamageExcuses, db: &Db<SimEnv>) -> Option<u64> {
    let files = db.file_key_ranges();
    for file in &files {
        excuses.record(&file.path, &file.min_key, &file.max_key);
    }
    files.iter().filter_map(|file| log_number(&file.path)).max()
}

/// The number of a log segment's file (`wal-000009.log` is 9); `None` for any other file.
fn log_number(path: &Path) -> Option<u64> {
    file_name(path).strip_prefix("wal-")?.strip_suffix(".log")?.parse().ok()
}

/// The live log segments numbered `from` or above: where a write acknowledged now may have been appended, when
/// the newest segment at the last step boundary was `from` (the write went to it, or, if rotations fell inside
/// the write, to a newer one).
pub fn logs_from(db: &Db<SimEnv>, from: u64) -> Vec<PathBuf> {
    let files = db.file_key_ranges().into_iter().map(|file| file.path);
    files.filter(|path| log_number(path).is_some_and(|number| number >= from)).collect()
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
