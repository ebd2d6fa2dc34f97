//! A test harness for `SimEnv`: random file actions, an independent model of what the simulated disk promises
//! (ADR-0004), and the checks a crash image must pass.
//!
//! The model is written from the documented semantics, not from `env/src/sim/disk.rs`: every file has durable
//! bytes and a list of pending writes and `set_len`s; the directory has a durable and a current namespace. After
//! every action the harness compares the model with the simulator; after every crash it checks the image.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use env::random::hash_bytes;
use env::{DeterministicRng, Env, Error, File, OpenOptions, SECTOR_SIZE_BYTES, SimEnv, WRITE_ATTEMPTS_MAX};
use proptest::prelude::*;
use proptest::strategy::Union;

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

// ---- the model ---------------------------------------------------------------------------------------------------

/// A data operation not yet made durable by the file's sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pending {
    Write { offset: u64, data: Vec<u8> },
    SetLen { len: u64 },
}

impl Pending {
    /// True when applying or dropping this operation can change a byte in `start..end`.
    fn affects(&self, start: usize, end: usize) -> bool {
        match self {
            Pending::Write { offset, data } => {
                let offset = to_usize(*offset);
                offset < end && offset + data.len() > start
            }
            Pending::SetLen { len } => to_usize(*len) < end,
        }
    }
}

fn to_usize(value: u64) -> usize {
    usize::try_from(value).expect("test sizes fit in memory")
}

/// One file (inode) of the model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inode {
    pub durable: Vec<u8>,
    pub pending: Vec<Pending>,
    pub current: Vec<u8>,
}

fn write_into(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = to_usize(offset);
    if image.len() < start + data.len() {
        image.resize(start + data.len(), 0);
    }
    image[start..start + data.len()].copy_from_slice(data);
}

/// A create, remove or rename not yet made durable by `sync_dir`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaOp {
    Create { path: PathBuf, id: u64 },
    Remove { path: PathBuf },
    Rename { from: PathBuf, to: PathBuf },
}

type Namespace = BTreeMap<PathBuf, u64>;

impl MetaOp {
    /// The namespace after this operation, applied during crash recovery: an operation an earlier dropped
    /// operation made inapplicable (a rename whose source is missing) does nothing.
    fn apply(&self, namespace: &Namespace) -> Namespace {
        let mut next = namespace.clone();
        match self {
            MetaOp::Create { path, id } => {
                next.insert(path.clone(), *id);
            }
            MetaOp::Remove { path } => {
                next.remove(path);
            }
            MetaOp::Rename { from, to } => {
                if let Some(id) = next.remove(from) {
                    next.insert(to.clone(), id);
                }
            }
        }
        next
    }
}

/// The model of one directory of the simulated disk.
#[derive(Clone, Debug, Default)]
pub struct Model {
    pub inodes: BTreeMap<u64, Inode>,
    next_inode: u64,
    pub current: BTreeMap<PathBuf, u64>,
    pub durable: BTreeMap<PathBuf, u64>,
    /// Paths named by a create, remove or rename since the last `sync_dir`.
    pub touched: BTreeSet<PathBuf>,
    /// Those operations, in order.
    pub pending_meta: Vec<MetaOp>,
}

impl Model {
    pub fn inode_at(&self, path: &Path) -> Option<&Inode> {
        self.current.get(path).map(|id| &self.inodes[id])
    }

    fn id_at(&self, path: &Path) -> u64 {
        *self.current.get(path).unwrap_or_else(|| panic!("model has no file {}", path.display()))
    }

    fn inode_mut(&mut self, path: &Path) -> &mut Inode {
        let id = self.id_at(path);
        self.inodes.get_mut(&id).expect("named inode exists")
    }

    fn create(&mut self, path: &Path) {
        let id = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(id, Inode::default());
        self.current.insert(path.to_path_buf(), id);
        self.touched.insert(path.to_path_buf());
        self.pending_meta.push(MetaOp::Create { path: path.to_path_buf(), id });
    }

