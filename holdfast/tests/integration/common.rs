//! What the toy systems share.

use holdfast::config::{ExplicitFaults, WorldWeights};
use holdfast::env::FaultConfig;
use holdfast::{FaultProfile, SystemError, WorldConfig};

/// An IO error from the env, as the system under test reports it.
pub fn io(error: &holdfast::env::Error) -> SystemError {
    SystemError::new("io", error)
}

/// A world of the target's operations only, with `faults`: no crash, reopen, task or explicit-fault steps.
pub fn operations_only_world(faults: FaultConfig) -> WorldConfig {
    WorldConfig {
        profile: FaultProfile::Assumed,
        faults,
        buggify: false,
        weights: WorldWeights {
            op: 1,
            run_task: 0,
            reopen: 0,
            fault: 0,
            crash: 0,
            crash_at_io: 0,
            crash_during_recovery: 0,
            tamper: 0,
        },
        explicit: ExplicitFaults::None,
        crash_at_io_k_max: 1,
        recovery_crash_k_max: 1,
        disk: env::DiskModel::default(),
        final_crash: None,
    }
}
