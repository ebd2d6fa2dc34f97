//! What the sqlite target does per operation, per recovery and in the liveness phase.

#![forbid(unsafe_code)]

use holdfast::kit::{ValueSpec, sig_of, value_bytes};
use holdfast::{FailureKind, Observed, Violation, World};

use crate::config::{JournalMode, Promise};
use crate::model::{Found, Judgement, State, Write, apply_writes, found_of};
use crate::ops::{CheckpointMode, Observation, Op};
use crate::{LIVENESS_VALUE_ID, Route, SqliteTarget, db};

type Outcome = Result<Observed<Observation>, Violation>;

/// Where a transaction failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Body,
    Rollback,
    Commit,
}

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Stage::Body => "transaction",
            Stage::Rollback => "rollback",
            Stage::Commit => "commit",
        }
    }
}

/// Run one transaction; on an error, roll back what is still open (a crashed world fails that harmlessly).
fn run_transaction(
    conn: &rusqlite::Connection,
    writes: &[Write],
    rollback: bool,
) -> Result<(), (Stage, rusqlite::Error)> {
    let abandon = |stage: Stage, error: rusqlite::Error| {
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        (stage, error)
    };
    let body = conn.execute_batch("BEGIN").and_then(|()| writes.iter().try_for_each(|write| db::write(conn, write)));
    body.map_err(|error| abandon(Stage::Body, error))?;
    let end = if rollback { (Stage::Rollback, "ROLLBACK") } else { (Stage::Commit, "COMMIT") };
    conn.execute_batch(end.1).map_err(|error| abandon(end.0, error))
}

/// A one-line summary of a table, for reports.
fn summary(found: &Found) -> String {
    let keys: Vec<String> = found.iter().take(12).map(|(key, (len, _))| format!("k{key}:{len}B")).collect();
    format!("{} rows [{}{}]", found.len(), keys.join(" "), if found.len() > 12 { " ..." } else { "" })
}

impl<R: Route> SqliteTarget<R> {
    /// A SQLite error during `what`: in a cell that promises nothing, corruption is recorded and the database
    /// started over; otherwise the framework decides (a crash or a fault excuses it, or it is a violation).
    fn tolerate(&mut self, world: &mut World, what: &str, error: &rusqlite::Error) -> Outcome {
        if self.promise() == Promise::Nothing && db::is_corruption(error) && !world.env().is_halted() {
            self.counters.add("sqlite.integrity_failures", 1);
            return self
                .start_over(world, "corrupt_recorded")
                .map(|()| Observed::Error { class: "corrupt_recorded".into() });
        }
        self.last_error = error.to_string();
        let excused = world.tolerate(what, &db::system_error(error));
        if excused.is_err() && db::is_corruption(error) {
            self.counters.add("sqlite.corruption_errors", 1);
        }
        excused
    }

    /// Record-only cells: forget the connection, wipe the database, reopen it empty. A failure here (an armed
    /// crash, a fault) goes through the framework's rules like any open.
    fn start_over(&mut self, world: &mut World, why: &str) -> Result<(), Violation> {
        self.forget_connection();
        self.wipe_pending = true;
        let env = world.env().clone();
        match self.open_database(&env) {
            Ok(()) => Ok(()),
            Err(error) => world.tolerate::<Observation>(why, &error).map(|_| ()),
        }
    }

    pub(crate) fn apply_op(&mut self, world: &mut World, op: &Op) -> Outcome {
        match op {
            Op::Transaction { writes, rollback } => self.transaction(world, writes, *rollback),
            Op::Get { keys } => self.get(world, keys),
            Op::Range { start, end } => self.range(world, *start, *end),
            Op::Checkpoint { mode } => self.checkpoint(world, *mode),
            Op::IntegrityCheck => self.integrity(world, "structural.integrity_check"),
        }
    }

    /// `BEGIN`, the writes, `COMMIT` or `ROLLBACK`. A `COMMIT` that fails leaves the transaction in flight.
    fn transaction(&mut self, world: &mut World, writes: &[Write], rollback: bool) -> Outcome {
        let Some(conn) = &self.conn else { return Ok(Observed::Skipped) };
        match run_transaction(conn, writes, rollback) {
            Ok(()) if rollback => {
                self.counters.add("sqlite.rollbacks", 1);
                Ok(Observed::Op(Observation::RolledBack))
            }
            Ok(()) => {
                self.history.commit(apply_writes(self.history.current(), writes));
                self.counters.add("sqlite.commits", 1);
                if writes.len() > 1 {
                    self.counters.add("sqlite.multi_row_commits", 1);
                }
                Ok(Observed::Op(Observation::Committed))
            }
            Err((stage, error)) => {
                if stage == Stage::Commit {
                    self.history.in_flight = Some(apply_writes(self.history.current(), writes));
                }
                self.tolerate(world, stage.name(), &error)
            }
        }
    }

