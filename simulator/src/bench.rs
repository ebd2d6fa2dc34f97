//! The engine's real-IO comparison for `--bench`: the first client operations of the standard swarm's first
//! schedule, replayed on `RealEnv` in a scratch directory with the same engine options (every write fsynced).
//! Timing uses `RealEnv::now` only.

use engine::Db;
use engine_target::{EngineTarget, Op};
use holdfast::cli::RealIo;
use holdfast::env::{Env, RealEnv};
use holdfast::kit::{key_bytes, value_bytes};
use holdfast::{ScheduleOf, Step};

/// At most this many client operations are replayed on real IO (each put is an fsync).
pub const REAL_OPS_MAX: u64 = 3_000;

/// Replay up to [`REAL_OPS_MAX`] client operations of `schedule` on real IO; (operations, nanoseconds). The
/// scratch directory ([`RealEnv::temp_dir`]) is removed with everything in it afterwards, on error too.
pub fn replay_on_real_io(schedule: &ScheduleOf<EngineTarget>) -> Result<RealIo, String> {
    let env = RealEnv::new();
    let scratch = env.temp_dir("bench").map_err(|error| format!("create a scratch directory: {error}"))?;
    let dir = scratch.path().join("db");
    env.create_dir_all(&dir).map_err(|error| format!("create {}: {error}", dir.display()))?;
    let db = Db::open(env.clone(), &dir, schedule.config.options()).map_err(|error| format!("open: {error}"))?;
    let start = env.now();
    let mut ops = 0u64;
    for op in schedule.steps.iter().filter_map(Step::op).take(usize::try_from(REAL_OPS_MAX).unwrap_or(usize::MAX)) {
        let result = match op {
            Op::Put { key, value } => db.put(&key_bytes(*key), &value_bytes(*value)),
            Op::Delete { key } => db.delete(&key_bytes(*key)),
            Op::Get { key } => db.get(&key_bytes(*key)).map(drop),
            Op::Scan { start, end } => {
                let (start, end) = (key_bytes(*start), key_bytes(*end));
                db.scan(start.as_slice()..end.as_slice()).and_then(|mut rows| rows.try_for_each(|row| row.map(drop)))
            }
            Op::Flush => db.flush(),
            Op::Compact => db.compact(),
            // The edge-of-the-API operations (ADR-0071 to ADR-0076) are checks, not load: not timed.
            Op::OddKey { .. } | Op::BigTxn { .. } | Op::HoldReader | Op::ReleaseReader | Op::CloseRacing { .. } => {
                continue;
            }
        };
        result.map_err(|error| format!("real replay op {ops}: {error}"))?;
        ops += 1;
    }
    let nanos = u64::try_from((env.now() - start).as_nanos()).unwrap_or(u64::MAX).max(1);
    db.close().map_err(|error| format!("close: {error}"))?;
    drop(db);
    drop(scratch);
    assert!(ops <= REAL_OPS_MAX, "replayed more than REAL_OPS_MAX");
    Ok((ops, nanos))
}
