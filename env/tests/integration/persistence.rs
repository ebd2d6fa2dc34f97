//! The persistence models (ADR-0109) against what each grants: random write / set_len / sync / rename / crash
//! sequences, and after the crash every image checked against the property each model promises. `posix` is
//! shown to break them (the models really differ).

use std::path::{Path, PathBuf};

use env::{DiskModel, Env, FaultConfig, File, OpenOptions, Persistence, SimEnv};
use proptest::prelude::*;

const PAGE: u64 = 4096;
const FILES: usize = 3;
const DIR: &str = "/d";

#[derive(Clone, Debug)]
enum Action {
    Write { file: usize, offset: u64, len: u64, byte: u8 },
    SetLen { file: usize, len: u64 },
    Sync { file: usize },
}

fn action() -> impl Strategy<Value = Action> {
    let file = 0..FILES;
    prop_oneof![
        6 => (file.clone(), 0u64..3 * PAGE, 1u64..PAGE + 600, any::<u8>())
            .prop_map(|(file, offset, len, byte)| Action::Write { file, offset, len, byte }),
        2 => (file.clone(), 0u64..3 * PAGE).prop_map(|(file, len)| Action::SetLen { file, len }),
        1 => file.prop_map(|file| Action::Sync { file }),
    ]
}

fn path(file: usize) -> PathBuf {
    Path::new(DIR).join(format!("f{file}"))
}

fn world(seed: u64, persistence: Persistence) -> SimEnv {
    SimEnv::with_model(seed, FaultConfig::default(), DiskModel::with_persistence(persistence))
}

/// Durable files with `durable` bytes each, in a durable directory; open handles to them.
fn durable_files(env: &SimEnv, durable: &[u8]) -> Vec<env::sim::SimFile> {
    env.create_dir_all(Path::new(DIR)).unwrap();
    env.sync_dir(Path::new("/")).unwrap();
    let files: Vec<env::sim::SimFile> = (0..FILES)
        .map(|file| {
            let handle = env.open(&path(file), OpenOptions::create_truncate()).unwrap();
            handle.write_all_at(0, durable).unwrap();
            handle.sync().unwrap();
            handle
        })
        .collect();
    env.sync_dir(Path::new(DIR)).unwrap();
    files
}

/// Run `actions`, returning each file's snapshots since its last sync (what reads saw after each operation).
fn run(env: &SimEnv, files: &[env::sim::SimFile], actions: &[Action]) -> Vec<Vec<Vec<u8>>> {
    let mut snapshots: Vec<Vec<Vec<u8>>> =
        (0..FILES).map(|file| vec![env.read_current(&path(file)).unwrap()]).collect();
    for action in actions {
        let file = match *action {
            Action::Write { file, offset, len, byte } => {
                files[file].write_all_at(offset, &vec![byte; usize::try_from(len).unwrap()]).unwrap();
                file
            }
            Action::SetLen { file, len } => {
                files[file].set_len(len).unwrap();
                file
            }
            Action::Sync { file } => {
                files[file].sync().unwrap();
                snapshots[file].clear();
                file
            }
        };
        snapshots[file].push(env.read_current(&path(file)).unwrap());
    }
    snapshots
}

/// Bytes `range` of `snapshot`, reading zeros past its end.
fn slice(snapshot: &[u8], start: usize, end: usize) -> Vec<u8> {
    (start..end).map(|index| snapshot.get(index).copied().unwrap_or(0)).collect()
}

/// The snapshot indexes whose page `page` (cut at `len`) equals the image's.
fn page_matches(image: &[u8], snapshots: &[Vec<u8>], page: usize) -> Vec<usize> {
    let start = page * PAGE as usize;
    let end = ((page + 1) * PAGE as usize).min(image.len());
    (0..snapshots.len()).filter(|&k| slice(&snapshots[k], start, end) == image[start..end]).collect()
}

