//! The `env::fs` facade against `std::fs` itself: the same random sequence of `std`-shaped calls gives the same
//! results through the facade on `SimEnv`, through the facade on `RealEnv` (a real temporary directory), and through
//! `std::fs` in another temporary directory (`fs_std_oracle`), when no crash happens.

use std::cell::Cell;
use std::fmt::Debug;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use env::fs::{File, Fs, env_error};
use env::{Env, RealEnv, SimEnv};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

use crate::fs_std_oracle::StdFs;
use crate::real_env::TempDir;

/// Files the workload touches, relative to its root; renames stay inside one directory (an `Env` rule).
const FILES: [&str; 4] = ["a", "b", "sub/c", "sub/d"];
/// Directories, relative to the root ("" is the root itself). Disjoint from `FILES`: the facade does not promise
/// `std`'s error kinds when a directory is used as a file or the reverse (see the `env::fs` docs).
const DIRS: [&str; 3] = ["", "sub", "sub/deeper"];
/// Same-directory renames, `(from, to)` indexes into `FILES` (one renames a file onto itself).
const RENAMES: [(usize, usize); 5] = [(0, 1), (1, 0), (2, 3), (3, 2), (0, 0)];
const HANDLES: usize = 2;
const CASES: u32 = 256;
const STEPS_MAX: usize = 60;
/// Flag sets ported code uses (read; read-write; read-write-create; append-create; read-append-create;
/// write-create-truncate), drawn as often as arbitrary (mostly invalid) combinations.
const COMMON_FLAGS: [u8; 6] = [0b1, 0b11, 0b1_0011, 0b1_0100, 0b1_0101, 0b1_1010];

/// One `std`-shaped call.
#[derive(Clone, Debug)]
enum Step {
    /// `open_options()` with the six flags of `flags` (read, write, append, truncate, create, create_new).
    Open {
        handle: usize,
        file: usize,
        flags: u8,
    },
    Create {
        handle: usize,
        file: usize,
    },
    CreateNew {
        handle: usize,
        file: usize,
    },
    Close {
        handle: usize,
    },
    Write {
        handle: usize,
        len: usize,
        fill: u8,
    },
    Read {
        handle: usize,
        len: usize,
    },
    Seek {
        handle: usize,
        to: SeekFrom,
    },
    WriteAt {
        handle: usize,
        offset: u64,
        len: usize,
        fill: u8,
    },
    ReadAt {
        handle: usize,
        offset: u64,
        len: usize,
    },
    SetLen {
        handle: usize,
        len: u64,
    },
    SyncData {
        handle: usize,
    },
    SyncAll {
        handle: usize,
    },
    HandleMetadata {
        handle: usize,
    },
    FsWrite {
        file: usize,
        len: usize,
        fill: u8,
    },
    FsRead {
        file: usize,
    },
    FsReadToString {
        file: usize,
    },
    Rename {
        pair: usize,
    },
    RemoveFile {
        file: usize,
    },
    CreateDir {
        dir: usize,
    },
    CreateDirAll {
        dir: usize,
    },
    ReadDir {
        dir: usize,
    },
    Metadata {
        file_or_dir: usize,
    },
    Exists {
        file_or_dir: usize,
    },
    SyncDir {
        dir: usize,
    },
}

fn flags() -> impl Strategy<Value = u8> {
    prop_oneof![proptest::sample::select(&COMMON_FLAGS[..]), 0..64u8]
}

fn seek_strategy() -> impl Strategy<Value = SeekFrom> {
    prop_oneof![
        (0..3_000u64).prop_map(SeekFrom::Start),
        (-2_000..2_000i64).prop_map(SeekFrom::Current),
        (-2_000..2_000i64).prop_map(SeekFrom::End),
    ]
}

