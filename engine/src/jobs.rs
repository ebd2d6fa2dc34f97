//! Background work: flushes and compactions, run as `Env::spawn` tasks (ADR-0005, ADR-0016). Each task step does
//! one whole job (one memtable flushed, or one compaction) and never holds a lock across table IO; the manifest is
//! installed under the writer lock (never a reader's, ADR-0082) so versions change one at a time, and the new
//! version is published to readers before the lock is released.

use std::mem;
use std::sync::{Arc, Weak};

use env::{Env, File, OpenOptions, TaskHandle, TaskStep};

use crate::error::Result;
use crate::manifest::{Manifest, TableMeta, write_manifest};
use crate::memtable::Memtable;
use crate::scan::merge::{EntrySource, MergeIter};
use crate::sstable::{Table, TableBuilder};
use crate::state::{Inner, State};
use crate::types::Entry;
use crate::version::{LiveTable, Version, is_bottom, pick_compaction, pick_full, retain_versions};

/// Bytes charged per entry when sizing compaction outputs.
const OUTPUT_ENTRY_OVERHEAD_BYTES: u64 = 16;

fn run_step<E: Env>(weak: &Weak<Inner<E>>, job: fn(&Arc<Inner<E>>) -> Result<bool>, is_flush: bool) -> TaskStep {
    let Some(inner) = weak.upgrade() else { return TaskStep::Done };
    match job(&inner) {
        Ok(true) => TaskStep::Continue,
        Ok(false) => TaskStep::Done,
        Err(error) => {
            env::probe!(inner.env, "jobs.background_failed");
            let mut state = inner.state();
            inner.poison(&error);
            if is_flush {
                state.flush_task = None;
            } else {
                state.compaction_task = None;
                state.full_compaction = false;
            }
            TaskStep::Done
        }
    }
}

/// The running flush task, spawned if there is none.
pub(crate) fn ensure_flush_task<E: Env>(inner: &Arc<Inner<E>>, state: &mut State<E>) -> TaskHandle {
    if let Some(handle) = &state.flush_task {
        return handle.clone();
    }
    let weak = Arc::downgrade(inner);
    let handle = inner.env.spawn("flush", Box::new(move || run_step(&weak, flush_step, true)));
    state.flush_task = Some(handle.clone());
    handle
}

/// The running compaction task, spawned if there is none.
pub(crate) fn ensure_compaction_task<E: Env>(inner: &Arc<Inner<E>>, state: &mut State<E>) -> TaskHandle {
    if let Some(handle) = &state.compaction_task {
        return handle.clone();
    }
    let weak = Arc::downgrade(inner);
    let handle = inner.env.spawn("compaction", Box::new(move || run_step(&weak, compaction_step, false)));
    state.compaction_task = Some(handle.clone());
    handle
}

/// Write `entries` (internal-key order, non-empty) as table `number`, synced. The caller syncs the directory.
pub(crate) fn write_table<E: Env>(
    inner: &Inner<E>,
    number: u64,
    level: u8,
    entries: &[Entry],
) -> Result<Arc<LiveTable<E::File>>> {
    assert!(!entries.is_empty(), "an empty table");
    let built = build_table(inner, number, level, table_size_bytes_estimate(entries), |builder| {
        for entry in entries {
            builder.add(entry);
        }
        entries.len() as u64
    })?;
    let meta = &built.meta;
    let first_and_last = (&entries[0].key.user_key, &entries[entries.len() - 1].key.user_key);
    assert_eq!((&meta.min_key, &meta.max_key), first_and_last, "the table's key range disagrees");
    let sequences = entries.iter().map(|e| e.key.sequence);
    let sequence_range = (sequences.clone().min().expect("non-empty"), sequences.max().expect("non-empty"));
    assert_eq!((meta.min_sequence, meta.max_sequence), sequence_range, "the table's sequences disagree");
    Ok(built)
}

