//! `sstable_decode`: see `holdfast_fuzz::sstable`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| holdfast_fuzz::sstable::check(data));
