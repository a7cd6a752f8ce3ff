//! The NATS client protocol (what a client sends: `CONNECT`, `PUB`, `HPUB`,
//! `SUB`, `UNSUB`, `PING`, `PONG`, `INFO`) as a sans-IO parser, and the
//! writers for what a server sends (`MSG`, `HMSG`, `-ERR`). The limits and
//! the way a bad line ends the connection follow nats-server 2.9:
//!
//! - a verb is matched without regard to case, and arguments are separated
//!   by any run of spaces and tabs; a line ends in `\n`, with an optional
//!   `\r` before it;
//! - a control line longer than [`MAX_CONTROL_LINE`] is refused with
//!   `-ERR 'maximum control line exceeded'`;
//! - an unknown verb, or a payload not followed by `\r\n`, is
//!   `-ERR 'Unknown Protocol Operation'`;
//! - a payload larger than the server's `max_payload` is
//!   `-ERR 'Maximum Payload Violation'`;
//! - arguments that do not parse (a missing or negative size, the wrong
//!   number of arguments, headers larger than the message, `HPUB` from a
//!   client that did not ask for headers) close the connection without a
//!   reply, as nats-server does.
//!
//! Every error ends the connection; the caller sends [`Error::reply`] first
//! when there is one.

/// The longest control line (verb and arguments) a client may send.
pub const MAX_CONTROL_LINE: usize = 4096;

/// nats-server's default `max_payload`.
pub const DEFAULT_MAX_PAYLOAD: usize = 1 << 20;

/// One client operation, borrowing the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op<'a> {
    /// `CONNECT <json>`: the options, unparsed.
    Connect(&'a [u8]),
    /// `PUB` or `HPUB`: a message.
    Pub {
        /// The subject published to (not checked here).
        subject: &'a [u8],
        /// Where replies go, if the publisher waits for one.
        reply: Option<&'a [u8]>,
        /// The header block of an `HPUB` (starting with `NATS/1.0`).
        headers: Option<&'a [u8]>,
        /// The message.
        payload: &'a [u8],
    },
    /// `SUB <subject> [queue] <sid>`.
    Sub {
        /// The subject, possibly with `*` and `>` wildcards (not checked).
        subject: &'a [u8],
        /// The queue group, if any.
        queue: Option<&'a [u8]>,
        /// The client's name for the subscription.
        sid: &'a [u8],
    },
    /// `UNSUB <sid> [max]`.
    Unsub {
        /// The subscription.
        sid: &'a [u8],
        /// End after this many messages in all; `None` (also for a max of
        /// 0 or one that is not a number, as nats-server) ends it now.
        max: Option<u64>,
    },
    /// `PING`.
    Ping,
    /// `PONG`.
    Pong,
    /// `INFO`, which a client may send and a server ignores.
    Info,
}

/// Why the input cannot go on; every error ends the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// Not a verb of the protocol, or a payload without its `\r\n`.
    UnknownOperation,
    /// A control line past [`MAX_CONTROL_LINE`].
    ControlLineTooLong,
    /// A payload past the server's `max_payload`.
    MaxPayload,
    /// Arguments that do not parse: closed without a reply.
    BadArguments,
}

impl Error {
    /// The `-ERR` line nats-server sends before closing, if any.
    pub fn reply(self) -> Option<&'static [u8]> {
        match self {
            Error::UnknownOperation => Some(b"-ERR 'Unknown Protocol Operation'\r\n"),
            Error::ControlLineTooLong => Some(b"-ERR 'maximum control line exceeded'\r\n"),
            Error::MaxPayload => Some(b"-ERR 'Maximum Payload Violation'\r\n"),
            Error::BadArguments => None,
        }
    }
}

/// The verbs a client may send.
const VERBS: [&[u8]; 8] = [
    b"CONNECT", b"PUB", b"HPUB", b"SUB", b"UNSUB", b"PING", b"PONG", b"INFO",
];

/// Parses client operations one at a time.
#[derive(Debug, Clone)]
pub struct Parser {
    max_payload: usize,
    headers: bool,
}

