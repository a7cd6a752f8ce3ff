//! One client connection: read, parse every complete request in the buffer,
//! prefetch their keys' index slots, execute them in order, write all the
//! replies in one write. Limits and closing follow Redis: a protocol error is
//! answered and the connection closed; a query buffer past
//! `client-query-buffer-limit` or replies past the output limit close it
//! without a reply. A blocking command that finds nothing parks the
//! connection (see `blocking`): the requests after it wait, as in Redis.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use bytes::BytesMut;
use engine::command::{Arg, Command};
use engine::{BlockRequest, Engine, Flow, ServerRequest, Session};
use proto::resp::{Protocol, ReplyWriter, RequestParser, PROTO_IOBUF_LEN};
use store::WorkerCounter;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{watch, Notify};

use crate::worker::batch::{Ran, Runner};
use crate::worker::blocking::Outcome;
use crate::worker::bus;
use crate::worker::pubsub::Push;
use crate::worker::transport::Movable;
use crate::worker::Worker;

/// Redis's `PROTO_RESIZE_THRESHOLD`: a query buffer larger than this is
/// trimmed when its recent peak used less than half of it.
const QUERY_RESIZE_THRESHOLD: usize = 32 * 1024;

/// How often a connection's query buffer is looked at for trimming: the
/// period of Redis's client cron at its default `hz`.
const QUERY_RESIZE_PERIOD: Duration = Duration::from_millis(100);

/// An idle client's empty query buffer is freed after this long, as Redis
/// frees one idle for more than 2 seconds.
const QUERY_IDLE_FREE: Duration = Duration::from_secs(2);

/// Sizes a connection's query buffer as Redis does: one that grew for a
/// large request shrinks back towards what the client recently sent.
struct QuerySizing {
    /// The most the buffer held since the last look.
    peak: usize,
    /// When the buffer was last looked at.
    looked: tokio::time::Instant,
}

impl QuerySizing {
    fn new() -> QuerySizing {
        QuerySizing {
            peak: 0,
            looked: tokio::time::Instant::now(),
        }
    }

    /// Notes how much the buffer holds after a read.
    fn observe(&mut self, len: usize) {
        self.peak = self.peak.max(len);
    }

    /// At most once a period: a buffer above the threshold whose recent
    /// peak is under half of it, and that wastes more than a few KiB, is
    /// reallocated to the larger of its content and that peak.
    fn trim(&mut self, buf: &mut BytesMut) {
        let now = tokio::time::Instant::now();
        if now.duration_since(self.looked) < QUERY_RESIZE_PERIOD {
            return;
        }
        self.looked = now;
        let cap = buf.capacity();
        if cap > QUERY_RESIZE_THRESHOLD && cap / 2 > self.peak && cap - buf.len() > 4096 {
            let mut smaller = BytesMut::with_capacity(buf.len().max(self.peak));
            smaller.extend_from_slice(buf);
            *buf = smaller;
        }
        self.peak = buf.len();
    }
}

/// Resolves after [`QUERY_IDLE_FREE`] when `armed` (never otherwise).
async fn idle_free(armed: bool) {
    if !armed {
        std::future::pending::<()>().await;
    }
    tokio::time::sleep(QUERY_IDLE_FREE).await;
}

/// How `serve` ended.
enum Ended {
    /// The client closed, was closed, or broke a limit.
    Closed,
    /// The worker drains; `clean` when no partial request was read, so the
    /// connection could go on in another worker.
    Drained { clean: bool },
    /// SHOAL.SYNC: the connection is a replica's link, for the supervisor.
    Replica(serde_json::Value),
}

/// How long a draining worker keeps reading (and dropping) what a client
/// still sends after its last reply and the FIN, so that closing does not
/// reset the connection under replies the client has not read yet.
pub(crate) const LINGER: Duration = Duration::from_secs(2);

