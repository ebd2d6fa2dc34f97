//! Opening a database: recovery from whatever a crash left (ADR-0012, ADR-0014, ADR-0015).
//! Protocol modelled by `specs::Storage`.
//!
//! 1. Lock the directory. Read `MANIFEST` (none: a new database — nothing was ever acknowledged, because the
//!    first manifest is durable before `open` returns).
//! 2. Open every table the manifest lists; a missing or damaged table is `Error::Corruption` naming it.
//! 3. Replay log segments numbered >= the manifest's log number, in order. A damaged tail of the **last**
//!    segment is a torn write and is truncated; damage a later record proves was synced, or a non-final segment
//!    without its seal, is `Error::Corruption { file, offset }`.
//! 4. The sequence continues from max(manifest's last sequence, last replayed sequence): never lower.
//! 5. Write the replayed memtable as an L0 table, start a new log segment, install a manifest naming both, then
//!    delete everything no manifest references (old segments, orphan tables, `MANIFEST.tmp`). A crash anywhere
//!    in 5 leaves the old manifest in charge, and the next open does it again.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use env::{Env, File, OpenOptions};

use crate::error::{Error, Result};
use crate::jobs::{install_manifest, write_table};
use crate::manifest::{LEVELS, MANIFEST_FILE, MANIFEST_TEMP_FILE, Manifest, read_manifest};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::recovery_rules::{
    SegmentEnd, UNSEALED_REASON, batch_follows, next_file_number, recovered_last_sequence, replays_segment,
    segment_counts, segment_end,
};
use crate::sstable::{BlockCache, Table};
use crate::state::{Inner, State, parse_number, table_file_name, wal_file_name};
use crate::types::{Entry, Sequence};
use crate::version::{LiveTable, Version};
use crate::wal::{Record, WalEnd, WalScan, decode_segment};
use crate::wal_writer::WalWriter;

/// How many times a damaged-looking segment is re-read before its damage is believed (a read can flip a bit).
pub const SEGMENT_READS_MAX: u32 = 3;

/// What the directory holds, by kind.
struct Listing {
    wal_numbers: Vec<u64>,
    table_numbers: BTreeSet<u64>,
    highest_number: u64,
    /// `MANIFEST.tmp` is there: an earlier install was cut (by a crash or an error) before its rename.
    manifest_temp: bool,
}

fn list<E: Env>(env: &E, dir: &Path) -> Result<Listing> {
    let mut listing =
        Listing { wal_numbers: Vec::new(), table_numbers: BTreeSet::new(), highest_number: 0, manifest_temp: false };
    for path in env.list_dir(dir)? {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if let Some(number) = parse_number(&name, "wal-", ".log") {
            listing.wal_numbers.push(number);
            listing.highest_number = listing.highest_number.max(number);
        } else if let Some(number) = parse_number(&name, "table-", ".sst") {
            listing.table_numbers.insert(number);
            listing.highest_number = listing.highest_number.max(number);
        } else if name == MANIFEST_TEMP_FILE {
            listing.manifest_temp = true;
        }
    }
    listing.wal_numbers.sort_unstable();
    Ok(listing)
}

pub(crate) fn open<E: Env>(env: E, dir: &Path, options: Options) -> Result<Arc<Inner<E>>> {
    options.validate()?;
    env.create_dir_all(dir)?;
    env.sync_dir(&env::parent_dir(dir))?;
    let lock_path = dir.join("LOCK");
    let lock = match env.lock(&lock_path) {
        Ok(lock) => lock,
        Err(env::Error::Locked { .. }) => return Err(Error::Locked { path: lock_path }),
        Err(error) => return Err(error.into()),
    };
    let found = read_manifest(&env, dir)?;
    let listing = list(&env, dir)?;
    check_complete(&env, dir, found.as_ref(), &listing)?;
    let manifest =
        found.unwrap_or(Manifest { next_file_number: 1, last_sequence: 0, log_number: 0, tables: Vec::new() });
    if listing.manifest_temp {
        // This open installs a manifest again over the remains of one an earlier install did not finish.
        env::probe!(env, "recovery.interrupted_manifest_install");
    }
    let cache = Arc::new(BlockCache::new(options.block_cache_bytes));
    let version = open_tables(&env, dir, &manifest, &cache)?;
    let replay = replay_logs(&env, dir, &manifest, &listing)?;
    let mut last_sequence = recovered_last_sequence(manifest.last_sequence, replay.last_sequence);
    if crate::canary::active("seq-reset-on-recovery") {
        // Canary: the sequence restarts from what the log alone shows.
        last_sequence = replay.last_sequence;
    }
    let sequence_reset = crate::canary::active("seq-reset-on-recovery");
    assert!(replay.memtable.max_sequence() <= last_sequence || sequence_reset, "recovered sequence went backwards");
    let next_file_number = next_file_number(manifest.next_file_number, listing.highest_number);
    let wal_number = next_file_number;
    let wal_file = env.open(&dir.join(wal_file_name(wal_number)), OpenOptions::create_new())?;
    let state = State {
        memtable: Arc::new(Memtable::new()),
        wal: WalWriter::new(&env, wal_file, wal_number, Arc::default(), options.lock_timing),
        immutables: VecDeque::new(),
        version: Arc::new(version),
        next_file_number: wal_number + 1,
        last_sequence,
        next_sequence: last_sequence + 1,
        pending_commits: VecDeque::new(),
        batches: crate::state::Batches::default(),
        flush_task: None,
        compaction_task: None,
        full_compaction: false,
        pending_outputs: BTreeSet::new(),
        deleting_files: BTreeSet::new(),
        flush_count: 0,
        compaction_count: 0,
        log_seals: 0,
        commit_count: 0,
    };
    let inner = Arc::new(Inner::new(env, dir.to_path_buf(), options, cache, state, lock));
    install_recovered(&inner, &replay.memtable)?;
    remove_orphans(&inner, &listing)?;
    Ok(inner)
}

