//! Replays every txn seed in `seeds/txn/` (one test per file; canary seeds need `--features canaries`).

fn main() -> std::process::ExitCode {
    holdfast::seeds::replay::<txn_target::TxnTarget>(concat!(env!("CARGO_MANIFEST_DIR"), "/../../seeds/txn"))
}
