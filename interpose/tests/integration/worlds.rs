//! Two worlds on two OS threads of one process: the same path names each world's own file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use env::SimEnv;

const SPINS_MAX: u64 = 1 << 34;

/// What one world's thread saw: its bytes read back through `std::fs`, its world's own view, its disk digest.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    read_back: Vec<u8>,
    world_view: Option<Vec<u8>>,
    other_only: bool,
    files: Vec<PathBuf>,
    digest: u64,
}

fn run_world(seed: u64, bytes: &'static [u8], only: &'static str, written: &AtomicUsize) -> Seen {
    let world = SimEnv::new(seed);
    let entered = interpose::enter(&world);
    let dir = entered.dir().join("shared");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("file"), bytes).expect("write");
    std::fs::write(dir.join(only), b"mine").expect("write own");
    written.fetch_add(1, Ordering::AcqRel);
    // Both worlds have written before either reads back.
    let mut spins = 0u64;
    while written.load(Ordering::Acquire) < 2 {
        spins += 1;
        assert!(spins < SPINS_MAX, "the other world never wrote");
        std::hint::spin_loop();
    }
    let other = if only == "only-a" { "only-b" } else { "only-a" };
    Seen {
        read_back: std::fs::read(dir.join("file")).expect("read back"),
        world_view: world.read_current(Path::new("/shared/file")),
        other_only: dir.join(other).exists(),
        files: world.files().into_iter().map(|file| file.path).collect(),
        digest: world.disk_digest(),
    }
}

#[test]
fn two_worlds_on_two_threads_never_see_each_others_files() {
    let written = AtomicUsize::new(0);
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(|| run_world(71, b"bytes of world A", "only-a", &written));
        let b = scope.spawn(|| run_world(72, b"world B's other bytes", "only-b", &written));
        (a.join().expect("world A"), b.join().expect("world B"))
    });
    assert_eq!(a.read_back, b"bytes of world A");
    assert_eq!(a.world_view.as_deref(), Some(&b"bytes of world A"[..]));
    assert_eq!(b.read_back, b"world B's other bytes");
    assert_eq!(b.world_view.as_deref(), Some(&b"world B's other bytes"[..]));
    assert!(!a.other_only && !b.other_only, "neither sees the other's file");
    assert_eq!(a.files, [PathBuf::from("/shared/file"), PathBuf::from("/shared/only-a")]);
    assert_eq!(b.files, [PathBuf::from("/shared/file"), PathBuf::from("/shared/only-b")]);
    assert_ne!(a.digest, b.digest);
}

/// One workload through `std` on a fresh thread: its world's digest and the calls it counted.
fn workload(seed: u64) -> (u64, std::collections::BTreeMap<&'static str, u64>, Vec<u8>) {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let world =
                    SimEnv::with_faults(seed, env::FaultConfig { short_write_ppm: 200_000, ..Default::default() });
                let entered = interpose::enter(&world);
                let dir = entered.dir().join("db");
                std::fs::create_dir_all(&dir).expect("mkdir");
                for index in 0..20u32 {
                    let name = dir.join(format!("{index:03}"));
                    std::fs::write(&name, index.to_le_bytes().repeat(100)).expect("write");
                    if index % 3 == 0 {
                        std::fs::remove_file(&name).expect("remove");
                    }
                }
                let listing: Vec<u8> = std::fs::read_dir(&dir)
                    .expect("read_dir")
                    .flat_map(|entry| entry.expect("entry").file_name().into_encoded_bytes())
                    .collect();
                world.crash();
                (world.disk_digest(), entered.stats().calls, listing)
            })
            .join()
            .expect("the world thread")
    })
}

#[test]
fn the_same_seed_gives_the_same_disk_listing_and_call_counts() {
    let first = workload(73);
    assert_eq!(first, workload(73), "a run of a seed is a function of the seed");
    assert!(first.1.get("write").copied().unwrap_or(0) >= 20, "short writes are retried by std: {:?}", first.1);
    assert_ne!(first.0, workload(74).0, "another seed's crash keeps other bytes");
}
