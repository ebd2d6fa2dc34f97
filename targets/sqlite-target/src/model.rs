//! The model: the table after each acknowledged commit, the last durable point, the in-flight commit, and the
//! judgement of a recovered table against what the cell promises.

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, VecDeque};

use holdfast::kit::{Sig, ValueSpec, sig_of, value_bytes};
use serde::{Deserialize, Serialize};

use crate::config::{LossBound, Promise};

/// The table: key to value.
pub type State = BTreeMap<u32, ValueSpec>;
/// The table as read back: key to (length, signature of the bytes).
pub type Found = BTreeMap<u32, (u32, Sig)>;
/// The most acknowledged states the model keeps: far above the commits of a run (a state older than this could
/// no longer be told from a partial one). Every state since the last durable point is needed: WAL + NORMAL may
/// roll back to any of them.
pub const HISTORY_STATES_MAX: usize = 20_000;
/// States older than the last durable point kept to name a too-old rollback (`TooOld`) rather than `Partial`.
pub const STATES_BEFORE_DURABLE_MAX: usize = 64;

/// One write of a transaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Write {
    /// `INSERT OR REPLACE`.
    Insert { key: u32, value: ValueSpec },
    /// `UPDATE ... WHERE k = ?` (no row: no change).
    Update { key: u32, value: ValueSpec },
    /// `DELETE ... WHERE k = ?`.
    Delete { key: u32 },
}

/// `state` after `writes`.
pub fn apply_writes(state: &State, writes: &[Write]) -> State {
    let mut next = state.clone();
    for write in writes {
        match write {
            Write::Insert { key, value } => {
                next.insert(*key, *value);
            }
            Write::Update { key, value } => {
                if let Some(slot) = next.get_mut(key) {
                    *slot = *value;
                }
            }
            Write::Delete { key } => {
                next.remove(key);
            }
        }
    }
    next
}

/// What a state reads back as.
pub fn found_of(state: &State) -> Found {
    state.iter().map(|(&key, &value)| (key, (value.len, sig_of(&value_bytes(value))))).collect()
}

/// How a recovered table compares with the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judgement {
    /// The state after acknowledged commit `lost` places before the last (0: nothing lost), within the promise.
    Prefix { lost: u64 },
    /// The in-flight commit's state: it committed.
    InFlightApplied,
    /// An acknowledged state older than the promise allows: `lost` commits gone.
    TooOld { lost: u64, allowed: u64 },
    /// No acknowledged state and not the in-flight one: a partial transaction (or worse).
    Partial,
}

/// Acknowledged states, newest last.
#[derive(Clone, Debug)]
pub struct History {
    states: VecDeque<State>,
    /// Index in `states` of the last durable point: no recovery may go below it (unless the promise is nothing).
    durable: usize,
    /// The state after a commit whose outcome is unknown (cut by a crash or failed at COMMIT).
    pub in_flight: Option<State>,
}

impl Default for History {
    fn default() -> Self {
        Self { states: VecDeque::from([State::new()]), durable: 0, in_flight: None }
    }
}

impl History {
    /// The latest acknowledged state.
    pub fn current(&self) -> &State {
        self.states.back().expect("the history is never empty")
    }

    /// An acknowledged commit. One that changed no byte of the table is not a new point in the history: SQLite
    /// does not dirty a page whose cell is rewritten with identical bytes, so such a commit writes no journal
    /// and nothing can roll it back. (Values are compared by their bytes: two value ids of length 0 are equal.)
    pub fn commit(&mut self, state: State) {
        if found_of(&state) == found_of(self.current()) {
            return;
        }
        self.states.push_back(state);
        while self.durable > STATES_BEFORE_DURABLE_MAX || self.states.len() > HISTORY_STATES_MAX {
            self.states.pop_front();
            self.durable = self.durable.saturating_sub(1);
        }
        debug_assert!(self.states.len() <= HISTORY_STATES_MAX);
    }

    /// Everything acknowledged so far is durable (a completed checkpoint, a recovery).
    pub fn mark_durable(&mut self) {
        self.durable = self.states.len() - 1;
    }

    /// The oldest index a recovery may land on under `promise`.
    fn floor(&self, promise: Promise) -> usize {
        let last = self.states.len() - 1;
        match promise {
            Promise::Durable => last,
            Promise::Consistent(LossBound::LastCommit) => self.durable.max(last.saturating_sub(1)),
            Promise::Consistent(LossBound::SinceCheckpoint) => self.durable,
            Promise::Nothing => 0,
        }
    }

    /// Judge `found` (the table after an open) under `promise`, and adopt a matching state as the latest. After
    /// a power cut (`crashed`) the disk holds only durable bytes, so the state found is also the new durable
    /// point; after a clean reopen nothing new is durable (a DELETE-mode commit whose journal unlink was never
    /// synced can still roll back). A partial state leaves the model as it was, for the report.
    pub fn recover(&mut self, found: &Found, promise: Promise, crashed: bool) -> Judgement {
        let last = self.states.len() - 1;
        let in_flight = self.in_flight.take();
        if found_of(self.current()) == *found {
            if crashed {
                self.mark_durable();
            }
            return Judgement::Prefix { lost: 0 };
        }
        if let Some(state) = in_flight.filter(|state| found_of(state) == *found) {
            self.commit(state);
            if crashed {
                self.mark_durable();
            }
            return Judgement::InFlightApplied;
        }
        let floor = self.floor(promise);
        let matched = (0..last).rev().find(|&index| found_of(&self.states[index]) == *found);
        match matched {
            Some(index) => {
                let lost = (last - index) as u64;
                let judgement = if index >= floor {
                    Judgement::Prefix { lost }
                } else {
                    Judgement::TooOld { lost, allowed: (last - floor) as u64 }
                };
                self.states.truncate(index + 1);
                self.durable = self.durable.min(index);
                if crashed {
                    self.mark_durable();
                }
                judgement
            }
            None => Judgement::Partial,
        }
    }

