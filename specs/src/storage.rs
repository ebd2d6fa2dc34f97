//! # `Storage`: the write-ahead log, the manifest install protocol, crashes and recovery
//!
//! **Models** one database directory on a disk with SimEnv's crash rules (`env/src/sim/disk.rs`), abstracted:
//! every file has durable bytes and pending (unsynced) writes; creates, renames and removes are pending
//! metadata operations until the directory is synced. At a crash each pending metadata operation is kept or
//! dropped independently, and each pending write is kept, dropped, or torn — any proper subset of the sectors
//! it touches kept — so a later unsynced write may survive while an earlier one is lost. Synced data survives.
//!
//! On that disk the model runs the engine's protocols, every file operation a separate step:
//! * **commit** (`engine/src/commit.rs`, `engine/src/wal.rs`): append a one-write batch record, built with the
//!   shipped [`engine::wal::encode_record_padded`] / [`engine::wal::encode_batch`], carrying the segment's synced
//!   offset, where [`engine::wal::next_append_start`] puts it (after a sync, at the next 512-byte boundary with
//!   the zero gap declared, ADR-0067); a commit is acknowledged only once a sync covers its record (group commit).
//! * **flush** (`engine/src/commit.rs`'s `rotate`, then `engine/src/jobs.rs`): rotate — append a seal, sync, create the next segment, sync the
//!   directory — then write the memtable's table, sync it, sync the directory, write `MANIFEST.tmp` (built with
//!   [`engine::manifest::encode_manifest`]), sync it, rename it over `MANIFEST`, sync the directory, and only
//!   then remove the old segment.
//! * **crash + recovery** (`engine/src/recovery.rs`): read `MANIFEST` with the shipped
//!   [`engine::manifest::decode_manifest`]; every table it lists must be present and intact; replay segments
//!   with the shipped [`engine::wal::decode_segment`] on the crash's byte image (the torn-tail-versus-corruption
//!   rule is the shipped code's), and decide with the engine's own pure recovery rules
//!   ([`engine::recovery_rules`], the functions `recovery.rs` calls): which segments replay
//!   (`replays_segment`), which count when finding the last (`segment_counts`: empty ones do not), whether each
//!   replayed batch follows the last (`batch_follows`), what each segment's end means (`segment_end`: keep,
//!   truncate a torn tail, or corruption), where the sequence and the file numbers continue
//!   (`recovered_last_sequence`, `next_file_number`); then the steps of `install_recovered` (new segment, table
//!   of the replayed commits, synced, directory sync, manifest install) and `remove_orphans` (unsynced removes),
//!   each a step a further crash may interrupt.
//!
//! **Bounds** ([`StorageBound`]): small — 2 commits, 1 flush, 2 crashes, 32-byte sectors; large — 3 commits,
//! 1 flush, 2 crashes, 16-byte sectors (a 47-byte record then tears at 2–3 interior boundaries; real 512-byte
//! sectors tear a subset of these images, so the small sector is the stronger check for these record sizes).
//!
//! **Invariants**:
//! * `recovered_prefix_keeps_acknowledged` — after every crash the recovered commits are a prefix of the commits
//!   made (in sequence order) that contains every acknowledged commit.
//! * `no_false_corruption` — recovery never reports corruption (of a log segment or the manifest) after a crash
//!   the disk rules allow.
//! * `manifest_tables_present` — no table the manifest references is missing or damaged after any crash.
//! * `sometimes_torn_tail` (reachability) — some recovery truncates a torn tail.
//!
//! **Leaves out**: the SSTable format (a table is the model's own small encoding; "intact" means it decodes);
//! compaction (its install is the same manifest protocol); several writes per batch, deletes and values;
//! BUGGIFY's split header/payload writes (torn at the record's header boundary); read errors and bit flips
//! (recovery's re-reads); torn data of files recovery does not read (`MANIFEST.tmp`, orphans: their pending
//! data is dropped); the `set_len` of a truncation (followed at once by a sync, so applied as one step);
//! more than one directory.
//!
//! **Known-bad variants**: [`Storage::ack_before_sync`] acknowledges a commit when it is appended; the checker
//! finds an acknowledged commit lost. [`Storage::table_not_synced`] installs the manifest without syncing the
//! table's data; [`Storage::no_dir_sync_before_manifest`] skips the directory sync before the manifest is
//! written: the checker finds a manifest naming a missing or damaged table. [`Storage::empty_segment_counts`]
//! (the rule before ADR-0033): the checker finds a false corruption after a crash during recovery.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use engine::manifest::{Manifest, TableMeta, decode_manifest, encode_manifest};
use engine::recovery_rules::{
    SegmentEnd, UNSEALED_REASON, batch_follows, next_file_number, recovered_last_sequence, replays_segment,
    segment_counts, segment_end,
};
use engine::wal::{
    Batch, BatchWrite, Record, RecordKind, decode_segment, encode_batch, encode_record_padded, next_append_start,
};
use engine::{Sequence, ValueKind};
use stateright::{Model, Property};