/// Serves one accepted connection until it closes. `peer` is the remote
/// address, the local address and the socket's descriptor (for CLIENT LIST).
/// `moved` is the state of a client another worker handed over.
///
/// Returns the stream with the client's state when the worker drains for a
/// hand-over while the connection is idle and all of its state can move
/// (see [`Session::can_move`]): the caller passes both to the next worker.
pub(crate) async fn run<S>(
    worker: Rc<Worker>,
    mut stream: S,
    peer: (String, String, i32),
    moved: Option<serde_json::Value>,
) -> Option<(S, serde_json::Value)>
where
    S: AsyncRead + AsyncWrite + Unpin + Movable,
{
    let id = match moved.as_ref().and_then(|m| m["id"].as_u64()) {
        Some(id) => id,
        None => worker.store.next_client_id().ok()?,
    };
    let (now, maxclients) = {
        let e = worker.engine.borrow();
        (e.now_ms(), e.config().maxclients)
    };
    if worker.at_max_clients(maxclients) {
        let _ = stream
            .write_all(b"-ERR max number of clients reached\r\n")
            .await;
        return None;
    }
    // The accept-time rules below read the users: take in a password set
    // through another worker a moment ago (CONFIG SET requirepass), or
    // this client would start authenticated.
    worker.engine.borrow_mut().sync_config();
    // Protected mode (Redis's): with no password for the default user,
    // only loopback and Unix socket clients are served.
    if moved.is_none() && !is_local(&peer.0) && worker.engine.borrow().protected_mode_refuses() {
        let _ = stream.write_all(engine::acl::DENIED.as_bytes()).await;
        return None;
    }
    let mut s = Session::new(id, now);
    // Authenticated from the start when the default user needs no password
    // (Redis's accept-time rule).
    s.authenticated = Some(!worker.engine.borrow().auth_required());
    if let Some(m) = &moved {
        apply_moved_state(&mut s, m);
    }
    (s.addr, s.laddr, s.fd) = (peer.0, peer.1, peer.2 as i64);
    s.worker = worker.slot;
    s.holdable = true;
    let (session, kill) = worker.admit(s);
    let push = worker.clients.push_of(id).unwrap_or_default();
    let ended = serve(&worker, &mut stream, &session, &kill, &push).await;
    let moving = matches!(ended, Ok(Ended::Drained { clean: true }))
        && stream.movable()
        && worker.hands_over()
        && session.borrow().can_move()
        && !worker.engine.borrow().tracks_client(id)
        && push.is_empty();
    let state = match &ended {
        Ok(Ended::Replica(link)) => Some(serde_json::json!({ "replica": link })),
        _ => moving.then(|| moved_state(&session.borrow())),
    };
    // However the connection ended, it waits on no key any more.
    worker.blocking.unblock(id);
    worker.blocking.take_outcome(id);
    worker.release(id);
    if let Some(state) = state {
        return Some((stream, state));
    }
    if matches!(ended, Ok(Ended::Drained { .. })) && worker.hands_over() {
        close_drained(&mut stream).await;
    } else {
        let _ = stream.shutdown().await;
    }
    None
}

/// Closes a connection that its worker, draining for an upgrade or a
/// scale-down, cannot hand over: FIN first, then what the client still
/// sends is read and dropped until it closes too (at most [`LINGER`]).
/// Closing with unread input would make the kernel answer with a reset,
/// which a client that reconnects on a close would see as a failed
/// request. (A server that stops just closes, as Redis does.)
pub(crate) async fn close_drained<S>(stream: &mut S)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(LINGER, async {
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

/// The state of a client that goes with its connection to another worker.
/// Whether a peer address is the loopback interface or a Unix socket.
fn is_local(peer: &str) -> bool {
    match peer.parse::<std::net::SocketAddr>() {
        Ok(addr) => addr.ip().is_loopback(),
        // A Unix socket's peer is a path (or empty), never a network peer.
        Err(_) => true,
    }
}

fn moved_state(s: &Session) -> serde_json::Value {
    serde_json::json!({
        "id": s.id,
        "db": s.db,
        "resp3": s.protocol == Protocol::Resp3,
        "name": s.name,
        "lib_name": s.lib_name,
        "lib_ver": s.lib_ver,
        "no_evict": s.no_evict,
        "created_ms": s.created_ms,
        "user": s.user,
        "user_incarnation": s.user_incarnation,
        "authenticated": s.authenticated,
    })
}

/// Restores what [`moved_state`] carried (anything malformed is left at
/// its default: the peer is our own supervisor, but the line is input).
fn apply_moved_state(s: &mut Session, m: &serde_json::Value) {
    let bytes = |v: &serde_json::Value| -> Vec<u8> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|b| b.as_u64())
                    .map(|b| b as u8)
                    .collect()
            })
            .unwrap_or_default()
    };
    s.db = m["db"]
        .as_u64()
        .filter(|db| *db < store::NUM_DBS as u64)
        .unwrap_or(0) as u8;
    if m["resp3"].as_bool() == Some(true) {
        s.protocol = Protocol::Resp3;
    }
    s.name = bytes(&m["name"]);
    s.lib_name = bytes(&m["lib_name"]);
    s.lib_ver = bytes(&m["lib_ver"]);
    s.no_evict = m["no_evict"].as_bool().unwrap_or(false);
    if let Some(created) = m["created_ms"].as_u64() {
        s.created_ms = created;
    }
    // The ACL user moves with the connection (the next worker checks its
    // incarnation as any would).
    if m["user"].is_array() {
        s.user = bytes(&m["user"]);
        s.user_incarnation = m["user_incarnation"].as_u64().unwrap_or(u64::MAX);
        s.authenticated = m["authenticated"].as_bool();
    }
}

