//! What a crash did to each file, unit by unit, for `--export-image`'s `CRASH.txt` (ADR-0170): read off the disk
//! before and after the crash, never off the decisions that made it, so it says what the image holds whatever the
//! persistence model decided and however it decided it.
//!
//! The unit is the model's: a page (`page`, `ext4-ordered`) or a sector (`posix`). A unit the crash could change
//! (its durable bytes differ from what the system wrote) is **kept** when the image holds what the system wrote,
//! **dropped** when it holds the durable bytes from before, and **torn** otherwise (some of the writes into it, or
//! some of its sectors, or garbage).

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::disk::{Disk, InodeId, Node};
use super::names::PathId;

/// The most units `CrashImage` lists per file and fate (the rest are counted).
pub const CRASH_UNITS_LISTED_MAX: usize = 4096;

/// One file's crash, unit by unit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileCrash {
    /// The file's name before the crash.
    pub path: PathBuf,
    /// The unit: a page or a sector, in bytes. A unit past the durable end that reads back as zeros (the hole a
    /// kept size leaves) counts as dropped.
    pub unit_bytes: u64,
    /// Its durable size before the crash, and the size the system had written (what reads saw).
    pub durable_len_before: u64,
    pub written_len_before: u64,
    /// Its size in the image; `None` when the crash left no file by that name.
    pub len_after: Option<u64>,
    /// Offsets of the units kept, dropped and torn (each list at most [`CRASH_UNITS_LISTED_MAX`]), ascending.
    pub kept: Vec<u64>,
    pub dropped: Vec<u64>,
    pub torn: Vec<u64>,
}

/// A file the crash may change: its name and its bytes before it.
pub(super) struct FileBefore {
    path: PathId,
    durable: Vec<u8>,
    written: Vec<u8>,
}

/// Every file of the current namespace whose durable bytes differ from what was written: what a crash can change.
pub(super) fn files_before(disk: &Disk) -> Vec<FileBefore> {
    let mut seen: BTreeSet<InodeId> = BTreeSet::new();
    let mut files = Vec::new();
    for (path, node) in disk.sorted(&disk.current) {
        let Node::File(id) = node else { continue };
        let Some(inode) = disk.inode(id) else { continue };
        if inode.durable != inode.current && seen.insert(id) {
            files.push(FileBefore { path, durable: inode.durable.clone(), written: inode.current.clone() });
        }
    }
    files
}

/// Each file's crash, from its bytes before ([`files_before`]) and the disk the crash left.
pub(super) fn file_crashes(before: Vec<FileBefore>, disk: &Disk) -> Vec<FileCrash> {
    let unit = if disk.model.persistence.is_paged() { disk.model.page_bytes } else { disk.model.sector_bytes };
    before
        .into_iter()
        .map(|file| {
            let path = disk.names.path(file.path).to_path_buf();
            let after = match disk.lookup_durable(&path) {
                Some(Node::File(id)) => disk.inode(id).map(|inode| inode.durable.as_slice()),
                _ => None,
            };
            file_crash(path, unit, &file.durable, &file.written, after)
        })
        .collect()
}

/// The bytes of `image` in `start..start + len` (shorter, or empty, past its end).
fn unit_of(image: &[u8], start: usize, len: usize) -> &[u8] {
    let begin = start.min(image.len());
    &image[begin..(start + len).min(image.len())]
}

/// One file's units, classified (see the module docs).
fn file_crash(path: PathBuf, unit: u64, durable: &[u8], written: &[u8], after: Option<&[u8]>) -> FileCrash {
    let mut crash = FileCrash {
        path,
        unit_bytes: unit,
        durable_len_before: durable.len() as u64,
        written_len_before: written.len() as u64,
        len_after: after.map(|bytes| bytes.len() as u64),
        ..FileCrash::default()
    };
    // A file the crash left without its name: the directory operations say so; it has no units to compare.
    let Some(image) = after else { return crash };
    let span = durable.len().max(written.len()).max(image.len());
    let step = usize::try_from(unit).expect("a unit fits in memory");
    for start in (0..span).step_by(step.max(1)) {
        let (was, wrote, now) =
            (unit_of(durable, start, step), unit_of(written, start, step), unit_of(image, start, step));
        if was == wrote {
            continue; // nothing pending here: the crash had nothing to decide
        }
        // Past the durable end a dropped unit reads back as the hole a longer size leaves: zeros.
        let was_or_hole = now.len() > was.len() && now[..was.len()] == *was && now[was.len()..].iter().all(|&b| b == 0);
        let list = if now == wrote {
            &mut crash.kept
        } else if now == was || was_or_hole {
            &mut crash.dropped
        } else {
            &mut crash.torn
        };
        if list.len() < CRASH_UNITS_LISTED_MAX {
            list.push(start as u64);
        }
    }
    crash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_kept_dropped_or_torn_by_what_the_image_holds() {
        let durable = [0u8; 8];
        let written = [1u8, 1, 1, 1, 2, 2, 2, 2, 3, 3];
        // Unit 0 holds what was written, unit 4 what was durable, unit 8 half of the write (the size grew to 9).
        let after = [1u8, 1, 1, 1, 0, 0, 0, 0, 3];
        let crash = file_crash("/f".into(), 4, &durable, &written, Some(&after));
        assert_eq!((crash.kept, crash.dropped, crash.torn), (vec![0], vec![4], vec![8]));
        assert_eq!((crash.durable_len_before, crash.written_len_before, crash.len_after), (8, 10, Some(9)));
        let lost = file_crash("/f".into(), 4, &durable, &written, None);
        assert_eq!((lost.kept.len() + lost.dropped.len() + lost.torn.len(), lost.len_after), (0, None));
    }
}
