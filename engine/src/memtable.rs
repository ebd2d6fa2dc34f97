//! The memtable: a lock-free skiplist (`crossbeam-skiplist`) of versions in internal-key order. A version's user
//! key lives in its skiplist node when it fits ([`MemKey`], ADR-0211), so a search compares keys without following
//! a pointer per node it visits.

use std::borrow::Borrow;
use std::cmp;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_skiplist::SkipMap;

use crate::types::Direction;
use crate::types::{Entry, InternalKey, Lookup, Sequence, ValueKind, compare_internal};

/// The longest user key a skiplist node holds in itself ([`MemKey`]); a longer one is held on the heap.
pub const INLINE_KEY_BYTES_MAX: usize = 32;

/// An internal key's parts, however they are held: the skiplist is searched through `dyn KeyParts`, so a lookup
/// borrows the caller's key instead of building an owned key (no allocation per `get`, ADR-0065). The order is
/// the internal-key order, the same as `InternalKey`'s (what `Borrow` requires).
pub(crate) trait KeyParts {
    fn parts(&self) -> (&[u8], Sequence);
}

/// Where a [`MemKey`]'s user key bytes are.
enum KeyBytes {
    /// In the key itself (the skiplist node): `len` bytes of `bytes`.
    Inline { len: u8, bytes: [u8; INLINE_KEY_BYTES_MAX] },
    /// On the heap: a key longer than [`INLINE_KEY_BYTES_MAX`].
    Heap(Box<[u8]>),
}

/// A version's key as the memtable stores it (ADR-0211): a user key of up to [`INLINE_KEY_BYTES_MAX`] bytes is
/// stored in the skiplist node, with no allocation of its own and no pointer to follow when a search compares it;
/// the order is the internal-key order ([`compare_internal`]).
pub(crate) struct MemKey {
    bytes: KeyBytes,
    sequence: Sequence,
}

impl MemKey {
    fn new(user_key: &[u8], sequence: Sequence) -> Self {
        let bytes = match u8::try_from(user_key.len()) {
            Ok(len) if user_key.len() <= INLINE_KEY_BYTES_MAX => {
                let mut bytes = [0; INLINE_KEY_BYTES_MAX];
                bytes[..user_key.len()].copy_from_slice(user_key);
                KeyBytes::Inline { len, bytes }
            }
            _ => KeyBytes::Heap(user_key.into()),
        };
        Self { bytes, sequence }
    }

    /// The user key, borrowed.
    pub(crate) fn user_key(&self) -> &[u8] {
        match &self.bytes {
            KeyBytes::Inline { len, bytes } => &bytes[..usize::from(*len)],
            KeyBytes::Heap(bytes) => bytes,
        }
    }

    pub(crate) fn sequence(&self) -> Sequence {
        self.sequence
    }

    /// An owned copy, as the rest of the engine holds keys.
    fn to_internal(&self) -> InternalKey {
        InternalKey::new(self.user_key(), self.sequence)
    }

    /// Whether the user key is held in the node itself.
    #[cfg(test)]
    fn is_inline(&self) -> bool {
        matches!(self.bytes, KeyBytes::Inline { .. })
    }
}

impl std::fmt::Debug for MemKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("MemKey").field("user_key", &self.user_key()).field("sequence", &self.sequence).finish()
    }
}

impl KeyParts for MemKey {
    fn parts(&self) -> (&[u8], Sequence) {
        (self.user_key(), self.sequence)
    }
}

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> cmp::Ordering {
        compare_internal(self.user_key(), self.sequence, other.user_key(), other.sequence)
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for MemKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == cmp::Ordering::Equal
    }
}

impl Eq for MemKey {}

impl KeyParts for InternalKey {
    fn parts(&self) -> (&[u8], Sequence) {
        (&self.user_key, self.sequence)
    }
}

/// A borrowed user key at a sequence.
struct LookupKey<'a>(&'a [u8], Sequence);

