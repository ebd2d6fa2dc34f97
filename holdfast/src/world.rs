//! What the framework lends a target during a run: the simulated world, the fault bookkeeping with the one copy
//! of the per-fault rules (ADR-0010), and the coverage counters.
//!
//! # Per-fault rules
//!
//! Faults are read from the world's fault counters after every step and whenever an error surfaces. A fault
//! *excuses errors* ([`excuses_errors`]) until the next open in which no fault fired; it *damages* the run when
//! it can destroy or hide durable data ([`env::FaultKind::destroys_data`]), for the rest of the run:
//!
//! * `fsync_error`, `explicit_sync_error`, `write_error`, `explicit_write_error`, `short_write`, `disk_full`,
//!   `read_error` — a typed error is allowed (and the system is reopened after the step); acknowledged data is
//!   not lost.
//! * `read_corruption` (transient: a re-read is correct) — the only non-damaging fault that excuses an error
//!   reporting corruption ([`crate::SystemError::corruption`]); a write or sync error never does.
//! * `dir_sync_error`, `metadata_error`, `metadata_no_space` (directory operations: EIO from `sync_dir`, EIO or
//!   ENOSPC from a create, rename or remove) — like a failed fsync: a typed error is allowed (and the system is
//!   reopened after the step); the namespace change did not happen (or, after a failed directory sync, may still
//!   be dropped by a crash), so nothing acknowledged may be lost.
//! * `latent_sector`, `misdirected_write`, `explicit_corruption`, `crash_garbled_sector` — the run is *damaged*:
//!   errors of every kind are allowed from then on, an open may fail for good (the run then ends
//!   "unrecoverable", which passes), and the target's checks may weaken ([`World::damaged`]) — but only for data
//!   that could have lived where the damage landed: [`World::damage`] names the damaged files (ADR-0069), and
//!   a target checks everything else exactly.
//! * `crash_garbled_sector` when the target claims to survive it ([`crate::FaultMenu::garbled_sectors_survived`]):
//!   excuses nothing and damages nothing, like a torn write — a system whose writes never share a sector with
//!   synced data loses only unsynced bytes to it.
//! * `latency`, `clock_jump`, and the crash effects (`crash_dropped_write`, `crash_torn_write`,
//!   `crash_dropped_metadata`) — excuse nothing: they touch only unsynced state or time.
//!
//! Never allowed, whatever fired: an error while no fault justifies it, a crash error when no crash happened,
//! a panic.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use env::{FaultKind, FaultRecord, SimEnv};

use crate::step::Observed;
use crate::target::{Coverage, FailureKind, SystemError, Violation};

/// The liveness phase's budget of background-task steps.
pub const TASK_DRAIN_STEPS_MAX: u64 = 1_000_000;

/// May a fault of this kind make a call of the system under test fail? Which faults *damage* data is
/// [`FaultKind::destroys_data`], the disk model's own answer.
pub fn excuses_errors(kind: FaultKind) -> bool {
    !matches!(
        kind,
        FaultKind::Latency
            | FaultKind::ClockJump
            | FaultKind::CrashDroppedWrite
            | FaultKind::CrashTornWrite
            | FaultKind::CrashDroppedMetadata
    )
}

/// What the target claims to survive beyond the rule table's defaults (from its [`crate::FaultMenu`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Claims {
    /// Garbled torn sectors lose only unsynced bytes ([`crate::FaultMenu::garbled_sectors_survived`]).
    pub garbled_sectors_survived: bool,
}

/// The rule for one fault kind under the target's claims: (excuses errors, damages data).
pub fn rule(kind: FaultKind, claims: Claims) -> (bool, bool) {
    if kind == FaultKind::CrashGarbledSector && claims.garbled_sectors_survived {
        return (false, false);
    }
    (excuses_errors(kind), kind.destroys_data())
}

/// Where the data-destroying faults of a run landed (ADR-0069).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Damage {
    /// None fired: every check is exact.
    #[default]
    None,
    /// Only these files were damaged: durable data in every other file is intact and checked exactly.
    Files(BTreeSet<PathBuf>),
    /// Damage whose file is unknown (the fault log was full, or the file had no name): any file.
    Anywhere,
}

