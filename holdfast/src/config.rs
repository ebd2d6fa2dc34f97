//! The world's per-seed configuration (TigerBeetle VOPR's `options_swarm`): which faults fire and how often,
//! BUGGIFY, the crash model, and how often each world step comes — derived from the seed's `"world"` stream
//! within what the target's [`FaultMenu`] for the chosen [`FaultProfile`] allows. A target's own configuration
//! is its [`crate::Target::Config`], derived separately; both are stored in every schedule.

use std::fmt;
use std::ops::RangeInclusive;

use env::random::PPM_MAX;
use env::{CrashShape, DeterministicRng, DiskModel, FaultConfig, FaultKeying, FaultKind, Persistence};
use serde::{Deserialize, Serialize};

/// The largest `k` of a `crash_at_io` step.
pub const CRASH_AT_IO_K_MAX: u64 = 64;
/// The largest `k` of a `crash_during_recovery` step.
pub const RECOVERY_CRASH_K_MAX: u64 = 40;
/// The share of seeds, under a menu [`FaultMenu::with_tamper`], that get hostile-operator `tamper` steps.
pub const TAMPER_ON_PPM: u32 = 300_000;

/// Which faults a run may see, by name. What each profile allows is the target's choice ([`FaultMenu`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultProfile {
    /// What the system's own documentation assumes of the media. A failure here is a bug.
    #[default]
    Assumed,
    /// Beyond those assumptions (garbage sectors, errors the system does not claim to survive): failures
    /// characterise the system.
    Beyond,
}

impl FaultProfile {
    /// Every profile, in order.
    pub const ALL: [FaultProfile; 2] = [FaultProfile::Assumed, FaultProfile::Beyond];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            FaultProfile::Assumed => "assumed",
            FaultProfile::Beyond => "beyond",
        }
    }

    /// Parse a command-line name.
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|profile| profile.name() == text)
            .ok_or_else(|| format!("unknown fault profile {text:?} (assumed, beyond)"))
    }
}

impl fmt::Display for FaultProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which explicit faults a `fault` step may inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExplicitFaults {
    /// No `fault` steps.
    None,
    /// Failed syncs and writes, never a bit flip.
    Errors,
    /// Failed syncs and writes, and bit flips in files the target marks flippable.
    All,
}

/// What a target allows under one fault profile: the menu each seed draws its world from.
///
/// Every field is public: start from the preset closest to what the system's documentation promises and change
/// the rest (TARGETS.md, "Composing your own menu"):
///
/// ```
/// use holdfast::env::{FaultKind, Persistence};
/// use holdfast::{FaultMenu, FaultProfile, WorldConfig};
///
/// let menu = FaultMenu {
///     kinds: vec![(FaultKind::FsyncError, 5_000)], // fsync may fail (at most 0.5% of syncs), nothing else
///     faults_on_ppm: 1_000_000,                    // in every seed...
///     kind_on_ppm: 1_000_000,                      // ...with every listed kind on
///     tasks: false,                                // no background tasks to step
///     ..FaultMenu::crashes_only_names_durable()    // crashes, under ext4-ordered
/// };
/// let world = WorldConfig::from_seed(7, FaultProfile::Assumed, &menu);
/// assert!(world.faults.fsync_error_ppm > 0 && world.faults.write_error_ppm == 0);
/// assert_eq!((world.weights.run_task, world.disk.persistence), (0, Persistence::Ext4Ordered));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultMenu {
    /// Probabilistic kinds a seed may turn on, with the largest ppm each may get.
    pub kinds: Vec<(FaultKind, u32)>,
    /// The chance a seed turns probabilistic faults on at all.
    pub faults_on_ppm: u32,
    /// The chance each kind is on, in a seed with faults on.
    pub kind_on_ppm: u32,
    /// A seed may get a disk quota (`disk_full`).
    pub disk_full: bool,
    /// The quotas a seed draws from when it gets one: a write that would take the disk's used bytes past it fails
    /// with `NoSpace`. Size it to what the system writes: a quota it never reaches is a `disk_full` fault that
    /// never fires, and `--require-coverage` says so.
    pub disk_quota_bytes: RangeInclusive<u64>,
    /// A seed may turn crash-garbled torn sectors on (breaks "powersafe overwrite").
    pub garbled_sectors: bool,
    /// The target claims to survive garbled torn sectors (its writes never share a sector with synced data):
    /// a garbled sector then excuses nothing and damages nothing (ADR-0067), so any loss is its bug.
    pub garbled_sectors_survived: bool,
    /// A seed may turn BUGGIFY on.
    pub buggify: bool,
    pub explicit: ExplicitFaults,
    /// How fault and crash decisions are keyed (ADR-0039).
    pub keying: FaultKeying,
    /// Background tasks exist: `run_task` steps are generated.
    pub tasks: bool,
    /// Crash-during-recovery steps are generated.
    pub recovery_crashes: bool,
    /// Hostile-operator `tamper` steps are generated (the target offers [`crate::Target::tamper_sites`]).
    pub tamper: bool,
    /// The persistence model (ADR-0109) a generated world gets unless the run names one (`--persistence`):
    /// `posix` in every preset but [`FaultMenu::crashes_only_names_durable`].
    pub persistence: Persistence,
}

