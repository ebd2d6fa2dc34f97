//! Why the conflict tracker makes a transaction abort: [`Conflict`] and its [`ConflictCause`], kept as data.

use std::fmt;

/// Why a transaction must abort.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Conflict {
    /// The cause, as the tracker found it (the engine reports it as [`crate::Error::Conflict`]).
    pub cause: ConflictCause,
}

/// Why the conflict tracker made a transaction abort: a serialization failure, kept as data (the key as bytes);
/// its [`Display`](fmt::Display) renders the message. See the module docs for the rules behind each cause.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConflictCause {
    /// First committer wins: a transaction that committed after this one's snapshot also wrote `key`, which this
    /// one writes. Found at this transaction's commit.
    WriteWrite {
        /// The first key of this transaction's writes (in the order given to commit) that the other also wrote.
        key: Vec<u8>,
    },
    /// A read found a version of `key` committed after the reader's snapshot (an rw antidependency, read after
    /// commit) and that edge closed a dangerous structure. The victim (this transaction) is the reader, or the
    /// transaction whose rw edge leads into the reader; it learns of it at its next operation.
    ReadWrite {
        /// The key read; for a scan, the start of the scanned range.
        key: Vec<u8>,
    },
    /// At this transaction's commit, its write of `key` completed an rw antidependency from a concurrent reader
    /// that closed a dangerous structure with this transaction as the victim.
    DangerousStructure {
        /// The key this transaction writes that the concurrent reader had read (or scanned over).
        key: Vec<u8>,
    },
    /// Fekete's read-only anomaly guard at a writer's commit: an open read-only transaction sees a commit that
    /// this writer must precede (this writer has an rw antidependency to it), so this writer aborts.
    ReadOnlyGuard {
        /// A key this writer read that the committed transaction it must precede overwrote; if none is left in the
        /// tracker, the first key this writer writes.
        key: Vec<u8>,
    },
    /// The tracker was full (`Options::tracked_transactions_max`) and this was the oldest active transaction: it
    /// was ended to make room (a read-only one too: it ends, it does not abort; ADR-0072). Retry it. No key.
    Expired,
}

impl ConflictCause {
    /// The key the conflict is on, where the cause has one (every cause today has one).
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            ConflictCause::WriteWrite { key }
            | ConflictCause::ReadWrite { key }
            | ConflictCause::DangerousStructure { key }
            | ConflictCause::ReadOnlyGuard { key } => Some(key),
            ConflictCause::Expired => None,
        }
    }

    /// A stable short name of the cause, for counters and reports: `ww`, `rw`, `dangerous` or
    /// `read_only_guard`.
    pub fn name(&self) -> &'static str {
        match self {
            ConflictCause::WriteWrite { .. } => "ww",
            ConflictCause::ReadWrite { .. } => "rw",
            ConflictCause::DangerousStructure { .. } => "dangerous",
            ConflictCause::ReadOnlyGuard { .. } => "read_only_guard",
            ConflictCause::Expired => "expired",
        }
    }
}

impl fmt::Display for ConflictCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConflictCause::WriteWrite { key } => {
                write!(f, "write-write conflict on {}: first committer wins", render(key))
            }
            ConflictCause::ReadWrite { key } => write!(f, "rw conflict on {}", render(key)),
            ConflictCause::DangerousStructure { key } => {
                write!(f, "dangerous structure through rw conflict on {}", render(key))
            }
            ConflictCause::ReadOnlyGuard { key } => write!(
                f,
                "rw conflict on {}: an open read-only transaction sees a commit this writer must precede",
                render(key)
            ),
            ConflictCause::Expired => {
                f.write_str("expired: the conflict tracker was full and this was its oldest active transaction")
            }
        }
    }
}

/// A key in a message: quoted text if it is printable UTF-8, else hex.
fn render(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(text) if text.chars().all(|c| !c.is_control()) => format!("{text:?}"),
        _ => format!("0x{}", key.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}
