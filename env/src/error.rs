use std::fmt;
use std::io;
use std::path::PathBuf;

/// The operation an [`Error`] happened in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Op {
    Open,
    Read,
    Write,
    Sync,
    SetLen,
    Len,
    CreateDir,
    ListDir,
    Exists,
    Remove,
    Rename,
    SyncDir,
    Lock,
    Wait,
    /// A cursor move of an [`crate::fs::File`] (the handle checks it; no IO).
    Seek,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Op::Open => "open",
            Op::Read => "read",
            Op::Write => "write",
            Op::Sync => "sync",
            Op::SetLen => "set_len",
            Op::Len => "len",
            Op::CreateDir => "create_dir",
            Op::ListDir => "list_dir",
            Op::Exists => "exists",
            Op::Remove => "remove",
            Op::Rename => "rename",
            Op::SyncDir => "sync_dir",
            Op::Lock => "lock",
            Op::Wait => "wait",
            Op::Seek => "seek",
        };
        f.write_str(name)
    }
}

/// Every way an [`crate::Env`] operation fails. Each variant names the operation and the path
/// (for [`Error::TaskCancelled`], the task's name).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The file or directory does not exist.
    NotFound { op: Op, path: PathBuf },
    /// The file exists and `create_new` was asked.
    AlreadyExists { op: Op, path: PathBuf },
    /// The disk is full (ENOSPC).
    NoSpace { op: Op, path: PathBuf },
    /// An IO error (EIO), real or injected.
    Io { op: Op, path: PathBuf, message: String },
    /// A read ended before the bytes asked for.
    UnexpectedEof { op: Op, path: PathBuf, offset: u64 },
    /// The simulated machine crashed during this call; the power is off until [`crate::SimEnv::restart`].
    Crashed { op: Op, path: PathBuf },
    /// The handle was opened before a crash and is dead.
    StaleHandle { op: Op, path: PathBuf },
    /// Another holder has the lock.
    Locked { op: Op, path: PathBuf },
    /// The call's arguments are not valid here.
    InvalidInput { op: Op, path: PathBuf, message: String },
    /// The task was cancelled by a crash before it finished. `path` holds the task's name.
    TaskCancelled { op: Op, path: PathBuf },
}

impl Error {
    /// The operation that failed.
    pub fn op(&self) -> Op {
        match self {
            Error::NotFound { op, .. }
            | Error::AlreadyExists { op, .. }
            | Error::NoSpace { op, .. }
            | Error::Io { op, .. }
            | Error::UnexpectedEof { op, .. }
            | Error::Crashed { op, .. }
            | Error::StaleHandle { op, .. }
            | Error::Locked { op, .. }
            | Error::InvalidInput { op, .. }
            | Error::TaskCancelled { op, .. } => *op,
        }
    }

    /// The path the operation was on.
    pub fn path(&self) -> &std::path::Path {
        match self {
            Error::NotFound { path, .. }
            | Error::AlreadyExists { path, .. }
            | Error::NoSpace { path, .. }
            | Error::Io { path, .. }
            | Error::UnexpectedEof { path, .. }
            | Error::Crashed { path, .. }
            | Error::StaleHandle { path, .. }
            | Error::Locked { path, .. }
            | Error::InvalidInput { path, .. }
            | Error::TaskCancelled { path, .. } => path,
        }
    }

    /// True when the error comes from a (simulated) crash: the instance that saw it must be dropped.
    pub fn is_crash(&self) -> bool {
        matches!(self, Error::Crashed { .. } | Error::StaleHandle { .. } | Error::TaskCancelled { .. })
    }

    /// True when the error is NotFound.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// The [`std::io::ErrorKind`] this error has as an [`std::io::Error`] (see [`crate::fs`]). A crash never maps to
    /// a kind callers retry on (`Interrupted`, `WouldBlock`): it is [`std::io::ErrorKind::Other`], and
    /// [`crate::fs::env_error`] tells it apart.
    pub fn io_kind(&self) -> io::ErrorKind {
        match self {
            Error::NotFound { .. } => io::ErrorKind::NotFound,
            Error::AlreadyExists { .. } => io::ErrorKind::AlreadyExists,
            Error::NoSpace { .. } => io::ErrorKind::StorageFull,
            Error::UnexpectedEof { .. } => io::ErrorKind::UnexpectedEof,
            Error::Locked { .. } => io::ErrorKind::WouldBlock,
            Error::InvalidInput { .. } => io::ErrorKind::InvalidInput,
            Error::Io { .. } | Error::Crashed { .. } | Error::StaleHandle { .. } | Error::TaskCancelled { .. } => {
                io::ErrorKind::Other
            }
        }
    }
}

/// An [`Error`] as an [`io::Error`] of kind [`Error::io_kind`], keeping the original as its inner error (get it back
/// with [`crate::fs::env_error`]), so `?` carries an `env` error into code written against `std::io`.
impl From<Error> for io::Error {
    fn from(error: Error) -> Self {
        io::Error::new(error.io_kind(), error)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (op, path) = (self.op(), self.path().display());
        match self {
            Error::NotFound { .. } => write!(f, "{op} {path}: not found"),
            Error::AlreadyExists { .. } => write!(f, "{op} {path}: already exists"),
            Error::NoSpace { .. } => write!(f, "{op} {path}: no space left on device"),
            Error::Io { message, .. } => write!(f, "{op} {path}: io error: {message}"),
            Error::UnexpectedEof { offset, .. } => write!(f, "{op} {path}: unexpected end of file at offset {offset}"),
            Error::Crashed { .. } => write!(f, "{op} {path}: the simulated machine crashed"),
            Error::StaleHandle { .. } => write!(f, "{op} {path}: handle opened before a crash is dead"),
            Error::Locked { .. } => write!(f, "{op} {path}: already locked by another holder"),
            Error::InvalidInput { message, .. } => write!(f, "{op} {path}: invalid input: {message}"),
            Error::TaskCancelled { .. } => write!(f, "{op} task {path}: cancelled by a crash"),
        }
    }
}

impl std::error::Error for Error {}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