/// The disk quotas of [`FaultMenu::standard`]: 16 KiB to 512 KiB.
pub const DISK_QUOTA_BYTES_STANDARD: RangeInclusive<u64> = 16 * 1024..=512 * 1024;

/// Probabilistic fault kinds of the standard menu, with the largest ppm each may get.
const STANDARD_FAULTS: [(FaultKind, u32); 8] = [
    (FaultKind::FsyncError, 3_000),
    (FaultKind::WriteError, 3_000),
    (FaultKind::ShortWrite, 20_000),
    (FaultKind::ReadError, 3_000),
    (FaultKind::ReadCorruption, 3_000),
    (FaultKind::LatentSector, 300),
    (FaultKind::MisdirectedWrite, 300),
    (FaultKind::Latency, 50_000),
];

/// Directory-operation faults ([`FaultMenu::with_directory_faults`]), with the largest ppm each may get.
const DIRECTORY_FAULTS: [(FaultKind, u32); 3] =
    [(FaultKind::DirSyncError, 20_000), (FaultKind::MetadataError, 20_000), (FaultKind::MetadataNoSpace, 20_000)];

impl FaultMenu {
    /// Every probabilistic fault kind, disk quotas, explicit faults with bit flips, background tasks; no
    /// garbled sectors, no BUGGIFY (a system has BUGGIFY sites only if it calls `Env::buggify`: see
    /// [`FaultMenu::with_buggify`]); operation-index keying.
    pub fn standard() -> Self {
        Self {
            kinds: STANDARD_FAULTS.to_vec(),
            faults_on_ppm: 400_000,
            kind_on_ppm: 500_000,
            disk_full: true,
            disk_quota_bytes: DISK_QUOTA_BYTES_STANDARD,
            garbled_sectors: false,
            garbled_sectors_survived: false,
            buggify: false,
            explicit: ExplicitFaults::All,
            keying: FaultKeying::OperationIndex,
            tasks: true,
            recovery_crashes: true,
            tamper: false,
            persistence: Persistence::Posix,
        }
    }

    /// Only crashes: unsynced writes kept, dropped or torn at sector granularity, nothing else.
    pub fn crashes_only() -> Self {
        Self {
            kinds: Vec::new(),
            faults_on_ppm: 0,
            disk_full: false,
            buggify: false,
            explicit: ExplicitFaults::None,
            ..Self::standard()
        }
    }

