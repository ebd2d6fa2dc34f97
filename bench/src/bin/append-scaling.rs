//! `append-scaling`: how much of a log write two (or more) threads can overlap on this machine's file system
//! (ADR-0202). Each case has every thread `pwrite` small records at disjoint offsets, with no lock of ours unless
//! the case names one, and reports writes per second at each thread count and the ratio to one thread in the
//! same run. After every run the files are read back and every record checked, so a case that lost or misplaced
//! a write fails instead of reporting a speed.
//!
//! Like the rest of `bench`, it measures the host: it calls `std::fs`, `std::thread` and the wall clock directly,
//! outside `Env` (bench is its own workspace, outside the determinism rule), and shapes no simulated run.
//!
//! ```text
//! cargo run --release --bin append-scaling -- [--dir DIR] [--threads 1,2] [--runs 3] [--record-bytes 100]
//!     [--writes 400000] [--out FILE]
//! ```

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

#[path = "../scaling_common.rs"]
mod scaling_common;
use scaling_common::{RUNS_MAX, THREADS_MAX, median, parse_list, parse_number, probe_main, write_json};

/// The most writes one run makes, over all its threads.
const WRITES_MAX: u64 = 100_000_000;
/// The bytes a prefill writes at a time.
const PREFILL_CHUNK_BYTES: usize = 1 << 20;
/// A record's header: its index, little-endian.
const HEADER_BYTES: usize = 8;

const USAGE: &str = "append-scaling: how much of a log write threads overlap on one file system (ADR-0202)

Every case has each thread pwrite records of --record-bytes at disjoint offsets; a run makes --writes writes in
all, split evenly over its threads. The thread counts take turns run by run (1, 2, 1, 2, ...), and each run's files
are read back and every record checked before its speed counts.

Cases:
  one-file-append            every thread appends to one new file (offsets from a shared counter): a log that
                             committers write without a lock of ours
  one-file-append-locked     the same, each write under one mutex: a log written under a log lock
  file-per-thread-append     each thread appends to a new file of its own
  one-file-overwrite         one file, written full and synced first: no write changes its size
  file-per-thread-overwrite  a file per thread, each written full and synced first

