//! The transaction target's cost contract (ADR-0184): a commit's log syncs, from the group commit's design.
//!
//! - `cost.log_syncs_per_ack`: waiting for one commit syncs the log at most [`LOG_SYNCS_PER_ACK_MAX`] times plus
//!   one per log segment a rotation sealed while it waited. A batch syncs once for all of its commits (ADR-0092);
//!   the commit waited for may need the batch before it to end first (at most two batches live,
//!   `BATCHES_LIVE_MAX`), and a rotation seals the segment it closes with one sync of its own, counted by the
//!   engine (`Stats::log_seals`), also when creating the next segment then fails (ADR-0192) and when the sync
//!   itself fails (ADR-0212).

use std::path::PathBuf;

use holdfast::Violation;
use holdfast::cost::cost_violation;
use holdfast::env::{CostCounters, SimEnv};

/// Every cost invariant the transaction target checks.
pub const COST_INVARIANTS: &[&str] = &["cost.log_syncs_per_ack"];
/// Log syncs one acknowledgement may wait on, rotations aside: its own batch's and the batch before it.
pub const LOG_SYNCS_PER_ACK_MAX: u64 = 2;

/// What the last measured acknowledgement cost the log.
#[derive(Debug, Default)]
pub(crate) struct AckCost {
    before: Vec<(PathBuf, CostCounters)>,
    /// Log syncs, and log segments a rotation sealed, during the wait.
    syncs: u64,
    seals: u64,
    seals_before: u64,
}

fn log_syncs(files: &[(PathBuf, CostCounters)]) -> u64 {
    let logs = files
        .iter()
        .filter(|(path, _)| path.file_name().is_some_and(|name| name.as_encoded_bytes().starts_with(b"wal-")));
    logs.map(|(_, io)| io.file_syncs).sum()
}

impl AckCost {
    /// Before the wait: the step's IO so far and the engine's seal count (`Stats::log_seals`).
    pub(crate) fn before(&mut self, env: &SimEnv, log_seals: u64) {
        self.before = env.step_files();
        self.seals_before = log_seals;
    }

    /// After it.
    pub(crate) fn after(&mut self, env: &SimEnv, log_seals: u64) {
        let syncs_before = log_syncs(&std::mem::take(&mut self.before));
        self.syncs = log_syncs(&env.step_files()).saturating_sub(syncs_before);
        self.seals = log_seals.saturating_sub(self.seals_before);
    }

    /// `cost.log_syncs_per_ack` on the acknowledgement of transaction `txn` just measured.
    pub(crate) fn check(&self, txn: u64) -> Result<(), Violation> {
        let allowed = LOG_SYNCS_PER_ACK_MAX + self.seals;
        if self.syncs > allowed {
            return Err(cost_violation(
                "cost.log_syncs_per_ack",
                format!(
                    "waiting for T{txn}'s commit syncs the log at most {LOG_SYNCS_PER_ACK_MAX} times plus once per \
                     segment a rotation sealed ({})",
                    self.seals
                ),
                format!("{} log syncs", self.syncs),
            ));
        }
        Ok(())
    }
}
