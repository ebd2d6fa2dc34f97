//! Crash semantics through the `env::fs` facade on `SimEnv`: what `sync_data`, `sync_all` and `sync_dir` promise,
//! what a crash may take when they were not called, and how faults and crashes reach `std::io`-shaped callers.

use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use env::SimEnv;
use env::fs::{Fs, env_error};

use crate::fs_facade::pattern;

const SEEDS: u64 = 64;
const DB: &str = "/db";

/// A world whose crashes keep no pending write whole and no pending directory operation, with `/db` durable.
fn harsh_world(seed: u64, crash_write_kept_ppm: u32) -> Fs<SimEnv> {
    let config = env::FaultConfig { crash_write_kept_ppm, crash_metadata_kept_ppm: 0, ..env::FaultConfig::default() };
    let fs = Fs::new(SimEnv::with_faults(seed, config));
    fs.create_dir_all(DB).expect("mkdir");
    fs.sync_dir("/").expect("sync the root");
    fs
}

fn db(name: &str) -> PathBuf {
    Path::new(DB).join(name)
}

/// A durable file `name` holding `bytes`: written, `sync_data`'d, and its name made durable by `sync_dir`.
fn durable_file(fs: &Fs<SimEnv>, name: &str, bytes: &[u8]) {
    let mut file = fs.create_new(db(name)).expect("create");
    file.write_all(bytes).expect("write");
    file.sync_data().expect("sync_data");
    fs.sync_dir(DB).expect("sync_dir");
}

/// (b) Bytes written and synced (`sync_data` or `sync_all`) survive a crash that keeps nothing pending.
#[test]
fn synced_bytes_survive_a_crash_through_the_facade() {
    for seed in 0..SEEDS {
        let fs = harsh_world(seed, 0);
        durable_file(&fs, "data", &pattern(3_000, 1));
        let mut all = fs.open_options().write(true).create(true).open(db("all")).expect("create");
        all.write_all(&pattern(700, 2)).expect("write");
        all.sync_all().expect("sync_all");
        fs.sync_dir(DB).expect("sync_dir");
        // More bytes, synced, over a durable file: an overwrite and an append.
        let mut data = fs.open_options().read(true).write(true).open(db("data")).expect("open");
        data.seek(SeekFrom::Start(1_000)).expect("seek");
        data.write_all(&pattern(600, 3)).expect("overwrite");
        data.seek(SeekFrom::End(0)).expect("seek");
        data.write_all(b"tail").expect("append");
        data.sync_data().expect("sync_data");
        let mut expected = pattern(3_000, 1);
        expected[1_000..1_600].copy_from_slice(&pattern(600, 3));
        expected.extend_from_slice(b"tail");
        fs.env().crash();
        assert_eq!(fs.read(db("data")).expect("read after the crash"), expected, "seed {seed}");
        assert_eq!(fs.read(db("all")).expect("read after the crash"), pattern(700, 2), "seed {seed}");
        assert_eq!(fs.metadata(db("data")).expect("metadata").len(), 3_004);
    }
}

/// (b) Bytes written but not synced can be lost: with no pending write kept whole, a crash leaves each 512-byte
/// sector of an unsynced overwrite old or new — never anything else — and loses the whole write in some seeds.
/// Keeping every pending write (`crash_write_kept_ppm` one million) keeps it: the loss is the crash's.
#[test]
fn unsynced_bytes_can_be_lost_by_a_crash() {
    let (old, new) = (pattern(2_048, 10), pattern(2_048, 20));
    let mut lost_whole = 0;
    for seed in 0..SEEDS {
        let fs = harsh_world(seed, 0);
        durable_file(&fs, "f", &old);
        let mut file = fs.open_options().write(true).open(db("f")).expect("open");
        file.write_all(&new).expect("overwrite, not synced");
        assert_eq!(fs.read(db("f")).expect("read before the crash"), new, "reads see unsynced bytes");
        fs.env().crash();
        let after = fs.read(db("f")).expect("read after the crash");
        assert_eq!(after.len(), old.len());
        for (sector, (got, (was, written))) in after.chunks(512).zip(old.chunks(512).zip(new.chunks(512))).enumerate() {
            assert!(got == was || got == written, "seed {seed}: sector {sector} is neither old nor new");
        }
        lost_whole += u32::from(after == old);
        let stale = file.write_all(b"late").expect_err("a handle from before the crash is dead");
        assert!(env_error(&stale).is_some_and(env::Error::is_crash), "{stale}");
    }
    assert!(lost_whole > 0, "no seed of {SEEDS} lost the unsynced write");
    for seed in 0..SEEDS {
        let fs = harsh_world(seed, 1_000_000);
        durable_file(&fs, "f", &old);
        fs.open_options().write(true).open(db("f")).expect("open").write_all(&new).expect("overwrite");
        fs.env().crash();
        assert_eq!(fs.read(db("f")).expect("read"), new, "seed {seed}: a kept write was lost");
    }
}