/// A flush's table: `memtable`'s versions streamed into the builder through one reused entry, with no
/// allocation per version (they were collected into owned entries before, two allocations each, and freed after).
/// `None` for an empty memtable.
fn write_memtable<E: Env>(
    inner: &Inner<E>,
    number: u64,
    memtable: &Memtable,
) -> Result<Option<Arc<LiveTable<E::File>>>> {
    if memtable.is_empty() {
        return Ok(None);
    }
    // The memtable's charge is each version's key and value plus 32 bytes: about what its table takes.
    let estimate = usize::try_from(memtable.size_bytes()).unwrap_or(usize::MAX).saturating_add(4096);
    let built = build_table(inner, number, 0, estimate, |builder| memtable.for_each_entry(|entry| builder.add(entry)))?;
    // Paired with the memtable's own ends (borrowed, ADR-0158) and largest sequence.
    let (first, last) = memtable.key_bounds().expect("a memtable with versions has ends");
    let meta = &built.meta;
    assert_eq!((meta.min_key.as_slice(), meta.max_key.as_slice()), (first.user_key(), last.user_key()));
    assert_eq!(meta.max_sequence, memtable.max_sequence(), "the table's largest sequence disagrees");
    Ok(Some(built))
}

/// Build a table of level `level` from the entries `add` gives the builder in internal-key order (it returns how
/// many), write it as table `number`, sync it, and open it; its key and sequence ranges are the table's own.
fn build_table<E: Env>(
    inner: &Inner<E>,
    number: u64,
    level: u8,
    size_bytes_estimate: usize,
    add: impl FnOnce(&mut TableBuilder) -> u64,
) -> Result<Arc<LiveTable<E::File>>> {
    let mut builder = TableBuilder::new(inner.options.table_options());
    builder.reserve_for_entries(size_bytes_estimate);
    let added = add(&mut builder);
    assert!(added > 0, "an empty table");
    // The blocks' checksums, walked when built: their first read is not walked again (ADR-0149).
    let (bytes, walked_crcs) = builder.finish_walked();
    let path = inner.table_path(number);
    let file = inner.env.open(&path, OpenOptions::create_new())?;
    file.write_all_at(0, &bytes)?;
    // Canary: the table is published in the manifest before its data is synced.
    if !crate::canary::active("manifest-before-data") {
        file.sync()?;
    }
    let table = Table::open_built(file, number, Arc::clone(&inner.cache), &walked_crcs)?;
    assert_eq!(table.entry_count(), added, "table lost entries");
    let meta = TableMeta {
        level,
        file_number: number,
        size_bytes: bytes.len() as u64,
        min_sequence: table.min_sequence(),
        max_sequence: table.max_sequence(),
        min_key: table.min_user_key().to_vec(),
        max_key: table.max_user_key().to_vec(),
    };
    Ok(Arc::new(LiveTable { meta, table }))
}

/// About the size of the table file `entries` make, reserved up front so that the file's buffer seldom grows (and
/// copies what it holds) while it is built: per entry its key and value, its sizes and trailer (at most 23 bytes),
/// a restart offset and a share of the block's counts, index entry and Bloom bits (its key again: 1 more key and 8
/// bytes), plus 4 KiB for the fixed parts. An estimate, not a bound: a table of many one-entry blocks or long keys
/// grows the buffer past it.
fn table_size_bytes_estimate(entries: &[Entry]) -> usize {
    let per_entry = |entry: &Entry| 2 * entry.key.user_key.len() + entry.value.len() + 23 + 8;
    entries.iter().map(per_entry).sum::<usize>() + 4096
}

/// Write a new manifest for `version` (under the writer lock, so versions install one at a time).
pub(crate) fn install_manifest<E: Env>(
    inner: &Inner<E>,
    state: &State<E>,
    version: &Version<E::File>,
    log_number: u64,
) -> Result<()> {
    let manifest = Manifest {
        next_file_number: state.next_file_number,
        last_sequence: state.last_sequence,
        log_number,
        tables: version.metas(),
    };
    let split = inner.env.buggify("manifest.split_write");
    write_manifest(&inner.env, &inner.dir, &manifest, split)
}