    fn write(&mut self, path: &Path, offset: u64, data: &[u8]) {
        let inode = self.inode_mut(path);
        write_into(&mut inode.current, offset, data);
        inode.pending.push(Pending::Write { offset, data: data.to_vec() });
    }

    fn set_len(&mut self, path: &Path, len: u64) {
        let inode = self.inode_mut(path);
        inode.current.resize(to_usize(len), 0);
        inode.pending.push(Pending::SetLen { len });
    }

    fn sync_succeeded(&mut self, path: &Path) {
        let inode = self.inode_mut(path);
        inode.durable = inode.current.clone();
        inode.pending.clear();
    }

    /// Linux after a failed fsync: the unsynced data is gone.
    fn sync_failed(&mut self, path: &Path) {
        let inode = self.inode_mut(path);
        inode.current = inode.durable.clone();
        inode.pending.clear();
    }

    fn sync_dir(&mut self) {
        self.durable = self.current.clone();
        self.touched.clear();
        self.pending_meta.clear();
        let named: BTreeSet<u64> = self.current.values().copied().collect();
        self.inodes.retain(|id, _| named.contains(id));
    }

    fn rename(&mut self, from: &Path, to: &Path) {
        let id = self.current.remove(from).expect("renamed file exists");
        self.current.insert(to.to_path_buf(), id);
        self.touched.insert(from.to_path_buf());
        self.touched.insert(to.to_path_buf());
        self.pending_meta.push(MetaOp::Rename { from: from.to_path_buf(), to: to.to_path_buf() });
    }

    fn remove(&mut self, path: &Path) {
        self.current.remove(path).expect("removed file exists");
        self.touched.insert(path.to_path_buf());
        self.pending_meta.push(MetaOp::Remove { path: path.to_path_buf() });
    }

    /// The model of the world right after a crash: whatever the simulator now holds is durable.
    pub fn rebuild(env: &SimEnv) -> Self {
        let mut model = Model::default();
        for (path, bytes) in disk_files(env) {
            let id = model.next_inode;
            model.next_inode += 1;
            model.inodes.insert(id, Inode { durable: bytes.clone(), pending: Vec::new(), current: bytes });
            model.current.insert(path.clone(), id);
            model.durable.insert(path, id);
        }
        model
    }

    /// The simulator agrees with the model: names, current bytes, durable bytes, pending operations.
    pub fn verify(&self, env: &SimEnv) -> Result<(), String> {
        let reports = dir_files(env);
        let names: Vec<&PathBuf> = reports.iter().map(|report| &report.path).collect();
        let expected: Vec<&PathBuf> = self.current.keys().collect();
        if names != expected {
            return Err(format!("namespace {names:?}, model expects {expected:?}"));
        }
        for report in &reports {
            let id = self.current[&report.path];
            let inode = &self.inodes[&id];
            let current = env.read_current(&report.path).expect("listed file has bytes");
            if current != inode.current {
                return Err(format!("{}: current bytes differ from the model", report.path.display()));
            }
            let durably_named = self.durable.get(&report.path) == Some(&id);
            let durable_len = durably_named.then_some(inode.durable.len() as u64);
            if report.durable_len != durable_len || report.pending_operations != inode.pending.len() {
                return Err(format!("{report:?} but the model has durable_len {durable_len:?}, {inode:?}"));
            }
        }
        for name in FILE_NAMES {
            let path = Path::new(name);
            let expected = self.durable.get(path).map(|id| &self.inodes[id].durable);
            if env.read_durable(path).as_ref() != expected {
                return Err(format!("{name}: durable bytes differ from the model"));
            }
        }
        Ok(())
    }

