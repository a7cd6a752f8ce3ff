//! Replays the checked-in cargo-fuzz corpus (`fuzz/corpus/resp_request/`,
//! seeds plus what the fuzzer kept) through the same harness the fuzz target
//! calls, so a stable `cargo test` covers every input and every regression
//! the fuzzer found. See `fuzz/README.md` for running the fuzzer itself.

mod common;

use common::corpus;
use proto::fuzzing::fuzz_request;
use proto::resp::RequestParser;

#[test]
fn resp_request_corpus_keeps_the_invariants() {
    let files = corpus("resp_request");
    for (name, data) in &files {
        // Name the input that broke before the harness's panic message.
        eprintln!("replaying {name} ({} bytes)", data.len());
        fuzz_request(data);
    }
    eprintln!("replayed {} inputs", files.len());
}

/// How a stream parsed whole ends: `Some(error)` or `None` (incomplete).
fn ending(data: &[u8]) -> Option<proto::ProtocolError> {
    let mut parser = RequestParser::new();
    let mut rest = data;
    loop {
        match parser.parse(rest) {
            Ok(Some((_, consumed))) => rest = &rest[consumed..],
            Ok(None) => return None,
            Err(e) => return Some(e),
        }
    }
}

#[test]
fn the_seed_corpus_covers_every_protocol_error() {
    // The seeds are named after what they exercise; each error kind has one,
    // and a seed named `err_*` really ends in an error (`half_*` and `huge_*`
    // in none).
    let files = corpus("resp_request");
    let mut names = Vec::new();
    for (name, data) in &files {
        if name.starts_with("err_") {
            assert!(ending(data).is_some(), "{name} parses without an error");
        } else if name.starts_with("half_") || name.starts_with("huge_") {
            assert_eq!(ending(data), None, "{name}");
        }
        names.push(name.clone());
    }
    for prefix in [
        "err_too_big_mbulk",
        "err_too_big_bulk",
        "err_invalid_mbulk",
        "err_bulk",
        "err_expected_dollar",
        "err_too_big_inline",
        "err_unbalanced",
        "half_",
        "huge_",
        "pipeline_",
        "inline_",
        "multibulk_",
    ] {
        assert!(
            names.iter().any(|n| n.starts_with(prefix)),
            "no seed named {prefix}*"
        );
    }
}
