//! Plain unit tests of the simulated disk's promises (ADR-0004), one behaviour each.

use std::path::{Path, PathBuf};

use env::{
    Env, Error, ExplicitFault, FaultConfig, FaultKind, File, Op, OpenOptions, SECTOR_SIZE_BYTES, SimEnv,
    WRITE_ATTEMPTS_MAX,
};

use crate::model::{DIR, setup};

const SEEDS: u64 = 64;

fn path(name: &str) -> PathBuf {
    Path::new(DIR).join(name)
}

/// A file `name` holding `bytes`, its data synced, and its name made durable when `sync_dir`.
fn synced_file(env: &SimEnv, name: &str, bytes: &[u8], sync_dir: bool) {
    let file = env.open(&path(name), OpenOptions::create_new()).expect("create");
    file.write_all_at(0, bytes).expect("write");
    file.sync().expect("sync");
    if sync_dir {
        env.sync_dir(Path::new(DIR)).expect("sync_dir");
    }
}

#[test]
fn directory_entries_are_volatile_until_sync_dir() {
    let bytes = vec![7u8; 1000];
    let (mut lost, mut kept) = (0, 0);
    for seed in 0..SEEDS {
        let env = SimEnv::new(seed);
        setup(&env);
        synced_file(&env, "a", &bytes, false);
        assert_eq!(env.files()[0].durable_len, None, "the name is not durable before sync_dir");
        env.crash();
        match env.read_current(&path("a")) {
            None => lost += 1,
            Some(after) => {
                assert_eq!(after, bytes, "a surviving file has its synced bytes");
                kept += 1;
            }
        }
    }
    assert!(lost > 0 && kept > 0, "without sync_dir a crash both drops and keeps the name: {lost} lost, {kept} kept");

    for seed in 0..SEEDS {
        let env = SimEnv::new(seed);
        setup(&env);
        synced_file(&env, "a", &bytes, true);
        assert_eq!(env.files()[0].durable_len, Some(1000));
        env.crash();
        assert_eq!(env.read_current(&path("a")), Some(bytes.clone()), "seed {seed}: a durable file was lost");
        assert_eq!(env.list_dir(Path::new(DIR)).expect("list"), vec![path("a")]);
    }
}

#[test]
fn unsynced_directory_loses_its_files_with_it() {
    // The directory's own entry is pending in its parent until the parent is synced.
    let mut lost = 0;
    for seed in 0..SEEDS {
        let env = SimEnv::new(seed);
        env.create_dir_all(Path::new("x/y")).expect("mkdir");
        let file = env.open(Path::new("x/y/f"), OpenOptions::create_new()).expect("create");
        file.write_all_at(0, b"data").expect("write");
        file.sync().expect("sync");
        env.sync_dir(Path::new("x/y")).expect("sync y");
        env.crash();
        let exists = env.exists(Path::new("x/y/f")).expect("exists");
        if !exists {
            lost += 1;
        }
        assert_eq!(exists, env.exists(Path::new("x/y")).expect("exists"), "a file outlived its directory");
    }
    assert!(lost > 0, "an unsynced mkdir never dropped");
}

#[test]
fn rename_then_crash_yields_exactly_one_name() {
    let (mut old, mut new) = (0, 0);
    for seed in 0..SEEDS {
        let env = SimEnv::new(seed);
        setup(&env);
        synced_file(&env, "a", b"synced", true);
        env.rename(&path("a"), &path("b")).expect("rename");
        env.crash();
        match (env.read_current(&path("a")), env.read_current(&path("b"))) {
            (Some(bytes), None) => {
                assert_eq!(bytes, b"synced");
                old += 1;
            }
            (None, Some(bytes)) => {
                assert_eq!(bytes, b"synced");
                new += 1;
            }
            both_or_neither => panic!("seed {seed}: rename left {both_or_neither:?}"),
        }
    }
    assert!(old > 0 && new > 0, "both outcomes happen: {old} old, {new} new");
}

