//! `env::fs`: a facade shaped like `std::fs`, over any [`Env`], so that porting a storage engine written against
//! `std::fs` is mostly a change of imports (its ADR in DECISIONS.md: "The `env::fs` facade").
//!
//! `std::fs` has free functions; a simulated world is a value, so here they are methods of [`Fs`], a cheap `Clone`
//! handle to one [`Env`]:
//!
//! | `std`                                   | `env::fs`                                   |
//! |-----------------------------------------|---------------------------------------------|
//! | `File::open(p)` / `File::create(p)`     | `fs.open(p)` / `fs.create(p)`               |
//! | `File::create_new(p)`                   | `fs.create_new(p)`                          |
//! | `OpenOptions::new().read(true)…open(p)` | `fs.open_options().read(true)…open(p)`      |
//! | `fs::read`, `read_to_string`, `write`   | `fs.read`, `fs.read_to_string`, `fs.write`  |
//! | `fs::rename`, `remove_file`             | `fs.rename`, `fs.remove_file`               |
//! | `fs::create_dir`, `create_dir_all`      | `fs.create_dir`, `fs.create_dir_all`        |
//! | `fs::read_dir`, `metadata`, `exists`    | `fs.read_dir`, `fs.metadata`, `fs.exists`   |
//! | `File::open(dir)?.sync_all()`           | `fs.sync_dir(dir)`                          |
//!
//! [`File`] implements [`std::io::Read`], [`std::io::Write`] and [`std::io::Seek`] with a cursor kept in the handle,
//! and has `sync_all`, `sync_data`, `set_len`, `metadata` and the positional `read_at`/`write_at` family of
//! `std::os::unix::fs::FileExt` (same argument order).
//!
//! **Errors** are [`std::io::Error`]s, so ported code compiles unchanged. Their kind is [`Error::io_kind`]
//! (`NotFound`, `AlreadyExists`, `StorageFull` for ENOSPC, `UnexpectedEof`, `InvalidInput`, `Other` for EIO and
//! for crashes) and the [`Error`] that caused them, naming the operation and the path, is kept inside:
//! [`env_error`] gets it back, e.g. to tell a simulated crash from an IO error.
//!
//! **What the facade does not model** (each is either absent from [`Env`] or not portable between its
//! implementations): directory handles (opening a directory; use [`Fs::sync_dir`]), `remove_dir`,
//! `remove_dir_all`, `copy`, links, symlinks, permissions, timestamps, `try_clone` and `try_lock` of a handle,
//! renames across directories (`SimEnv` refuses them), and the error kinds of misusing a directory as a file or
//! the reverse (`std` says `IsADirectory`/`NotADirectory`; `SimEnv` reports `InvalidInput` or `NotFound`,
//! `RealEnv` `Other`). A directory's [`Metadata::len`] is 0.

mod dir;
mod file;

use std::io::{self, Read, Write};
use std::path::Path;

pub use self::dir::{DirEntry, FileType, Metadata, ReadDir};
pub use self::file::{File, OpenOptions};
use crate::{Env, Error, File as _, Op, parent_dir};

/// The [`Error`] inside an [`io::Error`] made by this module (or by `From<env::Error>`), if there is one.
///
/// ```
/// # use env::{Env, SimEnv, fs::{Fs, env_error}};
/// let fs = Fs::new(SimEnv::new(7));
/// let error = fs.read("missing").unwrap_err();
/// assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
/// assert_eq!(env_error(&error).map(|inner| inner.path()), Some(std::path::Path::new("missing")));
/// ```
pub fn env_error(error: &io::Error) -> Option<&Error> {
    error.get_ref()?.downcast_ref::<Error>()
}

/// `std::fs` over an [`Env`]: the free functions of `std::fs` (and `File::open`/`create`) as methods. Cheap to
/// clone: every clone uses the same world.
#[derive(Clone, Debug)]
pub struct Fs<E: Env> {
    env: E,
}

impl<E: Env> Fs<E> {
    /// A facade over `env`.
    pub fn new(env: E) -> Self {
        Self { env }
    }

    /// The environment underneath.
    pub fn env(&self) -> &E {
        &self.env
    }

