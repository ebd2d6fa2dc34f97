//! LMDB through heed: a copy-on-write B+tree with one writer at a time (writers serialize: serializable).

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions, RwTxn};

use crate::backend::{BResult, Backend, EngineSpec, TxBody, TxOps, other};

pub struct Lmdb {
    env: Env,
    db: Database<Bytes, Bytes>,
    synced: bool,
}

struct Ops<'a, 'e> {
    txn: &'a mut RwTxn<'e>,
    db: Database<Bytes, Bytes>,
}

impl TxOps for Ops<'_, '_> {
    fn get(&mut self, key: &[u8]) -> BResult<Option<Vec<u8>>> {
        Ok(self.db.get(self.txn, key).map_err(other)?.map(<[u8]>::to_vec))
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> BResult<()> {
        self.db.put(self.txn, key, value).map_err(other)
    }
}

impl Backend for Lmdb {
    fn synced(&self) -> bool {
        self.synced
    }
    fn txn(&self, body: &mut TxBody<'_>) -> BResult<u64> {
        let mut txn = self.env.write_txn().map_err(other)?;
        body(&mut Ops { txn: &mut txn, db: self.db })?;
        txn.commit().map_err(other)?;
        Ok(0)
    }
    fn get(&self, key: &[u8]) -> BResult<Option<Vec<u8>>> {
        let r = self.env.read_txn().map_err(other)?;
        Ok(self.db.get(&r, key).map_err(other)?.map(<[u8]>::to_vec))
    }
    fn scan(&self, start: &[u8], limit: usize) -> BResult<usize> {
        let r = self.env.read_txn().map_err(other)?;
        let range = (Bound::Included(start), Bound::Unbounded);
        let mut n = 0;
        for row in self.db.range(&r, &range).map_err(other)?.take(limit) {
            let _ = row.map_err(other)?;
            n += 1;
        }
        Ok(n)
    }
    fn flush(&self) -> BResult<()> {
        self.env.force_sync().map_err(other)
    }
    fn layout(&self) -> String {
        let info = self.env.info();
        format!("b+tree, {} MiB mapped in use", info.last_page_number * 4096 / (1 << 20))
    }
}

pub fn spec() -> EngineSpec {
    EngineSpec {
        name: "lmdb",
        feature: "lmdb",
        built: true,
        isolation: "serializable (single writer)",
        open: Arc::new(|dir: &Path, synced: bool| {
            let mut o = EnvOpenOptions::new();
            o.map_size(32 << 30).max_dbs(4).max_readers(256);
            // SAFETY: the directory is ours alone, opened once; NO_SYNC is the documented unsynced mode.
            let env = unsafe {
                if !synced {
                    o.flags(EnvFlags::NO_SYNC);
                }
                o.open(dir)
            }
            .map_err(other)?;
            let mut w = env.write_txn().map_err(other)?;
            let db: Database<Bytes, Bytes> = env.create_database(&mut w, Some("kv")).map_err(other)?;
            w.commit().map_err(other)?;
            Ok(Arc::new(Lmdb { env, db, synced }) as Arc<dyn Backend>)
        }),
    }
}
