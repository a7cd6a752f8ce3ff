//! Decoding client requests: a port of `processMultibulkBuffer` and
//! `processInlineBuffer` (and the dispatch in `processInputBuffer`) from
//! Redis 7.0's `src/networking.c`, over a caller-owned `&[u8]`.
//!
//! Behaviour kept from Redis on purpose, because clients and test suites see
//! it:
//!
//! * Lines are found the way Redis finds them: `strchr` for `\r` (multibulk
//!   headers) or `\n` (inline), which stops at the first NUL byte. A NUL before
//!   the line end therefore looks like "no line end yet": the request stays
//!   incomplete until the 64 KiB limit turns it into a "too big" error (this is
//!   what tests/unit/protocol.tcl's "Protocol desync regression" tests rely
//!   on). NULs inside bulk payloads are fine: payloads are read by length.
//! * A header line ends at the first `\r`; the byte after it is skipped
//!   without checking that it is `\n`. The two bytes after a bulk payload are
//!   skipped the same way.
//! * The 64 KiB checks apply only while no line end has arrived: a longer
//!   inline line that arrives whole, newline included, is accepted.
//! * `*0`, `*-1` and any other count ≤ 0 consume their line and give an empty
//!   request, as does a blank inline line. Redis skips these silently; the
//!   caller should too.
//!
//! Not modelled: the limits Redis puts on clients that still have to
//! authenticate (count ≤ 10, bulk ≤ 16384), master-link exceptions, and the
//! query-buffer limit, which is the caller's (see
//! [`DEFAULT_CLIENT_QUERY_BUFFER_LIMIT`](super::DEFAULT_CLIENT_QUERY_BUFFER_LIMIT)).

use std::borrow::Cow;

use super::inline::split_args;
use super::number::string2ll;
use super::{DEFAULT_PROTO_MAX_BULK_LEN, MAX_MULTIBULK_LEN, PROTO_INLINE_MAX_SIZE};
use crate::ProtocolError;

/// The arguments of one request. Multibulk arguments and unquoted inline words
/// borrow the buffer; quoted inline arguments are decoded into owned bytes.
pub type Args<'a> = Vec<Cow<'a, [u8]>>;

/// What [`RequestParser::parse`] returns: `Ok(None)` when more bytes are
/// needed, `Ok(Some((args, consumed)))` for a complete request occupying
/// `buf[..consumed]`, or the protocol error Redis would reply with.
pub type ParseResult<'a> = Result<Option<(Args<'a>, usize)>, ProtocolError>;

/// Decodes one client request at a time from the front of a buffer, as Redis
/// 7.0 does: multibulk (`*N\r\n$len\r\n…`) when the first byte is `*`, an
/// inline command line otherwise.
///
/// # How to drive it
///
/// Keep the bytes read from the connection in a buffer and call
/// [`parse`](Self::parse) with all unconsumed bytes:
///
/// * `Ok(Some((args, consumed)))`: run `args` (skip the request when `args` is
///   empty, as Redis does), then drop `consumed` bytes from the front.
///   `consumed` is never 0 and never more than the buffer's length.
/// * `Ok(None)`: read more bytes, append them, and call again with the same
///   unconsumed bytes plus the new ones.
/// * `Err(e)`: write `e.message()` as an error reply and close the connection
///   after it, as Redis does; the rest of the buffer is not parsed.
///
/// Like Redis, the parser remembers how far it got into a multibulk request
/// that is still incomplete (the count, the arguments found so far, a pending
/// bulk length), so a large request arriving in many reads costs linear time,
/// not quadratic. That is why `parse` takes `&mut self`, and why between a call
/// that returned `Ok(None)` and the next one the buffer may only grow at the
/// end. Passing other bytes gives wrong arguments (never a panic or an
/// out-of-bounds `consumed`); call [`reset`](Self::reset) before reusing a
/// parser on an unrelated buffer. A fresh parser on each call is also correct,
/// just slower for requests split over many reads.
///
/// The caller enforces the query-buffer limit (Redis closes the connection
/// when the unconsumed bytes pass `client-query-buffer-limit`, 1 GB by
/// default); this parser bounds only what Redis bounds while parsing.
///
/// ```
/// use proto::resp::RequestParser;
///
/// let mut parser = RequestParser::new();
/// let mut buf = b"*2\r\n$3\r\nGET\r\n$1".to_vec();
/// assert_eq!(parser.parse(&buf), Ok(None));
/// buf.extend_from_slice(b"0\r\nkey:000001\r\n");
/// let (args, consumed) = parser.parse(&buf)?.expect("a whole request");
/// assert_eq!(args, [&b"GET"[..], b"key:000001"]);
/// assert_eq!(consumed, buf.len());
/// # Ok::<(), proto::ProtocolError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RequestParser {
    max_bulk_len: u64,
    /// The client has not authenticated while a password is required:
    /// Redis then accepts at most 10 arguments of at most 16 KiB each.
    unauthenticated: bool,
    /// Progress through a multibulk request that was incomplete at the last
    /// call; `None` between requests.
    partial: Option<Multibulk>,
    /// `(start, end)` of each argument found so far in the current multibulk
    /// request, as offsets into the buffer. Kept across requests for its
    /// capacity.
    spans: Vec<(usize, usize)>,
}

