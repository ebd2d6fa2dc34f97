//! The timed rows of one workload (ADR-0200): every run on a fresh copy of the loaded data set, the thread counts
//! taking turns run by run.

use std::time::Instant;

use crate::backend::{EngineSpec, LockSample};
use crate::machine::{peak_rss_kib, reset_peak_rss};
use crate::restore::Pristine;
use crate::workloads::{self, Ctx, RunOut, Workload};
use crate::{Args, LockHoldRow, Row, catch, error_row, log, row_from};

/// One row's runs so far.
#[derive(Default)]
struct RowRuns {
    runs: Vec<RunOut>,
    layout: Option<String>,
    all_ops: u64,
    /// The lock counters summed over the runs (`None` from an engine that does not count them).
    locks: Option<LockSample>,
    peak_rss_kib: Option<u64>,
    error: Option<String>,
}

/// What every run of one workload's rows shares.
pub(crate) struct RowsOf<'a> {
    pub(crate) spec: &'a EngineSpec,
    pub(crate) synced: bool,
    pub(crate) args: &'a Args,
    pub(crate) pristine: &'a Pristine,
    pub(crate) ctx: &'a Ctx,
    pub(crate) w: Workload,
}

/// The rows of `of.w` at each of `threads`: `args.runs` timed runs each, every run on a fresh copy of the loaded
/// data set, the thread counts taking turns run by run (1, 2, 1, 2, ...) so a machine that speeds up or slows down
/// during the rows moves every row alike, not the ratio between them (ADR-0200).
pub(crate) fn timed_rows(of: &RowsOf<'_>, threads: &[usize]) -> Vec<Row> {
    let RowsOf { spec, synced, args, w, .. } = *of;
    if threads.is_empty() {
        return Vec::new();
    }
    let t0 = Instant::now();
    let mut rows: Vec<RowRuns> =
        threads.iter().map(|_| RowRuns { locks: Some(LockSample::default()), ..RowRuns::default() }).collect();
    for run in 0..args.runs {
        for (row, &count) in rows.iter_mut().zip(threads) {
            if row.error.is_none() {
                timed_run_into(row, of, count, run);
            }
        }
    }
    if t0.elapsed() > (args.warmup + args.duration) * (args.runs * threads.len()) as u32 * 20 {
        log(&format!("{}: {} ran far over its budget", spec.name, w.name()));
    }
    rows.into_iter()
        .zip(threads)
        .map(|(done, &count)| {
            if let Some(e) = done.error {
                return error_row(spec.name, w.name(), count, synced, args.records, e);
            }
            let mut row = row_from(spec.name, w, count, synced, args.records, done.runs);
            row.layout = done.layout;
            row.peak_rss_kib = done.peak_rss_kib;
            row.lock_hold = done.locks.and_then(|sum| LockHoldRow::between(LockSample::default(), sum, done.all_ops));
            row
        })
        .collect()
}

/// Run `run` of `of.w` at `threads` on a fresh copy of the loaded data set, added to `row` (or its error set).
fn timed_run_into(row: &mut RowRuns, of: &RowsOf<'_>, threads: usize, run: usize) {
    let RowsOf { spec, synced, args, pristine, ctx, w } = *of;
    let opened = pristine.restore().map_err(|e| format!("restore the loaded data set: {e}")).and_then(|dir| {
        catch(|| (spec.open)(dir, synced)).and_then(|r| r.map_err(|e| format!("reopen failed: {e:?}")))
    });
    let b = match opened {
        Ok(b) => b,
        Err(e) => return row.error = Some(e),
    };
    row.layout.get_or_insert_with(|| b.layout());
    let reset = reset_peak_rss();
    let before = b.lock_sample();
    match catch(|| workloads::timed_run(&b, ctx, w, threads, args.warmup, args.duration, run as u64 + 1)) {
        Ok(out) => {
            row.locks = row.locks.zip(before.zip(b.lock_sample())).map(|(sum, (s0, s1))| sum.plus_between(s0, s1));
            row.peak_rss_kib = row.peak_rss_kib.max(peak_rss_kib(reset));
            row.all_ops += out.all_ops;
            row.runs.push(out);
        }
        Err(e) => row.error = Some(e),
    }
}
