//! Micro-benchmark of the simulated disk against the real one: the same 100,000 appends of 100 bytes, with a sync
//! every 100 appends, on `SimEnv` and on `RealEnv` (in a fresh directory under the OS temp dir, removed after).
//! Timed with `RealEnv::now`, the env's own monotonic clock.
//!
//! Run: `cargo run --release -p env --example io_bench`

use std::path::{Path, PathBuf};
use std::time::Duration;

use env::{Env, File, OpenOptions, RealEnv, SimEnv};

const WRITES: u64 = 100_000;
const WRITE_BYTES: usize = 100;
const WRITES_PER_SYNC: u64 = 100;

/// The workload: appends with a periodic sync, then a check that every byte landed.
fn run<E: Env>(env: &E, dir: &Path) -> env::Result<()> {
    env.create_dir_all(dir)?;
    let path = dir.join("bench.log");
    let file = env.open(&path, OpenOptions::create_truncate())?;
    env.sync_dir(dir)?;
    let mut record = [0u8; WRITE_BYTES];
    for index in 0..WRITES {
        record[..8].copy_from_slice(&index.to_le_bytes());
        file.write_all_at(index * WRITE_BYTES as u64, &record)?;
        if (index + 1) % WRITES_PER_SYNC == 0 {
            file.sync()?;
        }
    }
    file.sync()?;
    let expected = WRITES * WRITE_BYTES as u64;
    assert_eq!(file.len()?, expected, "the file has every append");
    let mut last = [0u8; 8];
    file.read_exact_at(expected - WRITE_BYTES as u64, &mut last)?;
    assert_eq!(u64::from_le_bytes(last), WRITES - 1, "the last append is in place");
    Ok(())
}

fn timed<E: Env>(clock: &RealEnv, env: &E, dir: &Path) -> Duration {
    let start = clock.now();
    run(env, dir).expect("benchmark workload failed");
    clock.now() - start
}

/// A fresh directory under the OS temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    #[expect(clippy::disallowed_methods, reason = "the benchmark needs a scratch directory in the OS temp dir")]
    fn new(clock: &RealEnv) -> Self {
        Self(std::env::temp_dir().join(format!("holdfast-io-bench-{}-{:016x}", std::process::id(), clock.random_u64())))
    }
}

impl Drop for TempDir {
    #[expect(clippy::disallowed_methods, reason = "removing the benchmark's scratch directory")]
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_dir_all(&self.0) {
            eprintln!("could not remove {}: {error}", self.0.display());
        }
    }
}

fn main() {
    let clock = RealEnv::new();
    let sim = timed(&clock, &SimEnv::new(1), Path::new("bench"));
    let temp = TempDir::new(&clock);
    let real = timed(&clock, &clock, &temp.0);
    drop(temp);
    let (sim_seconds, real_seconds) = (sim.as_secs_f64(), real.as_secs_f64());
    println!("workload: {WRITES} appends of {WRITE_BYTES} bytes, a sync every {WRITES_PER_SYNC}");
    println!("sim_seconds: {sim_seconds:.4}");
    println!("real_seconds: {real_seconds:.4}");
    println!("ratio_real_over_sim: {:.2}", real_seconds / sim_seconds.max(f64::MIN_POSITIVE));
}
