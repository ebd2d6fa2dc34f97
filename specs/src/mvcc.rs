//! # `Mvcc`: snapshot isolation of the multi-version store
//!
//! **Models** transactions that begin, read keys, buffer writes, commit or roll back over a multi-version store
//! kept as a list of `(key, value, commit sequence)` versions, with the engine's sequence rules
//! (`engine/src/txn.rs`): a snapshot is the last *acknowledged* sequence at `begin`; a commit is validated at
//! `next_sequence .. next_sequence + writes - 1` and becomes visible only when group commit acknowledges it, in
//! sequence order. First-committer-wins is decided by the shipped conflict tracker
//! ([`engine::ssi::ConflictTracker`]) driven through `begin`/`commit`/`finish`/`abort` only — with no read hooks
//! it does exactly the write-write check, so this model checks the engine's snapshot-isolation layer on its own.
//! The transitions are in [`crate::db`].
//!
//! **Bounds** ([`MvccBound`]): small — 2 keys, 3 read-write transactions of at most 2 reads/writes each; large —
//! 2 keys, 3 transactions of at most 3 reads/writes each. Every transaction may roll back; acknowledgement is a
//! separate step.
//!
//! **Invariants**:
//! * `snapshot_reads` — every read any transaction was given (even one that later aborted) equals its
//!   snapshot's committed state plus its own earlier writes. The expected value is recomputed from the
//!   transactions' commit histories, not from the version list the reads use.
//! * `first_committer_wins` — two committed transactions that were concurrent (neither snapshot saw the other's
//!   commit) wrote disjoint keys.
//! * `sometimes_write_conflict` (reachability) — some commit is refused for a write-write conflict, so the
//!   bounds do exercise the check.
//!
//! **Leaves out**: range reads, read-only transactions and serializability (see [`crate::Ssi`]); deletes
//! (tombstones); values other than "written by transaction i"; reads of a transaction's own writes (answered
//! from its buffer without the store: the oracle still accounts for own writes before later reads); the memtable,
//! tables and compaction behind `get_at` (the model's read path is the version list); crashes (see
//! [`crate::Storage`]).
//!
//! **Known-bad variant**: [`Mvcc::without_first_committer_wins`] never consults the tracker, so every commit
//! succeeds: the checker finds a lost update.

use stateright::{Model, Property};

use crate::check::Spec;
use crate::db::{Action, Cause, Config, DbState, ReadOnlySnapshot, Slot, Status, TrackerUse, describe, render_action};

/// The bounds of [`Mvcc`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MvccBound {
    Small,
    Large,
}

/// The snapshot-isolation model. See the module docs.
#[derive(Clone, Debug)]
pub struct Mvcc {
    pub config: Config,
}

impl Mvcc {
    pub fn new(bound: MvccBound) -> Self {
        let ops_max = match bound {
            MvccBound::Small => 2,
            MvccBound::Large => 3,
        };
        let slot = Slot { read_only: false, ops_max };
        Self {
            config: Config {
                keys: 2,
                slots: vec![slot; 3],
                ranges: Vec::new(),
                rollback: true,
                ack_gap: true,
                tracker: TrackerUse::WritesOnly,
                read_only_snapshot: ReadOnlySnapshot::Safe,
            },
        }
    }

    /// Commits become visible the moment they are validated (no group-commit window).
    pub fn without_ack_gap(mut self) -> Self {
        self.config.ack_gap = false;
        self
    }

    /// Known-bad: commits never consult the tracker (no first-committer-wins).
    pub fn without_first_committer_wins(mut self) -> Self {
        self.config.tracker = TrackerUse::Off;
        self
    }
}

impl Model for Mvcc {
    type State = DbState;
    type Action = Action;

    fn init_states(&self) -> Vec<DbState> {
        vec![DbState::new(&self.config)]
    }

    fn actions(&self, state: &DbState, actions: &mut Vec<Action>) {
        state.actions(&self.config, actions);
    }

    fn next_state(&self, state: &DbState, action: Action) -> Option<DbState> {
        Some(state.next(&self.config, &action))
    }

    fn format_action(&self, action: &Action) -> String {
        render_action(action)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("snapshot_reads", |_, state: &DbState| state.snapshot_read_violation().is_none()),
            Property::always("first_committer_wins", |_, state: &DbState| state.first_committer_violation().is_none()),
            Property::always("no_tracker_failure", |_, state: &DbState| state.failures.is_empty()),
            Property::sometimes("sometimes_write_conflict", |_, state: &DbState| {
                state.txns.iter().any(|txn| txn.status == Status::Aborted { cause: Cause::WriteWrite })
            }),
        ]
    }
}

impl Spec for Mvcc {
    fn name(&self) -> &'static str {
        "Mvcc"
    }

    fn bounds(&self) -> String {
        self.config.describe()
    }

    fn describe_state(&self, state: &DbState) -> String {
        let mut text = describe(state);
        for violation in [state.snapshot_read_violation(), state.first_committer_violation()].into_iter().flatten() {
            text.push_str(&format!("  violation: {violation}\n"));
        }
        text
    }
}
