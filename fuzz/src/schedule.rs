//! `schedule`: bytes → `arbitrary` → a well-formed engine schedule (the engine target's `FuzzSchedule`, feature
//! `arbitrary`) → a full run under the framework. Any invariant violation panics, which aborts the fuzzer with the
//! report; the crash input becomes a seed file with
//! `cargo run -p simulator -- --replay <schedule.json> --shrink --save NAME --adr ADR-00NN`.

use arbitrary::{Arbitrary, Unstructured};
use engine_target::EngineTarget;
use engine_target::fuzzing::FuzzSchedule;
use holdfast::RunOptions;

/// Run the schedule the bytes describe; panic with the failure report if an invariant breaks.
pub fn check(data: &[u8]) {
    let Ok(FuzzSchedule(schedule)) = FuzzSchedule::arbitrary(&mut Unstructured::new(data)) else { return };
    let outcome = holdfast::run_schedule::<EngineTarget>(&schedule, &RunOptions::default());
    if let Some(failure) = outcome.failure {
        panic!("invariant violated:\n{}\nschedule:\n{}", failure.report(), schedule.to_json());
    }
}