impl Parser {
    /// A parser that accepts payloads up to `max_payload` bytes; `HPUB` is
    /// refused until [`Parser::set_headers`] allows it.
    pub fn new(max_payload: usize) -> Parser {
        Parser {
            max_payload,
            headers: false,
        }
    }

    /// Allows `HPUB` (the client's CONNECT said `"headers":true`).
    pub fn set_headers(&mut self, on: bool) {
        self.headers = on;
    }

    /// The next operation at the start of `buf` and the bytes it takes;
    /// `Ok(None)` when `buf` holds only part of one.
    pub fn parse<'a>(&self, buf: &'a [u8]) -> Result<Option<(Op<'a>, usize)>, Error> {
        let Some(nl) = memchr::memchr(b'\n', buf) else {
            if buf.len() > MAX_CONTROL_LINE + 1 {
                return Err(Error::ControlLineTooLong);
            }
            // Say no as soon as the start cannot become a verb.
            let word_end = buf
                .iter()
                .position(|b| !b.is_ascii_alphabetic())
                .unwrap_or(buf.len());
            if word_end < buf.len() {
                verb(&buf[..word_end], buf[word_end])?;
            } else if !VERBS
                .iter()
                .any(|v| v.len() >= buf.len() && v[..buf.len()].eq_ignore_ascii_case(buf))
            {
                return Err(Error::UnknownOperation);
            }
            return Ok(None);
        };
        let line = buf[..nl].strip_suffix(b"\r").unwrap_or(&buf[..nl]);
        if line.len() > MAX_CONTROL_LINE {
            return Err(Error::ControlLineTooLong);
        }
        let word_end = line
            .iter()
            .position(|b| !b.is_ascii_alphabetic())
            .unwrap_or(line.len());
        let after = line.get(word_end).copied().unwrap_or(b'\n');
        let verb = verb(&line[..word_end], after)?;
        let args: Vec<&[u8]> = line[word_end..]
            .split(|&b| b == b' ' || b == b'\t')
            .filter(|a| !a.is_empty())
            .collect();
        let line_end = nl + 1;
        let op = match verb {
            b"CONNECT" => Op::Connect(trim(&line[word_end..])),
            b"PING" => Op::Ping,
            b"PONG" => Op::Pong,
            b"INFO" => Op::Info,
            b"SUB" => match args[..] {
                [subject, sid] => Op::Sub {
                    subject,
                    queue: None,
                    sid,
                },
                [subject, queue, sid] => Op::Sub {
                    subject,
                    queue: Some(queue),
                    sid,
                },
                _ => return Err(Error::BadArguments),
            },
            b"UNSUB" => match args[..] {
                [sid] => Op::Unsub { sid, max: None },
                [sid, max] => Op::Unsub {
                    sid,
                    max: size(max).map(|m| m as u64).filter(|&m| m > 0),
                },
                _ => return Err(Error::BadArguments),
            },
            b"PUB" => {
                let (subject, reply, total) = match args[..] {
                    [subject, total] => (subject, None, total),
                    [subject, reply, total] => (subject, Some(reply), total),
                    _ => return Err(Error::BadArguments),
                };
                let total = size(total).ok_or(Error::BadArguments)?;
                let payload = self.payload(buf, line_end, total)?;
                let Some(payload) = payload else {
                    return Ok(None);
                };
                return Ok(Some((
                    Op::Pub {
                        subject,
                        reply,
                        headers: None,
                        payload,
                    },
                    line_end + total + 2,
                )));
            }
            _ => {
                // HPUB, the only verb left.
                if !self.headers {
                    return Err(Error::BadArguments);
                }
                let (subject, reply, head, total) = match args[..] {
                    [subject, head, total] => (subject, None, head, total),
                    [subject, reply, head, total] => (subject, Some(reply), head, total),
                    _ => return Err(Error::BadArguments),
                };
                let head = size(head).ok_or(Error::BadArguments)?;
                let total = size(total).ok_or(Error::BadArguments)?;
                if head > total {
                    return Err(Error::BadArguments);
                }
                let Some(message) = self.payload(buf, line_end, total)? else {
                    return Ok(None);
                };
                let (headers, payload) = message.split_at(head);
                return Ok(Some((
                    Op::Pub {
                        subject,
                        reply,
                        headers: Some(headers),
                        payload,
                    },
                    line_end + total + 2,
                )));
            }
        };
        Ok(Some((op, line_end)))
    }

    /// The `size` bytes after the control line, once they and their `\r\n`
    /// have arrived.
    fn payload<'a>(
        &self,
        buf: &'a [u8],
        start: usize,
        size: usize,
    ) -> Result<Option<&'a [u8]>, Error> {
        if size > self.max_payload {
            return Err(Error::MaxPayload);
        }
        let body = &buf[start..];
        let check = |i: usize, want: u8| match body.get(size + i) {
            Some(&b) if b != want => Err(Error::UnknownOperation),
            _ => Ok(()),
        };
        check(0, b'\r')?;
        check(1, b'\n')?;
        if body.len() < size + 2 {
            return Ok(None);
        }
        Ok(Some(&body[..size]))
    }
}