impl KeyParts for LookupKey<'_> {
    fn parts(&self) -> (&[u8], Sequence) {
        (self.0, self.1)
    }
}

impl<'a> Borrow<dyn KeyParts + 'a> for MemKey {
    fn borrow(&self) -> &(dyn KeyParts + 'a) {
        self
    }
}

impl Ord for dyn KeyParts + '_ {
    fn cmp(&self, other: &Self) -> cmp::Ordering {
        let ((key_a, sequence_a), (key_b, sequence_b)) = (self.parts(), other.parts());
        compare_internal(key_a, sequence_a, key_b, sequence_b)
    }
}

impl PartialOrd for dyn KeyParts + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for dyn KeyParts + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == cmp::Ordering::Equal
    }
}

impl Eq for dyn KeyParts + '_ {}

/// One end of a memtable's key range ([`Memtable::key_bounds`]): a skiplist entry, kept alive while borrowed.
pub(crate) struct KeyBound<'a>(crossbeam_skiplist::map::Entry<'a, MemKey, (ValueKind, Vec<u8>)>);

impl KeyBound<'_> {
    /// The entry's user key, borrowed.
    pub(crate) fn user_key(&self) -> &[u8] {
        self.0.key().user_key()
    }
}

/// Bytes charged per entry on top of key and value, for the flush threshold.
pub const ENTRY_OVERHEAD_BYTES: u64 = 32;

/// An in-memory table of versions. Writers insert; readers look up at a snapshot sequence.
#[derive(Debug, Default)]
pub struct Memtable {
    map: SkipMap<MemKey, (ValueKind, Vec<u8>)>,
    size_bytes: AtomicU64,
    max_sequence: AtomicU64,
}

