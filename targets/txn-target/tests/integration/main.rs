//! Transaction target integration tests.

mod real_threads;
mod txn;
