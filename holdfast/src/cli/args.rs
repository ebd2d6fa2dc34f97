//! The command line's arguments: [`Args`] (clap), its defaults and checks, and the range and shard parsers.

use std::ops::Range;
use std::path::PathBuf;

use clap::Parser;

use super::*;
use crate::config::FaultProfile;
use crate::runner::{RunOptions, STEPS_MAX};
use crate::swarm::SWARM_SEEDS_MAX;

/// Deterministic simulation: runs a system on a simulated disk with seeded faults, crashes and background-work
/// interleavings, checks invariants after every step, and replays any failure exactly.
///
/// Every run ends with `digest: <16 hex digits>`, a hash of every step, its result and the final disk image:
/// the same seed gives the same digest on every machine and in every process.
///
/// Exit codes: 0 pass, 1 an invariant failed (or coverage was missing, or the run was not deterministic),
/// 2 bad input, 3 standard output could not be written, 141 standard output's reader closed it (as SIGPIPE).
///
/// Panics: a panic the run reports as its failure (in the system, on one of its simulated threads) is printed in
/// the failure report; every other panic (a thread the simulator did not start, the runner itself) is printed on
/// stderr at once with its thread's name and message. Set SIMULATOR_PANIC_VERBOSE=1 to print every panic on
/// stderr as it happens, the reported ones too.
#[derive(Debug, Parser)]
#[command(version, long_about)]
pub struct Args {
    /// Run this one seed (decimal, or hexadecimal with 0x: `--seed 0xDEADBEEF` is `--seed 3735928559`).
    /// Defaults to 0. Also read from the SIMULATOR_SEED environment variable.
    #[arg(long, env = "SIMULATOR_SEED", value_parser = crate::parse_seed)]
    pub seed: Option<u64>,

    /// Steps per run (the liveness phase and final crash come after them).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=STEPS_MAX))]
    pub steps: u64,

    /// Run a swarm: every seed in A..B (end exclusive; decimal or 0x-hex), each with its own configuration,
    /// with a progress bar on stderr and a summary with coverage totals.
    #[arg(long, value_name = "A..B", value_parser = parse_range)]
    pub seeds: Option<Range<u64>>,

    /// Swarm: stop at the first failing seed.
    #[arg(long)]
    pub stop_on_failure: bool,

    /// Swarm: run this many seeds at once, each on its own thread with its own simulated world (or, with
    /// --isolate, its own child process). Defaults to the number of cores. The summary, the failure list and
    /// the swarm digest are the same for every value.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    pub jobs: Option<u64>,

    /// Swarm: run each seed in a child process, so that a seed that aborts the whole process (a panic inside a
    /// destructor while unwinding, say) is reported as a failure of that seed (`no_abort`) instead of ending the
    /// swarm. On by default where the target asks for it (redb under `--fault-profile beyond`). The swarm digest
    /// folds each child's digest.
    #[arg(long)]
    pub isolate: bool,

    /// Swarm: run only this shard, I/N: seed s runs in shard s mod N.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    pub shard: Option<(u64, u64)>,

    /// Swarm: print the summary as one JSON object on stdout (seeds run, failures, their replay commands,
    /// coverage totals, required and missing coverage, digest), for merging shards. Stdout then holds that one
    /// object and nothing else: progress and failure lines go to stderr.
    #[arg(long, global = true)]
    pub json: bool,

    /// Wall-clock watchdog, in seconds per seed (0 turns it off): a seed still running after this long fails as
    /// `liveness.stuck`, with the phase and step it reached and its replay command, and the swarm goes on. Its
    /// thread cannot be stopped: it is abandoned and runs until the process exits, after the summary (with
    /// --isolate the child process is killed instead); after 16 stuck seeds the swarm stops. Applies to --seeds
    /// and --seed runs, not to --replay, --check-determinism or --bench. Default: 300 s per 1000 --steps, and at
    /// least 300 s (ADR-0098).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(0..=SEED_TIMEOUT_S_MAX))]
    pub seed_timeout: Option<u64>,

    /// Swarm: when stderr is not a terminal (a CI log, a file), print `swarm progress: N/M seeds, F failed, S s`
    /// on stderr at most every this many seconds (0: after every seed). A terminal gets the progress bar instead.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub progress_seconds: u64,

