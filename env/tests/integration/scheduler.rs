//! The simulated scheduler (ADR-0005) and BUGGIFY.

use std::path::Path;
use std::sync::{Arc, Mutex};

use env::{Env, Error, FaultConfig, File, Op, OpenOptions, RealEnv, SimEnv, Task, TaskStep};

type Log = Arc<Mutex<Vec<String>>>;

fn new_log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

fn entries(log: &Log) -> Vec<String> {
    log.lock().expect("log").clone()
}

/// A task that appends `name` to `log` on each of its `steps` steps.
fn counting_task(name: &str, steps: usize, log: &Log) -> Task {
    let (name, log) = (name.to_string(), Arc::clone(log));
    let mut done = 0;
    Box::new(move || {
        log.lock().expect("log").push(name.clone());
        done += 1;
        if done == steps { TaskStep::Done } else { TaskStep::Continue }
    })
}

#[test]
fn spawned_task_does_not_run_until_stepped() {
    let env = SimEnv::new(1);
    let log = new_log();
    let handle = env.spawn("worker", counting_task("worker", 2, &log));
    assert!(entries(&log).is_empty(), "spawn ran the task");
    assert_eq!(env.runnable_tasks(), vec![(handle.id(), "worker".to_string())]);
    assert!(!env.is_finished(&handle));
    assert_eq!(env.step_task(handle.id()), Some(TaskStep::Continue));
    assert_eq!(entries(&log), vec!["worker"]);
    assert_eq!(env.step_task(handle.id()), Some(TaskStep::Done));
    assert!(env.is_finished(&handle));
    assert!(env.runnable_tasks().is_empty());
    assert_eq!(env.step_task(handle.id()), None, "a finished task is not stepped again");
    assert_eq!(entries(&log).len(), 2);
    assert_eq!(env.wait(&handle), Ok(()));
}

#[test]
fn wait_runs_the_task_inline_to_completion() {
    let env = SimEnv::new(2);
    let log = new_log();
    let other = env.spawn("other", counting_task("other", 3, &log));
    let handle = env.spawn("worker", counting_task("worker", 5, &log));
    assert_eq!(handle.name(), "worker");
    assert_eq!(env.wait(&handle), Ok(()));
    assert_eq!(entries(&log), vec!["worker"; 5], "wait ran only the task waited on");
    assert!(env.is_finished(&handle));
    assert!(!env.is_finished(&other));
    assert_eq!(env.run_tasks(100), 3);
    assert!(env.is_finished(&other));
}

#[test]
fn a_crash_cancels_every_task() {
    let env = SimEnv::new(3);
    let log = new_log();
    let stepped = env.spawn("stepped", counting_task("stepped", 10, &log));
    let untouched = env.spawn("untouched", counting_task("untouched", 10, &log));
    assert_eq!(env.step_task(stepped.id()), Some(TaskStep::Continue));
    env.crash();
    assert!(env.runnable_tasks().is_empty());
    for handle in [&stepped, &untouched] {
        assert!(env.is_finished(handle));
        let waited = env.wait(handle);
        assert!(
            matches!(&waited, Err(Error::TaskCancelled { op: Op::Wait, path }) if path == Path::new(handle.name()))
        );
        assert!(waited.is_err_and(|error| error.is_crash()));
    }
    assert_eq!(entries(&log), vec!["stepped"], "a cancelled task never runs again");
    // Tasks spawned after the crash run.
    let fresh = env.spawn("fresh", counting_task("fresh", 2, &log));
    assert_eq!(env.wait(&fresh), Ok(()));
    assert_eq!(entries(&log).len(), 3);
}

#[test]
fn a_task_whose_io_crashes_the_world_is_cancelled() {
    let env = SimEnv::new(4);
    let file = env.open(Path::new("f"), OpenOptions::create_new()).expect("create");
    let seen = new_log();
    let task_seen = Arc::clone(&seen);
    let task: Task = Box::new(move || {
        let result = file.write_at(0, b"step");
        task_seen.lock().expect("log").push(format!("{result:?}"));
        if result.is_err() { TaskStep::Done } else { TaskStep::Continue }
    });
    let handle = env.spawn("writer", task);
    env.crash_at_io(3);
    let waited = env.wait(&handle);
    assert!(matches!(waited, Err(Error::TaskCancelled { .. })), "{waited:?}");
    let seen = entries(&seen);
    assert_eq!(seen.len(), 3);
    assert!(seen[2].contains("Crashed"), "{seen:?}");
    assert!(env.is_halted());
}

