//! The guarantee matrix of SQLite under the simulator (ADR-0079, ADR-0118): a swarm per (journal_mode,
//! synchronous) cell under the `assumed` profile and one persistence model (ADR-0109), written to
//! `seeds/sqlite/MATRIX.md` (`posix`) or `seeds/sqlite/MATRIX-<model>.md`, every disagreement with SQLite's promise
//! shrunk and pinned in `seeds/sqlite/`.
//!
//! ```sh
//! cargo run --release -p sqlite-target --bin sqlite-matrix -- --seeds 0..200                       # posix: MATRIX.md
//! cargo run --release -p sqlite-target --bin sqlite-matrix -- --seeds 0..200 --persistence page    # MATRIX-page.md
//! cargo run -p sqlite-target --bin sqlite-matrix -- --seeds 0..20 --cells durable --check          # CI
//! cargo run --release -p sqlite-target --bin sqlite-matrix -- --seeds 200..2000 --persistence ext4-ordered --cells WAL/NORMAL --check
//! ```
//!
//! One cell (`--cells WAL/NORMAL`) is for searching deeper than the matrix: its line is printed, and it pins its
//! findings (or, with `--check`, reports those no seed pins), but it never rewrites a MATRIX file.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use holdfast::RunOptions;
use holdfast::env::fs::Fs;
use holdfast::env::{Persistence, RealEnv};
use sqlite_target::matrix::{
    CellResult, find_pinned, matrix_command, matrix_file_name, pin_findings, render, run_cell,
};
use sqlite_target::{Cell, Promise};

/// The command line, parsed.
#[derive(Debug)]
struct Args {
    seeds: Range<u64>,
    persistence: Persistence,
    cells: Cells,
    check: bool,
}

/// Which cells run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cells {
    All,
    Durable,
    /// One cell: printed, never written to a MATRIX file.
    One(Cell),
}

const USAGE: &str =
    "--seeds A..B, --persistence posix|page|ext4-ordered, --cells durable|all|MODE/SYNC (e.g. WAL/NORMAL), --check";

const HELP: &str = "\
sqlite-matrix: SQLite's guarantee matrix under the simulator (ADR-0079, ADR-0118).

Runs a swarm per (journal_mode, synchronous) cell, compares what survived each power cut with SQLite's documented
promise for that cell, shrinks every disagreement and pins it in seeds/sqlite/, then writes seeds/sqlite/MATRIX.md
(posix) or MATRIX-<model>.md.

Options:
  --seeds A..B          seeds per cell (default 0..200)
  --persistence MODEL   posix (default), page or ext4-ordered: what a crash may keep of unsynced writes (ADR-0109)
  --cells WHICH         all (default), durable (the cells that promise durability), or one cell such as
                        WAL/NORMAL: a one-cell run prints its line and pins its findings, never rewrites a MATRIX
  --check               pin nothing, write nothing: exit 1 if a disagreement is not pinned by a seed file
  -h, --help            this text
";

/// `MODE/SYNC`, case-insensitive (`WAL/NORMAL`).
fn parse_cell(text: &str) -> Option<Cell> {
    Cell::all().into_iter().find(|cell| cell.to_string().eq_ignore_ascii_case(text))
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args { seeds: 0..200, persistence: Persistence::Posix, cells: Cells::All, check: false };
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--seeds" => {
                let text = iter.next().ok_or("--seeds needs A..B")?;
                let (start, end) = text.split_once("..").ok_or_else(|| format!("--seeds {text}: want A..B"))?;
                let start = holdfast::parse_seed(start)?;
                let end = holdfast::parse_seed(end)?;
                if start >= end {
                    return Err(format!("--seeds {text}: empty range"));
                }
                parsed.seeds = start..end;
            }
            "--persistence" => {
                let name = iter.next().ok_or("--persistence needs posix, page or ext4-ordered")?;
                parsed.persistence = Persistence::parse(name)?;
            }
            "--cells" => match iter.next().map(String::as_str) {
                Some("durable") => parsed.cells = Cells::Durable,
                Some("all") => parsed.cells = Cells::All,
                Some(name) => match parse_cell(name) {
                    Some(cell) => parsed.cells = Cells::One(cell),
                    None => return Err(format!("--cells {name:?}: want durable, all or a cell such as WAL/NORMAL")),
                },
                None => return Err("--cells needs durable, all or a cell such as WAL/NORMAL".into()),
            },
            "--check" => parsed.check = true,
            other => return Err(format!("unknown argument {other:?} ({USAGE})")),
        }
    }
    Ok(parsed)
}

/// Run every chosen cell; pin each finding (or, with `--check`, find its pinned seed).
fn run_cells(args: &Args, dir: &Path) -> Result<Vec<CellResult>, String> {
    let cells: Vec<Cell> = Cell::all()
        .into_iter()
        .filter(|&cell| match args.cells {
            Cells::All => true,
            Cells::Durable => cell.promise() == Promise::Durable,
            Cells::One(one) => cell == one,
        })
        .collect();
    let mut results = Vec::new();
    for cell in cells {
        let mut result = run_cell(cell, args.persistence, args.seeds.clone(), &RunOptions::default());
        if !result.findings.is_empty() {
            let pinned = if args.check { find_pinned(&mut result, dir) } else { pin_findings(&mut result, dir) };
            pinned.map_err(|error| format!("pinning the findings of {cell}: {error}"))?;
        }
        println!(
            "{cell} ({}): {} seeds, {} passed, lost commits {}, partial {}, integrity {}, agrees {}",
            args.persistence,
            result.summary.seeds_run,
            result.summary.seeds_passed,
            result.lost_commits.count,
            result.partial_transactions.count,
            result.integrity_failures.count,
            result.agrees()
        );
        if args.check {
            for (invariant, outcome) in &result.findings {
                if !result.pinned.contains_key(invariant) {
                    let model = args.persistence;
                    println!("  not pinned: {invariant}, first at seed {} (under {model})", outcome.seed);
                }
            }
        }
        results.push(result);
    }
    Ok(results)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.iter().any(|arg| arg == "-h" || arg == "--help") {
        print!("{HELP}");
        return ExitCode::SUCCESS;
    }
    let args = match parse(&argv) {
        Ok(args) => args,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../seeds/sqlite"));
    let results = match run_cells(&args, &dir) {
        Ok(results) => results,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    if args.check {
        // A disagreement already pinned in seeds/sqlite/ (and replayed by the seeds test) is what the matrix
        // records; a new one fails the check.
        let disagreeing = results.iter().filter(|result| !result.findings.is_empty()).count();
        let unpinned: usize = results.iter().map(CellResult::unpinned).sum();
        println!(
            "{disagreeing} of {} cells disagree with SQLite's promise under {}; {unpinned} finding(s) not pinned",
            results.len(),
            args.persistence
        );
        return if unpinned == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    }
    let extra = match args.cells {
        Cells::All => "",
        Cells::Durable => " --cells durable",
        Cells::One(_) => return ExitCode::SUCCESS,
    };
    let command = matrix_command(args.persistence, &args.seeds, extra);
    let path = dir.join(matrix_file_name(args.persistence));
    if let Err(error) = Fs::new(RealEnv::new()).write(&path, render(&results, args.persistence, &command)) {
        eprintln!("error: {}: {error}", path.display());
        return ExitCode::from(2);
    }
    println!("wrote {}", path.display());
    ExitCode::SUCCESS
}
