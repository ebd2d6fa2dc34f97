//! Commit throughput and latency on `RealEnv`: durable (`SyncMode::Sync`) single-key transactions from 1, 4 and 8
//! threads, with group commit on and off.
//!
//! * **group commit on**: the engine as it is: concurrent committers share one WAL sync (a batch).
//! * **group commit off**: there is no option to turn batching off, so it is emulated: every `commit()` runs under
//!   one process-wide mutex, so at most one commit is in flight and each commit pays for its own sync.
//!
//! Threads are `env.spawn` tasks (one commit per task step); time is `RealEnv::now`. Each configuration runs for a
//! fixed duration (default 2 s; `HOLDFAST_BENCH_SECS` overrides) in a fresh directory under `/tmp`.
//!
//! ```text
//! cargo run -p engine --release --example commit_bench
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engine::{Db, Options};
use env::{Env, RealEnv, TaskStep};

struct Run {
    commits: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn clear(env: &RealEnv, dir: &Path) -> Result<(), env::Error> {
    if env.exists(dir)? {
        for path in env.list_dir(dir)? {
            env.remove_file(&path)?;
        }
    }
    Ok(())
}

fn run(env: &RealEnv, dir: &Path, threads: usize, grouped: bool, duration: Duration) -> Result<Run, engine::Error> {
    clear(env, dir)?;
    env.create_dir_all(dir)?;
    let db = Db::open(env.clone(), dir, Options::default())?;
    let serial = Arc::new(Mutex::new(()));
    let latencies: Arc<Mutex<Vec<Duration>>> = Arc::new(Mutex::new(Vec::new()));
    let start = env.now();
    let deadline = start + duration;
    let mut handles = Vec::new();
    for thread in 0..threads {
        let (db, env2, serial, latencies) = (db.clone(), env.clone(), Arc::clone(&serial), Arc::clone(&latencies));
        let mut mine = Vec::new();
        let mut i = 0u64;
        let task = Box::new(move || {
            let began = env2.now();
            if began >= deadline {
                latencies.lock().expect("latencies").append(&mut mine);
                return TaskStep::Done;
            }
            let key = format!("t{thread:02}-{i:010}");
            i += 1;
            let commit = || -> Result<(), engine::Error> {
                let mut txn = db.begin()?;
                txn.put(key.as_bytes(), b"0123456789abcdef0123456789abcdef")?;
                txn.commit()
            };
            let result = if grouped {
                commit()
            } else {
                let _one_at_a_time = serial.lock().expect("serial commit lock");
                commit()
            };
            result.expect("a blind single-key commit cannot conflict");
            mine.push(env2.now() - began);
            TaskStep::Continue
        });
        handles.push(env.spawn(&format!("bench-{thread}"), task));
    }
    for handle in &handles {
        env.wait(handle)?;
    }
    let elapsed = env.now() - start;
    db.close()?;
    drop(db);
    clear(env, dir)?;
    let mut latencies = std::mem::take(&mut *latencies.lock().expect("latencies"));
    latencies.sort_unstable();
    Ok(Run { commits: latencies.len(), elapsed, latencies })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: u64 = std::env::var("HOLDFAST_BENCH_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(2);
    let env = RealEnv::new();
    let dir = PathBuf::from(format!("/tmp/holdfast-commit-bench-{}", std::process::id()));
    println!("durable single-key commits, {seconds} s per row (group commit off = commits serialized by a mutex)");
    println!("| threads | group commit | commits/s | p50 latency | p99 latency | commits |");
    println!("|--------:|:-------------|----------:|------------:|------------:|--------:|");
    for threads in [1, 4, 8] {
        for grouped in [true, false] {
            let r = run(&env, &dir, threads, grouped, Duration::from_secs(seconds))?;
            let rate = r.commits as f64 / r.elapsed.as_secs_f64();
            println!(
                "| {threads} | {} | {rate:.0} | {:.3} ms | {:.3} ms | {} |",
                if grouped { "on" } else { "off (serialized)" },
                percentile(&r.latencies, 50).as_secs_f64() * 1e3,
                percentile(&r.latencies, 99).as_secs_f64() * 1e3,
                r.commits
            );
        }
    }
    // `Env` cannot remove a directory: the empty directory stays behind.
    Ok(())
}
