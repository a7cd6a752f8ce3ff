//! Property tests of the request parser: arbitrary bytes never panic and never
//! report consuming more than the buffer (through the same harness a fuzz
//! target calls), and random argument vectors survive multibulk encoding.

use std::borrow::Cow;

use proptest::prelude::*;
use proto::fuzzing::fuzz_request;
use proto::resp::RequestParser;

fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Bytes that look like RESP often enough to reach deep into the parser.
fn resp_ish() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just(b"*".to_vec()),
        Just(b"$".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"'".to_vec()),
        Just(b"\\".to_vec()),
        Just(b"\\x4".to_vec()),
        Just(b" ".to_vec()),
        Just(b"\0".to_vec()),
        Just(b"-".to_vec()),
        (0u32..40).prop_map(|n| n.to_string().into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..6),
    ];
    proptest::collection::vec(token, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_keep_the_invariants(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        fuzz_request(&data);
    }

    #[test]
    fn resp_like_bytes_keep_the_invariants(data in resp_ish()) {
        fuzz_request(&data);
    }

    #[test]
    fn pipelines_of_encoded_requests_keep_the_invariants(
        reqs in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 0..5),
            0..5,
        ),
    ) {
        let data: Vec<u8> = reqs.iter().flat_map(|r| encode(r)).collect();
        fuzz_request(&data);
    }

    #[test]
    fn multibulk_round_trip(
        args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..16),
        tail in proptest::collection::vec(any::<u8>(), 0..16),
    ) {
        let encoded = encode(&args);
        let mut buf = encoded.clone();
        buf.extend_from_slice(&tail);
        let (got, consumed) = RequestParser::new().parse(&buf).unwrap().unwrap();
        prop_assert_eq!(consumed, encoded.len());
        let got: Vec<Vec<u8>> = got.into_iter().map(Cow::into_owned).collect();
        prop_assert_eq!(got, args);
        // Every proper prefix is incomplete.
        let mut parser = RequestParser::new();
        for cut in 0..encoded.len() {
            prop_assert_eq!(parser.parse(&encoded[..cut]), Ok(None));
        }
    }

    #[test]
    fn empty_requests_consume_their_line(count in i64::MIN..=0) {
        let buf = format!("*{count}\r\n");
        let got = RequestParser::new().parse(buf.as_bytes()).unwrap().unwrap();
        prop_assert_eq!(got, (Vec::new(), buf.len()));
    }
}
