//! Digests through serde: a value is digested by walking its serde encoding into a [`StableHasher`], so a step or
//! an observation needs `#[derive(Serialize)]` and no hand-written digest.
//!
//! # Why the digest is stable
//!
//! The digest is a function of the serde data model alone: which data-model kinds the value serializes as, the
//! serialized field and variant NAMES, and the values. That is the information a schedule's JSON holds. It does
//! not depend on:
//!
//! * `serde_json` (its formatting, key quoting, or float printing and parsing): no text is produced;
//! * Rust memory layout, the compiler version, or enum discriminants: variants are hashed by name, never by index;
//! * platform endianness and pointer width: every number is hashed as a `u64` word through
//!   [`StableHasher::write_u64`] (a pure function of the word's value), every length as a `u64`, and text as its
//!   UTF-8 bytes. `Hasher`'s other `write_*` methods feed native-endian bytes and are never used.
//!
//! # The encoding
//!
//! Every item starts with a tag word (a `u64`, one per data-model kind), then its payload. Each item is thus
//! self-delimiting and adjacent items cannot run together: `("ab", "c")`, `("a", "bc")`, `Some(0)`, `0`, `[]`,
//! `()` and `None` all differ. The tag words are part of the encoding: `Unit` 1, `Bool` 2, `Unsigned` 3,
//! `Signed` 4, `U128` 5, `I128` 6, `Float` 7, `Char` 8, `Str` 9, `Bytes` 10, `None` 11, `Some` 12, `Seq` 13,
//! `Tuple` 14, `Map` 15, `Struct` 16, `UnitVariant` 17, `NewtypeVariant` 18, `TupleVariant` 19,
//! `StructVariant` 20, `End` 21.
//!
//! | serde data model | hashed as |
//! | --- | --- |
//! | `u8`, `u16`, `u32`, `u64` | `Unsigned`, the value as a `u64` (widening `u32` to `u64` keeps digests) |
//! | `i8`, `i16`, `i32`, `i64` | `Signed`, the value as an `i64`, its two's-complement bits as a `u64` |
//! | `u128` / `i128` | `U128` / `I128`, then the low and the high 64 bits of the (two's-complement) value |
//! | `bool` | `Bool`, then 0 or 1 |
//! | `f32`, `f64` | `Float`, then the `f64` bits (`to_bits`); an `f32` is widened to `f64` first |
//! | `char` | `Char`, then its scalar value |
//! | `str` | `Str`, the byte length, the UTF-8 bytes |
//! | `bytes` | `Bytes`, the byte length, the bytes |
//! | `None` / `Some(v)` | `None` / `Some`, then `v` |
//! | unit, unit struct | `Unit` (the struct name is not hashed: JSON does not write it) |
//! | newtype struct | transparent: the inner value alone, as in JSON |
//! | seq | `Seq`, the elements, `End` (the length hint is ignored: it may be absent) |
//! | tuple, tuple struct | `Tuple`, the elements, `End` |
//! | map | `Map`, then key and value for each entry, `End` (keys of any kind, not only strings) |
//! | struct | `Struct`, then for each serialized field its name (as a `str`) and value, `End` |
//! | unit variant | `UnitVariant`, the variant name (as a `str`) |
//! | newtype variant | `NewtypeVariant`, the variant name, the value |
//! | tuple variant | `TupleVariant`, the variant name, the elements, `End` |
//! | struct variant | `StructVariant`, the variant name, then name and value for each field, `End` |
//!
//! Type names are never hashed. `End` differs from every tag that can start an item, and a field name carries the
//! `Str` tag, so a reader of the word stream always knows where a compound value stops.
//!
//! # What keeps a digest, and what changes it
//!
//! Kept: reordering enum variants, renaming a Rust type, widening an integer field within unsigned or within
//! signed (`u8` to `u64`, `i32` to `i64`), `f32` to `f64`, wrapping a value in a newtype struct, and adding a field
//! with `#[serde(default, skip_serializing_if = "Option::is_none")]` while it is unset (a skipped field is simply
//! absent). Changed: renaming a field or variant (unless `#[serde(rename)]` keeps the serialized name), reordering
//! struct fields (their serialization order is hashed, as JSON writes it), and changing a value's data-model kind
//! even where JSON text would not show it (unsigned to signed, seq to tuple, struct to map, as
//! `#[serde(flatten)]` does). Serde's attributes are honoured because they act before the serializer: internally
//! tagged enums hash as the struct or map they serialize as, untagged enums as their content, flattened structs
//! as a map.
//!
//! The serializer reports itself human-readable, as JSON does, so types with two encodings (addresses, UUIDs)
//! hash the one a schedule's JSON holds.
//!
//! # Floats
//!
//! Floats are hashed by their bits: `0.0` and `-0.0` differ, and a NaN hashes its sign and payload bits. An `f32`
//! is widened exactly; a NaN `f32` is widened by moving its bits (Rust leaves a converted NaN's bits
//! unspecified), so its digest does not depend on the platform either.
//!
//! # Errors
//!
//! This serializer never fails by itself. [`digest_serde`] panics only if the value's `Serialize` impl returns an
//! error. Impls derived by serde never do, except for shapes that serde rejects in every format (flattening a
//! non-map value, an internally tagged newtype variant holding a primitive); serde's impls for std types fail only
//! on a path that is not UTF-8 or a poisoned or borrowed lock. `serde_json` fails on all of these too.

