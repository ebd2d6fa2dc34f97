//! `std::fs::{File, OpenOptions}` over an [`Env`]: a cursor kept in the handle over the [`Env`]'s positional IO, and
//! `std`'s rules for which option combinations are valid and what each handle may do.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::Metadata;
use crate::{Env, Error, File as _, Op};

/// `std::fs::OpenOptions`, made by [`super::Fs::open_options`]. Every option starts off; `open` checks the
/// combination as `std` does on Unix before it touches the [`Env`].
#[derive(Clone, Debug)]
pub struct OpenOptions<E: Env> {
    env: E,
    read: bool,
    write: bool,
    append: bool,
    truncate: bool,
    create: bool,
    create_new: bool,
}

impl<E: Env> OpenOptions<E> {
    pub(super) fn new(env: E) -> Self {
        Self { env, read: false, write: false, append: false, truncate: false, create: false, create_new: false }
    }

    /// Allow reads through the handle.
    pub fn read(&mut self, read: bool) -> &mut Self {
        self.read = read;
        self
    }

    /// Allow writes through the handle, at its cursor.
    pub fn write(&mut self, write: bool) -> &mut Self {
        self.write = write;
        self
    }

    /// Allow writes, each at the file's end at the time of the write (implies write access).
    pub fn append(&mut self, append: bool) -> &mut Self {
        self.append = append;
        self
    }

    /// Truncate an existing file to length 0 (needs write access; not with `append` unless `create_new`).
    pub fn truncate(&mut self, truncate: bool) -> &mut Self {
        self.truncate = truncate;
        self
    }

    /// Create the file if it does not exist (needs write or append access).
    pub fn create(&mut self, create: bool) -> &mut Self {
        self.create = create;
        self
    }

    /// Create the file, failing with `AlreadyExists` if it exists; `create` and `truncate` are then ignored.
    pub fn create_new(&mut self, create_new: bool) -> &mut Self {
        self.create_new = create_new;
        self
    }

    /// Open `path` with these options. An invalid combination is `InvalidInput`, as in `std`, whether or not the
    /// file exists.
    pub fn open<P: AsRef<Path>>(&self, path: P) -> io::Result<File<E>> {
        let path = path.as_ref();
        let options = self.env_options(path)?;
        let file = self.env.open(path, options)?;
        Ok(File { file, position: 0, readable: self.read, writable: options.write, append: self.append })
    }

    /// The [`crate::OpenOptions`] these options ask for, or why `std` would refuse them (its Unix rules).
    fn env_options(&self, path: &Path) -> Result<crate::OpenOptions, Error> {
        let writable = self.write || self.append;
        let refuse = |message: &str| Error::InvalidInput { op: Op::Open, path: path.into(), message: message.into() };
        if !self.read && !writable {
            return Err(refuse("neither read, write nor append access asked"));
        }
        if !writable && (self.truncate || self.create || self.create_new) {
            return Err(refuse("creating or truncating a file needs write or append access"));
        }
        if self.append && self.truncate && !self.create_new {
            return Err(refuse("append and truncate together"));
        }
        Ok(crate::OpenOptions {
            create: self.create || self.create_new,
            create_new: self.create_new,
            truncate: self.truncate && !self.create_new,
            write: writable,
        })
    }
}

/// `std::fs::File` over an [`Env`] file: [`Read`], [`Write`] and [`Seek`] move a cursor kept in this handle (two
/// handles on one file have two cursors, as two `open`s do in `std`). Dropping it closes it; nothing is synced.
#[derive(Debug)]
pub struct File<E: Env> {
    file: E::File,
    position: u64,
    readable: bool,
    writable: bool,
    append: bool,
}

/// The largest cursor position: `std` seeks through `lseek`, whose offset is an `i64`.
const POSITION_MAX: u64 = i64::MAX as u64;

impl<E: Env> File<E> {
    /// The [`Env`] file underneath (positional IO with `env`'s own errors).
    pub fn env_file(&self) -> &E::File {
        &self.file
    }

    /// `fsync`: make the file's data and size durable. Maps to [`crate::File::sync`], as [`File::sync_data`] does: the
    /// simulated disk keeps data and size only (no timestamps), so `fsync` and `fdatasync` make the same bytes
    /// durable there, and on `RealEnv` this is `fdatasync` (only timestamps, which the facade cannot observe, may
    /// stay volatile). Neither makes the file's name durable: that is [`super::Fs::sync_dir`] of its directory.
    pub fn sync_all(&self) -> io::Result<()> {
        Ok(self.file.sync()?)
    }

