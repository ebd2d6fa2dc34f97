//! Visibility, the DSG, and what a recovery must find: commits become part of the history when the database
//! makes them visible; after a crash or reopen the in-flight ones are resolved by reading their keys, and every
//! key is verified against the history.

use std::collections::{BTreeMap, BTreeSet};

use holdfast::kit::{Sig, key_bytes, sig_of};
use holdfast::{FailureKind, Target, Violation, World};

use crate::dsg::{Cycle, TxnId};
use crate::model::{Submission, TxnRecord};
use crate::ops::Observation;
use crate::{Client, SERIALIZABLE, TxnTarget, system_error};

/// Whether an in-flight commit survived a crash, as its keys read after recovery say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Present,
    Absent,
}

impl TxnTarget {
    /// Make the commits the open database has made visible part of the model (every pending commit up to
    /// `db.last_sequence()`), unless it is still being recovered.
    pub(crate) fn absorb_visible(&mut self, world: &mut World) -> Result<(), Violation> {
        let Some(last) = self.db.as_ref().filter(|_| self.in_service).map(engine::Db::last_sequence) else {
            return Ok(());
        };
        let acknowledged = self.pending.iter().take_while(|front| front.last_sequence <= last).count();
        let acknowledged: Vec<Submission> = self.pending[..acknowledged].to_vec();
        self.damage_acknowledged(world, &acknowledged);
        self.absorb_until(world, last)
    }

    /// Every pending commit whose last sequence is at most `last` is visible.
    fn absorb_until(&mut self, world: &mut World, last: u64) -> Result<(), Violation> {
        let mut absorbed = 0;
        while self.pending.first().is_some_and(|front| front.last_sequence <= last) {
            let submission = self.pending.remove(0);
            self.commit_visible(world, &submission)?;
            absorbed += 1;
        }
        if absorbed > 1 {
            self.count("txn.group_commit_batches");
        }
        if last > self.history.visible() && !world.damaged() {
            let pending: Vec<u64> = self.pending.iter().map(|submission| submission.last_sequence).collect();
            return Err(Violation::new(
                "visibility.unknown_sequence",
                FailureKind::Safety,
                format!("db.last_sequence() <= {} (the last submitted commit made visible)", self.history.visible()),
                format!("{last} (pending: {pending:?})"),
            ));
        }
        Ok(())
    }

    fn commit_visible(&mut self, world: &mut World, submission: &Submission) -> Result<(), Violation> {
        self.history.apply(&submission.record, submission.first_sequence);
        self.next_sequence = self.next_sequence.max(submission.last_sequence + 1);
        if self.config.unsynced {
            self.unsynced_visible.push(submission.clone());
        }
        if self.in_graph.remove(&submission.record.id) {
            // A commit a crash put back in flight and that survived it: already in the DSG (ADR-0205).
            return Ok(());
        }
        self.count("txn.commits");
        self.add_to_graph(world, &submission.record)
    }

    /// A transaction committed (made visible, or ended without writes): it joins the DSG, which must stay acyclic.
    pub(crate) fn add_to_graph(&mut self, world: &mut World, record: &TxnRecord) -> Result<(), Violation> {
        if world.damaged() {
            return Ok(());
        }
        self.count("dsg.transactions");
        self.finished.insert(record.id, record.summary());
        let committed = record.to_committed();
        if self.config.unsynced {
            self.graph_log.push(committed.clone());
        }
        match self.graph.commit(&committed) {
            None => Ok(()),
            Some(cycle) => Err(self.cycle_violation(&cycle, record)),
        }
    }

    /// The serializability failure of `cycle`: its Adya class and the rendered cycle as `actual`
    /// (`G2-item: T3 -rw(k000002)-> T5 -rw(k000007)-> T3`), the cycle itself, class included, as evidence.
    fn cycle_violation(&self, cycle: &Cycle, closing: &TxnRecord) -> Violation {
        let members: Vec<String> = cycle
            .edges
            .iter()
            .map(|edge| match self.describe_txn(edge.from) {
                Some(text) => text,
                None if edge.from == closing.id => closing.summary(),
                None => format!("T{}", edge.from),
            })
            .collect();
        Violation::new(
            SERIALIZABLE,
            FailureKind::Safety,
            format!("an acyclic DSG (a serializable history); the cycle's transactions: {}", members.join(" ")),
            cycle.report(),
        )
        .with_evidence(cycle)
    }