use std::fmt;
use std::hash::Hasher;

use env::StableHasher;
use serde::Serialize;
use serde::ser;

/// Feed `value`'s serde encoding (described in the module docs) into `hasher`.
///
/// # Panics
///
/// If `value`'s `Serialize` impl returns an error. Serde-derived impls do not, except for shapes no format accepts.
pub fn digest_serde<T: Serialize + ?Sized>(hasher: &mut StableHasher, value: &T) {
    if let Err(error) = value.serialize(&mut Encoder { hasher }) {
        panic!("digest_serde: the Serialize impl of `{}` failed: {error}", std::any::type_name::<T>());
    }
}

/// The digest of `value` alone: its serde encoding fed into a fresh [`StableHasher`].
///
/// # Panics
///
/// As [`digest_serde`]: only if `value`'s `Serialize` impl returns an error.
pub fn digest_of<T: Serialize + ?Sized>(value: &T) -> u64 {
    let mut hasher = StableHasher::new();
    digest_serde(&mut hasher, value);
    hasher.finish()
}

/// The tag word that starts each item. The values are part of the encoding: changing one changes every digest.
/// Being one enum, the compiler rejects two tags with the same value.
#[derive(Clone, Copy, Debug)]
#[repr(u64)]
enum Tag {
    Unit = 1,
    Bool = 2,
    Unsigned = 3,
    Signed = 4,
    U128 = 5,
    I128 = 6,
    Float = 7,
    Char = 8,
    Str = 9,
    Bytes = 10,
    None = 11,
    Some = 12,
    Seq = 13,
    Tuple = 14,
    Map = 15,
    Struct = 16,
    UnitVariant = 17,
    NewtypeVariant = 18,
    TupleVariant = 19,
    StructVariant = 20,
    End = 21,
}

/// The message of a `Serialize` impl that failed; the encoder itself never fails.
#[derive(Debug)]
struct EncodeError(String);

impl fmt::Display for EncodeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for EncodeError {}

impl ser::Error for EncodeError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        Self(message.to_string())
    }
}

/// What every encoding step returns.
type Encoded = Result<(), EncodeError>;

/// The serializer: writes the encoding of the module docs into a borrowed hasher.
#[derive(Debug)]
struct Encoder<'h> {
    hasher: &'h mut StableHasher,
}

impl Encoder<'_> {
    /// A tag with no payload.
    fn mark(&mut self, tag: Tag) {
        self.hasher.write_u64(tag as u64);
    }

    /// A tag and one word.
    fn word(&mut self, tag: Tag, word: u64) {
        self.mark(tag);
        self.hasher.write_u64(word);
    }

    /// A tag and a 128-bit value as two words, low then high.
    fn wide(&mut self, tag: Tag, value: u128) {
        let (low, high) = halves(value);
        self.word(tag, low);
        self.hasher.write_u64(high);
    }

    /// A tag, the byte length, the bytes.
    fn text(&mut self, tag: Tag, bytes: &[u8]) {
        self.word(tag, length_word(bytes.len()));
        self.hasher.write(bytes);
    }

    /// A field or variant name: encoded as a `str`.
    fn name(&mut self, name: &str) {
        self.text(Tag::Str, name.as_bytes());
    }

    /// The start of a variant: its tag and its name, never its index.
    fn variant(&mut self, tag: Tag, name: &str) {
        self.mark(tag);
        self.name(name);
    }
}

