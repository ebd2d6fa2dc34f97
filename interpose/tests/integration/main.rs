//! `interpose`'s integration tests: a binary that links the crate, with worlds bound to its threads. The point of
//! the crate is that `std::fs`, `std::thread` and `std::time` reach the world, so these tests call them directly.

#![expect(clippy::disallowed_methods, reason = "the point: std's file system and clock under a world")]
#![expect(clippy::disallowed_types, reason = "the point: std's file system under a world")]

mod binding;
mod clock_random;
mod files;
mod outside;
mod pthread_c;
mod raw_syscalls;
mod refusals;
mod threads;
mod unix_vfs;
mod worlds;
