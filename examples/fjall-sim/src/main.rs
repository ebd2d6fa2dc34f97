//! The command line: holdfast's, with fjall as the target (`--help` lists the options).
fn main() -> std::process::ExitCode {
    let cli = holdfast::cli::Cli::new("fjall-sim", "cargo run --release --")
        .seeds_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/seeds"));
    cli.target::<fjall_sim::FjallTarget>().run()
}
