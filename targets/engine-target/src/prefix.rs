//! Unsynced runs (ADR-0204): the keys a crash kept must be those of one prefix of the commits acknowledged since
//! the log was last known synced, in the order they were acknowledged (their sequence order: the target runs one
//! call at a time). The per-key model ([`crate::model::Model::crash`]) lets each key go back on its own; this
//! checks that they went back together.

use std::collections::{BTreeMap, BTreeSet};

use holdfast::kit::{Sig, fit_prefixes, mismatched_after};

/// The most commits a journal holds between two durable points (a leak is a bug).
pub const JOURNAL_COMMITS_MAX: usize = 1 << 20;
/// The most mismatched keys a report names.
const REPORTED_KEYS_MAX: usize = 5;

/// One acknowledged commit: the keys it wrote and their new values (None: a delete).
pub type Commit = Vec<holdfast::kit::KeyWrite>;

/// The commits acknowledged since the last durable point.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Journal {
    commits: Vec<Commit>,
    /// Each written key's value at the durable point (before the first commit that wrote it).
    base: BTreeMap<u32, Option<Sig>>,
    /// Keys whose value at the durable point, or after it, a failed write leaves open: not checked here (the
    /// per-key model checks them).
    uncertain: BTreeSet<u32>,
}

impl Journal {
    /// `commit` was acknowledged; `before` gives each key's value before it and whether that is uncertain.
    pub fn acknowledged(&mut self, commit: Commit, before: impl Fn(u32) -> (Option<Sig>, bool)) {
        for &(key, _) in &commit {
            let (value, uncertain) = before(key);
            self.base.entry(key).or_insert(value);
            if uncertain {
                self.uncertain.insert(key);
            }
        }
        assert!(self.commits.len() < JOURNAL_COMMITS_MAX, "the journal of unsynced commits grows without a sync");
        self.commits.push(commit);
    }

    /// A write of `key` failed: it may or may not be in the log.
    pub fn in_flight(&mut self, key: u32) {
        self.uncertain.insert(key);
    }

    pub fn is_empty(&self) -> bool {
        self.commits.is_empty() && self.uncertain.is_empty()
    }
}

/// A journal a crash ended, and what the verification after it read.
#[derive(Clone, Debug, Default)]
pub struct PrefixCheck {
    journal: Journal,
    recovered: BTreeMap<u32, Option<Sig>>,
}

impl PrefixCheck {
    pub fn new(journal: Journal) -> Self {
        Self { journal, recovered: BTreeMap::new() }
    }

    /// How many commits the journal holds.
    pub fn commits(&self) -> usize {
        self.journal.commits.len()
    }

    /// A read after the crash.
    pub fn observed(&mut self, key: u32, value: Option<Sig>) {
        self.recovered.insert(key, value);
    }

    /// The length of the shortest prefix of the journal's commits that gives every read key the value read (keys
    /// not read, or uncertain, are not compared): `holdfast::kit::fit_prefixes`. Err: no prefix does; the closest
    /// prefix, the keys it gets wrong (at most [`REPORTED_KEYS_MAX`]) and how many commits there were.
    pub fn shortest_prefix(&self) -> Result<usize, Mismatch> {
        let compared: BTreeMap<u32, Option<Sig>> = (self.recovered.iter())
            .filter(|(key, _)| self.journal.base.contains_key(key) && !self.journal.uncertain.contains(key))
            .map(|(&key, &value)| (key, value))
            .collect();
        let base = |key| self.journal.base[&key];
        let commits = || self.journal.commits.iter().map(|commit| commit.iter().copied());
        let fit = fit_prefixes(&compared, base, commits());
        if let Some(&shortest) = fit.fits.first() {
            return Ok(shortest);
        }
        let mut keys = mismatched_after(&compared, base, commits(), fit.closest);
        keys.truncate(REPORTED_KEYS_MAX);
        Err(Mismatch { prefix: fit.closest, keys, commits: self.journal.commits.len() })
    }
}

/// Why no prefix fits: the closest one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// How many of the commits the closest prefix holds.
    pub prefix: usize,
    /// Keys whose read value that prefix does not give (the first few).
    pub keys: Vec<u32>,
    /// The commits acknowledged since the last durable point.
    pub commits: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(commits: &[Commit], base: &[(u32, Option<Sig>)], read: &[(u32, Option<Sig>)]) -> PrefixCheck {
        let base: BTreeMap<u32, Option<Sig>> = base.iter().copied().collect();
        let mut journal = Journal::default();
        for commit in commits {
            journal.acknowledged(commit.clone(), |key| (base[&key], false));
        }
        let mut check = PrefixCheck::new(journal);
        read.iter().for_each(|&(key, value)| check.observed(key, value));
        check
    }

    /// Every prefix of three commits over two keys is accepted at its length; a state no prefix gives is refused
    /// with the closest prefix and the key it gets wrong.
    #[test]
    fn only_the_states_of_a_prefix_pass() {
        let commits = vec![vec![(1, Some(11))], vec![(2, Some(21)), (1, Some(12))], vec![(2, None)]];
        let base = [(1, None), (2, Some(20))];
        let states = [
            (0, [(1, None), (2, Some(20))]),
            (1, [(1, Some(11)), (2, Some(20))]),
            (2, [(1, Some(12)), (2, Some(21))]),
            (3, [(1, Some(12)), (2, None)]),
        ];
        for (length, read) in states {
            assert_eq!(check(&commits, &base, &read).shortest_prefix(), Ok(length), "{read:?}");
        }
        // The second commit half applied (k1 new, k2 old), and the third without the second.
        let torn = check(&commits, &base, &[(1, Some(12)), (2, Some(20))]).shortest_prefix().unwrap_err();
        assert_eq!(torn, Mismatch { prefix: 0, keys: vec![1], commits: 3 }, "every prefix misses one key: the first");
        let skipped = check(&commits, &base, &[(1, Some(11)), (2, None)]).shortest_prefix().unwrap_err();
        assert_eq!((skipped.keys.len(), skipped.commits), (1, 3));
    }

    /// A key not read, or one a failed write left uncertain, is not compared.
    #[test]
    fn unread_and_uncertain_keys_are_not_compared() {
        let commits = vec![vec![(1, Some(11))], vec![(2, Some(21))]];
        let base = [(1, None), (2, None)];
        assert_eq!(check(&commits, &base, &[(2, Some(21))]).shortest_prefix(), Ok(2));
        let mut uncertain = check(&commits, &base, &[(1, None), (2, Some(21))]);
        assert!(uncertain.shortest_prefix().is_err());
        uncertain.journal.in_flight(1);
        assert_eq!(uncertain.shortest_prefix(), Ok(2));
    }
}
