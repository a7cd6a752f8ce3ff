//! Table tests of the request parser against Redis 7.0's behaviour: the
//! cases of Redis's tests/unit/protocol.tcl, every protocol error with its
//! exact reply text, the limits, and the quirks of `processMultibulkBuffer`,
//! `processInlineBuffer` and `sdssplitargs` that the parser keeps.

use std::borrow::Cow;

use proto::resp::{ParseResult, RequestParser, DEFAULT_PROTO_MAX_BULK_LEN, PROTO_INLINE_MAX_SIZE};
use proto::ProtocolError;

/// A request's arguments, owned, and the bytes it consumed.
type Request = (Vec<Vec<u8>>, usize);
type Owned = Result<Option<Request>, ProtocolError>;

/// One call of a fresh parser, with owned arguments for comparisons.
fn parse(buf: &[u8]) -> Owned {
    own(RequestParser::new().parse(buf))
}

fn own(r: ParseResult<'_>) -> Owned {
    r.map(|o| o.map(|(args, n)| (args.into_iter().map(Cow::into_owned).collect(), n)))
}

fn args(list: &[&[u8]]) -> Vec<Vec<u8>> {
    list.iter().map(|a| a.to_vec()).collect()
}

/// `buf` is one complete request with these arguments, using all of `buf`.
fn whole(buf: &[u8], want: &[&[u8]]) {
    assert_eq!(
        parse(buf),
        Ok(Some((args(want), buf.len()))),
        "{:?}",
        String::from_utf8_lossy(buf)
    );
}

fn error(buf: &[u8], want: ProtocolError) {
    assert_eq!(parse(buf), Err(want), "{:?}", String::from_utf8_lossy(buf));
}

fn incomplete(buf: &[u8]) {
    assert_eq!(parse(buf), Ok(None), "{:?}", String::from_utf8_lossy(buf));
}

/// Parses `buf` request after request; returns each request and how it ended.
fn parse_all(buf: &[u8]) -> (Vec<Request>, Owned) {
    let mut parser = RequestParser::new();
    let mut rest = buf;
    let mut out = Vec::new();
    loop {
        match own(parser.parse(rest)) {
            Ok(Some((a, n))) => {
                rest = &rest[n..];
                out.push((a, n));
            }
            end => return (out, end),
        }
    }
}

// ---- tests/unit/protocol.tcl (Redis 7.0) ----

#[test]
fn handle_an_empty_query() {
    // `r write "\r\n"` then PING answers PONG: the blank line is skipped.
    let (reqs, end) = parse_all(b"\r\nPING\r\n");
    assert_eq!(reqs, vec![(vec![], 2), (args(&[b"PING"]), 6)]);
    assert_eq!(end, Ok(None));
}

#[test]
fn negative_multibulk_length() {
    let (reqs, end) = parse_all(b"*-10\r\n*1\r\n$4\r\nPING\r\n");
    assert_eq!(reqs, vec![(vec![], 6), (args(&[b"PING"]), 14)]);
    assert_eq!(end, Ok(None));
}

#[test]
fn out_of_range_multibulk_length() {
    error(b"*3000000000\r\n", ProtocolError::InvalidMultibulkLength);
    // Redis 6 refused *20000000 (its limit was 1024*1024); 7.0 allows up to
    // INT_MAX and waits for the arguments.
    incomplete(b"*20000000\r\n");
}

#[test]
fn wrong_multibulk_payload_header() {
    error(
        b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n",
        ProtocolError::ExpectedDollar(b'f'),
    );
}

#[test]
fn negative_multibulk_payload_length() {
    error(
        b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$-10\r\n",
        ProtocolError::InvalidBulkLength,
    );
}

#[test]
fn out_of_range_multibulk_payload_length() {
    error(
        b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$2000000000\r\n",
        ProtocolError::InvalidBulkLength,
    );
}

#[test]
fn non_number_multibulk_payload_length() {
    error(
        b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$blabla\r\n",
        ProtocolError::InvalidBulkLength,
    );
}

#[test]
fn multi_bulk_request_not_followed_by_bulk_arguments() {
    error(b"*1\r\nfoo\r\n", ProtocolError::ExpectedDollar(b'f'));
}

