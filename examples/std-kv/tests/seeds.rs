//! Replays every seed file in `seeds/` (one test each): `cargo test`.

fn main() -> std::process::ExitCode {
    holdfast::seeds::replay::<std_kv::StdKvTarget>(concat!(env!("CARGO_MANIFEST_DIR"), "/seeds"))
}
