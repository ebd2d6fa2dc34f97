//! The guarantee matrix (ADR-0079, ADR-0118): a swarm per (journal_mode, synchronous) cell under `assumed` and one
//! persistence model (ADR-0109), what survived each power cut, compared with SQLite's promise; every disagreement
//! shrunk and pinned as a seed. Built on the framework's public API: [`holdfast::run_configured`] with a fixed cell,
//! [`holdfast::SwarmSummary`], [`holdfast::shrink::shrink_schedule`], and `corpus` seed files. Everything is read
//! from structured outcomes (coverage counters, failure signatures), never from printed text.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::Range;

use holdfast::env::fs::Fs;
use holdfast::env::{DiskModel, Persistence, RealEnv};
use holdfast::swarm::required_coverage;
use holdfast::{FaultProfile, OutcomeOf, RunOptions, SwarmSummary, WorldConfig, corpus, run_configured};

use crate::SqliteTarget;
use crate::config::{Cell, SqliteConfig, assumed_menu};
use crate::route::{Route, VfsRoute};

/// The most reruns one shrink may take.
pub const SHRINK_BUDGET_MAX: u64 = 2000;

/// One column's tally: a count and the first seed where it was nonzero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub count: u64,
    pub first_seed: Option<u64>,
}

impl Tally {
    fn add(&mut self, seed: u64, count: u64) {
        self.count += count;
        if count > 0 && self.first_seed.is_none() {
            self.first_seed = Some(seed);
        }
    }

    fn render(&self, pinned: Option<&String>) -> String {
        match (pinned, self.first_seed) {
            (Some(name), _) => format!("{} (`{name}`)", self.count),
            (None, Some(seed)) => format!("{} (seed {seed})", self.count),
            (None, None) => self.count.to_string(),
        }
    }
}

/// One cell's result, on route `R`.
#[derive(Clone, Debug)]
pub struct CellResult<R: Route = VfsRoute> {
    pub cell: Cell,
    /// The persistence model every seed of the cell ran under.
    pub persistence: Persistence,
    pub summary: SwarmSummary,
    pub lost_commits: Tally,
    pub partial_transactions: Tally,
    pub integrity_failures: Tally,
    /// Each failing invariant with its first failing outcome.
    pub findings: BTreeMap<String, OutcomeOf<SqliteTarget<R>>>,
    /// Pinned seed names by invariant (after [`pin_findings`]).
    pub pinned: BTreeMap<String, String>,
}

impl<R: Route> CellResult<R> {
    /// `yes`, or the pinned seeds that show the disagreement.
    pub fn agrees(&self) -> String {
        if self.findings.is_empty() {
            return "yes".into();
        }
        let names: Vec<String> = self.pinned.values().map(|name| format!("`{name}`")).collect();
        if names.is_empty() { "no (not pinned)".into() } else { names.join(", ") }
    }

    /// How many failing invariants have no pinned seed.
    pub fn unpinned(&self) -> usize {
        self.findings.keys().filter(|invariant| !self.pinned.contains_key(*invariant)).count()
    }

    fn pinned_for(&self, prefixes: &[&str]) -> Option<&String> {
        self.pinned.iter().find(|(invariant, _)| prefixes.iter().any(|p| invariant.starts_with(p))).map(|(_, n)| n)
    }
}

/// Run `seeds` in `cell` under `assumed` and `persistence`, one seed at a time (SQLite's PRNG is process-wide).
pub fn run_cell<R: Route>(
    cell: Cell,
    persistence: Persistence,
    seeds: Range<u64>,
    options: &RunOptions,
) -> CellResult<R> {
    let menu = assumed_menu();
    let mut result = CellResult {
        cell,
        persistence,
        summary: SwarmSummary::for_target::<SqliteTarget<R>>(),
        lost_commits: Tally::default(),
        partial_transactions: Tally::default(),
        integrity_failures: Tally::default(),
        findings: BTreeMap::new(),
        pinned: BTreeMap::new(),
    };
    for seed in seeds {
        let mut world = WorldConfig::from_seed(seed, FaultProfile::Assumed, &menu);
        world.disk = DiskModel::with_persistence(persistence);
        let config = SqliteConfig::in_cell(seed, cell);
        let outcome = run_configured::<SqliteTarget<R>>(seed, world, config, options);
        let coverage = &outcome.coverage;
        result.lost_commits.add(seed, coverage.get("sqlite.commits_lost"));
        result.partial_transactions.add(seed, coverage.get("sqlite.partial_transactions"));
        let integrity = coverage.get("sqlite.integrity_failures") + coverage.get("sqlite.corruption_errors");
        result.integrity_failures.add(seed, integrity);
        let required = required_coverage::<SqliteTarget<R>>(&outcome.schedule.world, &outcome.schedule.config);
        result.summary.add(&outcome, required);
        if let Some(failure) = &outcome.failure {
            result.findings.entry(failure.invariant.clone()).or_insert(outcome);
        }
    }
    result
}

