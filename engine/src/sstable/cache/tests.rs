//! The block cache's tests: the public API, and each shard against a model LRU kept as a `Vec` (ADR-0090).

use proptest::prelude::*;

use super::super::block::{BlockBuilder, decode_block};
use super::lru::{CacheKey, LruShard};
use super::*;
use crate::{Entry, InternalKey, ValueKind};

fn block(value_size_bytes: usize) -> Arc<Block> {
    let mut builder = BlockBuilder::new(16);
    let value = vec![7u8; value_size_bytes];
    builder.add(&Entry { key: InternalKey::new(b"k".to_vec(), 1), kind: ValueKind::Put, value });
    Arc::new(decode_block(&builder.finish()).unwrap())
}

#[test]
fn least_recently_used_block_is_evicted_first() {
    let charge = block(100).charge_bytes();
    let cache = BlockCache::new(charge * 2);
    cache.insert(1, 0, block(100));
    cache.insert(1, 200, block(100));
    assert!(cache.get(1, 0).is_some());
    cache.insert(2, 0, block(100));
    assert!(cache.get(1, 200).is_none(), "the least recently used block went first");
    assert!(cache.get(1, 0).is_some() && cache.get(2, 0).is_some());
    assert_eq!((cache.hits(), cache.misses()), (3, 1));
    assert_eq!(cache.size_bytes(), charge * 2);
}

#[test]
fn oversized_blocks_are_not_cached_and_evict_file_drops_only_that_file() {
    let cache = BlockCache::new(1000);
    cache.insert(1, 0, block(5000));
    assert_eq!(cache.block_count(), 0);
    cache.insert(1, 0, block(10));
    cache.insert(1, 50, block(10));
    cache.insert(2, 0, block(10));
    cache.evict_file(1);
    assert_eq!(cache.block_count(), 1);
    assert!(cache.get(2, 0).is_some());
    assert_eq!(cache.size_bytes(), block(10).charge_bytes());
}

#[test]
fn a_large_cache_is_sharded_and_each_block_comes_back_from_its_shard() {
    let cache = BlockCache::new(64 << 20);
    assert_eq!(cache.shard_count(), SHARDS_MAX);
    assert_eq!(BlockCache::new(3 << 20).shard_count(), 3);
    assert_eq!(BlockCache::new(1000).shard_count(), 1, "a small cache is one exact LRU");
    let keys: Vec<(u64, u64)> = (1..=4).flat_map(|file| (0..64).map(move |block| (file, block * 4096))).collect();
    let mut used = std::collections::BTreeSet::new();
    for &(file, offset) in &keys {
        used.insert(CacheKey::new(file, offset).shard(SHARDS_MAX));
        cache.insert(file, offset, block(10));
    }
    assert_eq!(used.len(), SHARDS_MAX, "256 blocks of 4 files spread over every shard");
    assert_eq!(cache.block_count(), keys.len());
    assert!(keys.iter().all(|&(file, offset)| cache.get(file, offset).is_some()));
    assert_eq!((cache.hits(), cache.misses()), (keys.len() as u64, 0));
    cache.evict_file(2);
    assert_eq!(cache.block_count(), keys.len() - 64);
    assert!(cache.get(2, 0).is_none() && cache.get(3, 0).is_some());
}

