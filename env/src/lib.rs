//! `env`: the only door to nondeterminism.
//!
//! Every source of nondeterminism a system can observe — the clock, file and directory IO, randomness, and the
//! scheduling of background work — goes through the [`Env`] trait. [`RealEnv`] backs it with the operating system;
//! [`SimEnv`] (feature `sim`, on by default) backs it with a simulated world owned by one seed: a virtual clock, a
//! disk that loses, tears and corrupts unsynced writes on [`SimEnv::crash`], seeded fault injection, and a scheduler
//! that runs background tasks only when the simulator steps them.
//!
//! Only this crate may touch `std::fs`, `std::time`, `std::thread` and OS randomness; `clippy.toml` bans them
//! everywhere else (ADR-0002).
//!
//! # Porting code written against `std::fs`
//!
//! [`fs`] is a facade shaped like `std::fs` over any [`Env`]: [`fs::Fs`] has `open`, `create`, `open_options`,
//! `read`, `write`, `rename`, `remove_file`, `create_dir_all`, `read_dir`, `metadata`, `exists` and `sync_dir`;
//! [`fs::File`] implements `Read`, `Write` and `Seek` and has `sync_all`, `sync_data` and `set_len`. Errors are
//! `std::io::Error`s with a faithful kind, and the `env` [`Error`] (naming the path, or telling a simulated crash)
//! inside: [`fs::env_error`]. Ported code changes its imports and threads an `Fs` where it called free functions:
//!
//! ```
//! use std::io::{Read, Seek, SeekFrom, Write};
//!
//! use env::{SimEnv, fs::Fs};
//!
//! # fn main() -> std::io::Result<()> {
//! let fs = Fs::new(SimEnv::new(42)); // or Fs::new(RealEnv::new())
//! fs.create_dir_all("/db")?;
//! let mut log = fs.open_options().read(true).append(true).create(true).open("/db/log")?;
//! log.write_all(b"put k v\n")?;
//! log.sync_data()?; // the bytes are durable...
//! fs.sync_dir("/db")?; // ...and so is the name (std: File::open("/db")?.sync_all())
//! log.seek(SeekFrom::Start(0))?;
//! let mut text = String::new();
//! log.read_to_string(&mut text)?;
//! assert_eq!(text, "put k v\n");
//! # Ok(())
//! # }
//! ```

mod error;
pub mod fs;
pub mod random;
mod real;
#[cfg(feature = "sim")]
pub mod sim;
pub mod sync;
mod task;
pub mod thread;

use std::ffi::OsStr;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use error::{Error, Op, Result};
pub use random::{DeterministicHashMap, DeterministicHashSet, DeterministicRng, StableHasher};
pub use real::{CHILD_POLL_INTERVAL, ChildOutput, IDLE_WORKERS_MAX, RealEnv, TempDir, Watched};
#[cfg(feature = "sim")]
pub use sim::{
    Cost, CostCounters, CrashImage, CrashShape, Device, DeviceCosts, DiskModel, ExplicitFault, FaultConfig,
    FaultKeying, FaultKind, FaultRecord, FileReport, IoKind, LatencyHistogram, NodeInfo, Persistence, SimEnv,
    WeakSimEnv, WorkBudgetExceeded,
};
pub use task::{Task, TaskHandle, TaskStep};

/// How many times [`File::write_all_at`] retries a short write before giving up.
pub const WRITE_ATTEMPTS_MAX: u32 = 64;

/// The default size of a disk sector: the unit of atomicity the simulated disk tears at (ADR-0004) unless its
/// [`DiskModel`] says 4096 (ADR-0110).
pub const SECTOR_SIZE_BYTES: u64 = 512;

/// Options for [`Env::open`]. Reads are always allowed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Create the file if it does not exist.
    pub create: bool,
    /// Fail with [`Error::AlreadyExists`] if the file exists.
    pub create_new: bool,
    /// Truncate the file to zero length on open.
    pub truncate: bool,
    /// Allow writes through the handle.
    pub write: bool,
}

