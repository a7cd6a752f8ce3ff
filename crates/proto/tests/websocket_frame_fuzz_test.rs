//! The `websocket_frame` fuzz target's harness on stable: every file of
//! `fuzz/corpus/websocket_frame/` (hand-written seeds named `err_*` end in a
//! close code; the others are what the fuzzer kept), then
//! random bytes and random frame-like streams.

mod common;

use common::is_fuzzer_find;
use proptest::prelude::*;
use proto::websocket::fuzzing::fuzz_frames;
use proto::websocket::MessageDecoder;

fn corpus() -> Vec<(String, Vec<u8>)> {
    common::corpus("websocket_frame")
}

#[test]
fn the_corpus_keeps_the_invariants() {
    for (name, data) in corpus() {
        eprintln!("replaying {name} ({} bytes)", data.len());
        fuzz_frames(&data);
    }
}

#[test]
fn error_seeds_end_in_an_error() {
    // Hand-written seeds have names; the fuzzer's finds are named by hash.
    let named = corpus()
        .into_iter()
        .filter(|(name, _)| !is_fuzzer_find(name));
    for (name, data) in named {
        let mut decoder = MessageDecoder::new(1 << 20);
        let mut rest = &data[..];
        let error = loop {
            match decoder.decode(rest) {
                Ok((Some(_), used)) => rest = &rest[used..],
                Ok((None, _)) => break None,
                Err(e) => break Some(e),
            }
        };
        assert_eq!(
            error.is_some(),
            name.starts_with("err_") || name.starts_with("unmasked"),
            "{name}"
        );
    }
}

/// Frame-like bytes: headers with every opcode, mask bit and length form.
fn frames() -> impl Strategy<Value = Vec<u8>> {
    let frame = (
        any::<u8>(),
        any::<bool>(),
        proptest::collection::vec(any::<u8>(), 0..140),
        0u8..3,
    )
        .prop_map(|(b0, masked, payload, form)| {
            let mut f = vec![b0 & 0x8f];
            let m = if masked { 0x80 } else { 0 };
            match form {
                0 if payload.len() < 126 => f.push(m | payload.len() as u8),
                0 | 1 => {
                    f.push(m | 126);
                    f.extend_from_slice(&(payload.len() as u16).to_be_bytes());
                }
                _ => {
                    f.push(m | 127);
                    f.extend_from_slice(&(payload.len() as u64).to_be_bytes());
                }
            }
            if masked {
                f.extend_from_slice(&[1, 2, 3, 4]);
            }
            f.extend_from_slice(&payload);
            f
        });
    proptest::collection::vec(frame, 0..8).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn arbitrary_bytes_keep_the_invariants(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        fuzz_frames(&data);
    }

    #[test]
    fn frame_like_bytes_keep_the_invariants(data in frames()) {
        fuzz_frames(&data);
    }
}