use crate::check::Spec;

/// A file in the database directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Name {
    Manifest,
    ManifestTmp,
    Table(u64),
    Wal(u64),
}

type InodeId = u32;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum DataOp {
    Write { offset: usize, data: Vec<u8> },
    SetLen(usize),
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Inode {
    durable: Vec<u8>,
    pending: Vec<DataOp>,
}

fn write_into(image: &mut Vec<u8>, offset: usize, data: &[u8]) {
    if image.len() < offset + data.len() {
        image.resize(offset + data.len(), 0);
    }
    image[offset..offset + data.len()].copy_from_slice(data);
}

impl Inode {
    fn current(&self) -> Vec<u8> {
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
enum MetaOp {
    Create(Name, InodeId),
    Remove(Name),
    Rename(Name, Name),
}

/// The abstract disk: SimEnv's rules for one directory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Disk {
    durable: BTreeMap<Name, InodeId>,
    current: BTreeMap<Name, InodeId>,
    meta: Vec<MetaOp>,
    inodes: BTreeMap<InodeId, Inode>,
    next_inode: InodeId,
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
    fn inode_of(&self, name: Name) -> InodeId {
        *self.current.get(&name).unwrap_or_else(|| panic!("{name:?} does not exist"))
    }

    fn exists(&self, name: Name) -> bool {
        self.current.contains_key(&name)
    }

    fn create(&mut self, name: Name) {
        assert!(!self.exists(name), "create_new of an existing {name:?}");
        let inode = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(inode, Inode::default());
        self.current.insert(name, inode);
        self.meta.push(MetaOp::Create(name, inode));
    }

    fn open_truncate(&mut self, name: Name) {
        if self.exists(name) {
            let inode = self.inode_of(name);
            self.inodes.get_mut(&inode).expect("inode").pending.push(DataOp::SetLen(0));
        } else {
            self.create(name);
        }
    }

    fn write(&mut self, name: Name, offset: usize, data: Vec<u8>) {
        let inode = self.inode_of(name);
        self.inodes.get_mut(&inode).expect("inode").pending.push(DataOp::Write { offset, data });
    }

    fn sync_file(&mut self, name: Name) {
        let inode = self.inodes.get_mut(&self.inode_of(name)).expect("inode");
        inode.durable = inode.current();
        inode.pending.clear();
    }

    fn sync_dir(&mut self) {
        for op in std::mem::take(&mut self.meta) {
            apply_meta(&mut self.durable, &op);
        }
        self.collect_garbage();
    }

    fn rename(&mut self, from: Name, to: Name) {
        let inode = self.current.remove(&from).expect("rename of a missing file");
        self.current.insert(to, inode);
        self.meta.push(MetaOp::Rename(from, to));
    }

    fn remove(&mut self, name: Name) {
        if self.current.remove(&name).is_some() {
            self.meta.push(MetaOp::Remove(name));
        }
    }

    fn collect_garbage(&mut self) {
        let live: BTreeSet<InodeId> = self.current.values().chain(self.durable.values()).copied().collect();
        self.inodes.retain(|id, _| live.contains(id));
    }

    /// The durable namespace a crash that keeps the metadata operations in `keep` leaves.
    fn namespace_after(&self, keep: &[bool]) -> BTreeMap<Name, InodeId> {
        let mut namespace = self.durable.clone();
        for (op, kept) in self.meta.iter().zip(keep) {
            if *kept {
                apply_meta(&mut namespace, op);
            }
        }
        namespace
    }

    /// Every fate of one pending data operation (`representative`: only kept, dropped and two torn images).
    fn fates_of(op: &DataOp, sector: usize, representative: bool) -> Vec<Fate> {
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
    fn crash(&mut self, plan: &CrashPlan, sector: usize) {
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

    fn durable_bytes(&self, name: Name) -> Option<&[u8]> {
        self.durable.get(&name).map(|inode| self.inodes[inode].durable.as_slice())
    }

    fn truncate_durable(&mut self, name: Name, len: usize) {
        let inode = self.durable[&name];
        let inode = self.inodes.get_mut(&inode).expect("inode");
        inode.durable.truncate(len);
        assert!(inode.pending.is_empty(), "truncating a file with pending writes");
    }
}

/// A committed row: (sequence, commit id). Commit `i` writes key `[i]` = value `[i]`.
pub type Row = (Sequence, u8);

const TABLE_MAGIC: u8 = 0x7A;
const TABLE_TRAILER: u8 = 0xA7;

/// The model's table encoding: magic, count, (sequence, id) pairs, trailer.
fn encode_table(rows: &[Row]) -> Vec<u8> {
    let mut bytes = vec![TABLE_MAGIC, u8::try_from(rows.len()).expect("few rows")];
    for (sequence, id) in rows {
        bytes.extend([u8::try_from(*sequence).expect("small sequences"), *id]);
    }
    bytes.push(TABLE_TRAILER);
    bytes
}

fn decode_table(bytes: &[u8]) -> Option<Vec<Row>> {
    let (&magic, rest) = bytes.split_first()?;
    let (&count, rest) = rest.split_first()?;
    let (&trailer, pairs) = rest.split_last()?;
    if magic != TABLE_MAGIC || trailer != TABLE_TRAILER || pairs.len() != 2 * usize::from(count) {
        return None;
    }
    let rows: Vec<Row> = pairs.chunks(2).map(|pair| (Sequence::from(pair[0]), pair[1])).collect();
    rows.iter().all(|&(sequence, id)| sequence > 0 && id > 0).then_some(rows)
}

fn table_meta(number: u64, rows: &[Row]) -> TableMeta {
    let ids = || rows.iter().map(|(_, id)| *id);
    TableMeta {
        level: 0,
        file_number: number,
        size_bytes: encode_table(rows).len() as u64,
        min_sequence: rows.iter().map(|(sequence, _)| *sequence).min().expect("rows"),
        max_sequence: rows.iter().map(|(sequence, _)| *sequence).max().expect("rows"),
        min_key: vec![ids().min().expect("rows")],
        max_key: vec![ids().max().expect("rows")],
    }
}

/// Append one record to the current segment where the engine's writer would put it: after a sync, at the next
/// sector boundary with the gap declared in the header (`engine::wal::next_append_start`, ADR-0067). The model's
/// sync is issued and done in one step, so `wal_synced` is also the offset a sync was issued for.
fn append_record(disk: &mut Disk, process: &mut Process, kind: RecordKind, payload: &[u8]) {
    let (start, pad_bytes) =
        next_append_start(process.wal_end as u64, process.wal_synced as u64, engine::wal::WAL_SECTOR_BYTES);
    let record = encode_record_padded(kind, payload, process.wal_synced as u64, pad_bytes);
    let start = usize::try_from(start).expect("a model segment is small");
    process.wal_end = start + record.len();
    disk.write(Name::Wal(process.wal), start, record);
}

/// One file operation (or in-memory effect) of a job, in the engine's order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    AppendSeal,
    /// Sync the current segment; every appended commit is acknowledged.
    SyncWal,
    Create(Name),
    SyncDir,
    /// The new segment becomes current; the memtable waits for its flush.
    SwitchWal(u64),
    WriteTable(u64),
    SyncFile(Name),
    OpenTmp,
    /// Write `MANIFEST.tmp` for the live tables plus `table`, replaying from `log_number`.
    WriteManifest {
        table: Option<u64>,
        log_number: u64,
    },
    RenameManifest,
    /// The new version is installed in memory.
    Install {
        table: Option<u64>,
        log_number: u64,
    },
    Remove(Name),
    /// `Db::open` returns.
    Opened,
}

impl Step {
    /// Whether the engine holds its state lock here (no commit can interleave).
    fn locked(&self) -> bool {
        !matches!(self, Step::WriteTable(_) | Step::SyncFile(Name::Table(_)) | Step::Remove(_))
    }
}

/// The running engine's durable-relevant state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Process {
    wal: u64,
    wal_end: usize,
    wal_synced: usize,
    memtable: Vec<Row>,
    /// A rotated memtable waiting for its flush.
    immutable: Vec<Row>,
    /// Live tables and their rows.
    tables: BTreeMap<u64, Vec<Row>>,
    log_number: u64,
    next_file: u64,
    /// The last acknowledged sequence.
    last_sequence: Sequence,
    next_sequence: Sequence,
    /// Rows replayed from the log at open, waiting for their table.
    replayed: Vec<Row>,
    job: Vec<Step>,
    opening: bool,
}

/// Which invariant a failure breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureKind {
    LostOrReordered,
    Corruption,
    TableMissing,
}

/// The model state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StorageState {
    pub disk: Disk,
    pub process: Process,
    /// Every commit the running history holds, in sequence order (recovery truncates it to what survived).
    pub history: Vec<Row>,
    /// How many of `history` (a prefix) were acknowledged.
    pub acknowledged: usize,
    pub commits_made: u8,
    pub flushes: u8,
    pub crashes: u8,
    pub torn_tail_seen: bool,
    pub failure: Option<(FailureKind, String)>,
}

