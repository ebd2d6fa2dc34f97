//! holdfast's side-by-side benchmarks. `cargo run --release -- --help`.

mod backend;
mod backends;
mod cpu;
mod machine;
mod report;
mod restore;
mod rows;
mod skew;
mod targets;
mod timed;
mod workloads;
mod zipf;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use backend::{Backend, EngineSpec};
use restore::Pristine;
use workloads::{Ctx, RunOut, Workload};

use machine::{
    cpu_model, fdatasync_probe, holdfast_source, load_warning, machine_name, peak_rss_kib, read_trim, reset_peak_rss,
    today,
};
pub use rows::{EngineMeta, LockHoldRow, Meta, Results, Row};

struct Args {
    quick: bool,
    records: u64,
    warmup: Duration,
    duration: Duration,
    runs: usize,
    threads: Vec<usize>,
    engines: Option<Vec<String>>,
    workloads: Option<Vec<String>>,
    modes: Vec<bool>,
    data_dir: PathBuf,
    out: Option<PathBuf>,
    report_only: Option<PathBuf>,
    write_readme: bool,
    /// `--targets`: only these rows (engine, workload, threads, synced), at the full budget.
    plan: Option<Vec<targets::Cell>>,
}

impl Args {
    /// Whether this run measures `engine`'s `workload` at `threads` in that durability mode.
    #[expect(clippy::manual_contains, reason = "the plan holds &'static str; `contains` would need static names")]
    fn wants(&self, engine: &str, workload: &str, threads: usize, synced: bool) -> bool {
        self.plan.as_ref().is_none_or(|plan| plan.iter().any(|c| *c == (engine, workload, threads, synced)))
    }

    /// Whether this run has any row for `engine` in that durability mode.
    fn wants_session(&self, engine: &str, synced: bool) -> bool {
        self.plan.as_ref().is_none_or(|plan| plan.iter().any(|c| c.0 == engine && c.3 == synced))
    }
}

const HELP: &str = "holdfast-bench: holdfast's engine side by side with RocksDB, LMDB, redb, fjall and sled.

