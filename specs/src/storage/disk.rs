//! The model's disk: files as inodes with pending data and metadata operations, and the crash rules it
//! abstracts from the simulated disk (`env/src/sim/disk.rs`).

use std::collections::BTreeMap;

use super::*;

/// A file in the database directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Name {
    Manifest,
    ManifestTmp,
    Table(u64),
    Wal(u64),
}

pub(super) type InodeId = u32;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum DataOp {
    Write { offset: usize, data: Vec<u8> },
    SetLen(usize),
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Inode {
    pub(super) durable: Vec<u8>,
    pending: Vec<DataOp>,
}

fn write_into(image: &mut Vec<u8>, offset: usize, data: &[u8]) {
    if image.len() < offset + data.len() {
        image.resize(offset + data.len(), 0);
    }
    image[offset..offset + data.len()].copy_from_slice(data);
}

impl Inode {
    pub(super) fn current(&self) -> Vec<u8> {
        let mut image = self.durable.clone();
        for op in &self.pending {
            match op {
                DataOp::Write { offset, data } => write_into(&mut image, *offset, data),
                DataOp::SetLen(len) => image.resize(*len, 0),
            }
        }
        image
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum MetaOp {
    Create(Name, InodeId),
    Remove(Name),
    Rename(Name, Name),
}

/// The abstract disk: SimEnv's rules for one directory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Disk {
    pub(super) durable: BTreeMap<Name, InodeId>,
    pub(super) current: BTreeMap<Name, InodeId>,
    pub(super) meta: Vec<MetaOp>,
    pub(super) inodes: BTreeMap<InodeId, Inode>,
    pub(super) next_inode: InodeId,
}

/// What a crash does to one pending write: kept, dropped, or torn (bit `i` of the mask keeps the write's `i`-th
/// sector piece).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fate {
    Kept,
    Dropped,
    Torn(u32),
}

/// The choices of one crash: each pending metadata operation kept or not, and the fate of each pending data
/// operation of each file recovery reads (other files' pending data is dropped).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CrashPlan {
    pub keep_meta: Vec<bool>,
    pub fates: BTreeMap<InodeId, Vec<Fate>>,
}

fn apply_meta(namespace: &mut BTreeMap<Name, InodeId>, op: &MetaOp) {
    match op {
        MetaOp::Create(name, inode) => {
            namespace.insert(*name, *inode);
        }
        MetaOp::Remove(name) => {
            namespace.remove(name);
        }
        MetaOp::Rename(from, to) => {
            if let Some(inode) = namespace.remove(from) {
                namespace.insert(*to, inode);
            }
        }
    }
}

/// The sector pieces `(offset, length)` of a write at `offset` of `len` bytes.
fn sector_pieces(offset: usize, len: usize, sector: usize) -> Vec<(usize, usize)> {
    let mut pieces = Vec::new();
    let mut position = offset;
    while position < offset + len {
        let end = ((position / sector + 1) * sector).min(offset + len);
        pieces.push((position - offset, end - position));
        position = end;
    }
    pieces
}

impl Disk {
    pub(super) fn inode_of(&self, name: Name) -> InodeId {
        *self.current.get(&name).unwrap_or_else(|| panic!("{name:?} does not exist"))
    }

    pub(super) fn exists(&self, name: Name) -> bool {
        self.current.contains_key(&name)
    }

    pub(super) fn create(&mut self, name: Name) {
        assert!(!self.exists(name), "create_new of an existing {name:?}");
        let inode = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(inode, Inode::default());
        self.current.insert(name, inode);
        self.meta.push(MetaOp::Create(name, inode));
    }

    pub(super) fn open_truncate(&mut self, name: Name) {
        if self.exists(name) {
            let inode = self.inode_of(name);
            self.inodes.get_mut(&inode).expect("inode").pending.push(DataOp::SetLen(0));
        } else {
            self.create(name);
        }
    }

    pub(super) fn write(&mut self, name: Name, offset: usize, data: Vec<u8>) {
        let inode = self.inode_of(name);
        self.inodes.get_mut(&inode).expect("inode").pending.push(DataOp::Write { offset, data });
    }

    pub(super) fn sync_file(&mut self, name: Name) {
        let inode = self.inodes.get_mut(&self.inode_of(name)).expect("inode");
        inode.durable = inode.current();
        inode.pending.clear();
    }

    pub(super) fn sync_dir(&mut self) {
        for op in std::mem::take(&mut self.meta) {
            apply_meta(&mut self.durable, &op);
        }
        self.collect_garbage();
    }

    pub(super) fn rename(&mut self, from: Name, to: Name) {
        let inode = self.current.remove(&from).expect("rename of a missing file");
        self.current.insert(to, inode);
        self.meta.push(MetaOp::Rename(from, to));
    }

    pub(super) fn remove(&mut self, name: Name) {
        if self.current.remove(&name).is_some() {
            self.meta.push(MetaOp::Remove(name));
        }
    }

