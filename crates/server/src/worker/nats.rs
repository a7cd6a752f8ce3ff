//! NATS clients: one more front end on the batch runner. A NATS connection
//! is a client of this worker like a RESP one (CLIENT LIST, CLIENT KILL,
//! INFO's `connected_clients` and the output limit see it), whose session
//! speaks RESP3 to the engine so that it may publish while subscribed:
//!
//! - `PUB subject` runs `PUBLISH subject payload`, so Redis subscribers,
//!   SSE and WebSocket streams and NATS subscribers on every worker get it;
//! - `SUB` on a literal subject runs `SUBSCRIBE` (`LSUBSCRIBE` when the
//!   subject matches `lvc-channels`, so the retained message comes first);
//!   a subject with wildcards runs `PSUBSCRIBE` on a glob that matches at
//!   least what the NATS subject matches (`*` and `>` become `*`), and each
//!   message is then matched token by token as NATS does;
//! - `SUB subject queue sid` joins the queue group in the engine, which
//!   picks one member over every worker for each message (`qmessage`);
//! - a reply subject and headers travel with the message to NATS clients
//!   on every worker (the engine's envelope);
//! - the frames the engine pushes (`message`, `pmessage`, `lmessage`,
//!   `qmessage`) become `MSG`/`HMSG` lines for every subscription id they
//!   match, in arrival order;
//! - CONNECT's `user`/`pass` log in as that ACL user, `auth_token` as the
//!   default user (the password `AUTH <password>` takes), whose channel
//!   rules then apply to PUB and SUB.
//!
//! Several subscription ids on one subject share one engine subscription,
//! which ends with the last of them. The server pings an idle client every
//! [`PING_INTERVAL`] and closes it with `-ERR 'Stale Connection'` when
//! [`MAX_PINGS_OUT`] pings went unanswered.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use engine::{Engine, Session};
use proto::json::{parse_reply, Reply};
use proto::nats::{self, Op, Parser};
use proto::resp::Protocol;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::worker::batch::{Ran, Runner};
use crate::worker::pubsub::Push;
use crate::worker::Worker;

/// How often the server pings a client (nats-server's default).
pub(crate) const PING_INTERVAL: Duration = Duration::from_secs(120);

/// Unanswered pings after which the client is closed (nats-server's
/// default).
const MAX_PINGS_OUT: u32 = 2;

/// Read size, and the initial size of the buffers.
const IO_CHUNK: usize = 16 * 1024;

/// The version INFO announces: the NATS protocol shoal speaks is that of
/// nats-server 2.9.
const SERVER_VERSION: &str = "2.9.0";

/// The header block of a no-responders reply.
const NO_RESPONDERS: &[u8] = b"NATS/1.0 503\r\n\r\n";

/// The kind of engine subscription a NATS subscription rides on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    /// `SUBSCRIBE` on a literal subject.
    Channel = 0,
    /// `LSUBSCRIBE` on a literal subject that is a retained channel.
    Retained = 1,
    /// `PSUBSCRIBE` on the glob of a subject with wildcards.
    Pattern = 2,
    /// A queue group: its name is the subject, a space, the group.
    Queue = 3,
}

/// The engine subscription a NATS subscription rides on: its kind and its
/// channel or glob.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Route {
    via: Via,
    name: Vec<u8>,
}

/// One `SUB` of the client.
struct Subscription {
    /// The NATS subject, wildcards included.
    subject: Vec<u8>,
    route: Route,
    /// Messages delivered so far.
    delivered: u64,
    /// `UNSUB sid max`: ends after this many in all.
    max: Option<u64>,
}

/// The client's options from CONNECT, with nats-server's defaults.
struct Options {
    verbose: bool,
    pedantic: bool,
    headers: bool,
    no_responders: bool,
    /// Whether the client gets its own messages back.
    echo: bool,
}