/// Why `image` is not a page-cache image of `snapshots` (None: it is one). With `ordered`, also ext4's rule: some
/// size snapshot `j` whose newly exposed pages all hold at least snapshot `j`.
fn page_violation(image: &[u8], snapshots: &[Vec<u8>], ordered: bool) -> Option<String> {
    let sizes: Vec<usize> = snapshots.iter().map(Vec::len).collect();
    let pages = image.len().div_ceil(PAGE as usize);
    let matches: Vec<Vec<usize>> = (0..pages).map(|page| page_matches(image, snapshots, page)).collect();
    if let Some(page) = matches.iter().position(Vec::is_empty) {
        return Some(format!("page {page} is no snapshot's"));
    }
    let fits = |j: usize| {
        let low = sizes[..=j].iter().copied().min().unwrap();
        let exposed = (low / PAGE as usize)..sizes[j].div_ceil(PAGE as usize);
        !ordered || sizes[j] <= low || exposed.clone().all(|page| matches[page].iter().any(|&k| k >= j))
    };
    match (0..sizes.len()).find(|&j| sizes[j] == image.len() && fits(j)) {
        Some(_) => None,
        None => Some(format!("size {} with sizes {sizes:?} (ordered {ordered})", image.len())),
    }
}

fn crash_and_check(seed: u64, persistence: Persistence, actions: &[Action]) -> Vec<String> {
    let env = world(seed, persistence);
    let files = durable_files(&env, &[7u8; 5000]);
    let snapshots = run(&env, &files, actions);
    drop(files);
    env.crash();
    (0..FILES)
        .filter_map(|file| {
            let image = env.read_current(&path(file)).expect("a durable name survives");
            let ordered = persistence == Persistence::Ext4Ordered;
            page_violation(&image, &snapshots[file], ordered).map(|why| format!("f{file}: {why}"))
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// `page` and `ext4-ordered` never produce a page that is no snapshot of it, nor a size no prefix had, nor
    /// (ext4-ordered) a size exposing pages older than it.
    #[test]
    fn page_models_only_produce_page_cache_images(
        seed in any::<u64>(),
        actions in proptest::collection::vec(action(), 1..24),
    ) {
        for persistence in [Persistence::Page, Persistence::Ext4Ordered] {
            let violations = crash_and_check(seed, persistence, &actions);
            prop_assert!(violations.is_empty(), "{persistence}: {violations:?}");
        }
    }

    /// `ext4-ordered`: creates and renames in one directory, no directory sync: the names after the crash are
    /// those after some prefix of the operations (the journal commits in order).
    #[test]
    fn ext4_ordered_keeps_a_prefix_of_metadata_operations(
        seed in any::<u64>(),
        renames in proptest::collection::vec((0usize..4, 0usize..4), 0..6),
    ) {
        let (states, after) = metadata_run(seed, Persistence::Ext4Ordered, &renames);
        prop_assert!(states.contains(&after), "{after:?} is no prefix state of {states:?}");
    }
}

/// Creates `n0..n3` then renames, none synced; returns the namespace after each prefix and after the crash.
fn metadata_run(seed: u64, persistence: Persistence, renames: &[(usize, usize)]) -> (Vec<Vec<PathBuf>>, Vec<PathBuf>) {
    let env = world(seed, persistence);
    env.create_dir_all(Path::new(DIR)).unwrap();
    env.sync_dir(Path::new("/")).unwrap();
    let name = |index: usize| Path::new(DIR).join(format!("n{index}"));
    let mut states = vec![env.list_dir(Path::new(DIR)).unwrap()];
    for index in 0..4 {
        drop(env.open(&name(index), OpenOptions::create_truncate()).unwrap());
        states.push(env.list_dir(Path::new(DIR)).unwrap());
    }
    for &(from, to) in renames {
        if from != to && env.exists(&name(from)).unwrap() {
            env.rename(&name(from), &name(to)).unwrap();
            states.push(env.list_dir(Path::new(DIR)).unwrap());
        }
    }
    env.crash();
    (states, env.list_dir(Path::new(DIR)).unwrap())
}

/// Two writes into one page, then a truncate and a rewrite: images `posix` produces that no page cache can (a
/// later write kept without an earlier one in its page; a truncate undone under a later write), in some seeds.
#[test]
fn posix_produces_images_the_page_models_forbid() {
    let actions = [
        Action::Write { file: 0, offset: 0, len: 512, byte: 1 },
        Action::Write { file: 0, offset: 512, len: 512, byte: 2 },
        Action::SetLen { file: 1, len: 0 },
        Action::Write { file: 1, offset: 0, len: 100, byte: 3 },
    ];
    let broken = (0..64).filter(|&seed| !crash_and_check(seed, Persistence::Posix, &actions).is_empty()).count();
    let page = (0..64).filter(|&seed| !crash_and_check(seed, Persistence::Page, &actions).is_empty()).count();
    assert!(broken >= 8, "posix broke the page property in only {broken} of 64 seeds");
    assert_eq!(page, 0, "page broke its own property");
}

/// `page` exposes appended pages that were never written (zeros under a grown size) in some seeds; ext4's rule
/// forbids it, and `ext4-ordered` never does it.
#[test]
fn page_exposes_unwritten_appends_that_ext4_ordered_does_not() {
    let actions = [Action::Write { file: 2, offset: 5000, len: 4000, byte: 4 }];
    let exposed = |persistence| {
        (0..64)
            .filter(|&seed| {
                let env = world(seed, persistence);
                let files = durable_files(&env, &[7u8; 5000]);
                let snapshots = run(&env, &files, &actions);
                drop(files);
                env.crash();
                let image = env.read_current(&path(2)).unwrap();
                page_violation(&image, &snapshots[2], true).is_some()
            })
            .count()
    };
    assert!(exposed(Persistence::Page) > 0, "page never exposed an unwritten append");
    assert_eq!(exposed(Persistence::Ext4Ordered), 0);
}

/// `posix` and `page` drop metadata operations independently: some seed keeps a later create without an earlier.
#[test]
fn posix_and_page_drop_metadata_out_of_order() {
    for persistence in [Persistence::Posix, Persistence::Page] {
        let out_of_order = (0..64)
            .filter(|&seed| {
                let (states, after) = metadata_run(seed, persistence, &[]);
                !states.contains(&after)
            })
            .count();
        assert!(out_of_order > 0, "{persistence}: metadata always kept in order");
    }
}

/// `ext4-ordered`: a file created, appended and renamed over a synced one, with only a later file's sync: the
/// journal commit makes the rename durable, and the appended data with it (ordered mode flushes newly allocated
/// blocks before the commit). `page` can lose the data under the durable rename.
#[test]
fn ext4_ordered_commits_data_before_the_rename_that_exposes_it() {
    let mut page_lost = 0;
    for seed in 0..64 {
        for persistence in [Persistence::Page, Persistence::Ext4Ordered] {
            let env = world(seed, persistence);
            let files = durable_files(&env, b"old");
            let temp = Path::new(DIR).join("tmp");
            let handle = env.open(&temp, OpenOptions::create_truncate()).unwrap();
            handle.write_all_at(0, &[9u8; 6000]).unwrap();
            drop(handle);
            env.rename(&temp, &path(0)).unwrap();
            files[1].write_all_at(5000, b"grow").unwrap();
            files[1].sync().unwrap();
            drop(files);
            env.crash();
            let image = env.read_current(&path(0)).unwrap();
            if persistence == Persistence::Ext4Ordered {
                assert_eq!(image, vec![9u8; 6000], "seed {seed}: the committed rename shows unwritten data");
            } else {
                page_lost += usize::from(image != vec![9u8; 6000] && image != b"old");
            }
        }
    }
    assert!(page_lost > 0, "page never lost data under a rename");
}

/// The sector size is the world's, and `Env` reports it.
#[test]
fn sector_size_is_reported_and_validated() {
    let env = SimEnv::with_model(1, FaultConfig::default(), DiskModel { sector_bytes: 4096, ..DiskModel::default() });
    assert_eq!((env.sector_size_bytes(), SimEnv::new(1).sector_size_bytes()), (4096, 512));
    assert_eq!(env::RealEnv::new().sector_size_bytes(), 512);
}

/// `posix` at 4096-byte sectors tears only at 4 KiB boundaries.
#[test]
fn posix_tears_at_the_configured_sector() {
    for seed in 0..64 {
        let config = FaultConfig { crash_write_kept_ppm: 0, ..FaultConfig::default() };
        let model = DiskModel { sector_bytes: 4096, ..DiskModel::default() };
        let env = SimEnv::with_model(seed, config, model);
        let files = durable_files(&env, &[0u8; 8192]);
        files[0].write_all_at(0, &[5u8; 8192]).unwrap();
        drop(files);
        env.crash();
        let image = env.read_current(&path(0)).unwrap();
        for sector in image.chunks(4096) {
            assert!(sector.iter().all(|&byte| byte == sector[0]), "seed {seed}: a 4 KiB sector tore inside");
        }
    }
}

/// A truncate whose size change is lost leaves the pages it freed as they were (ADR-0121): a page cache drops a
/// freed page instead of writing zeros back, and under `ext4-ordered` a write after an uncommitted truncate goes
/// to blocks that transaction would map, so the old page stays.
#[test]
fn an_undone_truncate_leaves_the_pages_it_freed_unzeroed() {
    let actions = [Action::SetLen { file: 0, len: 0 }, Action::Write { file: 0, offset: 0, len: 1000, byte: 4 }];
    let durable = [7u8; 3 * PAGE as usize];
    for persistence in [Persistence::Page, Persistence::Ext4Ordered] {
        let (mut undone, mut kept) = (0, 0);
        for seed in 0..64 {
            let env = world(seed, persistence);
            let files = durable_files(&env, &durable);
            run(&env, &files, &actions);
            drop(files);
            env.crash();
            let image = env.read_current(&path(0)).unwrap();
            if image.len() < durable.len() {
                kept += 1;
                continue;
            }
            undone += 1;
            let page = PAGE as usize;
            assert!(image[page..].iter().all(|&byte| byte == 7), "seed {seed} {persistence:?}: a freed page changed");
            let first = &image[..page];
            let rewritten = first[..1000].iter().all(|&byte| byte == 4) && first[1000..].iter().all(|&byte| byte == 0);
            match persistence {
                Persistence::Ext4Ordered => assert!(first.iter().all(|&byte| byte == 7), "seed {seed}: page 0"),
                _ => assert!(rewritten || first.iter().all(|&byte| byte == 7), "seed {seed}: page 0 {first:?}"),
            }
        }
        assert!(undone > 0 && kept > 0, "{persistence:?}: the truncate was undone {undone} and kept {kept} times");
    }
}

/// Run `actions` on durable files, then crash with classification on (ADR-0173); the models that admit the image
/// and each file's image.
fn classified_crash(
    seed: u64,
    persistence: Persistence,
    actions: &[Action],
    shape: Option<env::CrashShape>,
) -> (Vec<Persistence>, Vec<Vec<u8>>) {
    let env = world(seed, persistence);
    let files = durable_files(&env, &[7u8; 5000]);
    drop(run(&env, &files, actions));
    drop(files);
    env.classify_crashes(true);
    env.set_crash_shape(shape);
    env.crash();
    let classes = env.crash_classes();
    assert_eq!(classes.len(), 1, "one crash, one class");
    let images = (0..FILES).map(|file| env.read_current(&path(file)).expect("a durable name survives")).collect();
    (classes[0].clone(), images)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every model admits the images it produces, and so does every weaker one: a crash under `page` is never
    /// classified "cannot on posix" (ADR-0173). When the check admits an image under `page`, ADR-0109's independent
    /// snapshot check agrees.
    #[test]
    fn every_model_admits_its_own_images_and_the_weaker_models_do_too(
        seed in any::<u64>(),
        actions in proptest::collection::vec(action(), 1..16),
    ) {
        for (index, persistence) in Persistence::ALL.into_iter().enumerate() {
            let (admitted, images) = classified_crash(seed, persistence, &actions, None);
            prop_assert!(admitted.len() > index, "{} image admitted by {:?} only", persistence, admitted);
            prop_assert_eq!(&admitted[..=index], &Persistence::ALL[..=index], "{} image", persistence);
            if admitted.contains(&Persistence::Page) {
                let env = world(seed, persistence);
                let files = durable_files(&env, &[7u8; 5000]);
                let snapshots = run(&env, &files, &actions);
                for (file, image) in images.iter().enumerate() {
                    let why = page_violation(image, &snapshots[file], false);
                    prop_assert!(why.is_none(), "{} f{}: classified page but {:?}", persistence, file, why);
                }
            }
        }
    }
}

/// `posix`'s images that no page cache produces are classified `posix` only, in some seeds.
#[test]
fn posix_images_no_page_cache_makes_are_classified_posix_only() {
    let actions = [
        Action::Write { file: 0, offset: 0, len: 512, byte: 1 },
        Action::Write { file: 0, offset: 512, len: 512, byte: 2 },
        Action::SetLen { file: 1, len: 0 },
        Action::Write { file: 1, offset: 0, len: 100, byte: 3 },
    ];
    let posix_only = (0..64)
        .filter(|&seed| classified_crash(seed, Persistence::Posix, &actions, None).0 == [Persistence::Posix])
        .count();
    assert!(posix_only >= 8, "only {posix_only} of 64 posix crashes were posix-only");
}

fn newest_kept() -> env::CrashShape {
    env::CrashShape { newest: env::sim::Marks::new(vec![true]), older: env::sim::Fate::Dropped }
}

/// A shaped crash (ADR-0172) keeps the newest write and drops the older one on every model, whatever the seed,
/// when both overwrite durable pages; an unrelated write before them changes nothing.
#[test]
fn a_crash_shape_names_the_image_by_place_in_the_write_sequence() {
    let data = Action::Write { file: 0, offset: 4096, len: 500, byte: 1 };
    let header = Action::Write { file: 0, offset: 0, len: 100, byte: 2 };
    let unrelated = Action::Write { file: 2, offset: 0, len: 10, byte: 3 };
    for persistence in Persistence::ALL {
        let mut images = Vec::new();
        for (seed, actions) in
            [(1, vec![data.clone(), header.clone()]), (2, vec![unrelated.clone(), data.clone(), header.clone()])]
        {
            let (admitted, files) = classified_crash(seed, persistence, &actions, Some(newest_kept()));
            let file = &files[0];
            assert_eq!((file[0], file[4096], file.len()), (2, 7, 5000), "{persistence}: header kept, data dropped");
            assert_eq!(admitted, Persistence::ALL, "an overwrite of durable pages is an image of every model");
            images.push(file.clone());
        }
        assert_eq!(images[0], images[1], "{persistence}: the unrelated write changed the image");
    }
}

/// The same shape over an append and then a header: `page` exposes the appended page unwritten (zeros under the
/// grown size: an image `posix` and `page` admit and `ext4-ordered` does not), `ext4-ordered` projects the shape
/// onto what `data=ordered` allows (the append's data is forced out with the size that exposes it).
#[test]
fn a_crash_shape_projects_onto_each_model() {
    let actions = [
        Action::Write { file: 0, offset: 5000, len: 3000, byte: 1 },
        Action::Write { file: 0, offset: 0, len: 100, byte: 2 },
    ];
    let (admitted, files) = classified_crash(3, Persistence::Page, &actions, Some(newest_kept()));
    assert_eq!((files[0][0], files[0][5000], files[0].len()), (2, 0, 8000), "page: header over an unwritten append");
    assert_eq!(admitted, [Persistence::Posix, Persistence::Page]);
    let (admitted, files) = classified_crash(3, Persistence::Ext4Ordered, &actions, Some(newest_kept()));
    assert_eq!((files[0][0], files[0][5000], files[0].len()), (2, 1, 8000), "ext4-ordered: the append came first");
    assert_eq!(admitted, Persistence::ALL);
    let (admitted, files) = classified_crash(3, Persistence::Posix, &actions, Some(newest_kept()));
    assert_eq!((files[0][0], files[0].len()), (2, 5000), "posix: the append dropped whole");
    assert_eq!(admitted, Persistence::ALL, "the old size with the header: every model's image");
}

/// A posix run's image is judged against the journal `ext4-ordered` would have kept (ADR-0173, ADR-0176): a new
/// file's `fsync` commits that journal, with every directory operation before it, so an image that lost the
/// directory the file was created in is `posix`-only or `page`, never `ext4-ordered`. fjall's keyspace directory
/// (examples/fjall-sim) was wrongly classified "can happen on ext4-ordered" before the floor moved under posix.
#[test]
fn an_image_that_lost_a_directory_a_synced_new_file_needed_is_not_ext4_ordered() {
    let mut dropped = 0;
    for seed in 0..64 {
        let env = world(seed, Persistence::Posix);
        env.create_dir_all(Path::new("/db/ks")).expect("mkdir");
        let file = env.open(Path::new("/db/ks/journal"), OpenOptions::create_truncate()).expect("create");
        file.write_all_at(0, b"acknowledged").expect("write");
        file.sync().expect("fsync of a file created since the last commit");
        drop(file);
        env.classify_crashes(true);
        env.crash();
        let classes = env.crash_classes();
        assert_eq!(classes.len(), 1, "one crash, one class");
        if env.read_current(Path::new("/db/ks/journal")).is_none() {
            dropped += 1;
            assert!(!classes[0].contains(&Persistence::Ext4Ordered), "seed {seed}: {:?}", classes[0]);
        } else {
            assert!(classes[0].contains(&Persistence::Ext4Ordered), "seed {seed}: a kept image: {:?}", classes[0]);
        }
    }
    assert!(dropped > 0, "no seed of 64 dropped the new directories");
}

/// The shape a keyed crash records (what the shrinker pins first, ADR-0172) reproduces its image under `page`
/// when no operation changes a file's size (the shape leaves sizes to its projection): the same bytes, seed
/// after seed.
#[test]
fn a_recorded_crash_shape_reproduces_the_keyed_image_of_overwrites() {
    let actions = [
        Action::Write { file: 0, offset: 0, len: 600, byte: 1 },
        Action::Write { file: 0, offset: 300, len: 4200, byte: 2 },
        Action::Write { file: 1, offset: 4000, len: 900, byte: 3 },
        Action::Write { file: 0, offset: 4096, len: 100, byte: 4 },
        Action::Write { file: 2, offset: 10, len: 10, byte: 5 },
    ];
    let mut differed = 0;
    for seed in 0..32 {
        let env = world(seed, Persistence::Page);
        let files = durable_files(&env, &[7u8; 5000]);
        drop(run(&env, &files, &actions));
        drop(files);
        env.record_crash_shapes(true);
        env.crash();
        let recorded = env.recorded_crash_shapes();
        assert_eq!(recorded.len(), 1, "one keyed crash, one shape");
        let keyed: Vec<Vec<u8>> = (0..FILES).map(|file| env.read_current(&path(file)).unwrap()).collect();
        let (_, shaped) = classified_crash(seed, Persistence::Page, &actions, Some(recorded[0].1.clone()));
        assert_eq!(keyed, shaped, "seed {seed}: shape {}", recorded[0].1);
        differed += usize::from(keyed.iter().any(|image| image[..] != [7u8; 5000][..]));
    }
    assert!(differed > 0, "some crash kept a pending write");
}
