//! Generating and applying engine steps.

use std::collections::BTreeMap;
use std::hash::Hasher;

use env::{DeterministicRng, StableHasher};

use super::model::{ValueSpec, key_bytes, parse_key, sig_of, value_bytes};
use super::step::{Action, Observed, Step};
use super::{Activity, EngineTarget, explicit_fault, in_db_dir};
use crate::config::SwarmConfig;
use crate::target::{FailureKind, Violation};

/// A stable class name of an engine error, for observations and digests.
fn error_class(error: &engine::Error) -> String {
    match error {
        engine::Error::Env(inner) => {
            let kind = format!("{inner:?}");
            let kind = kind.split([' ', '{', '(']).next().unwrap_or("env").to_lowercase();
            format!("env_{kind}_{}", inner.op())
        }
        engine::Error::Corruption { .. } => "corruption".into(),
        engine::Error::Locked { .. } => "locked".into(),
        engine::Error::Closed { .. } => "closed".into(),
        engine::Error::InvalidArgument { .. } => "invalid_argument".into(),
        engine::Error::Conflict { .. } => "conflict".into(),
        _ => "other".into(),
    }
}

impl EngineTarget {
    /// The next step: an action drawn by the swarm weights, made concrete from the current state.
    pub(super) fn generate_step(&mut self, rng: &mut DeterministicRng, config: &SwarmConfig) -> Step {
        let workload = &config.workload;
        let action = match rng.weighted(&config.weights.as_array()) {
            0 => {
                let value = ValueSpec { id: self.next_value_id, len: workload.pick_value_len_bytes(rng) };
                self.next_value_id += 1;
                Action::Put { key: workload.pick_key(rng), value }
            }
            1 => Action::Delete { key: workload.pick_key(rng) },
            2 => Action::Get { key: workload.pick_key(rng) },
            3 => {
                let start = workload.pick_key(rng);
                let keys =
                    u32::try_from(rng.range_inclusive(1, u64::from(workload.scan_keys_max.max(1)))).expect("fits");
                Action::Scan { start, end: start.saturating_add(keys) }
            }
            4 => Action::Flush,
            5 => Action::Compact,
            6 => {
                let runnable = self.env.runnable_tasks();
                if runnable.is_empty() {
                    Action::Get { key: workload.pick_key(rng) }
                } else {
                    Action::RunTask { name: runnable[rng.index(runnable.len())].1.clone() }
                }
            }
            7 => Action::Reopen,
            8 => self.generate_fault(rng, config),
            9 => Action::Crash,
            10 => Action::CrashAtIo { k: rng.range_inclusive(1, config.crash_at_io_k_max.max(1)) },
            _ => Action::CrashDuringRecovery { k: rng.range_inclusive(1, config.recovery_crash_k_max.max(1)) },
        };
        Step::new(action)
    }

    fn generate_fault(&mut self, rng: &mut DeterministicRng, config: &SwarmConfig) -> Action {
        let files: Vec<_> =
            self.env.files().into_iter().filter(|file| in_db_dir(&file.path) && !file.path.ends_with("LOCK")).collect();
        if files.is_empty() {
            return Action::Get { key: config.workload.pick_key(rng) };
        }
        let file = &files[rng.index(files.len())];
        Action::Fault(explicit_fault(rng, &file.path, file.current_len))
    }

