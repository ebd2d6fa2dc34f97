//! Streaming scans (ADR-0085): [`ScanIter`], a lazy, double-ended iterator of the rows in a key range at a
//! snapshot, merging the memtables, the level-0 tables overlapping the range and one lazy cursor per deeper level;
//! a transaction's own writes laid over them; the range it observed registered with the conflict tracker once.

pub(crate) mod merge;
mod rows;
mod sources;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use env::File;

use self::merge::{Direction, MergeIter};
use self::rows::{OwnWrites, Row, VisibleRows};
use crate::error::{Error, Result};
use crate::ssi::{KeyRange, TxnId};
use crate::types::Sequence;
use crate::view::{ClosedFlag, ReadView};

/// Turn a range of borrowed keys into the `[start, end)` form scans and the tracker use.
pub(crate) fn key_range<'a>(range: &impl RangeBounds<&'a [u8]>) -> KeyRange {
    let start = match range.start_bound() {
        Bound::Included(key) => key.to_vec(),
        Bound::Excluded(key) => [*key, &[0u8][..]].concat(),
        Bound::Unbounded => Vec::new(),
    };
    let end = match range.end_bound() {
        Bound::Included(key) => Some([*key, &[0u8][..]].concat()),
        Bound::Excluded(key) => Some(key.to_vec()),
        Bound::Unbounded => None,
    };
    KeyRange { start, end }
}

/// The keys starting with `prefix`: `[prefix, successor)`, where the successor drops the trailing `0xFF` bytes and
/// increments the last byte left (no end when none is left: every key from `prefix` on).
pub(crate) fn prefix_range(prefix: &[u8]) -> KeyRange {
    let kept = prefix.len() - prefix.iter().rev().take_while(|&&byte| byte == 0xFF).count();
    let end = (kept > 0).then(|| {
        let mut end = prefix[..kept].to_vec();
        *end.last_mut().expect("kept > 0") += 1;
        end
    });
    KeyRange { start: prefix.to_vec(), end }
}

/// `a == b`, the last bytes compared first: neighbouring keys mostly differ at their end (a shared prefix, a
/// counter), so most unequal keys are told apart without a call to `memcmp`.
pub(crate) fn same_key(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.last() == b.last() && a == b
}

/// Registers the key range a transaction's scan observed with the conflict tracker (ADR-0085).
pub(crate) trait ScanRegistry: Send + Sync {
    /// Register `range` for `txn`; a conflict the registration finds is the error.
    fn register(&self, txn: TxnId, read_only: bool, range: KeyRange) -> Result<()>;
}

/// Who registers what a scan observed: the tracker's handle and the transaction.
pub(crate) struct Registrar {
    pub(crate) registry: Arc<dyn ScanRegistry>,
    pub(crate) txn: TxnId,
    pub(crate) read_only: bool,
}

/// Builds an end's rows when the end is first read.
type DeferredRows = Box<dyn FnOnce() -> VisibleRows<'static> + Send>;

/// An end's rows: built, or deferred until the end is first read (most scans read one end only: the other end's
/// cursors are not built, ADR-0091).
enum EndRows {
    Ready(VisibleRows<'static>),
    Deferred(Option<DeferredRows>),
}

/// One end of a scan: the snapshot's rows in one direction, the transaction's own writes laid over them.
struct End<'txn> {
    rows: EndRows,
    own: Option<OwnWrites<'txn>>,
    /// The last key this end returned (a buffer reused from row to row); `moved` once it returned one.
    last: Vec<u8>,
    moved: bool,
}

impl End<'_> {
    fn next_row(&mut self) -> Option<Result<Row>> {
        let rows = match &mut self.rows {
            EndRows::Ready(rows) => rows,
            EndRows::Deferred(build) => {
                let build = build.take().expect("an end's rows are built once");
                self.rows = EndRows::Ready(build());
                let EndRows::Ready(rows) = &mut self.rows else { unreachable!("just built") };
                rows
            }
        };
        match &mut self.own {
            Some(own) => own.next_row(rows),
            None => rows.next(),
        }
    }

    fn remember(&mut self, key: &[u8]) {
        self.last.clear();
        self.last.extend_from_slice(key);
        self.moved = true;
    }
}

