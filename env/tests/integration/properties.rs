//! Property tests of `SimEnv` on random workloads (ADR-0004): what a crash may and may not do, determinism, and
//! the keying of fault decisions.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use env::{Env, Error, ExplicitFault, FaultConfig, FaultKind, File, Op, OpenOptions, SimEnv};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestRunner;

use crate::model::{
    Action, CrashCheck, DIR, FILE_NAMES, Harness, Mix, Model, actions, data_action_on, disk_files, file_path,
};

const CASES: u32 = 256;
const CRASHY: Mix = Mix { crash_weight: 1, rename_remove_weight: 1 };
const NO_CRASH: Mix = Mix { crash_weight: 0, rename_remove_weight: 1 };

/// Crash behaviour anywhere between "every pending operation survives" and "none does".
fn crash_config() -> impl Strategy<Value = FaultConfig> {
    (0..=1_000_000u32, 0..=1_000_000u32).prop_map(|(write_kept, metadata_kept)| FaultConfig {
        crash_write_kept_ppm: write_kept,
        crash_metadata_kept_ppm: metadata_kept,
        ..FaultConfig::default()
    })
}

/// Crash settings, and half the time the faults that fail calls without corrupting data.
fn non_corrupting_config() -> impl Strategy<Value = FaultConfig> {
    (crash_config(), any::<bool>()).prop_map(|(config, faulty)| {
        if !faulty {
            return config;
        }
        FaultConfig {
            fsync_error_ppm: 30_000,
            write_error_ppm: 50_000,
            short_write_ppm: 100_000,
            read_error_ppm: 50_000,
            latency_ppm: 100_000,
            ..config
        }
    })
}

/// Every fault on, corrupting ones included.
fn every_fault(ppm: u32) -> FaultConfig {
    FaultConfig {
        fsync_error_ppm: ppm,
        write_error_ppm: ppm,
        short_write_ppm: ppm,
        read_error_ppm: ppm,
        read_corruption_ppm: ppm,
        latent_sector_ppm: ppm,
        misdirected_write_ppm: ppm,
        latency_ppm: ppm,
        clock_jump_ppm: ppm,
        ..FaultConfig::default()
    }
}

/// Run actions whose only permitted errors are the injected, non-crash faults (the harness checks the rest).
fn run(harness: &mut Harness, actions: &[Action]) {
    for action in actions {
        if let Err(error) = harness.apply(action) {
            assert!(!error.is_crash(), "{action:?}: unexpected crash error {error}");
        }
    }
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig::with_cases(cases)
}