/// How long a reply waits for the wake-ups its command caused on other
/// workers: only a worker that died mid-round makes it wait this long.
const ROUND_LIMIT: Duration = Duration::from_secs(2);

async fn serve<S>(
    worker: &Rc<Worker>,
    stream: &mut S,
    session: &Rc<RefCell<Session>>,
    kill: &Notify,
    push: &Push,
) -> std::io::Result<Ended>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::with_capacity(PROTO_IOBUF_LEN);
    let mut out: Vec<u8> = Vec::with_capacity(PROTO_IOBUF_LEN);
    let mut shutdown = worker.shutdown.subscribe();
    let mut runner = Runner::new();
    let mut sizing = QuerySizing::new();
    // The buffer was freed while the client idled: the next read allocates.
    let mut freed = false;
    loop {
        // Limits are read each round: CONFIG SET on any worker changes them.
        let subscribed = session.borrow().subs().total() > 0;
        let (max_bulk, query_limit, output_limit, idle_timeout) = {
            let e = worker.engine.borrow();
            let c = e.config();
            let limit = if subscribed {
                c.output_limit_pubsub.0
            } else {
                c.output_limit_normal.0
            };
            // Redis never closes an idle subscriber.
            let timeout = if subscribed { 0 } else { c.timeout };
            (
                c.proto_max_bulk_len,
                c.client_query_buffer_limit,
                limit,
                timeout,
            )
        };
        parser.set_max_bulk_len(max_bulk);
        parser.set_unauthenticated(
            session.borrow().authenticated != Some(true) && worker.engine.borrow().auth_required(),
        );
        // Frames that arrived since the last write go before the replies of
        // the requests read after them.
        push.take_into(&mut out);
        // Woken only to write pushed frames: nothing to parse.
        let mut step = if buf.is_empty() {
            Flow::Continue
        } else {
            let mut session_ref = session.borrow_mut();
            runner.run(worker, &mut session_ref, |engine, session_ref| {
                process(
                    worker,
                    engine,
                    session,
                    session_ref,
                    &mut parser,
                    &mut buf,
                    &mut out,
                )
            })
        };
        // The replies and what is left of the input count toward
        // `maxmemory` (and `maxmemory-clients`) while they wait.
        push.set_held(buf.len() + out.len());
        worker.account_client(push);
        let round = worker.blocking.take_reply_round();
        // `appendfsync always`: no reply before the fsync of its writes.
        runner.settle(worker).await;
        if let Some(round) = round {
            // Blocked clients that the command's writes serve on other
            // workers (and the chains they start) are served before the reply.
            worker.blocking.wait_round(round, ROUND_LIMIT).await;
            if matches!(step, Flow::Continue) && !buf.is_empty() {
                // The requests after it run before the socket is read again.
                if !out.is_empty() {
                    write_out(stream, &out, kill, push).await?;
                    out.clear();
                }
                continue;
            }
        }
        if output_limit != 0 && out.len() as u64 > output_limit {
            // client-output-buffer-limit: the client is closed, its replies
            // dropped, as Redis does.
            return Ok(Ended::Closed);
        }
        if let Flow::Hold = step {
            if !out.is_empty() {
                write_out(stream, &out, kill, push).await?;
                out.clear();
            }
            let parked = Parked {
                stream: &mut *stream,
                buf: &mut buf,
                kill,
                shutdown: &mut shutdown,
                query_limit,
            };
            if hold(worker, session, parked).await {
                return Ok(Ended::Closed);
            }
            // The held request is still in the buffer: it runs now (or is
            // held again by a newer pause).
            continue;
        }
        if let Flow::Block(req) = step {
            if !out.is_empty() {
                write_out(stream, &out, kill, push).await?;
                out.clear();
            }
            let parked = Parked {
                stream: &mut *stream,
                buf: &mut buf,
                kill,
                shutdown: &mut shutdown,
                query_limit,
            };
            step = match park(worker, session, parked, req, &mut out).await? {
                // The reply is in `out`: go round for the requests after it.
                // Closed while parked (by the peer, a kill, a shutdown).
                None => return Ok(Ended::Closed),
                Some(Flow::Server(req)) => Flow::Server(req),
                Some(Flow::Close) => Flow::Close,
                // The reply is in `out`: go round for the requests after it.
                Some(_) => continue,
            };
        }
        if let Flow::Server(ServerRequest::Replicate {
            replid,
            offset,
            port,
            failover,
        }) = &step
        {
            if !out.is_empty() {
                write_out(stream, &out, kill, push).await?;
            }
            let addr = session.borrow().addr.clone();
            return Ok(Ended::Replica(serde_json::json!({
                "replid": replid,
                "offset": offset,
                "port": port,
                "addr": addr,
                "failover": failover,
            })));
        }
        let close = match step {
            Flow::Block(_) | Flow::Hold | Flow::Continue => false,
            Flow::Close => true,
            Flow::Server(req) => {
                let close = server_request(worker, session, req, &mut out).await;
                // The request is done: it no longer counts in the buffer.
                session.borrow_mut().qbuf = buf.len();
                worker.flush_pubsub();
                if !close {
                    // More requests may wait in the buffer: go round again
                    // before reading.
                    if !out.is_empty() && buf.is_empty() {
                        write_out(stream, &out, kill, push).await?;
                        out.clear();
                    }
                    continue;
                }
                true
            }
        };
        if !out.is_empty() {
            if close {
                write_out(stream, &out, kill, push).await?;
                out.clear();
            } else {
                let reading = buf.len() as u64 <= query_limit;
                Runner::before_write().await;
                match write_reading(stream, &out, &mut buf, reading, kill, push).await? {
                    Written::All => out.clear(),
                    Written::Part(n) => {
                        // Requests came while the replies were being
                        // written: they run now, their replies queue
                        // behind the rest (as Redis's output buffer).
                        out.drain(..n);
                        freed = false;
                        sizing.observe(buf.len());
                        continue;
                    }
                    Written::Eof => return Ok(Ended::Closed),
                }
            }
            if out.capacity() > 1 << 20 {
                out.shrink_to(PROTO_IOBUF_LEN);
            }
        }
        if close {
            return Ok(Ended::Closed);
        }
        if *shutdown.borrow() {
            return Ok(Ended::Drained {
                clean: buf.is_empty(),
            });
        }
        if buf.len() as u64 > query_limit {
            // As Redis: the client is closed without a reply.
            return Ok(Ended::Closed);
        }
        if !push.is_empty() {
            continue;
        }
        sizing.trim(&mut buf);
        if !freed {
            buf.reserve(PROTO_IOBUF_LEN);
        }
        session.borrow_mut().qbuf_cap = buf.capacity();
        push.set_held(buf.len());
        worker.account_client(push);
        let idle_armed = buf.is_empty() && buf.capacity() > 0;
        tokio::select! {
            n = stream.read_buf(&mut buf) => {
                if n? == 0 {
                    return Ok(Ended::Closed);
                }
                freed = false;
                sizing.observe(buf.len());
            }
            _ = idle_free(idle_armed) => {
                buf = BytesMut::new();
                freed = true;
                continue;
            }
            _ = push.ready.notified() => {}
            _ = kill.notified() => return Ok(Ended::Closed),
            _ = shutdown.changed() => return Ok(Ended::Drained { clean: buf.is_empty() }),
            // `timeout`: an idle client is closed, as Redis does.
            _ = idle(idle_timeout) => return Ok(Ended::Closed),
        }
    }
}