#[test]
fn rename_over_an_existing_file_is_atomic_across_a_crash() {
    let (mut old, mut new) = (0, 0);
    for seed in 0..SEEDS {
        let env = SimEnv::new(seed);
        setup(&env);
        synced_file(&env, "target", b"old contents", false);
        synced_file(&env, "tmp", b"new contents", true);
        env.rename(&path("tmp"), &path("target")).expect("rename");
        assert_eq!(env.read_current(&path("target")).expect("target"), b"new contents");
        env.crash();
        let tmp = env.read_current(&path("tmp"));
        let target = env.read_current(&path("target")).expect("the target name is never lost");
        match (tmp, target.as_slice()) {
            (Some(tmp), b"old contents") => {
                assert_eq!(tmp, b"new contents");
                old += 1;
            }
            (None, b"new contents") => new += 1,
            (tmp, target) => panic!("seed {seed}: tmp {tmp:?}, target {target:?}"),
        }
    }
    assert!(old > 0 && new > 0, "both outcomes happen: {old} old, {new} new");
}

#[test]
fn synced_rename_survives_every_crash() {
    for seed in 0..SEEDS {
        let env = SimEnv::new(seed);
        setup(&env);
        synced_file(&env, "a", b"synced", true);
        env.rename(&path("a"), &path("b")).expect("rename");
        env.sync_dir(Path::new(DIR)).expect("sync_dir");
        env.crash();
        assert_eq!(env.list_dir(Path::new(DIR)).expect("list"), vec![path("b")]);
        assert_eq!(env.read_current(&path("b")).expect("b"), b"synced");
    }
}

#[test]
fn torn_writes_tear_at_sector_boundaries_only() {
    let sector = SECTOR_SIZE_BYTES as usize;
    let (offset, len) = (300usize, 5 * sector);
    let (mut kept, mut dropped, mut torn) = (0, 0, 0);
    for seed in 0..SEEDS {
        let env = SimEnv::new(seed);
        setup(&env);
        synced_file(&env, "a", &vec![0xaa; 8 * sector], true);
        let file = env.open(&path("a"), OpenOptions::read_write()).expect("open");
        file.write_all_at(offset as u64, &vec![0x55; len]).expect("write");
        env.crash();
        let after = env.read_current(&path("a")).expect("a is durable");
        assert_eq!(after.len(), 8 * sector);
        let mut new_sectors = Vec::new();
        for (index, chunk) in after.chunks(sector).enumerate() {
            let (start, end) = (index * sector, (index + 1) * sector);
            let written = offset.max(start)..(offset + len).min(end);
            for (position, &byte) in chunk.iter().enumerate().map(|(i, byte)| (start + i, byte)) {
                if !written.contains(&position) {
                    assert_eq!(byte, 0xaa, "seed {seed}: byte {position} outside the write changed");
                }
            }
            if written.is_empty() {
                continue;
            }
            let piece = &after[written];
            let is_new = piece.iter().all(|&byte| byte == 0x55);
            assert!(is_new || piece.iter().all(|&byte| byte == 0xaa), "seed {seed}: sector {index} is mixed");
            new_sectors.push(is_new);
        }
        match (new_sectors.iter().all(|&new| new), new_sectors.iter().any(|&new| new)) {
            (true, _) => kept += 1,
            (false, false) => dropped += 1,
            (false, true) => torn += 1,
        }
    }
    assert!(kept > 0 && dropped > 0 && torn > 0, "kept {kept}, dropped {dropped}, torn {torn}");
}

#[test]
fn crash_zero_fills_the_gap_before_a_kept_write_past_the_end() {
    let mut tails_kept = 0;
    for seed in 0..SEEDS {
        let env = SimEnv::new(seed);
        setup(&env);
        synced_file(&env, "a", b"head", true);
        let file = env.open(&path("a"), OpenOptions::read_write()).expect("open");
        file.write_all_at(4, &[1u8; 2000]).expect("middle");
        file.write_all_at(4000, &[2u8; 10]).expect("tail");
        env.crash();
        let after = env.read_current(&path("a")).expect("a");
        assert_eq!(&after[..4], b"head");
        assert!(after[4..after.len().min(2004)].iter().all(|&byte| byte == 0 || byte == 1), "seed {seed}");
        if after.len() == 4010 {
            tails_kept += 1;
            assert!(after[2004..4000].iter().all(|&byte| byte == 0), "seed {seed}: the gap reads as zeros");
            assert_eq!(after[4000..], [2u8; 10]);
        }
    }
    assert!(tails_kept > 0, "no seed kept the tail write");
}