proptest! {
    #![proptest_config(config(CASES))]

    /// (a) After a crash, a file whose name and data were synced, and which nothing touched since, reads back
    /// exactly as synced.
    #[test]
    fn crash_never_loses_synced_data(
        seed in any::<u64>(),
        config in non_corrupting_config(),
        prefix in actions(4..=48, CRASHY),
        suffix in actions(0..=12, NO_CRASH),
    ) {
        let mut harness = Harness::checked(SimEnv::with_faults(seed, config), CrashCheck::SyncedSurvived);
        run(&mut harness, &prefix);
        // Settle: sync every file (a failed fsync reverts it to its durable bytes), then the directory.
        let settle: Vec<Action> = (0..FILE_NAMES.len()).map(|file| Action::Sync { file }).collect();
        run(&mut harness, &settle);
        run(&mut harness, &[Action::SyncDir]);
        let settled = disk_files(&harness.env);
        run(&mut harness, &suffix);
        harness.env.crash();
        let after = disk_files(&harness.env);
        for (path, bytes) in &settled {
            let file = FILE_NAMES.iter().position(|name| Path::new(name) == path).expect("a generated name");
            if suffix.iter().any(|action| action.files().contains(&file)) {
                continue;
            }
            prop_assert_eq!(after.get(path), Some(bytes), "{} lost synced bytes", path.display());
        }
        // And the model-based statement over every durable, untouched file (the harness checked earlier crashes).
        let model = harness.model.as_ref().expect("checked harness");
        prop_assert!(model.check_synced_survived(&after).is_ok(), "{:?}", model.check_synced_survived(&after));
    }

    /// (b) A crash image holds only durable bytes, bytes of pending writes (each landing whole or not at all in
    /// each 512-byte sector) and zeros where the file was shorter; names come only from pending operations.
    #[test]
    fn crash_never_invents_bytes(
        seed in any::<u64>(),
        config in non_corrupting_config(),
        workload in actions(4..=64, CRASHY),
    ) {
        let mut harness = Harness::checked(SimEnv::with_faults(seed, config), CrashCheck::NothingInvented);
        run(&mut harness, &workload);
        let model = harness.model.clone().expect("checked harness");
        harness.env.crash();
        let after = disk_files(&harness.env);
        let verdict = model.check_nothing_invented(&after);
        prop_assert!(verdict.is_ok(), "{:?}\ntranscript:\n{}", verdict, harness.transcript.join("\n"));
    }

    /// (d) An injected fsync failure returns an error and drops the file's unsynced data: it reads back as its
    /// last durable bytes, even after a crash. Other files keep their pending data; the fault fires once.
    #[test]
    fn failed_fsync_loses_unsynced_data(
        seed in any::<u64>(),
        initial in proptest::collection::vec(any::<u8>(), 0..3_000),
        pending in proptest::collection::vec(data_action_on(0), 1..8),
        other in proptest::collection::vec(data_action_on(1), 0..4),
    ) {
        let env = SimEnv::new(seed);
        let (a, b) = (file_path(0), file_path(1));
        let mut harness = Harness::checked(env.clone(), CrashCheck::Both);
        run(&mut harness, &[Action::Create { file: 0, truncate: false }, Action::Create { file: 1, truncate: false }]);
        let handle = env.open(&a, OpenOptions::read_write()).expect("open a");
        handle.write_all_at(0, &initial).expect("write a");
        handle.sync().expect("sync a");
        env.sync_dir(Path::new(DIR)).expect("sync the directory");
        harness.model = Some(Model::rebuild(&env));
        run(&mut harness, &pending);
        run(&mut harness, &other);
        let b_before = env.read_current(&b).expect("b exists");
        let b_pending = env.files()[1].pending_operations;
        // The pending actions may have synced a: its durable bytes are what a failed fsync falls back to.
        let durable = env.read_durable(&a).expect("a is durable");
        prop_assert_eq!(&durable, &harness.model.as_ref().expect("model").inode_at(&a).expect("a").durable);

        env.inject(ExplicitFault::FailNextSync { path: a.clone() });
        let result = handle.sync();
        prop_assert!(matches!(&result, Err(Error::Io { op: Op::Sync, path, .. }) if *path == a), "{:?}", result);
        prop_assert_eq!(&handle.read_all().expect("read a"), &durable);
        prop_assert_eq!(env.read_current(&a), Some(durable.clone()));
        prop_assert_eq!(env.read_durable(&a), Some(durable.clone()));
        prop_assert_eq!(env.files()[0].pending_operations, 0);
        prop_assert_eq!(env.read_current(&b), Some(b_before));
        prop_assert_eq!(env.files()[1].pending_operations, b_pending);
        prop_assert_eq!(env.fault_counts().get(&FaultKind::ExplicitSyncError).copied(), Some(1));

        // The dropped writes do not come back in a crash.
        env.crash();
        prop_assert_eq!(env.read_current(&a), Some(durable.clone()));
        // The fault fired once: the next sync works.
        let handle = env.open(&a, OpenOptions::read_write()).expect("reopen a");
        handle.write_all_at(0, b"after").expect("write a");
        prop_assert!(handle.sync().is_ok());
        env.crash();
        let mut expected = durable;
        if expected.len() < 5 {
            expected.resize(5, 0);
        }
        expected[..5].copy_from_slice(b"after");
        prop_assert_eq!(env.read_current(&a), Some(expected));
    }

    /// (e) Handles opened before a crash are dead: every call returns StaleHandle naming the operation and path,
    /// and changes nothing. Handles opened after it work.
    #[test]
    fn dead_handles_after_crash_error_out(seed in any::<u64>(), workload in actions(1..=32, CRASHY)) {
        let mut harness = Harness::checked(SimEnv::new(seed), CrashCheck::Both);
        run(&mut harness, &workload);
        run(&mut harness, &[Action::Create { file: 0, truncate: false }]);
        let env = harness.env.clone();
        let mut handles = Vec::new();
        for report in env.files() {
            handles.push(env.open(&report.path, OpenOptions::read_write()).expect("open rw"));
            handles.push(env.open(&report.path, OpenOptions::read()).expect("open ro"));
        }
        env.crash();
        let digest = env.disk_digest();
        for handle in &handles {
            let path = handle.path().to_path_buf();
            let stale = |op: Op, result: Result<(), Error>| match result {
                Err(Error::StaleHandle { op: got, path: at }) => got == op && at == path,
                _ => false,
            };
            prop_assert!(stale(Op::Read, handle.read_at(0, &mut [0u8; 8]).map(|_| ())));
            prop_assert!(stale(Op::Write, handle.write_at(0, b"ghost").map(|_| ())));
            prop_assert!(stale(Op::Write, handle.write_all_at(100, b"ghost")));
            prop_assert!(stale(Op::Sync, handle.sync()));
            prop_assert!(stale(Op::SetLen, handle.set_len(0)));
            prop_assert!(stale(Op::Len, handle.len().map(|_| ())));
            prop_assert!(stale(Op::Len, handle.read_all().map(|_| ())));
        }
        prop_assert_eq!(env.disk_digest(), digest, "a dead handle changed the disk");
        drop(handles);
        prop_assert_eq!(env.disk_digest(), digest, "dropping dead handles changed the disk");
        for report in env.files() {
            let handle = env.open(&report.path, OpenOptions::read_write()).expect("open after the crash");
            prop_assert_eq!(Some(handle.read_all().expect("read")), env.read_current(&report.path));
            let offset = handle.append(b"fresh").expect("append");
            handle.sync().expect("sync");
            let mut buf = [0u8; 5];
            handle.read_exact_at(offset, &mut buf).expect("read back");
            prop_assert_eq!(&buf, b"fresh");
        }
    }
}

