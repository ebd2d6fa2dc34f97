//! The engine's cost contract (ADR-0184): bounds taken from its design, checked after every step on what the
//! world counted during the engine call itself (never the harness's verification around it).
//!
//! - `cost.get_files_touched`: a point read reads only tables whose key range holds the key (and no other file):
//!   a lookup goes newest source first and a table outside the key's range cannot hold it.
//! - `cost.scan_files_touched`: a scan, iterated to its end, reads only tables whose key range meets the scanned
//!   range (and no other file): a table outside it cannot hold a row of it.
//! - `cost.bloom_false_positives`: over the run, the point reads of keys never written pass the Bloom filters
//!   of the tables whose range holds them no more often than the filters' design false-positive rate allows.
//! - `cost.flush_drains`: a flush that returned `Ok` left no immutable memtable behind (`Db::flush` waits "until
//!   every waiting memtable is flushed").
//! - `cost.log_syncs_per_write`: an acknowledged blind write synced the log at most twice: its group's sync, and
//!   the seal of the segment a rotation closed.
//! - `cost.compaction_inputs`: every leveled compaction job (from level 1 or below into the next) took one table of
//!   its source level, so a job's size stays one table and what overlaps it below (ADR-0193). Checked after every
//!   step, whatever ran in it, on the engine's work counters ([`engine::work`]).

use std::path::{Path, PathBuf};

use engine::Db;
use holdfast::cost::{StepCost, cost_violation, files_since};
use holdfast::env::{CostCounters, SimEnv};
use holdfast::{Violation, World};

use crate::config::KEY_LIMIT_BYTES_MAX;
use crate::{EngineTarget, Observation, Op};

/// The fixed charge of a cached block beside its bytes and its two keys (`engine::sstable` `Block::charge_bytes`).
const BLOCK_OVERHEAD_BYTES: usize = 128;

/// Every cost invariant the engine target checks.
pub const COST_INVARIANTS: &[&str] = &[
    "cost.block_cache_keeps",
    "cost.bloom_false_positives",
    "cost.compaction_inputs",
    "cost.flush_drains",
    "cost.get_files_touched",
    "cost.log_syncs_per_write",
    "cost.scan_files_touched",
];
/// Log syncs an acknowledged blind write may make: its group's sync and the seal of a segment it rotated away.
pub const LOG_SYNCS_PER_WRITE_MAX: u64 = 2;
/// How many times the design false-positive count a run may show before the excess counts ([`bloom_passes_max`]).
const BLOOM_MEAN_SLACK: f64 = 1.5;
/// Standard deviations above the slackened mean a run may show.
const BLOOM_SIGMAS: f64 = 5.0;
/// False positives always allowed, whatever the rate: a handful of probes proves nothing.
const BLOOM_PASSES_FREE: f64 = 5.0;

/// The design false-positive rate of the engine's Bloom filter at `bits_per_key`: `(1 - e^(-k/b))^k` with its
/// hash count `k` (`engine::sstable::hash_count_for`). A filter never has fewer bits than this assumes
/// (it rounds up to at least 64), and format 3 tables probe with `k` independent hashes, so its real rate is at
/// most this, up to 1.5 times it in a 64-bit filter (ADR-0209; double hashing, formats 1 and 2, passed up to 21
/// times it in small filters).
pub fn bloom_false_positive_rate(bits_per_key: u32) -> f64 {
    let bits = f64::from(bits_per_key.max(1));
    let hashes = f64::from(engine::sstable::hash_count_for(bits_per_key.clamp(1, 64)));
    (1.0 - (-hashes / bits).exp()).powf(hashes).min(1.0)
}

/// The most Bloom passes `probes` probes of absent keys may show at false-positive rate `rate`: 1.5 times the
/// mean, five standard deviations of the slackened mean, and five more. A binomial count passes it with a
/// probability far below one in a million even at the rate itself; a filter that always answers "maybe" passes
/// every probe and crosses it once there are enough probes.
pub fn bloom_passes_max(probes: u64, rate: f64) -> u64 {
    let mean = BLOOM_MEAN_SLACK * rate * probes as f64;
    let bound = mean + BLOOM_SIGMAS * mean.sqrt() + BLOOM_PASSES_FREE;
    if bound >= probes as f64 { probes } else { bound as u64 }
}

/// The cost-contract state of one run.
#[derive(Debug, Default)]
pub(crate) struct CostState {
    /// Per file, what the last measured engine call cost (`measure`).
    last_call: Vec<(PathBuf, CostCounters)>,
    /// The model knew nothing of the key the last point read looked up (never written, deleted or read): no
    /// table holds a version of it. A key read once is known after, so only its first read counts.
    pub(crate) unknown_key: bool,
    /// The Bloom negatives of the live tables before the last measured call, then during it.
    bloom_negatives: u64,
    /// Tables whose key range held a never-written key a point read looked up, and how many of them their Bloom
    /// filter did not rule out.
    bloom_probes: u64,
    bloom_passes: u64,
}

