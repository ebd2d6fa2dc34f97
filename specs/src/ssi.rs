//! # `Ssi`: serializable snapshot isolation, driving the shipped conflict tracker
//!
//! **Models** the [`crate::Mvcc`] database plus range reads and read-only transactions, with conflict detection
//! done by **the shipped code**: the state holds an [`engine::ssi::ConflictTracker`] value and every transition
//! calls it exactly as `engine/src/txn.rs` does (`begin`, `on_read`, `on_scan`, `check_doomed_public` before a
//! write, `commit` at the commit's last sequence = `next_sequence + writes - 1`, `finish` at `last_sequence` for
//! a transaction without writes and for a read-only one, `abort`, `set_visible` at each acknowledgement, and
//! `safe_snapshot` for a read-only transaction's snapshot). Read-write snapshots are the last *acknowledged*
//! sequence; a validated commit becomes visible only at a separate acknowledge step (the engine's
//! group commit), so transactions can begin between a commit's validation and its visibility. Tracker panics are
//! caught and recorded. The transitions are in [`crate::db`].
//!
//! **Bounds** ([`SsiBound`]): small — keys `a`,`b`; two read-write transactions of at most 2 operations and one
//! read-only transaction of at most 2; range read `[a, ..)`; read-write transactions may roll back. Large —
//! keys `a`,`b`; read-write transactions of 3 and 2 operations and one read-only transaction of 2 (enough for
//! Fekete's read-only anomaly); range read `[a, ..)`; no rollback. Multi-write — keys `a`,`b`,`c`; two
//! read-write transactions of at most 2 operations and one read-only of 1, no range read, no rollback: the
//! smallest world in which one commit takes two sequences and a pivot writes a key it does not.
//!
//! **Invariants**:
//! * `serializable` — an independent oracle: brute-force search for a serial order of the committed
//!   transactions (validated read-write ones and every finished one, read-only included) in which each reads
//!   exactly what it read, point and range reads alike, and which ends in the final committed state. It uses the
//!   transactions' recorded observations only, never the tracker.
//! * `snapshot_reads` — as in [`crate::Mvcc`].
//! * `read_only_never_aborts` — no read-only transaction is ever given a conflict at a read or at its end (the
//!   engine asserts this with a panic), nor makes the tracker panic by being the only possible victim.
//! * `tracker_never_panics` — no tracker call panics (its assertions, "no transaction left to abort").
//! * `tracker_bookkeeping` — the tracker's count of active transactions matches the model's, and with no
//!   transaction active or in flight (validated, not yet visible) it holds no records (bounded memory).
//! * `sometimes_rw_conflict` (reachability) — some transaction is aborted for an rw conflict.
//!
//! **Leaves out**: deletes; more than two keys (three in the multi-write bound); the tracker's pruning under many transactions (records are
//! dropped as in the engine, but the bounds keep few alive); the WAL and crashes; reads of a transaction's own
//! writes (answered from its buffer, no tracker call); engine-level retries.
//!
//! **Known-bad variants**: [`Ssi::without_safe_snapshot`] starts readers at the last visible sequence: the
//! checker finds a reader chosen to abort (the tracker panics). [`Ssi::naive_si`] never calls the read hooks
//! (snapshot isolation only): the checker
//! finds write skew. [`Ssi::without_read_after_commit_edge`] skips `on_read`/`on_scan` when a validated writer
//! outside the snapshot wrote the key, so the read-after-commit rw edge is never found.
//! [`Ssi::safe_snapshot_below_commit`] (the safe-snapshot rule before the txn target's partial-commit finding,
//! computed with the tracker's own `straddles` and `snapshot_outside`): under [`SsiBound::MultiWrite`] the
//! checker finds a reader whose snapshot falls inside a two-write commit (`snapshot_reads`).

use stateright::{Model, Property};

use crate::check::Spec;
use crate::db::{
    Action, Cause, Config, DbState, Range, ReadOnlySnapshot, Slot, Status, TrackerUse, describe, render_action,
};

/// The bounds of [`Ssi`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SsiBound {
    Small,
    Large,
    /// Keys `a`,`b`,`c`; two read-write transactions of at most 2 operations and one read-only transaction of 1;
    /// no range read, no rollback: a commit of two writes (two sequences) and a pivot writing a third key, the
    /// smallest world where a reader's snapshot can fall inside one commit.
    MultiWrite,
}