    /// Property (a): every file whose name was durable and untouched since, survives the crash; if it had no
    /// pending data (nothing written or resized since its last successful sync), its bytes are exactly the
    /// synced bytes. Returns how many files were compared byte for byte.
    pub fn check_synced_survived(&self, after: &BTreeMap<PathBuf, Vec<u8>>) -> Result<usize, String> {
        let mut compared = 0;
        for (path, id) in &self.durable {
            if self.touched.contains(path) {
                continue;
            }
            let Some(bytes) = after.get(path) else {
                return Err(format!("{} was durably named and untouched, but is gone after the crash", path.display()));
            };
            let inode = &self.inodes[id];
            if inode.pending.is_empty() {
                if let Some(offset) = first_difference(bytes, &inode.durable) {
                    return Err(format!(
                        "{}: synced file changed by the crash at offset {offset} (len {} vs synced {})",
                        path.display(),
                        bytes.len(),
                        inode.durable.len()
                    ));
                }
                compared += 1;
            }
        }
        Ok(compared)
    }

    /// Every namespace a crash can leave: each pending metadata operation kept or dropped, the kept ones applied
    /// in order to the durable namespace.
    pub fn crash_namespaces(&self) -> BTreeSet<Namespace> {
        let mut namespaces = BTreeSet::from([self.durable.clone()]);
        for op in &self.pending_meta {
            let applied: Vec<Namespace> = namespaces.iter().map(|namespace| op.apply(namespace)).collect();
            namespaces.extend(applied);
        }
        namespaces
    }

    /// Property (b): nothing is invented. Some namespace a crash can leave (see [`Model::crash_namespaces`]) has
    /// exactly the names found, and every file found is a legal crash image (see [`legal_image`]) of the file
    /// that namespace puts there.
    pub fn check_nothing_invented(&self, after: &BTreeMap<PathBuf, Vec<u8>>) -> Result<(), String> {
        let namespaces = self.crash_namespaces();
        let mut legal: BTreeMap<(PathBuf, u64), bool> = BTreeMap::new();
        let mut explained = |namespace: &Namespace| {
            namespace.keys().eq(after.keys())
                && namespace.iter().all(|(path, &id)| {
                    *legal
                        .entry((path.clone(), id))
                        .or_insert_with(|| legal_image(&self.inodes[&id], &after[path]).is_ok())
                })
        };
        if namespaces.iter().any(&mut explained) {
            return Ok(());
        }
        let found: Vec<(&PathBuf, usize)> = after.iter().map(|(path, bytes)| (path, bytes.len())).collect();
        let why: Vec<String> = namespaces
            .iter()
            .filter(|namespace| namespace.keys().eq(after.keys()))
            .flat_map(|namespace| {
                namespace.iter().filter_map(|(path, id)| {
                    legal_image(&self.inodes[id], &after[path])
                        .err()
                        .map(|why| format!("{} as file {id}: {why}", path.display()))
                })
            })
            .collect();
        Err(format!(
            "no crash outcome explains {found:?}; possible namespaces {namespaces:?}; rejected: {why:?}; \
             pending metadata {:?}",
            self.pending_meta
        ))
    }
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    if a.len() != b.len() {
        return Some(a.len().min(b.len()));
    }
    a.iter().zip(b).position(|(x, y)| x != y)
}

/// The files of the simulated disk in [`DIR`] (the workload's directory).
pub fn dir_files(env: &SimEnv) -> Vec<env::FileReport> {
    env.files().into_iter().filter(|report| report.path.parent() == Some(Path::new(DIR))).collect()
}

/// Every file of the workload's directory and its bytes.
pub fn disk_files(env: &SimEnv) -> BTreeMap<PathBuf, Vec<u8>> {
    dir_files(env)
        .into_iter()
        .map(|report| {
            let bytes = env.read_current(&report.path).expect("listed file has bytes");
            (report.path, bytes)
        })
        .collect()
}

