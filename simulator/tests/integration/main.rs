//! The simulator binary's integration tests: one crate, one module per concern.

mod cli;
mod shrink;
