//! Directory-operation faults (ADR-0068): EIO from `sync_dir`, EIO or ENOSPC from a create, rename or
//! remove. A failed namespace operation changes nothing; a failed directory sync leaves the operations pending.

use std::path::{Path, PathBuf};

use env::{Env, Error, FaultConfig, FaultKind, File, Op, OpenOptions, SimEnv};

use crate::model::{DIR, setup};

fn path(name: &str) -> PathBuf {
    Path::new(DIR).join(name)
}

/// A world where every create, rename and remove fails with `kind` once `armed` (the setup runs unfaulted).
fn armed_env(kind: FaultKind) -> SimEnv {
    let env = SimEnv::new(3);
    setup(&env);
    let file = env.open(&path("old"), OpenOptions::create_new()).expect("create");
    file.write_all_at(0, b"data").expect("write");
    file.sync().expect("sync");
    env.sync_dir(Path::new(DIR)).expect("sync_dir");
    let mut config = FaultConfig::none();
    match kind {
        FaultKind::MetadataError => config.metadata_error_ppm = 1_000_000,
        FaultKind::MetadataNoSpace => config.metadata_no_space_ppm = 1_000_000,
        other => panic!("{} is not a namespace fault", other.name()),
    }
    env.set_fault_config(config);
    env
}

fn is_kind(error: &Error, kind: FaultKind, op: Op) -> bool {
    match (error, kind) {
        (Error::Io { op: got, .. }, FaultKind::MetadataError)
        | (Error::NoSpace { op: got, .. }, FaultKind::MetadataNoSpace) => *got == op,
        _ => false,
    }
}

#[test]
fn failed_creates_renames_and_removes_change_nothing() {
    for kind in [FaultKind::MetadataError, FaultKind::MetadataNoSpace] {
        let env = armed_env(kind);
        let created = env.open(&path("new"), OpenOptions::create_new()).expect_err("the create fails");
        assert!(is_kind(&created, kind, Op::Open), "{created}");
        let renamed = env.rename(&path("old"), &path("renamed")).expect_err("the rename fails");
        assert!(is_kind(&renamed, kind, Op::Rename), "{renamed}");
        let removed = env.remove_file(&path("old")).expect_err("the remove fails");
        assert!(is_kind(&removed, kind, Op::Remove), "{removed}");
        assert_eq!(env.list_dir(Path::new(DIR)).expect("list"), vec![path("old")], "{}", kind.name());
        assert_eq!(env.read_current(&path("old")).as_deref(), Some(&b"data"[..]));
        assert_eq!(env.fault_counts().get(&kind).copied(), Some(3));
        assert_eq!(env.fault_total(), 3, "the total is the sum of the per-kind counts (ADR-0126)");
        // Opening an existing file is no namespace operation: it never fails this way.
        env.open(&path("old"), OpenOptions::read()).expect("open an existing file");
    }
}

#[test]
fn a_failed_directory_sync_leaves_the_entries_pending_and_a_crash_may_drop_them() {
    let (mut dropped, mut kept) = (0, 0);
    for seed in 0..64 {
        let env = SimEnv::new(seed);
        setup(&env);
        env.set_fault_config(FaultConfig { dir_sync_error_ppm: 1_000_000, ..FaultConfig::none() });
        let file = env.open(&path("a"), OpenOptions::create_new()).expect("create");
        file.write_all_at(0, b"x").expect("write");
        file.sync().expect("sync");
        let error = env.sync_dir(Path::new(DIR)).expect_err("the directory sync fails");
        assert!(matches!(error, Error::Io { op: Op::SyncDir, .. }), "{error}");
        assert_eq!(env.files()[0].durable_len, None, "a failed directory sync made the name durable");
        env.crash();
        if env.read_current(&path("a")).is_some() { kept += 1 } else { dropped += 1 }
    }
    assert!(dropped > 0 && kept > 0, "{dropped} dropped, {kept} kept");
    // The same sync with the fault off makes the name durable.
    let env = SimEnv::new(1);
    setup(&env);
    env.open(&path("a"), OpenOptions::create_new()).expect("create").sync().expect("sync");
    env.sync_dir(Path::new(DIR)).expect("sync_dir");
    env.crash();
    assert!(env.read_current(&path("a")).is_some());
}
