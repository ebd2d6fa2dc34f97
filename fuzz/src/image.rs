//! `recovery`: open a database from an arbitrary directory image; it must open or fail with a typed error,
//! never panic.
//!
//! The input ([`Image`], via `arbitrary`) describes the directory:
//! 1. optionally a real database ([`Base`]): a list of operations applied to an `engine::Db` on a `SimEnv`, ended
//!    by a close, by abandoning it (no close), or by keeping only what is durable (a crash); its files are the
//!    starting image;
//! 2. raw files (a name from [`NAMES`] and arbitrary bytes) added over it;
//! 3. byte-level [`Mutation`]s of chosen files (flip, overwrite, zero, truncate, append, remove, copy, rename);
//! 4. optionally every checksum recomputed ([`crate::reseal`]), so damage reaches past the CRCs.
//!
//! The image is written to a fresh `SimEnv` under `/db` and `Db::open`ed with default options. If it opens:
//! optionally a few writes and a flush, `get` of some keys, a full `scan`, optionally a `compact`, and `close`
//! must not panic (errors are fine).
//!
//! Two stronger properties are asserted as well (each failure is a real bug):
//! - **Untouched images recover everything.** With a base database and no raw files or mutations, the open must
//!   succeed and a scan must return exactly what the operations wrote (the default `SyncMode::Sync` makes every
//!   acknowledged write durable, even under the crash ending).
//! - **Recovery is stable.** If an image opens and closes cleanly, opening the result again succeeds and reads the
//!   same data.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arbitrary::Arbitrary;
use engine::{Db, Options};
use env::{Env, File, OpenOptions, SimEnv};

/// The database directory in every image.
pub const DIR: &str = "/db";

/// The names a raw file or a copy/rename can take: what the engine writes, plus edge cases of its name parsing
/// (number 0, a number that does not round-trip through the zero-padded form, the largest u64, an overlong number,
/// a stray file).
pub const NAMES: &[&str] = &[
    "MANIFEST",
    "MANIFEST.tmp",
    "wal-000001.log",
    "wal-000002.log",
    "wal-000003.log",
    "wal-000004.log",
    "table-000002.sst",
    "table-000003.sst",
    "table-000004.sst",
    "table-000005.sst",
    "wal-000006.log",
    "table-000007.sst",
    "wal-000000.log",
    "table-000000.sst",
    "wal-7.log",
    "wal-18446744073709551615.log",
    "table-18446744073709551615.sst",
    "table-99999999999999999999.sst",
    "LOCK",
    "notes.txt",
];

/// At most this many operations build the base database, of which at most [`BASE_REOPENS_MAX`] reopens (keeps
/// one execution to a few milliseconds).
pub const BASE_OPS_MAX: usize = 32;
pub const BASE_REOPENS_MAX: usize = 3;
/// At most this many raw files, mutations and probe keys are applied.
pub const RAW_FILES_MAX: usize = 8;
pub const MUTATIONS_MAX: usize = 16;
pub const PROBES_MAX: usize = 8;
/// The largest value an operation writes.
pub const VALUE_BYTES_MAX: usize = 1500;

#[derive(Arbitrary, Debug, Clone)]
pub struct Image {
    pub seed: u64,
    pub base: Option<Base>,
    pub files: Vec<RawFile>,
    pub mutations: Vec<Mutation>,
    /// Recompute every checksum after the mutations.
    pub reseal: bool,
    pub probes: Vec<Vec<u8>>,
    /// After a successful open, write (a put, a delete, a flush) before reading.
    pub write_after_open: bool,
    /// After a successful open, run a full compaction too (reads every table's data blocks).
    pub compact_after_open: bool,
}

#[derive(Arbitrary, Debug, Clone)]
pub struct Base {
    /// 64-byte data blocks: a few keys make multi-block tables (index, learned index, restarts).
    pub small_blocks: bool,
    /// A 2 KiB memtable: writes trigger background flushes and compactions.
    pub small_memtable: bool,
    pub ops: Vec<Op>,
    pub ending: Ending,
}

