//! `wal_decode`: the WAL decoders never panic, and what they accept round-trips.

use engine::wal::{
    Record, RecordKind, WalEnd, decode_batch, decode_record_at, decode_segment, encode_batch, encode_record_padded,
    record_padding,
};

/// The harness. Panics on a finding.
pub fn check(data: &[u8]) {
    // The input as a batch payload (no checksum in the way): decode, re-encode, decode again.
    if let Ok(batch) = decode_batch(data) {
        let encoded = encode_batch(&batch);
        assert_eq!(decode_batch(&encoded).as_ref(), Ok(&batch), "a decoded batch does not round-trip");
        // The batch format has one encoding per batch: anything else accepted means bytes were ignored.
        assert_eq!(encoded, data, "decode_batch accepted a non-canonical encoding");
    }
    // The input as a segment, as is (checksum and damage-classification paths) and resealed (structure paths).
    check_segment(data);
    let resealed = crate::reseal::reseal_wal(data);
    if resealed != data {
        check_segment(&resealed);
    }
}

fn check_segment(data: &[u8]) {
    let scan = decode_segment(data);
    let mut previous_end = 0u64;
    for (offset, record) in &scan.records {
        // Records tile the valid prefix, each after its declared zero padding (ADR-0067).
        let pad_bytes = record_padding(data, *offset as usize);
        assert_eq!(*offset, previous_end + u64::from(pad_bytes), "records do not tile the segment's valid prefix");
        let gap = &data[previous_end as usize..*offset as usize];
        assert!(gap.iter().all(|&byte| byte == 0), "padding before a record is not zero");
        let (again, synced_offset, next) =
            decode_record_at(data, *offset as usize).expect("a record decode_segment returned must decode again");
        assert_eq!(&again, record, "decode_record_at disagrees with decode_segment");
        assert!(synced_offset <= *offset, "an accepted record claims more synced bytes than precede it");
        // Records are canonical too: re-encoding gives back exactly the bytes.
        let reencoded = match record {
            Record::Batch(batch) => {
                encode_record_padded(RecordKind::Batch, &encode_batch(batch), synced_offset, pad_bytes)
            }
            Record::Seal => encode_record_padded(RecordKind::Seal, &[], synced_offset, pad_bytes),
        };
        assert_eq!(reencoded, &data[*offset as usize..next], "a record does not re-encode to its bytes");
        previous_end = next as u64;
    }
    match &scan.end {
        WalEnd::Clean => assert_eq!(previous_end, data.len() as u64, "a clean segment's records do not reach its end"),
        WalEnd::TornTail { offset } => {
            assert_eq!(*offset, previous_end, "a torn tail does not start after the last valid record");
            assert!(*offset < data.len() as u64, "a torn tail starts at or past the end");
        }
        WalEnd::Corrupt { offset, .. } => {
            assert!(*offset >= previous_end, "corruption reported inside an accepted record");
            assert!(*offset <= data.len() as u64, "corruption reported past the end");
        }
    }
}