#[test]
fn unbalanced_number_of_quotes() {
    let (reqs, end) = parse_all(b"set \"\"\"test-key\"\"\" test-value\r\nping\r\n");
    assert!(reqs.is_empty());
    assert_eq!(end, Err(ProtocolError::UnbalancedQuotes));
}

/// "Protocol desync regression test #1..3": after "\x00", "*\x00" or "$\x00"
/// the test keeps sending the 7 bytes `payload` until Redis replies with a
/// protocol error and closes. Redis's `strchr` stops at the NUL, so no line
/// end is ever seen and the 64 KiB limit ends it.
#[test]
fn protocol_desync_regressions() {
    for (seq, want) in [
        (&b"\x00"[..], ProtocolError::TooBigInline),
        (b"*\x00", ProtocolError::TooBigMultibulkCount),
        (b"$\x00", ProtocolError::TooBigInline),
    ] {
        let mut buf = seq.to_vec();
        // Line ends after the NUL do not count.
        buf.extend_from_slice(b"\r\n");
        while buf.len() <= PROTO_INLINE_MAX_SIZE {
            incomplete(&buf);
            buf.extend_from_slice(b"payload");
        }
        error(&buf, want);
    }
}

#[test]
fn pipelined_blocking_ops() {
    // "Regression for a crash with blocking ops and pipelining".
    let proto = b"*3\r\n$5\r\nBLPOP\r\n$6\r\nnolist\r\n$1\r\n0\r\n";
    let buf = [&proto[..], &proto[..]].concat();
    let (reqs, end) = parse_all(&buf);
    let one = (args(&[b"BLPOP", b"nolist", b"0"]), proto.len());
    assert_eq!(reqs, vec![one.clone(), one]);
    assert_eq!(end, Ok(None));
}

#[test]
fn large_number_of_args() {
    // "test large number of args": MSET with 10000 pairs and one more.
    let mut want: Vec<Vec<u8>> = vec![b"mset".to_vec()];
    for _ in 0..10_000 {
        want.push(b"k".to_vec());
        want.push(b"v".to_vec());
    }
    want.push(b"{k}2".to_vec());
    want.push(b"v2".to_vec());
    let buf = encode(&want);
    assert_eq!(parse(&buf), Ok(Some((want, buf.len()))));
}

// ---- every error, with the exact reply text ----

#[test]
fn every_error_message() {
    let cases: [(ProtocolError, &[u8]); 7] = [
        (
            ProtocolError::TooBigMultibulkCount,
            b"ERR Protocol error: too big mbulk count string",
        ),
        (
            ProtocolError::TooBigBulkCount,
            b"ERR Protocol error: too big bulk count string",
        ),
        (
            ProtocolError::InvalidMultibulkLength,
            b"ERR Protocol error: invalid multibulk length",
        ),
        (
            ProtocolError::InvalidBulkLength,
            b"ERR Protocol error: invalid bulk length",
        ),
        (
            ProtocolError::ExpectedDollar(b'X'),
            b"ERR Protocol error: expected '$', got 'X'",
        ),
        (
            ProtocolError::TooBigInline,
            b"ERR Protocol error: too big inline request",
        ),
        (
            ProtocolError::UnbalancedQuotes,
            b"ERR Protocol error: unbalanced quotes in request",
        ),
    ];
    for (err, text) in cases {
        assert_eq!(&*err.message(), text, "{err:?}");
    }
}

#[test]
fn each_error_from_a_request() {
    let big = PROTO_INLINE_MAX_SIZE;
    let mut mbulk = b"*".to_vec();
    mbulk.resize(big + 1, b'1');
    let mut bulk = b"*1\r\n$".to_vec();
    bulk.resize(4 + big + 1, b'1');
    let inline = vec![b'a'; big + 1];
    let table: [(&[u8], ProtocolError); 7] = [
        (&mbulk, ProtocolError::TooBigMultibulkCount),
        (&bulk, ProtocolError::TooBigBulkCount),
        (b"*x\r\n", ProtocolError::InvalidMultibulkLength),
        (b"*1\r\n$x\r\n", ProtocolError::InvalidBulkLength),
        (b"*1\r\n:1\r\n", ProtocolError::ExpectedDollar(b':')),
        (&inline, ProtocolError::TooBigInline),
        (b"GET \"k\r\n", ProtocolError::UnbalancedQuotes),
    ];
    for (buf, err) in table {
        error(buf, err);
    }
}

// ---- limits ----

