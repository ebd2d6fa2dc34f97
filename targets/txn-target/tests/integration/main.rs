//! Transaction target integration tests.

mod txn;
mod real_threads;
