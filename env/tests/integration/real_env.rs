//! `RealEnv` against the real file system, in a fresh directory under the OS temp dir.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use env::{Env, Error, File, Op, OpenOptions, RealEnv, TaskStep};

/// A fresh directory ([`RealEnv::temp_dir`]), removed (with everything in it) on drop. Shared with the `env::fs`
/// facade's tests.
pub(crate) struct TempDir {
    pub(crate) path: PathBuf,
    _dir: env::TempDir,
}

impl TempDir {
    pub(crate) fn new(env: &RealEnv, name: &str) -> Self {
        let dir = env.temp_dir(&format!("env-{name}")).expect("create the temp dir");
        Self { path: dir.path().to_path_buf(), _dir: dir }
    }

    fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

#[test]
fn temp_dirs_are_fresh_and_removed_on_drop() {
    let env = RealEnv::new();
    let (a, b) = (env.temp_dir("fresh").expect("a"), env.temp_dir("fresh").expect("b"));
    assert_ne!(a.path(), b.path());
    assert_eq!(env.list_dir(a.path()).expect("list"), Vec::<PathBuf>::new());
    env.open(&a.path().join("file"), OpenOptions::create_new()).expect("create").write_all_at(0, b"x").expect("write");
    let path = a.path().to_path_buf();
    drop(a);
    assert!(!env.exists(&path).expect("exists"), "{} was removed", path.display());
}

#[test]
fn files_round_trip_through_the_real_file_system() {
    let env = RealEnv::new();
    let dir = TempDir::new(&env, "roundtrip");
    let a = dir.join("a");
    assert!(!env.exists(&a).expect("exists"));
    assert!(matches!(env.open(&a, OpenOptions::read()), Err(Error::NotFound { op: Op::Open, .. })));

    let file = env.open(&a, OpenOptions::create_new()).expect("create");
    assert!(matches!(env.open(&a, OpenOptions::create_new()), Err(Error::AlreadyExists { .. })));
    assert!(file.is_empty().expect("empty"));
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 256) as u8).collect();
    file.write_all_at(0, &data).expect("write");
    file.write_all_at(10_000, b"tail").expect("write past the end");
    file.sync().expect("sync");
    assert_eq!(file.len().expect("len"), 10_004);
    let all = file.read_all().expect("read");
    assert_eq!(&all[..5000], &data[..]);
    assert!(all[5000..10_000].iter().all(|&byte| byte == 0), "a hole reads as zeros");
    assert_eq!(&all[10_000..], b"tail");
    assert_eq!(file.append(b"++").expect("append"), 10_004);

    file.set_len(100).expect("truncate");
    assert_eq!(file.read_all().expect("read"), data[..100]);
    file.set_len(200).expect("extend");
    let extended = file.read_all().expect("read");
    assert_eq!(extended.len(), 200);
    assert!(extended[100..].iter().all(|&byte| byte == 0));
    let mut past_end = [0u8; 4];
    assert_eq!(file.read_at(200, &mut past_end).expect("read at the end"), 0);
    assert!(matches!(file.read_exact_at(198, &mut past_end), Err(Error::UnexpectedEof { .. })));

    let read_only = env.open(&a, OpenOptions::read()).expect("open read-only");
    assert!(read_only.write_at(0, b"x").is_err(), "a read-only handle refuses writes");
    let truncated = env.open(&a, OpenOptions::create_truncate()).expect("create_truncate");
    assert_eq!(truncated.len().expect("len"), 0);
    truncated.write_all_at(0, b"fresh").expect("write");

    let b = dir.join("b");
    env.rename(&a, &b).expect("rename");
    env.sync_dir(&dir.path).expect("sync_dir");
    assert!(!env.exists(&a).expect("exists"));
    assert_eq!(env.open(&b, OpenOptions::read()).expect("open b").read_all().expect("read"), b"fresh");

    env.create_dir_all(&dir.join("sub/deeper")).expect("mkdir");
    env.open(&dir.join("c"), OpenOptions::create_new()).expect("create c");
    assert_eq!(env.list_dir(&dir.path).expect("list"), vec![b.clone(), dir.join("c"), dir.join("sub")]);
    env.remove_file(&b).expect("remove");
    assert!(matches!(env.remove_file(&b), Err(Error::NotFound { op: Op::Remove, .. })));
    env.sync_dir(&dir.path).expect("sync_dir");
    assert_eq!(env.list_dir(&dir.path).expect("list"), vec![dir.join("c"), dir.join("sub")]);
    assert!(matches!(env.list_dir(&dir.join("missing")), Err(Error::NotFound { op: Op::ListDir, .. })));
}

#[test]
fn set_len_through_a_read_only_real_handle_is_refused() {
    let env = RealEnv::new();
    let dir = TempDir::new(&env, "readonly");
    let path = dir.join("a");
    env.open(&path, OpenOptions::create_new()).expect("create").write_all_at(0, b"0123456789").expect("write");
    let read_only = env.open(&path, OpenOptions::read()).expect("open");
    let result = read_only.set_len(2);
    assert!(matches!(result, Err(Error::InvalidInput { op: Op::SetLen, .. })), "{result:?}");
    assert_eq!(read_only.len().expect("len"), 10);
}

