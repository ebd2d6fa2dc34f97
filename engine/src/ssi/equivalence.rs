//! The indexed tracker agrees with the walking [`Reference`] call for call (ADR-0084): random histories of
//! begin, read, scan, put (a doomed check), commit, finish, abort and acknowledge, driven the way the engine drives
//! the tracker (read-only transactions at `safe_snapshot`, commits taking consecutive sequences, acknowledged in
//! order), through both; every result, every record, the counters, `safe_snapshot` and `straddles` must be equal,
//! and the index must equal one rebuilt from the records.

use std::collections::VecDeque;

use proptest::prelude::*;

use super::index::Index;
use super::reference::Reference;
use super::{ConflictTracker, KeyRange, Sequence, TxnId};

/// Distinct keys the histories touch: few, so that transactions conflict.
const KEYS: u8 = 4;

#[derive(Clone, Debug)]
enum Op {
    Begin {
        read_only: bool,
    },
    Read {
        handle: usize,
        key: u8,
    },
    /// A scan of `[start, start + len)`; `len == 0` is unbounded above.
    Scan {
        handle: usize,
        start: u8,
        len: u8,
    },
    Put {
        handle: usize,
    },
    /// Commit the keys (sorted, deduplicated); none, or a read-only transaction: finish.
    Commit {
        handle: usize,
        keys: Vec<u8>,
    },
    Abort {
        handle: usize,
    },
    Acknowledge,
}

fn op() -> impl Strategy<Value = Op> {
    let handle = 0..8usize;
    prop_oneof![
        3 => prop_oneof![1 => Just(true), 3 => Just(false)].prop_map(|read_only| Op::Begin { read_only }),
        5 => (handle.clone(), 0..KEYS).prop_map(|(handle, key)| Op::Read { handle, key }),
        2 => (handle.clone(), 0..KEYS, 0..3u8).prop_map(|(handle, start, len)| Op::Scan { handle, start, len }),
        1 => handle.clone().prop_map(|handle| Op::Put { handle }),
        3 => (handle.clone(), proptest::collection::vec(0..KEYS, 0..3))
            .prop_map(|(handle, keys)| Op::Commit { handle, keys }),
        1 => handle.prop_map(|handle| Op::Abort { handle }),
        2 => Just(Op::Acknowledge),
    ]
}

fn key(key: u8) -> Vec<u8> {
    vec![b'a' + key]
}

/// Both trackers and the engine's side of the history.
struct Driver {
    indexed: ConflictTracker,
    reference: Reference,
    /// Open handles: (id, read-only).
    live: Vec<(TxnId, bool)>,
    visible: Sequence,
    next_sequence: Sequence,
    /// Validated commits' last sequences, not yet visible, in order.
    pending: VecDeque<Sequence>,
}

impl Driver {
    fn new(capacity: usize) -> Self {
        Self {
            indexed: ConflictTracker::with_capacity(capacity),
            reference: Reference::with_capacity(capacity),
            live: Vec::new(),
            visible: 0,
            next_sequence: 1,
            pending: VecDeque::new(),
        }
    }

    /// Call both trackers; their answers must be equal.
    fn both<T: PartialEq + std::fmt::Debug>(
        &mut self,
        indexed: impl FnOnce(&mut ConflictTracker) -> T,
        reference: impl FnOnce(&mut Reference) -> T,
    ) -> T {
        let (found, expected) = (indexed(&mut self.indexed), reference(&mut self.reference));
        assert_eq!(found, expected, "the indexed tracker answered differently from the reference");
        found
    }