/// A connection's state besides its buffers.
struct Conn {
    parser: Parser,
    options: Options,
    /// Subscriptions by id.
    subs: HashMap<Vec<u8>, Subscription>,
    /// The ids riding on each engine subscription, in the order they came,
    /// by [`Via`] and then channel or glob (looked up without allocating).
    routes: [HashMap<Vec<u8>, Vec<Vec<u8>>>; 4],
    /// Turns through the ids of a queue group on this connection.
    queue_turn: u64,
    /// The server wants credentials and CONNECT has not given good ones:
    /// anything else is an authorization violation.
    awaiting_auth: bool,
    /// Pings sent and not answered.
    pings_out: u32,
}

/// What the connection does after a batch.
enum Next {
    /// Write, then read more.
    Continue,
    /// Write, then close.
    Close,
}

/// Serves one accepted NATS connection until it closes. `peer` is the
/// remote address, the local address and the socket's descriptor.
pub(crate) async fn run(worker: Rc<Worker>, mut stream: TcpStream, peer: (String, String, i32)) {
    let Ok(id) = worker.store.next_client_id() else {
        return;
    };
    let (now, maxclients, max_payload, port) = {
        let e = worker.engine.borrow();
        let c = e.config();
        (e.now_ms(), c.maxclients, c.nats_max_payload, c.nats_port)
    };
    if worker.at_max_clients(maxclients) {
        let _ = stream
            .write_all(b"-ERR 'maximum connections exceeded'\r\n")
            .await;
        return;
    }
    let mut s = Session::new(id, now);
    (s.addr, s.laddr, s.fd) = (peer.0.clone(), peer.1, peer.2 as i64);
    s.worker = worker.slot;
    // RESP3: a subscribed session may still PUBLISH.
    s.protocol = Protocol::Resp3;
    let (session, kill) = worker.admit(s);
    let auth_required = {
        let mut engine = worker.engine.borrow_mut();
        engine.nats_client(&session.borrow(), true);
        // A password another worker just set counts.
        engine.sync_config();
        engine.auth_required()
    };
    let push = worker.clients.push_of(id).unwrap_or_default();
    let client_ip = peer.0.rsplit_once(':').map_or("", |(ip, _)| ip);
    let mut info = serde_json::json!({
        "server_id": format!("SHOAL{:08X}{:04}", std::process::id(), worker.slot),
        "server_name": "shoal",
        "version": SERVER_VERSION,
        "proto": 1,
        "host": worker.engine.borrow().config().bind,
        "port": port,
        "headers": true,
        "max_payload": max_payload,
        "client_id": id,
        "client_ip": client_ip.trim_matches(|c| c == '[' || c == ']'),
    });
    if auth_required {
        info["auth_required"] = serde_json::Value::Bool(true);
    }
    let mut conn = Conn {
        parser: Parser::new(max_payload as usize),
        options: Options {
            verbose: true,
            pedantic: true,
            headers: false,
            no_responders: false,
            echo: true,
        },
        subs: HashMap::new(),
        routes: Default::default(),
        queue_turn: 0,
        awaiting_auth: auth_required,
        pings_out: 0,
    };
    let greeting = format!("INFO {info} \r\n");
    if stream.write_all(greeting.as_bytes()).await.is_ok() {
        let _ = serve(&worker, &mut stream, &session, &kill, &push, &mut conn).await;
    }
    worker.release(id);
    if *worker.shutdown.borrow() && worker.hands_over() {
        crate::worker::connection::close_drained(&mut stream).await;
    } else {
        let _ = stream.shutdown().await;
    }
}

