//! The names of the engine's numbered files (`wal-NNNNNN.log`, `table-NNNNNN.sst`) and their paths, built and
//! parsed without the formatting machinery (ADR-0124): the simulator names every live file and parses every
//! directory entry after every step, and `format!` with padding was a visible share of a step's cost. The
//! results are exactly what `format!("{prefix}{number:06}{suffix}")` gives (a test compares them).

use std::path::{Path, PathBuf};

use crate::manifest::FILE_NUMBER_MAX;

/// The digits of a `u64` (at most 20).
const U64_DIGITS_MAX: usize = 20;

/// The fewest digits a file number is written with (zero-padded).
const NUMBER_WIDTH_MIN: usize = 6;

/// `<prefix><number, zero-padded to 6 digits><suffix>`. Pure.
pub(crate) fn numbered_file_name(prefix: &str, number: u64, suffix: &str) -> String {
    let mut digits = [b'0'; U64_DIGITS_MAX];
    let mut start = U64_DIGITS_MAX;
    let mut rest = number;
    for _ in 0..U64_DIGITS_MAX {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let start = start.min(U64_DIGITS_MAX - NUMBER_WIDTH_MIN);
    let digits = std::str::from_utf8(&digits[start..]).expect("ASCII digits");
    let mut name = String::with_capacity(prefix.len() + digits.len() + suffix.len());
    name.push_str(prefix);
    name.push_str(digits);
    name.push_str(suffix);
    name
}

pub(crate) fn wal_file_name(number: u64) -> String {
    numbered_file_name("wal-", number, ".log")
}

pub(crate) fn table_file_name(number: u64) -> String {
    numbered_file_name("table-", number, ".sst")
}

/// `dir` joined with `name` (a plain file name), in one allocation.
pub(crate) fn file_path(dir: &Path, name: &str) -> PathBuf {
    let mut path = PathBuf::with_capacity(dir.as_os_str().len() + 1 + name.len());
    path.push(dir);
    path.push(name);
    path
}

/// The number in a file name `<prefix>NNNNNN<suffix>`, only if the name is exactly what the engine writes for it
/// (so `wal-2.log` and `wal-000002.log` cannot both name segment 2) and the number is in range. Exactly the names
/// [`numbered_file_name`] writes: six digits, or more with no leading zero.
pub(crate) fn parse_number(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let canonical = digits.len() == NUMBER_WIDTH_MIN || (digits.len() > NUMBER_WIDTH_MIN && !digits.starts_with('0'));
    if !canonical {
        return None;
    }
    let number: u64 = digits.parse().ok()?;
    (number <= FILE_NUMBER_MAX).then_some(number)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The definition these functions replaced (ADR-0124): `format!` and a round trip through it.
    fn parse_number_by_format(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
        let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let number: u64 = digits.parse().ok()?;
        (number <= FILE_NUMBER_MAX && digits == format!("{number:06}")).then_some(number)
    }

    #[test]
    fn names_are_zero_padded_to_six_digits() {
        assert_eq!(table_file_name(0), "table-000000.sst");
        assert_eq!(wal_file_name(42), "wal-000042.log");
        assert_eq!(table_file_name(999_999), "table-999999.sst");
        assert_eq!(table_file_name(1_000_000), "table-1000000.sst");
        assert_eq!(wal_file_name(u64::MAX), format!("wal-{}.log", u64::MAX));
        assert_eq!(file_path(Path::new("/db"), "wal-000001.log"), Path::new("/db").join("wal-000001.log"));
        assert_eq!(file_path(Path::new("/db/"), "x"), Path::new("/db/").join("x"));
        assert_eq!(file_path(Path::new("db"), "x"), Path::new("db").join("x"));
        assert_eq!(file_path(Path::new(""), "x"), Path::new("").join("x"));
    }

    #[test]
    fn only_the_names_the_engine_writes_parse() {
        assert_eq!(parse_number("wal-000002.log", "wal-", ".log"), Some(2));
        assert_eq!(parse_number("wal-2.log", "wal-", ".log"), None, "not padded");
        assert_eq!(parse_number("wal-0000002.log", "wal-", ".log"), None, "padded past six digits");
        assert_eq!(parse_number("wal-1000000.log", "wal-", ".log"), Some(1_000_000));
        assert_eq!(parse_number("wal-.log", "wal-", ".log"), None);
        assert_eq!(parse_number("wal-00000a.log", "wal-", ".log"), None);
        assert_eq!(parse_number("table-000002.sst", "wal-", ".log"), None);
        assert_eq!(parse_number(&table_file_name(FILE_NUMBER_MAX + 1), "table-", ".sst"), None, "out of range");
    }

    proptest! {
        #[test]
        fn names_equal_format(number in any::<u64>(), small in 0u64..2_000_000) {
            for number in [number, small] {
                prop_assert_eq!(table_file_name(number), format!("table-{number:06}.sst"));
                prop_assert_eq!(wal_file_name(number), format!("wal-{number:06}.log"));
            }
        }

        #[test]
        fn parsing_equals_the_format_round_trip(digits in "[0-9]{0,22}", number in 0u64..2_000_000) {
            for name in [format!("wal-{digits}.log"), wal_file_name(number), format!("wal-{number}.log")] {
                prop_assert_eq!(parse_number(&name, "wal-", ".log"), parse_number_by_format(&name, "wal-", ".log"));
            }
            prop_assert_eq!(parse_number(&wal_file_name(number), "wal-", ".log"), Some(number));
        }
    }
}
