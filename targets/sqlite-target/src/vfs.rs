//! The `sqlite3_vfs` over `env::Env`: the one module of the workspace allowed `unsafe` code (ADR-0078).
//!
//! Every file SQLite opens (database, rollback journal, WAL, temporary files) is an `env::File`; `xDelete` with
//! its directory-sync flag is `remove_file` then `sync_dir`; a newly created journal or WAL syncs its directory
//! at its first `xSync`, as SQLite's own unix VFS does (`UNIXFILE_DIRSYNC`); `xRandomness`, `xCurrentTime`,
//! `xCurrentTimeInt64` and `xSleep` are the world's randomness and clock; the WAL index (`xShm*`) lives in
//! process memory beside the database handle and dies with it, as after a power cut. `xSectorSize` is the
//! simulated disk's sector; `xDeviceCharacteristics` claims `SQLITE_IOCAP_POWERSAFE_OVERWRITE` only while the
//! disk never garbles a torn sector.
//!
//! One connection per database: file locks and WAL-index locks are bookkeeping only, because no second
//! connection exists to conflict with (the target opens one).
//!
//! The safe logic is in [`crate::world`]; this module turns C pointers into Rust values and back. Nothing here
//! panics: a failure is an SQLite result code.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::ptr;
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::Duration;

use holdfast::env::{self, OpenOptions};
use rusqlite::ffi;

use crate::world::{self, SECTOR_SIZE_BYTES, VfsWorld};

/// The name the VFS registers under (and becomes SQLite's default VFS).
pub const VFS_NAME: &CStr = c"holdfast";
/// The longest path SQLite may hand the VFS.
pub const PATH_BYTES_MAX: c_int = 512;
/// The most WAL-index regions one database maps (32 KiB each: 64 MiB, far above any run's WAL).
pub const SHM_REGIONS_MAX: usize = 2048;

/// One open file as SQLite allocates it: `sqlite3_file` first (SQLite's "subclass" convention), then ours.
#[repr(C)]
struct HoldfastFile {
    base: ffi::sqlite3_file,
    state: *mut FileState,
}

/// What the VFS keeps per open file.
struct FileState {
    world: Rc<VfsWorld>,
    file: Box<dyn env::File>,
    path: PathBuf,
    delete_on_close: bool,
    /// Sync the parent directory at the next `xSync` (a journal or WAL just created: unix's `UNIXFILE_DIRSYNC`).
    dir_sync_pending: bool,
    lock_level: c_int,
    /// The WAL index, when this is a database in WAL mode: lost with the handle.
    shm: Vec<Box<[u8]>>,
}

static IO_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 2,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: None,
    xUnfetch: None,
};

/// Register the VFS once per process, as SQLite's default (so SQLite's PRNG seeds itself from `xRandomness`).
pub fn register() -> Result<(), c_int> {
    static REGISTERED: OnceLock<c_int> = OnceLock::new();
    let code = *REGISTERED.get_or_init(|| {
        let vfs = Box::new(ffi::sqlite3_vfs {
            iVersion: 2,
            szOsFile: c_int::try_from(size_of::<HoldfastFile>()).unwrap_or(c_int::MAX),
            mxPathname: PATH_BYTES_MAX,
            pNext: ptr::null_mut(),
            zName: VFS_NAME.as_ptr(),
            pAppData: ptr::null_mut(),
            xOpen: Some(x_open),
            xDelete: Some(x_delete),
            xAccess: Some(x_access),
            xFullPathname: Some(x_full_pathname),
            xDlOpen: None,
            xDlError: None,
            xDlSym: None,
            xDlClose: None,
            xRandomness: Some(x_randomness),
            xSleep: Some(x_sleep),
            xCurrentTime: Some(x_current_time),
            xGetLastError: Some(x_get_last_error),
            xCurrentTimeInt64: Some(x_current_time_int64),
            xSetSystemCall: None,
            xGetSystemCall: None,
            xNextSystemCall: None,
        });
        // SAFETY: sqlite3_initialize takes no arguments and may be called any number of times. The VFS object is
        // leaked: SQLite keeps the pointer for the life of the process, and it is never unregistered.
        unsafe {
            let code = ffi::sqlite3_initialize();
            if code != ffi::SQLITE_OK {
                return code;
            }
            ffi::sqlite3_vfs_register(Box::leak(vfs), 1)
        }
    });
    if code == ffi::SQLITE_OK { Ok(()) } else { Err(code) }
}

