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
