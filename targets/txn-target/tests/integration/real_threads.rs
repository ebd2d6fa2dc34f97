//! The transaction workload on real threads (ADR-0059, ADR-0060, ADR-0061, ADR-0062): `CLIENTS` OS threads (`RealEnv::map_parallel`) each
//! run the target's own transactions ([`TxnShape`]: the same draws the simulated target makes) against one
//! `engine::Db` on `RealEnv` in a fresh temp directory, with group commit, flushes and compactions running on the
//! engine's own task threads. Each thread records what it did and what it saw; afterwards the history is rebuilt
//! from the commits' sequences ([`History`]), every read is checked against its snapshot, and every finished
//! transaction goes into the target's own serializability checker ([`DependencyGraph`]), which must find no cycle.
//!
//! The run is bounded by a wall-clock budget and a transaction count per thread. The interleaving is the OS's, so
//! no two runs are alike; a failure prints the cycle (or the read) and the counts.
//!
//! With the `ssi-off` canary (feature `canaries`), a write-skew-heavy shape is run round after round (at most
//! `CANARY_ROUNDS_MAX`, within `CANARY_BUDGET`) until the checker finds a cycle: proof that the check can fail on
//! real threads.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Duration;

use engine::{Db, ReadTransaction, Transaction};
use holdfast::env::{DeterministicRng, Env as _, RealEnv};
use holdfast::kit::{Sig, ValueSpec, key_bytes, parse_key, sig_of, value_bytes};
use txn_target::{ClientId, Cycle, DependencyGraph, History, Op, ScanRead, TxnConfig, TxnRecord, TxnShape};

/// Threads running transactions at once (more than the CI machine's two cores: the OS interleaves them).
const CLIENTS: usize = 4;
/// The most transactions one thread runs in a round.
const TXNS_PER_CLIENT_MAX: usize = 1000;
/// The most operations one transaction does (the shape's count plus its commit; a bound on the loop).
const OPS_PER_TXN_MAX: u32 = 100;
/// Wall-clock budget of one round.
const ROUND_BUDGET: Duration = Duration::from_secs(4);

/// What one operation did and saw.
#[derive(Debug)]
enum Did {
    Get { key: u32, saw: Option<Sig> },
    Scan { start: u32, end: u32, saw: BTreeMap<u32, Sig> },
    Write { key: u32, value: Option<ValueSpec> },
}

/// How a transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// A read-write commit, acknowledged: its last sequence.
    Committed {
        last_sequence: u64,
    },
    /// Ended with nothing to make durable (read-only, or wrote nothing, or a read-only "rollback").
    Finished,
    RolledBack,
    /// A serialization failure.
    Aborted,
}

/// One transaction a thread ran.
#[derive(Debug)]
struct Ran {
    client: ClientId,
    /// `None` for a read-write transaction that never read (ADR-0210: it takes its snapshot at its first read).
    snapshot: Option<u64>,
    read_only: bool,
    did: Vec<Did>,
    end: End,
}

enum Handle {
    ReadWrite(Transaction<RealEnv>),
    ReadOnly(ReadTransaction<RealEnv>),
}

