//! Directory listings and metadata: `std::fs::{ReadDir, DirEntry, Metadata, FileType}` in the shape the facade can
//! give on every [`Env`].

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;

use super::Fs;
use crate::Env;

/// `std::fs::FileType`: a file or a directory (the [`Env`] has no symlinks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileType {
    dir: bool,
}

impl FileType {
    /// True for a directory.
    pub fn is_dir(&self) -> bool {
        self.dir
    }

    /// True for a regular file.
    pub fn is_file(&self) -> bool {
        !self.dir
    }

    /// Always false: the [`Env`] has no symlinks.
    pub fn is_symlink(&self) -> bool {
        false
    }
}

/// `std::fs::Metadata`: what the facade knows of a path — its type and, for a file, its length. No timestamps or
/// permissions: the [`Env`] has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Metadata {
    file_type: FileType,
    len: u64,
}

impl Metadata {
    pub(super) fn file(len: u64) -> Self {
        Self { file_type: FileType { dir: false }, len }
    }

    pub(super) fn dir() -> Self {
        Self { file_type: FileType { dir: true }, len: 0 }
    }

    /// A file's length in bytes; 0 for a directory (`std` reports the file system's size of a directory, which
    /// differs between file systems and has no simulated counterpart).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the length is 0 (also for every directory).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// File or directory.
    pub fn file_type(&self) -> FileType {
        self.file_type
    }

    /// True for a directory.
    pub fn is_dir(&self) -> bool {
        self.file_type.is_dir()
    }

    /// True for a regular file.
    pub fn is_file(&self) -> bool {
        self.file_type.is_file()
    }

    /// Always false: the [`Env`] has no symlinks.
    pub fn is_symlink(&self) -> bool {
        false
    }
}

/// `std::fs::ReadDir`: an iterator over a directory's entries, sorted by path. The listing is taken whole when
/// [`Fs::read_dir`] returns, so the items are never `Err` (the type keeps `std`'s `io::Result` items so ported loops
/// compile unchanged).
#[derive(Debug)]
pub struct ReadDir<E: Env> {
    fs: Fs<E>,
    entries: std::vec::IntoIter<PathBuf>,
}

impl<E: Env> ReadDir<E> {
    pub(super) fn new(fs: Fs<E>, entries: Vec<PathBuf>) -> Self {
        Self { fs, entries: entries.into_iter() }
    }
}

impl<E: Env> Iterator for ReadDir<E> {
    type Item = io::Result<DirEntry<E>>;

    fn next(&mut self) -> Option<Self::Item> {
        let path = self.entries.next()?;
        Some(Ok(DirEntry { fs: self.fs.clone(), path }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

/// `std::fs::DirEntry`: one entry of a [`ReadDir`].
#[derive(Clone, Debug)]
pub struct DirEntry<E: Env> {
    fs: Fs<E>,
    path: PathBuf,
}

impl<E: Env> DirEntry<E> {
    /// The full path: the listed directory joined with [`DirEntry::file_name`].
    pub fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The entry's name inside its directory.
    pub fn file_name(&self) -> OsString {
        self.path.file_name().map(OsString::from).unwrap_or_default()
    }

    /// [`Fs::metadata`] of the entry (asked now, not cached at listing time).
    pub fn metadata(&self) -> io::Result<Metadata> {
        self.fs.metadata(&self.path)
    }

    /// The entry's [`FileType`] (asked now, like [`DirEntry::metadata`]).
    pub fn file_type(&self) -> io::Result<FileType> {
        Ok(self.metadata()?.file_type())
    }
}