#[test]
fn spawned_task_runs_to_completion_on_another_thread() {
    let env = RealEnv::new();
    let steps = Arc::new(AtomicU64::new(0));
    let other_thread = Arc::new(AtomicU64::new(0));
    let caller = std::thread::current().id();
    let (task_steps, task_thread) = (Arc::clone(&steps), Arc::clone(&other_thread));
    let handle = env.spawn(
        "counter",
        Box::new(move || {
            if std::thread::current().id() != caller {
                task_thread.fetch_add(1, Ordering::SeqCst);
            }
            if task_steps.fetch_add(1, Ordering::SeqCst) + 1 == 10 { TaskStep::Done } else { TaskStep::Continue }
        }),
    );
    assert_eq!(handle.name(), "counter");
    assert_eq!(env.wait(&handle), Ok(()));
    assert!(env.is_finished(&handle));
    assert_eq!(steps.load(Ordering::SeqCst), 10);
    assert_eq!(other_thread.load(Ordering::SeqCst), 10, "every step ran off the caller's thread");
    assert_eq!(env.wait(&handle), Ok(()), "waiting again on a finished task returns at once");
}

/// The thread a task's first step ran on.
fn thread_of_one_task(env: &RealEnv) -> std::thread::ThreadId {
    let seen = Arc::new(std::sync::Mutex::new(None));
    let task_seen = Arc::clone(&seen);
    let handle = env.spawn(
        "which-thread",
        Box::new(move || {
            *task_seen.lock().expect("slot") = Some(std::thread::current().id());
            TaskStep::Done
        }),
    );
    env.wait(&handle).expect("wait");
    seen.lock().expect("slot").expect("the task ran")
}

#[test]
fn a_finished_task_leaves_its_worker_thread_for_the_next_task() {
    let env = RealEnv::new();
    let first = thread_of_one_task(&env);
    assert_ne!(first, std::thread::current().id(), "tasks run off the caller's thread");
    for _ in 0..3 {
        assert_eq!(thread_of_one_task(&env), first, "an idle worker takes the next task: no thread start per task");
    }
}

#[test]
fn tasks_that_wait_for_each_other_each_get_a_thread_even_beyond_the_idle_pool() {
    let env = RealEnv::new();
    let tasks = env::IDLE_WORKERS_MAX as u64 + 4;
    for round in 0..2 {
        let arrived = Arc::new(AtomicU64::new(0));
        let deadline = env.now() + std::time::Duration::from_secs(20);
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let (arrived, env_in_task, mut counted) = (Arc::clone(&arrived), env.clone(), false);
                env.spawn(
                    "rendezvous",
                    Box::new(move || {
                        if !counted {
                            counted = true;
                            arrived.fetch_add(1, Ordering::SeqCst);
                        }
                        // Done once every task arrived: only if all of them run at the same time.
                        let all = arrived.load(Ordering::SeqCst) == tasks;
                        if all || env_in_task.now() > deadline { TaskStep::Done } else { TaskStep::Continue }
                    }),
                )
            })
            .collect();
        for handle in &handles {
            env.wait(handle).expect("wait");
        }
        assert_eq!(arrived.load(Ordering::SeqCst), tasks, "round {round}: every task ran");
        assert!(env.now() <= deadline, "round {round}: the tasks did not all run at once (a worker ran two)");
    }
}

#[test]
fn real_lock_conflicts_until_released() {
    let env = RealEnv::new();
    let dir = TempDir::new(&env, "lock");
    let path = dir.join("LOCK");
    let first = env.lock(&path).expect("first lock");
    assert!(env.exists(&path).expect("exists"), "lock creates the file");
    let second = env.lock(&path);
    assert!(matches!(&second, Err(Error::Locked { op: Op::Lock, path: at }) if *at == path), "{second:?}");
    drop(first);
    let third = env.lock(&path).expect("released on drop");
    drop(third);
    assert!(matches!(env.lock(Path::new("/nonexistent-holdfast-dir/LOCK")), Err(Error::NotFound { .. })));
}

#[test]
fn map_parallel_returns_results_in_item_order_for_any_job_count() {
    let items: Vec<u64> = (0..97).collect();
    let serial: Vec<u64> = items.iter().map(|item| item * item + 1).collect();
    for jobs in [1, 2, 3, 8, 1000] {
        let parallel = RealEnv::map_parallel(jobs, items.clone(), |item| item * item + 1);
        assert_eq!(parallel, serial, "{jobs} jobs");
    }
    assert!(RealEnv::map_parallel(4, Vec::<u64>::new(), |item| item).is_empty());
    assert!(RealEnv::cores() >= 1);
}