#[derive(Arbitrary, Debug, Clone)]
pub enum Op {
    Put {
        key: u8,
        value_len: u16,
        fill: u8,
    },
    Delete {
        key: u8,
    },
    Flush,
    Compact,
    /// Close and open again (recovery of a cleanly closed database, mid-history).
    Reopen,
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// `close()`: the log is sealed.
    Close,
    /// Dropped without `close()`, background work left pending: the files as they are.
    Abandon,
    /// Only what is durable (a power cut that drops every pending operation).
    CrashDurable,
}

#[derive(Arbitrary, Debug, Clone)]
pub struct RawFile {
    pub name: u8,
    pub bytes: Vec<u8>,
}

/// A byte-level edit of the image's `file`-th file (modulo the file count, in name order).
#[derive(Arbitrary, Debug, Clone)]
pub enum Mutation {
    FlipBit {
        file: u8,
        offset: u32,
        bit: u8,
    },
    Overwrite {
        file: u8,
        offset: u32,
        bytes: Vec<u8>,
    },
    Zero {
        file: u8,
        offset: u32,
        len: u16,
    },
    /// Truncate to `len` modulo (size + 1).
    Truncate {
        file: u8,
        len: u32,
    },
    /// Drop the last `count` bytes (modulo size + 1): a torn tail.
    TruncateTail {
        file: u8,
        count: u16,
    },
    Append {
        file: u8,
        bytes: Vec<u8>,
    },
    Remove {
        file: u8,
    },
    CopyTo {
        file: u8,
        name: u8,
    },
    RenameTo {
        file: u8,
        name: u8,
    },
}

/// The key an operation's `key` byte names: 40 short keys, plus longer keys sharing their prefixes.
pub fn key_of(key: u8) -> Vec<u8> {
    let mut bytes = format!("k{:02}", key % 40).into_bytes();
    if key >= 200 {
        bytes.extend(std::iter::repeat_n(b'~', usize::from(key - 199)));
    }
    bytes
}

fn value_of(len: u16, fill: u8) -> Vec<u8> {
    (0..usize::from(len) % (VALUE_BYTES_MAX + 1)).map(|i| fill.wrapping_add(i as u8)).collect()
}

fn name_of(name: u8) -> &'static str {
    NAMES[usize::from(name) % NAMES.len()]
}

/// A directory image: file name → contents.
pub type Files = BTreeMap<String, Vec<u8>>;
/// What a database holds: key → value.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// The result of building a base database: its files, and what it holds if every operation succeeded.
pub struct Built {
    pub files: Files,
    /// `None` when an operation failed (its effect is then unknown).
    pub model: Option<Model>,
}

fn base_options(base: &Base) -> Options {
    let mut options = Options::default();
    if base.small_blocks {
        options = options.with_block_size_bytes(64);
    }
    if base.small_memtable {
        options = options.with_flush_threshold_bytes(2048);
    }
    options
}

/// Run `base` on a fresh `SimEnv` and collect the files it leaves.
pub fn build_base(seed: u64, base: &Base) -> Built {
    let env = SimEnv::new(seed);
    let dir = Path::new(DIR);
    let options = base_options(base);
    let mut model = BTreeMap::new();
    let mut db = Db::open(env.clone(), dir, options.clone()).expect("opening an empty directory on a clean SimEnv");
    let mut ok = true;
    let mut reopens = 0;
    for op in base.ops.iter().take(BASE_OPS_MAX) {
        if matches!(op, Op::Reopen) {
            reopens += 1;
            if reopens > BASE_REOPENS_MAX {
                continue;
            }
        }
        let result = match op {
            Op::Put { key, value_len, fill } => {
                let (key, value) = (key_of(*key), value_of(*value_len, *fill));
                db.put(&key, &value).map(|()| {
                    model.insert(key, value);
                })
            }
            Op::Delete { key } => {
                let key = key_of(*key);
                db.delete(&key).map(|()| {
                    model.remove(&key);
                })
            }
            Op::Flush => db.flush(),
            Op::Compact => db.compact(),
            Op::Reopen => db.close().and_then(|()| Db::open(env.clone(), dir, options.clone()).map(|new| db = new)),
        };
        if result.is_err() {
            ok = false;
            break;
        }
    }
    match base.ending {
        Ending::Close => ok &= db.close().is_ok(),
        Ending::Abandon | Ending::CrashDurable => {}
    }
    drop(db);
    let mut files = Files::new();
    for path in env.list_dir(dir).expect("list the base directory") {
        let bytes = match base.ending {
            Ending::CrashDurable => env.read_durable(&path),
            Ending::Close | Ending::Abandon => env.read_current(&path),
        };
        if let (Some(name), Some(bytes)) = (path.file_name(), bytes) {
            files.insert(name.to_string_lossy().into_owned(), bytes);
        }
    }
    Built { files, model: ok.then_some(model) }
}

