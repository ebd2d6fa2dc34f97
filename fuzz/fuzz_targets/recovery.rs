//! `recovery`: open a database from an arbitrary directory image. See `holdfast_fuzz::image`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|image: holdfast_fuzz::image::Image| holdfast_fuzz::image::check(&image));
