//! `skiplist-scaling`: how a memtable's key layout bears on its inserts at one thread and at several, on this
//! machine (ADR-0211). Every case inserts versions into `crossbeam-skiplist` maps the way the engine's memtable
//! does (a user key and a sequence, newest first; a value of `--value-bytes`), into a map loaded with
//! `--keys` versions first; it reports inserts per second at each thread count and the ratio to one thread in the
//! same run. After every run each map is read back and every version checked, so a case that lost a write fails
//! instead of reporting a speed.
//!
//! Like the rest of `bench`, it measures the host: it calls `std::thread` and the wall clock directly, outside
//! `Env` (bench is its own workspace, outside the determinism rule), and shapes no simulated run.
//!
//! ```text
//! cargo run --release --bin skiplist-scaling -- [--threads 1,2] [--runs 3] [--keys 100000] [--inserts 400000]
//!     [--value-bytes 100] [--out FILE]
//! ```

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use crossbeam_skiplist::SkipMap;

#[path = "../scaling_common.rs"]
mod scaling_common;
use scaling_common::{RUNS_MAX, median, parse_list, parse_number, probe_main, write_json};

/// The most versions a map is loaded with, and the most inserts one run makes over all its threads.
const VERSIONS_MAX: u64 = 50_000_000;
/// The bytes of a user key: `user` and 12 digits, as `holdfast-bench`'s YCSB keys.
const KEY_BYTES: usize = 16;
/// The key bytes an inline key holds (the engine's `INLINE_KEY_BYTES_MAX`).
const INLINE_BYTES: usize = 32;
/// The maps the sharded case spreads its keys over (by key number).
const SHARDS: usize = 8;

const USAGE: &str = "skiplist-scaling: a memtable's key layout and its inserts at one thread and several (ADR-0211)

Every case inserts versions (a 16-byte user key drawn at random from --keys, a sequence, a value of --value-bytes)
into crossbeam-skiplist maps loaded with --keys versions first. A case with a map per thread makes --inserts
inserts into each map (every thread does the work one thread does alone); the others make --inserts in all, split
evenly over the threads. Speeds count every insert of the run. The thread counts take turns run by run, and each
run's maps are read back and every version checked before its speed counts.

Cases:
  heap-keys-map-per-thread     the user key in a heap buffer of its own (a Vec, what the engine's memtable held
                               before ADR-0211); each thread inserts into a map of its own: no data is shared
  inline-keys-map-per-thread   the user key held in the skiplist node (ADR-0211); a map per thread
  heap-keys-one-map            heap keys, every thread inserting into one map (a memtable under committers)
  inline-keys-one-map          inline keys, one map
  inline-keys-shards           inline keys, every thread inserting into 8 maps, a key's map chosen by the key
                               (a memtable split by key)

Options:
  --threads LIST       thread counts (default 1,2)
  --runs N             runs per case and thread count (default 3)
  --keys N             distinct user keys, and the versions each map is loaded with (default 100000)
  --inserts N          inserts per run into each map per thread, or over all threads (default 400000)
  --value-bytes N      bytes per value (default 100)
  --out FILE           also write the results as JSON
  --help               this text";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
enum Case {
    HeapKeysMapPerThread,
    InlineKeysMapPerThread,
    HeapKeysOneMap,
    InlineKeysOneMap,
    InlineKeysShards,
}

impl Case {
    const ALL: [Case; 5] = [
        Case::HeapKeysMapPerThread,
        Case::InlineKeysMapPerThread,
        Case::HeapKeysOneMap,
        Case::InlineKeysOneMap,
        Case::InlineKeysShards,
    ];

