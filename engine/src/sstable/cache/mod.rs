//! A block cache shared by every open table: decoded blocks keyed by (file number, block offset), bounded by
//! their total charge in bytes, evicting by second chance (CLOCK): the oldest block not hit since it was inserted
//! or last passed over goes first (ADR-0208). A hit writes nothing but a block's first mark.
//!
//! Eviction order is a pure function of the sequence of calls: order is a position in a linked list plus one mark
//! per block, never a wall clock, and the key-to-slot map has a fixed hasher and is never iterated.
//!
//! A cache of at least two [`SHARD_BYTES_MIN`] is split into shards (at most [`SHARDS_MAX`]), each a second-chance
//! cache of its own over an equal share of the capacity, chosen by a fixed mix of the key: concurrent readers of
//! different blocks do not queue on one lock (ADR-0088). A smaller cache is one shard. Each shard ([`lru`]) hits and
//! inserts in O(1) amortized: one hash lookup, and a mark on a hit (ADR-0090, ADR-0208).

mod lru;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex, MutexGuard};

use self::lru::{CacheKey, LruShard};
use super::block::Block;

/// The most shards a cache is split into.
pub const SHARDS_MAX: usize = 16;
/// The least capacity a shard gets: a smaller cache has fewer shards, down to one.
pub const SHARD_BYTES_MIN: usize = 1 << 20;

/// A bounded second-chance cache of decoded blocks, sharded by key. `Send + Sync`: one `Mutex` per shard.
#[derive(Debug)]
pub struct BlockCache {
    capacity_bytes: usize,
    /// Each shard's bound on its blocks' charge: `capacity_bytes / shards.len()`.
    shard_capacity_bytes: usize,
    shards: Vec<Mutex<LruShard>>,
}

/// How many shards a cache of `capacity_bytes` has: one per [`SHARD_BYTES_MIN`], between 1 and [`SHARDS_MAX`].
fn shard_count(capacity_bytes: usize) -> usize {
    (capacity_bytes / SHARD_BYTES_MIN).clamp(1, SHARDS_MAX)
}

fn lock_shard(shard: &Mutex<LruShard>) -> MutexGuard<'_, LruShard> {
    shard.lock().expect("block cache poisoned by an earlier panic")
}

impl BlockCache {
    /// A cache holding at most `capacity_bytes` of block charge (0 disables caching).
    pub fn new(capacity_bytes: usize) -> Self {
        let shards = shard_count(capacity_bytes);
        let shard_capacity_bytes = capacity_bytes / shards;
        Self {
            capacity_bytes,
            shard_capacity_bytes,
            shards: (0..shards).map(|_| Mutex::new(LruShard::new(shard_capacity_bytes))).collect(),
        }
    }

    /// The key's mix is computed here, before the lock is taken.
    fn lock(&self, key: &CacheKey) -> MutexGuard<'_, LruShard> {
        lock_shard(&self.shards[key.shard(self.shards.len())])
    }

    /// A sum over the shards.
    fn total(&self, field: impl Fn(&LruShard) -> u64) -> u64 {
        self.shards.iter().map(|shard| field(&lock_shard(shard))).sum()
    }

    /// The bound on the total charge of cached blocks.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }

    /// The most charge one shard holds: a block above it is never cached.
    pub fn shard_capacity_bytes(&self) -> usize {
        self.shard_capacity_bytes
    }

    /// How many shards the cache is split into.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Lookups that found their block.
    pub fn hits(&self) -> u64 {
        self.total(|shard| shard.hits)
    }

    /// Lookups that did not.
    pub fn misses(&self) -> u64 {
        self.total(|shard| shard.misses)
    }

    /// The total charge of the cached blocks; never above the capacity.
    pub fn size_bytes(&self) -> usize {
        self.total(|shard| shard.size_bytes() as u64) as usize
    }

    /// How many blocks are cached.
    pub fn block_count(&self) -> usize {
        self.total(|shard| shard.block_count() as u64) as usize
    }

    /// The cached block at (file, offset), marking it referenced. Counts a hit or a miss.
    pub fn get(&self, file_number: u64, block_offset: u64) -> Option<Arc<Block>> {
        let key = CacheKey::new(file_number, block_offset);
        self.lock(&key).get(&key)
    }

    /// Cache a block, evicting blocks not hit since their insert or their second chance to make room. A block
    /// larger than a shard's capacity is not cached. The blocks it pushes out are dropped after the shard's lock is
    /// released.
    pub fn insert(&self, file_number: u64, block_offset: u64, block: Arc<Block>) {
        let charge_bytes = block.charge_bytes();
        if charge_bytes > self.shard_capacity_bytes || crate::canary::active("block-cache-never-inserts") {
            // Canary (ADR-0185): every block a miss read is dropped; every read is still correct, only slower.
            return;
        }
        let key = CacheKey::new(file_number, block_offset);
        let displaced = self.lock(&key).insert(key, block, charge_bytes);
        drop(displaced);
    }

    /// Drop every cached block of a file (call when the table file is deleted).
    pub fn evict_file(&self, file_number: u64) {
        for shard in &self.shards {
            let displaced = lock_shard(shard).evict_file(file_number);
            assert!(displaced.iter().all(|(key, _)| key.file_number == file_number), "evicted only that file");
            drop(displaced);
        }
    }
}
