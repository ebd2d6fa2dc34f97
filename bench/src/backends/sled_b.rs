//! sled 0.34: transactions take sled's global concurrency-control lock while they run (serializable).
//! Unsynced mode is sled's default (a background flush every 500 ms); synced mode flushes on every commit.

use std::cell::{Cell, RefCell};
use std::path::Path;
use std::sync::Arc;

use sled::transaction::{
    ConflictableTransactionError, TransactionError, TransactionalTree, UnabortableTransactionError,
};
use sled::{Db, Tree};

use crate::backend::{BErr, BResult, Backend, EngineSpec, TxBody, TxOps, other};

pub struct Sled {
    db: Db,
    tree: Tree,
    synced: bool,
}

struct Ops<'a>(&'a TransactionalTree);

fn map(e: UnabortableTransactionError) -> BErr {
    match e {
        UnabortableTransactionError::Conflict => BErr::Conflict("sled conflict".into()),
        UnabortableTransactionError::Storage(e) => BErr::Other(e.to_string()),
    }
}

impl TxOps for Ops<'_> {
    fn get(&mut self, key: &[u8]) -> BResult<Option<Vec<u8>>> {
        Ok(self.0.get(key).map_err(map)?.map(|v| v.to_vec()))
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> BResult<()> {
        self.0.insert(key, value).map_err(map).map(|_| ())
    }
}

impl Backend for Sled {
    fn synced(&self) -> bool {
        self.synced
    }
    fn txn(&self, body: &mut TxBody<'_>) -> BResult<u64> {
        let body = RefCell::new(body);
        let attempts = Cell::new(0u64);
        let synced = self.synced;
        let r = self.tree.transaction(|tt| {
            attempts.set(attempts.get() + 1);
            let mut b = body.borrow_mut();
            match (*b)(&mut Ops(tt)) {
                Ok(()) => {
                    if synced {
                        tt.flush();
                    }
                    Ok(())
                }
                Err(BErr::Conflict(_)) => Err(ConflictableTransactionError::Conflict),
                Err(e) => Err(ConflictableTransactionError::Abort(e)),
            }
        });
        match r {
            Ok(()) => Ok(attempts.get().saturating_sub(1)),
            Err(TransactionError::Abort(e)) => Err(e),
            Err(TransactionError::Storage(e)) => Err(other(e)),
        }
    }
    fn get(&self, key: &[u8]) -> BResult<Option<Vec<u8>>> {
        Ok(self.tree.get(key).map_err(other)?.map(|v| v.to_vec()))
    }
    fn scan(&self, start: &[u8], limit: usize) -> BResult<usize> {
        let mut n = 0;
        for row in self.tree.range(start..).take(limit) {
            let _ = row.map_err(other)?;
            n += 1;
        }
        Ok(n)
    }
    fn load(&self, rows: &[(Vec<u8>, Vec<u8>)]) -> BResult<()> {
        let mut batch = sled::Batch::default();
        for (k, v) in rows {
            batch.insert(k.as_slice(), v.as_slice());
        }
        self.tree.apply_batch(batch).map_err(other)?;
        if self.synced {
            self.db.flush().map_err(other)?;
        }
        Ok(())
    }
    fn flush(&self) -> BResult<()> {
        self.db.flush().map_err(other).map(|_| ())
    }
    fn layout(&self) -> String {
        "bw-tree + log".into()
    }
}

pub fn spec() -> EngineSpec {
    EngineSpec {
        name: "sled",
        feature: "sled",
        built: true,
        isolation: "serializable (transactions hold a global lock)",
        open: Arc::new(|dir: &Path, synced: bool| {
            let db = sled::Config::new()
                .path(dir)
                .cache_capacity(64 << 20)
                .flush_every_ms(Some(500))
                .open()
                .map_err(other)?;
            let tree = db.open_tree("kv").map_err(other)?;
            Ok(Arc::new(Sled { db, tree, synced }) as Arc<dyn Backend>)
        }),
    }
}