/// The seed name of a finding: `<mode>-<sync>-<invariant>` under `posix` (the names the matrix always had),
/// `<model>-<mode>-<sync>-<invariant>` under another model.
pub fn seed_name(cell: Cell, persistence: Persistence, invariant: &str) -> String {
    let invariant = invariant.replace(['.', '_'], "-");
    let name = format!("{}-{}-{invariant}", cell.journal_mode.sql(), cell.synchronous.sql()).to_lowercase();
    match persistence {
        Persistence::Posix => name,
        model => format!("{}-{name}", model.name()),
    }
}

/// The matrix file of a model: `MATRIX.md` for `posix` (as before the models existed), `MATRIX-<model>.md` else.
pub fn matrix_file_name(persistence: Persistence) -> String {
    match persistence {
        Persistence::Posix => "MATRIX.md".into(),
        model => format!("MATRIX-{}.md", model.name()),
    }
}

/// The command that writes (or, with `extra` = ` --cells durable --check`, checks) a model's matrix on route `R`.
pub fn matrix_command<R: Route>(persistence: Persistence, seeds: &Range<u64>, extra: &str) -> String {
    let model = match persistence {
        Persistence::Posix => String::new(),
        model => format!(" --persistence {}", model.name()),
    };
    format!(
        "cargo run --release -p {} --bin {} -- --seeds {}..{}{model}{extra}",
        R::PACKAGE,
        R::MATRIX_BIN,
        seeds.start,
        seeds.end
    )
}

/// Record, for each finding of `result`, the seed already pinned for it in `dir` (`--check`: nothing is shrunk
/// or written). A file of the finding's name must expect the finding's invariant to fail, in the same cell and
/// persistence model; a file that does not is an error, a missing file leaves the finding unpinned.
pub fn find_pinned<R: Route>(result: &mut CellResult<R>, dir: &std::path::Path) -> Result<(), String> {
    for invariant in result.findings.keys() {
        let name = seed_name(result.cell, result.persistence, invariant);
        let path = dir.join(format!("{name}.json"));
        if !Fs::new(RealEnv::new()).exists(&path).map_err(|error| format!("{}: {error}", path.display()))? {
            continue;
        }
        let seed = holdfast::seeds::read_seed_file(&path)?;
        let expects = matches!(&seed.expect, corpus::Expectation::Fail(signature) if signature.invariant == *invariant);
        let schedule = holdfast::schedule::parse_schedule_value::<SqliteTarget<R>>(seed.schedule)
            .map_err(|error| format!("{}: {error}", path.display()))?;
        let model = schedule.world.disk.persistence;
        if !expects || schedule.config.cell != result.cell || model != result.persistence {
            return Err(format!(
                "{}: pins {:?} in {} under {model}, not a failing {invariant} in {} under {}",
                path.display(),
                seed.expect,
                schedule.config.cell,
                result.cell,
                result.persistence
            ));
        }
        result.pinned.insert(invariant.clone(), name);
    }
    Ok(())
}