fn handle_step() -> impl Strategy<Value = Step> {
    let h = 0..HANDLES;
    prop_oneof![
        5 => (h.clone(), 0..FILES.len(), flags()).prop_map(|(handle, file, flags)| Step::Open { handle, file, flags }),
        2 => (h.clone(), 0..FILES.len()).prop_map(|(handle, file)| Step::Create { handle, file }),
        1 => (h.clone(), 0..FILES.len()).prop_map(|(handle, file)| Step::CreateNew { handle, file }),
        1 => h.clone().prop_map(|handle| Step::Close { handle }),
        4 => (h.clone(), 0..1_200usize, any::<u8>()).prop_map(|(handle, len, fill)| Step::Write { handle, len, fill }),
        3 => (h.clone(), 0..1_500usize).prop_map(|(handle, len)| Step::Read { handle, len }),
        4 => (h.clone(), seek_strategy()).prop_map(|(handle, to)| Step::Seek { handle, to }),
        1 => (h.clone(), 0..3_000u64, 0..700usize, any::<u8>())
            .prop_map(|(handle, offset, len, fill)| Step::WriteAt { handle, offset, len, fill }),
        2 => (h.clone(), 0..1_500u64, 0..700usize).prop_map(|(handle, offset, len)| Step::ReadAt { handle, offset, len }),
        1 => (h.clone(), 0..3_000u64).prop_map(|(handle, len)| Step::SetLen { handle, len }),
        1 => h.clone().prop_map(|handle| Step::SyncData { handle }),
        1 => h.clone().prop_map(|handle| Step::SyncAll { handle }),
        1 => h.prop_map(|handle| Step::HandleMetadata { handle }),
    ]
}

fn path_step() -> impl Strategy<Value = Step> {
    let both = FILES.len() + DIRS.len();
    prop_oneof![
        2 => (0..FILES.len(), 0..1_200usize, any::<u8>()).prop_map(|(file, len, fill)| Step::FsWrite { file, len, fill }),
        2 => (0..FILES.len()).prop_map(|file| Step::FsRead { file }),
        1 => (0..FILES.len()).prop_map(|file| Step::FsReadToString { file }),
        2 => (0..RENAMES.len()).prop_map(|pair| Step::Rename { pair }),
        1 => (0..FILES.len()).prop_map(|file| Step::RemoveFile { file }),
        1 => (0..DIRS.len()).prop_map(|dir| Step::CreateDir { dir }),
        2 => (0..DIRS.len()).prop_map(|dir| Step::CreateDirAll { dir }),
        2 => (0..DIRS.len()).prop_map(|dir| Step::ReadDir { dir }),
        2 => (0..both).prop_map(|file_or_dir| Step::Metadata { file_or_dir }),
        1 => (0..both).prop_map(|file_or_dir| Step::Exists { file_or_dir }),
        1 => (0..DIRS.len()).prop_map(|dir| Step::SyncDir { dir }),
    ]
}

fn workload() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(prop_oneof![3 => handle_step(), 2 => path_step()], 10..=STEPS_MAX)
}

/// Bytes that differ by position and by `fill`, so a misplaced or lost write shows.
pub(crate) fn pattern(len: usize, fill: u8) -> Vec<u8> {
    (0..len).map(|i| fill.wrapping_add((i % 251) as u8)).collect()
}

