//! The clock, sleeps and randomness of a bound thread are the world's: the same seed gives the same values, another
//! seed other values, and `HashMap` seeds come from the world.

#![expect(unsafe_code, reason = "getrandom and syscall(SYS_getrandom) are called as C code calls them (ADR-0162)")]

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use env::{Env, SimEnv};

/// What one world's thread saw of time and randomness.
#[derive(Debug, PartialEq, Eq)]
struct Sample {
    realtime: Duration,
    slept: Duration,
    random: [u8; 32],
    syscall_random: [u8; 16],
    hash: u64,
    parallelism: usize,
}

/// Run on a fresh OS thread, so that `std`'s per-thread `RandomState` keys are drawn inside the world.
fn sample(seed: u64) -> Sample {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let world = SimEnv::new(seed);
                world.advance_clock(Duration::from_millis(seed));
                let entered = interpose::enter(&world);
                #[expect(clippy::disallowed_methods, reason = "RandomState's keys come from the world")]
                let hash = RandomState::new().hash_one(42u64);
                let start = Instant::now();
                std::thread::sleep(Duration::from_secs(5));
                let slept = start.elapsed();
                let realtime = SystemTime::now().duration_since(UNIX_EPOCH).expect("after the epoch");
                let mut random = [0u8; 32];
                // SAFETY: a valid 32-byte buffer.
                let filled = unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) };
                assert_eq!(filled, 32);
                let mut syscall_random = [0u8; 16];
                // SAFETY: a valid 16-byte buffer.
                let filled = unsafe { libc::syscall(libc::SYS_getrandom, syscall_random.as_mut_ptr(), 16usize, 0) };
                assert_eq!(filled, 16);
                let parallelism = std::thread::available_parallelism().expect("parallelism").get();
                assert_eq!(
                    world.now(),
                    Duration::from_millis(seed) + Duration::from_secs(5),
                    "the sleep was the world's"
                );
                let calls = entered.stats().calls;
                for kind in [
                    "getrandom",
                    "clock_nanosleep",
                    "clock_gettime",
                    "sched_getaffinity",
                    "syscall(getrandom)",
                    "machine_shape_file",
                ] {
                    assert!(calls.contains_key(kind), "{kind} answered by the world: {calls:?}");
                }
                Sample { realtime, slept, random, syscall_random, hash, parallelism }
            })
            .join()
            .expect("the world thread")
    })
}

#[test]
fn clock_sleep_and_randomness_come_from_the_world() {
    let first = sample(81);
    assert_eq!(first, sample(81), "the same seed gives the same values");
    let other = sample(82);
    assert_ne!(first.random, other.random, "another seed, other bytes");
    assert_ne!(first.syscall_random, other.syscall_random);
    assert_ne!(first.hash, other.hash, "HashMap keys are the world's");
    assert_eq!(first.slept, Duration::from_secs(5), "five simulated seconds, exactly");
    assert_eq!(
        first.realtime,
        Duration::from_secs(interpose::REALTIME_BASE_SECS) + Duration::from_millis(81) + Duration::from_secs(5)
    );
    assert_eq!(first.parallelism, interpose::WORLD_CPUS, "the world's processors, not the host's");
}
