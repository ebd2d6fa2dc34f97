//! The log writer: a thread of the store's own that owns the open log. The store sends it commands over a channel
//! (append this frame, empty the log) and waits until the writer acknowledges each one, which it does only once
//! the change is synced, so an acknowledged write is durable. Written against `holdfast::env::thread` and
//! `holdfast::env::sync`, which are `std`'s on a real disk and scheduled by the seed under the simulator.
//!
//! The planted race (`--features planted-race`, DECISIONS.md ADR-0002): the writer acknowledges an append as soon
//! as its bytes are written and syncs after. The client returns while the sync may not have run yet, and a power
//! cut in that window loses an acknowledged write. No single-threaded run shows it: the window exists only when
//! the client thread runs between the writer's acknowledgement and its sync.

use std::io::{self, Seek, SeekFrom, Write};
use std::sync::{Arc, PoisonError};

use holdfast::env::Env;
use holdfast::env::fs::File;
use holdfast::env::sync::{Condvar, Mutex, mpsc};
use holdfast::env::thread::JoinHandle;

/// One command for the writer, numbered in the order sent.
#[derive(Debug)]
enum Command {
    Append { lsn: u64, frame: Vec<u8> },
    Truncate { lsn: u64 },
}

/// What the writer has acknowledged: every command up to `acknowledged`, or the error that stopped it.
#[derive(Debug, Default)]
struct Progress {
    acknowledged: u64,
    failed: Option<io::Error>,
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
    pub fn start<E: Env>(env: &E, log: File<E>) -> Self {
        let (commands, receiver) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        let writer_shared = Arc::clone(&shared);
        let thread = holdfast::env::thread::spawn(env, "wal-writer", move || run(log, &receiver, &writer_shared));
        Self { commands: Some(commands), shared, thread: Some(thread), next_lsn: 1 }
    }

    /// Append `frame` to the log and wait until the writer acknowledges it.
    pub fn append(&mut self, frame: Vec<u8>) -> io::Result<()> {
        self.submit(|lsn| Command::Append { lsn, frame })
    }

    /// Empty the log and wait until the writer acknowledges it.
    pub fn truncate(&mut self) -> io::Result<()> {
        self.submit(|lsn| Command::Truncate { lsn })
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
            let _ = thread.join(); // a panic there is the run's failure already (holdfast reports it)
        }
    }
}

/// The writer thread: run each command, acknowledge it (or the error that stopped it), until the store hangs up.
fn run<E: Env>(mut log: File<E>, commands: &mpsc::Receiver<Command>, shared: &Shared) {
    while let Ok(command) = commands.recv() {
        let (lsn, result) = match command {
            Command::Append { lsn, frame } => (lsn, append(&mut log, &frame, shared, lsn)),
            Command::Truncate { lsn } => (lsn, truncate(&mut log)),
        };
        publish(shared, lsn, result);
    }
}

fn append<E: Env>(log: &mut File<E>, frame: &[u8], shared: &Shared, lsn: u64) -> io::Result<()> {
    log.write_all(frame)?;
    #[cfg(feature = "planted-race")]
    publish(shared, lsn, Ok(())); // the planted race: acknowledged before it is durable
    let _ = (shared, lsn);
    log.sync_data()
}

fn truncate<E: Env>(log: &mut File<E>) -> io::Result<()> {
    log.set_len(0)?;
    log.seek(SeekFrom::Start(0))?;
    log.sync_data()
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
