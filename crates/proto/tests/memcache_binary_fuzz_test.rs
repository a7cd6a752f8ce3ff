//! The memcached binary parser's fuzz harness on stable: every file of the
//! checked-in corpus (`fuzz/corpus/memcache_binary/`, seeds plus what the
//! fuzzer kept), random bytes, and random pipelines of well-formed and
//! damaged requests. See `fuzz/README.md` for running the fuzzer itself.

mod common;

use proptest::prelude::*;
use proto::memcache::binary::fuzzing::{fuzz_request, request_bytes};
use proto::memcache::binary::{opcode, parse, BinaryError, Frame, Status};

fn corpus() -> Vec<(String, Vec<u8>)> {
    common::corpus("memcache_binary")
}

#[test]
fn corpus_keeps_the_invariants() {
    let files = corpus();
    for (name, data) in &files {
        eprintln!("replaying {name} ({} bytes)", data.len());
        fuzz_request(data);
    }
}

/// How the first request of `data` ends: the reply status of an error, or
/// None when it parses.
fn first_error(data: &[u8]) -> Option<Option<Status>> {
    let mut rest = data;
    loop {
        match parse(rest, 1 << 20) {
            Ok(Some(p)) => {
                let next = p.consumed + p.skip as usize;
                if next >= rest.len() {
                    return None;
                }
                rest = &rest[next..];
            }
            Ok(None) => return None,
            Err(e) => return Some(e.reply().map(|(_, s)| s)),
        }
    }
}

#[test]
fn seeds_named_err_end_in_an_error_and_the_others_do_not() {
    for (name, data) in corpus() {
        if !name.starts_with(|c: char| c.is_ascii_lowercase()) || common::is_fuzzer_find(&name) {
            continue;
        }
        let ending = first_error(&data);
        match name.as_str() {
            n if n.starts_with("err_bad_magic") => assert_eq!(ending, Some(None), "{n}"),
            "err_key_past_body" | "err_extras_past_body" => {
                assert_eq!(ending, Some(Some(Status::UnknownCommand)), "{name}")
            }
            n if n.starts_with("err_") => {
                assert_eq!(ending, Some(Some(Status::InvalidArguments)), "{n}")
            }
            n => assert_eq!(ending, None, "{n}"),
        }
    }
}

/// A request of any opcode memcached knows (and a few it does not), with
/// extras, key and value of plausible and implausible lengths.
fn request() -> impl Strategy<Value = Vec<u8>> {
    let op = prop_oneof![0u8..0x25, Just(0x30), any::<u8>()];
    let extras = prop_oneof![Just(0usize), Just(4), Just(8), Just(20), 0usize..24]
        .prop_flat_map(|n| proptest::collection::vec(any::<u8>(), n));
    let key = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..8),
        proptest::collection::vec(Just(b'k'), 249..252),
    ];
    let value = proptest::collection::vec(any::<u8>(), 0..40);
    (op, extras, key, value, any::<u64>(), any::<u32>()).prop_map(
        |(op, extras, key, value, cas, opaque)| {
            let mut r = request_bytes(op, &extras, &key, &value);
            r[12..16].copy_from_slice(&opaque.to_be_bytes());
            r[16..24].copy_from_slice(&cas.to_be_bytes());
            r
        },
    )
}

/// A pipeline of requests, some damaged: a byte changed, or cut short.
fn pipeline() -> impl Strategy<Value = Vec<u8>> {
    let damaged =
        (request(), any::<usize>(), any::<u8>(), 0u8..4).prop_map(|(mut r, at, byte, how)| {
            let at = at % r.len();
            match how {
                0 => r[at] = byte,
                1 => r.truncate(at),
                _ => {}
            }
            r
        });
    proptest::collection::vec(damaged, 0..8).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_keep_the_invariants(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        fuzz_request(&data);
    }

    #[test]
    fn random_pipelines_keep_the_invariants(data in pipeline()) {
        fuzz_request(&data);
    }

    #[test]
    fn every_valid_get_parses(key in proptest::collection::vec(any::<u8>(), 1..=250)) {
        let data = request_bytes(opcode::GETK, &[], &key, &[]);
        let p = parse(&data, 0).unwrap().unwrap();
        prop_assert_eq!(p.consumed, data.len());
        prop_assert!(matches!(p.frame, Frame::Request(_)));
    }

    #[test]
    fn a_key_over_250_bytes_closes(extra in 1usize..100) {
        let data = request_bytes(opcode::GET, &[], &vec![b'k'; 250 + extra], &[]);
        prop_assert!(matches!(parse(&data, 1 << 20), Err(BinaryError::InvalidArguments(_))));
    }
}
