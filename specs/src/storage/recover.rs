//! The model's recovery: the engine's `open` on the durable image.

use super::*;

impl Storage {
    /// The engine's `open` on the durable image: read the manifest and tables, replay the log, and plan the
    /// steps of `install_recovered` and `remove_orphans`. Mutates `state` into the opening process.
    pub(super) fn recover(&self, state: &mut StorageState) -> Result<(), (FailureKind, String)> {
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
}
