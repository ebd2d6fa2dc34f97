//! The simulated disk (ADR-0004): a pure data structure, no locks, no randomness of its own.
//!
//! * Each file (inode) has **durable** bytes and a list of **pending** (unsynced) data operations; `current` is
//!   durable with the pending operations applied, and is what reads see. A file's data and size become durable
//!   with that file's own sync, as `fdatasync` does on Linux.
//! * The namespace (path → node) also has a durable and a current version. Creates, mkdirs, removes and renames
//!   are pending metadata operations of their parent directory until that directory is synced.
//! * A crash rebuilds the durable image: each pending metadata operation is kept or dropped; each pending write is
//!   kept whole, dropped, or torn at sector granularity; each pending `set_len` is kept or dropped. The decisions
//!   come from the caller, as pure functions of stable keys.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::SECTOR_SIZE_BYTES;

pub(crate) type InodeId = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Node {
    File(InodeId),
    Dir,
}

#[derive(Clone, Debug)]
pub(crate) enum PendingData {
    Write { offset: u64, data: Vec<u8>, key: u64 },
    SetLen { len: u64, key: u64 },
}

#[derive(Clone, Debug)]
pub(crate) enum MetaOp {
    Create { path: PathBuf, inode: InodeId },
    Mkdir { path: PathBuf },
    Remove { path: PathBuf },
    Rename { from: PathBuf, to: PathBuf },
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Inode {
    pub(crate) current: Vec<u8>,
    pub(crate) durable: Vec<u8>,
    pub(crate) pending: Vec<PendingData>,
    /// Sector indexes whose media is bad: reads return garbage there until the sector is rewritten.
    pub(crate) latent_sectors: BTreeSet<u64>,
    pub(crate) open_handles: u64,
}

/// What a crash does to one pending write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteFate {
    Kept,
    Dropped,
    /// Each sector kept (true) or dropped (false) by the decision function on the sector index.
    Torn,
}

/// The choices a crash needs, supplied by the caller as pure functions of stable keys.
pub(crate) trait CrashDecisions {
    /// `key`: a stable key of the operation (its path and that path's operation index), not its position.
    fn keep_meta(&mut self, key: u64) -> bool;
    fn write_fate(&mut self, key: u64) -> WriteFate;
    fn keep_sector(&mut self, key: u64, sector: u64) -> bool;
    fn keep_set_len(&mut self, key: u64) -> bool;
    /// For a dropped sector of a torn write: `Some(fill)` turns the whole sector into garbage made from `fill`.
    fn garble_sector(&mut self, key: u64, sector: u64) -> Option<u64>;
}

/// What a crash did, for the fault log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CrashEffects {
    pub(crate) meta_dropped: Vec<PathBuf>,
    pub(crate) writes_dropped: Vec<(InodeId, u64)>,
    pub(crate) writes_torn: Vec<(InodeId, u64)>,
    /// (inode, sector offset) of each sector a torn write left as garbage.
    pub(crate) sectors_garbled: Vec<(InodeId, u64)>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Disk {
    pub(crate) current: BTreeMap<PathBuf, Node>,
    pub(crate) durable: BTreeMap<PathBuf, Node>,
    pub(crate) pending_meta: Vec<(PathBuf, MetaOp, u64)>,
    pub(crate) inodes: BTreeMap<InodeId, Inode>,
    next_inode: InodeId,
}

pub(crate) fn is_root(path: &Path) -> bool {
    path.as_os_str().is_empty() || path == Path::new("/")
}

