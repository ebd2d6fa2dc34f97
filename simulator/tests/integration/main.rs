//! The simulator's integration tests: one crate, one module per concern.

mod cli;
mod crash_cycles;
mod determinism;
mod swarm;
mod toy;
