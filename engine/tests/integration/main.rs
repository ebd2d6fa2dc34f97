//! The engine's integration tests: one test crate (see DEVELOPERS.md).

mod corruption;
mod crash;
mod model;
mod persistence;
