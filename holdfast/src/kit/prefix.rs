//! What a crash kept of a store that acknowledges writes before it syncs them (ADR-0204, ADR-0205): the state
//! after one prefix of the commits acknowledged since the last sync, in their order. Given the values read back
//! after the crash, which prefixes give them?

use std::collections::BTreeMap;

use super::Sig;

/// One write of a commit: a key and its new value (`None`: a delete).
pub type KeyWrite = (u32, Option<Sig>);

/// How the values read back compare with every prefix of the commits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefixFit {
    /// The prefix lengths (0 ..= the number of commits) that give every read key its read value, ascending.
    pub fits: Vec<usize>,
    /// The shortest prefix with the fewest read keys whose value differs (one of `fits` when there is one).
    pub closest: usize,
}

/// Which prefixes of `commits`, applied over `base` (each key's value before the first commit), give every key of
/// `read` its value there. Keys the commits write that `read` lacks are not compared. Pure; one pass over the
/// commits, keeping the count of read keys that differ.
pub fn fit_prefixes<C: IntoIterator<Item = KeyWrite>>(
    read: &BTreeMap<u32, Option<Sig>>,
    base: impl Fn(u32) -> Option<Sig>,
    commits: impl IntoIterator<Item = C>,
) -> PrefixFit {
    let mut current: BTreeMap<u32, Option<Sig>> = read.keys().map(|&key| (key, base(key))).collect();
    let mut mismatched = read.iter().filter(|&(key, value)| current[key] != *value).count();
    let (mut fits, mut best) = (Vec::new(), (mismatched, 0));
    if mismatched == 0 {
        fits.push(0);
    }
    for (index, commit) in commits.into_iter().enumerate() {
        for (key, value) in commit {
            let Some(&wanted) = read.get(&key) else { continue };
            let was = current.insert(key, value).expect("every read key has a current value");
            match (was == wanted, value == wanted) {
                (true, false) => mismatched += 1,
                (false, true) => mismatched -= 1,
                _ => {}
            }
        }
        if mismatched == 0 {
            fits.push(index + 1);
        }
        best = best.min((mismatched, index + 1));
    }
    PrefixFit { fits, closest: best.1 }
}

/// The keys of `read` whose value after the first `prefix` of `commits` over `base` differs from the read one,
/// ascending. Pure.
pub fn mismatched_after<C: IntoIterator<Item = KeyWrite>>(
    read: &BTreeMap<u32, Option<Sig>>,
    base: impl Fn(u32) -> Option<Sig>,
    commits: impl IntoIterator<Item = C>,
    prefix: usize,
) -> Vec<u32> {
    let mut current: BTreeMap<u32, Option<Sig>> = read.keys().map(|&key| (key, base(key))).collect();
    for commit in commits.into_iter().take(prefix) {
        for (key, value) in commit {
            if let Some(slot) = current.get_mut(&key) {
                *slot = value;
            }
        }
    }
    read.iter().filter(|&(key, value)| current[key] != *value).map(|(&key, _)| key).collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Every prefix of three commits over two keys fits at its length; a half-applied commit and a skipped one fit
    /// none, and the closest prefix is the shortest with the fewest wrong keys.
    #[test]
    fn only_the_states_of_a_prefix_fit() {
        let commits = vec![vec![(1, Some(11))], vec![(2, Some(21)), (1, Some(12))], vec![(2, None)]];
        let base = |key| if key == 2 { Some(20) } else { None };
        let fit = |read: &[(u32, Option<Sig>)]| fit_prefixes(&read.iter().copied().collect(), base, commits.clone());
        assert_eq!(fit(&[(1, None), (2, Some(20))]).fits, vec![0]);
        assert_eq!(fit(&[(1, Some(11)), (2, Some(20))]).fits, vec![1]);
        assert_eq!(fit(&[(1, Some(12)), (2, Some(21))]).fits, vec![2]);
        assert_eq!(fit(&[(1, Some(12)), (2, None)]).fits, vec![3]);
        assert_eq!(fit(&[(1, Some(12))]).fits, vec![2, 3], "k2 not read: both prefixes give k1 its value");
        let torn = [(1, Some(12)), (2, Some(20))];
        assert_eq!(fit(&torn), PrefixFit { fits: vec![], closest: 0 });
        let read: BTreeMap<u32, Option<Sig>> = torn.into_iter().collect();
        assert_eq!(mismatched_after(&read, base, commits.clone(), 0), vec![1]);
        assert_eq!(mismatched_after(&read, base, commits.clone(), 2), vec![2]);
    }

    /// A prefix's state, computed from scratch.
    fn state_after(
        commits: &[Vec<KeyWrite>],
        prefix: usize,
        keys: impl Iterator<Item = u32>,
    ) -> BTreeMap<u32, Option<Sig>> {
        let mut state: BTreeMap<u32, Option<Sig>> = keys.map(|key| (key, None)).collect();
        for commit in &commits[..prefix] {
            for &(key, value) in commit {
                state.insert(key, value);
            }
        }
        state
    }

    proptest! {
        /// The one-pass sweep agrees with trying every prefix from scratch, for states that are a prefix's and
        /// for arbitrary ones.
        #[test]
        fn the_sweep_agrees_with_every_prefix_tried_from_scratch(
            commits in proptest::collection::vec(
                proptest::collection::vec((0u32..6, proptest::option::of(0u64..3)), 1..4), 0..8),
            prefix_seed in 0usize..16,
            arbitrary_read in proptest::collection::btree_map(0u32..6, proptest::option::of(0u64..3), 0..6),
        ) {
            let prefix = prefix_seed % (commits.len() + 1);
            let of_prefix: BTreeMap<u32, Option<Sig>> = state_after(&commits, prefix, 0..6);
            for read in [of_prefix, arbitrary_read] {
                let expected: Vec<usize> = (0..=commits.len())
                    .filter(|&length| {
                        let state = state_after(&commits, length, 0..6);
                        read.iter().all(|(key, value)| state[key] == *value)
                    })
                    .collect();
                let fit = fit_prefixes(&read, |_| None, commits.clone());
                prop_assert_eq!(&fit.fits, &expected);
                let wrong = |length| mismatched_after(&read, |_| None, commits.clone(), length).len();
                let fewest = (0..=commits.len()).map(wrong).min().expect("at least the empty prefix");
                prop_assert_eq!(wrong(fit.closest), fewest);
                prop_assert!((0..fit.closest).all(|length| wrong(length) > fewest), "not the shortest closest");
            }
        }
    }
}
