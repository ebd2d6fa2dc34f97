//! `Env for SimEnv`: the clock, randomness, namespace operations, locks, task spawning and BUGGIFY of a simulated
//! world.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::SimEnv;
use super::cost::IoKind;
use super::disk::{Node, PendingData};
use super::faults::{FaultKind, tag};
use super::file::SimFile;
use super::names::{is_root, parent_of};
use super::world::World;
use crate::random::{chance_ppm, hash_bytes, keyed};
use crate::{Env, Error, Op, OpenOptions, Result, Task, TaskHandle};

/// A lock held in the simulated world; released on drop or by a crash.
pub struct SimLock {
    world: Arc<Mutex<World>>,
    path: PathBuf,
    epoch: u64,
}

impl fmt::Debug for SimLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimLock").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Drop for SimLock {
    fn drop(&mut self) {
        let mut world =
            super::threads::internal(|| self.world.lock()).unwrap_or_else(std::sync::PoisonError::into_inner);
        if world.epoch == self.epoch {
            world.locks.remove(&self.path);
        }
    }
}

impl Env for SimEnv {
    type File = SimFile;
    type Lock = SimLock;

    fn now(&self) -> Duration {
        let mut world = self.lock_call("now");
        let read = world.clock_reads;
        world.clock_reads += 1;
        let value = keyed(&[world.seed, tag::CLOCK, read]);
        if chance_ppm(world.config.clock_jump_ppm, value) {
            let jump = 1 + (value >> 20) % world.config.clock_jump_nanos_max.max(1);
            world.advance_clock_nanos(jump);
            world.log_fault(FaultKind::ClockJump, Path::new("<clock>"), 0);
        }
        Duration::from_nanos(world.clock_nanos())
    }

    fn sleep(&self, duration: Duration) {
        let world = self.lock_call("sleep");
        world.advance_clock_nanos(super::duration_nanos(duration));
    }

    fn random_u64(&self) -> u64 {
        self.lock_call("random_u64").engine_rng.next_u64()
    }

