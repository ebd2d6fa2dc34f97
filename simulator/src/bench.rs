//! `--bench`: a fixed schedule (fixed seed and configuration, faults off, every invariant on) timed on `SimEnv`,
//! and the same client operations replayed on `RealEnv` for comparison. Timing uses `RealEnv::now` only.

use std::path::{Path, PathBuf};

use engine::Db;
use env::{Env, FaultConfig, RealEnv};

use crate::config::{KeyDistribution, OpWeights, SwarmConfig, TuningConfig, WorkloadConfig};
use crate::engine_target::{Action, EngineTarget, Step, key_bytes, value_bytes};
use crate::runner::{Outcome, RunOptions, run_target};

/// The bench's fixed seed.
pub const BENCH_SEED: u64 = 0xBE4C_0001;
/// The bench's schedule length, in steps (about a second in `--release`).
pub const BENCH_STEPS: u64 = 250_000;
/// At most this many client operations are replayed on real IO (each put is an fsync).
pub const REAL_OPS_MAX: u64 = 3_000;

/// The bench's fixed configuration: faults off, small values, a few crashes, background work stepped often.
pub fn bench_config() -> SwarmConfig {
    let config = SwarmConfig {
        workload: WorkloadConfig {
            key_count: 256,
            distribution: KeyDistribution::Uniform,
            value_size_bytes_max: 32,
            large_value_ppm: 0,
            large_value_size_bytes_max: 0,
            scan_keys_max: 8,
        },
        weights: OpWeights {
            put: 3000,
            delete: 400,
            get: 5000,
            scan: 100,
            flush: 0,
            compact: 0,
            run_task: 1500,
            reopen: 0,
            fault: 0,
            crash: 2,
            crash_at_io: 0,
            crash_during_recovery: 0,
        },
        tuning: TuningConfig {
            flush_threshold_bytes: 16 * 1024,
            block_size_bytes: 4096,
            bloom_bits_per_key: 10,
            level_size_ratio: 10,
            l0_compaction_trigger: 4,
            block_cache_bytes: 256 * 1024,
        },
        faults: FaultConfig::none(),
        buggify: false,
        crash_at_io_k_max: 1,
        recovery_crash_k_max: 1,
        fault_profile: None,
    };
    config.validate().expect("bench config is valid");
    config
}

/// What the bench measured.
#[derive(Clone, Debug)]
pub struct BenchReport {
    pub sim_work_steps: u64,
    pub sim_nanos: u64,
    pub steps_per_second: u64,
    pub real_ops: u64,
    pub real_nanos: u64,
    pub real_ops_per_second: u64,
    /// Real wall time per operation over simulated wall time per step.
    pub speedup_vs_real_io: f64,
    pub outcome_digest: u64,
    pub passed: bool,
}

fn per_second(count: u64, nanos: u64) -> u64 {
    let per = u128::from(count) * 1_000_000_000 / u128::from(nanos.max(1));
    u64::try_from(per).unwrap_or(u64::MAX)
}

/// Run the bench schedule on `SimEnv`, then its client operations on `RealEnv` under `real_dir`.
pub fn run_bench(steps: u64, real_dir: &Path) -> Result<(BenchReport, Outcome<Step>), String> {
    assert!(steps > 0, "a bench needs steps");
    let clock = RealEnv::new();
    let options = RunOptions { steps, config: Some(bench_config()), ..RunOptions::default() };
    let start = clock.now();
    let outcome = run_target::<EngineTarget>(BENCH_SEED, &options);
    let sim_nanos = u64::try_from((clock.now() - start).as_nanos()).unwrap_or(u64::MAX).max(1);
    let (real_ops, real_nanos) = replay_on_real_io(&outcome.schedule.steps, real_dir)?;
    let steps_per_second = per_second(outcome.work_steps, sim_nanos);
    let real_ops_per_second = per_second(real_ops, real_nanos);
    let speedup = steps_per_second as f64 / (real_ops_per_second.max(1)) as f64;
    assert!(outcome.work_steps <= outcome.steps_run, "more work steps than steps");
    let report = BenchReport {
        sim_work_steps: outcome.work_steps,
        sim_nanos,
        steps_per_second,
        real_ops,
        real_nanos,
        real_ops_per_second,
        speedup_vs_real_io: speedup,
        outcome_digest: outcome.digest,
        passed: outcome.passed(),
    };
    Ok((report, outcome))
}

/// Replay up to [`REAL_OPS_MAX`] client operations of `steps` on `RealEnv` in `dir/db`; returns (ops, nanos).
/// Removes the database's files afterwards.
fn replay_on_real_io(steps: &[Step], dir: &Path) -> Result<(u64, u64), String> {
    let env = RealEnv::new();
    let db_dir: PathBuf = dir.join("db");
    env.create_dir_all(&db_dir).map_err(|error| format!("create {}: {error}", db_dir.display()))?;
    let db = Db::open(env.clone(), &db_dir, EngineTarget::options_for(&bench_config()))
        .map_err(|error| format!("open real db: {error}"))?;
    let start = env.now();
    let mut ops = 0u64;
    for step in steps {
        if ops >= REAL_OPS_MAX {
            break;
        }
        let result = match &step.action {
            Action::Put { key, value } => db.put(&key_bytes(*key), &value_bytes(*value)),
            Action::Delete { key } => db.delete(&key_bytes(*key)),
            Action::Get { key } => db.get(&key_bytes(*key)).map(drop),
            Action::Scan { start, end } => db.scan(&key_bytes(*start), &key_bytes(*end)).map(drop),
            Action::Flush => db.flush(),
            Action::Compact => db.compact(),
            _ => continue,
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
