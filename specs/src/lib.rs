//! Explicit-state models of holdfast's MVCC, SSI and storage-recovery protocols, checked with `stateright`.
//!
//! TLA+ is not available here, so the specifications are Rust models. Where the engine has a pure piece of the
//! protocol, the model calls it rather than a copy: [`Ssi`] and [`Mvcc`] hold the shipped
//! [`engine::ssi::ConflictTracker`] in their state; [`Storage`] renders log segments with
//! [`engine::wal::encode_record`] and recovers them with [`engine::wal::decode_segment`], and writes and reads
//! manifests with [`engine::manifest::encode_manifest`] / [`engine::manifest::decode_manifest`], and decides
//! with the engine's own pure recovery rules ([`engine::recovery_rules`]). Each committed log records the hash of
//! the sources its model mirrors ([`sources`]).
//!
//! See `specs/README.md` for the map from models to engine code and ADRs, and for the commands.

pub mod check;
pub mod db;
pub mod mvcc;
pub mod sources;
pub mod ssi;
pub mod storage;

pub use check::{PropertyReport, Report, Spec, check, check_with};
pub use mvcc::{Mvcc, MvccBound};
pub use ssi::{Ssi, SsiBound};
pub use storage::{Storage, StorageBound};
