//! Index and counting tests of the simulated disk ([`super`]).

use super::*;

/// Keeps the metadata operations whose keys are listed and every write whole.
struct Keep(Vec<u64>);

impl CrashDecisions for Keep {
    fn keep_meta(&mut self, key: u64, _seq: u64) -> bool {
        self.0.contains(&key)
    }
    fn write_fate(&mut self, _key: u64, _seq: u64, _offset: u64, _len: u64) -> WriteFate {
        WriteFate::Kept
    }
    fn keep_sector(&mut self, _key: u64, _seq: u64, _sector: u64) -> bool {
        true
    }
    fn keep_set_len(&mut self, _key: u64, _seq: u64) -> bool {
        true
    }
    fn garble_sector(&mut self, _key: u64, _sector: u64) -> Option<u64> {
        None
    }
    fn page_prefix(&mut self, _key: u64, _page: u64, _min: u64, seqs: &[u64]) -> u64 {
        seqs.len() as u64
    }
    fn size_prefix(&mut self, _key: u64, seqs: &[u64]) -> u64 {
        seqs.len() as u64
    }
    fn journal_prefix(&mut self, events: &[u64]) -> u64 {
        events.len() as u64
    }
}

fn synced_file(disk: &mut Disk, path: PathId, key: u64, bytes: &[u8]) -> InodeId {
    let inode = disk.create_file(path, key);
    let mut state = disk.inode_mut(inode).expect("created");
    state.current = bytes.to_vec();
    state.durable = bytes.to_vec();
    inode
}

#[test]
fn a_removed_file_whose_create_a_crash_keeps_comes_back_with_its_durable_bytes() {
    let mut disk = Disk::default();
    let (dir, other) = (disk.names.intern(Path::new("/d")), disk.names.intern(Path::new("/e")));
    disk.mkdir(dir, 1);
    disk.mkdir(other, 2);
    disk.sync_dir(None);
    let file = disk.names.intern(Path::new("/d/f"));
    synced_file(&mut disk, file, 3, b"data");
    disk.remove(file, 4);
    assert_eq!(disk.used_bytes(), 4, "still counted: a crash may keep the create");
    disk.sync_dir(Some(other));
    assert_eq!(disk.used_bytes(), 4, "a pending create keeps its inode through another directory's sync");
    disk.crash(&mut Keep(vec![3]));
    assert_eq!(disk.list(Some(dir)), vec![PathBuf::from("/d/f")]);
    let Some(Node::File(inode)) = disk.lookup(Path::new("/d/f")) else { panic!("the create was kept") };
    assert_eq!(disk.inode(inode).expect("not collected").durable, b"data");
}

#[test]
fn syncing_a_directory_collects_what_it_unnamed_and_keeps_counts_in_step() {
    let mut disk = Disk::default();
    let dir = disk.names.intern(Path::new("/d"));
    disk.mkdir(dir, 1);
    disk.sync_dir(None);
    let (a, b) = (disk.names.intern(Path::new("/d/a")), disk.names.intern(Path::new("/d/b")));
    synced_file(&mut disk, a, 2, b"aaaa");
    let old_b = synced_file(&mut disk, b, 3, b"bb");
    disk.sync_dir(Some(dir));
    disk.rename(a, b, 4);
    assert_eq!(disk.used_bytes(), 6, "the replaced file is still durably named");
    disk.sync_dir(Some(dir));
    assert!(disk.inode(old_b).is_none(), "collected once no name refers to it");
    assert_eq!(disk.used_bytes(), 4);
    assert_eq!(disk.list(Some(dir)), vec![PathBuf::from("/d/b")]);
    assert!(!disk.has_pending_meta());
    disk.crash(&mut Keep(Vec::new()));
    assert_eq!((disk.used_bytes(), disk.list(None).len()), (4, 1), "a crash recounts the same");
}