/// The rows of `view` over `bounds` at `snapshot` in `direction` (none when `inverted`).
fn rows_of<F: File>(
    view: &ReadView<F>,
    bounds: &Arc<KeyRange>,
    direction: Direction,
    snapshot: Sequence,
    inverted: bool,
) -> VisibleRows<'static> {
    let sources = if inverted { Vec::new() } else { sources::sources(view, bounds, direction, snapshot) };
    let merge = match direction {
        // Forward, each source yields one version per user key (the newest visible, ADR-0085).
        Direction::Forward => MergeIter::with_distinct_keys(sources, direction),
        Direction::Reverse => MergeIter::with_direction(sources, direction),
    };
    VisibleRows::new(merge, direction, snapshot)
}

/// The back end's rows, built when first read: holds the view's memtables and version (what the front end holds).
fn deferred_rows<F: File>(
    view: &ReadView<F>,
    bounds: &Arc<KeyRange>,
    snapshot: Sequence,
    inverted: bool,
) -> DeferredRows {
    let view = view.clone();
    let bounds = Arc::clone(bounds);
    Box::new(move || rows_of(&view, &bounds, Direction::Reverse, snapshot, inverted))
}

/// The rows of a scan: `Result<(key, value)>`, in key order, double-ended (`.rev()`), lazy: each row is merged
/// when asked for. Errors known up front are the scan call's `Err`; an IO error or corruption met while scanning,
/// `Err(Closed)` once the database is closed (ADR-0075), or a conflict found when the observed range is
/// registered, is an item, and the iterator ends after it. A transaction's iterator borrows it (ADR-0064): the
/// transaction cannot commit, roll back, write or be dropped while the iterator lives. Its observed range (the
/// whole range once exhausted, else `[start, last row]` and `[last row from the back, end)`) is registered with the
/// conflict tracker when it is exhausted or dropped (ADR-0085).
pub struct ScanIter<'txn> {
    front: End<'txn>,
    back: End<'txn>,
    bounds: Arc<KeyRange>,
    closed: ClosedFlag,
    registrar: Option<Registrar>,
    /// Set once the iterator has ended (exhausted, failed or closed); no row after it.
    finished: bool,
    /// Set once the observed range was registered (or there was nothing to register).
    registered: bool,
    transaction: PhantomData<&'txn mut ()>,
}

