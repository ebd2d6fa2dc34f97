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

/// A read-write transaction with its snapshot taken at once (`Transaction::take_snapshot`): without it the first
/// read takes it (ADR-0210). For the tests whose interleavings were written for a snapshot taken at `begin`.
fn begun<E: env::Env>(db: &engine::Db<E>) -> engine::Transaction<E> {
    let mut txn = db.begin().unwrap();
    assert_eq!(txn.snapshot(), None, "no snapshot before the first read");
    let snapshot = txn.take_snapshot().unwrap();
    assert_eq!(txn.snapshot(), Some(snapshot));
    txn
}
