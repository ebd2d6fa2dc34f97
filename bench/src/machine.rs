//! Facts about the machine and the build a result records: load, peak memory, CPU, fdatasync latency, source.

use std::path::Path;
use std::time::Instant;

/// The 1-minute load average, from /proc/loadavg's first field.
fn load_1min(loadavg: &str) -> Option<f64> {
    loadavg.split_whitespace().next().and_then(|field| field.parse().ok())
}

/// A warning when the 1-minute load average is above the core count (None when it is not, or unknown).
pub fn load_warning(when: &str, loadavg: &str, cpus: usize) -> Option<String> {
    let load = load_1min(loadavg)?;
    (load > cpus as f64).then(|| {
        format!(
            "load average {load:.2} at the {when} is above the {cpus} cores: other work competed with the benchmark; \
             its numbers are pessimistic and noisy"
        )
    })
}

/// Reset the process's peak resident set (Linux: `echo 5 > /proc/self/clear_refs`), so [`peak_rss_kib`] reads the
/// peak from now on. False where the OS refuses: the peak would then be the whole process's, not the row's.
/// (Real files on purpose: bench/ measures the real machine, ADR-0002's bans are for simulated code.)
#[must_use]
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's peak resident set since a reset that succeeded, in KiB (`VmHWM` in /proc/self/status); None
/// without one, so a row never reports another row's peak as its own.
pub fn peak_rss_kib(reset: bool) -> Option<u64> {
    if !reset {
        return None;
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

pub fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_default()
}

pub fn machine_name() -> String {
    let h = read_trim("/etc/hostname");
    let h = if h.is_empty() { read_trim("/proc/sys/kernel/hostname") } else { h };
    let h: String = h.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect();
    if h.is_empty() { "machine".into() } else { h }
}

/// UTC date as YYYY-MM-DD (civil-from-days, Howard Hinnant).
pub fn today() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

pub fn cpu_model() -> String {
    read_trim("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The disk's sync latency, for context: p50 of 50 appends + fdatasync.
pub fn fdatasync_probe(dir: &Path) -> f64 {
    use std::io::Write;
    let _ = std::fs::create_dir_all(dir);
    let path = dir.join("fsync-probe");
    let Ok(mut f) = std::fs::File::create(&path) else { return f64::NAN };
    let mut v = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        let _ = f.write_all(&[0u8; 128]);
        let _ = f.sync_data();
        v.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let _ = std::fs::remove_file(&path);
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The holdfast source this binary was built from (`build.rs`: HEAD's short hash at build time, and whether
/// engine/ or env/ had uncommitted changes); empty when it was built outside a git checkout.
pub fn holdfast_source() -> String {
    env!("HOLDFAST_SOURCE").to_string()
}
