//! fjall (LSM) through its optimistic transactional database (serializable: reads are validated at commit).

use std::path::Path;
use std::sync::Arc;

use fjall::{
    KeyspaceCreateOptions, OptimisticTxDatabase, OptimisticTxKeyspace, OptimisticWriteTx, PersistMode, Readable,
};

use crate::backend::{BErr, BResult, Backend, EngineSpec, TxBody, TxOps, other};

pub struct Fjall {
    db: OptimisticTxDatabase,
    ks: OptimisticTxKeyspace,
    synced: bool,
}

struct Ops<'a> {
    tx: &'a mut OptimisticWriteTx,
    ks: &'a OptimisticTxKeyspace,
}

impl TxOps for Ops<'_> {
    fn get(&mut self, key: &[u8]) -> BResult<Option<Vec<u8>>> {
        Ok(self.tx.get(self.ks.inner(), key).map_err(other)?.map(|v| v.to_vec()))
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> BResult<()> {
        self.tx.insert(self.ks.inner(), key, value);
        Ok(())
    }
}

impl Backend for Fjall {
    fn synced(&self) -> bool {
        self.synced
    }
    fn txn(&self, body: &mut TxBody<'_>) -> BResult<u64> {
        let mode = if self.synced { PersistMode::SyncData } else { PersistMode::Buffer };
        let mut tx = self.db.write_tx().map_err(other)?.durability(Some(mode));
        body(&mut Ops { tx: &mut tx, ks: &self.ks })?;
        match tx.commit().map_err(other)? {
            Ok(()) => Ok(0),
            Err(c) => Err(BErr::Conflict(c.to_string())),
        }
    }
    fn get(&self, key: &[u8]) -> BResult<Option<Vec<u8>>> {
        Ok(self.ks.get(key).map_err(other)?.map(|v| v.to_vec()))
    }
    fn scan(&self, start: &[u8], limit: usize) -> BResult<usize> {
        let mut n = 0;
        for g in self.ks.inner().range(start..).take(limit) {
            let _ = g.into_inner().map_err(other)?;
            n += 1;
        }
        Ok(n)
    }
    fn flush(&self) -> BResult<()> {
        self.ks.inner().rotate_memtable_and_wait().map_err(other)?;
        self.db.persist(PersistMode::SyncAll).map_err(other)
    }
    fn layout(&self) -> String {
        let k = self.ks.inner();
        format!("sstables {} (L0:{})", k.table_count(), k.l0_table_count())
    }
}

pub fn spec() -> EngineSpec {
    EngineSpec {
        name: "fjall",
        feature: "fjall",
        built: true,
        isolation: "serializable (optimistic, read sets validated)",
        open: Arc::new(|dir: &Path, synced: bool| {
            let db = OptimisticTxDatabase::builder(dir).cache_size(64 << 20).open().map_err(other)?;
            let ks = db.keyspace("kv", KeyspaceCreateOptions::default).map_err(other)?;
            Ok(Arc::new(Fjall { db, ks, synced }) as Arc<dyn Backend>)
        }),
    }
}
