fn main() -> std::process::ExitCode {
    let seeds = concat!(env!("CARGO_MANIFEST_DIR"), "/seeds");
    holdfast::cli::Cli::new("wal-kv", "cargo run --release --").seeds_dir(seeds).target::<wal_kv::WalKvTarget>().run()
}