    /// Apply one step: arm a pending crash, run the action, recover if a crash cut it, reopen after errors.
    pub(super) fn apply_step(&mut self, step: &Step) -> Result<Observed, Violation> {
        let armed = self.armed.take();
        if let Some(k) = armed {
            self.env.crash_at_io(k.max(1));
        }
        let activity = match &step.action {
            Action::Flush => Activity::Flush,
            Action::Compact => Activity::Compaction,
            Action::RunTask { name } if name == "compaction" => Activity::Compaction,
            Action::RunTask { .. } => Activity::Flush,
            _ => Activity::Client,
        };
        let mut observed = self.apply_action(&step.action)?;
        if self.env.is_halted() {
            self.classify_crash(activity);
            let (op, path) = self
                .env
                .last_crash()
                .map(|(op, path)| (op.to_string(), path.display().to_string()))
                .unwrap_or_default();
            self.count("crashes");
            self.recover()?;
            observed = Observed::CutByCrash { op, path };
        } else if armed.is_some() {
            self.env.disarm_crash();
        }
        self.structure_dirty |= !matches!(observed, Observed::Value { .. } | Observed::Scan { .. });
        self.poll_faults();
        if self.reopen_pending && !self.unrecoverable {
            self.reopen_pending = false;
            self.count("reopens");
            self.recover()?;
        }
        assert!(!self.env.is_halted(), "world left halted after a step");
        Ok(observed)
    }

    fn apply_action(&mut self, action: &Action) -> Result<Observed, Violation> {
        match action {
            Action::Put { key, value } => self.write(*key, Some(*value)),
            Action::Delete { key } => self.write(*key, None),
            Action::Get { key } => self.get(*key),
            Action::Scan { start, end } => self.scan(*start, *end),
            Action::Flush => self.call("flush", |db| db.flush()),
            Action::Compact => self.call("compact", |db| db.compact()),
            Action::RunTask { name } => Ok(self.run_task(name)),
            Action::Crash => {
                self.env.crash();
                self.count("crashes");
                self.recover()
            }
            Action::CrashAtIo { k } => {
                self.armed = Some(*k);
                Ok(Observed::Armed { k: *k })
            }
            Action::CrashDuringRecovery { k } => {
                self.env.crash();
                self.count("crashes");
                self.drop_db();
                self.env.crash_at_io((*k).max(1));
                let opened = self.open_db()?;
                if !opened && self.env.is_halted() {
                    self.count("crashes");
                }
                self.env.disarm_crash();
                self.recover()
            }
            Action::Fault(fault) => {
                self.env.inject(fault.clone());
                Ok(Observed::Injected)
            }
            Action::Reopen => {
                if let Some(db) = &self.db
                    && let Err(error) = db.close()
                {
                    self.tolerate(&error, "close")?;
                }
                if self.env.is_halted() {
                    return Ok(Observed::Skipped);
                }
                self.count("reopens");
                self.recover()
            }
        }
    }

    /// Open the database if a fault left it closed. False when it still cannot be opened.
    fn ensure_db(&mut self) -> Result<bool, Violation> {
        if self.db.is_some() {
            return Ok(true);
        }
        if self.unrecoverable {
            return Ok(false);
        }
        let opened = self.recover()?;
        Ok(!matches!(opened, Observed::Unavailable { .. }) && self.db.is_some())
    }

    fn unavailable(&self) -> Observed {
        Observed::Unavailable { reason: self.last_open_error.clone() }
    }

    /// An engine call failed: allowed (and observed) only when a fault or a crash justifies it.
    fn tolerate(&mut self, error: &engine::Error, what: &str) -> Result<Observed, Violation> {
        if self.env.is_halted() {
            return Ok(Observed::Error { class: "crashed".into() });
        }
        if self.error_allowed(error) {
            self.count("errors_tolerated");
            self.reopen_pending = true;
            return Ok(Observed::Error { class: error_class(error) });
        }
        Err(Violation::new(
            format!("no_unexpected_error.{what}"),
            FailureKind::UnexpectedError,
            "Ok (no fault or crash justifies an error)",
            error.to_string(),
        ))
    }

    fn call(
        &mut self,
        what: &str,
        f: impl FnOnce(&engine::Db<env::SimEnv>) -> engine::Result<()>,
    ) -> Result<Observed, Violation> {
        if !self.ensure_db()? {
            return Ok(self.unavailable());
        }
        let result = f(self.db.as_ref().expect("ensured"));
        match result {
            Ok(()) => Ok(Observed::Ok),
            Err(error) => self.tolerate(&error, what),
        }
    }