    /// A transaction's summary, if it is open, in flight or in the DSG (for cycle reports).
    fn describe_txn(&self, id: TxnId) -> Option<String> {
        let open = self.clients.values().find_map(|client| match client {
            Client::Open(open) if open.record.id == id => Some(open.record.summary()),
            _ => None,
        });
        open.or_else(|| self.pending.iter().find(|s| s.record.id == id).map(|s| s.record.summary()))
            .or_else(|| self.finished.get(&id).cloned())
    }

    /// After every open but the first: absorb what the dropped database had made visible, end the transactions
    /// the crash or reopen ended, resolve in-flight commits and verify every key.
    pub(crate) fn recover(&mut self, world: &mut World) -> Result<Observation, Violation> {
        if let Some(last) = self.dropped_visible.take() {
            self.absorb_until(world, last)?;
        }
        for record in std::mem::take(&mut self.dropped) {
            self.add_to_graph(world, &record)?;
        }
        // Unsynced, what no sync covered goes back in flight, resolved below like any commit in flight.
        self.rewind_unsynced();
        let last_sequence = self.live_db().last_sequence();
        if last_sequence < self.history.visible() && !world.damaged() {
            return Err(Violation::new(
                "sequence_recovered",
                FailureKind::Durability,
                format!("last_sequence >= {} (the highest visible commit before)", self.history.visible()),
                last_sequence.to_string(),
            ));
        }
        self.record_file_keys();
        let verdicts = if self.config.unsynced {
            self.resolve_unsynced(world, last_sequence)?
        } else {
            self.read_in_flight(world)?
        };
        let Some(verdicts) = verdicts else { return Ok(self.interrupted()) };
        let (present, absent) = self.settle_in_flight(world, &verdicts, last_sequence)?;
        if self.config.unsynced {
            // The manifest's last sequence may count commits whose unsynced records the crash took (ADR-0205).
            self.history.skip_to(last_sequence);
        }
        if !self.verify_all(world, "durability")? {
            return Ok(self.interrupted());
        }
        // The open wrote what it recovered as a table under a new manifest: durable.
        self.durable();
        self.in_service = true;
        Ok(Observation::Recovered { last_sequence, present, absent })
    }

    /// A recovery read failed with a justified error, or an armed crash cut it: drop the database (the framework
    /// recovers again, at the latest before the next operation).
    fn interrupted(&mut self) -> Observation {
        self.drop_system();
        Observation::Interrupted
    }

    /// Read the keys of every in-flight commit: each is wholly present or wholly absent. The value before one is
    /// what the earlier in-flight commits found present left, else the history's (survivors are a prefix, ADR-0094).
    /// `Ok(None)` when a read failed with a justified error.
    fn read_in_flight(&mut self, world: &mut World) -> Result<Option<Vec<Verdict>>, Violation> {
        let db = self.live_db().clone();
        let recovered_last = db.last_sequence();
        let pending = self.pending.clone();
        let mut verdicts = Vec::with_capacity(pending.len());
        let mut survived: BTreeMap<u32, Option<Sig>> = BTreeMap::new();
        for (index, submission) in pending.iter().enumerate() {
            let (mut new, mut old) = (Vec::new(), Vec::new());
            // A later in-flight commit may write the same key (one that read nothing takes no snapshot, so no
            // write-write conflict stops it, ADR-0210): its value there says this one survived too (a prefix).
            let later = &pending[index + 1..];
            let overwritten = |key: u32, actual: Option<Sig>| {
                later.iter().any(|later| later.record.writes.get(&key).is_some_and(|&value| value == actual))
            };
            for (&key, &value) in &submission.record.writes {
                let actual = match db.get(&key_bytes(key)) {
                    Ok(actual) => actual.map(|bytes| sig_of(&bytes)),
                    Err(error) => {
                        world.tolerate_verify("recovery", &format!("get k{key:06}"), &system_error(&error))?;
                        return Ok(None);
                    }
                };
                let previous = survived.get(&key).copied().unwrap_or_else(|| self.history.latest_value(key));
                match (actual == value, actual == previous) {
                    (true, true) => {}
                    (true, false) => new.push(key),
                    // A later commit's value, which says nothing of this one where it is also the value before.
                    (false, before) if overwritten(key, actual) => {
                        if !before {
                            new.push(key);
                        }
                    }
                    (false, true) => old.push(key),
                    (false, false) if self.damage_reaches(world, key, u64::MAX) => {}
                    (false, false) => {
                        let expected = format!(
                            "k{key:06} = {} (in-flight T{}) or {} (before it)",
                            self.history.describe(value),
                            submission.record.id,
                            self.history.describe(previous)
                        );
                        let actual = format!("k{key:06} = {}", self.history.describe(actual));
                        return Err(Violation::new(
                            "durability.unexpected_value",
                            FailureKind::Durability,
                            expected,
                            actual,
                        ));
                    }
                }
            }
            if !new.is_empty() && !old.is_empty() && !world.damaged() {
                return Err(Violation::new(
                    "atomicity.partial_commit",
                    FailureKind::Durability,
                    format!(
                        "in-flight commit T{} wholly present or wholly absent after recovery",
                        submission.record.id
                    ),
                    format!("present: {new:?}; absent: {old:?}"),
                ));
            }
            let present = !new.is_empty() || (old.is_empty() && submission.last_sequence <= recovered_last);
            if present {
                survived.extend(&submission.record.writes);
            }
            verdicts.push(if present { Verdict::Present } else { Verdict::Absent });
        }
        Ok(Some(verdicts))
    }

