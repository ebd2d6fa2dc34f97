//! Probes (`env::probe!`): counted per simulated world, a no-op on `RealEnv`, invisible to the run itself.

use std::collections::BTreeMap;
use std::path::Path;

use env::{Env, File, OpenOptions, RealEnv, SimEnv, probe_name_is_valid};

/// A stand-in for system code, generic over the environment as the engine is: reaches `rare` `times` times.
fn reach<E: Env>(env: &E, times: u64) {
    for _ in 0..times {
        env::probe!(env, "test.rare_path");
    }
    env::probe!(env, "test.common_path");
}

/// The owned-handle form of the macro, on a concrete `SimEnv`, where the `Env` trait is not imported.
mod without_the_trait {
    pub fn reach_owned(env: env::SimEnv) {
        env::probe!(env, "test.owned_handle");
    }
}

#[test]
fn sim_env_counts_probes_per_world_and_real_env_ignores_them() {
    let (first, second) = (SimEnv::new(1), SimEnv::new(1));
    reach(&first, 3);
    reach(&second, 1);
    without_the_trait::reach_owned(first.clone());
    let expected: BTreeMap<&str, u64> =
        [("test.common_path", 1), ("test.owned_handle", 1), ("test.rare_path", 3)].into_iter().collect();
    assert_eq!(first.probe_counts(), expected, "every clone of a handle counts into the one world");
    assert_eq!(second.probe_counts(), [("test.common_path", 1), ("test.rare_path", 1)].into_iter().collect());
    assert!(SimEnv::new(1).probe_counts().is_empty(), "a fresh world has hit nothing");
    // RealEnv: nothing to count, nothing to fail.
    reach(&RealEnv::new(), 1000);
}

#[test]
fn probes_change_nothing_a_run_can_observe() {
    let run = |probes: u64| {
        let env = SimEnv::new(9);
        env.create_dir_all(Path::new("/d")).expect("dir");
        let file = env.open(Path::new("/d/f"), OpenOptions::create_new()).expect("file");
        reach(&env, probes);
        file.write_all_at(0, &env.random_u64().to_le_bytes()).expect("write");
        reach(&env, probes);
        (env.random_u64(), env.now(), env.io_count(), env.disk_digest())
    };
    assert_eq!(run(0), run(50), "a probe drew randomness, moved the clock or did IO");
}

#[test]
fn worlds_on_two_threads_count_independently() {
    let counts = RealEnv::map_parallel(2, vec![(7u64, 100u64), (8, 5)], |(seed, times)| {
        let env = SimEnv::new(seed);
        reach(&env, times);
        env.probe_counts()
    });
    assert_eq!(counts[0].get("test.rare_path"), Some(&100));
    assert_eq!(counts[1].get("test.rare_path"), Some(&5));
    assert_eq!(counts[0].get("test.common_path"), Some(&1));
    assert_eq!(counts[1].get("test.common_path"), Some(&1));
}

#[test]
fn probe_names_are_area_dot_what_happened() {
    for good in ["wal.torn_tail_truncated", "ssi.conflict_ww", "a.b", "l0.trigger_2"] {
        assert!(probe_name_is_valid(good), "{good} refused");
    }
    for bad in ["", "wal", ".torn", "wal.", "wal.torn.tail", "Wal.torn", "wal.torn-tail", "wal torn", "wal..x"] {
        assert!(!probe_name_is_valid(bad), "{bad:?} accepted");
    }
}