    fn name(self) -> &'static str {
        match self {
            Case::HeapKeysMapPerThread => "heap-keys-map-per-thread",
            Case::InlineKeysMapPerThread => "inline-keys-map-per-thread",
            Case::HeapKeysOneMap => "heap-keys-one-map",
            Case::InlineKeysOneMap => "inline-keys-one-map",
            Case::InlineKeysShards => "inline-keys-shards",
        }
    }

    fn inline(self) -> bool {
        matches!(self, Case::InlineKeysMapPerThread | Case::InlineKeysOneMap | Case::InlineKeysShards)
    }

    fn map_per_thread(self) -> bool {
        matches!(self, Case::HeapKeysMapPerThread | Case::InlineKeysMapPerThread)
    }

    /// How many maps a run at `threads` threads inserts into.
    fn maps(self, threads: usize) -> usize {
        match self {
            Case::HeapKeysMapPerThread | Case::InlineKeysMapPerThread => threads,
            Case::HeapKeysOneMap | Case::InlineKeysOneMap => 1,
            Case::InlineKeysShards => SHARDS,
        }
    }

    /// The map that `thread` puts key number `number` in.
    fn map_for(self, thread: usize, number: u64) -> usize {
        match self {
            Case::HeapKeysMapPerThread | Case::InlineKeysMapPerThread => thread,
            Case::HeapKeysOneMap | Case::InlineKeysOneMap => 0,
            Case::InlineKeysShards => (number % SHARDS as u64) as usize,
        }
    }
}

/// A version's key with its user key on the heap.
#[derive(Clone, Debug, PartialEq, Eq)]
struct HeapKey {
    user_key: Vec<u8>,
    sequence: u64,
}

/// A version's key with its user key in the key itself (so in the skiplist node).
#[derive(Clone, Debug, PartialEq, Eq)]
struct InlineKey {
    len: u8,
    bytes: [u8; INLINE_BYTES],
    sequence: u64,
}

/// The internal-key order: user key ascending, then sequence descending (newest first).
fn compare(key_a: &[u8], sequence_a: u64, key_b: &[u8], sequence_b: u64) -> Ordering {
    key_a.cmp(key_b).then(sequence_b.cmp(&sequence_a))
}

impl Ord for HeapKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare(&self.user_key, self.sequence, &other.user_key, other.sequence)
    }
}

impl PartialOrd for HeapKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl InlineKey {
    fn new(user_key: &[u8], sequence: u64) -> Self {
        let mut bytes = [0; INLINE_BYTES];
        bytes[..user_key.len()].copy_from_slice(user_key);
        Self { len: user_key.len() as u8, bytes, sequence }
    }

    fn user_key(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl Ord for InlineKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare(self.user_key(), self.sequence, other.user_key(), other.sequence)
    }
}

impl PartialOrd for InlineKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The maps of one run, in one of the two layouts.
enum Maps {
    Heap(Vec<SkipMap<HeapKey, Vec<u8>>>),
    Inline(Vec<SkipMap<InlineKey, Vec<u8>>>),
}

impl Maps {
    fn insert(&self, map: usize, user_key: &[u8], sequence: u64, value: &[u8]) {
        match self {
            Maps::Heap(maps) => {
                maps[map].insert(HeapKey { user_key: user_key.to_vec(), sequence }, value.to_vec());
            }
            Maps::Inline(maps) => {
                maps[map].insert(InlineKey::new(user_key, sequence), value.to_vec());
            }
        }
    }

    /// The value stored at (`user_key`, `sequence`) in `map`, if any.
    fn get(&self, map: usize, user_key: &[u8], sequence: u64) -> Option<Vec<u8>> {
        match self {
            Maps::Heap(maps) => {
                maps[map].get(&HeapKey { user_key: user_key.to_vec(), sequence }).map(|entry| entry.value().clone())
            }
            Maps::Inline(maps) => maps[map].get(&InlineKey::new(user_key, sequence)).map(|entry| entry.value().clone()),
        }
    }

    fn len(&self, map: usize) -> usize {
        match self {
            Maps::Heap(maps) => maps[map].len(),
            Maps::Inline(maps) => maps[map].len(),
        }
    }
}

