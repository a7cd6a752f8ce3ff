//! One HTTP/1.1 connection: read, answer every complete request in the
//! buffer into one output buffer, write it in one go (pipelining), keep the
//! connection for the next requests unless the client or an error says
//! otherwise. Commands run through the engine exactly as RESP requests do,
//! in a session of their own per connection (so MULTI, SELECT and HELLO last
//! across its requests); raw-value requests use a second session that always
//! works on db 0 and is never inside MULTI.
//!
//! Timeouts (nginx's defaults): an idle keep-alive connection is closed after
//! 75 s, a request whose head or body stalls after 60 s (75 s at most).

use std::borrow::Cow;
use std::cell::RefCell;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::worker::transport::Transport;
use bytes::BytesMut;
use engine::command::{self, Arg, Command};
use engine::{Engine, Flow, ServerRequest, Session};
use proto::http::{
    command_args, http_date, mime_type, percent_decode, route, BodyKind, ChunkedDecoder,
    Connection, Head, HeadParser, HttpError, Method, Response, Route, MAX_BODY,
};
use proto::resp::ReplyWriter;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

use super::metrics;
use super::sse;
use super::websocket::{self, Sub};
use crate::worker::batch::{Ran, Runner};
use crate::worker::connection;
use crate::worker::Worker;

/// An idle keep-alive connection is closed after this (nginx's
/// `keepalive_timeout`).
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(75);

/// A request that stalls half-read is dropped after this (nginx's
/// `client_header_timeout` and `client_body_timeout`).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Bytes read at a time (more while a known body is coming).
const READ_CHUNK: usize = 16 * 1024;

/// Past this many bytes of responses the batch is written before the next
/// request is answered, so that pipelined requests for large values do not
/// pile up.
const FLUSH_AT: usize = 256 * 1024;

/// Commands after which messages come at any time: refused over HTTP
/// requests (whose session would keep subscriptions nobody reads).
const PUSHING: &[&str] = &[
    "subscribe",
    "psubscribe",
    "ssubscribe",
    "lsubscribe",
    "ksubscribe",
    "kpsubscribe",
    "monitor",
];

/// What `Allow` lists for a key.
const KEY_METHODS: &[u8] = b"GET, HEAD, PUT, POST, DELETE";

/// The browser console (`/console`).
const CONSOLE_HTML: &str = include_str!("console.html");

thread_local! {
    /// The `Date` value, rebuilt once a second for every connection of the
    /// worker.
    static DATE: RefCell<(u64, [u8; 29])> = const { RefCell::new((u64::MAX, [0; 29])) };
}

pub(super) fn date_now() -> [u8; 29] {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE.with(|d| {
        let mut d = d.borrow_mut();
        if d.0 != secs {
            *d = (secs, http_date(secs));
        }
        d.1
    })
}

/// What a connection turns into after its HTTP requests.
enum Handoff {
    /// A WebSocket, with the bytes the client sent after its handshake.
    Upgrade(Sub, BytesMut),
    /// An event stream (`/sub/…`, `/psub/…`).
    Events(sse::Kind, Vec<u8>),
}

/// Serves one accepted connection: HTTP until it closes, or until it
/// upgrades to WebSocket or becomes an event stream (then that side takes
/// the socket).
pub(crate) async fn serve(worker: Rc<Worker>, mut stream: Transport, peer: SocketAddr) {
    let local = stream
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let fd = stream.as_raw_fd();
    let Ok(id) = worker.store.next_client_id() else {
        return;
    };
    let (now, maxclients) = {
        let e = worker.engine.borrow();
        (e.now_ms(), e.config().maxclients)
    };
    if worker.at_max_clients(maxclients) {
        let mut out = Vec::new();
        plain(
            &mut out,
            &date_now(),
            503,
            Connection::Close,
            b"max number of clients reached\n",
            &[],
        );
        let _ = stream.write_all(&out).await;
        return;
    }
    let mut s = Session::new(id, now);
    (s.addr, s.laddr, s.fd) = (peer.to_string(), local.clone(), i64::from(fd));
    s.worker = worker.slot;
    let raw = s.clone();
    let (session, kill) = worker.admit(s);
    let mut conn = Conn {
        worker: worker.clone(),
        session,
        raw,
        parser: HeadParser::new(),
        pending: Pending::Head,
        continue_sent: false,
        date: date_now(),
        scratch: Vec::new(),
        commands: RawCommands::new(),
    };
    let handoff = conn.run(&mut stream, &kill).await;
    drop(conn);
    // The WebSocket or event-stream side registers its own client: this
    // one ends here.
    worker.release(id);
    let peer = (peer.to_string(), local, fd);
    match handoff {
        Some(Handoff::Upgrade(sub, leftover)) => {
            websocket::serve(worker, stream, sub, leftover, peer).await
        }
        Some(Handoff::Events(kind, name)) => sse::serve(worker, stream, kind, name, peer).await,
        None if *worker.shutdown.borrow() && worker.hands_over() => {
            crate::worker::connection::close_drained(&mut stream).await;
        }
        None => {
            let _ = stream.shutdown().await;
        }
    }
}

