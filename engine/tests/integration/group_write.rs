//! The log's group write (ADR-0134): on real threads, committers queue their records under the writer lock and
//! whoever finds pending bytes writes them all after it. Writers commit unsynced while the main thread rotates the
//! log (`Db::flush`) and then closes the database under them; every commit that returned Ok must then be read back
//! after a reopen (from the log segments recovery replays, or the tables flushed from them), with its value, and
//! every log segment left must decode to its end. Before the first rotation, every commit acknowledged so far must
//! already be in the log's bytes as the OS has them.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use engine::wal::{Record, WalEnd, decode_segment};
use engine::{Db, Error, Options, SyncMode};
use env::{Env, File, OpenOptions, RealEnv, TaskStep};

const WRITERS: usize = 6;
/// Each writer's most commits: far more than commit before the close.
const COMMITS_PER_WRITER_MAX: usize = 1_000_000;
/// Commits (all writers') before each rotation, and before the close.
const COMMITS_BETWEEN_ROTATIONS: u64 = 500;
const ROTATIONS: u64 = 4;
/// How many times the main thread looks at the sequence before giving up on the writers' progress.
const PROGRESS_POLLS_MAX: u64 = 50_000_000;

/// Commit distinct keys until the database is closed under the writer; the acknowledged ones are recorded.
fn writer(db: &Db<RealEnv>, thread: usize, acknowledged: &Mutex<BTreeMap<Vec<u8>, Vec<u8>>>) {
    for index in 0..COMMITS_PER_WRITER_MAX {
        let (key, value) = (format!("w{thread}-{index:07}").into_bytes(), format!("value-{thread}-{index}"));
        let mut txn = match db.begin() {
            Ok(txn) => txn,
            Err(Error::Closed { .. }) => return,
            Err(error) => panic!("begin: {error}"),
        };
        txn.put(&key, value.as_bytes()).unwrap();
        match txn.commit() {
            Ok(_) => acknowledged.lock().unwrap().insert(key, value.into_bytes()),
            Err(Error::Closed { .. }) => return,
            Err(error) => panic!("commit: {error}"),
        };
    }
}

/// Wait (spinning: the writers need only microseconds each) until `target` commits are in.
fn wait_for_sequence(db: &Db<RealEnv>, target: u64) {
    for _ in 0..PROGRESS_POLLS_MAX {
        if db.last_sequence() >= target {
            return;
        }
        std::hint::spin_loop();
    }
    panic!("writers stuck below sequence {target}: at {}", db.last_sequence());
}

fn log_segments(env: &RealEnv, dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut paths = env.list_dir(dir).unwrap();
    paths.retain(|path| path.extension().is_some_and(|extension| extension == "log"));
    paths
        .into_iter()
        .map(|path| (path.clone(), env.open(&path, OpenOptions::read()).unwrap().read_all().unwrap()))
        .collect()
}

/// Every key of a batch record in the log segments' bytes as the OS has them now (a record still being written may
/// end a segment torn).
fn keys_in_the_log(env: &RealEnv, dir: &Path) -> std::collections::BTreeSet<Vec<u8>> {
    let records = log_segments(env, dir).into_iter().flat_map(|(_, bytes)| decode_segment(&bytes).records);
    let batches = records.filter_map(|(_, record)| match record {
        Record::Batch(batch) => Some(batch.writes),
        Record::Seal => None,
    });
    batches.flatten().map(|write| write.key).collect()
}

#[test]
fn every_acknowledged_unsynced_commit_survives_rotations_and_a_close_under_the_committers() {
    let env = RealEnv::new();
    let dir = env.temp_dir("group-write-real-threads").unwrap();
    let options = Options::default().with_sync_mode(SyncMode::NoSync);
    let db = Db::open(env.clone(), dir.path(), options.clone()).unwrap();
    let acknowledged = Arc::new(Mutex::new(BTreeMap::new()));
    let handles: Vec<_> = (0..WRITERS)
        .map(|thread| {
            let (db, acknowledged) = (db.clone(), Arc::clone(&acknowledged));
            let body = move || {
                writer(&db, thread, &acknowledged);
                TaskStep::Done
            };
            env.spawn("writer", Box::new(body))
        })
        .collect();
    // While the writers go on: a commit that returned Ok has its record in the log's bytes (written through to
    // the OS before the acknowledgement, by itself or by its group's leader), before any rotation or close.
    wait_for_sequence(&db, COMMITS_BETWEEN_ROTATIONS / 2);
    let acknowledged_now = acknowledged.lock().unwrap().clone();
    let logged = keys_in_the_log(&env, dir.path());
    let unwritten: Vec<String> = acknowledged_now
        .keys()
        .filter(|key| !logged.contains(*key))
        .map(|key| String::from_utf8_lossy(key).into_owned())
        .collect();
    let (count, first) = (unwritten.len(), &unwritten[..unwritten.len().min(5)]);
    assert!(count == 0 && !acknowledged_now.is_empty(), "{count} acknowledged, not in the log: {first:?}");
    for rotation in 1..=ROTATIONS {
        wait_for_sequence(&db, rotation * COMMITS_BETWEEN_ROTATIONS);
        db.flush().unwrap();
    }
    wait_for_sequence(&db, (ROTATIONS + 1) * COMMITS_BETWEEN_ROTATIONS);
    db.close().unwrap();
    for handle in &handles {
        env.wait(handle).unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap();
    assert!(acknowledged.len() as u64 >= (ROTATIONS + 1) * COMMITS_BETWEEN_ROTATIONS, "{}", acknowledged.len());
    for (path, bytes) in log_segments(&env, dir.path()) {
        assert_eq!(decode_segment(&bytes).end, WalEnd::Clean, "{}", path.display());
    }
    drop(db);
    let db = Db::open(env.clone(), dir.path(), options).unwrap();
    let mut missing = Vec::new();
    for (key, value) in acknowledged.iter() {
        if db.get(key).unwrap().as_ref() != Some(value) {
            missing.push(String::from_utf8_lossy(key).into_owned());
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged commits lost: {:?}",
        missing.len(),
        acknowledged.len(),
        &missing[..missing.len().min(5)]
    );
    let rows = db.scan(..).unwrap().count();
    assert_eq!(rows, acknowledged.len(), "rows after reopen");
    db.close().unwrap();
}
