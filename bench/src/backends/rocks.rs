//! RocksDB through its two transactional front ends. Reads inside read-write transactions use
//! `get_for_update` so the transactions are serializable for the keys they read (a plain `get` in a RocksDB
//! transaction is a snapshot read: write skew goes through — see the write-skew extra spec).

use std::path::Path;
use std::sync::Arc;

use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, ErrorKind, OptimisticTransactionDB, OptimisticTransactionOptions,
    Options, ReadOptions, Transaction, TransactionDB, TransactionDBOptions, TransactionOptions, WriteOptions,
};

use crate::backend::{BErr, BResult, Backend, EngineSpec, TxBody, TxOps};

enum Db {
    Pessimistic(TransactionDB),
    Optimistic(OptimisticTransactionDB),
}

pub struct Rocks {
    db: Db,
    dir: std::path::PathBuf,
    synced: bool,
    /// Plain snapshot reads inside transactions (write-skew demonstration only).
    plain_reads: bool,
}

fn map(e: rocksdb::Error) -> BErr {
    match e.kind() {
        ErrorKind::Busy | ErrorKind::TryAgain | ErrorKind::TimedOut | ErrorKind::Aborted => {
            BErr::Conflict(e.to_string())
        }
        _ => BErr::Other(e.to_string()),
    }
}

struct Ops<'a, D>(&'a Transaction<'a, D>, bool);

impl<D> TxOps for Ops<'_, D> {
    fn get(&mut self, key: &[u8]) -> BResult<Option<Vec<u8>>> {
        if self.1 { self.0.get(key).map_err(map) } else { self.0.get_for_update(key, true).map_err(map) }
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> BResult<()> {
        self.0.put(key, value).map_err(map)
    }
}

fn run<D>(t: Transaction<'_, D>, plain: bool, body: &mut TxBody<'_>) -> BResult<u64> {
    let r = body(&mut Ops(&t, plain));
    match r {
        Ok(()) => t.commit().map_err(map).map(|()| 0),
        Err(e) => {
            let _ = t.rollback();
            Err(e)
        }
    }
}

fn options() -> Options {
    let mut o = Options::default();
    o.create_if_missing(true);
    o.set_compression_type(DBCompressionType::None);
    o.increase_parallelism(2);
    // Same budget as holdfast's defaults: 64 MiB memtable, 64 MiB block cache, 10-bit bloom filters.
    o.set_write_buffer_size(64 << 20);
    let mut b = BlockBasedOptions::default();
    if let Ok(cache) = Cache::new_lru_cache(64 << 20) {
        b.set_block_cache(&cache);
    }
    b.set_bloom_filter(10.0, false);
    o.set_block_based_table_factory(&b);
    o
}

impl Backend for Rocks {
    fn synced(&self) -> bool {
        self.synced
    }
    fn txn(&self, body: &mut TxBody<'_>) -> BResult<u64> {
        let mut wo = WriteOptions::default();
        wo.set_sync(self.synced);
        match &self.db {
            Db::Pessimistic(db) => {
                let mut to = TransactionOptions::default();
                to.set_snapshot(true);
                to.set_deadlock_detect(true);
                run(db.transaction_opt(&wo, &to), self.plain_reads, body)
            }
            Db::Optimistic(db) => {
                let mut to = OptimisticTransactionOptions::default();
                to.set_snapshot(true);
                run(db.transaction_opt(&wo, &to), self.plain_reads, body)
            }
        }
    }
    fn get(&self, key: &[u8]) -> BResult<Option<Vec<u8>>> {
        match &self.db {
            Db::Pessimistic(db) => db.get(key).map_err(map),
            Db::Optimistic(db) => db.get(key).map_err(map),
        }
    }
    fn scan(&self, start: &[u8], limit: usize) -> BResult<usize> {
        let ro = ReadOptions::default();
        let mut n = 0;
        macro_rules! walk {
            ($it:expr) => {{
                let mut it = $it;
                it.seek(start);
                while it.valid() && n < limit {
                    let _ = (it.key(), it.value());
                    n += 1;
                    it.next();
                }
                it.status().map_err(map)?;
            }};
        }
        match &self.db {
            Db::Pessimistic(db) => walk!(db.raw_iterator_opt(ro)),
            Db::Optimistic(db) => walk!(db.raw_iterator_opt(ro)),
        }
        Ok(n)
    }
    fn flush(&self) -> BResult<()> {
        match &self.db {
            // The crate's TransactionDB (0.19) has no flush: the harness reopens every database after the load,
            // and RocksDB flushes the recovered memtable to L0 during that reopen.
            Db::Pessimistic(_) => Ok(()),
            Db::Optimistic(db) => db.flush().map_err(map),
        }
    }
    fn layout(&self) -> String {
        let ssts = std::fs::read_dir(&self.dir)
            .map(|d| d.filter_map(Result::ok).filter(|e| e.path().extension().is_some_and(|x| x == "sst")).count())
            .unwrap_or(0);
        let mut levels = Vec::new();
        if let Db::Optimistic(db) = &self.db {
            for l in 0..7 {
                if let Ok(Some(n)) = db.property_int_value(format!("rocksdb.num-files-at-level{l}").as_str())
                    && n > 0
                {
                    levels.push(format!("L{l}:{n}"));
                }
            }
        }
        format!("sstables {ssts} {}", levels.join(" ")).trim_end().to_string()
    }
}

fn spec_with(name: &'static str, optimistic: bool, plain_reads: bool) -> EngineSpec {
    EngineSpec {
        name,
        feature: "rocksdb",
        built: true,
        isolation: if plain_reads {
            "snapshot isolation (plain get in a transaction)"
        } else if optimistic {
            "serializable for keys read with get_for_update (optimistic validation)"
        } else {
            "serializable for keys read with get_for_update (row locks)"
        },
        open: Arc::new(move |dir: &Path, synced: bool| {
            let o = options();
            let db = if optimistic {
                Db::Optimistic(OptimisticTransactionDB::open(&o, dir).map_err(map)?)
            } else {
                Db::Pessimistic(TransactionDB::open(&o, &TransactionDBOptions::default(), dir).map_err(map)?)
            };
            Ok(Arc::new(Rocks { db, dir: dir.to_path_buf(), synced, plain_reads }) as Arc<dyn Backend>)
        }),
    }
}

pub fn specs() -> Vec<EngineSpec> {
    vec![spec_with("rocksdb-pessimistic", false, false), spec_with("rocksdb-optimistic", true, false)]
}

pub fn write_skew_extras() -> Vec<EngineSpec> {
    vec![
        spec_with("rocksdb-pessimistic (plain get)", false, true),
        spec_with("rocksdb-optimistic (plain get)", true, true),
    ]
}
