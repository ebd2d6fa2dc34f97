//! Unsynced runs (ADR-0205): the engine in `SyncMode::NoSync` makes a commit visible before the log is synced, so
//! clients read it and build on it, and a crash may take it back. The commits made visible since the last durable
//! point (a flush, a close, a recovery) go back in flight at the next recovery, where the reads of their keys
//! resolve them as any commit in flight is resolved (wholly present or absent, the survivors a prefix in sequence
//! order, ADR-0094); the ones a crash took are removed from the history and the DSG.

use std::collections::{BTreeMap, BTreeSet};

use holdfast::kit::{KeyWrite, Sig, fit_prefixes, key_bytes, mismatched_after, sig_of};
use holdfast::{FailureKind, Violation, World};

use crate::TxnTarget;
use crate::dsg::{DependencyGraph, TxnId};
use crate::recovery::Verdict;

/// The most keys a report of a failed resolution names.
const REPORTED_KEYS_MAX: usize = 5;

impl TxnTarget {
    /// The log is synced: every visible commit is durable.
    pub(crate) fn durable(&mut self) {
        self.unsynced_visible.clear();
    }

    /// At a recovery: the commits visible since the last durable point leave the history and go back in flight,
    /// before the commits that were in flight already (they have higher sequences).
    pub(crate) fn rewind_unsynced(&mut self) {
        let rewound = std::mem::take(&mut self.unsynced_visible);
        let Some(first) = rewound.first() else { return };
        self.history.truncate_after(first.first_sequence - 1);
        self.counters.add("unsynced.commits_rewound", rewound.len() as u64);
        self.in_graph.extend(rewound.iter().map(|submission| submission.record.id));
        let in_flight = std::mem::replace(&mut self.pending, rewound);
        self.pending.extend(in_flight);
    }

    /// The rewound commits the crash took (`lost`) leave the DSG: it is rebuilt from every other transaction, in
    /// the order they joined it. Removing transactions cannot close a cycle.
    pub(crate) fn forget_lost(&mut self, lost: &BTreeSet<TxnId>) {
        if lost.is_empty() {
            return;
        }
        self.counters.add("unsynced.commits_lost", lost.len() as u64);
        let mut kept = std::mem::take(&mut self.graph_log);
        kept.retain(|committed| !lost.contains(&committed.id));
        let mut graph = DependencyGraph::new();
        for committed in &kept {
            assert!(graph.commit(committed).is_none(), "removing transactions from the DSG closed a cycle");
        }
        for id in lost {
            self.finished.remove(id);
        }
        self.graph = graph;
        self.graph_log = kept;
    }
}

impl TxnTarget {
    /// Which commits in flight survived, unsynced (ADR-0205): the longest prefix of them, in sequence order, whose
    /// writes over the history give every key they wrote the value read now, and none above the recovered last
    /// sequence. Unlike synced runs several commits in flight may write one key (each read the one before it while
    /// it was visible), so a key's value is compared with a prefix's last write, not with one commit's.
    /// `Ok(None)` when a read failed with a justified error.
    pub(crate) fn resolve_unsynced(
        &mut self,
        world: &mut World,
        recovered_last: u64,
    ) -> Result<Option<Vec<Verdict>>, Violation> {
        let db = self.live_db();
        let keys: BTreeSet<u32> = self.pending.iter().flat_map(|s| s.record.writes.keys().copied()).collect();
        let mut read: BTreeMap<u32, Option<Sig>> = BTreeMap::new();
        for &key in &keys {
            match db.get(&key_bytes(key)) {
                Ok(value) => read.insert(key, value.as_deref().map(sig_of)),
                Err(error) => {
                    world.tolerate_verify("recovery", &format!("get k{key:06}"), &crate::system_error(&error))?;
                    return Ok(None);
                }
            };
        }
        let bound = self.pending.iter().take_while(|s| s.last_sequence <= recovered_last).count();
        let fits = self.fitting_prefixes(&read);
        let kept = match fits.iter().rev().find(|&&length| length <= bound) {
            Some(&kept) => kept,
            None if world.damaged() => bound,
            None => return Err(self.unresolved(&read, bound)),
        };
        self.counters.add(if kept == 0 { "unsynced.crash_kept_none" } else { "unsynced.crash_kept_some" }, 1);
        Ok(Some((0..self.pending.len()).map(|i| if i < kept { Verdict::Present } else { Verdict::Absent }).collect()))
    }

    /// Every prefix length of `pending` whose writes over the history give each key its value in `read`.
    fn fitting_prefixes(&self, read: &BTreeMap<u32, Option<Sig>>) -> Vec<usize> {
        fit_prefixes(read, |key| self.history.latest_value(key), self.pending_writes()).fits
    }

    /// Each commit in flight's writes, in sequence order.
    fn pending_writes(&self) -> impl Iterator<Item = impl Iterator<Item = KeyWrite> + '_> + '_ {
        self.pending.iter().map(|submission| submission.record.writes.iter().map(|(&key, &value)| (key, value)))
    }

    /// No prefix of the commits in flight gives what was read: a value none of them or the history wrote, or a
    /// state between prefixes (a commit partly present, or one missing before a present one).
    fn unresolved(&self, read: &BTreeMap<u32, Option<Sig>>, bound: usize) -> Violation {
        let unknown = read.iter().find(|&(&key, &value)| {
            value != self.history.latest_value(key)
                && !self.pending.iter().any(|s| s.record.writes.get(&key) == Some(&value))
        });
        if let Some((&key, &value)) = unknown {
            return Violation::new(
                "durability.unexpected_value",
                FailureKind::Durability,
                format!(
                    "k{key:06} = {} or a value a commit in flight wrote",
                    self.history.describe(self.history.latest_value(key))
                ),
                format!("k{key:06} = {}", self.history.describe(value)),
            );
        }
        let wrong = mismatched_after(read, |key| self.history.latest_value(key), self.pending_writes(), bound);
        let wrong: Vec<String> = (wrong.into_iter().take(REPORTED_KEYS_MAX))
            .map(|key| format!("k{key:06} = {}", self.history.describe(read[&key])))
            .collect();
        let ids: Vec<String> = self.pending.iter().map(|s| format!("T{}", s.record.id)).collect();
        Violation::new(
            "atomicity.prefix",
            FailureKind::Durability,
            format!(
                "what a crash kept of the unsynced commits {} is one prefix of them in sequence order",
                ids.join(" ")
            ),
            format!(
                "no prefix gives what was read; against all {bound} at or below the recovered sequence: {}",
                wrong.join(", ")
            ),
        )
    }
}