/// (b) A file created and synced but whose directory was not synced is gone after a crash that keeps no pending
/// directory operation: `sync_data` never makes a name durable.
#[test]
fn a_name_not_synced_by_sync_dir_is_lost_by_a_crash() {
    for seed in 0..SEEDS {
        let fs = harsh_world(seed, 0);
        let mut file = fs.create(db("new")).expect("create");
        file.write_all(b"bytes").expect("write");
        file.sync_all().expect("sync_all");
        fs.env().crash();
        let error = fs.read(db("new")).expect_err("the name was not durable");
        assert_eq!(error.kind(), io::ErrorKind::NotFound, "seed {seed}");
        assert_eq!(env_error(&error).map(env::Error::path), Some(db("new").as_path()));
        assert!(!fs.exists(db("new")).expect("exists"));
    }
}

/// (b) A rename not followed by `sync_dir` is undone by a crash that keeps no pending directory operation; after
/// `sync_dir` it survives every crash.
#[test]
fn rename_survives_a_crash_only_after_sync_dir() {
    for seed in 0..SEEDS {
        for synced in [false, true] {
            let fs = harsh_world(seed, 0);
            durable_file(&fs, "current", b"old");
            durable_file(&fs, "next", b"new");
            fs.rename(db("next"), db("current")).expect("rename");
            if synced {
                fs.sync_dir(DB).expect("sync_dir");
            }
            assert_eq!(fs.read(db("current")).expect("read"), b"new");
            fs.env().crash();
            let names: Vec<PathBuf> = fs.read_dir(DB).expect("list").map(|e| e.expect("entry").path()).collect();
            if synced {
                assert_eq!(fs.read(db("current")).expect("read"), b"new", "seed {seed}");
                assert_eq!(names, [db("current")], "seed {seed}");
            } else {
                assert_eq!(fs.read(db("current")).expect("read"), b"old", "seed {seed}");
                assert_eq!(fs.read(db("next")).expect("read"), b"new", "seed {seed}");
                assert_eq!(names, [db("current"), db("next")], "seed {seed}");
            }
        }
    }
}

/// Faults and crashes reach ported code as `io::Error`s with a faithful kind and the `env` error inside: an
/// injected fsync failure, a full disk, an armed crash cutting a write, and a handle from before the crash.
#[test]
fn faults_and_crashes_surface_as_io_errors_with_the_env_error_inside() {
    let config = env::FaultConfig { disk_quota_bytes: Some(100), ..env::FaultConfig::default() };
    let fs = Fs::new(SimEnv::with_faults(5, config));
    let path = PathBuf::from("f");
    let mut file = fs.create(&path).expect("create");
    file.write_all(b"unsynced").expect("write");
    fs.env().inject(env::ExplicitFault::FailNextSync { path: path.clone() });
    let error = file.sync_data().expect_err("injected");
    assert_eq!(error.kind(), io::ErrorKind::Other);
    assert!(matches!(env_error(&error), Some(env::Error::Io { op: env::Op::Sync, path: at, .. }) if *at == path));
    assert_eq!(fs.read(&path).expect("read"), b"", "a failed fsync drops the unsynced bytes, as on Linux");

    let error = file.write_all(&[7u8; 200]).expect_err("over the quota");
    assert_eq!(error.kind(), io::ErrorKind::StorageFull);
    assert!(matches!(env_error(&error), Some(env::Error::NoSpace { op: env::Op::Write, .. })));

    file.write_all(b"kept").expect("write");
    file.sync_data().expect("sync");
    fs.env().crash_at_io(1);
    let error = file.write_all(b"cut").expect_err("the armed crash");
    assert_eq!(error.kind(), io::ErrorKind::Other);
    assert!(matches!(env_error(&error), Some(env::Error::Crashed { op: env::Op::Write, path: at }) if *at == path));
    assert!(fs.env().is_halted());
    fs.env().restart();
    let error = file.read_at(&mut [0u8; 4], 0).expect_err("write-only handle refuses reads first");
    assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    let error = file.sync_data().expect_err("a handle from before the crash");
    assert!(matches!(env_error(&error), Some(env::Error::StaleHandle { op: env::Op::Sync, .. })), "{error}");
    assert_eq!(error.kind(), io::ErrorKind::Other);
}