/// The model's actions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Commit,
    /// Group commit syncs the current segment.
    Sync,
    Flush,
    /// The next step of the running job.
    Step(Step),
    Crash(CrashPlan),
}

/// The bounds of [`Storage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageBound {
    Small,
    Large,
}

/// The known-bad variants (all false: the shipped protocol).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Variant {
    ack_before_sync: bool,
    table_not_synced: bool,
    no_dir_sync_before_manifest: bool,
    /// The rule before ADR-0033: an empty segment counts when deciding which segment is the last.
    empty_segment_counts: bool,
}

/// The storage model. See the module docs.
#[derive(Clone, Debug)]
pub struct Storage {
    commits: u8,
    flushes: u8,
    crashes: u8,
    sector: usize,
    variant: Variant,
}

impl Storage {
    pub fn new(bound: StorageBound) -> Self {
        let variant = Variant::default();
        match bound {
            StorageBound::Small => Self { commits: 2, flushes: 1, crashes: 2, sector: 32, variant },
            StorageBound::Large => Self { commits: 3, flushes: 1, crashes: 2, sector: 16, variant },
        }
    }

    /// Known-bad: a commit is acknowledged when appended, before any sync.
    pub fn ack_before_sync(mut self) -> Self {
        self.variant.ack_before_sync = true;
        self
    }