    /// Start over from `state` (a table recorded but not judged, or a wiped database).
    pub fn reset(&mut self, state: State) {
        *self = Self { states: VecDeque::from([state]), durable: 0, in_flight: None };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(id: u64) -> ValueSpec {
        ValueSpec { id, len: 8 }
    }

    fn history_of(commits: u64) -> History {
        let mut history = History::default();
        for id in 1..=commits {
            let next = apply_writes(history.current(), &[Write::Insert { key: 0, value: value(id) }]);
            history.commit(next);
        }
        history
    }

    #[test]
    fn writes_apply_as_sql_does() {
        let state = apply_writes(&State::new(), &[Write::Update { key: 1, value: value(1) }]);
        assert!(state.is_empty(), "UPDATE of a missing row changes nothing");
        let state = apply_writes(&state, &[Write::Insert { key: 1, value: value(2) }, Write::Delete { key: 3 }]);
        assert_eq!(state.get(&1), Some(&value(2)));
        let state = apply_writes(&state, &[Write::Update { key: 1, value: value(4) }, Write::Delete { key: 1 }]);
        assert!(state.is_empty());
    }

    #[test]
    fn durable_cells_accept_only_the_last_commit_or_the_in_flight_one() {
        let mut history = history_of(3);
        let older = found_of(&apply_writes(&State::new(), &[Write::Insert { key: 0, value: value(2) }]));
        assert_eq!(history.clone().recover(&older, Promise::Durable, true), Judgement::TooOld { lost: 1, allowed: 0 });
        let latest = found_of(history.current());
        assert_eq!(history.clone().recover(&latest, Promise::Durable, true), Judgement::Prefix { lost: 0 });
        let next = apply_writes(history.current(), &[Write::Insert { key: 5, value: value(9) }]);
        history.in_flight = Some(next.clone());
        assert_eq!(history.recover(&found_of(&next), Promise::Durable, true), Judgement::InFlightApplied);
        assert_eq!(history.current(), &next);
    }

    #[test]
    fn consistent_cells_roll_back_within_their_bound_and_never_accept_a_partial_state() {
        let history = history_of(4);
        let second = found_of(&apply_writes(&State::new(), &[Write::Insert { key: 0, value: value(2) }]));
        let third = found_of(&apply_writes(&State::new(), &[Write::Insert { key: 0, value: value(3) }]));
        let last_commit = Promise::Consistent(LossBound::LastCommit);
        assert_eq!(history.clone().recover(&third, last_commit, true), Judgement::Prefix { lost: 1 });
        assert_eq!(history.clone().recover(&second, last_commit, true), Judgement::TooOld { lost: 2, allowed: 1 });
        let since = Promise::Consistent(LossBound::SinceCheckpoint);
        let mut rolled = history.clone();
        assert_eq!(rolled.recover(&second, since, true), Judgement::Prefix { lost: 2 });
        assert_eq!(rolled.recover(&found_of(&State::new()), since, true), Judgement::TooOld { lost: 2, allowed: 0 });
        let partial = found_of(&apply_writes(&State::new(), &[Write::Insert { key: 7, value: value(1) }]));
        assert_eq!(history.clone().recover(&partial, since, true), Judgement::Partial);
        assert_eq!(history.clone().recover(&partial, Promise::Nothing, true), Judgement::Partial);
    }

    #[test]
    fn only_a_power_cut_makes_the_recovered_state_durable() {
        let last_commit = Promise::Consistent(LossBound::LastCommit);
        let mut reopened = history_of(1);
        let one = found_of(reopened.current());
        assert_eq!(reopened.recover(&one, last_commit, false), Judgement::Prefix { lost: 0 });
        assert_eq!(reopened.recover(&found_of(&State::new()), last_commit, true), Judgement::Prefix { lost: 1 });
        let mut crashed = history_of(1);
        assert_eq!(crashed.recover(&one, last_commit, true), Judgement::Prefix { lost: 0 });
        let lost = crashed.recover(&found_of(&State::new()), last_commit, true);
        assert_eq!(lost, Judgement::TooOld { lost: 1, allowed: 0 });
        let mut long = history_of(300);
        assert_eq!(
            long.recover(&found_of(&State::new()), Promise::Consistent(LossBound::SinceCheckpoint), true),
            Judgement::Prefix { lost: 300 },
            "a WAL + NORMAL rollback past hundreds of commits is a prefix"
        );
        let mut unchanged = history_of(1);
        unchanged.commit(unchanged.current().clone());
        assert_eq!(unchanged.recover(&found_of(&State::new()), last_commit, true), Judgement::Prefix { lost: 1 });
    }
}