    /// Only crashes, on a filesystem that makes a name durable with the file's fsync, for a system that never
    /// syncs a directory (ADR-0117): [`FaultMenu::crashes_only`] under the `ext4-ordered` persistence model, where
    /// a file's fsync commits the one metadata journal, and with it every create and rename before it (ext4 in
    /// its default `data=ordered` mode, ALICE Table 1). Under `posix`, the default, such a system loses names.
    /// A run that names another model (`--persistence`) is refused ([`FaultMenu::honours`]).
    pub fn crashes_only_names_durable() -> Self {
        Self { persistence: Persistence::Ext4Ordered, ..Self::crashes_only() }
    }

    /// Can a run of this menu use persistence model `model` instead of the menu's own (ADR-0171)? A menu under
    /// `ext4-ordered` ([`FaultMenu::crashes_only_names_durable`]) is for a system that relies on a file's fsync
    /// making its name durable; no other model does that, so every seed would report names lost that the system
    /// never promised to keep: refused, saying why.
    pub fn honours(&self, model: Persistence) -> Result<(), String> {
        if self.persistence != Persistence::Ext4Ordered || model == Persistence::Ext4Ordered {
            return Ok(());
        }
        Err(format!(
            "the fault menu runs under ext4-ordered, where a file's fsync makes its name durable \
             (FaultMenu::crashes_only_names_durable, ADR-0117); persistence {model} keeps a name only after a \
             directory sync, so every seed would lose names the system never syncs. Leave the model out (or use \
             ext4-ordered), or give the target a menu under {model} and sync its directories"
        ))
    }

    /// The `assumed` menu of a store that runs no background tasks and orders its writes only by fsync (redb,
    /// SQLite): crashes only, each decision keyed by (file, offset, sync epoch) (ADR-0039), so the order of the
    /// store's writes between two syncs is its own business.
    pub fn crashes_keyed_by_sync_epoch() -> Self {
        Self { keying: FaultKeying::OffsetSyncEpoch, tasks: false, ..Self::crashes_only() }
    }

    /// The `beyond` menu of such a store: past its media assumptions — torn sectors that turn to garbage, fsync,
    /// write and read errors, short writes, bit flips, latent sectors, misdirected writes (the standard kinds but
    /// latency, for a store that reads no clock), each on in half the seeds, and every explicit fault; no disk
    /// quota.
    pub fn beyond_media_assumptions() -> Self {
        let mut kinds = Self::standard().kinds;
        kinds.retain(|&(kind, _)| kind != FaultKind::Latency);
        Self {
            kinds,
            faults_on_ppm: 1_000_000,
            kind_on_ppm: 500_000,
            disk_full: false,
            garbled_sectors: true,
            explicit: ExplicitFaults::All,
            ..Self::crashes_keyed_by_sync_epoch()
        }
    }

    /// The menu with BUGGIFY: half the seeds turn it on (FoundationDB's odds per site), and a swarm then requires
    /// sites to have fired. For systems that call `Env::buggify`.
    pub fn with_buggify(mut self) -> Self {
        self.buggify = true;
        self
    }

    /// The menu with directory-operation faults (ADR-0068): EIO from `sync_dir`, EIO or ENOSPC from a create,
    /// rename or remove. For systems that surface those as errors and lose nothing acknowledged.
    pub fn with_directory_faults(mut self) -> Self {
        for kind in DIRECTORY_FAULTS {
            if !self.kinds.iter().any(|&(listed, _)| listed == kind.0) {
                self.kinds.push(kind);
            }
        }
        self
    }

    /// The menu with disk quotas drawn from `quota_bytes` (for a system that writes less, or more, than the
    /// standard range assumes). An empty range or a zero quota is refused by [`FaultMenu::validate`], which the
    /// runner and the command line call before drawing a world (ADR-0139).
    pub fn with_disk_quota_bytes(mut self, quota_bytes: RangeInclusive<u64>) -> Self {
        self.disk_quota_bytes = quota_bytes;
        self
    }

