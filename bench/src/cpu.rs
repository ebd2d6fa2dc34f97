//! Where a timed run's CPU went (ADR-0214): the CPU time of the workload's own threads, and of every other
//! thread of the process (an engine's background flushes and compactions, the harness), over the measured
//! window. On a machine with as many cores as workers, the second kind competes with the first: a row's
//! throughput is at most `cores / (workers' + others' CPU per operation)`.
//!
//! Linux only (`/proc`); elsewhere every reading is `None` and rows carry no CPU figures.
//! (Real files on purpose: bench/ measures the real machine, ADR-0002's bans are for simulated code.)

use serde::{Deserialize, Serialize};

/// Linux's `USER_HZ`, the unit of /proc/self/stat's times: 100 on every architecture Linux exposes it on.
const USER_HZ: u64 = 100;

/// The calling thread's CPU time so far, in ns: the first field of /proc/thread-self/schedstat.
pub fn thread_cpu_ns() -> Option<u64> {
    parse_schedstat_ns(&std::fs::read_to_string("/proc/thread-self/schedstat").ok()?)
}

/// The whole process's CPU time so far (user and system, every thread, ended ones included), in ns, to
/// `USER_HZ`'s 10 ms resolution.
pub fn process_cpu_ns() -> Option<u64> {
    parse_stat_cpu_ns(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

fn parse_schedstat_ns(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().next()?.parse().ok()
}

/// `utime + stime` (fields 14 and 15) of a /proc/PID/stat line, in ns. Field 2, the command name, is in
/// parentheses and may hold spaces and parentheses itself: fields are counted from after its last `)`.
fn parse_stat_cpu_ns(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) * (1_000_000_000 / USER_HZ))
}

/// One run's CPU over its measured window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunCpu {
    /// Summed over the workload's threads, each from its first operation in the window to its last.
    pub workers_ns: u64,
    /// The whole process's over the window (10 ms resolution).
    pub process_ns: u64,
}

/// A row's CPU per operation, over all its runs: µs on the workload's threads, and µs on every other thread of
/// the process (`process - workers`, at least 0: the process figure's 10 ms resolution can read under the
/// workers' own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuPerOp {
    pub workers_us: f64,
    pub others_us: f64,
}

impl CpuPerOp {
    /// Over `runs` (each with its measured operations); `None` when a run has no reading or no operation ran.
    pub fn over(runs: &[(Option<RunCpu>, u64)]) -> Option<Self> {
        let mut sum = RunCpu::default();
        let mut ops = 0u64;
        for (cpu, run_ops) in runs {
            let cpu = (*cpu)?;
            sum.workers_ns += cpu.workers_ns;
            sum.process_ns += cpu.process_ns;
            ops += run_ops;
        }
        if ops == 0 {
            return None;
        }
        let per_op_us = |ns: u64| (ns as f64 / ops as f64).round() / 1000.0;
        Some(Self {
            workers_us: per_op_us(sum.workers_ns),
            others_us: per_op_us(sum.process_ns.saturating_sub(sum.workers_ns)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_reads_its_cpu_fields_past_a_name_with_spaces_and_parentheses() {
        let line = "4242 (holdfast (b) x) S 1 4242 4242 0 -1 4194560 500 0 0 0 250 75 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_stat_cpu_ns(line), Some((250 + 75) * 10_000_000));
        assert_eq!(parse_stat_cpu_ns("4242 (short) S 1 2"), None, "a line cut short");
        assert_eq!(parse_stat_cpu_ns("no name here"), None);
        assert_eq!(parse_schedstat_ns("202976031 193522603 72\n"), Some(202_976_031));
        assert_eq!(parse_schedstat_ns(""), None);
    }

    #[test]
    fn per_op_figures_split_workers_from_the_rest_and_need_every_run() {
        let run = |workers_ns, process_ns| Some(RunCpu { workers_ns, process_ns });
        let split = CpuPerOp::over(&[(run(3_000_000, 4_000_000), 1_000), (run(1_000_000, 2_000_000), 1_000)]);
        assert_eq!(split, Some(CpuPerOp { workers_us: 2.0, others_us: 1.0 }));
        let under = CpuPerOp::over(&[(run(5_000_000, 4_000_000), 1_000)]);
        assert_eq!(under, Some(CpuPerOp { workers_us: 5.0, others_us: 0.0 }), "the process read under its workers");
        assert_eq!(CpuPerOp::over(&[(run(1, 1), 1), (None, 1)]), None);
        assert_eq!(CpuPerOp::over(&[(run(1, 1), 0)]), None);
    }

    /// On Linux the readings move with work done: a thread that burns 60 ms of its own CPU moves the process's
    /// reading by at least 40 ms (its 10 ms ticks, read at both ends).
    #[test]
    #[cfg(target_os = "linux")]
    fn busy_work_moves_the_thread_and_process_readings() {
        const BURN_NS: u64 = 60_000_000;
        const SPINS_MAX: u64 = 1 << 40;
        let (thread0, process0) = (thread_cpu_ns().expect("schedstat"), process_cpu_ns().expect("stat"));
        let mut spins = 0u64;
        while thread_cpu_ns().expect("schedstat") - thread0 < BURN_NS {
            spins += 1;
            assert!(spins < SPINS_MAX, "60 ms of CPU never accrued");
            std::hint::black_box(spins);
        }
        let process = process_cpu_ns().expect("stat") - process0;
        assert!(process >= BURN_NS - 20_000_000, "process CPU moved {process} ns for {BURN_NS} ns burned");
    }
}