/// WAIT: polls the supervisor's status for replicas that acknowledged
/// `offset` until `numreplicas` have or the timeout passes.
async fn wait_replicas(worker: &Worker, numreplicas: u64, timeout_ms: u64, offset: u64) -> u64 {
    let deadline =
        (timeout_ms > 0).then(|| tokio::time::Instant::now() + Duration::from_millis(timeout_ms));
    let mut first = true;
    loop {
        let status = engine::replication::read_status(worker.store.path());
        let n = engine::replication::acked_replicas(&status, offset);
        if n >= numreplicas || deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            return n;
        }
        if *worker.shutdown.borrow() {
            return n;
        }
        // The supervisor writes replicas' acknowledgements to the file at
        // once only while a WAIT asks (`want_status`).
        engine::replication::want_status(&worker.store);
        tokio::time::sleep(Duration::from_millis(if first { 1 } else { 2 })).await;
        first = false;
    }
}

/// Writes `out`, unless the client is closed meanwhile (a subscriber that
/// does not read is cut off by the output limit while its write waits).
async fn write_out<S>(stream: &mut S, out: &[u8], kill: &Notify, push: &Push) -> std::io::Result<()>
where
    S: AsyncWrite + Unpin,
{
    push.set_writing(out.len());
    // The write first: a client that closes itself (CLIENT KILL SKIPME no)
    // still gets its reply; the kill only cuts a write that is stuck.
    let res = tokio::select! {
        biased;
        r = stream.write_all(out) => r,
        _ = kill.notified() => Err(std::io::ErrorKind::ConnectionAborted.into()),
    };
    push.set_writing(0);
    res
}