#[test]
fn header_lines_wait_up_to_64k_without_cr() {
    let big = PROTO_INLINE_MAX_SIZE;
    // The count line: `*` and digits, no `\r`.
    let mut buf = b"*".to_vec();
    buf.resize(big, b'1');
    incomplete(&buf);
    buf.push(b'1');
    error(&buf, ProtocolError::TooBigMultibulkCount);
    // A `$` line: counted from the `$`, not from the start of the request.
    let mut buf = b"*2\r\n$4\r\nECHO\r\n$".to_vec();
    let dollar = buf.len() - 1;
    buf.resize(dollar + big, b'1');
    incomplete(&buf);
    buf.push(b'1');
    error(&buf, ProtocolError::TooBigBulkCount);
}

#[test]
fn inline_waits_up_to_64k_without_newline() {
    let mut buf = vec![b'a'; PROTO_INLINE_MAX_SIZE];
    incomplete(&buf);
    buf.push(b'a');
    error(&buf, ProtocolError::TooBigInline);
}

#[test]
fn a_long_inline_line_that_arrives_whole_is_accepted() {
    // Redis checks the size only while no newline has arrived.
    let mut buf = b"ECHO ".to_vec();
    buf.resize(100_000, b'x');
    buf.extend_from_slice(b"\r\n");
    let (a, n) = parse(&buf).unwrap().unwrap();
    assert_eq!((a.len(), a[1].len(), n), (2, 100_000 - 5, buf.len()));
}

#[test]
fn a_long_count_line_that_arrives_whole_is_just_invalid() {
    let mut buf = b"*".to_vec();
    buf.resize(100_000, b'1');
    buf.extend_from_slice(b"\r\n");
    error(&buf, ProtocolError::InvalidMultibulkLength);
}

#[test]
fn multibulk_count_limit_is_int_max() {
    incomplete(b"*2147483647\r\n");
    error(b"*2147483648\r\n", ProtocolError::InvalidMultibulkLength);
    // Far below zero is still just "skip".
    assert_eq!(parse(b"*-9223372036854775808\r\n"), Ok(Some((vec![], 23))));
    error(
        b"*-9223372036854775809\r\n",
        ProtocolError::InvalidMultibulkLength,
    );
}

#[test]
fn bulk_length_limit_is_proto_max_bulk_len() {
    let max = DEFAULT_PROTO_MAX_BULK_LEN;
    incomplete(format!("*1\r\n${max}\r\n").as_bytes());
    error(
        format!("*1\r\n${}\r\n", max + 1).as_bytes(),
        ProtocolError::InvalidBulkLength,
    );
    let mut small = RequestParser::with_max_bulk_len(2);
    assert_eq!(
        small.parse(b"*1\r\n$3\r\n"),
        Err(ProtocolError::InvalidBulkLength)
    );
    assert_eq!(
        own(small.parse(b"*1\r\n$2\r\nab\r\n")),
        Ok(Some((args(&[b"ab"]), 12)))
    );
}

// ---- numbers as string2ll reads them ----

#[test]
fn counts_and_lengths_are_strict_integers() {
    for count in ["", "+1", " 1", "1 ", "01", "-0", "1x", "0x1", "１"] {
        error(
            format!("*{count}\r\n").as_bytes(),
            ProtocolError::InvalidMultibulkLength,
        );
        error(
            format!("*1\r\n${count}\r\n").as_bytes(),
            ProtocolError::InvalidBulkLength,
        );
    }
    assert_eq!(parse(b"*0\r\n"), Ok(Some((vec![], 4))));
    whole(b"*1\r\n$0\r\n\r\n", &[b""]);
}

// ---- quirks of processMultibulkBuffer kept on purpose ----

#[test]
fn the_byte_after_cr_is_not_checked() {
    whole(b"*1\rX$3\rYabcZZ", &[b"abc"]);
    whole(b"*2\r\r$1\r\na\r\n$1\r\nb\n\n", &[b"a", b"b"]);
}

#[test]
fn a_trailing_cr_waits_for_one_more_byte() {
    incomplete(b"*1\r");
    incomplete(b"*1\r\n$3\r");
    incomplete(b"*1\r\n$3\r\nabc");
    incomplete(b"*1\r\n$3\r\nabc\r");
    incomplete(b"PING\r");
}