fn pick(files: &Files, file: u8) -> Option<String> {
    if files.is_empty() {
        return None;
    }
    files.keys().nth(usize::from(file) % files.len()).cloned()
}

fn offset_in(offset: u32, len: usize) -> usize {
    if len == 0 { 0 } else { offset as usize % len }
}

/// Apply one mutation to the image.
pub fn mutate(files: &mut Files, mutation: &Mutation) {
    let file = match mutation {
        Mutation::FlipBit { file, .. }
        | Mutation::Overwrite { file, .. }
        | Mutation::Zero { file, .. }
        | Mutation::Truncate { file, .. }
        | Mutation::TruncateTail { file, .. }
        | Mutation::Append { file, .. }
        | Mutation::Remove { file }
        | Mutation::CopyTo { file, .. }
        | Mutation::RenameTo { file, .. } => *file,
    };
    let Some(name) = pick(files, file) else { return };
    let bytes = files.get_mut(&name).expect("picked an existing file");
    let len = bytes.len();
    match mutation {
        Mutation::FlipBit { offset, bit, .. } => {
            if len > 0 {
                bytes[offset_in(*offset, len)] ^= 1 << (bit % 8);
            }
        }
        Mutation::Overwrite { offset, bytes: patch, .. } => {
            let start = offset_in(*offset, len);
            let end = (start + patch.len()).min(len);
            bytes[start..end].copy_from_slice(&patch[..end - start]);
        }
        Mutation::Zero { offset, len: count, .. } => {
            let start = offset_in(*offset, len);
            let end = (start + usize::from(*count)).min(len);
            bytes[start..end].fill(0);
        }
        Mutation::Truncate { len: new_len, .. } => bytes.truncate(*new_len as usize % (len + 1)),
        Mutation::TruncateTail { count, .. } => bytes.truncate(len - usize::from(*count) % (len + 1)),
        Mutation::Append { bytes: tail, .. } => bytes.extend_from_slice(tail),
        Mutation::Remove { .. } => {
            files.remove(&name);
        }
        Mutation::CopyTo { name: to, .. } => {
            let copy = bytes.clone();
            files.insert(name_of(*to).to_string(), copy);
        }
        Mutation::RenameTo { name: to, .. } => {
            let moved = files.remove(&name).expect("picked an existing file");
            files.insert(name_of(*to).to_string(), moved);
        }
    }
}

/// The directory image an input describes (and whether it is an untouched base, with its model).
pub fn image_files(image: &Image) -> (Files, Option<Model>) {
    let built = image.base.as_ref().map(|base| build_base(image.seed, base));
    let untouched = image.files.is_empty() && image.mutations.is_empty();
    let (mut files, model) = match built {
        Some(built) => (built.files, if untouched { built.model } else { None }),
        None => (Files::new(), None),
    };
    for raw in image.files.iter().take(RAW_FILES_MAX) {
        files.insert(name_of(raw.name).to_string(), raw.bytes.clone());
    }
    for mutation in image.mutations.iter().take(MUTATIONS_MAX) {
        mutate(&mut files, mutation);
    }
    if image.reseal {
        for (name, bytes) in files.iter_mut() {
            *bytes = crate::reseal::reseal_by_name(name, bytes);
        }
    }
    (files, model)
}

