//! The workloads, one operation at a time, and the timed multi-threaded runner.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::backend::{BErr, Backend, TxOps};
use crate::cpu::{self, RunCpu};
use crate::zipf::{Rng, ScrambledZipfian};

pub const KEY_BYTES: usize = 16;
pub const VALUE_BYTES: usize = 100;
/// TPC-C-like tables: one warehouse (TPC-C binds up to 10 terminals to a warehouse: our 1-8 threads share it).
pub const DISTRICTS: u64 = 10;
pub const ITEMS: u64 = 100_000;
pub const ORDER_LINES: usize = 10;
/// How many times an aborted transaction is retried before the row is reported as failed.
pub const RETRIES_MAX: u64 = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    BulkLoad,
    YcsbA,
    YcsbB,
    YcsbC,
    YcsbE,
    YcsbF,
    TpccNewOrder,
    SingleKeyCommit,
}

impl Workload {
    pub const TIMED: [Workload; 7] = [
        Workload::YcsbC,
        Workload::YcsbB,
        Workload::YcsbA,
        Workload::YcsbF,
        Workload::YcsbE,
        Workload::TpccNewOrder,
        Workload::SingleKeyCommit,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Workload::BulkLoad => "bulk-load",
            Workload::YcsbA => "ycsb-a",
            Workload::YcsbB => "ycsb-b",
            Workload::YcsbC => "ycsb-c",
            Workload::YcsbE => "ycsb-e",
            Workload::YcsbF => "ycsb-f",
            Workload::TpccNewOrder => "tpcc-new-order",
            Workload::SingleKeyCommit => "single-key-commit",
        }
    }
    pub fn from_name(s: &str) -> Option<Workload> {
        [Workload::BulkLoad].into_iter().chain(Self::TIMED).find(|w| w.name() == s)
    }
    pub fn describe(self) -> &'static str {
        match self {
            Workload::BulkLoad => "load N keys in random order, 1000 keys per commit, one thread; then flush",
            Workload::YcsbA => "50% read / 50% update (blind one-key write transaction), scrambled zipfian",
            Workload::YcsbB => "95% read / 5% update, scrambled zipfian",
            Workload::YcsbC => "100% read, scrambled zipfian",
            Workload::YcsbE => "95% scan of 1-100 rows from a zipfian start / 5% insert of a new key",
            Workload::YcsbF => "50% read / 50% read-modify-write in one transaction, scrambled zipfian",
            Workload::TpccNewOrder => {
                "one transaction: read+increment a district counter (1 warehouse, 10 districts), read 10 items of 100k, write 10 order lines"
            }
            Workload::SingleKeyCommit => "one transaction writing one uniformly chosen key, commit",
        }
    }
}

/// The most bytes a key the workloads build takes (`ol` + 14 digits is the longest, 16 like the rest).
const WORKLOAD_KEY_BYTES_MAX: usize = 16;

