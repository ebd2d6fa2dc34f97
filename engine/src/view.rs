//! What a reader needs: the memtables and tables as of one moment. The one seam between reads and the write
//! side's state: `get` borrows the published [`ViewSources`] (`Inner::with_view`) and `scan` takes a
//! [`ReadView`] (`Inner::read_view`), from the reading thread's cache or under the view lock, which no IO runs
//! under (ADR-0082, ADR-0127); neither touches the writer lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::Result;
use crate::memtable::Memtable;
use crate::types::{Lookup, Sequence};
use crate::version::Version;

/// Whether the database is closed. Set once, by `close` under the writer lock; read without any lock, by every
/// call and by scan iterators once per row (ADR-0075).
#[derive(Clone, Debug, Default)]
pub(crate) struct ClosedFlag(Arc<AtomicBool>);

impl ClosedFlag {
    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::Release);
    }
}

/// The sources a read merges, newest first: the active memtable, the memtables waiting for a flush, the tables.
/// Shared by every read view taken between two changes of them (a flush, a rotation, a compaction): a read takes
/// one `Arc` clone, not one per part (ADR-0089).
#[derive(Debug)]
pub(crate) struct ViewSources<F: env::File> {
    pub(crate) memtable: Arc<Memtable>,
    /// Newest first. Empty (no allocation) unless memtables wait for a flush (ADR-0065).
    pub(crate) immutables: Vec<Arc<Memtable>>,
    pub(crate) version: Arc<Version<F>>,
    pub(crate) closed: ClosedFlag,
}

impl<F: env::File> ViewSources<F> {
    /// The memtables, newest first.
    pub(crate) fn memtables(&self) -> impl Iterator<Item = &Arc<Memtable>> {
        std::iter::once(&self.memtable).chain(&self.immutables)
    }

    /// The value of `key` as of `snapshot`: the newest memtable first, then the tables (ADR-0013).
    pub(crate) fn get(&self, key: &[u8], snapshot: Sequence) -> Result<Option<Vec<u8>>> {
        for memtable in self.memtables() {
            match memtable.get(key, snapshot) {
                Lookup::Found(value) => return Ok(Some(value)),
                // Canary: the tombstone reads as not-found and the search falls through to older tables.
                Lookup::Deleted if crate::canary::active("tombstone-fallthrough") => {}
                Lookup::Deleted => return Ok(None),
                Lookup::NotFound => {}
            }
        }
        match self.version.get(key, snapshot)? {
            Lookup::Found(value) => Ok(Some(value)),
            Lookup::Deleted | Lookup::NotFound => Ok(None),
        }
    }
}

/// What a reader needs: the sources as of one moment, and the last acknowledged sequence then. Derefs to its
/// [`ViewSources`].
#[derive(Debug)]
pub(crate) struct ReadView<F: env::File> {
    sources: Arc<ViewSources<F>>,
    /// The last acknowledged (visible) sequence when the view was taken.
    pub(crate) last_sequence: Sequence,
}

impl<F: env::File> std::ops::Deref for ReadView<F> {
    type Target = ViewSources<F>;

    fn deref(&self) -> &ViewSources<F> {
        &self.sources
    }
}

impl<F: env::File> Clone for ReadView<F> {
    /// The same sources (one `Arc` clone) and sequence.
    fn clone(&self) -> Self {
        Self { sources: Arc::clone(&self.sources), last_sequence: self.last_sequence }
    }
}

impl<F: env::File> ReadView<F> {
    pub(crate) fn new(sources: Arc<ViewSources<F>>, last_sequence: Sequence) -> Self {
        Self { sources, last_sequence }
    }
}
