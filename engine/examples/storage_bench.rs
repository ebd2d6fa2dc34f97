//! Storage throughput on `RealEnv`: fill N keys (16-byte keys, 100-byte values), then N random point reads, then
//! one full scan. Writes use `SyncMode::NoSync` (acknowledged after the WAL append, not synced: this measures the
//! LSM, not the disk's fsync latency). Default N = 1,000,000; `HOLDFAST_BENCH_KEYS` overrides.
//!
//! ```text
//! cargo run -p engine --release --example storage_bench
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use engine::{Db, Options, SyncMode};
use env::{DeterministicRng, Env, RealEnv};

fn key(i: u64) -> [u8; 16] {
    // A scrambled, fixed-width key: fills arrive in random key order.
    let scrambled = i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&scrambled.to_be_bytes());
    key[8..].copy_from_slice(&i.to_be_bytes());
    key
}

fn value(i: u64) -> Vec<u8> {
    let mut value = format!("value-{i:020}-").into_bytes();
    value.resize(100, b'x');
    value
}

fn clear(env: &RealEnv, dir: &Path) -> Result<(), env::Error> {
    if env.exists(dir)? {
        for path in env.list_dir(dir)? {
            env.remove_file(&path)?;
        }
    }
    Ok(())
}

fn report(name: &str, ops: u64, elapsed: Duration) {
    println!(
        "| {name} | {ops} | {:.2} s | {:.0} ops/s |",
        elapsed.as_secs_f64(),
        ops as f64 / elapsed.as_secs_f64().max(1e-9)
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = std::env::var("HOLDFAST_BENCH_KEYS").ok().and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let env = RealEnv::new();
    let dir = PathBuf::from(format!("/tmp/holdfast-storage-bench-{}", std::process::id()));
    clear(&env, &dir)?;
    env.create_dir_all(&dir)?;
    let db = Db::open(env.clone(), &dir, Options::default().with_sync_mode(SyncMode::NoSync))?;
    println!("{n} keys, 16-byte keys, 100-byte values, SyncMode::NoSync, default options");
    println!("| phase | ops | time | throughput |");
    println!("|:------|----:|-----:|-----------:|");

    let start = env.now();
    for i in 0..n {
        db.put(&key(i), &value(i))?;
    }
    report("fill (put, random key order)", n, env.now() - start);

    let mut rng = DeterministicRng::new(42);
    let start = env.now();
    for _ in 0..n {
        let i = rng.below(n);
        let got = db.get(&key(i))?;
        assert_eq!(got.as_deref(), Some(value(i).as_slice()), "key {i}");
    }
    report("random reads (get)", n, env.now() - start);

    let start = env.now();
    let mut r = db.begin_read()?;
    let mut rows = 0u64;
    for row in r.scan(..)? {
        let (k, v) = row?;
        assert_eq!((k.len(), v.len()), (16, 100));
        rows += 1;
    }
    drop(r);
    assert_eq!(rows, n, "the full scan returned every key");
    report("full scan (read transaction, `..`)", rows, env.now() - start);
    let stats = db.stats();
    println!(
        "tables per level: {:?}, flushes: {}, compactions: {}",
        stats.tables_per_level, stats.flush_count, stats.compaction_count
    );
    db.close()?;
    drop(db);
    clear(&env, &dir)?;
    Ok(())
}