    /// Known-bad: a table's data is not synced before the manifest naming it is installed.
    pub fn table_not_synced(mut self) -> Self {
        self.variant.table_not_synced = true;
        self
    }

    /// Known-bad: the directory is not synced between writing a table and writing the manifest.
    pub fn no_dir_sync_before_manifest(mut self) -> Self {
        self.variant.no_dir_sync_before_manifest = true;
        self
    }

    /// Known-bad: an empty segment counts when deciding which segment is the last (the rule before ADR-0033). A
    /// recovery that crashes after creating its new, empty segment but before its manifest is durable leaves the
    /// replayed segment unsealed and not last: the next open calls it corrupt.
    pub fn empty_segment_counts(mut self) -> Self {
        self.variant.empty_segment_counts = true;
        self
    }

    /// The steps that write `rows` as table `number` and install a manifest naming it (flush and recovery).
    fn install_steps(&self, table: Option<u64>, log_number: u64) -> Vec<Step> {
        let mut steps = Vec::new();
        if let Some(number) = table {
            steps.extend([Step::Create(Name::Table(number)), Step::WriteTable(number)]);
            if !self.variant.table_not_synced {
                steps.push(Step::SyncFile(Name::Table(number)));
            }
        }
        if !self.variant.no_dir_sync_before_manifest {
            steps.push(Step::SyncDir);
        }
        steps.extend([
            Step::OpenTmp,
            Step::WriteManifest { table, log_number },
            Step::SyncFile(Name::ManifestTmp),
            Step::RenameManifest,
            Step::SyncDir,
            Step::Install { table, log_number },
        ]);
        steps
    }

