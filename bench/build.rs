//! Records which holdfast source the binary was built from (`HOLDFAST_SOURCE`), so a result JSON names the code that
//! ran, not whatever the checkout holds when it runs: a binary carried to another machine (the 16-core device has no
//! git checkout) or run after a `git checkout` still reports its own source.

use std::path::Path;
use std::process::Command;

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git").arg("-C").arg(root).args(args).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // Rebuild when a commit moves HEAD or the index, or when the engine's or env's sources change (dirty state).
    for path in ["HEAD", "index"] {
        if let Some(git_path) = git(&root, &["rev-parse", "--git-path", path]) {
            let git_path = if Path::new(&git_path).is_absolute() { git_path.into() } else { root.join(git_path) };
            println!("cargo:rerun-if-changed={}", git_path.display());
        }
    }
    for dir in ["engine", "env"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    let head = git(&root, &["rev-parse", "--short", "HEAD"]).unwrap_or_default();
    let dirty = git(&root, &["status", "--porcelain", "--", "engine", "env"]).unwrap_or_default();
    let source = match (head.is_empty(), dirty.is_empty()) {
        (true, _) => String::new(),
        (false, true) => head,
        (false, false) => format!("{head} + uncommitted changes in engine/ or env/"),
    };
    println!("cargo:rustc-env=HOLDFAST_SOURCE={source}");
}
