//! The world protocol, written once for every target: generating and applying world steps, opening with
//! retries, recovering after crashes (including crashes inside recovery), reopening after tolerated errors, the
//! liveness phase and the final power cut.
//!
//! **Invariant:** after every step the world is running (never left halted), and the system is open unless the
//! run gave up on it or a justified error keeps it closed (then operations observe `unavailable`).

mod tamper;

use std::path::Path;

use env::{DeterministicRng, ExplicitFault, Op, SimEnv, TaskStep};

use crate::config::{ExplicitFaults, WorldConfig, healed_faults};
use crate::cost::StepCost;
use crate::step::{FaultAction, FaultOn, Observed, Step, WorldStep, file_family};
use crate::target::{FailureKind, FaultSite, Target, Violation};
use crate::world::{Claims, World};

/// How many times an open is retried when a fault justified its failure.
pub const OPEN_ATTEMPTS_MAX: u32 = 8;
/// How many crash/restart rounds one recovery may go through.
pub const RECOVERY_ROUNDS_MAX: u32 = 4;

/// A target and its world, mid-run.
pub(crate) struct Session<T: Target> {
    pub(crate) target: T,
    pub(crate) world: World,
    world_config: WorldConfig,
    config: T::Config,
    crashes_classified: u64,
    /// Where the finale is: `liveness` (faults healed, `Target::healthy`) or `final_crash` (the last power cut).
    pub(crate) stage: &'static str,
    /// What the last step cost before the target's checks ran ([`Session::apply`]).
    pub(crate) step_io: env::CostCounters,
}

impl<T: Target> Session<T> {
    /// Build the target on `env` and open its system.
    pub(crate) fn start(env: SimEnv, world_config: &WorldConfig, config: &T::Config) -> Result<Self, Violation> {
        let target = T::new_in_world(&env, config, world_config);
        let claims = T::fault_menu(world_config.profile)
            .map(|menu| Claims { garbled_sectors_survived: menu.garbled_sectors_survived })
            .unwrap_or_default();
        let mut session = Self {
            target,
            world: World::new(env, claims),
            world_config: world_config.clone(),
            config: config.clone(),
            crashes_classified: 0,
            stage: "step",
            step_io: env::CostCounters::default(),
        };
        session.open_system()?;
        Ok(session)
    }

    fn env(&self) -> &SimEnv {
        self.world.env()
    }

    /// The next step: a world step or a target operation, drawn by the world weights.
    pub(crate) fn generate(&mut self, rng: &mut DeterministicRng) -> Step<T::Op> {
        let world = &self.world_config;
        let step = match rng.weighted(&world.weights.as_array()) {
            0 => None,
            1 => {
                let runnable = self.env().runnable_tasks();
                (!runnable.is_empty())
                    .then(|| WorldStep::RunTask { name: runnable[rng.index(runnable.len())].1.clone() })
            }
            2 => Some(WorldStep::Reopen),
            3 => self.generate_fault(rng),
            4 => Some(WorldStep::CRASH),
            5 => Some(WorldStep::CrashAtIo { k: rng.range_inclusive(1, world.crash_at_io_k_max.max(1)), shape: None }),
            7 => self.generate_tamper(rng),
            _ => {
                let k = rng.range_inclusive(1, world.recovery_crash_k_max.max(1));
                Some(WorldStep::CrashDuringRecovery { k, shape: None })
            }
        };
        match step {
            Some(step) => Step::World(step),
            None => Step::Op(self.target.generate(&self.world, rng, &self.config)),
        }
    }