USAGE: cargo run --release --manifest-path bench/Cargo.toml -- [--quick] [OPTIONS]

  --quick               the whole matrix, small: 100k records, 200 ms warm-up, 500 ms runs
                        (default is the full run: 1M records, 1 s warm-up, 5 s runs)
  --targets             exactly the rows of issue 16's targets table (holdfast and each peer it is compared
                        with), at the full budget (1M records, 1 s warm-up + 5 s measured, 3 runs);
                        meta.mode = \"targets\"; takes no other selection or budget option
  --records N           keys loaded (and the bulk-load size)
  --warmup-ms MS        warm-up before each measured run
  --duration-ms MS      measured duration of each run
  --runs N              runs per row, each on a fresh copy of the loaded data set (the row is the median
                        run's), default 3
  --threads 1,4,8       thread counts
  --engines a,b         only these engines (holdfast, rocksdb-pessimistic, rocksdb-optimistic, lmdb, redb, fjall, sled)
  --workloads a,b       only these (bulk-load always runs: it makes the data set), plus write-skew
  --modes sync,nosync   durability modes to run (default both)
  --data-dir DIR        where databases live while running (default bench/target/bench-data)
  --out FILE            results JSON (default bench/results/<date>-<machine>.json)
  --no-readme           do not rewrite bench/README.md's results section and charts
  --report FILE         only regenerate README table and SVG charts from a results JSON
  --lock-hold           holdfast counts how long each commit holds its writer, registry, view, visibility-
                        watermark and log locks (two clock reads per lock taken, so throughput is a little lower):
                        rows get lock_hold, ns per commit and per operation (reads included; the watermark and log
                        per commit only)
";

fn bench_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn parse_args() -> Args {
    let mut a = Args {
        quick: false,
        records: 1_000_000,
        warmup: Duration::from_millis(1000),
        duration: Duration::from_millis(5000),
        runs: 3,
        threads: vec![1, 4, 8],
        engines: None,
        workloads: None,
        modes: vec![true, false],
        data_dir: bench_dir().join("target").join("bench-data"),
        out: None,
        report_only: None,
        write_readme: true,
        plan: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let (mut records, mut warm, mut dur) = (None, None, None);
    let mut i = 0;
    let list = |s: &str| s.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect::<Vec<_>>();
    while i < argv.len() {
        let next = |i: &mut usize| -> String {
            *i += 1;
            argv.get(*i).cloned().unwrap_or_else(|| panic!("{} needs a value", argv[*i - 1]))
        };
        match argv[i].as_str() {
            "--quick" => a.quick = true,
            "--targets" => a.plan = Some(targets::plan()),
            "--records" => records = Some(next(&mut i).parse().expect("--records N")),
            "--warmup-ms" => warm = Some(next(&mut i).parse().expect("--warmup-ms MS")),
            "--duration-ms" => dur = Some(next(&mut i).parse().expect("--duration-ms MS")),
            "--runs" => a.runs = next(&mut i).parse().expect("--runs N"),
            "--threads" => a.threads = list(&next(&mut i)).iter().map(|t| t.parse().expect("thread count")).collect(),
            "--engines" => a.engines = Some(list(&next(&mut i))),
            "--workloads" => a.workloads = Some(list(&next(&mut i))),
            "--modes" => {
                a.modes = list(&next(&mut i))
                    .iter()
                    .map(|m| match m.as_str() {
                        "sync" => true,
                        "nosync" => false,
                        other => panic!("unknown mode {other}"),
                    })
                    .collect()
            }
            "--data-dir" => a.data_dir = PathBuf::from(next(&mut i)),
            "--out" => a.out = Some(PathBuf::from(next(&mut i))),
            "--no-readme" => a.write_readme = false,
            #[cfg(feature = "holdfast")]
            "--lock-hold" => backends::holdfast::LOCK_TIMING.store(true, std::sync::atomic::Ordering::Relaxed),
            "--report" => a.report_only = Some(PathBuf::from(next(&mut i))),
            "-h" | "--help" => {
                print!("{HELP}");
                std::process::exit(0);
            }
            other => {
                eprintln!("unknown argument {other}\n\n{HELP}");
                std::process::exit(2);
            }
        }
        i += 1;
    }
    if a.quick {
        a.records = 100_000;
        a.warmup = Duration::from_millis(200);
        a.duration = Duration::from_millis(500);
    }
    if let Some(r) = records {
        a.records = r;
    }
    if let Some(w) = warm {
        a.warmup = Duration::from_millis(w);
    }
    if let Some(d) = dur {
        a.duration = Duration::from_millis(d);
    }
    if let Some(plan) = &a.plan {
        let others = ["--quick", "--records", "--warmup-ms", "--duration-ms", "--runs", "--threads", "--engines"];
        let others = [others.as_slice(), &["--workloads", "--modes"]].concat();
        if let Some(other) = argv.iter().find(|arg| others.contains(&arg.as_str())) {
            eprintln!("--targets runs a fixed set of rows at the full budget: it takes no {other}\n\n{HELP}");
            std::process::exit(2);
        }
        a.engines = Some(unique(plan.iter().map(|c| c.0)));
        a.workloads = Some(unique(plan.iter().map(|c| c.1)));
        a.threads = plan.iter().map(|c| c.2).collect::<BTreeSet<usize>>().into_iter().collect();
        a.modes = [true, false].into_iter().filter(|m| plan.iter().any(|c| c.3 == *m)).collect();
    }
    assert!(a.runs >= 1 && a.records >= 1000, "need at least one run and 1000 records");
    a
}

/// The distinct names, in first-seen order.
fn unique<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for name in names {
        if !seen.iter().any(|s| s == name) {
            seen.push(name.to_string());
        }
    }
    seen
}

fn median_run(runs: Vec<RunOut>) -> (RunOut, Vec<f64>) {
    let rates: Vec<f64> = runs.iter().map(|r| if r.secs > 0.0 { r.ops as f64 / r.secs } else { 0.0 }).collect();
    let mut idx: Vec<usize> = (0..runs.len()).collect();
    idx.sort_by(|a, b| rates[*a].total_cmp(&rates[*b]));
    let m = idx[idx.len() / 2];
    let run = runs.into_iter().nth(m).expect("median index");
    (run, rates)
}

fn row_from(engine: &str, w: Workload, threads: usize, synced: bool, records: u64, runs: Vec<RunOut>) -> Row {
    let mut row = Row {
        engine: engine.into(),
        workload: w.name().into(),
        threads,
        synced_per_commit: synced,
        records,
        ..Row::default()
    };
    if let Some(e) = runs.iter().find_map(|r| r.error.clone()) {
        row.error = Some(e);
        return row;
    }
    row.cpu_us_per_op = cpu::CpuPerOp::over(&runs.iter().map(|run| (run.cpu, run.ops)).collect::<Vec<_>>());
    let (run, rates) = median_run(runs);
    row.runs_ops_per_sec = rates.iter().map(|r| (r * 10.0).round() / 10.0).collect();
    row.ops_per_sec = Some((run.ops as f64 / run.secs * 10.0).round() / 10.0);
    row.ops = Some(run.ops);
    if run.ops > 0 {
        row.p50_us = Some(run.hist.value_at_quantile(0.50) as f64 / 1000.0);
        row.p99_us = Some(run.hist.value_at_quantile(0.99) as f64 / 1000.0);
    }
    normalize(&mut row);
    row.aborts = Some(run.aborts);
    row.run_seconds = Some((run.secs * 1000.0).round() / 1000.0);
    row
}

/// A run in which no operation finished has no latency (an empty histogram's quantiles read 0): say so.
pub fn normalize(row: &mut Row) {
    if row.error.is_none() && row.ops == Some(0) && row.workload != "write-skew" {
        row.p50_us = None;
        row.p99_us = None;
        let stalled = row.runs_ops_per_sec.iter().filter(|r| **r == 0.0).count();
        row.detail = Some(format!(
            "stalled: no operation finished inside the measured window in {stalled} of {} runs",
            row.runs_ops_per_sec.len()
        ));
    }
}

fn error_row(engine: &str, workload: &str, threads: usize, synced: bool, records: u64, e: String) -> Row {
    Row {
        engine: engine.into(),
        workload: workload.into(),
        threads,
        synced_per_commit: synced,
        records,
        error: Some(e),
        ..Row::default()
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".into()
    }
}

fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(panic_message)
}