    /// Check the menu can be drawn from (ADR-0139): every listed kind once, with a largest ppm in
    /// 1..=1,000,000; the chances at most 1,000,000 ppm; a non-empty disk quota range of at least 1 byte.
    /// `runner::configure` and the command line call it, so a target author's mistake is an error that names
    /// the field, not a panic inside a seed or a range silently reordered.
    pub fn validate(&self) -> Result<(), String> {
        for (index, &(kind, ppm_max)) in self.kinds.iter().enumerate() {
            if ppm_max == 0 || ppm_max > PPM_MAX {
                return Err(format!("kinds: {kind:?} has largest ppm {ppm_max}, want 1..={PPM_MAX}"));
            }
            if self.kinds[..index].iter().any(|&(listed, _)| listed == kind) {
                return Err(format!("kinds: {kind:?} is listed twice"));
            }
        }
        for (field, ppm) in [("faults_on_ppm", self.faults_on_ppm), ("kind_on_ppm", self.kind_on_ppm)] {
            if ppm > PPM_MAX {
                return Err(format!("{field}: {ppm} is over {PPM_MAX}"));
            }
        }
        let quota = &self.disk_quota_bytes;
        if quota.is_empty() || *quota.start() == 0 {
            return Err(format!("disk_quota_bytes: {quota:?} is empty or starts at 0 bytes"));
        }
        Ok(())
    }

    /// The menu with garbled torn sectors that the target claims to survive ([`FaultMenu::garbled_sectors_survived`]).
    pub fn with_garbled_sectors_survived(mut self) -> Self {
        self.garbled_sectors = true;
        self.garbled_sectors_survived = true;
        self
    }

    /// The menu with the hostile operator: a seed in [`TAMPER_ON_PPM`] gets `tamper` steps (for a target whose
    /// [`crate::Target::tamper_sites`] names the files it must not open without).
    pub fn with_tamper(mut self) -> Self {
        self.tamper = true;
        self
    }

    /// The menu without the kinds that destroy data at rest or in flight (latent sectors, misdirected writes,
    /// bit flips): for targets whose checks cannot weaken for them.
    pub fn without_data_loss(mut self) -> Self {
        self.kinds.retain(|(kind, _)| !kind.destroys_data());
        self.garbled_sectors = false;
        self.garbled_sectors_survived = false;
        if self.explicit == ExplicitFaults::All {
            self.explicit = ExplicitFaults::Errors;
        }
        self
    }
}

/// How often each world step comes, against `op` for one of the target's own operations (0 turns a kind off).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorldWeights {
    pub op: u64,
    pub run_task: u64,
    pub reopen: u64,
    pub fault: u64,
    pub crash: u64,
    pub crash_at_io: u64,
    pub crash_during_recovery: u64,
    /// The hostile operator: while the system is closed, a file it needs is deleted or renamed (ADR-0077).
    /// Absent from a schedule (and from its digest) when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tamper: u64,
}

fn is_zero(weight: &u64) -> bool {
    *weight == 0
}

impl WorldWeights {
    /// The weights in a fixed order, for [`DeterministicRng::weighted`].
    pub fn as_array(&self) -> [u64; 8] {
        [
            self.op,
            self.run_task,
            self.reopen,
            self.fault,
            self.crash,
            self.crash_at_io,
            self.crash_during_recovery,
            self.tamper,
        ]
    }

    /// Any kind of crash step is on.
    pub fn crashes(&self) -> bool {
        self.crash + self.crash_at_io + self.crash_during_recovery > 0
    }
}

