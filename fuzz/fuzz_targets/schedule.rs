//! `schedule`: see `holdfast_fuzz::schedule`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| holdfast_fuzz::schedule::check(data));
