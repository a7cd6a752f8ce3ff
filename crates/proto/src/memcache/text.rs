//! memcached's text protocol: request lines (`get`, `set`, `incr`, …, and
//! the meta commands, whose flags [`meta`] reads) and the data
//! block a storage command carries.
//!
//! The yardstick is memcached 1.6: `try_read_command_ascii` (framing),
//! `tokenize_command` and `process_command_ascii` (dispatch, token counts)
//! and the `process_*_command` functions of `proto_text.c`, and
//! `safe_strto*` of `util.c` (numbers). Reply texts are memcached's, checked
//! byte for byte against a running memcached 1.6 by the end-to-end tests.
//!
//! [`Parser::parse`] takes the unconsumed input and returns one step: a
//! request borrowing the buffer with the bytes it used, an error line to send
//! (memcached answers and reads on), a refused data block being skipped, a
//! close, or "need more bytes".

use memchr::memchr;

use super::meta::{self, Meta};

/// Longest key memcached accepts (`KEY_MAX_LENGTH`).
pub const KEY_MAX: usize = 250;

/// memcached closes a connection whose request line grows past this many
/// bytes without a line end (the key-line limit of `try_read_command_ascii`),
/// unless the line is a `get`/`gets` (see [`MULTIGET_LINE_MAX`]).
///
/// memcached applies the limit only while the line is incomplete, so a long
/// line that arrives in one read slips through; here any longer line closes,
/// so the outcome never depends on how TCP cut the stream.
pub const LINE_MAX: usize = 2048;

/// The longest `get`/`gets` line taken. memcached grows its buffer for a
/// multi-get without a bound; a bound is kept here so that a client cannot
/// make a worker buffer without end (256 Ki keys of 16 bytes fit).
pub const MULTIGET_LINE_MAX: usize = 4 << 20;

/// The item size limit memcached starts with (`-I 1m`).
pub const DEFAULT_ITEM_SIZE_MAX: u64 = 1 << 20;

/// memcached's `MAX_TOKENS` less the terminal token: the tokens of a line
/// that count; any further ones are ignored (a `get`'s keys excepted).
const MAX_TOKENS: usize = 23;

/// The generic reply to a line memcached does not understand.
pub const ERROR: &str = "ERROR";
/// A malformed command line.
pub const BAD_FORMAT: &str = "CLIENT_ERROR bad command line format";
/// A data block not followed by `\r\n`.
pub const BAD_DATA_CHUNK: &str = "CLIENT_ERROR bad data chunk";
/// A data block longer than the item size limit.
pub const TOO_LARGE: &str = "SERVER_ERROR object too large for cache";
/// A `touch`/`gat`/`flush_all` time that is not a number.
pub const BAD_EXPTIME: &str = "CLIENT_ERROR invalid exptime argument";
/// An `incr`/`decr` delta that is not an unsigned 64-bit number.
pub const BAD_DELTA: &str = "CLIENT_ERROR invalid numeric delta argument";
/// `delete` with arguments other than `0` and `noreply`.
pub const DELETE_USAGE: &str =
    "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]";
/// `shutdown`, which memcached only takes when started with `-A`.
pub const SHUTDOWN_DISABLED: &str = "ERROR: shutdown not enabled";

/// How a storage command stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreMode {
    /// `set` (and `cas`, which carries a CAS value).
    Set,
    /// `add`: only if absent.
    Add,
    /// `replace`: only if present.
    Replace,
    /// `append`: after the present value.
    Append,
    /// `prepend`: before the present value.
    Prepend,
}

/// The keys of a `get` line (or any run of space-separated tokens): the
/// tokens in order, borrowed from the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tokens<'a>(&'a [u8]);

