//! `manifest_decode`: `decode_manifest` never panics, and what it accepts round-trips through `encode_manifest`.

use engine::manifest::{decode_manifest, encode_manifest};

/// The harness. Panics on a finding.
pub fn check(data: &[u8]) {
    check_one(data);
    let resealed = crate::reseal::reseal_manifest(data);
    if resealed != data {
        check_one(&resealed);
    }
}

fn check_one(data: &[u8]) {
    if let Ok(manifest) = decode_manifest(data) {
        let encoded = encode_manifest(&manifest);
        assert_eq!(decode_manifest(&encoded).as_ref(), Ok(&manifest), "a decoded manifest does not round-trip");
        // Every field is fixed-width or length-prefixed and trailing bytes are rejected: one encoding per manifest.
        assert_eq!(encoded, data, "decode_manifest accepted a non-canonical encoding");
    }
}
