//! Encoding replies for RESP2 or RESP3, byte for byte as Redis 7.0's
//! `addReply*` family in `src/networking.c` writes them.

use super::number::{push_i64, push_u128};
use super::Protocol;

const CRLF: &[u8] = b"\r\n";

/// Appends replies to a `Vec<u8>` in the protocol a client negotiated
/// (`HELLO 3` switches a connection to RESP3).
///
/// Each method writes one reply or, for the aggregate headers (`array_len`,
/// `map_len`, `set_len`, `push_len`), the header that the caller follows with
/// that many elements (twice as many for a map: key, value, key, value…).
/// Where RESP2 has no such type, the method writes what Redis writes instead,
/// as its documentation says.
///
/// ```
/// use proto::resp::{Protocol, ReplyWriter};
///
/// let mut out = Vec::new();
/// let mut w = ReplyWriter::new(&mut out, Protocol::Resp3);
/// w.map_len(1);
/// w.bulk(b"ok");
/// w.boolean(true);
/// assert_eq!(out, b"%1\r\n$2\r\nok\r\n#t\r\n");
///
/// let mut out = Vec::new();
/// let mut w = ReplyWriter::new(&mut out, Protocol::Resp2);
/// w.map_len(1);
/// w.bulk(b"ok");
/// w.boolean(true);
/// assert_eq!(out, b"*2\r\n$2\r\nok\r\n:1\r\n");
/// ```
#[derive(Debug)]
pub struct ReplyWriter<'a> {
    out: &'a mut Vec<u8>,
    protocol: Protocol,
}

impl<'a> ReplyWriter<'a> {
    /// A writer that appends to `out` (never clearing it) in `protocol`.
    pub fn new(out: &'a mut Vec<u8>, protocol: Protocol) -> Self {
        ReplyWriter { out, protocol }
    }

    /// The protocol the replies are written in.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Switches the protocol for the replies written from now on (`HELLO 3`
    /// answers in the protocol it selects).
    pub fn set_protocol(&mut self, protocol: Protocol) {
        self.protocol = protocol;
    }

    /// How many bytes `out` holds, including what it held before.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Whether `out` is empty.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Drops everything written after the first `len` bytes (a suppressed reply
    /// under `CLIENT REPLY OFF|SKIP`).
    pub fn truncate(&mut self, len: usize) {
        self.out.truncate(len);
    }

    /// The bytes written so far (and whatever `out` held before).
    pub fn as_bytes(&self) -> &[u8] {
        self.out
    }

    fn resp3(&self) -> bool {
        self.protocol == Protocol::Resp3
    }

    /// `<prefix><n>\r\n`.
    fn header(&mut self, prefix: u8, n: u128) {
        self.out.push(prefix);
        push_u128(self.out, n);
        self.out.extend_from_slice(CRLF);
    }

