//! holdfast's reference engine: LSM, MVCC, serializable snapshot isolation, group commit in Sync mode.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use engine::{Db, Options, SyncMode, Transaction};
use env::RealEnv;

use crate::backend::{BErr, BResult, Backend, EngineSpec, LockSample, TxBody, TxOps};

/// `--lock-hold`: open with `Options::lock_timing` (ADR-0119). Set once by the argument parser, before any open.
pub static LOCK_TIMING: AtomicBool = AtomicBool::new(false);

pub struct Holdfast {
    db: Db<RealEnv>,
    synced: bool,
}

fn map(e: engine::Error) -> BErr {
    // Render only the cause (once per abort, the text the workloads report), not the whole error.
    match e {
        engine::Error::Conflict { cause } => BErr::Conflict(cause.to_string()),
        other => BErr::Other(other.to_string()),
    }
}

struct Ops<'a>(&'a mut Transaction<RealEnv>);

impl TxOps for Ops<'_> {
    fn get(&mut self, key: &[u8]) -> BResult<Option<Vec<u8>>> {
        self.0.get(key).map_err(map)
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> BResult<()> {
        self.0.put(key, value).map_err(map)
    }
}

impl Backend for Holdfast {
    fn synced(&self) -> bool {
        self.synced
    }
    fn txn(&self, body: &mut TxBody<'_>) -> BResult<u64> {
        let mut t = self.db.begin().map_err(map)?;
        body(&mut Ops(&mut t))?;
        t.commit().map_err(map)?;
        Ok(0)
    }
    fn get(&self, key: &[u8]) -> BResult<Option<Vec<u8>>> {
        self.db.get(key).map_err(map)
    }
    fn scan(&self, start: &[u8], limit: usize) -> BResult<usize> {
        // The scan is lazy (ADR-0085): `take` stops it after `limit` rows.
        let mut n = 0;
        for row in self.db.scan(start..).map_err(map)?.take(limit) {
            let (k, v) = row.map_err(map)?;
            let _ = (k.len(), v.len());
            n += 1;
        }
        Ok(n)
    }
    fn flush(&self) -> BResult<()> {
        self.db.flush().map_err(map)
    }
    fn layout(&self) -> String {
        let s = self.db.stats();
        let levels: Vec<String> =
            s.tables_per_level.iter().enumerate().filter(|(_, n)| **n > 0).map(|(l, n)| format!("L{l}:{n}")).collect();
        format!(
            "sstables {} memtable {} KiB, flushes {}, compactions {}",
            if levels.is_empty() { "none".to_string() } else { levels.join(" ") },
            s.memtable_bytes / 1024,
            s.flush_count,
            s.compaction_count
        )
    }
    fn lock_sample(&self) -> Option<LockSample> {
        self.sample()
    }
}

impl Holdfast {
    fn sample(&self) -> Option<LockSample> {
        let stats = self.db.stats();
        let holds = stats.lock_holds;
        let every = [holds.writer, holds.registry, holds.view, holds.watermark, holds.log];
        let locks = every.map(|hold| (hold.acquisitions, hold.held_ns));
        let lock_waits_ns = every.map(|hold| hold.waited_ns);
        let waits = [holds.visibility_wait, holds.batch_wait].map(|wait| (wait.acquisitions, wait.waited_ns));
        let sample = LockSample { commits: stats.commits, locks, lock_waits_ns, waits };
        LOCK_TIMING.load(Ordering::Relaxed).then_some(sample)
    }
}

impl Drop for Holdfast {
    fn drop(&mut self) {
        let _ = self.db.close();
    }
}

pub fn spec() -> EngineSpec {
    EngineSpec {
        name: "holdfast",
        feature: "holdfast",
        built: true,
        isolation: "serializable (SSI, optimistic)",
        open: Arc::new(|dir: &Path, synced: bool| {
            let mode = if synced { SyncMode::Sync } else { SyncMode::NoSync };
            let db = Db::open(
                RealEnv::new(),
                dir,
                Options::default().with_sync_mode(mode).with_lock_timing(LOCK_TIMING.load(Ordering::Relaxed)),
            )
            .map_err(map)?;
            Ok(Arc::new(Holdfast { db, synced }) as Arc<dyn Backend>)
        }),
    }
}
