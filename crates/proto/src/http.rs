//! HTTP/1.1 requests, sans-IO: the head (request line and headers) with the
//! limits nginx applies, request bodies (`Content-Length` or chunked), the
//! command URIs (`/?get+key`, `/js?lrange+l+0+-1`), raw-value paths with their
//! MIME types, the response head, and Server-Sent Events
//! ([`write_sse_event`]). The server owns the buffers and the I/O.
//!
//! ```
//! use proto::http::{command_args, route, HeadParser, Route, MAX_BODY};
//!
//! let buf = b"GET /?set+greeting+hello%20world HTTP/1.1\r\nHost: x\r\n\r\n";
//! let head = HeadParser::new().parse(buf, MAX_BODY)?.expect("a complete head");
//! assert_eq!(head.len, buf.len());
//! let Route::Command { json, query } = route(&buf[head.target.clone()])? else {
//!     panic!("not a command");
//! };
//! assert!(!json);
//! let args = command_args(query)?;
//! assert_eq!(args, [&b"set"[..], b"greeting", b"hello world"]);
//! # Ok::<(), proto::http::HttpError>(())
//! ```
//!
//! Limits (nginx's defaults where it has one): a request line of at most
//! [`MAX_LINE`] bytes (414 past it), header lines of at most [`MAX_LINE`]
//! each and a head of at most [`MAX_HEAD`] bytes and [`MAX_HEADERS`] fields
//! (431 past them), a body of at most the caller's limit (413 past it; the
//! server passes [`MAX_BODY`], nginx's `client_max_body_size`).

use std::borrow::Cow;
use std::ops::Range;

/// Longest request line, and longest header line (nginx's
/// `large_client_header_buffers 4 8k`).
pub const MAX_LINE: usize = 8 * 1024;

/// Longest head: request line, headers and the blank line (4 × 8 KiB).
pub const MAX_HEAD: usize = 32 * 1024;

/// Most header fields in one request.
pub const MAX_HEADERS: usize = 100;

/// Largest request body the server accepts (nginx's `client_max_body_size`).
pub const MAX_BODY: u64 = 1 << 20;

/// Longest chunk-size line (with extensions) in a chunked body.
const MAX_CHUNK_LINE: usize = 4096;

/// A request the server refuses, with the status it answers before closing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpError {
    /// 400: malformed head, target, escape or chunked body.
    BadRequest(&'static str),
    /// 413: the body is larger than the limit.
    PayloadTooLarge,
    /// 414: the request line is longer than [`MAX_LINE`].
    UriTooLong,
    /// 431: a header line, the head or the number of fields is past its limit.
    HeaderTooLarge,
    /// 501: a transfer coding other than `chunked`.
    NotImplemented,
    /// 505: an HTTP version other than 1.0 and 1.1.
    VersionNotSupported,
}

impl HttpError {
    /// The status code to answer.
    pub fn status(self) -> u16 {
        match self {
            HttpError::BadRequest(_) => 400,
            HttpError::PayloadTooLarge => 413,
            HttpError::UriTooLong => 414,
            HttpError::HeaderTooLarge => 431,
            HttpError::NotImplemented => 501,
            HttpError::VersionNotSupported => 505,
        }
    }

    /// A one-line explanation for the response body.
    pub fn detail(self) -> &'static str {
        match self {
            HttpError::BadRequest(why) => why,
            HttpError::PayloadTooLarge => "request body too large",
            HttpError::UriTooLong => "request line too long",
            HttpError::HeaderTooLarge => "request header fields too large",
            HttpError::NotImplemented => "transfer coding not implemented",
            HttpError::VersionNotSupported => "HTTP version not supported",
        }
    }
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status(), self.detail())
    }
}

impl std::error::Error for HttpError {}

/// The reason phrase of a status code.
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        413 => "Payload Too Large",
        414 => "URI Too Long",
        426 => "Upgrade Required",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        507 => "Insufficient Storage",
        _ => "Unknown",
    }
}

/// The request method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// HEAD.
    Head,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
    /// Anything else (OPTIONS, PATCH, …): answered 405.
    Other,
}

impl Method {
    fn from_bytes(m: &[u8]) -> Method {
        match m {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            _ => Method::Other,
        }
    }
}

/// How the request's body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// No body.
    None,
    /// `Content-Length` bytes after the head.
    Length(u64),
    /// `Transfer-Encoding: chunked`: decode with [`ChunkedDecoder`].
    Chunked,
}

/// A parsed request head. Every byte field is a range into the buffer the
/// head was parsed from (the buffer stays put until the request is done).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// The method.
    pub method: Method,
    /// The request target (`/index.html`, `/?get+k`).
    pub target: Range<usize>,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    /// Whether the connection stays open after the response: HTTP/1.1 unless
    /// `Connection: close`, HTTP/1.0 only with `Connection: keep-alive`.
    pub keep_alive: bool,
    /// How the body is delimited.
    pub body: BodyKind,
    /// `Expect: 100-continue`.
    pub expect_continue: bool,
    /// `Upgrade: websocket` was asked for.
    pub websocket: bool,
    /// `Connection` lists `upgrade`.
    pub connection_upgrade: bool,
    /// `Host`.
    pub host: Option<Range<usize>>,
    /// `Origin`.
    pub origin: Option<Range<usize>>,
    /// `Sec-WebSocket-Key`.
    pub ws_key: Option<Range<usize>>,
    /// `Sec-WebSocket-Version`.
    pub ws_version: Option<Range<usize>>,
    /// Every `Sec-WebSocket-Protocol` field (each a comma-separated list).
    pub ws_protocols: Vec<Range<usize>>,
    /// `Sec-Fetch-Site: cross-site`: a browser sent it on behalf of another
    /// site's page.
    pub cross_site: bool,
    /// `Authorization`.
    pub authorization: Option<Range<usize>>,
    /// Bytes of the head, blank line included (the body starts here).
    pub len: usize,
}

