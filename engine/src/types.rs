//! Internal keys, value kinds and three-way lookups, shared by the memtable, SSTables and compaction.

use std::cmp::Ordering;

/// A sequence number: the commit order of every write. Never reused, never lower after recovery (ADR-0015).
pub type Sequence = u64;

/// The largest sequence a write can get; reading "at `SEQUENCE_MAX`" sees everything.
pub const SEQUENCE_MAX: Sequence = (1 << 56) - 1;

/// Keys longer than this are rejected with `InvalidArgument`.
pub const KEY_SIZE_BYTES_MAX: usize = 64 * 1024;
/// Values longer than this are rejected with `InvalidArgument`.
pub const VALUE_SIZE_BYTES_MAX: usize = 16 * 1024 * 1024;

/// The one check of a write's key and value (every write path): a key is 1 to `key_max` bytes (empty keys are
/// invalid, ADR-0076), a value at most `value_max` bytes (the options' limits, ADR-0099; by default
/// [`KEY_SIZE_BYTES_MAX`] and [`VALUE_SIZE_BYTES_MAX`]); else `InvalidArgument`.
pub(crate) fn check_write(key: &[u8], value: &[u8], (key_max, value_max): (usize, usize)) -> crate::Result<()> {
    let message = if key.is_empty() {
        "an empty key is invalid".to_string()
    } else if key.len() > key_max {
        format!("key of {} bytes over {key_max}", key.len())
    } else if value.len() > value_max {
        format!("value of {} bytes over {value_max}", value.len())
    } else {
        return Ok(());
    };
    Err(crate::Error::InvalidArgument { message })
}

/// What a version of a key is. The tag bytes are distinct from each other and from every WAL record kind
/// (ADR-0011), so a byte in the wrong place cannot be read as the right kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone: the key is deleted as of this version.
    Delete = 0xD1,
    /// A value.
    Put = 0xE7,
}

impl ValueKind {
    pub fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            0xD1 => Some(ValueKind::Delete),
            0xE7 => Some(ValueKind::Put),
            _ => None,
        }
    }

    pub fn to_byte(self) -> u8 {
        self as u8
    }
}

/// A user key at a sequence. Ordered by user key ascending, then sequence **descending**, so the newest version
/// of a key comes first.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct InternalKey {
    pub user_key: Vec<u8>,
    pub sequence: Sequence,
}

impl InternalKey {
    pub fn new(user_key: impl Into<Vec<u8>>, sequence: Sequence) -> Self {
        Self { user_key: user_key.into(), sequence }
    }

    /// Make `slot` a copy of `key`, reusing the buffer of the key already there (a builder's last key, once per
    /// entry added: no allocation once it has grown to the key size, ADR-0135).
    pub(crate) fn copy_into(key: &Self, slot: &mut Option<Self>) {
        match slot {
            Some(last) => last.clone_from(key),
            None => *slot = Some(key.clone()),
        }
    }
}

impl Clone for InternalKey {
    fn clone(&self) -> Self {
        Self { user_key: self.user_key.clone(), sequence: self.sequence }
    }

    /// Reuses `self`'s key buffer.
    fn clone_from(&mut self, source: &Self) {
        self.user_key.clone_from(&source.user_key);
        self.sequence = source.sequence;
    }
}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal(&self.user_key, self.sequence, &other.user_key, other.sequence)
    }
}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The internal-key order on borrowed parts: user key ascending, sequence descending.
pub fn compare_internal(key_a: &[u8], sequence_a: Sequence, key_b: &[u8], sequence_b: Sequence) -> Ordering {
    key_a.cmp(key_b).then(sequence_b.cmp(&sequence_a))
}

/// One version of a key: what the memtable holds, what an SSTable stores, what compaction merges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: InternalKey,
    pub kind: ValueKind,
    /// Empty for a tombstone.
    pub value: Vec<u8>,
}

/// The result of looking a key up in one source (memtable or table) at a snapshot. Three-way so a tombstone
/// stops the search instead of falling through to an older table (ADR-0013).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The newest visible version is a value.
    Found(Vec<u8>),
    /// The newest visible version is a tombstone: stop searching, the key is absent.
    Deleted,
    /// This source has no visible version: look in older sources.
    NotFound,
}

/// The most writes one transaction may buffer.
pub const TRANSACTION_WRITES_MAX: usize = 1 << 20;

/// Which way a merge runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Ascending internal keys: user keys ascending, each key's versions newest first.
    Forward,
    /// Descending internal keys: user keys descending, each key's versions oldest first.
    Reverse,
}

impl Direction {
    /// `order` (of a against b, in internal-key order) as this direction sees it.
    pub fn orient(self, order: std::cmp::Ordering) -> std::cmp::Ordering {
        match self {
            Self::Forward => order,
            Self::Reverse => order.reverse(),
        }
    }
}