    fn get(&mut self, world: &mut World, keys: &[u32]) -> Outcome {
        let Some(conn) = &self.conn else { return Ok(Observed::Skipped) };
        let read: rusqlite::Result<Vec<Option<Vec<u8>>>> = keys.iter().map(|&key| db::get(conn, key)).collect();
        let values = match read {
            Ok(values) => values,
            Err(error) => return self.tolerate(world, "get", &error),
        };
        for (&key, actual) in keys.iter().zip(values) {
            let expected = self.history.current().get(&key).map(|&value| value_bytes(value));
            if actual != expected {
                return Err(Violation::new(
                    "oracle.get",
                    FailureKind::Safety,
                    format!("k{key} = {:?}", expected.map(|bytes| (bytes.len(), sig_of(&bytes)))),
                    format!("{:?}", actual.map(|bytes| (bytes.len(), sig_of(&bytes)))),
                ));
            }
        }
        self.counters.add("sqlite.gets", 1);
        Ok(Observed::Op(Observation::Rows { count: keys.len() as u64 }))
    }

    fn range(&mut self, world: &mut World, start: u32, end: u32) -> Outcome {
        let Some(conn) = &self.conn else { return Ok(Observed::Skipped) };
        let actual = match db::range(conn, i64::from(start), i64::from(end)) {
            Ok(actual) => actual,
            Err(error) => return self.tolerate(world, "range", &error),
        };
        let model: State = self.history.current().range(start..end).map(|(&key, &value)| (key, value)).collect();
        let expected = found_of(&model);
        if actual != expected {
            return Err(Violation::new("oracle.range", FailureKind::Safety, summary(&expected), summary(&actual)));
        }
        self.counters.add("sqlite.ranges", 1);
        Ok(Observed::Op(Observation::Rows { count: actual.len() as u64 }))
    }

    /// A completed WAL checkpoint (every frame copied back and the database synced) is a durable point.
    fn checkpoint(&mut self, world: &mut World, mode: CheckpointMode) -> Outcome {
        let Some(conn) = &self.conn else { return Ok(Observed::Skipped) };
        let (busy, log_frames, checkpointed_frames) = match db::checkpoint(conn, mode.sql()) {
            Ok(row) => row,
            Err(error) => return self.tolerate(world, "checkpoint", &error),
        };
        let wal = self.config.cell.journal_mode == JournalMode::Wal;
        if wal && !busy && log_frames >= 0 && log_frames == checkpointed_frames {
            self.history.mark_durable();
            self.counters.add("sqlite.checkpoints_complete", 1);
        }
        Ok(Observed::Op(Observation::Checkpointed { busy, log_frames, checkpointed_frames }))
    }

    /// `PRAGMA integrity_check`, as an operation or after a recovery.
    fn integrity(&mut self, world: &mut World, invariant: &str) -> Outcome {
        let Some(conn) = &self.conn else { return Ok(Observed::Skipped) };
        match db::integrity_check(conn) {
            Ok(None) => {
                self.counters.add("sqlite.integrity_checks", 1);
                Ok(Observed::Op(Observation::IntegrityOk))
            }
            // An armed crash cut the check's reads: SQLite reports pages it "failed to get" as findings.
            Ok(Some(_)) if world.env().is_halted() => Ok(Observed::Error { class: "crashed".into() }),
            Ok(Some(problems)) => {
                self.counters.add("sqlite.integrity_failures", 1);
                if self.promise() == Promise::Nothing || world.damaged() {
                    self.start_over(world, "integrity_recorded")?;
                    return Ok(Observed::Error { class: "integrity_recorded".into() });
                }
                Err(Violation::new(invariant, FailureKind::Structural, "PRAGMA integrity_check = ok", problems))
            }
            Err(error) => self.tolerate(world, "integrity_check", &error),
        }
    }

