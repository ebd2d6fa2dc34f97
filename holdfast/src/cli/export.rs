//! `--export-image DIR` (ADR-0111): the disk as recovery saw it after the run's last crash, as ordinary files
//! under `DIR/disk/`, and `DIR/CRASH.txt` saying which seed, model and crash it is and what the crash did to each
//! pending operation. Any tool can open the files (SQLite's own `sqlite3` and `PRAGMA integrity_check`, say).

use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use env::{CrashImage, Env, File as _, RealEnv};

use super::write_file;
use crate::runner::Outcome;

/// The most entries per list `CRASH.txt` prints (the rest are counted).
pub const EXPORT_LIST_MAX: usize = 200;

/// Write `outcome`'s crash image under `dir`. Errors name the path; a run without a crash is an error too.
pub(super) fn export_image<C, O>(dir: &Path, outcome: &Outcome<C, O>) -> Result<String, String> {
    let image = outcome.crash_image.as_ref().ok_or_else(|| {
        format!("--export-image {}: the run had no crash, so there is no crash image to export", dir.display())
    })?;
    let env = RealEnv::new();
    let disk = dir.join("disk");
    let create =
        |path: &Path| env.create_dir_all(path).map_err(|error| format!("cannot create {}: {error}", path.display()));
    create(&disk)?;
    for simulated in &image.dirs {
        create(&host_path(&disk, simulated)?)?;
    }
    for (simulated, bytes) in &image.files {
        let path = host_path(&disk, simulated)?;
        if let Some(parent) = path.parent() {
            create(parent)?;
        }
        let file = env
            .open(&path, env::OpenOptions::create_truncate())
            .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
        file.write_all_at(0, bytes).map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    }
    let report = describe(outcome, image);
    write_file(&dir.join("CRASH.txt"), &report)?;
    Ok(format!("exported crash {} ({} files) to {}", image.crash, image.files.len(), disk.display()))
}

/// Where simulated absolute path `simulated` lands under `disk`: only normal components (no `..`).
fn host_path(disk: &Path, simulated: &Path) -> Result<PathBuf, String> {
    let mut path = disk.to_path_buf();
    for component in simulated.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(part) => path.push(part),
            _ => return Err(format!("simulated path {} cannot be exported", simulated.display())),
        }
    }
    Ok(path)
}

/// The text of `CRASH.txt`.
fn describe<C, O>(outcome: &Outcome<C, O>, image: &CrashImage) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "seed: {} (0x{:x})", outcome.seed, outcome.seed);
    let _ = writeln!(text, "target: {}", outcome.schedule.target);
    let _ = writeln!(text, "model: {}", image.model);
    let _ = writeln!(text, "crash: #{} (the run's last; recovery opened this image)", image.crash);
    match &outcome.failure {
        Some(failure) => {
            let _ = writeln!(
                text,
                "failure: {} ({}) at step {} phase {}",
                failure.invariant, failure.kind, failure.step, failure.phase
            );
        }
        None => {
            let _ = writeln!(text, "failure: none (the run passed)");
        }
    }
    if let Some((committed, pending)) = image.journal {
        let _ = writeln!(text, "journal: {committed} of {pending} pending events committed");
    }
    let writes: [(&str, &[(PathBuf, u64)]); 4] = [
        ("writes kept", &image.writes_kept),
        ("writes dropped", &image.writes_dropped),
        ("writes torn", &image.writes_torn),
        ("sectors garbled", &image.sectors_garbled),
    ];
    for (label, list) in writes {
        let _ = writeln!(text, "{label}: {}", list.len());
        for (path, offset) in list.iter().take(EXPORT_LIST_MAX) {
            let _ = writeln!(text, "  {} @ {offset}", path.display());
        }
        if list.len() > EXPORT_LIST_MAX {
            let _ = writeln!(text, "  ... {} more", list.len() - EXPORT_LIST_MAX);
        }
    }
    for (label, list) in
        [("directory operations kept", &image.meta_kept), ("directory operations dropped", &image.meta_dropped)]
    {
        let _ = writeln!(text, "{label}: {}", list.len());
        for path in list.iter().take(EXPORT_LIST_MAX) {
            let _ = writeln!(text, "  {}", path.display());
        }
    }
    let _ = writeln!(text, "files: {}", image.files.len());
    for (path, bytes) in &image.files {
        let _ = writeln!(text, "  {} ({} bytes)", path.display(), bytes.len());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulated_paths_stay_under_the_export_directory() {
        let disk = Path::new("/tmp/out/disk");
        assert_eq!(host_path(disk, Path::new("/db/main.db")), Ok(PathBuf::from("/tmp/out/disk/db/main.db")));
        assert!(host_path(disk, Path::new("/db/../../etc/passwd")).is_err());
    }
}