impl CostState {
    /// The Bloom probes of never-written keys, and their passes, as coverage counters (`bloom.absent_probes`,
    /// `bloom.absent_passes`): how much evidence `cost.bloom_false_positives` had.
    pub(crate) fn add_to(&self, coverage: &mut holdfast::Coverage) {
        coverage.add("bloom.absent_probes", self.bloom_probes);
        coverage.add("bloom.absent_passes", self.bloom_passes);
    }

    /// Before an engine call whose cost the contract checks.
    pub(crate) fn before_call(&mut self, env: &SimEnv, db: &Db<SimEnv>) {
        self.last_call = env.step_files();
        // The filters' counts matter only for a read of an unknown key (`count_bloom_probes`): not read otherwise.
        self.bloom_negatives = if self.unknown_key { db.bloom_negatives() } else { 0 };
    }

    /// The first file the last measured call read that is not one of `allowed`.
    fn read_outside(&self, allowed: &[PathBuf]) -> Option<(&Path, &CostCounters)> {
        let outside = |(path, io): &&(PathBuf, CostCounters)| io.reads > 0 && !allowed.contains(path);
        self.last_call.iter().find(outside).map(|(path, io)| (path.as_path(), io))
    }

    /// After it: what it cost per file.
    pub(crate) fn after_call(&mut self, env: &SimEnv, db: &Db<SimEnv>) {
        if self.unknown_key {
            self.bloom_negatives = db.bloom_negatives().saturating_sub(self.bloom_negatives);
        }
        let before = std::mem::take(&mut self.last_call);
        self.last_call = files_since(&before, env.step_files());
    }
}

/// A `cost.*_files_touched` violation: the call read `path`, which the contract did not allow.
fn read_outside_violation(invariant: &str, expected: String, (path, io): (&Path, &CostCounters)) -> Violation {
    cost_violation(
        invariant,
        expected,
        format!("it read {} ({} reads, {} bytes)", path.display(), io.reads, io.bytes_read),
    )
}

fn is_table(path: &Path) -> bool {
    path.file_name().is_some_and(|name| name.as_encoded_bytes().starts_with(b"table-"))
}

fn is_log(path: &Path) -> bool {
    path.file_name().is_some_and(|name| name.as_encoded_bytes().starts_with(b"wal-"))
}

impl EngineTarget {
    /// The engine's cost contract on one step ([`holdfast::Target::check_cost`]).
    pub(crate) fn check_engine_cost(
        &mut self,
        world: &mut World,
        cost: &StepCost<'_, Op, Observation>,
    ) -> Result<(), Violation> {
        check_compaction_inputs(world.env())?;
        let Some((op, observation)) = cost.op_ran() else { return Ok(()) };
        if self.db.is_none() {
            return Ok(());
        }
        match (op, observation) {
            (Op::Get { key }, Observation::Value { .. }) => self.check_get_cost(*key),
            (Op::Scan { start, end }, Observation::Scan { .. }) => self.check_scan_cost(*start, *end),
            (Op::Flush, Observation::Ok) => self.check_flush_drains(),
            (Op::Put { .. } | Op::Delete { .. }, Observation::Ok) => self.check_log_syncs(),
            _ => Ok(()),
        }
    }

    fn check_get_cost(&mut self, key: u32) -> Result<(), Violation> {
        let user_key = holdfast::kit::RenderedKey::new(key);
        let user_key = user_key.as_bytes();
        let covering = self.tables_where(|min, max| min <= user_key && user_key <= max);
        if let Some(read) = self.cost.read_outside(&covering) {
            let expected =
                format!("a point read of key {key} reads only the tables whose key range holds it: {covering:?}");
            return Err(read_outside_violation("cost.get_files_touched", expected, read));
        }
        if self.cost.unknown_key {
            self.count_bloom_probes(key, covering.len() as u64)?;
        }
        self.check_cache_keeps(key)
    }

    /// `cost.scan_files_touched`: the scan of keys `start..end` read only tables whose range meets
    /// `[key(start), key(end))`.
    fn check_scan_cost(&self, start: u32, end: u32) -> Result<(), Violation> {
        let (low, high) = (holdfast::kit::key_bytes(start), holdfast::kit::key_bytes(end));
        let meeting = self.tables_where(|min, max| low.as_slice() <= max && min < high.as_slice());
        if let Some(read) = self.cost.read_outside(&meeting) {
            let expected =
                format!("a scan of keys {start}..{end} reads only the tables whose key range meets it: {meeting:?}");
            return Err(read_outside_violation("cost.scan_files_touched", expected, read));
        }
        Ok(())
    }

    /// The live tables whose key range `[min, max]` satisfies `meets`.
    fn tables_where(&self, meets: impl Fn(&[u8], &[u8]) -> bool) -> Vec<PathBuf> {
        let mut tables: Vec<PathBuf> = Vec::new();
        self.db.as_ref().expect("checked open").visit_file_key_ranges(|path, min, max| {
            if is_table(path) && meets(min, max) {
                tables.push(path.to_path_buf());
            }
        });
        tables
    }

