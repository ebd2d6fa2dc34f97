//! `RealEnv`: the operating system behind [`crate::Env`].
//!
//! This file is one of the two places allowed to touch `std::fs`, `std::time`, `std::thread` and OS randomness
//! (ADR-0002); it opts out of the `clippy.toml` bans below, and nowhere else does.
#![expect(clippy::disallowed_methods, reason = "RealEnv is the door to the OS (ADR-0002)")]
#![expect(clippy::disallowed_types, reason = "RealEnv is the door to the OS (ADR-0002)")]

use std::collections::BTreeSet;
use std::fmt;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use crate::{Env, Error, File, Op, OpenOptions, Result, Task, TaskHandle, TaskStep};

/// Idle worker threads a `RealEnv` keeps for reuse: `spawn` hands a task to one of them instead of starting a
/// thread (a short task, such as one group-commit batch, would otherwise pay a thread start each time). A worker
/// that finishes a task when this many are idle exits.
pub const IDLE_WORKERS_MAX: usize = 8;

/// The real operating system: `std::fs` files, a monotonic clock, OS-seeded ChaCha, tasks on reused worker
/// threads (one task per thread at a time).
#[derive(Clone)]
pub struct RealEnv {
    inner: Arc<RealInner>,
}

struct RealInner {
    start: Instant,
    rng: Mutex<ChaCha8Rng>,
    next_task_id: AtomicU64,
    /// Ids of running tasks (a finished task is removed); waiters block on `tasks_changed`.
    tasks: Mutex<BTreeSet<u64>>,
    tasks_changed: Condvar,
    /// Idle workers, each reached through the one sender of its channel: dropping the `RealEnv` drops them, and
    /// each idle worker then exits.
    idle_workers: Mutex<Vec<Sender<Job>>>,
}

/// A task handed to a worker, with the worker's own sender (it puts that back into the idle list when done).
struct Job {
    inner: Arc<RealInner>,
    id: u64,
    task: Task,
    worker: Sender<Job>,
}

/// A worker thread: runs `first`, then whatever it is handed while idle, until its channel is closed or the idle
/// list is full.
fn work(first: Job, jobs: &Receiver<Job>) {
    let mut job = first;
    loop {
        let Job { inner, id, mut task, worker } = job;
        // Removes the task and wakes waiters even if the task panics, so `wait` never hangs on it.
        let finished = FinishGuard { inner: Arc::clone(&inner), id };
        while task() == TaskStep::Continue {}
        drop(task);
        // Idle again before the waiters wake, so the task a waiter spawns next finds this worker.
        let idle_again = {
            let mut idle = inner.idle_workers.lock().expect("idle workers poisoned");
            let room = idle.len() < IDLE_WORKERS_MAX;
            if room {
                idle.push(worker);
            }
            room
        };
        drop(finished);
        if !idle_again {
            return;
        }
        drop(inner);
        match jobs.recv() {
            Ok(next) => job = next,
            Err(_) => return,
        }
    }
}

impl fmt::Debug for RealEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RealEnv").finish_non_exhaustive()
    }
}

impl Default for RealEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl RealEnv {
    /// A real environment with an OS-seeded random stream.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(RealInner {
                start: Instant::now(),
                rng: Mutex::new(ChaCha8Rng::from_os_rng()),
                next_task_id: AtomicU64::new(1),
                tasks: Mutex::new(BTreeSet::new()),
                tasks_changed: Condvar::new(),
                idle_workers: Mutex::new(Vec::new()),
            }),
        }
    }
}

fn map_io(op: Op, path: &Path, error: io::Error) -> Error {
    let path = path.to_path_buf();
    match error.kind() {
        io::ErrorKind::NotFound => Error::NotFound { op, path },
        io::ErrorKind::AlreadyExists => Error::AlreadyExists { op, path },
        io::ErrorKind::StorageFull => Error::NoSpace { op, path },
        io::ErrorKind::UnexpectedEof => Error::UnexpectedEof { op, path, offset: 0 },
        io::ErrorKind::InvalidInput => Error::InvalidInput { op, path, message: error.to_string() },
        _ => Error::Io { op, path, message: error.to_string() },
    }
}

/// Marks a task finished when its thread ends, normally or by a panic.
struct FinishGuard {
    inner: Arc<RealInner>,
    id: u64,
}

impl Drop for FinishGuard {
    fn drop(&mut self) {
        let mut tasks = self.inner.tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let removed = tasks.remove(&self.id);
        assert!(removed || std::thread::panicking(), "task {} finished twice", self.id);
        self.inner.tasks_changed.notify_all();
    }
}

