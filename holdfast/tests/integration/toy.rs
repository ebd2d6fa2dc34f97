//! A toy system under the framework: a key-value store that keeps one file per key on `SimEnv`. The safe variant
//! writes a temp file, syncs, renames and syncs the directory; the buggy variant overwrites the key's file in
//! place, so a crash can leave it empty or torn. The framework's world steps (crashes, crashes at the k-th IO,
//! reopens) must find the bug, replay it exactly and shrink it; the safe variant must pass.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::common::*;
use holdfast::config::{ExplicitFaults, WorldWeights, healed_faults};
use holdfast::env::{DeterministicRng, Env, FaultConfig, File, OpenOptions, SimEnv};
use holdfast::{
    Coverage, FailureKind, FaultProfile, Observed, RunOptions, SwarmSummary, SystemError, Target, Violation, World,
    WorldConfig,
};
use serde::{Deserialize, Serialize};

const TOY_DIR: &str = "/toy";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub(crate) enum ToyOp {
    Put { key: u32, value: u64 },
    Get { key: u32 },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub(crate) enum ToyObserved {
    Ok,
    Value { value: Option<u64> },
    Verified { keys: u64 },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ToyConfig {
    pub(crate) keys: u32,
}

/// The toy store and its model. `SAFE`: write via temp file + rename (correct) or in place (buggy). `WASTEFUL`:
/// every fourth value is synced twice, a bug only its cost contract (`cost.syncs_per_put`, ADR-0182) sees.
#[derive(Debug)]
pub(crate) struct Toy<const SAFE: bool, const WASTEFUL: bool = false> {
    env: Option<SimEnv>,
    keys: u32,
    acked: BTreeMap<u32, u64>,
    maybe: BTreeMap<u32, BTreeSet<u64>>,
    next_value: u64,
}

impl<const SAFE: bool, const WASTEFUL: bool> Toy<SAFE, WASTEFUL> {
    fn path(key: u32) -> PathBuf {
        PathBuf::from(format!("{TOY_DIR}/k{key}"))
    }

    fn env(&self) -> &SimEnv {
        self.env.as_ref().expect("open")
    }

    fn put(&self, key: u32, value: u64) -> holdfast::env::Result<()> {
        let path = Self::path(key);
        if self.acked.contains_key(&key) {
            holdfast::env::probe!(self.env(), "toy.overwrote_key");
        }
        let target = if SAFE { path.with_extension("tmp") } else { path.clone() };
        let file = self.env().open(&target, OpenOptions::create_truncate())?;
        file.write_all_at(0, &value.to_le_bytes())?;
        file.sync()?;
        if WASTEFUL && value.is_multiple_of(4) {
            file.sync()?;
        }
        if SAFE {
            self.env().rename(&target, &path)?;
        }
        self.env().sync_dir(&PathBuf::from(TOY_DIR))
    }

    fn read(&self, key: u32) -> Result<Option<u64>, SystemError> {
        let file = match self.env().open(&Self::path(key), OpenOptions::read()) {
            Ok(file) => file,
            Err(error) if error.is_not_found() => return Ok(None),
            Err(error) => return Err(io(&error)),
        };
        let bytes = file.read_all().map_err(|error| io(&error))?;
        let array: [u8; 8] = bytes.as_slice().try_into().map_err(|_| {
            SystemError::corruption("torn", format!("k{key} holds {} bytes, not an 8-byte value", bytes.len()))
        })?;
        Ok(Some(u64::from_le_bytes(array)))
    }

    fn check_key(&mut self, world: &mut World, key: u32) -> Result<Observed<ToyObserved>, Violation> {
        let actual = match self.read(key) {
            Ok(actual) => actual,
            Err(error) if error.corruption && !world.excuses(&error) => {
                return Err(Violation::new(
                    "toy.torn_value",
                    FailureKind::Durability,
                    "an 8-byte value",
                    error.message,
                ));
            }
            Err(error) => return world.tolerate("get", &error),
        };
        let expected = self.acked.get(&key).copied();
        let maybe = self.maybe.remove(&key).unwrap_or_default();
        if actual != expected && !actual.is_some_and(|value| maybe.contains(&value)) {
            return Err(Violation::new(
                "toy.oracle",
                FailureKind::Durability,
                format!("k{key} = {expected:?} or {maybe:?}"),
                format!("{actual:?}"),
            ));
        }
        if let Some(value) = actual {
            self.acked.insert(key, value);
        }
        Ok(Observed::Op(ToyObserved::Value { value: actual }))
    }
}

impl<const SAFE: bool, const WASTEFUL: bool> Target for Toy<SAFE, WASTEFUL> {
    const NAME: &'static str = match (SAFE, WASTEFUL) {
        (true, false) => "toy",
        (false, _) => "toy-buggy",
        (true, true) => "toy-wasteful",
    };
    type Config = ToyConfig;
    type Op = ToyOp;
    type Observation = ToyObserved;

    fn configure(_seed: u64, _world: &WorldConfig) -> ToyConfig {
        ToyConfig { keys: 4 }
    }

    fn new(_env: &SimEnv, config: &ToyConfig) -> Self {
        Self { env: None, keys: config.keys, acked: BTreeMap::new(), maybe: BTreeMap::new(), next_value: 1 }
    }

    fn open(&mut self, env: &SimEnv) -> Result<(), SystemError> {
        env.create_dir_all(&PathBuf::from(TOY_DIR)).map_err(|error| io(&error))?;
        // The directory's own entry must be durable too, or a crash takes every key with it.
        env.sync_dir(&PathBuf::from("/")).map_err(|error| io(&error))?;
        self.env = Some(env.clone());
        Ok(())
    }

    fn drop_system(&mut self) {
        self.env = None;
    }

    fn is_open(&self) -> bool {
        self.env.is_some()
    }

    fn recovered(&mut self, world: &mut World) -> Result<ToyObserved, Violation> {
        let keys: Vec<u32> = self.acked.keys().chain(self.maybe.keys()).copied().collect();
        for &key in &keys {
            self.check_key(world, key)?;
        }
        Ok(ToyObserved::Verified { keys: keys.len() as u64 })
    }

    fn generate(&mut self, _world: &World, rng: &mut DeterministicRng, config: &ToyConfig) -> ToyOp {
        let key = u32::try_from(rng.below(u64::from(config.keys))).expect("fits");
        if rng.chance_ppm(500_000) {
            self.next_value += 1;
            return ToyOp::Put { key, value: self.next_value };
        }
        ToyOp::Get { key }
    }

    fn apply(&mut self, world: &mut World, op: &ToyOp) -> Result<Observed<ToyObserved>, Violation> {
        match op {
            ToyOp::Put { key, value } => match self.put(*key, *value) {
                Ok(()) => {
                    self.acked.insert(*key, *value);
                    self.maybe.remove(key);
                    Ok(Observed::Op(ToyObserved::Ok))
                }
                Err(error) => {
                    self.maybe.entry(*key).or_default().insert(*value);
                    world.tolerate("put", &io(&error))
                }
            },
            ToyOp::Get { key } => self.check_key(world, *key),
        }
    }

    /// The toy's cost contract: a put syncs its file once and its directory once.
    fn check_cost(
        &mut self,
        _world: &mut World,
        cost: &holdfast::cost::StepCost<'_, ToyOp, ToyObserved>,
    ) -> Result<(), Violation> {
        if let Some((ToyOp::Put { .. }, ToyObserved::Ok)) = cost.op_ran()
            && (cost.io.file_syncs > 1 || cost.io.dir_syncs > 1)
        {
            let actual = format!("{} file syncs, {} directory syncs", cost.io.file_syncs, cost.io.dir_syncs);
            return Err(holdfast::cost::cost_violation("cost.syncs_per_put", "one of each", actual));
        }
        Ok(())
    }

    fn healthy(&mut self, world: &mut World) -> Result<(), Violation> {
        for key in 0..self.keys {
            self.check_key(world, key)?;
        }
        Ok(())
    }

    fn coverage(&self, coverage: &mut Coverage) {
        coverage.add("toy.keys", self.acked.len() as u64);
    }

    /// One probe the toy hits, and one it declares but has no call site for: a path the swarm never reaches.
    fn probes() -> Vec<&'static str> {
        vec!["toy.overwrote_key", "toy.never_reached"]
    }
}

