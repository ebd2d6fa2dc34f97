//! Which persistence models admit a crash's image (ADR-0173): not "did a replay under that model fail" but "could
//! that model have left exactly these bytes and names". `posix` is the weakest model: it promises only what was
//! synced, which no model's crash ever takes back, so it admits every image. `page` admits an image when every file
//! has a size some prefix of its operations had and every page the state after some prefix of the operations into
//! it ([`super::paged::FileCheck`], the same choices the model's crash makes). `ext4-ordered` admits it when one
//! journal cut explains the directory operations kept, every file's size, and its pages under `data=ordered`;
//! `page` then admits it too (the models' order, `posix` ⊇ `page` ⊇ `ext4-ordered`).

use std::collections::BTreeSet;

use super::disk::{CrashEffects, Disk, InodeId, PendingData};
use super::paged::FileCheck;
use super::persistence::Persistence;

/// The disk just before a crash, as much of it as the check needs.
pub(crate) struct BeforeCrash {
    pub(crate) page_bytes: u64,
    /// The journal's floor (`ext4-ordered`): pending events at or above it may commit.
    pub(crate) floor: u64,
    /// The sequence numbers of the pending directory operations.
    pub(crate) meta: Vec<u64>,
    /// Every file's durable bytes and pending operations.
    pub(crate) files: Vec<(InodeId, Vec<u8>, Vec<PendingData>)>,
}

/// The models that admit the image `disk` holds after the crash that started from `before` and did `effects`,
/// weakest first.
pub(crate) fn admitted(before: BeforeCrash, disk: &Disk, effects: &CrashEffects) -> Vec<Persistence> {
    let kept_meta: BTreeSet<u64> = effects.meta_kept_seqs.iter().copied().collect();
    let mut checks = Vec::with_capacity(before.files.len());
    for (id, durable, ops) in before.files {
        // A file the crash left without a name and a handle is gone: nothing of it is in the image.
        let Some(inode) = disk.inode(id) else { continue };
        let seqs: Vec<u64> = ops.iter().map(PendingData::seq).collect();
        checks.push((seqs, FileCheck::new(&durable, ops, &inode.durable, before.page_bytes)));
    }
    let page = checks.iter().all(|(_, check)| check.admits(None));
    let mut events: Vec<u64> =
        before.meta.iter().copied().chain(checks.iter().flat_map(|(seqs, _)| seqs.clone())).collect();
    events.retain(|&seq| seq >= before.floor);
    events.sort_unstable();
    events.dedup();
    let cuts = std::iter::once(before.floor).chain(events.iter().map(|&seq| seq + 1));
    let explains = |cut: u64| {
        let meta_fits = before.meta.iter().all(|seq| (*seq < cut) == kept_meta.contains(seq));
        meta_fits
            && checks.iter().all(|(seqs, check)| check.admits(Some(seqs.iter().take_while(|&&seq| seq < cut).count())))
    };
    let ext4 = cuts.into_iter().any(explains);
    // `ext4-ordered` is `page` plus ordering (ADR-0109), so what it admits `page` admits. The page model's own
    // crash cannot make one such image: a shrink and a growing `set_len` the journal committed read as a hole,
    // while `page` never writes back a page a shrink freed (ADR-0121).
    let mut models = vec![Persistence::Posix];
    models.extend((page || ext4).then_some(Persistence::Page));
    models.extend(ext4.then_some(Persistence::Ext4Ordered));
    models
}
