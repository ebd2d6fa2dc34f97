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
mod tests;
