//! Replays every SQLite seed in `seeds/sqlite/` (one test per file; each pins a finding of the guarantee matrix
//! and expects `fail`, ADR-0080).

fn main() -> std::process::ExitCode {
    holdfast::seeds::replay::<sqlite_target::SqliteTarget>(concat!(env!("CARGO_MANIFEST_DIR"), "/../../seeds/sqlite"))
}
