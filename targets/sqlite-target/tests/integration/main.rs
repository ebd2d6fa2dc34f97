//! The sqlite target's integration tests: SQLite's clock and randomness are the world's, a run does not depend
//! on the runs before it in the process, and the guarantee matrix's pieces work on a few seeds.

use holdfast::env::{Env, SimEnv};
use holdfast::{FaultProfile, RunOptions, WorldConfig, run_configured, run_target};
use rusqlite::Connection;
use sqlite_target::config::assumed_menu;
use sqlite_target::world::{CLOCK_ZERO_JULIAN_MS, VfsWorld, install};
use sqlite_target::{Cell, JournalMode, SqliteConfig, SqliteTarget, Synchronous, db, vfs};

/// SQLite's PRNG is process-wide and the test harness runs tests on threads side by side: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A connection on a fresh world of `seed`, with SQLite's PRNG reset as a run does.
fn connect(env: &SimEnv) -> Connection {
    vfs::register().expect("register the VFS");
    let world = VfsWorld::new(env.clone(), true);
    install(&world);
    vfs::reset_prng();
    db::create_files(env).expect("create /sqlite");
    db::open(&SqliteConfig::from_seed(1)).expect("open SQLite on the simulated disk")
}

fn random_hex(env: &SimEnv) -> String {
    connect(env).query_row("SELECT hex(randomblob(16))", [], |row| row.get(0)).expect("randomblob")
}

#[test]
fn sqlite_reads_the_simulated_clock() {
    let _serial = serial();
    let env = SimEnv::new(3);
    let conn = connect(&env);
    let day: String = conn.query_row("SELECT strftime('%Y-%m-%d', 'now')", [], |row| row.get(0)).expect("now");
    assert_eq!(day, "2026-01-01", "SQLite's 'now' is the simulated clock from its zero");
    let before: f64 = conn.query_row("SELECT julianday('now')", [], |row| row.get(0)).expect("julianday");
    assert!((before * 86_400_000.0 - CLOCK_ZERO_JULIAN_MS as f64).abs() < 86_400_000.0);
    env.sleep(std::time::Duration::from_secs(2 * 86_400));
    let later: String = conn.query_row("SELECT strftime('%Y-%m-%d', 'now')", [], |row| row.get(0)).expect("now");
    assert_eq!(later, "2026-01-03", "two simulated days later (SQLite reads the clock per statement)");
}

#[test]
fn sqlite_randomness_is_the_seed_and_not_the_process_history() {
    let _serial = serial();
    let first = random_hex(&SimEnv::new(5));
    let other = random_hex(&SimEnv::new(6));
    let again = random_hex(&SimEnv::new(5));
    assert_eq!(first.len(), 32);
    assert_ne!(first, other, "different seeds, different SQLite randomness");
    assert_eq!(first, again, "SQLite's PRNG is reset and re-seeded from the world at every run");
}

#[test]
fn a_run_does_not_depend_on_the_seeds_before_it() {
    let _serial = serial();
    let options = RunOptions::with_steps(200);
    let alone = run_target::<SqliteTarget>(11, &options);
    for seed in 0..4 {
        run_target::<SqliteTarget>(seed, &options);
    }
    let after = run_target::<SqliteTarget>(11, &options);
    assert_eq!(alone.digest, after.digest, "seed 11 ran differently after other seeds in the process");
    assert!(alone.coverage.get("vfs.randomness_calls") > 0, "SQLite never asked the VFS for randomness");
}

#[test]
fn delete_full_loses_the_last_commit_and_extra_does_not() {
    let _serial = serial();
    // ADR-0080: in DELETE mode the commit is the journal's unlink; FULL does not sync its directory, EXTRA does.
    let cell = |synchronous| Cell { journal_mode: JournalMode::Delete, synchronous };
    let lost = |synchronous| {
        (0..12u64)
            .map(|seed| {
                let world = WorldConfig::from_seed(seed, FaultProfile::Assumed, &assumed_menu());
                let config = SqliteConfig::in_cell(seed, cell(synchronous));
                let outcome = run_configured::<SqliteTarget>(seed, world, config, &RunOptions::with_steps(300));
                assert!(outcome.passed(), "seed {seed}: {:?}", outcome.failure);
                outcome.coverage.get("sqlite.commits_lost")
            })
            .sum::<u64>()
    };
    assert!(lost(Synchronous::Full) > 0, "DELETE/FULL never lost a commit on 12 seeds");
    assert_eq!(lost(Synchronous::Extra), 0, "DELETE/EXTRA lost a commit");
}