impl<'a> Tokens<'a> {
    /// The tokens of `text`.
    pub fn new(text: &'a [u8]) -> Tokens<'a> {
        Tokens(text)
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let start = self.0.iter().position(|&b| b != b' ')?;
        let rest = &self.0[start..];
        let end = memchr(b' ', rest).unwrap_or(rest.len());
        self.0 = &rest[end..];
        Some(&rest[..end])
    }
}

/// One request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    /// `get`/`gets`/`gat`/`gats` (and memcached's undocumented `bget`).
    Get {
        /// Whether each VALUE line carries the CAS value (`gets`, `gats`).
        cas: bool,
        /// The new exptime (`gat`, `gats`).
        touch: Option<i64>,
        /// One or more keys (`gat` may have none), each at most
        /// [`KEY_MAX`] bytes.
        keys: Tokens<'a>,
    },
    /// `set`, `add`, `replace`, `append`, `prepend`, `cas`.
    Store {
        /// How to store.
        mode: StoreMode,
        /// The key.
        key: &'a [u8],
        /// The client flags.
        flags: u32,
        /// The exptime as sent (memcached's rules apply downstream).
        exptime: i64,
        /// `cas`'s compare value.
        cas: Option<u64>,
        /// The data block (without its `\r\n`).
        data: &'a [u8],
        /// `noreply`: send nothing back, not even an error.
        noreply: bool,
    },
    /// A storage command (or `ms`) whose data block is longer than the item
    /// size limit: the block is being skipped. memcached answers
    /// [`TOO_LARGE`] and, for `set` and `ms`, drops the key's old item so
    /// that a stale value does not outlive the failed write.
    TooLarge {
        /// The key.
        key: std::borrow::Cow<'a, [u8]>,
        /// Whether the old item goes.
        remove_old: bool,
        /// Whether the error is withheld (`noreply`; `ms` always reports).
        noreply: bool,
    },
    /// `incr`/`decr`.
    Arith {
        /// incr (true) or decr.
        incr: bool,
        /// The key.
        key: &'a [u8],
        /// The amount.
        delta: u64,
        /// `noreply`.
        noreply: bool,
    },
    /// `delete`.
    Delete {
        /// The key.
        key: &'a [u8],
        /// `noreply`.
        noreply: bool,
    },
    /// `touch`.
    Touch {
        /// The key.
        key: &'a [u8],
        /// The new exptime.
        exptime: i64,
        /// `noreply`.
        noreply: bool,
    },
    /// `flush_all [delay]`.
    FlushAll {
        /// The delay (an exptime: 0 or negative is now).
        delay: i64,
        /// `noreply`.
        noreply: bool,
    },
    /// `verbosity`: accepted and answered `OK` (shoal's logging is its own).
    Verbosity {
        /// `noreply`.
        noreply: bool,
    },
    /// `version`.
    Version,
    /// `quit`: close without a reply.
    Quit,
    /// `stats [group …]`.
    Stats {
        /// The group (`""` for the general statistics).
        group: &'a [u8],
    },
    /// `mn`: answer `MN`.
    MetaNoop,
    /// `me <key> [b]`.
    MetaDebug {
        /// The key (decoded when it came in base64).
        key: std::borrow::Cow<'a, [u8]>,
        /// Whether it came in base64 (and goes back so).
        base64: bool,
    },
    /// `mg`.
    MetaGet(Meta<'a>),
    /// `ms` with its data block.
    MetaSet(Meta<'a>, &'a [u8]),
    /// `md`.
    MetaDelete(Meta<'a>),
    /// `ma`.
    MetaArith(Meta<'a>),
}

/// What [`Parser::parse`] found at the start of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// More bytes are needed; nothing was consumed.
    Incomplete,
    /// A request, and how many bytes it took.
    Request(Request<'a>, usize),
    /// A request memcached refuses: send `line` (plus `\r\n`) unless `quiet`,
    /// drop `consumed` bytes and go on with the next request.
    Error {
        /// memcached's reply line, without the line end.
        line: &'static str,
        /// Withheld because the request said `noreply`.
        quiet: bool,
        /// Bytes to drop.
        consumed: usize,
    },
    /// This many bytes of a refused data block were dropped.
    Skipped(usize),
    /// memcached closes the connection here without a reply: a line past
    /// [`LINE_MAX`], or an HTTP request.
    Close,
}

/// The text-protocol decoder of one connection. Its one piece of state is
/// the rest of a refused data block still to be skipped.
#[derive(Clone, Debug)]
pub struct Parser {
    item_size_max: u64,
    skip: u64,
}

impl Default for Parser {
    fn default() -> Parser {
        Parser::new(DEFAULT_ITEM_SIZE_MAX)
    }
}

impl Parser {
    /// A parser that refuses data blocks longer than `item_size_max`.
    pub fn new(item_size_max: u64) -> Parser {
        Parser {
            item_size_max,
            skip: 0,
        }
    }

    /// Changes the item size limit (for the requests after this call).
    pub fn set_item_size_max(&mut self, item_size_max: u64) {
        self.item_size_max = item_size_max;
    }

    /// Whether the parser is skipping a refused data block.
    pub fn skipping(&self) -> bool {
        self.skip > 0
    }

    /// Reads the next step from `buf`, the unconsumed input.
    pub fn parse<'a>(&mut self, buf: &'a [u8]) -> Parsed<'a> {
        if self.skip > 0 {
            if buf.is_empty() {
                return Parsed::Incomplete;
            }
            let n = usize::try_from(self.skip).map_or(buf.len(), |s| s.min(buf.len()));
            self.skip -= n as u64;
            return Parsed::Skipped(n);
        }
        let Some(nl) = memchr(b'\n', buf) else {
            return match line_allowed(buf, buf.len()) {
                true => Parsed::Incomplete,
                false => Parsed::Close,
            };
        };
        if !line_allowed(buf, nl) {
            return Parsed::Close;
        }
        let mut line = &buf[..nl];
        // memcached strips the `\r` of `\r\n` unless it is the line's only
        // byte (which then makes an unknown command).
        if nl > 1 && line[nl - 1] == b'\r' {
            line = &line[..nl - 1];
        }
        // memcached's tokenizer stops at a NUL byte, as C strings do.
        if let Some(nul) = memchr(0, line) {
            line = &line[..nul];
        }
        self.command(line, buf, nl + 1)
    }

    /// Dispatches a request line (`line_len` bytes of `buf` with its end).
    fn command<'a>(&mut self, line: &'a [u8], buf: &'a [u8], line_len: usize) -> Parsed<'a> {
        let mut tokens: [&[u8]; MAX_TOKENS] = [&[]; MAX_TOKENS];
        let mut n = 0;
        for t in Tokens(line) {
            if n == MAX_TOKENS {
                break;
            }
            tokens[n] = t;
            n += 1;
        }
        let t = &tokens[..n];
        let error = |line: &'static str, quiet: bool| Parsed::Error {
            line,
            quiet,
            consumed: line_len,
        };
        let done = |r: Request<'a>| Parsed::Request(r, line_len);
        if n == 0 || t[0].len() < 2 {
            return error(ERROR, false);
        }
        // `noreply` is the last token of the commands that take it; once
        // seen it withholds even the command's error replies.
        let noreply = t[n - 1] == b"noreply";
        let key_ok = |k: &[u8]| k.len() <= KEY_MAX;
        match t[0] {
            [b'm', c] => self.meta(*c, line, t, buf, line_len),
            b"get" | b"gets" | b"gat" | b"gats" | b"bget" => {
                if n < 2 {
                    return error(ERROR, false);
                }
                let cas = t[0] == b"gets" || t[0] == b"gats";
                let touch = t[0].starts_with(b"gat");
                // The keys follow the command (and gat's exptime).
                let mut rest = Tokens(line);
                rest.next();
                let touch = match touch {
                    true => match rest.next().and_then(parse_i32) {
                        Some(exptime) => Some(exptime),
                        None => return error(BAD_EXPTIME, false),
                    },
                    false => None,
                };
                if !rest.all(key_ok) {
                    return error(BAD_FORMAT, false);
                }
                let mut keys = Tokens(line);
                keys.next();
                if touch.is_some() {
                    keys.next();
                }
                done(Request::Get { cas, touch, keys })
            }
            b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => {
                let (mode, with_cas) = match t[0] {
                    b"set" => (StoreMode::Set, false),
                    b"add" => (StoreMode::Add, false),
                    b"replace" => (StoreMode::Replace, false),
                    b"append" => (StoreMode::Append, false),
                    b"prepend" => (StoreMode::Prepend, false),
                    _ => (StoreMode::Set, true),
                };
                let want = if with_cas { 6 } else { 5 };
                if n != want && n != want + 1 {
                    return error(ERROR, false);
                }
                if !key_ok(t[1]) {
                    return error(BAD_FORMAT, noreply);
                }
                let (Some(flags), Some(exptime), Some(len)) =
                    (parse_u32(t[2]), parse_i32(t[3]), parse_i32(t[4]))
                else {
                    return error(BAD_FORMAT, noreply);
                };
                let cas = match with_cas {
                    true => match parse_u64(t[5]) {
                        Some(c) => Some(c),
                        None => return error(BAD_FORMAT, noreply),
                    },
                    false => None,
                };
                if len < 0 || len > i64::from(i32::MAX) - 2 {
                    return error(BAD_FORMAT, noreply);
                }
                let len = len as usize;
                if len as u64 > self.item_size_max {
                    self.skip = len as u64 + 2;
                    let remove_old = mode == StoreMode::Set && cas.is_none();
                    return done(Request::TooLarge {
                        key: t[1].into(),
                        remove_old,
                        noreply,
                    });
                }
                let key = t[1];
                data_block(buf, line_len, len, noreply, |data| Request::Store {
                    mode,
                    key,
                    flags,
                    exptime,
                    cas,
                    data,
                    noreply,
                })
            }
            b"incr" | b"decr" => {
                if n != 3 && n != 4 {
                    return error(ERROR, false);
                }
                if !key_ok(t[1]) {
                    return error(BAD_FORMAT, noreply);
                }
                match parse_u64(t[2]) {
                    Some(delta) => done(Request::Arith {
                        incr: t[0] == b"incr",
                        key: t[1],
                        delta,
                        noreply,
                    }),
                    None => error(BAD_DELTA, noreply),
                }
            }
            b"delete" => {
                if !(2..=4).contains(&n) {
                    return error(ERROR, false);
                }
                if n > 2 {
                    // `delete <key> 0` is an old form memcached still takes.
                    let zero = t[2] == b"0";
                    let valid = (n == 3 && (zero || noreply)) || (n == 4 && zero && noreply);
                    if !valid {
                        return error(DELETE_USAGE, noreply);
                    }
                }
                if !key_ok(t[1]) {
                    return error(BAD_FORMAT, noreply);
                }
                done(Request::Delete { key: t[1], noreply })
            }
            b"touch" => {
                if n != 3 && n != 4 {
                    return error(ERROR, false);
                }
                if !key_ok(t[1]) {
                    return error(BAD_FORMAT, noreply);
                }
                match parse_i32(t[2]) {
                    Some(exptime) => done(Request::Touch {
                        key: t[1],
                        exptime,
                        noreply,
                    }),
                    None => error(BAD_EXPTIME, noreply),
                }
            }
            b"flush_all" => {
                if n > 3 {
                    return error(ERROR, false);
                }
                let delay = if n != if noreply { 2 } else { 1 } {
                    match parse_i32(t[1]) {
                        Some(d) => d,
                        None => return error(BAD_EXPTIME, noreply),
                    }
                } else {
                    0
                };
                done(Request::FlushAll { delay, noreply })
            }
            b"verbosity" => {
                if n != 2 && n != 3 {
                    return error(ERROR, false);
                }
                // The level itself changes nothing in shoal, but a bad one
                // is refused as memcached refuses it.
                match parse_u64(t[1]) {
                    Some(_) => done(Request::Verbosity { noreply }),
                    None => error(BAD_FORMAT, noreply),
                }
            }
            b"version" => done(Request::Version),
            b"quit" => done(Request::Quit),
            b"stats" => done(Request::Stats {
                group: t.get(1).copied().unwrap_or_default(),
            }),
            b"shutdown" => error(SHUTDOWN_DISABLED, false),
            // memcached hangs up on what looks like an HTTP request.
            _ if t[n - 1].starts_with(b"HTTP/") => Parsed::Close,
            _ => error(ERROR, false),
        }
    }

