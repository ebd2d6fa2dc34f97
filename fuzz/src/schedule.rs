//! `schedule`: bytes → `arbitrary` → a well-formed simulator `Schedule` (the simulator's own `Arbitrary`, feature
//! `arbitrary`) → a full simulator run. Any invariant violation panics, which aborts the fuzzer with the report;
//! the crash input becomes a seed file with `cargo run -p simulator -- --replay <schedule.json> --shrink --save`.

use arbitrary::{Arbitrary, Unstructured};
use simulator::{RunOptions, Schedule, engine_target::Step};

/// Run the schedule the bytes describe; panic with the failure report if an invariant breaks.
pub fn check(data: &[u8]) {
    let Ok(schedule) = Schedule::<Step>::arbitrary(&mut Unstructured::new(data)) else { return };
    let outcome = simulator::run_schedule(&schedule, &RunOptions::default());
    if let Some(failure) = outcome.failure {
        panic!("invariant violated:\n{}\nschedule:\n{}", failure.report(), schedule.to_json());
    }
}
