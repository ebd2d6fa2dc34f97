//! The log writer: a thread of the store's own (`std::thread`) that owns the open log. The store sends it commands
//! over an `mpsc` channel (append this frame, empty the log) and waits on a `Condvar` until the writer acknowledges
//! each one, which it does only once the change is synced, so an acknowledged write is durable. The writer times
//! each sync with `std::time::Instant` ([`Stats::sync_max`]).
//!
//! The planted race (`--features planted-race`, DECISIONS.md ADR-0002): the writer acknowledges an append as soon
//! as its bytes are written and syncs after. The client returns while the sync may not have run yet, and a power cut
//! in that window loses an acknowledged write. Only interleavings that run the client between the writer's
//! acknowledgement and its sync show it.

#![cfg_attr(
    feature = "interposed",
    expect(
        clippy::disallowed_methods,
        clippy::disallowed_types,
        reason = "holdfast issue 38: this store is written with std::thread, std::sync and std::time on purpose; the \
                  interpose crate schedules them below std (DECISIONS.md ADR-0003)"
    )
)]

use std::io::{self, Seek, SeekFrom, Write};
use std::sync::{Arc, PoisonError};

use crate::sys::fs::File;
use crate::sys::sync::{Condvar, Mutex, mpsc};
use crate::sys::thread::{self, JoinHandle};
use crate::sys::time::{Duration, Instant};

/// One command for the writer, numbered in the order sent.
#[derive(Debug)]
enum Command {
    Append { lsn: u64, frame: Vec<u8> },
    Truncate { lsn: u64 },
}

/// What the writer has done: for the store's caller (metrics), not for correctness.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Log syncs completed.
    pub syncs: u64,
    /// The longest one, on the process's clock (the world's, under the simulator).
    pub sync_max: Duration,
}

/// What the writer has acknowledged: every command up to `acknowledged`, or the error that stopped it.
#[derive(Debug, Default)]
struct Progress {
    acknowledged: u64,
    failed: Option<io::Error>,
    stats: Stats,
}

#[derive(Debug, Default)]
struct Shared {
    progress: Mutex<Progress>,
    changed: Condvar,
}

/// The client's side of the log writer thread; dropping it stops the thread and waits for it.
#[derive(Debug)]
pub struct LogWriter {
    commands: Option<mpsc::Sender<Command>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    next_lsn: u64,
}

impl LogWriter {
    /// Start the writer thread on `log`, whose cursor is at the end of its last valid frame.
    pub fn start(log: File) -> io::Result<Self> {
        let (commands, receiver) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        let writer_shared = Arc::clone(&shared);
        let builder = thread::Builder::new().name("std-kv-writer".into());
        let thread = builder.spawn(move || run(log, &receiver, &writer_shared))?;
        Ok(Self { commands: Some(commands), shared, thread: Some(thread), next_lsn: 1 })
    }

    /// Append `frame` to the log and wait until the writer acknowledges it.
    pub fn append(&mut self, frame: Vec<u8>) -> io::Result<()> {
        self.submit(|lsn| Command::Append { lsn, frame })
    }

    /// Empty the log and wait until the writer acknowledges it.
    pub fn truncate(&mut self) -> io::Result<()> {
        self.submit(|lsn| Command::Truncate { lsn })
    }

    /// What the writer has done so far.
    pub fn stats(&self) -> Stats {
        self.shared.progress.lock().unwrap_or_else(PoisonError::into_inner).stats
    }

    /// Send the command numbered `lsn` and wait for its acknowledgement.
    fn submit(&mut self, command: impl FnOnce(u64) -> Command) -> io::Result<()> {
        let lsn = self.next_lsn;
        self.next_lsn += 1;
        let sender = self.commands.as_ref().expect("the writer runs until the store is dropped");
        if sender.send(command(lsn)).is_err() {
            return Err(io::Error::other("the log writer thread is gone"));
        }
        let mut progress = self.shared.progress.lock().unwrap_or_else(PoisonError::into_inner);
        while progress.acknowledged < lsn && progress.failed.is_none() {
            progress = self.shared.changed.wait(progress).unwrap_or_else(PoisonError::into_inner);
        }
        match progress.failed.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        drop(self.commands.take()); // the writer's `recv` ends: it returns
        if let Some(thread) = self.thread.take() {
            let _ = thread.join(); // a panic there is the run's failure already (the simulator reports it)
        }
    }
}

/// The writer thread: run each command, acknowledge it (or the error that stopped it), until the store hangs up.
fn run(mut log: File, commands: &mpsc::Receiver<Command>, shared: &Shared) {
    while let Ok(command) = commands.recv() {
        let (lsn, result) = match command {
            Command::Append { lsn, frame } => (lsn, append(&mut log, &frame, shared, lsn)),
            Command::Truncate { lsn } => (lsn, truncate(&mut log, shared)),
        };
        publish(shared, lsn, result);
    }
}

fn append(log: &mut File, frame: &[u8], shared: &Shared, lsn: u64) -> io::Result<()> {
    log.write_all(frame)?;
    #[cfg(feature = "planted-race")]
    publish(shared, lsn, Ok(())); // the planted race: acknowledged before it is durable
    let _ = lsn;
    timed_sync(log, shared)
}

fn truncate(log: &mut File, shared: &Shared) -> io::Result<()> {
    log.set_len(0)?;
    log.seek(SeekFrom::Start(0))?;
    timed_sync(log, shared)
}

/// `sync_data`, timed on the process's clock.
fn timed_sync(log: &File, shared: &Shared) -> io::Result<()> {
    let started = Instant::now();
    log.sync_data()?;
    let took = started.elapsed();
    let mut progress = shared.progress.lock().unwrap_or_else(PoisonError::into_inner);
    progress.stats.syncs += 1;
    progress.stats.sync_max = progress.stats.sync_max.max(took);
    Ok(())
}

/// Acknowledge every command up to `lsn`, or record the error that stopped it; wake the client.
fn publish(shared: &Shared, lsn: u64, result: io::Result<()>) {
    let mut progress = shared.progress.lock().unwrap_or_else(PoisonError::into_inner);
    match result {
        Ok(()) => progress.acknowledged = progress.acknowledged.max(lsn),
        Err(error) => progress.failed = Some(error),
    }
    drop(progress);
    shared.changed.notify_all();
}
