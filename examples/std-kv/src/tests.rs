//! The store's unit tests, on whichever route this build takes (each test binds a fresh simulated world).
//! Kept out of `store.rs` so that the store's source imports nothing of holdfast, tests included.

#![cfg_attr(
    feature = "interposed",
    expect(
        clippy::disallowed_methods,
        reason = "holdfast issue 38: on the interposed route the tests tear the store's files with std::fs, which the \
                  interpose crate answers from the world"
    )
)]

use holdfast::env::SimEnv;

use crate::enter;
use crate::frame::FRAME_HEADER_BYTES;
use crate::store::{Error, Store};
use crate::sys::fs;

#[test]
fn writes_survive_a_reopen_and_a_checkpoint() {
    let env = SimEnv::new(1);
    let (_entered, dir) = enter(&env);
    let mut store = Store::open(&dir).expect("open");
    store.put(b"a", b"1").expect("put");
    store.put(b"b", b"2").expect("put");
    store.checkpoint().expect("checkpoint");
    store.delete(b"a").expect("delete");
    store.put(b"c", b"3").expect("put");
    drop(store);
    let store = Store::open(&dir).expect("reopen");
    assert_eq!((store.get(b"a"), store.get(b"b"), store.get(b"c")), (None, Some(&b"2"[..]), Some(&b"3"[..])));
    assert_eq!(store.len(), 2);
}

/// ADR-0002's rule, seen from the client: when `put` returns, the writer has synced it. With `--features
/// planted-race` the writer acknowledges before its sync, and on this seed the client runs in that window.
#[test]
fn an_acknowledged_append_has_been_synced() {
    let env = SimEnv::new(1);
    let (_entered, dir) = enter(&env);
    let mut store = Store::open(&dir).expect("open");
    for (round, key) in [b"a", b"b", b"c"].into_iter().enumerate() {
        store.put(key, b"v").expect("put");
        assert_eq!(store.stats().syncs, round as u64 + 1, "put {round} returned before its sync");
    }
    store.checkpoint().expect("checkpoint");
    assert_eq!(store.stats().syncs, 4, "the checkpoint's log truncation is synced before it returns");
}

#[test]
fn a_torn_tail_is_truncated_but_a_bad_frame_before_a_good_one_is_corruption() {
    let env = SimEnv::new(2);
    let (_entered, dir) = enter(&env);
    let mut store = Store::open(&dir).expect("open");
    store.put(b"a", b"1").expect("put");
    store.put(b"b", b"2").expect("put");
    drop(store);
    let log_path = dir.join("log");
    let mut log = fs::read(&log_path).expect("read");
    let first = FRAME_HEADER_BYTES + 5 + 1 + 1;
    fs::write(&log_path, &log[..log.len() - 2]).expect("tear the last frame");
    let store = Store::open(&dir).expect("a torn tail recovers");
    assert_eq!((store.get(b"a"), store.get(b"b")), (Some(&b"1"[..]), None));
    drop(store);
    assert_eq!(fs::read(&log_path).expect("read").len(), first, "the torn tail was truncated");
    log[first - 1] ^= 1; // damage the first frame's value; the second frame is intact
    fs::write(&log_path, &log).expect("write");
    let error = Store::open(&dir).expect_err("corruption");
    assert!(matches!(error, Error::Corruption { offset: 0, .. }), "{error}");
}

#[test]
fn a_damaged_snapshot_is_a_typed_error_naming_file_and_offset() {
    let env = SimEnv::new(3);
    let (_entered, dir) = enter(&env);
    let mut store = Store::open(&dir).expect("open");
    store.put(b"k", b"v").expect("put");
    store.checkpoint().expect("checkpoint");
    drop(store);
    let path = dir.join("snapshot");
    let mut bytes = fs::read(&path).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    fs::write(&path, &bytes).expect("write");
    match Store::open(&dir).expect_err("corruption") {
        Error::Corruption { file, offset: 16, .. } => assert_eq!(file, path),
        other => panic!("expected corruption at offset 16 of the snapshot, got {other}"),
    }
}

#[cfg(feature = "env-fs")]
#[test]
fn a_call_from_a_thread_with_no_world_is_an_error_not_the_host_disk() {
    let error = Store::open("/std-kv").expect_err("no world is bound");
    assert!(matches!(&error, Error::Io(io) if io.kind() == std::io::ErrorKind::NotConnected), "{error}");
}
