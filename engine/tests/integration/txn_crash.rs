//! Transactions and crashes on SimEnv: no acknowledged transaction is lost, no aborted one appears, and a commit
//! in flight at the crash (submitted and not waited on, or cut by an armed crash inside its append or sync) is
//! wholly present or wholly absent. Then group commit (one sync for a batch of commits) and the WAL bytes a commit
//! writes, read back.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use engine::wal::{Batch, Record, WalEnd, decode_segment};
use engine::{CommitTicket, Db, Options, Transaction, ValueKind};
use env::{DeterministicRng, Env, SimEnv, TaskStep};

fn key(i: u64) -> Vec<u8> {
    format!("key{i:03}").into_bytes()
}

fn reopen(env: &SimEnv, db: Db<SimEnv>) -> Db<SimEnv> {
    drop(db);
    env.restart();
    Db::open(env.clone(), "/db", Options::default()).unwrap()
}

/// The keys and values a transaction wrote (None: deleted).
type Writes = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Is every write of `writes` present in `db` (Some(true)), none (Some(false)), or a mix (None)?
fn presence(db: &Db<SimEnv>, writes: &Writes, before: &BTreeMap<Vec<u8>, Vec<u8>>) -> Option<bool> {
    let mut present = BTreeSet::new();
    for (k, v) in writes {
        let now = db.get(k).unwrap();
        if now == *v && before.get(k) != v.as_ref() {
            present.insert(true);
        } else if now.as_ref() == before.get(k) {
            present.insert(false);
        } else {
            panic!("key {} holds {:?}: neither the transaction's write nor the value before it", show(k), now);
        }
    }
    match (present.contains(&true), present.contains(&false)) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Many multi-key transactions (pairs overlapping, so some abort), then several commits left in flight, then a
/// crash: every acknowledged transaction is there, no aborted value appears anywhere, and the in-flight commits
/// are each all-or-nothing and survive as a prefix of their log order.
#[test]
fn acknowledged_transactions_survive_and_in_flight_ones_are_all_or_nothing() {
    let (mut kept, mut lost) = (0u32, 0u32);
    for seed in 0..40u64 {
        let env = SimEnv::new(seed);
        let mut rng = DeterministicRng::stream(seed, "txn-crash");
        let db = Db::open(env.clone(), "/db", Options::default().with_flush_threshold_bytes(4096)).unwrap();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut aborted_values: BTreeSet<Vec<u8>> = BTreeSet::new();
        let mut acked = 0u32;
        for round in 0..60u64 {
            // Two overlapping transactions, each reading one key and writing 2-3 keys out of 12.
            let mut pair: Vec<(Transaction<SimEnv>, Writes)> = Vec::new();
            for side in 0..2u64 {
                let mut t = db.begin().unwrap();
                t.get(&key(rng.below(12))).unwrap();
                let mut writes = Writes::new();
                for w in 0..2 + rng.below(2) {
                    let k = key(rng.below(12));
                    if rng.chance_ppm(150_000) {
                        t.delete(&k).unwrap();
                        writes.insert(k, None);
                    } else {
                        let v = format!("s{seed}r{round}t{side}w{w}").into_bytes();
                        t.put(&k, &v).unwrap();
                        writes.insert(k, Some(v));
                    }
                }
                pair.push((t, writes));
            }
            for (t, writes) in pair {
                match t.commit() {
                    Ok(()) => {
                        acked += 1;
                        for (k, v) in writes {
                            match v {
                                Some(v) => model.insert(k, v),
                                None => model.remove(&k),
                            };
                        }
                    }
                    Err(e) if e.is_conflict() => aborted_values.extend(writes.into_values().flatten()),
                    Err(e) => panic!("seed {seed}: commit failed: {e:?}"),
                }
            }
            env.run_tasks(2);
        }
        assert!(acked >= 60 && !aborted_values.is_empty(), "seed {seed}: {acked} acknowledged");
        // In flight: disjoint fresh keys, three per transaction, submitted and never waited on.
        let mut in_flight: Vec<Writes> = Vec::new();
        let mut tickets: Vec<CommitTicket> = Vec::new();
        for f in 0..4u64 {
            let mut t = db.begin().unwrap();
            let mut writes = Writes::new();
            for w in 0..3u64 {
                let k = format!("flight{f}-{w}").into_bytes();
                let v = format!("s{seed}f{f}w{w}").into_bytes();
                t.put(&k, &v).unwrap();
                writes.insert(k, Some(v));
            }
            tickets.push(t.submit().unwrap().expect("it wrote"));
            in_flight.push(writes);
        }
        assert_eq!(db.pending_commits(), 4);
        env.crash();
        let db = reopen(&env, db);
        for (k, v) in &model {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "seed {seed}: acknowledged write of {} lost", show(k));
        }
        let mut r = db.begin_read().unwrap();
        let all: Vec<(Vec<u8>, Vec<u8>)> = r.scan(..).unwrap().map(Result::unwrap).collect();
        drop(r);
        for (k, v) in &all {
            assert!(!aborted_values.contains(v), "seed {seed}: aborted value {} appeared under {}", show(v), show(k));
            if !k.starts_with(b"flight") {
                assert_eq!(model.get(k), Some(v), "seed {seed}: {} = {} was never acknowledged", show(k), show(v));
            }
        }
        let before = BTreeMap::new();
        let outcomes: Vec<bool> = in_flight
            .iter()
            .enumerate()
            .map(|(f, writes)| {
                presence(&db, writes, &before)
                    .unwrap_or_else(|| panic!("seed {seed}: in-flight transaction {f} is partly present"))
            })
            .collect();
        assert!(
            outcomes.windows(2).all(|w| w[0] || !w[1]),
            "seed {seed}: in-flight survivors {outcomes:?} not a prefix"
        );
        kept += outcomes.iter().filter(|&&o| o).count() as u32;
        lost += outcomes.iter().filter(|&&o| !o).count() as u32;
        db.check_invariants().unwrap();
    }
    assert!(kept > 0 && lost > 0, "the crashes never kept ({kept}) or never lost ({lost}) an in-flight commit");
}

