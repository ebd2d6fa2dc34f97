//! The one trait every engine is measured through.

use std::path::Path;
use std::sync::Arc;

/// Why an operation failed.
#[derive(Debug, Clone)]
pub enum BErr {
    /// A serialization failure (or lock timeout / deadlock victim): the harness retries and counts an abort.
    Conflict(String),
    /// Anything else: the row is reported with this error, never as a number.
    Other(String),
}

pub type BResult<T> = Result<T, BErr>;

#[cfg_attr(
    not(any(feature = "lmdb", feature = "redb", feature = "fjall", feature = "sled")),
    expect(dead_code, reason = "only the peers' backends map their errors through it")
)]
pub fn other(e: impl std::fmt::Display) -> BErr {
    BErr::Other(e.to_string())
}

/// Operations inside one read-write transaction.
pub trait TxOps {
    /// A serializable read: the engine must notice if the key changes before commit (or lock it).
    fn get(&mut self, key: &[u8]) -> BResult<Option<Vec<u8>>>;
    fn put(&mut self, key: &[u8], value: &[u8]) -> BResult<()>;
}

pub type TxBody<'a> = dyn FnMut(&mut dyn TxOps) -> BResult<()> + 'a;

/// An open database of one engine in one durability mode.
pub trait Backend: Send + Sync {
    /// Does every commit return only after its data is synced to disk?
    fn synced(&self) -> bool;
    /// One attempt at a read-write transaction running `body`, committed with this backend's durability.
    /// `Ok(n)`: committed after `n` retries the engine made internally (sled retries by itself).
    /// `Err(Conflict)`: the caller retries.
    fn txn(&self, body: &mut TxBody<'_>) -> BResult<u64>;
    /// A single-key read outside any read-write transaction (the engine's cheapest consistent read path).
    fn get(&self, key: &[u8]) -> BResult<Option<Vec<u8>>>;
    /// Read up to `limit` rows with `start <= key`, in key order (keys and values are touched): YCSB's scan, a
    /// start key and a row count. Returns the count.
    fn scan(&self, start: &[u8], limit: usize) -> BResult<usize>;
    /// Write a batch of rows in one commit (with this backend's durability).
    fn load(&self, rows: &[(Vec<u8>, Vec<u8>)]) -> BResult<()> {
        self.txn(&mut |t: &mut dyn TxOps| {
            for (k, v) in rows {
                t.put(k, v)?;
            }
            Ok(())
        })
        .map(|_| ())
    }
    /// Make sure loaded data has left the memtable (LSM engines) / is persisted.
    fn flush(&self) -> BResult<()>;
    /// Where the data lives, e.g. SSTables per level.
    fn layout(&self) -> String;
    /// Commits so far and how long each shared lock was held, where the engine counts them (holdfast with
    /// `--lock-hold`, ADR-0119); `None` elsewhere.
    fn lock_sample(&self) -> Option<LockSample> {
        None
    }
}

/// Cumulative counters since open: the difference of two samples is what happened between them.
#[derive(Clone, Copy, Debug, Default)]
pub struct LockSample {
    pub commits: u64,
    /// (acquisitions, held ns) of the writer, registry, view, visibility-watermark and log locks.
    pub locks: [(u64, u64); 5],
    /// Waited ns of the same five locks (asked to taken), then (waits, waited ns) of a committer's wait for
    /// visibility and for its group-commit batch (ADR-0186; zero from an engine that does not count them).
    pub lock_waits_ns: [u64; 5],
    pub waits: [(u64, u64); 2],
}

impl LockSample {
    /// This sample plus what happened between `before` and `after` (two samples of one handle): the sum over runs
    /// that each opened their own handle (ADR-0200).
    pub fn plus_between(self, before: LockSample, after: LockSample) -> LockSample {
        let d = |a: u64, b: u64, s: u64| s + b.saturating_sub(a);
        let pair = |i: usize, s: (u64, u64), b: &[(u64, u64)], a: &[(u64, u64)]| {
            (d(b[i].0, a[i].0, s.0), d(b[i].1, a[i].1, s.1))
        };
        LockSample {
            commits: d(before.commits, after.commits, self.commits),
            locks: std::array::from_fn(|i| pair(i, self.locks[i], &before.locks, &after.locks)),
            lock_waits_ns: std::array::from_fn(|i| {
                d(before.lock_waits_ns[i], after.lock_waits_ns[i], self.lock_waits_ns[i])
            }),
            waits: std::array::from_fn(|i| pair(i, self.waits[i], &before.waits, &after.waits)),
        }
    }
}

/// Opens a backend in a directory; `true` for synced commits.
pub type Opener = Arc<dyn Fn(&Path, bool) -> BResult<Arc<dyn Backend>> + Send + Sync>;

/// A named way to open a backend in a mode.
#[derive(Clone)]
pub struct EngineSpec {
    pub name: &'static str,
    /// cargo feature that builds it
    pub feature: &'static str,
    pub built: bool,
    pub open: Opener,
    /// Isolation offered by the read-write transactions as used here (for the README).
    pub isolation: &'static str,
}

#[allow(dead_code, reason = "used only when a backend's cargo feature is off")]
pub fn not_built(name: &'static str, feature: &'static str) -> EngineSpec {
    EngineSpec {
        name,
        feature,
        built: false,
        open: Arc::new(move |_, _| Err(BErr::Other(format!("not built: cargo feature `{feature}` disabled")))),
        isolation: "",
    }
}

pub fn all_engines() -> Vec<EngineSpec> {
    let mut v = Vec::new();
    #[cfg(feature = "holdfast")]
    v.push(crate::backends::holdfast::spec());
    #[cfg(not(feature = "holdfast"))]
    v.push(not_built("holdfast", "holdfast"));
    #[cfg(feature = "rocksdb")]
    v.extend(crate::backends::rocks::specs());
    #[cfg(not(feature = "rocksdb"))]
    {
        v.push(not_built("rocksdb-pessimistic", "rocksdb"));
        v.push(not_built("rocksdb-optimistic", "rocksdb"));
    }
    #[cfg(feature = "lmdb")]
    v.push(crate::backends::lmdb::spec());
    #[cfg(not(feature = "lmdb"))]
    v.push(not_built("lmdb", "lmdb"));
    #[cfg(feature = "redb")]
    v.push(crate::backends::redb_b::spec());
    #[cfg(not(feature = "redb"))]
    v.push(not_built("redb", "redb"));
    #[cfg(feature = "fjall")]
    v.push(crate::backends::fjall_b::spec());
    #[cfg(not(feature = "fjall"))]
    v.push(not_built("fjall", "fjall"));
    #[cfg(feature = "sled")]
    v.push(crate::backends::sled_b::spec());
    #[cfg(not(feature = "sled"))]
    v.push(not_built("sled", "sled"));
    v
}

/// Extra specs used only by the write-skew check (e.g. RocksDB with plain snapshot reads).
pub fn write_skew_extras() -> Vec<EngineSpec> {
    #[cfg(feature = "rocksdb")]
    {
        crate::backends::rocks::write_skew_extras()
    }
    #[cfg(not(feature = "rocksdb"))]
    {
        Vec::new()
    }
}