/// The user name and password of an `Authorization` field: `Basic
/// base64(user:password)`, or `Bearer <token>` (the token is the default
/// user's password, as `AUTH <password>` takes it). None when malformed.
pub fn credentials(value: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    use base64::Engine as _;
    let value = value.trim_ascii();
    let space = value.iter().position(|&b| b == b' ')?;
    let (scheme, rest) = (&value[..space], value[space + 1..].trim_ascii());
    if scheme.eq_ignore_ascii_case(b"basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .ok()?;
        let colon = decoded.iter().position(|&b| b == b':')?;
        Some((decoded[..colon].to_vec(), decoded[colon + 1..].to_vec()))
    } else if scheme.eq_ignore_ascii_case(b"bearer") && !rest.is_empty() {
        Some((b"default".to_vec(), rest.to_vec()))
    } else {
        None
    }
}

/// Finds request heads in a growing buffer. It remembers how far it looked,
/// so a head that arrives a few bytes at a time is scanned once, and it
/// enforces the line and head limits before the head is complete.
#[derive(Clone, Debug, Default)]
pub struct HeadParser {
    /// Bytes already scanned for line ends.
    scanned: usize,
    /// Where the line being scanned starts.
    line_start: usize,
    /// Non-empty lines seen (0 while still in the request line).
    lines: usize,
}

impl HeadParser {
    /// A parser at the start of a request.
    pub const fn new() -> Self {
        HeadParser {
            scanned: 0,
            line_start: 0,
            lines: 0,
        }
    }

    /// Forgets a partly scanned head (the buffer was replaced).
    pub fn reset(&mut self) {
        *self = HeadParser::new();
    }

    /// Parses the head at the start of `buf`: `Ok(None)` while it is
    /// incomplete (call again with the same bytes and more), the head once
    /// the blank line arrived, or the error to answer. `max_body` is the
    /// largest `Content-Length` accepted. After a head or an error the parser
    /// is ready for the next request.
    pub fn parse(&mut self, buf: &[u8], max_body: u64) -> Result<Option<Head>, HttpError> {
        let result = self.scan(buf);
        match result {
            Ok(Some(end)) => {
                self.reset();
                parse_complete(buf, end, max_body).map(Some)
            }
            Ok(None) => Ok(None),
            Err(e) => {
                self.reset();
                Err(e)
            }
        }
    }

    /// Scans the new bytes for the blank line ending the head; returns its
    /// end, or None with the limits checked.
    fn scan(&mut self, buf: &[u8]) -> Result<Option<usize>, HttpError> {
        let from = self.scanned.min(buf.len());
        for nl in memchr::memchr_iter(b'\n', &buf[from..]).map(|i| from + i) {
            let line = &buf[self.line_start..nl];
            let len = line.len() - usize::from(line.last() == Some(&b'\r'));
            self.check_line(len)?;
            self.line_start = nl + 1;
            if nl + 1 > MAX_HEAD {
                return Err(HttpError::HeaderTooLarge);
            }
            if len == 0 {
                if self.lines > 0 {
                    self.scanned = nl + 1;
                    return Ok(Some(nl + 1));
                }
                // Empty lines before the request line are skipped (RFC 9112
                // §2.2), as httparse does.
            } else {
                self.lines += 1;
            }
        }
        self.scanned = buf.len();
        // A partial line is measured as a complete one would be: without
        // the `\r` of its line end.
        let partial = &buf[self.line_start..];
        self.check_line(partial.len() - usize::from(partial.last() == Some(&b'\r')))?;
        if buf.len() > MAX_HEAD {
            return Err(HttpError::HeaderTooLarge);
        }
        Ok(None)
    }

    fn check_line(&self, len: usize) -> Result<(), HttpError> {
        if len <= MAX_LINE {
            Ok(())
        } else if self.lines == 0 {
            Err(HttpError::UriTooLong)
        } else {
            Err(HttpError::HeaderTooLarge)
        }
    }
}

/// Where `part` (a sub-slice of `buf`) lies in `buf`.
fn range_in(buf: &[u8], part: &[u8]) -> Range<usize> {
    let start = (part.as_ptr() as usize).saturating_sub(buf.as_ptr() as usize);
    start..start + part.len()
}

