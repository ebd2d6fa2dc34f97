//! The guarantee matrix of SQLite under the simulator on our VFS (ADR-0079, ADR-0118): a swarm per (journal_mode,
//! synchronous) cell under the `assumed` profile and one persistence model (ADR-0109), written to
//! `seeds/sqlite/MATRIX.md` (`posix`) or `seeds/sqlite/MATRIX-<model>.md`, every disagreement with SQLite's promise
//! shrunk and pinned in `seeds/sqlite/`.
//!
//! ```sh
//! cargo run --release -p sqlite-target --bin sqlite-matrix -- --seeds 0..200                       # posix: MATRIX.md
//! cargo run --release -p sqlite-target --bin sqlite-matrix -- --seeds 0..200 --persistence page    # MATRIX-page.md
//! cargo run -p sqlite-target --bin sqlite-matrix -- --seeds 0..20 --cells durable --check          # CI
//! cargo run --release -p sqlite-target --bin sqlite-matrix -- --seeds 200..2000 --persistence ext4-ordered --cells WAL/NORMAL --check
//! ```
//!
//! One cell (`--cells WAL/NORMAL`) is for searching deeper than the matrix: its line is printed, and it pins its
//! findings (or, with `--check`, reports those no seed pins), but it never rewrites a MATRIX file. The command
//! line is [`sqlite_target::matrix_cli`], shared with the default-VFS route's `sqlite-unix-matrix` (ADR-0177).

fn main() -> std::process::ExitCode {
    sqlite_target::matrix_cli::main::<sqlite_target::VfsRoute>(concat!(env!("CARGO_MANIFEST_DIR"), "/../../seeds"))
}
