//! Harness functions for fuzz targets and property tests. Each takes
//! arbitrary bytes and panics only when an invariant of the crate breaks, so a
//! cargo-fuzz target is a one-line call and a proptest can call the same code.
//!
//! `fuzz/fuzz_targets/resp_request.rs` calls [`fuzz_request`], and
//! `tests/fuzz_corpus_test.rs` replays the checked-in corpus through it on
//! stable, so `cargo test` covers every input the fuzzer kept.

use std::borrow::Cow;

use crate::resp::{ParseResult, Protocol, ReplyWriter, RequestParser};
use crate::ProtocolError;

/// What parsing a byte stream request by request produced.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// Each complete request: its arguments and the bytes it consumed.
    requests: Vec<(Vec<Vec<u8>>, usize)>,
    /// How the stream ended: `None` when the rest is an incomplete request.
    error: Option<ProtocolError>,
}

/// Feeds `data` to [`RequestParser`] and checks its invariants:
///
/// * it never panics;
/// * a complete request consumes at least 1 byte and at most the buffer, and
///   its arguments add up to no more bytes than it consumed;
/// * a parser that resumes across calls gives the same result as a fresh one;
/// * delivering `data` in pieces (one byte at a time, in chunks of a size
///   taken from the input, and split at two or three points taken from the
///   input) gives the same requests as delivering it whole. The one allowed
///   difference is Redis's: a line end that arrives after more than 64 KiB
///   ends the stream with a "too big" error instead;
/// * a parser with a small `proto-max-bulk-len` agrees with the default one
///   up to the first bulk it refuses, and refuses it with "invalid bulk
///   length";
/// * every error's reply is one line starting with `ERR Protocol error`, and
///   [`ReplyWriter::error`] sends it as `-<message>\r\n`;
/// * every request parsed, written back as a multibulk array with
///   [`ReplyWriter`] (in RESP2 and RESP3), parses to the same arguments and
///   consumes exactly the bytes written.
pub fn fuzz_request(data: &[u8]) {
    let whole = parse_whole(data);
    if let Some(e) = whole.error {
        check_error(e);
    }
    for (args, _) in &whole.requests {
        check_round_trip(args);
    }

    let seed = |i: usize| data.get(i).map_or(0, |&b| usize::from(b));
    // Bound the number of pieces so that a 64 KiB input stays quick: an
    // inline line is searched from its start on every call.
    let min_chunk = data.len() / 4096 + 1;
    let last = data.len().saturating_sub(1);
    let split_at = |k: usize| if data.is_empty() { 0 } else { k % data.len() };
    let mut deliveries: Vec<(String, Vec<usize>)> = Vec::new();
    for chunk in [min_chunk, min_chunk + 1 + seed(0) % 13] {
        let ends = (chunk..data.len() + chunk)
            .step_by(chunk)
            .map(|e| e.min(data.len()))
            .collect();
        deliveries.push((format!("chunk {chunk}"), ends));
    }
    let mut cuts = vec![
        data.len() / 2,
        split_at(seed(last) * 257 + seed(1)),
        split_at(seed(2) * 31 + seed(last / 2)),
    ];
    cuts.sort_unstable();
    cuts.push(data.len());
    deliveries.push((format!("cuts {cuts:?}"), cuts));

    for (how, ends) in deliveries {
        let pieces = parse_in_pieces(data, &ends);
        if let Some(e) = pieces.error {
            check_error(e);
        }
        let n = pieces.requests.len();
        assert!(
            n <= whole.requests.len(),
            "{how}: pieces parsed more requests"
        );
        assert_eq!(pieces.requests[..], whole.requests[..n], "{how}");
        if n < whole.requests.len() || pieces.error != whole.error {
            assert!(
                matches!(
                    pieces.error,
                    Some(
                        ProtocolError::TooBigInline
                            | ProtocolError::TooBigMultibulkCount
                            | ProtocolError::TooBigBulkCount
                    )
                ),
                "{how}: {:?} vs {:?}",
                pieces.error,
                whole.error
            );
        }
    }

    // A small proto-max-bulk-len changes nothing before the first bulk it
    // refuses.
    let max = (seed(1) % 8) as u64;
    let small = parse_with(data, RequestParser::with_max_bulk_len(max));
    if let Some(e) = small.error {
        check_error(e);
    }
    let n = small.requests.len();
    assert!(n <= whole.requests.len(), "max {max}: parsed more requests");
    assert_eq!(small.requests[..], whole.requests[..n], "max {max}");
    if n < whole.requests.len() || small.error != whole.error {
        assert_eq!(
            small.error,
            Some(ProtocolError::InvalidBulkLength),
            "max {max}: vs {:?}",
            whole.error
        );
    }
}

