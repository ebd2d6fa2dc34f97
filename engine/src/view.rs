//! What a reader needs: the memtables and tables as of one moment. The one seam between reads and the write
//! side's state: `get` and `scan` take a [`ReadView`] and never touch the write side's lock again.

use std::sync::Arc;

use env::Env;

use crate::db::{ClosedFlag, Inner};
use crate::error::Result;
use crate::memtable::Memtable;
use crate::types::{Lookup, Sequence};
use crate::version::Version;

/// The sources a read merges, newest first: the active memtable, the memtables waiting for a flush, the tables.
#[derive(Debug)]
pub(crate) struct ReadView<F: env::File> {
    pub(crate) memtable: Arc<Memtable>,
    /// Newest first. Empty (no allocation) unless memtables wait for a flush (ADR-0065).
    pub(crate) immutables: Vec<Arc<Memtable>>,
    pub(crate) version: Arc<Version<F>>,
    /// The last acknowledged (visible) sequence when the view was taken.
    pub(crate) last_sequence: Sequence,
    pub(crate) closed: ClosedFlag,
}

impl<F: env::File> ReadView<F> {
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

impl<E: Env> Inner<E> {
    /// The current read view; `Error::Closed` once the database is closed.
    pub(crate) fn read_view(&self) -> Result<ReadView<E::File>> {
        let state = self.state();
        state.check_open()?;
        Ok(ReadView {
            memtable: Arc::clone(&state.memtable),
            immutables: state.immutables.iter().rev().map(|immutable| Arc::clone(&immutable.memtable)).collect(),
            version: Arc::clone(&state.version),
            last_sequence: state.last_sequence,
            closed: state.closed.clone(),
        })
    }
}
