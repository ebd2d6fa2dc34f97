//! Interned paths and namespaces indexed by them (ADR-seeds-perf): the simulated disk names every file and
//! directory by a [`PathId`], found by hashing the path's [`identity`] once per namespace call, so that no
//! operation compares `PathBuf`s or walks the whole namespace, however many files the run has created.
//!
//! **Invariant:** two paths get the same id exactly when they are equal as [`Path`]s (component-wise, as the
//! `BTreeMap<PathBuf, _>` this replaces compared them), because their [`identity`] bytes are equal exactly then
//! (ADR-0151); an id is never reused. Output in path order is the order the
//! old maps iterated in: a directory keeps its entries by [`sibling_order`], which orders entries of one directory
//! as `Path` does, and whole-disk reports sort the interned paths.

use std::borrow::Cow;
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

/// The bytes that say which path `path` is, as `Path`'s equality does (component by component, ADR-0151): its
/// components joined by `/` (a root component is the leading `/`). Borrowed when the path is already spelled that
/// way, as the engine spells every path (no empty component, no `.` after the first, no trailing `/`); built from
/// the components otherwise. Equal bytes, equal paths: the joined components parse back to the same components.
pub(crate) fn identity(path: &Path) -> Cow<'_, [u8]> {
    let bytes = path.as_os_str().as_encoded_bytes();
    if is_spelled_plainly(bytes) { Cow::Borrowed(bytes) } else { Cow::Owned(joined_components(path)) }
}

/// Is every separator of `bytes` followed by a component that parsing keeps whole: not empty (`//`, a trailing `/`
/// other than the root's) and not `.` (`/./`, a trailing `/.`)? Then the bytes are their components joined.
fn is_spelled_plainly(bytes: &[u8]) -> bool {
    bytes.iter().enumerate().filter(|&(_, &byte)| byte == b'/').all(|(at, _)| match &bytes[at + 1..] {
        [] => bytes.len() == 1,
        [b'/', ..] | [b'.'] | [b'.', b'/', ..] => false,
        _ => true,
    })
}

/// `path`'s components joined by `/`, a root component written as the leading `/`.
fn joined_components(path: &Path) -> Vec<u8> {
    let mut joined = Vec::with_capacity(path.as_os_str().len());
    for component in path.components() {
        if joined.last().is_some_and(|&last| last != b'/') {
            joined.push(b'/');
        }
        joined.extend_from_slice(component.as_os_str().as_encoded_bytes());
    }
    joined
}

/// The parent of `path` (empty for a path without one).
pub(crate) fn parent_of(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new(""))
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

/// Every path the disk has named, by id. Lookups hash the path's [`identity`]; nothing here is iterated in hash
/// order.
#[derive(Clone, Debug, Default)]
pub(crate) struct PathTable {
    ids: PathMap<PathId>,
    entries: Vec<Interned>,
}

impl PathTable {
    /// The id of `path`, if it was ever interned.
    pub(crate) fn get(&self, path: &Path) -> Option<PathId> {
        self.ids.get(&*identity(path)).copied()
    }

    /// The id of `path` (not the root), interning it and its ancestors on first sight. The stored spelling is the
    /// first one seen.
    pub(crate) fn intern(&mut self, path: &Path) -> PathId {
        let key = identity(path);
        if let Some(&id) = self.ids.get(&*key) {
            return id;
        }
        // Checked before a path is added (never added, the root is never found above).
        assert!(!is_root(path), "the root directory is not interned");
        let parent = match path.parent() {
            Some(parent) if !is_root(parent) => Some(self.intern(parent)),
            _ => None,
        };
        let id = self.entries.len();
        let name = path.file_name().map(OsStr::to_os_string);
        self.entries.push(Interned { path: path.to_path_buf(), name, parent, order: sibling_order(path) });
        self.ids.insert(key.into_owned().into_boxed_slice(), id);
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

    /// Every spelling of up to seven characters over `/`, `.`, `..`'s dot and a name letter: two spellings have
    /// equal identity bytes exactly when they are equal as `Path`s, and the borrowed fast path is the joined
    /// components whenever it is taken.
    #[test]
    fn identity_bytes_are_equal_exactly_when_paths_are() {
        let mut spellings = vec![String::new()];
        let mut frontier = vec![String::new()];
        for _ in 0..7 {
            frontier = frontier.iter().flat_map(|s| ["/", ".", "a"].map(|c| format!("{s}{c}"))).collect();
            spellings.extend(frontier.iter().cloned());
        }
        let mut by_identity: BTreeMap<Vec<u8>, &Path> = BTreeMap::new();
        let mut by_components: BTreeMap<Vec<Component<'_>>, Vec<u8>> = BTreeMap::new();
        let mut borrowed = 0;
        for spelling in &spellings {
            let path = Path::new(spelling);
            let key = identity(path);
            borrowed += usize::from(matches!(key, Cow::Borrowed(_)));
            assert_eq!(*key, joined_components(path)[..], "{spelling:?}");
            let first = *by_identity.entry(key.to_vec()).or_insert(path);
            assert_eq!(first, path, "equal identities, unequal paths: {spelling:?}");
            let known = by_components.entry(path.components().collect()).or_insert_with(|| key.to_vec());
            assert_eq!(*known, *key, "equal paths, unequal identities: {spelling:?}");
        }
        assert_eq!(spellings.len(), 3280);
        assert!(borrowed > 300 && borrowed < spellings.len() - 300, "both paths taken: {borrowed} borrowed");
        assert!(by_identity.len() < spellings.len() / 2, "many spellings share a path");
    }

    #[test]
    fn paths_equal_as_paths_share_an_id_and_know_their_directory() {
        let mut table = PathTable::default();
        let a = table.intern(Path::new("/d/a-b"));
        assert_eq!(table.intern(Path::new("/d//a-b")), a, "component-wise equality, as PathBuf's");
        assert_eq!(table.get(Path::new("/./d/a-b/")), Some(a), "spelled otherwise, found by its identity");
        assert_eq!(table.get(Path::new("d/a-b")), None, "a relative path is another path");
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