/// An armed crash at each IO call of a commit (its log append, its sync, or after): if the commit returned Ok it
/// survives; if it failed it is wholly present or wholly absent.
#[test]
fn a_crash_inside_a_commit_leaves_it_all_or_nothing() {
    let mut seen: BTreeSet<(bool, bool)> = BTreeSet::new();
    for seed in 0..30u64 {
        for k in 1..=4u64 {
            let env = SimEnv::new(seed * 10 + k);
            let db = Db::open(env.clone(), "/db", Options::default()).unwrap();
            let mut before: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            for i in 0..5 {
                db.put(&key(i), b"base").unwrap();
                before.insert(key(i), b"base".to_vec());
            }
            let mut t = db.begin().unwrap();
            let mut writes = Writes::new();
            for i in 0..4u64 {
                let v = format!("s{seed}k{k}i{i}").into_bytes();
                t.put(&key(i * 2), &v).unwrap();
                writes.insert(key(i * 2), Some(v));
            }
            t.delete(&key(1)).unwrap();
            writes.insert(key(1), None);
            env.crash_at_io(k);
            let result = t.commit();
            if let Err(e) = &result {
                assert!(e.is_crash(), "seed {seed} k {k}: {e:?}");
            }
            if env.is_halted() {
                env.restart();
            } else {
                env.disarm_crash();
                env.crash();
            }
            let db = reopen(&env, db);
            let present = presence(&db, &writes, &before)
                .unwrap_or_else(|| panic!("seed {seed} k {k}: the commit is partly present ({result:?})"));
            if result.is_ok() {
                assert!(present, "seed {seed} k {k}: an acknowledged commit was lost");
            }
            seen.insert((result.is_ok(), present));
        }
    }
    assert!(seen.contains(&(true, true)), "{seen:?}");
    assert!(seen.contains(&(false, false)), "{seen:?}");
}

/// The `group-commit` tasks runnable now, oldest first.
fn batch_tasks(env: &SimEnv) -> Vec<u64> {
    env.runnable_tasks().into_iter().filter(|(_, name)| name == "group-commit").map(|(id, _)| id).collect()
}

