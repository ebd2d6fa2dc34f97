//! The API's invariants that the type system holds (ADR-0064): each `tests/compile_fail/*.rs` must fail to
//! compile with the error its `.stderr` records; the positive halves are checked here at compile time.

use engine::{ReadTransaction, ScanIter, Transaction};
use env::SimEnv;

fn assert_send<T: Send>() {}

#[test]
fn misuse_of_transactions_does_not_compile() {
    trybuild::TestCases::new().compile_fail("tests/compile_fail/*.rs");
}

#[test]
fn transactions_and_their_iterators_move_between_threads() {
    // `!Sync` but `Send`: a transaction may be handed to another thread, not shared by two.
    assert_send::<Transaction<SimEnv>>();
    assert_send::<ReadTransaction<SimEnv>>();
    assert_send::<ScanIter<'static>>();
}
