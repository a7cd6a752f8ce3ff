//! The fuzz harness of the binary-protocol parser: `fuzz/fuzz_targets/
//! memcache_binary.rs` calls [`fuzz_request`], and
//! `tests/memcache_binary_fuzz_test.rs` runs it over the checked-in corpus
//! and random inputs on stable. It panics only when an invariant breaks.

use super::{
    encode_request, parse, write_error, write_response, BinaryError, Command, Frame, Header,
    Parsed, Status, HEADER_LEN, KEY_MAX, RESPONSE_MAGIC,
};

/// The size limits tried: none that matters, memcached's default, and one
/// taken from the input (small, so that values hit it).
fn limits(data: &[u8]) -> [u64; 3] {
    let small = data.last().map_or(0, |&b| u64::from(b) % 64);
    [u64::MAX, 1 << 20, small]
}

/// Parses `data` as a stream of binary requests and checks:
///
/// * no panic, for any size limit;
/// * a frame takes at least a header and at most the buffer, and the bytes
///   it takes plus those it skips are exactly its header and body;
/// * keys are at most 250 bytes and lie, with extras and value, within the
///   bytes taken;
/// * the parser decides from a prefix: every shorter prefix is "need more",
///   every longer one gives the same answer (so bytes arriving in any
///   pieces parse the same);
/// * a request read whole encodes back to the very bytes it came from, and
///   any request re-encoded parses to the same command;
/// * a smaller size limit changes a storage request only into `TooLarge`,
///   with the same key and the value as the bytes to skip;
/// * errors reply as memcached does (none for a bad magic, else "Unknown
///   command" or "Invalid arguments");
/// * every response written for a frame is a well-formed response echoing
///   its opcode and opaque.
pub fn fuzz_request(data: &[u8]) {
    for max_value in limits(data) {
        let mut rest = data;
        // Each frame takes at least a header: the loop ends.
        loop {
            let result = parse(rest, max_value);
            check_decided_by_prefix(rest, max_value, &result);
            match result {
                Ok(None) => break,
                Err(e) => {
                    check_error(&e);
                    break;
                }
                Ok(Some(p)) => {
                    check_frame(rest, &p);
                    if max_value != u64::MAX {
                        check_smaller_limit(rest, &p, max_value);
                    }
                    check_responses(&p);
                    let skip = usize::try_from(p.skip).unwrap_or(usize::MAX);
                    let next = p.consumed.saturating_add(skip);
                    if next >= rest.len() {
                        break;
                    }
                    rest = &rest[next..];
                }
            }
        }
    }
}

/// Where in `buf` the parser's answer was decided: the header for a bad
/// magic, else header, extras and key, or the whole request when it read a
/// value.
fn decision_point(result: &Result<Option<Parsed<'_>>, BinaryError>) -> Option<usize> {
    match result {
        Ok(None) => None,
        Err(BinaryError::BadMagic(_)) => Some(HEADER_LEN),
        Err(BinaryError::BadLengths(h) | BinaryError::InvalidArguments(h)) => {
            Some(HEADER_LEN + usize::from(h.extras_len) + usize::from(h.key_len))
        }
        Ok(Some(p)) => Some(p.consumed),
    }
}

fn check_decided_by_prefix(
    buf: &[u8],
    max_value: u64,
    result: &Result<Option<Parsed<'_>>, BinaryError>,
) {
    let Some(at) = decision_point(result) else {
        // Need more: so does every prefix.
        for n in [0, buf.len() / 2, buf.len().saturating_sub(1)] {
            assert_eq!(parse(&buf[..n], max_value), Ok(None), "prefix {n}");
        }
        return;
    };
    assert!(
        at >= HEADER_LEN && at <= buf.len(),
        "decided at {at} of {}",
        buf.len()
    );
    for n in [0, HEADER_LEN - 1, at / 2, at - 1] {
        if n < at {
            assert_eq!(parse(&buf[..n], max_value), Ok(None), "prefix {n} of {at}");
        }
    }
    assert_eq!(
        &parse(&buf[..at], max_value),
        result,
        "exactly the decided bytes"
    );
}

fn check_error(e: &BinaryError) {
    assert!(!e.to_string().is_empty());
    match (e, e.reply()) {
        (BinaryError::BadMagic(m), None) => assert_ne!(*m, 0x80),
        (BinaryError::BadLengths(h), Some((rh, Status::UnknownCommand))) => {
            assert_eq!(h, &rh);
            assert!(u32::from(h.key_len) + u32::from(h.extras_len) > h.body_len);
        }
        (BinaryError::InvalidArguments(h), Some((rh, Status::InvalidArguments))) => {
            assert_eq!(h, &rh)
        }
        (e, reply) => panic!("{e:?} replies {reply:?}"),
    }
}

fn header_of<'a>(p: &'a Parsed<'_>) -> &'a Header {
    match &p.frame {
        Frame::Request(r) => &r.header,
        Frame::TooLarge { header, .. } | Frame::Unknown { header } => header,
    }
}