    /// `File::open`: open an existing file read-only.
    pub fn open<P: AsRef<Path>>(&self, path: P) -> io::Result<File<E>> {
        self.open_options().read(true).open(path)
    }

    /// `File::create`: open write-only, creating the file or truncating it. Like `std`, the handle cannot read.
    pub fn create<P: AsRef<Path>>(&self, path: P) -> io::Result<File<E>> {
        self.open_options().write(true).create(true).truncate(true).open(path)
    }

    /// `File::create_new`: create a file that must not exist yet, open for reading and writing.
    pub fn create_new<P: AsRef<Path>>(&self, path: P) -> io::Result<File<E>> {
        self.open_options().read(true).write(true).create_new(true).open(path)
    }

    /// `OpenOptions::new()`: every option off.
    pub fn open_options(&self) -> OpenOptions<E> {
        OpenOptions::new(self.env.clone())
    }

    /// `fs::read`: the whole file. Like `std`, it sizes the buffer from the file's length first, so a file is read
    /// in one read and one more that finds the end.
    pub fn read<P: AsRef<Path>>(&self, path: P) -> io::Result<Vec<u8>> {
        let mut file = self.open(path)?;
        let len = file.metadata()?.len();
        let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        file.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// `fs::read_to_string`: the whole file as UTF-8 (`InvalidData` if it is not).
    pub fn read_to_string<P: AsRef<Path>>(&self, path: P) -> io::Result<String> {
        let path = path.as_ref();
        String::from_utf8(self.read(path)?).map_err(|_| {
            let message = "stream did not contain valid UTF-8".to_string();
            io::Error::new(io::ErrorKind::InvalidData, Error::InvalidInput { op: Op::Read, path: path.into(), message })
        })
    }

    /// `fs::write`: create or truncate the file and write all of `contents` (not synced: see [`File::sync_data`]).
    pub fn write<P: AsRef<Path>, C: AsRef<[u8]>>(&self, path: P, contents: C) -> io::Result<()> {
        self.create(path)?.write_all(contents.as_ref())
    }

    /// `fs::rename`: replace `to` if it exists. [`Env::rename`] allows only renames inside one directory.
    pub fn rename<P: AsRef<Path>, Q: AsRef<Path>>(&self, from: P, to: Q) -> io::Result<()> {
        Ok(self.env.rename(from.as_ref(), to.as_ref())?)
    }

    /// `fs::remove_file`.
    pub fn remove_file<P: AsRef<Path>>(&self, path: P) -> io::Result<()> {
        Ok(self.env.remove_file(path.as_ref())?)
    }

    /// `fs::create_dir`: `AlreadyExists` if `path` exists, `NotFound` (naming the parent) if its parent does not.
    pub fn create_dir<P: AsRef<Path>>(&self, path: P) -> io::Result<()> {
        let path = path.as_ref();
        if self.env.exists(path)? {
            return Err(Error::AlreadyExists { op: Op::CreateDir, path: path.into() }.into());
        }
        let parent = parent_dir(path);
        if !parent.as_os_str().is_empty() && !self.env.exists(&parent)? {
            return Err(Error::NotFound { op: Op::CreateDir, path: parent }.into());
        }
        Ok(self.env.create_dir_all(path)?)
    }

    /// `fs::create_dir_all`.
    pub fn create_dir_all<P: AsRef<Path>>(&self, path: P) -> io::Result<()> {
        Ok(self.env.create_dir_all(path.as_ref())?)
    }

    /// `fs::read_dir`: the entries, sorted by path (`std` leaves the order unspecified; sorted is one order it
    /// allows, and the same on every [`Env`]).
    pub fn read_dir<P: AsRef<Path>>(&self, path: P) -> io::Result<ReadDir<E>> {
        let entries = self.env.list_dir(path.as_ref())?;
        Ok(ReadDir::new(self.clone(), entries))
    }

    /// `fs::metadata`. A directory is told apart by listing it (the [`Env`] has no `stat`); a file's length comes
    /// from opening it read-only. So it costs one IO call on a directory and two on a file (each counts towards
    /// `SimEnv::crash_at_io`), and listing a directory reads all of its entries.
    pub fn metadata<P: AsRef<Path>>(&self, path: P) -> io::Result<Metadata> {
        let path = path.as_ref();
        match self.env.list_dir(path) {
            Ok(_) => return Ok(Metadata::dir()),
            Err(error) if error.is_crash() => return Err(error.into()),
            // Not a directory, or not there: ask for it as a file, which reports which.
            Err(_) => {}
        }
        let file = self.env.open(path, crate::OpenOptions::read())?;
        Ok(Metadata::file(file.len()?))
    }

    /// `fs::exists`: `Ok(false)` when nothing is at `path`.
    pub fn exists<P: AsRef<Path>>(&self, path: P) -> io::Result<bool> {
        Ok(self.env.exists(path.as_ref())?)
    }

    /// Make the directory's entries durable: the creates, removes and renames inside it. `std` has no function for
    /// this; the idiom there is `File::open(dir)?.sync_all()`, and the facade has no directory handles (they are not
    /// portable), so it is a method mapped to [`Env::sync_dir`]. A file's own sync never makes its name durable.
    pub fn sync_dir<P: AsRef<Path>>(&self, path: P) -> io::Result<()> {
        Ok(self.env.sync_dir(path.as_ref())?)
    }
}

#[cfg(all(test, feature = "sim"))]
mod tests {
    use std::io::ErrorKind;
    use std::path::PathBuf;