    /// `fdatasync`: make the file's data and size durable. See [`File::sync_all`].
    pub fn sync_data(&self) -> io::Result<()> {
        Ok(self.file.sync()?)
    }

    /// Truncate or zero-extend the file; the cursor stays where it is. Needs write access (`InvalidInput`).
    pub fn set_len(&self, size: u64) -> io::Result<()> {
        self.check_writable(Op::SetLen)?;
        Ok(self.file.set_len(size)?)
    }

    /// The file's [`Metadata`] (its current length).
    pub fn metadata(&self) -> io::Result<Metadata> {
        Ok(Metadata::file(self.file.len()?))
    }

    /// `FileExt::read_at`: read at `offset` without moving the cursor; 0 at or past the end.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.check_readable()?;
        Ok(self.file.read_at(offset, buf)?)
    }

    /// `FileExt::read_exact_at`: fill `buf` from `offset`, or `UnexpectedEof`.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check_readable()?;
        Ok(self.file.read_exact_at(offset, buf)?)
    }

    /// `FileExt::write_at`: write at `offset` without moving the cursor; may write fewer bytes than asked. In append
    /// mode the bytes go to the end of the file whatever `offset` says, as `pwrite` does on Linux.
    pub fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.check_writable(Op::Write)?;
        if buf.is_empty() {
            return Ok(0);
        }
        let offset = if self.append { self.file.len()? } else { offset };
        Ok(self.file.write_at(offset, buf)?)
    }

    /// `FileExt::write_all_at`: write all of `buf` at `offset` (see [`File::write_at`] for append mode).
    pub fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check_writable(Op::Write)?;
        if buf.is_empty() {
            return Ok(());
        }
        let offset = if self.append { self.file.len()? } else { offset };
        Ok(self.file.write_all_at(offset, buf)?)
    }

    fn check_readable(&self) -> io::Result<()> {
        if self.readable {
            return Ok(());
        }
        let message = "handle not opened for reading".to_string();
        Err(Error::InvalidInput { op: Op::Read, path: self.file.path().into(), message }.into())
    }

    fn check_writable(&self, op: Op) -> io::Result<()> {
        if self.writable {
            return Ok(());
        }
        let message = "handle not opened for writing".to_string();
        Err(Error::InvalidInput { op, path: self.file.path().into(), message }.into())
    }
}

impl<E: Env> Read for File<E> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.check_readable()?;
        let count = self.file.read_at(self.position, buf)?;
        self.position += count as u64;
        Ok(count)
    }
}

impl<E: Env> Write for File<E> {
    /// Write at the cursor (at the end in append mode) and move the cursor past the bytes written. May write fewer
    /// bytes than asked, as `write(2)` may; [`Write::write_all`] continues.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.check_writable(Op::Write)?;
        if buf.is_empty() {
            return Ok(0);
        }
        let offset = if self.append { self.file.len()? } else { self.position };
        let count = self.file.write_at(offset, buf)?;
        self.position = offset + count as u64;
        Ok(count)
    }

    /// Nothing to do: like `std::fs::File`, the handle buffers nothing (durability is [`File::sync_data`]).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<E: Env> Seek for File<E> {
    /// Move the cursor (past the end is allowed; a write there leaves a hole of zeros). A position before 0 or past
    /// `i64::MAX` is `InvalidInput` and leaves the cursor where it was, as in `std`.
    fn seek(&mut self, position: SeekFrom) -> io::Result<u64> {
        let target = match position {
            SeekFrom::Start(offset) => Some(offset),
            SeekFrom::End(delta) => self.file.len()?.checked_add_signed(delta),
            SeekFrom::Current(delta) => self.position.checked_add_signed(delta),
        };
        match target {
            Some(target) if target <= POSITION_MAX => {
                self.position = target;
                Ok(target)
            }
            _ => {
                let message = format!("invalid seek to a negative or overflowing position ({position:?})");
                Err(Error::InvalidInput { op: Op::Seek, path: self.file.path().into(), message }.into())
            }
        }
    }
}