/// Delete the files `numbers` names (`paths`), which the caller marked in `State::deleting_files` under the
/// writer lock when it dropped them from the state; unmark them when done (ADR-0122).
fn remove_obsolete<E: Env>(inner: &Inner<E>, numbers: &[u64], paths: &[std::path::PathBuf]) -> Result<()> {
    let result = paths.iter().try_for_each(|path| match inner.env.remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.is_not_found() => Ok(()),
        Err(error) => Err(error.into()),
    });
    let mut state = inner.state();
    for number in numbers {
        state.deleting_files.remove(number);
    }
    result
}

/// Flush the oldest waiting memtable. Returns whether more remain.
fn flush_step<E: Env>(inner: &Arc<Inner<E>>) -> Result<bool> {
    let (memtable, number) = {
        let mut state = inner.state();
        let front = state.immutables.front().map(|immutable| Arc::clone(&immutable.memtable));
        match front {
            Some(memtable) if !inner.is_poisoned() => {
                let number = state.allocate_file_number();
                state.pending_outputs.insert(number);
                (memtable, number)
            }
            _ => {
                state.flush_task = None;
                return Ok(false);
            }
        }
    };
    let live = write_memtable(inner, number, &memtable)?;
    inner.env.sync_dir(&inner.dir)?;
    let (obsolete_log, more) = {
        let mut state = inner.state();
        let front = state.immutables.front().expect("flushed memtable vanished");
        assert!(Arc::ptr_eq(&front.memtable, &memtable), "flushed a memtable out of order");
        let version = state.version.apply(&[], live.into_iter().collect());
        let log_number = state.immutables.get(1).map_or(state.wal.number(), |immutable| immutable.wal_number);
        install_manifest(inner, &state, &version, log_number)?;
        state.version = Arc::new(version);
        let flushed = state.immutables.pop_front().expect("front exists");
        inner.publish(&state);
        state.pending_outputs.remove(&number);
        state.flush_count += 1;
        maybe_schedule_compaction(inner, &mut state);
        let more = !state.immutables.is_empty();
        if !more {
            state.flush_task = None;
        }
        state.deleting_files.insert(flushed.wal_number);
        ((flushed.wal_number, flushed.wal_path), more)
    };
    remove_obsolete(inner, &[obsolete_log.0], &[obsolete_log.1])?;
    Ok(more)
}

fn maybe_schedule_compaction<E: Env>(inner: &Arc<Inner<E>>, state: &mut State<E>) {
    let options = &inner.options;
    let due = pick_compaction(
        &state.version,
        options.l0_compaction_trigger,
        options.level1_size_bytes,
        options.level_size_ratio,
        false,
    )
    .is_some();
    if state.version.levels[0].len() >= options.l0_compaction_trigger.max(1) {
        env::probe!(inner.env, "flush.l0_trigger_reached");
    }
    if due || inner.env.buggify("compaction.eager") {
        ensure_compaction_task(inner, state);
    }
}

