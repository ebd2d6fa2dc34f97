//! Where a path a bound thread names lies (ADR-0163): in its world (under [`crate::Entered::dir`]), among the
//! machine-shape files whose answer is fixed, or on the host (refused).

#![forbid(unsafe_code)]

use std::ffi::{CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::world::World;

/// Host files `std` and common crates read for the machine's shape: in a world each is absent (`ENOENT`), so
/// `available_parallelism` sees no cgroup quota and counts the world's CPUs (`crate::machine`).
pub const MACHINE_SHAPE_FILES: &[&str] = &["/proc/self/cgroup", "/proc/self/mountinfo", "/proc/cpuinfo", "/proc/stat"];
/// Host directories whose every file is machine shape, absent in a world.
pub const MACHINE_SHAPE_DIRS: &[&str] = &["/sys/fs/cgroup", "/sys/devices/system/cpu"];

/// Where a path lies for a bound thread.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// The world's own path (`/a/b`).
    World(PathBuf),
    /// A machine-shape file: absent in the world.
    Shape,
    /// The host (absolute, or relative to the process's working directory): refused.
    Host(PathBuf),
}

/// What a relative path is relative to.
#[derive(Debug)]
pub(crate) enum Base {
    /// The process's working directory (`AT_FDCWD`, or no directory descriptor): always the host's.
    Cwd,
    /// A simulated directory descriptor's world path.
    WorldDir(PathBuf),
    /// A real directory descriptor: the host.
    HostDir,
}

/// `raw` as a path (its bytes, as the kernel reads them).
pub(crate) fn path_of(raw: &CStr) -> &Path {
    Path::new(OsStr::from_bytes(raw.to_bytes()))
}

/// `path` with `.`, `..` and repeated separators resolved lexically (a world has no symbolic links).
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::RootDir => out.push("/"),
            Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                if out.parent().is_some() {
                    out.pop();
                }
            }
            Component::Normal(name) => out.push(name),
        }
    }
    out
}

/// Where `path`, named relative to `base`, lies for a thread bound to `world`.
pub(crate) fn place(world: &World, base: &Base, path: &Path) -> Place {
    let absolute = match (path.is_absolute(), base) {
        (true, _) => normalize(path),
        (false, Base::WorldDir(dir)) => return Place::World(normalize(&dir.join(path))),
        (false, Base::Cwd | Base::HostDir) => return Place::Host(path.to_path_buf()),
    };
    if let Some(inside) = world.world_path(&absolute) {
        return Place::World(inside);
    }
    // `/holdfast-world`, the world directory's parent, is the world's root seen from above: a directory (SQLite's
    // unix VFS `lstat`s each element of a database's path), never the host's (ADR-0164 keeps it off the host).
    if absolute != Path::new("/") && world.dir.starts_with(&absolute) {
        return Place::World(PathBuf::from("/"));
    }
    let shape = MACHINE_SHAPE_FILES.iter().any(|file| absolute == Path::new(file))
        || MACHINE_SHAPE_DIRS.iter().any(|dir| absolute.starts_with(dir));
    if shape { Place::Shape } else { Place::Host(absolute) }
}

/// The errno for an `env` error from the world.
pub(crate) fn errno_of(error: &env::Error) -> libc::c_int {
    match error {
        env::Error::NotFound { .. } => libc::ENOENT,
        env::Error::AlreadyExists { .. } => libc::EEXIST,
        env::Error::NoSpace { .. } => libc::ENOSPC,
        env::Error::Locked { .. } => libc::EWOULDBLOCK,
        env::Error::InvalidInput { .. } => libc::EINVAL,
        // I/O errors, injected or after a crash (the power is off until the world restarts), stale handles from
        // before a crash, cancelled tasks.
        _ => libc::EIO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_resolves_dots_and_separators_lexically() {
        let cases = [
            ("/holdfast-world/1/a/./b", "/holdfast-world/1/a/b"),
            ("/holdfast-world/1/a/../b", "/holdfast-world/1/b"),
            ("//holdfast-world//1/", "/holdfast-world/1"),
            ("/..", "/"),
            ("/holdfast-world/1/../2/x", "/holdfast-world/2/x"),
        ];
        for (input, expected) in cases {
            assert_eq!(normalize(Path::new(input)), Path::new(expected), "{input}");
        }
    }
}