/// Runs httparse on a head known to end at `end` and reads the fields the
/// server acts on.
fn parse_complete(buf: &[u8], end: usize, max_body: u64) -> Result<Head, HttpError> {
    let head = &buf[..end];
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut fields);
    match req.parse(head) {
        Ok(httparse::Status::Complete(n)) if n == end => {}
        Ok(_) => return Err(HttpError::BadRequest("malformed request head")),
        Err(httparse::Error::TooManyHeaders) => return Err(HttpError::HeaderTooLarge),
        Err(httparse::Error::Version) => return Err(version_error(head)),
        Err(_) => return Err(HttpError::BadRequest("malformed request head")),
    }
    let (Some(method), Some(path), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(HttpError::BadRequest("malformed request line"));
    };
    let mut h = Head {
        method: Method::from_bytes(method.as_bytes()),
        target: range_in(head, path.as_bytes()),
        minor_version: minor,
        keep_alive: minor == 1,
        body: BodyKind::None,
        expect_continue: false,
        websocket: false,
        connection_upgrade: false,
        host: None,
        origin: None,
        ws_key: None,
        ws_version: None,
        ws_protocols: Vec::new(),
        cross_site: false,
        authorization: None,
        len: end,
    };
    let (mut close, mut keep_alive) = (false, false);
    let mut length: Option<u64> = None;
    let mut chunked = false;
    for f in req.headers.iter() {
        let (name, value) = (f.name.as_bytes(), f.value);
        let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
        if is("content-length") {
            let n = parse_length(value)?;
            if length.is_some_and(|l| l != n) {
                return Err(HttpError::BadRequest("conflicting Content-Length fields"));
            }
            length = Some(n);
        } else if is("transfer-encoding") {
            // Only `chunked`, alone: anything else is a coding we cannot
            // undo (nginx answers 501 too).
            let mut codings = tokens(value);
            match (codings.next(), codings.next()) {
                (Some(c), None) if c.eq_ignore_ascii_case(b"chunked") && !chunked => chunked = true,
                _ => return Err(HttpError::NotImplemented),
            }
        } else if is("connection") {
            for t in tokens(value) {
                close |= t.eq_ignore_ascii_case(b"close");
                keep_alive |= t.eq_ignore_ascii_case(b"keep-alive");
                h.connection_upgrade |= t.eq_ignore_ascii_case(b"upgrade");
            }
        } else if is("host") {
            if h.host.is_some() {
                return Err(HttpError::BadRequest("more than one Host field"));
            }
            h.host = Some(range_in(buf, value));
        } else if is("expect") {
            h.expect_continue |= value.eq_ignore_ascii_case(b"100-continue");
        } else if is("upgrade") {
            h.websocket |= tokens(value).any(|t| t.eq_ignore_ascii_case(b"websocket"));
        } else if is("origin") {
            h.origin = Some(range_in(buf, value));
        } else if is("sec-websocket-key") {
            h.ws_key = Some(range_in(buf, value));
        } else if is("sec-websocket-version") {
            h.ws_version = Some(range_in(buf, value));
        } else if is("sec-websocket-protocol") {
            h.ws_protocols.push(range_in(buf, value));
        } else if is("sec-fetch-site") {
            h.cross_site = value.eq_ignore_ascii_case(b"cross-site");
        } else if is("authorization") {
            h.authorization = Some(range_in(buf, value));
        }
    }
    if minor == 1 && h.host.is_none() {
        return Err(HttpError::BadRequest("HTTP/1.1 request without Host"));
    }
    h.body = match (chunked, length) {
        (true, Some(_)) => {
            return Err(HttpError::BadRequest(
                "both Content-Length and Transfer-Encoding",
            ))
        }
        (true, None) => BodyKind::Chunked,
        (false, Some(n)) if n > max_body => return Err(HttpError::PayloadTooLarge),
        (false, Some(0)) | (false, None) => BodyKind::None,
        (false, Some(n)) => BodyKind::Length(n),
    };
    h.keep_alive = !close && (minor == 1 || keep_alive);
    Ok(h)
}

/// httparse refuses every version but 1.0 and 1.1 alike: a well-formed
/// request line with `HTTP/x.y` gets 505, anything else 400.
fn version_error(head: &[u8]) -> HttpError {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut parts = line.split(|&b| b == b' ');
    let version = parts.nth(2).filter(|_| parts.next().is_none());
    match version {
        Some([b'H', b'T', b'T', b'P', b'/', major, b'.', minor])
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            HttpError::VersionNotSupported
        }
        _ => HttpError::BadRequest("malformed request line"),
    }
}

/// `Content-Length`: decimal digits only (no sign, no spaces inside).
fn parse_length(value: &[u8]) -> Result<u64, HttpError> {
    let value = trim(value);
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return Err(HttpError::BadRequest("invalid Content-Length"));
    }
    value.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            // Past u64: certainly past any body limit.
            .ok_or(HttpError::PayloadTooLarge)
    })
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// The non-empty comma-separated tokens of a field value.
pub fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim)
        .filter(|t| !t.is_empty())
}

/// What a request target asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// `/?cmd+arg…` (reply as RESP text) or `/js?cmd+arg…` (reply as JSON):
    /// `query` is still encoded; split it with [`command_args`].
    Command {
        /// `/js?`: the reply as JSON.
        json: bool,
        /// The query string, still encoded.
        query: &'a [u8],
    },
    /// Any other path: the key whose raw value is the resource, still
    /// encoded, without the leading `/` (decode it with [`percent_decode`]).
    /// `/` alone names `index.html`, as nginx's `index` does. A query string
    /// after a key is ignored, as a static file server ignores it.
    Key(&'a [u8]),
}

/// Routes a request target: origin form (`/path?query`) or absolute form
/// (`http://host/path?query`, which proxies send).
pub fn route(target: &[u8]) -> Result<Route<'_>, HttpError> {
    let target = strip_authority(target)?;
    let (path, query) = match memchr::memchr(b'?', target) {
        Some(q) => (&target[..q], Some(&target[q + 1..])),
        None => (target, None),
    };
    // A fragment is never sent by clients; if one is, it is not part of
    // the resource.
    let query = query.map(|q| q.split(|&b| b == b'#').next().unwrap_or_default());
    let path = path.split(|&b| b == b'#').next().unwrap_or_default();
    match (path, query) {
        (b"/", Some(q)) => Ok(Route::Command {
            json: false,
            query: q,
        }),
        (b"/js", Some(q)) => Ok(Route::Command {
            json: true,
            query: q,
        }),
        (b"/", None) => Ok(Route::Key(b"index.html")),
        (p, _) => Ok(Route::Key(&p[1..])),
    }
}