#[test]
fn disk_quota_gives_no_space() {
    let env = SimEnv::with_faults(1, FaultConfig { disk_quota_bytes: Some(1000), ..FaultConfig::default() });
    setup(&env);
    let file = env.open(&path("a"), OpenOptions::create_new()).expect("create");
    file.write_all_at(0, &[1u8; 900]).expect("within the quota");
    let full = file.write_at(800, &[2u8; 300]);
    assert!(matches!(&full, Err(Error::NoSpace { op: Op::Write, path }) if *path == self::path("a")), "{full:?}");
    assert_eq!(file.len().expect("len"), 900, "a refused write changes nothing");
    assert!(matches!(file.set_len(1001), Err(Error::NoSpace { op: Op::SetLen, .. })));
    // Overwriting in place and growing up to the quota still work.
    file.write_all_at(0, &[3u8; 900]).expect("overwrite");
    file.set_len(1000).expect("grow to the quota");
    let other = env.open(&path("b"), OpenOptions::create_new()).expect("create b");
    assert!(matches!(other.write_at(0, b"x"), Err(Error::NoSpace { .. })), "the quota is for the whole disk");
    file.set_len(10).expect("shrink");
    other.write_all_at(0, &[4u8; 990]).expect("space freed by the shrink");
    assert_eq!(env.fault_counts().get(&FaultKind::DiskFull), Some(&3));
}

#[test]
fn short_writes_are_completed_by_write_all_at() {
    let env = SimEnv::with_faults(3, FaultConfig { short_write_ppm: 1_000_000, ..FaultConfig::default() });
    setup(&env);
    let file = env.open(&path("a"), OpenOptions::create_new()).expect("create");
    let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let count = file.write_at(0, &data).expect("short write");
    assert!(count > 0 && count < data.len(), "a write of {} bytes wrote {count}", data.len());
    assert_eq!(file.read_all().expect("read"), data[..count]);
    file.write_all_at(5000, &data).expect("write_all_at finishes after short writes");
    let mut back = vec![0u8; data.len()];
    file.read_exact_at(5000, &mut back).expect("read");
    assert_eq!(back, data);
    assert!(env.fault_counts()[&FaultKind::ShortWrite] >= 2);
    assert_eq!(env.fault_total(), env.fault_counts().values().sum::<u64>(), "ADR-0126");
}

/// A file whose every write stores one byte.
#[derive(Debug)]
struct OneByteFile {
    bytes: std::sync::Mutex<Vec<u8>>,
    path: PathBuf,
}

impl File for OneByteFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> env::Result<usize> {
        let bytes = self.bytes.lock().expect("lock");
        let start = usize::try_from(offset).expect("fits").min(bytes.len());
        let count = buf.len().min(bytes.len() - start);
        buf[..count].copy_from_slice(&bytes[start..start + count]);
        Ok(count)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> env::Result<usize> {
        let mut bytes = self.bytes.lock().expect("lock");
        let at = usize::try_from(offset).expect("fits");
        if bytes.len() <= at {
            bytes.resize(at + 1, 0);
        }
        bytes[at] = data[0];
        Ok(1)
    }

    fn sync(&self) -> env::Result<()> {
        Ok(())
    }

    fn set_len(&self, len_bytes: u64) -> env::Result<()> {
        self.bytes.lock().expect("lock").resize(usize::try_from(len_bytes).expect("fits"), 0);
        Ok(())
    }

    fn len(&self) -> env::Result<u64> {
        Ok(self.bytes.lock().expect("lock").len() as u64)
    }
}

#[test]
fn write_all_at_gives_up_after_bounded_short_writes() {
    let file = OneByteFile { bytes: std::sync::Mutex::new(Vec::new()), path: PathBuf::from("one-byte") };
    let attempts = WRITE_ATTEMPTS_MAX as usize;
    file.write_all_at(0, &vec![9u8; attempts]).expect("exactly the attempt budget succeeds");
    assert_eq!(file.read_all().expect("read"), vec![9u8; attempts]);
    let result = file.write_all_at(0, &vec![8u8; attempts + 1]);
    assert!(matches!(&result, Err(Error::Io { op: Op::Write, .. })), "{result:?}");
    let result = file.read_exact_at(attempts as u64 - 1, &mut [0u8; 2]);
    assert!(matches!(result, Err(Error::UnexpectedEof { op: Op::Read, .. })), "{result:?}");
}