    /// The engine's `open` on the durable image: read the manifest and tables, replay the log, and plan the
    /// steps of `install_recovered` and `remove_orphans`. Mutates `state` into the opening process.
    fn recover(&self, state: &mut StorageState) -> Result<(), (FailureKind, String)> {
        let disk = &mut state.disk;
        let manifest = match disk.durable_bytes(Name::Manifest) {
            None => Manifest { next_file_number: 1, last_sequence: 0, log_number: 0, tables: Vec::new() },
            Some(bytes) => decode_manifest(bytes)
                .map_err(|error| (FailureKind::Corruption, format!("MANIFEST does not decode: {error:?}")))?,
        };
        let mut rows: BTreeMap<Sequence, u8> = BTreeMap::new();
        let mut tables = BTreeMap::new();
        for meta in &manifest.tables {
            let name = Name::Table(meta.file_number);
            let bytes = disk
                .durable_bytes(name)
                .ok_or_else(|| (FailureKind::TableMissing, format!("{name:?} listed in the manifest is missing")))?;
            let table = decode_table(bytes)
                .filter(|table| !table.is_empty() && table_meta(meta.file_number, table) == *meta)
                .ok_or_else(|| (FailureKind::TableMissing, format!("{name:?} listed in the manifest is damaged")))?;
            rows.extend(table.iter().copied());
            tables.insert(meta.file_number, table);
        }
        let names: Vec<Name> = disk.durable.keys().copied().collect();
        let numbers = names.iter().filter_map(|name| match name {
            Name::Wal(number) | Name::Table(number) => Some(*number),
            _ => None,
        });
        let highest = numbers.max().unwrap_or(0);
        let segments: Vec<u64> = names
            .iter()
            .filter_map(|name| match name {
                Name::Wal(number) if replays_segment(*number, manifest.log_number) => Some(*number),
                _ => None,
            })
            .collect();
        let mut replayed: BTreeMap<Sequence, u8> = BTreeMap::new();
        // An empty segment holds nothing and does not count when deciding which segment is the last (ADR-0033).
        let segments: Vec<u64> = segments
            .into_iter()
            .filter(|number| {
                let len_bytes = disk.durable_bytes(Name::Wal(*number)).expect("listed").len() as u64;
                self.variant.empty_segment_counts || segment_counts(len_bytes)
            })
            .collect();
        let mut replayed_last: Sequence = 0;
        for (index, &number) in segments.iter().enumerate() {
            let name = Name::Wal(number);
            let is_last = index + 1 == segments.len();
            let scan = decode_segment(disk.durable_bytes(name).expect("listed"));
            for (record_offset, record) in &scan.records {
                if let Record::Batch(batch) = record {
                    if !batch_follows(batch.first_sequence, replayed_last) {
                        let reason =
                            format!("batch at sequence {} does not follow {replayed_last}", batch.first_sequence);
                        return Err((
                            FailureKind::Corruption,
                            format!("{name:?} corrupt at {record_offset}: {reason}"),
                        ));
                    }
                    for (offset, write) in batch.writes.iter().enumerate() {
                        replayed.insert(batch.first_sequence + offset as u64, write.key[0]);
                    }
                    replayed_last = replayed_last.max(batch.last_sequence());
                }
            }
            // The engine's own rule (`engine::recovery_rules::segment_end`), as `recovery.rs` applies it.
            match segment_end(&scan, is_last) {
                SegmentEnd::Corrupt { offset, reason } => {
                    return Err((FailureKind::Corruption, format!("{name:?} corrupt at {offset}: {reason}")));
                }
                SegmentEnd::Unsealed => {
                    return Err((FailureKind::Corruption, format!("{name:?}: {UNSEALED_REASON}")));
                }
                SegmentEnd::Truncate { offset } => {
                    state.torn_tail_seen = true;
                    disk.truncate_durable(name, usize::try_from(offset).expect("small"));
                }
                SegmentEnd::Keep => {}
            }
        }
        for (sequence, id) in &replayed {
            if rows.insert(*sequence, *id).is_some_and(|other| other != *id) {
                return Err((FailureKind::LostOrReordered, format!("two commits recovered at sequence {sequence}")));
            }
        }
        let recovered: Vec<Row> = rows.into_iter().collect();
        let prefix = recovered.len() <= state.history.len() && recovered[..] == state.history[..recovered.len()];
        if !prefix || recovered.len() < state.acknowledged {
            return Err((
                FailureKind::LostOrReordered,
                format!(
                    "recovered {recovered:?}: not a prefix of {:?} holding its {} acknowledged commits",
                    state.history, state.acknowledged
                ),
            ));
        }
        let last_sequence = recovered_last_sequence(manifest.last_sequence, replayed_last);
        let wal = next_file_number(manifest.next_file_number, highest);
        let table = (!replayed.is_empty()).then_some(wal + 1);
        let mut job = vec![Step::Create(Name::Wal(wal))];
        job.extend(self.install_steps(table, wal));
        let live: BTreeSet<u64> = tables.keys().copied().chain(table).collect();
        for name in &names {
            let orphan = match name {
                Name::Wal(number) => *number != wal,
                Name::Table(number) => !live.contains(number),
                _ => false,
            };
            if orphan {
                job.push(Step::Remove(*name));
            }
        }
        job.push(Step::Opened);
        state.acknowledged = recovered.len();
        state.history = recovered;
        state.process = Process {
            wal,
            wal_end: 0,
            wal_synced: 0,
            memtable: Vec::new(),
            immutable: Vec::new(),
            tables,
            log_number: manifest.log_number,
            next_file: wal + 1 + u64::from(table.is_some()),
            last_sequence,
            next_sequence: last_sequence + 1,
            replayed: replayed.into_iter().collect(),
            job,
            opening: true,
        };
        Ok(())
    }