#[test]
fn a_nul_hides_the_line_end_of_a_header() {
    incomplete(b"*1\0\r\n$4\r\nPING\r\n");
    incomplete(b"*1\r\n$4\0\r\nPING\r\n");
    incomplete(b"PI\0NG\r\n");
}

#[test]
fn payloads_are_binary_safe() {
    whole(
        b"*2\r\n$3\r\na\0b\r\n$4\r\n\r\n\r\n\r\n",
        &[b"a\0b", b"\r\n\r\n"],
    );
}

#[test]
fn expected_dollar_reports_the_byte_found() {
    error(b"*1\r\n\r\n", ProtocolError::ExpectedDollar(b'\r'));
    error(b"*1\r\n\n\r\n", ProtocolError::ExpectedDollar(b'\n'));
    error(b"*1\r\n\xff\r\n", ProtocolError::ExpectedDollar(0xff));
    error(
        b"*2\r\n$1\r\na\r\n*1\r\n",
        ProtocolError::ExpectedDollar(b'*'),
    );
    assert_eq!(
        &*ProtocolError::ExpectedDollar(b'\r').message(),
        b"ERR Protocol error: expected '$', got ' '"
    );
}

#[test]
fn errors_wait_for_a_whole_line() {
    // No verdict on a header until its `\r` and the byte after it are in.
    incomplete(b"*1\r\nfoo");
    incomplete(b"*1\r\nfoo\r");
    error(b"*1\r\nfoo\r\n", ProtocolError::ExpectedDollar(b'f'));
    incomplete(b"*abc");
    error(b"*abc\r\n", ProtocolError::InvalidMultibulkLength);
}

// ---- inline requests ----

#[test]
fn inline_line_ends() {
    whole(b"PING\r\n", &[b"PING"]);
    whole(b"PING\n", &[b"PING"]);
    // Only the `\r` right before the `\n` belongs to the line end.
    whole(b"PING\r\r\n", &[b"PING"]);
    whole(b"\n", &[]);
    whole(b"\r\n", &[]);
    whole(b"  \t \r\n", &[]);
    let (reqs, _) = parse_all(b"GET a\nGET b\r\n\nGET c\n");
    let want = vec![
        (args(&[b"GET", b"a"]), 6),
        (args(&[b"GET", b"b"]), 7),
        (vec![], 1),
        (args(&[b"GET", b"c"]), 6),
    ];
    assert_eq!(reqs, want);
}

#[test]
fn inline_quoting() {
    let table: &[(&[u8], &[&[u8]])] = &[
        (b"SET key value\r\n", &[b"SET", b"key", b"value"]),
        (b"  SET   key\tvalue  \r\n", &[b"SET", b"key", b"value"]),
        (
            b"SET \"a key\" 'a value'\r\n",
            &[b"SET", b"a key", b"a value"],
        ),
        (b"ECHO \"\"\r\n", &[b"ECHO", b""]),
        (b"ECHO ''\r\n", &[b"ECHO", b""]),
        (b"ECHO \"\\x00\\xfF\\x7e\"\n", &[b"ECHO", b"\x00\xff~"]),
        (b"ECHO \"\\n\\r\\t\\b\\a\"\n", &[b"ECHO", b"\n\r\t\x08\x07"]),
        (b"ECHO \"\\\\ \\\" \\z\"\n", &[b"ECHO", b"\\ \" z"]),
        (b"ECHO \"\\xzz\"\n", &[b"ECHO", b"xzz"]),
        (b"ECHO 'it\\'s'\n", &[b"ECHO", b"it's"]),
        (b"ECHO 'a\\nb\\x41'\n", &[b"ECHO", b"a\\nb\\x41"]),
        (
            b"ECHO \"it's\" 'say \"hi\"'\n",
            &[b"ECHO", b"it's", b"say \"hi\""],
        ),
        (b"ECHO ab\"c d\"\n", &[b"ECHO", b"abc d"]),
        (b"ECHO a\x0bb\n", &[b"ECHO", b"a\x0bb"]),
        (b"ECHO \"a\"\x0c\n", &[b"ECHO", b"a"]),
        (b"ECHO \xc3\xa9\n", &[b"ECHO", "é".as_bytes()]),
    ];
    for (line, want) in table {
        whole(line, want);
    }
    for bad in [
        &b"ECHO \"abc\r\n"[..],
        b"ECHO 'abc\r\n",
        b"ECHO \"a\"b\r\n",
        b"ECHO 'a'b\r\n",
        b"ECHO \"a\\\"\r\n",
        b"ECHO 'a\\'\r\n",
        b"ECHO \"a\"\"b\"\r\n",
    ] {
        error(bad, ProtocolError::UnbalancedQuotes);
    }
}

