//! Isolation: the Adya / Hermitage anomaly catalogue on SimEnv, with transactions interleaved on one thread
//! (no operation blocks on another transaction, so one thread can drive several). Every anomaly test asserts the
//! anomaly is prevented: some transaction gets `is_conflict()`, or what committed is serializable. Then
//! non-conflicting workloads that must all commit, the plain transaction semantics, a brute-force serializability
//! proptest over random interleavings, and the conflict tracker's memory bound.

mod anomalies;
mod semantics;
mod serializable;
mod tracker_memory;

use engine::{CommitTicket, Db, Error, Options, ReadTransaction, Transaction};
use env::{DeterministicRng, SimEnv};

type Txn = Transaction<SimEnv>;
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

fn open(seed: u64) -> (SimEnv, Db<SimEnv>) {
    let env = SimEnv::new(seed);
    let db = Db::open(env.clone(), "/db", Options::default()).unwrap();
    (env, db)
}

/// A database holding `rows` (committed and acknowledged).
fn open_with(seed: u64, rows: &[(&str, &str)]) -> (SimEnv, Db<SimEnv>) {
    let (env, db) = open(seed);
    let mut t = db.begin().unwrap();
    for (k, v) in rows {
        t.put(k.as_bytes(), v.as_bytes()).unwrap();
    }
    t.commit().unwrap();
    (env, db)
}

fn some(value: &str) -> Option<Vec<u8>> {
    Some(value.as_bytes().to_vec())
}

fn rows(pairs: &[(&str, &str)]) -> Rows {
    pairs.iter().map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec())).collect()
}

/// Leaks its contents instead of dropping them while a panic unwinds. An engine panic under its state lock poisons
/// the lock; dropping an open transaction then panics again (it locks the state), and a panic during unwinding
/// aborts the whole test binary. With this wrapper a failing test fails alone.
struct Leak<T>(Option<T>);

impl<T> Drop for Leak<T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            std::mem::forget(self.0.take());
        }
    }
}

impl<T> std::ops::Deref for Leak<T> {
    type Target = Option<T>;

    fn deref(&self) -> &Option<T> {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Leak<T> {
    fn deref_mut(&mut self) -> &mut Option<T> {
        &mut self.0
    }
}

/// Run `op` on a transaction that is still alive. A serialization conflict kills it (returns None); any other
/// error is a test failure.
fn live<T>(txn: &mut Option<Txn>, op: impl FnOnce(&mut Txn) -> Result<T, Error>) -> Option<T> {
    let t = txn.as_mut()?;
    match op(t) {
        Ok(value) => Some(value),
        Err(error) if error.is_conflict() => {
            *txn = None;
            None
        }
        Err(error) => panic!("unexpected non-conflict error: {error:?}"),
    }
}

fn get(txn: &mut Option<Txn>, key: &str) -> Option<Option<Vec<u8>>> {
    live(txn, |t| t.get(key.as_bytes()))
}

fn put(txn: &mut Option<Txn>, key: &str, value: &str) {
    live(txn, |t| t.put(key.as_bytes(), value.as_bytes()));
}

fn delete(txn: &mut Option<Txn>, key: &str) {
    live(txn, |t| t.delete(key.as_bytes()));
}

fn scan(txn: &mut Option<Txn>, start: &str, end: &str) -> Option<Rows> {
    live(txn, |t| t.scan(start.as_bytes()..end.as_bytes())?.collect::<Result<Rows, Error>>())
}

/// Commit; true if it committed, false on a conflict (now or earlier).
fn commit(mut txn: Leak<Txn>) -> bool {
    match txn.0.take().map(Transaction::commit) {
        None => false,
        Some(Ok(())) => true,
        Some(Err(error)) if error.is_conflict() => false,
        Some(Err(error)) => panic!("unexpected non-conflict error at commit: {error:?}"),
    }
}

/// Submit without waiting; Some(ticket) if it passed validation (in flight), None on a conflict.
fn submit(mut txn: Leak<Txn>) -> Option<Option<CommitTicket>> {
    match txn.0.take()?.submit() {
        Ok(ticket) => Some(ticket),
        Err(error) if error.is_conflict() => None,
        Err(error) => panic!("unexpected non-conflict error at submit: {error:?}"),
    }
}

/// A read-write transaction with its snapshot taken at once (ADR-0210: otherwise its first read takes it), so the
/// catalogue's interleavings mean what they did when `begin` took it.
fn begin(db: &Db<SimEnv>) -> Leak<Txn> {
    let mut txn = db.begin().unwrap();
    txn.take_snapshot().unwrap();
    Leak(Some(txn))
}

fn begin_read(db: &Db<SimEnv>) -> Leak<ReadTransaction<SimEnv>> {
    Leak(Some(db.begin_read().unwrap()))
}

/// The latest committed value, as a string.
fn latest(db: &Db<SimEnv>, key: &str) -> Option<String> {
    let mut r = db.begin_read().unwrap();
    r.get(key.as_bytes()).unwrap().map(|v| String::from_utf8(v).unwrap())
}

fn ro_get(r: &mut Option<ReadTransaction<SimEnv>>, key: &str) -> Option<String> {
    let r = r.as_mut().expect("an open read-only transaction");
    r.get(key.as_bytes()).unwrap().map(|v| String::from_utf8(v).unwrap())
}
