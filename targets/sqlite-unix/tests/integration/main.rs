//! The default-VFS route: SQLite's unix VFS runs on the world's disk through `interpose`, a run is a function of
//! its seed, and its cells give the VFS route's verdicts (ADR-0177).

use holdfast::env::{DiskModel, Persistence};
use holdfast::{FaultProfile, RunOptions, WorldConfig, run_configured};
use sqlite_target::config::assumed_menu;
use sqlite_target::{Cell, JournalMode, SqliteConfig, Synchronous};
use sqlite_unix::UnixTarget;

/// SQLite's PRNG is process-wide and the test harness runs tests on threads side by side: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn run(seed: u64, cell: Cell, steps: u64) -> holdfast::OutcomeOf<UnixTarget> {
    let mut world = WorldConfig::from_seed(seed, FaultProfile::Assumed, &assumed_menu());
    world.disk = DiskModel::with_persistence(Persistence::Ext4Ordered);
    let config = SqliteConfig::in_cell(seed, cell);
    run_configured::<UnixTarget>(seed, world, config, &RunOptions::with_steps(steps))
}

#[test]
fn every_journal_mode_runs_on_the_unix_vfs_through_the_world() {
    let _serial = serial();
    for journal_mode in JournalMode::ALL {
        let cell = Cell { journal_mode, synchronous: Synchronous::Full };
        let outcome = run(3, cell, 300);
        assert!(outcome.passed(), "{cell}: {:?}", outcome.failure);
        let coverage = &outcome.coverage;
        for name in ["interpose.pwrite64", "interpose.pread64", "interpose.fsync", "interpose.random_device"] {
            assert!(coverage.get(name) > 0, "{cell}: {name} never counted: {coverage:?}");
        }
        assert!(coverage.get("sqlite.commits") > 0 && coverage.get("recoveries") > 0, "{cell}: {coverage:?}");
    }
}

/// Run one of this crate's binaries: (exit code, stdout, stderr).
fn run_bin(bin: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let output = std::process::Command::new(bin).args(args).output().expect("runs");
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("UTF-8");
    (output.status.code(), text(output.stdout), text(output.stderr))
}

#[test]
fn a_seed_on_the_unix_vfs_is_deterministic() {
    let (code, out, error) = run_bin(env!("CARGO_BIN_EXE_sqlite-unix"), &["--seed", "3", "--check-determinism"]);
    assert_eq!(code, Some(0), "{out}{error}");
    assert!(out.contains("determinism: ok"), "{out}{error}");
}

#[test]
fn a_run_does_not_depend_on_the_seeds_before_it() {
    let _serial = serial();
    let cell = Cell { journal_mode: JournalMode::Wal, synchronous: Synchronous::Normal };
    let alone = run(11, cell, 300);
    for seed in 0..3 {
        run(seed, Cell { journal_mode: JournalMode::ALL[seed as usize], synchronous: Synchronous::Off }, 300);
    }
    let after = run(11, cell, 300);
    assert!(alone.passed(), "{:?}", alone.failure);
    assert_eq!(alone.digest, after.digest, "seed 11 ran differently after other seeds in the process");
}

/// The matrix binary compares its verdicts with the VFS route's matrix, cell for cell, and fails on a difference.
#[test]
fn the_matrix_check_fails_when_a_cell_differs_from_the_other_routes_matrix() {
    let matrix = env!("CARGO_BIN_EXE_sqlite-unix-matrix");
    let committed = concat!(env!("CARGO_MANIFEST_DIR"), "/../../seeds/sqlite/MATRIX-ext4-ordered.md");
    let args = ["--seeds", "0..2", "--persistence", "ext4-ordered", "--cells", "WAL/FULL", "--check", "--against"];
    let (code, out, error) = run_bin(matrix, &[&args[..], &[committed]].concat());
    assert_eq!(code, Some(0), "{out}{error}");
    assert!(out.contains("WAL/FULL (ext4-ordered): 2 seeds, 2 passed") && out.contains("0 of 1 cells differ"), "{out}");
    // The same run against a matrix whose WAL/FULL row disagrees: exit 1, naming the cell.
    let fs = holdfast::env::fs::Fs::new(holdfast::env::RealEnv::new());
    let text = String::from_utf8(fs.read(committed).expect("read")).expect("UTF-8");
    let row = text.lines().find(|line| line.starts_with("| WAL | FULL |")).expect("the WAL/FULL row");
    let doctored = text.replace(row, &row.replace("| yes |", "| `ext4-ordered-wal-full-durability-lost-commit` |"));
    let scratch = holdfast::env::RealEnv::new().temp_dir("sqlite-unix-against").expect("temp dir");
    let path = scratch.path().join("MATRIX-doctored.md");
    fs.write(&path, doctored).expect("write");
    let (code, out, error) = run_bin(matrix, &[&args[..], &[path.to_str().expect("UTF-8")]].concat());
    assert_eq!(code, Some(1), "{out}{error}");
    assert!(out.contains("differs: WAL/FULL agrees here, disagrees in"), "{out}");
}

/// A dead process's connection (`Route::forget`) writes nothing, releases its descriptors, and leaves nothing that
/// keeps the world alive: a matrix runs thousands of worlds in one process (`interpose` allows 4,096 at once).
#[test]
fn a_forgotten_connection_changes_nothing_and_frees_its_world() {
    use sqlite_target::Route;
    let _serial = serial();
    let env = holdfast::env::SimEnv::new(9);
    let route = sqlite_unix::UnixRoute::new(&env);
    sqlite_target::db::create_files(&env).expect("create /sqlite");
    let config = SqliteConfig::in_cell(9, Cell { journal_mode: JournalMode::Wal, synchronous: Synchronous::Normal });
    let conn = {
        let _bound = route.bind();
        let conn = route.open(&config).expect("open on the unix VFS");
        conn.execute_batch("INSERT INTO kv(k, v) VALUES (1, x'00')").expect("a commit");
        conn
    };
    assert!(route.bind().stats().open_descriptors > 0, "the database and its WAL are open");
    let digest = env.disk_digest();
    route.forget(conn);
    assert_eq!(env.disk_digest(), digest, "the close of a dead process wrote, checkpointed or deleted something");
    assert_eq!(route.bind().stats().open_descriptors, 0, "its descriptors stayed in the world's table");
    drop(route);
    let weak = env.downgrade();
    drop(env);
    assert!(weak.upgrade().is_none(), "something the forgotten connection left keeps the world alive");
}
