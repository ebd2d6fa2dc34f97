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

    /// `swarm target=... seeds=... seeds_per_second=... work_steps_per_second=... median_seed_ms=...
    /// max_seed_ms=... idle_share=...`.
    fn render(&self) -> String {
        let ms = |nanos: u64| nanos as f64 / 1e6;
        let median = self.seed_cpu_nanos.get(self.seed_cpu_nanos.len() / 2).copied().unwrap_or(0);
        let max = self.seed_cpu_nanos.last().copied().unwrap_or(0);
        let idle = 1.0 - self.work_steps as f64 / self.steps.max(1) as f64;
        format!(
            "swarm target={} seeds={} seeds_per_second={:.1} work_steps_per_second={:.0} median_seed_ms={:.2} \
             max_seed_ms={:.2} idle_share={:.4}",
            self.target,
            self.seeds,
            Self::per_second(self.seeds, self.wall_nanos),
            self.work_steps_per_second(),
            ms(median),
            ms(max),
            idle
        )
    }
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
            println!("{}", line.render());
            if line.failed > 0 {
                println!("  ({} of {} seeds failed: run the swarm to see them)", line.failed, line.seeds);
            }
            lines.push(line);
        }
    }
    let Some(first) = lines.first() else { return EXIT_FAIL };
    println!("steps_per_second: {:.0}", first.work_steps_per_second());
    let real = lines.iter().find_map(|line| line.real_io.clone().map(|real| (line, real)));
    match real {
        Some((line, Ok((ops, nanos)))) => {
            let real_per_second = BenchLine::per_second(ops, nanos);
            println!("speedup_vs_real_io: {:.1}", line.work_steps_per_second() / real_per_second.max(1e-9));
            println!(
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
    if lines.iter().any(|line| line.failed > 0) { EXIT_FAIL } else { EXIT_PASS }
}

#[cfg(test)]
mod tests {
    use super::*;

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
             max_seed_ms=9.00 idle_share=0.2500"
        );
    }
}
