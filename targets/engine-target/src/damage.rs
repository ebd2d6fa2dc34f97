//! Where damage can reach (ADR-0069, ADR-0101): the engine target feeds the shared per-key rule
//! ([`holdfast::kit::DamageExcuses`]) with the key range each live file holds and with every acknowledged write,
//! so a data-destroying fault excuses only the keys of the files it landed in, and only until they are written
//! again where no damage is.

use std::path::PathBuf;

use engine::Db;
use holdfast::World;
use holdfast::env::SimEnv;
use holdfast::kit::DamageExcuses;
use holdfast::protocol::file_name;

use crate::EngineTarget;

/// Add what the open database's live files hold now.
pub fn record(excuses: &mut DamageExcuses, db: &Db<SimEnv>) {
    for file in db.file_key_ranges() {
        excuses.record(&file.path, &file.min_key, &file.max_key);
    }
}

/// The live log segments: where a write acknowledged now may have been appended (a rotation may fall between
/// its append and its acknowledgement, so every live one).
pub fn live_logs(db: &Db<SimEnv>) -> Vec<PathBuf> {
    let files = db.file_key_ranges().into_iter().map(|file| file.path);
    files.filter(|path| file_name(path).starts_with("wal-")).collect()
}

impl EngineTarget {
    /// A write of `key` was acknowledged: in a damaged run, it ends the key's excuses unless it may have landed in
    /// a damaged log segment (counted `damage.excuses_ended`).
    pub(crate) fn damage_acknowledged(&mut self, world: &mut World, key: u32) {
        let damage = world.damage();
        if *damage == holdfast::Damage::None {
            return;
        }
        let db = self.db.as_ref().expect("a write was acknowledged by an open database");
        let (logs, sequence) = (live_logs(db), db.last_sequence());
        if self.excuses.acknowledged(damage, key, sequence, logs.iter().map(PathBuf::as_path)) {
            self.counters.add("damage.excuses_ended", 1);
        }
    }
}