    fn step(&self, state: &mut StorageState) {
        let step = state.process.job.remove(0);
        let (process, disk) = (&mut state.process, &mut state.disk);
        match step {
            Step::AppendSeal => append_record(disk, process, RecordKind::Seal, &[]),
            Step::SyncWal => {
                disk.sync_file(Name::Wal(process.wal));
                process.wal_synced = process.wal_end;
                state.acknowledged = state.history.len();
                process.last_sequence = state.history.last().map_or(process.last_sequence, |(sequence, _)| *sequence);
            }
            Step::Create(name) => disk.create(name),
            Step::SyncDir => disk.sync_dir(),
            Step::SwitchWal(number) => {
                process.immutable = std::mem::take(&mut process.memtable);
                (process.wal, process.wal_end, process.wal_synced) = (number, 0, 0);
            }
            Step::WriteTable(number) => {
                let rows = if process.opening { &process.replayed } else { &process.immutable };
                disk.write(Name::Table(number), 0, encode_table(rows));
            }
            Step::SyncFile(name) => disk.sync_file(name),
            Step::OpenTmp => disk.open_truncate(Name::ManifestTmp),
            Step::WriteManifest { table, log_number } => {
                let mut metas: Vec<TableMeta> =
                    process.tables.iter().map(|(number, rows)| table_meta(*number, rows)).collect();
                if let Some(number) = table {
                    let rows = if process.opening { &process.replayed } else { &process.immutable };
                    metas.push(table_meta(number, rows));
                }
                let manifest = Manifest {
                    next_file_number: process.next_file,
                    last_sequence: process.last_sequence,
                    log_number,
                    tables: metas,
                };
                disk.write(Name::ManifestTmp, 0, encode_manifest(&manifest));
            }
            Step::RenameManifest => disk.rename(Name::ManifestTmp, Name::Manifest),
            Step::Install { table, log_number } => {
                if let Some(number) = table {
                    let rows = if process.opening {
                        std::mem::take(&mut process.replayed)
                    } else {
                        std::mem::take(&mut process.immutable)
                    };
                    process.tables.insert(number, rows);
                }
                process.log_number = log_number;
            }
            Step::Remove(name) => disk.remove(name),
            Step::Opened => process.opening = false,
        }
    }