Options:
  --dir DIR            where the files go (default: a new directory under the system's temporary directory);
                       measure on the file system the database would use
  --threads LIST       thread counts (default 1,2)
  --runs N             runs per case and thread count (default 3)
  --record-bytes N     bytes per write, at least 8 (default 100, about an unsynced single-key commit's record)
  --writes N           writes per run over all threads (default 400000)
  --out FILE           also write the results as JSON
  --help               this text";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
enum Case {
    OneFileAppend,
    OneFileAppendLocked,
    FilePerThreadAppend,
    OneFileOverwrite,
    FilePerThreadOverwrite,
}

impl Case {
    const ALL: [Case; 5] = [
        Case::OneFileAppend,
        Case::OneFileAppendLocked,
        Case::FilePerThreadAppend,
        Case::OneFileOverwrite,
        Case::FilePerThreadOverwrite,
    ];

    fn name(self) -> &'static str {
        match self {
            Case::OneFileAppend => "one-file-append",
            Case::OneFileAppendLocked => "one-file-append-locked",
            Case::FilePerThreadAppend => "file-per-thread-append",
            Case::OneFileOverwrite => "one-file-overwrite",
            Case::FilePerThreadOverwrite => "file-per-thread-overwrite",
        }
    }

    fn file_per_thread(self) -> bool {
        matches!(self, Case::FilePerThreadAppend | Case::FilePerThreadOverwrite)
    }

    fn prefilled(self) -> bool {
        matches!(self, Case::OneFileOverwrite | Case::FilePerThreadOverwrite)
    }
}

#[derive(Debug)]
struct Args {
    dir: Option<PathBuf>,
    threads: Vec<usize>,
    runs: usize,
    record_bytes: usize,
    writes: u64,
    out: Option<PathBuf>,
}

fn parse_args(mut words: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut args = Args { dir: None, threads: vec![1, 2], runs: 3, record_bytes: 100, writes: 400_000, out: None };
    while let Some(word) = words.next() {
        let mut value = || words.next().ok_or_else(|| format!("{word} needs a value"));
        match word.as_str() {
            "--help" | "-h" => return Ok(None),
            "--dir" => args.dir = Some(PathBuf::from(value()?)),
            "--out" => args.out = Some(PathBuf::from(value()?)),
            "--threads" => args.threads = parse_list(&value()?)?,
            "--runs" => args.runs = parse_number(&word, &value()?, 1, RUNS_MAX as u64)? as usize,
            "--record-bytes" => {
                args.record_bytes = parse_number(&word, &value()?, HEADER_BYTES as u64, 1 << 20)? as usize
            }
            "--writes" => args.writes = parse_number(&word, &value()?, 1, WRITES_MAX)?,
            _ => return Err(format!("unknown option {word:?} (see --help)")),
        }
    }
    if args.threads.iter().any(|&threads| args.writes < threads as u64) {
        return Err(format!("--writes {} is fewer than a thread count in {:?}", args.writes, args.threads));
    }
    Ok(Some(args))
}

fn fill_record(bytes: &mut [u8], index: u64) {
    bytes.fill((index % 251) as u8);
    bytes[..HEADER_BYTES].copy_from_slice(&index.to_le_bytes());
}

/// Where a run's writes land: (file, offset) of write `index` (of `writes`) by `thread` (of `threads`). A file of
/// its own per thread holds that thread's writes in order; one shared file holds them in index order.
fn place(case: Case, index: u64, thread: usize, threads: usize, record_bytes: usize) -> (usize, u64) {
    match case.file_per_thread() {
        true => (thread, index / threads as u64 * record_bytes as u64),
        false => (0, index * record_bytes as u64),
    }
}

/// One run: `threads` threads make `writes` writes in all; the wall time from the first thread's start to the last
/// thread's end, each read by the writer threads themselves (a clock read by the spawning thread after the start
/// barrier can come after the writes, when that thread is descheduled).
fn run(case: Case, dir: &Path, threads: usize, writes: u64, record_bytes: usize) -> Result<Duration, String> {
    let files = open_files(case, dir, threads, writes, record_bytes)?;
    let next = Arc::new(AtomicU64::new(0));
    let lock = Arc::new(Mutex::new(()));
    let start = Arc::new(Barrier::new(threads + 1));
    let mut workers = Vec::new();
    for thread in 0..threads {
        let (files, next, lock, start) = (Arc::clone(&files), Arc::clone(&next), Arc::clone(&lock), Arc::clone(&start));
        workers.push(std::thread::spawn(move || -> Result<(Instant, Instant), String> {
            start.wait();
            let mut bytes = vec![0; record_bytes];
            let began = Instant::now();
            // Shared file: the next index from the counter. File per thread: this thread's own indexes.
            let mut own = thread as u64;
            loop {
                let index = match case.file_per_thread() {
                    true => {
                        own += threads as u64;
                        own - threads as u64
                    }
                    false => next.fetch_add(1, Ordering::Relaxed),
                };
                if index >= writes {
                    return Ok((began, Instant::now()));
                }
                let (file, offset) = place(case, index, thread, threads, record_bytes);
                fill_record(&mut bytes, index);
                let guard = (case == Case::OneFileAppendLocked).then(|| lock.lock().expect("no holder panics"));
                files[file].write_all_at(&bytes, offset).map_err(|error| format!("write {index}: {error}"))?;
                drop(guard);
            }
        }));
    }
    start.wait();
    let mut spans = Vec::new();
    for worker in workers {
        spans.push(worker.join().map_err(|_| "a writer thread panicked".to_string())??);
    }
    let began = spans.iter().map(|span| span.0).min().expect("at least one thread");
    let ended = spans.iter().map(|span| span.1).max().expect("at least one thread");
    let elapsed = ended.duration_since(began);
    verify(case, &files, threads, writes, record_bytes)?;
    Ok(elapsed)
}

/// The run's files, new (and for an overwrite case, written full with zeros and synced).
fn open_files(
    case: Case,
    dir: &Path,
    threads: usize,
    writes: u64,
    record_bytes: usize,
) -> Result<Arc<Vec<std::fs::File>>, String> {
    let count = if case.file_per_thread() { threads } else { 1 };
    let bytes_per_file = writes.div_ceil(count as u64) * record_bytes as u64;
    let mut files = Vec::new();
    for number in 0..count {
        let path = dir.join(format!("{}-{number}.log", case.name()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|error| format!("{}: {error}", path.display()))?;
        if case.prefilled() {
            let zeros = vec![0u8; PREFILL_CHUNK_BYTES];
            let mut offset = 0;
            while offset < bytes_per_file {
                let take = (bytes_per_file - offset).min(PREFILL_CHUNK_BYTES as u64) as usize;
                file.write_all_at(&zeros[..take], offset).map_err(|error| format!("{}: {error}", path.display()))?;
                offset += take as u64;
            }
            file.sync_all().map_err(|error| format!("{}: {error}", path.display()))?;
        }
        files.push(file);
    }
    Ok(Arc::new(files))
}

/// Read every record back from where [`place`] put it.
fn verify(case: Case, files: &[std::fs::File], threads: usize, writes: u64, record_bytes: usize) -> Result<(), String> {
    let (mut buffer, mut expected) = (vec![0u8; record_bytes], vec![0u8; record_bytes]);
    for index in 0..writes {
        let thread = if case.file_per_thread() { (index % threads as u64) as usize } else { 0 };
        let (file, offset) = place(case, index, thread, threads, record_bytes);
        files[file].read_exact_at(&mut buffer, offset).map_err(|error| format!("read back {index}: {error}"))?;
        fill_record(&mut expected, index);
        if buffer != expected {
            return Err(format!(
                "{}: record {index} at offset {offset} of file {file} is not what was written",
                case.name()
            ));
        }
    }
    Ok(())
}

#[derive(Debug, serde::Serialize)]
struct Row {
    case: Case,
    threads: usize,
    runs_writes_per_sec: Vec<f64>,
    median_writes_per_sec: f64,
    /// The median over the one-thread median of the same case.
    ratio_to_one_thread: f64,
}

fn measure(args: &Args, dir: &Path) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for case in Case::ALL {
        let mut runs: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
        for _ in 0..args.runs {
            for &threads in &args.threads {
                let elapsed = run(case, dir, threads, args.writes, args.record_bytes)?;
                runs.entry(threads).or_default().push(args.writes as f64 / elapsed.as_secs_f64());
            }
        }
        let one = median(&runs[&1]);
        for (threads, values) in runs {
            let median_writes_per_sec = median(&values);
            eprintln!(
                "{:<26} {threads:>2} threads: {:>10.0} writes/s  {:.2}x",
                case.name(),
                median_writes_per_sec,
                median_writes_per_sec / one
            );
            rows.push(Row {
                case,
                threads,
                runs_writes_per_sec: values,
                median_writes_per_sec,
                ratio_to_one_thread: median_writes_per_sec / one,
            });
        }
    }
    Ok(rows)
}

fn main() -> std::process::ExitCode {
    probe_main("append-scaling", USAGE, parse_args, |args| {
        let scratch = match args.dir {
            Some(_) => None,
            None => Some(tempfile::tempdir().map_err(|error| format!("cannot make a temporary directory: {error}"))?),
        };
        let dir = args.dir.clone().unwrap_or_else(|| scratch.as_ref().expect("made above").path().to_path_buf());
        report(&args, &dir)
    })
}

fn report(args: &Args, dir: &Path) -> Result<(), String> {
    eprintln!(
        "append-scaling: {} writes of {} bytes per run, threads {:?}, {} runs, in {}",
        args.writes,
        args.record_bytes,
        args.threads,
        args.runs,
        dir.display()
    );
    let rows = measure(args, dir)?;
    for case in Case::ALL {
        for number in 0..THREADS_MAX {
            let _ = std::fs::remove_file(dir.join(format!("{}-{number}.log", case.name())));
        }
    }
    if let Some(out) = &args.out {
        let json = serde_json::json!({
            "record_bytes": args.record_bytes,
            "writes_per_run": args.writes,
            "runs": args.runs,
            "dir": dir.display().to_string(),
            "rows": rows,
        });
        write_json(out, &json)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of record `index`.
    fn record(index: u64, record_bytes: usize) -> Vec<u8> {
        let mut bytes = vec![0; record_bytes];
        fill_record(&mut bytes, index);
        bytes
    }

    /// Every case writes every record where `verify` reads it back, at 1 and 3 threads; a record overwritten
    /// afterwards is caught.
    #[test]
    fn every_case_reads_back_what_it_wrote_and_a_damaged_record_is_caught() {
        let dir = tempfile::tempdir().expect("temporary directory");
        for case in Case::ALL {
            for threads in [1, 3] {
                run(case, dir.path(), threads, 1_000, 24).unwrap_or_else(|error| panic!("{error}"));
            }
        }
        let files = open_files(Case::OneFileAppend, dir.path(), 1, 10, 24).expect("files");
        for index in 0..10 {
            files[0].write_all_at(&record(index, 24), index * 24).expect("write");
        }
        assert_eq!(verify(Case::OneFileAppend, &files, 1, 10, 24), Ok(()));
        files[0].write_all_at(&record(3, 24), 4 * 24).expect("write");
        let error = verify(Case::OneFileAppend, &files, 1, 10, 24).expect_err("record 4 holds record 3");
        assert!(error.contains("record 4 at offset 96"), "{error}");
    }

    #[test]
    fn bad_options_are_refused_with_the_reason() {
        let parse = |words: &[&str]| parse_args(words.iter().map(|word| word.to_string()));
        assert!(parse(&["--threads", "2,4"]).unwrap_err().contains("must include 1"));
        assert!(parse(&["--record-bytes", "4"]).unwrap_err().contains("want 8 to"));
        assert!(parse(&["--runs"]).unwrap_err().contains("needs a value"));
        assert!(parse(&["--bogus"]).unwrap_err().contains("unknown option"));
        let args = parse(&["--threads", "1,2,4", "--writes", "9"]).expect("valid").expect("not --help");
        assert_eq!((args.threads, args.writes), (vec![1, 2, 4], 9));
        assert!(parse(&["--help"]).expect("valid").is_none());
    }
}