    /// The meta commands (`m` and one letter).
    fn meta<'a>(
        &mut self,
        code: u8,
        line: &'a [u8],
        t: &[&'a [u8]],
        buf: &'a [u8],
        line_len: usize,
    ) -> Parsed<'a> {
        let error = |line: &'static str| Parsed::Error {
            line,
            quiet: false,
            consumed: line_len,
        };
        let done = |r: Request<'a>| Parsed::Request(r, line_len);
        let n = t.len();
        match code {
            b'n' => done(Request::MetaNoop),
            b'e' => {
                if n < 2 || t[1].len() > KEY_MAX {
                    return error(BAD_FORMAT);
                }
                if n >= 3 && t[2] == b"b" {
                    match meta::decode_key(t[1]) {
                        Some(key) => done(Request::MetaDebug {
                            key: key.into(),
                            base64: true,
                        }),
                        None => error(BAD_FORMAT),
                    }
                } else {
                    done(Request::MetaDebug {
                        key: t[1].into(),
                        base64: false,
                    })
                }
            }
            b'g' | b'd' | b'a' => {
                if n < 2 {
                    return error(ERROR);
                }
                let command = match code {
                    b'g' => meta::Command::Get,
                    b'd' => meta::Command::Delete,
                    _ => meta::Command::Arith,
                };
                match Meta::parse(command, t[1], &t[2..], flags_span(line, t, 2)) {
                    Ok(m) => done(match code {
                        b'g' => Request::MetaGet(m),
                        b'd' => Request::MetaDelete(m),
                        _ => Request::MetaArith(m),
                    }),
                    Err(e) => error(e),
                }
            }
            b's' => {
                if n < 2 {
                    return error(ERROR);
                }
                if t[1].len() > KEY_MAX || n == 2 {
                    return error(BAD_FORMAT);
                }
                if n + 1 > meta::MAX_TOKENS {
                    return error(meta::FLAGS_TOO_LONG);
                }
                let len = match parse_i32(t[2]) {
                    Some(len) if (0..=i64::from(i32::MAX) - 2).contains(&len) => len as usize,
                    _ => return error(BAD_FORMAT),
                };
                let parsed = Meta::parse(meta::Command::Set, t[1], &t[3..], flags_span(line, t, 3));
                let m = match parsed {
                    Ok(m) => m,
                    Err(e) => {
                        // memcached read the length: the block is skipped.
                        self.skip = len as u64 + 2;
                        return error(e);
                    }
                };
                if len as u64 > self.item_size_max {
                    self.skip = len as u64 + 2;
                    return done(Request::TooLarge {
                        key: m.key,
                        remove_old: true,
                        noreply: false,
                    });
                }
                data_block(buf, line_len, len, false, |data| Request::MetaSet(m, data))
            }
            _ => error(ERROR),
        }
    }
}