    /// Swarm: exit 1 if any coverage counter the swarm's configurations require is zero (every enabled fault
    /// kind, every crash place, BUGGIFY sites fired, the target's own), printing which.
    #[arg(long, global = true)]
    pub require_coverage: bool,

    /// Swarm: --require-coverage (implied), and also every probe the target declares: the rare paths its code
    /// marks with `env::probe!` (the summary's `probes: H of D hit` and `never hit:` lines). Exit 1 if some
    /// declared probe no seed hit, printing which. Rare probes need big swarms (thousands of seeds, or more):
    /// a never-hit probe in a short swarm says where the simulation does not reach, not that something broke.
    #[arg(long, global = true)]
    pub require_probes: bool,

    /// Replay a schedule JSON file (as written by --save-schedule) or a seed file (as written by --save;
    /// detected by its fields, and its canary is turned on). The seed and configuration come from the file.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,

    /// Write a JSON-lines trace: one line per step with its result and the running digest.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,

    /// Write the steps that ran as a schedule JSON file (replay it with --replay). With --shrink, after a
    /// failure: the minimal schedule the shrink printed.
    #[arg(long, value_name = "FILE")]
    pub save_schedule: Option<PathBuf>,

    /// Run twice in this process and compare the digest after every step; report the first diverging step.
    #[arg(long)]
    pub check_determinism: bool,

    /// Benchmark every target this binary has: each runs its standard swarm (seeds 0..1000, or --seeds A..B;
    /// default steps; one job), through the same code as any swarm, and prints one line per target:
    /// `swarm target=T seeds=N seeds_per_second=X work_steps_per_second=Y median_seed_ms=A max_seed_ms=B
    /// idle_share=C cpu_work_steps_per_second=D` (seed times are CPU time of the thread that ran the seed; D is
    /// the work steps over the seeds' summed CPU time). Then `steps_per_second:` (the
    /// first target's work steps per second) and, where the binary can replay operations on real IO,
    /// `speedup_vs_real_io:`.
    #[arg(long)]
    pub bench: bool,

    /// With --bench: exit 1 when target T's slowest seed costs more than R times its median seed, in CPU time
    /// (`--max-seed-ratio engine=20`). Repeatable.
    #[arg(long, value_name = "T=R", value_parser = bench::parse_seed_ratio, requires = "bench")]
    pub max_seed_ratio: Vec<bench::SeedRatioGuard>,

    /// With --bench: exit 1 when target A's work steps per CPU second fall below R times target B's in the same
    /// run, so the machine's speed cancels (`--min-steps-ratio engine/txn=0.3`). Repeatable.
    #[arg(long, value_name = "A/B=R", value_parser = bench::parse_steps_ratio, requires = "bench")]
    pub min_steps_ratio: Vec<bench::StepsRatioGuard>,

    /// Shrink the failure found by --seed, --replay or --seeds: replay smaller schedules and simpler
    /// configurations while the failure keeps its signature (invariant and kind), then print the minimal
    /// schedule, one line per step, `shrunk: <before> -> <after> steps`, and the fresh replay that confirms it
    /// (its digest last). From a swarm it shrinks the failing seed that ran the fewest steps (the lowest such
    /// seed; with --stop-on-failure, the first failure), named first as `shrinking: seed N ...`: the shortest
    /// failing run is the best start, and some failures need a volume of data that no removal of steps from a
    /// long run reaches (ADR-0193).
    #[arg(long)]
    pub shrink: bool,

    /// Shrink budget, in reruns (not time, so the result does not depend on the machine). A budget of at least
    /// twice 230 keeps 230 back for a final single-step-removal pass, so a failure shrunk to at most 20 steps
    /// always ends 1-minimal (ADR-0116).
    #[arg(long, value_name = "N", default_value_t = shrinker::RERUNS_DEFAULT)]
    pub shrink_budget: u64,

    /// With --shrink: save the shrunk failure as the regression seed NAME.json in the target's seeds directory
    /// (needs --adr), then print its path, replay command and test command. It expects `fail` with its
    /// signature when a canary is on (a detection seed) or the target pins findings in a system it does not
    /// maintain, else `pass`: the bug gets fixed and the seed goes green.
    #[arg(long, value_name = "NAME", requires = "shrink")]
    pub save: Option<String>,

