//! `seed_file`: see `holdfast_fuzz::seed_file`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| holdfast_fuzz::seed_file::check(data));