/// The low and the high 64 bits of `value`.
fn halves(value: u128) -> (u64, u64) {
    let low = u64::try_from(value & u128::from(u64::MAX)).expect("masked to 64 bits");
    let high = u64::try_from(value >> 64).expect("shifted to 64 bits");
    (low, high)
}

/// A length as a word, the same on every pointer width.
fn length_word(length: usize) -> u64 {
    u64::try_from(length).expect("a length fits in 64 bits")
}

/// The bits of `value` widened to `f64`: exact for every number; a NaN keeps its sign and payload (shifted to the
/// top of the wider field) by bit moves, since Rust leaves the bits of a converted NaN unspecified.
fn widened_bits(value: f32) -> u64 {
    if !value.is_nan() {
        return f64::from(value).to_bits();
    }
    let bits = u64::from(value.to_bits());
    let sign = (bits >> 31) << 63;
    let payload = (bits & 0x007f_ffff) << 29;
    sign | 0x7ff0_0000_0000_0000 | payload
}

impl ser::Serializer for &mut Encoder<'_> {
    type Ok = ();
    type Error = EncodeError;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn serialize_bool(self, value: bool) -> Encoded {
        self.word(Tag::Bool, u64::from(value));
        Ok(())
    }

    fn serialize_i8(self, value: i8) -> Encoded {
        self.serialize_i64(i64::from(value))
    }

    fn serialize_i16(self, value: i16) -> Encoded {
        self.serialize_i64(i64::from(value))
    }

    fn serialize_i32(self, value: i32) -> Encoded {
        self.serialize_i64(i64::from(value))
    }

    fn serialize_i64(self, value: i64) -> Encoded {
        self.word(Tag::Signed, value.cast_unsigned());
        Ok(())
    }

    fn serialize_i128(self, value: i128) -> Encoded {
        self.wide(Tag::I128, value.cast_unsigned());
        Ok(())
    }

    fn serialize_u8(self, value: u8) -> Encoded {
        self.serialize_u64(u64::from(value))
    }

    fn serialize_u16(self, value: u16) -> Encoded {
        self.serialize_u64(u64::from(value))
    }

    fn serialize_u32(self, value: u32) -> Encoded {
        self.serialize_u64(u64::from(value))
    }

    fn serialize_u64(self, value: u64) -> Encoded {
        self.word(Tag::Unsigned, value);
        Ok(())
    }

    fn serialize_u128(self, value: u128) -> Encoded {
        self.wide(Tag::U128, value);
        Ok(())
    }

    fn serialize_f32(self, value: f32) -> Encoded {
        self.word(Tag::Float, widened_bits(value));
        Ok(())
    }

    fn serialize_f64(self, value: f64) -> Encoded {
        self.word(Tag::Float, value.to_bits());
        Ok(())
    }

    fn serialize_char(self, value: char) -> Encoded {
        self.word(Tag::Char, u64::from(u32::from(value)));
        Ok(())
    }

    fn serialize_str(self, value: &str) -> Encoded {
        self.text(Tag::Str, value.as_bytes());
        Ok(())
    }

    fn serialize_bytes(self, value: &[u8]) -> Encoded {
        self.text(Tag::Bytes, value);
        Ok(())
    }

    fn serialize_none(self) -> Encoded {
        self.mark(Tag::None);
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Encoded {
        self.mark(Tag::Some);
        value.serialize(self)
    }

    fn serialize_unit(self) -> Encoded {
        self.mark(Tag::Unit);
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Encoded {
        self.mark(Tag::Unit);
        Ok(())
    }

    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Encoded {
        self.variant(Tag::UnitVariant, variant);
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _name: &'static str, value: &T) -> Encoded {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Encoded {
        self.variant(Tag::NewtypeVariant, variant);
        value.serialize(self)
    }

    fn serialize_seq(self, _length: Option<usize>) -> Result<Self, EncodeError> {
        self.mark(Tag::Seq);
        Ok(self)
    }

    fn serialize_tuple(self, _length: usize) -> Result<Self, EncodeError> {
        self.mark(Tag::Tuple);
        Ok(self)
    }

    fn serialize_tuple_struct(self, _name: &'static str, _length: usize) -> Result<Self, EncodeError> {
        self.mark(Tag::Tuple);
        Ok(self)
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _length: usize,
    ) -> Result<Self, EncodeError> {
        self.variant(Tag::TupleVariant, variant);
        Ok(self)
    }

    fn serialize_map(self, _length: Option<usize>) -> Result<Self, EncodeError> {
        self.mark(Tag::Map);
        Ok(self)
    }

    fn serialize_struct(self, _name: &'static str, _length: usize) -> Result<Self, EncodeError> {
        self.mark(Tag::Struct);
        Ok(self)
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _length: usize,
    ) -> Result<Self, EncodeError> {
        self.variant(Tag::StructVariant, variant);
        Ok(self)
    }

    /// True, as for JSON: types with a text and a binary form hash the text form a schedule's JSON holds.
    fn is_human_readable(&self) -> bool {
        true
    }
}

impl ser::SerializeSeq for &mut Encoder<'_> {
    type Ok = ();
    type Error = EncodeError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Encoded {
        value.serialize(&mut **self)
    }

    fn end(self) -> Encoded {
        self.mark(Tag::End);
        Ok(())
    }
}