/// Several submitted commits join one batch: one group-commit task is runnable; its first step captures the log's
/// end (nothing is visible yet), its second syncs once and makes all of them durable and visible (pending commits
/// drop from N to 0), and it ends.
#[test]
fn one_group_commit_batch_acknowledges_its_commits() {
    let env = SimEnv::new(7);
    let db = Db::open(env.clone(), "/db", Options::default()).unwrap();
    let mut tickets = Vec::new();
    for i in 0..5u64 {
        let mut t = db.begin().unwrap();
        t.put(&key(i), b"batched").unwrap();
        t.put(&key(100 + i), b"batched").unwrap();
        tickets.push(t.submit().unwrap().unwrap());
    }
    assert_eq!(db.pending_commits(), 5);
    assert_eq!(db.get(&key(0)).unwrap(), None, "not visible before the sync");
    let batches = batch_tasks(&env);
    assert_eq!(batches.len(), 1, "five commits, one batch: {:?}", env.runnable_tasks());
    assert_eq!(env.step_task(batches[0]), Some(TaskStep::Continue), "the capture step");
    assert_eq!(db.pending_commits(), 5, "capturing syncs nothing");
    let io_before = env.io_count();
    assert_eq!(env.step_task(batches[0]), Some(TaskStep::Done), "the sync step ends the batch");
    assert_eq!(env.io_count() - io_before, 1, "one sync for the batch");
    assert_eq!(db.pending_commits(), 0, "one sync acknowledges every commit of the batch");
    for ticket in &tickets {
        db.wait_for_commit(ticket).unwrap();
    }
    assert_eq!(db.get(&key(4)).unwrap(), Some(b"batched".to_vec()));
}

/// A batch per sync (ADR-0081): commits appended before a batch captures the log's end share its one sync; a
/// commit appended after the capture joins the next batch, which syncs only after the first ended, and waiting for
/// it runs that next batch only. Blind writes join the same batches.
#[test]
fn a_commit_after_the_capture_waits_for_the_next_batch_only() {
    let env = SimEnv::new(9);
    let db = Db::open(env.clone(), "/db", Options::default()).unwrap();
    let mut first = Vec::new();
    for i in 0..3u64 {
        let mut t = db.begin().unwrap();
        t.put(&key(i), b"first").unwrap();
        first.push(t.submit().unwrap().unwrap());
    }
    let batch_a = batch_tasks(&env);
    assert_eq!(batch_a.len(), 1);
    assert_eq!(env.step_task(batch_a[0]), Some(TaskStep::Continue), "batch A captures the log's end");
    let mut late = db.begin().unwrap();
    late.put(&key(10), b"late").unwrap();
    let late = late.submit().unwrap().unwrap();
    let both = batch_tasks(&env);
    assert_eq!(both.len(), 2, "the late commit opened batch B: {:?}", env.runnable_tasks());
    let batch_b = *both.iter().find(|&&id| id != batch_a[0]).expect("a second batch");
    // Batch A syncs: its three commits become visible, the late one stays pending (it is past A's captured end).
    let io_before = env.io_count();
    assert_eq!(env.step_task(batch_a[0]), Some(TaskStep::Done));
    assert_eq!(env.io_count() - io_before, 1, "batch A: one sync");
    assert_eq!(db.pending_commits(), 1, "batch A acknowledged its own three commits, not the late one");
    assert_eq!(db.last_sequence(), first[2].last_sequence);
    for ticket in &first {
        db.wait_for_commit(ticket).unwrap();
    }
    assert_eq!(env.io_count() - io_before, 1, "batch A's committers wait for nothing more");
    // A blind write joins batch B (still open) instead of syncing inline.
    let io_before = env.io_count();
    db.put(&key(11), b"blind").unwrap();
    assert!(!batch_tasks(&env).contains(&batch_b), "the blind write waited for batch B, which ran and ended");
    assert_eq!(db.pending_commits(), 0);
    assert_eq!(env.io_count() - io_before, 2, "the blind write's append, and batch B's one sync for both");
    db.wait_for_commit(&late).unwrap();
    assert!(batch_tasks(&env).is_empty(), "no batch is left: {:?}", env.runnable_tasks());
    assert_eq!(db.get(&key(10)).unwrap(), Some(b"late".to_vec()));
    env.crash();
    let db = reopen(&env, db);
    for (k, v) in [(key(0), &b"first"[..]), (key(10), b"late"), (key(11), b"blind")] {
        assert_eq!(db.get(&k).unwrap().as_deref(), Some(v), "an acknowledged write was lost in the crash");
    }
}

/// Submit one commit writing `key(i)`; its ticket.
fn submit_one(db: &Db<SimEnv>, i: u64) -> CommitTicket {
    let mut t = db.begin().unwrap();
    t.put(&key(i), b"gathered").unwrap();
    t.submit().unwrap().unwrap()
}

