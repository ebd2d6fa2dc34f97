//! The model of one directory of the simulated disk, written from the documented semantics (ADR-0004), and the
//! check that a crash image is one a crash can leave.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::*;

/// A data operation not yet made durable by the file's sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pending {
    Write { offset: u64, data: Vec<u8> },
    SetLen { len: u64 },
}

impl Pending {
    /// True when applying or dropping this operation can change a byte in `start..end`.
    pub(super) fn affects(&self, start: usize, end: usize) -> bool {
        match self {
            Pending::Write { offset, data } => {
                let offset = to_usize(*offset);
                offset < end && offset + data.len() > start
            }
            Pending::SetLen { len } => to_usize(*len) < end,
        }
    }
}

pub(super) fn to_usize(value: u64) -> usize {
    usize::try_from(value).expect("test sizes fit in memory")
}

/// One file (inode) of the model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inode {
    pub durable: Vec<u8>,
    pub pending: Vec<Pending>,
    pub current: Vec<u8>,
}

pub(super) fn write_into(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
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
    pub(super) fn apply(&self, namespace: &Namespace) -> Namespace {
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

    pub(super) fn id_at(&self, path: &Path) -> u64 {
        *self.current.get(path).unwrap_or_else(|| panic!("model has no file {}", path.display()))
    }

    pub(super) fn inode_mut(&mut self, path: &Path) -> &mut Inode {
        let id = self.id_at(path);
        self.inodes.get_mut(&id).expect("named inode exists")
    }

    pub(super) fn create(&mut self, path: &Path) {
        let id = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(id, Inode::default());
        self.current.insert(path.to_path_buf(), id);
        self.touched.insert(path.to_path_buf());
        self.pending_meta.push(MetaOp::Create { path: path.to_path_buf(), id });
    }

    pub(super) fn write(&mut self, path: &Path, offset: u64, data: &[u8]) {
        let inode = self.inode_mut(path);
        write_into(&mut inode.current, offset, data);
        inode.pending.push(Pending::Write { offset, data: data.to_vec() });
    }

    pub(super) fn set_len(&mut self, path: &Path, len: u64) {
        let inode = self.inode_mut(path);
        inode.current.resize(to_usize(len), 0);
        inode.pending.push(Pending::SetLen { len });
    }

    pub(super) fn sync_succeeded(&mut self, path: &Path) {
        let inode = self.inode_mut(path);
        inode.durable = inode.current.clone();
        inode.pending.clear();
    }

    /// Linux after a failed fsync: the unsynced data is gone.
    pub(super) fn sync_failed(&mut self, path: &Path) {
        let inode = self.inode_mut(path);
        inode.current = inode.durable.clone();
        inode.pending.clear();
    }

    pub(super) fn sync_dir(&mut self) {
        self.durable = self.current.clone();
        self.touched.clear();
        self.pending_meta.clear();
        let named: BTreeSet<u64> = self.current.values().copied().collect();
        self.inodes.retain(|id, _| named.contains(id));
    }

    pub(super) fn rename(&mut self, from: &Path, to: &Path) {
        let id = self.current.remove(from).expect("renamed file exists");
        self.current.insert(to.to_path_buf(), id);
        self.touched.insert(from.to_path_buf());
        self.touched.insert(to.to_path_buf());
        self.pending_meta.push(MetaOp::Rename { from: from.to_path_buf(), to: to.to_path_buf() });
    }

    pub(super) fn remove(&mut self, path: &Path) {
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

pub(super) fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
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

pub(super) fn sector_is_legal(inode: &Inode, image: &[u8], start: usize, end: usize) -> bool {
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

pub(super) fn byte_is_possible(inode: &Inode, relevant: &[&Pending], byte: u8, position: usize) -> bool {
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
