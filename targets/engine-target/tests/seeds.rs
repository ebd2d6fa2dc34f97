//! Replays every engine seed in `seeds/` (one test per file; canary seeds need `--features canaries`).

fn main() -> std::process::ExitCode {
    holdfast::seeds::replay::<engine_target::EngineTarget>(concat!(env!("CARGO_MANIFEST_DIR"), "/../../seeds"))
}
