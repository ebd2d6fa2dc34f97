//! Operations at the edges of the engine's API (ADR-0071, ADR-0072, ADR-0073, ADR-0074, ADR-0075, ADR-0076, ADR-0077): keys at and past their limits, transactions near
//! and over the log's record limit, long-lived read transactions, and `close` racing background work.

use std::collections::BTreeMap;

use engine::{Db, Error, ReadTransaction};
use holdfast::env::{DeterministicRng, SimEnv};
use holdfast::kit::{ValueSpec, key_bytes, value_bytes};
use holdfast::{FailureKind, Observed, Violation, World};

use crate::config::EngineConfig;
use crate::ops::{Observation, Op};
use crate::{EngineTarget, system_error};

/// The most read-only transactions the target holds open at once.
pub const READERS_MAX: usize = 4;
/// The most values one big transaction writes (each at the run's value limit, `LimitsConfig`: kilobytes in
/// the seeds drawn since ADR-0099, 16 MiB in older seed files).
pub const BIG_TXN_VALUES_MAX: u32 = 5;
/// The share of big transactions that write one value (and commit) instead of four or five (refused).
const BIG_TXN_COMMITTED_PPM: u32 = 125_000;
/// What one write may add to a batch record beyond its key and value bytes, at most (kind, lengths).
const WRITE_OVERHEAD_BYTES_MAX: usize = 64;

type Outcome = Result<Observed<Observation>, Violation>;

fn api_violation(invariant: &str, expected: impl Into<String>, actual: impl Into<String>) -> Violation {
    Violation::new(invariant, FailureKind::Safety, expected, actual)
}

/// A key outside the model's key space (`~` sorts after every `k000000`), `len` bytes long.
fn odd_key(len: u32) -> Vec<u8> {
    vec![b'~'; len as usize]
}

impl EngineTarget {
    /// The next edge-of-the-API operation, `kind` 0..5 in the order of `OpWeights::robust`.
    pub(crate) fn generate_robust(&mut self, rng: &mut DeterministicRng, config: &EngineConfig, kind: usize) -> Op {
        let workload = &config.workload;
        let value = ValueSpec { id: self.next_value_id, len: workload.pick_value_len_bytes(rng) };
        let limits = config.limits();
        match kind {
            0 => {
                self.next_value_id += 1;
                let limit = u32::try_from(limits.key_size_bytes_max).expect("fits");
                let len = [0, 1, limit, limit + 1][rng.index(4)];
                Op::OddKey { len, value }
            }
            1 => {
                // Mostly over the record limit (refused before anything is written: cheap); rarely one value at
                // the value limit, committed. The limits are the run's (kilobytes, ADR-0099); a commit near the
                // engine's default 64 MiB record limit is `engine/tests/integration/robust.rs`'s.
                let values = if rng.chance_ppm(BIG_TXN_COMMITTED_PPM) {
                    1
                } else {
                    rng.range_inclusive(4, u64::from(BIG_TXN_VALUES_MAX))
                };
                let values = u32::try_from(values).expect("fits");
                self.next_value_id += u64::from(values);
                let len = u32::try_from(limits.value_size_bytes_max).expect("fits");
                Op::BigTxn { key: workload.pick_key(rng), values, value: ValueSpec { len, ..value } }
            }
            2 => Op::HoldReader,
            3 => Op::ReleaseReader,
            _ => {
                self.next_value_id += 1;
                Op::CloseRacing { key: workload.pick_key(rng), value }
            }
        }
    }

    /// A put under a key of `len` bytes: accepted and read back when `1..=` the run's key limit, else
    /// `InvalidArgument` (empty keys are invalid, `engine::Error` says).
    pub(crate) fn odd_key_put(&mut self, world: &mut World, len: u32, value: ValueSpec) -> Outcome {
        let (key, bytes) = (odd_key(len), value_bytes(value));
        let valid = (1..=self.config.limits().key_size_bytes_max).contains(&(key.len() as u64));
        let db = self.live_db().clone();
        match db.put(&key, &bytes) {
            Ok(()) if valid => {}
            Err(Error::InvalidArgument { .. }) if !valid => {
                self.counters.add("key.invalid_rejected", 1);
                return Ok(Observed::Op(Observation::Ok));
            }
            Ok(()) | Err(Error::InvalidArgument { .. }) => {
                let expected = if valid { "Ok" } else { "InvalidArgument" };
                return Err(api_violation("api.key_limits", format!("a put under a {len}-byte key: {expected}"), {
                    if valid { "InvalidArgument".to_string() } else { "Ok".to_string() }
                }));
            }
            Err(error) => return world.tolerate("put", &system_error(&error)),
        }
        match db.get(&key) {
            Ok(read) if read.as_deref() == Some(bytes.as_slice()) => {}
            Ok(read) => {
                let actual = format!("{:?} bytes", read.map(|read| read.len()));
                return Err(api_violation("api.key_limits", format!("the {len}-byte key reads back"), actual));
            }
            Err(error) => return world.tolerate("get", &system_error(&error)),
        }
        self.counters.add("key.limit_accepted", u64::from(len > 1));
        match db.delete(&key) {
            Ok(()) => Ok(Observed::Op(Observation::Ok)),
            Err(error) => world.tolerate("delete", &system_error(&error)),
        }
    }