/// The calls a step makes, implemented by the facade (over any `Env`) and by `std::fs` (the oracle).
pub(crate) trait FsApi {
    type Handle: Read + Write + Seek;
    /// `OpenOptions` with the six flags of `flags` (read, write, append, truncate, create, create_new).
    fn open(&self, path: &Path, flags: u8) -> io::Result<Self::Handle>;
    fn create(&self, path: &Path) -> io::Result<Self::Handle>;
    fn create_new(&self, path: &Path) -> io::Result<Self::Handle>;
    fn write_at(handle: &Self::Handle, buf: &[u8], offset: u64) -> io::Result<usize>;
    fn read_at(handle: &Self::Handle, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    fn set_len(handle: &Self::Handle, len: u64) -> io::Result<()>;
    fn sync_data(handle: &Self::Handle) -> io::Result<()>;
    fn sync_all(handle: &Self::Handle) -> io::Result<()>;
    fn handle_len(handle: &Self::Handle) -> io::Result<u64>;
    fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    fn read_to_string(&self, path: &Path) -> io::Result<String>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    fn create_dir(&self, path: &Path) -> io::Result<()>;
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// The entries as (full path, is a directory), sorted by path.
    fn read_dir(&self, path: &Path) -> io::Result<Vec<(PathBuf, bool)>>;
    /// (length, is a directory); a directory's length is 0 (the facade's documented choice).
    fn metadata(&self, path: &Path) -> io::Result<(u64, bool)>;
    fn exists(&self, path: &Path) -> io::Result<bool>;
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// How an error shows in the transcript (its kind), after checking what the implementation promises of it.
    fn describe(error: &io::Error) -> String;
}

impl<E: Env> FsApi for Fs<E> {
    type Handle = File<E>;

    fn open(&self, path: &Path, flags: u8) -> io::Result<File<E>> {
        let bit = |i: u8| flags & (1 << i) != 0;
        let mut options = self.open_options();
        options.read(bit(0)).write(bit(1)).append(bit(2)).truncate(bit(3)).create(bit(4)).create_new(bit(5));
        options.open(path)
    }

    fn create(&self, path: &Path) -> io::Result<File<E>> {
        Fs::create(self, path)
    }

    fn create_new(&self, path: &Path) -> io::Result<File<E>> {
        Fs::create_new(self, path)
    }

    fn write_at(handle: &File<E>, buf: &[u8], offset: u64) -> io::Result<usize> {
        handle.write_at(buf, offset)
    }

    fn read_at(handle: &File<E>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        handle.read_at(buf, offset)
    }

    fn set_len(handle: &File<E>, len: u64) -> io::Result<()> {
        handle.set_len(len)
    }

    fn sync_data(handle: &File<E>) -> io::Result<()> {
        handle.sync_data()
    }

    fn sync_all(handle: &File<E>) -> io::Result<()> {
        handle.sync_all()
    }

    fn handle_len(handle: &File<E>) -> io::Result<u64> {
        Ok(handle.metadata()?.len())
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        Fs::write(self, path, bytes)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        Fs::read(self, path)
    }