/// The verb `word` names (in upper case), given the byte after it: verbs
/// with arguments need a blank there, PING and PONG take anything.
fn verb(word: &[u8], after: u8) -> Result<&'static [u8], Error> {
    let found = VERBS
        .iter()
        .find(|v| v.eq_ignore_ascii_case(word))
        .ok_or(Error::UnknownOperation)?;
    let blank = after == b' ' || after == b'\t';
    match *found {
        b"PING" | b"PONG" => Ok(found),
        _ if blank => Ok(found),
        _ => Err(Error::UnknownOperation),
    }
}

/// A size argument: decimal digits only, as nats-server reads them.
fn size(arg: &[u8]) -> Option<usize> {
    if arg.is_empty() || arg.len() > 9 || !arg.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(arg).ok()?.parse().ok()
}

/// `s` without leading and trailing blanks.
fn trim(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &s[start..end]
}

/// Whether `subject` is a valid subject to subscribe to: dot-separated
/// tokens, none empty or holding a blank, `>` only as the last token
/// (nats-server's rule; `*` or `>` inside a longer token is a literal).
pub fn valid_subject(subject: &[u8]) -> bool {
    if subject.is_empty() {
        return false;
    }
    let mut full_wildcard_seen = false;
    for token in subject.split(|&b| b == b'.') {
        if token.is_empty() || full_wildcard_seen {
            return false;
        }
        if token.iter().any(|b| b" \t\n\r\x0c".contains(b)) {
            return false;
        }
        if token == b">" {
            full_wildcard_seen = true;
        }
    }
    true
}

/// Whether `subject` is valid to publish to: a valid subject without a
/// wildcard token.
pub fn valid_literal_subject(subject: &[u8]) -> bool {
    valid_subject(subject)
        && subject
            .split(|&b| b == b'.')
            .all(|t| t != b"*" && t != b">")
}

/// Whether the literal `subject` matches the (valid) subscription subject
/// `filter`: `*` stands for one token, a last `>` for one or more.
pub fn subject_matches(filter: &[u8], subject: &[u8]) -> bool {
    let mut tokens = subject.split(|&b| b == b'.');
    for want in filter.split(|&b| b == b'.') {
        if want == b">" {
            return tokens.next().is_some();
        }
        match tokens.next() {
            Some(got) if want == b"*" || want == got => {}
            _ => return false,
        }
    }
    tokens.next().is_none()
}

