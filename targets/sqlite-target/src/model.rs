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
/// The most acknowledged states the model keeps (older ones can no longer be told apart from a partial state).
pub const HISTORY_STATES_MAX: usize = 256;

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

    /// An acknowledged commit.
    pub fn commit(&mut self, state: State) {
        self.states.push_back(state);
        if self.states.len() > HISTORY_STATES_MAX {
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

    /// Judge `found` (the table after a recovery) under `promise`, and adopt it: a matching state becomes the
    /// latest and durable. A partial state under [`Promise::Nothing`] is adopted as the new state too (recorded,
    /// not judged); otherwise the model is left as it was for the report.
    pub fn recover(&mut self, found: &Found, promise: Promise) -> Judgement {
        let last = self.states.len() - 1;
        let in_flight = self.in_flight.take();
        if found_of(self.current()) == *found {
            self.mark_durable();
            return Judgement::Prefix { lost: 0 };
        }
        if let Some(state) = in_flight.filter(|state| found_of(state) == *found) {
            self.commit(state);
            self.mark_durable();
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
                self.mark_durable();
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
        assert_eq!(history.clone().recover(&older, Promise::Durable), Judgement::TooOld { lost: 1, allowed: 0 });
        let latest = found_of(history.current());
        assert_eq!(history.clone().recover(&latest, Promise::Durable), Judgement::Prefix { lost: 0 });
        let next = apply_writes(history.current(), &[Write::Insert { key: 5, value: value(9) }]);
        history.in_flight = Some(next.clone());
        assert_eq!(history.recover(&found_of(&next), Promise::Durable), Judgement::InFlightApplied);
        assert_eq!(history.current(), &next);
    }

    #[test]
    fn consistent_cells_roll_back_within_their_bound_and_never_accept_a_partial_state() {
        let history = history_of(4);
        let second = found_of(&apply_writes(&State::new(), &[Write::Insert { key: 0, value: value(2) }]));
        let third = found_of(&apply_writes(&State::new(), &[Write::Insert { key: 0, value: value(3) }]));
        let last_commit = Promise::Consistent(LossBound::LastCommit);
        assert_eq!(history.clone().recover(&third, last_commit), Judgement::Prefix { lost: 1 });
        assert_eq!(history.clone().recover(&second, last_commit), Judgement::TooOld { lost: 2, allowed: 1 });
        let since = Promise::Consistent(LossBound::SinceCheckpoint);
        let mut rolled = history.clone();
        assert_eq!(rolled.recover(&second, since), Judgement::Prefix { lost: 2 });
        assert_eq!(rolled.recover(&found_of(&State::new()), since), Judgement::TooOld { lost: 2, allowed: 0 });
        let partial = found_of(&apply_writes(&State::new(), &[Write::Insert { key: 7, value: value(1) }]));
        assert_eq!(history.clone().recover(&partial, since), Judgement::Partial);
        assert_eq!(history.clone().recover(&partial, Promise::Nothing), Judgement::Partial);
    }
}
