fn main() -> std::process::ExitCode {
    // Route A is built without the default route: printed replay commands say so.
    #[cfg(feature = "env-fs")]
    let command = "cargo run --release --no-default-features --";
    #[cfg(not(feature = "env-fs"))]
    let command = "cargo run --release --";
    let cli = holdfast::cli::Cli::new("std-kv", command).seeds_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/seeds"));
    #[cfg(feature = "env-fs")]
    let cli = cli.built_with("env-fs");
    #[cfg(feature = "planted-bug")]
    let cli = cli.built_with("planted-bug"); // printed replay and test commands repeat the feature
    #[cfg(feature = "planted-race")]
    let cli = cli.built_with("planted-race");
    cli.target::<std_kv::StdKvTarget>().run()
}
