//! Interned paths and namespaces indexed by them (ADR-seeds-perf): the simulated disk names every file and
//! directory by a [`PathId`], found by hashing the path once per namespace call, so that no operation compares
//! `PathBuf`s or walks the whole namespace, however many files the run has created.
//!
//! **Invariant:** two paths get the same id exactly when they are equal as [`Path`]s (component-wise, as the
//! `BTreeMap<PathBuf, _>` this replaces compared them); an id is never reused. Output in path order is the order the
//! old maps iterated in: a directory keeps its entries by [`sibling_order`], which orders entries of one directory
//! as `Path` does, and whole-disk reports sort the interned paths.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

use crate::random::PathMap;

/// An interned path: its index in the [`PathTable`], and the index of its fault-keying state.
pub(crate) type PathId = usize;

/// A directory as the disk indexes it: `None` is the root (`""` or `"/"`, which are never interned).
pub(crate) type DirKey = Option<PathId>;

/// Is `path` the root directory?
pub(crate) fn is_root(path: &Path) -> bool {
    // Equal to `/` as a `Path` is one root component and nothing after it (`//`, `/.` too), read from the front:
    // two components parsed, where `path == Path::new("/")` walked a longer path's components from its end.
    let mut components = path.components();
    path.as_os_str().is_empty() || (components.next() == Some(Component::RootDir) && components.next().is_none())
}

/// The parent of `path` (empty for a path without one).
pub(crate) fn parent_of(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

#[derive(Clone, Debug)]
struct Interned {
    path: PathBuf,
    /// The last component when it is a name (`Path::file_name`), kept so listing a directory parses no path.
    name: Option<OsString>,
    parent: DirKey,
    order: Box<[u8]>,
}

/// A key whose byte order is `Path`'s order among the entries of one directory. Their parents are equal component
/// by component, so the last component decides: its kind in `Component`'s order, then its bytes. Only the root's
/// entries can differ in whether they are absolute, and `/x` sorts before `x` (a root component before a name).
pub(crate) fn sibling_order(path: &Path) -> Box<[u8]> {
    let mut key = vec![u8::from(!path.has_root())];
    match path.components().next_back() {
        Some(Component::Prefix(prefix)) => {
            key.push(0);
            key.extend_from_slice(prefix.as_os_str().as_encoded_bytes());
        }
        Some(Component::RootDir) => key.push(1),
        Some(Component::CurDir) => key.push(2),
        Some(Component::ParentDir) => key.push(3),
        Some(Component::Normal(name)) => {
            key.push(4);
            key.extend_from_slice(name.as_encoded_bytes());
        }
        None => {}
    }
    key.into_boxed_slice()
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
        let name = path.file_name().map(OsStr::to_os_string);
        self.entries.push(Interned { path: path.to_path_buf(), name, parent, order: sibling_order(path) });
        self.ids.insert(path.to_path_buf(), id);
        debug_assert_eq!(self.ids.len(), self.entries.len());
        id
    }

    /// The path of `id`.
    pub(crate) fn path(&self, id: PathId) -> &Path {
        &self.entries[id].path
    }

    /// The last component of `id`'s path when it is a name (as [`Path::file_name`] of [`Self::path`]).
    pub(crate) fn file_name(&self, id: PathId) -> Option<&OsStr> {
        self.entries[id].name.as_deref()
    }

    /// The directory `id` is in.
    pub(crate) fn parent(&self, id: PathId) -> DirKey {
        self.entries[id].parent
    }

    /// Where `id` sorts among the entries of its directory ([`sibling_order`]).
    pub(crate) fn order(&self, id: PathId) -> &[u8] {
        &self.entries[id].order
    }

    /// The key of directory `dir`: `Some(None)` for the root, `None` when `dir` was never named.
    pub(crate) fn dir_key(&self, dir: &Path) -> Option<DirKey> {
        if is_root(dir) { Some(None) } else { self.get(dir).map(Some) }
    }
}

/// A file's data or a directory, as a name refers to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Node {
    File(u64),
    Dir,
}

/// One namespace (current or durable): names to nodes, and each directory's entries in path order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Namespace {
    nodes: BTreeMap<PathId, Node>,
    children: BTreeMap<DirKey, BTreeMap<Box<[u8]>, PathId>>,
}

impl Namespace {
    /// The node `id` names.
    pub(crate) fn get(&self, id: PathId) -> Option<Node> {
        self.nodes.get(&id).copied()
    }