impl std::fmt::Debug for ScanIter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanIter")
            .field("bounds", &self.bounds)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl<'txn> ScanIter<'txn> {
    /// A scan of `view` over `bounds` at `snapshot`, with `own` writes laid over it, registering through
    /// `registrar`. Reads nothing yet.
    pub(crate) fn new<F: File>(
        view: &ReadView<F>,
        bounds: KeyRange,
        snapshot: Sequence,
        own: Option<&'txn BTreeMap<Vec<u8>, Option<Vec<u8>>>>,
        registrar: Option<Registrar>,
    ) -> Self {
        let inverted = bounds.end.as_ref().is_some_and(|end| *end <= bounds.start);
        let bounds = Arc::new(bounds);
        let own_range = own.filter(|_| !inverted).and_then(|writes| {
            let range = (
                Bound::Included(bounds.start.as_slice()),
                bounds.end.as_deref().map_or(Bound::Unbounded, Bound::Excluded),
            );
            let writes = writes.range::<[u8], _>(range);
            // No own write in the range: the rows go straight through (ADR-0065).
            writes.clone().next().is_some().then_some(writes)
        });
        let end = |rows: EndRows, direction: Direction| {
            let own = own_range.clone().map(|writes| OwnWrites::new(writes, direction));
            End { rows, own, last: Vec::new(), moved: false }
        };
        let front =
            end(EndRows::Ready(rows_of(view, &bounds, Direction::Forward, snapshot, inverted)), Direction::Forward);
        let back = end(EndRows::Deferred(Some(deferred_rows(view, &bounds, snapshot, inverted))), Direction::Reverse);
        let registered = registrar.is_none() || inverted;
        Self {
            front,
            back,
            bounds,
            closed: view.closed.clone(),
            registrar,
            finished: false,
            registered,
            transaction: PhantomData,
        }
    }

    /// Register `ranges` once; the first conflict is the result.
    fn register(&mut self, ranges: impl IntoIterator<Item = KeyRange>) -> Result<()> {
        if std::mem::replace(&mut self.registered, true) {
            return Ok(());
        }
        let Some(registrar) = &self.registrar else { return Ok(()) };
        for range in ranges {
            registrar.registry.register(registrar.txn, registrar.read_only, range)?;
        }
        Ok(())
    }

    /// The iterator is exhausted: every key of the range was observed. A conflict the registration finds is the
    /// last item.
    fn exhausted(&mut self) -> Option<Result<Row>> {
        self.finished = true;
        let whole = KeyRange::clone(&self.bounds);
        self.register([whole]).err().map(Err)
    }

    /// What an early drop observed: `[start, last row]` from the front, `[last row, end)` from the back.
    fn observed(&self) -> Vec<KeyRange> {
        let mut ranges = Vec::new();
        if self.front.moved {
            let end = [self.front.last.as_slice(), &[0u8][..]].concat();
            ranges.push(KeyRange { start: self.bounds.start.clone(), end: Some(end) });
        }
        if self.back.moved {
            ranges.push(KeyRange { start: self.back.last.clone(), end: self.bounds.end.clone() });
        }
        ranges
    }

    /// The next row from `direction`'s end, unless it meets the other end.
    fn step(&mut self, direction: Direction) -> Option<Result<Row>> {
        if self.finished {
            return None;
        }
        if self.closed.is_set() {
            self.finished = true;
            return Some(Err(Error::Closed { reason: "closed by Db::close".into() }));
        }
        let (this, other) = match direction {
            Direction::Forward => (&mut self.front, &self.back),
            Direction::Reverse => (&mut self.back, &self.front),
        };
        let row = match this.next_row() {
            None => return self.exhausted(),
            Some(Err(error)) => {
                self.finished = true;
                return Some(Err(error));
            }
            Some(Ok(row)) => row,
        };
        if crate::EXPENSIVE_CHECKS && this.moved {
            let order = direction.orient(row.0.as_slice().cmp(this.last.as_slice()));
            assert!(order.is_gt(), "a scan end returned rows out of order or a key twice");
        }
        let met = other.moved && direction.orient(row.0.as_slice().cmp(other.last.as_slice())).is_ge();
        if met {
            return self.exhausted();
        }
        this.remember(&row.0);
        Some(Ok(row))
    }
}

impl Iterator for ScanIter<'_> {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        self.step(Direction::Forward)
    }
}

impl DoubleEndedIterator for ScanIter<'_> {
    fn next_back(&mut self) -> Option<Result<Row>> {
        self.step(Direction::Reverse)
    }
}

impl std::iter::FusedIterator for ScanIter<'_> {}

impl Drop for ScanIter<'_> {
    /// Dropped before exhaustion: register what was observed. A conflict it finds dooms the transaction in the
    /// tracker, so its next operation or its commit reports it (nothing can run on the transaction in between:
    /// the iterator borrowed it). Nothing is registered once the database is closed (nothing commits after it).
    fn drop(&mut self) {
        if self.registered || self.closed.is_set() {
            return;
        }
        let observed = self.observed();
        if let Err(error) = self.register(observed) {
            assert!(error.is_conflict(), "registering a scan fails only with a conflict: {error}");
        }
    }
}
