//! The world the VFS serves, in safe code: any [`Env`] behind an object-safe door ([`DynEnv`]), what the VFS
//! reports of the disk, its counters, and the thread's current world (ADR-0078).
//!
//! SQLite calls its VFS through C function pointers with no context of ours, so the VFS finds the world on the
//! calling thread: the target installs its world ([`install`]) before any SQLite call of a run, and every file
//! SQLite opens keeps the world it was opened in. Runs of this target go one at a time per process
//! (`SeedParallelism::OneAtATime`), because SQLite's PRNG is process-wide.

#![forbid(unsafe_code)]

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use holdfast::Coverage;
use holdfast::env::{self, Env, OpenOptions};

/// The sector size the VFS reports (`xSectorSize`) when the environment's is out of range: the simulated disk's
/// default. Otherwise it reports `Env::sector_size_bytes` (ADR-0110), the granularity the disk tears writes at.
pub const SECTOR_SIZE_BYTES: i32 = env::SECTOR_SIZE_BYTES as i32;
/// Where SQLite's temporary files (no name given to `xOpen`) live on the simulated disk.
pub const TEMP_DIR: &str = "/sqlite-tmp";

/// An [`Env`] as the VFS needs it, object-safe so one registered VFS serves any environment.
pub trait DynEnv {
    fn open(&self, path: &Path, options: OpenOptions) -> env::Result<Box<dyn env::File>>;
    fn remove_file(&self, path: &Path) -> env::Result<()>;
    fn exists(&self, path: &Path) -> env::Result<bool>;
    fn sync_dir(&self, path: &Path) -> env::Result<()>;
    fn now(&self) -> Duration;
    fn sleep(&self, duration: Duration);
    fn random_u64(&self) -> u64;
    fn sector_size_bytes(&self) -> u64;
}

impl<E: Env> DynEnv for E {
    fn open(&self, path: &Path, options: OpenOptions) -> env::Result<Box<dyn env::File>> {
        Ok(Box::new(Env::open(self, path, options)?))
    }
    fn remove_file(&self, path: &Path) -> env::Result<()> {
        Env::remove_file(self, path)
    }
    fn exists(&self, path: &Path) -> env::Result<bool> {
        Env::exists(self, path)
    }
    fn sync_dir(&self, path: &Path) -> env::Result<()> {
        Env::sync_dir(self, path)
    }
    fn now(&self) -> Duration {
        Env::now(self)
    }
    fn sleep(&self, duration: Duration) {
        Env::sleep(self, duration);
    }
    fn random_u64(&self) -> u64 {
        Env::random_u64(self)
    }
    fn sector_size_bytes(&self) -> u64 {
        Env::sector_size_bytes(self)
    }
}

/// One run's world as the VFS sees it.
pub struct VfsWorld {
    env: Box<dyn DynEnv>,
    /// `SQLITE_IOCAP_POWERSAFE_OVERWRITE` is reported: true only while the disk never garbles a torn sector
    /// (a crash changes only bytes that were written).
    pub powersafe_overwrite: bool,
    /// Temporary files created so far (they are named `etilqs_<n>`).
    temp_files: Cell<u64>,
    /// The process is gone: every call fails without touching the disk (see [`VfsWorld::fenced`]).
    fenced: Cell<bool>,
    counters: RefCell<Coverage>,
}

impl std::fmt::Debug for VfsWorld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VfsWorld")
            .field("powersafe_overwrite", &self.powersafe_overwrite)
            .field("temp_files", &self.temp_files.get())
            .field("fenced", &self.fenced.get())
            .finish_non_exhaustive()
    }
}

impl VfsWorld {
    /// The device's sector, for `xSectorSize` (ADR-0110).
    pub fn sector_size_bytes(&self) -> i32 {
        i32::try_from(self.env.sector_size_bytes()).unwrap_or(SECTOR_SIZE_BYTES)
    }

    /// A world over `env`.
    pub fn new(env: impl Env, powersafe_overwrite: bool) -> Rc<Self> {
        Rc::new(Self {
            env: Box::new(env),
            powersafe_overwrite,
            temp_files: Cell::new(0),
            fenced: Cell::new(false),
            counters: RefCell::new(Coverage::default()),
        })
    }

    /// The environment.
    pub fn env(&self) -> &dyn DynEnv {
        self.env.as_ref()
    }

    /// Run `f` with the world fenced: SQLite's calls fail (`SQLITE_IOERR`) and touch nothing. For dropping a
    /// connection whose process "died": its close must not checkpoint, delete a WAL or write anything.
    pub fn fenced<R>(&self, f: impl FnOnce() -> R) -> R {
        let before = self.fenced.replace(true);
        let result = f();
        self.fenced.set(before);
        result
    }

    /// Is the world fenced?
    pub fn is_fenced(&self) -> bool {
        self.fenced.get()
    }

    /// The path of the next temporary file.
    pub fn next_temp_path(&self) -> PathBuf {
        let n = self.temp_files.get();
        self.temp_files.set(n + 1);
        Path::new(TEMP_DIR).join(format!("etilqs_{n:06}"))
    }

    /// Count one VFS event (`vfs.<name>`).
    pub fn count(&self, name: &str) {
        self.counters.borrow_mut().add(name, 1);
    }

    /// The VFS's counters so far.
    pub fn counters(&self) -> Coverage {
        self.counters.borrow().clone()
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<VfsWorld>>> = const { RefCell::new(None) };
}

/// Make `world` the one SQLite's VFS-level calls (open, delete, access, randomness, time, sleep) reach on this
/// thread.
pub fn install(world: &Rc<VfsWorld>) {
    CURRENT.with(|current| *current.borrow_mut() = Some(Rc::clone(world)));
}

/// The world installed on this thread, if any.
pub fn current() -> Option<Rc<VfsWorld>> {
    CURRENT.with(|current| current.borrow().clone())
}

/// Julian day number of the simulated clock's zero, in milliseconds: 2026-01-01T00:00:00Z (Unix epoch
/// 2_440_587.5 days plus 20_454 days).
pub const CLOCK_ZERO_JULIAN_MS: i64 = 210_866_760_000_000 + 1_767_225_600_000;

/// What `xCurrentTimeInt64` reports: the simulated clock as Julian day milliseconds.
pub fn julian_ms(world: Option<&VfsWorld>) -> i64 {
    let since_zero_ms = world.map_or(0, |world| world.env().now().as_millis());
    CLOCK_ZERO_JULIAN_MS.saturating_add(i64::try_from(since_zero_ms).unwrap_or(i64::MAX / 2))
}

/// The parent directory of a file, for directory syncs.
pub fn parent(path: &Path) -> PathBuf {
    path.parent().map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
}