    fn write(&mut self, key: u32, value: Option<ValueSpec>) -> Result<Observed, Violation> {
        if !self.ensure_db()? {
            return Ok(self.unavailable());
        }
        let bytes = value.map(value_bytes);
        let sig = match (value, &bytes) {
            (Some(spec), Some(bytes)) => Some(self.model.register(spec, bytes)),
            _ => None,
        };
        let db = self.db.as_ref().expect("ensured");
        let result = match &bytes {
            Some(bytes) => db.put(&key_bytes(key), bytes),
            None => db.delete(&key_bytes(key)),
        };
        match result {
            Ok(()) => {
                self.model.ack(key, sig);
                let sequence = db.last_sequence();
                if sequence <= self.max_acked_sequence && !self.damaged {
                    return Err(Violation::new(
                        "sequence_monotonic",
                        FailureKind::Safety,
                        format!("a new write's sequence > {}", self.max_acked_sequence),
                        sequence.to_string(),
                    ));
                }
                self.max_acked_sequence = sequence;
                Ok(Observed::Ok)
            }
            Err(error) => {
                self.model.in_flight(key, sig);
                self.count("in_flight_writes");
                self.tolerate(&error, if value.is_some() { "put" } else { "delete" })
            }
        }
    }

    fn get(&mut self, key: u32) -> Result<Observed, Violation> {
        if !self.ensure_db()? {
            return Ok(self.unavailable());
        }
        match self.db.as_ref().expect("ensured").get(&key_bytes(key)) {
            Ok(value) => {
                let actual = value.as_deref().map(sig_of);
                self.model.observe(key, actual, self.damaged, "oracle")?;
                Ok(Observed::Value { value: actual.and_then(|sig| self.model.spec(sig)) })
            }
            Err(error) => self.tolerate(&error, "get"),
        }
    }

    fn scan(&mut self, start: u32, end: u32) -> Result<Observed, Violation> {
        if start >= end {
            return Ok(Observed::Skipped);
        }
        if !self.ensure_db()? {
            return Ok(self.unavailable());
        }
        let entries = match self.db.as_ref().expect("ensured").scan(&key_bytes(start), &key_bytes(end)) {
            Ok(entries) => entries,
            Err(error) => return self.tolerate(&error, "scan"),
        };
        let mut found: BTreeMap<u32, u64> = BTreeMap::new();
        let mut hasher = StableHasher::new();
        let mut previous: Option<&[u8]> = None;
        for (key, value) in &entries {
            let parsed = parse_key(key).filter(|index| (start..end).contains(index));
            let ordered = previous.is_none_or(|previous| previous < key.as_slice());
            let Some(index) = parsed.filter(|_| ordered) else {
                return Err(Violation::new(
                    "oracle.scan_shape",
                    FailureKind::Safety,
                    format!("keys strictly ascending within [k{start:06}, k{end:06})"),
                    format!(
                        "key {:?} (after {:?})",
                        String::from_utf8_lossy(key),
                        previous.map(String::from_utf8_lossy)
                    ),
                ));
            };
            previous = Some(key);
            hasher.write(key);
            hasher.write(value);
            found.insert(index, sig_of(value));
        }
        let mut keys = self.model.known_keys_in(start, end);
        keys.extend(found.keys().copied());
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            self.model.observe(key, found.get(&key).copied(), self.damaged, "oracle")?;
        }
        Ok(Observed::Scan { entries: entries.len() as u64, hash: hasher.finish() })
    }

    fn run_task(&mut self, name: &str) -> Observed {
        let Some((id, _)) = self.env.runnable_tasks().into_iter().find(|(_, task)| task == name) else {
            return Observed::Skipped;
        };
        match self.env.step_task(id) {
            Some(step) => Observed::Task { name: name.to_string(), done: step == env::TaskStep::Done },
            None => Observed::Skipped,
        }
    }
}