/// Whether a request line of `len` bytes (so far) may be taken: at most
/// [`LINE_MAX`], or [`MULTIGET_LINE_MAX`] for a `get`/`gets` (after at most
/// 100 spaces, as memcached checks).
fn line_allowed(buf: &[u8], len: usize) -> bool {
    if len <= LINE_MAX {
        return true;
    }
    let spaces = buf.iter().take_while(|&&b| b == b' ').count();
    let rest = &buf[spaces..];
    spaces <= 100
        && (rest.starts_with(b"get ") || rest.starts_with(b"gets "))
        && len <= MULTIGET_LINE_MAX
}

/// The part of `line` from token `first` of `t` on (the meta flags), so that
/// replies can walk the flags in the order sent.
fn flags_span<'a>(line: &'a [u8], t: &[&'a [u8]], first: usize) -> &'a [u8] {
    match (t.get(first), t.last()) {
        (Some(a), Some(z)) => {
            let start = a.as_ptr() as usize - line.as_ptr() as usize;
            let end = z.as_ptr() as usize - line.as_ptr() as usize + z.len();
            &line[start..end]
        }
        _ => &[],
    }
}

/// The `len`-byte data block after a `line_len`-byte line: the request when
/// it is all there and ends in `\r\n`, "bad data chunk" when it does not end
/// so (memcached consumed it all the same).
fn data_block<'a>(
    buf: &'a [u8],
    line_len: usize,
    len: usize,
    noreply: bool,
    request: impl FnOnce(&'a [u8]) -> Request<'a>,
) -> Parsed<'a> {
    let end = line_len + len + 2;
    if buf.len() < end {
        return Parsed::Incomplete;
    }
    if &buf[end - 2..end] != b"\r\n" {
        return Parsed::Error {
            line: BAD_DATA_CHUNK,
            quiet: noreply,
            consumed: end,
        };
    }
    Parsed::Request(request(&buf[line_len..end - 2]), end)
}

