//! Engine target integration tests.