/// `(offset, length)` of each piece of a write, split at absolute sector boundaries.
pub fn sector_pieces(offset: u64, len: usize) -> Vec<(u64, usize)> {
    let mut pieces = Vec::new();
    let mut position = to_usize(offset);
    let end = position + len;
    while position < end {
        let take = (SECTOR - position % SECTOR).min(end - position);
        pieces.push((position as u64, take));
        position += take;
    }
    pieces
}

/// Is `image` what a crash can leave of `inode`? The crash keeps or drops each pending `set_len`, and keeps,
/// drops or tears each pending write, where a torn write keeps or drops each of its sectors whole; the kept
/// operations apply in order to the durable bytes, and extending a file zero-fills. So:
/// * the length is the durable length, a pending `set_len`'s length, or the end of a sector piece of a write;
/// * each sector's bytes are what some subset of the pending operations touching it makes of the durable bytes,
///   where a write lands in that sector all or nothing (checked exactly when few operations touch the sector, and
///   byte by byte — durable byte, a pending write's byte, or a zero where the file was shorter — otherwise).
pub fn legal_image(inode: &Inode, image: &[u8]) -> Result<(), String> {
    let mut lengths = BTreeSet::from([inode.durable.len()]);
    for op in &inode.pending {
        match op {
            Pending::SetLen { len } => {
                lengths.insert(to_usize(*len));
            }
            Pending::Write { offset, data } => {
                for (piece, len) in sector_pieces(*offset, data.len()) {
                    lengths.insert(to_usize(piece) + len);
                }
            }
        }
    }
    if !lengths.contains(&image.len()) {
        return Err(format!("length {} is not a possible crash length {lengths:?}", image.len()));
    }
    for start in (0..image.len()).step_by(SECTOR) {
        let end = (start + SECTOR).min(image.len());
        if !sector_is_legal(inode, image, start, end) {
            return Err(format!("sector at {start} is no all-or-nothing mix of the pending writes"));
        }
    }
    Ok(())
}

fn sector_is_legal(inode: &Inode, image: &[u8], start: usize, end: usize) -> bool {
    let relevant: Vec<&Pending> = inode.pending.iter().filter(|op| op.affects(start, end)).collect();
    if relevant.len() > ENUMERATED_OPS_MAX {
        return (start..end).all(|position| byte_is_possible(inode, &relevant, image[position], position));
    }
    let mut buf: Vec<Option<u8>> = vec![None; end - start];
    (0u32..1 << relevant.len()).any(|mask| {
        for (index, slot) in buf.iter_mut().enumerate() {
            *slot = inode.durable.get(start + index).copied();
        }
        for (bit, op) in relevant.iter().enumerate() {
            if (mask >> bit) & 1 == 0 {
                continue;
            }
            match op {
                Pending::Write { offset, data } => {
                    let offset = to_usize(*offset);
                    for position in offset.max(start)..(offset + data.len()).min(end) {
                        buf[position - start] = Some(data[position - offset]);
                    }
                }
                Pending::SetLen { len } => {
                    for slot in &mut buf[to_usize(*len).max(start) - start..] {
                        *slot = None;
                    }
                }
            }
        }
        // A position that was past the end and is inside the file now was zero-filled by an extension.
        buf.iter().zip(&image[start..end]).all(|(value, &byte)| value.unwrap_or(0) == byte)
    })
}

fn byte_is_possible(inode: &Inode, relevant: &[&Pending], byte: u8, position: usize) -> bool {
    let was_short = position >= inode.durable.len()
        || relevant.iter().any(|op| matches!(op, Pending::SetLen { len } if to_usize(*len) <= position));
    (was_short && byte == 0)
        || inode.durable.get(position) == Some(&byte)
        || relevant.iter().any(|op| match op {
            Pending::Write { offset, data } => {
                let offset = to_usize(*offset);
                position >= offset && data.get(position - offset) == Some(&byte)
            }
            Pending::SetLen { .. } => false,
        })
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