    fn commit(&self, state: &mut StorageState) {
        state.commits_made += 1;
        let id = state.commits_made;
        let process = &mut state.process;
        let sequence = process.next_sequence;
        let write = BatchWrite { kind: ValueKind::Put, key: vec![id], value: vec![id] };
        let batch = Batch { first_sequence: sequence, writes: vec![write] };
        append_record(&mut state.disk, process, RecordKind::Batch, &encode_batch(&batch));
        process.next_sequence += 1;
        process.memtable.push((sequence, id));
        state.history.push((sequence, id));
        if self.variant.ack_before_sync {
            state.acknowledged = state.history.len();
            process.last_sequence = sequence;
        }
    }

    fn crash(&self, state: &mut StorageState, plan: &CrashPlan) {
        state.crashes += 1;
        state.disk.crash(plan, self.sector);
        if let Err(failure) = self.recover(state) {
            state.failure = Some(failure);
        }
    }
}

impl Model for Storage {
    type State = StorageState;
    type Action = Action;

    fn init_states(&self) -> Vec<StorageState> {
        // A new database: `open` on an empty directory (which is itself a recovery, and may crash).
        let mut state = StorageState {
            disk: Disk::default(),
            process: Process {
                wal: 0,
                wal_end: 0,
                wal_synced: 0,
                memtable: Vec::new(),
                immutable: Vec::new(),
                tables: BTreeMap::new(),
                log_number: 0,
                next_file: 0,
                last_sequence: 0,
                next_sequence: 1,
                replayed: Vec::new(),
                job: Vec::new(),
                opening: true,
            },
            history: Vec::new(),
            acknowledged: 0,
            commits_made: 0,
            flushes: 0,
            crashes: 0,
            torn_tail_seen: false,
            failure: None,
        };
        self.recover(&mut state).expect("an empty directory opens");
        vec![state]
    }

    fn actions(&self, state: &StorageState, actions: &mut Vec<Action>) {
        if state.failure.is_some() {
            return;
        }
        let process = &state.process;
        let free = !process.opening && process.job.first().is_none_or(|step| !step.locked());
        if free && state.commits_made < self.commits {
            actions.push(Action::Commit);
        }
        if free && process.wal_synced < process.wal_end {
            actions.push(Action::Sync);
        }
        if !process.job.is_empty() {
            actions.push(Action::Step(process.job[0].clone()));
        } else if !process.opening && !process.memtable.is_empty() && state.flushes < self.flushes {
            actions.push(Action::Flush);
        }
        if state.crashes < self.crashes {
            actions.extend(state.disk.crash_plans(self.sector).into_iter().map(Action::Crash));
        }
    }