/// Run one compaction job. Returns whether the task should step again.
fn compaction_step<E: Env>(inner: &Arc<Inner<E>>) -> Result<bool> {
    let (pick, watermark, version, full) = {
        let mut state = inner.state();
        let options = &inner.options;
        let full = state.full_compaction;
        let force = inner.env.buggify("compaction.force");
        let pick = if full {
            pick_full(&state.version)
        } else {
            let (trigger, level1, ratio) =
                (options.l0_compaction_trigger, options.level1_size_bytes, options.level_size_ratio);
            pick_compaction(&state.version, trigger, level1, ratio, force)
        };
        match pick {
            Some(pick) if !inner.is_poisoned() => {
                let watermark = inner.gc_watermark(&state);
                if watermark < state.last_sequence {
                    // A snapshot older than the newest write is live: this compaction must keep what it reads.
                    env::probe!(inner.env, "compaction.live_snapshot");
                }
                (pick, watermark, Arc::clone(&state.version), full)
            }
            _ => {
                state.compaction_task = None;
                state.full_compaction = false;
                return Ok(false);
            }
        }
    };
    if pick.source_level.is_some_and(|level| level >= 1) {
        inner.env.count_work(crate::work::LEVELED_COMPACTIONS, 1);
        inner.env.count_work(crate::work::LEVELED_COMPACTION_SOURCE_TABLES, pick.source_tables as u64);
    }
    let min_key = pick.inputs.iter().map(|t| t.meta.min_key.clone()).min().expect("inputs");
    let max_key = pick.inputs.iter().map(|t| t.meta.max_key.clone()).max().expect("inputs");
    let bottom = is_bottom(&version, pick.output_level, &min_key, &max_key);
    let sources: Vec<EntrySource<'_>> =
        pick.inputs.iter().map(|live| Box::new(live.table.iter()) as EntrySource<'_>).collect();
    let outputs = write_compaction_outputs(inner, MergeIter::new(sources), watermark, bottom, pick.output_level)?;
    inner.env.sync_dir(&inner.dir)?;
    let removed: Vec<u64> = pick.inputs.iter().map(|live| live.meta.file_number).collect();
    {
        let mut state = inner.state();
        let new_version = state.version.apply(&removed, outputs.clone());
        install_manifest(inner, &state, &new_version, state.live_log_number())?;
        state.version = Arc::new(new_version);
        inner.publish(&state);
        state.compaction_count += 1;
        for output in &outputs {
            state.pending_outputs.remove(&output.meta.file_number);
        }
        if full {
            state.full_compaction = false;
        }
        state.deleting_files.extend(removed.iter().copied());
    }
    let paths: Vec<_> = removed.iter().map(|&number| inner.table_path(number)).collect();
    remove_obsolete(inner, &removed, &paths)?;
    for number in removed {
        inner.cache.evict_file(number);
    }
    Ok(true)
}

/// Merge, drop what no snapshot needs, and write output tables split at user-key boundaries.
fn write_compaction_outputs<E: Env>(
    inner: &Inner<E>,
    merged: MergeIter<'_>,
    watermark: u64,
    bottom: bool,
    output_level: usize,
) -> Result<Vec<Arc<LiveTable<E::File>>>> {
    let target = inner.options.table_size_bytes_target.max(1);
    let mut outputs = Vec::new();
    let mut pending: Vec<Entry> = Vec::new();
    let mut pending_bytes = 0u64;
    let mut versions: Vec<Entry> = Vec::new();
    let flush_key = |versions: &mut Vec<Entry>, pending: &mut Vec<Entry>, pending_bytes: &mut u64| {
        let below = |entries: &[Entry]| entries.iter().any(|entry| entry.key.sequence <= watermark);
        let had_below = below(versions);
        retain_versions(versions, watermark, bottom);
        if versions.len() > 1 {
            // Only a snapshot below the newest version makes compaction keep an older one.
            env::probe!(inner.env, "compaction.kept_version_for_snapshot");
        }
        if had_below && !below(versions) {
            env::probe!(inner.env, "compaction.tombstone_dropped");
        }
        for entry in versions.drain(..) {
            *pending_bytes += (entry.key.user_key.len() + entry.value.len()) as u64 + OUTPUT_ENTRY_OVERHEAD_BYTES;
            pending.push(entry);
        }
    };
    for entry in merged {
        let entry = entry?;
        if versions.last().is_some_and(|last| last.key.user_key != entry.key.user_key) {
            flush_key(&mut versions, &mut pending, &mut pending_bytes);
            if pending_bytes >= target {
                env::probe!(inner.env, "compaction.output_split");
                outputs.push(write_output(inner, &mem::take(&mut pending), output_level)?);
                pending_bytes = 0;
            }
        }
        versions.push(entry);
    }
    flush_key(&mut versions, &mut pending, &mut pending_bytes);
    if !pending.is_empty() {
        outputs.push(write_output(inner, &pending, output_level)?);
    }
    Ok(outputs)
}

fn write_output<E: Env>(inner: &Inner<E>, entries: &[Entry], level: usize) -> Result<Arc<LiveTable<E::File>>> {
    let number = {
        let mut state = inner.state();
        inner.check_writable()?;
        let number = state.allocate_file_number();
        state.pending_outputs.insert(number);
        number
    };
    write_table(inner, number, u8::try_from(level).expect("level fits"), entries)
}