/// Redis's per-client multibulk state (`multibulklen`, `bulklen`, `qb_pos`).
#[derive(Debug, Clone, Copy)]
struct Multibulk {
    /// Arguments still to read (`multibulklen`).
    remaining: usize,
    /// Offset of the first unread byte (`qb_pos`).
    pos: usize,
    /// Length of the bulk whose `$` line was read and whose payload starts at
    /// `pos` (`bulklen`, which Redis keeps at -1 when there is none).
    bulk: Option<usize>,
}

impl Default for RequestParser {
    fn default() -> Self {
        Self::new()
    }
}

/// Like C `strchr` over a NUL-terminated buffer: the offset of the first
/// `byte` in `hay`, or `None` when there is none or a NUL comes first.
fn strchr(hay: &[u8], byte: u8) -> Option<usize> {
    let i = memchr::memchr2(byte, 0, hay)?;
    (hay.get(i) == Some(&byte)).then_some(i)
}

impl RequestParser {
    /// A parser with Redis's default `proto-max-bulk-len` of 512 MB.
    pub const fn new() -> Self {
        Self::with_max_bulk_len(DEFAULT_PROTO_MAX_BULK_LEN)
    }

    /// A parser that refuses bulk arguments longer than `max_bulk_len` bytes
    /// (Redis's `proto-max-bulk-len`) with "invalid bulk length".
    pub const fn with_max_bulk_len(max_bulk_len: u64) -> Self {
        RequestParser {
            max_bulk_len,
            unauthenticated: false,
            partial: None,
            spans: Vec::new(),
        }
    }

    /// The `proto-max-bulk-len` in force.
    pub fn max_bulk_len(&self) -> u64 {
        self.max_bulk_len
    }

    /// Changes `proto-max-bulk-len` (as `CONFIG SET` does); a request already
    /// under way keeps the lengths it has read.
    pub fn set_max_bulk_len(&mut self, max_bulk_len: u64) {
        self.max_bulk_len = max_bulk_len;
    }

    /// Limits an unauthenticated client as Redis does (at most 10 arguments
    /// of at most 16 KiB each), so that it cannot make the server buffer
    /// much before it logs in.
    pub fn set_unauthenticated(&mut self, unauthenticated: bool) {
        self.unauthenticated = unauthenticated;
    }

    /// Forgets any request in progress, so the next call starts afresh.
    pub fn reset(&mut self) {
        self.partial = None;
        self.spans.clear();
    }

