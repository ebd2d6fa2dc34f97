//! The framework's integration tests, one crate: small systems written against the public API as a user would.

mod cli;
mod common;
mod cost;
mod menus;
mod spin;
mod toy;
mod unavailable;
