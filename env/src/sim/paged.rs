//! The page-cache crash of one file (ADR-0109), for the `page` and `ext4-ordered` models.
//!
//! A file's pending operations `1..=n` define snapshots `S_0` (its durable bytes) to `S_n` (what reads see). A
//! crash keeps, for each page an operation touched, that page of some snapshot `S_k` — the page holds every
//! operation into it up to some point and none after (a page cache writes back whole pages) — and, as the file's
//! size, the size of some snapshot `S_j`. Under `page` each page and the size choose alone; under
//! `ext4-ordered` the journal fixes `j` (the operations before its cut) and every page in the part of the file
//! that `S_j`'s size newly exposes holds at least the operations before the cut (`data=ordered`: data of newly
//! allocated blocks is written before the metadata that exposes it commits).

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use super::disk::{CrashDecisions, CrashEffects, Inode, InodeId, PendingData, unit_pieces, write_into};

/// What one file's pending operations do to its pages.
struct Touches {
    /// The size after each prefix of the operations (`lens[0]`: durable).
    lens: Vec<u64>,
    /// Pages each operation (by position) changes: a write's own, a shrink's from its new end to the furthest
    /// byte any snapshot before it had.
    ranges: Vec<Option<RangeInclusive<u64>>>,
    /// For each touched page, the operations (1-based) that change it, in order.
    by_page: BTreeMap<u64, Vec<usize>>,
}

fn touches(durable_len: u64, ops: &[PendingData], page_bytes: u64) -> Touches {
    let mut lens = vec![durable_len];
    let mut ranges = Vec::with_capacity(ops.len());
    let mut by_page: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    let (mut len, mut extent) = (durable_len, durable_len);
    for (position, op) in ops.iter().enumerate() {
        let range = match *op {
            PendingData::Write { offset, ref data, .. } => {
                let end = offset + data.len() as u64;
                len = len.max(end);
                (!data.is_empty()).then(|| offset / page_bytes..=(end - 1) / page_bytes)
            }
            PendingData::SetLen { len: new_len, .. } => {
                let shrinks = new_len < extent;
                let range = shrinks.then(|| new_len / page_bytes..=(extent - 1) / page_bytes);
                len = new_len;
                range
            }
        };
        extent = extent.max(len);
        for page in range.clone().into_iter().flatten() {
            by_page.entry(page).or_default().push(position + 1);
        }
        ranges.push(range);
        lens.push(len);
    }
    debug_assert_eq!((lens.len(), ranges.len()), (ops.len() + 1, ops.len()));
    Touches { lens, ranges, by_page }
}

/// `ext4-ordered`: the pages the size after `journal_ops` operations exposes beyond the smallest size any
/// snapshot up to it had (newly allocated blocks).
fn exposed_pages(lens: &[u64], journal_ops: usize, page_bytes: u64) -> Option<RangeInclusive<u64>> {
    let low = lens[..=journal_ops].iter().copied().min().expect("at least the durable size");
    let high = lens[journal_ops];
    (high > low).then(|| low / page_bytes..=(high - 1) / page_bytes)
}

/// For each touched page, the last operation (1-based) it holds; 0: none (its durable bytes).
fn choose_pages(
    touched: &Touches,
    ops: &[PendingData],
    journal_ops: Option<usize>,
    page_bytes: u64,
    decisions: &mut dyn CrashDecisions,
) -> BTreeMap<u64, usize> {
    let exposed = journal_ops.and_then(|ops| exposed_pages(&touched.lens, ops, page_bytes));
    let mut limits = BTreeMap::new();
    for (&page, list) in &touched.by_page {
        let forced = match (&exposed, journal_ops) {
            (Some(range), Some(cut)) if range.contains(&page) => list.iter().filter(|&&op| op <= cut).count(),
            _ => 0,
        };
        let key = ops[list[0] - 1].key();
        let seqs: Vec<u64> = list.iter().map(|&op| ops[op - 1].seq()).collect();
        let kept = decisions.page_prefix(key, page, forced as u64, &seqs);
        assert!((forced as u64..=list.len() as u64).contains(&kept), "page prefix out of range");
        let kept =
            written_back(ops, list, page * page_bytes, usize::try_from(kept).expect("fits"), forced, journal_ops);
        limits.insert(page, if kept == 0 { 0 } else { list[kept - 1] });
    }
    limits
}