/// A world of puts, gets and crashes (some armed inside a put), nothing else.
pub(crate) fn toy_world() -> WorldConfig {
    let faults = FaultConfig { crash_write_kept_ppm: 300_000, ..healed_faults(&FaultConfig::none()) };
    WorldConfig {
        profile: FaultProfile::Assumed,
        faults,
        buggify: false,
        weights: WorldWeights {
            op: 20,
            run_task: 0,
            reopen: 1,
            fault: 0,
            crash: 1,
            crash_at_io: 3,
            crash_during_recovery: 1,
            tamper: 0,
        },
        explicit: ExplicitFaults::None,
        crash_at_io_k_max: 6,
        recovery_crash_k_max: 2,
        disk: env::DiskModel::default(),
        final_crash: None,
    }
}

fn run<const SAFE: bool>(seed: u64) -> holdfast::OutcomeOf<Toy<SAFE>> {
    holdfast::run_configured::<Toy<SAFE>>(seed, toy_world(), ToyConfig { keys: 4 }, &RunOptions::with_steps(300))
}

#[test]
fn safe_toy_passes_many_seeds_with_crashes_counted_by_the_framework() {
    let mut coverage = Coverage::default();
    for seed in 0..30 {
        let outcome = run::<true>(seed);
        assert!(outcome.passed(), "seed {seed}: {}", outcome.failure.map(|f| f.report()).unwrap_or_default());
        assert_eq!(outcome.steps_run, 300);
        coverage.merge(&outcome.coverage);
    }
    assert!(coverage.get("crashes") > 100, "only {} crashes over 30 seeds", coverage.get("crashes"));
    assert!(coverage.get("crash.armed_fired") > 0 && coverage.get("crash.during_recovery") > 0, "{coverage:?}");
    assert!(coverage.get("reopens") > 0 && coverage.get("recoveries") > 0, "{coverage:?}");
    assert!(coverage.get("toy.keys") > 0, "the target's own counters are collected");
}