impl ser::SerializeTuple for &mut Encoder<'_> {
    type Ok = ();
    type Error = EncodeError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Encoded {
        value.serialize(&mut **self)
    }

    fn end(self) -> Encoded {
        self.mark(Tag::End);
        Ok(())
    }
}

impl ser::SerializeTupleStruct for &mut Encoder<'_> {
    type Ok = ();
    type Error = EncodeError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Encoded {
        value.serialize(&mut **self)
    }

    fn end(self) -> Encoded {
        self.mark(Tag::End);
        Ok(())
    }
}

impl ser::SerializeTupleVariant for &mut Encoder<'_> {
    type Ok = ();
    type Error = EncodeError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Encoded {
        value.serialize(&mut **self)
    }

    fn end(self) -> Encoded {
        self.mark(Tag::End);
        Ok(())
    }
}

impl ser::SerializeMap for &mut Encoder<'_> {
    type Ok = ();
    type Error = EncodeError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Encoded {
        key.serialize(&mut **self)
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Encoded {
        value.serialize(&mut **self)
    }

    fn end(self) -> Encoded {
        self.mark(Tag::End);
        Ok(())
    }
}

impl ser::SerializeStruct for &mut Encoder<'_> {
    type Ok = ();
    type Error = EncodeError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, name: &'static str, value: &T) -> Encoded {
        self.name(name);
        value.serialize(&mut **self)
    }

    /// A skipped field is absent, so adding a skippable field keeps the digests of values that skip it.
    fn skip_field(&mut self, _name: &'static str) -> Encoded {
        Ok(())
    }

    fn end(self) -> Encoded {
        self.mark(Tag::End);
        Ok(())
    }
}