/// Reset SQLite's process-wide PRNG: its next use re-seeds from the default VFS's `xRandomness`, that is from
/// the world installed on this thread then. Called at the start of every run.
pub fn reset_prng() {
    // SAFETY: `sqlite3_randomness(0, NULL)` is the documented reset; it reads and writes nothing of ours.
    unsafe { ffi::sqlite3_randomness(0, ptr::null_mut()) }
}

/// The `FileState` of an open `sqlite3_file`.
///
/// # Safety
/// `file` must be a `HoldfastFile` that [`x_open`] opened successfully and [`x_close`] has not closed.
unsafe fn state<'a>(file: *mut ffi::sqlite3_file) -> Option<&'a mut FileState> {
    // SAFETY: per the contract, `file` points to a live HoldfastFile whose `state` is a leaked Box or null.
    unsafe { file.cast::<HoldfastFile>().as_mut().and_then(|file| file.state.as_mut()) }
}

/// A C path as a Rust path (`None` for NULL or non-UTF-8).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string that outlives the call.
unsafe fn path_of(name: *const c_char) -> Option<PathBuf> {
    if name.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated per the contract.
    let text = unsafe { CStr::from_ptr(name) }.to_str().ok()?;
    Some(if text.starts_with('/') { PathBuf::from(text) } else { Path::new("/").join(text) })
}

/// The SQLite result code of an `env` error in operation `io_code`.
fn code_of(error: &env::Error, io_code: c_int) -> c_int {
    match error {
        env::Error::NoSpace { .. } => ffi::SQLITE_FULL,
        _ => io_code,
    }
}

