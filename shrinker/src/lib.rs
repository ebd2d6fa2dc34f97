//! The shrinker (ADR-0030): "you do not debug a thousand-operation trace, you debug the twelve operations that
//! matter."
//!
//! Given a failing candidate (steps + configuration) and a predicate that reruns a candidate and says whether it
//! still fails **with the same signature**, [`shrink`] returns a smaller candidate that does. Passes, repeated to
//! a fixpoint:
//!
//! 1. delta debugging (ddmin, Zeller & Hildebrandt) over the steps, removing chunks with their dependents;
//! 2. whole-schedule rewrites the target proposes (remove a whole client or transaction, fewer distinct keys);
//! 3. configuration simplifications (a fault probability lowered to zero);
//! 4. per-step simplifications (shorter values, smaller keys, a crash armed earlier);
//! 5. single-step removal of every step, last to first.
//!
//! The loop ends when a whole round changes nothing; the last round then tried removing every single step and
//! none kept the failure, so the result is **1-minimal under single-step removal**. Work is bounded by a budget
//! counted in reruns, never in time, so the result does not depend on the machine's speed. A budget of at least
//! twice [`FINAL_PASS_RERUNS_MAX`] keeps that many reruns back: when the rounds run out of the rest and the
//! best candidate has at most [`FINAL_PASS_STEPS_MAX`] steps, single-step removal alone runs to its fixpoint,
//! so a schedule of up to 20 steps always ends 1-minimal within the budget (ADR-0116). The shrinker knows
//! nothing of the simulator: it is generic over the step and configuration types.

use std::fmt::Debug;

/// The default budget: enough for a few-thousand-step schedule to reach its fixpoint in seconds.
pub const RERUNS_DEFAULT: u64 = 4_000;
/// The most steps a candidate may have (a larger one is a bug in the caller).
pub const STEPS_MAX: usize = 1 << 20;
/// The final pass (ADR-0116) runs when the best candidate has at most this many steps...
pub const FINAL_PASS_STEPS_MAX: usize = 20;
/// ...and needs at most this many reruns to reach its fixpoint: a sweep tries each of the n steps once, each sweep
/// but the last removes a step, so at most n + (n - 1) + ... + 1 for those and n for the last, n (n + 3) / 2:
/// 230 for n = 20. The budget keeps this many back when it is at least twice as large.
pub const FINAL_PASS_RERUNS_MAX: u64 = (FINAL_PASS_STEPS_MAX * (FINAL_PASS_STEPS_MAX + 3) / 2) as u64;

/// A schedule reduced to what the shrinker edits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate<S, C> {
    pub steps: Vec<S>,
    pub config: C,
}

/// What the target knows about its own steps.
pub trait Simplify {
    type Step: Clone + Debug + PartialEq;
    type Config: Clone + Debug;

    /// Simpler variants of one step, simplest first (empty when it cannot be simpler).
    fn simplify_step(&self, _step: &Self::Step) -> Vec<Self::Step> {
        Vec::new()
    }

    /// Simpler variants of the configuration, simplest first.
    fn simplify_config(&self, _config: &Self::Config) -> Vec<Self::Config> {
        Vec::new()
    }

    /// Whole-schedule rewrites (remove a client, a transaction, a crash point; merge keys), most aggressive first.
    fn rewrite(&self, _steps: &[Self::Step]) -> Vec<Vec<Self::Step>> {
        Vec::new()
    }

    /// Indexes of later steps that need step `index` and must be removed with it (well-formedness). Steps that
    /// are skipped harmlessly on replay when their prerequisite is gone need not be listed.
    fn dependents(&self, _steps: &[Self::Step], _index: usize) -> Vec<usize> {
        Vec::new()
    }
}

/// What a shrink did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report<S, C> {
    pub result: Candidate<S, C>,
    pub steps_before: usize,
    pub steps_after: usize,
    pub reruns: u64,
    /// True when the fixpoint of every pass was reached; false when the budget ran out first.
    pub reached_fixpoint: bool,
    /// True when the result is 1-minimal under single-step removal: the fixpoint was reached, or the final pass
    /// reached its own (ADR-0116).
    pub one_minimal: bool,
}

