//! Regression seeds (ADR-0031): the seed-file format and its parser.
//!
//! A seed file in `seeds/` pins a failure forever: the shrunk schedule that once failed, the signature it failed
//! with, and what it must do now — `pass` for a fixed bug, or `fail` with that signature for a canary detection
//! seed (replayed with the canary on), so losing the ability to find a planted bug is a red test.
//! Each target's own test crate replays its directory of seed files with `holdfast::seeds::replay` (one test
//! per file); this crate is only the format, so a build script or tool can read seed files without the framework.
//!
//! ```json
//! {
//!   "format_version": 1,
//!   "name": "tombstone-fallthrough",
//!   "target": "engine",
//!   "seed": 17,
//!   "canary": "tombstone-fallthrough",
//!   "signature": { "invariant": "oracle", "kind": "wrong_value" },
//!   "expect": { "fail": { "invariant": "oracle", "kind": "wrong_value" } },
//!   "adr": "ADR-0020",
//!   "description": "a memtable tombstone falls through to an older table",
//!   "schedule": { "format_version": 1, "target": "engine", "seed": 17, "config": {}, "steps": [] }
//! }
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The seed-file format this code reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// A seed file larger than this is refused (a schedule that large was not shrunk).
pub const FILE_SIZE_BYTES_MAX: usize = 16 * 1024 * 1024;

/// How a run failed: which invariant, and what kind of breach.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    pub invariant: String,
    pub kind: String,
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.invariant, self.kind)
    }
}

/// What replaying the seed must do now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expectation {
    /// The bug is fixed: the schedule passes.
    Pass,
    /// A detection seed: the schedule fails with exactly this signature.
    Fail(Signature),
}

/// One regression seed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedFile {
    pub format_version: u32,
    pub name: String,
    /// The target's name (`holdfast::Target::NAME`).
    pub target: String,
    pub seed: u64,
    /// The canary the replay turns on (needs the `canaries` feature), if any.
    #[serde(default)]
    pub canary: Option<String>,
    /// The failure the schedule produced when it was saved.
    pub signature: Signature,
    pub expect: Expectation,
    /// The decision record that explains the bug.
    pub adr: String,
    pub description: String,
    /// The replay's digest (16 hex digits) when the seed was saved: a replay whose digest differs no longer
    /// means the same run (ADR-0003), and fails until the file is re-recorded with an ADR that says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// ADR-0112's replay labels, read from older seed files only: `--save` writes [`SeedFile::can_happen_on`] and
    /// the replay evidence below instead (ADR-0173).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reproduces_on: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_on: Vec<String>,
    /// The persistence models (ADR-0109) that admit every crash image of the failing run, and those that do not,
    /// weakest first (ADR-0173). Absent in older seed files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub can_happen_on: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cannot_on: Vec<String>,
    /// Evidence only: the models whose replay (with that model's own crash decisions) failed the same way, and the
    /// others (ADR-0173).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replay_fails_on: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replay_differs_on: Vec<String>,
    /// The shrunk schedule, in the target's schedule format.
    pub schedule: serde_json::Value,
}

/// A seed file that could not be read: names the file and the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedFileError {
    pub file: PathBuf,
    /// The field at fault (`<root>` when the file is not a JSON object at all).
    pub field: String,
    pub message: String,
}

impl fmt::Display for SeedFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: field `{}`: {}", self.file.display(), self.field, self.message)
    }
}

impl std::error::Error for SeedFileError {}

/// The fields every seed file has, with the JSON type each must be.
const REQUIRED_FIELDS: &[(&str, &str)] = &[
    ("format_version", "number"),
    ("name", "string"),
    ("target", "string"),
    ("seed", "number"),
    ("signature", "object"),
    ("expect", "string or object"),
    ("adr", "string"),
    ("description", "string"),
    ("schedule", "object"),
];

/// The fields a seed file may have.
const OPTIONAL_FIELDS: &[&str] = &[
    "canary",
    "digest",
    "reproduces_on",
    "not_on",
    "can_happen_on",
    "cannot_on",
    "replay_fails_on",
    "replay_differs_on",
];

fn type_matches(value: &serde_json::Value, expected: &str) -> bool {
    match expected {
        "number" => value.is_u64(),
        "string" => value.is_string(),
        "object" => value.is_object(),
        _ => value.is_string() || value.is_object(),
    }
}

