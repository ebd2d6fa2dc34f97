//! Crash shapes (ADR-0172): a crash's image named by places in the write sequence instead of drawn.
//!
//! The pending (unsynced) state of the whole disk is one sequence of *units* in the order it was written: each
//! page a pending write touches (a write of three pages is three units, in page order), each `set_len`, each
//! create, remove and rename. A [`CrashShape`] says which units reached the disk, counted back from the crash:
//! `newest` marks the most recent ones, newest first (`k` kept, `d` dropped), and `older` is the fate of every unit
//! before them. Removing a step that ran before the marked units changes nothing the shape names, so a shrinker can
//! delete unrelated steps and keep the image; and the shape itself shrinks (fewer marks).
//!
//! Each persistence model projects the chosen set `S` onto what it can produce:
//! * `posix`: a write keeps exactly its pages in `S` (whole when all are, torn at page boundaries when some are);
//!   a `set_len` and a directory operation persist when in `S`;
//! * `page`: a page holds every operation into it up to the newest one whose unit for that page is in `S`
//!   (write-back writes the page as it is), a file's size is its size after its newest operation with a unit in
//!   `S`, a directory operation persists when in `S`;
//! * `ext4-ordered`: the journal commits every event up to the newest one with a unit in `S`, and `page`'s rule
//!   holds for the pages, never below what `data=ordered` forces.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::disk::{CrashDecisions, PendingData, WriteFate};
use super::persistence::DiskModel;

/// The page of a unit that is no page of a write: a `set_len` or a directory operation.
pub(crate) const NO_PAGE: u64 = u64::MAX;

/// The most marks a shape may carry (a longer one is refused when read).
pub const CRASH_SHAPE_MARKS_MAX: usize = 4096;

/// Which pending operations a crash keeps, by their place counted back from the crash. See the module docs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrashShape {
    /// The newest pending operations, newest first: `k` reached the disk, `d` did not.
    #[serde(default, skip_serializing_if = "Marks::is_empty")]
    pub newest: Marks,
    /// Did every older pending operation reach the disk?
    pub older: Fate,
}

/// What a crash did to one pending operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fate {
    Kept,
    #[default]
    Dropped,
}

impl Fate {
    fn kept(self) -> bool {
        self == Fate::Kept
    }
}

/// A string of `k` (kept) and `d` (dropped), newest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Marks(Vec<bool>);

impl Marks {
    /// Marks from fates, newest first.
    pub fn new(kept: Vec<bool>) -> Self {
        assert!(kept.len() <= CRASH_SHAPE_MARKS_MAX, "a crash shape over CRASH_SHAPE_MARKS_MAX marks");
        Self(kept)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Kept (true) or dropped, newest first.
    pub fn as_slice(&self) -> &[bool] {
        &self.0
    }
}

impl TryFrom<String> for Marks {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        if text.len() > CRASH_SHAPE_MARKS_MAX {
            return Err(format!("crash shape: {} marks (at most {CRASH_SHAPE_MARKS_MAX})", text.len()));
        }
        let marks = text.chars().enumerate().map(|(index, mark)| match mark {
            'k' => Ok(true),
            'd' => Ok(false),
            other => Err(format!("crash shape: mark {index} is {other:?} (want k: kept or d: dropped)")),
        });
        marks.collect::<Result<Vec<bool>, String>>().map(Marks)
    }
}

impl From<Marks> for String {
    fn from(marks: Marks) -> String {
        marks.to_string()
    }
}

impl fmt::Display for Marks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|&kept| f.write_str(if kept { "k" } else { "d" }))
    }
}

impl fmt::Display for CrashShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let older = if self.older.kept() { "kept" } else { "dropped" };
        if self.newest.is_empty() {
            write!(f, "every pending operation {older}")
        } else {
            write!(f, "newest first {}, older {older}", self.newest)
        }
    }
}

impl CrashShape {
    /// Every pending operation kept (`all: true`) or dropped.
    pub fn all(kept: bool) -> Self {
        Self { newest: Marks::default(), older: if kept { Fate::Kept } else { Fate::Dropped } }
    }

    /// The canonical form: trailing marks equal to `older` say nothing and are removed.
    pub fn normalized(mut self) -> Self {
        while self.newest.0.last().is_some_and(|&kept| kept == self.older.kept()) {
            self.newest.0.pop();
        }
        self
    }

