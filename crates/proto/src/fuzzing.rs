//! Harness functions for fuzz targets and property tests. Each takes
//! arbitrary bytes and panics only when an invariant of the crate breaks, so a
//! cargo-fuzz target is a one-line call and a proptest can call the same code.

use crate::resp::RequestParser;
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
/// * delivering `data` in small pieces gives the same requests as delivering
///   it whole. The one allowed difference is Redis's: a line end that arrives
///   after more than 64 KiB ends the stream with a "too big" error instead.
pub fn fuzz_request(data: &[u8]) {
    let whole = parse_whole(data);
    for chunk in [1, 2 + usize::from(data.first().copied().unwrap_or(0) % 13)] {
        let pieces = parse_in_pieces(data, chunk);
        let n = pieces.requests.len();
        assert!(n <= whole.requests.len(), "pieces parsed more requests");
        assert_eq!(pieces.requests[..], whole.requests[..n], "chunk {chunk}");
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
                "chunk {chunk}: {:?} vs {:?}",
                pieces.error,
                whole.error
            );
        }
    }
}

/// Checks the shape of one complete request found in `available` bytes.
fn check_request(args: &[std::borrow::Cow<'_, [u8]>], consumed: usize, available: usize) {
    assert!(consumed >= 1, "a request must consume something");
    assert!(consumed <= available, "consumed {consumed} of {available}");
    let total: usize = args.iter().map(|a| a.len()).sum();
    assert!(total <= consumed, "arguments larger than their request");
}

fn parse_whole(data: &[u8]) -> Outcome {
    let mut requests = Vec::new();
    let mut resumed = RequestParser::new();
    let mut rest = data;
    loop {
        let fresh = RequestParser::new().parse(rest);
        let again = resumed.parse(rest);
        assert_eq!(fresh, again, "a reused parser disagrees with a fresh one");
        match fresh {
            Ok(Some((args, consumed))) => {
                check_request(&args, consumed, rest.len());
                requests.push((args.into_iter().map(|a| a.into_owned()).collect(), consumed));
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

/// Appends `data` to a buffer `chunk` bytes at a time, parsing after each
/// append as a server would, with one parser for the whole stream.
fn parse_in_pieces(data: &[u8], chunk: usize) -> Outcome {
    let mut requests = Vec::new();
    let mut parser = RequestParser::new();
    let mut start = 0;
    for end in (chunk..data.len() + chunk).step_by(chunk) {
        let end = end.min(data.len());
        loop {
            let buf = &data[start..end];
            match parser.parse(buf) {
                Ok(Some((args, consumed))) => {
                    check_request(&args, consumed, buf.len());
                    requests.push((args.into_iter().map(|a| a.into_owned()).collect(), consumed));
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