#[test]
fn check_finds_the_seed_pinned_for_a_finding_in_its_model_only() {
    use holdfast::env::{Persistence, RealEnv};
    use sqlite_target::matrix::{find_pinned, run_cell, seed_name};
    let _serial = serial();
    // Seed 19 of PERSIST/NORMAL under posix is the first to fail `no_unexpected_error.integrity_check` (MATRIX.md).
    let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../seeds/sqlite"));
    let cell = Cell { journal_mode: JournalMode::Persist, synchronous: Synchronous::Normal };
    let mut posix = run_cell::<sqlite_target::VfsRoute>(cell, Persistence::Posix, 19..20, &RunOptions::default());
    let invariant = "no_unexpected_error.integrity_check";
    assert!(posix.findings.contains_key(invariant), "seed 19 no longer fails {invariant}: {:?}", posix.findings);
    find_pinned(&mut posix, dir).expect("the pinned posix seed matches");
    assert_eq!(
        posix.pinned.get(invariant).map(String::as_str),
        Some("persist-normal-no-unexpected-error-integrity-check")
    );
    assert_eq!(posix.unpinned(), 0);
    // The same finding labelled with another model finds no seed of that model's name: a new finding.
    let mut relabelled = posix.clone();
    relabelled.persistence = Persistence::Ext4Ordered;
    relabelled.pinned.clear();
    find_pinned(&mut relabelled, dir).expect("no file of that name is not an error");
    assert_eq!(relabelled.unpinned(), posix.findings.len());
    // A file of the right name that pins another model is refused.
    let scratch = RealEnv::new().temp_dir("sqlite-pinned").expect("temp dir");
    let fs = holdfast::env::fs::Fs::new(RealEnv::new());
    let posix_file = fs.read(dir.join("persist-normal-no-unexpected-error-integrity-check.json")).expect("read");
    let name = seed_name(cell, Persistence::Ext4Ordered, invariant);
    fs.write(scratch.path().join(format!("{name}.json")), posix_file).expect("write");
    let error = find_pinned(&mut relabelled, scratch.path()).expect_err("a posix seed under an ext4-ordered name");
    assert!(error.contains("under posix") && error.contains("under ext4-ordered"), "{error}");
}

/// `sqlite-matrix` explains itself, refuses an unknown cell, and runs one cell without rewriting a MATRIX file.
#[test]
fn the_matrix_binary_runs_one_cell_and_explains_its_options() {
    let run = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_sqlite-matrix")).args(args).output().expect("runs");
        let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("UTF-8");
        (output.status.code(), text(output.stdout), text(output.stderr))
    };
    let (code, help, _) = run(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(help.contains("--cells WHICH") && help.contains("WAL/NORMAL") && help.contains("--persistence"), "{help}");
    let (code, _, error) = run(&["--cells", "WAL/SOMETIMES"]);
    assert_eq!(code, Some(2));
    assert!(error.contains("\"WAL/SOMETIMES\"") && error.contains("a cell such as WAL/NORMAL"), "{error}");
    let matrix = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../seeds/sqlite/MATRIX.md"));
    let fs = holdfast::env::fs::Fs::new(holdfast::env::RealEnv::new());
    let before = fs.read(matrix).expect("MATRIX.md is committed");
    let (code, out, error) = run(&["--seeds", "0..2", "--cells", "wal/full", "--check"]);
    assert_eq!(code, Some(0), "{out}{error}");
    let lines: Vec<&str> = out.lines().filter(|line| line.contains(" seeds, ")).collect();
    assert_eq!(lines.len(), 1, "{out}");
    assert!(lines[0].starts_with("WAL/FULL (posix): 2 seeds, 2 passed"), "{out}");
    assert_eq!(fs.read(matrix).expect("still there"), before, "a one-cell run rewrote MATRIX.md");
}