    /// Simpler shapes, simplest first (ADR-0172): every unit dropped or kept, fewer marks, then one kept mark
    /// turned into a dropped one. Each is smaller in [`CrashShape::size`], so repeated simplification ends.
    pub fn simpler(&self) -> Vec<CrashShape> {
        let this = self.clone().normalized();
        let mut out = vec![CrashShape::all(false), CrashShape::all(true)];
        let len = this.newest.len();
        for keep in [0, len / 2, len.saturating_sub(1)] {
            if keep < len {
                out.push(CrashShape { newest: Marks(this.newest.0[..keep].to_vec()), older: this.older }.normalized());
            }
        }
        for index in 0..len {
            if this.newest.0[index] && !this.older.kept() {
                let mut marks = this.newest.0.clone();
                marks[index] = false;
                out.push(CrashShape { newest: Marks(marks), older: this.older }.normalized());
            }
        }
        let mut unique: Vec<CrashShape> = Vec::with_capacity(out.len());
        for shape in out {
            if shape.size() < this.size() && !unique.contains(&shape) {
                unique.push(shape);
            }
        }
        unique
    }

    /// The order simplification descends (a normalized shape): marks, then marks that differ from `older`, then
    /// `older` kept above dropped. Every shape [`CrashShape::simpler`] offers is smaller.
    pub fn size(&self) -> (usize, usize, bool) {
        let differ = self.newest.as_slice().iter().filter(|&&kept| kept != self.older.kept()).count();
        (self.newest.len(), differ, self.older.kept())
    }

    /// The units the shape keeps among `pending` (every pending unit, `(seq, page)`, any order).
    pub(crate) fn select(&self, pending: &[(u64, u64)]) -> BTreeSet<(u64, u64)> {
        let mut sorted = pending.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let marks = self.newest.as_slice();
        let mut kept = BTreeSet::new();
        for (back, &unit) in sorted.iter().rev().enumerate() {
            if marks.get(back).copied().unwrap_or(self.older.kept()) {
                kept.insert(unit);
            }
        }
        kept
    }
}

/// The pending units of directory operations `meta` and data operations `ops` (their sequence numbers): a write
/// is one unit per page it touches, `(seq, page)`; a `set_len` or a directory operation is one, `(seq, NO_PAGE)`.
pub(crate) fn units<'a>(
    meta: impl Iterator<Item = u64>,
    ops: impl Iterator<Item = &'a PendingData>,
    page_bytes: u64,
) -> Vec<(u64, u64)> {
    let mut units: Vec<(u64, u64)> = meta.map(|seq| (seq, NO_PAGE)).collect();
    for op in ops {
        match *op {
            PendingData::Write { offset, ref data, seq, .. } if !data.is_empty() => {
                let last = (offset + data.len() as u64 - 1) / page_bytes;
                units.extend((offset / page_bytes..=last).map(|page| (seq, page)));
            }
            _ => units.push((op.seq(), NO_PAGE)),
        }
    }
    units
}

/// Crash decisions from a shape: the set of kept sequence numbers, projected per model (module docs).
pub(crate) struct ShapedCrash {
    kept: BTreeSet<(u64, u64)>,
    /// The operations with at least one unit kept.
    touched: BTreeSet<u64>,
    page_bytes: u64,
    sector_bytes: u64,
}

impl ShapedCrash {
    pub(crate) fn new(shape: &CrashShape, pending: &[(u64, u64)], model: &DiskModel) -> Self {
        let kept = shape.select(pending);
        let touched = kept.iter().map(|&(seq, _)| seq).collect();
        Self { kept, touched, page_bytes: model.page_bytes, sector_bytes: model.sector_bytes }
    }

    /// How many of `seqs` (in order) the state holds: up to the newest with a unit kept (`page`: its unit for
    /// that page, or its only unit).
    fn through_newest_kept(&self, seqs: &[u64], page: Option<u64>) -> u64 {
        let kept = |seq: &u64| match page {
            Some(page) => self.kept.contains(&(*seq, page)) || self.kept.contains(&(*seq, NO_PAGE)),
            None => self.touched.contains(seq),
        };
        seqs.iter().rposition(kept).map_or(0, |index| index as u64 + 1)
    }
}

impl CrashDecisions for ShapedCrash {
    fn keep_meta(&mut self, _key: u64, seq: u64) -> bool {
        self.kept.contains(&(seq, NO_PAGE))
    }

