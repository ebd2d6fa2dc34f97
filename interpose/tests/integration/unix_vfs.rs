//! What SQLite's unix VFS needs beyond `std` (ADR-0177): `/dev/urandom` drawn from the world, the world
//! directory's parent seen as a directory when a path is canonicalised element by element (`lstat`, `readlink`),
//! and a thread that drops a dead process's handles fenced, so that nothing reaches the world and its descriptors go.

use std::ffi::CString;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use env::SimEnv;

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_encoded_bytes()).expect("no NUL")
}

fn urandom_bytes(seed: u64) -> (Vec<u8>, interpose::Stats) {
    let world = SimEnv::new(seed);
    let entered = interpose::enter(&world);
    let mut device = std::fs::File::open("/dev/urandom").expect("the world answers /dev/urandom");
    let meta = device.metadata().expect("fstat");
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(&meta.file_type()), "a character device");
    let mut bytes = vec![0; 37];
    device.read_exact(&mut bytes).expect("read");
    drop(device);
    (bytes, entered.stats())
}

#[test]
fn dev_urandom_reads_draw_from_the_world_and_never_the_host() {
    let (first, stats) = urandom_bytes(40);
    let (again, _) = urandom_bytes(40);
    let (other, _) = urandom_bytes(41);
    assert_eq!(first, again, "the same seed reads the same bytes");
    assert_ne!(first, other, "another seed, other bytes");
    assert!(first.iter().any(|&byte| byte != 0));
    assert_eq!(stats.calls.get("random_device"), Some(&1), "{:?}", stats.calls);
    assert!(stats.refusals.is_empty(), "{:?}", stats.refusals);
    let world = SimEnv::new(42);
    let _entered = interpose::enter(&world);
    let written = std::fs::OpenOptions::new().write(true).open("/dev/urandom");
    assert_eq!(written.expect_err("read-only").raw_os_error(), Some(libc::EACCES));
    // Outside a world, the host's device as ever.
    let host = std::thread::spawn(|| std::fs::File::open("/dev/urandom").map(|_| ())).join().expect("joins");
    assert!(host.is_ok(), "an unbound thread opens the host's /dev/urandom");
}

#[test]
#[expect(unsafe_code, reason = "lstat and readlink as SQLite's unixFullPathname calls them")]
fn the_world_directorys_parent_is_a_directory_and_world_paths_are_never_links() {
    let world = SimEnv::new(43);
    let entered = interpose::enter(&world);
    std::fs::write(entered.dir().join("db"), b"x").expect("write");
    let root = std::fs::symlink_metadata(interpose::WORLD_ROOT).expect("lstat /holdfast-world");
    assert!(root.is_dir(), "the world directory's parent reads as a directory");
    assert!(std::fs::symlink_metadata(entered.dir()).expect("lstat the world").is_dir());
    let db = std::fs::symlink_metadata(entered.dir().join("db")).expect("lstat db");
    assert!(db.is_file() && db.len() == 1 && db.nlink() == 1);
    let mut buf = [0u8; 64];
    let link = |path: &Path, buf: &mut [u8; 64]| {
        let path = c_path(path);
        // SAFETY: a NUL-terminated path and a buffer of 64 bytes.
        let got = unsafe { libc::readlink(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        (got, std::io::Error::last_os_error().raw_os_error())
    };
    assert_eq!(link(&entered.dir().join("db"), &mut buf), (-1, Some(libc::EINVAL)), "a file is no link");
    assert_eq!(link(&entered.dir().join("none"), &mut buf), (-1, Some(libc::ENOENT)));
    let stats = entered.stats();
    assert!(stats.refusals.is_empty(), "{:?}", stats.refusals);
    assert_eq!(stats.calls.get("readlink"), Some(&2));
    // The host's root stays the host's: refused.
    assert!(std::fs::symlink_metadata("/").is_err());
    assert_eq!(entered.stats().refusals.len(), 1);
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(entered)));
    assert!(refused.is_err(), "the refusal of / is raised by the guard");
}

#[test]
fn a_fenced_drop_reaches_neither_the_world_nor_the_host_and_releases_its_descriptors() {
    let world = SimEnv::new(44);
    let entered = interpose::enter(&world);
    let path = entered.dir().join("log");
    let mut file = std::fs::File::create(&path).expect("create");
    let digest = world.disk_digest();
    let calls = entered.stats().total_calls();
    assert_eq!(entered.stats().open_descriptors, 1);
    interpose::fenced(|| {
        let write = std::io::Write::write(&mut file, b"after death");
        assert_eq!(write.expect_err("EBADF from the kernel").raw_os_error(), Some(libc::EBADF));
        let removed = std::fs::remove_file(&path).expect_err("a world path is not the host's");
        assert_eq!(removed.raw_os_error(), Some(libc::ENOENT));
        drop(file);
    });
    assert_eq!(world.disk_digest(), digest, "the world's disk did not change");
    let stats = entered.stats();
    assert_eq!(stats.total_calls(), calls, "the world answered nothing");
    assert_eq!(stats.open_descriptors, 0, "the dead process's descriptor was released");
    assert_eq!(world.read_current(Path::new("/log")).as_deref(), Some(&b""[..]));
    std::fs::write(&path, b"alive again").expect("the fence is lifted after");
    drop(entered);
    let weak = world.downgrade();
    drop(world);
    assert!(weak.upgrade().is_none(), "nothing the fenced drop left keeps the world alive");
}