async fn serve(
    worker: &Rc<Worker>,
    stream: &mut TcpStream,
    session: &Rc<RefCell<Session>>,
    kill: &Notify,
    push: &Push,
    conn: &mut Conn,
) -> std::io::Result<()> {
    let mut shutdown = worker.shutdown.subscribe();
    let mut buf = BytesMut::with_capacity(IO_CHUNK);
    let mut out: Vec<u8> = Vec::with_capacity(IO_CHUNK);
    let mut frames: Vec<u8> = Vec::new();
    let mut runner = Runner::new();
    let ping = tokio::time::interval_at(tokio::time::Instant::now() + PING_INTERVAL, PING_INTERVAL);
    tokio::pin!(ping);
    loop {
        push.take_into(&mut frames);
        let next = {
            let mut s = session.borrow_mut();
            runner.run(worker, &mut s, |engine, s| {
                process(engine, s, conn, &mut frames, &mut buf, &mut out)
            })
        };
        runner.settle(worker).await;
        if !out.is_empty() {
            push.set_writing(out.len());
            let written = tokio::select! {
                biased;
                r = stream.write_all(&out) => r,
                _ = kill.notified() => Err(std::io::ErrorKind::ConnectionAborted.into()),
            };
            push.set_writing(0);
            written?;
            out.clear();
            if out.capacity() > crate::worker::batch::SHRINK_ABOVE {
                out.shrink_to(IO_CHUNK);
            }
        }
        if let Next::Close = next {
            return Ok(());
        }
        if *shutdown.borrow() {
            return Ok(());
        }
        if !push.is_empty() {
            continue;
        }
        buf.reserve(IO_CHUNK);
        tokio::select! {
            n = stream.read_buf(&mut buf) => {
                if n? == 0 {
                    return Ok(());
                }
            }
            _ = push.ready.notified() => {}
            _ = kill.notified() => return Ok(()),
            _ = shutdown.changed() => return Ok(()),
            _ = ping.tick() => {
                if conn.pings_out >= MAX_PINGS_OUT {
                    nats::write_err(&mut out, "Stale Connection");
                    let _ = stream.write_all(&out).await;
                    return Ok(());
                }
                conn.pings_out += 1;
                out.extend_from_slice(b"PING\r\n");
            }
        }
    }
}

/// Delivers the frames pushed since the last batch, then runs every
/// complete operation in `buf` (synchronously: the engine stays borrowed)
/// and drops the bytes consumed.
fn process(
    engine: &mut Engine,
    session: &mut Session,
    conn: &mut Conn,
    frames: &mut Vec<u8>,
    buf: &mut BytesMut,
    out: &mut Vec<u8>,
) -> Ran<Next> {
    deliver(engine, session, conn, frames, out);
    let mut pos = 0;
    let mut executed = 0;
    let mut next = Next::Continue;
    loop {
        match conn.parser.parse(&buf[pos..]) {
            Ok(None) => break,
            Ok(Some((op, n))) => {
                pos += n;
                executed += 1;
                if !execute(engine, session, conn, op, out) {
                    next = Next::Close;
                    break;
                }
            }
            Err(e) => {
                if let Some(line) = e.reply() {
                    out.extend_from_slice(line);
                }
                next = Next::Close;
                break;
            }
        }
    }
    buf.advance(pos);
    session.qbuf = buf.len();
    session.omem = out.len();
    Ran { next, executed }
}