#[cfg(all(test, feature = "sim"))]
mod tests {
    use std::io::ErrorKind;

    use super::*;
    use crate::SimEnv;
    use crate::fs::{Fs, env_error};

    fn fs_with(name: &str, bytes: &[u8]) -> Fs<SimEnv> {
        let fs = Fs::new(SimEnv::new(3));
        fs.write(name, bytes).expect("write");
        fs
    }

    #[test]
    fn seek_moves_the_cursor_for_reads_and_writes() {
        let fs = fs_with("f", b"0123456789");
        let mut file = fs.open_options().read(true).write(true).open("f").expect("open");
        let mut buf = [0u8; 3];
        assert_eq!(file.seek(SeekFrom::Start(2)).expect("seek"), 2);
        file.read_exact(&mut buf).expect("read");
        assert_eq!(&buf, b"234");
        assert_eq!(file.seek(SeekFrom::Current(-1)).expect("seek"), 4);
        file.write_all(b"xy").expect("write");
        assert_eq!(file.stream_position().expect("position"), 6);
        assert_eq!(file.seek(SeekFrom::End(-2)).expect("seek"), 8);
        file.read_exact(&mut buf[..2]).expect("read");
        assert_eq!(&buf[..2], b"89");
        assert_eq!(file.read(&mut buf).expect("read at the end"), 0);
        assert_eq!(file.seek(SeekFrom::End(3)).expect("past the end"), 13);
        file.write_all(b"!").expect("write past the end");
        assert_eq!(fs.read("f").expect("read"), b"0123xy6789\0\0\0!", "a hole reads as zeros");
    }

    #[test]
    fn an_invalid_seek_is_refused_and_leaves_the_cursor() {
        let fs = fs_with("f", b"abc");
        let mut file = fs.open("f").expect("open");
        file.seek(SeekFrom::Start(1)).expect("seek");
        for bad in [SeekFrom::Current(-2), SeekFrom::End(-4), SeekFrom::Start(u64::MAX), SeekFrom::Current(i64::MAX)] {
            let error = file.seek(bad).expect_err("invalid");
            assert_eq!(error.kind(), ErrorKind::InvalidInput, "{bad:?}");
            assert!(
                matches!(env_error(&error), Some(Error::InvalidInput { op: Op::Seek, path, .. }) if path == Path::new("f"))
            );
            assert_eq!(file.stream_position().expect("position"), 1, "{bad:?} moved the cursor");
        }
        assert_eq!(file.seek(SeekFrom::Start(i64::MAX as u64)).expect("the largest position"), i64::MAX as u64);
    }

    #[test]
    fn append_writes_at_the_end_and_moves_the_cursor_there() {
        let fs = fs_with("f", b"abc");
        let mut file = fs.open_options().read(true).append(true).open("f").expect("open");
        file.seek(SeekFrom::Start(0)).expect("seek");
        file.write_all(b"de").expect("append");
        assert_eq!(file.stream_position().expect("position"), 5);
        fs.write("g", b"").expect("unrelated file");
        let other = fs.open_options().write(true).open("f").expect("second handle");
        other.write_all_at(b"fgh", 5).expect("another handle extends the file");
        file.write_all(b"i").expect("append after the other handle's bytes");
        file.write_all_at(b"j", 0).expect("positional write in append mode");
        assert_eq!(fs.read("f").expect("read"), b"abcdefghij");
        file.seek(SeekFrom::Start(3)).expect("seek");
        let mut rest = String::new();
        file.read_to_string(&mut rest).expect("read");
        assert_eq!(rest, "defghij", "reads use the cursor");
    }

    #[test]
    fn access_modes_are_enforced_as_std_does() {
        let fs = fs_with("f", b"abc");
        let mut read_only = fs.open("f").expect("open");
        let error = read_only.write(b"x").expect_err("read-only");
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
        assert!(
            matches!(env_error(&error), Some(Error::InvalidInput { op: Op::Write, path, .. }) if path == Path::new("f"))
        );
        assert_eq!(read_only.set_len(0).expect_err("read-only").kind(), ErrorKind::InvalidInput);
        assert_eq!(read_only.write_at(b"x", 0).expect_err("read-only").kind(), ErrorKind::InvalidInput);
        read_only.sync_all().expect("a read-only handle may sync, as in std");
        let mut created = fs.create("f").expect("create truncates");
        assert_eq!(
            created.read(&mut [0u8; 4]).expect_err("File::create is write-only").kind(),
            ErrorKind::InvalidInput
        );
        assert_eq!(created.read_at(&mut [0u8; 4], 0).expect_err("write-only").kind(), ErrorKind::InvalidInput);
        assert_eq!(created.write(b"").expect("an empty write"), 0);
        created.write_all(b"new").expect("write");
        created.flush().expect("flush");
        assert_eq!(created.metadata().expect("metadata").len(), 3);
        assert_eq!(fs.read("f").expect("read"), b"new");
    }

