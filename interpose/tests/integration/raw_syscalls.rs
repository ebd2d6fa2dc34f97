//! Raw system calls (rustix's `linux_raw` backend, which `tempfile` uses) bypass the C library, so the world never
//! sees them (ADR-0164). A world path is not a host path: such a call fails with `ENOENT` and touches neither the
//! world's disk nor the host's.

use std::path::Path;

use env::SimEnv;
use rustix::fs::{AtFlags, CWD, Mode, OFlags};
#[cfg(not(rustix_use_libc))]
use rustix::io::Errno;

#[test]
#[cfg(not(rustix_use_libc))]
#[expect(unsafe_code, reason = "a simulated descriptor borrowed for a raw call, as rustix's callers hold them")]
fn a_raw_system_call_on_a_world_path_fails_with_enoent_and_changes_nothing() {
    let world = SimEnv::new(91);
    let entered = interpose::enter(&world);
    std::fs::write(entered.dir().join("file"), b"the world's bytes").expect("a libc write reaches the world");
    let digest = world.disk_digest();
    let calls = entered.stats().total_calls();
    let file = entered.dir().join("file");

    assert_eq!(rustix::fs::open(&file, OFlags::RDONLY, Mode::empty()).err(), Some(Errno::NOENT), "raw open");
    assert_eq!(rustix::fs::statat(CWD, &file, AtFlags::empty()).err(), Some(Errno::NOENT), "raw stat");
    let create = rustix::fs::open(entered.dir().join("new"), OFlags::CREATE | OFlags::WRONLY, Mode::RUSR);
    assert_eq!(create.err(), Some(Errno::NOENT), "raw create");
    assert_eq!(rustix::fs::mkdir(entered.dir().join("dir"), Mode::RWXU).err(), Some(Errno::NOENT), "raw mkdir");
    let rename = rustix::fs::rename(&file, entered.dir().join("renamed"));
    assert_eq!(rename.err(), Some(Errno::NOENT), "raw rename (tempfile's persist)");
    assert_eq!(rustix::fs::unlink(&file).err(), Some(Errno::NOENT), "raw unlink");

    assert_eq!(world.disk_digest(), digest, "the world's disk is unchanged");
    assert_eq!(entered.stats().total_calls(), calls, "and the world saw none of them");
    assert_eq!(std::fs::read(&file).expect("still there for libc"), b"the world's bytes");
    // SAFETY: a number the kernel never handed out (above RLIMIT_NOFILE), borrowed only for this raw call.
    let simulated = unsafe { std::os::fd::BorrowedFd::borrow_raw(interpose::FD_BASE) };
    assert_eq!(rustix::fs::fstat(simulated).err(), Some(Errno::BADF), "raw fstat of a simulated descriptor");

    let root = rustix::fs::access(interpose::WORLD_ROOT, rustix::fs::Access::EXISTS);
    assert_eq!(root.err(), Some(Errno::NOENT), "nothing was made on the host (asked raw: std would be refused)");
    drop(entered);
    assert!(!Path::new(interpose::WORLD_ROOT).exists(), "and std agrees, outside the run");
}

/// Built with `RUSTFLAGS="--cfg rustix_use_libc"`, rustix calls the C library, and so the world answers: the same
/// calls as above now find, rename and remove the world's file (ADR-0164).
#[test]
#[cfg(rustix_use_libc)]
fn with_rustix_use_libc_rustix_calls_are_the_worlds() {
    let world = SimEnv::new(92);
    let entered = interpose::enter(&world);
    std::fs::write(entered.dir().join("file"), b"the world's bytes").expect("write");
    let file = entered.dir().join("file");
    let calls = entered.stats().total_calls();
    let opened = rustix::fs::open(&file, OFlags::RDONLY, Mode::empty()).expect("rustix open, answered by the world");
    let stat = rustix::fs::fstat(&opened).expect("rustix fstat");
    assert_eq!(stat.st_size, 17);
    drop(opened);
    assert_eq!(rustix::fs::statat(CWD, &file, AtFlags::empty()).expect("rustix stat").st_size, 17);
    rustix::fs::rename(&file, entered.dir().join("renamed")).expect("rustix rename (tempfile's persist)");
    assert_eq!(world.read_current(Path::new("/renamed")).as_deref(), Some(&b"the world's bytes"[..]));
    assert_eq!(world.read_current(Path::new("/file")), None);
    rustix::fs::unlink(entered.dir().join("renamed")).expect("rustix unlink");
    assert_eq!(world.files(), [], "removed in the world");
    assert!(entered.stats().total_calls() > calls, "the world answered them");
}
