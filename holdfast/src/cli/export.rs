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
    describe_units(&mut text, image);
    text
}

/// `CRASH.txt`'s unit section (ADR-0170): per file the crash could change, its pages (or sectors) kept, dropped
/// and torn, by offset, and its sizes before and after.
fn describe_units(text: &mut String, image: &CrashImage) {
    let unit = if image.model.persistence.is_paged() { "pages" } else { "sectors" };
    let _ = writeln!(text, "{unit} per file ({} files with unsynced data):", image.file_crashes.len());
    for file in &image.file_crashes {
        let after = file.len_after.map_or_else(|| "no file by this name".to_string(), |len| format!("{len} bytes"));
        let _ = writeln!(
            text,
            "  {}: {} bytes durable, {} written before the crash; after: {after}",
            file.path.display(),
            file.durable_len_before,
            file.written_len_before
        );
        for (fate, offsets) in [("kept", &file.kept), ("dropped", &file.dropped), ("torn", &file.torn)] {
            if offsets.is_empty() {
                continue;
            }
            let _ = write!(text, "    {fate} ({} of {} B):", offsets.len(), file.unit_bytes);
            for offset in offsets.iter().take(EXPORT_LIST_MAX) {
                let _ = write!(text, " @{offset}");
            }
            if offsets.len() > EXPORT_LIST_MAX {
                let _ = write!(text, " ... {} more", offsets.len() - EXPORT_LIST_MAX);
            }
            let _ = writeln!(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use env::{DiskModel, FaultConfig, Persistence, SimEnv};

    use super::*;
    use crate::config::{FaultMenu, FaultProfile, WorldConfig};
    use crate::schedule::Schedule;

    /// The first seed (below 1,000) whose crash leaves units of all three fates under `persistence`: a synced
    /// 8 KiB file, then two unsynced writes, 10 KiB from 5 KiB (across two page boundaries, past the end) and 1 KiB
    /// from 4.5 KiB over its start, then the crash.
    fn torn_write(persistence: Persistence) -> (u64, CrashImage) {
        for seed in 0..1000 {
            let env = SimEnv::with_model(seed, FaultConfig::default(), DiskModel::with_persistence(persistence));
            env.keep_crash_images(true);
            env.create_dir_all(Path::new("/db")).expect("mkdir");
            let file = env.open(Path::new("/db/data"), env::OpenOptions::create_truncate()).expect("open");
            file.write_all_at(0, &[0xaa; 8192]).expect("write");
            file.sync().expect("sync");
            env.sync_dir(Path::new("/")).expect("sync");
            env.sync_dir(Path::new("/db")).expect("sync");
            file.write_all_at(5120, &[0xbb; 10240]).expect("write");
            file.write_all_at(4608, &[0xcc; 1024]).expect("write");
            env.crash();
            let image = env.last_crash_image().expect("kept");
            let units = &image.file_crashes[0];
            if !image.writes_torn.is_empty() && ![&units.kept, &units.dropped, &units.torn].iter().any(|l| l.is_empty())
            {
                return (seed, image);
            }
        }
        panic!("no seed below 1,000 left kept, dropped and torn units under {persistence}");
    }

    /// `CRASH.txt` of a run whose last crash is `image`.
    fn crash_txt(seed: u64, image: CrashImage) -> String {
        let world = WorldConfig::from_seed(seed, FaultProfile::Assumed, &FaultMenu::crashes_only());
        let outcome = Outcome {
            seed,
            failure: None,
            digest: 0,
            coverage: crate::target::Coverage::default(),
            steps_run: 0,
            work_steps: 0,
            step_digests: Vec::new(),
            trace: Vec::new(),
            cpu_nanos: None,
            schedule: Schedule::<(), ()>::new("toy", seed, world, ()),
            crash_image: Some(image),
            crash_classes: Vec::new(),
            recorded_crash_shapes: Vec::new(),
            cost: None,
            cost_report: crate::cost::CostReport::default(),
        };
        describe(&outcome, outcome.crash_image.as_ref().expect("an image"))
    }

    /// ADR-0170: under `page`, the 4 KiB pages of a torn write kept, dropped and torn, with offsets and sizes.
    #[test]
    fn crash_txt_lists_the_pages_of_a_torn_write() {
        let (seed, image) = torn_write(Persistence::Page);
        insta::assert_snapshot!(crash_txt(seed, image));
    }

    /// ADR-0170: under `posix`, the 512-byte sectors of a torn write kept, dropped and torn.
    #[test]
    fn crash_txt_lists_the_sectors_of_a_torn_write() {
        let (seed, image) = torn_write(Persistence::Posix);
        insta::assert_snapshot!(crash_txt(seed, image));
    }

    #[test]
    fn simulated_paths_stay_under_the_export_directory() {
        let disk = Path::new("/tmp/out/disk");
        assert_eq!(host_path(disk, Path::new("/db/main.db")), Ok(PathBuf::from("/tmp/out/disk/db/main.db")));
        assert!(host_path(disk, Path::new("/db/../../etc/passwd")).is_err());
    }
}
