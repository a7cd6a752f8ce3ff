//! The `nats_request` fuzz target's harness on stable: every file of
//! `fuzz/corpus/nats_request/` (hand-written seeds named `err_*` end in an
//! error), then random NATS-like byte streams.

mod common;

use proptest::prelude::*;
use proto::nats::fuzzing::fuzz_ops;
use proto::nats::{Parser, DEFAULT_MAX_PAYLOAD};

#[test]
fn nats_request_corpus_keeps_the_invariants() {
    for (name, data) in common::corpus("nats_request") {
        eprintln!("replaying {name} ({} bytes)", data.len());
        fuzz_ops(&data);
    }
}

/// How a seed's operations end when parsed whole (with the seed's own
/// settings): true when in an error.
fn ends_in_error(data: &[u8]) -> bool {
    let mut parser = Parser::new(usize::from(data[0]) * 16);
    parser.set_headers(data[1] & 1 == 1);
    let mut rest = &data[3..];
    loop {
        match parser.parse(rest) {
            Ok(Some((_, n))) => rest = &rest[n..],
            Ok(None) => return false,
            Err(_) => return true,
        }
    }
}

#[test]
fn error_seeds_end_in_an_error() {
    for (name, data) in common::corpus("nats_request") {
        if common::is_fuzzer_find(&name) {
            continue;
        }
        assert_eq!(ends_in_error(&data), name.starts_with("err_"), "{name}");
    }
}

fn nats_ish() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just(b"PUB ".to_vec()),
        Just(b"HPUB ".to_vec()),
        Just(b"SUB ".to_vec()),
        Just(b"UNSUB ".to_vec()),
        Just(b"PING".to_vec()),
        Just(b"PONG".to_vec()),
        Just(b"CONNECT {}".to_vec()),
        Just(b"a.b ".to_vec()),
        Just(b"1 ".to_vec()),
        Just(b"2".to_vec()),
        Just(b"12 ".to_vec()),
        Just(b"NATS/1.0\r\n\r\n".to_vec()),
        Just(b"hi".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\n".to_vec()),
        Just(b" ".to_vec()),
        prop::collection::vec(any::<u8>(), 0..4),
    ];
    (
        prop::collection::vec(any::<u8>(), 3),
        prop::collection::vec(token, 0..24),
    )
        .prop_map(|(head, tokens)| {
            let mut v = head;
            v.extend(tokens.concat());
            v
        })
}

proptest! {
    #[test]
    fn random_streams_keep_the_invariants(data in nats_ish()) {
        fuzz_ops(&data);
    }

    #[test]
    fn random_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..256)) {
        fuzz_ops(&data);
        let _ = Parser::new(DEFAULT_MAX_PAYLOAD).parse(&data);
    }
}
