//! `manifest_decode`: see `holdfast_fuzz::manifest`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| holdfast_fuzz::manifest::check(data));
