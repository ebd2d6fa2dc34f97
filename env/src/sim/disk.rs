//! The simulated disk (ADR-0004): a pure data structure, no locks, no randomness of its own.
//!
//! * Each file (inode) has **durable** bytes and a list of **pending** (unsynced) data operations; `current` is
//!   durable with the pending operations applied, and is what reads see. A file's data and size become durable
//!   with that file's own sync, as `fdatasync` does on Linux.
//! * The namespace (path → node) also has a durable and a current version. Creates, mkdirs, removes and renames
//!   are pending metadata operations of their parent directory until that directory is synced.
//! * A crash rebuilds the durable image: each pending metadata operation is kept or dropped; each pending write is
//!   kept whole, dropped, or torn at sector granularity; each pending `set_len` is kept or dropped. The decisions
//!   come from the caller, as pure functions of stable keys. That is the `posix` model; the page-cache models
//!   (`page`, `ext4-ordered`: ADR-0109) crash each file in [`super::paged`], and `ext4-ordered` cuts one journal
//!   of every metadata event (directory operations and size changes, in the order of their sequence numbers).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};

pub(crate) use super::names::Node;
use super::names::{DirKey, Namespace, PathId, PathTable, is_root};
use super::persistence::DiskModel;

pub(crate) type InodeId = u64;

#[derive(Clone, Debug)]
pub(crate) enum PendingData {
    /// `seq`: the disk-wide sequence number ([`Disk::next_seq`]) that orders it against metadata operations.
    Write {
        offset: u64,
        data: Vec<u8>,
        key: u64,
        seq: u64,
    },
    SetLen {
        len: u64,
        key: u64,
        seq: u64,
    },
}

impl PendingData {
    pub(crate) fn key(&self) -> u64 {
        match *self {
            PendingData::Write { key, .. } | PendingData::SetLen { key, .. } => key,
        }
    }

