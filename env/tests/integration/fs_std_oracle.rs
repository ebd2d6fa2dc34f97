//! `std::fs` itself, as the oracle the `env::fs` facade is compared with (`fs_facade`). The one file of these tests
//! that calls `std::fs` for more than cleaning up a scratch directory; `tidy` allows it by name.
#![expect(clippy::disallowed_methods, reason = "the oracle is std::fs itself, in a scratch directory")]
#![expect(clippy::disallowed_types, reason = "the oracle is std::fs itself, in a scratch directory")]

use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::fs_facade::FsApi;

/// The Unix errno `std` reports for a read through a write-only handle or a write through a read-only one.
const EBADF: i32 = 9;

/// `std::fs` on the real file system.
#[derive(Debug)]
pub(crate) struct StdFs;

impl FsApi for StdFs {
    type Handle = std::fs::File;

    fn open(&self, path: &Path, flags: u8) -> io::Result<std::fs::File> {
        let bit = |i: u8| flags & (1 << i) != 0;
        let mut options = std::fs::OpenOptions::new();
        options.read(bit(0)).write(bit(1)).append(bit(2)).truncate(bit(3)).create(bit(4)).create_new(bit(5));
        options.open(path)
    }

    fn create(&self, path: &Path) -> io::Result<std::fs::File> {
        std::fs::File::create(path)
    }

    fn create_new(&self, path: &Path) -> io::Result<std::fs::File> {
        std::fs::File::create_new(path)
    }

    fn write_at(handle: &std::fs::File, buf: &[u8], offset: u64) -> io::Result<usize> {
        handle.write_at(buf, offset)
    }

    fn read_at(handle: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        handle.read_at(buf, offset)
    }

    fn set_len(handle: &std::fs::File, len: u64) -> io::Result<()> {
        handle.set_len(len)
    }

    fn sync_data(handle: &std::fs::File) -> io::Result<()> {
        handle.sync_data()
    }

    fn sync_all(handle: &std::fs::File) -> io::Result<()> {
        handle.sync_all()
    }

    fn handle_len(handle: &std::fs::File) -> io::Result<u64> {
        Ok(handle.metadata()?.len())
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        std::fs::write(path, bytes)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn read_to_string(&self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir(path)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<(PathBuf, bool)>> {
        let mut listing = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            listing.push((entry.path(), entry.file_type()?.is_dir()));
        }
        // std's order is unspecified; the facade's is sorted, which is one order std allows.
        listing.sort();
        Ok(listing)
    }

    fn metadata(&self, path: &Path) -> io::Result<(u64, bool)> {
        let metadata = std::fs::metadata(path)?;
        // The facade reports 0 for a directory (documented); std reports the file system's size.
        Ok(if metadata.is_dir() { (0, true) } else { (metadata.len(), false) })
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        std::fs::exists(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::File::open(path)?.sync_all()
    }

    /// std reports a read through a write-only handle (or the reverse) as EBADF, whose kind (`Uncategorized`) no
    /// caller can name; the facade reports `InvalidInput` there (documented). Every other kind must match.
    fn describe(error: &io::Error) -> String {
        if error.raw_os_error() == Some(EBADF) {
            return format!("Err({:?})", io::ErrorKind::InvalidInput);
        }
        format!("Err({:?})", error.kind())
    }
}
