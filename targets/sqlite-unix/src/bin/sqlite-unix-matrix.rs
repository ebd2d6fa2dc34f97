//! SQLite's guarantee matrix on its own default unix VFS under `interpose` (ADR-0177): `sqlite-matrix`'s command
//! line ([`sqlite_target::matrix_cli`]) on [`sqlite_unix::UnixRoute`]; it writes and pins in `seeds/sqlite-unix/`.
//!
//! ```sh
//! cargo run --release -p sqlite-unix --bin sqlite-unix-matrix -- --seeds 0..200 --persistence ext4-ordered
//! cargo run -p sqlite-unix --bin sqlite-unix-matrix -- --seeds 0..5 --persistence ext4-ordered --check \
//!     --against seeds/sqlite/MATRIX-ext4-ordered.md                                             # CI
//! ```

fn main() -> std::process::ExitCode {
    sqlite_target::matrix_cli::main::<sqlite_unix::UnixRoute>(concat!(env!("CARGO_MANIFEST_DIR"), "/../../seeds"))
}