#[test]
fn list_dir_returns_sorted_full_paths_of_direct_entries() {
    let env = SimEnv::new(5);
    setup(&env);
    for name in ["zeta", "alpha", "mid", "Beta", "alpha2"] {
        env.open(&path(name), OpenOptions::create_new()).expect("create");
    }
    env.create_dir_all(&path("sub/deeper")).expect("mkdir");
    env.open(&path("sub/inner"), OpenOptions::create_new()).expect("create nested");
    let listed = env.list_dir(Path::new(DIR)).expect("list");
    let expected: Vec<PathBuf> = ["Beta", "alpha", "alpha2", "mid", "sub", "zeta"].map(path).to_vec();
    assert_eq!(listed, expected);
    assert_eq!(env.list_dir(&path("sub")).expect("list sub"), vec![path("sub/deeper"), path("sub/inner")]);
    assert_eq!(env.list_dir(Path::new("")).expect("list root"), vec![PathBuf::from(DIR)]);
    assert!(env.list_dir(&path("missing")).is_err_and(|error| error.is_not_found()));
}

/// Names only (ADR-0136): exactly the last components of `list_dir`'s paths, in its order, for the root, a
/// directory and a nested one; a missing directory is the same not-found error.
#[test]
fn visit_dir_names_passes_list_dirs_names_in_its_order() {
    let env = SimEnv::new(5);
    setup(&env);
    env.create_dir_all(&path("sub/deeper")).expect("mkdir");
    for name in ["zeta", "alpha", "mid", "Beta", "alpha2", "sub/inner"] {
        env.open(&path(name), OpenOptions::create_new()).expect("create");
    }
    for dir in [Path::new(""), Path::new(DIR), &path("sub"), &path("sub/deeper")] {
        let mut names = Vec::new();
        env.visit_dir_names(dir, &mut |name| names.push(name.to_os_string())).expect("visit");
        let listed: Vec<_> =
            env.list_dir(dir).expect("list").iter().map(|p| p.file_name().unwrap().to_os_string()).collect();
        assert_eq!(names, listed, "{dir:?}");
    }
    let mut names = Vec::new();
    env.visit_dir_names(Path::new(DIR), &mut |name| names.push(name.to_str().unwrap().to_owned())).expect("visit");
    assert_eq!(names, ["Beta", "alpha", "alpha2", "mid", "sub", "zeta"]);
    let missing = env.visit_dir_names(&path("missing"), &mut |_| panic!("nothing to visit"));
    assert!(missing.is_err_and(|error| error.is_not_found()));
}

#[test]
fn locks_conflict_and_are_released_on_drop_and_by_a_crash() {
    let env = SimEnv::new(9);
    setup(&env);
    let lock_path = path("LOCK");
    let first = env.lock(&lock_path).expect("first lock");
    let second = env.lock(&lock_path);
    assert!(matches!(&second, Err(Error::Locked { op: Op::Lock, path }) if *path == lock_path), "{second:?}");
    assert!(env.lock(&path("OTHER")).is_ok(), "another path is another lock");
    drop(first);
    let third = env.lock(&lock_path).expect("released on drop");
    env.crash();
    let after_crash = env.lock(&lock_path).expect("a crash releases every lock");
    drop(third);
    assert!(matches!(env.lock(&lock_path), Err(Error::Locked { .. })), "a dead lock's drop released a live lock");
    drop(after_crash);
    assert!(env.lock(&lock_path).is_ok());
}

#[test]
fn open_reports_missing_existing_and_directory_paths() {
    let env = SimEnv::new(2);
    setup(&env);
    assert!(matches!(env.open(&path("a"), OpenOptions::read()), Err(Error::NotFound { op: Op::Open, .. })));
    env.open(&path("a"), OpenOptions::create_new()).expect("create");
    assert!(matches!(env.open(&path("a"), OpenOptions::create_new()), Err(Error::AlreadyExists { .. })));
    assert!(matches!(env.open(Path::new(DIR), OpenOptions::read()), Err(Error::InvalidInput { .. })));
    let missing_parent = env.open(Path::new("nowhere/a"), OpenOptions::create_new());
    assert!(matches!(&missing_parent, Err(Error::NotFound { path, .. }) if path == Path::new("nowhere")));
    let read_only = env.open(&path("a"), OpenOptions::read()).expect("open");
    assert!(matches!(read_only.write_at(0, b"x"), Err(Error::InvalidInput { op: Op::Write, .. })));
}

