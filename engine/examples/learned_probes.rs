//! How many index probes a table lookup takes, on YCSB's keys (`user` + 12 zero-padded digits, 100-byte values,
//! default table options: 4 KiB blocks, epsilon 4). One table of N keys is built in memory and opened on a
//! simulated disk (no real IO: the counts are deterministic), then every key is looked up once.
//!
//! * **prefix skipped** (format 2, this build): `Table::get`'s own counter (`TableStats::index_probes`).
//! * **format 1** (the model fitted on the keys' first 8 bytes, which every YCSB key shares): the same index
//!   searched through a model fitted that way, probes counted the same way.
//! * **cross-check**: the plain binary search of the whole index that every lookup also ran before ADR-0063
//!   (now only in builds with `expensive-checks`: simulation and tests).
//!
//! Default N = 1,000,000; `HOLDFAST_BENCH_KEYS` overrides.
//!
//! ```text
//! cargo run -p engine --release --example learned_probes
//! ```

use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

use engine::sstable::{BlockCache, KeyDomain, LearnedIndex, Table, TableBuilder, TableOptions, decode_table};
use engine::{Entry, InternalKey, Lookup, SEQUENCE_MAX, ValueKind, compare_internal};
use env::{Env, File, OpenOptions, SimEnv};

fn key(index: u64) -> Vec<u8> {
    format!("user{index:012}").into_bytes()
}

/// The first position in `0..count` where `is_before` turns false, and how many times it was called.
fn binary_search(count: usize, is_before: impl Fn(usize) -> bool) -> (usize, u64) {
    let (mut low, mut high, mut probes) = (0usize, count, 0u64);
    while low < high {
        let middle = low + (high - low) / 2;
        probes += 1;
        if is_before(middle) { low = middle + 1 } else { high = middle }
    }
    (low, probes)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let count: u64 = std::env::var("HOLDFAST_BENCH_KEYS").ok().and_then(|text| text.parse().ok()).unwrap_or(1_000_000);
    let options = TableOptions::default();
    let mut builder = TableBuilder::new(options);
    for index in 0..count {
        builder.add(&Entry { key: InternalKey::new(key(index), 1), kind: ValueKind::Put, value: vec![b'v'; 100] });
    }
    let bytes = builder.finish();

    let env = SimEnv::new(0);
    let path = Path::new("/db/000001.sst");
    env.create_dir_all(Path::new("/db"))?;
    let file = env.open(path, OpenOptions::create_new())?;
    file.write_all_at(0, &bytes)?;
    file.sync()?;
    let table = Table::open(env.open(path, OpenOptions::read())?, 1, Arc::new(BlockCache::new(256 << 20)))?;
    for index in 0..count {
        let found = table.get(&key(index), SEQUENCE_MAX)?;
        assert!(matches!(found, Lookup::Found(_)), "key {index} lost");
    }
    let stats = table.stats();

    let decoded = decode_table(&bytes).map_err(|error| format!("the table does not decode: {error:?}"))?;
    let index = &decoded.index;
    let legacy_keys: Vec<u64> =
        index.iter().map(|entry| KeyDomain::unprefixed().map(&entry.first_key.user_key)).collect();
    let legacy = LearnedIndex::fit(&legacy_keys, options.learned_index_epsilon);
    let (mut legacy_probes, mut legacy_fallbacks, mut check_probes) = (0u64, 0u64, 0u64);
    for number in 0..count {
        let user_key = key(number);
        let is_before = |position: usize| {
            let last_key = &index[position].last_key;
            compare_internal(&last_key.user_key, last_key.sequence, &user_key, SEQUENCE_MAX) == Ordering::Less
        };
        let counted = |position: usize| {
            legacy_probes += 1;
            is_before(position)
        };
        let (answer, path) = legacy.search(KeyDomain::unprefixed().map(&user_key), index.len(), counted);
        legacy_fallbacks += u64::from(path == engine::sstable::SearchPath::Fallback);
        let (plain, probes) = binary_search(index.len(), is_before);
        check_probes += probes;
        assert_eq!(answer, plain, "the format-1 search agrees with a binary search");
    }

    let per_lookup = |probes: u64| probes as f64 / count as f64;
    println!("{count} YCSB keys, {} data blocks, epsilon {}", table.data_block_count(), options.learned_index_epsilon);
    println!("| index search | window hits | fallbacks | probes | probes per lookup |");
    println!("|:--|--:|--:|--:|--:|");
    println!(
        "| prefix skipped (format 2, `Table::get`) | {} | {} | {} | {:.2} |",
        stats.learned_hits,
        stats.learned_fallbacks,
        stats.index_probes,
        per_lookup(stats.index_probes)
    );
    println!(
        "| first 8 bytes (format 1) | {} | {legacy_fallbacks} | {legacy_probes} | {:.2} |",
        count - legacy_fallbacks,
        per_lookup(legacy_probes)
    );
    println!(
        "| cross-check: binary search of the whole index | - | - | {check_probes} | {:.2} |",
        per_lookup(check_probes)
    );
    println!(
        "before ADR-0063 a lookup paid format 1 + the cross-check: {:.2} probes; now {:.2} ({:.1}x fewer)",
        per_lookup(legacy_probes + check_probes),
        per_lookup(stats.index_probes),
        (legacy_probes + check_probes) as f64 / stats.index_probes.max(1) as f64
    );
    println!("expensive checks in this build: {}", engine::EXPENSIVE_CHECKS);
    Ok(())
}
