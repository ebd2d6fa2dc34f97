//! Counters that every reading thread bumps, kept on cache lines of their own per thread (ADR-0213): a table's
//! read-path counters were one cache line that two cores reading the same table both wrote on every lookup, so the
//! line moved between the cores on about every other read. A thread bumps the stripe its slot names; a reader of the
//! totals sums the stripes. Sums do not depend on which thread bumped which stripe, so nothing here shapes a run.

use std::sync::atomic::{AtomicUsize, Ordering};

/// How many stripes a [`Striped`] holds: threads beyond it share stripes (still correct, only slower).
pub(crate) const STRIPES_MAX: usize = 8;

/// The next thread slot to hand out; a thread's stripe is its slot modulo [`STRIPES_MAX`].
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's stripe, chosen at its first bump: threads started one after another get different stripes.
    static STRIPE: usize = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % STRIPES_MAX;
}

/// One stripe, aligned to two cache lines (the adjacent-line prefetcher pairs lines on x86) so that no two
/// stripes share one.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded<T>(T);

/// [`STRIPES_MAX`] copies of `T`, each on cache lines of its own; a thread writes only its own.
#[derive(Debug)]
pub(crate) struct Striped<T> {
    stripes: [Padded<T>; STRIPES_MAX],
}

impl<T: Default> Default for Striped<T> {
    fn default() -> Self {
        Self { stripes: std::array::from_fn(|_| Padded::default()) }
    }
}

impl<T> Striped<T> {
    /// The calling thread's stripe.
    pub(crate) fn mine(&self) -> &T {
        &self.stripes[STRIPE.with(|stripe| *stripe)].0
    }

    /// `field` summed over every stripe.
    pub(crate) fn sum(&self, field: impl Fn(&T) -> u64) -> u64 {
        self.stripes.iter().map(|stripe| field(&stripe.0)).sum()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;

    use super::*;

    #[test]
    fn bumps_from_many_threads_sum_to_their_count() {
        const THREADS: usize = STRIPES_MAX + 3;
        const BUMPS: u64 = 1_000;
        let env = env::RealEnv::new();
        let striped = Arc::new(Striped::<AtomicU64>::default());
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                let striped = Arc::clone(&striped);
                env::thread::spawn(&env, "bumper", move || {
                    for _ in 0..BUMPS {
                        striped.mine().fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("a bumping thread panicked");
        }
        assert_eq!(striped.sum(|counter| counter.load(Ordering::Relaxed)), THREADS as u64 * BUMPS);
        let used = striped.stripes.iter().filter(|stripe| stripe.0.load(Ordering::Relaxed) > 0).count();
        assert!(used >= 2, "threads started one after another write different stripes ({used} used)");
    }

    #[test]
    fn stripes_sit_on_cache_lines_of_their_own() {
        let striped = Striped::<AtomicU64>::default();
        let address = |index: usize| std::ptr::from_ref(&striped.stripes[index].0) as usize;
        for index in 1..STRIPES_MAX {
            assert!(address(index) - address(index - 1) >= 128, "stripes {} and {index} are close", index - 1);
        }
        assert_eq!(address(0) % 128, 0, "a stripe starts a 128-byte pair of lines");
    }
}