proptest! {
    #[test]
    fn cache_never_exceeds_its_capacity(
        capacity_bytes in 0usize..3000,
        operations in proptest::collection::vec((0u64..3, 0u64..6, 0usize..600, any::<bool>()), 1..80),
    ) {
        let cache = BlockCache::new(capacity_bytes);
        for (file_number, block_index, value_size_bytes, is_insert) in operations {
            if is_insert {
                cache.insert(file_number, block_index * 100, block(value_size_bytes));
            } else if value_size_bytes % 7 == 0 {
                cache.evict_file(file_number);
            } else {
                let _ = cache.get(file_number, block_index * 100);
            }
            prop_assert!(cache.size_bytes() <= capacity_bytes);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// Sharded caches (2 or 3 shards): each shard evicts within its share, so the sum stays in the bound, and a
    /// block just inserted is found.
    #[test]
    fn a_sharded_cache_never_exceeds_its_capacity(
        shards in 2usize..=3,
        operations in proptest::collection::vec((0u64..3, 0u64..8, 0usize..400_000), 1..40),
    ) {
        let capacity_bytes = shards * SHARD_BYTES_MIN;
        let cache = BlockCache::new(capacity_bytes);
        prop_assert_eq!(cache.shard_count(), shards);
        for (file_number, block_index, value_size_bytes) in operations {
            cache.insert(file_number, block_index * 4096, block(value_size_bytes));
            prop_assert!(cache.get(file_number, block_index * 4096).is_some(), "a block fits its shard");
            prop_assert!(cache.size_bytes() <= capacity_bytes);
        }
    }
}

/// The shard assignment is pinned: the same keys land in the same shards as before the shards became slabs
/// (ADR-0088's mix; values computed from its formula independently).
#[test]
fn shard_assignment_is_a_fixed_function_of_the_key() {
    let keys = [(1, 0), (1, 4096), (2, 0), (7, 123_456), (1000, 1 << 30)];
    let of = |shards| keys.map(|(file, offset)| CacheKey::new(file, offset).shard(shards));
    assert_eq!(of(16), [15, 13, 4, 1, 11]);
    assert_eq!(of(3), [1, 1, 0, 0, 1]);
}

/// Freed slots are reused: a shard cycling through many blocks keeps its slab at the most it ever held at once.
#[test]
fn a_shard_reuses_freed_slots() {
    let mut shard = LruShard::new(300);
    let block = block(1);
    for index in 0..1000u64 {
        shard.insert(CacheKey::new(index % 7, index), Arc::clone(&block), 100);
        assert!(shard.get(&CacheKey::new(index % 7, index)).is_some());
    }
    assert_eq!((shard.block_count(), shard.slab_len(), shard.size_bytes()), (3, 3, 300));
    assert_eq!(shard.keys_by_recency(), [(999 % 7, 999), (998 % 7, 998), (997 % 7, 997)]);
    let displaced = shard.evict_file(998 % 7);
    assert_eq!(displaced.iter().map(|(key, _)| (key.file_number, key.block_offset)).collect::<Vec<_>>(), [(4, 998)]);
    shard.insert(CacheKey::new(9, 9), block, 100);
    assert_eq!((shard.block_count(), shard.slab_len()), (3, 3), "the freed slot was taken again");
}

/// The simulator's builds walk a shard once the changes since the last walk outnumber the blocks cached at it
/// (ADR-0150): few walks (about one per doubling while the shard grows, then one per 65 inserts at 64 blocks), and a
/// broken list is still found, by the walk within 65 changes of the damage.
#[test]
fn amortized_walks_are_few_and_still_find_a_broken_list() {
    let block = block(1);
    let mut shard = LruShard::new(64 * 100).walking_amortized();
    for index in 0..1000u64 {
        shard.insert(CacheKey::new(1, index), Arc::clone(&block), 100);
    }
    // Walks after changes 1, 3, 7, 15, 31, 63 (each once the changes outnumber the blocks of the walk before),
    // then, 64 blocks cached, one per 65 changes: 127, 192, ..., 972 (14).
    assert_eq!((shard.block_count(), shard.full_walks()), (64, 6 + 14));
    let mut walking = LruShard::new(64 * 100);
    for index in 0..100u64 {
        walking.insert(CacheKey::new(1, index), Arc::clone(&block), 100);
    }
    assert_eq!(walking.full_walks(), 100, "unit tests walk after every change");
    shard.break_head_charge();
    let mut changes = 0u64;
    let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for index in 1000..1200u64 {
            changes += 1;
            shard.insert(CacheKey::new(2, index), Arc::clone(&block), 100);
        }
    }));
    let message = found.expect_err("the walk finds the broken charge");
    let message = message.downcast_ref::<String>().map_or("", String::as_str);
    assert!(message.contains("list out of step"), "{message}");
    assert!((1..=65).contains(&changes), "found {changes} changes after the damage");
}

/// The reference: a second-chance LRU (ADR-0208) as a `Vec` of (key, charge, block id, referenced), head first.
#[derive(Debug, Default)]
struct ModelLru {
    capacity_bytes: usize,
    entries: Vec<((u64, u64), usize, usize, bool)>,
    hits: u64,
    misses: u64,
    /// Tail entries passed over for their mark (the model comparison checks that it reaches some).
    second_chances: u64,
}

impl ModelLru {
    fn get(&mut self, key: (u64, u64)) -> Option<usize> {
        let Some(index) = self.entries.iter().position(|entry| entry.0 == key) else {
            self.misses += 1;
            return None;
        };
        self.hits += 1;
        self.entries[index].3 = true;
        Some(self.entries[index].2)
    }

    /// The replaced entry (if any), then the evicted ones, in eviction order.
    fn insert(&mut self, key: (u64, u64), charge_bytes: usize, block_id: usize) -> Vec<(u64, u64)> {
        let mut displaced = Vec::new();
        if let Some(index) = self.entries.iter().position(|entry| entry.0 == key) {
            displaced.push(self.entries.remove(index).0);
        }
        while self.entries.iter().map(|entry| entry.1).sum::<usize>() + charge_bytes > self.capacity_bytes {
            let mut tail = self.entries.pop().expect("over budget means non-empty");
            if tail.3 {
                tail.3 = false;
                self.entries.insert(0, tail);
                self.second_chances += 1;
                continue;
            }
            displaced.push(tail.0);
        }
        self.entries.insert(0, (key, charge_bytes, block_id, false));
        displaced
    }

    fn evict_file(&mut self, file_number: u64) -> Vec<(u64, u64)> {
        let removed = self.entries.iter().filter(|entry| entry.0.0 == file_number).map(|entry| entry.0).collect();
        self.entries.retain(|entry| entry.0.0 != file_number);
        removed
    }
}

