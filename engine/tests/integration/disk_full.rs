//! A full disk: an open whose recovery does not fit fails cleanly, as often as it is retried.

use std::path::Path;

use engine::{Db, Error, Options};
use env::{Env, FaultConfig, SimEnv};

/// How many opens the full disk refuses in the test.
const FAILED_OPENS: usize = 20;

fn names(env: &SimEnv) -> Vec<String> {
    let listing = env.list_dir(Path::new("/db")).expect("the directory exists");
    listing.iter().map(|path| path.file_name().expect("a name").to_string_lossy().into_owned()).collect()
}

/// Regression (ADR-seeds-perf): each open that failed writing its recovery table left an empty log segment and an
/// empty table behind, so a run retrying the open on a full disk piled up files that every later open listed and
/// replayed (seed 23 of the engine swarm: 50 CPU-seconds, nearly all of it here).
#[test]
fn failed_opens_on_a_full_disk_leave_no_files_behind() {
    let env = SimEnv::new(5);
    let db = Db::open(env.clone(), "/db", Options::default()).expect("opens");
    for key in 0..200u32 {
        db.put(&key.to_le_bytes(), &[7u8; 100]).expect("put");
    }
    drop(db);
    // The log now holds every write: recovery must write it out as a table, and the disk has no room for one.
    env.crash();
    let before = names(&env);
    let used: u64 = env.files().iter().map(|file| file.current_len).sum();
    env.set_fault_config(FaultConfig { disk_quota_bytes: Some(used + 100), ..FaultConfig::none() });
    for attempt in 0..FAILED_OPENS {
        let error = Db::open(env.clone(), "/db", Options::default()).expect_err("the table does not fit");
        assert!(matches!(error, Error::Env(env::Error::NoSpace { .. })), "attempt {attempt}: {error:?}");
        assert_eq!(names(&env), before, "attempt {attempt} left files behind");
    }
    env.set_fault_config(FaultConfig::none());
    let db = Db::open(env.clone(), "/db", Options::default()).expect("opens once there is room");
    for key in 0..200u32 {
        assert_eq!(db.get(&key.to_le_bytes()).expect("get"), Some(vec![7u8; 100]), "key {key}");
    }
}