/// A new worker thread for a task (named for its first task), with a fresh channel for what it is handed later.
fn start_worker(name: &str, inner: Arc<RealInner>, id: u64, task: Task) {
    let (worker, jobs) = std::sync::mpsc::channel();
    let job = Job { inner, id, task, worker };
    std::thread::Builder::new()
        .name(format!("holdfast-{name}"))
        .spawn(move || work(job, &jobs))
        .expect("failed to spawn a thread");
}

/// A `std::fs::File` with positional IO.
#[derive(Debug)]
pub struct RealFile {
    file: std::fs::File,
    path: PathBuf,
}

impl File for RealFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.file.read_at(buf, offset).map_err(|e| map_io(Op::Read, &self.path, e))
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<usize> {
        self.file.write_at(data, offset).map_err(|e| map_io(Op::Write, &self.path, e))
    }

    fn sync(&self) -> Result<()> {
        self.file.sync_data().map_err(|e| map_io(Op::Sync, &self.path, e))
    }

    fn set_len(&self, len_bytes: u64) -> Result<()> {
        self.file.set_len(len_bytes).map_err(|e| map_io(Op::SetLen, &self.path, e))
    }

    fn len(&self) -> Result<u64> {
        Ok(self.file.metadata().map_err(|e| map_io(Op::Len, &self.path, e))?.len())
    }
}

/// An advisory `flock` held on a file; released on drop.
#[derive(Debug)]
pub struct RealLock {
    _file: std::fs::File,
}

/// The most OS threads [`RealEnv::map_parallel`] starts.
pub const PARALLEL_JOBS_MAX: usize = 256;

impl RealEnv {
    /// CPU time the calling thread has used (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)` through the `cpu-time`
    /// crate, nanosecond-resolution on Linux; `/proc/thread-self/schedstat` was tick-quantised to 4 ms on our
    /// VM, ADR-0058); `None` where the OS does not say. Unlike wall time, a busy machine does not inflate it.
    pub fn thread_cpu_time() -> Option<Duration> {
        cpu_time::ThreadTime::try_now().ok().map(|now| now.as_duration())
    }

    /// The number of cores this process may use (at least 1).
    pub fn cores() -> usize {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    }

    /// Apply `f` to every item on up to `jobs` OS threads (at most `PARALLEL_JOBS_MAX`); the results come back
    /// in item order, whatever order the threads finished in. A panic in `f` propagates to the caller.
    pub fn map_parallel<T: Send, R: Send>(jobs: usize, items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
        let jobs = jobs.clamp(1, PARALLEL_JOBS_MAX).min(items.len().max(1));
        if jobs == 1 {
            return items.into_iter().map(f).collect();
        }
        let count = items.len();
        let queue: Mutex<std::vec::IntoIter<(usize, T)>> =
            Mutex::new(items.into_iter().enumerate().collect::<Vec<_>>().into_iter());
        let results: Mutex<Vec<Option<R>>> = Mutex::new((0..count).map(|_| None).collect());
        std::thread::scope(|scope| {
            for _ in 0..jobs {
                scope.spawn(|| {
                    loop {
                        let next = queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner).next();
                        let Some((index, item)) = next else { break };
                        let result = f(item);
                        results.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[index] = Some(result);
                    }
                });
            }
        });
        let results: Vec<R> = results
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .into_iter()
            .map(|result| result.expect("every item was mapped"))
            .collect();
        assert_eq!(results.len(), count, "map_parallel lost an item");
        results
    }
}

impl Env for RealEnv {
    type File = RealFile;
    type Lock = RealLock;

