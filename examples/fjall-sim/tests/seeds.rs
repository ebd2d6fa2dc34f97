//! Replays every seed file in `seeds/` (one test each): `cargo test`. A finding in fjall expects `fail` with its
//! signature; it turns red the day fjall syncs the directory a keyspace's directory is made in (ADR-0176).

fn main() -> std::process::ExitCode {
    holdfast::seeds::replay::<fjall_sim::FjallTarget>(concat!(env!("CARGO_MANIFEST_DIR"), "/seeds"))
}
