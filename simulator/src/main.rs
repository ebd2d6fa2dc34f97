//! The simulator: holdfast's command line with holdfast's own targets registered. See `--help`.

mod bench;

use std::process::ExitCode;

use holdfast::cli::Cli;

/// The simulator binary allocates through mimalloc instead of the system allocator (ADR-0143): a simulated run
/// allocates and frees a buffer per block read, key and row, and glibc's malloc and free were a fifth of its
/// instructions. A library user of holdfast keeps whatever allocator their own binary chooses. Without the
/// default `mimalloc` feature the binary uses the system allocator.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::new("simulator", "cargo run --release -p simulator --")
        .seeds_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../seeds"))
        .canaries_feature("canaries")
        .target::<engine_target::EngineTarget>()
        .package("engine-target")
        .real_io::<engine_target::EngineTarget>(bench::replay_on_real_io)
        .target::<txn_target::TxnTarget>()
        .package("txn-target");
    #[cfg(feature = "redb")]
    let cli = cli.target::<redb_target::RedbTarget>().feature("redb").package("redb-target");
    #[cfg(not(feature = "redb"))]
    let cli = cli.unbuilt(
        "redb",
        "build it with --features redb (cargo run --release -p simulator --features redb -- --target redb ...)",
    );
    #[cfg(feature = "sqlite")]
    let cli = cli.target::<sqlite_target::SqliteTarget>().feature("sqlite").package("sqlite-target");
    #[cfg(not(feature = "sqlite"))]
    let cli = cli.unbuilt(
        "sqlite",
        "build it with --features sqlite (cargo run --release -p simulator --features sqlite -- --target sqlite ...)",
    );
    cli.run()
}
