//! The visibility watermark (ADR-0133): an unsynced commit inserts its writes into the concurrent memtable after
//! the writer lock, so commits land in any order; one becomes visible only once every earlier sequence has landed
//! too. Whoever completes the prefix publishes it for everyone in it ([`crate::state::Inner::complete`]), so the
//! registry's "committed at or before the visible sequence" and "a read at that sequence sees it" stay one set.
//!
//! Under `SimEnv` a commit is submitted, inserted and completed in one step, so every completer is the prefix's and
//! nobody ever waits here: the schedules are those of the writer-lock insert before it.

use std::collections::BTreeMap;

use env::sync::{Condvar, Mutex, MutexGuard};

use crate::types::Sequence;

/// The most commits inserted above the visible prefix at once (each is a committer between its append and its
/// earlier neighbours' inserts: one per thread).
pub(crate) const COMPLETED_WAITING_MAX: usize = 1 << 16;
/// How many prefix advances a waiter sleeps through before giving up (each is at least one commit landing).
pub(crate) const VISIBILITY_WAITS_MAX: u32 = 1 << 24;
/// How many times a committer checks the lock-free watermark, a spin hint between checks, before it sleeps on the
/// condition variable (ADR-0187). Like RocksDB's `AwaitState`, which spins 200 `pause`s before it yields and
/// blocks: the commits a committer waits for are inserting on other cores, and a few µs of them cost less than a
/// futex sleep and wake. Bounded so a waiter behind a preempted inserter soon sleeps.
pub(crate) const VISIBLE_SPINS_MAX: u32 = 512;

/// A commit whose writes are all in the memtable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Completed {
    pub(crate) first: Sequence,
    pub(crate) last: Sequence,
    /// The committing transaction's snapshot, registered until the commit is visible.
    pub(crate) snapshot: Option<Sequence>,
}

/// The watermark's state, under its lock.
#[derive(Debug)]
pub(crate) struct Marks {
    /// Every sequence up to here is in the memtable and published.
    visible: Sequence,
    /// Commits in the memtable above a gap, by first sequence.
    waiting: BTreeMap<Sequence, Completed>,
    /// The commits the last completions made visible, in sequence order (drained by the publisher; kept for its
    /// capacity, so a commit allocates nothing here).
    advanced: Vec<Completed>,
    /// Threads sleeping in [`Watermark::wait_for`].
    waiters: usize,
}

impl Marks {
    fn new(visible: Sequence) -> Self {
        Self { visible, waiting: BTreeMap::new(), advanced: Vec::new(), waiters: 0 }
    }

    pub(crate) fn visible(&self) -> Sequence {
        self.visible
    }

    /// Whether a commit is in the memtable above a gap (never between simulator steps).
    pub(crate) fn has_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// `commit` is in the memtable: if it closes the gap above `visible`, it and every commit after it with no gap
    /// between move to `advanced`, in order, and `visible` moves to the last of them.
    pub(crate) fn insert(&mut self, commit: Completed) {
        assert!(commit.first > self.visible && commit.first <= commit.last, "{commit:?} at or below {}", self.visible);
        if commit.first != self.visible + 1 {
            assert!(self.waiting.len() < COMPLETED_WAITING_MAX, "over {COMPLETED_WAITING_MAX} commits above a gap");
            let previous = self.waiting.insert(commit.first, commit);
            assert!(previous.is_none(), "{commit:?} completed twice");
            return;
        }
        self.advance(commit);
        while let Some(next) = self.waiting.first_entry() {
            if *next.key() != self.visible + 1 {
                break;
            }
            let next = next.remove();
            self.advance(next);
        }
    }

    fn advance(&mut self, commit: Completed) {
        self.visible = commit.last;
        self.advanced.push(commit);
    }

    /// The commits made visible since the last call, in sequence order.
    pub(crate) fn take_advanced(&mut self) -> std::vec::Drain<'_, Completed> {
        self.advanced.drain(..)
    }
}

/// The watermark and the condition variable its advances signal. A leaf below the writer lock, above the
/// registry lock (the publisher queues its commits for the registry under it, ADR-0197).
pub(crate) struct Watermark {
    marks: Mutex<Marks>,
    advanced: Condvar,
}