/// Runs one operation and appends its reply; false when the connection
/// must close.
fn execute(
    engine: &mut Engine,
    session: &mut Session,
    conn: &mut Conn,
    op: Op<'_>,
    out: &mut Vec<u8>,
) -> bool {
    if conn.awaiting_auth && !matches!(op, Op::Connect(_)) {
        nats::write_err(out, AUTH_VIOLATION);
        return false;
    }
    match op {
        Op::Ping => out.extend_from_slice(b"PONG\r\n"),
        Op::Pong => conn.pings_out = 0,
        Op::Info => {}
        Op::Connect(json) => {
            if !connect(engine, session, conn, json, out) {
                return false;
            }
            ok(conn, out);
        }
        Op::Pub {
            subject,
            reply,
            headers,
            payload,
        } => {
            if conn.options.pedantic && !nats::valid_literal_subject(subject) {
                nats::write_err(out, "Invalid Publish Subject");
            } else {
                let mut own = Vec::new();
                let envelope = (reply.unwrap_or_default(), headers.unwrap_or_default());
                let Some(receivers) =
                    publish(engine, session, subject, envelope, payload, &mut own)
                else {
                    let text = format!(
                        "Permissions Violation for Publish to \"{}\"",
                        String::from_utf8_lossy(subject)
                    );
                    nats::write_err(out, &text);
                    return true;
                };
                ok(conn, out);
                // The engine hands a publisher's own messages back with
                // PUBLISH's reply: `echo: false` drops them there.
                if !conn.options.echo {
                    own.clear();
                }
                deliver(engine, session, conn, &mut own, out);
                if let Some(reply) = reply {
                    if receivers == 0 && conn.options.no_responders {
                        no_responders(conn, reply, out);
                    }
                }
                return true;
            }
            ok(conn, out);
        }
        Op::Sub {
            subject,
            queue,
            sid,
        } => {
            if !nats::valid_subject(subject) {
                nats::write_err(out, "Invalid Subject");
                return true;
            }
            // The channel rules see a wildcard subject as its glob, as
            // PSUBSCRIBE's.
            let permitted = if nats::valid_literal_subject(subject) {
                engine.acl_channel_allowed(session, subject, false)
            } else {
                engine.acl_channel_allowed(session, &glob_of(subject), true)
            };
            if !permitted {
                let mut text = format!(
                    "Permissions Violation for Subscription to \"{}\"",
                    String::from_utf8_lossy(subject)
                );
                if let Some(queue) = queue {
                    text += &format!(" using queue \"{}\"", String::from_utf8_lossy(queue));
                }
                nats::write_err(out, &text);
                return true;
            }
            if conn.subs.contains_key(sid) {
                remove(engine, session, conn, sid);
            }
            let route = route_of(engine, subject, queue);
            let mut first = subscribe(engine, session, conn, &route, subject, queue);
            conn.routes[route.via as usize]
                .entry(route.name.clone())
                .or_default()
                .push(sid.to_vec());
            conn.subs.insert(
                sid.to_vec(),
                Subscription {
                    subject: subject.to_vec(),
                    route,
                    delivered: 0,
                    max: None,
                },
            );
            ok(conn, out);
            // The retained message LSUBSCRIBE sent, after the +OK.
            deliver(engine, session, conn, &mut first, out);
        }
        Op::Unsub { sid, max } => {
            let done = match (conn.subs.get_mut(sid), max) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(sub), Some(max)) => {
                    sub.max = Some(max);
                    sub.delivered >= max
                }
            };
            if done {
                remove(engine, session, conn, sid);
            }
            ok(conn, out);
        }
    }
    true
}

/// `+OK` in verbose mode.
fn ok(conn: &Conn, out: &mut Vec<u8>) {
    if conn.options.verbose {
        out.extend_from_slice(b"+OK\r\n");
    }
}

/// nats-server's refusal of missing or wrong credentials.
const AUTH_VIOLATION: &str = "Authorization Violation";

/// Applies CONNECT's options; false (the connection closes) when they do
/// not parse, ask for what cannot be given, or carry credentials that do
/// not log in (or none when the server wants them).
fn connect(
    engine: &mut Engine,
    session: &mut Session,
    conn: &mut Conn,
    json: &[u8],
    out: &mut Vec<u8>,
) -> bool {
    let Ok(serde_json::Value::Object(opts)) = serde_json::from_slice::<serde_json::Value>(json)
    else {
        return false;
    };
    let secret = |name: &str| opts.get(name).and_then(|v| v.as_str()).map(str::as_bytes);
    let credentials = match (secret("user"), secret("pass"), secret("auth_token")) {
        (Some(user), pass, _) => Some((user, pass.unwrap_or_default())),
        (None, _, Some(token)) => Some((&b"default"[..], token)),
        (None, _, None) => None,
    };
    let logged_in = match credentials {
        Some((user, pass)) => engine.authenticate(session, user, pass, b"CONNECT"),
        None => !conn.awaiting_auth,
    };
    if !logged_in {
        nats::write_err(out, AUTH_VIOLATION);
        return false;
    }
    conn.awaiting_auth = false;
    let flag =
        |name: &str, current: bool| opts.get(name).and_then(|v| v.as_bool()).unwrap_or(current);
    let o = &mut conn.options;
    o.verbose = flag("verbose", o.verbose);
    o.pedantic = flag("pedantic", o.pedantic);
    o.headers = flag("headers", o.headers);
    o.no_responders = flag("no_responders", o.no_responders);
    o.echo = flag("echo", o.echo);
    if o.no_responders && !o.headers {
        nats::write_err(out, "no responders requires headers support");
        return false;
    }
    conn.parser.set_headers(o.headers);
    engine.nats_client(session, o.echo);
    let text = |name: &str| {
        opts.get(name).and_then(|v| v.as_str()).map(|s| {
            s.bytes()
                .filter(|b| b.is_ascii_graphic())
                .take(128)
                .collect()
        })
    };
    if let Some(name) = text("name") {
        session.name = name;
    }
    if let Some(lang) = text("lang") {
        session.lib_name = lang;
    }
    if let Some(version) = text("version") {
        session.lib_ver = version;
    }
    true
}