impl OpenOptions {
    /// Open an existing file for reading.
    pub fn read() -> Self {
        Self::default()
    }

    /// Open an existing file for reading and writing.
    pub fn read_write() -> Self {
        Self { write: true, ..Self::default() }
    }

    /// Create a file that must not exist yet, for reading and writing.
    pub fn create_new() -> Self {
        Self { create: true, create_new: true, write: true, truncate: false }
    }

    /// Create the file, or truncate it if it exists, for reading and writing.
    pub fn create_truncate() -> Self {
        Self { create: true, create_new: false, write: true, truncate: true }
    }
}

/// An open file. Positional IO only: there is no cursor to share between threads.
pub trait File: Send + Sync + Debug + 'static {
    /// The path this handle was opened with.
    fn path(&self) -> &Path;

    /// Read up to `buf.len()` bytes at `offset`; returns how many were read (0 at or past the end).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize>;

    /// Write `data` at `offset`, extending the file if needed. May write fewer bytes than asked (a short write):
    /// the count is returned.
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<usize>;

    /// Make this file's data and size durable (`fdatasync`). Directory entries need [`Env::sync_dir`].
    fn sync(&self) -> Result<()>;

    /// Set the file's length, truncating or zero-extending it.
    fn set_len(&self, len_bytes: u64) -> Result<()>;

    /// The file's current length.
    fn len(&self) -> Result<u64>;

    /// True when the file is empty.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Read exactly `buf.len()` bytes at `offset`; a file that ends early is [`Error::UnexpectedEof`].
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mut done = 0usize;
        while done < buf.len() {
            let n = self.read_at(offset + done as u64, &mut buf[done..])?;
            if n == 0 {
                return Err(Error::UnexpectedEof { op: Op::Read, path: self.path().to_path_buf(), offset });
            }
            done += n;
            assert!(done <= buf.len(), "read_at returned more bytes than asked");
        }
        Ok(())
    }

    /// Read exactly `len` bytes at `offset` into `buf`, replacing its contents (its capacity is reused); a file
    /// that ends early is [`Error::UnexpectedEof`], and `buf` then holds what was read. The same `read_at` calls as
    /// [`File::read_exact_at`] into a buffer of `len` bytes; an implementation may skip zeroing the buffer first
    /// (`SimFile` copies its image straight into it, ADR-0140).
    fn read_exact_at_into(&self, offset: u64, len: usize, buf: &mut Vec<u8>) -> Result<()> {
        buf.clear();
        buf.resize(len, 0);
        self.read_exact_at(offset, buf)
    }

    /// Write all of `data` at `offset`, continuing after short writes (at most [`WRITE_ATTEMPTS_MAX`] attempts).
    fn write_all_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        let mut done = 0usize;
        for _ in 0..WRITE_ATTEMPTS_MAX {
            if done == data.len() {
                return Ok(());
            }
            let n = self.write_at(offset + done as u64, &data[done..])?;
            assert!(n <= data.len() - done, "write_at returned more bytes than asked");
            done += n;
        }
        if done == data.len() {
            return Ok(());
        }
        Err(Error::Io {
            op: Op::Write,
            path: self.path().to_path_buf(),
            message: format!("gave up after {WRITE_ATTEMPTS_MAX} short writes ({done} of {} bytes)", data.len()),
        })
    }

    /// Append `data` at the current end of the file; returns the offset it was written at.
    fn append(&self, data: &[u8]) -> Result<u64> {
        let offset = self.len()?;
        self.write_all_at(offset, data)?;
        Ok(offset)
    }

    /// Read the whole file.
    fn read_all(&self) -> Result<Vec<u8>> {
        let len = self.len()?;
        let len = usize::try_from(len).map_err(|_| Error::InvalidInput {
            op: Op::Read,
            path: self.path().to_path_buf(),
            message: format!("file of {len} bytes does not fit in memory"),
        })?;
        let mut buf = Vec::new();
        self.read_exact_at_into(0, len, &mut buf)?;
        Ok(buf)
    }
}

