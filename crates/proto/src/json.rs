//! Replies as JSON, commands from JSON: the bridge the HTTP `/js?` URIs and
//! the WebSocket `json` sub-protocol use. A RESP2/RESP3 reply stream is cut
//! into whole replies by [`ReplyScanner`] (resumable, so a long reply that
//! arrives in pieces is scanned once), parsed by [`parse_reply`] into a
//! [`Reply`] tree, and written as JSON by [`write_json`]. The mapping:
//!
//! | RESP | JSON |
//! |---|---|
//! | simple string, bulk string, verbatim string (its text), big number | string |
//! | integer | number |
//! | double | number; `inf`, `-inf`, `nan` and numbers past a double's range as strings |
//! | boolean | `true` / `false` |
//! | null, null bulk, null array | `null` |
//! | array, set, push | array |
//! | map | object; a key that is not a string becomes its JSON text |
//! | error, blob error | `{"error": "ERR …"}` |
//! | attribute | left out (the value it annotates stands) |
//!
//! Bytes that are not UTF-8 become U+FFFD, as JSON strings hold text.
//!
//! A frame that answers no command (a pub/sub message pushed to a
//! subscriber, RESP2 array or RESP3 push alike) is written by
//! [`write_push`] as `{"push": [...]}`, so that a WebSocket client tells it
//! from a reply as it tells an error by `{"error": …}`.
//!
//! ```
//! use proto::json::{command_from_json, parse_reply, write_json};
//!
//! let (reply, used) = parse_reply(b"*3\r\n$1\r\na\r\n:2\r\n_\r\n")?.expect("whole");
//! assert_eq!(used, 18);
//! let mut out = Vec::new();
//! write_json(&reply, &mut out);
//! assert_eq!(out, br#"["a",2,null]"#);
//!
//! let args = command_from_json(br#"["SET", "k", 5]"#).unwrap();
//! assert_eq!(args, [&b"SET"[..], b"k", b"5"]);
//! # Ok::<(), proto::json::ReplyError>(())
//! ```

/// Deepest nesting of aggregates a reply may have.
pub const MAX_DEPTH: usize = 64;

/// A byte stream that is not RESP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyError(pub &'static str);

impl std::fmt::Display for ReplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid RESP reply: {}", self.0)
    }
}

impl std::error::Error for ReplyError {}

