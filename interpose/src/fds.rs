//! Simulated descriptors: numbers from [`FD_BASE`] up, which the kernel never hands out (ADR-0163), each naming an
//! open file or directory of the world's disk.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use env::sim::SimFile;

/// The first simulated descriptor: 2^30. The kernel hands out descriptors below `RLIMIT_NOFILE`, which cannot
/// exceed `fs.nr_open` (1,048,576 = 2^20 by default); [`crate::enter`] checks that this process's hard limit is
/// below it (ADR-0163).
pub const FD_BASE: i32 = 1 << 30;
/// The most descriptors one world has open at once.
pub const FDS_MAX: usize = 1 << 16;

/// True when `fd` is in the simulated range.
pub(crate) fn is_simulated(fd: i32) -> bool {
    fd >= FD_BASE
}

/// What a simulated descriptor names.
#[derive(Debug)]
pub(crate) enum Target {
    File(SimFile),
    Dir,
    /// `/dev/urandom` or `/dev/random`: reads draw from the world's randomness ([`crate::devices`]).
    Random,
}

/// An open file description: shared by `dup`s, as POSIX shares offsets and flags.
#[derive(Debug)]
pub(crate) struct Description {
    /// The world path (`/a/b`).
    pub(crate) path: PathBuf,
    pub(crate) target: Target,
    pub(crate) readable: bool,
    pub(crate) writable: bool,
    pub(crate) append: bool,
    pub(crate) offset: AtomicU64,
    /// The `flock`/`fcntl` lock this description holds, if any (released when its last descriptor closes).
    pub(crate) lock: Mutex<Option<env::sim::SimLock>>,
}

impl Description {
    pub(crate) fn offset(&self) -> u64 {
        self.offset.load(Ordering::Acquire)
    }

    pub(crate) fn set_offset(&self, offset: u64) {
        self.offset.store(offset, Ordering::Release);
    }

    pub(crate) fn take_lock(&self) -> Option<env::sim::SimLock> {
        self.lock.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// One world's descriptors, lowest free number first (as POSIX), so numbering depends on the world alone.
#[derive(Debug, Default)]
pub(crate) struct FdTable {
    open: BTreeMap<i32, Arc<Description>>,
}

impl FdTable {
    /// Install `description` at the lowest free simulated number (at or above `at_least`); `None` when full.
    pub(crate) fn insert(&mut self, description: Arc<Description>, at_least: i32) -> Option<i32> {
        if self.open.len() >= FDS_MAX {
            return None;
        }
        let mut candidate = at_least.max(FD_BASE);
        for (&fd, _) in self.open.range(candidate..) {
            if fd != candidate {
                break;
            }
            candidate = candidate.checked_add(1)?;
        }
        self.open.insert(candidate, description);
        Some(candidate)
    }

    pub(crate) fn get(&self, fd: i32) -> Option<Arc<Description>> {
        self.open.get(&fd).cloned()
    }

    pub(crate) fn remove(&mut self, fd: i32) -> Option<Arc<Description>> {
        self.open.remove(&fd)
    }

    pub(crate) fn len(&self) -> usize {
        self.open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_description() -> Arc<Description> {
        Arc::new(Description {
            path: PathBuf::from("/"),
            target: Target::Dir,
            readable: true,
            writable: false,
            append: false,
            offset: AtomicU64::new(0),
            lock: Mutex::new(None),
        })
    }

    #[test]
    fn descriptors_are_the_lowest_free_simulated_numbers() {
        let mut table = FdTable::default();
        let numbers: Vec<_> = (0..3).map(|_| table.insert(dir_description(), 0).expect("room")).collect();
        assert_eq!(numbers, [FD_BASE, FD_BASE + 1, FD_BASE + 2]);
        assert!(table.remove(FD_BASE + 1).is_some());
        assert_eq!(table.insert(dir_description(), 0), Some(FD_BASE + 1), "a hole is reused, as POSIX does");
        assert_eq!(table.insert(dir_description(), FD_BASE + 10), Some(FD_BASE + 10), "at or above a floor");
        assert_eq!(table.len(), 4);
        assert!(is_simulated(FD_BASE) && !is_simulated(FD_BASE - 1) && !is_simulated(-1));
    }
}
