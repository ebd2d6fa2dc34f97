//! Fault menus a user composes (ADR-0117): a store that never syncs a directory, one file per acknowledged
//! write, each synced before the write is acknowledged. It passes under `FaultMenu::crashes_only_names_durable`
//! (ext4-ordered: a file's fsync commits its name) and loses names under `posix`, the default model. Its
//! `sync_dirs` variant syncs directories where the profile's filesystem needs it, a choice it makes from the
//! profile it sees in `Target::new_in_world`, not from its shrinkable configuration.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::common::io;
use holdfast::env::{DeterministicRng, Env, File, OpenOptions, Persistence, SimEnv};
use holdfast::{
    Coverage, FailureKind, FaultMenu, FaultProfile, Observed, RunOptions, SystemError, Target, Violation, World,
    WorldConfig,
};
use serde::{Deserialize, Serialize};

const FILES_DIR: &str = "/files";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
enum FilesOp {
    Put { n: u64 },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct FilesConfig {
    value_bytes: u64,
}

/// The store and its model. `SYNC_DIRS`: sync directories under the profile whose names need it. `BAD_MENU`:
/// the `assumed` menu's disk quota range is backwards, a target author's mistake (ADR-0139).
#[derive(Debug)]
struct Files<const SYNC_DIRS: bool, const BAD_MENU: bool = false> {
    env: Option<SimEnv>,
    /// Derived from the world's profile at construction, never from the configuration.
    sync_dirs: bool,
    value_bytes: u64,
    acked: BTreeSet<u64>,
    next: u64,
    dir_syncs: u64,
}

impl<const SYNC_DIRS: bool, const BAD_MENU: bool> Files<SYNC_DIRS, BAD_MENU> {
    fn path(n: u64) -> PathBuf {
        PathBuf::from(format!("{FILES_DIR}/f{n}"))
    }

    fn value(&self, n: u64) -> Vec<u8> {
        let len = usize::try_from(self.value_bytes).expect("small");
        n.to_le_bytes().iter().copied().cycle().take(len).collect()
    }

    fn sync_dir(&mut self, env: &SimEnv, dir: &str) -> holdfast::env::Result<()> {
        if self.sync_dirs {
            self.dir_syncs += 1;
            env.sync_dir(&PathBuf::from(dir))?;
        }
        Ok(())
    }

    fn put(&mut self, n: u64) -> holdfast::env::Result<()> {
        let env = self.env.clone().expect("open");
        let file = env.open(&Self::path(n), OpenOptions::create_truncate())?;
        file.write_all_at(0, &self.value(n))?;
        file.sync()?;
        self.sync_dir(&env, FILES_DIR)
    }

    fn check_all(&mut self, world: &mut World) -> Result<u64, Violation> {
        let env = self.env.clone().expect("open");
        for &n in &self.acked {
            let read = env.open(&Self::path(n), OpenOptions::read()).and_then(|file| file.read_all());
            let actual = match read {
                Ok(bytes) if bytes == self.value(n) => continue,
                Ok(bytes) => format!("{} other bytes", bytes.len()),
                Err(error) if error.is_not_found() => "no such file".to_string(),
                Err(error) => {
                    world.tolerate::<u64>("read", &io(&error))?;
                    return Ok(0);
                }
            };
            let expected = format!("f{n}, acknowledged after its fsync");
            return Err(Violation::new("files.lost", FailureKind::Durability, expected, actual));
        }
        Ok(self.acked.len() as u64)
    }
}

impl<const SYNC_DIRS: bool, const BAD_MENU: bool> Target for Files<SYNC_DIRS, BAD_MENU> {
    const NAME: &'static str = if SYNC_DIRS { "files-sync-dirs" } else { "files" };
    type Config = FilesConfig;
    type Op = FilesOp;
    type Observation = u64;

    /// `assumed`: ext4, names durable with the file's fsync. `beyond` stands in for a filesystem where they are
    /// not: crashes only, under the default `posix` model.
    fn fault_menu(profile: FaultProfile) -> Option<FaultMenu> {
        #[expect(clippy::reversed_empty_ranges, reason = "BAD_MENU's planted mistake")]
        let backwards = 8192..=4096;
        Some(match profile {
            FaultProfile::Assumed if BAD_MENU => {
                FaultMenu::crashes_only_names_durable().with_disk_quota_bytes(backwards)
            }
            FaultProfile::Assumed => FaultMenu::crashes_only_names_durable(),
            FaultProfile::Beyond => FaultMenu::crashes_only(),
        })
    }

    fn configure(_seed: u64, _world: &WorldConfig) -> FilesConfig {
        FilesConfig { value_bytes: 600 }
    }

    fn new(_env: &SimEnv, config: &FilesConfig) -> Self {
        Self {
            env: None,
            sync_dirs: false,
            value_bytes: config.value_bytes,
            acked: BTreeSet::new(),
            next: 0,
            dir_syncs: 0,
        }
    }

    fn new_in_world(env: &SimEnv, config: &FilesConfig, world: &WorldConfig) -> Self {
        let names_durable = world.disk.persistence == Persistence::Ext4Ordered;
        Self { sync_dirs: SYNC_DIRS && !names_durable, ..Self::new(env, config) }
    }