/// One reply, borrowing its bytes from the stream.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply<'a> {
    /// `+text`.
    Simple(&'a [u8]),
    /// `-text` or `!len` (a blob error).
    Error(&'a [u8]),
    /// `:n`.
    Integer(i64),
    /// `$len`.
    Bulk(&'a [u8]),
    /// `_`, `$-1` or `*-1`.
    Null,
    /// `,text` (as sent: `1.5`, `inf`, `nan`).
    Double(&'a [u8]),
    /// `#t` / `#f`.
    Boolean(bool),
    /// `(digits`.
    BigNumber(&'a [u8]),
    /// `=len` with its three-letter format.
    Verbatim {
        /// `txt`, `mkd`.
        format: &'a [u8],
        /// The text after `fmt:`.
        text: &'a [u8],
    },
    /// `*n`.
    Array(Vec<Reply<'a>>),
    /// `%n`.
    Map(Vec<(Reply<'a>, Reply<'a>)>),
    /// `~n`.
    Set(Vec<Reply<'a>>),
    /// `>n`.
    Push(Vec<Reply<'a>>),
}

/// Finds where whole replies end in a growing buffer, remembering how far
/// it got, so a reply of many elements arriving in pieces is scanned once.
#[derive(Clone, Debug, Default)]
pub struct ReplyScanner {
    /// Start of the first element not yet scanned.
    pos: usize,
    /// Elements still to come in each open aggregate, outermost first.
    open: Vec<u64>,
}

impl ReplyScanner {
    /// A scanner at the start of a reply.
    pub fn new() -> Self {
        ReplyScanner::default()
    }

    /// The length of the whole reply at the start of `buf`, or None while it
    /// is incomplete. Call again with the same bytes and more; after a
    /// reply the scanner is ready for the next one (at the start of the
    /// buffer once the caller dropped the reply's bytes).
    pub fn scan(&mut self, buf: &[u8]) -> Result<Option<usize>, ReplyError> {
        loop {
            let Some((element, end)) = element_header(buf, self.pos)? else {
                return Ok(None);
            };
            self.pos = end;
            match element {
                Element::Scalar => {
                    while let Some(left) = self.open.last_mut() {
                        *left -= 1;
                        if *left > 0 {
                            break;
                        }
                        self.open.pop();
                    }
                }
                Element::Aggregate(n) => {
                    if self.open.len() >= MAX_DEPTH {
                        return Err(ReplyError("nested too deep"));
                    }
                    self.open.push(n);
                    continue;
                }
            }
            if self.open.is_empty() {
                let end = self.pos;
                self.pos = 0;
                return Ok(Some(end));
            }
        }
    }
}

/// What an element's header says comes next.
enum Element {
    /// Nothing: the element is whole.
    Scalar,
    /// That many elements (attributes count their annotated value).
    Aggregate(u64),
}

/// A reply line: its type byte, its text and where the next byte is.
struct Line<'a> {
    kind: u8,
    text: &'a [u8],
    next: usize,
}

/// The line starting at `at`; None while it is incomplete.
fn line(buf: &[u8], at: usize) -> Result<Option<Line<'_>>, ReplyError> {
    let Some(rest) = buf.get(at..) else {
        return Ok(None);
    };
    let Some(nl) = memchr::memchr(b'\n', rest) else {
        return Ok(None);
    };
    if nl < 2 || rest[nl - 1] != b'\r' {
        return Err(ReplyError("line without a type byte or CRLF"));
    }
    Ok(Some(Line {
        kind: rest[0],
        text: &rest[1..nl - 1],
        next: at + nl + 1,
    }))
}

fn parse_int(text: &[u8]) -> Result<i64, ReplyError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or(ReplyError("invalid number"))
}

/// Reads the header of the element at `at`, and for a string the whole
/// string: the element kind and where it ends (for an aggregate, where its
/// first element starts). None while incomplete.
fn element_header(buf: &[u8], at: usize) -> Result<Option<(Element, usize)>, ReplyError> {
    let Some(Line {
        kind,
        text,
        next: end,
    }) = line(buf, at)?
    else {
        return Ok(None);
    };
    let count = |n: i64| u64::try_from(n).map_err(|_| ReplyError("negative length"));
    Ok(Some(match kind {
        b'+' | b'-' | b'_' | b',' | b'#' | b'(' => (Element::Scalar, end),
        b':' => {
            parse_int(text)?;
            (Element::Scalar, end)
        }
        b'$' | b'!' | b'=' => {
            let n = parse_int(text)?;
            if n == -1 && kind == b'$' {
                return Ok(Some((Element::Scalar, end)));
            }
            let n = usize::try_from(count(n)?).map_err(|_| ReplyError("length too large"))?;
            let Some(stop) = end.checked_add(n).and_then(|s| s.checked_add(2)) else {
                return Err(ReplyError("length too large"));
            };
            if buf.len() < stop {
                return Ok(None);
            }
            if &buf[stop - 2..stop] != b"\r\n" {
                return Err(ReplyError("string without CRLF"));
            }
            (Element::Scalar, stop)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = parse_int(text)?;
            if n == -1 && kind == b'*' {
                return Ok(Some((Element::Scalar, end)));
            }
            let n = count(n)?;
            let n = match kind {
                b'%' => n.checked_mul(2),
                b'|' => n.checked_mul(2).and_then(|n| n.checked_add(1)),
                _ => Some(n),
            }
            .ok_or(ReplyError("length too large"))?;
            // An empty aggregate is whole at once, like a scalar.
            let element = if n == 0 {
                Element::Scalar
            } else {
                Element::Aggregate(n)
            };
            (element, end)
        }
        _ => return Err(ReplyError("unknown type byte")),
    }))
}

/// Parses the whole reply at the start of `buf` (None while incomplete).
/// Scans first, so an incomplete reply costs no allocation.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply<'_>, usize)>, ReplyError> {
    let Some(end) = ReplyScanner::new().scan(buf)? else {
        return Ok(None);
    };
    let (reply, used) = parse_at(&buf[..end], 0, 0)?;
    Ok(Some((reply, used)))
}

/// Parses a reply known to be whole (the scanner checked lengths, depth and
/// framing; this checks the rest: numbers, booleans, verbatim formats).
fn parse_at(buf: &[u8], at: usize, depth: usize) -> Result<(Reply<'_>, usize), ReplyError> {
    let incomplete = ReplyError("incomplete reply");
    if depth > MAX_DEPTH {
        return Err(ReplyError("nested too deep"));
    }
    let Line {
        kind,
        text,
        next: end,
    } = line(buf, at)?.ok_or(incomplete)?;
    let string = |end: usize| -> Result<(&[u8], usize), ReplyError> {
        let n = usize::try_from(parse_int(text)?).map_err(|_| ReplyError("negative length"))?;
        let body = buf.get(end..end + n).ok_or(incomplete)?;
        Ok((body, end + n + 2))
    };
    let items = |n: usize, mut pos: usize| -> Result<(Vec<Reply<'_>>, usize), ReplyError> {
        // The scanner saw every element, so `n` is bounded by the buffer.
        let mut v = Vec::with_capacity(n.min(buf.len() / 3));
        for _ in 0..n {
            let (r, next) = parse_at(buf, pos, depth + 1)?;
            v.push(r);
            pos = next;
        }
        Ok((v, pos))
    };
    let len = || -> Result<usize, ReplyError> {
        usize::try_from(parse_int(text)?).map_err(|_| ReplyError("negative length"))
    };
    Ok(match kind {
        b'+' => (Reply::Simple(text), end),
        b'-' => (Reply::Error(text), end),
        b':' => (Reply::Integer(parse_int(text)?), end),
        b'_' => (Reply::Null, end),
        b',' => (Reply::Double(text), end),
        b'(' => (Reply::BigNumber(text), end),
        b'#' => match text {
            b"t" => (Reply::Boolean(true), end),
            b"f" => (Reply::Boolean(false), end),
            _ => return Err(ReplyError("invalid boolean")),
        },
        b'$' | b'*' if text == b"-1" => (Reply::Null, end),
        b'$' => {
            let (s, next) = string(end)?;
            (Reply::Bulk(s), next)
        }
        b'!' => {
            let (s, next) = string(end)?;
            (Reply::Error(s), next)
        }
        b'=' => {
            let (s, next) = string(end)?;
            match s {
                [_, _, _, b':', text @ ..] => (
                    Reply::Verbatim {
                        format: &s[..3],
                        text,
                    },
                    next,
                ),
                _ => return Err(ReplyError("verbatim string without a format")),
            }
        }
        b'*' => {
            let (v, next) = items(len()?, end)?;
            (Reply::Array(v), next)
        }
        b'~' => {
            let (v, next) = items(len()?, end)?;
            (Reply::Set(v), next)
        }
        b'>' => {
            let (v, next) = items(len()?, end)?;
            (Reply::Push(v), next)
        }
        b'%' => {
            let n = len()?;
            let (flat, next) = items(n.checked_mul(2).ok_or(incomplete)?, end)?;
            let mut pairs = Vec::with_capacity(n.min(flat.len()));
            let mut it = flat.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            (Reply::Map(pairs), next)
        }
        b'|' => {
            // Attributes annotate the value after them; the value stands.
            let n = len()?;
            let (_, next) = items(n.checked_mul(2).ok_or(incomplete)?, end)?;
            return parse_at(buf, next, depth + 1);
        }
        _ => return Err(ReplyError("unknown type byte")),
    })
}

/// Appends `reply` as JSON (the mapping is in the module docs).
pub fn write_json(reply: &Reply<'_>, out: &mut Vec<u8>) {
    match reply {
        Reply::Simple(s) | Reply::Bulk(s) | Reply::BigNumber(s) => write_string(s, out),
        Reply::Verbatim { text, .. } => write_string(text, out),
        Reply::Error(e) => {
            out.extend_from_slice(br#"{"error":"#);
            write_string(e, out);
            out.push(b'}');
        }
        Reply::Integer(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Reply::Double(d) => {
            let finite = std::str::from_utf8(d)
                .ok()
                .and_then(|t| t.parse::<f64>().ok())
                .is_some_and(f64::is_finite);
            if finite && is_json_number(d) {
                out.extend_from_slice(d);
            } else {
                write_string(d, out);
            }
        }
        Reply::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Reply::Null => out.extend_from_slice(b"null"),
        Reply::Array(items) | Reply::Set(items) | Reply::Push(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(item, out);
            }
            out.push(b']');
        }
        Reply::Map(pairs) => {
            out.push(b'{');
            for (i, (k, v)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                match k {
                    Reply::Simple(s) | Reply::Bulk(s) | Reply::BigNumber(s) => write_string(s, out),
                    Reply::Verbatim { text, .. } => write_string(text, out),
                    other => {
                        let mut text = Vec::new();
                        write_json(other, &mut text);
                        write_string(&text, out);
                    }
                }
                out.push(b':');
                write_json(v, out);
            }
            out.push(b'}');
        }
    }
}

/// Appends a pushed frame (one that answers no command, such as a pub/sub
/// message) as `{"push": …}`, its value mapped as [`write_json`] maps it.
pub fn write_push(frame: &Reply<'_>, out: &mut Vec<u8>) {
    out.extend_from_slice(br#"{"push":"#);
    write_json(frame, out);
    out.push(b'}');
}

/// Whether `s` is a number by JSON's grammar
/// (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`).
fn is_json_number(s: &[u8]) -> bool {
    let digits = |s: &[u8], i: &mut usize| {
        let start = *i;
        while s.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > start
    };
    let mut i = usize::from(s.first() == Some(&b'-'));
    match s.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            digits(s, &mut i);
        }
        _ => return false,
    }
    if s.get(i) == Some(&b'.') {
        i += 1;
        if !digits(s, &mut i) {
            return false;
        }
    }
    if matches!(s.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(s.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(s, &mut i) {
            return false;
        }
    }
    i == s.len()
}

/// Appends `bytes` as a JSON string (invalid UTF-8 becomes U+FFFD).
pub fn write_string(bytes: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for chunk in bytes.utf8_chunks() {
        for &b in chunk.valid().as_bytes() {
            match b {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0..=0x1f => out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 15)],
                ]),
                _ => out.push(b),
            }
        }
        if !chunk.invalid().is_empty() {
            out.extend_from_slice("\u{fffd}".as_bytes());
        }
    }
    out.push(b'"');
}