/// `/path` stays; `http://host[:port]/path` loses its scheme and authority;
/// anything else (`*`, a bare name) is refused.
fn strip_authority(target: &[u8]) -> Result<&[u8], HttpError> {
    if target.first() == Some(&b'/') {
        return Ok(target);
    }
    let lower = |n: usize| target.get(..n).map(|p| p.to_ascii_lowercase());
    let rest = if lower(7).as_deref() == Some(b"http://") {
        &target[7..]
    } else if lower(8).as_deref() == Some(b"https://") {
        &target[8..]
    } else {
        return Err(HttpError::BadRequest("invalid request target"));
    };
    match memchr::memchr(b'/', rest) {
        Some(slash) => Ok(&rest[slash..]),
        None if rest.is_empty() => Err(HttpError::BadRequest("invalid request target")),
        // `http://host` alone: the root.
        None => Ok(b"/"),
    }
}

/// Splits a command query into arguments: `+` separates them (so a literal
/// plus is `%2B`), and each is percent-decoded. An empty query gives no
/// arguments; `a++b` has an empty argument in the middle.
pub fn command_args(query: &[u8]) -> Result<Vec<Cow<'_, [u8]>>, HttpError> {
    if query.is_empty() {
        return Ok(Vec::new());
    }
    query.split(|&b| b == b'+').map(percent_decode).collect()
}

/// Decodes `%XX` escapes (two hex digits, either case); every other byte
/// stands for itself. Borrows when there is no escape. A `%` not followed by
/// two hex digits is refused.
pub fn percent_decode(s: &[u8]) -> Result<Cow<'_, [u8]>, HttpError> {
    let Some(first) = memchr::memchr(b'%', s) else {
        return Ok(Cow::Borrowed(s));
    };
    let mut out = Vec::with_capacity(s.len());
    out.extend_from_slice(&s[..first]);
    let mut i = first;
    while i < s.len() {
        if s[i] == b'%' {
            let hi = s.get(i + 1).copied().and_then(hex_digit);
            let lo = s.get(i + 2).copied().and_then(hex_digit);
            let (Some(hi), Some(lo)) = (hi, lo) else {
                return Err(HttpError::BadRequest("invalid %-escape in the URI"));
            };
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    Ok(Cow::Owned(out))
}

/// Encodes every byte that is not unreserved (RFC 3986: letters, digits,
/// `-._~`) as `%XX`: the inverse of [`percent_decode`], and safe for a
/// command argument (a `+` becomes `%2B`).
pub fn percent_encode(s: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in s {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    }
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The Content-Type for a key, from its extension (the text after the last
/// `.` of its last `/`-separated part), as nginx's `mime.types` maps it;
/// `application/octet-stream` when there is none or it is unknown.
pub fn mime_type(key: &[u8]) -> &'static str {
    let name = key.rsplit(|&b| b == b'/').next().unwrap_or(key);
    let Some(dot) = memchr::memrchr(b'.', name) else {
        return "application/octet-stream";
    };
    let ext = &name[dot + 1..];
    if ext.len() > 8 {
        return "application/octet-stream";
    }
    let mut lower = [0u8; 8];
    lower[..ext.len()].copy_from_slice(ext);
    lower.make_ascii_lowercase();
    match &lower[..ext.len()] {
        b"html" | b"htm" | b"shtml" => "text/html",
        b"css" => "text/css",
        b"xml" => "text/xml",
        b"txt" => "text/plain",
        b"md" => "text/markdown",
        b"csv" => "text/csv",
        b"js" | b"mjs" => "application/javascript",
        b"json" => "application/json",
        b"wasm" => "application/wasm",
        b"pdf" => "application/pdf",
        b"zip" => "application/zip",
        b"gz" => "application/gzip",
        b"tar" => "application/x-tar",
        b"rss" => "application/rss+xml",
        b"atom" => "application/atom+xml",
        b"png" => "image/png",
        b"jpg" | b"jpeg" => "image/jpeg",
        b"gif" => "image/gif",
        b"svg" | b"svgz" => "image/svg+xml",
        b"ico" => "image/x-icon",
        b"webp" => "image/webp",
        b"avif" => "image/avif",
        b"bmp" => "image/x-ms-bmp",
        b"woff" => "font/woff",
        b"woff2" => "font/woff2",
        b"ttf" => "font/ttf",
        b"otf" => "font/otf",
        b"mp3" => "audio/mpeg",
        b"ogg" => "audio/ogg",
        b"wav" => "audio/wav",
        b"mp4" => "video/mp4",
        b"webm" => "video/webm",
        _ => "application/octet-stream",
    }
}

/// The `Date` field's value for `unix_secs` (IMF-fixdate, always 29 bytes:
/// `Sun, 06 Nov 1994 08:49:37 GMT`).
pub fn http_date(unix_secs: u64) -> [u8; 29] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let days = unix_secs / 86_400;
    let secs = unix_secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    let mut out = [0u8; 29];
    let two = |n: u64| [b'0' + (n / 10 % 10) as u8, b'0' + (n % 10) as u8];
    out[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    out[3..5].copy_from_slice(b", ");
    out[5..7].copy_from_slice(&two(day));
    out[7] = b' ';
    out[8..11].copy_from_slice(MONTHS[(month - 1) as usize]);
    out[11] = b' ';
    let y = year % 10_000;
    out[12..14].copy_from_slice(&two(y / 100));
    out[14..16].copy_from_slice(&two(y % 100));
    out[16] = b' ';
    out[17..19].copy_from_slice(&two(secs / 3600));
    out[19] = b':';
    out[20..22].copy_from_slice(&two(secs / 60 % 60));
    out[22] = b':';
    out[23..25].copy_from_slice(&two(secs % 60));
    out[25..].copy_from_slice(b" GMT");
    out
}

/// Year, month (1–12) and day (1–31) of a day count since 1970-01-01
/// (Howard Hinnant's `civil_from_days`, for days ≥ 0).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// What the response says about the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Connection {
    /// Nothing: HTTP/1.1's default (keep-alive).
    Default,
    /// `Connection: keep-alive`, for an HTTP/1.0 client that asked for it.
    KeepAlive,
    /// `Connection: close`: the server closes after this response.
    Close,
}

/// A response head to write.
#[derive(Clone, Copy, Debug)]
pub struct Response<'a> {
    /// Status code.
    pub status: u16,
    /// The `Date` value ([`http_date`]).
    pub date: &'a [u8],
    /// `Content-Type`, if any.
    pub content_type: Option<&'a str>,
    /// `Content-Length` (left out for 1xx, 101 and 204 responses). None
    /// leaves it out: the body runs until the connection closes (an event
    /// stream), so the connection must be [`Connection::Close`].
    pub content_length: Option<u64>,
    /// The connection's fate.
    pub connection: Connection,
    /// Further fields, written as given.
    pub extra: &'a [(&'a str, &'a [u8])],
}