/// Run one operation; `Ok(None)` when the transaction goes on, `Ok(Some(end))` when it ended.
fn step(db: &Db<RealEnv>, handle: &mut Option<Handle>, op: &Op, did: &mut Vec<Did>) -> engine::Result<Option<End>> {
    let Some(open) = handle.as_mut() else { unreachable!("an open transaction") };
    match *op {
        Op::Get { key, .. } => {
            let value = match open {
                Handle::ReadWrite(txn) => txn.get(&key_bytes(key))?,
                Handle::ReadOnly(txn) => txn.get(&key_bytes(key))?,
            };
            did.push(Did::Get { key, saw: value.as_deref().map(sig_of) });
        }
        Op::Scan { start, end, .. } => {
            let (low, high) = (key_bytes(start), key_bytes(end));
            let range = (Bound::Included(low.as_slice()), Bound::Excluded(high.as_slice()));
            let rows = match open {
                Handle::ReadWrite(txn) => txn.scan(range)?.collect::<engine::Result<Vec<_>>>()?,
                Handle::ReadOnly(txn) => txn.scan(range)?.collect::<engine::Result<Vec<_>>>()?,
            };
            let saw = rows.iter().map(|(key, value)| (parse_key(key).expect("a workload key"), sig_of(value)));
            did.push(Did::Scan { start, end, saw: saw.collect() });
        }
        Op::Put { key, value, .. } => {
            let Handle::ReadWrite(txn) = open else { unreachable!("a read-only shape never writes") };
            txn.put(&key_bytes(key), &value_bytes(value))?;
            did.push(Did::Write { key, value: Some(value) });
        }
        Op::Delete { key, .. } => {
            let Handle::ReadWrite(txn) = open else { unreachable!("a read-only shape never writes") };
            txn.delete(&key_bytes(key))?;
            did.push(Did::Write { key, value: None });
        }
        Op::Commit { .. } | Op::Rollback { .. } => return finish(db, handle.take().expect("open"), op),
        Op::Begin { .. } | Op::Ack { .. } | Op::Flush | Op::Compact => unreachable!("not a transaction's op: {op:?}"),
    }
    Ok(None)
}

/// Commit (submit, then wait for the shared sync) or roll back.
fn finish(db: &Db<RealEnv>, handle: Handle, op: &Op) -> engine::Result<Option<End>> {
    let txn = match handle {
        Handle::ReadOnly(txn) => {
            drop(txn);
            return Ok(Some(End::Finished));
        }
        Handle::ReadWrite(txn) => txn,
    };
    if matches!(op, Op::Rollback { .. }) {
        txn.rollback();
        return Ok(Some(End::RolledBack));
    }
    match txn.submit()? {
        None => Ok(Some(End::Finished)),
        Some(ticket) => {
            db.wait_for_commit(&ticket)?;
            Ok(Some(End::Committed { last_sequence: ticket.last_sequence }))
        }
    }
}

/// One thread: transactions of `config`'s shapes until the deadline or [`TXNS_PER_CLIENT_MAX`].
fn client(env: &RealEnv, db: &Db<RealEnv>, config: &TxnConfig, client: ClientId, deadline: Duration) -> Vec<Ran> {
    let mut rng = DeterministicRng::new(env.random_u64());
    // Value ids unique across threads: the client in the high bits.
    let mut next_value_id = (u64::from(client) + 1) << 32;
    let mut ran = Vec::new();
    while ran.len() < TXNS_PER_CLIENT_MAX && env.now() < deadline {
        let shape = TxnShape::draw(&mut rng, config);
        let mut handle = Some(if shape.read_only {
            Handle::ReadOnly(db.begin_read().expect("begin_read"))
        } else {
            Handle::ReadWrite(db.begin().expect("begin"))
        });
        let snapshot_of = |handle: &Option<Handle>| match handle.as_ref() {
            Some(Handle::ReadWrite(txn)) => txn.snapshot(),
            Some(Handle::ReadOnly(txn)) => Some(txn.snapshot()),
            None => None,
        };
        let mut snapshot = snapshot_of(&handle);
        let mut did = Vec::new();
        let mut end = None;
        for done in 0..OPS_PER_TXN_MAX {
            let op = shape.next_op(client, done, &mut next_value_id, &mut rng, config);
            let stepped = step(db, &mut handle, &op, &mut did);
            snapshot = snapshot.or_else(|| snapshot_of(&handle));
            match stepped {
                Ok(None) => {}
                Ok(Some(ended)) => {
                    end = Some(ended);
                    break;
                }
                Err(error) if error.is_conflict() => {
                    assert!(!shape.read_only, "a read-only transaction aborted: {error}");
                    end = Some(End::Aborted);
                    break;
                }
                Err(error) => panic!("client {client}: {op:?} failed on the real file system: {error}"),
            }
        }
        let end = end.expect("a transaction ends within OPS_PER_TXN_MAX operations");
        ran.push(Ran { client, snapshot, read_only: shape.read_only, did, end });
    }
    ran
}