    #[test]
    fn invalid_option_combinations_are_refused_before_the_env_is_asked() {
        let fs = fs_with("f", b"abc");
        let before = fs.env().io_count();
        let refused = [
            fs.open_options().open("f"),
            fs.open_options().read(true).truncate(true).open("f"),
            fs.open_options().read(true).create(true).open("missing"),
            fs.open_options().read(true).create_new(true).open("missing"),
            fs.open_options().append(true).truncate(true).open("f"),
            fs.open_options().write(true).append(true).truncate(true).create(true).open("f"),
        ];
        for result in refused {
            let error = result.expect_err("refused");
            assert_eq!(error.kind(), ErrorKind::InvalidInput);
            assert!(matches!(env_error(&error), Some(Error::InvalidInput { op: Op::Open, .. })));
        }
        assert_eq!(fs.env().io_count(), before, "no Env call was made");
        assert_eq!(fs.read("f").expect("read"), b"abc", "nothing was truncated");
    }

    #[test]
    fn create_new_ignores_create_and_truncate_and_append_may_truncate_with_it() {
        let fs = fs_with("f", b"abc");
        let error = fs.open_options().write(true).truncate(true).create_new(true).open("f").expect_err("exists");
        assert_eq!(error.kind(), ErrorKind::AlreadyExists);
        assert_eq!(fs.read("f").expect("read"), b"abc", "a refused create_new truncates nothing");
        let mut file = fs.open_options().append(true).truncate(true).create_new(true).open("g").expect("new");
        file.write_all(b"xyz").expect("append");
        assert_eq!(fs.read("g").expect("read"), b"xyz");
        assert_eq!(fs.open("missing").expect_err("missing").kind(), ErrorKind::NotFound);
        let missing_parent = fs.create("no/such/dir/f").expect_err("no parent");
        assert_eq!(missing_parent.kind(), ErrorKind::NotFound);
    }

    #[test]
    fn positional_io_leaves_the_cursor_alone() {
        let fs = fs_with("f", b"0123456789");
        let mut file = fs.open_options().read(true).write(true).open("f").expect("open");
        file.seek(SeekFrom::Start(4)).expect("seek");
        // Empty writes never reach the Env (SimFile::write_at panics on an empty write at offset 0).
        assert_eq!(file.write_at(b"", 0).expect("an empty write"), 0);
        file.write_all_at(b"", 0).expect("an empty write");
        file.write_all_at(b"ab", 0).expect("write_all_at");
        assert_eq!(file.write_at(b"c", 2).expect("write_at"), 1);
        let mut buf = [0u8; 4];
        file.read_exact_at(&mut buf, 0).expect("read_exact_at");
        assert_eq!(&buf, b"abc3");
        assert_eq!(file.read_at(&mut buf, 8).expect("read_at near the end"), 2);
        let eof = file.read_exact_at(&mut buf, 8).expect_err("short");
        assert_eq!(eof.kind(), ErrorKind::UnexpectedEof);
        assert_eq!(file.stream_position().expect("position"), 4);
        assert_eq!(file.env_file().len().expect("len"), 10);
    }

    #[test]
    fn set_len_truncates_and_extends_without_moving_the_cursor() {
        let fs = fs_with("f", b"0123456789");
        let mut file = fs.open_options().read(true).write(true).open("f").expect("open");
        file.seek(SeekFrom::Start(8)).expect("seek");
        file.set_len(4).expect("truncate");
        assert_eq!(file.read(&mut [0u8; 4]).expect("read past the end"), 0);
        file.set_len(6).expect("extend");
        assert_eq!(fs.read("f").expect("read"), b"0123\0\0");
        assert_eq!(file.stream_position().expect("position"), 8);
    }
}