/// `prefix` then each `(number, width)` in decimal, zero-padded to its width, in one allocation of the key's size:
/// `format!`'s string grows by reallocation, and at two threads those reallocations waited on glibc's arena lock
/// behind the engine's frees (the harness's own cost, in every engine's row).
fn workload_key(prefix: &[u8], fields: &[(u64, usize)]) -> Vec<u8> {
    let mut key = Vec::with_capacity(WORKLOAD_KEY_BYTES_MAX);
    key.extend_from_slice(prefix);
    for &(number, width) in fields {
        let start = key.len();
        key.resize(start + width, b'0');
        let mut rest = number;
        for digit in key[start..].iter_mut().rev() {
            *digit = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        assert_eq!(rest, 0, "{number} is wider than {width} digits");
    }
    key
}

pub fn ycsb_key(n: u64) -> Vec<u8> {
    let k = workload_key(b"user", &[(n, 12)]);
    debug_assert_eq!(k.len(), KEY_BYTES);
    k
}
fn district_key(d: u64) -> Vec<u8> {
    workload_key(b"dist", &[(d, 12)])
}
fn item_key(i: u64) -> Vec<u8> {
    workload_key(b"item", &[(i, 12)])
}
fn order_line_key(d: u64, o: u64, line: usize) -> Vec<u8> {
    workload_key(b"ol", &[(d, 2), (o, 10), (line as u64, 2)])
}

pub fn value(rng: &mut Rng) -> Vec<u8> {
    let mut v = Vec::with_capacity(VALUE_BYTES);
    while v.len() < VALUE_BYTES {
        v.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    v.truncate(VALUE_BYTES);
    v
}

/// What every operation of a run shares.
pub struct Ctx {
    pub records: u64,
    pub zipf: ScrambledZipfian,
    pub next_insert: AtomicU64,
}

impl Ctx {
    pub fn new(records: u64) -> Self {
        Ctx { records, zipf: ScrambledZipfian::new(0, records - 1), next_insert: AtomicU64::new(records) }
    }
}

/// Run `body` as a transaction until it commits; returns the number of aborts.
pub fn retry_txn(b: &dyn Backend, body: &mut dyn FnMut(&mut dyn TxOps) -> Result<(), BErr>) -> Result<u64, String> {
    let mut aborts = 0;
    loop {
        match b.txn(body) {
            Ok(internal) => return Ok(aborts + internal),
            Err(BErr::Conflict(e)) => {
                aborts += 1;
                if aborts > RETRIES_MAX {
                    return Err(format!("gave up after {RETRIES_MAX} aborts, last: {e}"));
                }
            }
            Err(BErr::Other(e)) => return Err(e),
        }
    }
}

fn read(b: &dyn Backend, k: u64) -> Result<u64, String> {
    match b.get(&ycsb_key(k)) {
        Ok(Some(_)) => Ok(0),
        Ok(None) => Err(format!("loaded key {k} missing")),
        Err(BErr::Conflict(e) | BErr::Other(e)) => Err(e),
    }
}

fn update(b: &dyn Backend, k: u64, rng: &mut Rng) -> Result<u64, String> {
    let (key, val) = (ycsb_key(k), value(rng));
    retry_txn(b, &mut |t| t.put(&key, &val))
}

fn read_modify_write(b: &dyn Backend, k: u64, rng: &mut Rng) -> Result<u64, String> {
    let (key, val) = (ycsb_key(k), value(rng));
    retry_txn(b, &mut |t| {
        let old = t.get(&key)?.ok_or_else(|| BErr::Other(format!("loaded key {k} missing")))?;
        let mut new = val.clone();
        new[0] = old[0].wrapping_add(1);
        t.put(&key, &new)
    })
}

fn new_order(b: &dyn Backend, rng: &mut Rng) -> Result<u64, String> {
    let d = rng.below(DISTRICTS);
    let mut items: Vec<u64> = (0..ORDER_LINES).map(|_| rng.below(ITEMS)).collect();
    items.sort_unstable();
    let dk = district_key(d);
    retry_txn(b, &mut |t| {
        let v = t.get(&dk)?.ok_or_else(|| BErr::Other(format!("district {d} missing")))?;
        let o = u64::from_le_bytes(v[..8].try_into().expect("8 bytes"));
        let mut nv = v.clone();
        nv[..8].copy_from_slice(&(o + 1).to_le_bytes());
        t.put(&dk, &nv)?;
        for (line, item) in items.iter().enumerate() {
            let iv = t.get(&item_key(*item))?.ok_or_else(|| BErr::Other(format!("item {item} missing")))?;
            let mut ol = iv;
            ol[..8].copy_from_slice(&o.to_le_bytes());
            t.put(&order_line_key(d, o, line), &ol)?;
        }
        Ok(())
    })
}

/// One operation of `w`; returns the aborts it took.
pub fn op(w: Workload, b: &dyn Backend, ctx: &Ctx, rng: &mut Rng) -> Result<u64, String> {
    let dice = rng.below(100);
    match w {
        Workload::YcsbC => read(b, ctx.zipf.next(rng)),
        Workload::YcsbB if dice < 95 => read(b, ctx.zipf.next(rng)),
        Workload::YcsbB => update(b, ctx.zipf.next(rng), rng),
        Workload::YcsbA if dice < 50 => read(b, ctx.zipf.next(rng)),
        Workload::YcsbA => update(b, ctx.zipf.next(rng), rng),
        Workload::YcsbF if dice < 50 => read(b, ctx.zipf.next(rng)),
        Workload::YcsbF => read_modify_write(b, ctx.zipf.next(rng), rng),
        Workload::YcsbE if dice < 95 => {
            // YCSB's scan: a start key and a row count (keys inserted in order, "insertorder=ordered").
            let k = ctx.zipf.next(rng);
            let len = 1 + rng.below(100);
            let n = b.scan(&ycsb_key(k), len as usize).map_err(|e| format!("{e:?}"))?;
            if n == 0 { Err(format!("scan from loaded key {k} found nothing")) } else { Ok(0) }
        }
        Workload::YcsbE => {
            let k = ctx.next_insert.fetch_add(1, Ordering::Relaxed);
            update(b, k, rng)
        }
        Workload::TpccNewOrder => new_order(b, rng),
        Workload::SingleKeyCommit => update(b, rng.below(ctx.records), rng),
        Workload::BulkLoad => unreachable!("bulk load is not a timed operation"),
    }
}

/// The outcome of one run.
pub struct RunOut {
    pub ops: u64,
    /// Every operation that finished, warm-up included: what `--lock-hold`'s per-op figures divide by (the
    /// engine's lock counters run through the warm-up too).
    pub all_ops: u64,
    pub aborts: u64,
    pub secs: f64,
    pub hist: Histogram<u64>,
    pub error: Option<String>,
    /// Where the measured window's CPU went (ADR-0214); `None` off Linux and for bulk loads.
    pub cpu: Option<RunCpu>,
}

pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 120_000_000_000, 3).expect("histogram bounds")
}