/// Shrink each finding of `result` and write it to `dir` as a seed file that expects the failure.
pub fn pin_findings<R: Route>(result: &mut CellResult<R>, dir: &std::path::Path) -> Result<(), String> {
    let fs = Fs::new(RealEnv::new());
    fs.create_dir_all(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    for (invariant, outcome) in &result.findings {
        let options = RunOptions::default();
        let shrunk =
            holdfast::shrink::shrink_schedule::<SqliteTarget<R>>(&outcome.schedule, &options, SHRINK_BUDGET_MAX)?;
        let name = seed_name(result.cell, result.persistence, invariant);
        let description = format!(
            "{}: {} in cell {} ({}) under persistence model {}, found by seed {} of the guarantee matrix, shrunk \
             to {} steps",
            R::NAME,
            shrunk.signature,
            result.cell,
            result.cell.promise(),
            result.persistence,
            outcome.seed,
            shrunk.steps_after
        );
        // Which persistence models the shrunk finding can happen on, and the replays' evidence (ADR-0173).
        let models =
            holdfast::models::classify_failure::<SqliteTarget<R>>(&shrunk.schedule, &shrunk.signature, &options);
        let (can_happen_on, cannot_on) = models.names();
        let (replay_fails_on, replay_differs_on) = models.replay_names();
        let seed = corpus::SeedFile {
            format_version: corpus::FORMAT_VERSION,
            name: name.clone(),
            target: R::NAME.to_string(),
            seed: shrunk.schedule.seed,
            canary: None,
            signature: shrunk.signature.clone(),
            expect: corpus::Expectation::Fail(shrunk.signature.clone()),
            adr: R::MATRIX_ADR.to_string(),
            description,
            digest: Some(shrunk.validation.digest_hex()),
            reproduces_on: Vec::new(),
            not_on: Vec::new(),
            can_happen_on,
            cannot_on,
            replay_fails_on,
            replay_differs_on,
            schedule: serde_json::to_value(&shrunk.schedule).map_err(|error| error.to_string())?,
        };
        let text = seed.to_json();
        let path = dir.join(format!("{name}.json"));
        corpus::SeedFile::parse(&path, &text).map_err(|error| error.to_string())?;
        fs.write(&path, text).map_err(|error| format!("{}: {error}", path.display()))?;
        result.pinned.insert(invariant.clone(), name);
    }
    Ok(())
}

/// Each cell's verdict in a matrix file [`render`] wrote: true where it agrees (`yes`), false where a pinned
/// seed shows a disagreement. Every one of the 16 cells must have its row.
pub fn read_verdicts(markdown: &str) -> Result<BTreeMap<Cell, bool>, String> {
    let mut verdicts = BTreeMap::new();
    for line in markdown.lines() {
        let columns: Vec<&str> = line.split('|').map(str::trim).collect();
        // `| MODE | SYNC | seeds | lost | partial | integrity | promise | agrees |`: 8 columns between 9 bars.
        let [_, mode, sync, _, _, _, _, _, agrees, _] = columns.as_slice() else { continue };
        let Some(cell) =
            Cell::all().into_iter().find(|cell| cell.journal_mode.sql() == *mode && cell.synchronous.sql() == *sync)
        else {
            continue;
        };
        if verdicts.insert(cell, *agrees == "yes").is_some() {
            return Err(format!("two rows for {cell}"));
        }
    }
    match Cell::all().into_iter().find(|cell| !verdicts.contains_key(cell)) {
        Some(missing) => Err(format!("no row for {missing}")),
        None => Ok(verdicts),
    }
}

/// The matrix of one persistence model as markdown: one table, one row per cell.
pub fn render<R: Route>(results: &[CellResult<R>], persistence: Persistence, command: &str) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "# SQLite's power-loss guarantees under the simulator: persistence model `{persistence}`\n");
    let _ = writeln!(
        text,
        "Generated by `{command}` (persistence model `{persistence}`, ADR-0109; profile `assumed`; ADR-0079, \
         ADR-0080, ADR-0118). Do not edit by hand.\n"
    );
    let _ = writeln!(
        text,
        "Columns: seeds run; acknowledged commits lost after a power cut (summed; first seed); partial \
         transactions seen; integrity failures (`PRAGMA integrity_check`, or SQLite reporting corruption); the \
         promise of SQLite's documentation (atomiccommit.html, pragma.html#pragma_synchronous, wal.html) and \
         code (ADR-0118); whether the cell agrees (`yes`, or the pinned seed in `seeds/{}/` that shows the disagreement).\n",
        R::SEEDS_SUBDIR
    );
    let _ = writeln!(
        text,
        "| journal_mode | synchronous | seeds | lost commits | partial transactions | integrity failures | \
         documented promise | agrees |"
    );
    let _ = writeln!(text, "|---|---|---|---|---|---|---|---|");
    for result in results {
        let lost = result.lost_commits.render(result.pinned_for(&["durability."]));
        let partial = result.partial_transactions.render(result.pinned_for(&["atomicity."]));
        let integrity = result.integrity_failures.render(result.pinned_for(&["structural.", "no_unexpected_error."]));
        let _ = writeln!(
            text,
            "| {} | {} | {} | {lost} | {partial} | {integrity} | {} | {} |",
            result.cell.journal_mode.sql(),
            result.cell.synchronous.sql(),
            result.summary.seeds_run,
            result.cell.promise(),
            result.agrees()
        );
    }
    let pinned: Vec<String> = results
        .iter()
        .flat_map(|result| {
            result.pinned.iter().map(move |(invariant, name)| {
                let seed = result.findings.get(invariant).map_or(0, |outcome| outcome.seed);
                format!("- `{name}`: {}, `{invariant}`, first found by seed {seed}", result.cell)
            })
        })
        .collect();
    if !pinned.is_empty() {
        let _ = writeln!(
            text,
            "\nDisagreements, each pinned in `seeds/{}/` (`expect: fail`, replayed by `cargo test -p {} --test \
             seeds`) and explained in {}:\n",
            R::SEEDS_SUBDIR,
            R::PACKAGE,
            R::MATRIX_ADR
        );
        for line in pinned {
            let _ = writeln!(text, "{line}");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{JournalMode, Synchronous};

    const PERSIST_NORMAL: Cell = Cell { journal_mode: JournalMode::Persist, synchronous: Synchronous::Normal };

    #[test]
    fn posix_keeps_its_names_and_other_models_are_named() {
        let invariant = "structural.integrity_check";
        assert_eq!(
            seed_name(PERSIST_NORMAL, Persistence::Posix, invariant),
            "persist-normal-structural-integrity-check"
        );
        assert_eq!(
            seed_name(PERSIST_NORMAL, Persistence::Ext4Ordered, invariant),
            "ext4-ordered-persist-normal-structural-integrity-check"
        );
        assert_eq!(matrix_file_name(Persistence::Posix), "MATRIX.md");
        assert_eq!(matrix_file_name(Persistence::Page), "MATRIX-page.md");
        assert_eq!(matrix_file_name(Persistence::Ext4Ordered), "MATRIX-ext4-ordered.md");
        assert_eq!(
            matrix_command::<VfsRoute>(Persistence::Posix, &(0..200), ""),
            "cargo run --release -p sqlite-target --bin sqlite-matrix -- --seeds 0..200",
            "the command MATRIX.md was always generated by"
        );
        assert_eq!(
            matrix_command::<VfsRoute>(Persistence::Page, &(0..20), " --cells durable"),
            "cargo run --release -p sqlite-target --bin sqlite-matrix -- --seeds 0..20 --persistence page --cells durable"
        );
    }

    #[test]
    fn the_header_names_the_model_and_the_command() {
        let result = CellResult {
            cell: PERSIST_NORMAL,
            persistence: Persistence::Page,
            summary: SwarmSummary::for_target::<SqliteTarget>(),
            lost_commits: Tally::default(),
            partial_transactions: Tally { count: 3, first_seed: Some(7) },
            integrity_failures: Tally::default(),
            findings: BTreeMap::new(),
            pinned: BTreeMap::new(),
        };
        let command = matrix_command::<VfsRoute>(Persistence::Page, &(0..200), "");
        let text = render::<VfsRoute>(&[result], Persistence::Page, &command);
        assert!(text.starts_with("# SQLite's power-loss guarantees under the simulator: persistence model `page`\n"));
        assert!(text.contains(&format!("Generated by `{command}` (persistence model `page`")), "{text}");
        assert!(text.contains(
            "| PERSIST | NORMAL | 0 | 0 | 3 (seed 7) | 0 | durable: every acknowledged commit survives | yes |"
        ));
        assert!(!text.contains("Disagreements"), "no finding, no list");
    }

    #[test]
    fn verdicts_are_read_cell_for_cell_from_a_committed_matrix() {
        let committed = include_str!("../../../seeds/sqlite/MATRIX-ext4-ordered.md");
        let verdicts = read_verdicts(committed).expect("the committed matrix reads");
        assert_eq!(verdicts.len(), 16);
        assert!(verdicts.values().all(|&agrees| agrees), "MATRIX-ext4-ordered.md: every cell agrees");
        let posix = read_verdicts(include_str!("../../../seeds/sqlite/MATRIX.md")).expect("MATRIX.md reads");
        assert!(!posix[&PERSIST_NORMAL], "MATRIX.md pins PERSIST/NORMAL's disagreement");
        let short: Vec<&str> = committed.lines().filter(|line| !line.starts_with("| WAL | EXTRA")).collect();
        let short = short.join("\n");
        assert_eq!(read_verdicts(&short).expect_err("a row missing"), "no row for WAL/EXTRA");
    }
}