#[test]
fn set_len_through_a_read_only_handle_is_refused() {
    // As on the real file system (ftruncate of a read-only descriptor fails), see the RealEnv test of the same
    // behaviour.
    let env = SimEnv::new(2);
    setup(&env);
    let writer = env.open(&path("a"), OpenOptions::create_new()).expect("create");
    writer.write_all_at(0, b"0123456789").expect("write");
    let read_only = env.open(&path("a"), OpenOptions::read()).expect("open");
    let result = read_only.set_len(2);
    assert!(matches!(result, Err(Error::InvalidInput { op: Op::SetLen, .. })), "{result:?}");
    assert_eq!(env.read_current(&path("a")).expect("a"), b"0123456789");
}

#[test]
fn explicit_faults_fail_one_write_and_flip_one_bit() {
    let env = SimEnv::new(4);
    setup(&env);
    synced_file(&env, "a", &[0u8; 100], true);
    let file = env.open(&path("a"), OpenOptions::read_write()).expect("open");
    env.inject(ExplicitFault::FailNextWrite { path: path("a") });
    assert!(matches!(file.write_at(0, b"x"), Err(Error::Io { op: Op::Write, .. })));
    assert_eq!(file.read_all().expect("read"), vec![0u8; 100], "the failed write wrote nothing");
    file.write_all_at(0, b"x").expect("the fault fires once");
    env.inject(ExplicitFault::FlipBit { path: path("a"), offset: 50 });
    let durable = env.read_durable(&path("a")).expect("durable");
    assert_eq!(durable[50], 1, "the durable byte's low bit flipped");
    assert_eq!(file.read_all().expect("read")[..2], [b'x', 0]);
    let counts = env.fault_counts();
    assert_eq!((counts[&FaultKind::ExplicitWriteError], counts[&FaultKind::ExplicitCorruption]), (1, 1));
}

/// The crash image and fault log of a world that writes one sector per (offset, byte) into a synced file, batch by
/// batch in the order given, syncing after each batch but the last, and then crashes.
fn image_after_writes(
    seed: u64,
    keying: env::FaultKeying,
    batches: &[Vec<(u64, u8)>],
) -> (Vec<u8>, Vec<(u64, FaultKind)>) {
    let sector = SECTOR_SIZE_BYTES as usize;
    let env = SimEnv::new(seed);
    setup(&env);
    synced_file(&env, "a", &vec![0xaa; 16 * sector], true);
    env.set_fault_config(FaultConfig { write_error_ppm: 200_000, latency_ppm: 300_000, keying, ..FaultConfig::none() });
    let file = env.open(&path("a"), OpenOptions::read_write()).expect("open");
    for (index, batch) in batches.iter().enumerate() {
        for (offset, byte) in batch {
            let _ = file.write_at(*offset, &vec![*byte; sector]);
        }
        if index + 1 < batches.len() {
            let _ = file.sync();
        }
    }
    env.crash();
    let mut log: Vec<(u64, FaultKind)> = env.fault_log().iter().map(|record| (record.offset, record.kind)).collect();
    log.sort();
    (env.read_current(&path("a")).expect("a is durable"), log)
}

#[test]
fn offset_sync_epoch_keying_makes_faults_and_crashes_independent_of_write_order() {
    let sector = SECTOR_SIZE_BYTES;
    let batch = |range: std::ops::Range<u64>| -> Vec<(u64, u8)> {
        range.map(|index| (index * sector, u8::try_from(index + 1).expect("small"))).collect()
    };
    let in_order = vec![batch(0..6), batch(6..12)];
    // The same writes between the same syncs, each batch in reverse order.
    let reordered: Vec<Vec<(u64, u8)>> = in_order.iter().map(|writes| writes.iter().rev().copied().collect()).collect();
    let mut differ_operation_index = 0;
    for seed in 0..SEEDS {
        let by_offset = image_after_writes(seed, env::FaultKeying::OffsetSyncEpoch, &in_order);
        let by_offset_reordered = image_after_writes(seed, env::FaultKeying::OffsetSyncEpoch, &reordered);
        assert_eq!(by_offset.1, by_offset_reordered.1, "seed {seed}: fault logs differ by write order");
        assert!(by_offset.0 == by_offset_reordered.0, "seed {seed}: crash images differ by write order");
        let by_index = image_after_writes(seed, env::FaultKeying::OperationIndex, &in_order);
        let by_index_reordered = image_after_writes(seed, env::FaultKeying::OperationIndex, &reordered);
        differ_operation_index += u32::from(by_index != by_index_reordered);
    }
    // The check above can fail: under operation-index keying the same writes in another order change the world.
    assert!(differ_operation_index > 0, "operation-index keying never depended on write order");
}