/// Does operation `op` (1-based) free the whole page starting at `page_start` (a shrink to at most its start)?
fn frees_page(ops: &[PendingData], op: usize, page_start: u64) -> bool {
    matches!(ops[op - 1], PendingData::SetLen { len, .. } if len <= page_start)
}

/// How many of the page's operations (`list`) its written-back state holds, given the `kept` drawn (ADR-0121). A
/// shrink that frees the whole page drops it from the cache: nothing writes it back, so a state that ends in such
/// shrinks holds only the operations before them (the partial page at the new end is zeroed and written back, so
/// it stays). Under `ext4-ordered` (a journal cut), a page freed by a shrink after the cut keeps what it held
/// before that shrink: its blocks stay allocated until the shrink commits, and writes after it go to new blocks
/// the same uncommitted transaction would map. `forced` (ext4's newly exposed pages) is never undercut.
fn written_back(
    ops: &[PendingData],
    list: &[usize],
    page_start: u64,
    kept: usize,
    forced: usize,
    journal_ops: Option<usize>,
) -> usize {
    let uncommitted_free =
        journal_ops.and_then(|cut| list.iter().position(|&op| op > cut && frees_page(ops, op, page_start)));
    let mut kept = uncommitted_free.map_or(kept, |before| kept.min(before)).max(forced);
    while kept > forced && frees_page(ops, list[kept - 1], page_start) {
        kept -= 1;
    }
    kept
}

/// Apply to `image` each operation to the pages whose chosen snapshot includes it.
fn apply(image: &mut Vec<u8>, ops: &[PendingData], touched: &Touches, limits: &BTreeMap<u64, usize>, page_bytes: u64) {
    let holds = |page: u64, op: usize| limits.get(&page).is_some_and(|&limit| op <= limit);
    for (position, op) in ops.iter().enumerate() {
        let number = position + 1;
        match *op {
            PendingData::Write { offset, ref data, .. } => {
                for (piece_offset, piece) in unit_pieces(offset, data, page_bytes) {
                    if holds(piece_offset / page_bytes, number) {
                        write_into(image, piece_offset, piece);
                    }
                }
            }
            PendingData::SetLen { len, .. } => {
                for page in touched.ranges[position].clone().into_iter().flatten() {
                    let start = (page * page_bytes).max(len);
                    let end = ((page + 1) * page_bytes).min(image.len() as u64);
                    if start < end && holds(page, number) {
                        let range = usize::try_from(start).expect("fits")..usize::try_from(end).expect("fits");
                        image[range].fill(0);
                    }
                }
            }
        }
    }
}

/// The page-cache crash of one file: see the module docs. `journal_ops`: under `ext4-ordered`, how many of its
/// pending operations precede the journal's cut (its size is theirs); `None` under `page` (the size chooses).
pub(super) fn crash_inode(
    id: InodeId,
    inode: &mut Inode,
    decisions: &mut dyn CrashDecisions,
    effects: &mut CrashEffects,
    page_bytes: u64,
    journal_ops: Option<usize>,
) {
    let ops = std::mem::take(&mut inode.pending);
    let mut image = std::mem::take(&mut inode.durable);
    if let Some(first) = ops.first() {
        let touched = touches(image.len() as u64, &ops, page_bytes);
        let size_ops = journal_ops.unwrap_or_else(|| {
            let seqs: Vec<u64> = ops.iter().map(PendingData::seq).collect();
            let chosen = decisions.size_prefix(first.key(), &seqs);
            usize::try_from(chosen).expect("fits").min(ops.len())
        });
        let limits = choose_pages(&touched, &ops, journal_ops, page_bytes, decisions);
        apply(&mut image, &ops, &touched, &limits, page_bytes);
        image.resize(usize::try_from(touched.lens[size_ops]).expect("file length fits in memory"), 0);
        record(id, &ops, &touched, &limits, effects);
    }
    inode.current = image.clone();
    inode.durable = image;
}

/// Each write kept (all its pages hold it), dropped (none does) or torn (some do), for the fault log.
fn record(
    id: InodeId,
    ops: &[PendingData],
    touched: &Touches,
    limits: &BTreeMap<u64, usize>,
    effects: &mut CrashEffects,
) {
    for (position, op) in ops.iter().enumerate() {
        let PendingData::Write { offset, .. } = *op else { continue };
        let Some(range) = touched.ranges[position].clone() else { continue };
        let pages = range.clone().count();
        let held = range.filter(|page| limits.get(page).is_some_and(|&limit| position < limit)).count();
        let list = match held {
            0 => &mut effects.writes_dropped,
            held if held == pages => &mut effects.writes_kept,
            _ => &mut effects.writes_torn,
        };
        list.push((id, offset));
    }
}