/// Runs PUBLISH with the message's reply subject and headers (empty:
/// none) as its envelope; returns the receivers it counted on every worker
/// (None: the ACL refused it), and leaves in `frames` the messages it
/// pushed to this very client.
fn publish(
    engine: &mut Engine,
    session: &mut Session,
    subject: &[u8],
    (reply, headers): (&[u8], &[u8]),
    payload: &[u8],
    frames: &mut Vec<u8>,
) -> Option<i64> {
    let args = [
        Cow::Borrowed(&b"PUBLISH"[..]),
        Cow::Borrowed(subject),
        Cow::Borrowed(payload),
    ];
    engine.set_nats_envelope(reply, headers);
    engine.execute(session, &args, frames);
    engine.set_nats_envelope(b"", b"");
    let mut pos = 0;
    while let Ok(Some((reply, n))) = parse_reply(&frames[pos..]) {
        match reply {
            Reply::Integer(receivers) => {
                frames.drain(pos..pos + n);
                return Some(receivers);
            }
            Reply::Error(_) => {
                frames.drain(pos..pos + n);
                return None;
            }
            _ => pos += n,
        }
    }
    Some(0)
}

/// Sends the no-responders status to this client's subscriptions that
/// match `reply` (the requester's inbox).
fn no_responders(conn: &mut Conn, reply: &[u8], out: &mut Vec<u8>) {
    if !nats::valid_literal_subject(reply) {
        return;
    }
    for (sid, sub) in &conn.subs {
        if nats::subject_matches(&sub.subject, reply) {
            nats::write_msg(out, reply, sid, None, Some(NO_RESPONDERS), b"");
        }
    }
}

/// The engine subscription for a NATS subject and queue group.
fn route_of(engine: &Engine, subject: &[u8], queue: Option<&[u8]>) -> Route {
    if let Some(queue) = queue {
        return Route {
            via: Via::Queue,
            name: engine::queue_key(subject, queue),
        };
    }
    if !nats::valid_literal_subject(subject) {
        return Route {
            via: Via::Pattern,
            name: glob_of(subject),
        };
    }
    let retained = engine
        .config()
        .lvc_channels
        .iter()
        .any(|g| store::glob::glob_match(g, subject, false));
    Route {
        via: if retained {
            Via::Retained
        } else {
            Via::Channel
        },
        name: subject.to_vec(),
    }
}

/// A Redis glob matching at least every subject the NATS `subject` matches:
/// wildcard tokens become `*`, glob characters in literal tokens are
/// escaped.
fn glob_of(subject: &[u8]) -> Vec<u8> {
    let mut glob = Vec::with_capacity(subject.len() + 8);
    for (i, token) in subject.split(|&b| b == b'.').enumerate() {
        if i > 0 {
            glob.push(b'.');
        }
        if token == b"*" || token == b">" {
            glob.push(b'*');
            continue;
        }
        for &b in token {
            if matches!(b, b'*' | b'?' | b'[' | b']' | b'\\') {
                glob.push(b'\\');
            }
            glob.push(b);
        }
    }
    glob
}