    fn open(&self, path: &Path, options: OpenOptions) -> Result<SimFile> {
        let mut world = self.lock_call("open");
        world.begin_io(Op::Open, path, None)?;
        if (options.create || options.truncate) && !options.write {
            // As std (and so RealEnv) does: creating or truncating needs write access.
            let message = "create or truncate without write access".to_string();
            return Err(Error::InvalidInput { op: Op::Open, path: path.into(), message });
        }
        let (found, node) = world.disk.find(path);
        let (inode, path_id) = match node {
            Some(Node::Dir) => {
                return Err(Error::InvalidInput { op: Op::Open, path: path.into(), message: "is a directory".into() });
            }
            Some(Node::File(_)) if options.create_new => {
                return Err(Error::AlreadyExists { op: Op::Open, path: path.into() });
            }
            Some(Node::File(inode)) => (inode, world.key_path(found.expect("a named file is interned"), path)),
            None if !options.create => return Err(Error::NotFound { op: Op::Open, path: path.into() }),
            None if !world.current_dir_exists(parent_of(path)) => {
                return Err(Error::NotFound { op: Op::Open, path: parent_of(path).into() });
            }
            None => {
                let (path_id, key) = world.meta_key(path);
                world.metadata_fault(Op::Open, path, key)?;
                (world.disk.create_file(path_id, key), path_id)
            }
        };
        let epoch = world.epoch;
        let empty = world.disk.inode(inode).expect("inode exists").current.is_empty();
        if options.truncate && options.write && !empty {
            let (path_hash, op_index) = world.next_operation(path_id);
            let seq = world.disk.next_seq();
            let mut inode_state = world.disk.inode_mut(inode).expect("inode exists");
            inode_state.current.clear();
            inode_state.pending.push(PendingData::SetLen { len: 0, key: keyed(&[path_hash, op_index]), seq });
        }
        world.disk.inode_mut(inode).expect("inode exists").open_handles += 1;
        world.cost.charge(IoKind::Open, Some(path_id), 0, 0);
        Ok(SimFile {
            world: Arc::clone(&self.world),
            inode,
            path: path.to_path_buf(),
            path_id,
            epoch,
            writable: options.write,
        })
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        let mut world = self.lock_call("create_dir_all");
        world.begin_io(Op::CreateDir, path, None)?;
        let mut missing = Vec::new();
        let mut cursor = Some(path);
        while let Some(dir) = cursor {
            if is_root(dir) {
                break;
            }
            match world.disk.lookup(dir) {
                Some(Node::Dir) => break,
                Some(Node::File(_)) => {
                    return Err(Error::InvalidInput {
                        op: Op::CreateDir,
                        path: dir.into(),
                        message: "a file is in the way".into(),
                    });
                }
                None => missing.push(dir.to_path_buf()),
            }
            cursor = dir.parent();
        }
        for dir in missing.iter().rev() {
            let (path_id, key) = world.meta_key(dir);
            world.disk.mkdir(path_id, key);
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<PathBuf>> {
        let mut world = self.lock_call("list_dir");
        world.begin_io(Op::ListDir, path, None)?;
        let Some(dir) = world.disk.current_dir(path) else {
            return Err(Error::NotFound { op: Op::ListDir, path: path.into() });
        };
        Ok(world.disk.list(dir))
    }

    /// As `list_dir` (the same lock, I/O accounting and errors), names only. `visit` runs under the world's lock.
    fn visit_dir_names(&self, path: &Path, visit: &mut dyn FnMut(&OsStr)) -> Result<()> {
        let mut world = self.lock_call("list_dir");
        world.begin_io(Op::ListDir, path, None)?;
        let Some(dir) = world.disk.current_dir(path) else {
            return Err(Error::NotFound { op: Op::ListDir, path: path.into() });
        };
        world.disk.visit_names(dir, visit);
        Ok(())
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        let world = self.lock_call("exists");
        if world.halted || world.caller_outlived() {
            return Err(Error::Crashed { op: Op::Exists, path: path.into() });
        }
        Ok(world.disk.lookup(path).is_some())
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let mut world = self.lock_call("remove_file");
        world.begin_io(Op::Remove, path, None)?;
        match world.disk.lookup(path) {
            Some(Node::File(_)) => {
                let (path_id, key) = world.meta_key(path);
                world.metadata_fault(Op::Remove, path, key)?;
                world.disk.remove(path_id, key);
                world.cost.charge(IoKind::Delete, Some(path_id), 0, 0);
                Ok(())
            }
            Some(Node::Dir) => {
                Err(Error::InvalidInput { op: Op::Remove, path: path.into(), message: "is a directory".into() })
            }
            None => Err(Error::NotFound { op: Op::Remove, path: path.into() }),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut world = self.lock_call("rename");
        world.begin_io(Op::Rename, from, None)?;
        if parent_of(from) != parent_of(to) {
            return Err(Error::InvalidInput {
                op: Op::Rename,
                path: from.into(),
                message: format!("rename across directories to {} is not supported", to.display()),
            });
        }
        let (from_id, from_node) = world.disk.find(from);
        match (from_node, world.disk.lookup(to)) {
            (Some(Node::File(_)), None | Some(Node::File(_))) => {
                let (to_id, key) = world.meta_key(to);
                world.metadata_fault(Op::Rename, from, key)?;
                let from_id = from_id.expect("a named file is interned");
                world.disk.rename(from_id, to_id, key);
                world.cost.charge(IoKind::Rename, Some(from_id), 0, 0);
                Ok(())
            }
            (None, _) => Err(Error::NotFound { op: Op::Rename, path: from.into() }),
            _ => Err(Error::InvalidInput { op: Op::Rename, path: from.into(), message: "directory involved".into() }),
        }
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        let mut world = self.lock_call("sync_dir");
        world.begin_io(Op::SyncDir, path, None)?;
        let Some(dir) = world.disk.current_dir(path) else {
            return Err(Error::NotFound { op: Op::SyncDir, path: path.into() });
        };
        // Keyed by the directory's operation index, counted only while the fault is on (and never for the root,
        // which has no key), so worlds without it keep every other decision.
        if world.config.dir_sync_error_ppm > 0 && !is_root(path) && world.dir_sync_fires(path) {
            // The pending namespace operations stay pending: a crash may still drop them.
            world.log_fault(FaultKind::DirSyncError, path, 0);
            return Err(Error::Io {
                op: Op::SyncDir,
                path: path.into(),
                message: "injected directory sync error".into(),
            });
        }
        world.disk.sync_dir(dir);
        let dir_id = world.disk.find(path).0;
        world.cost.charge(IoKind::DirSync, dir_id, 0, 0);
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<SimLock> {
        let mut world = self.lock_call("lock");
        world.begin_io(Op::Lock, path, None)?;
        if world.locks.contains(path) {
            return Err(Error::Locked { op: Op::Lock, path: path.into() });
        }
        match world.disk.lookup(path) {
            Some(Node::File(_)) => {}
            Some(Node::Dir) => {
                return Err(Error::InvalidInput { op: Op::Lock, path: path.into(), message: "is a directory".into() });
            }
            None if world.current_dir_exists(parent_of(path)) => {
                let (path_id, key) = world.meta_key(path);
                world.disk.create_file(path_id, key);
            }
            None => return Err(Error::NotFound { op: Op::Lock, path: parent_of(path).into() }),
        }
        world.locks.insert(path.to_path_buf());
        Ok(SimLock { world: Arc::clone(&self.world), path: path.to_path_buf(), epoch: world.epoch })
    }

    fn spawn(&self, name: &str, task: Task) -> TaskHandle {
        self.spawn_task(name, task)
    }

    fn wait(&self, handle: &TaskHandle) -> Result<()> {
        self.wait_task(handle)
    }

    fn is_finished(&self, handle: &TaskHandle) -> bool {
        self.task_finished(handle)
    }

    fn spawn_thread(&self, name: &str, body: Box<dyn FnOnce() + Send + 'static>) -> crate::thread::RawThread {
        self.spawn_sim_thread(name, body)
    }

    fn buggify(&self, site: &'static str) -> bool {
        let mut world = self.lock_call("buggify");
        if !world.buggify_enabled || world.config.buggify_site_ppm == 0 {
            return false;
        }
        let site_hash = hash_bytes(site.as_bytes());
        if !chance_ppm(world.config.buggify_site_ppm, keyed(&[world.seed, tag::BUGGIFY_SITE, site_hash])) {
            return false;
        }
        let reached = world.buggify_reached.entry(site).or_insert(0);
        let index = *reached;
        *reached += 1;
        let fire = chance_ppm(world.config.buggify_fire_ppm, keyed(&[world.seed, tag::BUGGIFY_FIRE, site_hash, index]));
        if fire {
            *world.buggify_fired.entry(site).or_insert(0) += 1;
        }
        fire
    }

    /// Count a hit of probe `name` in this world. No randomness is drawn and no state a run can observe
    /// changes: a probe never alters a run, its digest or its disk.
    fn probe(&self, name: &'static str) {
        let mut world = self.lock_world();
        let hits = world.probe_hits.entry(name).or_insert(0);
        *hits = hits.saturating_add(1);
    }

    /// Add `count` to the world's work counter `name` ([`SimEnv::cost`]). Like a probe: no yield point, no work
    /// charged, nothing a run can observe changes (ADR-0180).
    fn count_work(&self, name: &'static str, count: u64) {
        self.lock_world().cost.count_work(name, count);
    }

    fn is_simulated(&self) -> bool {
        true
    }

    fn sector_size_bytes(&self) -> u64 {
        self.lock_world().disk.model.sector_bytes
    }
}