    fn now(&self) -> Duration {
        self.inner.start.elapsed()
    }

    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }

    fn random_u64(&self) -> u64 {
        self.inner.rng.lock().expect("rng lock poisoned").next_u64()
    }

    fn open(&self, path: &Path, options: OpenOptions) -> Result<RealFile> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(options.write)
            .create(options.create && !options.create_new)
            .create_new(options.create_new)
            .truncate(options.truncate)
            .open(path)
            .map_err(|e| map_io(Op::Open, path, e))?;
        Ok(RealFile { file, path: path.to_path_buf() })
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        std::fs::create_dir_all(path).map_err(|e| map_io(Op::CreateDir, path, e))
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<PathBuf>> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| map_io(Op::ListDir, path, e))? {
            entries.push(entry.map_err(|e| map_io(Op::ListDir, path, e))?.path());
        }
        entries.sort();
        Ok(entries)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        path.try_exists().map_err(|e| map_io(Op::Exists, path, e))
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| map_io(Op::Remove, path, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| map_io(Op::Rename, from, e))
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        let dir = if path.as_os_str().is_empty() { Path::new(".") } else { path };
        let handle = std::fs::File::open(dir).map_err(|e| map_io(Op::SyncDir, path, e))?;
        handle.sync_all().map_err(|e| map_io(Op::SyncDir, path, e))
    }

    fn lock(&self, path: &Path) -> Result<RealLock> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| map_io(Op::Lock, path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(RealLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked { op: Op::Lock, path: path.to_path_buf() }),
            Err(std::fs::TryLockError::Error(e)) => Err(map_io(Op::Lock, path, e)),
        }
    }

    fn spawn(&self, name: &str, task: Task) -> TaskHandle {
        let id = self.inner.next_task_id.fetch_add(1, Ordering::Relaxed);
        let inserted = self.inner.tasks.lock().expect("task table poisoned").insert(id);
        assert!(inserted, "task id {id} reused");
        let handle = TaskHandle { id, name: name.to_string(), epoch: 0 };
        let idle = self.inner.idle_workers.lock().expect("idle workers poisoned").pop();
        let Some(worker) = idle else {
            start_worker(name, Arc::clone(&self.inner), id, task);
            return handle;
        };
        let job = Job { inner: Arc::clone(&self.inner), id, task, worker: worker.clone() };
        // An idle worker waits in `recv` and holds no sender of its own, so the send reaches it unless it died.
        if let Err(std::sync::mpsc::SendError(job)) = worker.send(job) {
            start_worker(name, job.inner, job.id, job.task);
        }
        handle
    }

    fn wait(&self, handle: &TaskHandle) -> Result<()> {
        let mut tasks = self.inner.tasks.lock().expect("task table poisoned");
        while tasks.contains(&handle.id) {
            tasks = self.inner.tasks_changed.wait(tasks).expect("task table poisoned");
        }
        Ok(())
    }

    fn is_finished(&self, handle: &TaskHandle) -> bool {
        let tasks = self.inner.tasks.lock().expect("task table poisoned");
        !tasks.contains(&handle.id)
    }

    fn buggify(&self, _site: &'static str) -> bool {
        false
    }

    fn is_simulated(&self) -> bool {
        false
    }

    /// 512: the logical sector every Linux block device accepts and the smallest unit a drive writes
    /// atomically. A 4Kn drive's larger sector is not detected (ADR-0110): padding to 512 on it is what the
    /// WAL did before sector sizes were configurable.
    fn sector_size_bytes(&self) -> u64 {
        crate::SECTOR_SIZE_BYTES
    }
}

/// A fresh directory under the OS temp dir ([`RealEnv::temp_dir`]), removed with everything in it on drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort: a leftover scratch directory must not turn a passing run into a panic.
        let _ignored = std::fs::remove_dir_all(&self.path);
    }
}

impl RealEnv {
    /// A fresh, empty directory under the OS temp dir, named `holdfast-<name>-<pid>-<random>`, for tests and
    /// examples on the real file system; it is removed when the returned value drops.
    pub fn temp_dir(&self, name: &str) -> Result<TempDir> {
        let unique = format!("holdfast-{name}-{}-{:016x}", std::process::id(), self.random_u64());
        let path = std::env::temp_dir().join(unique);
        self.create_dir_all(&path)?;
        Ok(TempDir { path })
    }
}

/// What became of one item handed to [`RealEnv::map_watched`].
#[derive(Debug)]
pub enum Watched<R> {
    /// `f` returned this.
    Done(R),
    /// `f` ran longer than the timeout: its thread was abandoned (it keeps running until the process exits) and a
    /// fresh thread took its place.
    Stuck {
        /// Wall-clock time the item had run when the watchdog gave up on it.
        elapsed: Duration,
    },
    /// Not started: `abandoned_max` threads were already abandoned.
    NotRun,
}

/// A message from a [`RealEnv::map_watched`] worker.
enum WatchedMessage<R> {
    Started(usize),
    Finished(usize, std::thread::Result<R>),
}

/// The queue, the results channel and the function the workers of one [`RealEnv::map_watched`] call share.
struct WatchedPool<T, R> {
    queue: Arc<Mutex<std::collections::VecDeque<(usize, T)>>>,
    sender: Sender<WatchedMessage<R>>,
    f: Arc<dyn Fn(T) -> R + Send + Sync>,
}

impl<T: Send + 'static, R: Send + 'static> WatchedPool<T, R> {
    /// A detached thread that takes items until the queue is empty (or the caller stopped listening).
    fn start_worker(&self) {
        let (queue, sender, f) = (Arc::clone(&self.queue), self.sender.clone(), Arc::clone(&self.f));
        let work = move || {
            loop {
                let next = queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop_front();
                let Some((index, item)) = next else { return };
                if sender.send(WatchedMessage::Started(index)).is_err() {
                    return;
                }
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(item)));
                if sender.send(WatchedMessage::Finished(index, result)).is_err() {
                    return;
                }
            }
        };
        std::thread::Builder::new().name("holdfast-watched".into()).spawn(work).expect("failed to spawn a thread");
    }
}