impl Damage {
    /// Add where one data-destroying fault landed. A misdirected write lands in the file it was meant for (the
    /// simulated disk shifts it within that file), as every other kind does.
    fn add(&mut self, record: &FaultRecord) {
        if *self == Damage::Anywhere {
            return;
        }
        if record.file.as_os_str().is_empty() || record.file.starts_with("<") {
            *self = Damage::Anywhere;
            return;
        }
        match self {
            Damage::Files(files) => {
                files.insert(record.file.clone());
            }
            _ => *self = Damage::Files(BTreeSet::from([record.file.clone()])),
        }
    }

    /// May `path` hold damaged bytes?
    pub fn touches(&self, path: &Path) -> bool {
        match self {
            Damage::None => false,
            Damage::Files(files) => files.contains(path),
            Damage::Anywhere => true,
        }
    }
}

/// Which faults the run has accounted for: each poll returns the kinds that fired since the last one.
#[derive(Clone, Debug, Default)]
struct FaultTracker {
    seen: BTreeMap<FaultKind, u64>,
    total: u64,
}

impl FaultTracker {
    fn poll(&mut self, env: &SimEnv) -> Vec<FaultKind> {
        // Polled after almost every call (ADR-0126): the total alone says whether anything fired, without copying the
        // per-kind counts.
        if env.fault_total() == self.total {
            return Vec::new();
        }
        let counts = env.fault_counts();
        let total: u64 = counts.values().sum();
        if total == self.total {
            return Vec::new();
        }
        assert!(total > self.total, "fault counters went backwards");
        let fired: Vec<FaultKind> = counts
            .iter()
            .filter(|&(kind, &count)| count > self.seen.get(kind).copied().unwrap_or(0))
            .map(|(&kind, _)| kind)
            .collect();
        assert!(!fired.is_empty(), "the total grew but no kind did");
        self.seen = counts;
        self.total = total;
        fired
    }
}

/// The world of one run, as a target sees it.
#[derive(Debug)]
pub struct World {
    env: SimEnv,
    tracker: FaultTracker,
    /// An error-causing fault fired since the last clean open.
    excused: bool,
    /// A fault that corrupts bytes read fired since the last clean open.
    corruption_excused: bool,
    /// A data-destroying fault fired: for the rest of the run.
    damaged: bool,
    /// Where the data-destroying faults landed.
    damage: Damage,
    /// How much of the fault log [`World::damage`] has read.
    log_read: usize,
    claims: Claims,
    /// The system could not be brought back after damage; the rest of the run only records.
    pub(crate) unrecoverable: bool,
    /// Reopen the system at the end of this step (an error surfaced).
    pub(crate) reopen_pending: bool,
    /// A crash armed by a `crash_at_io` step for the next step, and its shape (ADR-0172).
    pub(crate) armed: Option<(u64, Option<env::CrashShape>)>,
    pub(crate) counters: Coverage,
    /// The last error an open returned (for `unavailable` observations).
    pub(crate) last_open_error: String,
}

impl World {
    pub(crate) fn new(env: SimEnv, claims: Claims) -> Self {
        Self {
            env,
            tracker: FaultTracker::default(),
            excused: false,
            corruption_excused: false,
            damaged: false,
            damage: Damage::None,
            log_read: 0,
            claims,
            unrecoverable: false,
            reopen_pending: false,
            armed: None,
            counters: Coverage::default(),
            last_open_error: String::new(),
        }
    }

    /// The simulated world: disk, clock, randomness, tasks.
    pub fn env(&self) -> &SimEnv {
        &self.env
    }

    /// Is a crash armed for the next step (the last step was `crash_at_io`)? A target's generator may steer the
    /// next operation to where it wants crashes to land.
    pub fn crash_armed(&self) -> bool {
        self.armed.is_some()
    }

    /// Add one to coverage counter `name`.
    pub fn count(&mut self, name: &str) {
        self.counters.add(name, 1);
    }

    /// Add `count` to coverage counter `name`.
    pub fn add(&mut self, name: &str, count: u64) {
        self.counters.add(name, count);
    }