    fn open(&mut self, env: &SimEnv) -> Result<(), SystemError> {
        env.create_dir_all(&PathBuf::from(FILES_DIR)).map_err(|error| io(&error))?;
        self.sync_dir(env, "/").map_err(|error| io(&error))?;
        self.env = Some(env.clone());
        Ok(())
    }

    fn drop_system(&mut self) {
        self.env = None;
    }

    fn is_open(&self) -> bool {
        self.env.is_some()
    }

    fn recovered(&mut self, world: &mut World) -> Result<u64, Violation> {
        self.check_all(world)
    }

    fn generate(&mut self, _world: &World, _rng: &mut DeterministicRng, _config: &FilesConfig) -> FilesOp {
        self.next += 1;
        FilesOp::Put { n: self.next }
    }

    fn apply(&mut self, world: &mut World, op: &FilesOp) -> Result<Observed<u64>, Violation> {
        let FilesOp::Put { n } = *op;
        match self.put(n) {
            Ok(()) => {
                self.acked.insert(n);
                Ok(Observed::Op(n))
            }
            Err(error) => world.tolerate("put", &io(&error)),
        }
    }

    fn healthy(&mut self, world: &mut World) -> Result<(), Violation> {
        self.check_all(world).map(drop)
    }

    fn coverage(&self, coverage: &mut Coverage) {
        coverage.add("files.dir_syncs", self.dir_syncs);
    }
}

const SEEDS: std::ops::Range<u64> = 0..24;

fn options(profile: FaultProfile, persistence: Option<Persistence>) -> RunOptions {
    RunOptions { profile, persistence, ..RunOptions::with_steps(150) }
}

/// Run every seed of [`SEEDS`]: the failing seeds' invariants, and the coverage of all.
fn swarm<T: Target>(options: &RunOptions) -> (Vec<String>, Coverage) {
    let mut coverage = Coverage::default();
    let mut failures = Vec::new();
    for seed in SEEDS {
        let outcome = holdfast::run_target::<T>(seed, options);
        coverage.merge(&outcome.coverage);
        failures.extend(outcome.failure.map(|failure| failure.invariant));
    }
    (failures, coverage)
}

#[test]
fn the_names_durable_preset_passes_a_store_that_never_syncs_directories() {
    let options = options(FaultProfile::Assumed, None);
    let (failures, coverage) = swarm::<Files<false>>(&options);
    assert_eq!(failures, Vec::<String>::new());
    assert!(coverage.get("crashes") > 20, "{coverage:?}");
    assert_eq!(coverage.get("files.dir_syncs"), 0);
    let outcome = holdfast::run_target::<Files<false>>(1, &options);
    assert_eq!(outcome.schedule.world.disk.persistence, Persistence::Ext4Ordered, "the menu's model, stored");
    assert!(outcome.schedule.to_json().contains("\"ext4-ordered\""));
}

#[test]
fn the_default_model_loses_the_names_of_a_store_that_never_syncs_directories() {
    let (failures, _) = swarm::<Files<false>>(&options(FaultProfile::Beyond, None));
    assert!(failures.len() >= 3, "posix must drop unsynced names in some seeds: {failures:?}");
    assert!(failures.iter().all(|invariant| invariant == "files.lost"), "{failures:?}");
}

/// The names-durable preset cannot be composed with a model that keeps names only after a directory sync: a run
/// that names one is refused, saying why, instead of every seed reporting names the store never synced as lost
/// (ADR-0171). Its own model, named, is fine.
#[test]
fn the_names_durable_preset_refuses_a_model_that_cannot_make_names_durable() {
    for model in [Persistence::Posix, Persistence::Page] {
        let error = holdfast::runner::configure_for::<Files<false>>(1, &options(FaultProfile::Assumed, Some(model)))
            .expect_err("refused");
        assert!(error.contains("ext4-ordered") && error.contains(&format!("persistence {model}")), "{error}");
    }
    let ordered = options(FaultProfile::Assumed, Some(Persistence::Ext4Ordered));
    assert!(holdfast::runner::configure_for::<Files<false>>(1, &ordered).is_ok());
    // The beyond menu (posix) takes any model.
    assert!(
        holdfast::runner::configure_for::<Files<false>>(1, &options(FaultProfile::Beyond, Some(Persistence::Page)))
            .is_ok()
    );
}

/// `Target::new_in_world` sees the profile's world: the store syncs directories only where names need it, and
/// passes under both; its configuration, which the shrinker simplifies, holds nothing of it.
#[test]
fn a_target_sees_its_world_at_construction_and_keeps_profile_behaviour_out_of_its_config() {
    let (failures, coverage) = swarm::<Files<true>>(&options(FaultProfile::Beyond, None));
    assert_eq!(failures, Vec::<String>::new());
    assert!(coverage.get("files.dir_syncs") > 100, "{coverage:?}");
    let (failures, coverage) = swarm::<Files<true>>(&options(FaultProfile::Assumed, None));
    assert_eq!((failures, coverage.get("files.dir_syncs")), (Vec::<String>::new(), 0));
    let schedule = holdfast::run_target::<Files<true>>(2, &options(FaultProfile::Beyond, None)).schedule;
    assert_eq!(serde_json::to_value(&schedule.config).expect("serializes"), serde_json::json!({ "value_bytes": 600 }));
}

/// A custom menu from `FaultMenu`'s public fields, as TARGETS.md shows: crashes and fsync errors, names durable.
#[test]
fn a_custom_menu_composes_from_public_fields() {
    let menu = FaultMenu {
        kinds: vec![(holdfast::env::FaultKind::FsyncError, 5_000)],
        faults_on_ppm: 1_000_000,
        kind_on_ppm: 1_000_000,
        tasks: false,
        ..FaultMenu::crashes_only_names_durable()
    };
    let worlds: Vec<WorldConfig> =
        SEEDS.map(|seed| WorldConfig::from_seed(seed, FaultProfile::Assumed, &menu)).collect();
    assert!(worlds.iter().all(|world| world.faults.fsync_error_ppm > 0 && world.faults.write_error_ppm == 0));
    assert!(worlds.iter().all(|world| world.weights.run_task == 0 && world.weights.fault == 0));
    assert!(worlds.iter().all(|world| world.disk.persistence == Persistence::Ext4Ordered));
}

/// A menu's quota range is what its seeds draw (ADR-0130): every quota lies inside it, and the standard range is
/// the default.
#[test]
fn disk_quotas_are_drawn_from_the_menus_range() {
    let quotas = |menu: &FaultMenu| -> Vec<u64> {
        (0..400)
            .filter_map(|seed| WorldConfig::from_seed(seed, FaultProfile::Assumed, menu).faults.disk_quota_bytes)
            .collect()
    };
    let standard = quotas(&FaultMenu::standard());
    let small = quotas(&FaultMenu::standard().with_disk_quota_bytes(4096..=8192));
    assert!(
        standard.len() > 10 && standard.len() == small.len(),
        "{} and {} seeds got a quota",
        standard.len(),
        small.len()
    );
    assert!(standard.iter().all(|quota| holdfast::DISK_QUOTA_BYTES_STANDARD.contains(quota)), "{standard:?}");
    assert!(small.iter().all(|quota| (4096..=8192).contains(quota)), "{small:?}");
    assert!(small.iter().any(|&quota| quota < 6144) && small.iter().any(|&quota| quota >= 6144), "{small:?}");
}

/// Every preset menu validates, and each mistake a target author can make in a menu's public fields is refused
/// with the field named, by `FaultMenu::validate` and by `runner::configure` (ADR-0139); nothing reorders a
/// backwards range or lifts a zero quota silently any more.
#[test]
fn every_preset_menu_is_valid_and_each_mistake_is_refused_by_name() {
    let presets = [
        FaultMenu::standard(),
        FaultMenu::crashes_only(),
        FaultMenu::crashes_only_names_durable(),
        FaultMenu::crashes_keyed_by_sync_epoch(),
        FaultMenu::beyond_media_assumptions(),
        FaultMenu::standard().with_buggify().with_directory_faults().with_disk_quota_bytes(1..=1),
    ];
    for menu in &presets {
        assert_eq!(menu.validate(), Ok(()), "{menu:?}");
    }
    let standard = FaultMenu::standard;
    let fsync = holdfast::env::FaultKind::FsyncError;
    #[expect(clippy::reversed_empty_ranges, reason = "the mistake under test")]
    let backwards = 8192..=4096;
    let mistakes = [
        (standard().with_disk_quota_bytes(backwards), "disk_quota_bytes"),
        (standard().with_disk_quota_bytes(0..=4096), "disk_quota_bytes"),
        (FaultMenu { kinds: vec![(fsync, 0)], ..standard() }, "FsyncError"),
        (FaultMenu { kinds: vec![(fsync, 1_000_001)], ..standard() }, "FsyncError"),
        (FaultMenu { kinds: vec![(fsync, 5), (fsync, 7)], ..standard() }, "listed twice"),
        (FaultMenu { faults_on_ppm: 1_000_001, ..standard() }, "faults_on_ppm"),
        (FaultMenu { kind_on_ppm: 2_000_000, ..standard() }, "kind_on_ppm"),
    ];
    for (menu, named) in mistakes {
        let error = menu.validate().expect_err(named);
        assert!(error.contains(named), "{named} not in {error:?}");
    }
}

/// `runner::configure` reports an invalid menu as an error naming the target and profile (the command line's
/// check is `cli::a_target_whose_fault_menu_is_invalid_is_refused_by_name_before_any_seed_runs`).
#[test]
fn configure_reports_an_invalid_menu_instead_of_drawing_from_it() {
    let error = holdfast::runner::configure::<Files<false, true>>(1, FaultProfile::Assumed).expect_err("invalid menu");
    assert!(error.contains("files") && error.contains("Assumed") && error.contains("disk_quota_bytes"), "{error}");
    assert!(holdfast::runner::configure::<Files<false>>(1, FaultProfile::Assumed).is_ok());
}
