//! The operator: someone outside the system under test who moves or deletes its files while it is down (the
//! hostile-operator world step, ADR-0077). No fault fires, no IO is counted, and the change is durable at
//! once (as if the operator ran `sync`): it is not the system's IO, so the crash model does not apply to it.

use std::path::Path;

use super::SimEnv;
use super::disk::Node;

impl SimEnv {
    /// Remove `path` from the disk for good (both namespaces) and return its bytes, so a test can put them back
    /// with [`SimEnv::operator_restore`]. `None` (nothing changed) when `path` is not a file.
    pub fn operator_remove(&self, path: &Path) -> Option<Vec<u8>> {
        let mut world = self.lock_world();
        let Some(Node::File(id)) = world.disk.lookup(path) else { return None };
        let bytes = world.disk.inode(id).expect("a named inode exists").current.clone();
        let (path_id, key) = world.meta_key(path);
        world.disk.remove(path_id, key);
        let dir = world.disk.names.parent(path_id);
        world.disk.sync_dir(dir);
        Some(bytes)
    }

    /// Rename the file `from` to `to` in the same directory, durably. False (nothing changed) when `from` is not a
    /// file or `to` exists.
    pub fn operator_rename(&self, from: &Path, to: &Path) -> bool {
        let mut world = self.lock_world();
        let movable = matches!(world.disk.lookup(from), Some(Node::File(_))) && world.disk.lookup(to).is_none();
        if !movable || crate::parent_dir(from) != crate::parent_dir(to) {
            return false;
        }
        let (to_id, key) = world.meta_key(to);
        let from_id = world.disk.names.get(from).expect("a named file is interned");
        world.disk.rename(from_id, to_id, key);
        let dir = world.disk.names.parent(from_id);
        world.disk.sync_dir(dir);
        true
    }

    /// Put a file back: `path` (which must not exist; its directory must) holds `bytes`, durably.
    pub fn operator_restore(&self, path: &Path, bytes: Vec<u8>) {
        let mut world = self.lock_world();
        assert!(world.disk.lookup(path).is_none(), "operator_restore over an existing entry");
        let (path_id, key) = world.meta_key(path);
        let id = world.disk.create_file(path_id, key);
        {
            let mut inode = world.disk.inode_mut(id).expect("a new inode exists");
            inode.durable.clone_from(&bytes);
            inode.current = bytes;
        }
        let dir = world.disk.names.parent(path_id);
        world.disk.sync_dir(dir);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::{Env, File, OpenOptions, SimEnv};

    #[test]
    fn the_operator_removes_renames_and_restores_durably_without_io() {
        let env = SimEnv::new(1);
        env.create_dir_all(Path::new("/d")).unwrap();
        env.sync_dir(Path::new("/")).unwrap();
        let file = env.open(Path::new("/d/a-1"), OpenOptions::create_new()).unwrap();
        file.write_at(0, b"bytes").unwrap();
        file.sync().unwrap();
        env.sync_dir(Path::new("/d")).unwrap();
        drop(file);
        let io_before = env.io_count();
        assert!(env.operator_rename(Path::new("/d/a-1"), Path::new("/d/a-1.moved")));
        assert!(!env.operator_rename(Path::new("/d/a-1"), Path::new("/d/b")), "the source is gone");
        env.crash();
        assert_eq!(env.read_durable(Path::new("/d/a-1.moved")).as_deref(), Some(&b"bytes"[..]));
        let bytes = env.operator_remove(Path::new("/d/a-1.moved")).expect("a file");
        assert_eq!(env.operator_remove(Path::new("/d/a-1.moved")), None);
        env.crash();
        assert_eq!(env.read_current(Path::new("/d/a-1.moved")), None);
        env.operator_restore(Path::new("/d/a-1"), bytes);
        env.crash();
        assert_eq!(env.read_durable(Path::new("/d/a-1")).as_deref(), Some(&b"bytes"[..]));
        assert_eq!(env.io_count(), io_before, "the operator's changes are not the system's IO");
    }
}
