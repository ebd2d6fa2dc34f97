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

mod disk;
mod recover;

pub use disk::{CrashPlan, Disk, Fate, Name};

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