impl SeedFile {
    /// Parse a seed file's text. `file` is used only to name it in errors.
    pub fn parse(file: &Path, text: &str) -> Result<Self, SeedFileError> {
        let error = |field: &str, message: String| SeedFileError {
            file: file.to_path_buf(),
            field: field.to_string(),
            message,
        };
        if text.len() > FILE_SIZE_BYTES_MAX {
            return Err(error("<root>", format!("file of {} bytes over {FILE_SIZE_BYTES_MAX}", text.len())));
        }
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| error("<root>", format!("not JSON: {e}")))?;
        let object = value.as_object().ok_or_else(|| error("<root>", "not a JSON object".into()))?;
        for (field, kind) in REQUIRED_FIELDS {
            match object.get(*field) {
                None => return Err(error(field, "missing".into())),
                Some(found) if !type_matches(found, kind) => {
                    return Err(error(field, format!("must be a {kind}, found {found}")));
                }
                Some(_) => {}
            }
        }
        if let Some(unknown) = object
            .keys()
            .find(|key| !REQUIRED_FIELDS.iter().any(|(f, _)| f == key) && !OPTIONAL_FIELDS.contains(&key.as_str()))
        {
            return Err(error(unknown, "unknown field".into()));
        }
        let version = object["format_version"].as_u64().unwrap_or(0);
        if version != u64::from(FORMAT_VERSION) {
            return Err(error("format_version", format!("version {version}, this build reads {FORMAT_VERSION}")));
        }
        let parsed: SeedFile = serde_json::from_value(value).map_err(|e| {
            let message = e.to_string();
            let field = ["signature", "expect", "canary", "digest"]
                .into_iter()
                .find(|f| message.contains(f))
                .unwrap_or("<root>");
            error(field, message)
        })?;
        parsed.validate().map_err(|(field, message)| error(field, message))?;
        Ok(parsed)
    }

    fn validate(&self) -> Result<(), (&'static str, String)> {
        let name_ok = !self.name.is_empty()
            && self.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '/');
        if !name_ok {
            return Err(("name", format!("{:?} must be non-empty [A-Za-z0-9_/-]", self.name)));
        }
        let target_ok =
            !self.target.is_empty() && self.target.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !target_ok {
            return Err(("target", format!("{:?} must be a target name [A-Za-z0-9_-]", self.target)));
        }
        if let Some(digest) = &self.digest
            && (digest.len() != 16 || !digest.chars().all(|c| c.is_ascii_hexdigit()))
        {
            return Err(("digest", format!("{digest:?} must be 16 hex digits")));
        }
        if !self.adr.starts_with("ADR-") {
            return Err(("adr", format!("{:?} must name an ADR like ADR-0020", self.adr)));
        }
        if let Expectation::Fail(signature) = &self.expect
            && signature != &self.signature
        {
            return Err(("expect", format!("expects {signature} but the recorded signature is {}", self.signature)));
        }
        Ok(())
    }

    /// Pretty JSON, as committed in `seeds/`.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("a seed file serializes");
        text.push('\n');
        debug_assert!(Self::parse(Path::new("<self>"), &text).is_ok(), "a written seed file must parse");
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SeedFile {
        SeedFile {
            format_version: FORMAT_VERSION,
            name: "example".into(),
            target: "engine".into(),
            seed: 7,
            canary: None,
            signature: Signature { invariant: "oracle".into(), kind: "wrong_value".into() },
            expect: Expectation::Pass,
            adr: "ADR-0020".into(),
            description: "an example".into(),
            digest: Some("00000000deadbeef".into()),
            reproduces_on: Vec::new(),
            not_on: Vec::new(),
            can_happen_on: Vec::new(),
            cannot_on: Vec::new(),
            replay_fails_on: Vec::new(),
            replay_differs_on: Vec::new(),
            schedule: serde_json::json!({ "steps": [] }),
        }
    }

    #[test]
    fn round_trips() {
        let text = sample().to_json();
        assert_eq!(SeedFile::parse(Path::new("a.json"), &text), Ok(sample()));
        // With the persistence models it can happen on and the replays' evidence (ADR-0173), as `--save` writes
        // them; and ADR-0112's older labels, as older files have them.
        let labelled = SeedFile {
            can_happen_on: vec!["posix".into(), "page".into()],
            cannot_on: vec!["ext4-ordered".into()],
            replay_fails_on: vec!["page".into()],
            replay_differs_on: vec!["posix".into(), "ext4-ordered".into()],
            ..sample()
        };
        let text = labelled.to_json();
        assert!(text.contains("\"can_happen_on\"") && text.contains("\"replay_differs_on\""), "{text}");
        assert_eq!(SeedFile::parse(Path::new("b.json"), &text), Ok(labelled));
        let older = SeedFile { reproduces_on: vec!["posix".into()], not_on: vec!["page".into()], ..sample() };
        assert_eq!(SeedFile::parse(Path::new("c.json"), &older.to_json()), Ok(older));
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        let mut value: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        value.as_object_mut().unwrap().remove("adr");
        let error = SeedFile::parse(Path::new("seeds/x.json"), &value.to_string()).unwrap_err();
        assert_eq!((error.file.as_path(), error.field.as_str()), (Path::new("seeds/x.json"), "adr"));
        let mut value: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        value["seed"] = serde_json::json!("seven");
        assert_eq!(SeedFile::parse(Path::new("s.json"), &value.to_string()).unwrap_err().field, "seed");
        value["seed"] = serde_json::json!(7);
        value["surprise"] = serde_json::json!(1);
        assert_eq!(SeedFile::parse(Path::new("s.json"), &value.to_string()).unwrap_err().field, "surprise");
        assert_eq!(SeedFile::parse(Path::new("s.json"), "[1, 2]").unwrap_err().field, "<root>");
        let mut mismatched = sample();
        mismatched.expect = Expectation::Fail(Signature { invariant: "other".into(), kind: "k".into() });
        let text = serde_json::to_string(&mismatched).unwrap();
        assert_eq!(SeedFile::parse(Path::new("m.json"), &text).unwrap_err().field, "expect");
        let mut bad_digest = sample();
        bad_digest.digest = Some("xyz".into());
        let text = serde_json::to_string(&bad_digest).unwrap();
        assert_eq!(SeedFile::parse(Path::new("d.json"), &text).unwrap_err().field, "digest");
    }
}
