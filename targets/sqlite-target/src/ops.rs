//! The sqlite target's operations: data only (replay never re-runs generation), generated from the model.

#![forbid(unsafe_code)]

use holdfast::env::DeterministicRng;
use holdfast::kit::ValueSpec;
use serde::{Deserialize, Serialize};

use crate::config::SqliteConfig;
use crate::model::{State, Write};

/// `PRAGMA wal_checkpoint(<mode>)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointMode {
    Passive,
    Full,
    Restart,
    Truncate,
}

impl CheckpointMode {
    const ALL: [CheckpointMode; 4] =
        [CheckpointMode::Passive, CheckpointMode::Full, CheckpointMode::Restart, CheckpointMode::Truncate];

    /// The pragma's argument.
    pub fn sql(self) -> &'static str {
        match self {
            CheckpointMode::Passive => "PASSIVE",
            CheckpointMode::Full => "FULL",
            CheckpointMode::Restart => "RESTART",
            CheckpointMode::Truncate => "TRUNCATE",
        }
    }
}

/// One operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Op {
    /// `BEGIN`, the writes, then `COMMIT` (or `ROLLBACK` when `rollback`).
    Transaction { writes: Vec<Write>, rollback: bool },
    /// Point reads, one `SELECT` each, in one implicit read transaction per key.
    Get { keys: Vec<u32> },
    /// `SELECT k, v FROM kv WHERE k >= start AND k < end ORDER BY k`.
    Range { start: u32, end: u32 },
    /// `PRAGMA wal_checkpoint(mode)` (a no-op outside WAL mode).
    Checkpoint { mode: CheckpointMode },
    /// `PRAGMA integrity_check`.
    IntegrityCheck,
}

/// What an operation returned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Observation {
    Committed,
    RolledBack,
    /// Rows a read returned.
    Rows {
        count: u64,
    },
    /// `wal_checkpoint`'s row: busy, frames in the WAL, frames checkpointed.
    Checkpointed {
        busy: bool,
        log_frames: i64,
        checkpointed_frames: i64,
    },
    IntegrityOk,
    /// After a recovery: the rows found and the acknowledged commits that did not survive.
    Recovered {
        rows: u64,
        lost_commits: u64,
    },
    /// After a recovery in a cell that promises nothing: what was found, recorded (not judged).
    Recorded {
        rows: u64,
        finding: String,
    },
}

/// The next operation.
pub fn generate(rng: &mut DeterministicRng, config: &SqliteConfig, model: &State, next_value_id: &mut u64) -> Op {
    let workload = &config.workload;
    match rng.weighted(&config.weights.as_array()) {
        0 => {
            let count = rng.range_inclusive(1, config.writes_max);
            let writes = (0..count)
                .map(|_| {
                    let key = workload.pick_key(rng);
                    if rng.chance_ppm(config.delete_ppm) {
                        return Write::Delete { key };
                    }
                    *next_value_id += 1;
                    let value = ValueSpec { id: *next_value_id, len: workload.pick_value_len_bytes(rng) };
                    if model.contains_key(&key) && rng.chance_ppm(500_000) {
                        Write::Update { key, value }
                    } else {
                        Write::Insert { key, value }
                    }
                })
                .collect();
            Op::Transaction { writes, rollback: rng.chance_ppm(config.rollback_ppm) }
        }
        1 => {
            let count = rng.range_inclusive(1, crate::config::READ_KEYS_MAX);
            Op::Get { keys: (0..count).map(|_| workload.pick_key(rng)).collect() }
        }
        2 => {
            let start = workload.pick_key(rng);
            let width = u32::try_from(rng.range_inclusive(1, u64::from(workload.scan_keys_max))).expect("fits");
            Op::Range { start, end: start.saturating_add(width) }
        }
        3 => Op::Checkpoint { mode: CheckpointMode::ALL[rng.index(4)] },
        _ => Op::IntegrityCheck,
    }
}

/// Simpler variants of one operation: a transaction without one of its writes, or committed instead of rolled
/// back; fewer keys read; a narrower range; a passive checkpoint.
pub fn simplify_op(op: &Op) -> Vec<Op> {
    match op {
        Op::Transaction { writes, rollback } => {
            let mut out: Vec<Op> = (0..writes.len())
                .filter(|_| writes.len() > 1)
                .map(|index| {
                    let mut fewer = writes.clone();
                    fewer.remove(index);
                    Op::Transaction { writes: fewer, rollback: *rollback }
                })
                .collect();
            out.extend(writes.iter().enumerate().filter(|(_, write)| matches!(write, Write::Update { .. })).map(
                |(index, _)| {
                    let mut plain = writes.clone();
                    if let Write::Update { key, value } = plain[index] {
                        plain[index] = Write::Insert { key, value };
                    }
                    Op::Transaction { writes: plain, rollback: *rollback }
                },
            ));
            out
        }
        Op::Get { keys } if keys.len() > 1 => vec![Op::Get { keys: keys[..1].to_vec() }],
        Op::Range { start, end } if end.saturating_sub(*start) > 1 => vec![Op::Range { start: *start, end: start + 1 }],
        Op::Checkpoint { mode } if *mode != CheckpointMode::Passive => {
            vec![Op::Checkpoint { mode: CheckpointMode::Passive }]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_round_trip_and_use_no_world_step_name() {
        let value = ValueSpec { id: 3, len: 5 };
        let writes = vec![Write::Insert { key: 1, value }, Write::Update { key: 1, value }, Write::Delete { key: 2 }];
        let ops = vec![
            Op::Transaction { writes, rollback: false },
            Op::Get { keys: vec![1, 2] },
            Op::Range { start: 0, end: 4 },
            Op::Checkpoint { mode: CheckpointMode::Truncate },
            Op::IntegrityCheck,
        ];
        let json = holdfast::step::check_ops(&ops).expect("ops round trip");
        assert!(json.contains(r#"{"kind":"delete","key":2}"#), "{json}");
        assert!(json.contains(r#""mode":"truncate""#), "{json}");
    }

    #[test]
    fn generation_is_pure_and_every_kind_comes() {
        let config = SqliteConfig::from_seed(3);
        let draw = || {
            let mut rng = DeterministicRng::stream(3, "ops");
            let mut next = 0;
            (0..400).map(|_| generate(&mut rng, &config, &State::new(), &mut next)).collect::<Vec<Op>>()
        };
        let ops = draw();
        assert_eq!(ops, draw());
        assert!(ops.iter().any(|op| matches!(op, Op::Transaction { .. })));
        assert!(ops.iter().any(|op| !simplify_op(op).is_empty()), "nothing simplifies");
        assert!(ops.iter().all(|op| !simplify_op(op).contains(op)), "a simplification changes nothing");
    }
}