/// One file's crash, checked against the page-cache models (ADR-0173): which page states its image could come
/// from. The check enumerates exactly the choices [`crash_inode`] can make, so every image it produced passes.
pub(super) struct FileCheck {
    ops: Vec<PendingData>,
    touched: Touches,
    page_bytes: u64,
    size: u64,
    /// For each touched page, the prefixes `k` (operations held) whose page equals the image's.
    matching: BTreeMap<u64, Vec<usize>>,
    /// Every untouched page of the image equals its durable bytes.
    untouched_equal: bool,
}

impl FileCheck {
    /// `durable` and `ops`: the file before the crash; `after`: its bytes after.
    pub(super) fn new(durable: &[u8], ops: Vec<PendingData>, after: &[u8], page_bytes: u64) -> Self {
        let touched = touches(durable.len() as u64, &ops, page_bytes);
        let size = after.len() as u64;
        let range = |page: u64| {
            let start = usize::try_from(page * page_bytes).expect("fits");
            start..usize::try_from(((page + 1) * page_bytes).min(size)).expect("fits")
        };
        let mut matching = BTreeMap::new();
        for (&page, list) in &touched.by_page {
            if page * page_bytes >= size {
                matching.insert(page, (0..=list.len()).collect());
                continue;
            }
            let wanted = &after[range(page)];
            let fits =
                (0..=list.len()).filter(|&k| page_state(durable, &ops, &list[..k], page, page_bytes, size) == wanted);
            matching.insert(page, fits.collect());
        }
        let pages = size.div_ceil(page_bytes);
        let untouched_equal = (0..pages).filter(|page| !touched.by_page.contains_key(page)).all(|page| {
            let range = range(page);
            let old = durable.get(range.start..range.end.min(durable.len())).unwrap_or_default();
            after[range.clone()].starts_with(old) && after[range.start + old.len()..range.end].iter().all(|&b| b == 0)
        });
        Self { ops, touched, page_bytes, size, matching, untouched_equal }
    }

    /// Could the model produce this image? `journal_ops`: under `ext4-ordered`, how many of the file's pending
    /// operations precede the journal's cut; `None` under `page`.
    pub(super) fn admits(&self, journal_ops: Option<usize>) -> bool {
        let lens = &self.touched.lens;
        let size_fits = match journal_ops {
            Some(cut) => lens[cut] == self.size,
            None => lens.contains(&self.size),
        };
        if !self.untouched_equal || !size_fits {
            return false;
        }
        let exposed = journal_ops.and_then(|cut| exposed_pages(lens, cut, self.page_bytes));
        self.touched.by_page.iter().all(|(&page, list)| {
            let forced = match (&exposed, journal_ops) {
                (Some(range), Some(cut)) if range.contains(&page) => list.iter().filter(|&&op| op <= cut).count(),
                _ => 0,
            };
            let page_start = page * self.page_bytes;
            let fits = &self.matching[&page];
            (forced..=list.len())
                .any(|k| fits.contains(&written_back(&self.ops, list, page_start, k, forced, journal_ops)))
        })
    }
}

/// Page `page` of the file after the operations `held` (1-based, in order) of `ops`, cut at `size`.
fn page_state(durable: &[u8], ops: &[PendingData], held: &[usize], page: u64, page_bytes: u64, size: u64) -> Vec<u8> {
    let start = page * page_bytes;
    let end = ((page + 1) * page_bytes).min(size);
    let mut bytes = vec![0u8; usize::try_from(end - start).expect("fits")];
    let copy = |bytes: &mut Vec<u8>, offset: u64, data: &[u8]| {
        let (from, to) = (offset.max(start), (offset + data.len() as u64).min(end));
        if from < to {
            let source = usize::try_from(from - offset).expect("fits")..usize::try_from(to - offset).expect("fits");
            let target = usize::try_from(from - start).expect("fits");
            bytes[target..target + source.len()].copy_from_slice(&data[source]);
        }
    };
    copy(&mut bytes, 0, durable);
    for &number in held {
        match ops[number - 1] {
            PendingData::Write { offset, ref data, .. } => copy(&mut bytes, offset, data),
            PendingData::SetLen { len, .. } => {
                let from = usize::try_from(len.max(start).min(end) - start).expect("fits");
                bytes[from..].fill(0);
            }
        }
    }
    bytes
}
