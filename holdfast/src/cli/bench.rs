//! `--bench`: every target's standard swarm, through the same code as any swarm, with one job; one line per
//! target that tools read, then the figures older tools grep for.

use std::ops::Range;

use env::{Env, RealEnv};

use super::{Args, Cli, Context, EXIT_FAIL, EXIT_PASS, RealIo};
use crate::schedule::ScheduleOf;
use crate::swarm::{SwarmOptions, run_swarm};
use crate::target::Target;

/// The standard swarm: seeds `0..STANDARD_SEEDS` at the default steps.
pub const STANDARD_SEEDS: u64 = 1000;

/// What one target's standard swarm measured.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct BenchLine {
    target: &'static str,
    seeds: u64,
    failed: u64,
    wall_nanos: u64,
    work_steps: u64,
    steps: u64,
    /// CPU time per seed (the thread that ran it), sorted.
    seed_cpu_nanos: Vec<u64>,
    /// Real-IO replay of the first seed's operations, when the binary registered one.
    real_io: Option<Result<RealIo, String>>,
}

impl BenchLine {
    fn per_second(count: u64, nanos: u64) -> f64 {
        count as f64 * 1e9 / nanos.max(1) as f64
    }

    fn work_steps_per_second(&self) -> f64 {
        Self::per_second(self.work_steps, self.wall_nanos)
    }

    /// Work steps per second of CPU time of the threads that ran the seeds (other processes do not lower it).
    fn work_steps_per_cpu_second(&self) -> f64 {
        Self::per_second(self.work_steps, self.seed_cpu_nanos.iter().sum())
    }

    fn median_seed_nanos(&self) -> u64 {
        self.seed_cpu_nanos.get(self.seed_cpu_nanos.len() / 2).copied().unwrap_or(0)
    }

    fn max_seed_nanos(&self) -> u64 {
        self.seed_cpu_nanos.last().copied().unwrap_or(0)
    }

    /// `swarm target=... seeds=... seeds_per_second=... work_steps_per_second=... median_seed_ms=...
    /// max_seed_ms=... idle_share=... cpu_work_steps_per_second=...`.
    fn render(&self) -> String {
        let ms = |nanos: u64| nanos as f64 / 1e6;
        let idle = 1.0 - self.work_steps as f64 / self.steps.max(1) as f64;
        format!(
            "swarm target={} seeds={} seeds_per_second={:.1} work_steps_per_second={:.0} median_seed_ms={:.2} \
             max_seed_ms={:.2} idle_share={:.4} cpu_work_steps_per_second={:.0}",
            self.target,
            self.seeds,
            Self::per_second(self.seeds, self.wall_nanos),
            self.work_steps_per_second(),
            ms(self.median_seed_nanos()),
            ms(self.max_seed_nanos()),
            idle,
            self.work_steps_per_cpu_second()
        )
    }
}

/// `--max-seed-ratio TARGET=R`: the target's slowest seed may cost at most R times its median seed (CPU time).
#[derive(Clone, Debug, PartialEq)]
pub struct SeedRatioGuard {
    pub target: String,
    pub ratio_max: f64,
}

/// `--min-steps-ratio A/B=R`: target A's work steps per CPU second must be at least R times target B's in the
/// same run (so the machine's speed cancels).
#[derive(Clone, Debug, PartialEq)]
pub struct StepsRatioGuard {
    pub target: String,
    pub baseline: String,
    pub ratio_min: f64,
}

/// `NAME=R` with R a positive number.
fn parse_named_ratio(text: &str) -> Result<(&str, f64), String> {
    let (name, ratio) = text.split_once('=').ok_or_else(|| format!("{text:?}: want NAME=RATIO"))?;
    let ratio: f64 = ratio.parse().map_err(|_| format!("{text:?}: {ratio:?} is not a number"))?;
    if name.is_empty() || !ratio.is_finite() || ratio <= 0.0 {
        return Err(format!("{text:?}: want a target name and a positive ratio"));
    }
    Ok((name, ratio))
}

/// Parse `--max-seed-ratio engine=20`.
pub fn parse_seed_ratio(text: &str) -> Result<SeedRatioGuard, String> {
    let (target, ratio_max) = parse_named_ratio(text)?;
    Ok(SeedRatioGuard { target: target.to_string(), ratio_max })
}

/// Parse `--min-steps-ratio engine/txn=0.3`.
pub fn parse_steps_ratio(text: &str) -> Result<StepsRatioGuard, String> {
    let (pair, ratio_min) = parse_named_ratio(text)?;
    let (target, baseline) = pair.split_once('/').ok_or_else(|| format!("{text:?}: want A/B=RATIO"))?;
    if target.is_empty() || baseline.is_empty() || target == baseline {
        return Err(format!("{text:?}: want two different target names, A/B=RATIO"));
    }
    Ok(StepsRatioGuard { target: target.to_string(), baseline: baseline.to_string(), ratio_min })
}