    use super::*;
    use crate::SimEnv;

    fn fs() -> Fs<SimEnv> {
        let fs = Fs::new(SimEnv::new(1));
        fs.create_dir_all("/d").expect("mkdir");
        fs
    }

    fn kind<T: std::fmt::Debug>(result: io::Result<T>) -> ErrorKind {
        result.expect_err("an error").kind()
    }

    #[test]
    fn write_then_read_round_trips_and_read_to_string_checks_utf8() {
        let fs = fs();
        fs.write("/d/a", b"hello").expect("write");
        assert_eq!(fs.read("/d/a").expect("read"), b"hello");
        assert_eq!(fs.read_to_string("/d/a").expect("utf-8"), "hello");
        fs.write("/d/a", [0xff, 0xfe]).expect("overwrite");
        assert_eq!(fs.read("/d/a").expect("read"), [0xff, 0xfe], "write truncates first");
        let error = fs.read_to_string("/d/a").expect_err("not UTF-8");
        assert_eq!(error.kind(), ErrorKind::InvalidData);
        assert_eq!(env_error(&error).map(Error::path), Some(Path::new("/d/a")));
    }

    #[test]
    fn read_reads_a_file_in_one_read_and_one_that_finds_the_end() {
        let fs = fs();
        fs.write("/d/a", vec![9u8; 5_000]).expect("write");
        let before = fs.env().io_count();
        assert_eq!(fs.read("/d/a").expect("read"), vec![9u8; 5_000]);
        assert_eq!(fs.env().io_count() - before, 3, "open, one read of 5,000 bytes, one read at the end");
    }

    #[test]
    fn create_dir_follows_std() {
        let fs = fs();
        fs.create_dir("/d/e").expect("parent exists");
        assert!(fs.metadata("/d/e").expect("metadata").is_dir());
        assert_eq!(kind(fs.create_dir("/d/e")), ErrorKind::AlreadyExists);
        fs.write("/d/f", b"x").expect("write");
        assert_eq!(kind(fs.create_dir("/d/f")), ErrorKind::AlreadyExists, "a file is there");
        let error = fs.create_dir("/d/missing/g").expect_err("no parent");
        assert_eq!(error.kind(), ErrorKind::NotFound);
        assert_eq!(env_error(&error).map(Error::path), Some(Path::new("/d/missing")), "names the missing parent");
        assert!(!fs.exists("/d/missing/g").expect("exists"));
    }

    #[test]
    fn metadata_tells_files_from_directories_and_reports_missing_paths() {
        let fs = fs();
        fs.write("/d/a", vec![1u8; 700]).expect("write");
        let file = fs.metadata("/d/a").expect("file");
        assert_eq!((file.len(), file.is_file(), file.is_dir(), file.is_symlink()), (700, true, false, false));
        let dir = fs.metadata("/d").expect("dir");
        assert_eq!((dir.len(), dir.is_file(), dir.is_dir()), (0, false, true));
        assert!(fs.metadata("/").expect("root").is_dir());
        assert_eq!(kind(fs.metadata("/d/missing")), ErrorKind::NotFound);
    }