/// Checks the shape of one complete request found in `available` bytes.
fn check_request(args: &[Cow<'_, [u8]>], consumed: usize, available: usize) {
    assert!(consumed >= 1, "a request must consume something");
    assert!(consumed <= available, "consumed {consumed} of {available}");
    let total: usize = args.iter().map(|a| a.len()).sum();
    assert!(total <= consumed, "arguments larger than their request");
}

/// An error's reply is one line in Redis's words, and the writer sends it
/// unchanged.
fn check_error(e: ProtocolError) {
    let msg = e.message();
    assert!(
        msg.starts_with(b"ERR Protocol error"),
        "{e:?}: {:?}",
        String::from_utf8_lossy(&msg)
    );
    assert!(
        !msg.iter().any(|&b| b == b'\r' || b == b'\n'),
        "{e:?}: a line break in the reply"
    );
    assert!(!e.log_reason().is_empty());
    let mut out = Vec::new();
    ReplyWriter::new(&mut out, Protocol::Resp2).error(&msg);
    assert_eq!(out, [&b"-"[..], &msg, b"\r\n"].concat(), "{e:?}");
}

/// Arguments written as a client writes them (`*<n>` then `$<len>` bulks)
/// parse back to themselves, consuming exactly what was written.
fn check_round_trip(args: &[Vec<u8>]) {
    if args.is_empty() {
        // `*0` is an empty request, like the blank line that gave `args`.
        return;
    }
    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        let mut out = Vec::new();
        let mut w = ReplyWriter::new(&mut out, protocol);
        w.array_len(args.len());
        for a in args {
            w.bulk(a);
        }
        let parsed = RequestParser::new().parse(&out);
        let Ok(Some((got, consumed))) = parsed else {
            panic!("{protocol:?}: {args:?} written as {out:?} parsed as {parsed:?}");
        };
        assert_eq!(consumed, out.len(), "{protocol:?}: {args:?}");
        assert_eq!(got, args, "{protocol:?}");
    }
}

fn parse_whole(data: &[u8]) -> Outcome {
    let mut resumed = RequestParser::new();
    parse_all(data, |rest| {
        let fresh = RequestParser::new().parse(rest);
        let again = resumed.parse(rest);
        assert_eq!(fresh, again, "a reused parser disagrees with a fresh one");
        fresh
    })
}

/// Parses all of `data` at once, request after request, with `parser`.
fn parse_with(data: &[u8], mut parser: RequestParser) -> Outcome {
    parse_all(data, |rest| parser.parse(rest))
}

/// Runs `parse` over `data` request after request, checking each, until it
/// needs more bytes or fails.
fn parse_all<'a>(data: &'a [u8], mut parse: impl FnMut(&'a [u8]) -> ParseResult<'a>) -> Outcome {
    let mut requests = Vec::new();
    let mut rest = data;
    loop {
        match parse(rest) {
            Ok(Some((args, consumed))) => {
                check_request(&args, consumed, rest.len());
                requests.push((args.into_iter().map(Cow::into_owned).collect(), consumed));
                rest = &rest[consumed..];
            }
            Ok(None) => {
                return Outcome {
                    requests,
                    error: None,
                }
            }
            Err(e) => {
                return Outcome {
                    requests,
                    error: Some(e),
                }
            }
        }
    }
}

/// Delivers `data` as a server receives it: the bytes up to each of `ends`
/// (non-decreasing) arrive in turn and are appended to the unconsumed ones,
/// and one parser for the whole stream parses after each arrival.
fn parse_in_pieces(data: &[u8], ends: &[usize]) -> Outcome {
    let mut requests = Vec::new();
    let mut parser = RequestParser::new();
    let mut start = 0;
    for &end in ends {
        let end = end.clamp(start, data.len());
        loop {
            let buf = &data[start..end];
            match parser.parse(buf) {
                Ok(Some((args, consumed))) => {
                    check_request(&args, consumed, buf.len());
                    requests.push((args.into_iter().map(Cow::into_owned).collect(), consumed));
                    start += consumed;
                }
                Ok(None) => break,
                Err(e) => {
                    return Outcome {
                        requests,
                        error: Some(e),
                    }
                }
            }
        }
    }
    Outcome {
        requests,
        error: None,
    }
}
