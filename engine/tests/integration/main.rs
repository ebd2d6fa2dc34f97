//! The engine's integration tests: one test crate (see DEVELOPERS.md).

mod api_types;
mod conflict_cause;
mod corruption;
mod crash;
mod disk_full;
mod gc_snapshots;
mod group_write;
mod isolation;
mod layers;
mod lock_holds;
mod model;
mod nosync_close;
mod persistence;
mod probes;
mod robust;
mod sources;
mod txn_crash;
mod watermark;