/// The guards `lines` break: one message each (a guard naming a target the run did not bench breaks too).
fn broken_guards(lines: &[BenchLine], seed_ratios: &[SeedRatioGuard], steps_ratios: &[StepsRatioGuard]) -> Vec<String> {
    let line = |name: &str| lines.iter().find(|line| line.target == name);
    let mut broken = Vec::new();
    for guard in seed_ratios {
        let Some(line) = line(&guard.target) else {
            broken.push(format!("--max-seed-ratio: target {} was not benched", guard.target));
            continue;
        };
        let (median, max) = (line.median_seed_nanos(), line.max_seed_nanos());
        let ratio = max as f64 / median.max(1) as f64;
        if median == 0 || ratio > guard.ratio_max {
            broken.push(format!(
                "--max-seed-ratio: {}'s slowest seed took {:.2} ms of CPU, {ratio:.1} times its median {:.2} ms \
                 (at most {} allowed)",
                guard.target,
                max as f64 / 1e6,
                median as f64 / 1e6,
                guard.ratio_max
            ));
        }
    }
    for guard in steps_ratios {
        let (Some(target), Some(baseline)) = (line(&guard.target), line(&guard.baseline)) else {
            broken.push(format!("--min-steps-ratio: {} or {} was not benched", guard.target, guard.baseline));
            continue;
        };
        let (ours, theirs) = (target.work_steps_per_cpu_second(), baseline.work_steps_per_cpu_second());
        let ratio = ours / theirs.max(1e-9);
        if ratio < guard.ratio_min {
            broken.push(format!(
                "--min-steps-ratio: {} ran {ours:.0} work steps per CPU second, {ratio:.3} times {}'s {theirs:.0} \
                 (at least {} required)",
                guard.target, guard.baseline, guard.ratio_min
            ));
        }
    }
    broken
}

/// The seeds `--bench` runs: `--seeds A..B`, else the standard `0..STANDARD_SEEDS`.
fn bench_seeds(args: &Args) -> Range<u64> {
    args.seeds.clone().unwrap_or(0..STANDARD_SEEDS)
}

/// Run `T`'s standard swarm with one job and measure it.
pub(super) fn bench_target<T: Target>(context: &Context<'_>) -> Option<BenchLine> {
    let args = context.args;
    let options = SwarmOptions {
        seeds: bench_seeds(args),
        shard: None,
        stop_on_failure: false,
        jobs: 1,
        run: args.run_options(),
        // The benchmark measures seeds run on this thread, as it always did; the watchdog would move them.
        seed_timeout: None,
    };
    let clock = RealEnv::new();
    let started = clock.now();
    let mut line = BenchLine {
        target: T::NAME,
        seeds: 0,
        failed: 0,
        wall_nanos: 0,
        work_steps: 0,
        steps: 0,
        seed_cpu_nanos: Vec::new(),
        real_io: None,
    };
    let replay = context.entry.real_io.as_ref().and_then(|replay| replay.downcast_ref::<RealIoFn<T>>()).copied();
    run_swarm::<T>(&options, |outcome| {
        line.seeds += 1;
        line.failed += u64::from(!outcome.passed());
        line.work_steps += outcome.work_steps;
        line.steps += outcome.steps_run;
        line.seed_cpu_nanos.push(outcome.cpu_nanos.unwrap_or(0));
        if line.real_io.is_none() {
            line.real_io = replay.map(|replay| replay(&outcome.schedule));
        }
    });
    line.wall_nanos = u64::try_from(clock.now().saturating_sub(started).as_nanos()).unwrap_or(u64::MAX);
    line.seed_cpu_nanos.sort_unstable();
    Some(line)
}

/// The type `Cli::real_io` stores for target `T`.
type RealIoFn<T> = fn(&ScheduleOf<T>) -> Result<RealIo, String>;

