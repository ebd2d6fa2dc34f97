//! Cost contracts (ADR-0182) and the device model (ADR-0181) on the toy store: a cost bug is a failure with its
//! own signature that shrinks like any other, and cost figures are a pure function of the seed.

use holdfast::env::Device;
use holdfast::{FailureKind, RunOptions};

use crate::toy::{Toy, ToyConfig, toy_world};

fn run<const WASTEFUL: bool>(seed: u64, device: Device) -> holdfast::OutcomeOf<Toy<true, WASTEFUL>> {
    let options = RunOptions { device: Some(device), ..RunOptions::with_steps(300) };
    holdfast::run_configured::<Toy<true, WASTEFUL>>(seed, toy_world(), ToyConfig { keys: 4 }, &options)
}

/// A put that syncs twice breaks `cost.syncs_per_put` (kind `cost`), and the shrinker keeps that signature down to
/// the one put that does it.
#[test]
fn a_cost_bug_fails_with_its_own_signature_and_shrinks() {
    let failing = run::<true>(1, Device::Nvme);
    let failure = failing.failure.clone().expect("every fourth value is synced twice");
    assert_eq!((failure.invariant.as_str(), failure.kind), ("cost.syncs_per_put", FailureKind::Cost));
    assert!(run::<false>(1, Device::Nvme).passed(), "the same seed without the waste passes");
    let schedule = holdfast::parse_schedule::<Toy<true, true>>(&failing.schedule.to_json()).expect("round trip");
    let shrunk = holdfast::shrink::shrink_schedule::<Toy<true, true>>(&schedule, &RunOptions::default(), 2_000)
        .expect("shrinks");
    assert_eq!(shrunk.signature, failure.signature());
    assert!(shrunk.steps_after <= 2, "shrunk to {} steps: {:?}", shrunk.steps_after, shrunk.schedule.steps);
}

/// The same seed gives the same cost figures twice; another device changes the priced latencies and nothing
/// else: not the verdict, not the digest, not one call or byte.
#[test]
fn same_seed_same_cost_and_device_changes_only_latency() {
    for seed in 0..5 {
        let first = run::<false>(seed, Device::Nvme);
        let again = run::<false>(seed, Device::Nvme);
        let cost = first.cost.clone().expect("a run's cost");
        assert!(cost.total.file_syncs > 0 && cost.total.bytes_written > 0, "seed {seed}: {:?}", cost.total);
        assert_eq!(again.cost.as_ref(), Some(&cost), "seed {seed}: the same seed, other cost figures");
        for device in [Device::Hdd, Device::CloudBlock] {
            let other = run::<false>(seed, device);
            let other_cost = other.cost.clone().expect("a run's cost");
            assert_eq!((other.passed(), other.digest), (first.passed(), first.digest), "seed {seed} on {device}");
            let calls = |total: holdfast::env::CostCounters| holdfast::env::CostCounters { io_nanos: 0, ..total };
            assert_eq!(calls(other_cost.total), calls(cost.total), "seed {seed} on {device}: other calls");
            assert!(other_cost.total.io_nanos > cost.total.io_nanos, "seed {seed}: {device} priced no slower");
            assert_eq!(other_cost.device, device);
        }
    }
}
