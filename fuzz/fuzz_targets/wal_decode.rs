//! `wal_decode`: see `holdfast_fuzz::wal`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| holdfast_fuzz::wal::check(data));