/// How [`write_reading`] ended.
enum Written {
    /// Every byte went out.
    All,
    /// Requests arrived after this many bytes went out.
    Part(usize),
    /// Every byte went out, and the client closed its side meanwhile.
    Eof,
}

/// Writes `out` while still reading the socket into `buf` (when `reading`):
/// a client that sends requests without reading its replies (a pipeline
/// far ahead, a subscriber gone deaf) is not left blocked in its own
/// write, as Redis keeps reading while replies wait in the output buffer.
/// Returns as soon as requests arrive with how much went out, so that
/// they run and their replies queue; the buffers are bounded by
/// `client-output-buffer-limit`, `client-query-buffer-limit`,
/// `maxmemory-clients` and key eviction, as in Redis.
async fn write_reading<S>(
    stream: &mut S,
    out: &[u8],
    buf: &mut BytesMut,
    reading: bool,
    kill: &Notify,
    push: &Push,
) -> std::io::Result<Written>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    use std::pin::Pin;
    use std::task::Poll;
    push.set_writing(out.len());
    let mut pos = 0;
    let mut eof = false;
    // Uninitialized: zeroing 16 KiB for every batch's write showed in the
    // profile at pipeline 16, and the read fills what it reports.
    let mut chunk = [std::mem::MaybeUninit::<u8>::uninit(); 16 * 1024];
    let res = {
        let io = std::future::poll_fn(|cx| {
            while pos < out.len() {
                match Pin::new(&mut *stream).poll_write(cx, &out[pos..]) {
                    Poll::Ready(Ok(0)) => {
                        return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()))
                    }
                    Poll::Ready(Ok(n)) => pos += n,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => break,
                }
            }
            if pos == out.len() {
                return Poll::Ready(Ok(if eof { Written::Eof } else { Written::All }));
            }
            if reading && !eof {
                let mut rb = tokio::io::ReadBuf::uninit(&mut chunk);
                match Pin::new(&mut *stream).poll_read(cx, &mut rb) {
                    // A client that closed its side after its requests
                    // still gets their replies (a half-closed pipe).
                    Poll::Ready(Ok(())) if rb.filled().is_empty() => eof = true,
                    Poll::Ready(Ok(())) => {
                        buf.extend_from_slice(rb.filled());
                        return Poll::Ready(Ok(Written::Part(pos)));
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => {}
                }
            }
            Poll::Pending
        });
        tokio::select! {
            biased;
            r = io => r,
            _ = kill.notified() => Err(std::io::ErrorKind::ConnectionAborted.into()),
        }
    };
    push.set_writing(0);
    res
}

/// What a parked connection watches besides its wake-up.
struct Parked<'a, S> {
    stream: &'a mut S,
    buf: &'a mut BytesMut,
    kill: &'a Notify,
    shutdown: &'a mut watch::Receiver<bool>,
    query_limit: u64,
}

/// Waits until the blocked client is served, unblocked or times out (its
/// reply then goes into `out`), or its connection ends. Meanwhile the
/// socket is still read, so that a client that hangs up is noticed; what it
/// sends waits in the buffer (within the query buffer limit).
/// Returns the served command's flow (`Continue` when its reply is in
/// `out` and the requests after it may run), or None when the connection
/// is closing (closed by the peer, killed, shut down).
async fn park<S>(
    worker: &Rc<Worker>,
    session: &Rc<RefCell<Session>>,
    p: Parked<'_, S>,
    req: BlockRequest,
    out: &mut Vec<u8>,
) -> std::io::Result<Option<Flow>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (id, protocol) = {
        let s = session.borrow();
        (s.id, s.protocol)
    };
    let wake = worker.blocking.waker(id);
    let deadline = req.deadline_ms.map(|at| {
        let now = worker.engine.borrow().now_ms();
        tokio::time::Instant::now() + Duration::from_millis(at.saturating_sub(now))
    });
    let resumed = loop {
        if let Some(o) = worker.blocking.take_outcome(id) {
            break outcome(worker, session, o, protocol, out);
        }
        let Some(wake) = &wake else {
            // Neither blocked nor decided: nothing can wake it (not expected).
            ReplyWriter::new(out, protocol).null_array();
            break Some(Flow::Continue);
        };
        if *p.shutdown.borrow() {
            break None;
        }
        p.buf.reserve(PROTO_IOBUF_LEN);
        tokio::select! {
            _ = wake.notified() => {}
            _ = until(deadline) => {
                // Served in the same instant? Then the reply wins.
                if let Some(o) = worker.blocking.take_outcome(id) {
                    break outcome(worker, session, o, protocol, out);
                }
                worker.blocking.unblock(id);
                worker
                    .engine
                    .borrow_mut()
                    .blocked_call_ended(&session.borrow(), None);
                ReplyWriter::new(out, protocol).null_array();
                break Some(Flow::Continue);
            }
            n = p.stream.read_buf(p.buf) => {
                if !matches!(n, Ok(n) if n > 0) || p.buf.len() as u64 > p.query_limit {
                    break None;
                }
            }
            _ = p.kill.notified() => break None,
            _ = p.shutdown.changed() => break None,
        }
    };
    worker.blocking.unblock(id);
    session.borrow_mut().blocked = false;
    Ok(resumed)
}