impl Watermark {
    pub(crate) fn new(visible: Sequence) -> Self {
        Self { marks: Mutex::new(Marks::new(visible)), advanced: Condvar::new() }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Marks> {
        self.marks.lock().expect("visibility watermark poisoned by a panic")
    }

    /// Wake the threads waiting for an advance (after the publisher told the registry).
    pub(crate) fn notify(&self, marks: &Marks) {
        if marks.waiters > 0 {
            self.advanced.notify_all();
        }
    }

    /// Block until every sequence up to `last` is visible (the committers before it are inserting: no lock they
    /// need is held by a waiter). False after [`VISIBILITY_WAITS_MAX`] advances without reaching it.
    pub(crate) fn wait_for(&self, last: Sequence) -> bool {
        let mut marks = self.lock();
        if marks.visible >= last {
            return true;
        }
        marks.waiters += 1;
        for _ in 0..VISIBILITY_WAITS_MAX {
            marks = self.advanced.wait(marks).expect("visibility watermark poisoned by a panic");
            if marks.visible >= last {
                break;
            }
        }
        marks.waiters -= 1;
        marks.visible >= last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(first: Sequence, last: Sequence) -> Completed {
        Completed { first, last, snapshot: Some(first - 1) }
    }

    fn advanced(marks: &mut Marks) -> Vec<(Sequence, Sequence)> {
        marks.take_advanced().map(|commit| (commit.first, commit.last)).collect()
    }

    /// Commits landing out of order become visible only as a gap-free prefix, each once, in sequence order.
    #[test]
    fn only_a_gap_free_prefix_becomes_visible() {
        let mut marks = Marks::new(4);
        marks.insert(commit(8, 9));
        marks.insert(commit(7, 7));
        assert_eq!((marks.visible(), marks.has_waiting(), advanced(&mut marks)), (4, true, vec![]));
        marks.insert(commit(5, 6));
        assert_eq!((marks.visible(), marks.has_waiting()), (9, false));
        assert_eq!(advanced(&mut marks), vec![(5, 6), (7, 7), (8, 9)]);
        marks.insert(commit(11, 11));
        marks.insert(commit(10, 10));
        assert_eq!((marks.visible(), advanced(&mut marks)), (11, vec![(10, 10), (11, 11)]));
        assert_eq!(advanced(&mut marks), vec![]);
    }

    #[test]
    #[should_panic(expected = "completed twice")]
    fn a_commit_completed_twice_is_a_bug() {
        let mut marks = Marks::new(0);
        marks.insert(commit(3, 3));
        marks.insert(commit(3, 3));
    }

    #[test]
    #[should_panic(expected = "at or below")]
    fn a_commit_below_the_watermark_is_a_bug() {
        let mut marks = Marks::new(5);
        marks.insert(commit(5, 6));
    }

    /// A waiter wakes when another thread's completion closes the gap, and not before.
    #[test]
    fn a_waiter_wakes_when_the_prefix_reaches_it() {
        let watermark = std::sync::Arc::new(Watermark::new(0));
        watermark.lock().insert(commit(2, 2));
        let (sender, receiver) = std::sync::mpsc::channel();
        let waiting = std::sync::Arc::clone(&watermark);
        let env = env::RealEnv::new();
        let handle = env::Env::spawn(
            &env,
            "waiter",
            Box::new(move || {
                let _ = sender.send(waiting.wait_for(2));
                env::TaskStep::Done
            }),
        );
        let early = receiver.recv_timeout(std::time::Duration::from_millis(50));
        assert!(early.is_err(), "woke with sequence 1 missing: {early:?}");
        let mut marks = watermark.lock();
        marks.insert(commit(1, 1));
        assert_eq!((marks.visible(), marks.waiters), (2, 1));
        watermark.notify(&marks);
        drop(marks);
        assert_eq!(receiver.recv_timeout(std::time::Duration::from_secs(20)), Ok(true));
        env::Env::wait(&env, &handle).unwrap();
        assert_eq!(watermark.lock().waiters, 0);
    }
}