/// Refuse a directory that lost a file recovery cannot do without (ADR-0073, ADR-0074), before creating or deleting
/// anything: with no `MANIFEST`, a table or a non-empty log segment means the manifest is missing, not that the
/// database is new (an empty segment alone is what a crash during the very first open leaves, ADR-0033); with a
/// manifest, the log segment it names exists until a later manifest names a newer one. Missing tables are
/// `open_tables`' to report.
fn check_complete<E: Env>(env: &E, dir: &Path, manifest: Option<&Manifest>, listing: &Listing) -> Result<()> {
    let missing = |file: PathBuf, reason: String| Err(Error::Corruption { file, offset: 0, reason });
    if let Some(manifest) = manifest {
        if manifest.log_number > 0 && !listing.wal_numbers.contains(&manifest.log_number) {
            let reason = "the log segment the manifest names is missing".to_string();
            return missing(dir.join(wal_file_name(manifest.log_number)), reason);
        }
        return Ok(());
    }
    let mut data = listing.table_numbers.iter().map(|&number| dir.join(table_file_name(number))).next();
    for &number in &listing.wal_numbers {
        let path = dir.join(wal_file_name(number));
        if data.is_none() && env.open(&path, OpenOptions::read())?.len()? > 0 {
            data = Some(path);
        }
    }
    match data {
        Some(found) => {
            missing(dir.join(MANIFEST_FILE), format!("MANIFEST is missing but {} holds data", found.display()))
        }
        None => Ok(()),
    }
}

fn open_tables<E: Env>(env: &E, dir: &Path, manifest: &Manifest, cache: &Arc<BlockCache>) -> Result<Version<E::File>> {
    let mut added = Vec::with_capacity(manifest.tables.len());
    for meta in &manifest.tables {
        let path = dir.join(table_file_name(meta.file_number));
        let file = match env.open(&path, OpenOptions::read()) {
            Ok(file) => file,
            Err(error) if error.is_not_found() => {
                let reason = "table listed in the manifest is missing".to_string();
                return Err(Error::Corruption { file: path, offset: 0, reason });
            }
            Err(error) => return Err(error.into()),
        };
        let table = Table::open(file, meta.file_number, Arc::clone(cache))?;
        if table.min_user_key() != meta.min_key.as_slice() || table.max_user_key() != meta.max_key.as_slice() {
            let reason = "table key range disagrees with the manifest".to_string();
            return Err(Error::Corruption { file: path, offset: 0, reason });
        }
        added.push(Arc::new(LiveTable { meta: meta.clone(), table }));
    }
    let version = Version::default().apply(&[], added);
    assert_eq!(version.levels.len(), LEVELS);
    version.check(manifest.last_sequence).map_err(|reason| Error::Corruption {
        file: dir.join(crate::manifest::MANIFEST_FILE),
        offset: 0,
        reason,
    })?;
    Ok(version)
}

struct Replay {
    memtable: Memtable,
    last_sequence: Sequence,
}

