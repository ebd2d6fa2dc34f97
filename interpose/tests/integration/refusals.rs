//! What a world cannot simulate fails loudly, naming the call and the fix, and never reaches the real disk.

#![expect(
    unsafe_code,
    reason = "C calls the world refuses (mmap, fork, epoll_ctl, syscall) are the subject (ADR-0162)"
)]

use std::os::fd::AsRawFd;
use std::panic::{AssertUnwindSafe, catch_unwind};

use env::SimEnv;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().expect("an OS error")
}

/// Drop `entered` and return the message it panicked with (it must panic: the world refused a call).
fn drop_panics(entered: interpose::Entered) -> String {
    let payload = catch_unwind(AssertUnwindSafe(move || drop(entered))).expect_err("dropping the guard fails the run");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_string()))
        .expect("a text panic")
}

#[test]
fn mmap_of_a_simulated_file_fails_loudly_naming_mmap() {
    let world = SimEnv::new(51);
    let entered = interpose::enter(&world);
    let path = entered.dir().join("mapped");
    std::fs::write(&path, [7u8; 4096]).expect("write");
    let file = std::fs::File::open(&path).expect("open");
    let fd = file.as_raw_fd();
    assert!(fd >= interpose::FD_BASE, "a simulated descriptor: {fd}");
    // SAFETY: a read-only shared map request; the interposer refuses it before anything is mapped.
    let mapped = unsafe { libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_SHARED, fd, 0) };
    assert_eq!(mapped, libc::MAP_FAILED, "no mapping");
    assert_eq!(errno(), libc::ENODEV);
    let refusals = entered.stats().refusals;
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert_eq!(refusals[0].call, "mmap");
    assert!(refusals[0].message.contains("pread"), "names the fix: {}", refusals[0].message);
    // An anonymous map is the process's memory, not the world's: it is allowed.
    // SAFETY: a private anonymous map, unmapped below.
    let anonymous = unsafe {
        libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert_ne!(anonymous, libc::MAP_FAILED);
    // SAFETY: the map made just above.
    assert_eq!(unsafe { libc::munmap(anonymous, 4096) }, 0);
    drop(file);
    let message = drop_panics(entered);
    assert!(message.contains("`mmap`") && message.contains("pread"), "{message}");
}

#[test]
fn a_host_path_fork_epoll_and_io_uring_are_refused_by_name() {
    let world = SimEnv::new(52);
    let entered = interpose::enter(&world);
    let host = std::fs::read("/etc/hostname").expect_err("a world thread may not read the host");
    assert_eq!(host.raw_os_error(), Some(libc::EACCES));
    // SAFETY: fork is refused before any process is made.
    assert_eq!(unsafe { libc::fork() }, -1);
    assert_eq!(errno(), libc::ENOSYS);
    std::fs::write(entered.dir().join("f"), b"x").expect("write");
    let file = std::fs::File::open(entered.dir().join("f")).expect("open");
    // SAFETY: a real epoll instance; the interposer refuses the simulated descriptor before the kernel sees it.
    let epoll = unsafe { libc::epoll_create1(0) };
    assert!(epoll >= 0);
    let mut event = libc::epoll_event { events: libc::EPOLLIN as u32, u64: 0 };
    // SAFETY: as above.
    assert_eq!(unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, file.as_raw_fd(), &raw mut event) }, -1);
    assert_eq!(errno(), libc::EPERM);
    // SAFETY: closing the epoll descriptor made above.
    assert_eq!(unsafe { libc::close(epoll) }, 0);
    let mut params = [0u8; 120];
    // SAFETY: refused before the kernel sees it.
    let ring = unsafe { libc::syscall(libc::SYS_io_uring_setup, 8, params.as_mut_ptr()) };
    assert_eq!(ring, -1);
    assert_eq!(errno(), libc::ENOSYS);
    let calls: Vec<_> = entered.stats().refusals.iter().map(|refusal| refusal.call).collect();
    assert_eq!(calls, ["open64", "fork", "epoll_ctl", "io_uring_setup"]);
    let first = &entered.stats().refusals[0];
    assert!(first.message.contains("/etc/hostname") && first.message.contains("Entered::dir"), "{}", first.message);
    drop(file);
    let message = drop_panics(entered);
    assert!(message.contains("`open64`") && message.contains("/etc/hostname"), "the first refusal: {message}");
}

#[test]
fn cross_directory_renames_are_refused_not_approximated() {
    let world = SimEnv::new(53);
    let entered = interpose::enter(&world);
    std::fs::create_dir_all(entered.dir().join("a/b")).expect("mkdir");
    std::fs::write(entered.dir().join("a/f"), b"x").expect("write");
    let error = std::fs::rename(entered.dir().join("a/f"), entered.dir().join("a/b/f")).expect_err("across");
    assert_eq!(error.raw_os_error(), Some(libc::EXDEV));
    let error = std::fs::rename(entered.dir().join("a/b"), entered.dir().join("a/c")).expect_err("a directory");
    assert_eq!(error.raw_os_error(), Some(libc::EXDEV));
    assert_eq!(world.read_current(std::path::Path::new("/a/f")).as_deref(), Some(&b"x"[..]), "still where it was");
    assert_eq!(world.lookup_current(std::path::Path::new("/a/b")), Some(env::NodeInfo::Dir), "still there");
    let calls: Vec<_> = entered.stats().refusals.iter().map(|refusal| refusal.call).collect();
    assert_eq!(calls, ["rename", "rename"]);
    let message = drop_panics(entered);
    assert!(message.contains("within one directory"), "{message}");
}

#[test]
fn a_panic_inside_an_intercepted_call_fails_the_call_then_is_raised_by_the_guard() {
    let world = SimEnv::new(54);
    let entered = interpose::enter(&world);
    std::fs::write(entered.dir().join("before"), b"ok").expect("within the budget");
    world.set_work_limit(Some(world.work_done() + 3));
    let mut failures = 0;
    for attempt in 0..8 {
        if std::fs::write(entered.dir().join(format!("f{attempt}")), b"x").is_err() {
            failures += 1;
        }
    }
    assert!(failures > 0, "the budget overrun fails the call (it cannot unwind into std's C call)");
    let error = std::fs::read(entered.dir().join("before")).expect_err("every later world call fails");
    assert_eq!(error.raw_os_error(), Some(libc::EIO));
    let payload = catch_unwind(AssertUnwindSafe(move || drop(entered))).expect_err("the guard raises it");
    assert!(payload.downcast_ref::<env::WorkBudgetExceeded>().is_some(), "the original payload, for the runner");
}