/// What a round's history shows.
#[derive(Debug, Default)]
struct Verdict {
    /// Read-write commits, acknowledged.
    commits: usize,
    /// Of those, commits another commit landed between the snapshot and the commit of (real concurrency).
    concurrent_commits: usize,
    /// Transactions that ended with nothing to make durable (read-only ones included).
    finished: usize,
    aborts: usize,
    /// Reads that disagree with the history at the reader's snapshot (own writes applied), and snapshots inside a
    /// commit of several writes.
    bad_reads: Vec<String>,
    /// Cycles the serializability checker found.
    cycles: Vec<Cycle>,
    /// Flushes and compactions the engine's task threads ran meanwhile.
    flushes: u64,
    compactions: u64,
}

impl Verdict {
    fn summary(&self) -> String {
        let cycles: Vec<String> = self.cycles.iter().map(Cycle::report).collect();
        format!(
            "commits {} ({} concurrent), finished {}, aborts {}, flushes {}, compactions {}, bad reads {:?}, \
             cycles {cycles:?}",
            self.commits,
            self.concurrent_commits,
            self.finished,
            self.aborts,
            self.flushes,
            self.compactions,
            self.bad_reads
        )
    }
}

/// The transaction's buffered writes, as signatures (the last write of a key wins, as in the engine's buffer).
fn writes_of(did: &[Did], history: &mut History, id: u64) -> BTreeMap<u32, Option<Sig>> {
    let mut writes = BTreeMap::new();
    for action in did {
        if let Did::Write { key, value } = action {
            writes.insert(*key, value.map(|spec| history.register(spec, id)));
        }
    }
    writes
}

/// Rebuild the version history from the acknowledged commits: their writes take the sequences up to their
/// ticket's last one, in key order; together they must tile `1..=final_sequence` (no gap, no overlap).
fn rebuild_history(ran: &[Ran], final_sequence: u64) -> History {
    let mut history = History::default();
    let mut committed: Vec<(u64, TxnRecord)> = Vec::new();
    for (index, txn) in ran.iter().enumerate() {
        let id = index as u64 + 1;
        let writes = writes_of(&txn.did, &mut history, id);
        if let End::Committed { last_sequence } = txn.end {
            let mut record = TxnRecord::new(id, txn.client, txn.snapshot, false);
            record.writes = writes;
            committed.push((last_sequence, record));
        }
    }
    committed.sort_by_key(|(last, _)| *last);
    let mut next = 1;
    for (last, record) in &committed {
        let first = last + 1 - record.writes.len() as u64;
        assert_eq!(first, next, "T{}'s writes end at {last}: sequences must follow {}", record.id, next - 1);
        history.apply(record, first);
        next = last + 1;
    }
    assert_eq!(next - 1, final_sequence, "db.last_sequence() is the last acknowledged commit's");
    history
}

