//! Shrinking for the redb target (ADR-0030): ddmin and single-step removal need no knowledge of the steps; a
//! write transaction also shrinks operation by operation, a read key by key; the configuration simplifies as the
//! engine target's does (faults off one kind at a time, crash tearing off).

use super::step::{Step, WriteOp};
use crate::config::SwarmConfig;
use crate::engine_target::simplify::EngineSimplify;

/// The redb target's simplifications.
#[derive(Debug, Default)]
pub struct RedbSimplify;

/// `items` without element `index`, for every index (an empty list is not offered).
fn each_removed<T: Clone>(items: &[T]) -> Vec<Vec<T>> {
    if items.len() <= 1 {
        return Vec::new();
    }
    (0..items.len())
        .map(|index| {
            let mut fewer = items.to_vec();
            fewer.remove(index);
            debug_assert_eq!(fewer.len() + 1, items.len());
            fewer
        })
        .collect()
}

impl shrinker::Simplify for RedbSimplify {
    type Step = Step;
    type Config = SwarmConfig;

    fn simplify_step(&self, step: &Step) -> Vec<Step> {
        match step {
            Step::Write { ops, commit } => {
                each_removed(ops).into_iter().map(|ops: Vec<WriteOp>| Step::Write { ops, commit: *commit }).collect()
            }
            Step::Read { keys } => each_removed(keys).into_iter().map(|keys| Step::Read { keys }).collect(),
            Step::Range { start, end } if end - start > 1 => vec![Step::Range { start: *start, end: start + 1 }],
            Step::CrashDuringRecovery { .. } => vec![Step::Crash],
            _ => Vec::new(),
        }
    }

    fn simplify_config(&self, config: &SwarmConfig) -> Vec<SwarmConfig> {
        shrinker::Simplify::simplify_config(&EngineSimplify, config)
    }
}

#[cfg(test)]
mod tests {
    use shrinker::Simplify;

    use super::*;
    use crate::engine_target::ValueSpec;

    #[test]
    fn write_transactions_shrink_one_operation_at_a_time() {
        let value = ValueSpec { id: 1, len: 2 };
        let step = Step::Write {
            ops: vec![WriteOp::Insert { key: 1, value }, WriteOp::Remove { key: 2 }, WriteOp::Remove { key: 3 }],
            commit: true,
        };
        let simpler = RedbSimplify.simplify_step(&step);
        assert_eq!(simpler.len(), 3);
        assert!(
            simpler.iter().all(|candidate| matches!(candidate, Step::Write { ops, commit: true } if ops.len() == 2))
        );
        let single = Step::Write { ops: vec![WriteOp::Remove { key: 3 }], commit: false };
        assert!(RedbSimplify.simplify_step(&single).is_empty(), "a one-operation transaction is already simplest");
    }
}