    fn next_state(&self, state: &StorageState, action: Action) -> Option<StorageState> {
        let mut next = state.clone();
        match action {
            Action::Commit => self.commit(&mut next),
            Action::Sync => self.step_sync(&mut next),
            Action::Flush => {
                next.flushes += 1;
                let process = &mut next.process;
                let (segment, table) = (process.next_file, process.next_file + 1);
                process.next_file += 2;
                let mut job = vec![
                    Step::AppendSeal,
                    Step::SyncWal,
                    Step::Create(Name::Wal(segment)),
                    Step::SyncDir,
                    Step::SwitchWal(segment),
                ];
                job.extend(self.install_steps(Some(table), segment));
                job.push(Step::Remove(Name::Wal(process.wal)));
                process.job = job;
            }
            Action::Step(_) => self.step(&mut next),
            Action::Crash(plan) => self.crash(&mut next, &plan),
        }
        Some(next)
    }

    fn format_action(&self, action: &Action) -> String {
        match action {
            Action::Commit => "commit (append a record)".to_string(),
            Action::Sync => "group commit: sync the log, acknowledge".to_string(),
            Action::Flush => "start a flush (rotate, table, manifest)".to_string(),
            Action::Step(step) => format!("step: {step:?}"),
            Action::Crash(plan) => {
                format!(
                    "crash: pending metadata ops kept={:?}, pending data fates by inode={:?}",
                    plan.keep_meta, plan.fates
                )
            }
        }
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("recovered_prefix_keeps_acknowledged", |_, state: &StorageState| {
                !matches!(state.failure, Some((FailureKind::LostOrReordered, _)))
            }),
            Property::always("no_false_corruption", |_, state: &StorageState| {
                !matches!(state.failure, Some((FailureKind::Corruption, _)))
            }),
            Property::always("manifest_tables_present", |_, state: &StorageState| {
                !matches!(state.failure, Some((FailureKind::TableMissing, _)))
            }),
            Property::sometimes("sometimes_torn_tail", |_, state: &StorageState| state.torn_tail_seen),
        ]
    }
}

impl Storage {
    fn step_sync(&self, state: &mut StorageState) {
        let process = &mut state.process;
        state.disk.sync_file(Name::Wal(process.wal));
        process.wal_synced = process.wal_end;
        state.acknowledged = state.history.len();
        process.last_sequence = state.history.last().map_or(process.last_sequence, |(sequence, _)| *sequence);
    }
}

impl Spec for Storage {
    fn name(&self) -> &'static str {
        "Storage"
    }

    fn bounds(&self) -> String {
        let variant = if self.variant == Variant::default() { String::new() } else { format!(" {:?}", self.variant) };
        format!(
            "commits={} flushes={} crashes={} sector_bytes={}{variant}",
            self.commits, self.flushes, self.crashes, self.sector
        )
    }

    fn describe_state(&self, state: &StorageState) -> String {
        let mut text = String::new();
        let _ = writeln!(text, "  history={:?} acknowledged={}", state.history, state.acknowledged);
        let files: Vec<String> = state
            .disk
            .durable
            .iter()
            .map(|(name, inode)| format!("{name:?}#{inode}:{}B", state.disk.inodes[inode].durable.len()))
            .collect();
        let _ = writeln!(text, "  durable files (name#inode:size): {}", files.join(" "));
        let _ = writeln!(text, "  pending job: {:?}", state.process.job);
        if let Some((kind, detail)) = &state.failure {
            let _ = writeln!(text, "  failure ({kind:?}): {detail}");
        }
        text
    }
}