fn random_order(seed: u64) -> Vec<String> {
    let env = SimEnv::new(seed);
    let log = new_log();
    for name in ["t0", "t1", "t2", "t3"] {
        env.spawn(name, counting_task(name, 3, &log));
    }
    let mut order = Vec::new();
    while let Some((_, name, _)) = env.step_random_task() {
        order.push(name);
    }
    assert_eq!(order, entries(&log), "the reported names are the tasks that ran");
    order
}

#[test]
fn step_random_task_order_is_a_pure_function_of_the_seed() {
    let orders: Vec<Vec<String>> = (0..16).map(random_order).collect();
    for (seed, order) in orders.iter().enumerate() {
        assert_eq!(*order, random_order(seed as u64), "seed {seed} gave another order");
        assert_eq!(order.len(), 12);
        for name in ["t0", "t1", "t2", "t3"] {
            assert_eq!(order.iter().filter(|ran| *ran == name).count(), 3, "{name} ran 3 times");
        }
    }
    assert!(orders.iter().any(|order| *order != orders[0]), "every seed gave the same order");
}

fn buggify_decisions(env: &SimEnv) -> Vec<bool> {
    (0..200).map(|i| env.buggify(if i % 2 == 0 { "site-a" } else { "site-b" })).collect()
}

#[test]
fn buggify_fires_sometimes_and_is_a_function_of_the_seed() {
    let config = FaultConfig { buggify_site_ppm: 1_000_000, buggify_fire_ppm: 500_000, ..FaultConfig::default() };
    let first = buggify_decisions(&SimEnv::with_faults(11, config.clone()));
    let fired = first.iter().filter(|&&fired| fired).count();
    assert!(fired > 50 && fired < 150, "{fired} of 200");
    assert_eq!(first, buggify_decisions(&SimEnv::with_faults(11, config.clone())));
    assert_ne!(first, buggify_decisions(&SimEnv::with_faults(12, config.clone())));

    let env = SimEnv::with_faults(11, config);
    let decisions = buggify_decisions(&env);
    let counts = env.buggify_counts();
    assert_eq!(counts.values().map(|(reached, _)| reached).sum::<u64>(), 200);
    assert_eq!(counts.values().map(|(_, fired)| fired).sum::<u64>(), fired as u64);
    assert_eq!(decisions, first);
    env.set_buggify(false);
    assert!(buggify_decisions(&env).iter().all(|&fired| !fired), "buggify off still fired");
}

#[test]
fn buggify_never_fires_by_default_or_on_real_env() {
    for seed in 0..8 {
        assert!(buggify_decisions(&SimEnv::new(seed)).iter().all(|&fired| !fired), "seed {seed}");
    }
    let real = RealEnv::new();
    assert!((0..200).all(|_| !real.buggify("site-a")));
    assert!(!real.is_simulated());
    assert!(SimEnv::new(0).is_simulated());
}

#[test]
fn a_crash_cancels_tasks_that_own_handles_and_locks() {
    // Cancelling a task drops its closure, and with it the file handles and locks it owns; their drops must not
    // need the world's lock while the crash holds it.
    for crash_by_io in [false, true] {
        let env = SimEnv::new(5);
        let file = env.open(Path::new("f"), OpenOptions::create_new()).expect("create");
        let lock = env.lock(Path::new("LOCK")).expect("lock");
        let mut owned = Some((file, lock));
        let handle = env.spawn(
            "owner",
            Box::new(move || {
                drop(owned.take());
                TaskStep::Done
            }),
        );
        if crash_by_io {
            env.crash_at_io(1);
            assert!(env.list_dir(Path::new("")).is_err_and(|error| error.is_crash()));
            env.restart();
        } else {
            env.crash();
        }
        assert!(matches!(env.wait(&handle), Err(Error::TaskCancelled { .. })));
        assert!(env.lock(Path::new("LOCK")).is_ok(), "the cancelled task's lock was released");
    }
}