    /// After every open: integrity, then the whole table judged against the cell's promise.
    pub(crate) fn recover(&mut self, world: &mut World) -> Result<Observation, Violation> {
        self.verified = false;
        let rows = |found: &Found| found.len() as u64;
        match self.integrity(world, "structural.integrity_check")? {
            Observed::Op(_) => {}
            Observed::Error { class } => return Ok(Observation::Recorded { rows: 0, finding: class }),
            _ => return Ok(Observation::Recorded { rows: 0, finding: "not_verified".into() }),
        }
        let Some(conn) = &self.conn else { return Ok(Observation::Recorded { rows: 0, finding: "closed".into() }) };
        let found = match db::read_all(conn) {
            Ok(found) => found,
            Err(error) => {
                let excused = world.tolerate_verify("durability", "reading the whole table", &db::system_error(&error));
                self.last_error = error.to_string();
                excused?;
                return Ok(Observation::Recorded { rows: 0, finding: "read_failed".into() });
            }
        };
        let promise = self.promise();
        let before = summary(&found_of(self.history.current()));
        let crashes = world.env().crash_count();
        let crashed = crashes > std::mem::replace(&mut self.crashes_seen, crashes);
        let judgement = self.history.recover(&found, promise, crashed);
        self.verified = true;
        let (lost, violation) = match judgement {
            Judgement::Prefix { lost } => (lost, None),
            Judgement::InFlightApplied => {
                self.counters.add("sqlite.in_flight_applied", 1);
                (0, None)
            }
            Judgement::TooOld { lost, allowed } => {
                let expected = format!("at most {allowed} acknowledged commits rolled back ({promise})");
                let actual = format!("{lost} rolled back: {}", summary(&found));
                (lost, Some(Violation::new("durability.lost_commit", FailureKind::Durability, expected, actual)))
            }
            Judgement::Partial => {
                self.counters.add("sqlite.partial_transactions", 1);
                let expected = format!("the state after a prefix of the acknowledged commits (latest: {before})");
                let violation =
                    Violation::new("atomicity.partial_transaction", FailureKind::Durability, expected, summary(&found));
                (0, Some(violation))
            }
        };
        self.counters.add("sqlite.commits_lost", lost);
        self.counters.add("sqlite.recoveries_with_loss", u64::from(lost > 0));
        match violation {
            None => Ok(Observation::Recovered { rows: rows(&found), lost_commits: lost }),
            Some(_) if promise == Promise::Nothing || world.damaged() => {
                // Recorded, not judged; the database is started over (its state matches no model).
                self.start_over(world, "not_a_prefix")?;
                Ok(Observation::Recorded { rows: rows(&found), finding: "not_a_prefix".into() })
            }
            Some(violation) => Err(violation),
        }
    }

    /// Faults healed: the database opened and verified; one commit, a checkpoint, an integrity check, and every
    /// row read back.
    pub(crate) fn liveness(&mut self, world: &mut World) -> Result<(), Violation> {
        if !self.verified || self.conn.is_none() {
            let reason = self.last_error.clone();
            return world.give_up("liveness.open", "SQLite opens and verifies once healed", reason);
        }
        // A fixed value: generation and replay write the same bytes here.
        let value = ValueSpec { id: LIVENESS_VALUE_ID, len: 16 };
        let observed = self.transaction(world, &[Write::Insert { key: 0, value }], false)?;
        let checkpointed = self.checkpoint(world, CheckpointMode::Truncate)?;
        let integrity = self.integrity(world, "liveness.integrity_check")?;
        let expected = Observed::Op(Observation::Committed);
        if observed != expected
            || matches!(checkpointed, Observed::Error { .. })
            || integrity != Observed::Op(Observation::IntegrityOk)
        {
            return Err(Violation::new(
                "liveness.commit",
                FailureKind::Liveness,
                "a commit, a checkpoint and an integrity check succeed once healed",
                format!("{observed:?} {checkpointed:?} {integrity:?}"),
            ));
        }
        let Some(conn) = &self.conn else { return Ok(()) };
        match db::read_all(conn) {
            Ok(found) if found == found_of(self.history.current()) => Ok(()),
            Ok(found) => Err(Violation::new(
                "liveness.read",
                FailureKind::Liveness,
                summary(&found_of(self.history.current())),
                summary(&found),
            )),
            Err(error) => {
                Err(Violation::new("liveness.read", FailureKind::Liveness, "the table reads", error.to_string()))
            }
        }
    }
}