/// The user key of key number `number`.
fn user_key(number: u64) -> [u8; KEY_BYTES] {
    let mut key = *b"user000000000000";
    let digits = format!("{:012}", number % 1_000_000_000_000);
    key[4..].copy_from_slice(digits.as_bytes());
    key
}

/// Insert `index`'s user key: the same on every run, drawn at random from `keys` (splitmix64 of the index).
fn key_number(index: u64, keys: u64) -> u64 {
    let mut z = index.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % keys
}

/// Insert `index`'s value: its index, repeated.
fn value_of(index: u64, value_bytes: usize) -> Vec<u8> {
    index.to_le_bytes().iter().copied().cycle().take(value_bytes).collect()
}

#[derive(Clone, Copy, Debug)]
struct Shape {
    threads: usize,
    keys: u64,
    inserts: u64,
    value_bytes: usize,
}

/// One planned insert: into `map`, key number `number`, at `sequence`, with insert `index`'s value.
#[derive(Clone, Copy, Debug)]
struct Insert {
    map: usize,
    number: u64,
    sequence: u64,
    index: u64,
}

/// The inserts thread `thread` makes in a run: with a map per thread, `inserts` into its own map; else every
/// `threads`-th of `inserts`, from its own number on. Sequences are unique within a map.
fn plan(case: Case, shape: Shape, thread: usize) -> impl Iterator<Item = Insert> {
    let (first, step) = if case.map_per_thread() { (0, 1) } else { (thread as u64, shape.threads) };
    (first..shape.inserts).step_by(step).map(move |index| {
        let number = key_number(index, shape.keys);
        Insert { map: case.map_for(thread, number), number, sequence: shape.keys + index, index }
    })
}

/// The thread that loads `map`: its own thread for a map per thread (its nodes come from that thread's
/// allocator arena), thread 0 for shared maps.
fn loader(case: Case, map: usize) -> usize {
    if case.map_per_thread() { map } else { 0 }
}

/// Before the timed inserts, each map `thread` loads gets every key number it would be given, at sequence
/// `number`.
fn load(case: Case, maps: &Maps, shape: Shape, thread: usize) {
    let value = value_of(0, shape.value_bytes);
    for map in (0..case.maps(shape.threads)).filter(|map| loader(case, *map) == thread) {
        for number in (0..shape.keys).filter(|number| case.map_for(map, *number) == map) {
            maps.insert(map, &user_key(number), number, &value);
        }
    }
}

/// The versions map `map` is loaded with.
fn loaded_versions(case: Case, map: usize, keys: u64) -> u64 {
    (0..keys).filter(|number| case.map_for(map, *number) == map).count() as u64
}

/// Load the maps, then time every thread's planned inserts: inserts per second over all of them.
fn run(case: Case, shape: Shape) -> Result<f64, String> {
    let count = case.maps(shape.threads);
    let maps = Arc::new(match case.inline() {
        true => Maps::Inline((0..count).map(|_| SkipMap::new()).collect()),
        false => Maps::Heap((0..count).map(|_| SkipMap::new()).collect()),
    });
    let (loaded, start) = (Arc::new(Barrier::new(shape.threads + 1)), Arc::new(Barrier::new(shape.threads + 1)));
    let mut workers = Vec::new();
    for thread in 0..shape.threads {
        let (maps, loaded, start) = (Arc::clone(&maps), Arc::clone(&loaded), Arc::clone(&start));
        workers.push(std::thread::spawn(move || -> (Instant, Instant, u64) {
            load(case, &maps, shape, thread);
            loaded.wait();
            start.wait();
            let (began, mut made) = (Instant::now(), 0);
            for insert in plan(case, shape, thread) {
                let value = value_of(insert.index, shape.value_bytes);
                maps.insert(insert.map, &user_key(insert.number), insert.sequence, &value);
                made += 1;
            }
            (began, Instant::now(), made)
        }));
    }
    loaded.wait();
    start.wait();
    let mut spans = Vec::new();
    for worker in workers {
        spans.push(worker.join().map_err(|_| "an inserting thread panicked".to_string())?);
    }
    let began = spans.iter().map(|span| span.0).min().expect("at least one thread");
    let ended = spans.iter().map(|span| span.1).max().expect("at least one thread");
    let made: u64 = spans.iter().map(|span| span.2).sum();
    verify(case, &maps, shape)?;
    Ok(made as f64 / ended.duration_since(began).as_secs_f64())
}

