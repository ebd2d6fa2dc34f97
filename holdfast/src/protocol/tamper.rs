//! The hostile operator (ADR-0077): while the system is closed, someone deletes or renames a file it needs.
//! The system must refuse to open with a corruption error naming that file ([`crate::SystemError::file`]) and
//! delete nothing; then the framework puts the file back, and the system opens with everything. If it opens
//! without the file instead, the target verifies it as after any recovery: it may not have lost anything.

use std::path::{Path, PathBuf};

use env::{DeterministicRng, SimEnv};

use super::Session;
use crate::step::{Observed, Tamper, TamperAction, WorldStep, file_family};
use crate::target::{FailureKind, Target, Violation};

/// Where a renamed file goes: `<name>.moved`, in the same directory.
fn moved_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".moved");
    PathBuf::from(name)
}

/// The `newest`-th newest of `family` among `sites` (by the number in the name, then path).
fn resolve(sites: Vec<PathBuf>, family: &str, newest: u32) -> Option<PathBuf> {
    let mut members: Vec<(u64, PathBuf)> = sites
        .into_iter()
        .filter_map(|path| {
            let (member_family, number) = file_family(&path);
            (member_family == family).then_some((number, path))
        })
        .collect();
    members.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    members.into_iter().nth(usize::try_from(newest).ok()?).map(|(_, path)| path)
}

/// Every file of the disk with its length: what a refused open must leave alone.
fn listing(env: &SimEnv) -> Vec<(PathBuf, u64)> {
    env.files().into_iter().map(|file| (file.path, file.current_len)).collect()
}

/// What the operator took away, to put it back.
enum Taken {
    Bytes(Vec<u8>),
    MovedTo(PathBuf),
}

impl<T: Target> Session<T> {
    /// A tamper step aimed at one of the target's tamper sites (by family and age), if it offers any.
    pub(super) fn generate_tamper(&self, rng: &mut DeterministicRng) -> Option<WorldStep> {
        let sites = self.target.tamper_sites(self.env());
        if sites.is_empty() {
            return None;
        }
        let site = &sites[rng.index(sites.len())];
        let action = if rng.chance_ppm(500_000) { TamperAction::Delete } else { TamperAction::Rename };
        let (family, number) = file_family(site);
        let newer = sites.iter().map(|other| file_family(other)).filter(|(f, n)| *f == family && *n > number);
        let newest = u32::try_from(newer.count()).expect("fewer files than u32::MAX");
        Some(WorldStep::Tamper(Tamper { action, family, newest }))
    }

    /// Close, tamper, open (which must refuse, or lose nothing), put the file back, recover and verify.
    pub(super) fn apply_tamper(&mut self, tamper: &Tamper) -> Result<Observed<T::Observation>, Violation> {
        if !self.target.is_open() {
            return Ok(Observed::Skipped);
        }
        // The operator works on a stopped system: a crash armed for this step is not theirs to cut.
        self.env().disarm_crash();
        if let Err(error) = self.target.close() {
            self.world.tolerate::<T::Observation>("close", &error)?;
            self.world.reopen_pending = false;
            self.world.count("reopens");
            return self.recover();
        }
        self.target.drop_system();
        let Some(path) = resolve(self.target.tamper_sites(self.env()), &tamper.family, tamper.newest) else {
            self.world.count("reopens");
            return self.recover();
        };
        let taken = match tamper.action {
            TamperAction::Delete => self.env().operator_remove(&path).map(Taken::Bytes),
            TamperAction::Rename => {
                let to = moved_path(&path);
                self.env().operator_rename(&path, &to).then_some(Taken::MovedTo(to))
            }
        };
        let Some(taken) = taken else {
            self.world.count("reopens");
            return self.recover();
        };
        self.world.count("tamper");
        if let Some(observed) = self.open_tampered(&path)? {
            return Ok(observed);
        }
        match taken {
            Taken::Bytes(bytes) => self.env().operator_restore(&path, bytes),
            Taken::MovedTo(to) => assert!(self.env().operator_rename(&to, &path), "the moved file goes back"),
        }
        self.world.count("reopens");
        self.recover()
    }

    /// Open with `path` missing. `Some` when it opened (and verified); `None` when it refused as it must (or a
    /// fault excused another error): the caller puts the file back.
    fn open_tampered(&mut self, path: &Path) -> Result<Option<Observed<T::Observation>>, Violation> {
        let before = listing(self.env());
        let faults_before = self.world.faults_total();
        self.env().charge_work(1, "open attempt");
        match self.target.open(self.world.env()) {
            Ok(()) => {
                // It opened without the file: then it needed nothing in it. The target's verification decides.
                let faulted = self.world.faults_total() != faults_before;
                self.world.opened(faulted);
                self.world.count("opens");
                self.world.count("tamper.opened");
                self.world.count("recoveries");
                let verified = self.target.recovered(&mut self.world)?;
                return Ok(Some(Observed::Recovered { verified }));
            }
            Err(error) if error.corruption && error.file.as_deref() == Some(path) => {
                self.world.count("tamper.refused");
                let after = listing(self.env());
                if after != before {
                    return Err(Violation::new(
                        "tamper.nothing_deleted",
                        FailureKind::Durability,
                        format!("a refused open leaves every file as it was: {before:?}"),
                        format!("{after:?}"),
                    ));
                }
            }
            Err(error) if !self.env().is_halted() && self.world.excuses(&error) => {
                self.world.count("errors_tolerated");
            }
            Err(error) => {
                return Err(Violation::new(
                    "tamper.refusal",
                    FailureKind::Durability,
                    format!("the open refuses with a corruption error naming {}", path.display()),
                    format!("{} (names {:?}, corruption: {})", error.message, error.file, error.corruption),
                ));
            }
        }
        self.target.drop_system();
        if self.env().is_halted() {
            self.env().restart();
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tamper_resolves_by_family_and_age_and_moves_beside_itself() {
        let sites: Vec<PathBuf> =
            ["/db/table-000003.sst", "/db/table-000009.sst", "/db/MANIFEST"].iter().map(PathBuf::from).collect();
        assert_eq!(resolve(sites.clone(), "/db/table-#.sst", 0), Some(PathBuf::from("/db/table-000009.sst")));
        assert_eq!(resolve(sites.clone(), "/db/table-#.sst", 1), Some(PathBuf::from("/db/table-000003.sst")));
        assert_eq!(resolve(sites.clone(), "/db/table-#.sst", 2), None);
        assert_eq!(resolve(sites, "/db/MANIFEST", 0), Some(PathBuf::from("/db/MANIFEST")));
        assert_eq!(moved_path(Path::new("/db/MANIFEST")), PathBuf::from("/db/MANIFEST.moved"));
    }
}