    /// `text` with every `\r` and `\n` replaced by a space, so that it stays
    /// one line (Redis's `sdsmapchars(s, "\r\n", "  ", 2)`).
    fn one_line(&mut self, text: &[u8]) {
        self.out.extend(
            text.iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
    }

    /// A simple string: `+OK\r\n`. A `\r` or `\n` in `text` becomes a space,
    /// as in Redis's `addReplyStatusFormat`.
    pub fn simple(&mut self, text: &[u8]) {
        self.out.push(b'+');
        self.one_line(text);
        self.out.extend_from_slice(CRLF);
    }

    /// An error: `-` then `text`, which carries its own code, e.g.
    /// `ERR unknown command` or `WRONGTYPE Operation against a key holding the
    /// wrong kind of value`. A `text` that already starts with `-` is written
    /// as it is, without a second one. As in Redis's `addReplyErrorFormat`,
    /// line breaks at either end are dropped and any others become spaces.
    /// (Redis writes errors the same way in RESP2 and RESP3.)
    pub fn error(&mut self, text: &[u8]) {
        let is_break = |b: &u8| matches!(b, b'\r' | b'\n');
        let start = text.iter().position(|b| !is_break(b)).unwrap_or(text.len());
        let end = text
            .iter()
            .rposition(|b| !is_break(b))
            .map_or(start, |i| i + 1);
        let text = text.get(start..end).unwrap_or_default();
        if text.first() != Some(&b'-') {
            self.out.push(b'-');
        }
        self.one_line(text);
        self.out.extend_from_slice(CRLF);
    }

    /// An integer: `:42\r\n`.
    pub fn integer(&mut self, n: i64) {
        self.out.push(b':');
        push_i64(self.out, n);
        self.out.extend_from_slice(CRLF);
    }

    /// A bulk string: `$5\r\nhello\r\n`. Any bytes.
    pub fn bulk(&mut self, bytes: &[u8]) {
        self.header(b'$', bytes.len() as u128);
        self.out.extend_from_slice(bytes);
        self.out.extend_from_slice(CRLF);
    }

    /// The null reply (`addReplyNull`): RESP2 `$-1\r\n` (a null bulk), RESP3
    /// `_\r\n`.
    pub fn null(&mut self) {
        self.out
            .extend_from_slice(if self.resp3() { b"_\r\n" } else { b"$-1\r\n" });
    }

    /// The null array (`addReplyNullArray`), e.g. a timed-out `BLPOP`: RESP2
    /// `*-1\r\n`, RESP3 `_\r\n`.
    pub fn null_array(&mut self) {
        self.out
            .extend_from_slice(if self.resp3() { b"_\r\n" } else { b"*-1\r\n" });
    }

    /// An array of `n` elements: `*<n>\r\n`.
    pub fn array_len(&mut self, n: usize) {
        self.header(b'*', n as u128);
    }

    /// A map of `n` key-value pairs: RESP3 `%<n>\r\n`; RESP2 a flat array
    /// `*<2n>\r\n`. Either way the caller writes `2n` elements after it.
    pub fn map_len(&mut self, n: usize) {
        if self.resp3() {
            self.header(b'%', n as u128);
        } else {
            self.header(b'*', 2 * n as u128);
        }
    }

    /// A set of `n` elements: RESP3 `~<n>\r\n`, RESP2 `*<n>\r\n`.
    pub fn set_len(&mut self, n: usize) {
        let prefix = if self.resp3() { b'~' } else { b'*' };
        self.header(prefix, n as u128);
    }

    /// Bytes that already are one RESP value (a value rendered earlier, e.g.
    /// inside a pub/sub frame).
    pub fn raw(&mut self, resp: &[u8]) {
        self.out.extend_from_slice(resp);
    }

    /// An out-of-band push of `n` elements (pub/sub messages, invalidations):
    /// RESP3 `><n>\r\n`, RESP2 `*<n>\r\n`.
    pub fn push_len(&mut self, n: usize) {
        let prefix = if self.resp3() { b'>' } else { b'*' };
        self.header(prefix, n as u128);
    }

    /// A double, already formatted by the caller: RESP3 `,<text>\r\n`, RESP2 a
    /// bulk string of `text`.
    ///
    /// Redis 7.0 formats doubles with `%.17g` and writes the infinities as
    /// `inf` and `-inf` (and a NaN comes out of `%.17g` as `nan`); the caller
    /// passes that text, e.g. `b"3.1400000000000001"`, `b"inf"`.
    pub fn double(&mut self, text: &[u8]) {
        if self.resp3() {
            self.out.push(b',');
            self.out.extend_from_slice(text);
            self.out.extend_from_slice(CRLF);
        } else {
            self.bulk(text);
        }
    }

    /// A boolean: RESP3 `#t\r\n` / `#f\r\n`, RESP2 the integer 1 / 0.
    pub fn boolean(&mut self, b: bool) {
        let bytes: &[u8] = match (self.resp3(), b) {
            (true, true) => b"#t\r\n",
            (true, false) => b"#f\r\n",
            (false, true) => b":1\r\n",
            (false, false) => b":0\r\n",
        };
        self.out.extend_from_slice(bytes);
    }

    /// A verbatim string: RESP3 `=<len+4>\r\n<fmt>:<text>\r\n`, RESP2 a bulk
    /// string of `text` alone.
    ///
    /// As in Redis's `addReplyVerbatim`, only the first three bytes of
    /// `format` are used and a shorter one is padded with spaces (`b"txt"`,
    /// `b"md"` → `md `).
    pub fn verbatim(&mut self, format: &[u8], text: &[u8]) {
        if !self.resp3() {
            self.bulk(text);
            return;
        }
        self.header(b'=', text.len() as u128 + 4);
        let mut fmt = [b' '; 3];
        for (slot, &b) in fmt.iter_mut().zip(format) {
            *slot = b;
        }
        self.out.extend_from_slice(&fmt);
        self.out.push(b':');
        self.out.extend_from_slice(text);
        self.out.extend_from_slice(CRLF);
    }

    /// A big number given as its decimal digits (with an optional `-`): RESP3
    /// `(<digits>\r\n`, RESP2 a bulk string of the digits.
    pub fn big_number(&mut self, digits: &[u8]) {
        if self.resp3() {
            self.out.push(b'(');
            self.out.extend_from_slice(digits);
            self.out.extend_from_slice(CRLF);
        } else {
            self.bulk(digits);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` in both protocols and returns (RESP2 bytes, RESP3 bytes).
    fn both(f: impl Fn(&mut ReplyWriter<'_>)) -> (Vec<u8>, Vec<u8>) {
        let mut two = Vec::new();
        f(&mut ReplyWriter::new(&mut two, Protocol::Resp2));
        let mut three = Vec::new();
        f(&mut ReplyWriter::new(&mut three, Protocol::Resp3));
        (two, three)
    }

    fn check(f: impl Fn(&mut ReplyWriter<'_>), resp2: &[u8], resp3: &[u8]) {
        let (two, three) = both(f);
        assert_eq!(
            String::from_utf8_lossy(&two),
            String::from_utf8_lossy(resp2),
            "RESP2"
        );
        assert_eq!(
            String::from_utf8_lossy(&three),
            String::from_utf8_lossy(resp3),
            "RESP3"
        );
    }

    #[test]
    fn same_in_both_protocols() {
        check(|w| w.simple(b"OK"), b"+OK\r\n", b"+OK\r\n");
        check(|w| w.integer(-42), b":-42\r\n", b":-42\r\n");
        check(|w| w.integer(0), b":0\r\n", b":0\r\n");
        check(|w| w.bulk(b""), b"$0\r\n\r\n", b"$0\r\n\r\n");
        check(
            |w| w.bulk(b"a\r\nb"),
            b"$4\r\na\r\nb\r\n",
            b"$4\r\na\r\nb\r\n",
        );
        check(|w| w.array_len(3), b"*3\r\n", b"*3\r\n");
        check(|w| w.array_len(0), b"*0\r\n", b"*0\r\n");
    }

    #[test]
    fn errors() {
        check(
            |w| w.error(b"ERR unknown command"),
            b"-ERR unknown command\r\n",
            b"-ERR unknown command\r\n",
        );
        check(
            |w| w.error(b"-WRONGTYPE x"),
            b"-WRONGTYPE x\r\n",
            b"-WRONGTYPE x\r\n",
        );
        check(
            |w| w.error(b"ERR a\r\nb\r\n"),
            b"-ERR a  b\r\n",
            b"-ERR a  b\r\n",
        );
        check(|w| w.error(b"\n-ERR x\r"), b"-ERR x\r\n", b"-ERR x\r\n");
        check(|w| w.error(b"\r\n"), b"-\r\n", b"-\r\n");
        check(|w| w.simple(b"a\nb"), b"+a b\r\n", b"+a b\r\n");
    }

    #[test]
    fn nulls() {
        check(|w| w.null(), b"$-1\r\n", b"_\r\n");
        check(|w| w.null_array(), b"*-1\r\n", b"_\r\n");
    }

    #[test]
    fn aggregates() {
        check(|w| w.map_len(2), b"*4\r\n", b"%2\r\n");
        check(|w| w.set_len(2), b"*2\r\n", b"~2\r\n");
        check(|w| w.push_len(3), b"*3\r\n", b">3\r\n");
    }

    #[test]
    fn doubles_booleans_big_numbers() {
        check(|w| w.double(b"1.5"), b"$3\r\n1.5\r\n", b",1.5\r\n");
        check(|w| w.double(b"inf"), b"$3\r\ninf\r\n", b",inf\r\n");
        check(|w| w.double(b"-inf"), b"$4\r\n-inf\r\n", b",-inf\r\n");
        check(|w| w.double(b"nan"), b"$3\r\nnan\r\n", b",nan\r\n");
        check(|w| w.boolean(true), b":1\r\n", b"#t\r\n");
        check(|w| w.boolean(false), b":0\r\n", b"#f\r\n");
        // DEBUG PROTOCOL bignum in tests/unit/protocol.tcl.
        let big = b"1234567999999999999999999999999999999";
        check(
            |w| w.big_number(big),
            b"$37\r\n1234567999999999999999999999999999999\r\n",
            b"(1234567999999999999999999999999999999\r\n",
        );
    }

    #[test]
    fn verbatim_strings() {
        // DEBUG PROTOCOL verbatim in tests/unit/protocol.tcl.
        let text = b"This is a verbatim\nstring";
        check(
            |w| w.verbatim(b"txt", text),
            b"$25\r\nThis is a verbatim\nstring\r\n",
            b"=29\r\ntxt:This is a verbatim\nstring\r\n",
        );
        check(
            |w| w.verbatim(b"md", b"x"),
            b"$1\r\nx\r\n",
            b"=5\r\nmd :x\r\n",
        );
        check(
            |w| w.verbatim(b"markdown", b""),
            b"$0\r\n\r\n",
            b"=4\r\nmar:\r\n",
        );
    }

    #[test]
    fn appends_without_clearing() {
        let mut out = b"+PONG\r\n".to_vec();
        let mut w = ReplyWriter::new(&mut out, Protocol::Resp2);
        w.integer(1);
        assert_eq!(w.protocol(), Protocol::Resp2);
        assert_eq!(w.as_bytes(), b"+PONG\r\n:1\r\n");
    }
}