/// Step `batch` and expect `step`; the clock's advance and the IO calls the step made.
fn step_batch(env: &SimEnv, batch: u64, step: TaskStep) -> (std::time::Duration, u64) {
    let (now, io) = (env.now(), env.io_count());
    assert_eq!(env.step_task(batch), Some(step), "{:?}", env.runnable_tasks());
    (env.now() - now, env.io_count() - io)
}

/// ADR-0092: after a batch acknowledged more than one commit, the next batch pauses once (a step of its own, the
/// clock advanced by the gather, no IO) before it captures the log's end, and a commit submitted during the pause
/// shares its one sync. After a batch of one commit the next batch captures at once, and with the gather set to
/// 0 it never pauses.
#[test]
fn a_batch_after_a_busy_one_gathers_late_commits_into_its_sync() {
    let gather = std::time::Duration::from_micros(Options::default().group_commit_gather_us);
    assert!(!gather.is_zero(), "the gather is on by default");
    for gather_us in [Options::default().group_commit_gather_us, 0] {
        let env = SimEnv::new(11);
        let db = Db::open(env.clone(), "/db", Options::default().with_group_commit_gather_us(gather_us)).unwrap();
        // A lone commit: its batch captures at once (nothing was released before it).
        let lone = submit_one(&db, 0);
        let batch = batch_tasks(&env)[0];
        assert_eq!(step_batch(&env, batch, TaskStep::Continue).1, 0, "the capture step does no IO");
        assert_eq!(step_batch(&env, batch, TaskStep::Done).1, 1, "one sync");
        db.wait_for_commit(&lone).unwrap();
        // Two commits, one batch: after a batch of one, no pause either.
        let busy = [submit_one(&db, 1), submit_one(&db, 2)];
        let batch = batch_tasks(&env)[0];
        assert_eq!(step_batch(&env, batch, TaskStep::Continue), (std::time::Duration::ZERO, 0), "captures at once");
        assert_eq!(step_batch(&env, batch, TaskStep::Done).1, 1);
        assert_eq!(db.pending_commits(), 0, "one sync acknowledged both");
        busy.iter().for_each(|ticket| db.wait_for_commit(ticket).unwrap());
        // The batch after the busy one: it pauses first when the gather is on, and a commit submitted during the
        // pause joins it.
        let first = submit_one(&db, 3);
        let batch = batch_tasks(&env)[0];
        if gather_us > 0 {
            assert_eq!(step_batch(&env, batch, TaskStep::Continue), (gather, 0), "the gather pause");
            assert_eq!(db.pending_commits(), 1, "pausing syncs nothing");
        }
        let late = submit_one(&db, 4);
        assert_eq!(batch_tasks(&env), vec![batch], "the late commit joined the open batch");
        assert_eq!(step_batch(&env, batch, TaskStep::Continue), (std::time::Duration::ZERO, 0), "the capture");
        assert_eq!(step_batch(&env, batch, TaskStep::Done).1, 1, "one sync for both");
        assert_eq!(db.pending_commits(), 0);
        for ticket in [&first, &late] {
            db.wait_for_commit(ticket).unwrap();
        }
        env.crash();
        let db = reopen(&env, db);
        for i in 0..5 {
            assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(&b"gathered"[..]), "gather {gather_us}: key {i}");
        }
    }
}

/// The same batch, shown through IO: waiting for the last of N submitted commits makes all N durable and visible
/// with one sync (one IO call), and each later wait returns at once.
#[test]
fn one_sync_acknowledges_a_batch_of_submitted_commits() {
    let env = SimEnv::new(8);
    let db = Db::open(env.clone(), "/db", Options::default()).unwrap();
    let mut tickets = Vec::new();
    for i in 0..6u64 {
        let mut t = db.begin().unwrap();
        t.put(&key(i), format!("v{i}").as_bytes()).unwrap();
        t.put(&key(50 + i), format!("v{i}").as_bytes()).unwrap();
        tickets.push(t.submit().unwrap().unwrap());
    }
    assert_eq!(db.pending_commits(), 6);
    let io_before = env.io_count();
    db.wait_for_commit(&tickets[0]).unwrap();
    assert_eq!(db.pending_commits(), 0, "waiting for the first commit acknowledged the whole batch");
    assert_eq!(env.io_count() - io_before, 1, "one sync for six commits");
    for ticket in &tickets {
        db.wait_for_commit(ticket).unwrap();
    }
    assert_eq!(env.io_count() - io_before, 1, "later waits do no IO");
    for i in 0..6u64 {
        assert_eq!(db.get(&key(50 + i)).unwrap(), Some(format!("v{i}").into_bytes()));
    }
    env.crash();
    let db = reopen(&env, db);
    for i in 0..6u64 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(format!("v{i}").into_bytes()), "batched commit {i} lost");
    }
}