    /// With --save: the decision record that explains the bug (`ADR-0033`). Required with --save.
    #[arg(long, value_name = "ADR-XXXX")]
    pub adr: Option<String>,

    /// With --save: one sentence on the bug, stored in the seed file.
    #[arg(long, value_name = "TEXT")]
    pub description: Option<String>,

    /// The system under test (see the list of targets below).
    #[arg(long)]
    pub target: Option<String>,

    /// Which faults the simulated disk may inject: `assumed` (the default: what the system's documentation
    /// assumes of the media; a failure is a bug) or `beyond` (more than that; failures characterise the system,
    /// except for faults the target claims to survive there: the engine's garbled torn sectors). Only for targets
    /// that define the profile.
    #[arg(long, value_name = "PROFILE", value_parser = ["assumed", "beyond"])]
    pub fault_profile: Option<String>,

    /// On a failure the target can draw (a serializability cycle, for the txn target), write the drawing as a
    /// Graphviz DOT file.
    #[arg(long, value_name = "FILE")]
    pub dot: Option<PathBuf>,

    /// The persistence model of the simulated disk (ADR-0109): what a crash may leave of unsynced state.
    /// `posix` (the default unless the target's fault menu names another: every unsynced write and every sector
    /// of it has its own fate, the most adversarial
    /// reading of POSIX), `page` (a page cache: each dirty page holds a prefix of the writes into it; pages, files
    /// and directory entries are otherwise independent), `ext4-ordered` (`page`, plus ext4 data=ordered:
    /// metadata persists as a prefix of one journal that every sync commits, and a size never exposes unwritten
    /// blocks). Applies to generated runs (`--seed`, `--seeds`); a replay uses the model its schedule stores unless
    /// this flag replaces it.
    #[arg(long, value_name = "MODEL", value_parser = ["posix", "page", "ext4-ordered"])]
    pub persistence: Option<String>,

    /// The simulated device's sector in bytes (ADR-0110): 512 (the default) or 4096. `posix` tears writes at
    /// it, and `Env::sector_size_bytes` reports it (the engine's WAL pads records to it).
    #[arg(long, value_name = "BYTES", value_parser = ["512", "4096"])]
    pub sector_size: Option<String>,

    /// With --seed or --replay (a schedule or seed file): write the disk as recovery saw it after the run's last
    /// crash (for a failing run, the crash whose recovery failed or preceded the failure) as ordinary files under
    /// DIR/disk/, and DIR/CRASH.txt: seed, target, model, the failure, and which pending writes the crash kept,
    /// dropped or tore and which directory operations it kept or dropped (ADR-0111).
    #[arg(long, value_name = "DIR")]
    pub export_image: Option<PathBuf>,

    /// The simulated device that prices each IO call (ADR-0181): `nvme` (the default), `sata-ssd`, `hdd`,
    /// `cloud-block`, or `drawn` (one of them per seed, from the seed). Changes no run and no digest: only the
    /// simulated latencies `--trace` and `--cost-report` show.
    #[arg(long, value_name = "DEVICE", value_parser = ["nvme", "sata-ssd", "hdd", "cloud-block", "drawn"])]
    pub device: Option<String>,

    /// With --seeds: after the summary, print the distribution of each cost (bytes, calls, syncs, simulated IO
    /// time) per kind of step, the simulated latency per kind of IO call, and the system's work counters
    /// (ADR-0183). With --json, the summary's `cost_report` holds it.
    #[arg(long)]
    pub cost_report: bool,