/// The SSI model. See the module docs.
#[derive(Clone, Debug)]
pub struct Ssi {
    pub config: Config,
}

impl Ssi {
    pub fn new(bound: SsiBound) -> Self {
        let (rw, ro) = (|ops_max| Slot { read_only: false, ops_max }, |ops_max| Slot { read_only: true, ops_max });
        let all = Range { start: 0, end: None };
        let (keys, slots, ranges) = match bound {
            SsiBound::Small => (2, vec![rw(2), rw(2), ro(2)], vec![all]),
            SsiBound::Large => (2, vec![rw(3), rw(2), ro(2)], vec![all]),
            SsiBound::MultiWrite => (3, vec![rw(2), rw(2), ro(1)], Vec::new()),
        };
        // Rollback adds little (an abort the tracker sees anyway) and multiplies the large bound's states.
        let rollback = bound == SsiBound::Small;
        let tracker = TrackerUse::Full;
        let read_only_snapshot = ReadOnlySnapshot::Safe;
        Self { config: Config { keys, slots, ranges, rollback, ack_gap: true, tracker, read_only_snapshot } }
    }

    /// Commits become visible the moment they are validated (no group-commit window).
    pub fn without_ack_gap(mut self) -> Self {
        self.config.ack_gap = false;
        self
    }

    /// Known-bad: a read-only transaction reads at the last visible sequence, not at the tracker's safe snapshot
    /// (the rule before ADR-0025): one that begins while a pivot is in flight is chosen to abort.
    pub fn without_safe_snapshot(mut self) -> Self {
        self.config.read_only_snapshot = ReadOnlySnapshot::Latest;
        self
    }

    /// Known-bad: a read-only transaction's safe snapshot steps below a straddled out-neighbour's *commit*
    /// sequence instead of its first (the rule before the txn target found a reader seeing part of a commit):
    /// under [`SsiBound::MultiWrite`] the checker finds a snapshot read of half a commit.
    pub fn safe_snapshot_below_commit(mut self) -> Self {
        self.config.read_only_snapshot = ReadOnlySnapshot::BelowCommit;
        self
    }

    /// Known-bad: the read hooks are never called (plain snapshot isolation).
    pub fn naive_si(mut self) -> Self {
        self.config.tracker = TrackerUse::WritesOnly;
        self
    }

    /// Known-bad: no read-after-commit rw edge.
    pub fn without_read_after_commit_edge(mut self) -> Self {
        self.config.tracker = TrackerUse::NoReadAfterCommit;
        self
    }
}

impl Model for Ssi {
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
            Property::always("serializable", |_, state: &DbState| state.serializability_violation().is_none()),
            Property::always("snapshot_reads", |_, state: &DbState| state.snapshot_read_violation().is_none()),
            Property::always("read_only_never_aborts", |_, state: &DbState| {
                !state.failures.iter().any(|failure| failure.starts_with("read-only"))
            }),
            Property::always("tracker_never_panics", |_, state: &DbState| {
                !state.failures.iter().any(|failure| failure.starts_with("tracker panicked"))
            }),
            Property::always("tracker_bookkeeping", |model: &Ssi, state: &DbState| {
                model.config.tracker == TrackerUse::Off || bookkeeping_holds(state)
            }),
            Property::sometimes("sometimes_rw_conflict", |_, state: &DbState| {
                state.txns.iter().any(|txn| txn.status == Status::Aborted { cause: Cause::ReadWrite })
            }),
        ]
    }
}

fn bookkeeping_holds(state: &DbState) -> bool {
    if !state.failures.is_empty() {
        return true;
    }
    let active = state.txns.iter().filter(|txn| txn.status == Status::Active).count();
    state.tracker.active() == active && (active > 0 || !state.pending.is_empty() || state.tracker.tracked() == 0)
}

impl Spec for Ssi {
    fn name(&self) -> &'static str {
        "Ssi"
    }

    fn bounds(&self) -> String {
        self.config.describe()
    }

    fn describe_state(&self, state: &DbState) -> String {
        let mut text = describe(state);
        for violation in [state.serializability_violation(), state.snapshot_read_violation()].into_iter().flatten() {
            text.push_str(&format!("  violation: {violation}\n"));
        }
        text
    }
}
