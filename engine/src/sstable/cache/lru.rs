//! One shard of the block cache: a second-chance LRU (CLOCK) whose hit and insert are O(1) (ADR-0090, ADR-0208).
//!
//! The blocks live in a slab of [`Node`]s linked into a doubly-linked list by slot index (head = inserted or given
//! a second chance most recently, tail = next to consider for eviction); freed slots form a free list threaded
//! through `next`, so a steady cache allocates nothing after warm-up. A hit only marks its block referenced (a
//! write only when the mark was not set): it never relinks, so the hottest blocks, hit from every core, are not
//! written on every read (relinking moved the list's head between cores on every hit). Eviction takes the tail; a
//! referenced tail loses its mark and goes to the head instead (its second chance). A map from key to slot finds
//! a block: `env::DeterministicHashMap` (a fixed hasher, no process-seeded state) over a mix of the key computed
//! once, outside the lock, by [`CacheKey::new`] (the same SplitMix64 finalizer that picks the shard). Nothing
//! iterates the map: eviction order is the list's order and the marks, a pure function of the sequence of calls.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::super::block::Block;

/// A slot index in the slab; [`NIL`] ends a list.
type Slot = u32;
/// The end of the recency list or the free list.
const NIL: Slot = Slot::MAX;
/// The most blocks one shard holds (every slot index but [`NIL`]); an insert beyond it evicts as if over budget.
pub(super) const SHARD_BLOCKS_MAX: usize = NIL as usize;

/// A cached block's key, (file number, block offset), with its mix: the shard is `mix % shards`, and the map
/// hashes the mix (one `u64`) rather than the two fields.
#[derive(Clone, Copy, Debug)]
pub(super) struct CacheKey {
    pub(super) file_number: u64,
    pub(super) block_offset: u64,
    mix: u64,
}

impl CacheKey {
    /// The key of (file, offset): SplitMix64's finalizer over the file number times the golden ratio xor the offset.
    pub(super) fn new(file_number: u64, block_offset: u64) -> Self {
        let mix = env::random::mix64(file_number.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ block_offset);
        Self { file_number, block_offset, mix }
    }

    /// The shard of this key among `shards` (ADR-0088).
    pub(super) fn shard(&self, shards: usize) -> usize {
        (self.mix % shards as u64) as usize
    }

    fn pair(&self) -> (u64, u64) {
        (self.file_number, self.block_offset)
    }
}

impl PartialEq for CacheKey {
    fn eq(&self, other: &Self) -> bool {
        self.pair() == other.pair()
    }
}

impl Eq for CacheKey {}

impl Hash for CacheKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.mix);
    }
}

/// Key to slot: the approved map with its fixed hasher (ADR-0002), looked up and updated, never iterated, so its
/// order cannot shape eviction.
type SlotMap = env::DeterministicHashMap<CacheKey, Slot>;

/// A block a call pushed out, returned so that the caller drops it after releasing the shard's lock.
pub(super) type Displaced = Vec<(CacheKey, Arc<Block>)>;

/// A slab entry: a cached block linked into the recency list, or (block `None`) a free slot whose `next` links the
/// free list.
#[derive(Debug)]
struct Node {
    key: CacheKey,
    block: Option<Arc<Block>>,
    charge_bytes: usize,
    prev: Slot,
    next: Slot,
    /// Hit since it was inserted or last given its second chance.
    referenced: bool,
}

/// One shard: a second-chance LRU over `capacity_bytes` of block charge.
#[derive(Debug)]
pub(super) struct LruShard {
    nodes: Vec<Node>,
    slots: SlotMap,
    /// Inserted or given a second chance most recently.
    head: Slot,
    /// The next to consider for eviction.
    tail: Slot,
    /// The first free slot.
    free: Slot,
    linked_count: usize,
    free_count: usize,
    size_bytes: usize,
    capacity_bytes: usize,
    pub(super) hits: u64,
    pub(super) misses: u64,
    /// Changes since the last full walk ([`Self::check`]), and the blocks cached at that walk: the next walk
    /// comes once the changes outnumber those blocks (ADR-0150).
    changes_unwalked: usize,
    blocks_at_last_walk: usize,
    /// Walk after every change (unit tests), not once the changes outnumber the blocks.
    walk_every_change: bool,
    /// Full walks made (tests count them).
    full_walks: u64,
}

impl LruShard {
    /// An empty shard holding at most `capacity_bytes` of charge.
    pub(super) fn new(capacity_bytes: usize) -> Self {
        Self {
            nodes: Vec::new(),
            slots: SlotMap::default(),
            head: NIL,
            tail: NIL,
            free: NIL,
            linked_count: 0,
            free_count: 0,
            size_bytes: 0,
            capacity_bytes,
            hits: 0,
            misses: 0,
            changes_unwalked: 0,
            blocks_at_last_walk: 0,
            walk_every_change: cfg!(test),
            full_walks: 0,
        }
    }

