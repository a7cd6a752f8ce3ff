//! The `http_request` fuzz target's harness on stable: every file of
//! `fuzz/corpus/http_request/` (seeds named after what they exercise: `err_*`
//! end in the error their name says), then random bytes and random
//! HTTP-looking streams.

mod common;

use common::corpus;
use proptest::prelude::*;
use proto::http::fuzzing::fuzz_request;
use proto::http::{HeadParser, HttpError, MAX_BODY};

#[test]
fn the_corpus_keeps_the_invariants() {
    for (name, data) in corpus("http_request") {
        eprintln!("replaying {name} ({} bytes)", data.len());
        fuzz_request(&data);
    }
}

#[test]
fn error_seeds_end_in_their_error() {
    let expected = [
        ("err_body_too_large", HttpError::PayloadTooLarge),
        ("err_chunk_too_large", HttpError::PayloadTooLarge),
        ("err_header_too_long", HttpError::HeaderTooLarge),
        ("err_too_many_headers", HttpError::HeaderTooLarge),
        ("err_uri_too_long", HttpError::UriTooLong),
        ("err_transfer_coding", HttpError::NotImplemented),
        ("err_version", HttpError::VersionNotSupported),
    ];
    let files = corpus("http_request");
    for (seed, error) in expected {
        let (_, data) = files
            .iter()
            .find(|(n, _)| n == seed)
            .unwrap_or_else(|| panic!("no seed {seed}"));
        let got = HeadParser::new().parse(data, MAX_BODY);
        if seed == "err_chunk_too_large" {
            let head = got.expect("head").expect("complete");
            let mut decoder = proto::http::ChunkedDecoder::new();
            let result = decoder.decode(&data[head.len..], &mut Vec::new(), MAX_BODY);
            assert_eq!(result, Err(error), "{seed}");
        } else {
            assert_eq!(got, Err(error), "{seed}");
        }
    }
}

/// Bytes that look like HTTP often enough to reach deep into the parsers.
fn http_ish() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just(b"GET /".to_vec()),
        Just(b"PUT /k".to_vec()),
        Just(b"/?get+k".to_vec()),
        Just(b"/js?".to_vec()),
        Just(b" HTTP/1.1\r\n".to_vec()),
        Just(b" HTTP/1.0\r\n".to_vec()),
        Just(b"Host: x\r\n".to_vec()),
        Just(b"Content-Length: ".to_vec()),
        Just(b"Transfer-Encoding: chunked\r\n".to_vec()),
        Just(b"Connection: close\r\n".to_vec()),
        Just(b"Expect: 100-continue\r\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"%".to_vec()),
        Just(b"+".to_vec()),
        Just(b";".to_vec()),
        (0u32..20).prop_map(|n| format!("{n:x}").into_bytes()),
        (0u32..20).prop_map(|n| n.to_string().into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..6),
    ];
    proptest::collection::vec(token, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn arbitrary_bytes_keep_the_invariants(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        fuzz_request(&data);
    }

    #[test]
    fn http_like_bytes_keep_the_invariants(data in http_ish()) {
        fuzz_request(&data);
    }
}
