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