fn log(msg: &str) {
    eprintln!("[bench] {msg}");
}

fn print_row(r: &Row) {
    match (&r.error, r.ops_per_sec) {
        (Some(e), _) => log(&format!(
            "{:<22} {:<18} t={} synced={} ERROR {e}",
            r.engine, r.workload, r.threads, r.synced_per_commit
        )),
        (None, Some(ops)) => log(&format!(
            "{:<22} {:<18} t={} synced={:<5} {:>12.1} ops/s  p50 {:>9.1} us  p99 {:>9.1} us  aborts {:>6}  [{}]",
            r.engine,
            r.workload,
            r.threads,
            r.synced_per_commit,
            ops,
            r.p50_us.unwrap_or(0.0),
            r.p99_us.unwrap_or(0.0),
            r.aborts.unwrap_or(0),
            r.layout.clone().unwrap_or_default()
        )),
        _ => {}
    }
    if let Some(cpu) = &r.cpu_us_per_op {
        log(&format!(
            "    CPU per operation: {:.3} us on the workload's threads, {:.3} us on the rest of the process",
            cpu.workers_us, cpu.others_us
        ));
    }
    if let Some(h) = &r.lock_hold {
        log(&format!(
            "    lock hold per commit over {} commits: writer {:.0} ns ({:.2} takes), registry {:.0} ns ({:.2}), \
             view {:.0} ns ({:.2}), watermark {:.0} ns ({:.2}), log {:.0} ns ({:.2}); per op over {} ops: \
             writer {:.0} ns ({:.2}), \
             registry {:.0} ns ({:.2}), view {:.0} ns ({:.2})",
            h.commits,
            h.writer_ns_per_commit,
            h.writer_acquisitions_per_commit,
            h.registry_ns_per_commit,
            h.registry_acquisitions_per_commit,
            h.view_ns_per_commit,
            h.view_acquisitions_per_commit,
            h.watermark_ns_per_commit,
            h.watermark_acquisitions_per_commit,
            h.log_ns_per_commit,
            h.log_acquisitions_per_commit,
            h.ops,
            h.writer_ns_per_op,
            h.writer_acquisitions_per_op,
            h.registry_ns_per_op,
            h.registry_acquisitions_per_op,
            h.view_ns_per_op,
            h.view_acquisitions_per_op
        ));
        log(&format!(
            "    waits per commit: to take writer {:.0} ns, registry {:.0} ns, view {:.0} ns, watermark {:.0} ns, \
             log {:.0} ns; for visibility {:.0} ns ({:.2} waits), for the batch {:.0} ns ({:.2} waits)",
            h.writer_wait_ns_per_commit,
            h.registry_wait_ns_per_commit,
            h.view_wait_ns_per_commit,
            h.watermark_wait_ns_per_commit,
            h.log_wait_ns_per_commit,
            h.visibility_wait_ns_per_commit,
            h.visibility_waits_per_commit,
            h.batch_wait_ns_per_commit,
            h.batch_waits_per_commit
        ));
    }
}