impl Response<'_> {
    /// Appends the status line and fields, blank line included.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"HTTP/1.1 ");
        crate::resp::number::push_u64(out, u64::from(self.status));
        out.push(b' ');
        out.extend_from_slice(reason(self.status).as_bytes());
        out.extend_from_slice(b"\r\nServer: shoal\r\nDate: ");
        out.extend_from_slice(self.date);
        if let Some(ct) = self.content_type {
            out.extend_from_slice(b"\r\nContent-Type: ");
            out.extend_from_slice(ct.as_bytes());
        }
        if let Some(length) = self
            .content_length
            .filter(|_| self.status >= 200 && self.status != 204)
        {
            out.extend_from_slice(b"\r\nContent-Length: ");
            crate::resp::number::push_u64(out, length);
        }
        match self.connection {
            Connection::Default => {}
            Connection::KeepAlive => out.extend_from_slice(b"\r\nConnection: keep-alive"),
            Connection::Close => out.extend_from_slice(b"\r\nConnection: close"),
        }
        for (name, value) in self.extra {
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
        }
        out.extend_from_slice(b"\r\n\r\n");
    }
}

/// Appends one Server-Sent Event (the HTML standard's `text/event-stream`):
/// `event: <event>`, `data` as `data:` lines, and the blank line that ends
/// the event. A stream carries lines of UTF-8, so every line break in
/// `data` (CRLF, CR or LF) starts another `data:` line (a browser's
/// `EventSource` joins them with LF) and bytes that are not UTF-8 become
/// U+FFFD, as a browser would decode them.
pub fn write_sse_event(out: &mut Vec<u8>, event: &str, data: &[u8]) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(event.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    let text = String::from_utf8_lossy(data);
    let mut bytes = text.as_bytes().iter().copied().peekable();
    while let Some(b) = bytes.next() {
        match b {
            b'\r' | b'\n' => {
                if b == b'\r' && bytes.peek() == Some(&b'\n') {
                    bytes.next();
                }
                out.extend_from_slice(b"\ndata: ");
            }
            _ => out.push(b),
        }
    }
    out.extend_from_slice(b"\n\n");
}

/// Where a chunked body's decoding stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    /// In the hex size (`digits` so far).
    Size { digits: usize },
    /// After `;`: an extension, skipped.
    Extension,
    /// Saw `\r` after the size line.
    SizeLf,
    /// Data bytes still to come.
    Data(u64),
    /// After the data: expecting `\r\n`.
    DataCr,
    /// After the data's `\r`.
    DataLf,
    /// In a trailer line of `len` bytes.
    Trailer { len: usize },
    /// The last chunk and trailers are done.
    Done,
}

/// Decodes a chunked body incrementally: feed it the bytes after the head
/// as they arrive; each call consumes what it can.
#[derive(Clone, Debug)]
pub struct ChunkedDecoder {
    state: Chunk,
    /// The current chunk's size.
    size: u64,
    /// Bytes of the current size line.
    line: usize,
    /// Bytes of trailer fields so far.
    trailers: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder::new()
    }
}

impl ChunkedDecoder {
    /// A decoder at the start of a body.
    pub const fn new() -> Self {
        ChunkedDecoder {
            state: Chunk::Size { digits: 0 },
            size: 0,
            line: 0,
            trailers: 0,
        }
    }

    /// Whether the last chunk and the trailers have been read.
    pub fn is_done(&self) -> bool {
        self.state == Chunk::Done
    }