    fn write_fate(&mut self, _key: u64, seq: u64, offset: u64, len: u64) -> WriteFate {
        if len == 0 {
            return if self.kept.contains(&(seq, NO_PAGE)) { WriteFate::Kept } else { WriteFate::Dropped };
        }
        let pages = offset / self.page_bytes..=(offset + len - 1) / self.page_bytes;
        let held = pages.clone().filter(|&page| self.kept.contains(&(seq, page))).count();
        match held {
            0 => WriteFate::Dropped,
            held if held == pages.count() => WriteFate::Kept,
            _ => WriteFate::Torn,
        }
    }

    fn keep_sector(&mut self, _key: u64, seq: u64, sector: u64) -> bool {
        self.kept.contains(&(seq, sector * self.sector_bytes / self.page_bytes))
    }

    fn keep_set_len(&mut self, _key: u64, seq: u64) -> bool {
        self.kept.contains(&(seq, NO_PAGE))
    }

    fn garble_sector(&mut self, _key: u64, _sector: u64) -> Option<u64> {
        None
    }

    fn page_prefix(&mut self, _key: u64, page: u64, min: u64, seqs: &[u64]) -> u64 {
        self.through_newest_kept(seqs, Some(page)).max(min)
    }

    fn size_prefix(&mut self, _key: u64, seqs: &[u64]) -> u64 {
        self.through_newest_kept(seqs, None)
    }

    fn journal_prefix(&mut self, events: &[u64]) -> u64 {
        self.through_newest_kept(events, None)
    }
}

/// Keyed decisions, passed through, with the units they kept recorded: the shape that names (closely) the image
/// the draws made, for the shrinker to pin (ADR-0172). Exact for whole writes and directory operations; a torn
/// page counts as kept when any of its sectors is, and a file's size is the projection's, not the draw's.
pub(crate) struct Recording<'a> {
    inner: &'a mut dyn CrashDecisions,
    kept: BTreeSet<(u64, u64)>,
    page_bytes: u64,
    sector_bytes: u64,
}

impl<'a> Recording<'a> {
    pub(crate) fn new(inner: &'a mut dyn CrashDecisions, model: &DiskModel) -> Self {
        Self { inner, kept: BTreeSet::new(), page_bytes: model.page_bytes, sector_bytes: model.sector_bytes }
    }

    /// The shape of what was kept among `pending` (every pending unit before the crash).
    pub(crate) fn shape(&self, pending: &[(u64, u64)]) -> CrashShape {
        let mut sorted = pending.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let any_of = |seq: u64| self.kept.range((seq, 0)..=(seq, NO_PAGE)).next().is_some();
        let marks: Vec<bool> = sorted
            .iter()
            .rev()
            .take(CRASH_SHAPE_MARKS_MAX)
            .map(|&(seq, page)| self.kept.contains(&(seq, page)) || (page == NO_PAGE && any_of(seq)))
            .collect();
        CrashShape { newest: Marks(marks), older: Fate::Dropped }.normalized()
    }
}