/// Everything about one seed's world: the fault configuration handed to `SimEnv`, BUGGIFY, and the world step
/// mix. Stored in every schedule; replay reads it, never the seed's streams.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorldConfig {
    pub profile: FaultProfile,
    /// Probabilistic faults, disk quota, crash tearing odds, BUGGIFY odds, keying: handed to `SimEnv`.
    pub faults: FaultConfig,
    pub buggify: bool,
    pub weights: WorldWeights,
    /// Which explicit faults `fault` steps inject.
    pub explicit: ExplicitFaults,
    /// `crash_at_io` steps draw `k` from `1..=crash_at_io_k_max`.
    pub crash_at_io_k_max: u64,
    /// `crash_during_recovery` steps draw `k` from `1..=recovery_crash_k_max`.
    pub recovery_crash_k_max: u64,
    /// The persistence model and sector size (ADR-0109, ADR-0110): chosen by `--persistence` and
    /// `--sector-size`, never drawn from the seed. Absent from a schedule (and its digest) while the default
    /// (`posix`, 512-byte sectors), so every schedule from before it loads as `posix` and keeps its digest.
    #[serde(default, skip_serializing_if = "DiskModel::is_default")]
    pub disk: DiskModel,
    /// The shape of the final power cut (ADR-0172): only the shrinker sets it; absent (keyed draws) otherwise, and
    /// then absent from the schedule and its digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_crash: Option<CrashShape>,
}

impl WorldConfig {
    /// The world of `seed` under `profile`'s `menu`: a pure function of the seed's `"world"` stream.
    ///
    /// Panics on a menu [`FaultMenu::validate`] refuses; `runner::configure` and the command line check the
    /// menu first and report an error.
    pub fn from_seed(seed: u64, profile: FaultProfile, menu: &FaultMenu) -> Self {
        if let Err(error) = menu.validate() {
            panic!("invalid fault menu: {error} (check it with FaultMenu::validate)");
        }
        let mut rng = DeterministicRng::stream(seed, "world");
        let mut weights = draw_weights(&mut rng, menu);
        // From its own stream, so a menu with tamper steps draws every other knob as before.
        weights.tamper =
            u64::from(menu.tamper && DeterministicRng::stream(seed, "world.tamper").chance_ppm(TAMPER_ON_PPM));
        let buggify = menu.buggify && rng.chance_ppm(500_000);
        // Kinds added to menus later draw from their own stream, so adding them reshuffles no existing world.
        let mut later = DeterministicRng::stream(seed, "world.directory");
        let faults = draw_faults(&mut rng, &mut later, menu, buggify);
        let config = Self {
            profile,
            faults,
            buggify,
            weights,
            explicit: menu.explicit,
            crash_at_io_k_max: rng.range_inclusive(1, CRASH_AT_IO_K_MAX),
            recovery_crash_k_max: rng.range_inclusive(1, RECOVERY_CRASH_K_MAX),
            disk: DiskModel::with_persistence(menu.persistence),
            final_crash: None,
        };
        config.validate().expect("the world generated an invalid configuration");
        config
    }

    /// Check the configuration is usable (replayed schedules may have been edited by hand).
    pub fn validate(&self) -> Result<(), String> {
        if self.weights.as_array().iter().all(|&weight| weight == 0) {
            return Err("world.weights: every weight is zero".into());
        }
        if self.crash_at_io_k_max == 0 || self.recovery_crash_k_max == 0 {
            return Err("world: crash k ranges must be at least 1".into());
        }
        self.disk.validate().map_err(|error| format!("world.{error}"))
    }

    /// Probabilistic fault kinds this configuration turns on (ppm > 0, or a disk quota for `disk_full`).
    pub fn enabled_fault_kinds(&self) -> Vec<FaultKind> {
        let mut kinds: Vec<FaultKind> =
            FaultKind::ALL.iter().copied().filter(|&kind| self.faults.ppm(kind) > 0).collect();
        if self.faults.disk_quota_bytes.is_some() {
            kinds.push(FaultKind::DiskFull);
        }
        kinds
    }

    /// The configuration with every probabilistic fault and BUGGIFY off (the crash model kept).
    pub fn quiet(&self) -> Self {
        Self { faults: healed_faults(&self.faults), buggify: false, ..self.clone() }
    }
}