    /// Decodes from `input`, appending data to `body` (which may not grow
    /// past `max_body`), and returns how many bytes of `input` it used. It
    /// stops at the end of the body; the bytes after belong to the next
    /// request.
    pub fn decode(
        &mut self,
        input: &[u8],
        body: &mut Vec<u8>,
        max_body: u64,
    ) -> Result<usize, HttpError> {
        let bad = |why| Err(HttpError::BadRequest(why));
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            match self.state {
                Chunk::Done => return Ok(i),
                Chunk::Data(left) => {
                    let take = (input.len() - i).min(usize::try_from(left).unwrap_or(usize::MAX));
                    body.extend_from_slice(&input[i..i + take]);
                    i += take;
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        Chunk::DataCr
                    } else {
                        Chunk::Data(left)
                    };
                    continue;
                }
                Chunk::Size { digits } => {
                    self.line += 1;
                    if let Some(d) = hex_digit(b) {
                        self.size = self
                            .size
                            .checked_mul(16)
                            .and_then(|s| s.checked_add(u64::from(d)))
                            .filter(|s| (body.len() as u64).saturating_add(*s) <= max_body)
                            .ok_or(HttpError::PayloadTooLarge)?;
                        self.state = Chunk::Size { digits: digits + 1 };
                    } else if digits == 0 {
                        return bad("invalid chunk size");
                    } else if b == b';' {
                        self.state = Chunk::Extension;
                    } else if b == b'\r' {
                        self.state = Chunk::SizeLf;
                    } else if b == b'\n' {
                        self.end_size_line();
                    } else {
                        return bad("invalid chunk size");
                    }
                    if self.line > MAX_CHUNK_LINE {
                        return bad("chunk size line too long");
                    }
                }
                Chunk::Extension => {
                    self.line += 1;
                    if b == b'\n' {
                        self.end_size_line();
                    } else if self.line > MAX_CHUNK_LINE {
                        return bad("chunk size line too long");
                    }
                }
                Chunk::SizeLf => {
                    if b != b'\n' {
                        return bad("invalid chunk size line");
                    }
                    self.end_size_line();
                }
                Chunk::DataCr => match b {
                    b'\r' => self.state = Chunk::DataLf,
                    b'\n' => self.state = Chunk::Size { digits: 0 },
                    _ => return bad("chunk data longer than its size"),
                },
                Chunk::DataLf => {
                    if b != b'\n' {
                        return bad("chunk data longer than its size");
                    }
                    self.state = Chunk::Size { digits: 0 };
                }
                Chunk::Trailer { len } => {
                    self.trailers += 1;
                    if self.trailers > MAX_HEAD {
                        return Err(HttpError::HeaderTooLarge);
                    }
                    self.state = match b {
                        b'\n' if len == 0 => Chunk::Done,
                        b'\n' => Chunk::Trailer { len: 0 },
                        // A `\r` ends the line, or it is part of it: either
                        // way an empty line stays empty only before its `\n`.
                        b'\r' => Chunk::Trailer { len },
                        _ => Chunk::Trailer { len: len + 1 },
                    };
                }
            }
            i += 1;
        }
        Ok(i)
    }

    fn end_size_line(&mut self) {
        self.line = 0;
        self.state = if self.size == 0 {
            Chunk::Trailer { len: 0 }
        } else {
            Chunk::Data(self.size)
        };
        self.size = 0;
    }
}

/// Harness functions for the `http_request` fuzz target and its stable
/// property test; they panic only when an invariant breaks.
#[doc(hidden)]
pub mod fuzzing {
    use super::*;

    /// What a byte stream of requests gave, request by request.
    #[derive(Debug, PartialEq)]
    enum Event {
        Request { head: Head, body: Vec<u8> },
        Error(HttpError),
    }

    /// The request being read.
    enum State {
        Head,
        Body(Head, usize),
        Chunked(Head, ChunkedDecoder, Vec<u8>, usize),
    }

    /// Reads requests the way the server does, delivering `data[..end]`
    /// for each of `ends` in turn (the last is `data.len()`).
    fn drive(data: &[u8], ends: &[usize]) -> Vec<Event> {
        let mut events = Vec::new();
        let mut parser = HeadParser::new();
        let mut state = State::Head;
        let mut start = 0;
        for &end in ends {
            let buf = &data[..end];
            loop {
                let rest = &buf[start..];
                state = match state {
                    State::Head => match parser.parse(rest, MAX_BODY) {
                        Ok(None) => {
                            state = State::Head;
                            break;
                        }
                        Err(e) => {
                            events.push(Event::Error(e));
                            return events;
                        }
                        Ok(Some(head)) => {
                            assert!(head.len <= rest.len() && head.len > 0);
                            assert!(head.target.end <= head.len);
                            match head.body {
                                BodyKind::None => {
                                    start += head.len;
                                    events.push(Event::Request {
                                        head,
                                        body: Vec::new(),
                                    });
                                    State::Head
                                }
                                BodyKind::Length(n) => {
                                    assert!(n > 0 && n <= MAX_BODY);
                                    State::Body(head, n as usize)
                                }
                                BodyKind::Chunked => {
                                    State::Chunked(head, ChunkedDecoder::new(), Vec::new(), 0)
                                }
                            }
                        }
                    },
                    State::Body(head, n) => {
                        if rest.len() < head.len + n {
                            state = State::Body(head, n);
                            break;
                        }
                        let body = rest[head.len..head.len + n].to_vec();
                        start += head.len + n;
                        events.push(Event::Request { head, body });
                        State::Head
                    }
                    State::Chunked(head, mut decoder, mut body, used) => {
                        let from = head.len + used;
                        match decoder.decode(&rest[from..], &mut body, MAX_BODY) {
                            Err(e) => {
                                events.push(Event::Error(e));
                                return events;
                            }
                            Ok(n) => {
                                assert!(from + n <= rest.len());
                                assert!(body.len() as u64 <= MAX_BODY);
                                if decoder.is_done() {
                                    start += from + n;
                                    events.push(Event::Request { head, body });
                                    State::Head
                                } else {
                                    // It used everything it was given.
                                    assert_eq!(from + n, rest.len());
                                    state = State::Chunked(head, decoder, body, used + n);
                                    break;
                                }
                            }
                        }
                    }
                };
            }
        }
        events
    }

    /// Writes `data` as an event and reads it back as a browser does.
    fn check_sse(data: &[u8]) {
        let mut out = Vec::new();
        write_sse_event(&mut out, "message", data);
        let text = std::str::from_utf8(&out).expect("an event stream is UTF-8");
        assert!(!text.contains('\r'), "a line break other than LF");
        let body = text
            .strip_suffix("\n\n")
            .expect("the blank line ending the event");
        let mut lines = body.split('\n');
        assert_eq!(lines.next(), Some("event: message"));
        let data_lines: Vec<&str> = lines
            .map(|l| l.strip_prefix("data: ").expect("only data lines"))
            .collect();
        let expected = String::from_utf8_lossy(data)
            .replace("\r\n", "\n")
            .replace('\r', "\n");
        assert_eq!(data_lines.join("\n"), expected);
    }

