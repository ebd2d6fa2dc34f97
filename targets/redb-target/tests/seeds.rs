//! Replays every redb seed in `seeds/redb/` (one test per file; each pins a finding and expects `fail`).

fn main() -> std::process::ExitCode {
    holdfast::seeds::replay::<redb_target::RedbTarget>(concat!(env!("CARGO_MANIFEST_DIR"), "/../../seeds/redb"))
}