fn replay_logs<E: Env>(env: &E, dir: &Path, manifest: &Manifest, listing: &Listing) -> Result<Replay> {
    let memtable = Memtable::new();
    let mut last_sequence = 0;
    let mut segments = Vec::new();
    for &number in listing.wal_numbers.iter().filter(|&&n| replays_segment(n, manifest.log_number)) {
        let path = dir.join(wal_file_name(number));
        let (scan, file) = read_segment(env, &path)?;
        // An empty segment holds nothing: a recovery that crashed before installing its manifest leaves one
        // (ADR-0033). It does not count when deciding which segment is the last.
        if segment_counts(file.len()?) {
            segments.push((path, scan, file));
        } else {
            env::probe!(env, "recovery.empty_segment_skipped");
        }
    }
    let count = segments.len();
    if count > 1 {
        // A crash or a failure came after a rotation and before the rotated memtable was flushed.
        env::probe!(env, "recovery.multi_segment_replay");
    }
    for (index, (path, scan, file)) in segments.into_iter().enumerate() {
        let is_last = index + 1 == count;
        for (record_offset, record) in &scan.records {
            if let Record::Batch(batch) = record {
                if !batch_follows(batch.first_sequence, last_sequence) {
                    let reason = format!("batch at sequence {} does not follow {last_sequence}", batch.first_sequence);
                    return Err(Error::Corruption { file: path, offset: *record_offset, reason });
                }
                for (offset, write) in batch.writes.iter().enumerate() {
                    memtable.insert(&write.key, batch.first_sequence + offset as u64, write.kind, &write.value);
                }
                last_sequence = last_sequence.max(batch.last_sequence());
            }
        }
        // Canary: point-in-time recovery — damage in a segment that is not the last ends the log there, and the
        // later segments (acknowledged commits in undamaged files) are dropped instead of refusing to open.
        if !is_last
            && crate::canary::active("damaged-segment-ends-log")
            && matches!(segment_end(&scan, is_last), SegmentEnd::Corrupt { .. })
        {
            break;
        }
        check_segment_end(env, &path, &file, &scan, is_last)?;
    }
    Ok(Replay { memtable, last_sequence })
}

/// Apply the rule of how a replayed segment may end ([`segment_end`], ADR-0012): truncate a torn tail of the last
/// segment, refuse damage anywhere else.
fn check_segment_end<E: Env>(env: &E, path: &Path, file: &E::File, scan: &WalScan, is_last: bool) -> Result<()> {
    let file_path = path.to_path_buf();
    match segment_end(scan, is_last) {
        SegmentEnd::Corrupt { offset, reason } => Err(Error::Corruption { file: file_path, offset, reason }),
        SegmentEnd::Truncate { offset } if crate::canary::active("torn-tail-rejected") => {
            Err(Error::Corruption { file: file_path, offset, reason: "torn tail (canary)".into() })
        }
        SegmentEnd::Truncate { offset } => {
            env::probe!(env, "wal.torn_tail_truncated");
            file.set_len(offset)?;
            file.sync()?;
            Ok(())
        }
        SegmentEnd::Unsealed => {
            Err(Error::Corruption { file: file_path, offset: file.len()?, reason: UNSEALED_REASON.into() })
        }
        SegmentEnd::Keep => Ok(()),
    }
}

/// Read and scan a segment. A damaged-looking one is believed only when a second read returns the same bytes
/// (ADR-0207): a read may return transiently flipped bits, two flips can scan alike, and believing a torn tail
/// truncates the segment. Up to [`SEGMENT_READS_MAX`] reads; if no two in a row agree, `Error::Corruption` and
/// the segment is left as it is.
fn read_segment<E: Env>(env: &E, path: &Path) -> Result<(crate::wal::WalScan, E::File)> {
    let file = env.open(path, OpenOptions::read_write())?;
    let mut bytes = file.read_all()?;
    let mut scan = decode_segment(&bytes);
    for _ in 1..SEGMENT_READS_MAX {
        if scan.end == WalEnd::Clean {
            return Ok((scan, file));
        }
        let again = file.read_all()?;
        if again == bytes {
            // The same bytes twice: the damage is on the disk, not in a read.
            return Ok((scan, file));
        }
        // A read returned different bytes: a transient flip, caught by reading again.
        env::probe!(env, "recovery.segment_reread_differed");
        scan = decode_segment(&again);
        bytes = again;
    }
    match damage_offset(&scan.end) {
        None => Ok((scan, file)),
        Some(offset) => Err(Error::Corruption {
            file: path.to_path_buf(),
            offset,
            reason: format!(
                "the log segment looks damaged at offset {offset} but read differently each of {SEGMENT_READS_MAX} \
                 times: left as it is (an unreliable read is no proof of damage)"
            ),
        }),
    }
}

/// Where a scan found damage; `None` for a clean one.
fn damage_offset(end: &WalEnd) -> Option<u64> {
    match end {
        WalEnd::Clean => None,
        WalEnd::TornTail { offset } | WalEnd::Corrupt { offset, .. } => Some(*offset),
    }
}

