//! Replays every seed in `seeds/sqlite-unix/` (findings of the default-VFS route's matrix, ADR-0177).

fn main() -> std::process::ExitCode {
    holdfast::seeds::replay::<sqlite_unix::UnixTarget>(concat!(env!("CARGO_MANIFEST_DIR"), "/../../seeds/sqlite-unix"))
}