    #[test]
    fn read_dir_lists_sorted_entries_with_names_and_types() {
        let fs = fs();
        fs.write("/d/b", b"bb").expect("write");
        fs.write("/d/a", b"a").expect("write");
        fs.create_dir_all("/d/c/deeper").expect("mkdir");
        let entries: Vec<DirEntry<SimEnv>> = fs.read_dir("/d").expect("list").map(|e| e.expect("entry")).collect();
        let paths: Vec<PathBuf> = entries.iter().map(DirEntry::path).collect();
        assert_eq!(paths, ["/d/a", "/d/b", "/d/c"].map(PathBuf::from));
        let names: Vec<_> = entries.iter().map(DirEntry::file_name).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(entries[1].metadata().expect("metadata").len(), 2);
        assert!(entries[2].file_type().expect("type").is_dir());
        assert!(entries[0].file_type().expect("type").is_file());
        assert_eq!(kind(fs.read_dir("/nowhere")), ErrorKind::NotFound);
    }

    #[test]
    fn rename_remove_and_exists_map_env_errors_to_io_kinds() {
        let fs = fs();
        fs.write("/d/a", b"1").expect("write");
        fs.rename("/d/a", "/d/b").expect("rename");
        assert!(!fs.exists("/d/a").expect("exists") && fs.exists("/d/b").expect("exists"));
        assert_eq!(fs.read("/d/b").expect("read"), b"1");
        let error = fs.rename("/d/a", "/d/c").expect_err("gone");
        assert_eq!(error.kind(), ErrorKind::NotFound);
        assert!(
            matches!(env_error(&error), Some(Error::NotFound { op: Op::Rename, path }) if path == Path::new("/d/a"))
        );
        fs.remove_file("/d/b").expect("remove");
        assert_eq!(kind(fs.remove_file("/d/b")), ErrorKind::NotFound);
        assert_eq!(kind(fs.create_new("/d/x").and_then(|_| fs.create_new("/d/x"))), ErrorKind::AlreadyExists);
        fs.sync_dir("/d").expect("sync_dir");
        assert_eq!(kind(fs.sync_dir("/nowhere")), ErrorKind::NotFound);
    }

    #[test]
    fn every_env_error_keeps_its_kind_and_itself_inside_an_io_error() {
        let path = PathBuf::from("/p");
        let cases = [
            (Error::NotFound { op: Op::Open, path: path.clone() }, ErrorKind::NotFound),
            (Error::AlreadyExists { op: Op::Open, path: path.clone() }, ErrorKind::AlreadyExists),
            (Error::NoSpace { op: Op::Write, path: path.clone() }, ErrorKind::StorageFull),
            (Error::Io { op: Op::Sync, path: path.clone(), message: "eio".into() }, ErrorKind::Other),
            (Error::UnexpectedEof { op: Op::Read, path: path.clone(), offset: 3 }, ErrorKind::UnexpectedEof),
            (Error::Crashed { op: Op::Write, path: path.clone() }, ErrorKind::Other),
            (Error::StaleHandle { op: Op::Read, path: path.clone() }, ErrorKind::Other),
            (Error::Locked { op: Op::Lock, path: path.clone() }, ErrorKind::WouldBlock),
            (Error::InvalidInput { op: Op::Seek, path: path.clone(), message: "m".into() }, ErrorKind::InvalidInput),
            (Error::TaskCancelled { op: Op::Wait, path: path.clone() }, ErrorKind::Other),
        ];
        for (error, expected) in cases {
            let io_error = io::Error::from(error.clone());
            assert_eq!(io_error.kind(), expected, "{error}");
            assert_eq!(env_error(&io_error), Some(&error));
            assert_eq!(io_error.to_string(), error.to_string(), "the message is the env error's, path included");
        }
        assert_eq!(env_error(&io::Error::other("not from env")), None);
        assert_eq!(env_error(&io::Error::from(ErrorKind::NotFound)), None);
    }
}