struct Search<'a, S, C, F> {
    fails: F,
    reruns: u64,
    reruns_max: u64,
    best: Candidate<S, C>,
    _marker: std::marker::PhantomData<&'a ()>,
}

impl<S: Clone, C: Clone, F: FnMut(&Candidate<S, C>) -> bool> Search<'_, S, C, F> {
    fn exhausted(&self) -> bool {
        self.reruns >= self.reruns_max
    }

    /// Try a candidate; adopt it if it still fails. Returns whether it was adopted.
    fn attempt(&mut self, candidate: Candidate<S, C>) -> bool {
        if self.exhausted() {
            return false;
        }
        self.reruns += 1;
        if (self.fails)(&candidate) {
            assert!(candidate.steps.len() <= STEPS_MAX, "candidate grew past STEPS_MAX");
            self.best = candidate;
            return true;
        }
        false
    }

    fn with_steps(&self, steps: Vec<S>) -> Candidate<S, C> {
        Candidate { steps, config: self.best.config.clone() }
    }
}

/// Remove `chunk` (and every dependent of a removed step) from `steps`.
fn without<T: Simplify>(target: &T, steps: &[T::Step], chunk: std::ops::Range<usize>) -> Vec<T::Step> {
    let mut removed = vec![false; steps.len()];
    let mut stack: Vec<usize> = chunk.collect();
    while let Some(index) = stack.pop() {
        if removed[index] {
            continue;
        }
        removed[index] = true;
        for dependent in target.dependents(steps, index) {
            assert!(dependent > index && dependent < steps.len(), "a dependent must come later");
            stack.push(dependent);
        }
    }
    let kept: Vec<T::Step> =
        steps.iter().zip(&removed).filter(|(_, gone)| !**gone).map(|(step, _)| step.clone()).collect();
    debug_assert!(kept.len() < steps.len() || steps.is_empty());
    kept
}

/// Shrink `initial` (which must fail) while `fails` keeps returning true, within `reruns_max` reruns.
pub fn shrink<T: Simplify>(
    target: &T,
    initial: Candidate<T::Step, T::Config>,
    fails: impl FnMut(&Candidate<T::Step, T::Config>) -> bool,
    reruns_max: u64,
) -> Report<T::Step, T::Config> {
    assert!(initial.steps.len() <= STEPS_MAX, "initial candidate over STEPS_MAX steps");
    let steps_before = initial.steps.len();
    let reserve = if reruns_max >= 2 * FINAL_PASS_RERUNS_MAX { FINAL_PASS_RERUNS_MAX } else { 0 };
    let rounds_max = reruns_max - reserve;
    let mut search =
        Search { fails, reruns: 0, reruns_max: rounds_max, best: initial, _marker: std::marker::PhantomData };
    let mut reached_fixpoint = false;
    while !search.exhausted() {
        let before = search.reruns;
        let mut progress = ddmin(target, &mut search);
        progress |= rewrites(target, &mut search);
        progress |= simplify_config(target, &mut search);
        progress |= simplify_steps(target, &mut search);
        progress |= single_removals(target, &mut search);
        if !progress && !search.exhausted() {
            reached_fixpoint = true;
            break;
        }
        assert!(search.reruns > before || search.best.steps.is_empty(), "a round made no reruns");
    }
    let mut one_minimal = reached_fixpoint;
    if !reached_fixpoint && search.best.steps.len() <= FINAL_PASS_STEPS_MAX {
        search.reruns_max = reruns_max;
        one_minimal = final_pass(target, &mut search);
    }
    let steps_after = search.best.steps.len();
    assert!(steps_after <= steps_before || !reached_fixpoint || steps_before == 0);
    assert!(search.reruns <= reruns_max, "the shrinker ran past its budget");
    Report { result: search.best, steps_before, steps_after, reruns: search.reruns, reached_fixpoint, one_minimal }
}