    pub(super) fn collect_garbage(&mut self) {
        let live: BTreeSet<InodeId> = self.current.values().chain(self.durable.values()).copied().collect();
        self.inodes.retain(|id, _| live.contains(id));
    }

    /// The durable namespace a crash that keeps the metadata operations in `keep` leaves.
    pub(super) fn namespace_after(&self, keep: &[bool]) -> BTreeMap<Name, InodeId> {
        let mut namespace = self.durable.clone();
        for (op, kept) in self.meta.iter().zip(keep) {
            if *kept {
                apply_meta(&mut namespace, op);
            }
        }
        namespace
    }

    /// Every fate of one pending data operation (`representative`: only kept, dropped and two torn images).
    pub(super) fn fates_of(op: &DataOp, sector: usize, representative: bool) -> Vec<Fate> {
        let mut fates = vec![Fate::Kept, Fate::Dropped];
        if let DataOp::Write { offset, data } = op {
            let pieces = sector_pieces(*offset, data.len(), sector).len();
            if pieces >= 2 {
                let full = (1u32 << pieces) - 1;
                if representative || pieces > 8 {
                    fates.extend([Fate::Torn(1), Fate::Torn(full & !1)]);
                } else {
                    fates.extend((1..full).map(Fate::Torn));
                }
            }
        }
        fates
    }

    /// Every crash plan (see [`CrashPlan`]).
    pub fn crash_plans(&self, sector: usize) -> Vec<CrashPlan> {
        let mut plans = Vec::new();
        for mask in 0u32..(1 << self.meta.len()) {
            let keep_meta: Vec<bool> = (0..self.meta.len()).map(|index| mask & (1 << index) != 0).collect();
            let namespace = self.namespace_after(&keep_meta);
            // Per read file (those recovery may read), the fates of each of its pending data operations.
            let mut choices: Vec<(InodeId, Vec<Vec<Fate>>)> = Vec::new();
            for (name, inode) in &namespace {
                if *name == Name::ManifestTmp {
                    continue;
                }
                let pending = &self.inodes[inode].pending;
                if pending.is_empty() {
                    continue;
                }
                let representative = matches!(name, Name::Table(_) | Name::Manifest);
                choices.push((*inode, pending.iter().map(|op| Self::fates_of(op, sector, representative)).collect()));
            }
            let mut partial: Vec<BTreeMap<InodeId, Vec<Fate>>> = vec![BTreeMap::new()];
            for (inode, per_op) in &choices {
                let mut combos: Vec<Vec<Fate>> = vec![Vec::new()];
                for fates in per_op {
                    combos = combos
                        .iter()
                        .flat_map(|combo| {
                            fates.iter().map(move |fate| {
                                let mut next = combo.clone();
                                next.push(*fate);
                                next
                            })
                        })
                        .collect();
                }
                partial = partial
                    .iter()
                    .flat_map(|plan| {
                        combos.iter().map(move |combo| {
                            let mut next = plan.clone();
                            next.insert(*inode, combo.clone());
                            next
                        })
                    })
                    .collect();
            }
            plans.extend(partial.into_iter().map(|fates| CrashPlan { keep_meta: keep_meta.clone(), fates }));
        }
        plans
    }

    /// Apply a crash: the durable image the plan leaves becomes the whole disk.
    pub(super) fn crash(&mut self, plan: &CrashPlan, sector: usize) {
        self.durable = self.namespace_after(&plan.keep_meta);
        self.meta.clear();
        for (id, inode) in &mut self.inodes {
            let mut image = std::mem::take(&mut inode.durable);
            let fates = plan.fates.get(id);
            for (index, op) in std::mem::take(&mut inode.pending).into_iter().enumerate() {
                let fate = fates.map_or(Fate::Dropped, |fates| fates[index]);
                match (op, fate) {
                    (_, Fate::Dropped) => {}
                    (DataOp::SetLen(len), _) => image.resize(len, 0),
                    (DataOp::Write { offset, data }, Fate::Kept) => write_into(&mut image, offset, &data),
                    (DataOp::Write { offset, data }, Fate::Torn(mask)) => {
                        for (bit, (start, len)) in sector_pieces(offset, data.len(), sector).into_iter().enumerate() {
                            if mask & (1 << bit) != 0 {
                                write_into(&mut image, offset + start, &data[start..start + len]);
                            }
                        }
                    }
                }
            }
            inode.durable = image;
        }
        self.current = self.durable.clone();
        self.collect_garbage();
    }

    pub(super) fn durable_bytes(&self, name: Name) -> Option<&[u8]> {
        self.durable.get(&name).map(|inode| self.inodes[inode].durable.as_slice())
    }

    pub(super) fn truncate_durable(&mut self, name: Name, len: usize) {
        let inode = self.durable[&name];
        let inode = self.inodes.get_mut(&inode).expect("inode");
        inode.durable.truncate(len);
        assert!(inode.pending.is_empty(), "truncating a file with pending writes");
    }
}
