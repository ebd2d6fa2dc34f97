//! A test harness for `SimEnv`: random file actions, an independent model of what the simulated disk promises
//! (ADR-0004), and the checks a crash image must pass.
//!
//! The model is written from the documented semantics, not from `env/src/sim/disk.rs`: every file has durable
//! bytes and a list of pending writes and `set_len`s; the directory has a durable and a current namespace. After
//! every action the harness compares the model with the simulator; after every crash it checks the image.

use std::path::{Path, PathBuf};

use env::random::hash_bytes;
use env::{DeterministicRng, Env, Error, File, OpenOptions, SECTOR_SIZE_BYTES, SimEnv, WRITE_ATTEMPTS_MAX};
use proptest::prelude::*;
use proptest::strategy::Union;

mod disk;
pub use disk::*;

/// The directory every generated file lives in. It is created and made durable before any action runs.
pub const DIR: &str = "d";
/// The few names the actions choose among.
pub const FILE_NAMES: [&str; 3] = ["d/a", "d/b", "d/c"];
/// Largest offset a generated write or `set_len` starts at.
pub const OFFSET_MAX: u64 = 6_000;
/// Largest generated write, in bytes.
pub const WRITE_LEN_MAX: usize = 3_000;
/// Up to this many pending operations touching one sector, a crash image is checked against every subset of
/// them; above it, byte by byte against the set of possible values.
const ENUMERATED_OPS_MAX: usize = 10;

const SECTOR: usize = SECTOR_SIZE_BYTES as usize;

pub fn file_path(file: usize) -> PathBuf {
    PathBuf::from(FILE_NAMES[file])
}

/// One step of a generated workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Open with `create` (and maybe `truncate`).
    Create {
        file: usize,
        truncate: bool,
    },
    /// Open (creating the file if missing) and `write_at` until the bytes are all written (short writes
    /// continue); the bytes come from `data_seed`.
    Write {
        file: usize,
        offset: u64,
        len: usize,
        data_seed: u64,
    },
    SetLen {
        file: usize,
        len: u64,
    },
    Sync {
        file: usize,
    },
    SyncDir,
    Rename {
        from: usize,
        to: usize,
    },
    Remove {
        file: usize,
    },
    Read {
        file: usize,
    },
    Crash,
}

impl Action {
    /// The files this action names (a data operation or a metadata operation on them).
    pub fn files(&self) -> Vec<usize> {
        match *self {
            Action::Create { file, .. }
            | Action::Write { file, .. }
            | Action::SetLen { file, .. }
            | Action::Sync { file }
            | Action::Remove { file }
            | Action::Read { file } => vec![file],
            Action::Rename { from, to } => vec![from, to],
            Action::SyncDir | Action::Crash => Vec::new(),
        }
    }
}

/// The bytes of a generated write.
pub fn write_data(data_seed: u64, len: usize) -> Vec<u8> {
    let mut data = vec![0u8; len];
    DeterministicRng::new(data_seed).fill(&mut data);
    data
}

fn offset_strategy() -> BoxedStrategy<u64> {
    prop_oneof![
        0..=OFFSET_MAX,
        // Near sector boundaries, where tearing and zero-filling are most interesting.
        (0u64..12, 0u64..17).prop_map(|(sector, delta)| (sector * SECTOR_SIZE_BYTES + delta).saturating_sub(8)),
    ]
    .boxed()
}

/// One data operation on `file` (write, `set_len`, sync or read).
pub fn data_action_on(file: usize) -> BoxedStrategy<Action> {
    prop_oneof![
        6 => (offset_strategy(), 1..=WRITE_LEN_MAX, any::<u64>())
            .prop_map(move |(offset, len, data_seed)| Action::Write { file, offset, len, data_seed }),
        1 => offset_strategy().prop_map(move |len| Action::SetLen { file, len }),
        3 => Just(Action::Sync { file }),
        1 => Just(Action::Read { file }),
    ]
    .boxed()
}

/// What a generated workload may contain.
#[derive(Clone, Copy, Debug)]
pub struct Mix {
    pub crash_weight: u32,
    pub rename_remove_weight: u32,
}

pub fn action_strategy(mix: Mix) -> BoxedStrategy<Action> {
    let files = FILE_NAMES.len();
    let mut choices: Vec<(u32, BoxedStrategy<Action>)> = vec![
        (3, (0..files, any::<bool>()).prop_map(|(file, truncate)| Action::Create { file, truncate }).boxed()),
        (11, (0..files).prop_flat_map(data_action_on).boxed()),
        (2, Just(Action::SyncDir).boxed()),
    ];
    if mix.rename_remove_weight > 0 {
        choices.push((
            mix.rename_remove_weight,
            (0..files, 0..files).prop_map(|(from, to)| Action::Rename { from, to }).boxed(),
        ));
        choices.push((mix.rename_remove_weight, (0..files).prop_map(|file| Action::Remove { file }).boxed()));
    }
    if mix.crash_weight > 0 {
        choices.push((mix.crash_weight, Just(Action::Crash).boxed()));
    }
    Union::new_weighted(choices).boxed()
}