/// Single-step removal to its fixpoint, on a candidate of at most [`FINAL_PASS_STEPS_MAX`] steps: true when a
/// whole sweep tried every step and removed none (the result is 1-minimal), false only when the budget ran out
/// first (a budget below twice [`FINAL_PASS_RERUNS_MAX`] keeps nothing back).
fn final_pass<T: Simplify, F: FnMut(&Candidate<T::Step, T::Config>) -> bool>(
    target: &T,
    search: &mut Search<'_, T::Step, T::Config, F>,
) -> bool {
    // Every sweep but the last removes at least one step.
    let sweeps_max = search.best.steps.len() + 1;
    for _ in 0..sweeps_max {
        let steps = search.best.steps.len() as u64;
        let before = search.reruns;
        if !single_removals(target, search) {
            return search.reruns - before == steps;
        }
        if search.exhausted() {
            return false;
        }
    }
    false
}

/// ddmin over the steps: remove chunks of decreasing size while the failure persists.
fn ddmin<T: Simplify, F: FnMut(&Candidate<T::Step, T::Config>) -> bool>(
    target: &T,
    search: &mut Search<'_, T::Step, T::Config, F>,
) -> bool {
    let mut progress = false;
    let mut granularity = 2usize;
    while search.best.steps.len() >= 2 && !search.exhausted() {
        let len = search.best.steps.len();
        let chunk = len.div_ceil(granularity);
        let mut removed_one = false;
        let mut start = 0;
        while start < search.best.steps.len() && !search.exhausted() {
            let end = (start + chunk).min(search.best.steps.len());
            let steps = without(target, &search.best.steps, start..end);
            if search.attempt(search.with_steps(steps)) {
                removed_one = true;
                progress = true;
            } else {
                start = end;
            }
        }
        if removed_one {
            granularity = (granularity - 1).max(2);
        } else if granularity >= search.best.steps.len() {
            break;
        } else {
            granularity = (granularity * 2).min(search.best.steps.len());
        }
    }
    progress
}

fn rewrites<T: Simplify, F: FnMut(&Candidate<T::Step, T::Config>) -> bool>(
    target: &T,
    search: &mut Search<'_, T::Step, T::Config, F>,
) -> bool {
    let mut progress = false;
    for rewritten in target.rewrite(&search.best.steps) {
        if search.exhausted() {
            break;
        }
        // A rewrite may keep the length (fewer distinct keys): adopt it only if it changes something, or a
        // rewrite equal to the current schedule would count as progress forever.
        let changes = rewritten.len() < search.best.steps.len() || rewritten != search.best.steps;
        if changes && rewritten.len() <= search.best.steps.len() && search.attempt(search.with_steps(rewritten)) {
            progress = true;
        }
    }
    progress
}

fn simplify_config<T: Simplify, F: FnMut(&Candidate<T::Step, T::Config>) -> bool>(
    target: &T,
    search: &mut Search<'_, T::Step, T::Config, F>,
) -> bool {
    let mut progress = false;
    for config in target.simplify_config(&search.best.config) {
        if search.exhausted() {
            break;
        }
        let candidate = Candidate { steps: search.best.steps.clone(), config };
        progress |= search.attempt(candidate);
    }
    progress
}

fn simplify_steps<T: Simplify, F: FnMut(&Candidate<T::Step, T::Config>) -> bool>(
    target: &T,
    search: &mut Search<'_, T::Step, T::Config, F>,
) -> bool {
    let mut progress = false;
    let mut index = 0;
    while index < search.best.steps.len() && !search.exhausted() {
        for simpler in target.simplify_step(&search.best.steps[index]) {
            let mut steps = search.best.steps.clone();
            steps[index] = simpler;
            if search.attempt(search.with_steps(steps)) {
                progress = true;
                break;
            }
        }
        index += 1;
    }
    progress
}