/// Install the recovered state (step 5). A failure leaves no file of its own behind (ADR-seeds-perf): the new log
/// segment is empty and no manifest needs it (one that names it as the log finds nothing to replay), and a table
/// whose write failed has a fresh number no manifest names. Without this, every open that fails here (a full
/// disk: the table does not fit) adds two files that every later open lists and replays.
fn install_recovered<E: Env>(inner: &Arc<Inner<E>>, memtable: &Memtable) -> Result<()> {
    let result = install_recovered_files(inner, memtable);
    if result.is_err() {
        let number = inner.state().wal.number();
        // Kept when the installed manifest names it (an error after the manifest's rename): a manifest's log
        // segment must exist (ADR-0074). When the manifest cannot be read, kept too: an empty segment is
        // harmless, a missing one is not.
        let named = read_manifest(&inner.env, &inner.dir).map_or(true, |m| m.is_some_and(|m| m.log_number == number));
        if !named {
            remove_quietly(inner, &inner.wal_path(number));
        }
    }
    result
}

/// Best effort: a file that cannot be removed now is an orphan the next successful open removes.
fn remove_quietly<E: Env>(inner: &Inner<E>, path: &Path) {
    let _ = inner.env.remove_file(path);
}

fn install_recovered_files<E: Env>(inner: &Arc<Inner<E>>, memtable: &Memtable) -> Result<()> {
    let entries: Vec<Entry> = memtable.entries().collect();
    let mut state = inner.state();
    let added = if entries.is_empty() {
        Vec::new()
    } else {
        let number = state.allocate_file_number();
        match write_table(inner, number, 0, &entries) {
            Ok(table) => vec![table],
            Err(error) => {
                remove_quietly(inner, &inner.table_path(number));
                return Err(error);
            }
        }
    };
    inner.env.sync_dir(&inner.dir)?;
    let version = state.version.apply(&[], added);
    let log_number = state.wal.number();
    install_manifest(inner, &state, &version, log_number)?;
    state.version = Arc::new(version);
    inner.publish(&state);
    Ok(())
}

fn remove_orphans<E: Env>(inner: &Arc<Inner<E>>, listing: &Listing) -> Result<()> {
    let state = inner.state();
    let live_tables: BTreeSet<u64> = state.version.tables().map(|live| live.meta.file_number).collect();
    let mut doomed: Vec<PathBuf> = Vec::new();
    for &number in &listing.wal_numbers {
        if number != state.wal.number() {
            doomed.push(inner.wal_path(number));
        }
    }
    for &number in &listing.table_numbers {
        if !live_tables.contains(&number) {
            // A flush or compaction output a crash cut before its manifest was installed.
            env::probe!(inner.env, "recovery.orphan_table_removed");
            doomed.push(inner.table_path(number));
        }
    }
    let temp = inner.dir.join(MANIFEST_TEMP_FILE);
    if inner.env.exists(&temp)? {
        doomed.push(temp);
    }
    drop(state);
    for path in doomed {
        match inner.env.remove_file(&path) {
            Ok(()) => {}
            Err(error) if error.is_not_found() => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use env::{FaultConfig, SimEnv};

    use super::*;
    use crate::ValueKind;
    use crate::wal::{Batch, BatchWrite, RecordKind, encode_batch, encode_record};

    /// ADR-0207: reads that flip a different bit each time never agree, so the segment is neither believed
    /// damaged nor truncated; once reads are reliable it replays; real damage (the same bytes twice) is believed.
    #[test]
    fn a_segment_read_differently_each_time_is_not_truncated() {
        let env = SimEnv::new(7);
        let path = Path::new("/db/wal-000001.log");
        env.create_dir_all(Path::new("/db")).expect("dir");
        let writes = vec![BatchWrite { kind: ValueKind::Put, key: b"k".to_vec(), value: b"v".to_vec() }];
        let record = encode_record(RecordKind::Batch, &encode_batch(&Batch { first_sequence: 1, writes }), 0);
        let file = env.open(path, OpenOptions::create_new()).expect("create");
        file.write_all_at(0, &record).expect("write");
        file.sync().expect("sync");
        env.set_fault_config(FaultConfig { read_corruption_ppm: 1_000_000, ..FaultConfig::none() });
        let error = read_segment(&env, path).map(|(scan, _)| scan).expect_err("no two reads agree");
        let named = matches!(&error, Error::Corruption { file, reason, .. }
            if file == path && reason.contains("read differently each of 3 times"));
        assert!(named, "a corruption naming the segment: {error:?}");
        env.set_fault_config(FaultConfig::none());
        let bytes = env.open(path, OpenOptions::read()).expect("open").read_all().expect("read");
        assert_eq!(bytes, record, "the segment keeps its bytes");
        let (scan, _) = read_segment(&env, path).expect("reliable reads");
        assert_eq!((scan.records.len(), scan.end), (1, WalEnd::Clean), "the record replays");
        // A torn tail on the disk reads the same twice: believed.
        file.write_all_at(record.len() as u64, &[0xee; 7]).expect("append garbage");
        let (scan, _) = read_segment(&env, path).expect("a torn tail is no error");
        assert_eq!(scan.end, WalEnd::TornTail { offset: record.len() as u64 });
        assert_eq!(scan.records.len(), 1);
    }
}
