//! Transactions are `!Sync`: two threads cannot share one by reference.

fn assert_sync<T: Sync>() {}

fn main() {
    assert_sync::<engine::Transaction<env::SimEnv>>();
    assert_sync::<engine::ReadTransaction<env::SimEnv>>();
}
