//! `interpose`'s integration tests: a binary that links the crate, with worlds bound to its threads.

mod skeleton;
mod threads;
