//! The simulator's integration tests: one crate, one module per concern.

mod cli;
mod crash_cycles;
mod determinism;
mod shrink;
mod swarm;
mod toy;
mod txn;