impl Memtable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Insert one version. Each (key, sequence) is inserted at most once: checked in `EXPENSIVE_CHECKS` builds
    /// only, where the simulator runs (ADR-0132), by the insert's own search (ADR-0159): the skiplist inserts only
    /// where the key is absent and builds the value only then, so a version already there is one never built.
    pub fn insert(&self, user_key: &[u8], sequence: Sequence, kind: ValueKind, value: &[u8]) {
        assert!(kind == ValueKind::Put || value.is_empty(), "a tombstone carries no value");
        let key = MemKey::new(user_key, sequence);
        let charged = user_key.len() as u64 + value.len() as u64 + ENTRY_OVERHEAD_BYTES;
        if crate::EXPENSIVE_CHECKS {
            let mut inserted = false;
            self.map.get_or_insert_with(key, || {
                inserted = true;
                (kind, value.to_vec())
            });
            assert!(inserted, "version inserted twice");
        } else {
            self.map.insert(key, (kind, value.to_vec()));
        }
        self.size_bytes.fetch_add(charged, Ordering::Relaxed);
        self.max_sequence.fetch_max(sequence, Ordering::Relaxed);
    }

    /// The newest version of `user_key` with sequence <= `snapshot`.
    pub fn get(&self, user_key: &[u8], snapshot: Sequence) -> Lookup {
        let start = LookupKey(user_key, snapshot);
        let lower: &dyn KeyParts = &start;
        let range = (Bound::Included(lower), Bound::Unbounded);
        let Some(entry) = self.map.range::<dyn KeyParts, _>(range).next() else { return Lookup::NotFound };
        if entry.key().user_key() != user_key {
            return Lookup::NotFound;
        }
        debug_assert!(entry.key().sequence() <= snapshot, "range start skipped a newer version");
        let (kind, value) = entry.value();
        match kind {
            ValueKind::Put => Lookup::Found(value.clone()),
            ValueKind::Delete => Lookup::Deleted,
        }
    }

    /// Every version, in internal-key order, from the first with user key >= `start`.
    pub fn entries_from(&self, start: &[u8]) -> impl Iterator<Item = Entry> + '_ {
        let lower = MemKey::new(start, Sequence::MAX);
        self.map.range((Bound::Included(lower), Bound::Unbounded)).map(|entry| {
            let (kind, value) = entry.value();
            Entry { key: entry.key().to_internal(), kind: *kind, value: value.clone() }
        })
    }

    /// For the user key next to `from` in `direction` (forward, the first version at or after `from`; reverse, the
    /// last before it; `Unbounded`: the first or last of all), the version a scan at `snapshot` needs: its newest
    /// version at or below `snapshot`, or, when it has none, one of its versions above it (which the scan skips).
    /// One entry per user key however many versions it has: a scan's memtable cursor re-seeks with it from the
    /// last user key it returned (a skiplist entry borrows the map, and a scan iterator owns its memtables instead,
    /// ADR-0085). Borrows `from`: no allocation but the returned entry's key and value.
    pub(crate) fn next_visible(
        &self,
        from: Bound<(&[u8], Sequence)>,
        direction: Direction,
        snapshot: Sequence,
    ) -> Option<Entry> {
        let key = match from {
            Bound::Included((user_key, sequence)) | Bound::Excluded((user_key, sequence)) => {
                Some(LookupKey(user_key, sequence))
            }
            Bound::Unbounded => None,
        };
        let bound: Bound<&dyn KeyParts> = match (&from, &key) {
            (Bound::Included(_), Some(key)) => Bound::Included(key),
            (Bound::Excluded(_), Some(key)) => Bound::Excluded(key),
            _ => Bound::Unbounded,
        };
        let first = match direction {
            Direction::Forward => self.map.range::<dyn KeyParts, _>((bound, Bound::Unbounded)).next(),
            Direction::Reverse => self.map.range::<dyn KeyParts, _>((Bound::Unbounded, bound)).next_back(),
        }?;
        let newest_first = direction == Direction::Forward && first.key().sequence() <= snapshot;
        let chosen = if newest_first {
            first
        } else {
            let user_key = first.key().user_key();
            let visible = LookupKey(user_key, snapshot);
            let lower: &dyn KeyParts = &visible;
            let newest = self.map.range::<dyn KeyParts, _>((Bound::Included(lower), Bound::Unbounded)).next();
            newest.filter(|newest| newest.key().user_key() == user_key).unwrap_or(first)
        };
        let (kind, value) = chosen.value();
        Some(Entry { key: chosen.key().to_internal(), kind: *kind, value: value.clone() })
    }

    /// Every version, in internal-key order.
    pub fn entries(&self) -> impl Iterator<Item = Entry> + '_ {
        self.entries_from(&[])
    }

    /// Lend every version, in internal-key order, to `visit` in one entry this overwrites for each (a flush's
    /// table builder copies what it keeps): no allocation per version once the entry holds the longest key and
    /// value. How many versions it lent.
    pub(crate) fn for_each_entry(&self, mut visit: impl FnMut(&Entry)) -> u64 {
        let mut entry = Entry { key: InternalKey::new([], 0), kind: ValueKind::Put, value: Vec::new() };
        let mut lent = 0;
        for node in self.map.iter() {
            let (kind, value) = node.value();
            entry.key.user_key.clear();
            entry.key.user_key.extend_from_slice(node.key().user_key());
            entry.key.sequence = node.key().sequence();
            entry.kind = *kind;
            entry.value.clear();
            entry.value.extend_from_slice(value);
            visit(&entry);
            lent += 1;
        }
        lent
    }

    /// Approximate memory charged (keys + values + overhead).
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The smallest and largest user key inserted (`None` when empty), borrowed from the skiplist's first and last
    /// entries: no copy of either key (ADR-0158).
    pub(crate) fn key_bounds(&self) -> Option<(KeyBound<'_>, KeyBound<'_>)> {
        let (first, last) = (KeyBound(self.map.front()?), KeyBound(self.map.back()?));
        debug_assert!(first.user_key() <= last.user_key(), "a skiplist out of order");
        Some((first, last))
    }

    /// The largest sequence inserted (0 when empty).
    pub fn max_sequence(&self) -> Sequence {
        self.max_sequence.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version inserted twice panics (checked by the insert's own search, ADR-0159) and leaves the first value;
    /// the same user key at another sequence is another version.
    #[test]
    fn a_version_inserted_twice_panics_and_keeps_the_first() {
        let memtable = Memtable::new();
        memtable.insert(b"a", 1, ValueKind::Put, b"first");
        memtable.insert(b"a", 2, ValueKind::Put, b"second");
        let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            memtable.insert(b"a", 1, ValueKind::Put, b"again");
        }));
        let message = again.expect_err("a second insert of (a, 1) panics");
        assert_eq!(message.downcast_ref::<&str>(), Some(&"version inserted twice"));
        assert_eq!(memtable.get(b"a", 1), Lookup::Found(b"first".to_vec()));
        assert_eq!(memtable.get(b"a", 2), Lookup::Found(b"second".to_vec()));
        assert_eq!(memtable.entries().count(), 2);
    }

    /// The key range's ends are the smallest and largest user keys, whatever their sequences and kinds, borrowed
    /// from the skiplist (ADR-0158); an empty memtable has none.
    #[test]
    fn key_bounds_are_the_smallest_and_largest_user_keys() {
        let memtable = Memtable::new();
        assert!(memtable.key_bounds().is_none());
        memtable.insert(b"m", 1, ValueKind::Put, b"one");
        let (low, high) = memtable.key_bounds().expect("one key");
        assert_eq!((low.user_key(), high.user_key()), (&b"m"[..], &b"m"[..]));
        memtable.insert(b"z", 2, ValueKind::Delete, b"");
        memtable.insert(b"b", 3, ValueKind::Put, b"three");
        memtable.insert(b"b", 4, ValueKind::Put, b"four");
        memtable.insert(b"z", 5, ValueKind::Put, b"five");
        let (low, high) = memtable.key_bounds().expect("keys");
        assert_eq!((low.user_key(), high.user_key()), (&b"b"[..], &b"z"[..]));
    }

    #[test]
    fn newest_visible_version_wins_and_tombstones_stop() {
        let memtable = Memtable::new();
        memtable.insert(b"a", 1, ValueKind::Put, b"one");
        memtable.insert(b"a", 3, ValueKind::Put, b"three");
        memtable.insert(b"a", 5, ValueKind::Delete, b"");
        memtable.insert(b"ab", 2, ValueKind::Put, b"other");
        assert_eq!(memtable.get(b"a", 2), Lookup::Found(b"one".to_vec()));
        assert_eq!(memtable.get(b"a", 4), Lookup::Found(b"three".to_vec()));
        assert_eq!(memtable.get(b"a", 9), Lookup::Deleted);
        assert_eq!(memtable.get(b"a", 0), Lookup::NotFound);
        assert_eq!(memtable.get(b"b", 9), Lookup::NotFound);
        let order: Vec<(Vec<u8>, u64)> = memtable.entries().map(|e| (e.key.user_key, e.key.sequence)).collect();
        assert_eq!(order, vec![(b"a".to_vec(), 5), (b"a".to_vec(), 3), (b"a".to_vec(), 1), (b"ab".to_vec(), 2)]);
        assert_eq!(memtable.max_sequence(), 5);
        assert!(memtable.size_bytes() >= 4 * ENTRY_OVERHEAD_BYTES);
    }

    /// A user key up to `INLINE_KEY_BYTES_MAX` bytes is held in the node, a longer one on the heap; either way the
    /// key reads back exactly, and keys on both sides of the limit are found, ordered and scanned as before
    /// (ADR-0211).
    #[test]
    fn keys_on_both_sides_of_the_inline_limit_read_back_and_order() {
        let lengths = [0, 1, INLINE_KEY_BYTES_MAX - 1, INLINE_KEY_BYTES_MAX, INLINE_KEY_BYTES_MAX + 1, 255, 256, 1000];
        let memtable = Memtable::new();
        for (index, length) in lengths.iter().enumerate() {
            let user_key = vec![b'k'; *length];
            let key = MemKey::new(&user_key, 7);
            assert_eq!((key.user_key(), key.sequence()), (user_key.as_slice(), 7));
            assert_eq!(key.is_inline(), *length <= INLINE_KEY_BYTES_MAX, "length {length}");
            memtable.insert(&user_key, index as u64 + 1, ValueKind::Put, &length.to_be_bytes());
        }
        for (index, length) in lengths.iter().enumerate() {
            let user_key = vec![b'k'; *length];
            assert_eq!(memtable.get(&user_key, u64::MAX), Lookup::Found(length.to_be_bytes().to_vec()));
            assert_eq!(memtable.get(&user_key, index as u64), Lookup::NotFound, "length {length} below its sequence");
        }
        let scanned: Vec<usize> = memtable.entries().map(|entry| entry.key.user_key.len()).collect();
        assert_eq!(scanned, lengths, "the keys are prefixes of each other: shortest first");
        let (low, high) = memtable.key_bounds().expect("keys");
        assert_eq!((low.user_key().len(), high.user_key().len()), (0, 1000));
        // The node's key: 48 bytes, against an `InternalKey`'s 32 and the separate allocation of its user key.
        assert_eq!((std::mem::size_of::<MemKey>(), std::mem::size_of::<InternalKey>()), (48, 32));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Stored keys, inline or on the heap, order exactly as owned internal keys do, compared with each other and
        /// with a borrowed lookup key (what the skiplist's `Borrow` requires, ADR-0211).
        #[test]
        fn stored_keys_order_as_internal_keys_do(
            key_a in proptest::collection::vec(0u8..3, 0..40),
            key_b in proptest::collection::vec(0u8..3, 0..40),
            sequence_a in 0u64..4,
            sequence_b in 0u64..4,
        ) {
            let owned = InternalKey::new(key_a.clone(), sequence_a).cmp(&InternalKey::new(key_b.clone(), sequence_b));
            let (stored_a, stored_b) = (MemKey::new(&key_a, sequence_a), MemKey::new(&key_b, sequence_b));
            let lookup_b = LookupKey(&key_b, sequence_b);
            let through_borrow = Borrow::<dyn KeyParts>::borrow(&stored_a).cmp(&lookup_b as &dyn KeyParts);
            proptest::prop_assert_eq!((stored_a.cmp(&stored_b), through_borrow), (owned, owned));
            proptest::prop_assert_eq!(stored_a.to_internal(), InternalKey::new(key_a, sequence_a));
        }
    }

    #[test]
    fn borrowed_lookup_keys_order_as_internal_keys_do() {
        let keys = [(b"a".as_slice(), 9u64), (b"a", 3), (b"a", 0), (b"ab", 5), (b"b", 1)];
        for (key_a, sequence_a) in keys {
            for (key_b, sequence_b) in keys {
                let owned = InternalKey::new(key_a, sequence_a).cmp(&InternalKey::new(key_b, sequence_b));
                let (left, right) = (LookupKey(key_a, sequence_a), LookupKey(key_b, sequence_b));
                let borrowed = (&left as &dyn KeyParts).cmp(&right as &dyn KeyParts);
                let owned_key = MemKey::new(key_a, sequence_a);
                let through_borrow = Borrow::<dyn KeyParts>::borrow(&owned_key).cmp(&right as &dyn KeyParts);
                assert_eq!(
                    (borrowed, through_borrow),
                    (owned, owned),
                    "{key_a:?}@{sequence_a} vs {key_b:?}@{sequence_b}"
                );
            }
        }
    }
}