    /// `cost.block_cache_keeps`: a point read that read table blocks (cache misses) leaves the cache holding a
    /// block, when a block it read fits a shard: the cache inserts what a miss read and evicts only to make room
    /// for another insert, so it holds at least the last block it admitted. "Fits": the bytes read, plus two keys
    /// at the run's key limit and the block's fixed overhead, within one shard's capacity.
    fn check_cache_keeps(&self, key: u32) -> Result<(), Violation> {
        let read: CostCounters = self.cost.last_call.iter().filter(|(path, _)| is_table(path)).fold(
            CostCounters::default(),
            |mut sum, (_, io)| {
                sum.add(io);
                sum
            },
        );
        let db = self.db.as_ref().expect("checked open");
        let (blocks, shard_bytes) = db.block_cache_blocks();
        let key_limit = self.config.limits.as_ref().map_or(KEY_LIMIT_BYTES_MAX, |limits| limits.key_size_bytes_max);
        let fits = read.bytes_read + 2 * key_limit + BLOCK_OVERHEAD_BYTES as u64 <= shard_bytes as u64;
        if read.reads > 0 && fits && blocks == 0 {
            return Err(cost_violation(
                "cost.block_cache_keeps",
                format!(
                    "a point read of key {key} that missed the cache leaves a block in it ({shard_bytes} B shards)"
                ),
                format!("{} reads of {} bytes, the cache empty after", read.reads, read.bytes_read),
            ));
        }
        Ok(())
    }

    /// A never-written key is in no table: every covering table whose filter did not rule it out is a false
    /// positive.
    fn count_bloom_probes(&mut self, key: u32, probes: u64) -> Result<(), Violation> {
        let negatives = self.cost.bloom_negatives;
        self.cost.bloom_probes += probes;
        self.cost.bloom_passes += probes.saturating_sub(negatives);
        let bits_per_key = self.config.tuning.bloom_bits_per_key;
        let rate = bloom_false_positive_rate(bits_per_key);
        let allowed = bloom_passes_max(self.cost.bloom_probes, rate);
        if self.cost.bloom_passes > allowed {
            return Err(cost_violation(
                "cost.bloom_false_positives",
                format!(
                    "at most {allowed} of {} Bloom probes of never-written keys pass ({bits_per_key} bits per key: a \
                     design false-positive rate of {rate:.4})",
                    self.cost.bloom_probes
                ),
                format!("{} passed (the last: key {key}, {probes} tables in range)", self.cost.bloom_passes),
            ));
        }
        Ok(())
    }

    fn check_flush_drains(&self) -> Result<(), Violation> {
        let stats = self.db.as_ref().expect("checked open").stats();
        if stats.immutable_memtables > 0 {
            return Err(cost_violation(
                "cost.flush_drains",
                "a flush that returned Ok leaves no immutable memtable",
                format!("{} immutable memtables left", stats.immutable_memtables),
            ));
        }
        Ok(())
    }

    fn check_log_syncs(&self) -> Result<(), Violation> {
        let syncs: u64 = self.cost.last_call.iter().filter(|(path, _)| is_log(path)).map(|(_, io)| io.file_syncs).sum();
        if syncs > LOG_SYNCS_PER_WRITE_MAX {
            return Err(cost_violation(
                "cost.log_syncs_per_write",
                format!("an acknowledged write syncs the log at most {LOG_SYNCS_PER_WRITE_MAX} times"),
                format!("{syncs} log syncs: {:?}", self.cost.last_call),
            ));
        }
        Ok(())
    }
}

/// `cost.compaction_inputs`: the leveled compaction jobs so far took one table of their source level each.
fn check_compaction_inputs(env: &SimEnv) -> Result<(), Violation> {
    let jobs = env.work_count(engine::work::LEVELED_COMPACTIONS);
    let sources = env.work_count(engine::work::LEVELED_COMPACTION_SOURCE_TABLES);
    if sources != jobs {
        return Err(cost_violation(
            "cost.compaction_inputs",
            format!(
                "each of the {jobs} leveled compactions so far takes one table of its source level (and the tables \
                 below that overlap it)"
            ),
            format!("they took {sources} tables of their source levels"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rate falls with more bits per key; at ten bits it is the textbook ~0.8 %.
    #[test]
    fn design_rates() {
        let ten = bloom_false_positive_rate(10);
        assert!((0.007..0.010).contains(&ten), "{ten}");
        assert!(bloom_false_positive_rate(4) > bloom_false_positive_rate(8));
        assert!(bloom_false_positive_rate(1) <= 1.0);
    }

    /// The bound: all probes at a rate near one, a small excess allowed at ten bits, and a filter that always
    /// passes crosses it within a few dozen probes.
    #[test]
    fn passes_bound() {
        assert_eq!(bloom_passes_max(100, 0.9), 100);
        let rate = bloom_false_positive_rate(10);
        assert!(bloom_passes_max(100, rate) >= 5);
        assert!(bloom_passes_max(20, rate) < 20, "an always-maybe filter is caught by 20 probes at ten bits");
    }
}
