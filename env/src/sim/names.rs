//! Interned paths and namespaces indexed by them (ADR-seeds-perf): the simulated disk names every file and
//! directory by a [`PathId`], found by hashing the path once per namespace call, so that no operation compares
//! `PathBuf`s or walks the whole namespace, however many files the run has created.
//!
//! **Invariant:** two paths get the same id exactly when they are equal as [`Path`]s (component-wise, as the
//! `BTreeMap<PathBuf, _>` this replaces compared them); an id is never reused. Output in path order (listings,
//! reports, the disk digest) sorts by the interned paths, so it is the order the old maps iterated in.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::random::PathMap;

/// An interned path: its index in the [`PathTable`], and the index of its fault-keying state.
pub(crate) type PathId = usize;

/// A directory as the disk indexes it: `None` is the root (`""` or `"/"`, which are never interned).
pub(crate) type DirKey = Option<PathId>;

/// Is `path` the root directory?
pub(crate) fn is_root(path: &Path) -> bool {
    path.as_os_str().is_empty() || path == Path::new("/")
}

/// The parent of `path` (empty for a path without one).
pub(crate) fn parent_of(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

#[derive(Clone, Debug)]
struct Interned {
    path: PathBuf,
    parent: DirKey,
}

/// Every path the disk has named, by id. Lookups hash the path; nothing here is iterated in hash order.
#[derive(Clone, Debug, Default)]
pub(crate) struct PathTable {
    ids: PathMap<PathId>,
    entries: Vec<Interned>,
}

impl PathTable {
    /// The id of `path`, if it was ever interned.
    pub(crate) fn get(&self, path: &Path) -> Option<PathId> {
        self.ids.get(path).copied()
    }

    /// The id of `path` (not the root), interning it and its ancestors on first sight. The stored spelling is the
    /// first one seen.
    pub(crate) fn intern(&mut self, path: &Path) -> PathId {
        assert!(!is_root(path), "the root directory is not interned");
        if let Some(id) = self.get(path) {
            return id;
        }
        let parent = match path.parent() {
            Some(parent) if !is_root(parent) => Some(self.intern(parent)),
            _ => None,
        };
        let id = self.entries.len();
        self.entries.push(Interned { path: path.to_path_buf(), parent });
        self.ids.insert(path.to_path_buf(), id);
        debug_assert_eq!(self.ids.len(), self.entries.len());
        id
    }

    /// The path of `id`.
    pub(crate) fn path(&self, id: PathId) -> &Path {
        &self.entries[id].path
    }

    /// The directory `id` is in.
    pub(crate) fn parent(&self, id: PathId) -> DirKey {
        self.entries[id].parent
    }

    /// The key of directory `dir`: `Some(None)` for the root, `None` when `dir` was never named.
    pub(crate) fn dir_key(&self, dir: &Path) -> Option<DirKey> {
        if is_root(dir) { Some(None) } else { self.get(dir).map(Some) }
    }

    /// `ids` sorted by path (the order of a `BTreeMap<PathBuf, _>`).
    pub(crate) fn sort_by_path(&self, ids: &mut [PathId]) {
        ids.sort_by(|a, b| self.path(*a).cmp(self.path(*b)));
    }
}

/// A file's data or a directory, as a name refers to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Node {
    File(u64),
    Dir,
}

/// One namespace (current or durable): names to nodes, and each directory's entries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Namespace {
    nodes: BTreeMap<PathId, Node>,
    children: BTreeMap<DirKey, BTreeSet<PathId>>,
}

impl Namespace {
    /// The node `id` names.
    pub(crate) fn get(&self, id: PathId) -> Option<Node> {
        self.nodes.get(&id).copied()
    }

    /// Name `node` at `id` (in directory `parent`); returns the node the name referred to before.
    pub(crate) fn insert(&mut self, id: PathId, parent: DirKey, node: Node) -> Option<Node> {
        let old = self.nodes.insert(id, node);
        if old.is_none() {
            self.children.entry(parent).or_default().insert(id);
        }
        old
    }

    /// Remove the name `id` (in directory `parent`); returns the node it referred to.
    pub(crate) fn remove(&mut self, id: PathId, parent: DirKey) -> Option<Node> {
        let old = self.nodes.remove(&id)?;
        let entries = self.children.get_mut(&parent).expect("a named entry is indexed in its directory");
        entries.remove(&id);
        if entries.is_empty() {
            self.children.remove(&parent);
        }
        Some(old)
    }

    /// Every name and its node, by id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (PathId, Node)> + '_ {
        self.nodes.iter().map(|(&id, &node)| (id, node))
    }

    /// The entries of directory `dir`, by id.
    pub(crate) fn entries(&self, dir: DirKey) -> impl Iterator<Item = PathId> + '_ {
        self.children.get(&dir).into_iter().flatten().copied()
    }

    /// Directories that have entries here but are not directories here themselves (their mkdir was dropped).
    pub(crate) fn orphaned_dirs(&self) -> Vec<PathId> {
        self.children.keys().filter_map(|dir| *dir).filter(|&dir| self.get(dir) != Some(Node::Dir)).collect()
    }

    /// Is `dir` a directory here?
    pub(crate) fn is_dir(&self, dir: DirKey) -> bool {
        dir.is_none_or(|id| self.get(id) == Some(Node::Dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_equal_as_paths_share_an_id_and_sort_as_paths() {
        let mut table = PathTable::default();
        let a = table.intern(Path::new("/d/a-b"));
        let b = table.intern(Path::new("/d/a/b"));
        assert_eq!(table.intern(Path::new("/d//a-b")), a, "component-wise equality, as PathBuf's");
        assert_eq!(table.parent(a), table.get(Path::new("/d")).map(Some).expect("the parent is interned"));
        assert_eq!(table.parent(table.get(Path::new("/d")).expect("interned")), None, "/d is in the root");
        let mut ids = vec![a, b];
        table.sort_by_path(&mut ids);
        // Path order compares components: "a" < "a-b", unlike the bytes "/d/a-b" < "/d/a/b".
        assert_eq!(ids, vec![b, a]);
        assert_eq!(table.dir_key(Path::new("/")), Some(None));
        assert_eq!(table.dir_key(Path::new("/nowhere")), None);
    }

    #[test]
    fn namespaces_index_directory_entries() {
        let mut table = PathTable::default();
        let dir = table.intern(Path::new("/d"));
        let file = table.intern(Path::new("/d/f"));
        let mut namespace = Namespace::default();
        assert_eq!(namespace.insert(file, Some(dir), Node::File(1)), None);
        assert_eq!(namespace.orphaned_dirs(), vec![dir]);
        namespace.insert(dir, None, Node::Dir);
        assert!(namespace.orphaned_dirs().is_empty());
        assert_eq!(namespace.entries(Some(dir)).collect::<Vec<_>>(), vec![file]);
        assert_eq!(namespace.remove(file, Some(dir)), Some(Node::File(1)));
        assert_eq!(namespace.entries(Some(dir)).count(), 0);
        assert!(namespace.is_dir(None) && namespace.is_dir(Some(dir)) && !namespace.is_dir(Some(file)));
    }
}
