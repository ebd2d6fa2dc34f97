//! What the scaling probes (`append-scaling`, `skiplist-scaling`) share: their option parsing and the median.
//! Included by path from each binary (bench's main binary does not use it).

/// The most threads a probe runs.
pub const THREADS_MAX: usize = 64;
/// The most runs per case and thread count.
pub const RUNS_MAX: usize = 100;

/// `text` as a whole number in `min..=max`, or why not (naming `flag`).
pub fn parse_number(flag: &str, text: &str, min: u64, max: u64) -> Result<u64, String> {
    let number: u64 = text.parse().map_err(|_| format!("{flag} {text:?}: not a whole number"))?;
    if !(min..=max).contains(&number) {
        return Err(format!("{flag} {number}: want {min} to {max}"));
    }
    Ok(number)
}

/// A `--threads` list: comma-separated counts, 1 among them (ratios are to one thread).
pub fn parse_list(text: &str) -> Result<Vec<usize>, String> {
    let threads: Vec<usize> = text
        .split(',')
        .map(|part| parse_number("--threads", part.trim(), 1, THREADS_MAX as u64).map(|n| n as usize))
        .collect::<Result<_, _>>()?;
    if !threads.contains(&1) {
        return Err("--threads must include 1: ratios are to one thread".into());
    }
    Ok(threads)
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len() % 2 == 1 { sorted[middle] } else { (sorted[middle - 1] + sorted[middle]) / 2.0 }
}

/// A probe's `main`: parse the arguments (`Ok(None)` is `--help`: print `usage`), then `run`; an error is printed
/// after the probe's `name`, a bad argument exiting 2 and a failed run 1.
pub fn probe_main<A>(
    name: &str,
    usage: &str,
    parse: impl FnOnce(std::env::Args) -> Result<Option<A>, String>,
    run: impl FnOnce(A) -> Result<(), String>,
) -> std::process::ExitCode {
    let mut words = std::env::args();
    words.next();
    let args = match parse(words) {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{usage}");
            return std::process::ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("{name}: {error}");
            return std::process::ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{name}: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Write `json` to `out`, pretty, with a final newline.
pub fn write_json(out: &std::path::Path, json: &serde_json::Value) -> Result<(), String> {
    let text = serde_json::to_string_pretty(json).map_err(|error| error.to_string())? + "\n";
    std::fs::write(out, text).map_err(|error| format!("{}: {error}", out.display()))
}