#[test]
fn thread_cpu_time_grows_with_work_and_ignores_sleep() {
    let Some(before) = RealEnv::thread_cpu_time() else { return }; // not Linux: nothing to measure
    let mut x = 0u64;
    for i in 0..20_000_000u64 {
        x = x.wrapping_add(i ^ (x >> 3));
    }
    assert_ne!(x, 1, "keep the loop");
    let after = RealEnv::thread_cpu_time().expect("available once");
    assert!(after > before, "{before:?} -> {after:?}");
    let env = RealEnv::new();
    let slept = RealEnv::thread_cpu_time().expect("available");
    env.sleep(std::time::Duration::from_millis(50));
    let woke = RealEnv::thread_cpu_time().expect("available");
    assert!(woke - slept < std::time::Duration::from_millis(25), "sleeping used {:?} of CPU", woke - slept);
}

#[test]
fn thread_cpu_time_resolves_well_below_a_scheduler_tick() {
    // A tick-quantised clock (schedstat on some VMs: 4 ms) reports either nothing or a whole tick for a short burst
    // of work; ADR-0058's clock reports the burst itself.
    const BURSTS_MAX: usize = 50;
    let Some(mut last) = RealEnv::thread_cpu_time() else { return }; // not Linux: nothing to measure
    let mut fine = 0;
    for _ in 0..BURSTS_MAX {
        let mut x = 0u64;
        for i in 0..200_000u64 {
            x = x.wrapping_add(i ^ (x >> 3));
        }
        assert_ne!(x, 1, "keep the loop");
        let now = RealEnv::thread_cpu_time().expect("available");
        let burst = now - last;
        if burst > std::time::Duration::ZERO && burst < std::time::Duration::from_millis(2) {
            fine += 1;
        }
        last = now;
    }
    assert!(fine > BURSTS_MAX / 2, "only {fine} of {BURSTS_MAX} bursts measured between 0 and 2 ms");
}

/// The watchdog under a swarm (ADR-0098): an item that runs past the timeout is `Stuck` and its thread abandoned
/// (a fresh one runs the rest), until `abandoned_max` threads were abandoned; then the items not started are
/// `NotRun`. The stuck items here spin on a flag without calling `Env`, and are released at the end.
#[test]
fn map_watched_reports_stuck_items_and_stops_after_abandoning_the_most_threads() {
    use env::Watched;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;
    let release = Arc::new(AtomicBool::new(false));
    let spin_on_odd = {
        let release = Arc::clone(&release);
        Arc::new(move |item: u64| {
            while item % 2 == 1 && !release.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
            item * 10
        })
    };
    let timeout = Duration::from_millis(200);
    let shape = |results: Vec<Watched<u64>>| -> Vec<Option<u64>> {
        results
            .into_iter()
            .map(|result| match result {
                Watched::Done(value) => Some(value),
                Watched::Stuck { elapsed } => {
                    assert!(elapsed >= timeout, "stuck after {elapsed:?}, before the timeout");
                    None
                }
                Watched::NotRun => Some(u64::MAX),
            })
            .collect()
    };
    let results = RealEnv::map_watched(2, vec![0, 1, 2, 3, 4], timeout, 16, spin_on_odd.clone());
    assert_eq!(shape(results), vec![Some(0), None, Some(20), None, Some(40)]);
    let results = RealEnv::map_watched(1, vec![2, 5, 6, 8], timeout, 1, spin_on_odd);
    assert_eq!(shape(results), vec![Some(20), None, Some(u64::MAX), Some(u64::MAX)], "stopped after one stuck item");
    release.store(true, Ordering::Relaxed);
}

/// `read_exact_at_into` on a real file (the trait's default): the bytes written, read into a buffer whose old
/// contents and spare capacity it replaces; a read past the end is `UnexpectedEof` (ADR-0140).
#[test]
fn real_files_read_into_a_reused_vec() {
    let env = RealEnv::new();
    let dir = TempDir::new(&env, "read-into");
    let file = env.open(&dir.join("a"), OpenOptions::create_new()).expect("create");
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 13 % 256) as u8).collect();
    file.write_all_at(0, &data).expect("write");
    let mut buffer = vec![0xEEu8; 5000];
    file.read_exact_at_into(0, 3000, &mut buffer).expect("read all");
    assert_eq!((buffer.len(), &buffer[..]), (3000, &data[..]));
    file.read_exact_at_into(1000, 24, &mut buffer).expect("read a span");
    assert_eq!((buffer.len(), &buffer[..]), (24, &data[1000..1024]));
    file.read_exact_at_into(3000, 0, &mut buffer).expect("an empty read at the end");
    assert!(buffer.is_empty(), "an empty read leaves nothing behind");
    let past_end = file.read_exact_at_into(2990, 11, &mut buffer);
    assert!(matches!(past_end, Err(Error::UnexpectedEof { op: Op::Read, offset: 2990, .. })), "{past_end:?}");
    assert_eq!(file.read_all().expect("read_all"), data, "read_all reads through read_exact_at_into");
}