impl CrashDecisions for Recording<'_> {
    fn keep_meta(&mut self, key: u64, seq: u64) -> bool {
        let kept = self.inner.keep_meta(key, seq);
        if kept {
            self.kept.insert((seq, NO_PAGE));
        }
        kept
    }

    fn write_fate(&mut self, key: u64, seq: u64, offset: u64, len: u64) -> WriteFate {
        let fate = self.inner.write_fate(key, seq, offset, len);
        if fate == WriteFate::Kept {
            if len == 0 {
                self.kept.insert((seq, NO_PAGE));
            } else {
                let last = (offset + len - 1) / self.page_bytes;
                self.kept.extend((offset / self.page_bytes..=last).map(|page| (seq, page)));
            }
        }
        fate
    }

    fn keep_sector(&mut self, key: u64, seq: u64, sector: u64) -> bool {
        let kept = self.inner.keep_sector(key, seq, sector);
        if kept {
            self.kept.insert((seq, sector * self.sector_bytes / self.page_bytes));
        }
        kept
    }

    fn keep_set_len(&mut self, key: u64, seq: u64) -> bool {
        let kept = self.inner.keep_set_len(key, seq);
        if kept {
            self.kept.insert((seq, NO_PAGE));
        }
        kept
    }

    fn garble_sector(&mut self, key: u64, sector: u64) -> Option<u64> {
        self.inner.garble_sector(key, sector)
    }

    fn page_prefix(&mut self, key: u64, page: u64, min: u64, seqs: &[u64]) -> u64 {
        let kept = self.inner.page_prefix(key, page, min, seqs);
        let held = usize::try_from(kept).expect("fits");
        self.kept.extend(seqs[..held].iter().map(|&seq| (seq, page)));
        kept
    }

    fn size_prefix(&mut self, key: u64, seqs: &[u64]) -> u64 {
        self.inner.size_prefix(key, seqs)
    }

    fn journal_prefix(&mut self, events: &[u64]) -> u64 {
        let committed = self.inner.journal_prefix(events);
        let held = usize::try_from(committed).expect("fits");
        self.kept.extend(events[..held].iter().map(|&seq| (seq, NO_PAGE)));
        committed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(newest: &str, older: Fate) -> CrashShape {
        CrashShape { newest: Marks::try_from(newest.to_string()).expect("marks"), older }
    }

    #[test]
    fn shapes_read_and_print_as_marks_and_refuse_other_letters() {
        let text = serde_json::to_string(&shape("kd", Fate::Dropped)).expect("serializes");
        assert_eq!(text, r#"{"newest":"kd","older":"dropped"}"#);
        assert_eq!(serde_json::from_str::<CrashShape>(&text).expect("parses"), shape("kd", Fate::Dropped));
        assert_eq!(serde_json::to_string(&CrashShape::all(true)).expect("serializes"), r#"{"older":"kept"}"#);
        let error = serde_json::from_str::<CrashShape>(r#"{"newest":"kx","older":"kept"}"#).expect_err("bad mark");
        assert!(error.to_string().contains("mark 1 is 'x'"), "{error}");
        assert_eq!(shape("kd", Fate::Dropped).to_string(), "newest first kd, older dropped");
    }

    #[test]
    fn a_shape_counts_back_from_the_newest_unit() {
        let pending = [(7, NO_PAGE), (3, 0), (9, 1), (9, 2), (12, 0)];
        assert_eq!(shape("k", Fate::Dropped).select(&pending), BTreeSet::from([(12, 0)]));
        assert_eq!(shape("dk", Fate::Kept).select(&pending), BTreeSet::from([(3, 0), (7, NO_PAGE), (9, 1), (9, 2)]));
        assert_eq!(CrashShape::all(false).select(&pending), BTreeSet::new());
        // Removing an operation older than the marked ones keeps what the marks name.
        let fewer = [(9, 1), (9, 2), (12, 0)];
        assert_eq!(shape("kd", Fate::Dropped).select(&fewer), shape("kd", Fate::Dropped).select(&pending));
    }

    #[test]
    fn simpler_shapes_are_smaller_and_end() {
        let mut frontier = vec![shape("kdkk", Fate::Dropped), shape("dkd", Fate::Kept)];
        for _ in 0..12 {
            let mut next = Vec::new();
            for current in &frontier {
                for simpler in current.simpler() {
                    assert!(simpler.size() < current.size(), "{simpler} is not smaller than {current}");
                    next.push(simpler);
                }
            }
            frontier = next;
        }
        assert!(frontier.is_empty(), "simplification did not end");
        assert_eq!(CrashShape::all(true).simpler(), vec![CrashShape::all(false)]);
        assert!(CrashShape::all(false).simpler().is_empty(), "nothing kept is the simplest shape");
        assert_eq!(shape("kdd", Fate::Dropped).normalized(), shape("k", Fate::Dropped));
    }

    #[test]
    fn projections_hold_up_to_the_newest_kept_unit() {
        // Ops 1 and 2 write page 0; op 3 writes pages 0 and 1 (units (3, 0), (3, 1)): keep only (3, 0).
        let units = [(1, 0), (2, 0), (3, 0), (3, 1)];
        let mut crash = ShapedCrash::new(&shape("dk", Fate::Dropped), &units, &DiskModel::default());
        assert_eq!(crash.page_prefix(0, 0, 0, &[1, 2, 3]), 3, "op 3's unit for page 0 kept: the page holds 1 to 3");
        assert_eq!(crash.page_prefix(0, 1, 0, &[3]), 0, "op 3's unit for page 1 dropped");
        assert_eq!(crash.page_prefix(0, 1, 1, &[3]), 1, "never below the forced prefix");
        assert_eq!(crash.size_prefix(0, &[1, 2, 3]), 3);
        assert_eq!(crash.journal_prefix(&[1, 2]), 0);
        assert_eq!(crash.write_fate(0, 3, 0, 8192), WriteFate::Torn, "posix tears it at the page boundary");
        assert!(crash.keep_sector(0, 3, 7) && !crash.keep_sector(0, 3, 8), "sectors of 512 bytes in page 0 only");
        assert_eq!(crash.write_fate(0, 2, 0, 10), WriteFate::Dropped);
        assert!(!crash.keep_meta(0, 3));
    }
}