/// Warm up, then measure for `duration`, with `threads` threads each running `w` back to back.
/// Latency is recorded in nanoseconds per operation (retries included) into per-thread histograms, merged.
pub fn timed_run(
    b: &Arc<dyn Backend>,
    ctx: &Ctx,
    w: Workload,
    threads: usize,
    warmup: Duration,
    duration: Duration,
    seed: u64,
) -> RunOut {
    // 0 warm-up, 1 measuring, 2 stop
    let phase = AtomicU8::new(0);
    let failed = AtomicBool::new(false);
    let mut total = RunOut { ops: 0, all_ops: 0, aborts: 0, secs: 0.0, hist: new_hist(), error: None, cpu: None };
    let mut process_ns = None;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (phase, failed, b) = (&phase, &failed, Arc::clone(b));
                s.spawn(move || {
                    let mut rng = Rng::new(seed.wrapping_mul(1_000_003).wrapping_add(i as u64));
                    let mut hist = new_hist();
                    let (mut ops, mut all_ops, mut aborts, mut error) = (0u64, 0u64, 0u64, None);
                    // This thread's CPU from the first operation it starts in the measured window to its last.
                    let (mut window_seen, mut cpu_from, mut cpu_ns) = (false, None, None);
                    loop {
                        let p = phase.load(Ordering::Acquire);
                        if p == 2 {
                            cpu_ns = cpu_from.zip(cpu::thread_cpu_ns()).map(|(from, to)| to.saturating_sub(from));
                            break;
                        }
                        if p == 1 && !window_seen {
                            (window_seen, cpu_from) = (true, cpu::thread_cpu_ns());
                        }
                        let t0 = Instant::now();
                        match op(w, b.as_ref(), ctx, &mut rng) {
                            Ok(a) => {
                                let ns = t0.elapsed().as_nanos() as u64;
                                all_ops += 1;
                                if p == 1 && phase.load(Ordering::Acquire) == 1 {
                                    hist.saturating_record(ns.max(1));
                                    ops += 1;
                                    aborts += a;
                                }
                            }
                            Err(e) => {
                                error = Some(e);
                                failed.store(true, Ordering::Release);
                                phase.store(2, Ordering::Release);
                                break;
                            }
                        }
                    }
                    (hist, ops, all_ops, aborts, error, cpu_ns)
                })
            })
            .collect();
        std::thread::sleep(warmup);
        if phase.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            let (start, process_from) = (Instant::now(), cpu::process_cpu_ns());
            // Sleep in slices so a failure ends the run early.
            while start.elapsed() < duration && !failed.load(Ordering::Acquire) {
                std::thread::sleep((duration - start.elapsed().min(duration)).min(Duration::from_millis(50)));
            }
            phase.store(2, Ordering::Release);
            total.secs = start.elapsed().as_secs_f64();
            process_ns = process_from.zip(cpu::process_cpu_ns()).map(|(from, to)| to.saturating_sub(from));
        }
        let mut workers_ns = Some(0u64);
        for h in handles {
            match h.join() {
                Ok((hist, ops, all_ops, aborts, error, cpu_ns)) => {
                    workers_ns = workers_ns.zip(cpu_ns).map(|(sum, ns)| sum + ns);
                    total.hist.add(&hist).expect("same histogram bounds");
                    total.ops += ops;
                    total.all_ops += all_ops;
                    total.aborts += aborts;
                    if total.error.is_none() {
                        total.error = error;
                    }
                }
                Err(_) => total.error = Some("a worker thread panicked".into()),
            }
        }
        total.cpu = process_ns.zip(workers_ns).map(|(process_ns, workers_ns)| RunCpu { workers_ns, process_ns });
    });
    total
}