/// Write 100 bytes into the middle of a synced sector, crash, and return the sector.
fn torn_sector_after_crash(seed: u64, garbage_ppm: u32) -> (Vec<u8>, bool) {
    let sector = SECTOR_SIZE_BYTES as usize;
    let faults = FaultConfig { crash_write_kept_ppm: 0, crash_torn_garbage_ppm: garbage_ppm, ..FaultConfig::none() };
    let env = SimEnv::with_faults(seed, faults);
    setup(&env);
    synced_file(&env, "a", &vec![0xaa; 4 * sector], true);
    let file = env.open(&path("a"), OpenOptions::read_write()).expect("open");
    file.write_all_at(sector as u64 + 200, &[0x55; 100]).expect("write");
    env.crash();
    let after = env.read_current(&path("a")).expect("a is durable");
    assert_eq!(after.len(), 4 * sector, "seed {seed}: the file length changed");
    assert!(after[..sector].iter().chain(&after[2 * sector..]).all(|&byte| byte == 0xaa), "other sectors changed");
    let garbled = env.fault_counts().get(&FaultKind::CrashGarbledSector).copied().unwrap_or(0) > 0;
    (after[sector..2 * sector].to_vec(), garbled)
}

#[test]
fn torn_sectors_turn_to_garbage_beyond_the_written_range_only_when_configured() {
    let (mut garbled, mut clean) = (0, 0);
    for seed in 0..SEEDS {
        // Without the setting, "powersafe overwrite" holds: bytes outside [200, 300) of the sector never change.
        let (sector, logged) = torn_sector_after_crash(seed, 0);
        assert!(!logged, "seed {seed}: garbage logged with crash_torn_garbage_ppm = 0");
        assert!(sector[..200].iter().chain(&sector[300..]).all(|&byte| byte == 0xaa), "seed {seed}: PSOW broken");
        // With it at 100%, a torn (dropped) sector is garbage, and the log says so.
        let (sector, logged) = torn_sector_after_crash(seed, 1_000_000);
        let outside_intact = sector[..200].iter().chain(&sector[300..]).all(|&byte| byte == 0xaa);
        assert_eq!(logged, !outside_intact, "seed {seed}: the log and the image disagree about garbage");
        if logged {
            garbled += 1;
        } else {
            clean += 1;
        }
    }
    assert!(garbled > 0 && clean > 0, "garbled {garbled}, clean {clean}");
}

/// An empty write is a successful no-op, as `write(2)` with a count of zero: it once panicked (an underflow in
/// the sector arithmetic), including under latent-sector faults.
#[test]
fn an_empty_write_writes_nothing_and_never_panics() {
    let env = SimEnv::with_faults(3, FaultConfig { latent_sector_ppm: 1_000_000, ..FaultConfig::none() });
    setup(&env);
    let file = env.open(&path("empty"), OpenOptions::create_truncate()).expect("create");
    for offset in [0, 512, 4096] {
        assert_eq!(file.write_at(offset, &[]).expect("an empty write succeeds"), 0);
    }
    assert_eq!(file.len().expect("len"), 0);
    let env = SimEnv::new(3);
    setup(&env);
    let file = env.open(&path("empty"), OpenOptions::create_truncate()).expect("create");
    file.write_all_at(0, b"abc").expect("write");
    assert_eq!(file.write_at(3, &[]).expect("empty write at the end"), 0);
    assert_eq!(file.read_all().expect("read"), b"abc");
}

/// Healing a world cancels explicit faults still waiting for their IO: the next sync and write succeed.
#[test]
fn pending_explicit_faults_can_be_cancelled() {
    let env = SimEnv::new(5);
    setup(&env);
    let file = env.open(&path("f"), OpenOptions::create_truncate()).expect("create");
    env.inject(ExplicitFault::FailNextSync { path: path("f") });
    env.inject(ExplicitFault::FailNextWrite { path: path("f") });
    assert_eq!(env.cancel_pending_faults(), 2);
    assert_eq!(env.cancel_pending_faults(), 0);
    file.write_all_at(0, b"kept").expect("the cancelled write fault does not fire");
    file.sync().expect("the cancelled sync fault does not fire");
    env.inject(ExplicitFault::FailNextSync { path: path("f") });
    assert!(file.sync().is_err(), "an injected fault that was not cancelled still fires");
}