    fn read_to_string(&self, path: &Path) -> io::Result<String> {
        Fs::read_to_string(self, path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        Fs::rename(self, from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        Fs::remove_file(self, path)
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        Fs::create_dir(self, path)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        Fs::create_dir_all(self, path)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<(PathBuf, bool)>> {
        let mut listing = Vec::new();
        for entry in Fs::read_dir(self, path)? {
            let entry = entry?;
            assert_eq!(entry.path(), path.join(entry.file_name()), "an entry's path is its directory and name");
            listing.push((entry.path(), entry.file_type()?.is_dir()));
        }
        Ok(listing)
    }

    fn metadata(&self, path: &Path) -> io::Result<(u64, bool)> {
        Fs::metadata(self, path).map(|metadata| (metadata.len(), metadata.is_dir()))
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        Fs::exists(self, path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        Fs::sync_dir(self, path)
    }

    /// Every error of the facade carries the `env` error that caused it, and none is a crash here.
    fn describe(error: &io::Error) -> String {
        let inner = env_error(error).unwrap_or_else(|| panic!("{error} carries no env::Error"));
        assert!(!inner.is_crash(), "no crash may happen here: {inner}");
        format!("Err({:?})", error.kind())
    }
}

/// What a call on a handle returned.
enum Reply {
    Value(String),
    Bytes(Vec<u8>),
}

impl Reply {
    fn count(count: usize) -> Self {
        Reply::Value(count.to_string())
    }

    fn bytes(mut buf: Vec<u8>, count: usize) -> Self {
        buf.truncate(count);
        Reply::Bytes(buf)
    }

    fn done() -> Self {
        Reply::Value(String::new())
    }
}

/// Runs steps through one [`FsApi`] under `root`, and describes each result without the root.
struct Runner<A: FsApi> {
    api: A,
    root: PathBuf,
    handles: Vec<Option<A::Handle>>,
    /// Successful reads that returned bytes (so the comparison is not of errors only).
    bytes_read: u64,
}

impl<A: FsApi> Runner<A> {
    fn new(api: A, root: PathBuf) -> Self {
        api.create_dir_all(&root).expect("create the root");
        Self { api, root, handles: (0..HANDLES).map(|_| None).collect(), bytes_read: 0 }
    }

    fn at(&self, relative: &str) -> PathBuf {
        if relative.is_empty() { self.root.clone() } else { self.root.join(relative) }
    }

    fn file_or_dir(&self, index: usize) -> PathBuf {
        FILES.get(index).map_or_else(|| self.at(DIRS[index - FILES.len()]), |file| self.at(file))
    }

    fn outcome<T: Debug>(result: io::Result<T>) -> String {
        match result {
            Ok(value) => format!("Ok({value:?})"),
            Err(error) => A::describe(&error),
        }
    }

    fn read_outcome(&mut self, result: io::Result<Vec<u8>>) -> String {
        if let Ok(bytes) = &result {
            self.bytes_read += u64::from(!bytes.is_empty());
        }
        Self::outcome(result)
    }

    fn apply(&mut self, step: &Step) -> String {
        let opened = match *step {
            Step::Open { handle, file, flags } => (handle, self.api.open(&self.at(FILES[file]), flags)),
            Step::Create { handle, file } => (handle, self.api.create(&self.at(FILES[file]))),
            Step::CreateNew { handle, file } => (handle, self.api.create_new(&self.at(FILES[file]))),
            Step::Close { handle } => return format!("closed {}", self.handles[handle].take().is_some()),
            _ => return self.apply_to_handle(step).unwrap_or_else(|| self.apply_to_path(step)),
        };
        // A new handle replaces (closes) the one in its slot; a failed open leaves the slot as it was.
        match opened {
            (handle, Ok(file)) => {
                self.handles[handle] = Some(file);
                "Ok(())".into()
            }
            (_, Err(error)) => A::describe(&error),
        }
    }

    /// The step's result if it is a call on an open handle; None for path steps.
    fn apply_to_handle(&mut self, step: &Step) -> Option<String> {
        let handle = match *step {
            Step::Write { handle, .. }
            | Step::Read { handle, .. }
            | Step::Seek { handle, .. }
            | Step::WriteAt { handle, .. }
            | Step::ReadAt { handle, .. }
            | Step::SetLen { handle, .. }
            | Step::SyncData { handle }
            | Step::SyncAll { handle }
            | Step::HandleMetadata { handle } => handle,
            _ => return None,
        };
        let Some(file) = self.handles[handle].as_mut() else { return Some("no handle".into()) };
        let result = match *step {
            Step::Write { len, fill, .. } => file.write(&pattern(len, fill)).map(Reply::count),
            Step::Read { len, .. } => {
                let mut buf = vec![0u8; len];
                file.read(&mut buf).map(|n| Reply::bytes(buf, n))
            }
            Step::Seek { to, .. } => file.seek(to).map(|at| Reply::Value(at.to_string())),
            Step::WriteAt { offset, len, fill, .. } => A::write_at(file, &pattern(len, fill), offset).map(Reply::count),
            Step::ReadAt { offset, len, .. } => {
                let mut buf = vec![0u8; len];
                A::read_at(file, &mut buf, offset).map(|n| Reply::bytes(buf, n))
            }
            Step::SetLen { len, .. } => A::set_len(file, len).map(|()| Reply::done()),
            Step::SyncData { .. } => A::sync_data(file).map(|()| Reply::done()),
            Step::SyncAll { .. } => A::sync_all(file).map(|()| Reply::done()),
            Step::HandleMetadata { .. } => A::handle_len(file).map(|len| Reply::Value(len.to_string())),
            _ => unreachable!("only handle steps get here"),
        };
        // The cursor is part of the result: a step that moved it differently shows here.
        let position = file.stream_position().expect("the cursor of a live handle");
        let outcome = match result {
            Ok(Reply::Bytes(bytes)) => self.read_outcome(Ok(bytes)),
            Ok(Reply::Value(value)) => Self::outcome(Ok(value)),
            Err(error) => A::describe(&error),
        };
        Some(format!("{outcome} at {position}"))
    }

    fn apply_to_path(&mut self, step: &Step) -> String {
        let api = &self.api;
        match *step {
            Step::FsWrite { file, len, fill } => Self::outcome(api.write(&self.at(FILES[file]), &pattern(len, fill))),
            Step::FsRead { file } => {
                let result = api.read(&self.at(FILES[file]));
                self.read_outcome(result)
            }
            Step::FsReadToString { file } => Self::outcome(api.read_to_string(&self.at(FILES[file]))),
            Step::Rename { pair } => {
                let (from, to) = RENAMES[pair];
                Self::outcome(api.rename(&self.at(FILES[from]), &self.at(FILES[to])))
            }
            Step::RemoveFile { file } => Self::outcome(api.remove_file(&self.at(FILES[file]))),
            Step::CreateDir { dir } => Self::outcome(api.create_dir(&self.at(DIRS[dir]))),
            Step::CreateDirAll { dir } => Self::outcome(api.create_dir_all(&self.at(DIRS[dir]))),
            Step::ReadDir { dir } => Self::outcome(self.list(&self.at(DIRS[dir]))),
            Step::Metadata { file_or_dir } => Self::outcome(api.metadata(&self.file_or_dir(file_or_dir))),
            Step::Exists { file_or_dir } => Self::outcome(api.exists(&self.file_or_dir(file_or_dir))),
            Step::SyncDir { dir } => Self::outcome(api.sync_dir(&self.at(DIRS[dir]))),
            _ => unreachable!("handle steps are applied by apply_to_handle"),
        }
    }

    /// A directory's entries as (path relative to the root, is a directory).
    fn list(&self, dir: &Path) -> io::Result<Vec<(PathBuf, bool)>> {
        let listing = self.api.read_dir(dir)?;
        let relative = |path: PathBuf| path.strip_prefix(&self.root).expect("under the root").to_path_buf();
        Ok(listing.into_iter().map(|(path, is_dir)| (relative(path), is_dir)).collect())
    }

    /// Every file and directory under the root, relative to it, with each file's bytes.
    fn tree(&self) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        let mut tree = Vec::new();
        let mut pending = vec![self.root.clone()];
        while let Some(dir) = pending.pop() {
            for (relative, is_dir) in self.list(&dir).expect("list") {
                let path = self.root.join(&relative);
                if is_dir {
                    pending.push(path);
                    tree.push((relative, None));
                } else {
                    tree.push((relative, Some(self.api.read(&path).expect("read"))));
                }
            }
        }
        tree.sort();
        tree
    }
}

/// (a) A random sequence of `std`-shaped calls gives the same results — values, error kinds, cursor positions,
/// bytes read back, listings, and the final tree — through the facade on `SimEnv`, through the facade on `RealEnv`,
/// and through `std::fs` itself, when no crash happens.
#[test]
fn facade_on_sim_env_and_real_env_agree_with_std_fs() {
    let real = RealEnv::new();
    let (bytes_read, errors) = (Cell::new(0u64), Cell::new(0u64));
    let mut runner = TestRunner::new(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(CASES) });
    let result = runner.run(&(any::<u64>(), workload()), |(seed, steps)| {
        let (real_dir, std_dir) = (TempDir::new(&real, "fs-facade"), TempDir::new(&real, "fs-std"));
        let mut on_sim = Runner::new(Fs::new(SimEnv::new(seed)), PathBuf::from("/data"));
        let mut on_real = Runner::new(Fs::new(real.clone()), real_dir.path.clone());
        let mut on_std = Runner::new(StdFs, std_dir.path.clone());
        for (index, step) in steps.iter().enumerate() {
            let (sim, real, std) = (on_sim.apply(step), on_real.apply(step), on_std.apply(step));
            prop_assert_eq!(&sim, &std, "step {} {:?}: SimEnv vs std, in {:?}", index, step, steps);
            prop_assert_eq!(&real, &std, "step {} {:?}: RealEnv vs std, in {:?}", index, step, steps);
            errors.set(errors.get() + u64::from(sim.starts_with("Err")));
        }
        let tree = on_std.tree();
        prop_assert_eq!(&on_sim.tree(), &tree, "SimEnv's tree differs from std's after {:?}", steps);
        prop_assert_eq!(&on_real.tree(), &tree, "RealEnv's tree differs from std's after {:?}", steps);
        prop_assert_eq!(on_sim.api.env().crash_count(), 0);
        let files_with_bytes = tree.iter().filter(|(_, bytes)| bytes.as_ref().is_some_and(|b| !b.is_empty())).count();
        bytes_read.set(bytes_read.get() + on_sim.bytes_read + files_with_bytes as u64);
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    // Not a comparison of errors only: both data and errors were compared.
    let (bytes_read, errors) = (bytes_read.get(), errors.get());
    assert!(bytes_read >= u64::from(CASES), "only {bytes_read} non-empty reads in {CASES} cases");
    assert!(errors >= u64::from(CASES), "only {errors} errors in {CASES} cases");
}

/// Every combination of the six `OpenOptions` flags, on a missing and on an existing file, opens (or refuses) and
/// then reads, writes and seeks as `std::fs` does, through the facade on `SimEnv` and on `RealEnv`.
#[test]
fn every_open_options_combination_agrees_with_std_fs() {
    let real = RealEnv::new();
    let mut opened = 0;
    for flags in 0..64u8 {
        for existing in [false, true] {
            let mut steps = Vec::new();
            if existing {
                steps.push(Step::FsWrite { file: 0, len: 10, fill: 1 });
            }
            steps.extend([
                Step::Open { handle: 0, file: 0, flags },
                Step::Seek { handle: 0, to: SeekFrom::Start(4) },
                Step::Write { handle: 0, len: 3, fill: 2 },
                Step::Read { handle: 0, len: 20 },
                Step::Seek { handle: 0, to: SeekFrom::Start(0) },
                Step::Read { handle: 0, len: 20 },
                Step::HandleMetadata { handle: 0 },
                Step::FsRead { file: 0 },
            ]);
            let (real_dir, std_dir) = (TempDir::new(&real, "fs-flags"), TempDir::new(&real, "fs-flags-std"));
            let mut on_sim = Runner::new(Fs::new(SimEnv::new(u64::from(flags))), PathBuf::from("/data"));
            let mut on_real = Runner::new(Fs::new(real.clone()), real_dir.path.clone());
            let mut on_std = Runner::new(StdFs, std_dir.path.clone());
            let run = |runner: &mut dyn FnMut(&Step) -> String| steps.iter().map(runner).collect::<Vec<String>>();
            let std = run(&mut |step| on_std.apply(step));
            assert_eq!(run(&mut |step| on_sim.apply(step)), std, "flags {flags:06b}, existing {existing}: SimEnv");
            assert_eq!(run(&mut |step| on_real.apply(step)), std, "flags {flags:06b}, existing {existing}: RealEnv");
            opened += usize::from(std[usize::from(existing)] == "Ok(())");
        }
    }
    // 49 of the 128 (flags, existing) pairs open under std on Linux (counted by a standalone std program); the rest
    // are refused as invalid, missing or existing: both outcomes were compared.
    assert_eq!(opened, 49, "std opened {opened} of 128");
}