    /// The total charge of the cached blocks.
    pub(super) fn size_bytes(&self) -> usize {
        self.size_bytes
    }

    /// How many blocks are cached.
    pub(super) fn block_count(&self) -> usize {
        self.slots.len()
    }

    /// The block under `key`, marked referenced; counts a hit or a miss. One map lookup, no allocation, no relink.
    pub(super) fn get(&mut self, key: &CacheKey) -> Option<Arc<Block>> {
        let Some(&slot) = self.slots.get(key) else {
            self.misses += 1;
            return None;
        };
        self.hits += 1;
        if !self.node(slot).referenced {
            self.node_mut(slot).referenced = true;
        }
        Some(Arc::clone(self.node(slot).block.as_ref().expect("a mapped slot holds a block")))
    }

    /// Cache `block` under `key` at the head, charged `charge_bytes` (at most the capacity). Returns what it
    /// displaced: the block it replaced under `key` if any, then the evicted blocks, in eviction order.
    pub(super) fn insert(&mut self, key: CacheKey, block: Arc<Block>, charge_bytes: usize) -> Displaced {
        assert!(charge_bytes <= self.capacity_bytes, "the caller admits only blocks within the shard's capacity");
        let mut displaced = Displaced::new();
        if let Some(&slot) = self.slots.get(&key) {
            displaced.push(self.remove_slot(slot));
        }
        // Each block is passed over at most once (its mark cleared) before it is evicted.
        let (cached_count, mut considered, considered_max) = (self.slots.len(), 0usize, 2 * self.slots.len() + 1);
        while self.size_bytes + charge_bytes > self.capacity_bytes || self.slots.len() >= SHARD_BLOCKS_MAX {
            let tail = self.tail;
            assert!(tail != NIL, "a shard over its budget holds blocks");
            considered += 1;
            assert!(considered <= considered_max, "eviction passed over more blocks than were cached, twice");
            if self.node(tail).referenced {
                // Its second chance: unmarked, to the head.
                self.node_mut(tail).referenced = false;
                self.unlink(tail);
                self.push_front(tail);
                continue;
            }
            displaced.push(self.remove_slot(tail));
            assert!(displaced.len() <= cached_count + 1, "evicted more blocks than were cached");
        }
        let node = Node { key, block: Some(block), charge_bytes, prev: NIL, next: NIL, referenced: false };
        let slot = self.allocate(node);
        self.push_front(slot);
        let previous = self.slots.insert(key, slot);
        assert!(previous.is_none(), "the key was removed before the insert");
        self.size_bytes += charge_bytes;
        self.check();
        displaced
    }

    /// Remove every block of `file_number`: one walk of the recency list (files are deleted rarely).
    pub(super) fn evict_file(&mut self, file_number: u64) -> Displaced {
        let mut displaced = Displaced::new();
        let (mut slot, mut steps, steps_max) = (self.head, 0usize, self.linked_count);
        while slot != NIL {
            steps += 1;
            assert!(steps <= steps_max, "the recency list is longer than its count: a cycle");
            let node = self.node(slot);
            let next = node.next;
            if node.key.file_number == file_number {
                displaced.push(self.remove_slot(slot));
            }
            slot = next;
        }
        self.check();
        displaced
    }

    /// The cached keys, head first (tests compare it with a model).
    #[cfg(test)]
    pub(super) fn keys_by_recency(&self) -> Vec<(u64, u64)> {
        let mut keys = Vec::new();
        let mut slot = self.head;
        while slot != NIL {
            assert!(keys.len() < self.slots.len(), "the recency list is longer than the map");
            keys.push(self.node(slot).key.pair());
            slot = self.node(slot).next;
        }
        keys
    }

    /// Each cached block's referenced mark, head first (tests compare it with a model).
    #[cfg(test)]
    pub(super) fn marks_by_recency(&self) -> Vec<bool> {
        let mut marks = Vec::new();
        let mut slot = self.head;
        while slot != NIL {
            assert!(marks.len() < self.slots.len(), "the recency list is longer than the map");
            marks.push(self.node(slot).referenced);
            slot = self.node(slot).next;
        }
        marks
    }

    /// How many slots the slab has, free or not.
    #[cfg(test)]
    pub(super) fn slab_len(&self) -> usize {
        self.nodes.len()
    }

    fn node(&self, slot: Slot) -> &Node {
        &self.nodes[slot as usize]
    }

    fn node_mut(&mut self, slot: Slot) -> &mut Node {
        &mut self.nodes[slot as usize]
    }