/// Every planned insert of the run is in its map with its value, and each map holds nothing else.
fn verify(case: Case, maps: &Maps, shape: Shape) -> Result<(), String> {
    let count = case.maps(shape.threads);
    let mut expected: Vec<u64> = (0..count).map(|map| loaded_versions(case, map, shape.keys)).collect();
    for thread in 0..shape.threads {
        for insert in plan(case, shape, thread) {
            let (map, index) = (insert.map, insert.index);
            let found = maps.get(map, &user_key(insert.number), insert.sequence);
            if found.as_deref() != Some(value_of(index, shape.value_bytes).as_slice()) {
                return Err(format!(
                    "{}: insert {index} of thread {thread} is not in map {map} as written",
                    case.name()
                ));
            }
            expected[map] += 1;
        }
    }
    for (map, expected) in expected.iter().enumerate() {
        if maps.len(map) as u64 != *expected {
            return Err(format!("{}: map {map} holds {} versions, not {expected}", case.name(), maps.len(map)));
        }
    }
    Ok(())
}

#[derive(Debug)]
struct Args {
    threads: Vec<usize>,
    runs: usize,
    keys: u64,
    inserts: u64,
    value_bytes: usize,
    out: Option<std::path::PathBuf>,
}

fn parse_args(mut words: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut args = Args { threads: vec![1, 2], runs: 3, keys: 100_000, inserts: 400_000, value_bytes: 100, out: None };
    while let Some(word) = words.next() {
        let mut value = || words.next().ok_or_else(|| format!("{word} needs a value"));
        match word.as_str() {
            "--help" | "-h" => return Ok(None),
            "--out" => args.out = Some(std::path::PathBuf::from(value()?)),
            "--threads" => args.threads = parse_list(&value()?)?,
            "--runs" => args.runs = parse_number(&word, &value()?, 1, RUNS_MAX as u64)? as usize,
            "--keys" => args.keys = parse_number(&word, &value()?, 1, VERSIONS_MAX)?,
            "--inserts" => args.inserts = parse_number(&word, &value()?, 1, VERSIONS_MAX)?,
            "--value-bytes" => args.value_bytes = parse_number(&word, &value()?, 0, 1 << 20)? as usize,
            _ => return Err(format!("unknown option {word:?} (see --help)")),
        }
    }
    Ok(Some(args))
}

#[derive(Debug, serde::Serialize)]
struct Row {
    case: Case,
    threads: usize,
    runs_inserts_per_sec: Vec<f64>,
    median_inserts_per_sec: f64,
    ratio_to_one_thread: f64,
}

fn measure(args: &Args) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for case in Case::ALL {
        let mut runs: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
        for _ in 0..args.runs {
            for &threads in &args.threads {
                let shape = Shape { threads, keys: args.keys, inserts: args.inserts, value_bytes: args.value_bytes };
                runs.entry(threads).or_default().push(run(case, shape)?);
            }
        }
        let one = median(&runs[&1]);
        for (threads, values) in runs {
            let median_inserts_per_sec = median(&values);
            let ratio_to_one_thread = median_inserts_per_sec / one;
            eprintln!(
                "{:<27} {threads:>2} threads: {median_inserts_per_sec:>10.0} inserts/s  {ratio_to_one_thread:.2}x",
                case.name()
            );
            rows.push(Row { case, threads, runs_inserts_per_sec: values, median_inserts_per_sec, ratio_to_one_thread });
        }
    }
    Ok(rows)
}