/// Write `files` durably under `/db` of a fresh `SimEnv`.
pub fn write_image(seed: u64, files: &Files) -> SimEnv {
    let env = SimEnv::new(seed);
    let dir = PathBuf::from(DIR);
    env.create_dir_all(&dir).expect("create /db");
    env.sync_dir(Path::new("/")).expect("sync /");
    for (name, bytes) in files {
        let file = env.open(&dir.join(name), OpenOptions::create_truncate()).expect("create an image file");
        if !bytes.is_empty() {
            file.write_all_at(0, bytes).expect("write an image file");
        }
        file.sync().expect("sync an image file");
    }
    env.sync_dir(&dir).expect("sync /db");
    env
}

/// What one open of the image read: `get` results by key, and the full scan (errors as `None`).
#[derive(Debug, PartialEq, Eq)]
struct Reads {
    gets: Vec<Option<Option<Vec<u8>>>>,
    scan: Option<Vec<(Vec<u8>, Vec<u8>)>>,
}

fn read_all<E: Env>(db: &Db<E>, keys: &[Vec<u8>]) -> Reads {
    let gets = keys.iter().map(|key| db.get(key).ok()).collect();
    let scan = db.scan(..).and_then(|rows| rows.collect::<Result<Vec<_>, _>>()).ok();
    Reads { gets, scan }
}

/// The harness. Panics on a finding.
pub fn check(image: &Image) {
    let (files, mut model) = image_files(image);
    let env = write_image(image.seed, &files);
    let mut keys: Vec<Vec<u8>> = (0..40).map(key_of).collect();
    keys.extend([Vec::new(), key_of(255), b"\xff\xff".to_vec()]);
    keys.extend(image.probes.iter().take(PROBES_MAX).cloned());

    let db = match Db::open(env.clone(), DIR, Options::default()) {
        Ok(db) => db,
        Err(error) => {
            assert!(model.is_none(), "an untouched database fails to open: {error:?}\nimage: {:?}", names(&files));
            return;
        }
    };
    let mut clean = true;
    if image.write_after_open {
        clean &= db.put(&key_of(0), b"written after open").is_ok();
        clean &= db.delete(&key_of(1)).is_ok();
        clean &= db.flush().is_ok();
        match model.as_mut() {
            Some(model) if clean => {
                model.insert(key_of(0), b"written after open".to_vec());
                model.remove(&key_of(1));
            }
            _ => model = None,
        }
    }
    let reads = read_all(&db, &keys);
    if let Some(model) = &model {
        let expected: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let scan = reads.scan.as_ref().expect("scanning an untouched, recovered database fails");
        assert_eq!(scan, &expected, "an untouched database recovers different data");
    }
    clean &= !image.compact_after_open || db.compact().is_ok();
    clean &= db.close().is_ok();
    drop(db);
    if !clean {
        return;
    }
    // Recovery is stable: the directory a clean open (writes, compaction) and close left opens again and reads the
    // same.
    let again = match Db::open(env.clone(), DIR, Options::default()) {
        Ok(db) => db,
        Err(error) => panic!("a directory that opened and closed cleanly fails to reopen: {error:?}"),
    };
    let reads_again = read_all(&again, &keys);
    for (index, (before, after)) in reads.gets.iter().zip(&reads_again.gets).enumerate() {
        if let (Some(before), Some(after)) = (before, after) {
            assert_eq!(before, after, "get({:?}) changed across a clean close/reopen", keys[index]);
        }
    }
    if let (Some(before), Some(after)) = (&reads.scan, &reads_again.scan) {
        assert_eq!(before, after, "scan changed across a clean close/reopen");
    }
    let _ = again.close();
}

fn names(files: &Files) -> Vec<(&str, usize)> {
    files.iter().map(|(name, bytes)| (name.as_str(), bytes.len())).collect()
}

/// The harness on raw fuzzer bytes, decoded as libFuzzer's `fuzz_target!` does (`arbitrary_take_rest`); bytes
/// that do not form an [`Image`] are skipped.
pub fn check_bytes(data: &[u8]) {
    if let Ok(image) = <Image as Arbitrary>::arbitrary_take_rest(arbitrary::Unstructured::new(data)) {
        check(&image);
    }
}
