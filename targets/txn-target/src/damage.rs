//! Where damage can reach (ADR-0069, ADR-0101): the txn target feeds the shared per-key rule
//! ([`holdfast::kit::DamageExcuses`]) with the key range each live file holds and with every commit the open
//! database makes visible, so a data-destroying fault excuses a read only when a damaged file may hold the
//! version it should return; every other read is checked exactly.

use std::path::PathBuf;

use holdfast::World;
use holdfast::protocol::file_name;

use crate::TxnTarget;
use crate::model::Submission;

impl TxnTarget {
    /// Add what the open database's live files hold now.
    pub(crate) fn record_file_keys(&mut self) {
        let Some(db) = &self.db else { return };
        for file in db.file_key_ranges() {
            self.excuses.record(&file.path, &file.min_key, &file.max_key);
        }
    }

    /// May damage have destroyed or hidden the version of `key` a read at `snapshot` (`u64::MAX`: the latest)
    /// should return? Counted in a damaged run as `damage.excused_reads` or `damage.exact_reads`.
    pub(crate) fn damage_reaches(&mut self, world: &mut World, key: u32, snapshot: u64) -> bool {
        let damage = world.damage();
        if *damage == holdfast::Damage::None {
            return false;
        }
        let reaches = self.excuses.excuses(damage, key, snapshot);
        self.count(if reaches { "damage.excused_reads" } else { "damage.exact_reads" });
        reaches
    }

    /// The open database made `submissions` visible (acknowledged them): each write ends its key's excuses for
    /// reads at or after its sequence, unless it may have landed in a damaged log segment (any live one: a
    /// rotation may fall between a commit's append and its acknowledgement). Counted `damage.excuses_ended`.
    pub(crate) fn damage_acknowledged(&mut self, world: &mut World, submissions: &[Submission]) {
        let damage = world.damage();
        if *damage == holdfast::Damage::None || submissions.is_empty() {
            return;
        }
        let Some(db) = &self.db else { return };
        let logs: Vec<PathBuf> = db
            .file_key_ranges()
            .into_iter()
            .map(|file| file.path)
            .filter(|path| file_name(path).starts_with("wal-"))
            .collect();
        let mut ended = 0;
        for submission in submissions {
            for (index, &key) in submission.record.writes.keys().enumerate() {
                let sequence = submission.first_sequence + index as u64;
                ended += u64::from(self.excuses.acknowledged(damage, key, sequence, logs.iter().map(PathBuf::as_path)));
            }
        }
        self.counters.add("damage.excuses_ended", ended);
    }
}