    pub(crate) fn seq(&self) -> u64 {
        match *self {
            PendingData::Write { seq, .. } | PendingData::SetLen { seq, .. } => seq,
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) enum MetaOp {
    Create { path: PathId, inode: InodeId },
    Mkdir { path: PathId },
    Remove { path: PathId },
    Rename { from: PathId, to: PathId },
}

/// A metadata operation waiting for its directory's sync: the directory, the operation, its stable key.
#[derive(Clone, Debug)]
struct PendingMeta {
    dir: DirKey,
    op: MetaOp,
    key: u64,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Inode {
    pub(crate) current: Vec<u8>,
    pub(crate) durable: Vec<u8>,
    pub(crate) pending: Vec<PendingData>,
    /// Sector indexes whose media is bad: reads return garbage there until the sector is rewritten.
    pub(crate) latent_sectors: BTreeSet<u64>,
    pub(crate) open_handles: u64,
    /// Names (current and durable) and pending creates that refer to this inode: garbage once none does and no
    /// handle is open. A pending create counts: a crash may keep it, and the file must still be there.
    links: u64,
    /// The sequence number of its create (`ext4-ordered`: a sync of a file created since the last journal commit
    /// commits the journal).
    created_seq: u64,
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
    /// `seq`: the operation's place in the disk-wide write sequence (what a [`super::shape::CrashShape`] names).
    fn keep_meta(&mut self, key: u64, seq: u64) -> bool;
    /// A pending write of `len` bytes at `offset`.
    fn write_fate(&mut self, key: u64, seq: u64, offset: u64, len: u64) -> WriteFate;
    fn keep_sector(&mut self, key: u64, seq: u64, sector: u64) -> bool;
    fn keep_set_len(&mut self, key: u64, seq: u64) -> bool;
    /// For a dropped sector of a torn write: `Some(fill)` turns the whole sector into garbage made from `fill`.
    fn garble_sector(&mut self, key: u64, sector: u64) -> Option<u64>;
    /// Page-cache models: how many of the operations into page `page` of a file (`seqs`, in order) reached the
    /// disk, at least `min` (`key`: the key of the first of them).
    fn page_prefix(&mut self, key: u64, page: u64, min: u64, seqs: &[u64]) -> u64;
    /// `page`: after how many of its pending operations (`seqs`, in order) the file's size reached the disk
    /// (`key`: the first's).
    fn size_prefix(&mut self, key: u64, seqs: &[u64]) -> u64;
    /// `ext4-ordered`: how many of the pending journal events (`events`: their sequence numbers, in order)
    /// committed.
    fn journal_prefix(&mut self, events: &[u64]) -> u64;
}

/// What a crash did, for the fault log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CrashEffects {
    pub(crate) meta_dropped: Vec<PathBuf>,
    pub(crate) meta_kept: Vec<PathBuf>,
    /// The sequence numbers of the kept directory operations (ADR-0173's check).
    pub(crate) meta_kept_seqs: Vec<u64>,
    pub(crate) writes_kept: Vec<(InodeId, u64)>,
    pub(crate) writes_dropped: Vec<(InodeId, u64)>,
    pub(crate) writes_torn: Vec<(InodeId, u64)>,
    /// (inode, sector offset) of each sector a torn write left as garbage.
    pub(crate) sectors_garbled: Vec<(InodeId, u64)>,
    /// `ext4-ordered`: (journal events committed, pending) at the crash.
    pub(crate) journal: Option<(u64, u64)>,
}

/// The disk. Every per-operation cost is independent of how many files the run has created (ADR-seeds-perf):
/// names are interned ids, each directory indexes its entries and its pending metadata operations, inodes
/// count their names, and the bytes in use are a running total.
#[derive(Clone, Debug, Default)]
pub(crate) struct Disk {
    pub(crate) names: PathTable,
    pub(crate) current: Namespace,
    pub(crate) durable: Namespace,
    /// Pending metadata operations in the order they happened (by sequence number), and each directory's.
    pending_meta: BTreeMap<u64, PendingMeta>,
    pending_by_dir: BTreeMap<DirKey, Vec<u64>>,
    /// The next disk-wide sequence number: of metadata operations (the keys of `pending_meta`) and data operations.
    next_seq: u64,
    /// `ext4-ordered`: every event numbered below this is committed to the journal.
    journal_floor: u64,
    /// The persistence model and the device's sector size (ADR-0109, ADR-0110).
    pub(crate) model: DiskModel,
    inodes: BTreeMap<InodeId, Inode>,
    /// Inodes no name refers to (still there while a handle is open): the only garbage candidates.
    unlinked: BTreeSet<InodeId>,
    /// The sum of every inode's current length (what the disk quota measures).
    used_bytes: u64,
    next_inode: InodeId,
}

/// An inode borrowed for change: the disk's byte count follows any change of its current length.
pub(crate) struct InodeMut<'a> {
    inode: &'a mut Inode,
    used_bytes: &'a mut u64,
    len_before: u64,
}

impl Deref for InodeMut<'_> {
    type Target = Inode;

    fn deref(&self) -> &Inode {
        self.inode
    }
}

impl DerefMut for InodeMut<'_> {
    fn deref_mut(&mut self) -> &mut Inode {
        self.inode
    }
}

impl Drop for InodeMut<'_> {
    fn drop(&mut self) {
        let len_after = self.inode.current.len() as u64;
        *self.used_bytes = (*self.used_bytes - self.len_before) + len_after;
    }
}

impl Disk {
    pub(crate) fn is_dir(&self, path: &Path) -> bool {
        self.names.dir_key(path).is_some_and(|dir| self.current.is_dir(dir))
    }

    pub(crate) fn lookup(&self, path: &Path) -> Option<Node> {
        self.find(path).1
    }

    /// [`Disk::lookup`], with `path`'s interned id (None: never named, or the root): one lookup of the path.
    pub(crate) fn find(&self, path: &Path) -> (Option<PathId>, Option<Node>) {
        if is_root(path) {
            return (None, Some(Node::Dir));
        }
        let id = self.names.get(path);
        (id, id.and_then(|id| self.current.get(id)))
    }