/// The commands raw-value requests run (looked up once).
struct RawCommands {
    get: Option<&'static Command>,
    set: Option<&'static Command>,
    del: Option<&'static Command>,
    exists: Option<&'static Command>,
}

impl RawCommands {
    fn new() -> Self {
        RawCommands {
            get: command::lookup(b"get"),
            set: command::lookup(b"set"),
            del: command::lookup(b"del"),
            exists: command::lookup(b"exists"),
        }
    }
}

/// The request being read.
enum Pending {
    /// Waiting for a head.
    Head,
    /// The head is in; a `Content-Length` body is coming.
    Body(Head),
    /// The head is in; a chunked body is being decoded (`used` bytes after
    /// the head so far).
    Chunked {
        head: Head,
        decoder: ChunkedDecoder,
        body: Vec<u8>,
        used: usize,
    },
}

/// A request's body.
enum Body<'a> {
    Empty,
    Bytes(&'a [u8]),
    Decoded(Vec<u8>),
}

impl Body<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Body::Empty => &[],
            Body::Bytes(b) => b,
            Body::Decoded(b) => b,
        }
    }
}

/// What the connection does after working through its buffer.
enum Step {
    /// Write the responses, read more.
    NeedInput,
    /// Write the responses, then go on with the buffer.
    Flush,
    /// Write the responses, then close.
    Close,
    /// Write the responses (the 101 last), then speak WebSocket.
    Upgrade(Sub),
    /// Write the responses, then serve an event stream.
    Events(sse::Kind, Vec<u8>),
    /// A command the server finishes (CLIENT LIST, SHUTDOWN…): await it,
    /// answer it, go on.
    Server {
        req: ServerRequest,
        json: bool,
        connection: Connection,
    },
}

/// How one request ended.
enum Answered {
    /// Go on with the next request (or close if the request said so).
    Done,
    /// Close after this response.
    Close,
    /// Switch to WebSocket.
    Upgrade(Sub),
    /// Serve an event stream.
    Events(sse::Kind, Vec<u8>),
    /// The server must finish the command.
    Server(ServerRequest, bool),
}

struct Conn {
    worker: Rc<Worker>,
    /// The session commands run in.
    session: Rc<RefCell<Session>>,
    /// The session raw-value requests run in (db 0, RESP2, no MULTI).
    raw: Session,
    parser: HeadParser,
    pending: Pending,
    /// `100 Continue` was sent for the pending request.
    continue_sent: bool,
    /// This batch's `Date` value.
    date: [u8; 29],
    /// Replies on their way into responses.
    scratch: Vec<u8>,
    commands: RawCommands,
}