/// Bulk load `records` YCSB keys in a permuted (random-looking) order, `batch` keys per commit.
/// The histogram holds per-commit latencies; `ops` counts keys.
pub fn bulk_load(b: &dyn Backend, records: u64, batch: usize, seed: u64) -> RunOut {
    let mut rng = Rng::new(seed);
    let mut hist = new_hist();
    let start = Instant::now();
    let mut rows = Vec::with_capacity(batch);
    // i -> i * P mod N is a bijection when P is a prime that does not divide N.
    const P: u128 = 1_000_000_007;
    let mut error = None;
    for i in 0..records {
        let k = ((u128::from(i) * P) % u128::from(records)) as u64;
        rows.push((ycsb_key(k), value(&mut rng)));
        if rows.len() == batch || i + 1 == records {
            let t0 = Instant::now();
            if let Err(e) = b.load(&rows) {
                error = Some(format!("{e:?}"));
                break;
            }
            hist.saturating_record((t0.elapsed().as_nanos() as u64).max(1));
            rows.clear();
        }
    }
    RunOut { ops: records, all_ops: records, aborts: 0, secs: start.elapsed().as_secs_f64(), hist, error, cpu: None }
}

/// The TPC-C-like tables (untimed): 10 districts and `ITEMS` items.
pub fn load_tpcc(b: &dyn Backend) -> Result<(), String> {
    let mut rng = Rng::new(42);
    let mut rows: Vec<(Vec<u8>, Vec<u8>)> = (0..DISTRICTS)
        .map(|d| {
            let mut v = value(&mut rng);
            v[..8].copy_from_slice(&1u64.to_le_bytes());
            (district_key(d), v)
        })
        .collect();
    for i in 0..ITEMS {
        rows.push((item_key(i), value(&mut rng)));
        if rows.len() == 1000 {
            b.load(&rows).map_err(|e| format!("{e:?}"))?;
            rows.clear();
        }
    }
    if !rows.is_empty() {
        b.load(&rows).map_err(|e| format!("{e:?}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys are byte for byte what `format!` wrote before (the stored layout, and so every earlier row, is
    /// unchanged), and a number too wide for its field is refused rather than widened.
    #[test]
    fn workload_keys_match_the_formatted_ones() {
        for n in [0, 7, 42, 99_999, 123_456_789_012, 999_999_999_999] {
            assert_eq!(ycsb_key(n), format!("user{n:012}").into_bytes());
            assert_eq!(item_key(n), format!("item{n:012}").into_bytes());
            assert_eq!(district_key(n), format!("dist{n:012}").into_bytes());
        }
        for (d, o, line) in [(0, 0, 0), (9, 1_234_567, 10), (42, 9_999_999_999, 99)] {
            assert_eq!(order_line_key(d, o, line), format!("ol{d:02}{o:010}{line:02}").into_bytes());
        }
        assert!(std::panic::catch_unwind(|| ycsb_key(1_000_000_000_000)).is_err());
    }
}
