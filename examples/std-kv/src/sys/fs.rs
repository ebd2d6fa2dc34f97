//! Route A's `std::fs`: the free functions, `File` and `OpenOptions` of `std`, over the world [`super::enter`] bound
//! to this thread ([`holdfast::env::fs`] underneath, holdfast's ADR-0047).
//!
//! One `std` idiom the facade's `File` has no room for is kept here: `File::open(dir)?.sync_all()`, the usual way
//! to make a rename durable, opens a *directory*. [`File::open`] on a directory gives a handle whose `sync_all` and
//! `sync_data` sync that directory ([`holdfast::env::fs::Fs::sync_dir`]) and whose reads and writes fail, as they do
//! on a directory in `std`.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use holdfast::env::SimEnv;
use holdfast::env::fs::Fs;

use super::world::bound;

/// `std::fs::read`.
pub fn read<P: AsRef<Path>>(path: P) -> io::Result<Vec<u8>> {
    bound()?.read(path)
}

/// `std::fs::write`.
pub fn write<P: AsRef<Path>, C: AsRef<[u8]>>(path: P, contents: C) -> io::Result<()> {
    bound()?.write(path, contents)
}

/// `std::fs::rename`.
pub fn rename<P: AsRef<Path>, Q: AsRef<Path>>(from: P, to: Q) -> io::Result<()> {
    bound()?.rename(from, to)
}

/// `std::fs::remove_file`.
pub fn remove_file<P: AsRef<Path>>(path: P) -> io::Result<()> {
    bound()?.remove_file(path)
}

/// `std::fs::create_dir_all`.
pub fn create_dir_all<P: AsRef<Path>>(path: P) -> io::Result<()> {
    bound()?.create_dir_all(path)
}

/// `std::fs::File`: a file, or (opened read-only with [`File::open`]) a directory.
#[derive(Debug)]
pub struct File {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    File(holdfast::env::fs::File<SimEnv>),
    Dir { fs: Fs<SimEnv>, path: PathBuf },
}

impl File {
    /// `File::open`: read-only; a directory opens too (for `sync_all`).
    pub fn open<P: AsRef<Path>>(path: P) -> io::Result<File> {
        let fs = bound()?;
        let path = path.as_ref();
        if fs.metadata(path)?.is_dir() {
            return Ok(File { inner: Inner::Dir { fs, path: path.into() } });
        }
        Ok(File { inner: Inner::File(fs.open(path)?) })
    }

    /// `File::create`: write-only, created or truncated.
    pub fn create<P: AsRef<Path>>(path: P) -> io::Result<File> {
        Ok(File { inner: Inner::File(bound()?.create(path)?) })
    }

    /// `fsync` (of a directory: its entries).
    pub fn sync_all(&self) -> io::Result<()> {
        match &self.inner {
            Inner::File(file) => file.sync_all(),
            Inner::Dir { fs, path } => fs.sync_dir(path),
        }
    }

    /// `fdatasync` (of a directory: its entries, as `fsync`).
    pub fn sync_data(&self) -> io::Result<()> {
        match &self.inner {
            Inner::File(file) => file.sync_data(),
            Inner::Dir { fs, path } => fs.sync_dir(path),
        }
    }

    /// `set_len`: truncate or zero-extend.
    pub fn set_len(&self, size: u64) -> io::Result<()> {
        self.file()?.set_len(size)
    }

    fn file(&self) -> io::Result<&holdfast::env::fs::File<SimEnv>> {
        match &self.inner {
            Inner::File(file) => Ok(file),
            Inner::Dir { path, .. } => Err(is_a_directory(path)),
        }
    }

    fn file_mut(&mut self) -> io::Result<&mut holdfast::env::fs::File<SimEnv>> {
        match &mut self.inner {
            Inner::File(file) => Ok(file),
            Inner::Dir { path, .. } => Err(is_a_directory(path)),
        }
    }
}

fn is_a_directory(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::IsADirectory, format!("{} is a directory", path.display()))
}

impl Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.file_mut()?.read(buf)
    }
}

impl Write for File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file_mut()?.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file_mut()?.flush()
    }
}

impl Seek for File {
    fn seek(&mut self, position: SeekFrom) -> io::Result<u64> {
        self.file_mut()?.seek(position)
    }
}

/// `std::fs::OpenOptions`: every option starts off; [`OpenOptions::open`] checks the combination as `std` does.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    truncate: bool,
    create: bool,
    create_new: bool,
}

impl OpenOptions {
    /// Every option off.
    pub fn new() -> Self {
        Self::default()
    }

    /// Allow reads.
    pub fn read(&mut self, read: bool) -> &mut Self {
        self.read = read;
        self
    }

    /// Allow writes at the cursor.
    pub fn write(&mut self, write: bool) -> &mut Self {
        self.write = write;
        self
    }

    /// Every write at the end.
    pub fn append(&mut self, append: bool) -> &mut Self {
        self.append = append;
        self
    }

    /// Truncate an existing file.
    pub fn truncate(&mut self, truncate: bool) -> &mut Self {
        self.truncate = truncate;
        self
    }

    /// Create it if missing.
    pub fn create(&mut self, create: bool) -> &mut Self {
        self.create = create;
        self
    }

    /// Create it, failing if it exists.
    pub fn create_new(&mut self, create_new: bool) -> &mut Self {
        self.create_new = create_new;
        self
    }

    /// Open `path` with these options.
    pub fn open<P: AsRef<Path>>(&self, path: P) -> io::Result<File> {
        let fs = bound()?;
        let mut options = fs.open_options();
        options.read(self.read).write(self.write).append(self.append).truncate(self.truncate);
        options.create(self.create).create_new(self.create_new);
        Ok(File { inner: Inner::File(options.open(path)?) })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use holdfast::env::SimEnv;

    use super::*;
    use crate::sys::enter;

    #[test]
    fn a_directory_handle_syncs_the_directory_and_refuses_reads() {
        let world = SimEnv::new(5);
        let _entered = enter(&world);
        create_dir_all("/d").expect("mkdir");
        File::open("/").and_then(|root| root.sync_all()).expect("sync the root");
        let mut file = File::create("/d/f").expect("create");
        file.write_all(b"bytes").expect("write");
        file.sync_all().expect("fsync the file");
        assert_eq!(world.read_durable(Path::new("/d/f")), None, "the name is not durable before the directory sync");
        let mut dir = File::open("/d").expect("open a directory");
        dir.sync_all().expect("fsync the directory");
        assert_eq!(world.read_durable(Path::new("/d/f")).as_deref(), Some(&b"bytes"[..]));
        let mut buf = [0u8; 1];
        assert_eq!(dir.read(&mut buf).expect_err("a directory").kind(), io::ErrorKind::IsADirectory);
    }

    #[test]
    fn open_options_keep_stds_rules() {
        let world = SimEnv::new(6);
        let _entered = enter(&world);
        let error = OpenOptions::new().read(true).create(true).open("/f").expect_err("create needs write");
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open("/f").expect("open");
        file.write_all(b"abc").expect("write");
        file.seek(SeekFrom::Start(1)).expect("seek");
        let mut rest = Vec::new();
        file.read_to_end(&mut rest).expect("read");
        assert_eq!(rest, b"bc");
        assert_eq!(read("/f").expect("read"), b"abc");
    }
}