/// Opens the engine subscription `route` unless one of the client's ids
/// already rides on it; returns the engine's replies (for LSUBSCRIBE, the
/// retained message comes with them).
fn subscribe(
    engine: &mut Engine,
    session: &mut Session,
    conn: &Conn,
    route: &Route,
    subject: &[u8],
    queue: Option<&[u8]>,
) -> Vec<u8> {
    let mut replies = Vec::new();
    if conn.routes[route.via as usize]
        .get(&route.name)
        .is_some_and(|ids| !ids.is_empty())
    {
        return replies;
    }
    let verb: &[u8] = match route.via {
        Via::Channel => b"SUBSCRIBE",
        Via::Retained => b"LSUBSCRIBE",
        Via::Pattern => b"PSUBSCRIBE",
        Via::Queue => {
            // A queue group is no engine command: the engine records the
            // member for every publisher to see.
            if let Some(queue) = queue {
                engine.queue_subscribe(session, subject, queue);
            }
            return replies;
        }
    };
    engine.execute(
        session,
        &[Cow::Borrowed(verb), Cow::Borrowed(&route.name)],
        &mut replies,
    );
    replies
}

/// Turns the engine's frames in `frames` into MSG lines (and empties it);
/// subscriptions that reached their `UNSUB` max end.
fn deliver(
    engine: &mut Engine,
    session: &mut Session,
    conn: &mut Conn,
    frames: &mut Vec<u8>,
    out: &mut Vec<u8>,
) {
    let mut ended = Vec::new();
    let mut pos = 0;
    while pos < frames.len() {
        let Ok(Some((frame, n))) = parse_reply(&frames[pos..]) else {
            break;
        };
        pos += n;
        let (Reply::Push(items) | Reply::Array(items)) = frame else {
            continue;
        };
        let none: (&[u8], &[u8]) = (b"", b"");
        let (via, name, subject, seq, payload, envelope) = match items.as_slice() {
            [Reply::Bulk(b"message"), Reply::Bulk(channel), Reply::Bulk(payload)] => {
                (Via::Channel, *channel, *channel, 0, *payload, none)
            }
            [Reply::Bulk(b"message"), Reply::Bulk(channel), Reply::Bulk(payload), Reply::Bulk(reply), Reply::Bulk(headers)] => {
                (
                    Via::Channel,
                    *channel,
                    *channel,
                    0,
                    *payload,
                    (*reply, *headers),
                )
            }
            [Reply::Bulk(b"pmessage"), Reply::Bulk(pattern), Reply::Bulk(channel), Reply::Bulk(payload)] => {
                (Via::Pattern, *pattern, *channel, 0, *payload, none)
            }
            [Reply::Bulk(b"pmessage"), Reply::Bulk(pattern), Reply::Bulk(channel), Reply::Bulk(payload), Reply::Bulk(reply), Reply::Bulk(headers)] => {
                (
                    Via::Pattern,
                    *pattern,
                    *channel,
                    0,
                    *payload,
                    (*reply, *headers),
                )
            }
            [Reply::Bulk(b"qmessage"), Reply::Bulk(key), Reply::Bulk(channel), Reply::Bulk(payload), Reply::Bulk(reply), Reply::Bulk(headers)] => {
                (Via::Queue, *key, *channel, 0, *payload, (*reply, *headers))
            }
            [Reply::Bulk(b"lmessage"), Reply::Bulk(channel), Reply::Integer(seq), Reply::Bulk(payload)] => {
                (Via::Retained, *channel, *channel, *seq, *payload, none)
            }
            _ => continue,
        };
        let message = Message {
            subject,
            seq,
            reply: envelope.0,
            headers: envelope.1,
            payload,
        };
        route_message(conn, via, name, &message, out, &mut ended);
    }
    frames.clear();
    for sid in ended {
        remove(engine, session, conn, &sid);
    }
}

/// One message the engine pushed.
struct Message<'a> {
    subject: &'a [u8],
    /// A retained channel's sequence number (0: none).
    seq: i64,
    /// The reply subject (empty: none).
    reply: &'a [u8],
    /// The publisher's header block (empty: none).
    headers: &'a [u8],
    payload: &'a [u8],
}