/// One engine in one durability mode: bulk-load runs, then every timed workload on the loaded data.
fn session(spec: &EngineSpec, synced: bool, args: &Args, workloads: &[Workload], rows: &mut Vec<Row>) {
    let mode = if synced { "sync" } else { "nosync" };
    let base = args.data_dir.join(format!("{}-{mode}", spec.name.replace(' ', "_")));
    let _ = std::fs::remove_dir_all(&base);
    let push = |rows: &mut Vec<Row>, r: Row| {
        print_row(&r);
        rows.push(r);
    };
    // Bulk load: `runs` loads into fresh directories; the last one is kept for the workloads.
    let mut loads = Vec::new();
    let mut kept: Option<Arc<dyn Backend>> = None;
    let reset = reset_peak_rss();
    for run in 0..args.runs {
        let dir = base.join(format!("load-{run}"));
        drop(kept.take());
        if run > 0 {
            let _ = std::fs::remove_dir_all(base.join(format!("load-{}", run - 1)));
        }
        let _ = std::fs::create_dir_all(&dir);
        let opened = catch(|| (spec.open)(&dir, synced)).and_then(|r| r.map_err(|e| format!("open failed: {e:?}")));
        let b = match opened {
            Ok(b) => {
                assert_eq!(b.synced(), synced, "{} opened in the wrong durability mode", spec.name);
                b
            }
            Err(e) => {
                push(rows, error_row(spec.name, "*", 1, synced, args.records, e));
                let _ = std::fs::remove_dir_all(&base);
                return;
            }
        };
        let out = catch(|| {
            let mut out = workloads::bulk_load(b.as_ref(), args.records, 1000, run as u64);
            // The flush is part of the load: the data must reach SSTables (LSM) or be persisted.
            let t = Instant::now();
            if out.error.is_none()
                && let Err(e) = b.flush()
            {
                out.error = Some(format!("flush: {e:?}"));
            }
            out.secs += t.elapsed().as_secs_f64();
            out
        })
        .unwrap_or_else(|e| RunOut {
            ops: 0,
            all_ops: 0,
            aborts: 0,
            secs: 0.0,
            hist: workloads::new_hist(),
            error: Some(e),
            cpu: None,
        });
        loads.push(out);
        kept = Some(b);
    }
    let b = kept.expect("at least one run");
    let mut row = row_from(spec.name, Workload::BulkLoad, 1, synced, args.records, loads);
    row.peak_rss_kib = peak_rss_kib(reset);
    row.layout = Some(b.layout());
    row.detail =
        Some("ops = keys loaded; p50/p99 = latency of one 1000-key commit; time includes the final flush".into());
    let load_failed = row.error.is_some();
    push(rows, row);
    if load_failed {
        let _ = std::fs::remove_dir_all(&base);
        return;
    }
    let setup = catch(|| {
        workloads::load_tpcc(b.as_ref())?;
        b.flush().map_err(|e| format!("flush: {e:?}"))
    })
    .and_then(|r| r);
    if let Err(e) = setup {
        push(rows, error_row(spec.name, "tpcc-setup", 1, synced, args.records, e));
        return;
    }
    // ADR-0200: every timed run opens a fresh copy of the loaded data set, so it starts from the engine's recovered
    // on-disk state (RocksDB's TransactionDB, which has no flush in the crate, flushes its recovered memtable to L0
    // at each open) and inherits nothing from the runs and rows before it.
    drop(b);
    let pristine = Pristine::new(base.join(format!("load-{}", args.runs - 1)), base.join("work"));
    let ctx = Ctx::new(args.records);
    for &w in workloads {
        let threads: Vec<usize> =
            args.threads.iter().copied().filter(|&t| args.wants(spec.name, w.name(), t, synced)).collect();
        let of = timed::RowsOf { spec, synced, args, pristine: &pristine, ctx: &ctx, w };
        for row in timed::timed_rows(&of, &threads) {
            push(rows, row);
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}

fn main() {
    let args = parse_args();
    if let Some(path) = &args.report_only {
        let text = std::fs::read_to_string(path).expect("read results JSON");
        let mut results: Results = serde_json::from_str(&text).expect("parse results JSON");
        results.rows.iter_mut().for_each(normalize);
        std::fs::write(path, serde_json::to_string_pretty(&results).expect("serialize") + "\n").expect("rewrite JSON");
        report::write_all(&results, path, &bench_dir());
        return;
    }
    let wall = Instant::now();
    let all = backend::all_engines();
    let selected: Vec<EngineSpec> = match &args.engines {
        Some(names) => {
            for n in names {
                assert!(all.iter().any(|s| s.name == n), "unknown engine {n}");
            }
            all.iter().filter(|s| names.iter().any(|n| n == s.name)).cloned().collect()
        }
        None => all.clone(),
    };
    let workloads: Vec<Workload> = match &args.workloads {
        Some(names) => names
            .iter()
            .filter(|n| *n != "bulk-load" && *n != "write-skew")
            .map(|n| Workload::from_name(n).unwrap_or_else(|| panic!("unknown workload {n}")))
            .collect(),
        None => Workload::TIMED.to_vec(),
    };
    let do_skew = args.plan.is_none() && args.workloads.as_ref().is_none_or(|w| w.iter().any(|n| n == "write-skew"));
    let mut meta = Meta {
        date: today(),
        machine: machine_name(),
        mode: if args.plan.is_some() {
            "targets".into()
        } else if args.quick {
            "quick".into()
        } else {
            "full".into()
        },
        command: std::env::args().collect::<Vec<_>>().join(" "),
        records: args.records,
        warmup_ms: args.warmup.as_millis() as u64,
        duration_ms: args.duration.as_millis() as u64,
        runs: args.runs,
        threads: args.threads.clone(),
        cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        cpu_model: cpu_model(),
        kernel: read_trim("/proc/sys/kernel/osrelease"),
        loadavg_start: read_trim("/proc/loadavg"),
        fdatasync_p50_us: fdatasync_probe(&args.data_dir),
        holdfast_source: holdfast_source(),
        engines: all
            .iter()
            .map(|s| EngineMeta { name: s.name.into(), built: s.built, isolation: s.isolation.into() })
            .collect(),
        ..Meta::default()
    };
    let cpus = meta.cpus;
    meta.load_warning = load_warning("start", &meta.loadavg_start, cpus);
    if let Some(warning) = &meta.load_warning {
        log(&format!("WARNING: {warning}"));
    }
    let cells = match &args.plan {
        Some(plan) => plan.len() * args.runs,
        None => selected.len() * args.modes.len() * workloads.len() * args.threads.len() * args.runs,
    };
    let est = cells as f64 * (args.warmup + args.duration).as_secs_f64();
    log(&format!(
        "{} engines x {} modes x {} workloads x {} thread counts x {} runs: {:.0} s of timed runs plus loads",
        selected.len(),
        args.modes.len(),
        workloads.len(),
        args.threads.len(),
        args.runs,
        est
    ));
    log(&format!("fdatasync p50 on this disk: {:.0} us", meta.fdatasync_p50_us));
    let mut rows = Vec::new();
    let do_sessions = args.workloads.as_ref().is_none_or(|w| w.iter().any(|n| n != "write-skew"));
    for spec in selected.iter().filter(|_| do_sessions) {
        if !spec.built {
            let e = format!("not built: cargo feature `{}` disabled or failed to build", spec.feature);
            for &synced in &args.modes {
                let r = error_row(spec.name, "*", 1, synced, args.records, e.clone());
                print_row(&r);
                rows.push(r);
            }
            continue;
        }
        for &synced in args.modes.iter().filter(|&&synced| args.wants_session(spec.name, synced)) {
            log(&format!("== {} synced_per_commit={synced}", spec.name));
            session(spec, synced, &args, &workloads, &mut rows);
        }
    }
    if do_skew {
        let mut specs: Vec<EngineSpec> = selected.clone();
        if args.engines.is_none() {
            specs.extend(backend::write_skew_extras());
        }
        for spec in &specs {
            let r = skew::doctors(spec, &args.data_dir);
            log(&format!(
                "{:<34} write-skew: {} {}",
                r.engine,
                r.outcome.clone().unwrap_or_else(|| "ERROR".into()),
                r.detail.clone().or(r.error.clone()).unwrap_or_default()
            ));
            rows.push(r);
        }
    }
    meta.loadavg_end = read_trim("/proc/loadavg");
    if let Some(warning) = load_warning("end", &meta.loadavg_end, cpus) {
        log(&format!("WARNING: {warning}"));
        meta.load_warning = Some(match meta.load_warning.take() {
            Some(start) => format!("{start}; {warning}"),
            None => warning,
        });
    }
    meta.wall_seconds = (wall.elapsed().as_secs_f64() * 10.0).round() / 10.0;
    let results = Results { meta, rows };
    let out = args.out.clone().unwrap_or_else(|| {
        bench_dir().join("results").join(format!("{}-{}.json", results.meta.date, results.meta.machine))
    });
    let _ = std::fs::create_dir_all(out.parent().unwrap_or(Path::new(".")));
    std::fs::write(&out, serde_json::to_string_pretty(&results).expect("serialize") + "\n").expect("write results");
    log(&format!("wrote {} ({:.0} s wall)", out.display(), results.meta.wall_seconds));
    if args.write_readme {
        report::write_all(&results, &out, &bench_dir());
    }
}
