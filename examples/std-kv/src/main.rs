fn main() -> std::process::ExitCode {
    let cli = holdfast::cli::Cli::new("std-kv", "cargo run --release --")
        .seeds_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/seeds"));
    #[cfg(feature = "planted-bug")]
    let cli = cli.built_with("planted-bug"); // printed replay and test commands repeat the feature
    #[cfg(feature = "planted-race")]
    let cli = cli.built_with("planted-race");
    cli.target::<std_kv::StdKvTarget>().run()
}