/// C's `isspace`.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The number at the start of `tok` as `strtol`/`strtoull` read it (leading
/// white space, a sign, decimal digits), provided it ends the token or is
/// followed by white space, as `safe_strto*` require. Returns the sign and
/// the magnitude; None when there are no digits or it overflows 64 bits.
fn parse_number(tok: &[u8]) -> Option<(bool, u64)> {
    let mut i = tok.iter().take_while(|&&b| is_space(b)).count();
    let negative = match tok.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let digits = tok[i..].iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let mut n: u64 = 0;
    for &d in &tok[i..i + digits] {
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    match tok.get(i + digits) {
        None => Some((negative, n)),
        Some(&b) if is_space(b) => Some((negative, n)),
        Some(_) => None,
    }
}

/// `safe_strtol`: a signed number up to `INT_MAX` (memcached's exptimes and
/// lengths). Below `INT_MIN` memcached wraps; here it stays a very old time.
pub(crate) fn parse_i32(tok: &[u8]) -> Option<i64> {
    let (negative, n) = parse_number(tok)?;
    match negative {
        false if n <= i32::MAX as u64 => Some(n as i64),
        true if n <= i64::MAX as u64 => Some(-(n as i64)),
        _ => None,
    }
}

/// `safe_strtoul` for 32-bit client flags. memcached keeps the low 32 bits
/// of a larger number; here it is refused ("bad command line format"), so
/// that flags are never silently changed.
pub(crate) fn parse_u32(tok: &[u8]) -> Option<u32> {
    match parse_number(tok)? {
        (false, n) => u32::try_from(n).ok(),
        (true, _) => None,
    }
}

/// `safe_strtoull`: an unsigned 64-bit number (CAS values, deltas). A minus
/// sign is refused.
pub(crate) fn parse_u64(tok: &[u8]) -> Option<u64> {
    match parse_number(tok)? {
        (false, n) => Some(n),
        (true, _) => None,
    }
}

/// Appends `n` in decimal.
pub fn write_u64(out: &mut Vec<u8>, n: u64) {
    crate::resp::number::push_u64(out, n);
}

/// Appends `n` in decimal, with a sign when negative.
pub fn write_i64(out: &mut Vec<u8>, n: i64) {
    crate::resp::number::push_i64(out, n);
}

/// Appends a reply line: `line` and `\r\n`.
pub fn write_line(out: &mut Vec<u8>, line: &[u8]) {
    out.extend_from_slice(line);
    out.extend_from_slice(b"\r\n");
}

/// Appends a retrieval hit: `VALUE <key> <flags> <bytes>[ <cas>]\r\n`, the
/// data and `\r\n`. (The caller ends the whole reply with `END\r\n`.)
pub fn write_value(out: &mut Vec<u8>, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    out.reserve(key.len() + data.len() + 48);
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    out.push(b' ');
    write_u64(out, u64::from(flags));
    out.push(b' ');
    write_u64(out, data.len() as u64);
    if let Some(cas) = cas {
        out.push(b' ');
        write_u64(out, cas);
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Appends one `STAT <name> <value>\r\n` line.
pub fn write_stat(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(b"STAT ");
    out.extend_from_slice(name);
    out.push(b' ');
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &[u8]) -> Parsed<'_> {
        Parser::default().parse(input)
    }

    fn error(line: &'static str, consumed: usize) -> Parsed<'static> {
        Parsed::Error {
            line,
            quiet: false,
            consumed,
        }
    }

    #[test]
    fn get_takes_every_key() {
        let Parsed::Request(Request::Get { cas, touch, keys }, 13) = parse(b"get a  bb c\r\n")
        else {
            panic!()
        };
        assert!(!cas);
        assert_eq!(touch, None);
        assert_eq!(keys.collect::<Vec<_>>(), [&b"a"[..], b"bb", b"c"]);
        let Parsed::Request(Request::Get { cas, touch, keys }, _) = parse(b"gats 10 k\n") else {
            panic!()
        };
        assert!(cas);
        assert_eq!(touch, Some(10));
        assert_eq!(keys.collect::<Vec<_>>(), [b"k"]);
    }

    #[test]
    fn get_refuses_a_long_key_and_a_missing_one() {
        let long = [b"get a ", &[b'k'; 251][..], b"\r\n"].concat();
        assert_eq!(parse(&long), error(BAD_FORMAT, long.len()));
        let ok = [b"get ", &[b'k'; 250][..], b"\r\n"].concat();
        assert!(matches!(parse(&ok), Parsed::Request(..)));
        assert_eq!(parse(b"get\r\n"), error(ERROR, 5));
        assert_eq!(parse(b"gat x k\r\n"), error(BAD_EXPTIME, 9));
    }

    #[test]
    fn set_waits_for_its_data_block() {
        assert_eq!(parse(b"set k 5 0 3\r\nab"), Parsed::Incomplete);
        assert_eq!(parse(b"set k 5 0 3\r\nabc\r"), Parsed::Incomplete);
        let Parsed::Request(r, 18) = parse(b"set k 5 0 3\r\nabc\r\nget k\r\n") else {
            panic!()
        };
        assert_eq!(
            r,
            Request::Store {
                mode: StoreMode::Set,
                key: b"k",
                flags: 5,
                exptime: 0,
                cas: None,
                data: b"abc",
                noreply: false,
            }
        );
        assert_eq!(
            parse(b"set k 0 0 3\r\nabcXY"),
            error(BAD_DATA_CHUNK, 18),
            "the whole block is consumed"
        );
    }

    #[test]
    fn a_bad_storage_line_does_not_consume_the_block() {
        assert_eq!(parse(b"set k 0 0 -1\r\nx\r\n"), error(BAD_FORMAT, 14));
        assert_eq!(parse(b"set k 0 0\r\n"), error(ERROR, 11));
        assert_eq!(
            parse(b"set k 0 0 x noreply\r\n"),
            Parsed::Error {
                line: BAD_FORMAT,
                quiet: true,
                consumed: 21
            }
        );
        assert_eq!(parse(b"set k 4294967296 0 1\r\n"), error(BAD_FORMAT, 22));
    }

    #[test]
    fn a_too_large_block_is_skipped() {
        let mut p = Parser::new(4);
        let Parsed::Request(r, 13) = p.parse(b"set k 0 0 5\r\n") else {
            panic!()
        };
        assert_eq!(
            r,
            Request::TooLarge {
                key: b"k"[..].into(),
                remove_old: true,
                noreply: false
            }
        );
        assert!(p.skipping());
        assert_eq!(p.parse(b""), Parsed::Incomplete);
        assert_eq!(p.parse(b"abc"), Parsed::Skipped(3));
        assert_eq!(p.parse(b"de\r\nversion\r\n"), Parsed::Skipped(4));
        assert_eq!(
            p.parse(b"version\r\n"),
            Parsed::Request(Request::Version, 9)
        );
    }

    #[test]
    fn long_lines_close_unless_they_are_gets() {
        assert_eq!(parse(&[b'a'; LINE_MAX]), Parsed::Incomplete);
        assert_eq!(parse(&[b'a'; LINE_MAX + 1]), Parsed::Close);
        let long_get = [&b"get "[..], &b"k ".repeat(2000)].concat();
        assert_eq!(parse(&long_get), Parsed::Incomplete);
        let done = [&long_get[..], b"\r\n"].concat();
        assert!(matches!(parse(&done), Parsed::Request(..)));
        assert_eq!(parse(b"GET / HTTP/1.1\r\n"), Parsed::Close);
    }

    #[test]
    fn lines_end_as_memcached_ends_them() {
        assert_eq!(parse(b"\r\n"), error(ERROR, 2));
        assert_eq!(parse(b"\n"), error(ERROR, 1));
        assert_eq!(parse(b"version\n"), Parsed::Request(Request::Version, 8));
        assert_eq!(
            parse(b"version\0junk\r\n"),
            Parsed::Request(Request::Version, 14)
        );
        assert_eq!(parse(b"VERSION\r\n"), error(ERROR, 9));
    }

    #[test]
    fn delete_takes_the_old_zero_and_noreply() {
        for (line, ok) in [
            (&b"delete k\r\n"[..], true),
            (b"delete k 0\r\n", true),
            (b"delete k noreply\r\n", true),
            (b"delete k 0 noreply\r\n", true),
            (b"delete k 1\r\n", false),
        ] {
            assert_eq!(matches!(parse(line), Parsed::Request(..)), ok, "{line:?}");
        }
        assert_eq!(parse(b"delete k 1\r\n"), error(DELETE_USAGE, 12));
        assert_eq!(parse(b"delete k x y z\r\n"), error(ERROR, 16));
    }

    #[test]
    fn numbers_read_as_strtol_reads_them() {
        assert_eq!(parse_i32(b"+5"), Some(5));
        assert_eq!(parse_i32(b"-5"), Some(-5));
        assert_eq!(parse_i32(b"5\tjunk"), Some(5));
        assert_eq!(parse_i32(b"5x"), None);
        assert_eq!(parse_i32(b"2147483648"), None);
        assert_eq!(parse_i32(b""), None);
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u32(b"4294967295"), Some(u32::MAX));
    }

    #[test]
    fn flush_all_and_verbosity() {
        assert_eq!(
            parse(b"flush_all\r\n"),
            Parsed::Request(
                Request::FlushAll {
                    delay: 0,
                    noreply: false
                },
                11
            )
        );
        assert_eq!(
            parse(b"flush_all 10 noreply\r\n"),
            Parsed::Request(
                Request::FlushAll {
                    delay: 10,
                    noreply: true
                },
                22
            )
        );
        assert_eq!(parse(b"flush_all x\r\n"), error(BAD_EXPTIME, 13));
        assert_eq!(parse(b"verbosity\r\n"), error(ERROR, 11));
        assert_eq!(
            parse(b"verbosity x noreply\r\n"),
            Parsed::Error {
                line: BAD_FORMAT,
                quiet: true,
                consumed: 21
            }
        );
    }

    #[test]
    fn writers() {
        let mut out = Vec::new();
        write_value(&mut out, b"k", u32::MAX, b"v", Some(7));
        write_value(&mut out, b"k", 0, b"", None);
        write_i64(&mut out, -12);
        assert_eq!(
            out,
            b"VALUE k 4294967295 1 7\r\nv\r\nVALUE k 0 0\r\n\r\n-12"
        );
    }
}