proptest! {
    // Each case runs the workload once per IO call in it: fewer, shorter workloads.
    #![proptest_config(config(CASES))]

    /// (f) A crash cut into any IO call leaves a legal image: that call returns Crashed, every later call fails
    /// until restart, and the disk then satisfies (a) and (b) against the state before the cut call.
    #[test]
    fn crash_at_io_every_k_is_a_legal_crash_image(
        seed in any::<u64>(),
        config in crash_config(),
        workload in actions(1..=32, NO_CRASH),
    ) {
        let mut dry = Harness::checked(SimEnv::with_faults(seed, config.clone()), CrashCheck::Both);
        let start = dry.env.io_count();
        run(&mut dry, &workload);
        let total = dry.env.io_count() - start;
        for k in 1..=total {
            let env = SimEnv::with_faults(seed, config.clone());
            let mut harness = Harness::checked(env.clone(), CrashCheck::Both);
            let stale = env.open(Path::new("lockfile-holder"), OpenOptions::create_new()).expect("open");
            let start = env.io_count();
            env.crash_at_io(k);
            let mut cut = None;
            for (index, action) in workload.iter().enumerate() {
                match harness.apply(action) {
                    Ok(()) => {}
                    Err(error) if error.is_crash() => {
                        cut = Some((index, error));
                        break;
                    }
                    Err(error) => panic!("{action:?}: unexpected error {error}"),
                }
            }
            let Some((index, error)) = cut else { panic!("no crash at IO call {k} of {total}") };
            prop_assert!(matches!(error, Error::Crashed { .. }), "the cut call returned {:?}", error);
            prop_assert_eq!(env.io_count() - start, k, "the crash landed on another call");
            prop_assert!(env.is_halted());
            // Power is off: every call fails, and handles from before are dead.
            prop_assert!(is_crashed(env.list_dir(Path::new(DIR))), "list_dir while halted");
            prop_assert!(is_crashed(env.open(&file_path(0), OpenOptions::create_truncate())), "open while halted");
            prop_assert!(is_crashed(env.exists(&file_path(0))), "exists while halted");
            prop_assert!(is_crashed(env.sync_dir(Path::new(DIR))), "sync_dir while halted");
            prop_assert!(matches!(stale.sync(), Err(Error::StaleHandle { .. })), "a handle from before is dead");
            prop_assert!(env.is_halted());
            prop_assert_eq!(env.io_count() - start, k, "a call while halted counted as IO");
            env.restart();
            prop_assert!(!env.is_halted());
            let verdict = harness.check_crash();
            prop_assert!(verdict.is_ok(), "crash at IO {}: {:?}\n{}", k, verdict, harness.transcript.join("\n"));
            // The world works again: the rest of the workload runs against the rebuilt model.
            run(&mut harness, &workload[index + 1..]);
        }
    }
}

fn is_crashed<T>(result: Result<T, Error>) -> bool {
    matches!(result, Err(Error::Crashed { .. }))
}

/// Runs `test` on `cases` generated inputs; for properties that also assert something over the whole batch.
fn run_batch<S: Strategy>(cases: u32, strategy: &S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    // Batches are not `proptest!` tests: no source file to persist failures next to.
    let mut runner = TestRunner::new(ProptestConfig { failure_persistence: None, ..config(cases) });
    if let Err(failure) = runner.run(strategy, test) {
        panic!("{failure}");
    }
}