fn check_frame(buf: &[u8], p: &Parsed<'_>) {
    let h = header_of(p);
    assert!(p.consumed >= HEADER_LEN && p.consumed <= buf.len());
    assert_eq!(
        p.consumed as u64 + p.skip,
        HEADER_LEN as u64 + u64::from(h.body_len),
        "{p:?}"
    );
    assert_eq!(&buf[..HEADER_LEN], &header_bytes(h)[..]);
    let fixed = usize::from(h.extras_len) + usize::from(h.key_len);
    assert!(HEADER_LEN + fixed <= p.consumed);
    match &p.frame {
        Frame::Request(r) => {
            let (key, value) = key_and_value(&r.command);
            assert!(key.len() <= KEY_MAX);
            assert_eq!(key.len(), usize::from(h.key_len), "{r:?}");
            assert_eq!(HEADER_LEN + fixed + value.len(), p.consumed, "{r:?}");
            let mut again = Vec::new();
            r.encode(&mut again);
            if p.skip == 0 {
                assert_eq!(again, &buf[..p.consumed], "round trip of {r:?}");
            }
            let reparsed = parse(&again, u64::MAX);
            let Ok(Some(Parsed {
                frame: Frame::Request(r2),
                consumed,
                skip: 0,
            })) = reparsed
            else {
                panic!("{r:?} encoded as {again:?} parses as {reparsed:?}");
            };
            assert_eq!(consumed, again.len());
            assert_eq!(r2.command, r.command);
        }
        Frame::TooLarge { key, .. } => {
            assert_eq!(key.len(), usize::from(h.key_len));
            assert_eq!(p.consumed, HEADER_LEN + fixed);
        }
        Frame::Unknown { .. } => assert_eq!(p.consumed, HEADER_LEN + fixed),
    }
}

/// With a value limit below what the unlimited parser read, a storage
/// request becomes TooLarge for the same key; nothing else changes.
fn check_smaller_limit(buf: &[u8], limited: &Parsed<'_>, max_value: u64) {
    let unlimited = parse(buf, u64::MAX).unwrap_or_else(|e| panic!("{e:?} only with a limit"));
    let Some(unlimited) = unlimited else {
        // The unlimited parser waits for a value the limited one skips.
        assert!(
            matches!(limited.frame, Frame::TooLarge { .. }),
            "{limited:?}"
        );
        return;
    };
    match (&limited.frame, &unlimited.frame) {
        (Frame::TooLarge { key, header }, Frame::Request(r)) => {
            let Command::Store { key: k2, value, .. } = &r.command else {
                panic!("{r:?} too large");
            };
            assert_eq!((key, header), (k2, &r.header));
            assert!(value.len() as u64 > max_value);
            assert_eq!(limited.skip, value.len() as u64);
        }
        (a, b) => assert_eq!(a, b),
    }
}

/// The replies a server writes for the frame parse as responses to it.
fn check_responses(p: &Parsed<'_>) {
    let h = header_of(p);
    let mut out = Vec::new();
    write_error(&mut out, h, Status::UnknownCommand);
    let (key, value) = match &p.frame {
        Frame::Request(r) => key_and_value(&r.command),
        _ => (&[][..], &[][..]),
    };
    write_response(
        &mut out,
        h,
        Status::Success,
        h.cas,
        &[1, 2, 3, 4],
        key,
        value,
    );
    let mut at = 0;
    let mut count = 0;
    while at < out.len() {
        let r = &out[at..];
        assert!(r.len() >= HEADER_LEN);
        assert_eq!(r[0], RESPONSE_MAGIC);
        assert_eq!(r[1], h.opcode);
        assert_eq!(&r[12..16], &h.opaque.to_be_bytes());
        let body = u32::from_be_bytes([r[8], r[9], r[10], r[11]]) as usize;
        let fixed = usize::from(r[4]) + usize::from(u16::from_be_bytes([r[2], r[3]]));
        assert!(fixed <= body && HEADER_LEN + body <= r.len());
        at += HEADER_LEN + body;
        count += 1;
    }
    assert_eq!((at, count), (out.len(), 2));
}

fn key_and_value<'a>(c: &Command<'a>) -> (&'a [u8], &'a [u8]) {
    match *c {
        Command::Get { key, .. }
        | Command::Touch { key, .. }
        | Command::Delete { key }
        | Command::Arith { key, .. } => (key, &[]),
        Command::Store { key, value, .. } => (key, value),
        Command::Stat { group } => (group, &[]),
        Command::SaslAuth {
            mechanism, data, ..
        } => (mechanism, data),
        Command::Quit
        | Command::Flush { .. }
        | Command::Noop
        | Command::Version
        | Command::SaslListMechs
        | Command::Verbosity { .. } => (&[], &[]),
    }
}

fn header_bytes(h: &Header) -> Vec<u8> {
    let mut out = Vec::new();
    h.encode(&mut out);
    out
}

/// Request bytes for a seed corpus or a test: `encode_request` with the
/// given opcode, opaque 0 and CAS 0.
pub fn request_bytes(opcode: u8, extras: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
    let header = Header {
        opcode,
        key_len: 0,
        extras_len: 0,
        data_type: 0,
        vbucket: 0,
        body_len: 0,
        opaque: 0,
        cas: 0,
    };
    let mut out = Vec::new();
    encode_request(&mut out, &header, extras, key, value);
    out
}