impl RealEnv {
    /// Apply `f` to every item on `jobs` detached OS threads (at most `PARALLEL_JOBS_MAX`) under a wall-clock
    /// watchdog: an item still running `timeout` after it started is reported [`Watched::Stuck`], its thread is
    /// abandoned (a thread cannot be stopped from outside; it runs on until the process exits) and a fresh one
    /// takes its place, until `abandoned_max` threads were abandoned: the items not yet started are then
    /// [`Watched::NotRun`]. Results come back in item order. A panic in `f` propagates to the caller.
    pub fn map_watched<T: Send + 'static, R: Send + 'static>(
        jobs: usize,
        items: Vec<T>,
        timeout: Duration,
        abandoned_max: usize,
        f: Arc<dyn Fn(T) -> R + Send + Sync>,
    ) -> Vec<Watched<R>> {
        let count = items.len();
        let (sender, receiver) = std::sync::mpsc::channel();
        let queue = Arc::new(Mutex::new(items.into_iter().enumerate().collect()));
        let pool = WatchedPool { queue: Arc::clone(&queue), sender, f };
        for _ in 0..jobs.clamp(1, PARALLEL_JOBS_MAX).min(count) {
            pool.start_worker();
        }
        let mut results: Vec<Option<Watched<R>>> = (0..count).map(|_| None).collect();
        let mut running: std::collections::BTreeMap<usize, Instant> = std::collections::BTreeMap::new();
        let mut resolved = 0;
        let mut abandoned = 0;
        while resolved < count {
            let wait = running.values().map(|started| timeout.saturating_sub(started.elapsed())).min();
            let message = match wait {
                Some(wait) => receiver.recv_timeout(wait).ok(),
                None => receiver.recv().ok(),
            };
            match message {
                Some(WatchedMessage::Started(index)) => {
                    running.insert(index, Instant::now());
                }
                // A finish after the watchdog gave up on the item is too late: it stays stuck.
                Some(WatchedMessage::Finished(index, result)) if running.remove(&index).is_some() => {
                    let value = result.unwrap_or_else(|payload| std::panic::resume_unwind(payload));
                    results[index] = Some(Watched::Done(value));
                    resolved += 1;
                }
                Some(WatchedMessage::Finished(..)) | None => {}
            }
            let overdue: Vec<usize> =
                running.iter().filter(|(_, started)| started.elapsed() >= timeout).map(|(index, _)| *index).collect();
            for index in overdue {
                let started = running.remove(&index).expect("overdue items are running");
                results[index] = Some(Watched::Stuck { elapsed: started.elapsed() });
                resolved += 1;
                abandoned += 1;
                if abandoned < abandoned_max {
                    pool.start_worker();
                    continue;
                }
                let mut queue = queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                for (index, _) in queue.drain(..) {
                    results[index] = Some(Watched::NotRun);
                    resolved += 1;
                }
            }
        }
        assert!(running.is_empty(), "map_watched returned with items running");
        results.into_iter().map(|result| result.expect("every item was resolved")).collect()
    }
}

/// What a child process started by [`RealEnv::output_within`] left.
#[derive(Debug)]
pub struct ChildOutput {
    /// How it exited; `None` when it was killed after the timeout.
    pub status: Option<std::process::ExitStatus>,
    /// Wall-clock time from start to exit (or kill).
    pub elapsed: Duration,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// How often [`RealEnv::output_within`] checks whether its child exited.
pub const CHILD_POLL_INTERVAL: Duration = Duration::from_millis(5);

impl RealEnv {
    /// Run `command` to completion, its stdout and stderr captured, like `Command::output`, but kill it when it
    /// runs longer than `timeout` (`None`: no limit); the killed child's output so far is kept.
    pub fn output_within(command: &mut std::process::Command, timeout: Option<Duration>) -> io::Result<ChildOutput> {
        use std::io::Read as _;
        use std::process::Stdio;
        let started = Instant::now();
        let mut child = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
        let drain = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_end(&mut bytes);
                }
                bytes
            })
        };
        let stdout = drain(child.stdout.take().map(|pipe| Box::new(pipe) as Box<dyn Read + Send>));
        let stderr = drain(child.stderr.take().map(|pipe| Box::new(pipe) as Box<dyn Read + Send>));
        let status = match timeout {
            None => Some(child.wait()?),
            Some(timeout) => loop {
                if let Some(status) = child.try_wait()? {
                    break Some(status);
                }
                if started.elapsed() >= timeout {
                    child.kill()?;
                    child.wait()?;
                    break None;
                }
                std::thread::sleep(CHILD_POLL_INTERVAL.min(timeout));
            },
        };
        let elapsed = started.elapsed();
        let stdout = stdout.join().unwrap_or_default();
        let stderr = stderr.join().unwrap_or_default();
        Ok(ChildOutput { status, elapsed, stdout, stderr })
    }
}