    /// Take a free slot for `node`, or grow the slab.
    fn allocate(&mut self, node: Node) -> Slot {
        if self.free == NIL {
            assert!(self.nodes.len() < SHARD_BLOCKS_MAX, "a shard's slab holds at most SHARD_BLOCKS_MAX slots");
            self.nodes.push(node);
            return (self.nodes.len() - 1) as Slot;
        }
        let slot = self.free;
        self.free = self.node(slot).next;
        self.free_count -= 1;
        *self.node_mut(slot) = node;
        slot
    }

    /// Unlink `slot`, drop it from the map and the size, and put it on the free list.
    fn remove_slot(&mut self, slot: Slot) -> (CacheKey, Arc<Block>) {
        self.unlink(slot);
        let free = self.free;
        let node = self.node_mut(slot);
        let (key, charge_bytes) = (node.key, node.charge_bytes);
        let block = node.block.take().expect("a linked slot holds a block");
        node.next = free;
        self.free = slot;
        self.free_count += 1;
        assert_eq!(self.slots.remove(&key), Some(slot), "the map names the slot being removed");
        assert!(self.size_bytes >= charge_bytes, "cache size underflow");
        self.size_bytes -= charge_bytes;
        (key, block)
    }

    fn unlink(&mut self, slot: Slot) {
        let Node { prev, next, .. } = *self.node(slot);
        if prev == NIL {
            self.head = next;
        } else {
            self.node_mut(prev).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.node_mut(next).prev = prev;
        }
        self.linked_count -= 1;
    }

    fn push_front(&mut self, slot: Slot) {
        let head = self.head;
        let node = self.node_mut(slot);
        (node.prev, node.next) = (NIL, head);
        if head == NIL {
            self.tail = slot;
        } else {
            self.node_mut(head).prev = slot;
        }
        self.head = slot;
        self.linked_count += 1;
    }

    /// O(1) after every change; under [`crate::EXPENSIVE_CHECKS`], the full walk of [`Self::check_full`] once the
    /// changes since the last walk outnumber the blocks cached at it (ADR-0150). A walk then visits at most twice
    /// as many blocks as changes were made since the one before (each change adds at most one block), so the walks
    /// cost O(1) a change, where a walk after every change made each insert O(n). A change that breaks the lists
    /// is found by the walk that follows it, at most `blocks at the last walk + 1` changes later; unit tests walk
    /// after every change.
    fn check(&mut self) {
        assert_eq!(self.linked_count, self.slots.len(), "the recency list and the map hold different counts");
        assert_eq!(self.linked_count + self.free_count, self.nodes.len(), "a slot is neither linked nor free");
        assert!(self.size_bytes <= self.capacity_bytes, "cache shard over its capacity");
        if crate::EXPENSIVE_CHECKS {
            self.changes_unwalked += 1;
            if self.walk_every_change || self.changes_unwalked > self.blocks_at_last_walk {
                self.check_full();
                (self.changes_unwalked, self.blocks_at_last_walk) = (0, self.linked_count);
                self.full_walks += 1;
            }
        }
    }

    /// This shard walking as the simulator's builds do (ADR-0150), not after every change.
    #[cfg(test)]
    pub(super) fn walking_amortized(mut self) -> Self {
        self.walk_every_change = false;
        self
    }

    /// How many full walks the checks made.
    #[cfg(test)]
    pub(super) fn full_walks(&self) -> u64 {
        self.full_walks
    }

    /// Break the charge of the most recently used block (it no longer sums to the shard's size): a test's damage.
    #[cfg(test)]
    pub(super) fn break_head_charge(&mut self) {
        let head = self.head;
        self.node_mut(head).charge_bytes += 1;
    }

    /// Both lists walked: back links match, every linked node is mapped to its slot, the charges sum to
    /// `size_bytes`, and every free slot holds no block.
    fn check_full(&self) {
        let (mut slot, mut prev, mut count, mut charge_bytes) = (self.head, NIL, 0usize, 0usize);
        while slot != NIL {
            assert!(count < self.slots.len(), "the recency list is longer than the map");
            let node = self.node(slot);
            assert_eq!(node.prev, prev, "a back link does not match");
            assert_eq!(self.slots.get(&node.key), Some(&slot), "a linked node is not mapped to its slot");
            assert!(node.block.is_some(), "a linked node holds no block");
            (prev, slot, count, charge_bytes) = (slot, node.next, count + 1, charge_bytes + node.charge_bytes);
        }
        assert_eq!((self.tail, count, charge_bytes), (prev, self.slots.len(), self.size_bytes), "list out of step");
        let (mut slot, mut free_count) = (self.free, 0usize);
        while slot != NIL {
            assert!(free_count < self.free_count, "the free list is longer than its count");
            assert!(self.node(slot).block.is_none(), "a free slot holds a block");
            (slot, free_count) = (self.node(slot).next, free_count + 1);
        }
        assert_eq!(free_count, self.free_count, "the free list is shorter than its count");
    }
}