pub(crate) fn parent_of(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

fn namespace_is_dir(namespace: &BTreeMap<PathBuf, Node>, path: &Path) -> bool {
    is_root(path) || namespace.get(path) == Some(&Node::Dir)
}

impl Disk {
    pub(crate) fn is_dir(&self, path: &Path) -> bool {
        namespace_is_dir(&self.current, path)
    }

    pub(crate) fn lookup(&self, path: &Path) -> Option<Node> {
        if is_root(path) {
            return Some(Node::Dir);
        }
        self.current.get(path).copied()
    }

    /// Create an empty file at `path` (its parent must be a directory). Pending until the parent is synced.
    pub(crate) fn create_file(&mut self, path: &Path, key: u64) -> InodeId {
        assert!(self.lookup(path).is_none(), "create_file over an existing entry");
        assert!(self.is_dir(&parent_of(path)), "create_file without a parent directory");
        let inode = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(inode, Inode::default());
        self.current.insert(path.to_path_buf(), Node::File(inode));
        self.pending_meta.push((parent_of(path), MetaOp::Create { path: path.to_path_buf(), inode }, key));
        inode
    }

    pub(crate) fn mkdir(&mut self, path: &Path, key: u64) {
        assert!(self.lookup(path).is_none(), "mkdir over an existing entry");
        assert!(self.is_dir(&parent_of(path)), "mkdir without a parent directory");
        self.current.insert(path.to_path_buf(), Node::Dir);
        self.pending_meta.push((parent_of(path), MetaOp::Mkdir { path: path.to_path_buf() }, key));
    }

    pub(crate) fn remove(&mut self, path: &Path, key: u64) {
        let removed = self.current.remove(path);
        assert!(matches!(removed, Some(Node::File(_))), "remove of a missing file");
        self.pending_meta.push((parent_of(path), MetaOp::Remove { path: path.to_path_buf() }, key));
    }

    pub(crate) fn rename(&mut self, from: &Path, to: &Path, key: u64) {
        assert_eq!(parent_of(from), parent_of(to), "rename across directories");
        let node = self.current.remove(from).expect("rename of a missing file");
        assert!(matches!(node, Node::File(_)), "rename of a directory");
        self.current.insert(to.to_path_buf(), node);
        let op = MetaOp::Rename { from: from.to_path_buf(), to: to.to_path_buf() };
        self.pending_meta.push((parent_of(from), op, key));
    }

    pub(crate) fn list(&self, dir: &Path) -> Vec<PathBuf> {
        let root = is_root(dir);
        // No allocation per entry: this runs on every structural check the simulator makes.
        self.current
            .keys()
            .filter(|path| match path.parent() {
                Some(parent) if root => is_root(parent),
                Some(parent) => parent == dir,
                None => false,
            })
            .cloned()
            .collect()
    }

    /// Make every pending metadata operation of `dir` durable, in order.
    pub(crate) fn sync_dir(&mut self, dir: &Path) {
        let mut kept = Vec::with_capacity(self.pending_meta.len());
        for (parent, op, key) in std::mem::take(&mut self.pending_meta) {
            if parent == dir || (is_root(&parent) && is_root(dir)) {
                apply_meta(&mut self.durable, &op);
            } else {
                kept.push((parent, op, key));
            }
        }
        self.pending_meta = kept;
        self.collect_garbage();
    }

    /// Total bytes the current image uses (for the disk quota).
    pub(crate) fn used_bytes(&self) -> u64 {
        self.inodes.values().map(|inode| inode.current.len() as u64).sum()
    }

    /// Drop inodes no name (current or durable) and no open handle refers to.
    pub(crate) fn collect_garbage(&mut self) {
        let referenced: BTreeSet<InodeId> = self
            .current
            .values()
            .chain(self.durable.values())
            .filter_map(|node| match node {
                Node::File(inode) => Some(*inode),
                Node::Dir => None,
            })
            .collect();
        self.inodes.retain(|id, inode| referenced.contains(id) || inode.open_handles > 0);
    }

    /// Apply a crash: rebuild the durable image from the decisions, and make it the current image.
    pub(crate) fn crash(&mut self, decisions: &mut dyn CrashDecisions) -> CrashEffects {
        let mut effects = CrashEffects::default();
        for (_, op, key) in std::mem::take(&mut self.pending_meta) {
            if decisions.keep_meta(key) {
                apply_meta(&mut self.durable, &op);
            } else {
                effects.meta_dropped.push(meta_path(&op).to_path_buf());
            }
        }
        prune_orphans(&mut self.durable);
        for (&id, inode) in &mut self.inodes {
            crash_inode(id, inode, decisions, &mut effects);
            inode.open_handles = 0;
        }
        self.current = self.durable.clone();
        self.collect_garbage();
        debug_assert!(self.inodes.values().all(|inode| inode.pending.is_empty()));
        debug_assert!(self.current == self.durable);
        effects
    }
}

fn meta_path(op: &MetaOp) -> &Path {
    match op {
        MetaOp::Create { path, .. } | MetaOp::Mkdir { path } | MetaOp::Remove { path } => path,
        MetaOp::Rename { to, .. } => to,
    }
}

/// Apply one metadata operation to a namespace, skipping it harmlessly when an earlier dropped operation made it
/// inapplicable (a rename whose source was never durably created).
fn apply_meta(namespace: &mut BTreeMap<PathBuf, Node>, op: &MetaOp) {
    match op {
        MetaOp::Create { path, inode } => {
            namespace.insert(path.clone(), Node::File(*inode));
        }
        MetaOp::Mkdir { path } => {
            namespace.insert(path.clone(), Node::Dir);
        }
        MetaOp::Remove { path } => {
            namespace.remove(path);
        }
        MetaOp::Rename { from, to } => {
            if let Some(node) = namespace.remove(from) {
                namespace.insert(to.clone(), node);
            }
        }
    }
}

/// Remove entries whose parent directory is not in the namespace (its mkdir was dropped by a crash).
fn prune_orphans(namespace: &mut BTreeMap<PathBuf, Node>) {
    loop {
        let orphans: Vec<PathBuf> =
            namespace.keys().filter(|path| !namespace_is_dir(namespace, &parent_of(path))).cloned().collect();
        if orphans.is_empty() {
            return;
        }
        for orphan in orphans {
            namespace.remove(&orphan);
        }
    }
}

fn crash_inode(id: InodeId, inode: &mut Inode, decisions: &mut dyn CrashDecisions, effects: &mut CrashEffects) {
    let mut image = std::mem::take(&mut inode.durable);
    for op in std::mem::take(&mut inode.pending) {
        match op {
            PendingData::Write { offset, data, key } => match decisions.write_fate(key) {
                WriteFate::Kept => write_into(&mut image, offset, &data),
                WriteFate::Dropped => effects.writes_dropped.push((id, offset)),
                WriteFate::Torn => {
                    effects.writes_torn.push((id, offset));
                    for (piece_offset, piece) in sector_pieces(offset, &data) {
                        let sector = piece_offset / SECTOR_SIZE_BYTES;
                        if decisions.keep_sector(key, sector) {
                            write_into(&mut image, piece_offset, piece);
                        } else if let Some(fill) = decisions.garble_sector(key, sector) {
                            let piece_end = piece_offset + piece.len() as u64;
                            garble_sector(&mut image, sector, piece_end, fill);
                            effects.sectors_garbled.push((id, sector * SECTOR_SIZE_BYTES));
                        }
                    }
                }
            },
            PendingData::SetLen { len, key } => {
                if decisions.keep_set_len(key) {
                    image.resize(usize::try_from(len).expect("file length fits in memory"), 0);
                }
            }
        }
    }
    inode.current = image.clone();
    inode.durable = image;
}

/// Fill sector `sector` of `image` with garbage from `fill`: the whole sector as far as the image reaches, and at
/// least up to `piece_end` (the end of the write that tore there). Bytes outside the write change too.
fn garble_sector(image: &mut Vec<u8>, sector: u64, piece_end: u64, fill: u64) {
    let start = usize::try_from(sector * SECTOR_SIZE_BYTES).expect("offset fits in memory");
    let piece_end = usize::try_from(piece_end).expect("offset fits in memory");
    assert!(piece_end > start, "the torn piece lies inside its sector");
    let sector_end = start + usize::try_from(SECTOR_SIZE_BYTES).expect("sector fits");
    if image.len() < piece_end {
        image.resize(piece_end, 0);
    }
    let end = sector_end.min(image.len());
    let mut state = fill | 1;
    for byte in &mut image[start..end] {
        // xorshift64: cheap, deterministic garbage.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        *byte = (state >> 24) as u8;
    }
    debug_assert!(image.len() >= piece_end);
}

/// Split a write at absolute sector boundaries: (offset, bytes) for each sector it touches.
pub(crate) fn sector_pieces(offset: u64, data: &[u8]) -> Vec<(u64, &[u8])> {
    let mut pieces = Vec::new();
    let mut position = 0usize;
    while position < data.len() {
        let absolute = offset + position as u64;
        let sector_end = (absolute / SECTOR_SIZE_BYTES + 1) * SECTOR_SIZE_BYTES;
        let take = usize::try_from(sector_end - absolute).expect("sector fits").min(data.len() - position);
        pieces.push((absolute, &data[position..position + take]));
        position += take;
    }
    debug_assert_eq!(pieces.iter().map(|(_, piece)| piece.len()).sum::<usize>(), data.len());
    pieces
}

/// Write `data` into `image` at `offset`, zero-filling any gap (a hole reads as zeros).
pub(crate) fn write_into(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = usize::try_from(offset).expect("offset fits in memory");
    let end = start + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(data);
    debug_assert_eq!(&image[start..end], data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sector_pieces_split_at_boundaries() {
        let data = vec![1u8; 1100];
        let pieces = sector_pieces(300, &data);
        let offsets: Vec<u64> = pieces.iter().map(|(offset, _)| *offset).collect();
        assert_eq!(offsets, vec![300, 512, 1024]);
        assert_eq!(pieces[0].1.len(), 212);
        assert_eq!(pieces[2].1.len(), 1100 - 212 - 512);
    }

    #[test]
    fn write_into_zero_fills_holes() {
        let mut image = vec![7u8; 4];
        write_into(&mut image, 8, &[9, 9]);
        assert_eq!(image, vec![7, 7, 7, 7, 0, 0, 0, 0, 9, 9]);
    }
}