    /// The key of `dir` when it is a directory in the current namespace ([`Disk::is_dir`] and the key from one
    /// lookup of the path).
    pub(crate) fn current_dir(&self, dir: &Path) -> Option<DirKey> {
        self.names.dir_key(dir).filter(|&key| self.current.is_dir(key))
    }

    /// What `path` names in the durable namespace (the root is never an entry).
    pub(crate) fn lookup_durable(&self, path: &Path) -> Option<Node> {
        self.durable.get(self.names.get(path)?)
    }

    /// The inode `id`, if it exists.
    pub(crate) fn inode(&self, id: InodeId) -> Option<&Inode> {
        self.inodes.get(&id)
    }

    /// The inode `id` for change, if it exists.
    pub(crate) fn inode_mut(&mut self, id: InodeId) -> Option<InodeMut<'_>> {
        let inode = self.inodes.get_mut(&id)?;
        let len_before = inode.current.len() as u64;
        Some(InodeMut { inode, used_bytes: &mut self.used_bytes, len_before })
    }

    /// Create an empty file at `path` (its parent must be a directory). Pending until the parent is synced.
    pub(crate) fn create_file(&mut self, path: PathId, key: u64) -> InodeId {
        assert!(self.current.get(path).is_none(), "create_file over an existing entry");
        let dir = self.names.parent(path);
        assert!(self.current.is_dir(dir), "create_file without a parent directory");
        let inode = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(inode, Inode { created_seq: self.next_seq, ..Inode::default() });
        self.link(false, path, Node::File(inode));
        self.push_meta(dir, MetaOp::Create { path, inode }, key);
        inode
    }

    pub(crate) fn mkdir(&mut self, path: PathId, key: u64) {
        assert!(self.current.get(path).is_none(), "mkdir over an existing entry");
        let dir = self.names.parent(path);
        assert!(self.current.is_dir(dir), "mkdir without a parent directory");
        self.link(false, path, Node::Dir);
        self.push_meta(dir, MetaOp::Mkdir { path }, key);
    }

    pub(crate) fn remove(&mut self, path: PathId, key: u64) {
        let removed = self.unlink(false, path);
        assert!(matches!(removed, Some(Node::File(_))), "remove of a missing file");
        self.push_meta(self.names.parent(path), MetaOp::Remove { path }, key);
    }

    /// Remove the empty directory `path`: pending until its parent is synced. A crash that keeps the removal but
    /// drops removals inside it loses what the directory durably still held (`prune_orphans`).
    pub(crate) fn remove_dir(&mut self, path: PathId, key: u64) {
        assert!(self.current.entries(Some(path)).next().is_none(), "remove_dir of a directory with entries");
        let removed = self.unlink(false, path);
        assert_eq!(removed, Some(Node::Dir), "remove_dir of a missing directory");
        self.push_meta(self.names.parent(path), MetaOp::Remove { path }, key);
    }

    pub(crate) fn rename(&mut self, from: PathId, to: PathId, key: u64) {
        let dir = self.names.parent(from);
        assert_eq!(dir, self.names.parent(to), "rename across directories");
        let node = self.unlink(false, from).expect("rename of a missing file");
        assert!(matches!(node, Node::File(_)), "rename of a directory");
        self.link(false, to, node);
        self.push_meta(dir, MetaOp::Rename { from, to }, key);
    }

    /// The entries of `dir` in the current namespace, in path order.
    pub(crate) fn list(&self, dir: DirKey) -> Vec<PathBuf> {
        self.current.entries(dir).map(|id| self.names.path(id).to_path_buf()).collect()
    }

    /// Pass the name of each entry of `dir` to `visit`, in [`Self::list`]'s order (an entry without a name, as
    /// [`Path::file_name`] sees it, is skipped). No path is built.
    pub(crate) fn visit_names(&self, dir: DirKey, visit: &mut dyn FnMut(&OsStr)) {
        for name in self.current.entries(dir).filter_map(|id| self.names.file_name(id)) {
            visit(name);
        }
    }

    /// Every entry of `namespace`, in path order (for reports and digests).
    pub(crate) fn sorted(&self, namespace: &Namespace) -> Vec<(PathId, Node)> {
        let mut entries: Vec<(PathId, Node)> = namespace.iter().collect();
        entries.sort_by(|a, b| self.names.path(a.0).cmp(self.names.path(b.0)));
        entries
    }

    /// The next disk-wide sequence number (every pending data operation takes one).
    pub(crate) fn next_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Make every pending metadata operation of `dir` durable, in order (`ext4-ordered`: commit the journal).
    pub(crate) fn sync_dir(&mut self, dir: DirKey) {
        if self.model.persistence.is_journaled() {
            self.commit_journal();
            return;
        }
        // Where `ext4-ordered`'s journal would be now: only the crash classifier reads it (ADR-0173).
        self.journal_floor = self.next_seq;
        if let Some(sequence) = self.pending_by_dir.remove(&dir) {
            for number in sequence {
                let pending = self.pending_meta.remove(&number).expect("a directory's pending operation exists");
                debug_assert_eq!(pending.dir, dir);
                self.apply_meta(&pending.op);
                self.count_link(created(&pending.op), false);
            }
        }
        self.collect_garbage();
    }

    /// `ext4-ordered`: a sync of file `id` commits the journal when the file changed size or was created since
    /// the last commit (ext4's `fdatasync` waits for the transaction that last changed the inode's size or
    /// allocation, and a commit takes every metadata change made so far).
    /// Under the other models only the journal's floor moves, for the crash classifier (ADR-0173): without it, a
    /// posix or page run's image would be judged against a journal that never committed.
    pub(crate) fn file_synced(&mut self, id: InodeId) {
        let Some(inode) = self.inodes.get(&id) else { return };
        let mut len = inode.durable.len() as u64;
        let mut resized = false;
        for op in &inode.pending {
            let after = match *op {
                PendingData::Write { offset, ref data, .. } => len.max(offset + data.len() as u64),
                PendingData::SetLen { len, .. } => len,
            };
            resized |= after != len;
            len = after;
        }
        if !(resized || inode.created_seq >= self.journal_floor) {
            return;
        }
        if self.model.persistence.is_journaled() {
            self.commit_journal();
        } else {
            self.journal_floor = self.next_seq;
        }
    }

    /// `ext4-ordered`: commit the journal: every pending metadata operation becomes durable, in order, and no
    /// crash can undo an event numbered before now.
    fn commit_journal(&mut self) {
        self.pending_by_dir.clear();
        for (_, pending) in std::mem::take(&mut self.pending_meta) {
            self.apply_meta(&pending.op);
            self.count_link(created(&pending.op), false);
        }
        self.journal_floor = self.next_seq;
        self.collect_garbage();
        debug_assert!(self.pending_meta.is_empty());
    }

    /// Are metadata operations waiting for a directory sync?
    pub(crate) fn has_pending_meta(&self) -> bool {
        !self.pending_meta.is_empty()
    }

    /// Total bytes the current image uses (for the disk quota).
    pub(crate) fn used_bytes(&self) -> u64 {
        self.used_bytes
    }

    /// Drop inodes no name (current or durable) and no open handle refers to.
    pub(crate) fn collect_garbage(&mut self) {
        for id in std::mem::take(&mut self.unlinked) {
            let Some(inode) = self.inodes.get(&id) else { continue };
            if inode.links > 0 {
                continue;
            }
            if inode.open_handles > 0 {
                self.unlinked.insert(id);
                continue;
            }
            let removed = self.inodes.remove(&id).expect("checked above");
            self.used_bytes -= removed.current.len() as u64;
        }
    }

    /// Apply a crash: rebuild the durable image from the decisions, and make it the current image.
    pub(crate) fn crash(&mut self, decisions: &mut dyn CrashDecisions) -> CrashEffects {
        let mut effects = CrashEffects::default();
        let cut = self.model.persistence.is_journaled().then(|| self.journal_cut(decisions, &mut effects));
        self.pending_by_dir.clear();
        for (number, pending) in std::mem::take(&mut self.pending_meta) {
            let keep = cut.map_or_else(|| decisions.keep_meta(pending.key, number), |cut| number < cut);
            let path = self.names.path(meta_path(&pending.op)).to_path_buf();
            if keep {
                self.apply_meta(&pending.op);
                effects.meta_kept.push(path);
                effects.meta_kept_seqs.push(number);
            } else {
                effects.meta_dropped.push(path);
            }
        }
        self.prune_orphans();
        let model = self.model.clone();
        for (&id, inode) in &mut self.inodes {
            if model.persistence.is_paged() {
                let journal_ops = cut.map(|cut| inode.pending.iter().take_while(|op| op.seq() < cut).count());
                super::paged::crash_inode(id, inode, decisions, &mut effects, model.page_bytes, journal_ops);
            } else {
                super::posix::crash_inode(id, inode, decisions, &mut effects, model.sector_bytes);
            }
            inode.open_handles = 0;
        }
        self.journal_floor = self.next_seq;
        self.current = self.durable.clone();
        self.recount();
        self.collect_garbage();
        debug_assert!(self.inodes.values().all(|inode| inode.pending.is_empty()));
        debug_assert!(self.current == self.durable);
        effects
    }

    /// What [`super::admits::admitted`] needs of the disk before a crash (clones every pending operation).
    pub(crate) fn before_crash(&self) -> super::admits::BeforeCrash {
        let files = self.inodes.iter().map(|(&id, inode)| (id, inode.durable.clone(), inode.pending.clone())).collect();
        let meta = self.pending_meta.keys().copied().collect();
        super::admits::BeforeCrash { page_bytes: self.model.page_bytes, floor: self.journal_floor, meta, files }
    }

    /// Every pending unit, unordered: what a crash shape counts back through ([`super::shape::units`], ADR-0172).
    pub(crate) fn pending_units(&self) -> Vec<(u64, u64)> {
        let ops = self.inodes.values().flat_map(|inode| inode.pending.iter());
        super::shape::units(self.pending_meta.keys().copied(), ops, self.model.page_bytes)
    }

    /// `ext4-ordered`: the journal's cut point, a sequence number: events below it persist, the rest are lost.
    /// Candidates: the floor (the last commit) and just after each pending event at or above it.
    fn journal_cut(&self, decisions: &mut dyn CrashDecisions, effects: &mut CrashEffects) -> u64 {
        let floor = self.journal_floor;
        let data = self.inodes.values().flat_map(|inode| inode.pending.iter().map(PendingData::seq));
        let mut events: Vec<u64> = self.pending_meta.keys().copied().chain(data).filter(|&seq| seq >= floor).collect();
        events.sort_unstable();
        events.dedup();
        let committed = decisions.journal_prefix(&events);
        assert!(committed <= events.len() as u64, "journal prefix past its events");
        effects.journal = Some((committed, events.len() as u64));
        match committed {
            0 => floor,
            n => events[usize::try_from(n).expect("fits") - 1] + 1,
        }
    }

    /// Recompute every inode's name count, the garbage candidates and the bytes in use from scratch.
    fn recount(&mut self) {
        for inode in self.inodes.values_mut() {
            inode.links = 0;
        }
        debug_assert!(self.pending_meta.is_empty(), "pending creates are counted only before a crash");
        for (_, node) in self.current.iter().chain(self.durable.iter()) {
            if let Node::File(id) = node
                && let Some(inode) = self.inodes.get_mut(&id)
            {
                inode.links += 1;
            }
        }
        self.unlinked = self.inodes.iter().filter(|(_, inode)| inode.links == 0).map(|(&id, _)| id).collect();
        self.used_bytes = self.inodes.values().map(|inode| inode.current.len() as u64).sum();
    }

    fn push_meta(&mut self, dir: DirKey, op: MetaOp, key: u64) {
        self.count_link(created(&op), true);
        let number = self.next_seq();
        self.pending_meta.insert(number, PendingMeta { dir, op, key });
        self.pending_by_dir.entry(dir).or_default().push(number);
    }

    /// Name `node` at `path` in the current or the durable namespace.
    fn link(&mut self, durable: bool, path: PathId, node: Node) {
        let dir = self.names.parent(path);
        let namespace = if durable { &mut self.durable } else { &mut self.current };
        let old = namespace.insert(path, dir, self.names.order(path), node);
        self.count_link(Some(node), true);
        self.count_link(old, false);
    }

    /// Remove the name `path` from the current or the durable namespace; returns what it named.
    fn unlink(&mut self, durable: bool, path: PathId) -> Option<Node> {
        let dir = self.names.parent(path);
        let namespace = if durable { &mut self.durable } else { &mut self.current };
        let old = namespace.remove(path, dir, self.names.order(path));
        self.count_link(old, false);
        old
    }

    fn count_link(&mut self, node: Option<Node>, gained: bool) {
        let Some(Node::File(id)) = node else { return };
        // A name can outlive its inode (a crash kept the create of a file already collected): not counted.
        let Some(inode) = self.inodes.get_mut(&id) else { return };
        if gained {
            inode.links += 1;
        } else {
            inode.links -= 1;
            if inode.links == 0 {
                self.unlinked.insert(id);
            }
        }
    }

    /// Apply one metadata operation to the durable namespace, skipping it harmlessly when an earlier dropped
    /// operation made it inapplicable (a rename whose source was never durably created).
    fn apply_meta(&mut self, op: &MetaOp) {
        match *op {
            MetaOp::Create { path, inode } => self.link(true, path, Node::File(inode)),
            MetaOp::Mkdir { path } => self.link(true, path, Node::Dir),
            MetaOp::Remove { path } => {
                self.unlink(true, path);
            }
            MetaOp::Rename { from, to } => {
                if let Some(node) = self.unlink(true, from) {
                    self.link(true, to, node);
                }
            }
        }
    }

    /// Remove durable entries whose parent directory is not durable (its mkdir was dropped by a crash).
    fn prune_orphans(&mut self) {
        loop {
            let dirs = self.durable.orphaned_dirs();
            if dirs.is_empty() {
                return;
            }
            for dir in dirs {
                let orphans: Vec<PathId> = self.durable.entries(Some(dir)).collect();
                for orphan in orphans {
                    self.unlink(true, orphan);
                }
            }
        }
    }
}

/// The inode a pending create refers to, as a name would.
fn created(op: &MetaOp) -> Option<Node> {
    match *op {
        MetaOp::Create { inode, .. } => Some(Node::File(inode)),
        _ => None,
    }
}

fn meta_path(op: &MetaOp) -> PathId {
    match *op {
        MetaOp::Create { path, .. } | MetaOp::Mkdir { path } | MetaOp::Remove { path } => path,
        MetaOp::Rename { to, .. } => to,
    }
}

/// Split a write at absolute boundaries of `unit` bytes (sectors, pages): (offset, bytes) for each unit it touches.
pub(crate) fn unit_pieces(offset: u64, data: &[u8], unit: u64) -> Vec<(u64, &[u8])> {
    assert!(unit > 0, "a unit of zero bytes");
    let mut pieces = Vec::new();
    let mut position = 0usize;
    while position < data.len() {
        let absolute = offset + position as u64;
        let sector_end = (absolute / unit + 1) * unit;
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
        let pieces = unit_pieces(300, &data, 512);
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

#[cfg(test)]
#[path = "disk_tests.rs"]
mod index_tests;