/// `--bench`: every built target's line, then `steps_per_second:` and `speedup_vs_real_io:`.
pub(super) fn bench_all(cli: &Cli, args: &Args) -> u8 {
    let mut lines = Vec::new();
    for entry in cli.entries.iter().filter(|entry| entry.unbuilt.is_none()) {
        let context = Context { args, cli, entry };
        if let Some(line) = (entry.bench)(&context) {
            outln!("{}", line.render());
            if line.failed > 0 {
                outln!("  ({} of {} seeds failed: run the swarm to see them)", line.failed, line.seeds);
            }
            lines.push(line);
        }
    }
    let Some(first) = lines.first() else { return EXIT_FAIL };
    outln!("steps_per_second: {:.0}", first.work_steps_per_second());
    let real = lines.iter().find_map(|line| line.real_io.clone().map(|real| (line, real)));
    match real {
        Some((line, Ok((ops, nanos)))) => {
            let real_per_second = BenchLine::per_second(ops, nanos);
            outln!("speedup_vs_real_io: {:.1}", line.work_steps_per_second() / real_per_second.max(1e-9));
            outln!(
                "(real IO: the first {ops} operations of {}'s seed {} in {} ms, {real_per_second:.0} ops/s)",
                line.target,
                bench_seeds(args).start,
                nanos / 1_000_000
            );
        }
        Some((line, Err(error))) => {
            eprintln!("error: --bench: {}'s real-IO replay: {error}", line.target);
            return EXIT_FAIL;
        }
        None => {}
    }
    let broken = broken_guards(&lines, &args.max_seed_ratio, &args.min_steps_ratio);
    for message in &broken {
        eprintln!("error: {message}");
    }
    if lines.iter().any(|line| line.failed > 0) || !broken.is_empty() { EXIT_FAIL } else { EXIT_PASS }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(target: &'static str, work_steps: u64, seed_cpu_nanos: Vec<u64>) -> BenchLine {
        BenchLine {
            target,
            seeds: seed_cpu_nanos.len() as u64,
            failed: 0,
            wall_nanos: 1_000_000_000,
            work_steps,
            steps: work_steps,
            seed_cpu_nanos,
            real_io: None,
        }
    }

    #[test]
    fn guards_pass_within_their_bounds_and_fail_past_them() {
        // engine (sorted, as bench_target keeps them): median 10 ms, max 200 ms (20x); 1,000 steps in 0.4 CPU-s.
        // txn: 1,000 steps in 0.1 CPU-s, so engine/txn is 0.25.
        let lines = [
            line("engine", 1_000, vec![10_000_000, 10_000_000, 10_000_000, 170_000_000, 200_000_000]),
            line("txn", 1_000, vec![20_000_000; 5]),
        ];
        let seed = |ratio_max| vec![parse_seed_ratio(&format!("engine={ratio_max}")).expect("parses")];
        let steps = |ratio_min| vec![parse_steps_ratio(&format!("engine/txn={ratio_min}")).expect("parses")];
        assert_eq!(broken_guards(&lines, &seed(20.0), &steps(0.25)), Vec::<String>::new());
        let broken = broken_guards(&lines, &seed(19.9), &steps(0.26));
        assert_eq!(broken.len(), 2, "{broken:?}");
        assert!(broken[0].contains("20.0 times its median 10.00 ms"), "{broken:?}");
        assert!(broken[1].contains("0.250 times txn's 10000"), "{broken:?}");
        let unknown = broken_guards(&lines, &[parse_seed_ratio("redb=5").expect("parses")], &[]);
        assert_eq!(unknown, vec!["--max-seed-ratio: target redb was not benched".to_string()]);
        let no_cpu = [line("engine", 1_000, vec![0; 3])];
        assert_eq!(broken_guards(&no_cpu, &seed(20.0), &[]).len(), 1, "no CPU time measured cannot pass");
    }

    #[test]
    fn guard_arguments_parse_or_say_what_is_wrong() {
        let guard = parse_steps_ratio("engine/txn=0.3").expect("parses");
        assert_eq!((guard.target.as_str(), guard.baseline.as_str(), guard.ratio_min), ("engine", "txn", 0.3));
        assert_eq!(parse_seed_ratio("engine=20").expect("parses").ratio_max, 20.0);
        for bad in ["engine", "engine=", "engine=x", "=3", "engine=0", "engine=-1", "engine=inf"] {
            assert!(parse_seed_ratio(bad).is_err(), "{bad}");
        }
        for bad in ["engine=0.3", "engine/=0.3", "/txn=0.3", "txn/txn=1"] {
            assert!(parse_steps_ratio(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_line_has_the_documented_form() {
        let line = BenchLine {
            target: "engine",
            seeds: 4,
            failed: 0,
            wall_nanos: 2_000_000_000,
            work_steps: 3_000,
            steps: 4_000,
            seed_cpu_nanos: vec![1_000_000, 2_000_000, 3_000_000, 9_000_000],
            real_io: None,
        };
        assert_eq!(
            line.render(),
            "swarm target=engine seeds=4 seeds_per_second=2.0 work_steps_per_second=1500 median_seed_ms=3.00 \
             max_seed_ms=9.00 idle_share=0.2500 cpu_work_steps_per_second=200000"
        );
    }
}