    /// Name `node` at `id` (in directory `parent`, where it sorts at `order`); returns the node the name referred
    /// to before.
    pub(crate) fn insert(&mut self, id: PathId, parent: DirKey, order: &[u8], node: Node) -> Option<Node> {
        let old = self.nodes.insert(id, node);
        if old.is_none() {
            let displaced = self.children.entry(parent).or_default().insert(order.into(), id);
            debug_assert!(displaced.is_none(), "two names sort as one");
        }
        old
    }

    /// Remove the name `id` (in directory `parent`, where it sorts at `order`); returns the node it referred to.
    pub(crate) fn remove(&mut self, id: PathId, parent: DirKey, order: &[u8]) -> Option<Node> {
        let old = self.nodes.remove(&id)?;
        let entries = self.children.get_mut(&parent).expect("a named entry is indexed in its directory");
        entries.remove(order);
        if entries.is_empty() {
            self.children.remove(&parent);
        }
        Some(old)
    }

    /// Every name and its node, by id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (PathId, Node)> + '_ {
        self.nodes.iter().map(|(&id, &node)| (id, node))
    }

    /// The entries of directory `dir`, in path order.
    pub(crate) fn entries(&self, dir: DirKey) -> impl Iterator<Item = PathId> + '_ {
        self.children.get(&dir).into_iter().flat_map(BTreeMap::values).copied()
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

    /// `is_root` is `path == "/"` as a `Path` (or empty), for roots written several ways and for paths that are not.
    #[test]
    fn is_root_agrees_with_path_equality() {
        let cases = ["", "/", "//", "/.", "/./", "///.", "/db", "/db/", "db", ".", "./", "/db/000012.sst", "/.."];
        for case in cases {
            let path = Path::new(case);
            assert_eq!(is_root(path), case.is_empty() || path == Path::new("/"), "{case:?}");
        }
        assert!(is_root(Path::new("//")) && !is_root(Path::new("/db")), "both answers occur");
    }

    #[test]
    fn paths_equal_as_paths_share_an_id_and_know_their_directory() {
        let mut table = PathTable::default();
        let a = table.intern(Path::new("/d/a-b"));
        assert_eq!(table.intern(Path::new("/d//a-b")), a, "component-wise equality, as PathBuf's");
        assert_eq!(table.path(a), Path::new("/d/a-b"), "the first spelling is kept");
        assert_eq!(table.parent(a), table.get(Path::new("/d")).map(Some).expect("the parent is interned"));
        assert_eq!(table.parent(table.get(Path::new("/d")).expect("interned")), None, "/d is in the root");
        assert_eq!(table.dir_key(Path::new("/")), Some(None));
        assert_eq!(table.dir_key(Path::new("")), Some(None));
        assert_eq!(table.dir_key(Path::new("/nowhere")), None);
    }

    #[test]
    fn sibling_order_is_path_order_within_a_directory() {
        let groups: [&[&str]; 3] = [
            &["/d/a-b", "/d/a", "/d/a.b", "/d/B", "/d/b", "/d/é", "/d/wal-000010.log", "/d/wal-00009.log", "/d/.."],
            &["x/z", "x/y-1", "x/y", "x/..", "x/~"],
            &["/db", "db", "/a", "b", "/zz", "a"],
        ];
        for group in groups {
            let mut by_path: Vec<&Path> = group.iter().map(Path::new).collect();
            by_path.sort();
            let mut by_key = by_path.clone();
            by_key.sort_by_key(|path| sibling_order(path));
            assert_eq!(by_key, by_path, "entries of one directory sort by key as by path");
        }
    }

    #[test]
    fn namespaces_index_directory_entries() {
        let mut table = PathTable::default();
        let dir = table.intern(Path::new("/d"));
        let file = table.intern(Path::new("/d/f"));
        let mut namespace = Namespace::default();
        assert_eq!(namespace.insert(file, Some(dir), table.order(file), Node::File(1)), None);
        assert_eq!(namespace.orphaned_dirs(), vec![dir]);
        namespace.insert(dir, None, table.order(dir), Node::Dir);
        assert!(namespace.orphaned_dirs().is_empty());
        assert_eq!(namespace.entries(Some(dir)).collect::<Vec<_>>(), vec![file]);
        assert_eq!(namespace.remove(file, Some(dir), table.order(file)), Some(Node::File(1)));
        assert_eq!(namespace.entries(Some(dir)).count(), 0);
        assert!(namespace.is_dir(None) && namespace.is_dir(Some(dir)) && !namespace.is_dir(Some(file)));
    }
}
