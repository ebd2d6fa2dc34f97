//! The engine's probes (`env::probe!`): the declared list `engine::PROBES` and the call sites in `engine/src`
//! are the same set (a tidy check on the sources, read through `RealEnv`), and probes fire where they claim to.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use engine::{Db, Options, PROBES};
use env::{Env, RealEnv, SimEnv};

/// Every probe name a `probe!(` call site in `text` passes (comment lines skipped), with its line number.
fn call_sites(text: &str) -> Vec<(usize, String)> {
    const CALL: &str = "probe!(";
    let mut names = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find(CALL) {
        let at = from + found;
        from = at + CALL.len();
        let line_start = text[..at].rfind('\n').map_or(0, |newline| newline + 1);
        if text[line_start..at].trim_start().starts_with("//") {
            continue;
        }
        let rest = &text[from..];
        let open = rest.find('"').expect("a probe! call passes a string literal");
        assert!(!rest[..open].contains(')'), "probe! call without a literal name: {}", &rest[..open]);
        let close = rest[open + 1..].find('"').expect("the literal ends") + open + 1;
        let line = text[..at].matches('\n').count() + 1;
        names.push((line, rest[open + 1..close].to_string()));
    }
    names
}

#[test]
fn declared_probes_and_call_sites_are_the_same_set() {
    let declared: BTreeSet<&str> = PROBES.iter().copied().collect();
    let mut used = BTreeSet::new();
    let mut undeclared = Vec::new();
    for (file, text) in crate::sources::engine_sources(&RealEnv::new()) {
        for (line, name) in call_sites(&text) {
            if !declared.contains(name.as_str()) {
                undeclared.push(format!("{}:{line}: {name}", file.display()));
            }
            used.insert(name);
        }
    }
    assert!(undeclared.is_empty(), "probes missing from engine::PROBES:\n{}", undeclared.join("\n"));
    let unused: Vec<&&str> = declared.iter().filter(|name| !used.contains(**name)).collect();
    assert!(unused.is_empty(), "engine::PROBES names probes no call site in engine/src hits: {unused:?}");
}

#[test]
fn declared_probes_are_sorted_unique_and_well_named() {
    assert!(PROBES.windows(2).all(|pair| pair[0] < pair[1]), "engine::PROBES is not sorted and unique");
    for name in PROBES {
        assert!(env::probe_name_is_valid(name), "{name} is not `area.what_happened`");
    }
    let sites = call_sites(
        "a\n  // env::probe!(env, \"x.commented\")\n  env::probe!(\n    inner.env,\n    \"y.split\",\n  );\n",
    );
    assert_eq!(sites, vec![(3, "y.split".to_string())]);
}

/// A reader holds an old snapshot; a newer version and a write-write conflict follow; a compaction must keep the
/// reader's version. Returns the write-write outcome.
fn snapshot_and_conflict<E: Env>(env: E, dir: &Path) -> bool {
    let db = Db::open(env, dir, Options::default()).expect("opens");
    db.put(b"k", b"old").expect("put");
    let reader = db.begin_read().expect("reader");
    db.put(b"k", b"new").expect("put");
    // Both snapshots taken before either commits (ADR-0210: otherwise a transaction that only writes takes none).
    let (mut first, mut second) = (crate::begun(&db), crate::begun(&db));
    first.put(b"w", b"1").expect("buffer");
    second.put(b"w", b"2").expect("buffer");
    first.commit().expect("first committer wins");
    let conflicted = second.commit().is_err_and(|error| error.is_conflict());
    db.compact().expect("compacts");
    drop(reader);
    db.close().expect("closes");
    conflicted
}

#[test]
fn probes_fire_where_they_claim_and_real_env_ignores_them() {
    let env = SimEnv::new(3);
    assert!(snapshot_and_conflict(env.clone(), Path::new("/db")));
    let counts = env.probe_counts();
    for name in ["ssi.conflict_write_write", "compaction.live_snapshot", "compaction.kept_version_for_snapshot"] {
        assert!(counts.get(name).is_some_and(|&hits| hits > 0), "{name} not hit: {counts:?}");
    }
    assert!(counts.keys().all(|name| PROBES.contains(name)), "an undeclared probe fired: {counts:?}");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("probes-{}", std::process::id()));
    // The same paths on the real file system: the probes are no-ops.
    assert!(snapshot_and_conflict(RealEnv::new(), &dir));
}