/// The fault configuration of the liveness phase: no probabilistic faults, no quota, no BUGGIFY, no garbage
/// sectors; the crash model (tearing odds) and the keying of decisions are kept.
pub fn healed_faults(faults: &FaultConfig) -> FaultConfig {
    FaultConfig {
        crash_write_kept_ppm: faults.crash_write_kept_ppm,
        crash_metadata_kept_ppm: faults.crash_metadata_kept_ppm,
        keying: faults.keying,
        ..FaultConfig::none()
    }
}

fn draw_weights(rng: &mut DeterministicRng, menu: &FaultMenu) -> WorldWeights {
    let mut on = |max: u64, off_ppm: u32| crate::kit::weight_or_off(rng, off_ppm, 1, max);
    let weights = WorldWeights {
        op: 200,
        run_task: on(60, 100_000),
        reopen: on(2, 500_000),
        fault: on(3, 600_000),
        crash: on(3, 300_000),
        crash_at_io: on(5, 300_000),
        crash_during_recovery: on(2, 500_000),
        tamper: 0,
    };
    WorldWeights {
        run_task: if menu.tasks { weights.run_task } else { 0 },
        fault: if menu.explicit == ExplicitFaults::None { 0 } else { weights.fault },
        crash_during_recovery: if menu.recovery_crashes { weights.crash_during_recovery } else { 0 },
        ..weights
    }
}

fn draw_faults(
    rng: &mut DeterministicRng,
    later: &mut DeterministicRng,
    menu: &FaultMenu,
    buggify: bool,
) -> FaultConfig {
    let mut faults = FaultConfig { keying: menu.keying, ..FaultConfig::none() };
    if rng.chance_ppm(menu.faults_on_ppm) {
        // Which kinds are on is itself chosen per seed.
        for &(kind, ppm_max) in &menu.kinds {
            let is_later = DIRECTORY_FAULTS.iter().any(|&(listed, _)| listed == kind);
            let rng: &mut DeterministicRng = if is_later { &mut *later } else { &mut *rng };
            if rng.chance_ppm(menu.kind_on_ppm) {
                let ppm = u32::try_from(rng.range_inclusive(1, u64::from(ppm_max))).expect("fits");
                set_ppm(&mut faults, kind, ppm);
            }
        }
        if menu.disk_full && rng.chance_ppm(300_000) {
            let (start, end) = (*menu.disk_quota_bytes.start(), *menu.disk_quota_bytes.end());
            faults.disk_quota_bytes = Some(rng.range_inclusive(start, end));
        }
    }
    if menu.garbled_sectors && rng.chance_ppm(500_000) {
        faults.crash_torn_garbage_ppm = u32::try_from(rng.range_inclusive(1, 1_000_000)).expect("fits");
    }
    faults.crash_write_kept_ppm = u32::try_from(rng.range_inclusive(0, 1_000_000)).expect("fits");
    faults.crash_metadata_kept_ppm = u32::try_from(rng.range_inclusive(0, 1_000_000)).expect("fits");
    if buggify {
        // FoundationDB: each site enabled once per run with p=0.25, then fires with p=0.25.
        faults.buggify_site_ppm = 250_000;
        faults.buggify_fire_ppm = 250_000;
    }
    faults
}

/// Set the probability of one probabilistic fault kind.
pub fn set_ppm(faults: &mut FaultConfig, kind: FaultKind, ppm: u32) {
    match kind {
        FaultKind::FsyncError => faults.fsync_error_ppm = ppm,
        FaultKind::WriteError => faults.write_error_ppm = ppm,
        FaultKind::ShortWrite => faults.short_write_ppm = ppm,
        FaultKind::ReadError => faults.read_error_ppm = ppm,
        FaultKind::ReadCorruption => faults.read_corruption_ppm = ppm,
        FaultKind::LatentSector => faults.latent_sector_ppm = ppm,
        FaultKind::MisdirectedWrite => faults.misdirected_write_ppm = ppm,
        FaultKind::Latency => faults.latency_ppm = ppm,
        FaultKind::ClockJump => faults.clock_jump_ppm = ppm,
        FaultKind::CrashGarbledSector => faults.crash_torn_garbage_ppm = ppm,
        FaultKind::DirSyncError => faults.dir_sync_error_ppm = ppm,
        FaultKind::MetadataError => faults.metadata_error_ppm = ppm,
        FaultKind::MetadataNoSpace => faults.metadata_no_space_ppm = ppm,
        other => panic!("{} is not a probabilistic fault", other.name()),
    }
    assert_eq!(faults.ppm(kind), ppm, "set_ppm did not take");
}