/// Why a JSON command was refused: the text of the error reply.
pub const BAD_COMMAND: &str = "ERR a command is a JSON array of strings, e.g. [\"GET\",\"key\"]";

/// A command from JSON: an array of at least one string (numbers are taken
/// as their text, so `["EXPIRE","k",10]` works). Anything else is refused
/// with [`BAD_COMMAND`].
pub fn command_from_json(text: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
    let value: serde_json::Value = serde_json::from_slice(text).map_err(|_| BAD_COMMAND)?;
    let serde_json::Value::Array(items) = value else {
        return Err(BAD_COMMAND);
    };
    if items.is_empty() {
        return Err(BAD_COMMAND);
    }
    items
        .into_iter()
        .map(|v| match v {
            serde_json::Value::String(s) => Ok(s.into_bytes()),
            serde_json::Value::Number(n) => Ok(n.to_string().into_bytes()),
            _ => Err(BAD_COMMAND),
        })
        .collect()
}

/// Harness functions for the `json_reply` fuzz target and its stable
/// property test; they panic only when an invariant breaks.
#[doc(hidden)]
pub mod fuzzing {
    use super::*;

    /// Reply ends found delivering `data[..end]` for each end in turn.
    fn ends(data: &[u8], deliveries: &[usize]) -> (Vec<usize>, Option<ReplyError>) {
        let mut scanner = ReplyScanner::new();
        let (mut found, mut start) = (Vec::new(), 0);
        for &end in deliveries {
            loop {
                match scanner.scan(&data[start..end]) {
                    Ok(Some(n)) => {
                        assert!(n > 0 && start + n <= end);
                        start += n;
                        found.push(start);
                    }
                    Ok(None) => break,
                    Err(e) => return (found, Some(e)),
                }
            }
        }
        (found, None)
    }