    /// Turn this planted bug on for every run, replay and shrink. Only for targets built with canaries.
    #[arg(long, value_name = "NAME")]
    pub canary: Option<String>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Commands besides running seeds.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Fold swarm shards' `--json` summaries into the unsharded swarm's summary.
    ///
    /// Each FILE is the output of `--seeds A..B --shard I/N --json`. The result has the shards' seeds, failures,
    /// coverage totals, required and missing coverage, and a digest equal to the unsharded swarm's. Printed like a swarm's summary (`--json`: as one JSON object); exits 1 when a shard failed or,
    /// with --require-coverage, coverage is missing.
    Merge {
        /// The shard summaries to fold.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
}

impl Args {
    /// The fault profile asked for (`assumed` unless `--fault-profile` says otherwise).
    pub fn profile(&self) -> FaultProfile {
        self.fault_profile.as_deref().map_or(FaultProfile::Assumed, |name| {
            FaultProfile::parse(name).expect("clap allows only known profile names")
        })
    }

    /// Is coverage checked (`--require-coverage`, or `--require-probes`, which implies it)?
    pub fn requires_coverage(&self) -> bool {
        self.require_coverage || self.require_probes
    }

    /// Seeds run at once (`--jobs`, else the number of cores).
    pub fn jobs(&self) -> usize {
        self.jobs.map_or_else(RealEnv::cores, |jobs| usize::try_from(jobs).expect("at most 256"))
    }

    /// The watchdog's limit per seed: `--seed-timeout` (0: none), else the default for `--steps` (ADR-0098).
    pub fn seed_timeout(&self) -> Option<std::time::Duration> {
        let default_s =
            (self.steps.div_ceil(1000) * SEED_TIMEOUT_S_PER_1000_STEPS).clamp(SEED_TIMEOUT_S_MIN, SEED_TIMEOUT_S_MAX);
        let seconds = self.seed_timeout.unwrap_or(default_s);
        (seconds > 0).then(|| std::time::Duration::from_secs(seconds))
    }

    /// The flags, besides `--target`, `--seed` and `--steps`, that choose how a generated run goes: the fault
    /// profile, the canary, the persistence model and the sector size, in that order. A replay command and an
    /// isolated swarm's child processes take them from here, so that neither runs a different model (ADR-0201).
    pub fn run_flags(&self) -> Vec<(&'static str, &str)> {
        [
            ("--fault-profile", &self.fault_profile),
            ("--canary", &self.canary),
            ("--persistence", &self.persistence),
            ("--sector-size", &self.sector_size),
        ]
        .into_iter()
        .filter_map(|(flag, value)| value.as_deref().map(|value| (flag, value)))
        .collect()
    }

    /// The options every run of this command uses.
    pub fn run_options(&self) -> RunOptions {
        RunOptions {
            steps: self.steps,
            record_trace: self.trace.is_some(),
            canary: self.canary.clone(),
            profile: self.profile(),
            persistence: self
                .persistence
                .as_deref()
                .map(|name| env::Persistence::parse(name).expect("clap allows only known model names")),
            sector_bytes: self.sector_size.as_deref().map(|bytes| bytes.parse().expect("clap allows 512, 4096")),
            keep_crash_image: self.export_image.is_some(),
            device: match self.device.as_deref() {
                None => Some(env::Device::Nvme),
                Some("drawn") => None,
                Some(name) => Some(env::Device::parse(name).expect("clap allows only known device names")),
            },
            cost_report: self.cost_report,
            ..RunOptions::default()
        }
    }
}

fn parse_range(text: &str) -> Result<Range<u64>, String> {
    let (start, end) = text.split_once("..").ok_or_else(|| format!("invalid range {text:?}: want A..B"))?;
    let (start, end) = (crate::parse_seed(start)?, crate::parse_seed(end)?);
    if start >= end {
        return Err(format!("invalid range {text:?}: empty (A must be below B)"));
    }
    if end - start > SWARM_SEEDS_MAX {
        return Err(format!("invalid range {text:?}: more than {SWARM_SEEDS_MAX} seeds"));
    }
    Ok(start..end)
}

fn parse_shard(text: &str) -> Result<(u64, u64), String> {
    let (index, count) = text.split_once('/').ok_or_else(|| format!("invalid shard {text:?}: want I/N"))?;
    let index: u64 = index.trim().parse().map_err(|_| format!("invalid shard index in {text:?}"))?;
    let count: u64 = count.trim().parse().map_err(|_| format!("invalid shard count in {text:?}"))?;
    if count == 0 || index >= count {
        return Err(format!("invalid shard {text:?}: need 0 <= I < N"));
    }
    Ok((index, count))
}