    /// Decodes the request at the front of `buf`. See the type's documentation
    /// for the three outcomes and the contract between calls.
    pub fn parse<'a>(&mut self, buf: &'a [u8]) -> ParseResult<'a> {
        let result = self.parse_inner(buf);
        if !matches!(result, Ok(None)) {
            self.reset();
        }
        result
    }

    fn parse_inner<'a>(&mut self, buf: &'a [u8]) -> ParseResult<'a> {
        // A buffer shorter than the remembered progress breaks the contract;
        // start over rather than read out of bounds.
        if self.partial.is_some_and(|mb| mb.pos > buf.len()) {
            self.reset();
        }
        let mut mb = match self.partial {
            Some(mb) => mb,
            None => match buf.first() {
                None => return Ok(None),
                Some(b'*') => match Self::count_line(buf)? {
                    None => return Ok(None),
                    Some((count, pos)) if count <= 0 => {
                        // `*0`, `*-1`, …: Redis resets the client and moves on.
                        return Ok(Some((Vec::new(), pos)));
                    }
                    Some((count, _)) if self.unauthenticated && count > 10 => {
                        return Err(ProtocolError::UnauthenticatedMultibulkLength);
                    }
                    Some((count, pos)) => {
                        // At most INT_MAX: a usize on 32- and 64-bit targets.
                        let remaining = usize::try_from(count).unwrap_or(usize::MAX);
                        self.spans.clear();
                        // Like Redis, trust a huge count only as far as 1024
                        // arguments until they actually arrive.
                        self.spans.reserve(remaining.min(1024));
                        Multibulk {
                            remaining,
                            pos,
                            bulk: None,
                        }
                    }
                },
                Some(_) => return Self::inline(buf),
            },
        };
        let complete = self.bulks(buf, &mut mb);
        self.partial = Some(mb);
        if !complete? {
            return Ok(None);
        }
        let args = self
            .spans
            .iter()
            .map(|&(start, end)| Cow::Borrowed(buf.get(start..end).unwrap_or_default()))
            .collect();
        Ok(Some((args, mb.pos)))
    }

    /// Reads the `*<count>\r` line at the front of `buf`: `Ok(None)` if it has
    /// not fully arrived, else the count and the offset just past the line.
    fn count_line(buf: &[u8]) -> Result<Option<(i64, usize)>, ProtocolError> {
        let Some(cr) = strchr(buf, b'\r') else {
            if buf.len() > PROTO_INLINE_MAX_SIZE {
                return Err(ProtocolError::TooBigMultibulkCount);
            }
            return Ok(None);
        };
        // "Buffer should also contain \n": one more byte, whatever it is.
        if cr + 2 > buf.len() {
            return Ok(None);
        }
        match string2ll(buf.get(1..cr).unwrap_or_default()) {
            Some(count) if count <= MAX_MULTIBULK_LEN => Ok(Some((count, cr + 2))),
            _ => Err(ProtocolError::InvalidMultibulkLength),
        }
    }

    /// Reads bulk arguments until `mb.remaining` is 0 (`Ok(true)`) or the
    /// buffer runs out (`Ok(false)`), recording each argument in `self.spans`.
    fn bulks(&mut self, buf: &[u8], mb: &mut Multibulk) -> Result<bool, ProtocolError> {
        while mb.remaining > 0 {
            let len = match mb.bulk {
                Some(len) => len,
                None => {
                    let rest = buf.get(mb.pos..).unwrap_or_default();
                    let Some(cr) = strchr(rest, b'\r') else {
                        if rest.len() > PROTO_INLINE_MAX_SIZE {
                            return Err(ProtocolError::TooBigBulkCount);
                        }
                        return Ok(false);
                    };
                    if cr + 2 > rest.len() {
                        return Ok(false);
                    }
                    // `rest` holds at least the `\r` and one byte after it.
                    let first = rest.first().copied().unwrap_or(b'\r');
                    if first != b'$' {
                        return Err(ProtocolError::ExpectedDollar(first));
                    }
                    let len = match string2ll(rest.get(1..cr).unwrap_or_default()) {
                        Some(len) if len >= 0 && len.unsigned_abs() <= self.max_bulk_len => {
                            len.unsigned_abs()
                        }
                        _ => return Err(ProtocolError::InvalidBulkLength),
                    };
                    if self.unauthenticated && len > 16384 {
                        return Err(ProtocolError::UnauthenticatedBulkLength);
                    }
                    mb.pos += cr + 2;
                    // A length beyond the address space can never arrive; it
                    // waits until the caller's query-buffer limit ends it.
                    let len = usize::try_from(len).unwrap_or(usize::MAX);
                    mb.bulk = Some(len);
                    len
                }
            };
            // The payload and the two bytes after it (not checked, as in Redis).
            let available = buf.len().saturating_sub(mb.pos);
            match len.checked_add(2) {
                Some(need) if available >= need => {
                    self.spans.push((mb.pos, mb.pos + len));
                    mb.pos += need;
                    mb.bulk = None;
                    mb.remaining -= 1;
                }
                _ => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Reads an inline request line (`processInlineBuffer`).
    fn inline(buf: &[u8]) -> ParseResult<'_> {
        let Some(newline) = strchr(buf, b'\n') else {
            if buf.len() > PROTO_INLINE_MAX_SIZE {
                return Err(ProtocolError::TooBigInline);
            }
            return Ok(None);
        };
        // "\r\n" and a bare "\n" both end the line.
        let line_end = match newline.checked_sub(1) {
            Some(before) if buf.get(before) == Some(&b'\r') => before,
            _ => newline,
        };
        let line = buf.get(..line_end).unwrap_or_default();
        match split_args(line) {
            Some(args) => Ok(Some((args, newline + 1))),
            None => Err(ProtocolError::UnbalancedQuotes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Owned = Result<Option<(Vec<Vec<u8>>, usize)>, ProtocolError>;

    fn parse(buf: &[u8]) -> Owned {
        RequestParser::new()
            .parse(buf)
            .map(|r| r.map(|(args, n)| (args.into_iter().map(Cow::into_owned).collect(), n)))
    }

    fn args(list: &[&[u8]]) -> Vec<Vec<u8>> {
        list.iter().map(|a| a.to_vec()).collect()
    }

    #[test]
    fn multibulk_and_inline() {
        assert_eq!(
            parse(b"*1\r\n$4\r\nPING\r\n"),
            Ok(Some((args(&[b"PING"]), 14)))
        );
        assert_eq!(parse(b"PING\r\n"), Ok(Some((args(&[b"PING"]), 6))));
        assert_eq!(parse(b"PING\n"), Ok(Some((args(&[b"PING"]), 5))));
        assert_eq!(parse(b""), Ok(None));
    }

    #[test]
    fn multibulk_payloads_borrow_the_buffer() {
        let buf = b"*1\r\n$3\r\nabc\r\n";
        let mut p = RequestParser::new();
        let (args, _) = p.parse(buf).unwrap().unwrap();
        assert!(matches!(args[0], Cow::Borrowed(_)));
    }

    #[test]
    fn state_survives_incomplete_calls_and_clears_after_a_request() {
        let mut p = RequestParser::new();
        let full = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
        for cut in [3, 8, 12, 16, 20] {
            assert_eq!(p.parse(&full[..cut]), Ok(None), "cut at {cut}");
        }
        let (a, n) = p.parse(full).unwrap().unwrap();
        assert_eq!(a, [&b"GET"[..], b"key"]);
        assert_eq!(n, 22);
        assert!(p.partial.is_none());
        // The next buffer is unrelated and parses from its own start.
        let (a, n) = p.parse(b"PING\r\n").unwrap().unwrap();
        assert_eq!((a, n), (vec![Cow::Borrowed(&b"PING"[..])], 6));
    }

    #[test]
    fn a_shrunken_buffer_restarts_instead_of_panicking() {
        let mut p = RequestParser::new();
        assert_eq!(p.parse(b"*2\r\n$3\r\nGET\r\n"), Ok(None));
        assert_eq!(p.parse(b"*1"), Ok(None));
        assert_eq!(p.parse(b"*1\r\n$1\r\nx\r\n").unwrap().unwrap().1, 11);
    }

    #[test]
    fn max_bulk_len_is_configurable() {
        let mut p = RequestParser::with_max_bulk_len(3);
        assert!(p.parse(b"*1\r\n$3\r\nabc\r\n").unwrap().is_some());
        assert_eq!(
            p.parse(b"*1\r\n$4\r\nabcd\r\n"),
            Err(ProtocolError::InvalidBulkLength)
        );
        p.set_max_bulk_len(4);
        assert_eq!(p.max_bulk_len(), 4);
        assert!(p.parse(b"*1\r\n$4\r\nabcd\r\n").unwrap().is_some());
    }

    #[test]
    fn strchr_stops_at_nul() {
        assert_eq!(strchr(b"ab\rc", b'\r'), Some(2));
        assert_eq!(strchr(b"a\0b\rc", b'\r'), None);
        assert_eq!(strchr(b"abc", b'\r'), None);
    }
}