pub fn actions(len: std::ops::RangeInclusive<usize>, mix: Mix) -> BoxedStrategy<Vec<Action>> {
    proptest::collection::vec(action_strategy(mix), len).boxed()
}

// ---- the harness -------------------------------------------------------------------------------------------------

/// Which crash checks the harness runs at an explicit [`Action::Crash`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashCheck {
    SyncedSurvived,
    NothingInvented,
    Both,
}

/// Runs actions on a `SimEnv`, keeps a transcript, and (with a model) checks the simulator against the model.
#[derive(Debug)]
pub struct Harness {
    pub env: SimEnv,
    pub model: Option<Model>,
    pub check: CrashCheck,
    /// One line per action: what it was and what it returned.
    pub transcript: Vec<String>,
    /// How many synced files the crash checks compared byte for byte.
    pub synced_files_compared: usize,
}

/// Create the directory and make it durable: the starting state of every workload.
pub fn setup(env: &SimEnv) {
    env.create_dir_all(Path::new(DIR)).expect("create the test directory");
    env.sync_dir(Path::new("")).expect("make the test directory durable");
}

impl Harness {
    /// A harness that checks the simulator against the model (faults must not corrupt data).
    pub fn checked(env: SimEnv, check: CrashCheck) -> Self {
        setup(&env);
        Self { env, model: Some(Model::default()), check, transcript: Vec::new(), synced_files_compared: 0 }
    }

    /// A harness that only runs actions and records what they returned (any faults).
    pub fn unchecked(env: SimEnv) -> Self {
        setup(&env);
        Self { env, model: None, check: CrashCheck::Both, transcript: Vec::new(), synced_files_compared: 0 }
    }

    /// Run one action. Errors the faults explain (and crashes from `crash_at_io`) are returned; a disagreement
    /// with the model panics.
    pub fn apply(&mut self, action: &Action) -> Result<(), Error> {
        let result = self.execute(action);
        let line = match &result {
            Ok(observed) => format!("{action:?} -> ok {observed}"),
            Err(error) => format!("{action:?} -> error {error}"),
        };
        self.transcript.push(line);
        let crashed = result.as_ref().is_err_and(Error::is_crash);
        if let Some(model) = &self.model
            && !crashed
            && let Err(why) = model.verify(&self.env)
        {
            panic!("after {action:?}: {why}\ntranscript:\n{}", self.transcript.join("\n"));
        }
        result.map(|_| ())
    }

    /// Run the crash checks on the current disk (just after a crash) against the model of just before it, then
    /// rebuild the model from the crash image.
    pub fn check_crash(&mut self) -> Result<(), String> {
        let Some(model) = &self.model else { return Ok(()) };
        for report in dir_files(&self.env) {
            if report.pending_operations != 0 || report.durable_len != Some(report.current_len) {
                return Err(format!("after a crash everything is durable, but {report:?}"));
            }
        }
        let after = disk_files(&self.env);
        if matches!(self.check, CrashCheck::SyncedSurvived | CrashCheck::Both) {
            self.synced_files_compared += model.check_synced_survived(&after)?;
        }
        if matches!(self.check, CrashCheck::NothingInvented | CrashCheck::Both) {
            model.check_nothing_invented(&after)?;
        }
        self.model = Some(Model::rebuild(&self.env));
        Ok(())
    }

    fn model_has(&self, path: &Path) -> Option<bool> {
        self.model.as_ref().map(|model| model.current.contains_key(path))
    }

