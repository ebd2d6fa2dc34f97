//! The pure rules of recovery (ADR-0012, ADR-0015, ADR-0033; ADR-0062): which log segments replay, which of
//! them counts as the last, how each may end, and where sequences and file numbers continue. `recovery.rs` applies
//! them to real files; `specs::Storage` calls the same functions on its model disk, so the model checks these
//! rules and not a copy of them. Everything here is a function of values: no file, no lock, no canary.

use crate::types::Sequence;
use crate::wal::{Record, WalEnd, WalScan};

/// Whether segment `number` is replayed under a manifest whose log number is `log_number`: older segments hold
/// only commits a table of the manifest already has.
pub fn replays_segment(number: u64, log_number: u64) -> bool {
    number >= log_number
}

/// Whether a segment of `len_bytes` counts when deciding which segment is the last (ADR-0033): an empty one holds
/// nothing — a recovery that crashed before installing its manifest leaves one — and does not.
pub fn segment_counts(len_bytes: u64) -> bool {
    len_bytes > 0
}

/// Whether a replayed segment ended with its seal record (a rotation sealed and synced it before moving on).
pub fn is_sealed(scan: &WalScan) -> bool {
    matches!(scan.records.last(), Some((_, Record::Seal)))
}

/// What recovery does with a replayed segment's end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SegmentEnd {
    /// The segment ends cleanly, or is sealed: keep it as it is.
    Keep,
    /// A torn, never-acknowledged tail of the last segment: truncate the file to `offset` (and sync it).
    Truncate { offset: u64 },
    /// Damage no crash explains: `Error::Corruption` at `offset`.
    Corrupt { offset: u64, reason: String },
    /// A clean segment that is not the last lacks its seal: `Error::Corruption` at the segment's end.
    Unsealed,
}

/// Why an [`SegmentEnd::Unsealed`] segment is corrupt.
pub const UNSEALED_REASON: &str = "segment is not the last but has no seal record";

/// How a replayed segment may end (ADR-0012): the last counted segment may end in a torn tail; every earlier one
/// was sealed and synced before the log moved on, so damage or a missing seal there is corruption.
pub fn segment_end(scan: &WalScan, is_last: bool) -> SegmentEnd {
    let sealed = is_sealed(scan);
    match &scan.end {
        WalEnd::Corrupt { offset, reason } => SegmentEnd::Corrupt { offset: *offset, reason: reason.clone() },
        WalEnd::TornTail { offset } if !is_last && !sealed => {
            SegmentEnd::Corrupt { offset: *offset, reason: "a sealed-over segment ends in damage".into() }
        }
        WalEnd::TornTail { offset } => SegmentEnd::Truncate { offset: *offset },
        WalEnd::Clean if !is_last && !sealed => SegmentEnd::Unsealed,
        WalEnd::Clean => SegmentEnd::Keep,
    }
}

/// Whether a replayed batch starting at `first_sequence` may follow the highest sequence replayed so far
/// (`replayed_last`): sequences in the log strictly increase.
pub fn batch_follows(first_sequence: Sequence, replayed_last: Sequence) -> bool {
    first_sequence > replayed_last
}

/// The sequence the recovered database continues from: never lower than what the manifest or the log shows.
pub fn recovered_last_sequence(manifest_last: Sequence, replayed_last: Sequence) -> Sequence {
    manifest_last.max(replayed_last)
}

/// The number of the new log segment a recovery creates: above every file number the manifest handed out and
/// every file in the directory.
pub fn next_file_number(manifest_next: u64, highest_listed: u64) -> u64 {
    manifest_next.max(highest_listed + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::Batch;

    fn scan(sealed: bool, end: WalEnd) -> WalScan {
        let batch = Record::Batch(Batch { first_sequence: 1, writes: Vec::new() });
        let mut records = vec![(0, batch)];
        if sealed {
            records.push((40, Record::Seal));
        }
        WalScan { records, end }
    }

    #[test]
    fn only_the_last_segment_may_end_torn_and_only_a_sealed_one_may_be_followed() {
        let torn = WalEnd::TornTail { offset: 40 };
        assert_eq!(segment_end(&scan(false, torn.clone()), true), SegmentEnd::Truncate { offset: 40 });
        assert!(matches!(segment_end(&scan(false, torn.clone()), false), SegmentEnd::Corrupt { offset: 40, .. }));
        assert_eq!(segment_end(&scan(true, torn), false), SegmentEnd::Truncate { offset: 40 });
        assert_eq!(segment_end(&scan(false, WalEnd::Clean), true), SegmentEnd::Keep);
        assert_eq!(segment_end(&scan(true, WalEnd::Clean), false), SegmentEnd::Keep);
        assert!(matches!(segment_end(&scan(false, WalEnd::Clean), false), SegmentEnd::Unsealed));
        let corrupt = WalEnd::Corrupt { offset: 7, reason: "crc".into() };
        assert_eq!(segment_end(&scan(true, corrupt), true), SegmentEnd::Corrupt { offset: 7, reason: "crc".into() });
    }

    #[test]
    fn numbers_and_sequences_never_go_back() {
        assert!(replays_segment(5, 5) && replays_segment(6, 5) && !replays_segment(4, 5));
        assert!(segment_counts(1) && !segment_counts(0));
        assert!(batch_follows(4, 3) && !batch_follows(3, 3));
        assert_eq!((recovered_last_sequence(9, 4), recovered_last_sequence(4, 9)), (9, 9));
        assert_eq!((next_file_number(3, 7), next_file_number(9, 7)), (8, 9));
    }
}