#[test]
fn buggy_toy_is_caught_replays_exactly_and_shrinks() {
    let failing = (0..50)
        .map(run::<false>)
        .find(|outcome| !outcome.passed())
        .expect("an in-place overwrite must lose a value to some crash in 50 seeds");
    let failure = failing.failure.clone().expect("failed");
    assert!(failure.invariant.starts_with("toy."), "{}", failure.invariant);
    assert!(!failure.last_steps.is_empty() && failure.last_steps.len() <= 10);
    let schedule = holdfast::parse_schedule::<Toy<false>>(&failing.schedule.to_json()).expect("round trip");
    let replayed = holdfast::run_schedule::<Toy<false>>(&schedule, &RunOptions::default());
    assert_eq!(replayed.failure, failing.failure, "a replayed schedule fails the same way");
    assert_eq!(replayed.digest, failing.digest);
    let shrunk =
        holdfast::shrink::shrink_schedule::<Toy<false>>(&schedule, &RunOptions::default(), 2_000).expect("shrinks");
    assert_eq!(shrunk.signature, failure.signature());
    assert!(shrunk.steps_after <= 4, "shrunk to {} steps: {:?}", shrunk.steps_after, shrunk.schedule.steps);
    assert!(shrunk.steps_after < schedule.steps.len());
}

#[test]
fn a_schedule_for_another_target_or_version_is_refused_with_a_reason() {
    let outcome = run::<true>(1);
    let json = outcome.schedule.to_json();
    let error = holdfast::parse_schedule::<Toy<false>>(&json).expect_err("wrong target");
    assert!(error.contains("\"toy\"") && error.contains("\"toy-buggy\""), "{error}");
    let old = json.replace("\"format_version\": 2", "\"format_version\": 1");
    let error = holdfast::parse_schedule::<Toy<true>>(&old).expect_err("old version");
    assert!(error.contains("format_version 1"), "{error}");
}

#[test]
fn probes_are_coverage_and_the_summary_names_those_never_hit() {
    let mut summary = SwarmSummary::for_target::<Toy<true>>();
    for seed in 0..5 {
        let outcome = run::<true>(seed);
        assert!(outcome.coverage.get("probe.toy.overwrote_key") > 0, "seed {seed}: {:?}", outcome.coverage);
        assert_eq!(outcome.coverage.get("probe.toy.never_reached"), 0);
        summary.add(&outcome, Vec::new());
    }
    assert_eq!(summary.probes_hit(), vec!["toy.overwrote_key".to_string()]);
    assert_eq!(summary.probes_never_hit(), vec!["toy.never_reached".to_string()]);
    assert!(summary.probes_undeclared().is_empty());
    let mut merged = SwarmSummary::default();
    merged.merge(&summary);
    assert_eq!(merged, summary, "a merge keeps the declared probes");
    let json = serde_json::to_value(&summary).expect("serializes");
    assert_eq!(json["declared_probes"], serde_json::json!(["toy.never_reached", "toy.overwrote_key"]));
    let mut old = json.clone();
    old.as_object_mut().expect("an object").remove("declared_probes");
    let parsed: SwarmSummary = serde_json::from_value(old).expect("a summary from before probes parses");
    assert!(parsed.declared_probes.is_empty() && parsed.probes_undeclared() == vec!["toy.overwrote_key".to_string()]);
}

/// Probe hits are deterministic coverage: a replay of the schedule gives the same digest and the same counts.
#[test]
fn probe_hits_are_coverage_not_digest() {
    let outcome = run::<true>(3);
    assert!(outcome.coverage.get("probe.toy.overwrote_key") > 0);
    let replayed = holdfast::run_schedule::<Toy<true>>(&outcome.schedule, &RunOptions::default());
    assert_eq!(replayed.digest, outcome.digest);
    assert_eq!(replayed.coverage, outcome.coverage, "probe counts are deterministic per seed");
}

