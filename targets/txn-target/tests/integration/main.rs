//! Transaction target integration tests.

mod txn;