/// Waits while CLIENT PAUSE holds this client's next request: until the
/// pause ends (its deadline, or CLIENT UNPAUSE on any worker: the worker's
/// pause timer wakes every held connection) or the connection ends, which
/// it returns `true` for. Meanwhile the client counts as blocked (INFO's
/// `blocked_clients`, the `b` flag) and its socket is read as in [`park`].
async fn hold<S>(worker: &Rc<Worker>, session: &Rc<RefCell<Session>>, p: Parked<'_, S>) -> bool
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    // Created before the pause is looked at, so that no end is missed.
    let over = worker.pause.over.notified();
    tokio::pin!(over);
    over.as_mut().enable();
    worker.pause.arm();
    let _ = worker
        .store
        .add_worker_counter(worker.slot, WorkerCounter::Blocked, 1);
    session.borrow_mut().blocked = true;
    let closed = loop {
        if *p.shutdown.borrow() {
            break true;
        }
        if worker.engine.borrow().pause().is_none() {
            break false;
        }
        p.buf.reserve(PROTO_IOBUF_LEN);
        tokio::select! {
            _ = &mut over => break false,
            n = p.stream.read_buf(p.buf) => {
                if !matches!(n, Ok(n) if n > 0) || p.buf.len() as u64 > p.query_limit {
                    break true;
                }
            }
            _ = p.kill.notified() => break true,
            _ = p.shutdown.changed() => break true,
        }
    };
    session.borrow_mut().blocked = false;
    let _ = worker
        .store
        .add_worker_counter(worker.slot, WorkerCounter::Blocked, -1);
    closed
}

/// Writes what ended a wait and says how the connection goes on; a wait
/// ended by CLIENT UNBLOCK counts as the command's call (failed with
/// ERROR), as the run that serves a client counts it.
fn outcome(
    worker: &Worker,
    session: &RefCell<Session>,
    o: Outcome,
    protocol: proto::resp::Protocol,
    out: &mut Vec<u8>,
) -> Option<Flow> {
    const UNBLOCKED: &str = "UNBLOCKED client unblocked via CLIENT UNBLOCK";
    match o {
        Outcome::Served { reply, flow } => {
            out.extend_from_slice(&reply);
            Some(flow)
        }
        Outcome::Unblocked { error } => {
            let mut w = ReplyWriter::new(out, protocol);
            if error {
                w.error(UNBLOCKED.as_bytes());
            } else {
                w.null_array();
            }
            worker
                .engine
                .borrow_mut()
                .blocked_call_ended(&session.borrow(), error.then_some(UNBLOCKED));
            Some(Flow::Continue)
        }
    }
}

/// Resolves at `deadline` (never when None).
async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Resolves after `seconds` (never when 0).
async fn idle(seconds: u64) {
    if seconds == 0 {
        std::future::pending::<()>().await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(seconds)).await;
}