    /// One transaction writing `values` values of `value.len` bytes under keys `key..` (wrapping in the key
    /// space): `InvalidArgument` when the record could not fit the log's limit, committed when it surely fits.
    pub(crate) fn big_txn(&mut self, world: &mut World, key: u32, values: u32, value: ValueSpec) -> Outcome {
        let key_count = self.config.workload.key_count.max(1);
        let writes: BTreeMap<u32, ValueSpec> =
            (0..values).map(|i| ((key + i) % key_count, ValueSpec { id: value.id + u64::from(i), ..value })).collect();
        let raw_bytes: usize = writes.iter().map(|(&k, v)| key_bytes(k).len() + v.len as usize).sum();
        let record_max = usize::try_from(self.config.limits().record_payload_bytes_max).unwrap_or(usize::MAX);
        let over = raw_bytes > record_max;
        let fits = raw_bytes + WRITE_OVERHEAD_BYTES_MAX * (writes.len() + 1) <= record_max;
        let db = self.live_db().clone();
        let mut sigs = Vec::new();
        let result = db.begin().and_then(|mut txn| {
            for (&k, &spec) in &writes {
                let bytes = value_bytes(spec);
                sigs.push((k, self.model.register(spec, &bytes)));
                txn.put(&key_bytes(k), &bytes)?;
            }
            txn.commit()
        });
        match result {
            Ok(()) if !over => {
                self.model.ack_commit(sigs.iter().map(|&(k, sig)| (k, Some(sig))).collect());
                self.counters.add("txn.large_value_committed", 1);
                Ok(Observed::Op(Observation::Ok))
            }
            Err(Error::InvalidArgument { .. }) if !fits => {
                self.counters.add("txn.oversize_rejected", 1);
                // The handle keeps working after the refusal.
                self.get(world, key)
            }
            Ok(()) | Err(Error::InvalidArgument { .. }) => Err(api_violation(
                "api.record_limit",
                format!("a transaction of {raw_bytes} key and value bytes: committed if it fits, else InvalidArgument"),
                format!("{result:?}"),
            )),
            Err(error) => {
                sigs.iter().for_each(|&(k, sig)| self.model.in_flight(k, Some(sig)));
                self.counters.add("in_flight_writes", sigs.len() as u64);
                world.tolerate("big_txn", &system_error(&error))
            }
        }
    }

    /// Begin a read-only transaction and hold it (up to [`READERS_MAX`]) across later steps.
    pub(crate) fn hold_reader(&mut self, world: &mut World) -> Outcome {
        if self.readers.len() >= READERS_MAX {
            return Ok(Observed::Skipped);
        }
        match self.live_db().begin_read() {
            Ok(reader) => {
                self.readers.push(reader);
                self.counters.add("readers.held", 1);
                Ok(Observed::Op(Observation::Ok))
            }
            Err(error) => world.tolerate("begin_read", &system_error(&error)),
        }
    }

    /// Drop the oldest held reader.
    pub(crate) fn release_reader(&mut self) -> Outcome {
        if self.readers.is_empty() {
            return Ok(Observed::Skipped);
        }
        drop(self.readers.remove(0));
        Ok(Observed::Op(Observation::Ok))
    }

