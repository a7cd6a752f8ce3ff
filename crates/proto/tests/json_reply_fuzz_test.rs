//! The `json_reply` fuzz target's harness on stable: every file of
//! `fuzz/corpus/json_reply/`, then random bytes and random RESP3-looking
//! streams.

mod common;

use proptest::prelude::*;
use proto::json::fuzzing::fuzz_reply;

#[test]
fn the_corpus_keeps_the_invariants() {
    for (name, data) in common::corpus("json_reply") {
        eprintln!("replaying {name} ({} bytes)", data.len());
        fuzz_reply(&data);
    }
}

/// Bytes that look like RESP3 replies.
fn replies() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just(b"*".to_vec()),
        Just(b"%".to_vec()),
        Just(b"~".to_vec()),
        Just(b">".to_vec()),
        Just(b"|".to_vec()),
        Just(b"$".to_vec()),
        Just(b"=".to_vec()),
        Just(b"!".to_vec()),
        Just(b"+".to_vec()),
        Just(b"-".to_vec()),
        Just(b":".to_vec()),
        Just(b",".to_vec()),
        Just(b"#t".to_vec()),
        Just(b"_".to_vec()),
        Just(b"(".to_vec()),
        Just(b"txt:".to_vec()),
        Just(b"\r\n".to_vec()),
        (0u32..6).prop_map(|n| n.to_string().into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..4),
    ];
    proptest::collection::vec(token, 0..60).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn arbitrary_bytes_keep_the_invariants(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        fuzz_reply(&data);
    }

    #[test]
    fn reply_like_bytes_keep_the_invariants(data in replies()) {
        fuzz_reply(&data);
    }
}