fn report(args: &Args) -> Result<(), String> {
    eprintln!(
        "skiplist-scaling: {} inserts per run into maps of {} versions, values of {} bytes, threads {:?}, {} runs",
        args.inserts, args.keys, args.value_bytes, args.threads, args.runs
    );
    let rows = measure(args)?;
    if let Some(out) = &args.out {
        let json = serde_json::json!({
            "keys": args.keys,
            "inserts_per_run": args.inserts,
            "value_bytes": args.value_bytes,
            "runs": args.runs,
            "rows": rows,
        });
        write_json(out, &json)?;
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    probe_main("skiplist-scaling", USAGE, parse_args, |args| report(&args))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case at 1 and 3 threads inserts every version where `verify` finds it; a version missing or with
    /// another value is caught, and so is one too many.
    #[test]
    fn every_case_reads_back_what_it_inserted_and_a_lost_insert_is_caught() {
        for case in Case::ALL {
            for threads in [1, 3] {
                let shape = Shape { threads, keys: 50, inserts: 400, value_bytes: 12 };
                run(case, shape).unwrap_or_else(|error| panic!("{error}"));
            }
        }
        let shape = Shape { threads: 1, keys: 5, inserts: 10, value_bytes: 12 };
        for case in [Case::HeapKeysOneMap, Case::InlineKeysOneMap] {
            let maps = match case.inline() {
                true => Maps::Inline(vec![SkipMap::new()]),
                false => Maps::Heap(vec![SkipMap::new()]),
            };
            for number in 0..5 {
                maps.insert(0, &user_key(number), number, &value_of(0, 12));
            }
            for index in 0..10 {
                if index != 7 {
                    maps.insert(0, &user_key(key_number(index, 5)), 5 + index, &value_of(index, 12));
                }
            }
            let error = verify(case, &maps, shape).expect_err("insert 7 is missing");
            assert!(error.contains("insert 7 of thread 0 is not in map 0"), "{error}");
            maps.insert(0, &user_key(key_number(7, 5)), 5 + 7, &value_of(7, 12));
            assert_eq!(verify(case, &maps, shape), Ok(()));
            maps.insert(0, b"extra", 1, b"");
            let error = verify(case, &maps, shape).expect_err("one version too many");
            assert!(error.contains("holds 16 versions, not 15"), "{error}");
        }
    }

    /// Both layouts order versions as the engine does: user key ascending, newest first.
    #[test]
    fn both_layouts_order_user_keys_up_and_sequences_down() {
        let keys = [(&b"a"[..], 9), (b"a", 3), (b"ab", 5), (b"b", 1)];
        for (index, (key_a, sequence_a)) in keys.iter().enumerate() {
            for (other, (key_b, sequence_b)) in keys.iter().enumerate() {
                let expected = index.cmp(&other);
                let heap = |key: &[u8], sequence| HeapKey { user_key: key.to_vec(), sequence };
                assert_eq!(heap(key_a, *sequence_a).cmp(&heap(key_b, *sequence_b)), expected);
                assert_eq!(InlineKey::new(key_a, *sequence_a).cmp(&InlineKey::new(key_b, *sequence_b)), expected);
            }
        }
        assert_eq!(user_key(42), *b"user000000000042");
    }

    #[test]
    fn bad_options_are_refused_with_the_reason() {
        let parse = |words: &[&str]| parse_args(words.iter().map(|word| word.to_string()));
        assert!(parse(&["--threads", "2,4"]).unwrap_err().contains("must include 1"));
        assert!(parse(&["--keys", "0"]).unwrap_err().contains("want 1 to"));
        assert!(parse(&["--runs"]).unwrap_err().contains("needs a value"));
        assert!(parse(&["--bogus"]).unwrap_err().contains("unknown option"));
        let args = parse(&["--threads", "1,2,4", "--inserts", "9"]).expect("valid").expect("not --help");
        assert_eq!((args.threads, args.inserts), (vec![1, 2, 4], 9));
        assert!(parse(&["--help"]).expect("valid").is_none());
    }
}