impl ser::SerializeStructVariant for &mut Encoder<'_> {
    type Ok = ();
    type Error = EncodeError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, name: &'static str, value: &T) -> Encoded {
        self.name(name);
        value.serialize(&mut **self)
    }

    /// As for structs: a skipped field is absent.
    fn skip_field(&mut self, _name: &'static str) -> Encoded {
        Ok(())
    }

    fn end(self) -> Encoded {
        self.mark(Tag::End);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use serde::{Deserialize, Serialize, Serializer};

    use super::*;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct Sample {
        id: u32,
        delta: i64,
        ratio: f64,
        name: String,
        flag: bool,
        letter: char,
        pair: (u8, i8),
        tags: Vec<String>,
        parent: Option<u64>,
        counts: BTreeMap<String, u64>,
        op: Op,
    }

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "op")]
    enum Op {
        Put { key: u32, value: u64 },
        Get { key: u32 },
        Crash,
    }

    fn sample() -> Sample {
        Sample {
            id: 7,
            delta: -3,
            ratio: 0.25,
            name: "seven".to_owned(),
            flag: true,
            letter: 'z',
            pair: (1, -1),
            tags: vec!["a".to_owned(), "bc".to_owned()],
            parent: Some(6),
            counts: BTreeMap::from([("x".to_owned(), 1), ("y".to_owned(), 2)]),
            op: Op::Put { key: 1, value: 2 },
        }
    }

    /// Serializes its bytes with `serialize_bytes` (serde's `&[u8]` impl writes a seq).
    struct Bytes<'a>(&'a [u8]);

    impl Serialize for Bytes<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.serialize_bytes(self.0)
        }
    }

    #[test]
    fn golden_digests() {
        // Pinned: if one of these changes, every saved digest changes meaning. Change them only on purpose.
        let cases: [(&str, u64, u64); 10] = [
            ("sample struct", digest_of(&sample()), 0x4794_fee1_d9ba_8437),
            ("tagged put", digest_of(&Op::Put { key: 1, value: 2 }), 0x2d78_af1a_2c7c_b923),
            ("tagged crash", digest_of(&Op::Crash), 0x9569_678d_d3b4_5ac8),
            ("some", digest_of(&Some(7u64)), 0x5157_0407_3c80_7544),
            ("none", digest_of(&None::<u64>), 0x4520_803e_c887_e50e),
            ("vec", digest_of(&vec![1u64, 2, 3]), 0xe85e_4509_92c2_e027),
            ("map", digest_of(&BTreeMap::from([("a", 1u64), ("b", 2)])), 0x1c7e_4480_046f_0458),
            ("string", digest_of("hello"), 0x0262_fac5_00df_c043),
            ("f64", digest_of(&1.5f64), 0xfbc9_9437_9ee6_c4d7),
            ("i128", digest_of(&-2i128), 0x72a7_3df2_ae43_605d),
        ];
        let changed: Vec<String> = cases
            .iter()
            .filter(|(_, actual, expected)| actual != expected)
            .map(|(what, actual, expected)| format!("{what}: {actual:#018x} (was {expected:#018x})"))
            .collect();
        assert!(changed.is_empty(), "golden digests changed:\n{}", changed.join("\n"));
    }

    /// One step of a hand-written encoding.
    enum Piece<'a> {
        Word(u64),
        Raw(&'a [u8]),
    }

    use Piece::{Raw, Word};

    /// A tag word.
    fn t(tag: Tag) -> Piece<'static> {
        Word(tag as u64)
    }

    /// The digest of a hand-written encoding.
    fn by_hand(pieces: &[Piece<'_>]) -> u64 {
        let mut hasher = StableHasher::new();
        for piece in pieces {
            match piece {
                Word(word) => hasher.write_u64(*word),
                Raw(bytes) => hasher.write(bytes),
            }
        }
        hasher.finish()
    }

    #[test]
    fn encoding_is_the_documented_word_stream() {
        assert_eq!(digest_of(&None::<u8>), by_hand(&[t(Tag::None)]));
        assert_eq!(digest_of(&Some(7u8)), by_hand(&[t(Tag::Some), t(Tag::Unsigned), Word(7)]));
        assert_eq!(digest_of(&-1i8), by_hand(&[t(Tag::Signed), Word(u64::MAX)]));
        assert_eq!(digest_of(&-2i128), by_hand(&[t(Tag::I128), Word(u64::MAX - 1), Word(u64::MAX)]));
        assert_eq!(digest_of("hey"), by_hand(&[t(Tag::Str), Word(3), Raw(b"hey")]));
        assert_eq!(digest_of(&'a'), by_hand(&[t(Tag::Char), Word(97)]));
        assert_eq!(digest_of(&1.5f32), by_hand(&[t(Tag::Float), Word(1.5f64.to_bits())]));
        assert_eq!(digest_of(&vec![4u16]), by_hand(&[t(Tag::Seq), t(Tag::Unsigned), Word(4), t(Tag::End)]));
        let field = [t(Tag::Struct), t(Tag::Str), Word(1), Raw(b"a"), t(Tag::Unsigned), Word(1), t(Tag::End)];
        assert_eq!(digest_of(&Single { a: 1 }), by_hand(&field));
        assert_eq!(digest_of(&Before::Stop), by_hand(&[t(Tag::UnitVariant), t(Tag::Str), Word(4), Raw(b"Stop")]));
        let go = [t(Tag::NewtypeVariant), t(Tag::Str), Word(2), Raw(b"Go"), t(Tag::Unsigned), Word(3)];
        assert_eq!(digest_of(&Before::Go(3)), by_hand(&go));
    }

    #[test]
    fn adjacent_and_empty_values_stay_apart() {
        let digests = [
            digest_of(&("ab", "c")),
            digest_of(&("a", "bc")),
            digest_of(&vec!["ab", "c"]),
            digest_of(&vec!["a", "bc"]),
            digest_of(&vec![vec![1u8], vec![]]),
            digest_of(&vec![Vec::<u8>::new(), vec![1]]),
            digest_of(&Some(0u64)),
            digest_of(&0u64),
            digest_of(&0i64),
            digest_of(&0u128),
            digest_of(&0i128),
            digest_of(&false),
            digest_of(&0.0f64),
            digest_of(&-0.0f64),
            digest_of(&'\0'),
            digest_of(""),
            digest_of(&Bytes(b"")),
            digest_of("ab"),
            digest_of(&Bytes(b"ab")),
            digest_of(&Vec::<u8>::new()),
            digest_of(&[0u8; 0]),
            digest_of(&()),
            digest_of(&None::<u8>),
            digest_of(&Some(None::<u8>)),
            digest_of(&Some(())),
            digest_of(&BTreeMap::<u8, u8>::new()),
            digest_of(&Empty {}),
        ];
        for (i, a) in digests.iter().enumerate() {
            for (j, b) in digests.iter().enumerate().skip(i + 1) {
                assert_ne!(a, b, "cases {i} and {j} digest the same");
            }
        }
    }

    #[derive(Serialize)]
    struct Empty {}

    #[derive(Serialize)]
    struct Marker;

    #[derive(Serialize)]
    struct Meters(u64);

    #[derive(Serialize)]
    struct Point(u32, i32);

    #[test]
    fn names_of_types_are_not_hashed() {
        assert_eq!(digest_of(&Marker), digest_of(&()));
        assert_eq!(digest_of(&Meters(5)), digest_of(&5u64));
        assert_eq!(digest_of(&Point(1, -2)), digest_of(&(1u64, -2i64)));
    }

    #[derive(Serialize)]
    enum Before {
        Stop,
        Go(u64),
        Turn(u8, bool),
        Move { x: i32 },
    }

    #[derive(Serialize)]
    enum After {
        Move { x: i32 },
        Turn(u8, bool),
        Go(u64),
        Stop,
    }

    #[test]
    fn variants_are_hashed_by_name_not_index() {
        assert_eq!(digest_of(&Before::Stop), digest_of(&After::Stop));
        assert_eq!(digest_of(&Before::Go(3)), digest_of(&After::Go(3)));
        assert_eq!(digest_of(&Before::Turn(1, true)), digest_of(&After::Turn(1, true)));
        assert_eq!(digest_of(&Before::Move { x: -1 }), digest_of(&After::Move { x: -1 }));
        assert_ne!(digest_of(&Before::Stop), digest_of(&Before::Go(0)));
    }

    #[derive(Serialize)]
    struct Narrow {
        count: u32,
        offset: i8,
        ratio: f32,
    }

    #[derive(Serialize)]
    struct Wide {
        count: u64,
        offset: i64,
        ratio: f64,
    }

    #[test]
    fn widening_keeps_digests() {
        assert_eq!(digest_of(&7u32), digest_of(&7u64));
        assert_eq!(digest_of(&7u8), digest_of(&7u64));
        assert_eq!(digest_of(&-7i16), digest_of(&-7i64));
        let narrow = Narrow { count: 9, offset: -2, ratio: 0.5 };
        assert_eq!(digest_of(&narrow), digest_of(&Wide { count: 9, offset: -2, ratio: 0.5 }));
        assert_ne!(digest_of(&7u64), digest_of(&7i64), "unsigned and signed stay apart");
    }

    #[test]
    fn f32_nan_widens_by_moving_bits() {
        let narrow = f32::from_bits(0xffc0_0001);
        let wide = f64::from_bits(0xfff8_0000_2000_0000);
        assert_eq!(digest_of(&narrow), digest_of(&wide));
        assert_ne!(digest_of(&f64::NAN), digest_of(&f64::from_bits(f64::NAN.to_bits() | 1)));
    }

    #[derive(Serialize)]
    struct StepV1 {
        key: u32,
    }

    #[derive(Serialize)]
    struct StepV2 {
        key: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline: Option<u64>,
    }

    #[test]
    fn an_unset_skippable_field_keeps_old_digests() {
        assert_eq!(digest_of(&StepV1 { key: 4 }), digest_of(&StepV2 { key: 4, deadline: None }));
        assert_ne!(digest_of(&StepV1 { key: 4 }), digest_of(&StepV2 { key: 4, deadline: Some(0) }));
    }

    #[derive(Serialize)]
    struct Externally {
        op: &'static str,
        key: u32,
    }

    #[test]
    fn internally_tagged_enums_hash_as_their_struct() {
        assert_eq!(digest_of(&Op::Get { key: 3 }), digest_of(&Externally { op: "Get", key: 3 }));
        assert_ne!(digest_of(&Op::Get { key: 3 }), digest_of(&Op::Get { key: 4 }));
        assert_ne!(digest_of(&Op::Crash), digest_of(&Op::Get { key: 0 }));
    }

    #[derive(Serialize)]
    #[serde(untagged)]
    enum Loose {
        Number(u64),
        Text(String),
        Pair { a: u8 },
    }

    #[test]
    fn untagged_enums_hash_as_their_content() {
        assert_eq!(digest_of(&Loose::Number(5)), digest_of(&5u64));
        assert_eq!(digest_of(&Loose::Text("t".to_owned())), digest_of("t"));
        assert_eq!(digest_of(&Loose::Pair { a: 1 }), digest_of(&Single { a: 1 }));
    }

    #[derive(Serialize)]
    struct Single {
        a: u8,
    }

    #[derive(Serialize)]
    struct Outer {
        a: u64,
        #[serde(flatten)]
        inner: Inner,
    }

    #[derive(Serialize)]
    struct Inner {
        b: u64,
    }

    #[test]
    fn flattened_structs_hash_as_a_map() {
        let outer = Outer { a: 1, inner: Inner { b: 2 } };
        assert_eq!(digest_of(&outer), digest_of(&BTreeMap::from([("a", 1u64), ("b", 2)])));
        assert_ne!(digest_of(&outer), digest_of(&Wider { a: 1, b: 2 }), "a struct is not a map");
    }

    #[derive(Serialize)]
    struct Wider {
        a: u64,
        b: u64,
    }

    #[test]
    fn json_round_trip_keeps_the_digest() {
        for value in [sample(), Sample { op: Op::Crash, parent: None, ..sample() }] {
            let json = serde_json::to_string(&value).expect("serializes");
            let back: Sample = serde_json::from_str(&json).expect("parses");
            assert_eq!(back, value);
            assert_eq!(digest_of(&back), digest_of(&value));
        }
    }

    #[test]
    fn digest_of_is_a_fresh_hasher_fed_by_digest_serde() {
        let mut hasher = StableHasher::new();
        digest_serde(&mut hasher, &sample());
        assert_eq!(hasher.finish(), digest_of(&sample()));
    }

    struct Refuses;

    impl Serialize for Refuses {
        fn serialize<S: Serializer>(&self, _serializer: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("no encoding for this"))
        }
    }

    #[test]
    #[should_panic(expected = "tests::Refuses` failed: no encoding for this")]
    fn a_failing_serialize_impl_panics_with_its_message() {
        digest_of(&Refuses);
    }

    type Nested = Vec<(String, Option<u64>, bool)>;

    /// Small alphabets, so equal values and near misses (split strings, moved elements) are both common.
    fn nested() -> impl Strategy<Value = Nested> {
        proptest::collection::vec(("[ab]{0,2}", proptest::option::of(0u64..3), any::<bool>()), 0..4)
    }

    proptest! {
        #[test]
        fn digests_are_equal_exactly_when_values_are(a in nested(), b in nested()) {
            prop_assert_eq!(digest_of(&a) == digest_of(&b), a == b);
        }

        #[test]
        fn a_clone_digests_the_same(a in nested()) {
            prop_assert_eq!(digest_of(&a), digest_of(&a.clone()));
        }

        #[test]
        fn arbitrary_values_differ_when_they_differ(a in any::<Nested>(), b in any::<Nested>()) {
            prop_assert_eq!(digest_of(&a) == digest_of(&b), a == b);
        }
    }
}
