//! The guarantee matrix (stub replaced below).
#![forbid(unsafe_code)]
