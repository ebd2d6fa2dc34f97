//! The guarantee matrix's command line, on any [`Route`]: `sqlite-matrix` (our VFS) and `sqlite-unix-matrix`
//! (SQLite's own `unix` VFS under `interpose`, ADR-0177) are this, each with its route. `--against FILE` compares
//! each cell's verdict with another matrix (the other route's), cell for cell.

#![forbid(unsafe_code)]

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::matrix::{
    CellResult, find_pinned, matrix_command, matrix_file_name, pin_findings, read_verdicts, render, run_cell,
};
use crate::{Cell, Promise, Route};
use holdfast::RunOptions;
use holdfast::env::fs::Fs;
use holdfast::env::{Persistence, RealEnv};

/// The command line, parsed.
#[derive(Debug)]
struct Args {
    seeds: Range<u64>,
    persistence: Persistence,
    cells: Cells,
    check: bool,
    /// A matrix file whose verdicts every cell run must match (`--against`).
    against: Option<PathBuf>,
}

/// Which cells run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cells {
    All,
    Durable,
    /// One cell: printed, never written to a MATRIX file.
    One(Cell),
}

const USAGE: &str = "--seeds A..B, --persistence posix|page|ext4-ordered, --cells durable|all|MODE/SYNC (e.g. \
                     WAL/NORMAL), --check, --against FILE";

const HELP: &str = "\
SQLite's guarantee matrix under the simulator (ADR-0079, ADR-0118; the default-VFS route: ADR-0177).

Runs a swarm per (journal_mode, synchronous) cell, compares what survived each power cut with SQLite's documented
promise for that cell, shrinks every disagreement and pins it in the route's seeds directory (seeds/sqlite/ for
sqlite-matrix, seeds/sqlite-unix/ for sqlite-unix-matrix), then writes its MATRIX.md (posix) or MATRIX-<model>.md.

Options:
  --seeds A..B          seeds per cell (default 0..200)
  --persistence MODEL   posix (default), page or ext4-ordered: what a crash may keep of unsynced writes (ADR-0109)
  --cells WHICH         all (default), durable (the cells that promise durability), or one cell such as
                        WAL/NORMAL: a one-cell run prints its line and pins its findings, never rewrites a MATRIX
  --check               pin nothing, write nothing: exit 1 if a disagreement is not pinned by a seed file
  --against FILE        with --check, also exit 1 if a cell's verdict (agrees or not) differs from FILE's row
                        for that cell (a MATRIX file of the other route: the routes must agree cell for cell)
  -h, --help            this text
";

/// `MODE/SYNC`, case-insensitive (`WAL/NORMAL`).
fn parse_cell(text: &str) -> Option<Cell> {
    Cell::all().into_iter().find(|cell| cell.to_string().eq_ignore_ascii_case(text))
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed =
        Args { seeds: 0..200, persistence: Persistence::Posix, cells: Cells::All, check: false, against: None };
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
            "--against" => parsed.against = Some(PathBuf::from(iter.next().ok_or("--against needs a MATRIX file")?)),
            other => return Err(format!("unknown argument {other:?} ({USAGE})")),
        }
    }
    if parsed.against.is_some() && !parsed.check {
        return Err("--against compares verdicts only with --check".into());
    }
    Ok(parsed)
}

/// Run every chosen cell; pin each finding (or, with `--check`, find its pinned seed).
fn run_cells<R: Route>(args: &Args, dir: &Path) -> Result<Vec<CellResult<R>>, String> {
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
        let mut result = run_cell::<R>(cell, args.persistence, args.seeds.clone(), &RunOptions::default());
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

/// Cells whose verdict differs from the `against` file's, printed; an unreadable file or a missing row is an error.
fn differing<R: Route>(results: &[CellResult<R>], against: &Path) -> Result<usize, String> {
    let text = Fs::new(RealEnv::new()).read(against).map_err(|error| format!("{}: {error}", against.display()))?;
    let text = String::from_utf8(text).map_err(|error| format!("{}: {error}", against.display()))?;
    let verdicts = read_verdicts(&text).map_err(|error| format!("{}: {error}", against.display()))?;
    let mut differ = 0;
    for result in results {
        let Some(&theirs) = verdicts.get(&result.cell) else {
            return Err(format!("{}: no row for {}", against.display(), result.cell));
        };
        let ours = result.findings.is_empty();
        if ours != theirs {
            differ += 1;
            let says = |agrees: bool| if agrees { "agrees" } else { "disagrees" };
            println!("  differs: {} {} here, {} in {}", result.cell, says(ours), says(theirs), against.display());
        }
    }
    Ok(differ)
}

/// The matrix command line on route `R`, with `seeds` the repository's `seeds/` directory.
pub fn main<R: Route>(seeds: &str) -> ExitCode {
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
    let dir = Path::new(seeds).join(R::SEEDS_SUBDIR);
    let results = match run_cells::<R>(&args, &dir) {
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
        let differ = match args.against.as_deref().map(|against| differing(&results, against)).transpose() {
            Ok(differ) => differ.unwrap_or(0),
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(2);
            }
        };
        if let Some(against) = &args.against {
            println!("{differ} of {} cells differ from {}", results.len(), against.display());
        }
        return if unpinned == 0 && differ == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    }
    let extra = match args.cells {
        Cells::All => "",
        Cells::Durable => " --cells durable",
        Cells::One(_) => return ExitCode::SUCCESS,
    };
    let command = matrix_command::<R>(args.persistence, &args.seeds, extra);
    let path = dir.join(matrix_file_name(args.persistence));
    if let Err(error) = Fs::new(RealEnv::new()).write(&path, render(&results, args.persistence, &command)) {
        eprintln!("error: {}: {error}", path.display());
        return ExitCode::from(2);
    }
    println!("wrote {}", path.display());
    ExitCode::SUCCESS
}