/// One world's reads of a file under read errors, read corruption and latent sectors: each result (bytes or error)
/// and the fault log. `into` reads with `read_exact_at_into` into one reused buffer, else with `read_exact_at` into
/// a zeroed buffer of the length asked.
fn reads_under_read_faults(seed: u64, into: bool) -> (Vec<Result<Vec<u8>, Error>>, Vec<env::FaultRecord>) {
    let config = FaultConfig {
        read_error_ppm: 100_000,
        read_corruption_ppm: 300_000,
        latent_sector_ppm: 300_000,
        ..FaultConfig::none()
    };
    let env = SimEnv::with_faults(seed, config);
    setup(&env);
    let sector = SECTOR_SIZE_BYTES as usize;
    let data: Vec<u8> = (0..6 * sector).map(|index| (index * 31 % 251) as u8).collect();
    let file = env.open(&path("a"), OpenOptions::create_new()).expect("create");
    for chunk in 0..6 {
        // One write per sector: each may leave a latent sector behind.
        file.write_all_at((chunk * sector) as u64, &data[chunk * sector..(chunk + 1) * sector]).expect("write");
    }
    // Stale bytes and spare capacity in the reused buffer: a read replaces them.
    let mut reused = vec![0xEEu8; 9 * sector];
    let spans = [(0, sector), (100, 3 * sector), (5 * sector as u64, sector), (5 * sector as u64, sector + 1), (7, 0)];
    let mut results = Vec::new();
    for round in 0..8 {
        for &(offset, len) in &spans {
            let offset = offset + round;
            let result = if into {
                file.read_exact_at_into(offset, len, &mut reused).map(|()| reused.clone())
            } else {
                let mut zeroed = vec![0u8; len];
                file.read_exact_at(offset, &mut zeroed).map(|()| zeroed)
            };
            results.push(result);
        }
    }
    (results, env.fault_log())
}

/// `read_exact_at_into` is `read_exact_at` without zeroing (ADR-0140): the same bytes (latent sectors garbled, the
/// same bit flipped), the same errors (injected read errors, a read past the end) and the same fault decisions.
#[test]
fn reading_into_a_vec_reads_and_faults_as_read_exact_at_does() {
    let (mut corrupted, mut failed, mut past_end) = (0, 0, 0);
    for seed in 0..SEEDS {
        let (zeroed, zeroed_log) = reads_under_read_faults(seed, false);
        let (into, into_log) = reads_under_read_faults(seed, true);
        assert_eq!(into, zeroed, "seed {seed}: the reads differ");
        assert_eq!(into_log, zeroed_log, "seed {seed}: the fault decisions differ");
        corrupted += zeroed_log.iter().filter(|record| record.kind == FaultKind::ReadCorruption).count();
        failed += zeroed.iter().filter(|result| matches!(result, Err(Error::Io { op: Op::Read, .. }))).count();
        past_end += zeroed.iter().filter(|result| matches!(result, Err(Error::UnexpectedEof { .. }))).count();
    }
    assert!(corrupted > 0 && failed > 0 && past_end > 0, "{corrupted} flips, {failed} errors, {past_end} EOFs");
}

/// The fault total is one counter every handle of a world shares, read without the world's lock (ADR-0138): a
/// handle cloned before any fault sees each one as it fires, crash effects included, and the total is always the
/// per-kind counts' sum; another world's total does not move.
#[test]
fn every_handle_reads_the_fault_total_as_each_fault_fires() {
    let env = SimEnv::with_faults(5, FaultConfig { write_error_ppm: 500_000, ..FaultConfig::default() });
    let (observer, other) = (env.clone(), SimEnv::new(5));
    setup(&env);
    let file = env.open(&path("a"), OpenOptions::create_new()).expect("create");
    let (mut failed, mut written) = (0u64, 0u64);
    for round in 0..64u64 {
        let before = observer.fault_total();
        match file.write_at(round * 8, b"bytes!!!") {
            Err(Error::Io { .. }) => failed += 1,
            Ok(_) => written += 1,
            Err(error) => panic!("unexpected {error:?}"),
        }
        assert_eq!(observer.fault_total(), before + u64::from(observer.fault_total() > before), "one at a time");
        assert_eq!(observer.fault_total(), env.fault_counts().values().sum::<u64>());
    }
    assert!(failed > 0 && written > 0, "both outcomes occur: {failed} failed, {written} written");
    assert_eq!(observer.fault_total(), failed, "every injected error counted once");
    env.crash();
    assert!(observer.fault_total() > failed, "the crash's dropped writes are counted too");
    assert_eq!(observer.fault_total(), env.fault_counts().values().sum::<u64>());
    assert_eq!(other.fault_total(), 0, "worlds count apart");
}

