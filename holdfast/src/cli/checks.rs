//! Flag combinations clap cannot check: each returns the message of a bad-input exit.

use super::{Args, Cli, Entry};

/// Flag combinations clap cannot check.
pub(super) fn check_flags(cli: &Cli, args: &Args, entry: &Entry) -> Result<(), String> {
    if let Some(name) = &args.canary {
        check_canary(cli, entry, name)?;
    }
    if !entry.profiles.contains(&args.profile()) {
        return Err(format!("--fault-profile {}: target {} has no such fault profile", args.profile(), entry.name));
    }
    if let Some(menu) = (entry.fault_menu)(args.profile()) {
        menu.validate().map_err(|error| {
            format!("target {}'s fault menu for --fault-profile {}: {error}", entry.name, args.profile())
        })?;
        if let Some(model) = args.persistence.as_deref().and_then(|name| env::Persistence::parse(name).ok()) {
            menu.honours(model).map_err(|error| {
                format!("--persistence {model}: target {} (--fault-profile {}): {error}", entry.name, args.profile())
            })?;
        }
    }
    if args.save.is_some() {
        match &args.adr {
            None => return Err("--save needs --adr ADR-XXXX: the decision record that explains the bug".into()),
            Some(adr) if !adr.starts_with("ADR-") => {
                return Err(format!("--adr {adr:?}: want a decision record like ADR-0033"));
            }
            Some(_) => {}
        }
        check_pinned_build(cli, args, entry)?;
    }
    if args.shrink && (args.bench || args.check_determinism) {
        return Err(
            "--shrink shrinks a failure of --seed, --replay or --seeds, not of --bench or --check-determinism".into()
        );
    }
    if args.shrink && args.json {
        return Err("--shrink prints a human report; it cannot be combined with --json".into());
    }
    if args.export_image.is_some() && (args.seeds.is_some() || args.bench || args.check_determinism) {
        return Err("--export-image exports one run: use it with --seed or --replay".into());
    }
    if args.shrink_budget == 0 {
        return Err("--shrink-budget must be at least 1".into());
    }
    Ok(())
}

/// `--save` in a target that pins findings as `fail` (`FINDINGS_EXPECT_FAIL`), in a binary built with features
/// that change behaviour (`built_with`), without a canary: refused (ADR-0115). The seed file cannot record the
/// features, so the `fail` it pins would fail every `cargo test` built without them.
fn check_pinned_build(cli: &Cli, args: &Args, entry: &Entry) -> Result<(), String> {
    if !entry.findings_expect_fail || args.canary.is_some() || cli.built_with.is_empty() {
        return Ok(());
    }
    let features = cli.built_with.join(",");
    Err(format!(
        "--save: target {} pins its findings as `fail` (FINDINGS_EXPECT_FAIL), and this binary was built with \
         --features {features} (Cli::built_with); a seed file does not record build features, so the `fail` it \
         pinned would fail every `cargo test` built without them (ADR-0115). For a planted bug, make it a canary \
         (Target::canaries and set_canary, compiled in by a canaries feature): the seed file records the canary, \
         `--replay` turns it on, and a build without it skips the seed with a message. For a real finding, save \
         it from a build without --features {features}",
        entry.name
    ))
}

pub(super) fn check_canary(cli: &Cli, entry: &Entry, name: &str) -> Result<(), String> {
    let known = (entry.canaries)();
    if known.is_empty() {
        let how = match cli.canaries_feature {
            Some(feature) => {
                format!("build it with --features {feature} ({} --features {feature} -- ...)", cli.command)
            }
            None => "build it with the target's canaries feature".to_string(),
        };
        return Err(format!("--canary {name}: target {} has no canaries compiled into this build; {how}", entry.name));
    }
    if known.contains(&name) { Ok(()) } else { Err(format!("unknown canary {name:?}; known: {}", known.join(", "))) }
}
