//! `std::fs` under a world: writes, syncs, renames, listings and removals land on the `SimEnv`'s disk, and a crash
//! of the world drops what was not synced.

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use env::{FaultConfig, SimEnv};

/// A world whose crashes keep no unsynced write or name: what survives is exactly what was synced.
fn strict_world(seed: u64) -> SimEnv {
    SimEnv::with_faults(
        seed,
        FaultConfig { crash_write_kept_ppm: 0, crash_metadata_kept_ppm: 0, ..FaultConfig::none() },
    )
}

#[test]
fn std_fs_writes_syncs_renames_lists_and_removes_on_the_worlds_disk() {
    let world = strict_world(21);
    let entered = interpose::enter(&world);
    let dir = entered.dir().join("db");
    std::fs::create_dir_all(&dir).expect("mkdir in the world");
    assert!(dir.is_dir(), "std sees the world's directory");
    assert_eq!(world.lookup_current(Path::new("/db")), Some(env::NodeInfo::Dir), "and so does the world");
    // The new directory's name is durable once its parent (the world's root) is synced.
    std::fs::File::open(entered.dir()).and_then(|root| root.sync_all()).expect("root fsync");

    let mut log = std::fs::File::create(dir.join("log.tmp")).expect("create");
    log.write_all(b"put k v\n").expect("write");
    log.sync_all().expect("fsync");
    drop(log);
    std::fs::rename(dir.join("log.tmp"), dir.join("log")).expect("rename");
    std::fs::File::open(&dir).and_then(|d| d.sync_all()).expect("directory fsync");
    assert_eq!(std::fs::read(dir.join("log")).expect("read back"), b"put k v\n");
    assert_eq!(world.read_durable(Path::new("/db/log")).as_deref(), Some(&b"put k v\n"[..]), "durable in the world");

    std::fs::write(dir.join("scratch"), b"never synced").expect("unsynced write");
    assert_eq!(world.read_current(Path::new("/db/scratch")).as_deref(), Some(&b"never synced"[..]));
    assert_eq!(world.read_durable(Path::new("/db/scratch")), None, "neither the bytes nor the name are durable");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("read_dir")
        .map(|entry| entry.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    names.sort();
    assert_eq!(names, ["log", "scratch"]);
    assert_eq!(std::fs::metadata(dir.join("scratch")).expect("metadata").len(), 12);
    assert!(std::fs::metadata(&dir).expect("metadata").is_dir());

    std::fs::remove_file(dir.join("scratch")).expect("remove");
    assert_eq!(world.read_current(Path::new("/db/scratch")), None, "removed in the world");
    assert!(!dir.join("scratch").exists(), "and for std");
    std::fs::write(dir.join("lost"), b"unsynced at the crash").expect("write");

    world.crash();
    assert_eq!(std::fs::read(dir.join("log")).expect("synced survives"), b"put k v\n");
    let lost = std::fs::read(dir.join("lost")).expect_err("the unsynced file is gone");
    assert_eq!(lost.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(world.read_current(Path::new("/db/lost")), None);
    std::fs::create_dir_all(dir.join("old/empty")).expect("mkdir");
    std::fs::write(dir.join("old/file"), b"x").expect("write");
    let error = std::fs::remove_dir(dir.join("old")).expect_err("not empty");
    assert_eq!(error.raw_os_error(), Some(libc::ENOTEMPTY));
    std::fs::remove_dir_all(dir.join("old")).expect("remove_dir_all: unlinkat, rmdir");
    assert_eq!(world.lookup_current(Path::new("/db/old")), None, "gone from the world");
    assert!(!dir.join("old").exists());
    let calls = entered.stats().calls;
    for kind in ["open64", "write", "fsync", "rename", "opendir", "readdir64", "unlink", "unlinkat", "statx", "mkdir"] {
        assert!(calls.get(kind).copied().unwrap_or(0) > 0, "{kind} counted: {calls:?}");
    }
}

#[test]
fn positional_io_seeks_append_truncate_and_dup_follow_posix() {
    let world = SimEnv::new(22);
    let entered = interpose::enter(&world);
    let path = entered.dir().join("data");
    let file =
        std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).expect("open");
    file.write_all_at(b"0123456789", 0).expect("pwrite");
    file.write_all_at(b"AB", 4).expect("pwrite inside");
    let mut middle = [0u8; 4];
    file.read_exact_at(&mut middle, 3).expect("pread");
    assert_eq!(&middle, b"3AB6");
    let mut cursor = file.try_clone().expect("dup shares the offset");
    assert_eq!(cursor.seek(SeekFrom::End(-2)).expect("seek"), 8);
    let mut tail = String::new();
    cursor.read_to_string(&mut tail).expect("read");
    assert_eq!(tail, "89");
    file.set_len(3).expect("ftruncate");
    assert_eq!(std::fs::read(&path).expect("read"), b"012");
    drop((file, cursor));

    let mut log = std::fs::OpenOptions::new().append(true).open(&path).expect("append");
    log.write_all(b"+x").expect("append write");
    assert_eq!(world.read_current(Path::new("/data")).as_deref(), Some(&b"012+x"[..]));
    let error = std::fs::File::open(entered.dir().join("missing")).expect_err("no such file");
    assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
    let error = std::fs::OpenOptions::new().write(true).create_new(true).open(&path).expect_err("exists");
    assert_eq!(error.kind(), std::io::ErrorKind::AlreadyExists);
    assert!(std::fs::canonicalize(entered.dir().join("./x/../data")).is_ok_and(|p| p == path), "realpath");
}

#[test]
#[expect(unsafe_code, reason = "variadic C calls (open with a mode, fcntl without an argument) as C code makes them")]
fn variadic_calls_locks_and_descriptor_flags_reach_the_world() {
    let world = SimEnv::new(23);
    let entered = interpose::enter(&world);
    let path =
        std::ffi::CString::new(entered.dir().join("locked").into_os_string().into_encoded_bytes()).expect("path");
    // SAFETY: a NUL-terminated path; `open` is variadic and takes the mode only with O_CREAT.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_CREAT | libc::O_RDWR | libc::O_APPEND, 0o600) };
    assert!(fd >= interpose::FD_BASE, "a simulated descriptor: {fd}");
    // SAFETY: `fcntl` is variadic; F_GETFL takes no argument.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    assert_eq!(flags, libc::O_RDWR | libc::O_APPEND);
    // SAFETY: F_DUPFD_CLOEXEC with a lowest number.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    assert_eq!(copy, fd + 1, "the lowest free simulated number");
    // SAFETY: closing descriptors opened above.
    assert_eq!(unsafe { (libc::close(copy), libc::close(fd)) }, (0, 0));
    assert_eq!(world.read_current(Path::new("/locked")).as_deref(), Some(&b""[..]), "created in the world");

    let first = std::fs::File::open(entered.dir().join("locked")).expect("open");
    let second = std::fs::File::open(entered.dir().join("locked")).expect("open again");
    first.lock().expect("flock exclusive");
    assert!(matches!(second.try_lock(), Err(std::fs::TryLockError::WouldBlock)), "another description conflicts");
    first.unlock().expect("unlock");
    second.try_lock().expect("free again");
    drop(second);
    first.try_lock().expect("released when its description closed");
    let calls = entered.stats().calls;
    assert_eq!(calls.get("open"), Some(&1), "{calls:?}");
    assert!(calls.get("flock").copied().unwrap_or(0) >= 5, "{calls:?}");
    assert!(calls.get("fcntl").copied().unwrap_or(0) >= 2, "{calls:?}");
}

#[test]
fn directory_entries_buffered_writes_copies_and_permissions_work_as_std_expects() {
    use std::io::BufWriter;
    let world = SimEnv::new(24);
    let entered = interpose::enter(&world);
    std::fs::create_dir_all(entered.dir()).expect("the world's root exists already");
    std::fs::create_dir_all(entered.dir().join("a/b")).expect("nested directories");
    let mut writer = BufWriter::new(std::fs::File::create(entered.dir().join("a/log")).expect("create"));
    for line in 0..100 {
        writeln!(writer, "record {line}").expect("buffered write");
    }
    writer.into_inner().expect("flush").sync_data().expect("fdatasync");
    let mut text = String::new();
    std::fs::File::open(entered.dir().join("a/log")).expect("open").read_to_string(&mut text).expect("read");
    assert_eq!(text.lines().count(), 100);
    assert_eq!(text.lines().last(), Some("record 99"));

    let copied = std::fs::copy(entered.dir().join("a/log"), entered.dir().join("a/copy")).expect("fs::copy");
    assert_eq!(copied, text.len() as u64);
    assert_eq!(world.read_current(Path::new("/a/copy")), world.read_current(Path::new("/a/log")), "same bytes");
    let mut permissions = std::fs::metadata(entered.dir().join("a/copy")).expect("stat").permissions();
    permissions.set_readonly(true);
    std::fs::set_permissions(entered.dir().join("a/copy"), permissions).expect("chmod is kept quiet");

    let mut entries: Vec<_> = std::fs::read_dir(entered.dir().join("a"))
        .expect("read_dir")
        .map(|entry| {
            let entry = entry.expect("entry");
            let kind = entry.file_type().expect("d_type");
            let len = entry.metadata().expect("statx relative to the stream's descriptor").len();
            (entry.file_name().into_string().expect("utf-8"), kind.is_dir(), len)
        })
        .collect();
    entries.sort();
    let log_len = text.len() as u64;
    assert_eq!(
        entries,
        [("b".to_string(), true, 4096), ("copy".to_string(), false, log_len), ("log".to_string(), false, log_len)]
    );
    let modified = std::fs::metadata(entered.dir().join("a/log")).and_then(|m| m.modified()).expect("mtime");
    assert_eq!(modified.duration_since(std::time::UNIX_EPOCH).expect("after").as_secs(), interpose::REALTIME_BASE_SECS);
}

#[test]
#[expect(unsafe_code, reason = "C calls SQLite's unix VFS and other C code make (truncate, fchown, posix_fadvise)")]
fn c_library_calls_beyond_std_truncate_advise_and_chown_in_the_world() {
    let world = SimEnv::new(25);
    let entered = interpose::enter(&world);
    std::fs::write(entered.dir().join("db"), b"0123456789").expect("write");
    let path = std::ffi::CString::new(entered.dir().join("db").into_os_string().into_encoded_bytes()).expect("path");
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::truncate(path.as_ptr(), 4) }, 0);
    let fresh =
        std::ffi::CString::new(entered.dir().join("fresh").into_os_string().into_encoded_bytes()).expect("path");
    // SAFETY: a NUL-terminated path; the descriptor is closed at once.
    let created = unsafe { libc::creat(fresh.as_ptr(), 0o644) };
    assert!(created >= interpose::FD_BASE, "creat made a world file: {created}");
    // SAFETY: the descriptor just made.
    assert_eq!(unsafe { libc::close(created) }, 0);
    assert_eq!(world.read_current(Path::new("/fresh")).as_deref(), Some(&b""[..]));
    assert_eq!(world.read_current(Path::new("/db")).as_deref(), Some(&b"0123"[..]), "truncated in the world");
    let file = std::fs::File::open(entered.dir().join("db")).expect("open");
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    // SAFETY: advice and ownership on an open descriptor.
    let (advice, chown) = unsafe { (libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED), libc::fchown(fd, 0, 0)) };
    assert_eq!((advice, chown), (0, 0));
    // SAFETY: as above, on a number with no open description in this world.
    assert_eq!(unsafe { libc::posix_fadvise(interpose::FD_BASE + 99, 0, 0, 0) }, libc::EBADF);
    let calls = entered.stats().calls;
    assert_eq!((calls.get("truncate"), calls.get("fchown")), (Some(&1), Some(&1)), "{calls:?}");
}