/// Appends `MSG` (no headers) or `HMSG` (with `headers`) for one delivery.
pub fn write_msg(
    out: &mut Vec<u8>,
    subject: &[u8],
    sid: &[u8],
    reply: Option<&[u8]>,
    headers: Option<&[u8]>,
    payload: &[u8],
) {
    out.extend_from_slice(if headers.is_some() { b"HMSG " } else { b"MSG " });
    out.extend_from_slice(subject);
    out.push(b' ');
    out.extend_from_slice(sid);
    out.push(b' ');
    if let Some(reply) = reply {
        out.extend_from_slice(reply);
        out.push(b' ');
    }
    let head = headers.map_or(0, <[u8]>::len);
    if headers.is_some() {
        out.extend_from_slice(head.to_string().as_bytes());
        out.push(b' ');
    }
    out.extend_from_slice((head + payload.len()).to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    if let Some(headers) = headers {
        out.extend_from_slice(headers);
    }
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\r\n");
}

/// Appends `-ERR '<text>'`.
pub fn write_err(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(b"-ERR '");
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"'\r\n");
}

/// Harness for the `nats_request` fuzz target.
#[doc(hidden)]
pub mod fuzzing {
    use super::*;

    /// Feeds the input after its first three bytes to a [`Parser`] whole and in pieces and checks that it
    /// never panics, that every operation takes at least one byte and at
    /// most the input, that delivering the input one piece at a time gives
    /// the same operations and the same error as delivering it whole, and
    /// that every `MSG` written for a `PUB` parses back as a `PUB` of the
    /// same payload.
    pub fn fuzz_ops(input: &[u8]) {
        // The first three bytes set the parser up and the size of pieces.
        let setting = |i: usize| input.get(i).copied().unwrap_or(0);
        let data = input.get(3..).unwrap_or_default();
        let mut parser = Parser::new(usize::from(setting(0)) * 16);
        parser.set_headers(setting(1) & 1 == 1);
        let whole = run(&parser, data, &[data.len()]);
        let step = usize::from(setting(2) % 7) + 1;
        let ends: Vec<usize> = (step..data.len() + step)
            .step_by(step)
            .map(|e| e.min(data.len()))
            .collect();
        let pieces = run(&parser, data, &ends);
        assert_eq!(whole, pieces, "pieces of {step} bytes");
    }

    /// Parses `data` as if it arrived up to each of `ends` in turn: the
    /// operations (written back as text) and how the stream ended.
    fn run(parser: &Parser, data: &[u8], ends: &[usize]) -> (Vec<Vec<u8>>, Option<Error>) {
        let mut ops = Vec::new();
        let mut pos = 0;
        for &end in ends {
            loop {
                match parser.parse(&data[pos..end]) {
                    Ok(Some((op, n))) => {
                        assert!(n >= 1 && pos + n <= end, "consumed {n} of {}", end - pos);
                        ops.push(describe(&op));
                        pos += n;
                    }
                    Ok(None) => break,
                    Err(e) => return (ops, Some(e)),
                }
            }
        }
        (ops, None)
    }

