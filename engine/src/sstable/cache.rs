//! A block cache shared by every open table: decoded blocks keyed by (file number, block offset), bounded by
//! their total charge in bytes, evicting the least recently used first.
//!
//! Recency is a logical tick (a counter bumped on every access), never a clock, so eviction order is a pure
//! function of the sequence of calls.
//!
//! A cache of at least two [`SHARD_BYTES_MIN`] is split into shards (at most [`SHARDS_MAX`]), each an LRU of its
//! own over an equal share of the capacity, chosen by a fixed mix of the key: concurrent readers of different
//! blocks do not queue on one lock (ADR-0088). A smaller cache is one exact LRU.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::block::Block;

/// (file number, block offset).
type CacheKey = (u64, u64);

#[derive(Debug)]
struct CachedBlock {
    tick: u64,
    block: Arc<Block>,
    charge_bytes: usize,
}

#[derive(Debug, Default)]
struct CacheState {
    blocks: BTreeMap<CacheKey, CachedBlock>,
    recency: BTreeMap<u64, CacheKey>,
    next_tick: u64,
    size_bytes: usize,
    hits: u64,
    misses: u64,
}

/// The most shards a cache is split into.
pub const SHARDS_MAX: usize = 16;
/// The least capacity a shard gets: a smaller cache has fewer shards, down to one.
pub const SHARD_BYTES_MIN: usize = 1 << 20;

/// A bounded LRU cache of decoded blocks, sharded by key. `Send + Sync`: one `Mutex` per shard.
#[derive(Debug)]
pub struct BlockCache {
    capacity_bytes: usize,
    /// Each shard's bound on its blocks' charge: `capacity_bytes / shards.len()`.
    shard_capacity_bytes: usize,
    shards: Vec<Mutex<CacheState>>,
}

/// How many shards a cache of `capacity_bytes` has: one per [`SHARD_BYTES_MIN`], between 1 and [`SHARDS_MAX`].
fn shard_count(capacity_bytes: usize) -> usize {
    (capacity_bytes / SHARD_BYTES_MIN).clamp(1, SHARDS_MAX)
}

/// The shard of a key among `shards`: SplitMix64's finalizer over the file number and the block offset (no
/// process-seeded hasher: the choice is the same in every run).
fn shard_of(file_number: u64, block_offset: u64, shards: usize) -> usize {
    let mut mixed = file_number.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ block_offset;
    mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((mixed ^ (mixed >> 31)) % shards as u64) as usize
}

impl BlockCache {
    /// A cache holding at most `capacity_bytes` of block charge (0 disables caching).
    pub fn new(capacity_bytes: usize) -> Self {
        let shards = shard_count(capacity_bytes);
        Self {
            capacity_bytes,
            shard_capacity_bytes: capacity_bytes / shards,
            shards: (0..shards).map(|_| Mutex::new(CacheState::default())).collect(),
        }
    }

    fn lock(&self, file_number: u64, block_offset: u64) -> MutexGuard<'_, CacheState> {
        let shard = &self.shards[shard_of(file_number, block_offset, self.shards.len())];
        shard.lock().expect("block cache poisoned by an earlier panic")
    }

    /// A sum over the shards.
    fn total(&self, field: impl Fn(&CacheState) -> u64) -> u64 {
        self.shards.iter().map(|shard| field(&shard.lock().expect("block cache poisoned by an earlier panic"))).sum()
    }

    /// The bound on the total charge of cached blocks.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }

    /// How many shards the cache is split into.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Lookups that found their block.
    pub fn hits(&self) -> u64 {
        self.total(|state| state.hits)
    }

    /// Lookups that did not.
    pub fn misses(&self) -> u64 {
        self.total(|state| state.misses)
    }

    /// The total charge of the cached blocks; never above the capacity.
    pub fn size_bytes(&self) -> usize {
        self.total(|state| state.size_bytes as u64) as usize
    }

    /// How many blocks are cached.
    pub fn block_count(&self) -> usize {
        self.total(|state| state.blocks.len() as u64) as usize
    }

    /// The cached block at (file, offset), marking it most recently used. Counts a hit or a miss.
    pub fn get(&self, file_number: u64, block_offset: u64) -> Option<Arc<Block>> {
        let mut state = self.lock(file_number, block_offset);
        let tick = state.bump_tick();
        let Some(cached) = state.blocks.get_mut(&(file_number, block_offset)) else {
            state.misses += 1;
            return None;
        };
        let previous_tick = std::mem::replace(&mut cached.tick, tick);
        let block = Arc::clone(&cached.block);
        let moved = state.recency.remove(&previous_tick);
        assert_eq!(moved, Some((file_number, block_offset)), "recency index out of step with the blocks");
        state.recency.insert(tick, (file_number, block_offset));
        state.hits += 1;
        Some(block)
    }

    /// Cache a block, evicting least recently used blocks to make room. A block larger than the whole capacity
    /// is not cached.
    pub fn insert(&self, file_number: u64, block_offset: u64, block: Arc<Block>) {
        let charge_bytes = block.charge_bytes();
        if charge_bytes > self.shard_capacity_bytes {
            return;
        }
        let mut state = self.lock(file_number, block_offset);
        state.remove((file_number, block_offset));
        let (mut evicted, cached_count) = (0usize, state.blocks.len());
        while state.size_bytes + charge_bytes > self.shard_capacity_bytes {
            let (_, oldest) = state.recency.pop_first().expect("a cache over its budget holds blocks");
            let removed = state.blocks.remove(&oldest).expect("recency index names a cached block");
            state.size_bytes -= removed.charge_bytes;
            evicted += 1;
            assert!(evicted <= cached_count, "evicted more blocks than were cached");
        }
        let tick = state.bump_tick();
        state.recency.insert(tick, (file_number, block_offset));
        state.blocks.insert((file_number, block_offset), CachedBlock { tick, block, charge_bytes });
        state.size_bytes += charge_bytes;
        assert!(state.size_bytes <= self.shard_capacity_bytes, "cache shard over its capacity after an insert");
        assert_eq!(state.blocks.len(), state.recency.len(), "recency index out of step with the blocks");
    }

    /// Drop every cached block of a file (call when the table file is deleted).
    pub fn evict_file(&self, file_number: u64) {
        for shard in &self.shards {
            let mut state = shard.lock().expect("block cache poisoned by an earlier panic");
            let keys: Vec<CacheKey> =
                state.blocks.range((file_number, 0)..=(file_number, u64::MAX)).map(|(&key, _)| key).collect();
            for key in keys {
                state.remove(key);
            }
            let left = state.blocks.range((file_number, 0)..=(file_number, u64::MAX)).next();
            assert!(left.is_none(), "file evicted");
            assert_eq!(state.blocks.len(), state.recency.len(), "recency index out of step with the blocks");
        }
    }
}

impl CacheState {
    fn bump_tick(&mut self) -> u64 {
        self.next_tick += 1;
        self.next_tick
    }

    fn remove(&mut self, key: CacheKey) {
        if let Some(removed) = self.blocks.remove(&key) {
            let recency = self.recency.remove(&removed.tick);
            assert_eq!(recency, Some(key), "recency index out of step with the blocks");
            assert!(self.size_bytes >= removed.charge_bytes, "cache size underflow");
            self.size_bytes -= removed.charge_bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::block::{BlockBuilder, decode_block};
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
            used.insert(shard_of(file, offset, SHARDS_MAX));
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
}
