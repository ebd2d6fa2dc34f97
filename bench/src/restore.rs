//! Every timed run starts from the same data set (ADR-0200). The loaded directory is kept as it was after the load
//! and the TPC-C setup, and each run opens a fresh copy of it: no run inherits the writes, the memtable or the
//! flush and compaction debt of the runs and rows before it, so a row's figure does not depend on which rows ran
//! first (before, a two-thread row ran on what its one-thread row had written, and paid for flushing it).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The most directory entries one copy walks: a data set is a few hundred files at most.
const COPY_ENTRIES_MAX: usize = 100_000;

/// The loaded data set and the working copy each run opens.
pub struct Pristine {
    loaded: PathBuf,
    work: PathBuf,
}

impl Pristine {
    /// `loaded` is never opened again once this exists; runs open `work`.
    pub fn new(loaded: PathBuf, work: PathBuf) -> Self {
        Self { loaded, work }
    }

    /// A fresh copy of the loaded data set at the working path (whatever was there removed first); its path.
    pub fn restore(&self) -> io::Result<&Path> {
        match fs::remove_dir_all(&self.work) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(named(e, "remove", &self.work)),
        }
        let mut entries = 0;
        copy_dir(&self.loaded, &self.work, &mut entries)?;
        Ok(&self.work)
    }
}

/// The error `e` with the operation and path in its message.
fn named(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// Copy the tree at `from` to `to` (which must not exist), each file and directory synced: directories and regular
/// files only; anything else (a link, a socket) is an error rather than skipped, since an engine's data set holds
/// neither.
fn copy_dir(from: &Path, to: &Path, entries: &mut usize) -> io::Result<()> {
    fs::create_dir(to).map_err(|e| named(e, "create", to))?;
    let mut names: Vec<_> = fs::read_dir(from)
        .map_err(|e| named(e, "list", from))?
        .collect::<io::Result<Vec<_>>>()
        .map_err(|e| named(e, "list", from))?;
    names.sort_by_key(fs::DirEntry::file_name);
    for entry in names {
        *entries += 1;
        if *entries > COPY_ENTRIES_MAX {
            return Err(io::Error::other(format!("{} holds over {COPY_ENTRIES_MAX} entries", from.display())));
        }
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(|e| named(e, "stat", &source))?;
        if kind.is_dir() {
            copy_dir(&source, &target, entries)?;
        } else if kind.is_file() {
            fs::copy(&source, &target).map_err(|e| named(e, "copy", &source))?;
            sync(&target)?;
        } else {
            return Err(io::Error::other(format!("{}: not a file or directory", source.display())));
        }
    }
    sync(to)
}

/// The file or directory at `path` on disk: a run must not start while the kernel still writes back the copy
/// (a synced row's `fdatasync` would queue behind it).
fn sync(path: &Path) -> io::Result<()> {
    fs::File::open(path).and_then(|file| file.sync_all()).map_err(|e| named(e, "sync", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of the tree, by path relative to `root`, with its bytes, in order.
    fn tree(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    out.push((path.strip_prefix(root).unwrap().to_path_buf(), fs::read(&path).unwrap()));
                }
            }
        }
        out.sort();
        out
    }

    /// A restore copies every file byte for byte, nested ones too; a run's changes (a file rewritten, one added,
    /// one removed) are gone at the next restore; the loaded tree is never touched.
    #[test]
    fn a_restore_undoes_what_a_run_wrote() {
        let root = tempfile::tempdir().unwrap();
        let loaded = root.path().join("load");
        fs::create_dir_all(loaded.join("sub/deeper")).unwrap();
        fs::write(loaded.join("MANIFEST"), b"manifest").unwrap();
        fs::write(loaded.join("000001.log"), vec![7u8; 70_000]).unwrap();
        fs::write(loaded.join("sub/deeper/000002.sst"), b"table").unwrap();
        fs::write(loaded.join("empty"), b"").unwrap();
        let expected = tree(&loaded);
        assert_eq!(expected.len(), 4);
        let pristine = Pristine::new(loaded.clone(), root.path().join("work"));
        let work = pristine.restore().unwrap().to_path_buf();
        assert_eq!(tree(&work), expected);
        fs::write(work.join("MANIFEST"), b"changed").unwrap();
        fs::write(work.join("000003.log"), b"new").unwrap();
        fs::remove_file(work.join("sub/deeper/000002.sst")).unwrap();
        assert_ne!(tree(&work), expected);
        pristine.restore().unwrap();
        assert_eq!(tree(&work), expected);
        assert_eq!(tree(&loaded), expected);
    }

    /// A link in the data set is refused by name, not followed or skipped; a missing data set names its path.
    #[test]
    fn a_restore_refuses_what_it_cannot_copy_faithfully() {
        let root = tempfile::tempdir().unwrap();
        let loaded = root.path().join("load");
        fs::create_dir(&loaded).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", loaded.join("link")).unwrap();
        let error = Pristine::new(loaded.clone(), root.path().join("work")).restore().unwrap_err();
        assert!(error.to_string().contains("link: not a file or directory"), "{error}");
        let missing = root.path().join("missing");
        let error = Pristine::new(missing.clone(), root.path().join("work2")).restore().unwrap_err();
        assert!(error.to_string().contains(&format!("list {}", missing.display())), "{error}");
    }
}
