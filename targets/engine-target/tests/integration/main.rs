//! The engine target's integration tests: one crate, one module per concern.

mod crash_cycles;
mod determinism;
mod swarm;