    /// Hold a transaction, a reader and a scan iterator, submit a commit (its group commit not yet run), and
    /// close: then no background task may run, and every call (the held ones included) fails with `Closed`.
    /// The database is dropped; the next operation reopens it.
    pub(crate) fn close_racing(&mut self, world: &mut World, key: u32, value: ValueSpec) -> Outcome {
        let db = self.live_db().clone();
        // Tasks of an instance dropped without a close (after a tolerated error) may still be runnable: they find
        // their database gone and end. Only tasks that appear from here on are this close's business.
        let tasks_before: Vec<u64> = world.env().runnable_tasks().into_iter().map(|(id, _)| id).collect();
        let bytes = value_bytes(value);
        let sig = self.model.register(value, &bytes);
        // The iterator borrows its own reader (ADR-0064), so `reader` stays free for the calls after the close.
        let readers = db.begin_read().and_then(|reader| Ok((reader, db.begin_read()?)));
        let (reader, mut scanned) = match readers {
            Ok(held) => held,
            Err(error) => return world.tolerate("close_racing", &system_error(&error)),
        };
        let (iter, txn, ticket) = match hold_and_submit(&db, &mut scanned, &key_bytes(key), &bytes) {
            Ok(held) => held,
            Err((error, submitted)) => {
                if submitted {
                    // A submit that failed may have written its record (unsynced, its log write runs in the
                    // submit, ADR-0203): in flight.
                    self.model.in_flight(key, Some(sig));
                }
                return world.tolerate("close_racing", &system_error(&error));
            }
        };
        self.model.in_flight(key, Some(sig));
        if let Err(error) = db.close() {
            return world.tolerate("close", &system_error(&error));
        }
        let mut runnable = world.env().runnable_tasks();
        runnable.retain(|(id, _)| !tasks_before.contains(id));
        if !runnable.is_empty() {
            return Err(api_violation("close.complete", "no background task runs after close returns", {
                format!("{runnable:?}")
            }));
        }
        let open_calls = calls_after_close(&db, reader, iter, txn);
        if !open_calls.is_empty() {
            return Err(api_violation("close.every_call_closed", "every call after close fails with Closed", {
                format!("these did not: {}", open_calls.join(", "))
            }));
        }
        if let Some(ticket) = ticket
            && db.wait_for_commit(&ticket).is_ok()
        {
            self.model.ack(key, Some(sig));
        }
        // The close returned `Ok`: it synced the log, so the commit it acknowledged is durable too.
        self.durable();
        self.counters.add("close.checked", 1);
        drop(db);
        holdfast::Target::drop_system(self);
        Ok(Observed::Op(Observation::Ok))
    }
}

/// What `close_racing` holds across the close: a scan iterator, a transaction, and a submitted commit's ticket.
type Held<'r> = (engine::ScanIter<'r>, engine::Transaction<SimEnv>, Option<engine::CommitTicket>);

/// A scan iterator over `scanned`, a transaction, and a commit of `key` submitted but not yet synced. On error,
/// whether it came from the submit (the write may have landed).
fn hold_and_submit<'r>(
    db: &Db<SimEnv>,
    scanned: &'r mut ReadTransaction<SimEnv>,
    key: &[u8],
    bytes: &[u8],
) -> Result<Held<'r>, (Error, bool)> {
    let before_submit = |error| (error, false);
    let iter = scanned.scan(..).map_err(before_submit)?;
    let txn = db.begin().map_err(before_submit)?;
    let mut committer = db.begin().map_err(before_submit)?;
    committer.put(key, bytes).map_err(before_submit)?;
    let ticket = committer.submit().map_err(|error| (error, true))?;
    Ok((iter, txn, ticket))
}

/// The calls that did not fail with `Closed` on a closed database (and the handles opened before the close).
fn calls_after_close(
    db: &Db<SimEnv>,
    mut reader: ReadTransaction<SimEnv>,
    mut iter: engine::ScanIter<'_>,
    mut txn: engine::Transaction<SimEnv>,
) -> Vec<&'static str> {
    let key = key_bytes(0);
    let closed = |result: Result<(), Error>| matches!(result, Err(Error::Closed { .. }));
    let calls: [(&'static str, bool); 14] = [
        ("db.get", closed(db.get(&key).map(drop))),
        ("db.put", closed(db.put(&key, b"v"))),
        ("db.delete", closed(db.delete(&key))),
        ("db.scan", closed(db.scan(..).map(drop))),
        ("db.flush", closed(db.flush())),
        ("db.compact", closed(db.compact())),
        ("db.begin", closed(db.begin().map(drop))),
        ("db.begin_read", closed(db.begin_read().map(drop))),
        ("txn.get", closed(txn.get(&key).map(drop))),
        ("txn.scan", closed(txn.scan(..).map(drop))),
        ("txn.put", closed(txn.put(&key, b"v"))),
        ("reader.get", closed(reader.get(&key).map(drop))),
        ("reader.scan", closed(reader.scan(..).map(drop))),
        // An iterator opened before the close: a row it yields after the close must be an error.
        ("iterator.next", iter.next().is_none_or(|row| closed(row.map(drop)))),
    ];
    calls.iter().filter(|(_, closed)| !closed).map(|(name, _)| *name).collect()
}