impl Conn {
    /// The keep-alive loop. Returns what the connection becomes when it is
    /// not HTTP any more (a WebSocket, an event stream).
    async fn run(&mut self, stream: &mut Transport, kill: &Notify) -> Option<Handoff> {
        let mut buf = BytesMut::with_capacity(READ_CHUNK);
        let mut out: Vec<u8> = Vec::with_capacity(READ_CHUNK);
        let mut shutdown = self.worker.shutdown.subscribe();
        // One timer per connection, re-armed only when it fires: a read
        // just notes its time (a timer per read would cost more than the
        // request). A stalled request may so live up to the keep-alive
        // timeout instead of the request timeout.
        let mut last_read = tokio::time::Instant::now();
        let timer = tokio::time::sleep(KEEPALIVE_TIMEOUT);
        tokio::pin!(timer);
        let mut runner = Runner::new();
        let worker = self.worker.clone();
        loop {
            let step = {
                let session_rc = self.session.clone();
                let mut session = session_rc.borrow_mut();
                runner.run(&worker, &mut session, |engine, session| {
                    self.process(engine, session, &mut buf, &mut out)
                })
            };
            // `appendfsync always`: no reply before the fsync of its writes.
            runner.settle(&worker).await;
            match step {
                Step::NeedInput => {}
                Step::Flush => {
                    if stream.write_all(&out).await.is_err() {
                        return None;
                    }
                    out.clear();
                    continue;
                }
                Step::Close => {
                    let _ = stream.write_all(&out).await;
                    return None;
                }
                Step::Upgrade(sub) => {
                    if stream.write_all(&out).await.is_err() {
                        return None;
                    }
                    return Some(Handoff::Upgrade(sub, buf));
                }
                Step::Events(kind, name) => {
                    if stream.write_all(&out).await.is_err() {
                        return None;
                    }
                    return Some(Handoff::Events(kind, name));
                }
                Step::Server {
                    req,
                    json,
                    connection,
                } => {
                    let mut reply = Vec::new();
                    let close =
                        connection::server_request(&self.worker, &self.session, req, &mut reply)
                            .await;
                    let connection = if close { Connection::Close } else { connection };
                    self.date = date_now();
                    command_response(&mut out, &self.date, json, &reply, connection);
                    if close || connection == Connection::Close {
                        let _ = stream.write_all(&out).await;
                        return None;
                    }
                    continue;
                }
            }
            if !out.is_empty() {
                if stream.write_all(&out).await.is_err() {
                    return None;
                }
                out.clear();
                if out.capacity() > 1 << 20 {
                    out = Vec::with_capacity(READ_CHUNK);
                }
            }
            let idle = buf.is_empty() && matches!(self.pending, Pending::Head);
            if idle && *shutdown.borrow() {
                return None;
            }
            if idle && buf.capacity() > 1 << 20 {
                buf = BytesMut::with_capacity(READ_CHUNK);
            }
            buf.reserve(self.wanted(&buf));
            let timeout = if idle {
                KEEPALIVE_TIMEOUT
            } else {
                REQUEST_TIMEOUT
            };
            let draining = *shutdown.borrow();
            tokio::select! {
                n = stream.read_buf(&mut buf) => {
                    if !matches!(n, Ok(n) if n > 0) {
                        return None;
                    }
                    last_read = tokio::time::Instant::now();
                }
                _ = kill.notified() => return None,
                // Draining: idle connections close at once; a request
                // being read is finished first.
                _ = shutdown.changed(), if !draining => {}
                _ = &mut timer => {
                    let due = last_read + timeout;
                    if tokio::time::Instant::now() >= due {
                        return None;
                    }
                    timer.as_mut().reset(due);
                }
            }
        }
    }

    /// Bytes to make room for before reading: the rest of a known body, or
    /// a chunk.
    fn wanted(&self, buf: &BytesMut) -> usize {
        match &self.pending {
            Pending::Body(head) => match head.body {
                BodyKind::Length(n) => (head.len + n as usize)
                    .saturating_sub(buf.len())
                    .clamp(READ_CHUNK, MAX_BODY as usize),
                _ => READ_CHUNK,
            },
            _ => READ_CHUNK,
        }
    }

    /// Answers every complete request in `buf` (synchronously: the engine is
    /// borrowed, nothing awaits) and drops their bytes.
    fn process(
        &mut self,
        engine: &mut Engine,
        session: &mut Session,
        buf: &mut BytesMut,
        out: &mut Vec<u8>,
    ) -> Ran<Step> {
        self.date = date_now();
        let mut consumed = 0;
        let mut executed = 0;
        let step = loop {
            if out.len() >= FLUSH_AT {
                break Step::Flush;
            }
            let rest = &buf[consumed..];
            let (head, body, used) = match self.next_request(rest, out) {
                Ok(Some(request)) => request,
                Ok(None) => break Step::NeedInput,
                Err(e) => {
                    plain(
                        out,
                        &self.date,
                        e.status(),
                        Connection::Close,
                        format!("{}\n", e.detail()).as_bytes(),
                        &[],
                    );
                    break Step::Close;
                }
            };
            consumed += used;
            self.continue_sent = false;
            let connection = if !head.keep_alive {
                Connection::Close
            } else if head.minor_version == 0 {
                Connection::KeepAlive
            } else {
                Connection::Default
            };
            let answered = self.answer(
                engine,
                session,
                &head,
                rest,
                &body,
                connection,
                out,
                &mut executed,
            );
            match answered {
                Answered::Done if connection == Connection::Close => break Step::Close,
                Answered::Done => {}
                Answered::Close => break Step::Close,
                Answered::Upgrade(sub) => break Step::Upgrade(sub),
                Answered::Events(kind, name) => break Step::Events(kind, name),
                Answered::Server(req, json) => {
                    break Step::Server {
                        req,
                        json,
                        connection,
                    }
                }
            }
        };
        Ran::consumed(session, buf, consumed, out, step, executed)
    }