/// Replay a transaction's operations against the history at its snapshot: its reads for the checker, and a
/// description of every read that saw something else.
fn reads_of(txn: &Ran, id: u64, history: &History, bad: &mut Vec<String>) -> TxnRecord {
    let mut record = TxnRecord::new(id, txn.client, txn.snapshot, txn.read_only);
    if let Some(snapshot) = txn.snapshot
        && let Some((first, last, writer)) = history.split_commit(snapshot)
    {
        bad.push(format!("T{id}'s snapshot {snapshot} is inside T{writer}'s commit {first}..={last}"));
    }
    // Every read not of an own write takes the snapshot (ADR-0210): one without is a bad read, below.
    let snapshot = txn.snapshot.unwrap_or(0);
    let mut own: BTreeMap<u32, Option<Sig>> = BTreeMap::new();
    for action in &txn.did {
        match action {
            Did::Get { key, saw } => {
                if txn.snapshot.is_none() && !own.contains_key(key) {
                    bad.push(format!("T{id} read k{key}, not its own write, without a snapshot"));
                }
                let expected = own.get(key).copied().unwrap_or_else(|| history.value_at(*key, snapshot));
                if *saw != expected {
                    bad.push(format!("T{id} read {} at snapshot {snapshot}", history.describe(*saw)));
                }
                if !own.contains_key(key) {
                    record.reads.push((*key, history.writer_at(*key, snapshot)));
                }
            }
            Did::Scan { start, end, saw } => {
                if txn.snapshot.is_none() {
                    bad.push(format!("T{id} scanned k{start}..k{end} without a snapshot"));
                }
                let keys = history.keys_in(*start, *end);
                let mut expected: BTreeMap<u32, Sig> =
                    keys.iter().filter_map(|&key| Some((key, history.value_at(key, snapshot)?))).collect();
                for (&key, &value) in own.range(*start..*end) {
                    match value {
                        Some(sig) => expected.insert(key, sig),
                        None => expected.remove(&key),
                    };
                }
                if *saw != expected {
                    bad.push(format!("T{id} scanned k{start}..k{end} at snapshot {snapshot}: {saw:?}"));
                }
                let observed = keys.iter().map(|&key| (key, history.writer_at(key, snapshot))).collect();
                record.scans.push(ScanRead { start: *start, end: *end, observed });
            }
            Did::Write { key, value } => {
                own.insert(*key, value.map(|spec| sig_of(&value_bytes(spec))));
            }
        }
    }
    record.writes = own;
    record
}

/// Check a round: reads against the rebuilt history, then every finished transaction through the DSG in commit
/// order (a read-only or write-less transaction right after the commit its snapshot ends at).
fn check(ran: &[Ran], final_sequence: u64) -> Verdict {
    let history = rebuild_history(ran, final_sequence);
    let mut verdict = Verdict::default();
    let mut order: Vec<((u64, u8), TxnRecord)> = Vec::new();
    for (index, txn) in ran.iter().enumerate() {
        let record = reads_of(txn, index as u64 + 1, &history, &mut verdict.bad_reads);
        match txn.end {
            End::Committed { last_sequence } => {
                verdict.commits += 1;
                let first = last_sequence + 1 - record.writes.len() as u64;
                // One that never read was validated as if it began just before its commit: not concurrent.
                verdict.concurrent_commits += usize::from(txn.snapshot.is_some_and(|snapshot| first - 1 > snapshot));
                order.push(((last_sequence, 0), record));
            }
            End::Finished => {
                verdict.finished += 1;
                order.push(((txn.snapshot.unwrap_or(0), 1), record));
            }
            End::Aborted => verdict.aborts += 1,
            End::RolledBack => {}
        }
    }
    order.sort_by_key(|(position, record)| (*position, record.id));
    let mut graph = DependencyGraph::new();
    for (_, record) in &order {
        verdict.cycles.extend(graph.commit(&record.to_committed()));
    }
    verdict
}

/// Turn a canary on for this thread (the engine's canary switch is per thread).
fn set_canary(name: Option<&'static str>) {
    #[cfg(feature = "canaries")]
    engine::canary::set_active(name).expect("a known canary");
    #[cfg(not(feature = "canaries"))]
    assert!(name.is_none(), "canaries need the canaries feature");
}

/// One round: a fresh database in a temp directory, [`CLIENTS`] threads until `budget` runs out, then the check.
fn round(config: &TxnConfig, canary: Option<&'static str>, budget: Duration) -> Verdict {
    let env = RealEnv::new();
    let dir = env.temp_dir("real-threads").expect("a temp dir");
    let db = Db::open(env.clone(), dir.path(), txn_target::engine_options(&config.tuning)).expect("open");
    let deadline = env.now() + budget;
    let clients: Vec<ClientId> = (0..CLIENTS).map(|client| ClientId::try_from(client).expect("few")).collect();
    let ran = RealEnv::map_parallel(CLIENTS, clients, |id| {
        set_canary(canary);
        let ran = client(&env, &db, config, id, deadline);
        set_canary(None);
        ran
    });
    let final_sequence = db.last_sequence();
    db.check_invariants().expect("the database's structure holds");
    let stats = db.stats();
    db.close().expect("close");
    let ran: Vec<Ran> = ran.into_iter().flatten().collect();
    Verdict { flushes: stats.flush_count, compactions: stats.compaction_count, ..check(&ran, final_sequence) }
}

