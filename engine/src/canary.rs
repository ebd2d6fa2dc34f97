//! Canary bugs (ADR-0020): planted, realistic bugs that the simulator must find. Compiled in only with the
//! `canaries` feature; without it [`active`] is a constant `false` and every canary branch is dead code.
//!
//! Each canary is one small change on the real code path, selected at run time by name.

/// Every canary's name.
#[cfg(feature = "canaries")]
pub const CANARIES: &[&str] = &[
    "tombstone-fallthrough",
    "unsynced-ack",
    "fsync-error-ignored",
    "torn-tail-rejected",
    "seq-reset-on-recovery",
    "manifest-before-data",
    "damaged-segment-ends-log",
    "completion-unpublished",
    "bloom-always-maybe",
    "flush-leaves-immutables",
    "block-cache-never-inserts",
    "compaction-picks-whole-level",
    "scan-reads-every-table",
];

#[cfg(feature = "canaries")]
mod switch {
    use std::cell::Cell;

    thread_local! {
        /// Per thread: a simulated world runs on one thread (ADR-0005), and parallel test threads replay different
        /// canaries at once.
        static ACTIVE: Cell<Option<&'static str>> = const { Cell::new(None) };
    }

    /// Turn one canary on (or all off with `None`) for this thread.
    pub fn set_active(name: Option<&str>) -> Result<(), String> {
        let resolved = match name {
            None => None,
            Some(name) => Some(
                super::CANARIES
                    .iter()
                    .chain(super::TRANSACTION_CANARIES)
                    .copied()
                    .find(|known| *known == name)
                    .ok_or_else(|| format!("unknown canary {name:?}"))?,
            ),
        };
        ACTIVE.with(|active| active.set(resolved));
        Ok(())
    }

    /// True when the named canary is on for this thread.
    pub fn active(name: &str) -> bool {
        ACTIVE.with(|active| active.get() == Some(name))
    }
}

#[cfg(feature = "canaries")]
pub use switch::{active, set_active};

/// Canaries in the transaction layer (`completion-unpublished` is in the commit pipeline both targets run: it is
/// in both lists).
#[cfg(feature = "canaries")]
pub const TRANSACTION_CANARIES: &[&str] = &[
    "ssi-off",
    "no-predicate-reads",
    "read-after-commit-edge-missed",
    "gc-drops-live-version",
    "completion-unpublished",
    "sync-per-commit",
];

/// Without the `canaries` feature no canary exists: always false.
#[cfg(not(feature = "canaries"))]
#[inline(always)]
pub fn active(_name: &str) -> bool {
    false
}