unsafe extern "C" fn x_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let out = file.cast::<HoldfastFile>();
    // SAFETY: SQLite hands us szOsFile bytes at `file`; we initialise both fields before anything reads them.
    unsafe {
        (*out).base.pMethods = ptr::null();
        (*out).state = ptr::null_mut();
    }
    let Some(world) = world::current() else { return ffi::SQLITE_CANTOPEN };
    if world.is_fenced() {
        return ffi::SQLITE_CANTOPEN;
    }
    // SAFETY: `name` is NULL or a NUL-terminated path SQLite keeps alive while the file is open.
    let named = unsafe { path_of(name) };
    let temporary = named.is_none();
    let path = named.unwrap_or_else(|| world.next_temp_path());
    let create = flags & ffi::SQLITE_OPEN_CREATE != 0 || temporary;
    let options = OpenOptions {
        create,
        create_new: flags & ffi::SQLITE_OPEN_EXCLUSIVE != 0,
        truncate: false,
        write: flags & ffi::SQLITE_OPEN_READONLY == 0,
    };
    let opened = match world.env().open(&path, options) {
        Ok(opened) => opened,
        Err(env::Error::NoSpace { .. }) => return ffi::SQLITE_FULL,
        Err(_) => return ffi::SQLITE_CANTOPEN,
    };
    let journal_like = ffi::SQLITE_OPEN_MAIN_JOURNAL | ffi::SQLITE_OPEN_SUPER_JOURNAL | ffi::SQLITE_OPEN_WAL;
    let delete_on_close = flags & ffi::SQLITE_OPEN_DELETEONCLOSE != 0 || temporary;
    if temporary {
        world.count("vfs.temp_files");
    }
    let state = Box::new(FileState {
        world,
        file: opened,
        path,
        delete_on_close,
        dir_sync_pending: create && !delete_on_close && flags & journal_like != 0,
        lock_level: ffi::SQLITE_LOCK_NONE,
        shm: Vec::new(),
    });
    // SAFETY: as above; `out_flags` is NULL or writable. The Box is reclaimed in x_close.
    unsafe {
        (*out).state = Box::into_raw(state);
        (*out).base.pMethods = &IO_METHODS;
        if let Some(out_flags) = out_flags.as_mut() {
            *out_flags = flags;
        }
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_delete(_vfs: *mut ffi::sqlite3_vfs, name: *const c_char, sync_dir: c_int) -> c_int {
    let Some(world) = world::current() else { return ffi::SQLITE_IOERR_DELETE };
    // SAFETY: SQLite passes a NUL-terminated path.
    let Some(path) = (unsafe { path_of(name) }) else { return ffi::SQLITE_IOERR_DELETE };
    if world.is_fenced() {
        return ffi::SQLITE_IOERR_DELETE;
    }
    match world.env().remove_file(&path) {
        Ok(()) => {}
        Err(env::Error::NotFound { .. }) => return ffi::SQLITE_IOERR_DELETE_NOENT,
        Err(error) => return code_of(&error, ffi::SQLITE_IOERR_DELETE),
    }
    if sync_dir & 1 != 0 {
        world.count("vfs.delete_dir_syncs");
        if let Err(error) = world.env().sync_dir(&world::parent(&path)) {
            return code_of(&error, ffi::SQLITE_IOERR_DIR_FSYNC);
        }
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_access(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    flags: c_int,
    result: *mut c_int,
) -> c_int {
    let Some(world) = world::current() else { return ffi::SQLITE_IOERR_ACCESS };
    // SAFETY: SQLite passes a NUL-terminated path.
    let Some(path) = (unsafe { path_of(name) }) else { return ffi::SQLITE_IOERR_ACCESS };
    if world.is_fenced() {
        return ffi::SQLITE_IOERR_ACCESS;
    }
    let found = match world.env().exists(&path) {
        Ok(found) => found,
        Err(error) => return code_of(&error, ffi::SQLITE_IOERR_ACCESS),
    };
    // As unix's xAccess: SQLITE_ACCESS_EXISTS is false for an empty file.
    let answer = if found && flags == ffi::SQLITE_ACCESS_EXISTS {
        match world.env().open(&path, OpenOptions::read()).and_then(|file| file.len()) {
            Ok(len_bytes) => len_bytes > 0,
            Err(env::Error::NotFound { .. }) => false,
            Err(error) => return code_of(&error, ffi::SQLITE_IOERR_ACCESS),
        }
    } else {
        found
    };
    // SAFETY: `result` is a valid out-pointer per the xAccess contract.
    unsafe { *result = c_int::from(answer) };
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_full_pathname(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    out_len: c_int,
    out: *mut c_char,
) -> c_int {
    // SAFETY: SQLite passes a NUL-terminated name.
    let Some(path) = (unsafe { path_of(name) }) else { return ffi::SQLITE_CANTOPEN };
    let Some(text) = path.to_str() else { return ffi::SQLITE_CANTOPEN };
    let bytes = text.as_bytes();
    let Ok(capacity) = usize::try_from(out_len) else { return ffi::SQLITE_CANTOPEN };
    if bytes.len() + 1 > capacity || bytes.contains(&0) {
        return ffi::SQLITE_CANTOPEN;
    }
    // SAFETY: `out` has `out_len` writable bytes; we write `bytes.len() + 1 <= out_len` of them.
    unsafe {
        ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), out, bytes.len());
        *out.add(bytes.len()) = 0;
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_randomness(_vfs: *mut ffi::sqlite3_vfs, len: c_int, out: *mut c_char) -> c_int {
    let Ok(len_bytes) = usize::try_from(len) else { return 0 };
    let world = world::current();
    let mut bytes = Vec::with_capacity(len_bytes + 8);
    while bytes.len() < len_bytes {
        // Without a world (never during a run), zeros: still no OS randomness.
        let word = world.as_ref().map_or(0, |world| world.env().random_u64());
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    if let Some(world) = &world {
        world.count("vfs.randomness_calls");
    }
    // SAFETY: `out` has `len` writable bytes per the xRandomness contract.
    unsafe { ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), out, len_bytes) };
    len
}

unsafe extern "C" fn x_sleep(_vfs: *mut ffi::sqlite3_vfs, micros: c_int) -> c_int {
    if let Some(world) = world::current() {
        world.count("vfs.sleeps");
        world.env().sleep(Duration::from_micros(u64::try_from(micros).unwrap_or(0)));
    }
    micros
}

unsafe extern "C" fn x_current_time(_vfs: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    let world = world::current();
    let julian_ms = world::julian_ms(world.as_deref());
    if let Some(world) = &world {
        world.count("vfs.clock_reads");
    }
    // SAFETY: `out` is a valid out-pointer per the xCurrentTime contract.
    unsafe { *out = julian_ms as f64 / 86_400_000.0 };
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_current_time_int64(_vfs: *mut ffi::sqlite3_vfs, out: *mut ffi::sqlite3_int64) -> c_int {
    let world = world::current();
    let julian_ms = world::julian_ms(world.as_deref());
    if let Some(world) = &world {
        world.count("vfs.clock_reads");
    }
    // SAFETY: `out` is a valid out-pointer per the xCurrentTimeInt64 contract.
    unsafe { *out = julian_ms };
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_get_last_error(_vfs: *mut ffi::sqlite3_vfs, _len: c_int, _out: *mut c_char) -> c_int {
    0
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    let holder = file.cast::<HoldfastFile>();
    // SAFETY: SQLite closes only files x_open opened (pMethods set); `state` is the Box leaked there, taken once.
    let state = unsafe {
        let raw = std::mem::replace(&mut (*holder).state, ptr::null_mut());
        (*holder).base.pMethods = ptr::null();
        if raw.is_null() {
            return ffi::SQLITE_OK;
        }
        Box::from_raw(raw)
    };
    let world = Rc::clone(&state.world);
    let (path, delete) = (state.path.clone(), state.delete_on_close);
    drop(state);
    if delete && !world.is_fenced() {
        // A temporary file: its name is dropped; a crash may bring it back, and nothing reads it again.
        match world.env().remove_file(&path) {
            Ok(()) | Err(env::Error::NotFound { .. }) => {}
            Err(error) => return code_of(&error, ffi::SQLITE_IOERR_CLOSE),
        }
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_read(file: *mut ffi::sqlite3_file, buf: *mut c_void, len: c_int, offset: i64) -> c_int {
    // SAFETY: an open HoldfastFile (SQLite calls io methods only between xOpen and xClose).
    let Some(state) = (unsafe { state(file) }) else { return ffi::SQLITE_IOERR_READ };
    let (Ok(len_bytes), Ok(offset)) = (usize::try_from(len), u64::try_from(offset)) else {
        return ffi::SQLITE_IOERR_READ;
    };
    // SAFETY: `buf` has `len` writable bytes per the xRead contract.
    let out = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len_bytes) };
    if state.world.is_fenced() {
        return ffi::SQLITE_IOERR_READ;
    }
    let mut done = 0usize;
    while done < len_bytes {
        match state.file.read_at(offset + done as u64, &mut out[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(error) => return code_of(&error, ffi::SQLITE_IOERR_READ),
        }
    }
    if done < len_bytes {
        out[done..].fill(0);
        return ffi::SQLITE_IOERR_SHORT_READ;
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_write(file: *mut ffi::sqlite3_file, buf: *const c_void, len: c_int, offset: i64) -> c_int {
    // SAFETY: an open HoldfastFile.
    let Some(state) = (unsafe { state(file) }) else { return ffi::SQLITE_IOERR_WRITE };
    let (Ok(len_bytes), Ok(offset)) = (usize::try_from(len), u64::try_from(offset)) else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    // SAFETY: `buf` has `len` readable bytes per the xWrite contract.
    let data = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len_bytes) };
    if state.world.is_fenced() {
        return ffi::SQLITE_IOERR_WRITE;
    }
    match state.file.write_all_at(offset, data) {
        Ok(()) => ffi::SQLITE_OK,
        Err(error) => code_of(&error, ffi::SQLITE_IOERR_WRITE),
    }
}

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    // SAFETY: an open HoldfastFile.
    let Some(state) = (unsafe { state(file) }) else { return ffi::SQLITE_IOERR_TRUNCATE };
    let Ok(len_bytes) = u64::try_from(size) else { return ffi::SQLITE_IOERR_TRUNCATE };
    if state.world.is_fenced() {
        return ffi::SQLITE_IOERR_TRUNCATE;
    }
    match state.file.set_len(len_bytes) {
        Ok(()) => ffi::SQLITE_OK,
        Err(error) => code_of(&error, ffi::SQLITE_IOERR_TRUNCATE),
    }
}

unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, _flags: c_int) -> c_int {
    // SAFETY: an open HoldfastFile.
    let Some(state) = (unsafe { state(file) }) else { return ffi::SQLITE_IOERR_FSYNC };
    if state.world.is_fenced() {
        return ffi::SQLITE_IOERR_FSYNC;
    }
    if let Err(error) = state.file.sync() {
        return code_of(&error, ffi::SQLITE_IOERR_FSYNC);
    }
    if state.dir_sync_pending {
        state.world.count("vfs.create_dir_syncs");
        if let Err(error) = state.world.env().sync_dir(&world::parent(&state.path)) {
            return code_of(&error, ffi::SQLITE_IOERR_DIR_FSYNC);
        }
        state.dir_sync_pending = false;
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    // SAFETY: an open HoldfastFile.
    let Some(state) = (unsafe { state(file) }) else { return ffi::SQLITE_IOERR_FSTAT };
    if state.world.is_fenced() {
        return ffi::SQLITE_IOERR_FSTAT;
    }
    match state.file.len() {
        // SAFETY: `size` is a valid out-pointer per the xFileSize contract.
        Ok(len_bytes) => unsafe {
            *size = i64::try_from(len_bytes).unwrap_or(i64::MAX);
            ffi::SQLITE_OK
        },
        Err(error) => code_of(&error, ffi::SQLITE_IOERR_FSTAT),
    }
}

unsafe extern "C" fn x_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    // SAFETY: an open HoldfastFile.
    let Some(state) = (unsafe { state(file) }) else { return ffi::SQLITE_IOERR_LOCK };
    state.lock_level = state.lock_level.max(level);
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    // SAFETY: an open HoldfastFile.
    let Some(state) = (unsafe { state(file) }) else { return ffi::SQLITE_IOERR_UNLOCK };
    state.lock_level = state.lock_level.min(level);
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_check_reserved_lock(_file: *mut ffi::sqlite3_file, result: *mut c_int) -> c_int {
    // No other connection exists to hold a RESERVED lock.
    // SAFETY: `result` is a valid out-pointer per the xCheckReservedLock contract.
    unsafe { *result = 0 };
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_file_control(_file: *mut ffi::sqlite3_file, _op: c_int, _arg: *mut c_void) -> c_int {
    ffi::SQLITE_NOTFOUND
}

unsafe extern "C" fn x_sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: an open HoldfastFile.
    let Some(state) = (unsafe { state(file) }) else { return SECTOR_SIZE_BYTES };
    state.world.sector_size_bytes()
}

unsafe extern "C" fn x_device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: an open HoldfastFile.
    let Some(state) = (unsafe { state(file) }) else { return 0 };
    if state.world.powersafe_overwrite { ffi::SQLITE_IOCAP_POWERSAFE_OVERWRITE } else { 0 }
}

unsafe extern "C" fn x_shm_map(
    file: *mut ffi::sqlite3_file,
    region: c_int,
    region_size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: an open HoldfastFile.
    let Some(state) = (unsafe { state(file) }) else { return ffi::SQLITE_IOERR_SHMMAP };
    let (Ok(index), Ok(size_bytes)) = (usize::try_from(region), usize::try_from(region_size)) else {
        return ffi::SQLITE_IOERR_SHMMAP;
    };
    if index >= SHM_REGIONS_MAX {
        return ffi::SQLITE_IOERR_SHMMAP;
    }
    if index >= state.shm.len() && extend != 0 {
        state.world.count("vfs.shm_regions");
        state.shm.resize_with(index + 1, || vec![0u8; size_bytes].into_boxed_slice());
    }
    let pointer = state.shm.get_mut(index).map_or(ptr::null_mut(), |region| region.as_mut_ptr().cast::<c_void>());
    // SAFETY: `out` is a valid out-pointer. The region is a boxed slice: it never moves while the handle lives,
    // and SQLite stops using it at xShmUnmap or xClose.
    unsafe { *out = pointer };
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_shm_lock(_file: *mut ffi::sqlite3_file, _offset: c_int, _n: c_int, _flags: c_int) -> c_int {
    // One connection per database: no other holder of a WAL-index lock can exist.
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_shm_barrier(_file: *mut ffi::sqlite3_file) {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

unsafe extern "C" fn x_shm_unmap(file: *mut ffi::sqlite3_file, _delete: c_int) -> c_int {
    // SAFETY: an open HoldfastFile.
    if let Some(state) = unsafe { state(file) } {
        // The index lives only in memory: unmapping the last (only) connection's view deletes it.
        state.shm.clear();
    }
    ffi::SQLITE_OK
}
