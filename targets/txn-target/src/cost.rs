//! The transaction target's cost contract (ADR-0184): a commit's log syncs, from the group commit's design.
//!
//! - `cost.log_syncs_per_ack`: waiting for one commit syncs the log at most [`LOG_SYNCS_PER_ACK_MAX`] times plus
//!   one per log segment created while it waited. A batch syncs once for all of its commits (ADR-0092); the
//!   commit waited for may need the batch before it to end first (at most two batches live, `BATCHES_LIVE_MAX`),
//!   and a rotation seals the segment it closes with one sync of its own.

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
    /// Log syncs, and log segments opened (a rotation creates one), during the wait.
    syncs: u64,
    opens: u64,
}

fn log_totals(files: &[(PathBuf, CostCounters)]) -> (u64, u64) {
    let logs = files
        .iter()
        .filter(|(path, _)| path.file_name().is_some_and(|name| name.as_encoded_bytes().starts_with(b"wal-")));
    logs.fold((0, 0), |(syncs, opens), (_, io)| (syncs + io.file_syncs, opens + io.opens))
}

impl AckCost {
    pub(crate) fn before(&mut self, env: &SimEnv) {
        self.before = env.step_files();
    }

    pub(crate) fn after(&mut self, env: &SimEnv) {
        let (syncs, opens) = log_totals(&env.step_files());
        let (syncs_before, opens_before) = log_totals(&std::mem::take(&mut self.before));
        (self.syncs, self.opens) = (syncs.saturating_sub(syncs_before), opens.saturating_sub(opens_before));
    }

    /// `cost.log_syncs_per_ack` on the acknowledgement of transaction `txn` just measured.
    pub(crate) fn check(&self, txn: u64) -> Result<(), Violation> {
        let allowed = LOG_SYNCS_PER_ACK_MAX + self.opens;
        if self.syncs > allowed {
            return Err(cost_violation(
                "cost.log_syncs_per_ack",
                format!(
                    "waiting for T{txn}'s commit syncs the log at most {LOG_SYNCS_PER_ACK_MAX} times plus once per \
                     segment a rotation created ({})",
                    self.opens
                ),
                format!("{} log syncs", self.syncs),
            ));
        }
        Ok(())
    }
}
