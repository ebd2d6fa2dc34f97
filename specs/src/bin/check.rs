//! Check one model and write its log.
//!
//! ```text
//! cargo run -p specs --bin check -- <Mvcc|Ssi|Storage> [--bound small|large] [--variant NAME] [--threads N]
//! ```
//!
//! The default is the large bound of the shipped protocol, written to `specs/<Model>.check.log` (regenerated,
//! never edited by hand), headed by the hash of the sources the model mirrors (`specs::sources`); a large run of a
//! `--variant` writes `specs/<Model>.<variant>.check.log`. `--bound small` and `--bound multi-write` only print
//! the report. Exits non-zero on a violation.

use std::path::Path;
use std::process::ExitCode;

use env::{Env as _, File as _, OpenOptions};
use specs::{Mvcc, MvccBound, Report, Ssi, SsiBound, Storage, StorageBound, check_with};

const USAGE: &str = "usage: check <Mvcc|Ssi|Storage> [--bound small|large|multi-write] [--variant NAME] [--threads N]\n\
     (multi-write: Ssi only, printed, not logged)\n\
     variants: Mvcc: no-ack-gap, no-first-committer-wins | \
     Ssi: no-ack-gap, no-safe-snapshot, naive-si, no-read-after-commit-edge, safe-snapshot-below-commit | \
     Storage (comma-separated): ack-before-sync, table-not-synced, no-dir-sync-before-manifest, \
     empty-segment-counts";

struct Args {
    model: String,
    large: bool,
    /// `--bound multi-write` (Ssi's [`SsiBound::MultiWrite`]; printed only, like a small bound).
    multi_write: bool,
    variant: Option<String>,
    threads: usize,
}

fn parse() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let model = args.next().ok_or("missing model")?;
    let mut parsed = Args { model, large: true, multi_write: false, variant: None, threads: 2 };
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--bound" => {
                parsed.large = match value.as_str() {
                    "small" => false,
                    "large" => true,
                    "multi-write" => {
                        parsed.multi_write = true;
                        false
                    }
                    _ => return Err(format!("unknown bound {value}")),
                }
            }
            "--variant" => parsed.variant = Some(value),
            "--threads" => parsed.threads = value.parse().map_err(|_| format!("bad thread count {value}"))?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(parsed)
}

fn run(args: &Args) -> Result<Report, String> {
    let variant = args.variant.as_deref();
    let unknown = || format!("unknown variant {variant:?} for {}", args.model);
    if args.multi_write && args.model != "Ssi" {
        return Err(format!("--bound multi-write is a bound of Ssi only, not of {}", args.model));
    }
    let report = match args.model.as_str() {
        "Mvcc" => {
            let model = Mvcc::new(if args.large { MvccBound::Large } else { MvccBound::Small });
            let model = match variant {
                None => model,
                Some("no-ack-gap") => model.without_ack_gap(),
                Some("no-first-committer-wins") => model.without_first_committer_wins(),
                Some(_) => return Err(unknown()),
            };
            check_with(model, args.threads, false)
        }
        "Ssi" => {
            let bound = match (args.large, args.multi_write) {
                (true, _) => SsiBound::Large,
                (false, true) => SsiBound::MultiWrite,
                (false, false) => SsiBound::Small,
            };
            let model = Ssi::new(bound);
            let model = match variant {
                None => model,
                Some("no-ack-gap") => model.without_ack_gap(),
                Some("naive-si") => model.naive_si(),
                Some("no-safe-snapshot") => model.without_safe_snapshot(),
                Some("no-read-after-commit-edge") => model.without_read_after_commit_edge(),
                Some("safe-snapshot-below-commit") => model.safe_snapshot_below_commit(),
                Some(_) => return Err(unknown()),
            };
            check_with(model, args.threads, args.large)
        }
        "Storage" => {
            let model = Storage::new(if args.large { StorageBound::Large } else { StorageBound::Small });
            let mut model = model;
            for part in variant.into_iter().flat_map(|variant| variant.split(',')) {
                model = match part {
                    "ack-before-sync" => model.ack_before_sync(),
                    "table-not-synced" => model.table_not_synced(),
                    "no-dir-sync-before-manifest" => model.no_dir_sync_before_manifest(),
                    "empty-segment-counts" => model.empty_segment_counts(),
                    _ => return Err(unknown()),
                };
            }
            check_with(model, args.threads, false)
        }
        other => return Err(format!("unknown model {other}")),
    };
    Ok(report)
}

fn write_log(model: &str, text: &str) -> Result<(), String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("{model}.check.log"));
    let write = || -> env::Result<()> {
        let file = env::RealEnv::new().open(&path, OpenOptions::create_truncate())?;
        file.write_all_at(0, text.as_bytes())?;
        file.sync()
    };
    write().map_err(|error| format!("writing {}: {error}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(error) => {
            eprintln!("{error}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let report = match run(&args) {
        Ok(report) => report,
        Err(error) => {
            eprintln!("{error}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut text = report.render();
    if args.variant.is_none()
        && let Some(header) = specs::sources::log_header(report.model)
    {
        // The committed log of the shipped protocol records the hash of the sources it checked (ADR-0060).
        text = format!("{header}{text}");
    }
    print!("{text}");
    let log_name = match &args.variant {
        None => report.model.to_string(),
        Some(variant) => format!("{}.{variant}", report.model),
    };
    if args.large
        && let Err(error) = write_log(&log_name, &text)
    {
        eprintln!("{error}");
        return ExitCode::FAILURE;
    }
    if report.ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
