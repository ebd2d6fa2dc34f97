//! Replays every seed file of this build's route (`seeds/interposed/` by default, `seeds/env-fs/` with
//! `--no-default-features --features env-fs`; one test each): `cargo test`.

fn main() -> std::process::ExitCode {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds").join(std_kv::ROUTE);
    holdfast::seeds::replay::<std_kv::StdKvTarget>(dir)
}
