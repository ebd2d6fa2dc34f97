//! A crash stops the world (ADR-0168), and a world's only thread that waits is deadlocked at once, a thread the
//! world did not start is refused without poisoning it (ADR-0169).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;

use env::sync::{Condvar, Mutex, mpsc};
use env::thread::ThreadFailure;
use env::{Env, Error, File, OpenOptions, SimEnv};

/// What the checkpointer thread's calls returned, in order.
type Calls = Arc<Mutex<Vec<(&'static str, Result<(), String>)>>>;

/// A store with a durable log `/d/log` and a synced but unnamed snapshot `/d/snap.tmp`, whose checkpointer
/// thread renames the snapshot into place, syncs the directory and then removes the covered log by path (a
/// correct order on a real disk). The main thread makes `yields` calls, cuts the power (by `crash` when
/// `at_once`, else by `cut_power` and a restart after the checkpointer ended) and joins the checkpointer.
fn checkpoint_then_crash(seed: u64, yields: u64, at_once: bool) -> (SimEnv, Calls) {
    let sim = SimEnv::new(seed);
    sim.keep_crash_images(true);
    sim.create_dir_all(Path::new("/d")).expect("mkdir");
    for (path, bytes) in [("/d/log", b"records".as_slice()), ("/d/snap.tmp", b"snapshot".as_slice())] {
        let file = sim.open(Path::new(path), OpenOptions::create_truncate()).expect("open");
        file.write_all_at(0, bytes).expect("write");
        file.sync().expect("sync");
    }
    sim.sync_dir(Path::new("/")).expect("sync_dir");
    sim.sync_dir(Path::new("/d")).expect("sync_dir");
    let calls: Calls = Arc::new(Mutex::new(Vec::new()));
    let (store, log) = (sim.clone(), Arc::clone(&calls));
    let checkpointer = env::thread::spawn(&sim, "checkpointer", move || {
        let record = |name, result: env::Result<()>| {
            log.lock().expect("calls").push((name, result.map_err(|error| error.to_string())));
        };
        record("rename", store.rename(Path::new("/d/snap.tmp"), Path::new("/d/snap")));
        record("sync_dir", store.sync_dir(Path::new("/d")));
        record("remove_file", store.remove_file(Path::new("/d/log")));
    });
    for _ in 0..yields {
        let _ = sim.now();
    }
    if at_once {
        sim.crash();
        checkpointer.join().expect("no panic");
    } else {
        sim.cut_power();
        checkpointer.join().expect("no panic");
        assert!(sim.is_halted(), "the power stays off until the restart");
        sim.restart();
    }
    (sim, calls)
}

#[test]
fn a_thread_inside_a_call_at_the_crash_never_touches_the_disk_again() {
    let mut cut_inside_sync_dir = 0;
    for seed in 0..24 {
        for (yields, at_once) in [(1, true), (2, false), (4, true), (6, false)] {
            let (sim, calls) = checkpoint_then_crash(seed, yields, at_once);
            let calls = calls.lock().expect("calls").clone();
            let durable = |path: &str| sim.read_durable(Path::new(path)).is_some();
            // The removal ran only after the directory sync made the rename durable, or not at all.
            assert!(
                durable("/d/log") || durable("/d/snap"),
                "seed {seed} {yields}: the checkpoint lost the data: {calls:?} {:?}",
                sim.files()
            );
            let crashed = |(_, result): &(&str, Result<(), String>)| {
                result.as_ref().is_err_and(|error| error.contains("the simulated machine crashed"))
            };
            if let Some(first) = calls.iter().position(crashed) {
                assert!(calls[first..].iter().all(crashed), "seed {seed}: a call after the crash succeeded: {calls:?}");
                cut_inside_sync_dir += u64::from(calls[first].0 == "sync_dir");
            }
            // Recovery opens exactly the disk the crash left: the exported image.
            let image = sim.last_crash_image().expect("an image was kept");
            let files: Vec<_> = sim.files().into_iter().map(|file| file.path).collect();
            let imaged: Vec<_> = image.files.iter().map(|(path, _)| path.clone()).collect();
            assert_eq!(files, imaged, "seed {seed}: the disk after the crash is not the exported image");
            for (path, bytes) in &image.files {
                assert_eq!(sim.read_current(path).as_ref(), Some(bytes), "seed {seed}: {}", path.display());
            }
        }
    }
    assert!(cut_inside_sync_dir > 0, "no schedule crashed the checkpointer inside its sync_dir");
}

#[test]
fn a_thread_of_the_old_system_stays_dead_after_the_restart_and_starts_nothing() {
    let sim = SimEnv::new(5);
    sim.create_dir_all(Path::new("/d")).expect("mkdir");
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<(bool, bool, env::Result<()>)>();
    let store = sim.clone();
    let old = env::thread::spawn(&sim, "old", move || {
        go_rx.recv().expect("go");
        let created = store.open(Path::new("/d/late"), OpenOptions::create_truncate()).is_ok();
        let exists = store.exists(Path::new("/d")).is_ok();
        let task = store.spawn("late-task", Box::new(|| panic!("a task of a dead system ran")));
        done_tx.send((created, exists, store.wait(&task))).expect("main waits");
    });
    sim.crash();
    let new = env::thread::spawn(&sim, "new", {
        let store = sim.clone();
        move || store.open(Path::new("/d/fresh"), OpenOptions::create_truncate()).map(|_| ())
    });
    go_tx.send(()).expect("old waits");
    let (created, exists, waited) = done_rx.recv().expect("old reports");
    assert!(!created && !exists, "a thread born before the crash touched the disk after it");
    assert!(matches!(waited, Err(Error::TaskCancelled { .. })), "its task ran: {waited:?}");
    old.join().expect("no panic");
    new.join().expect("no panic").expect("a thread born after the crash works");
    assert_eq!(sim.runnable_tasks(), vec![]);
    assert!(sim.read_current(Path::new("/d/late")).is_none() && sim.read_current(Path::new("/d/fresh")).is_some());
}

/// Run `wait` on a world's only thread: the deadlock it panics with.
fn alone(wait: impl FnOnce()) -> ThreadFailure {
    let sim = SimEnv::new(3);
    let _ = sim.now(); // this thread drives the world, which never starts a thread
    let payload = catch_unwind(AssertUnwindSafe(wait)).expect_err("nobody can wake the only thread");
    payload.downcast_ref::<ThreadFailure>().cloned().expect("a thread failure")
}

#[test]
fn the_only_thread_of_a_world_that_waits_is_deadlocked_at_once_naming_the_wait() {
    let (mutex, condvar) = (Mutex::new(false), Condvar::new());
    let ThreadFailure::Deadlock { blocked } = alone(|| drop(condvar.wait(mutex.lock().expect("lock")))) else {
        panic!("not a deadlock");
    };
    assert_eq!((blocked.len(), blocked[0].thread.as_str(), blocked[0].operation), (1, "main", "Condvar::wait"));
    assert!(blocked[0].location.starts_with("env/tests/integration/power.rs:"), "{blocked:?}");
    let (_tx, rx) = mpsc::channel::<u8>();
    let failure = alone(|| {
        let _ = rx.recv();
    });
    assert!(failure.to_string().contains("blocks in Receiver::recv at env/tests/integration/power.rs:"), "{failure}");
    let held = Mutex::new(());
    let failure = alone(|| {
        let _first = held.lock().expect("free");
        drop(held.lock());
    });
    assert!(failure.to_string().contains("blocks in Mutex::lock"), "{failure}");
    // A thread that drives no world waits as std's primitives do.
    let (tx, rx) = mpsc::channel::<u8>();
    tx.send(1).expect("send");
    assert_eq!(rx.recv(), Ok(1));
}

#[test]
#[expect(clippy::disallowed_methods, reason = "the test starts a thread the simulator does not know, on purpose")]
fn a_refused_thread_fails_the_owners_next_call_and_poisons_nothing() {
    let sim = SimEnv::new(1);
    let _ = sim.now();
    let other = sim.clone();
    let rogue = std::thread::Builder::new().name("log-writer".into()).spawn(move || other.now()).expect("spawn");
    assert!(rogue.join().is_err(), "the world refuses the thread");
    assert!(!sim.is_poisoned(), "a refusal leaves the world usable");
    let refused = sim.refused_thread().expect("the world remembers the refusal");
    let ThreadFailure::Panicked { thread, message } = &refused else { panic!("not a panic: {refused:?}") };
    assert!(thread == "log-writer" && message.contains("env::thread::spawn"), "{refused:?}");
    let payload = catch_unwind(AssertUnwindSafe(|| sim.now())).expect_err("the owner's next call fails the run");
    assert_eq!(payload.downcast_ref::<ThreadFailure>(), Some(&refused));
    assert_eq!(sim.files(), vec![], "introspection still reads the world");
}
