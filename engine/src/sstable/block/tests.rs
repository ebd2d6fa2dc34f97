//! The data block's builder, decoder, search and cursor tests.

use proptest::prelude::*;

use super::*;

fn entry(user_key: &[u8], sequence: Sequence, value: &[u8]) -> Entry {
    let kind = if value.is_empty() { ValueKind::Delete } else { ValueKind::Put };
    Entry { key: InternalKey::new(user_key, sequence), kind, value: value.to_vec() }
}

fn sorted_entries() -> impl Strategy<Value = Vec<Entry>> {
    let key_strategy = proptest::collection::vec(0u8..4, 0..6);
    let value_strategy = proptest::collection::vec(any::<u8>(), 0..5);
    proptest::collection::btree_map((key_strategy, 0u64..50), value_strategy, 1..60).prop_map(|map| {
        let mut entries: Vec<Entry> =
            map.into_iter().map(|((key, sequence), value)| entry(&key, sequence, &value)).collect();
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        entries
    })
}

fn build(entries: &[Entry], restart_interval: usize) -> Vec<u8> {
    let mut builder = BlockBuilder::new(restart_interval);
    for entry in entries {
        builder.add(entry);
    }
    builder.finish()
}

proptest! {
    /// One builder reused through `finish_into` appends, after whatever `output` held, the very bytes a fresh
    /// builder's `finish` returns for each block (ADR-0136).
    #[test]
    fn a_reused_builder_appends_the_bytes_a_fresh_one_returns(
        first in sorted_entries(), second in sorted_entries(), restart_interval in 1usize..6,
    ) {
        let mut builder = BlockBuilder::new(restart_interval);
        let mut output = b"prefix".to_vec();
        for entries in [&first, &second] {
            for entry in entries {
                builder.add(entry);
            }
            builder.finish_into(&mut output);
            prop_assert!(builder.is_empty());
        }
        let expected = [&b"prefix"[..], &build(&first, restart_interval), &build(&second, restart_interval)].concat();
        prop_assert_eq!(output, expected);
    }

    #[test]
    fn block_roundtrips_and_seeks(entries in sorted_entries(), restart_interval in 1usize..6) {
        let block = Arc::new(decode_block(&build(&entries, restart_interval)).unwrap());
        prop_assert_eq!(block.entry_count(), entries.len());
        prop_assert_eq!(BlockCursor::new(block.clone()).collect::<Vec<_>>(), entries.clone());
        for target in &entries {
            for sequence in [target.key.sequence, target.key.sequence + 1, 0, u64::MAX] {
                let expected = entries.iter().find(|e| {
                    compare_internal(&e.key.user_key, e.key.sequence, &target.key.user_key, sequence)
                        != Ordering::Less
                });
                let found = BlockCursor::seek(block.clone(), &target.key.user_key, sequence).next_entry();
                prop_assert_eq!(found.as_ref(), expected);
            }
        }
    }

    #[test]
    fn get_value_without_a_key_buffer_finds_what_seek_finds(
        entries in sorted_entries(),
        restart_interval in 1usize..6,
        queries in proptest::collection::vec((proptest::collection::vec(0u8..4, 0..7), 0u64..52), 1..40),
    ) {
        let block = decode_block(&build(&entries, restart_interval)).unwrap();
        for (user_key, sequence) in queries {
            let expected = entries.iter().find(|e| {
                compare_internal(&e.key.user_key, e.key.sequence, &user_key, sequence) != Ordering::Less
            });
            // The contract: the block holds an entry at or after the query (the index chose the block for it).
            let Some(expected) = expected else { continue };
            let expected = (expected.key.user_key == user_key).then_some((expected.kind, expected.value.as_slice()));
            prop_assert_eq!(block.get_value(&user_key, sequence), expected);
        }
    }

    #[test]
    fn a_known_checksum_decodes_the_block_the_walk_decodes(
        entries in sorted_entries(),
        restart_interval in 1usize..6,
        flip in proptest::option::of(any::<usize>()),
    ) {
        let good = build(&entries, restart_interval);
        let walked = decode_block(&good).unwrap();
        let keys = (walked.first_key(), walked.last_key());
        let crc = u32::from_le_bytes(good[good.len() - CRC_SIZE_BYTES..].try_into().unwrap());
        let mut bytes = good.clone();
        if let Some(position) = flip {
            bytes[position % good.len()] ^= 0x10;
        }
        let expected = decode_block(&bytes);
        for known_crc in [None, Some(crc), Some(crc ^ 1)] {
            let mut buffer = bytes.clone();
            let known = decode_block_known(&mut buffer, known_crc, keys);
            prop_assert_eq!(known.as_ref().map(|(block, _)| block), expected.as_ref(), "known {:?}", known_crc);
            match known {
                Ok((_, returned)) => prop_assert_eq!(returned, crc),
                // A failed decode leaves the buffer whole: a retry compares its bytes with it (ADR-0140).
                Err(_) => prop_assert_eq!(&buffer, &bytes),
            }
        }
    }

    #[test]
    fn decode_block_never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_block(&bytes);
    }

    #[test]
    fn any_flipped_byte_fails_the_block_checksum(entries in sorted_entries(), position_seed in any::<usize>()) {
        let mut bytes = build(&entries, 3);
        let position = position_seed % bytes.len();
        bytes[position] ^= 0x20;
        prop_assert_eq!(decode_block(&bytes).unwrap_err().offset, 0);
    }
}