fn keys_of(displaced: &[(CacheKey, Arc<Block>)]) -> Vec<(u64, u64)> {
    displaced.iter().map(|(key, _)| (key.file_number, key.block_offset)).collect()
}

/// One operation: (kind, file number, block index, block id, charge seed), as the proptest draws them.
type Operation = (u8, u64, u64, usize, usize);

/// Run `operations` on a shard and on the model: the same answers (which block, or none), the same hits and misses,
/// the same displaced keys in the same order, and the same contents, order and marks after every call. Returns how
/// many second chances the model gave.
fn run_against_model(capacity_bytes: usize, operations: &[Operation]) -> Result<u64, TestCaseError> {
    let blocks: Vec<Arc<Block>> = (0..4).map(block).collect();
    let mut shard = LruShard::new(capacity_bytes);
    let mut model = ModelLru { capacity_bytes, ..ModelLru::default() };
    for &(kind, file_number, block_index, block_id, charge_seed) in operations {
        let key = (file_number, block_index * 4096);
        let cache_key = CacheKey::new(key.0, key.1);
        match kind {
            0..=4 => {
                let found = shard.get(&cache_key).map(|got| blocks.iter().position(|b| Arc::ptr_eq(b, &got)));
                prop_assert_eq!(found, model.get(key).map(Some));
            }
            5..=8 => {
                // Half the inserts small, so the shard holds several blocks to pass over.
                let charge_max = if charge_seed % 2 == 0 { capacity_bytes / 16 } else { capacity_bytes };
                let charge_bytes = charge_seed % (charge_max + 1);
                let displaced = shard.insert(cache_key, Arc::clone(&blocks[block_id]), charge_bytes);
                prop_assert_eq!(keys_of(&displaced), model.insert(key, charge_bytes, block_id));
            }
            _ => prop_assert_eq!(keys_of(&shard.evict_file(file_number)), model.evict_file(file_number)),
        }
        let model_keys: Vec<(u64, u64)> = model.entries.iter().map(|entry| entry.0).collect();
        prop_assert_eq!(shard.keys_by_recency(), model_keys);
        prop_assert_eq!(shard.marks_by_recency(), model.entries.iter().map(|entry| entry.3).collect::<Vec<_>>());
        prop_assert_eq!((shard.hits, shard.misses), (model.hits, model.misses));
        prop_assert_eq!(shard.size_bytes(), model.entries.iter().map(|entry| entry.1).sum::<usize>());
    }
    Ok(model.second_chances)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Random gets, inserts (of new and present keys, with any charge up to the capacity) and file evictions: the
    /// shard behaves as the model ([`run_against_model`]).
    #[test]
    fn a_shard_behaves_as_the_model_lru(
        capacity_bytes in 0usize..2000,
        operations in proptest::collection::vec((0u8..10, 0u64..3, 0u64..8, 0usize..4, any::<usize>()), 1..200),
    ) {
        run_against_model(capacity_bytes, &operations)?;
    }
}

/// The model comparison reaches second chances, not only plain evictions: one long fixed sequence of the
/// proptest's kind of operations, drawn from a fixed seed.
#[test]
fn the_model_comparison_reaches_second_chances() {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |bound: u64| {
        state = env::random::mix64(state.wrapping_add(1));
        state % bound
    };
    let operations: Vec<Operation> =
        (0..5_000).map(|_| (next(10) as u8, next(3), next(8), next(4) as usize, next(u64::MAX) as usize)).collect();
    let second_chances = run_against_model(1_999, &operations).expect("the shard behaves as the model");
    assert!(second_chances > 0, "no eviction passed over a referenced block");
}

/// ADR-0208: a hit never relinks; the eviction after it passes over the hit block (its mark cleared, to the head)
/// and evicts the oldest block not hit since its insert.
#[test]
fn a_hit_block_gets_a_second_chance_and_a_hit_never_relinks() {
    let block = block(10);
    let charge = block.charge_bytes();
    let mut shard = LruShard::new(charge * 3);
    for offset in 0..3u64 {
        assert!(shard.insert(CacheKey::new(1, offset), Arc::clone(&block), charge).is_empty());
    }
    assert_eq!(shard.keys_by_recency(), [(1, 2), (1, 1), (1, 0)]);
    assert!(shard.get(&CacheKey::new(1, 0)).is_some());
    assert_eq!(shard.keys_by_recency(), [(1, 2), (1, 1), (1, 0)], "a hit does not relink");
    assert_eq!(shard.marks_by_recency(), [false, false, true]);
    let displaced = shard.insert(CacheKey::new(1, 3), Arc::clone(&block), charge);
    assert_eq!(keys_of(&displaced), [(1, 1)], "block 0 was hit: block 1 goes");
    assert_eq!(shard.keys_by_recency(), [(1, 3), (1, 0), (1, 2)]);
    assert_eq!(shard.marks_by_recency(), [false, false, false], "the second chance cleared the mark");
}
