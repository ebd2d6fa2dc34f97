//! redb: a copy-on-write B-tree with one writer at a time (serializable).

use std::path::Path;
use std::sync::Arc;

use redb::{Database, Durability, ReadableDatabase, ReadableTable, Table, TableDefinition};

use crate::backend::{BResult, Backend, EngineSpec, TxBody, TxOps, other};

const KV: TableDefinition<&[u8], &[u8]> = TableDefinition::new("kv");

pub struct Redb {
    db: Database,
    synced: bool,
}

struct Ops<'a, 't>(&'a mut Table<'t, &'static [u8], &'static [u8]>);

impl TxOps for Ops<'_, '_> {
    fn get(&mut self, key: &[u8]) -> BResult<Option<Vec<u8>>> {
        Ok(self.0.get(key).map_err(other)?.map(|v| v.value().to_vec()))
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> BResult<()> {
        self.0.insert(key, value).map_err(other).map(|_| ())
    }
}

impl Backend for Redb {
    fn synced(&self) -> bool {
        self.synced
    }
    fn txn(&self, body: &mut TxBody<'_>) -> BResult<u64> {
        let mut w = self.db.begin_write().map_err(other)?;
        w.set_durability(if self.synced { Durability::Immediate } else { Durability::None }).map_err(other)?;
        {
            let mut t = w.open_table(KV).map_err(other)?;
            body(&mut Ops(&mut t))?;
        }
        w.commit().map_err(other)?;
        Ok(0)
    }
    fn get(&self, key: &[u8]) -> BResult<Option<Vec<u8>>> {
        let r = self.db.begin_read().map_err(other)?;
        let t = r.open_table(KV).map_err(other)?;
        Ok(t.get(key).map_err(other)?.map(|v| v.value().to_vec()))
    }
    fn scan(&self, start: &[u8], limit: usize) -> BResult<usize> {
        let r = self.db.begin_read().map_err(other)?;
        let t = r.open_table(KV).map_err(other)?;
        let mut n = 0;
        for row in t.range::<&[u8]>(start..).map_err(other)?.take(limit) {
            let (k, v) = row.map_err(other)?;
            let _ = (k.value(), v.value());
            n += 1;
        }
        Ok(n)
    }
    fn flush(&self) -> BResult<()> {
        // An empty durable commit makes earlier non-durable commits durable.
        let mut w = self.db.begin_write().map_err(other)?;
        w.set_durability(Durability::Immediate).map_err(other)?;
        w.commit().map_err(other)
    }
    fn layout(&self) -> String {
        "b-tree".into()
    }
}

pub fn spec() -> EngineSpec {
    EngineSpec {
        name: "redb",
        feature: "redb",
        built: true,
        isolation: "serializable (single writer)",
        open: Arc::new(|dir: &Path, synced: bool| {
            std::fs::create_dir_all(dir).map_err(other)?;
            let db = Database::create(dir.join("data.redb")).map_err(other)?;
            let w = db.begin_write().map_err(other)?;
            w.open_table(KV).map_err(other)?;
            w.commit().map_err(other)?;
            Ok(Arc::new(Redb { db, synced }) as Arc<dyn Backend>)
        }),
    }
}
