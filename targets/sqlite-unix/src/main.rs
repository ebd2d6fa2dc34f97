//! The default-VFS route on holdfast's command line (ADR-0177): `--seeds`, `--replay`, `--check-determinism` and
//! the rest, on [`sqlite_unix::UnixTarget`] (each seed draws its own cell, as `--target sqlite` does).
//!
//! ```sh
//! cargo run --release -p sqlite-unix --bin sqlite-unix -- --seed 7 --check-determinism
//! ```

fn main() -> std::process::ExitCode {
    holdfast::cli::Cli::new("sqlite-unix", "cargo run --release -p sqlite-unix --bin sqlite-unix --")
        .seeds_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../../seeds"))
        .target::<sqlite_unix::UnixTarget>()
        .package("sqlite-unix")
        .run()
}
