//! `--bench` for the engine target: a fixed schedule (fixed seed and configuration, faults off, every invariant
//! on) timed on `SimEnv`, and the same client operations replayed on `RealEnv` for comparison. Timing uses
//! `RealEnv::now` only.

use std::path::{Path, PathBuf};

use engine::Db;
use engine_target::{EngineConfig, EngineTarget, Op, OpWeights, TuningConfig};
use holdfast::config::{ExplicitFaults, WorldWeights};
use holdfast::env::{Env, FaultConfig, RealEnv};
use holdfast::kit::{KeyDistribution, Workload, key_bytes, value_bytes};
use holdfast::{FaultProfile, OutcomeOf, RunOptions, Step, WorldConfig, run_configured};

/// The bench's fixed seed.
pub const BENCH_SEED: u64 = 0xBE4C_0001;
/// The bench's schedule length, in steps (about a second in `--release`).
pub const BENCH_STEPS: u64 = 250_000;
/// At most this many client operations are replayed on real IO (each put is an fsync).
pub const REAL_OPS_MAX: u64 = 3_000;

/// The bench's fixed world: faults off, a few crashes, background work stepped often.
fn bench_world() -> WorldConfig {
    WorldConfig {
        profile: FaultProfile::Assumed,
        faults: FaultConfig::none(),
        buggify: false,
        weights: WorldWeights {
            op: 8500,
            run_task: 1500,
            reopen: 0,
            fault: 0,
            crash: 2,
            crash_at_io: 0,
            crash_during_recovery: 0,
        },
        explicit: ExplicitFaults::None,
        crash_at_io_k_max: 1,
        recovery_crash_k_max: 1,
    }
}

/// The bench's fixed engine configuration: small values, mostly puts and gets.
fn bench_config() -> EngineConfig {
    EngineConfig {
        workload: Workload {
            key_count: 256,
            distribution: KeyDistribution::Uniform,
            value_size_bytes_max: 32,
            large_value_ppm: 0,
            large_value_size_bytes_max: 0,
            scan_keys_max: 8,
        },
        weights: OpWeights { put: 3000, delete: 400, get: 5000, scan: 100, flush: 0, compact: 0 },
        tuning: TuningConfig {
            flush_threshold_bytes: 16 * 1024,
            block_size_bytes: 4096,
            bloom_bits_per_key: 10,
            level_size_ratio: 10,
            l0_compaction_trigger: 4,
            block_cache_bytes: 256 * 1024,
        },
    }
}

fn per_second(count: u64, nanos: u64) -> u64 {
    let per = u128::from(count) * 1_000_000_000 / u128::from(nanos.max(1));
    u64::try_from(per).unwrap_or(u64::MAX)
}

/// Replay up to [`REAL_OPS_MAX`] client operations of `steps` on `RealEnv` in `dir/db`; returns (ops, nanos).
/// Removes the database's files afterwards.
fn replay_on_real_io(steps: &[Step<Op>], dir: &Path) -> Result<(u64, u64), String> {
    let env = RealEnv::new();
    let db_dir: PathBuf = dir.join("db");
    env.create_dir_all(&db_dir).map_err(|error| format!("create {}: {error}", db_dir.display()))?;
    let db =
        Db::open(env.clone(), &db_dir, bench_config().options()).map_err(|error| format!("open real db: {error}"))?;
    let start = env.now();
    let mut ops = 0u64;
    for op in steps.iter().filter_map(Step::op) {
        if ops >= REAL_OPS_MAX {
            break;
        }
        let result = match op {
            Op::Put { key, value } => db.put(&key_bytes(*key), &value_bytes(*value)),
            Op::Delete { key } => db.delete(&key_bytes(*key)),
            Op::Get { key } => db.get(&key_bytes(*key)).map(drop),
            Op::Scan { start, end } => db.scan(&key_bytes(*start), &key_bytes(*end)).map(drop),
            Op::Flush => db.flush(),
            Op::Compact => db.compact(),
        };
        result.map_err(|error| format!("real replay op {ops}: {error}"))?;
        ops += 1;
    }
    let nanos = u64::try_from((env.now() - start).as_nanos()).unwrap_or(u64::MAX).max(1);
    db.close().map_err(|error| format!("close real db: {error}"))?;
    drop(db);
    for file in env.list_dir(&db_dir).map_err(|error| format!("list {}: {error}", db_dir.display()))? {
        env.remove_file(&file).map_err(|error| format!("remove {}: {error}", file.display()))?;
    }
    assert!(ops <= REAL_OPS_MAX, "replayed more than REAL_OPS_MAX");
    Ok((ops, nanos))
}

/// Time the fixed schedule on `SimEnv` and its client operations on real IO; print both figures.
pub fn bench_mode() -> u8 {
    let env = RealEnv::new();
    let dir = PathBuf::from(format!("/tmp/holdfast-bench-{}", std::process::id()));
    if let Err(error) = env.create_dir_all(&dir) {
        eprintln!("error: cannot create {}: {error}", dir.display());
        return 2;
    }
    let start = env.now();
    let options = RunOptions::with_steps(BENCH_STEPS);
    let outcome: OutcomeOf<EngineTarget> =
        run_configured::<EngineTarget>(BENCH_SEED, bench_world(), bench_config(), &options);
    let sim_nanos = u64::try_from((env.now() - start).as_nanos()).unwrap_or(u64::MAX).max(1);
    let (real_ops, real_nanos) = match replay_on_real_io(&outcome.schedule.steps, &dir) {
        Ok(measured) => measured,
        Err(error) => {
            eprintln!("error: bench: {error}");
            return 1;
        }
    };
    let steps_per_second = per_second(outcome.work_steps, sim_nanos);
    let real_ops_per_second = per_second(real_ops, real_nanos);
    println!("steps_per_second: {steps_per_second}");
    println!("speedup_vs_real_io: {:.1}", steps_per_second as f64 / real_ops_per_second.max(1) as f64);
    println!(
        "(sim: {} steps in {} ms; real IO: {real_ops} ops in {} ms, {real_ops_per_second} ops/s)",
        outcome.work_steps,
        sim_nanos / 1_000_000,
        real_nanos / 1_000_000
    );
    if let Some(failure) = &outcome.failure {
        print!("{}", failure.report());
    }
    println!("digest: {}", outcome.digest_hex());
    u8::from(!outcome.passed())
}