    /// Open `path`; a NotFound must agree with the model. `Ok(None)`: the file does not exist.
    fn open(&self, path: &Path, options: OpenOptions) -> Result<Option<env::sim::SimFile>, Error> {
        match self.env.open(path, options) {
            Ok(handle) => {
                assert_ne!(self.model_has(path), Some(false), "opened {} that the model lacks", path.display());
                Ok(Some(handle))
            }
            Err(error) if error.is_not_found() => {
                assert_ne!(self.model_has(path), Some(true), "{} not found but the model has it", path.display());
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    fn execute(&mut self, action: &Action) -> Result<String, Error> {
        match *action {
            Action::Create { file, truncate } => {
                let path = file_path(file);
                let existed = self.env.exists(&path)?;
                if let Some(has) = self.model_has(&path) {
                    assert_eq!(has, existed, "exists({}) disagrees with the model", path.display());
                }
                let options = OpenOptions { create: true, write: true, truncate, create_new: false };
                let handle = self.env.open(&path, options)?;
                let was_empty = handle.is_empty()?;
                if let Some(model) = &mut self.model {
                    if !existed {
                        model.create(&path);
                    } else if truncate && model.inode_at(&path).is_some_and(|inode| !inode.current.is_empty()) {
                        model.set_len(&path, 0);
                    }
                }
                Ok(format!("existed {existed} empty {was_empty}"))
            }
            Action::Write { file, offset, len, data_seed } => {
                let path = file_path(file);
                let existed = self.env.exists(&path)?;
                let handle =
                    self.env.open(&path, OpenOptions { create: true, write: true, ..OpenOptions::default() })?;
                if let Some(model) = &mut self.model
                    && !existed
                {
                    model.create(&path);
                }
                let data = write_data(data_seed, len);
                let mut done = 0usize;
                let mut attempts = 0u32;
                while done < len && attempts < WRITE_ATTEMPTS_MAX {
                    attempts += 1;
                    let at = offset + done as u64;
                    let count = handle.write_at(at, &data[done..])?;
                    assert!(count > 0 && count <= len - done, "write_at wrote {count} of {}", len - done);
                    if let Some(model) = &mut self.model {
                        model.write(&path, at, &data[done..done + count]);
                    }
                    done += count;
                }
                Ok(format!("wrote {done} in {attempts} calls"))
            }
            Action::SetLen { file, len } => {
                let path = file_path(file);
                let Some(handle) = self.open(&path, OpenOptions::read_write())? else { return Ok("absent".into()) };
                handle.set_len(len)?;
                if let Some(model) = &mut self.model {
                    model.set_len(&path, len);
                }
                Ok(String::new())
            }
            Action::Sync { file } => {
                let path = file_path(file);
                let Some(handle) = self.open(&path, OpenOptions::read())? else { return Ok("absent".into()) };
                match handle.sync() {
                    Ok(()) => {
                        if let Some(model) = &mut self.model {
                            model.sync_succeeded(&path);
                        }
                        Ok(String::new())
                    }
                    Err(error) => {
                        if !error.is_crash()
                            && let Some(model) = &mut self.model
                        {
                            model.sync_failed(&path);
                        }
                        Err(error)
                    }
                }
            }
            Action::SyncDir => {
                self.env.sync_dir(Path::new(DIR))?;
                if let Some(model) = &mut self.model {
                    model.sync_dir();
                }
                Ok(String::new())
            }
            Action::Rename { from, to } => {
                let (from, to) = (file_path(from), file_path(to));
                match self.env.rename(&from, &to) {
                    Ok(()) => {
                        if let Some(model) = &mut self.model {
                            model.rename(&from, &to);
                        }
                        Ok(String::new())
                    }
                    Err(error) if error.is_not_found() => {
                        assert_ne!(self.model_has(&from), Some(true), "rename source {} not found", from.display());
                        Ok("absent".into())
                    }
                    Err(error) => Err(error),
                }
            }
            Action::Remove { file } => {
                let path = file_path(file);
                match self.env.remove_file(&path) {
                    Ok(()) => {
                        if let Some(model) = &mut self.model {
                            model.remove(&path);
                        }
                        Ok(String::new())
                    }
                    Err(error) if error.is_not_found() => {
                        assert_ne!(self.model_has(&path), Some(true), "{} not found for remove", path.display());
                        Ok("absent".into())
                    }
                    Err(error) => Err(error),
                }
            }
            Action::Read { file } => {
                let path = file_path(file);
                let Some(handle) = self.open(&path, OpenOptions::read())? else { return Ok("absent".into()) };
                let bytes = handle.read_all()?;
                if let Some(model) = &self.model {
                    let expected = &model.inode_at(&path).expect("model has the file").current;
                    assert!(bytes == *expected, "read of {} differs from the model", path.display());
                }
                Ok(format!("{} bytes, hash {:016x}", bytes.len(), hash_bytes(&bytes)))
            }
            Action::Crash => {
                self.env.crash();
                if let Err(why) = self.check_crash() {
                    panic!("after a crash: {why}\ntranscript:\n{}", self.transcript.join("\n"));
                }
                Ok(format!("digest {:016x}", self.env.disk_digest()))
            }
        }
    }
}

#[test]
fn legal_image_accepts_crash_outcomes_and_rejects_inventions() {
    let inode = Inode {
        durable: vec![1; 1000],
        pending: vec![Pending::Write { offset: 500, data: vec![2; 600] }, Pending::SetLen { len: 300 }],
        current: Vec::new(),
    };
    let mut torn = vec![1u8; 1100];
    torn[512..1024].fill(2);
    torn[1024..].fill(2);
    let mut whole = vec![1u8; 1100];
    whole[500..].fill(2);
    for legal in [vec![1u8; 1000], vec![1u8; 300], torn.clone(), whole] {
        assert_eq!(legal_image(&inode, &legal), Ok(()));
    }
    // A byte nobody wrote; a sector half old and half new; a length nothing produces.
    let mut invented = vec![1u8; 1000];
    invented[10] = 9;
    let mut half_sector = torn;
    half_sector[600..700].fill(1);
    for illegal in [invented, half_sector, vec![1u8; 700]] {
        assert!(legal_image(&inode, &illegal).is_err(), "accepted an illegal image of {} bytes", illegal.len());
    }
}