    /// The next whole request at the start of `rest`: its head, body and
    /// size; None while it is incomplete (a `100 Continue` goes out for a
    /// client waiting for one).
    fn next_request<'a>(
        &mut self,
        rest: &'a [u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<(Head, Body<'a>, usize)>, HttpError> {
        let pending = match std::mem::replace(&mut self.pending, Pending::Head) {
            Pending::Head => {
                let Some(head) = self.parser.parse(rest, MAX_BODY)? else {
                    return Ok(None);
                };
                match head.body {
                    BodyKind::None => {
                        let len = head.len;
                        return Ok(Some((head, Body::Empty, len)));
                    }
                    BodyKind::Length(_) => Pending::Body(head),
                    BodyKind::Chunked => Pending::Chunked {
                        head,
                        decoder: ChunkedDecoder::new(),
                        body: Vec::new(),
                        used: 0,
                    },
                }
            }
            other => other,
        };
        let expect_continue = match pending {
            Pending::Head => return Ok(None),
            Pending::Body(head) => {
                let n = match head.body {
                    BodyKind::Length(n) => n as usize,
                    _ => 0,
                };
                let (start, end) = (head.len, head.len + n);
                if rest.len() >= end {
                    return Ok(Some((head, Body::Bytes(&rest[start..end]), end)));
                }
                let expect = head.expect_continue;
                self.pending = Pending::Body(head);
                expect
            }
            Pending::Chunked {
                head,
                mut decoder,
                mut body,
                used,
            } => {
                let from = (head.len + used).min(rest.len());
                let used = used + decoder.decode(&rest[from..], &mut body, MAX_BODY)?;
                if decoder.is_done() {
                    let total = head.len + used;
                    return Ok(Some((head, Body::Decoded(body), total)));
                }
                let expect = head.expect_continue;
                self.pending = Pending::Chunked {
                    head,
                    decoder,
                    body,
                    used,
                };
                expect
            }
        };
        if expect_continue && !self.continue_sent {
            self.continue_sent = true;
            out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        Ok(None)
    }

    /// Answers one request.
    #[allow(clippy::too_many_arguments)]
    fn answer(
        &mut self,
        engine: &mut Engine,
        session: &mut Session,
        head: &Head,
        request: &[u8],
        body: &Body<'_>,
        connection: Connection,
        out: &mut Vec<u8>,
        executed: &mut u64,
    ) -> Answered {
        // requirepass and ACL users: every request but /health carries
        // credentials (Authorization: Basic or Bearer) when a password is
        // required, before any command, value or upgrade.
        let target = &request[head.target.clone()];
        if target != b"/health" && !self.authorize(engine, session, head, request) {
            self.status(
                out,
                401,
                connection,
                &[("WWW-Authenticate", b"Basic realm=\"shoal\"")],
            );
            return Answered::Done;
        }
        if head.websocket {
            return self.upgrade(head, request, connection, out);
        }
        let route = match route(&request[head.target.clone()]) {
            Ok(r) => r,
            Err(e) => return self.refuse(out, e, connection),
        };
        match route {
            Route::Command { json, query } => {
                if head.method != Method::Get {
                    self.status(out, 405, connection, &[("Allow", b"GET")]);
                    return Answered::Done;
                }
                if head.cross_site {
                    return self.forbidden(out, connection);
                }
                let args = match command_args(query) {
                    Ok(args) if !args.is_empty() => args,
                    Ok(_) => {
                        let text = b"no command in the URI\n";
                        plain(out, &self.date, 400, connection, text, &[]);
                        return Answered::Done;
                    }
                    Err(e) => return self.refuse(out, e, connection),
                };
                *executed += 1;
                self.command(engine, session, &args, json, connection, out)
            }
            Route::Key(encoded) => {
                let key = match percent_decode(encoded) {
                    Ok(k) => k,
                    Err(e) => return self.refuse(out, e, connection),
                };
                self.resource(engine, head, &key, body, connection, out, executed)
            }
        }
    }

    /// Whether the request may go on: its credentials log the connection
    /// in (as AUTH does), or none are needed.
    fn authorize(
        &mut self,
        engine: &mut Engine,
        session: &mut Session,
        head: &Head,
        request: &[u8],
    ) -> bool {
        if let Some(field) = &head.authorization {
            let Some((user, pass)) = proto::http::credentials(&request[field.clone()]) else {
                return false;
            };
            if !engine.authenticate(session, &user, &pass, b"AUTH") {
                return false;
            }
            // Raw values run in their own session: the same user.
            self.raw.user = session.user.clone();
            self.raw.user_incarnation = session.user_incarnation;
            self.raw.authenticated = session.authenticated;
            return true;
        }
        !engine.auth_required() || session.authenticated == Some(true)
    }

    /// Runs a command from the URI in the connection's session and answers
    /// its reply: the RESP bytes as text, or JSON. A blocking command that
    /// finds nothing answers at once as if its timeout had passed (a null
    /// array): an HTTP request does not wait.
    fn command(
        &mut self,
        engine: &mut Engine,
        session: &mut Session,
        args: &[Arg<'_>],
        json: bool,
        connection: Connection,
        out: &mut Vec<u8>,
    ) -> Answered {
        self.scratch.clear();
        let cmd = engine.resolve(session, args, false);
        if let Some(name) = cmd.map(|c| c.name).filter(|n| PUSHING.contains(n)) {
            let text = format!(
                "ERR '{name}' pushes messages, which an HTTP request cannot carry: \
                 use a WebSocket (or GET /sub/<channel>, /psub/<pattern>)"
            );
            ReplyWriter::new(&mut self.scratch, session.protocol).error(text.as_bytes());
            command_response(out, &self.date, json, &self.scratch, connection);
            return Answered::Done;
        }
        let flow = engine.execute_resolved(session, cmd, args, &mut self.scratch);
        if engine.take_pause_changed() {
            self.worker.pause.unpaused_here();
        }
        self.worker.blocking.serve_ready(engine, Vec::new());
        let connection = match flow {
            // An HTTP request is not held: the engine answered it.
            Flow::Continue | Flow::Hold => connection,
            Flow::Close => Connection::Close,
            Flow::Block(_) => {
                ReplyWriter::new(&mut self.scratch, session.protocol).null_array();
                connection
            }
            Flow::Server(req) => return Answered::Server(req, json),
        };
        command_response(out, &self.date, json, &self.scratch, connection);
        if connection == Connection::Close {
            Answered::Close
        } else {
            Answered::Done
        }
    }

    /// A raw value, or one of the server's own resources.
    #[allow(clippy::too_many_arguments)]
    fn resource(
        &mut self,
        engine: &mut Engine,
        head: &Head,
        key: &[u8],
        body: &Body<'_>,
        connection: Connection,
        out: &mut Vec<u8>,
        executed: &mut u64,
    ) -> Answered {
        let own: Option<(&str, Cow<'static, [u8]>)> = match key {
            b"health" => Some(("text/plain", Cow::Borrowed(b"OK"))),
            b"metrics" => Some((
                metrics::CONTENT_TYPE,
                Cow::Owned(metrics::render(&self.worker.store, self.worker.slot).into_bytes()),
            )),
            b"console" => Some((
                "text/html; charset=utf-8",
                Cow::Borrowed(CONSOLE_HTML.as_bytes()),
            )),
            _ => None,
        };
        if let Some((kind, name)) = sse::route(key) {
            if !engine.acl_channel_allowed(&self.raw, name, kind == sse::Kind::Pattern) {
                let text = b"NOPERM this user has no permissions to access one of the channels used as arguments\n";
                plain(out, &self.date, 403, connection, text, &[]);
                return Answered::Done;
            }
            return match head.method {
                Method::Get => Answered::Events(kind, name.to_vec()),
                Method::Head => {
                    sse::write_head(out, &self.date, connection);
                    Answered::Done
                }
                _ => {
                    self.status(out, 405, connection, &[("Allow", b"GET, HEAD")]);
                    Answered::Done
                }
            };
        }
        if let Some((content_type, text)) = own {
            if !matches!(head.method, Method::Get | Method::Head) {
                self.status(out, 405, connection, &[("Allow", b"GET, HEAD")]);
                return Answered::Done;
            }
            Response {
                status: 200,
                date: &self.date,
                content_type: Some(content_type),
                content_length: Some(text.len() as u64),
                connection,
                extra: &[],
            }
            .write(out);
            if head.method == Method::Get {
                out.extend_from_slice(&text);
            }
            return Answered::Done;
        }
        match head.method {
            Method::Get | Method::Head => {
                *executed += 1;
                self.get(engine, key, head.method == Method::Head, connection, out);
            }
            Method::Put | Method::Post => {
                if head.cross_site {
                    return self.forbidden(out, connection);
                }
                *executed += 2;
                self.put(engine, key, body.bytes(), connection, out);
            }
            Method::Delete => {
                if head.cross_site {
                    return self.forbidden(out, connection);
                }
                *executed += 1;
                self.delete(engine, key, connection, out);
            }
            Method::Other => {
                self.status(out, 405, connection, &[("Allow", KEY_METHODS)]);
            }
        }
        Answered::Done
    }

    /// Runs a raw-value command in the raw session; its reply is in
    /// `scratch`.
    fn raw_command(
        &mut self,
        engine: &mut Engine,
        cmd: Option<&'static Command>,
        args: &[Arg<'_>],
    ) {
        self.scratch.clear();
        let _ = engine.execute_resolved(&mut self.raw, cmd, args, &mut self.scratch);
    }

    /// GET/HEAD /key: 200 with the value, 404 when there is none, 409 when
    /// the key holds another type.
    fn get(
        &mut self,
        engine: &mut Engine,
        key: &[u8],
        head_only: bool,
        connection: Connection,
        out: &mut Vec<u8>,
    ) {
        let args = [Cow::Borrowed(&b"GET"[..]), Cow::Borrowed(key)];
        self.raw_command(engine, self.commands.get, &args);
        let reply = &self.scratch;
        match bulk_of(reply) {
            Some(Some(value)) => {
                Response {
                    status: 200,
                    date: &self.date,
                    content_type: Some(mime_type(key)),
                    content_length: Some(value.len() as u64),
                    connection,
                    extra: &[],
                }
                .write(out);
                if !head_only {
                    out.extend_from_slice(value);
                }
            }
            Some(None) => {
                let text: &[u8] = if head_only { b"" } else { b"Not Found\n" };
                plain(out, &self.date, 404, connection, text, &[]);
            }
            None => {
                let status = if reply.starts_with(b"-WRONGTYPE") {
                    409
                } else {
                    500
                };
                let text = error_text(reply);
                let text: &[u8] = if head_only { b"" } else { &text };
                plain(out, &self.date, status, connection, text, &[]);
            }
        }
    }

    /// PUT/POST /key: the body becomes the value (any old value, of any
    /// type, is replaced, as SET does): 201 Created for a new key, 204 No
    /// Content for a replaced one (WebDAV's PUT). 507 when memory is full.
    fn put(
        &mut self,
        engine: &mut Engine,
        key: &[u8],
        value: &[u8],
        connection: Connection,
        out: &mut Vec<u8>,
    ) {
        let args = [Cow::Borrowed(&b"EXISTS"[..]), Cow::Borrowed(key)];
        self.raw_command(engine, self.commands.exists, &args);
        let existed = self.scratch.as_slice() == b":1\r\n";
        let args = [
            Cow::Borrowed(&b"SET"[..]),
            Cow::Borrowed(key),
            Cow::Borrowed(value),
        ];
        self.raw_command(engine, self.commands.set, &args);
        self.worker.blocking.serve_ready(engine, Vec::new());
        if self.scratch.starts_with(b"+OK") {
            let status = if existed { 204 } else { 201 };
            Response {
                status,
                date: &self.date,
                content_type: None,
                content_length: Some(0),
                connection,
                extra: &[],
            }
            .write(out);
        } else {
            let status = if self.scratch.starts_with(b"-OOM") {
                507
            } else {
                500
            };
            let text = error_text(&self.scratch);
            plain(out, &self.date, status, connection, &text, &[]);
        }
    }

    /// DELETE /key: 204 when it existed, 404 when not.
    fn delete(
        &mut self,
        engine: &mut Engine,
        key: &[u8],
        connection: Connection,
        out: &mut Vec<u8>,
    ) {
        let args = [Cow::Borrowed(&b"DEL"[..]), Cow::Borrowed(key)];
        self.raw_command(engine, self.commands.del, &args);
        self.worker.blocking.serve_ready(engine, Vec::new());
        match self.scratch.as_slice() {
            b":1\r\n" => self.status(out, 204, connection, &[]),
            b":0\r\n" => plain(out, &self.date, 404, connection, b"Not Found\n", &[]),
            reply => {
                let text = error_text(reply);
                plain(out, &self.date, 500, connection, &text, &[]);
            }
        }
    }

    /// The WebSocket opening handshake (RFC 6455 §4.2): 101 and the chosen
    /// sub-protocol, or the refusal. A browser page of another origin is
    /// refused (403): the server trusts its loopback clients, not every web
    /// page their browser opens.
    fn upgrade(
        &mut self,
        head: &Head,
        request: &[u8],
        connection: Connection,
        out: &mut Vec<u8>,
    ) -> Answered {
        let field = |r: &Option<std::ops::Range<usize>>| r.clone().map(|r| &request[r]);
        if head.method != Method::Get || head.minor_version != 1 || !head.connection_upgrade {
            let text = b"a WebSocket handshake is a GET over HTTP/1.1 with Connection: Upgrade\n";
            plain(out, &self.date, 400, connection, text, &[]);
            return Answered::Done;
        }
        if field(&head.ws_version) != Some(b"13") {
            let text = b"WebSocket version 13 only\n";
            let extra: &[(&str, &[u8])] = &[("Sec-WebSocket-Version", b"13")];
            plain(out, &self.date, 426, connection, text, extra);
            return Answered::Done;
        }
        let key = field(&head.ws_key).unwrap_or_default();
        if !proto::websocket::valid_key(key) {
            let text = b"invalid Sec-WebSocket-Key\n";
            plain(out, &self.date, 400, connection, text, &[]);
            return Answered::Done;
        }
        if let Some(origin) = field(&head.origin) {
            if !same_origin(origin, field(&head.host).unwrap_or_default()) {
                return self.forbidden(out, connection);
            }
        }
        let offered: Vec<&[u8]> = head
            .ws_protocols
            .iter()
            .map(|r| &request[r.clone()])
            .collect();
        let Ok(chosen) = proto::websocket::select_protocol(&offered, &Sub::NAMES) else {
            let text = b"unknown WebSocket sub-protocol: use resp, json or term\n";
            plain(out, &self.date, 400, connection, text, &[]);
            return Answered::Done;
        };
        proto::websocket::write_handshake(out, key, chosen);
        Answered::Upgrade(chosen.map_or(Sub::Resp, Sub::from_name))
    }

    /// Answers a refused request: 400s keep the connection when the
    /// request's framing was fine.
    fn refuse(&self, out: &mut Vec<u8>, e: HttpError, connection: Connection) -> Answered {
        let text = format!("{}\n", e.detail());
        plain(
            out,
            &self.date,
            e.status(),
            connection,
            text.as_bytes(),
            &[],
        );
        Answered::Done
    }

    /// 403 for a browser's cross-site request that would run a command or
    /// write.
    fn forbidden(&self, out: &mut Vec<u8>, connection: Connection) -> Answered {
        let text = b"cross-site requests may not run commands\n";
        plain(out, &self.date, 403, connection, text, &[]);
        Answered::Done
    }

    /// A response with a status and no content of its own (405 says why in
    /// `Allow`; 204 has no body at all).
    fn status(
        &self,
        out: &mut Vec<u8>,
        status: u16,
        connection: Connection,
        extra: &[(&str, &[u8])],
    ) {
        let text = if status == 204 {
            String::new()
        } else {
            format!("{}\n", proto::http::reason(status))
        };
        plain(out, &self.date, status, connection, text.as_bytes(), extra);
    }
}

/// Whether `Origin` (`scheme://host[:port]`) names the host the request was
/// sent to.
fn same_origin(origin: &[u8], host: &[u8]) -> bool {
    let authority = origin
        .iter()
        .position(|&b| b == b':')
        .and_then(|i| origin.get(i + 3..))
        .filter(|_| origin.windows(3).any(|w| w == b"://"));
    authority.is_some_and(|a| a.eq_ignore_ascii_case(host))
}

/// Appends a text/plain response.
fn plain(
    out: &mut Vec<u8>,
    date: &[u8],
    status: u16,
    connection: Connection,
    text: &[u8],
    extra: &[(&str, &[u8])],
) {
    Response {
        status,
        date,
        content_type: (status != 204).then_some("text/plain"),
        content_length: Some(text.len() as u64),
        connection,
        extra,
    }
    .write(out);
    out.extend_from_slice(text);
}

/// Appends the response to a command: the reply's RESP bytes as text, or
/// the reply as JSON (`null` when the command sent none, as under CLIENT
/// REPLY OFF).
fn command_response(
    out: &mut Vec<u8>,
    date: &[u8],
    json: bool,
    reply: &[u8],
    connection: Connection,
) {
    if !json {
        Response {
            status: 200,
            date,
            content_type: Some("text/plain"),
            content_length: Some(reply.len() as u64),
            connection,
            extra: &[],
        }
        .write(out);
        out.extend_from_slice(reply);
        return;
    }
    let mut text = Vec::with_capacity(reply.len() + 16);
    let mut rest = reply;
    let mut replies = 0;
    while let Ok(Some((r, used))) = proto::json::parse_reply(rest) {
        if replies > 0 {
            text.push(b',');
        }
        proto::json::write_json(&r, &mut text);
        replies += 1;
        rest = &rest[used..];
    }
    match replies {
        0 => text.extend_from_slice(b"null"),
        1 => {}
        _ => {
            text.insert(0, b'[');
            text.push(b']');
        }
    }
    Response {
        status: 200,
        date,
        content_type: Some("application/json"),
        content_length: Some(text.len() as u64),
        connection,
        extra: &[],
    }
    .write(out);
    out.extend_from_slice(&text);
}

/// A bulk-string reply's value: `Some(Some(bytes))`, `Some(None)` for a
/// null, None for anything else (an error).
fn bulk_of(reply: &[u8]) -> Option<Option<&[u8]>> {
    if reply == b"$-1\r\n" || reply == b"_\r\n" {
        return Some(None);
    }
    let rest = reply.strip_prefix(b"$")?;
    let nl = rest.iter().position(|&b| b == b'\r')?;
    let len: usize = std::str::from_utf8(&rest[..nl]).ok()?.parse().ok()?;
    rest.get(nl + 2..nl + 2 + len).map(Some)
}

/// An error reply's text without the RESP framing, one line.
fn error_text(reply: &[u8]) -> Vec<u8> {
    let line = reply.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut text = line.strip_prefix(b"-").unwrap_or(line).to_vec();
    text.push(b'\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_replies_are_unwrapped() {
        assert_eq!(bulk_of(b"$3\r\nabc\r\n"), Some(Some(&b"abc"[..])));
        assert_eq!(bulk_of(b"$0\r\n\r\n"), Some(Some(&b""[..])));
        assert_eq!(bulk_of(b"$-1\r\n"), Some(None));
        assert_eq!(bulk_of(b"-WRONGTYPE x\r\n"), None);
        assert_eq!(error_text(b"-WRONGTYPE x\r\n"), b"WRONGTYPE x\n");
    }

    #[test]
    fn origins() {
        assert!(same_origin(b"http://127.0.0.1:8080", b"127.0.0.1:8080"));
        assert!(same_origin(b"https://Example.com", b"example.com"));
        assert!(!same_origin(b"http://evil.com", b"127.0.0.1:8080"));
        assert!(!same_origin(b"null", b"127.0.0.1:8080"));
    }

    #[test]
    fn json_responses() {
        let mut out = Vec::new();
        command_response(
            &mut out,
            b"D",
            true,
            b"*2\r\n:1\r\n$1\r\na\r\n",
            Connection::Default,
        );
        assert!(out.ends_with(b"Content-Length: 7\r\n\r\n[1,\"a\"]"));
    }

    #[test]
    fn the_console_page_is_self_contained() {
        assert!(CONSOLE_HTML.contains("\"term\""));
        assert!(!CONSOLE_HTML.contains("http://") && !CONSOLE_HTML.contains("https://"));
    }
}