    fn generate_fault(&self, rng: &mut DeterministicRng) -> Option<WorldStep> {
        let sites = self.target.fault_sites(self.env());
        if sites.is_empty() || self.world_config.explicit == ExplicitFaults::None {
            return None;
        }
        let flips = self.world_config.explicit == ExplicitFaults::All;
        let site = &sites[rng.index(sites.len())];
        let action = match rng.weighted(&[3, 3, u64::from(flips && site.flippable)]) {
            0 => FaultAction::FailNextSync,
            1 => FaultAction::FailNextWrite,
            _ => FaultAction::FlipBit { offset: rng.below(site.len_bytes.max(1)) },
        };
        let (family, number) = file_family(&site.path);
        let newer = sites.iter().map(|other| file_family(&other.path)).filter(|(f, n)| *f == family && *n > number);
        let newest = u32::try_from(newer.count()).expect("fewer files than u32::MAX");
        Some(WorldStep::FaultOn(FaultOn { action, family, newest }))
    }

    /// The file a [`FaultOn`] step names now: the `newest`-th newest of its family among the target's sites.
    fn resolve(&self, fault: &FaultOn) -> Option<ExplicitFault> {
        let mut members: Vec<(u64, FaultSite)> = self
            .target
            .fault_sites(self.env())
            .into_iter()
            .filter_map(|site| {
                let (family, number) = file_family(&site.path);
                (family == fault.family).then_some((number, site))
            })
            .collect();
        members.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.path.cmp(&b.1.path)));
        let (_, site) = members.into_iter().nth(usize::try_from(fault.newest).ok()?)?;
        let path = site.path;
        Some(match fault.action {
            FaultAction::FailNextSync => ExplicitFault::FailNextSync { path },
            FaultAction::FailNextWrite => ExplicitFault::FailNextWrite { path },
            FaultAction::FlipBit { offset } => ExplicitFault::FlipBit { path, offset },
        })
    }

    /// Apply one step: arm a pending crash, run it, recover if a crash cut it, reopen after tolerated errors.
    pub(crate) fn apply(&mut self, step: &Step<T::Op>) -> Result<Observed<T::Observation>, Violation> {
        let armed = self.world.armed.take();
        if let Some((k, shape)) = &armed {
            self.env().set_crash_shape(shape.clone());
            self.env().crash_at_io((*k).max(1));
        }
        let mut observed = match step {
            Step::World(world_step) => self.apply_world(world_step)?,
            Step::Op(op) => self.apply_op(op)?,
        };
        if self.env().is_halted() {
            self.classify_crash(Some(step));
            let (io, path) = self
                .env()
                .last_crash()
                .map(|(io, path)| (io.to_string(), path.display().to_string()))
                .unwrap_or_default();
            self.world.count("crashes");
            self.recover()?;
            observed = Observed::CutByCrash { io, path };
        } else if armed.is_some() {
            self.env().disarm_crash();
        }
        if armed.is_some() {
            self.env().set_crash_shape(None);
        }
        self.world.poll_faults();
        if self.world.reopen_pending && !self.world.unrecoverable {
            self.world.reopen_pending = false;
            self.world.count("reopens");
            self.recover()?;
        }
        assert!(!self.env().is_halted(), "world left halted after a step");
        if let Some(refused) = self.env().refused_thread() {
            // A thread the world did not start called into it (ADR-0169): the run's failure, named.
            std::panic::panic_any(refused);
        }
        // The step's cost is the system's work: the target's own checks after it are not counted against it.
        let io = self.env().step_cost();
        self.step_io = io;
        self.target.check(&mut self.world, Some(&observed))?;
        self.check_cost(Some(step), Some(&observed), io)?;
        Ok(observed)
    }

    fn apply_op(&mut self, op: &T::Op) -> Result<Observed<T::Observation>, Violation> {
        if !self.target.is_open() {
            if self.world.unrecoverable {
                return Ok(self.unavailable());
            }
            if let Observed::Unavailable { reason } = self.recover()? {
                return Ok(Observed::Unavailable { reason });
            }
            if !self.target.is_open() {
                return Ok(self.unavailable());
            }
        }
        self.target.apply(&mut self.world, op)
    }

    fn unavailable(&self) -> Observed<T::Observation> {
        Observed::Unavailable { reason: self.world.last_open_error.clone() }
    }

    fn apply_world(&mut self, step: &WorldStep) -> Result<Observed<T::Observation>, Violation> {
        match step {
            WorldStep::Crash { shape } => {
                // The power stays off while the old system is dropped: none of its threads touches the disk
                // again (ADR-0168); recovery powers the world on. The crash takes the step's shape (ADR-0172).
                self.env().set_crash_shape(shape.clone());
                self.env().cut_power();
                self.env().set_crash_shape(None);
                self.world.count("crashes");
                self.recover()
            }
            WorldStep::CrashAtIo { k, shape } => {
                self.world.armed = Some((*k, shape.clone()));
                Ok(Observed::Armed { k: *k })
            }
            WorldStep::CrashDuringRecovery { k, shape } => {
                self.env().set_crash_shape(shape.clone());
                self.env().cut_power();
                self.world.count("crashes");
                self.target.drop_system();
                self.env().restart();
                self.env().crash_at_io((*k).max(1));
                let opened = self.open_system()?;
                if !opened && self.env().is_halted() {
                    self.world.count("crashes");
                }
                self.env().disarm_crash();
                self.env().set_crash_shape(None);
                self.recover()
            }
            WorldStep::Fault(fault) => {
                self.env().inject(fault.clone());
                Ok(Observed::Injected)
            }
            WorldStep::FaultOn(fault) => match self.resolve(fault) {
                Some(fault) => {
                    self.env().inject(fault);
                    Ok(Observed::Injected)
                }
                None => Ok(Observed::Skipped),
            },
            WorldStep::Reopen => self.reopen(),
            WorldStep::RunTask { name } => Ok(self.run_task(name)),
            WorldStep::Tamper(tamper) => self.apply_tamper(tamper),
        }
    }

    fn reopen(&mut self) -> Result<Observed<T::Observation>, Violation> {
        if self.target.is_open()
            && let Err(error) = self.target.close()
        {
            self.world.tolerate::<T::Observation>("close", &error)?;
        }
        if self.env().is_halted() {
            return Ok(Observed::Skipped);
        }
        self.world.count("reopens");
        self.recover()
    }

    fn run_task(&mut self, name: &str) -> Observed<T::Observation> {
        let Some((id, _)) = self.env().runnable_tasks().into_iter().find(|(_, task)| task == name) else {
            return Observed::Skipped;
        };
        match self.env().step_task(id) {
            Some(step) => Observed::Task { name: name.to_string(), done: step == TaskStep::Done },
            None => Observed::Skipped,
        }
    }

    /// Open the system, retrying failures a fault justifies. `Ok(true)` when open; `Ok(false)` when an armed
    /// crash cut the open (the world is halted) or every attempt failed with a justified error.
    fn open_system(&mut self) -> Result<bool, Violation> {
        assert!(!self.target.is_open(), "open with the system already open");
        for _ in 0..OPEN_ATTEMPTS_MAX {
            self.env().charge_work(1, "open attempt");
            let faults_before = self.world.faults_total();
            match self.target.open(self.world.env()) {
                Ok(()) => {
                    assert!(self.target.is_open(), "Target::open returned Ok but is_open() is false");
                    let faulted = self.world.faults_total() != faults_before;
                    self.world.opened(faulted);
                    self.world.count("opens");
                    return Ok(true);
                }
                Err(_) if self.env().is_halted() => {
                    self.target.drop_system();
                    self.classify_crash(None);
                    return Ok(false);
                }
                Err(error) if !self.world.excuses(&error) => {
                    return Err(Violation::new(
                        "recovery.open",
                        FailureKind::Durability,
                        "the system opens (no fault justifies a failure)",
                        error.message,
                    ));
                }
                Err(error) => {
                    self.target.drop_system();
                    self.world.last_open_error = error.message;
                    self.world.count("errors_tolerated");
                }
            }
        }
        Ok(false)
    }

    /// Recover after a crash or a reopen: restart the world if halted, open (surviving crashes armed inside the
    /// open), then let the target verify.
    fn recover(&mut self) -> Result<Observed<T::Observation>, Violation> {
        self.target.drop_system();
        for _ in 0..RECOVERY_ROUNDS_MAX {
            if self.env().is_halted() {
                self.env().restart();
            }
            if self.open_system()? || !self.env().is_halted() {
                break;
            }
        }
        assert!(!self.env().is_halted() || !self.target.is_open(), "a system open in a halted world");
        if !self.target.is_open() {
            if self.env().is_halted() {
                self.env().restart();
            }
            if self.world.damaged() {
                self.world.unrecoverable = true;
            }
            return Ok(self.unavailable());
        }
        self.world.count("recoveries");
        let verified = self.target.recovered(&mut self.world)?;
        Ok(Observed::Recovered { verified })
    }

    /// Count where an armed crash landed (once per crash).
    fn classify_crash(&mut self, step: Option<&Step<T::Op>>) {
        let crashes = self.env().crash_count();
        if crashes <= self.crashes_classified {
            return;
        }
        self.crashes_classified = crashes;
        let Some((io, path)) = self.env().last_crash() else { return };
        if step.is_none() {
            self.world.count("crash.during_recovery");
        }
        for place in self.target.crash_places(step, io, &path) {
            self.world.count(place);
        }
        self.world.count("crash.armed_fired");
    }

    /// The liveness phase, then a final power cut that must lose nothing acknowledged.
    pub(crate) fn finale(&mut self) -> Result<(), Violation> {
        self.stage = "liveness";
        self.liveness()?;
        if self.world.unrecoverable {
            return Ok(());
        }
        self.stage = "final_crash";
        self.env().set_crash_shape(self.world_config.final_crash.clone());
        self.env().cut_power();
        self.env().set_crash_shape(None);
        self.world.count("crashes");
        self.recover()?;
        if !self.target.is_open() && !self.world.damaged() {
            return Err(Violation::new(
                "liveness.final_recovery",
                FailureKind::Liveness,
                "the system opens after the final crash",
                "it did not",
            ));
        }
        let io = self.env().step_cost();
        self.target.check(&mut self.world, None)?;
        self.check_cost(None, None, io)
    }

    /// The target's cost contract on what the step (or, `None`, the finale) cost ([`Target::check_cost`]).
    fn check_cost(
        &mut self,
        step: Option<&Step<T::Op>>,
        observed: Option<&Observed<T::Observation>>,
        io: env::CostCounters,
    ) -> Result<(), Violation> {
        let run = self.env().cost_total();
        self.target.check_cost(&mut self.world, &StepCost { step, observed, io, run })
    }

    /// Heal faults and BUGGIFY, reopen cleanly, and ask the target whether it is healthy.
    fn liveness(&mut self) -> Result<(), Violation> {
        self.world.armed = None;
        self.env().disarm_crash();
        self.env().set_fault_config(healed_faults(&self.world_config.faults));
        self.env().cancel_pending_faults();
        self.env().set_buggify(false);
        if self.world.unrecoverable {
            return Ok(());
        }
        if self.target.is_open() {
            let _ = self.target.close();
        }
        self.target.drop_system();
        self.world.heal();
        if !self.open_system()? {
            let reason = self.world.last_open_error.clone();
            return self.world.give_up("liveness.open", "the system opens once faults heal", reason);
        }
        self.target.recovered(&mut self.world)?;
        self.target.healthy(&mut self.world)
    }
}

/// Is `path` directly inside `dir`? (For [`Target::fault_sites`] and [`Target::crash_places`].)
pub fn in_dir(path: &Path, dir: &str) -> bool {
    path.parent() == Some(Path::new(dir))
}

/// The file name of `path`, or empty.
pub fn file_name(path: &Path) -> String {
    path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Did an armed crash cut a write (`Op::Write`) or a sync (`Op::Sync`) of a file whose name starts with
/// `prefix`?
pub fn cut_io(io: Op, path: &Path, prefix: &str, wanted: Op) -> bool {
    io == wanted && file_name(path).starts_with(prefix)
}