/// The workload: the target's transaction shapes on a small key space, with small memtables so that flushes and
/// compactions run on the engine's task threads while clients commit.
fn workload() -> TxnConfig {
    let mut config = TxnConfig::from_seed(7);
    config.clients = CLIENTS as u32;
    (config.key_count, config.ops_max, config.long_ppm, config.read_only_ppm) = (12, 6, 20_000, 200_000);
    config.op_weights = txn_target::OpWeights { get: 30, put: 25, delete: 5, scan: 8 };
    (config.tuning.flush_threshold_bytes, config.tuning.l0_compaction_trigger) = (4096, 2);
    config.validate().expect("a valid workload");
    config
}

/// The most rounds the test runs until commits overlapped in one: on a loaded machine the OS may run the client
/// threads one after another for a whole round (2 of 500 loop runs beside three builds on the 2-core VM).
const OVERLAP_ROUNDS_MAX: usize = 3;

#[test]
fn transactions_on_real_threads_are_serializable() {
    for attempt in 1..=OVERLAP_ROUNDS_MAX {
        let verdict = round(&workload(), None, ROUND_BUDGET);
        println!("round {attempt}: {}", verdict.summary());
        assert!(verdict.bad_reads.is_empty() && verdict.cycles.is_empty(), "{}", verdict.summary());
        assert!(verdict.commits > 0 && verdict.finished > 0, "the round did work: {}", verdict.summary());
        assert!(verdict.flushes > 0, "memtables flushed meanwhile: {}", verdict.summary());
        if verdict.concurrent_commits > 0 {
            return;
        }
    }
    panic!("commits never overlapped on the threads in {OVERLAP_ROUNDS_MAX} rounds: the test checked no concurrency");
}

/// The most rounds the canary test runs looking for a cycle.
#[cfg(feature = "canaries")]
const CANARY_ROUNDS_MAX: usize = 12;
/// The canary test's wall-clock budget over all rounds.
#[cfg(feature = "canaries")]
const CANARY_BUDGET: Duration = Duration::from_secs(40);

/// Write skew, heavy: two keys, reads then a write, no scans or deletes, a few read-only transactions (Fekete's
/// read-only anomaly needs one).
#[cfg(feature = "canaries")]
fn write_skew_workload() -> TxnConfig {
    let mut config = workload();
    (config.key_count, config.ops_max, config.long_ppm, config.read_only_ppm, config.rollback_ppm) =
        (2, 3, 0, 100_000, 0);
    config.op_weights = txn_target::OpWeights { get: 30, put: 15, delete: 0, scan: 0 };
    config.validate().expect("a valid workload");
    config
}

/// With serializability off (`ssi-off`: snapshot isolation only), the same threads and checker find a cycle.
#[cfg(feature = "canaries")]
#[test]
fn with_ssi_off_real_threads_find_a_cycle() {
    let env = RealEnv::new();
    let deadline = env.now() + CANARY_BUDGET;
    let config = write_skew_workload();
    for attempt in 1..=CANARY_ROUNDS_MAX {
        let verdict = round(&config, Some("ssi-off"), Duration::from_secs(2));
        println!("round {attempt}: {}", verdict.summary());
        assert!(verdict.bad_reads.is_empty(), "snapshot reads hold under snapshot isolation: {}", verdict.summary());
        if !verdict.cycles.is_empty() {
            return;
        }
        assert!(env.now() < deadline, "no cycle within {CANARY_BUDGET:?} ({attempt} rounds)");
    }
    panic!("no cycle in {CANARY_ROUNDS_MAX} rounds with ssi-off");
}
