//! Calls outside a run reach the real disk, in the same process as a world, untouched.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use env::SimEnv;

/// The most spins a test thread waits for another (about seconds; a hang is a failure, not a stall).
const SPINS_MAX: u64 = 1 << 34;

fn spin_until(flag: &AtomicBool) {
    for _ in 0..SPINS_MAX {
        if flag.load(Ordering::Acquire) {
            return;
        }
        std::hint::spin_loop();
    }
    panic!("the other thread never got there");
}

fn host_scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("interpose-outside-{}-{name}", std::process::id()))
}

#[test]
fn calls_outside_a_run_reach_the_real_disk_while_a_world_is_bound() {
    let bound = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let host = host_scratch("unbound");
    std::thread::scope(|scope| {
        let world_thread = scope.spawn(|| {
            let world = SimEnv::new(61);
            let entered = interpose::enter(&world);
            std::fs::write(entered.dir().join("inside"), b"world bytes").expect("world write");
            bound.store(true, Ordering::Release);
            spin_until(&done); // bound all the while the other thread uses the host
            let stats = entered.stats();
            let files: Vec<_> = world.files().into_iter().map(|file| file.path).collect();
            (stats, files)
        });
        spin_until(&bound);
        std::fs::write(&host, b"host bytes").expect("a real write from an unbound thread");
        assert_eq!(std::fs::read(&host).expect("real read"), b"host bytes");
        assert!(std::fs::metadata(&host).expect("real stat").is_file());
        std::fs::remove_file(&host).expect("real remove");
        assert!(!host.exists(), "removed from the host");
        done.store(true, Ordering::Release);
        let (stats, files) = world_thread.join().expect("the world thread");
        assert_eq!(files, [PathBuf::from("/inside")], "the world holds its own file, not the host's");
        assert_eq!(stats.calls.get("unlink"), None, "the host remove was not the world's");
        assert!(stats.refusals.is_empty(), "{:?}", stats.refusals);
    });
}

#[test]
fn the_same_thread_reaches_the_host_again_once_its_guard_drops() {
    let world = SimEnv::new(62);
    let host = host_scratch("after");
    {
        let entered = interpose::enter(&world);
        std::fs::write(entered.dir().join("file"), b"world").expect("world write");
    }
    std::fs::write(&host, b"host again").expect("real write after the guard");
    assert_eq!(std::fs::read(&host).expect("real read"), b"host again");
    std::fs::remove_file(&host).expect("real remove");
    assert_eq!(world.read_current(std::path::Path::new("/file")).as_deref(), Some(&b"world"[..]));
    assert!(!PathBuf::from(interpose::WORLD_ROOT).exists(), "no world directory on the host");
}

#[test]
fn a_world_file_dropped_after_its_guard_closes_quietly() {
    let world = SimEnv::new(63);
    let entered = interpose::enter(&world);
    let file = std::fs::File::create(entered.dir().join("outlives")).expect("create");
    drop(entered);
    // std (with debug assertions) aborts the process if closing an owned descriptor fails with EBADF.
    drop(file);
    assert_eq!(world.read_current(std::path::Path::new("/outlives")).as_deref(), Some(&b""[..]));
    let again = interpose::enter(&world);
    assert_eq!(again.stats().open_descriptors, 1, "the description stays with its world");
    assert_eq!(again.stats().calls.get("open64"), Some(&1), "and so do its counts, across guards");
}