/// Executes every complete request in `buf` (synchronously: no `.await`
/// while the engine is borrowed) and drops the consumed bytes.
fn process(
    worker: &Worker,
    engine: &mut Engine,
    session_rc: &Rc<RefCell<Session>>,
    session: &mut Session,
    parser: &mut RequestParser,
    buf: &mut BytesMut,
    out: &mut Vec<u8>,
) -> Ran<Flow> {
    session.qbuf = buf.len();
    let mut batch = Vec::new();
    let mut pos = 0;
    let mut protocol_error = None;
    loop {
        match parser.parse(&buf[pos..]) {
            Ok(Some((args, n))) => {
                pos += n;
                // Looked up (and its keys' slots prefetched) now, before any
                // request of the batch runs, so the cache misses overlap.
                let cmd = engine.resolve(session, &args, true);
                batch.push((args, pos, cmd));
            }
            Ok(None) => break,
            Err(e) => {
                protocol_error = Some(e);
                break;
            }
        }
    }
    if batch.len() > 1 {
        for (args, _, cmd) in &batch {
            if let Some(cmd) = cmd {
                engine.prefetch_entries(session, args, cmd);
            }
        }
    }
    let mut step = Flow::Continue;
    let mut consumed = pos;
    let mut executed = 0;
    let mut start = 0;
    let mut cut = false;
    // Where the request the server finishes began: until it is done it
    // still counts in the buffer (CLIENT LIST's `qbuf`), as in Redis.
    let mut server_from = None;
    for (args, end, cmd) in &batch {
        let mut flow = engine.execute_resolved(session, *cmd, args, out);
        if flow == Flow::Hold {
            // Nothing ran: the request stays in the buffer, with the ones
            // after it, until the pause ends.
            step = Flow::Hold;
            consumed = start;
            break;
        }
        let this_start = start;
        start = *end;
        executed += 1;
        if engine.take_pause_changed() {
            worker.pause.unpaused_here();
        }
        if let Flow::Block(req) = flow {
            flow = block(worker, engine, session_rc, session, *cmd, args, req, out);
        }
        // Clients blocked on keys this command wrote are served before the
        // next command runs, as in Redis.
        if let Some(round) = worker.blocking.serve_ready(engine, Vec::new()) {
            // Clients on other workers are served too before this reply
            // leaves and the next request runs: the batch stops here and the
            // reply waits for the round (`serve`).
            worker.blocking.defer_reply(round);
            if flow == Flow::Continue {
                consumed = *end;
                cut = true;
                break;
            }
        }
        match flow {
            Flow::Continue => continue,
            Flow::Close => step = Flow::Close,
            Flow::Server(req) => {
                step = Flow::Server(req);
                server_from = Some(this_start);
            }
            Flow::Block(req) => step = Flow::Block(req),
            // A blocking command's last run, held by a pause that began
            // meanwhile: it runs again after the pause.
            Flow::Hold => {
                step = Flow::Hold;
                consumed = this_start;
                break;
            }
        }
        consumed = *end;
        break;
    }
    drop(batch);
    if cut || !matches!(step, Flow::Continue) {
        // Requests after this one are parsed again from the new start.
        parser.reset();
    } else if let Some(e) = protocol_error {
        ReplyWriter::new(out, session.protocol).error(&e.message());
        step = Flow::Close;
    }
    let ran = Ran::consumed(session, buf, consumed, out, step, executed);
    if let Some(from) = server_from {
        session.qbuf = buf.len() + (consumed - from);
    }
    ran
}

