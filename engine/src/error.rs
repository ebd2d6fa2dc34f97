//! The engine's one error type at its public boundary.

use std::fmt;
use std::path::PathBuf;

use crate::ssi::ConflictCause;

/// A decoder's complaint about bytes, before the caller knows which file they came from.
/// Every `decode_*` function is pure and returns this on any bad input; the caller turns it into
/// [`Error::Corruption`] with the file's path and the absolute offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Offset of the bad bytes, relative to the start of the slice given to the decoder.
    pub offset: u64,
    /// What was wrong.
    pub reason: String,
}

impl DecodeError {
    pub fn new(offset: u64, reason: impl Into<String>) -> Self {
        Self { offset, reason: reason.into() }
    }

    /// Shift the offset by `base` (when the slice was part of a larger one).
    pub fn at(mut self, base: u64) -> Self {
        self.offset += base;
        self
    }

    /// Name the file these bytes came from, starting at `base` within it.
    pub fn in_file(self, file: impl Into<PathBuf>, base: u64) -> Error {
        Error::Corruption { file: file.into(), offset: base + self.offset, reason: self.reason }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at offset {}: {}", self.offset, self.reason)
    }
}

/// What went wrong in an engine call.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The environment (file system, scheduler) failed; the inner error names the operation and path.
    Env(env::Error),
    /// Bytes on disk are damaged: a checksum mismatch, an impossible length, a bad magic number.
    Corruption { file: PathBuf, offset: u64, reason: String },
    /// Another `Db` holds the directory's lock file.
    Locked { path: PathBuf },
    /// The `Db` was closed, or a background error (a failed sync) poisoned it: reopen it.
    Closed { reason: String },
    /// An argument is not acceptable (an empty key, a key or value over its size limit).
    InvalidArgument { message: String },
    /// A serialization failure: the transaction must be retried. `cause` says why, and names the key.
    Conflict { cause: ConflictCause },
}

impl Error {
    /// True on a serialization failure (retry the transaction).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Conflict { .. })
    }

    /// True when the error comes from a simulated crash (the instance must be dropped).
    pub fn is_crash(&self) -> bool {
        matches!(self, Error::Env(inner) if inner.is_crash())
    }

    /// True when bytes on disk are damaged.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}

impl From<env::Error> for Error {
    fn from(error: env::Error) -> Self {
        Error::Env(error)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Env(inner) => write!(f, "{inner}"),
            Error::Corruption { file, offset, reason } => {
                write!(f, "corruption in {} at offset {offset}: {reason}", file.display())
            }
            Error::Locked { path } => write!(f, "database is locked by another instance ({})", path.display()),
            Error::Closed { reason } => write!(f, "database is closed: {reason}"),
            Error::InvalidArgument { message } => write!(f, "invalid argument: {message}"),
            Error::Conflict { cause } => write!(f, "serialization conflict: {cause}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Env(inner) => Some(inner),
            _ => None,
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conflict_displays_its_cause_after_the_old_prefix() {
        let error = Error::Conflict { cause: ConflictCause::WriteWrite { key: b"k".to_vec() } };
        assert_eq!(error.to_string(), "serialization conflict: write-write conflict on \"k\": first committer wins");
        assert!(error.is_conflict());
    }
}