/// Everything observable of a run: per-action results, the disk, the fault log and counts, the clock.
#[derive(Debug, PartialEq, Eq)]
struct Observed {
    transcript: Vec<String>,
    digest: u64,
    files: Vec<env::FileReport>,
    bytes: BTreeMap<PathBuf, Vec<u8>>,
    fault_log: Vec<env::FaultRecord>,
    fault_counts: BTreeMap<FaultKind, u64>,
    now: std::time::Duration,
}

fn observe(seed: u64, config: &FaultConfig, workload: &[Action]) -> Observed {
    let mut harness = Harness::unchecked(SimEnv::with_faults(seed, config.clone()));
    for action in workload {
        // Faults make calls fail; the outcome is in the transcript.
        let _outcome = harness.apply(action);
    }
    let env = &harness.env;
    Observed {
        digest: env.disk_digest(),
        files: env.files(),
        bytes: disk_files(env),
        fault_log: env.fault_log(),
        fault_counts: env.fault_counts(),
        now: env.now(),
        transcript: harness.transcript,
    }
}

/// (c) The same seed and the same operations give the same run: results, disk digest, fault log, clock. With
/// faults on, another seed gives another run in most cases.
#[test]
fn same_seed_same_operations_same_digest() {
    let differed = Cell::new(0u32);
    let strategy = (any::<u64>(), actions(10..=60, CRASHY), crash_config());
    run_batch(CASES, &strategy, |(seed, workload, crash)| {
        let config = FaultConfig { disk_quota_bytes: Some(12_000), ..every_fault(50_000) };
        let config = FaultConfig {
            crash_write_kept_ppm: crash.crash_write_kept_ppm,
            crash_metadata_kept_ppm: crash.crash_metadata_kept_ppm,
            ..config
        };
        let first = observe(seed, &config, &workload);
        let second = observe(seed, &config, &workload);
        prop_assert_eq!(&first, &second);
        let other = observe(seed.wrapping_add(1), &config, &workload);
        if other.digest != first.digest || other.fault_log != first.fault_log {
            differed.set(differed.get() + 1);
        }
        Ok(())
    });
    assert!(differed.get() >= CASES * 3 / 4, "another seed changed only {} of {CASES} runs", differed.get());
}

/// (g) Fault decisions are keyed by (seed, file, that file's operation index): removing one operation on file A
/// leaves every other file's faults, results and bytes unchanged.
#[test]
fn removing_an_operation_keeps_fault_decisions_on_other_files() {
    let with_faults_on_b = Cell::new(0u32);
    let workload = actions(10..=40, Mix { crash_weight: 1, rename_remove_weight: 0 });
    let strategy = (any::<u64>(), workload, any::<Index>(), data_action_on(0));
    run_batch(CASES, &strategy, |(seed, shorter, at, extra)| {
        let config = FaultConfig {
            write_error_ppm: 100_000,
            short_write_ppm: 200_000,
            read_error_ppm: 150_000,
            fsync_error_ppm: 100_000,
            ..every_fault(100_000)
        };
        // Every file is created and durably named first, and nothing removes or renames one: no write creates a
        // file, so removing an operation on a removes no metadata operation.
        let mut shorter: Vec<Action> = (0..FILE_NAMES.len())
            .map(|file| Action::Create { file, truncate: false })
            .chain([Action::SyncDir])
            .chain(shorter)
            .collect();
        let mut longer = shorter.clone();
        longer.insert(FILE_NAMES.len() + 1 + at.index(shorter.len() - FILE_NAMES.len()), extra);
        shorter.shrink_to_fit();
        let full = observe(seed, &config, &longer);
        let cut = observe(seed, &config, &shorter);
        for file in 1..FILE_NAMES.len() {
            let path = file_path(file);
            let faults = |observed: &Observed| -> Vec<env::FaultRecord> {
                observed.fault_log.iter().filter(|record| record.file == path).cloned().collect()
            };
            let results = |observed: &Observed, workload: &[Action]| -> Vec<String> {
                workload
                    .iter()
                    .zip(&observed.transcript)
                    .filter(|(action, _)| action.files() == [file])
                    .map(|(_, line)| line.clone())
                    .collect()
            };
            let full_faults = faults(&full);
            if file == 1 && !full_faults.is_empty() {
                with_faults_on_b.set(with_faults_on_b.get() + 1);
            }
            prop_assert_eq!(&full_faults, &faults(&cut), "faults on {}", path.display());
            prop_assert_eq!(results(&full, &longer), results(&cut, &shorter), "results on {}", path.display());
            prop_assert_eq!(full.bytes.get(&path), cut.bytes.get(&path), "{} differs", path.display());
        }
        Ok(())
    });
    assert!(with_faults_on_b.get() >= CASES / 2, "only {} runs had faults on b", with_faults_on_b.get());
}