/// Registers a client whose command found nothing as blocked, then runs the
/// command once more: a write on another worker may have come before this
/// worker's bit in the waiter table was visible (I14); that run is a
/// blocked client's run. Returns that run's
/// flow when it found something, else `Flow::Block` (the client parks).
#[allow(clippy::too_many_arguments)]
fn block(
    worker: &Worker,
    engine: &mut Engine,
    session_rc: &Rc<RefCell<Session>>,
    session: &mut Session,
    cmd: Option<&'static Command>,
    args: &[Arg<'_>],
    req: BlockRequest,
    out: &mut Vec<u8>,
) -> Flow {
    let id = session.id;
    worker
        .blocking
        .block(session_rc.clone(), id, cmd, args, &req);
    let mark = out.len();
    let again: Option<Vec<Arg<'_>>> = req
        .rerun
        .as_ref()
        .map(|a| a.iter().map(|w| Arg::Borrowed(&w[..])).collect());
    let args = again.as_deref().unwrap_or(args);
    // The client is blocked from here on: a change of its key between the
    // first run and this one (DEL, SET, FLUSHDB on another worker) ends its
    // wait as it would end a parked client's (Redis's "no longer exists").
    session.blocked = true;
    match engine.execute_resolved(session, cmd, args, out) {
        Flow::Block(_) => {
            out.truncate(mark);
            Flow::Block(req)
        }
        served => {
            session.blocked = false;
            worker.blocking.unblock(id);
            served
        }
    }
}

/// Finishes a command that concerns connections or processes. Returns
/// whether the connection should close.
pub(crate) async fn server_request(
    worker: &Rc<Worker>,
    session: &RefCell<Session>,
    req: ServerRequest,
    out: &mut Vec<u8>,
) -> bool {
    let now = worker.engine.borrow().now_ms();
    let protocol = session.borrow().protocol;
    match req {
        ServerRequest::ClientList { ids, client_type } => {
            let mut text = worker.clients.list(
                &ids,
                now,
                Some(&session.borrow()),
                worker.engine.try_borrow().ok().as_deref(),
            );
            for p in ask_peers(worker, bus::LIST_REQUEST, &bus::encode_ids(&ids)).await {
                text.push_str(&String::from_utf8_lossy(&p));
            }
            let mut lines: Vec<&str> = text.lines().collect();
            // A subscriber's line carries the `P` flag (on any worker).
            lines.retain(|l| client_type.is_none_or(|t| t.selects(line_flags(l).contains('P'))));
            lines.sort_by_key(|l| client_id_of(l));
            let mut sorted = lines.join("\n");
            if !sorted.is_empty() {
                sorted.push('\n');
            }
            ReplyWriter::new(out, protocol).verbatim(b"txt", sorted.as_bytes());
            false
        }
        ServerRequest::ClientKill(filter) => {
            let mut killed = worker.clients.kill(&filter, now, Some(&session.borrow()));
            for p in ask_peers(worker, bus::KILL_REQUEST, &bus::encode_filter(&filter)).await {
                killed += bus::payload_u64(&p).unwrap_or(0);
            }
            let mut w = ReplyWriter::new(out, protocol);
            if filter.quiet {
                // The command (ACL SETUSER, DELUSER, LOAD) already replied.
            } else if filter.legacy {
                if killed == 0 {
                    w.error(b"ERR No such client");
                } else {
                    w.simple(b"OK");
                }
            } else {
                w.integer(killed as i64);
            }
            false
        }
        ServerRequest::ClientUnblock { id, error } => {
            let mut unblocked = worker.blocking.client_unblock(id, error);
            if !unblocked {
                let mut payload = id.to_le_bytes().to_vec();
                payload.push(error as u8);
                unblocked = ask_peers(worker, bus::UNBLOCK_REQUEST, &payload)
                    .await
                    .iter()
                    .any(|p| p.first().is_some_and(|&n| n != 0));
            }
            ReplyWriter::new(out, protocol).integer(unblocked as i64);
            false
        }
        ServerRequest::PubsubChannels { shard, pattern } => {
            let mut names = worker
                .engine
                .borrow_mut()
                .pubsub()
                .channel_names(shard, pattern.as_deref());
            let mut payload = vec![shard as u8];
            payload.extend_from_slice(pattern.as_deref().unwrap_or_default());
            for p in ask_peers(worker, bus::CHANNELS_REQUEST, &payload).await {
                names.extend(bus::decode_names(&p));
            }
            names.sort();
            names.dedup();
            let mut w = ReplyWriter::new(out, protocol);
            w.array_len(names.len());
            for n in &names {
                w.bulk(n);
            }
            false
        }
        ServerRequest::Gather(query) => {
            let mut answers = vec![worker.engine.borrow_mut().answer_gather(&query)];
            answers.extend(ask_peers(worker, bus::GATHER_REQUEST, &query).await);
            worker
                .engine
                .borrow_mut()
                .finish_gather(&query, &answers, protocol, out);
            false
        }
        ServerRequest::Wait {
            numreplicas,
            timeout_ms,
            offset,
        } => {
            let n = wait_replicas(worker, numreplicas, timeout_ms, offset).await;
            ReplyWriter::new(out, protocol).integer(n as i64);
            false
        }
        // Only a Redis TCP connection becomes a replication link (`serve`
        // ends with it); anywhere else the request closes the connection.
        ServerRequest::Replicate { .. } => true,
        ServerRequest::Shutdown => {
            match worker.store.supervisor_pid() {
                Ok(Some(pid)) => {
                    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
                    }
                }
                _ => {
                    let _ = worker.shutdown.send(true);
                }
            }
            true
        }
    }
}

/// Sends a request to every other live worker and returns their answers.
async fn ask_peers(worker: &Worker, kind: u32, payload: &[u8]) -> Vec<Vec<u8>> {
    let peers = worker.peers();
    worker
        .bus
        .gather(&worker.bus_handle, &peers, kind, payload)
        .await
}

/// The `flags=` field of a CLIENT LIST line.
fn line_flags(line: &str) -> &str {
    line.split(' ')
        .find_map(|f| f.strip_prefix("flags="))
        .unwrap_or("")
}

/// The id of a CLIENT LIST line (`id=N …`), for ordering.
fn client_id_of(line: &str) -> u64 {
    line.strip_prefix("id=")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}