    /// An operation as text, checking the MSG writer on the way.
    fn describe(op: &Op<'_>) -> Vec<u8> {
        if let Op::Pub {
            subject,
            reply,
            headers,
            payload,
        } = op
        {
            if valid_literal_subject(subject) {
                let mut msg = Vec::new();
                write_msg(&mut msg, subject, b"1", *reply, *headers, payload);
                let total = headers.map_or(0, <[u8]>::len) + payload.len();
                assert!(msg.ends_with(b"\r\n") && msg.len() > total);
            }
        }
        format!("{op:?}").into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(input: &[u8]) -> Result<Option<(Op<'_>, usize)>, Error> {
        let mut p = Parser::new(DEFAULT_MAX_PAYLOAD);
        p.set_headers(true);
        p.parse(input)
    }

    #[test]
    fn parses_each_verb() {
        assert_eq!(one(b"PING\r\n"), Ok(Some((Op::Ping, 6))));
        assert_eq!(one(b"pong\n"), Ok(Some((Op::Pong, 5))));
        assert_eq!(
            one(b"CONNECT {\"verbose\":false}\r\n"),
            Ok(Some((Op::Connect(b"{\"verbose\":false}"), 27)))
        );
        assert_eq!(
            one(b"SUB  a.*\tq 7\r\n"),
            Ok(Some((
                Op::Sub {
                    subject: b"a.*",
                    queue: Some(b"q"),
                    sid: b"7"
                },
                14
            )))
        );
        assert_eq!(
            one(b"UNSUB 7 3\r\n"),
            Ok(Some((
                Op::Unsub {
                    sid: b"7",
                    max: Some(3)
                },
                11
            )))
        );
        assert_eq!(
            one(b"UNSUB 7 x\r\n"),
            Ok(Some((
                Op::Unsub {
                    sid: b"7",
                    max: None
                },
                11
            )))
        );
        assert_eq!(
            one(b"PUB a r 2\r\nhi\r\n"),
            Ok(Some((
                Op::Pub {
                    subject: b"a",
                    reply: Some(b"r"),
                    headers: None,
                    payload: b"hi"
                },
                15
            )))
        );
        assert_eq!(
            one(b"HPUB a 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"),
            Ok(Some((
                Op::Pub {
                    subject: b"a",
                    reply: None,
                    headers: Some(b"NATS/1.0\r\n\r\n"),
                    payload: b"hi"
                },
                30
            )))
        );
    }

    #[test]
    fn waits_for_the_rest() {
        assert_eq!(one(b"PU"), Ok(None));
        assert_eq!(one(b"PUB a 2\r\nh"), Ok(None));
        assert_eq!(one(b"PUB a 2\r\nhi\r"), Ok(None));
    }

    #[test]
    fn errors_as_nats_server() {
        assert_eq!(one(b"FOO\r\n"), Err(Error::UnknownOperation));
        assert_eq!(one(b"FO"), Err(Error::UnknownOperation));
        assert_eq!(one(b"PUB\r\n"), Err(Error::UnknownOperation));
        assert_eq!(one(b"UNSUB\r\n"), Err(Error::UnknownOperation));
        assert_eq!(one(b"PUB a\r\n"), Err(Error::BadArguments));
        assert_eq!(one(b"PUB a -1\r\n"), Err(Error::BadArguments));
        assert_eq!(one(b"SUB a\r\n"), Err(Error::BadArguments));
        assert_eq!(one(b"HPUB a 2 1\r\n"), Err(Error::BadArguments));
        assert_eq!(one(b"PUB a 2\r\nhello\r\n"), Err(Error::UnknownOperation));
        assert_eq!(one(b"PUB a 2000000\r\n"), Err(Error::MaxPayload));
        let mut long = b"SUB ".to_vec();
        long.resize(5000, b'a');
        assert_eq!(one(&long), Err(Error::ControlLineTooLong));
        let plain = Parser::new(DEFAULT_MAX_PAYLOAD);
        assert_eq!(
            plain.parse(b"HPUB a 0 1\r\nx\r\n"),
            Err(Error::BadArguments)
        );
    }

    #[test]
    fn subjects_match_as_nats() {
        assert!(valid_subject(b"a.*.>"));
        assert!(valid_subject(b"a*"));
        assert!(!valid_subject(b"a..b"));
        assert!(!valid_subject(b"a.>.b"));
        assert!(!valid_subject(b".a"));
        assert!(!valid_literal_subject(b"a.*"));
        assert!(valid_literal_subject(b"a*.b"));
        assert!(subject_matches(b"a.*", b"a.b"));
        assert!(!subject_matches(b"a.*", b"a.b.c"));
        assert!(subject_matches(b"a.>", b"a.b.c"));
        assert!(!subject_matches(b"a.>", b"a"));
        assert!(subject_matches(b">", b"a"));
        assert!(subject_matches(b"*.b", b"x.b"));
        assert!(!subject_matches(b"a", b"a.b"));
    }

    #[test]
    fn writes_messages() {
        let mut out = Vec::new();
        write_msg(&mut out, b"a", b"1", Some(b"r"), None, b"hi");
        write_msg(&mut out, b"a", b"2", None, Some(b"NATS/1.0\r\n\r\n"), b"hi");
        assert_eq!(
            out,
            b"MSG a 1 r 2\r\nhi\r\nHMSG a 2 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
        );
    }
}