/// Re-seal `contents` so structural checks (not the CRC) are what fails.
fn resealed(contents: &[u8]) -> Vec<u8> {
    let mut block = contents.to_vec();
    seal(BlockTag::Data, &mut block, 0);
    block
}

#[test]
fn structural_damage_under_a_valid_checksum_is_rejected() {
    let entries = [entry(b"a", 2, b"x"), entry(b"ab", 1, b""), entry(b"b", 5, b"yy")];
    let bytes = build(&entries, 2);
    let contents = &bytes[..bytes.len() - 4];
    // Swap the kind byte of the first entry for a bad one: the first entry's trailer starts at byte 4.
    let mut bad_kind = contents.to_vec();
    bad_kind[4] = 0x00;
    let error = decode_block(&resealed(&bad_kind)).unwrap_err();
    assert_eq!(error.offset, 4, "{error}");
    // An entry count that disagrees with the entries.
    let mut bad_count = contents.to_vec();
    let count_position = bad_count.len() - 4;
    bad_count[count_position] = 7;
    assert!(decode_block(&resealed(&bad_count)).is_err());
    // Too short to hold the counts.
    assert!(decode_block(&resealed(&[0, 0, 0])).is_err());
    // Keys out of order: the entries of two one-entry blocks, "b" then "a", each at a restart point.
    let region = |key: &[u8]| {
        let block = build(&[entry(key, 1, b"v")], 1);
        block[..block.len() - 16].to_vec()
    };
    let (region_b, region_a) = (region(b"b"), region(b"a"));
    let mut swapped = [region_b.clone(), region_a].concat();
    for restart in [0u32, region_b.len() as u32, 2, 2] {
        swapped.extend_from_slice(&restart.to_le_bytes());
    }
    let error = decode_block(&resealed(&swapped)).unwrap_err();
    assert_eq!(error.offset, region_b.len() as u64, "{error}");
    assert!(error.reason.contains("out of order"), "{error}");
}

#[test]
fn restart_entries_share_no_prefix_and_seek_spans_restarts() {
    let entries: Vec<Entry> = (0..40u32).map(|index| entry(format!("key{index:03}").as_bytes(), 1, b"v")).collect();
    let block = Arc::new(decode_block(&build(&entries, 4)).unwrap());
    assert_eq!(block.restart_count, 10);
    for index in 0..block.restart_count {
        assert_eq!(block.restart_key(index).0, entries[index * 4].key.user_key);
    }
    assert_eq!(BlockCursor::seek(block.clone(), b"key0215", 0).next_entry(), Some(entries[22].clone()));
    assert_eq!(BlockCursor::seek(block, b"zzz", 0).next_entry(), None);
}