#[test]
fn lookup_current_names_files_and_directories_and_same_world_compares_handles() {
    let env = SimEnv::new(5);
    env.create_dir_all(Path::new("/d")).expect("mkdir");
    let file = env.open(Path::new("/d/f"), OpenOptions::create_new()).expect("create");
    file.write_all_at(0, b"12345").expect("write");
    assert_eq!(env.lookup_current(Path::new("/d")), Some(env::NodeInfo::Dir));
    assert_eq!(env.lookup_current(Path::new("/")), Some(env::NodeInfo::Dir), "the root");
    assert_eq!(env.lookup_current(Path::new("/d/f")), Some(env::NodeInfo::File { len_bytes: 5 }));
    assert_eq!(env.lookup_current(Path::new("/d/missing")), None);
    let work = env.work_done();
    let _ = env.lookup_current(Path::new("/d/f"));
    assert_eq!(env.work_done(), work, "introspection: no counted call");
    assert!(env.same_world(&env.clone()), "a clone is the same world");
    assert!(!env.same_world(&SimEnv::new(5)), "another world of the same seed is not");
    let weak = env.downgrade();
    assert!(weak.upgrade().is_some_and(|back| back.same_world(&env)), "upgrades while a handle lives");
    drop((env, file));
    assert!(weak.upgrade().is_none(), "and not after the last handle (and file) is gone");
}

#[test]
fn remove_dir_removes_an_empty_directory_durably_once_its_parent_is_synced() {
    let strict = FaultConfig { crash_write_kept_ppm: 0, crash_metadata_kept_ppm: 0, ..FaultConfig::none() };
    let env = SimEnv::with_faults(6, strict);
    env.create_dir_all(Path::new("/a/gone")).expect("mkdir");
    env.create_dir_all(Path::new("/a/kept")).expect("mkdir");
    env.open(Path::new("/a/kept/f"), OpenOptions::create_new()).expect("create");
    env.sync_dir(Path::new("/")).expect("sync /");
    env.sync_dir(Path::new("/a")).expect("sync /a");
    env.sync_dir(Path::new("/a/kept")).expect("sync /a/kept");

    let not_empty = env.remove_dir(Path::new("/a/kept")).expect_err("has a file");
    assert!(
        matches!(not_empty, Error::InvalidInput { ref message, .. } if message == "directory not empty"),
        "{not_empty}"
    );
    assert!(matches!(env.remove_dir(Path::new("/a/kept/f")), Err(Error::InvalidInput { .. })), "a file");
    assert!(matches!(env.remove_dir(Path::new("/a/none")), Err(Error::NotFound { .. })));
    assert!(matches!(env.remove_dir(Path::new("/")), Err(Error::InvalidInput { .. })), "the root");

    env.remove_dir(Path::new("/a/gone")).expect("rmdir");
    assert_eq!(env.lookup_current(Path::new("/a/gone")), None, "gone now");
    env.crash();
    assert_eq!(env.lookup_current(Path::new("/a/gone")), Some(env::NodeInfo::Dir), "back: its parent was not synced");
    env.remove_dir(Path::new("/a/gone")).expect("rmdir again");
    env.sync_dir(Path::new("/a")).expect("sync /a");
    env.crash();
    assert_eq!(env.lookup_current(Path::new("/a/gone")), None, "durably gone");
    env.create_dir_all(Path::new("/a/gone")).expect("the name is free again");
    assert_eq!(env.lookup_current(Path::new("/a/kept/f")), Some(env::NodeInfo::File { len_bytes: 0 }), "others kept");
}
