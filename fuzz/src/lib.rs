//! The fuzz harnesses behind `fuzz_targets/*.rs`, as plain functions.
//!
//! Each target is a one-line `fuzz_target!` that calls a function here, so the same check runs under libFuzzer
//! (`cargo +nightly fuzz run <target>`) and under `cargo test` on stable (the regression tests in
//! [`regressions`] and the corpus replay). A harness *panics* when it finds a bug: a panic inside the engine, or a
//! broken round-trip / differential property that the harness asserts itself.
//!
//! Checksums: every structure holdfast writes is covered by a CRC, so almost every mutated input fails its
//! checksum before any structural check runs. Each decoder harness therefore decodes the input twice: as is (the
//! checksum paths), and *resealed* ([`reseal`]): with every checksum recomputed over the mutated bytes, so the
//! fuzzer reaches the structural validation behind the CRC.

pub mod image;
pub mod manifest;
pub mod reseal;
pub mod schedule;
pub mod seed_file;
pub mod sstable;
pub mod wal;

#[cfg(test)]
mod regressions;

/// Decode a hex string (whitespace ignored) into bytes: how regression inputs are written down.
pub fn from_hex(hex: &str) -> Vec<u8> {
    let digits: Vec<u8> = hex.bytes().filter(|byte| !byte.is_ascii_whitespace()).collect();
    assert!(digits.len().is_multiple_of(2), "odd number of hex digits");
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).expect("ascii"), 16).expect("hex digit"))
        .collect()
}

/// Encode bytes as lowercase hex: how crash inputs are reported.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
