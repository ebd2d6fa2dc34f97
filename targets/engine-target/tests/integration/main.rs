//! The engine target's integration tests: one crate, one module per concern.

mod crash_cycles;
mod damaged_tables;
mod determinism;
mod swarm;