    /// Read new fault records and apply the rule table.
    pub(crate) fn poll_faults(&mut self) {
        let mut damaging = false;
        for kind in self.tracker.poll(&self.env) {
            let (excuses, damages) = rule(kind, self.claims);
            damaging |= damages;
            self.excused |= excuses;
            self.corruption_excused |= kind == FaultKind::ReadCorruption;
        }
        self.damaged |= damaging;
        if damaging {
            self.locate_damage();
        }
    }

    /// Read the fault log since the last look and add where each damaging fault landed.
    fn locate_damage(&mut self) {
        let (records, full) = self.env.fault_log_from(self.log_read);
        self.log_read += records.len();
        for record in &records {
            if rule(record.kind, self.claims).1 {
                self.damage.add(record);
            }
        }
        if full {
            self.damage = Damage::Anywhere;
        }
        assert!(self.damage != Damage::None, "a damaging fault fired but none was located");
    }

    /// Where data-destroying faults landed so far (ADR-0069): a target weakens a check only for data that
    /// could have lived in a damaged file, and checks everything else exactly.
    pub fn damage(&mut self) -> &Damage {
        self.poll_faults();
        &self.damage
    }

    /// Faults seen so far, all kinds together.
    pub(crate) fn faults_total(&mut self) -> u64 {
        self.poll_faults();
        self.tracker.total
    }

    /// Has a data-destroying fault fired in this run? Then reads may return any value a key ever had, or none,
    /// and recovery may roll back.
    pub fn damaged(&mut self) -> bool {
        self.poll_faults();
        self.damaged
    }

    /// Has a fault of `kind` fired in this run?
    pub fn has_seen(&mut self, kind: FaultKind) -> bool {
        self.poll_faults();
        self.tracker.seen.contains_key(&kind)
    }

    /// A clean open clears the excuses; an open during which a fault fired keeps them.
    pub(crate) fn opened(&mut self, faulted: bool) {
        self.excused &= faulted;
        self.corruption_excused &= faulted;
    }

    /// The liveness phase starts with nothing excused.
    pub(crate) fn heal(&mut self) {
        self.poll_faults();
        self.excused = false;
        self.corruption_excused = false;
    }

    /// May `error` surface now (ADR-0010)? Never when the world crashed (that is the crash, not an error).
    pub fn excuses(&mut self, error: &SystemError) -> bool {
        self.poll_faults();
        if self.env.is_halted() {
            return false;
        }
        if error.corruption {
            return self.corruption_excused || self.damaged;
        }
        self.excused || self.damaged
    }

    /// An operation `what` failed with `error`: observed as `error` (and the system reopened after the step)
    /// when a fault or a crash justifies it, a [`FailureKind::UnexpectedError`] violation otherwise.
    pub fn tolerate<O>(&mut self, what: &str, error: &SystemError) -> Result<Observed<O>, Violation> {
        if self.env.is_halted() {
            return Ok(Observed::Error { class: "crashed".into() });
        }
        if self.excuses(error) {
            self.count("errors_tolerated");
            self.reopen_pending = true;
            return Ok(Observed::Error { class: error.class.clone() });
        }
        Err(Violation::new(
            format!("no_unexpected_error.{what}"),
            FailureKind::UnexpectedError,
            "Ok (no fault or crash justifies an error)",
            error.message.clone(),
        ))
    }

    /// A verification read failed with `error` during `context` (`durability`, `liveness`): `Ok(true)` when a
    /// fault excuses it (the system is reopened after the step), `Ok(false)` when an armed crash cut it (the
    /// framework recovers and verifies again), a violation otherwise.
    pub fn tolerate_verify(&mut self, context: &str, what: &str, error: &SystemError) -> Result<bool, Violation> {
        if self.env.is_halted() {
            return Ok(false);
        }
        if self.excuses(error) {
            self.count("errors_tolerated");
            self.reopen_pending = true;
            return Ok(true);
        }
        Err(Violation::new(
            format!("{context}.read"),
            FailureKind::UnexpectedError,
            format!("{what} succeeds (no fault justifies an error)"),
            error.message.clone(),
        ))
    }