/// Writes one message to every id riding on the engine subscription
/// (`via`, `name`) whose subject matches it (for a queue group, to one of
/// the ids in turns); ids that reach their max go to `ended`.
fn route_message(
    conn: &mut Conn,
    via: Via,
    name: &[u8],
    message: &Message<'_>,
    out: &mut Vec<u8>,
    ended: &mut Vec<Vec<u8>>,
) {
    let Message {
        subject,
        seq,
        reply,
        headers,
        payload,
    } = *message;
    // A Redis channel that is not a NATS subject reaches no NATS client.
    if !nats::valid_literal_subject(subject) {
        return;
    }
    let Conn {
        routes,
        subs,
        queue_turn,
        options,
        ..
    } = conn;
    let Some(ids) = routes[via as usize].get(name) else {
        return;
    };
    let header;
    let headers = if !options.headers {
        // A client without headers gets the payload alone, as from
        // nats-server.
        None
    } else if !headers.is_empty() {
        Some(headers)
    } else if seq > 0 {
        header = format!("NATS/1.0\r\nShoal-Seq: {seq}\r\n\r\n");
        Some(header.as_bytes())
    } else {
        None
    };
    let reply = (!reply.is_empty()).then_some(reply);
    let mut send = |id: &Vec<u8>, sub: &mut Subscription| {
        nats::write_msg(out, subject, id, reply, headers, payload);
        sub.delivered += 1;
        if sub.max.is_some_and(|max| sub.delivered >= max) {
            ended.push(id.clone());
        }
    };
    if via == Via::Queue {
        // The engine chose this connection in the group; its ids of the
        // group share that choice in turns.
        if ids.is_empty() {
            return;
        }
        let id = &ids[(*queue_turn % ids.len() as u64) as usize];
        *queue_turn = queue_turn.wrapping_add(1);
        if let Some(sub) = subs.get_mut(id) {
            send(id, sub);
        }
        return;
    }
    for id in ids {
        let Some(sub) = subs.get_mut(id) else {
            continue;
        };
        if nats::subject_matches(&sub.subject, subject) {
            send(id, sub);
        }
    }
}

/// Ends subscription `sid`, and its engine subscription with the last id
/// riding on it.
fn remove(engine: &mut Engine, session: &mut Session, conn: &mut Conn, sid: &[u8]) {
    let Some(sub) = conn.subs.remove(sid) else {
        return;
    };
    let routes = &mut conn.routes[sub.route.via as usize];
    if let Some(ids) = routes.get_mut(&sub.route.name) {
        ids.retain(|id| id != sid);
        if !ids.is_empty() {
            return;
        }
    }
    routes.remove(&sub.route.name);
    let verb: &[u8] = match sub.route.via {
        Via::Channel => b"UNSUBSCRIBE",
        Via::Retained => b"LUNSUBSCRIBE",
        Via::Pattern => b"PUNSUBSCRIBE",
        Via::Queue => {
            if let Some(space) = sub.route.name.iter().position(|&b| b == b' ') {
                let (subject, queue) = (&sub.route.name[..space], &sub.route.name[space + 1..]);
                engine.queue_unsubscribe(session, subject, queue);
            }
            return;
        }
    };
    let mut replies = Vec::new();
    engine.execute(
        session,
        &[Cow::Borrowed(verb), Cow::Borrowed(&sub.route.name)],
        &mut replies,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_cover_the_nats_subject() {
        assert_eq!(glob_of(b"a.*"), b"a.*");
        assert_eq!(glob_of(b"a.>"), b"a.*");
        assert_eq!(glob_of(b"*.b.>"), b"*.b.*");
        assert_eq!(glob_of(b"a?.[x].c*"), b"a\\?.\\[x\\].c\\*");
        for (subject, channel) in [
            (&b"a.*"[..], &b"a.b"[..]),
            (b"a.>", b"a.b.c"),
            (b"*.b", b"x.b"),
        ] {
            assert!(store::glob::glob_match(&glob_of(subject), channel, false));
            assert!(nats::subject_matches(subject, channel));
        }
    }
}
