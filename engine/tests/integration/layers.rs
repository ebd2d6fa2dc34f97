//! The engine's modules form layers (ADR-0083, ARCHITECTURE.md's codemap): every `crate::<module>` reference in
//! `engine/src` (a `use`, a path, a `crate::{...}` group; comment lines skipped) points to a strictly lower layer,
//! so no import cycle can form. Sources are read through `RealEnv`. A reference through the crate root's
//! re-exports (`crate::Result`, `crate::Options`) names no module and is not an edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use env::RealEnv;

/// The layers, lowest first; ARCHITECTURE.md lists the same.
const LAYERS: &[&[&str]] = &[
    &["canary", "types", "lock_meter", "work", "striped"],
    &["ssi"],
    &["error"],
    &["memtable", "wal", "sstable", "manifest"],
    &["recovery_rules", "options", "version", "file_names", "wal_writer"],
    &["view"],
    &["scan", "read_cache", "watermark"],
    &["state"],
    &["jobs"],
    &["commit"],
    &["recovery"],
    &["db"],
    &["txn", "introspect"],
];

/// The top-level module a file under `src` belongs to (`sstable/table.rs` → `sstable`); None for the crate root.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).expect("under src");
    let first = relative.components().next()?.as_os_str().to_str()?.to_string();
    let module = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (module != "lib").then_some(module)
}

fn identifier(text: &str) -> &str {
    let end = text.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(text.len());
    &text[..end]
}

/// The modules `text` references as `crate::<module>` or inside `crate::{...}` (first segment of each item).
fn referenced_modules(text: &str) -> BTreeSet<String> {
    let mut modules = BTreeSet::new();
    for line in text.lines().filter(|line| !line.trim_start().starts_with("//")) {
        for (at, _) in line.match_indices("crate::") {
            let rest = &line[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let inner = &group[..group.find('}').unwrap_or(group.len())];
                modules.extend(inner.split(',').map(|item| identifier(item.trim()).to_string()));
            } else {
                modules.insert(identifier(rest).to_string());
            }
        }
    }
    // A lower-case first letter names a module; `crate::Result` is the root's re-export.
    modules.retain(|name| name.starts_with(|c: char| c.is_ascii_lowercase()));
    modules
}

/// The edges (from module → referenced modules) of the sources in `files`. A name that is no module of `files`
/// (`crate::compare_internal`, a function the root re-exports) is not an edge.
fn graph(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<&String> = files.iter().map(|(module, _)| module).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in files {
        let targets = edges.entry(module.clone()).or_default();
        let referenced = referenced_modules(text).into_iter();
        targets.extend(referenced.filter(|target| target != module && modules.contains(target)));
    }
    edges
}

/// A cycle in `edges`, as the modules around it (first repeated last), if there is one.
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|on_path| on_path == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|node| visit(node, edges, &mut Vec::new(), &mut done))
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

#[test]
fn engine_modules_form_layers_with_no_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let sources = crate::sources::engine_sources(&RealEnv::new());
    let files: Vec<(String, String)> =
        sources.into_iter().filter_map(|(path, text)| Some((module_of(&src, &path)?, text))).collect();
    let edges = graph(&files);
    assert!(edges.get("db").is_some_and(|targets| targets.contains("commit")), "the parse found no edges: {edges:?}");
    if let Some(cycle) = find_cycle(&edges) {
        panic!("import cycle among the engine's modules: {}", cycle.join(" -> "));
    }
    let mut upward = Vec::new();
    for (module, targets) in &edges {
        let from = layer_of(module).unwrap_or_else(|| panic!("module {module} is in no layer: add it to LAYERS"));
        for target in targets {
            let to = layer_of(target).unwrap_or_else(|| panic!("{module} references {target}, in no layer"));
            if to >= from {
                upward.push(format!("{module} (layer {from}) -> {target} (layer {to})"));
            }
        }
    }
    assert!(upward.is_empty(), "references that do not go to a lower layer:\n{}", upward.join("\n"));
}

/// The check can fail: a planted cycle (through a `use crate::{...}` group and a path) is found and listed, and a
/// comment naming a module is not an edge.
#[test]
fn a_planted_import_cycle_is_found_and_listed() {
    let files = vec![
        ("db".to_string(), "use crate::{state::Inner, commit};\n".to_string()),
        ("commit".to_string(), "fn f() { crate::jobs::run(); }\n// crate::db::Db in a comment\n".to_string()),
        ("jobs".to_string(), "use crate::db::Db;\nuse crate::Result;\n".to_string()),
        ("state".to_string(), String::new()),
    ];
    let edges = graph(&files);
    assert_eq!(edges["db"], BTreeSet::from(["state".to_string(), "commit".to_string()]));
    assert_eq!(edges["commit"], BTreeSet::from(["jobs".to_string()]), "the comment is not an edge");
    assert_eq!(edges["jobs"], BTreeSet::from(["db".to_string()]), "crate::Result names no module");
    let cycle = find_cycle(&edges).expect("the planted cycle is found");
    assert_eq!(cycle, ["commit", "jobs", "db", "commit"]);
    let acyclic = graph(&files[1..]);
    assert_eq!(find_cycle(&acyclic), None, "without db, no cycle: {acyclic:?}");
}