    fn handle(&self, handle: usize) -> Option<(usize, TxnId, bool)> {
        let slot = handle.checked_rem(self.live.len())?;
        let (id, read_only) = self.live[slot];
        Some((slot, id, read_only))
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Begin { read_only } => self.begin(*read_only),
            Op::Read { handle, key: k } => {
                let Some((slot, id, _)) = self.handle(*handle) else { return };
                let read = self.both(|t| t.on_read(id, &key(*k)), |t| t.on_read(id, &key(*k)));
                self.end_on_conflict(slot, id, read.is_err());
            }
            Op::Scan { handle, start, len } => {
                let Some((slot, id, _)) = self.handle(*handle) else { return };
                let end = (*len > 0).then(|| key(start + len));
                let range = KeyRange { start: key(*start), end };
                let scanned = self.both(|t| t.on_scan(id, range.clone()), |t| t.on_scan(id, range.clone()));
                self.end_on_conflict(slot, id, scanned.is_err());
            }
            Op::Put { handle } => {
                let Some((slot, id, read_only)) = self.handle(*handle) else { return };
                if !read_only {
                    let put = self.both(|t| t.check_doomed_public(id), |t| t.check_doomed_public(id));
                    self.end_on_conflict(slot, id, put.is_err());
                }
            }
            Op::Commit { handle, keys } => self.commit(*handle, keys),
            Op::Abort { handle } => {
                let Some((slot, id, _)) = self.handle(*handle) else { return };
                self.both(|t| t.abort(id), |t| t.abort(id));
                self.live.remove(slot);
            }
            Op::Acknowledge => {
                let Some(last) = self.pending.pop_front() else { return };
                self.visible = last;
                self.both(|t| t.set_visible(last), |t| t.set_visible(last));
            }
        }
    }

    fn begin(&mut self, read_only: bool) {
        let visible = self.visible;
        let snapshot = match read_only {
            true => self.both(|t| t.safe_snapshot(visible), |t| t.safe_snapshot(visible)),
            false => visible,
        };
        let begun = self.both(|t| t.try_begin(snapshot, read_only), |t| t.try_begin(snapshot, read_only));
        if let Ok(id) = begun {
            self.live.push((id, read_only));
        }
    }

    fn commit(&mut self, handle: usize, keys: &[u8]) {
        let Some((slot, id, read_only)) = self.handle(handle) else { return };
        self.live.remove(slot);
        let mut writes: Vec<Vec<u8>> = keys.iter().map(|k| key(*k)).collect();
        writes.sort();
        writes.dedup();
        if read_only || writes.is_empty() {
            let visible = self.visible;
            self.both(|t| t.finish(id, visible), |t| t.finish(id, visible)).ok();
            return;
        }
        let last = self.next_sequence + writes.len() as u64 - 1;
        if self.both(|t| t.commit(id, &writes, last), |t| t.commit(id, &writes, last)).is_ok() {
            self.next_sequence = last + 1;
            self.pending.push_back(last);
        }
    }

    /// A read or scan that failed ends its transaction, as the engine does.
    fn end_on_conflict(&mut self, slot: usize, id: TxnId, failed: bool) {
        if failed {
            self.both(|t| t.abort(id), |t| t.abort(id));
            self.live.remove(slot);
        }
    }

    /// Everything the two trackers hold is equal, and the index is the one the records give.
    fn check(&self) {
        let (indexed, reference) = (&self.indexed, &self.reference);
        assert_eq!(indexed.txns, reference.txns, "records");
        assert_eq!(indexed.stats, reference.stats, "counters");
        assert_eq!(indexed.expired, reference.expired, "expired handles");
        assert_eq!((indexed.tracked(), indexed.active()), (reference.tracked(), reference.active()));
        assert_eq!(indexed.straddles(), reference.straddles(), "straddles");
        for visible in 0..=self.next_sequence {
            assert_eq!(indexed.safe_snapshot(visible), reference.safe_snapshot(visible), "safe snapshot at {visible}");
        }
        let rebuilt = Index::build(&indexed.txns, |_, record| indexed.pivot_straddles(record));
        assert_eq!(indexed.index, rebuilt, "the index drifted from the records");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The indexed tracker and the reference agree on every call, every record and every answer.
    #[test]
    fn the_indexed_tracker_agrees_with_the_walking_reference(
        capacity in prop_oneof![4..12usize, Just(super::TRACKED_TRANSACTIONS_MAX)],
        ops in proptest::collection::vec(op(), 1..150),
    ) {
        let mut driver = Driver::new(capacity);
        for op in &ops {
            driver.apply(op);
            driver.check();
        }
        // Every handle ends; then only what in-flight commits pin is left, and nothing once they are visible.
        for (id, _) in std::mem::take(&mut driver.live) {
            driver.both(|t| t.abort(id), |t| t.abort(id));
        }
        while !driver.pending.is_empty() {
            driver.apply(&Op::Acknowledge);
        }
        driver.check();
        prop_assert_eq!(driver.indexed.tracked(), 0, "every record pruned once nothing is open or in flight");
    }
}

/// The history the benchmark measures, small: one reader held open pins every later commit's record; the
/// commits' lookups still find exactly the reference's answers, and releasing the reader drops every record.
#[test]
fn a_held_reader_retains_records_and_the_index_answers_as_the_walk_does() {
    let mut driver = Driver::new(super::TRACKED_TRANSACTIONS_MAX);
    driver.apply(&Op::Begin { read_only: true });
    driver.apply(&Op::Read { handle: 0, key: 0 });
    for round in 0..200u8 {
        driver.apply(&Op::Begin { read_only: false });
        driver.apply(&Op::Read { handle: 1, key: round % KEYS });
        driver.apply(&Op::Scan { handle: 1, start: round % 3, len: 2 });
        driver.apply(&Op::Commit { handle: 1, keys: vec![(round + 1) % KEYS] });
        driver.apply(&Op::Acknowledge);
    }
    driver.check();
    assert_eq!(driver.indexed.tracked(), 201, "the held reader and every commit after it");
    driver.apply(&Op::Commit { handle: 0, keys: Vec::new() });
    driver.check();
    assert_eq!(driver.indexed.tracked(), 0, "all dropped once the reader ends");
}