impl fmt::Display for WorldConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = &self.weights;
        writeln!(
            f,
            "world: profile={} op={} task={} reopen={} fault={}({:?}) crash={} crash_at_io={}(k<={}) \
             crash_in_recovery={}(k<={}) tamper={}",
            self.profile,
            w.op,
            w.run_task,
            w.reopen,
            w.fault,
            self.explicit,
            w.crash,
            w.crash_at_io,
            self.crash_at_io_k_max,
            w.crash_during_recovery,
            self.recovery_crash_k_max,
            w.tamper
        )?;
        let kinds: Vec<String> = self
            .enabled_fault_kinds()
            .iter()
            .map(|&kind| match kind {
                FaultKind::DiskFull => format!("disk_full@{}B", self.faults.disk_quota_bytes.unwrap_or(0)),
                kind => format!("{}={}ppm", kind.name(), self.faults.ppm(kind)),
            })
            .collect();
        let faults = if kinds.is_empty() { "none".to_string() } else { kinds.join(" ") };
        write!(
            f,
            "faults: {faults}; crash_kept write={}ppm meta={}ppm; keying={:?}; buggify={}; disk: {}",
            self.faults.crash_write_kept_ppm,
            self.faults.crash_metadata_kept_ppm,
            self.faults.keying,
            if self.buggify { "on" } else { "off" },
            self.disk
        )?;
        match &self.final_crash {
            Some(shape) => write!(f, "; final crash: {shape}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worlds_are_pure_varied_and_within_the_menu() {
        let menu = FaultMenu::standard();
        assert_eq!(
            WorldConfig::from_seed(5, FaultProfile::Assumed, &menu),
            WorldConfig::from_seed(5, FaultProfile::Assumed, &menu)
        );
        let worlds: Vec<WorldConfig> =
            (0..60).map(|seed| WorldConfig::from_seed(seed, FaultProfile::Assumed, &menu)).collect();
        assert!(worlds.iter().any(|world| !world.enabled_fault_kinds().is_empty()), "faults never on");
        assert!(worlds.iter().any(|world| world.enabled_fault_kinds().is_empty()), "faults always on");
        assert!(worlds.iter().all(|world| !world.buggify), "BUGGIFY on without the menu asking for it");
        let buggy: Vec<WorldConfig> = (0..60)
            .map(|seed| WorldConfig::from_seed(seed, FaultProfile::Assumed, &FaultMenu::standard().with_buggify()))
            .collect();
        assert!(buggy.iter().any(|world| world.buggify) && buggy.iter().any(|world| !world.buggify));
        let quiet = FaultMenu::crashes_only();
        for seed in 0..60 {
            let world = WorldConfig::from_seed(seed, FaultProfile::Assumed, &quiet);
            assert!(world.enabled_fault_kinds().is_empty(), "seed {seed}: {world}");
            assert_eq!(world.weights.fault, 0);
            assert!(!world.buggify);
        }
        let safe = FaultMenu::standard().without_data_loss();
        for seed in 0..60 {
            let world = WorldConfig::from_seed(seed, FaultProfile::Assumed, &safe);
            assert!(world.enabled_fault_kinds().iter().all(|kind| !kind.destroys_data()), "seed {seed}");
        }
    }

    #[test]
    fn profiles_parse_and_print() {
        for profile in FaultProfile::ALL {
            assert_eq!(FaultProfile::parse(profile.name()), Ok(profile));
        }
        assert!(FaultProfile::parse("sideways").is_err());
    }
}
