//! The guarantee matrix of SQLite under the simulator (ADR-0079): a swarm per (journal_mode, synchronous)
//! cell under the `assumed` profile, written to `seeds/sqlite/MATRIX.md`, every disagreement with SQLite's
//! documentation shrunk and pinned in `seeds/sqlite/`.
//!
//! ```sh
//! cargo run --release -p sqlite-target --bin sqlite-matrix -- --seeds 0..200            # all 16 cells, write
//! cargo run -p sqlite-target --bin sqlite-matrix -- --seeds 0..20 --cells durable --check  # CI: exit 1 on a disagreement
//! ```

use std::ops::Range;
use std::path::PathBuf;
use std::process::ExitCode;

use holdfast::RunOptions;
use holdfast::env::RealEnv;
use holdfast::env::fs::Fs;
use sqlite_target::matrix::{pin_findings, render, run_cell};
use sqlite_target::{Cell, Promise};

/// The command line, parsed.
#[derive(Debug)]
struct Args {
    seeds: Range<u64>,
    durable_only: bool,
    check: bool,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args { seeds: 0..200, durable_only: false, check: false };
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
            "--cells" => match iter.next().map(String::as_str) {
                Some("durable") => parsed.durable_only = true,
                Some("all") => parsed.durable_only = false,
                other => return Err(format!("--cells {other:?}: want durable or all")),
            },
            "--check" => parsed.check = true,
            other => return Err(format!("unknown argument {other:?} (--seeds A..B, --cells durable|all, --check)")),
        }
    }
    Ok(parsed)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse(&argv) {
        Ok(args) => args,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../seeds/sqlite"));
    let cells: Vec<Cell> =
        Cell::all().into_iter().filter(|cell| !args.durable_only || cell.promise() == Promise::Durable).collect();
    let mut results = Vec::new();
    let mut disagreements = 0;
    for cell in cells {
        let mut result = run_cell(cell, args.seeds.clone(), &RunOptions::default());
        if !result.findings.is_empty() {
            disagreements += 1;
            if !args.check
                && let Err(error) = pin_findings(&mut result, &dir)
            {
                eprintln!("error: pinning the findings of {cell}: {error}");
                return ExitCode::from(2);
            }
        }
        println!(
            "{cell}: {} seeds, {} passed, lost commits {}, partial {}, integrity {}, agrees {}",
            result.summary.seeds_run,
            result.summary.seeds_passed,
            result.lost_commits.count,
            result.partial_transactions.count,
            result.integrity_failures.count,
            result.agrees()
        );
        results.push(result);
    }
    if args.check {
        println!("{} of {} cells disagree with the documentation", disagreements, results.len());
        return if disagreements == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    }
    let command = format!(
        "cargo run --release -p sqlite-target --bin sqlite-matrix -- --seeds {}..{}{}",
        args.seeds.start,
        args.seeds.end,
        if args.durable_only { " --cells durable" } else { "" }
    );
    let path = dir.join("MATRIX.md");
    if let Err(error) = Fs::new(RealEnv::new()).write(&path, render(&results, &command)) {
        eprintln!("error: {}: {error}", path.display());
        return ExitCode::from(2);
    }
    println!("wrote {}", path.display());
    ExitCode::SUCCESS
}