#[test]
fn inline_arguments_borrow_unless_quoted() {
    let mut p = RequestParser::new();
    let (a, _) = p.parse(b"SET k \"v\"\r\n").unwrap().unwrap();
    assert!(matches!(a[0], Cow::Borrowed(_)));
    assert!(matches!(a[1], Cow::Borrowed(_)));
    assert!(matches!(a[2], Cow::Owned(_)));
}

// ---- pipelines and split points ----

/// Multibulk encoding of `args`, as a client writes it.
fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn pipeline() -> (Vec<u8>, Vec<Request>) {
    let commands: Vec<Vec<Vec<u8>>> = vec![
        args(&[b"SET", b"key", b"a value\r\nwith CRLF"]),
        args(&[b"GET", b"key"]),
        args(&[b"PING"]),
        args(&[b"MSET", b"a", b"", b"b", b"\x00\xff"]),
    ];
    let mut buf = Vec::new();
    let mut want = Vec::new();
    for c in commands {
        let e = encode(&c);
        want.push((c, e.len()));
        buf.extend_from_slice(&e);
    }
    // Inline commands and skipped requests in the same stream.
    buf.extend_from_slice(b"ECHO \"x y\"\r\n*0\r\n\n*-1\r\nDEL k\n");
    want.push((args(&[b"ECHO", b"x y"]), 12));
    want.push((vec![], 4));
    want.push((vec![], 1));
    want.push((vec![], 5));
    want.push((args(&[b"DEL", b"k"]), 6));
    (buf, want)
}

#[test]
fn a_pipeline_parses_command_after_command() {
    let (buf, want) = pipeline();
    let (reqs, end) = parse_all(&buf);
    assert_eq!(reqs, want);
    assert_eq!(end, Ok(None));
    assert_eq!(reqs.iter().map(|r| r.1).sum::<usize>(), buf.len());
}

#[test]
fn every_split_point_is_incomplete_then_parses_the_same() {
    let (buf, want) = pipeline();
    let mut start = 0;
    for (req, consumed) in want {
        let one = &buf[start..start + consumed];
        // A fresh parser on each prefix of the request, and one parser that
        // sees the same bytes grow.
        let mut growing = RequestParser::new();
        for cut in 0..one.len() {
            assert_eq!(parse(&one[..cut]), Ok(None), "fresh, cut {cut} of {one:?}");
            assert_eq!(
                own(growing.parse(&one[..cut])),
                Ok(None),
                "growing, cut {cut}"
            );
        }
        assert_eq!(parse(one), Ok(Some((req.clone(), consumed))));
        assert_eq!(own(growing.parse(one)), Ok(Some((req.clone(), consumed))));
        // With the rest of the pipeline behind it, the result is the same.
        assert_eq!(parse(&buf[start..]), Ok(Some((req, consumed))));
        start += consumed;
    }
    assert_eq!(start, buf.len());
}

#[test]
fn a_stream_delivered_in_any_chunk_size_gives_the_same_requests() {
    let (buf, want) = pipeline();
    for chunk in 1..=buf.len() {
        let mut parser = RequestParser::new();
        let mut got = Vec::new();
        let mut start = 0;
        let mut end = 0;
        while end < buf.len() {
            end = (end + chunk).min(buf.len());
            while let Some((a, n)) = own(parser.parse(&buf[start..end])).unwrap() {
                got.push((a, n));
                start += n;
            }
        }
        assert_eq!(got, want, "chunk {chunk}");
    }
}

#[test]
fn a_big_argument_arriving_slowly() {
    let value = vec![b'v'; 1 << 20];
    let buf = encode(&[b"SET".to_vec(), b"k".to_vec(), value.clone()]);
    let mut parser = RequestParser::new();
    for end in (0..buf.len()).step_by(4096) {
        assert_eq!(parser.parse(&buf[..end]), Ok(None));
    }
    let (a, n) = parser.parse(&buf).unwrap().unwrap();
    assert_eq!((a[2].as_ref(), n), (&value[..], buf.len()));
}