/// The disk model (ADR-0109) is part of a schedule only when it is not the default, replays from it, and the safe
/// toy passes under every model.
#[test]
fn the_disk_model_is_stored_in_schedules_only_when_not_posix() {
    use holdfast::env::{DiskModel, Persistence};
    assert!(!run::<true>(1).schedule.to_json().contains("persistence"), "a posix schedule is as before");
    for persistence in Persistence::ALL {
        for seed in 0..6 {
            let world = WorldConfig { disk: DiskModel::with_persistence(persistence), ..toy_world() };
            let outcome =
                holdfast::run_configured::<Toy<true>>(seed, world, ToyConfig { keys: 4 }, &RunOptions::with_steps(300));
            assert!(outcome.passed(), "{persistence} seed {seed}: {:?}", outcome.failure);
            let json = outcome.schedule.to_json();
            assert_eq!(json.contains(&format!("\"{persistence}\"")), persistence != Persistence::Posix);
            let schedule = holdfast::parse_schedule::<Toy<true>>(&json).expect("round trip");
            assert_eq!(schedule.world.disk.persistence, persistence);
            assert_eq!(holdfast::run_schedule::<Toy<true>>(&schedule, &RunOptions::default()).digest, outcome.digest);
        }
    }
}

/// A failure names the models it can happen on (ADR-0173), and a run asked to keep its crash image (ADR-0111) has
/// the same digest and the image of its last crash.
#[test]
fn a_failure_names_its_models_and_keeps_its_crash_image_on_request() {
    let failing = (0..50).map(run::<false>).find(|outcome| !outcome.passed()).expect("the buggy toy fails");
    let failure = failing.failure.clone().expect("failed");
    let options = RunOptions::default();
    let report = holdfast::models::classify_failure::<Toy<false>>(&failing.schedule, &failure.signature(), &options);
    assert_eq!(report.can_happen_on.first(), Some(&holdfast::env::Persistence::Posix), "{}", report.line());
    assert_eq!(report.can_happen_on.len() + report.cannot_on.len(), 3);
    assert_eq!(report.replay_fails_on.first(), Some(&holdfast::env::Persistence::Posix), "{}", report.evidence_line());
    assert!(report.line().starts_with("can happen on: posix"), "{}", report.line());
    assert!(failing.crash_image.is_none(), "kept only on request");
    let kept =
        holdfast::run_schedule::<Toy<false>>(&failing.schedule, &RunOptions { keep_crash_image: true, ..options });
    assert_eq!((kept.digest, kept.failure.clone()), (failing.digest, failing.failure.clone()));
    let image = kept.crash_image.expect("the failing run crashed");
    assert!(image.dirs.iter().any(|dir| dir.as_os_str() == TOY_DIR), "{:?}", image.dirs);
    assert_eq!(image.model, holdfast::env::DiskModel::default());
}

/// A failure found under `page` can happen on `posix` too, whatever `posix`'s own replay does: its label never
/// says "not on: posix" (ADR-0173). The buggy toy fails under `page` on several seeds; each is classified.
#[test]
fn a_failure_found_under_page_never_says_not_on_posix() {
    use holdfast::env::{DiskModel, Persistence};
    let world = WorldConfig { disk: DiskModel::with_persistence(Persistence::Page), ..toy_world() };
    let failing: Vec<_> = (0..40)
        .map(|seed| {
            holdfast::run_configured::<Toy<false>>(
                seed,
                world.clone(),
                ToyConfig { keys: 4 },
                &RunOptions::with_steps(300),
            )
        })
        .filter(|outcome| !outcome.passed())
        .take(4)
        .collect();
    assert!(!failing.is_empty(), "the buggy toy fails under page");
    for outcome in failing {
        let signature = outcome.failure.as_ref().expect("failed").signature();
        let report =
            holdfast::models::classify_failure::<Toy<false>>(&outcome.schedule, &signature, &RunOptions::default());
        assert!(report.crashes > 0, "the toy's failures follow a crash");
        let weaker = [Persistence::Posix, Persistence::Page];
        assert!(report.can_happen_on.starts_with(&weaker), "{}", report.line());
        assert!(report.replay_fails_on.contains(&Persistence::Page), "{}", report.evidence_line());
        assert!(!report.cannot_on.contains(&Persistence::Posix), "{}", report.line());
        for line in [report.line(), report.evidence_line()] {
            assert!(!line.contains("not on: posix"), "{line}");
        }
    }
}