    /// The in-flight commits that survived are a prefix in sequence order; they become visible, the rest are gone.
    /// Returns how many were present and absent.
    fn settle_in_flight(
        &mut self,
        world: &mut World,
        verdicts: &[Verdict],
        recovered_last: u64,
    ) -> Result<(u64, u64), Violation> {
        let first_absent = verdicts.iter().position(|&verdict| verdict == Verdict::Absent);
        if let Some(first_absent) = first_absent
            && let Some(offset) = verdicts[first_absent..].iter().position(|&verdict| verdict == Verdict::Present)
            && !world.damaged()
        {
            let (absent, present) = (&self.pending[first_absent], &self.pending[first_absent + offset]);
            return Err(Violation::new(
                "atomicity.prefix",
                FailureKind::Durability,
                "the in-flight commits that survive a crash are a prefix in sequence order",
                format!(
                    "T{} (seq {}..={}) absent but T{} (seq {}..={}) present",
                    absent.record.id,
                    absent.first_sequence,
                    absent.last_sequence,
                    present.record.id,
                    present.first_sequence,
                    present.last_sequence
                ),
            ));
        }
        let (mut present_count, mut absent_count) = (0, 0);
        let mut lost: BTreeSet<TxnId> = BTreeSet::new();
        for (submission, &verdict) in std::mem::take(&mut self.pending).iter().zip(verdicts) {
            if verdict == Verdict::Absent {
                absent_count += 1;
                if self.in_graph.remove(&submission.record.id) {
                    lost.insert(submission.record.id);
                } else {
                    self.count("txn.in_flight_absent");
                }
                continue;
            }
            present_count += 1;
            self.count("txn.in_flight_present");
            if submission.last_sequence > recovered_last && !world.damaged() {
                return Err(Violation::new(
                    "sequence_recovered",
                    FailureKind::Durability,
                    format!("last_sequence >= {} (T{} is present)", submission.last_sequence, submission.record.id),
                    recovered_last.to_string(),
                ));
            }
            self.commit_visible(world, submission)?;
        }
        self.forget_lost(&lost);
        self.next_sequence = recovered_last + 1;
        Ok((present_count, absent_count))
    }

    /// Read every key of the key space (and every key the history knows) and compare with the latest version.
    /// `Ok(false)` when a read failed with a justified error or an armed crash cut it.
    pub(crate) fn verify_all(&mut self, world: &mut World, context: &str) -> Result<bool, Violation> {
        let key_count = self.config.key_count;
        let mut keys: Vec<u32> = (0..key_count).collect();
        keys.extend(self.history.keys().filter(|&key| key >= key_count));
        let db = self.live_db();
        for key in keys {
            let actual = match db.get(&key_bytes(key)) {
                Ok(value) => value.as_deref().map(sig_of),
                Err(error) => {
                    world.tolerate_verify(context, &format!("get k{key:06}"), &system_error(&error))?;
                    return Ok(false);
                }
            };
            let expected = self.history.latest_value(key);
            if actual != expected && !self.damage_reaches(world, key, u64::MAX) {
                let class = match (expected, actual) {
                    (Some(_), None) => "lost_commit",
                    (None, Some(_)) => "resurrection_or_aborted_write",
                    _ => "stale_value",
                };
                return Err(Violation::new(
                    format!("{context}.{class}"),
                    FailureKind::Durability,
                    self.history.describe_at(key, u64::MAX),
                    format!("k{key:06} = {}", self.history.describe(actual)),
                ));
            }
        }
        Ok(true)
    }
}