    /// A damaged run's system cannot get healthy: record it (`unrecoverable_runs`) and stop checking. Refused
    /// (`Err`) when the run is not damaged: then it is a liveness violation.
    pub fn give_up(&mut self, invariant: &str, expected: &str, actual: impl Into<String>) -> Result<(), Violation> {
        if self.damaged() {
            self.unrecoverable = true;
            return Ok(());
        }
        Err(Violation::new(invariant, FailureKind::Liveness, expected, actual))
    }

    /// Has the run given up on the system ([`World::give_up`], or an open that failed for good after damage)?
    pub fn is_unrecoverable(&self) -> bool {
        self.unrecoverable
    }

    /// Run background tasks until none is runnable, within [`TASK_DRAIN_STEPS_MAX`] task steps; a liveness
    /// violation named `invariant` otherwise.
    pub fn drain(&mut self, invariant: &str) -> Result<(), Violation> {
        let steps = self.env.run_tasks(TASK_DRAIN_STEPS_MAX);
        let left = self.env.runnable_tasks();
        if !left.is_empty() {
            return Err(Violation::new(
                invariant,
                FailureKind::Liveness,
                format!("background work drains within {TASK_DRAIN_STEPS_MAX} task steps"),
                format!("{} tasks still runnable after {steps} steps: {left:?}", left.len()),
            ));
        }
        Ok(())
    }

    /// The framework's coverage: its counters, faults fired by kind, BUGGIFY, damaged and unrecoverable runs.
    pub(crate) fn coverage(&mut self) -> Coverage {
        let mut coverage = self.counters.clone();
        for (kind, count) in self.env.fault_counts() {
            coverage.add(&format!("fault.{}", kind.name()), count);
        }
        let buggify = self.env.buggify_counts();
        coverage.add("buggify.sites_hit", buggify.values().filter(|(_, fired)| *fired > 0).count() as u64);
        coverage.add("buggify.fires", buggify.values().map(|(_, fired)| fired).sum());
        // Probes hit, `probe.<name>` (none of this is in the digest).
        for (name, hits) in self.env.probe_counts() {
            coverage.add(&crate::target::probe_counter(name), hits);
        }
        let damaged = self.damaged();
        coverage.add("damaged_runs", u64::from(damaged));
        coverage.add("unrecoverable_runs", u64::from(self.unrecoverable));
        coverage
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use env::{Env, ExplicitFault, File, OpenOptions};

    use super::*;

    fn file_with_bytes(env: &SimEnv, path: &str) {
        env.create_dir_all(Path::new("/d")).expect("mkdir");
        let file = env.open(Path::new(path), OpenOptions::create_new()).expect("create");
        file.write_all_at(0, &[7u8; 100]).expect("write");
        file.sync().expect("sync");
    }

    #[test]
    fn damage_is_located_in_the_files_it_landed_in() {
        let env = SimEnv::new(1);
        file_with_bytes(&env, "/d/a");
        file_with_bytes(&env, "/d/b");
        let mut world = World::new(env.clone(), Claims::default());
        assert_eq!(*world.damage(), Damage::None);
        assert!(!world.damaged());
        env.inject(ExplicitFault::FlipBit { path: "/d/a".into(), offset: 3 });
        assert!(world.damaged());
        let damage = world.damage().clone();
        assert_eq!(damage, Damage::Files(BTreeSet::from([PathBuf::from("/d/a")])));
        assert!(damage.touches(Path::new("/d/a")) && !damage.touches(Path::new("/d/b")));
        env.inject(ExplicitFault::FlipBit { path: "/d/b".into(), offset: 3 });
        assert!(world.damage().touches(Path::new("/d/b")));
    }

    #[test]
    fn a_claimed_fault_excuses_and_damages_nothing() {
        let garbled = FaultKind::CrashGarbledSector;
        assert_eq!(rule(garbled, Claims::default()), (true, true));
        assert_eq!(rule(garbled, Claims { garbled_sectors_survived: true }), (false, false));
        for kind in [FaultKind::DirSyncError, FaultKind::MetadataError, FaultKind::MetadataNoSpace] {
            assert_eq!(rule(kind, Claims::default()), (true, false), "{}", kind.name());
        }
        assert_eq!(rule(FaultKind::LatentSector, Claims { garbled_sectors_survived: true }), (true, true));
    }
}