    /// Feeds `data` as a stream of requests and checks:
    ///
    /// * nothing panics, and every range a head gives lies inside it;
    /// * delivering the bytes whole, one at a time, in chunks of a size
    ///   taken from the input, or split at a point taken from the input
    ///   gives the same requests and the same error;
    /// * a command URI's arguments, percent-encoded again and joined with
    ///   `+`, parse to the same arguments;
    /// * percent-encoding then decoding any bytes gives them back;
    /// * routing, MIME types, dates and response heads never panic;
    /// * the bytes as a Server-Sent Event, read back by the HTML standard's
    ///   rules, give the bytes as UTF-8 with every line break as LF.
    pub fn fuzz_request(data: &[u8]) {
        let whole = drive(data, &[data.len()]);
        let bytewise: Vec<usize> = (0..=data.len()).collect();
        assert_eq!(drive(data, &bytewise), whole, "byte by byte");
        let chunk = usize::from(data.first().copied().unwrap_or(1)).max(1);
        let mut ends: Vec<usize> = (chunk..data.len()).step_by(chunk).collect();
        ends.push(data.len());
        assert_eq!(drive(data, &ends), whole, "in chunks of {chunk}");
        let split = data.len() / 2 + usize::from(data.last().copied().unwrap_or(0)) % 7;
        let split = split.min(data.len());
        assert_eq!(drive(data, &[split, data.len()]), whole, "split at {split}");

        let mut rest = data;
        for event in &whole {
            let Event::Request { head, body } = event else {
                continue;
            };
            check_target(&rest[head.target.clone()]);
            Response {
                status: 200,
                date: &http_date(body.len() as u64 * 86_399_999),
                content_type: Some(mime_type(&rest[head.target.clone()])),
                content_length: Some(body.len() as u64),
                connection: Connection::KeepAlive,
                extra: &[("X", body)],
            }
            .write(&mut Vec::new());
            rest = &rest[head.len..];
        }

        check_sse(data);

        let mut encoded = Vec::new();
        percent_encode(data, &mut encoded);
        assert_eq!(percent_decode(&encoded).as_deref(), Ok(data));
        let seconds = data
            .iter()
            .take(8)
            .fold(0u64, |n, &b| n << 8 | u64::from(b));
        assert_eq!(http_date(seconds).len(), 29);
        let status = data
            .iter()
            .fold(0u16, |n, &b| n.wrapping_mul(31).wrapping_add(u16::from(b)));
        assert!(!reason(status % 600).is_empty());
    }