/// The one door to nondeterminism. See the crate docs and ADR-0002.
///
/// Cheap to clone: every clone is a handle to the same world.
pub trait Env: Clone + Send + Sync + Debug + 'static {
    /// An open file.
    type File: File;
    /// An advisory lock on a path; released on drop.
    type Lock: Send + Sync + Debug + 'static;

    // ---- clock -------------------------------------------------------------------------------------------------

    /// Monotonic time since this environment started.
    fn now(&self) -> Duration;

    /// Let `duration` pass. On `SimEnv` this advances the virtual clock and returns at once.
    fn sleep(&self, duration: Duration);

    // ---- randomness --------------------------------------------------------------------------------------------

    /// A random `u64`. On `SimEnv` it comes from the seed's engine stream.
    fn random_u64(&self) -> u64;

    /// A uniform integer in `0..bound` (`bound > 0`), by integer arithmetic only.
    fn random_below(&self, bound: u64) -> u64 {
        random::below(bound, || self.random_u64())
    }

    /// True with probability `ppm` parts per million.
    fn random_chance_ppm(&self, ppm: u32) -> bool {
        random::chance_ppm(ppm, self.random_u64())
    }

    // ---- files and directories ---------------------------------------------------------------------------------

    /// Open (and maybe create) a file.
    fn open(&self, path: &Path, options: OpenOptions) -> Result<Self::File>;

    /// Create a directory and all its missing parents.
    fn create_dir_all(&self, path: &Path) -> Result<()>;

    /// The entries of a directory, as full paths, sorted.
    fn list_dir(&self, path: &Path) -> Result<Vec<PathBuf>>;

    /// The names (last components) of a directory's entries, in [`Env::list_dir`]'s order, passed to `visit` one
    /// at a time: `list_dir` without a path built and parsed per entry, for a caller that lists a directory often
    /// (the engine's invariant check after every simulator step, ADR-0136). An entry without a name is skipped.
    /// `visit` must not call the env (the simulated one holds its lock while it visits).
    fn visit_dir_names(&self, path: &Path, visit: &mut dyn FnMut(&OsStr)) -> Result<()> {
        for entry in self.list_dir(path)? {
            if let Some(name) = entry.file_name() {
                visit(name);
            }
        }
        Ok(())
    }

    /// True when a file or directory exists at `path`.
    fn exists(&self, path: &Path) -> Result<bool>;

    /// Remove a file.
    fn remove_file(&self, path: &Path) -> Result<()>;

    /// Rename a file, replacing `to` if it exists. Both paths must be in the same directory.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;

    /// Make the directory's entries (creates, removes, renames inside it) durable.
    fn sync_dir(&self, path: &Path) -> Result<()>;

    /// Take an exclusive advisory lock on `path` (creating the file). Fails with [`Error::Locked`] if held.
    fn lock(&self, path: &Path) -> Result<Self::Lock>;

    // ---- background work ---------------------------------------------------------------------------------------

    /// Start background work. `task` is called repeatedly, one step per call, until it returns
    /// [`TaskStep::Done`]. On `RealEnv` a thread runs it; on `SimEnv` the simulator steps it (ADR-0005).
    fn spawn(&self, name: &str, task: Task) -> TaskHandle;

    /// Wait until the task is done. On `SimEnv` the remaining steps run inline on the caller's stack, so a
    /// plain unit test that never steps the scheduler still completes. Never call this holding a lock the task
    /// takes. Returns [`Error::TaskCancelled`] if a crash cancelled the task.
    fn wait(&self, handle: &TaskHandle) -> Result<()>;

    /// True once the task has returned [`TaskStep::Done`] (or was cancelled).
    fn is_finished(&self, handle: &TaskHandle) -> bool;

    // ---- threads -----------------------------------------------------------------------------------------------

    /// Start an OS thread named `name` running `body`. Call it through [`thread::spawn`], which returns a typed
    /// [`thread::JoinHandle`]. The default body, which `RealEnv` keeps, is `std`'s; `SimEnv` schedules the thread
    /// deterministically (ADR-0104).
    fn spawn_thread(&self, name: &str, body: Box<dyn FnOnce() + Send + 'static>) -> thread::RawThread {
        thread::RawThread::os(thread::start_os_thread(name, body))
    }

    // ---- fault injection in the system's own code ----------------------------------------------------------------

    /// FoundationDB's BUGGIFY: may this fault-injection site misbehave now? Always false on `RealEnv`.
    fn buggify(&self, site: &'static str) -> bool;

    /// A probe: the system reached the rare path `name` (FoundationDB's `CODE_PROBE`, Antithesis's "sometimes"
    /// assertion). Call it through [`probe!`]. `SimEnv` counts hits per name in its world
    /// ([`SimEnv::probe_counts`]); the default body, which `RealEnv` keeps, does nothing and allocates nothing.
    fn probe(&self, _name: &'static str) {}

    /// Count `count` units of the system's own work under `name` (`engine.entries_compared`): work that costs
    /// CPU rather than IO, so that a target can bound it like IO (ADR-0180). `SimEnv` adds it to its world's
    /// [`SimEnv::cost`]; the default body, which `RealEnv` keeps, does nothing.
    fn count_work(&self, _name: &'static str, _count: u64) {}

    /// True on a simulated environment.
    fn is_simulated(&self) -> bool;

    /// The device's sector in bytes (512 or 4096): the unit a power cut may tear a write at, and what a log
    /// pads records to (ADR-0110). `SimEnv`: its world's `--sector-size`; `RealEnv`: 512.
    fn sector_size_bytes(&self) -> u64;
}

/// Mark a rare path as reached: `env::probe!(env, "area.what_happened")` calls [`Env::probe`] on `env`.
///
/// The environment is an argument because probes are counted per simulated world, not per process: swarm
/// seeds run in parallel on several threads, each with its own `SimEnv`, and a global counter would mix their
/// hits and make coverage depend on scheduling. `env` may be an `Env` or a reference to one.
///
/// The name must be a string literal of the form `area.what_happened` (lowercase ASCII letters, digits and `_`,
/// one `.` inside; checked at compile time by [`probe_name_is_valid`]), so that a tidy test can find every call
/// site by its text and compare it with the system's declared list of probes.
///
/// ```
/// use env::{Env, SimEnv};
/// fn recover<E: Env>(env: &E, torn: bool) {
///     if torn {
///         env::probe!(env, "wal.torn_tail_truncated");
///     }
/// }
/// let sim = SimEnv::new(1);
/// recover(&sim, true);
/// assert_eq!(sim.probe_counts().get("wal.torn_tail_truncated"), Some(&1));
/// recover(&env::RealEnv::new(), true); // a no-op
/// ```
#[macro_export]
macro_rules! probe {
    ($env:expr, $name:literal $(,)?) => {{
        const _: () = ::core::assert!(
            $crate::probe_name_is_valid($name),
            ::core::concat!("probe name ", $name, " is not `area.what_happened`")
        );
        use $crate::Env as _;
        ($env).probe($name)
    }};
}

/// Is `name` a valid probe name: `area.what_happened`, lowercase ASCII letters, digits and `_`, exactly one `.`,
/// with a non-empty part on each side? A `const fn`, so [`probe!`] checks its literal at compile time.
pub const fn probe_name_is_valid(name: &str) -> bool {
    let bytes = name.as_bytes();
    let mut dots = 0;
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        if byte == b'.' {
            if index == 0 || index + 1 == bytes.len() {
                return false;
            }
            dots += 1;
        } else if !(byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_') {
            return false;
        }
        index += 1;
    }
    dots == 1
}

/// The parent directory of `path` ("" for a bare name): what [`Env::sync_dir`] must be called on after a
/// create, remove or rename of `path`.
pub fn parent_dir(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}