    /// Feeds `data` as a RESP reply stream and checks:
    ///
    /// * nothing panics;
    /// * scanning the bytes whole or one at a time finds the same replies;
    /// * every reply the scanner found whole parses, consuming exactly its
    ///   bytes, or is refused by the parser (a number or boolean the
    ///   scanner does not read), and its JSON (as a reply and as a push) is
    ///   valid JSON;
    /// * a JSON command from any bytes is refused or has arguments.
    pub fn fuzz_reply(data: &[u8]) {
        let whole = ends(data, &[data.len()]);
        let bytewise: Vec<usize> = (0..=data.len()).collect();
        assert_eq!(ends(data, &bytewise), whole);
        let mut start = 0;
        for &end in &whole.0 {
            if let Ok(Some((reply, used))) = parse_reply(&data[start..end]) {
                assert_eq!(start + used, end);
                let mut json = Vec::new();
                write_json(&reply, &mut json);
                assert!(
                    serde_json::from_slice::<serde_json::Value>(&json).is_ok(),
                    "invalid JSON {}",
                    String::from_utf8_lossy(&json)
                );
                json.clear();
                write_push(&reply, &mut json);
                assert!(serde_json::from_slice::<serde_json::Value>(&json).is_ok());
            }
            start = end;
        }
        if let Ok(args) = command_from_json(data) {
            assert!(!args.is_empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(resp: &[u8]) -> String {
        let (r, n) = parse_reply(resp).unwrap().expect("whole reply");
        assert_eq!(n, resp.len());
        let mut out = Vec::new();
        write_json(&r, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_type_maps() {
        assert_eq!(json(b"+OK\r\n"), r#""OK""#);
        assert_eq!(json(b"-ERR no\r\n"), r#"{"error":"ERR no"}"#);
        assert_eq!(json(b":-5\r\n"), "-5");
        assert_eq!(json(b"$-1\r\n"), "null");
        assert_eq!(json(b"*-1\r\n"), "null");
        assert_eq!(json(b"_\r\n"), "null");
        assert_eq!(json(b"$5\r\na\"\n\x01\xff\r\n"), r#""a\"\n\u0001�""#);
        assert_eq!(json(b",1.5\r\n"), "1.5");
        assert_eq!(json(b",inf\r\n"), r#""inf""#);
        assert_eq!(json(b",1e+999\r\n"), r#""1e+999""#);
        assert_eq!(json(b"#t\r\n"), "true");
        assert_eq!(
            json(b"(123456789012345678901234\r\n"),
            r#""123456789012345678901234""#
        );
        assert_eq!(json(b"=7\r\ntxt:abc\r\n"), r#""abc""#);
        assert_eq!(json(b"!5\r\nERR x\r\n"), r#"{"error":"ERR x"}"#);
        assert_eq!(json(b"*0\r\n"), "[]");
        assert_eq!(json(b"~1\r\n:1\r\n"), "[1]");
        assert_eq!(
            json(b"%2\r\n+a\r\n*1\r\n:1\r\n:2\r\n$1\r\nb\r\n"),
            r#"{"a":[1],"2":"b"}"#
        );
        assert_eq!(json(b"|1\r\n+k\r\n+v\r\n:7\r\n"), "7");
        assert_eq!(
            json(b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"),
            r#"["message","ch","hi"]"#
        );
    }

    #[test]
    fn pushes_are_marked() {
        for frame in [
            &b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"[..],
            b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n",
        ] {
            let (r, _) = parse_reply(frame).unwrap().unwrap();
            let mut out = Vec::new();
            write_push(&r, &mut out);
            assert_eq!(out, br#"{"push":["message","ch","hi"]}"#);
        }
    }

    #[test]
    fn a_reply_in_pieces_is_scanned_once_through() {
        let reply = b"*2\r\n*2\r\n$3\r\nabc\r\n:1\r\n%0\r\n+next";
        let whole = reply.len() - 5;
        let mut s = ReplyScanner::new();
        for n in 0..whole {
            assert_eq!(s.scan(&reply[..n]).unwrap(), None, "at {n}");
        }
        assert_eq!(s.scan(reply).unwrap(), Some(whole));
        assert_eq!(ReplyScanner::new().scan(reply).unwrap(), Some(whole));
    }

    #[test]
    fn bad_streams_are_errors_not_panics() {
        for bad in [
            &b"?\r\n"[..],
            b"$3\r\nabcd\r\n",
            b"*-2\r\n",
            b":x\r\n",
            b"+a\n",
            b"\r\n",
            b"*99999999999999999999\r\n",
        ] {
            assert!(parse_reply(bad).is_err(), "{bad:?}");
        }
        let deep = "*1\r\n".repeat(MAX_DEPTH + 1);
        assert!(parse_reply(deep.as_bytes()).is_err());
        assert_eq!(parse_reply(b"*3\r\n:1\r\n").unwrap(), None);
    }

    #[test]
    fn commands_from_json() {
        assert_eq!(
            command_from_json(br#"["lrange","l",0,-1]"#).unwrap(),
            [&b"lrange"[..], b"l", b"0", b"-1"]
        );
        for bad in [
            &br#"[]"#[..],
            br#"{"a":1}"#,
            br#"["a",["b"]]"#,
            b"nope",
            br#"["a",null]"#,
        ] {
            assert_eq!(command_from_json(bad), Err(BAD_COMMAND));
        }
    }
}