    /// Routes a target and checks the arguments round trip.
    fn check_target(target: &[u8]) {
        match route(target) {
            Ok(Route::Command { query, .. }) => {
                if let Ok(args) = command_args(query) {
                    let mut again = Vec::new();
                    for (i, a) in args.iter().enumerate() {
                        if i > 0 {
                            again.push(b'+');
                        }
                        percent_encode(a, &mut again);
                    }
                    assert_eq!(command_args(&again).as_deref(), Ok(&args[..]));
                }
            }
            Ok(Route::Key(key)) => {
                if let Ok(key) = percent_decode(key) {
                    let _ = mime_type(&key);
                }
            }
            Err(e) => assert_eq!(e.status(), 400),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(buf: &[u8]) -> Result<Option<Head>, HttpError> {
        HeadParser::new().parse(buf, MAX_BODY)
    }

    #[test]
    fn a_simple_get_keeps_the_connection_alive() {
        let buf = b"GET /index.html HTTP/1.1\r\nHost: a\r\n\r\nGET";
        let h = parse(buf).unwrap().unwrap();
        assert_eq!(h.method, Method::Get);
        assert_eq!(&buf[h.target.clone()], b"/index.html");
        assert!(h.keep_alive);
        assert_eq!(h.len, buf.len() - 3);
        assert_eq!(h.body, BodyKind::None);
    }

    #[test]
    fn http10_closes_unless_asked_to_keep_alive() {
        let h = parse(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!h.keep_alive);
        let h = parse(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.keep_alive);
        let h = parse(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!h.keep_alive);
    }

    #[test]
    fn a_head_arriving_byte_by_byte_is_found_once_complete() {
        let buf = b"\r\nPOST /k HTTP/1.1\nHost: a\nContent-Length: 5\n\nhello";
        let mut p = HeadParser::new();
        let end = buf.len() - 5;
        for n in 0..end {
            assert_eq!(p.parse(&buf[..n], MAX_BODY), Ok(None), "at {n}");
        }
        let h = p.parse(&buf[..end], MAX_BODY).unwrap().unwrap();
        assert_eq!(h.len, end);
        assert_eq!(h.body, BodyKind::Length(5));
    }

    #[test]
    fn limits_give_414_431_and_413() {
        let mut long = b"GET /".to_vec();
        long.resize(MAX_LINE + 10, b'a');
        assert_eq!(parse(&long), Err(HttpError::UriTooLong));
        let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
        big.resize(MAX_LINE + 100, b'a');
        assert_eq!(parse(&big), Err(HttpError::HeaderTooLarge));
        let mut many = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
        for i in 0..MAX_HEADERS {
            many.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(parse(&many), Err(HttpError::HeaderTooLarge));
        let body = b"PUT /k HTTP/1.1\r\nHost: a\r\nContent-Length: 1048577\r\n\r\n";
        assert_eq!(parse(body), Err(HttpError::PayloadTooLarge));
    }

    #[test]
    fn malformed_heads_are_400_and_other_versions_505() {
        assert!(matches!(
            parse(b"GET / HTTP/1.1\r\n\r\n"),
            Err(HttpError::BadRequest(_))
        ));
        assert!(matches!(
            parse(b"GE T / HTTP/1.1\r\nHost: a\r\n\r\n"),
            Err(HttpError::BadRequest(_))
        ));
        assert_eq!(
            parse(b"GET / HTTP/2.0\r\nHost: a\r\n\r\n"),
            Err(HttpError::VersionNotSupported)
        );
        assert!(matches!(
            parse(b"PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            Err(HttpError::BadRequest(_))
        ));
        assert_eq!(
            parse(b"PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n"),
            Err(HttpError::NotImplemented)
        );
    }

    #[test]
    fn websocket_fields_are_found() {
        let buf = b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: json, term\r\n\r\n";
        let h = parse(buf).unwrap().unwrap();
        assert!(h.websocket && h.connection_upgrade);
        assert_eq!(&buf[h.ws_key.clone().unwrap()], b"dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(&buf[h.ws_protocols[0].clone()], b"json, term");
    }

    #[test]
    fn routes_and_arguments() {
        assert_eq!(
            route(b"/?get+k").unwrap(),
            Route::Command {
                json: false,
                query: b"get+k"
            }
        );
        assert_eq!(
            route(b"/js?x").unwrap(),
            Route::Command {
                json: true,
                query: b"x"
            }
        );
        assert_eq!(route(b"/js").unwrap(), Route::Key(b"js"));
        assert_eq!(route(b"/").unwrap(), Route::Key(b"index.html"));
        assert_eq!(route(b"/a/b.css?v=1").unwrap(), Route::Key(b"a/b.css"));
        assert_eq!(route(b"http://h:1/k").unwrap(), Route::Key(b"k"));
        assert!(route(b"*").is_err());
        let args = command_args(b"set+a%2Bb+x%20y++").unwrap();
        assert_eq!(args, [&b"set"[..], b"a+b", b"x y", b"", b""]);
        assert!(command_args(b"get+%zz").is_err());
        assert!(command_args(b"get+%4").is_err());
        assert!(command_args(b"").unwrap().is_empty());
    }

    #[test]
    fn mime_types_follow_the_extension() {
        assert_eq!(mime_type(b"index.html"), "text/html");
        assert_eq!(mime_type(b"a/B.PNG"), "image/png");
        assert_eq!(mime_type(b"x.v1/noext"), "application/octet-stream");
        assert_eq!(mime_type(b"app.wasm"), "application/wasm");
        assert_eq!(mime_type(b"README"), "application/octet-stream");
    }

    #[test]
    fn dates_are_imf_fixdate() {
        assert_eq!(&http_date(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(&http_date(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(&http_date(951_782_400), b"Tue, 29 Feb 2000 00:00:00 GMT");
    }

    #[test]
    fn chunked_bodies_decode_in_any_pieces() {
        let input = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        let mut d = ChunkedDecoder::new();
        let mut body = Vec::new();
        let n = d.decode(input, &mut body, MAX_BODY).unwrap();
        assert!(d.is_done());
        assert_eq!(&input[n..], b"NEXT");
        assert_eq!(body, b"hello world");
        let (mut d, mut body, mut used) = (ChunkedDecoder::new(), Vec::new(), 0);
        for i in 0..input.len() {
            used += d.decode(&input[used..=i], &mut body, MAX_BODY).unwrap();
        }
        assert_eq!((used, body.as_slice()), (n, &b"hello world"[..]));
        let mut d = ChunkedDecoder::new();
        assert_eq!(
            d.decode(b"10\r\n", &mut Vec::new(), 15),
            Err(HttpError::PayloadTooLarge)
        );
        let mut d = ChunkedDecoder::new();
        assert!(d.decode(b"2\r\nabc\r\n", &mut Vec::new(), 15).is_err());
    }

    #[test]
    fn sse_events() {
        let event = |data: &[u8]| {
            let mut out = Vec::new();
            write_sse_event(&mut out, "message", data);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(event(b"hello"), "event: message\ndata: hello\n\n");
        assert_eq!(event(b""), "event: message\ndata: \n\n");
        assert_eq!(
            event(b"a\nb\r\nc\rd\n"),
            "event: message\ndata: a\ndata: b\ndata: c\ndata: d\ndata: \n\n"
        );
        assert_eq!(
            event(b"\r\r\n"),
            "event: message\ndata: \ndata: \ndata: \n\n"
        );
        assert_eq!(
            event(b" x:\xff\xfe"),
            "event: message\ndata:  x:\u{fffd}\u{fffd}\n\n"
        );
    }

    #[test]
    fn an_event_stream_head_has_no_length() {
        let mut out = Vec::new();
        Response {
            status: 200,
            date: b"D",
            content_type: Some("text/event-stream"),
            content_length: None,
            connection: Connection::Close,
            extra: &[],
        }
        .write(&mut out);
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nServer: shoal\r\nDate: D\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn response_heads() {
        let mut out = Vec::new();
        Response {
            status: 200,
            date: b"D",
            content_type: Some("text/html"),
            content_length: Some(42),
            connection: Connection::Default,
            extra: &[],
        }
        .write(&mut out);
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nServer: shoal\r\nDate: D\r\nContent-Type: text/html\r\nContent-Length: 42\r\n\r\n"
        );
        out.clear();
        Response {
            status: 204,
            date: b"D",
            content_type: None,
            content_length: Some(0),
            connection: Connection::Close,
            extra: &[("Allow", b"GET")],
        }
        .write(&mut out);
        assert_eq!(
            out,
            b"HTTP/1.1 204 No Content\r\nServer: shoal\r\nDate: D\r\nConnection: close\r\nAllow: GET\r\n\r\n"
        );
    }
}
