//! `seed_file`: the corpus parser on arbitrary text never panics; a file it accepts writes back and re-parses to
//! the same seed file.

use std::path::Path;

use corpus::SeedFile;

/// Parse arbitrary bytes as a seed file.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(seed) = SeedFile::parse(Path::new("fuzz.json"), text) {
        let again = SeedFile::parse(Path::new("fuzz.json"), &seed.to_json()).expect("a written seed file parses");
        assert_eq!(again, seed, "a seed file changed through write and parse");
    }
}