fn wal_path(env: &SimEnv) -> PathBuf {
    let wals: Vec<PathBuf> =
        env.files().into_iter().map(|f| f.path).filter(|p| p.to_string_lossy().contains("/wal-")).collect();
    assert_eq!(wals.len(), 1, "{wals:?}");
    wals[0].clone()
}

fn batches(bytes: &[u8]) -> Vec<Batch> {
    let scan = decode_segment(bytes);
    assert_eq!(scan.end, WalEnd::Clean);
    scan.records.into_iter().filter_map(|(_, r)| if let Record::Batch(b) = r { Some(b) } else { None }).collect()
}

/// A committed transaction is one batch record in the durable WAL bytes, holding exactly its writes (keys in order,
/// consecutive sequences ending at the acknowledged sequence); an aborted one writes nothing to the log; a
/// submitted one is in the file but not durable until the sync; and recovery replays exactly those records.
#[test]
fn commit_records_in_the_wal_are_what_recovery_replays() {
    let env = SimEnv::new(9);
    let db = Db::open(env.clone(), "/db", Options::default()).unwrap();
    let mut t = db.begin().unwrap();
    t.put(b"c", b"3").unwrap();
    t.put(b"a", b"1").unwrap();
    t.delete(b"b").unwrap();
    t.put(b"a", b"1-final").unwrap();
    t.commit().unwrap();
    let path = wal_path(&env);
    let durable = batches(&env.read_durable(&path).expect("the segment is durably named"));
    assert_eq!(durable.len(), 1);
    let batch = &durable[0];
    let writes: Vec<(ValueKind, &[u8], &[u8])> =
        batch.writes.iter().map(|w| (w.kind, w.key.as_slice(), w.value.as_slice())).collect();
    assert_eq!(
        writes,
        vec![
            (ValueKind::Put, &b"a"[..], &b"1-final"[..]),
            (ValueKind::Delete, b"b", b""),
            (ValueKind::Put, b"c", b"3")
        ]
    );
    assert_eq!(batch.last_sequence(), db.last_sequence());

    // An aborted transaction appends nothing.
    let mut loser = db.begin().unwrap();
    let mut winner = db.begin().unwrap();
    loser.get(b"a").unwrap();
    loser.put(b"a", b"loser").unwrap();
    winner.put(b"a", b"winner").unwrap();
    winner.commit().unwrap();
    assert!(loser.commit().unwrap_err().is_conflict());
    let current = env.read_current(&path).unwrap();
    assert!(!current.windows(5).any(|w| w == b"loser"), "an aborted transaction's write reached the log");
    assert_eq!(batches(&current).len(), 2);

    // A submitted commit is appended but not durable until the group commit syncs it.
    let mut t = db.begin().unwrap();
    t.put(b"d", b"4").unwrap();
    t.put(b"e", b"5").unwrap();
    let ticket = t.submit().unwrap().unwrap();
    assert_eq!(batches(&env.read_current(&path).unwrap()).len(), 3);
    assert_eq!(batches(&env.read_durable(&path).unwrap()).len(), 2, "synced before anyone waited");
    db.wait_for_commit(&ticket).unwrap();
    let durable = batches(&env.read_durable(&path).unwrap());
    assert_eq!(durable.len(), 3);

    // Recovery replays exactly the durable records: rebuild the state from them and compare.
    let mut replayed: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for batch in &durable {
        for w in &batch.writes {
            match w.kind {
                ValueKind::Put => replayed.insert(w.key.clone(), w.value.clone()),
                _ => replayed.remove(&w.key),
            };
        }
    }
    env.crash();
    let db = reopen(&env, db);
    let mut r = db.begin_read().unwrap();
    let recovered: BTreeMap<Vec<u8>, Vec<u8>> = r.scan(..).unwrap().map(Result::unwrap).collect();
    assert_eq!(recovered, replayed);
    assert_eq!(recovered.get(&b"a"[..]).map(Vec::as_slice), Some(&b"winner"[..]));
    drop(r);
    assert_eq!(db.last_sequence(), durable.last().unwrap().last_sequence());
}