fn single_removals<T: Simplify, F: FnMut(&Candidate<T::Step, T::Config>) -> bool>(
    target: &T,
    search: &mut Search<'_, T::Step, T::Config, F>,
) -> bool {
    let mut progress = false;
    let mut index = search.best.steps.len();
    while index > 0 && !search.exhausted() {
        index -= 1;
        if index >= search.best.steps.len() {
            continue;
        }
        let steps = without(target, &search.best.steps, index..index + 1);
        progress |= search.attempt(search.with_steps(steps));
    }
    progress
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Synthetic target: steps are numbers; a step simplifies by halving.
    struct Numbers;

    impl Simplify for Numbers {
        type Step = u32;
        type Config = u32;

        fn simplify_step(&self, step: &u32) -> Vec<u32> {
            if *step > 0 { vec![0, step / 2] } else { Vec::new() }
        }

        fn simplify_config(&self, config: &u32) -> Vec<u32> {
            if *config > 0 { vec![0] } else { Vec::new() }
        }
    }

    /// Fails when `needles` appear in order as a subsequence.
    fn contains_in_order(steps: &[u32], needles: &[u32]) -> bool {
        let mut wanted = needles.iter().peekable();
        for step in steps {
            if wanted.peek() == Some(&step) {
                wanted.next();
            }
        }
        wanted.peek().is_none()
    }

    fn is_one_minimal(steps: &[u32], fails: impl Fn(&[u32]) -> bool) -> bool {
        (0..steps.len()).all(|index| {
            let mut fewer = steps.to_vec();
            fewer.remove(index);
            !fails(&fewer)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn result_is_one_minimal_and_still_fails(
            haystack in proptest::collection::vec(0u32..20, 0..120),
            needles in proptest::collection::vec(0u32..20, 1..5),
        ) {
            let mut steps = haystack.clone();
            steps.extend(&needles);
            let fails = |candidate: &[u32]| contains_in_order(candidate, &needles);
            prop_assume!(fails(&steps));
            let initial = Candidate { steps: steps.clone(), config: 7 };
            let report = shrink(&Numbers, initial, |c| fails(&c.steps), RERUNS_DEFAULT);
            prop_assert!(report.reached_fixpoint, "budget ran out: {report:?}");
            prop_assert!(fails(&report.result.steps));
            prop_assert!(is_one_minimal(&report.result.steps, fails));
            prop_assert_eq!(report.result.steps.len(), needles.len());
            prop_assert_eq!(report.steps_before, steps.len());
            prop_assert_eq!(report.result.config, 0, "the configuration simplifies when it does not matter");
        }

        #[test]
        fn step_simplification_reaches_the_smallest_failing_value(values in proptest::collection::vec(0u32..1000, 1..30)) {
            // Fails while some step is at least 10: the simplest failing step is exactly 10 or the halving chain's
            // last value above it; every other step is removed.
            let fails = |steps: &[u32]| steps.iter().any(|&v| v >= 10);
            prop_assume!(fails(&values));
            let report = shrink(&Numbers, Candidate { steps: values, config: 0 }, |c| fails(&c.steps), RERUNS_DEFAULT);
            prop_assert_eq!(report.result.steps.len(), 1);
            let value = report.result.steps[0];
            prop_assert!(value >= 10 && value / 2 < 10, "not simplified: {}", value);
        }
    }

    /// A target whose rounds never reach a fixpoint (ADR-0116): a step "simplifies" to more variants than the
    /// budget holds, none of them failing unless the step was redundant, and the configuration, the number of
    /// trailing needles the failure needs, drops by one per round, which makes an earlier needle redundant after
    /// delta debugging has already run.
    struct Wasteful;

    /// Variants per step: more than the whole default budget.
    const WASTE: u32 = 5_000;

    impl Simplify for Wasteful {
        type Step = u32;
        type Config = usize;

        fn simplify_step(&self, _step: &u32) -> Vec<u32> {
            (1_000..1_000 + WASTE).collect()
        }

        fn simplify_config(&self, needed: &usize) -> Vec<usize> {
            if *needed > 1 { vec![needed - 1] } else { Vec::new() }
        }
    }

    /// Fails when the last `needed` needles appear in `steps` in order.
    fn fails_wastefully(steps: &[u32], needles: &[u32], needed: usize) -> bool {
        contains_in_order(steps, &needles[needles.len() - needed.min(needles.len())..])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Schedules of at most 20 steps end 1-minimal within the default budget even when the rounds run out of
        /// it: the final single-step pass reaches its fixpoint.
        #[test]
        fn schedules_of_twenty_steps_end_one_minimal_within_the_default_budget(
            haystack in proptest::collection::vec(0u32..20, 0..=16),
            needles in proptest::collection::vec(0u32..20, 2..=4),
        ) {
            let mut steps = haystack.clone();
            steps.extend(&needles);
            prop_assert!(steps.len() <= FINAL_PASS_STEPS_MAX);
            let initial = Candidate { steps: steps.clone(), config: needles.len() };
            let report = shrink(
                &Wasteful,
                initial,
                |c| fails_wastefully(&c.steps, &needles, c.config),
                RERUNS_DEFAULT,
            );
            let needed = report.result.config;
            let fails = |candidate: &[u32]| fails_wastefully(candidate, &needles, needed);
            prop_assert!(!report.reached_fixpoint, "the rounds must run out of budget here: {report:?}");
            prop_assert!(report.reruns <= RERUNS_DEFAULT, "{} reruns", report.reruns);
            prop_assert!(fails(&report.result.steps));
            prop_assert!(report.one_minimal);
            prop_assert!(is_one_minimal(&report.result.steps, fails), "not 1-minimal: {:?}", report.result);
        }
    }

    #[test]
    fn without_the_final_pass_the_exhausted_rounds_leave_a_removable_step() {
        // A budget too small to keep the final pass's reruns back: the round stops in the step pass, after the
        // configuration made the first needle redundant and before single-step removal.
        let needles = [3, 4];
        let steps: Vec<u32> = (5..19).chain(needles).collect();
        assert_eq!(steps.len(), 16);
        let fails = |c: &Candidate<u32, usize>| fails_wastefully(&c.steps, &needles, c.config);
        let small =
            shrink(&Wasteful, Candidate { steps: steps.clone(), config: 2 }, fails, 2 * FINAL_PASS_RERUNS_MAX - 1);
        assert_eq!((small.reached_fixpoint, small.one_minimal), (false, false), "{small:?}");
        assert_eq!((small.result.steps.len(), small.result.config), (2, 1), "{small:?}");
        let fewer = Candidate { steps: small.result.steps[1..].to_vec(), config: small.result.config };
        assert!(fails(&fewer), "its first step can go: {small:?}");
        let default = shrink(&Wasteful, Candidate { steps, config: 2 }, fails, RERUNS_DEFAULT);
        assert_eq!((default.reached_fixpoint, default.one_minimal), (false, true), "{default:?}");
        assert_eq!((default.result.steps, default.result.config), (vec![4], 1));
        assert!(default.reruns <= RERUNS_DEFAULT);
    }

    #[test]
    fn budget_bounds_reruns_and_is_reported() {
        let steps: Vec<u32> = (0..500).collect();
        let report = shrink(&Numbers, Candidate { steps, config: 1 }, |c| c.steps.contains(&250), 10);
        assert_eq!(report.reruns, 10);
        assert!(!report.reached_fixpoint);
        assert!(report.result.steps.contains(&250), "the best candidate still fails");
    }

    /// Steps that need an earlier step are removed with it.
    struct Paired;

    impl Simplify for Paired {
        type Step = (u32, bool);
        type Config = ();

        fn dependents(&self, steps: &[(u32, bool)], index: usize) -> Vec<usize> {
            // A `true` step depends on the nearest earlier step with the same number.
            (index + 1..steps.len()).filter(|&i| steps[i].1 && steps[i].0 == steps[index].0).collect()
        }
    }

    #[test]
    fn dependents_go_with_their_prerequisite() {
        let steps = vec![(1, false), (2, false), (1, true), (3, false)];
        let fails = |c: &Candidate<(u32, bool), ()>| c.steps.iter().any(|s| s.0 == 3);
        let report = shrink(&Paired, Candidate { steps, config: () }, fails, 100);
        assert_eq!(report.result.steps, vec![(3, false)]);
        let kept = without(&Paired, &[(1, false), (2, false), (1, true)], 0..1);
        assert_eq!(kept, vec![(2, false)], "removing step 0 removes its dependent step 2");
    }
}
