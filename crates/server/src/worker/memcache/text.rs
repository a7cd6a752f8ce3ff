//! memcached text-protocol connections (classic and meta commands): parse
//! every complete request in the buffer, run each through the engine's
//! memcached API (one borrow per batch, never across an `.await`), append
//! the replies to one output buffer and write it once per batch.
//!
//! A connection whose first byte is the binary magic (0x80) is handed to
//! [`binary::serve`](super::binary::serve), as memcached tells the protocol
//! by the first byte. A connection ends on `quit`, on a line memcached would
//! close on (see [`proto::memcache::text::Parsed::Close`]), when the client
//! hangs up, or when the worker drains.

use std::rc::Rc;

use crate::worker::transport::Transport;
use bytes::{Buf, BytesMut};
use engine::memcache::{McArith, McDeleted, McError, McItem, McStore, McStored, VERSION};
use engine::{Engine, Session};
use proto::memcache::meta::{self, Code, Meta, Num};
use proto::memcache::text::{
    write_line, write_stat, write_u64, write_value, Parsed, Parser, Request, StoreMode,
};
use store::WorkerCounter;
use tokio::io::AsyncWriteExt;

use super::IO_CHUNK;
use crate::worker::batch::{Ran, Runner};
use crate::worker::Worker;

/// Replies past this size are written before more requests of the buffer
/// run, so that a pipeline of large gets does not pile up in memory.
const REPLY_FLUSH: usize = 1 << 20;

/// The binary protocol's request magic byte.
const BINARY_MAGIC: u8 = 0x80;

/// What a connection does after working through its buffer.
enum Step {
    /// Write the replies, then read more.
    NeedInput,
    /// Write the replies, then go on with the buffer (the replies grew large).
    Flush,
    /// Write the replies, then close.
    Close,
}

/// A connection's own state besides its buffers.
struct Conn {
    parser: Parser,
    session: Session,
    /// Scratch for values read from the store.
    value: Vec<u8>,
}

/// Serves one accepted memcached TCP connection until it closes.
pub(crate) async fn run(worker: Rc<Worker>, mut stream: Transport) {
    let count = |delta| {
        let _ = worker
            .store
            .add_worker_counter(worker.slot, WorkerCounter::Connections, delta);
    };
    count(1);
    let _ = worker
        .store
        .add_worker_counter(worker.slot, WorkerCounter::TotalConnections, 1);
    let _ = serve(&worker, &mut stream).await;
    if *worker.shutdown.borrow() && worker.hands_over() {
        crate::worker::connection::close_drained(&mut stream).await;
    } else {
        let _ = stream.shutdown().await;
    }
    count(-1);
}

async fn serve(worker: &Rc<Worker>, stream: &mut Transport) -> std::io::Result<()> {
    let mut shutdown = worker.shutdown.subscribe();
    let mut buf = BytesMut::with_capacity(IO_CHUNK);
    while buf.is_empty() {
        if *shutdown.borrow() {
            return Ok(());
        }
        if !super::read_more(stream, &mut buf, &mut shutdown).await? {
            return Ok(());
        }
    }
    if buf[0] == BINARY_MAGIC {
        return super::binary::serve(worker, stream, buf).await;
    }
    let (now, item_size_max) = {
        let e = worker.engine.borrow();
        (e.now_ms(), e.mc_item_size_max())
    };
    let mut conn = Conn {
        parser: Parser::new(item_size_max),
        session: Session::new(0, now),
        value: Vec::new(),
    };
    let mut out: Vec<u8> = Vec::with_capacity(IO_CHUNK);
    let mut runner = Runner::new();
    loop {
        let Conn {
            parser,
            session,
            value,
        } = &mut conn;
        let step = runner.run(worker, session, |engine, session| {
            process(engine, session, parser, value, &mut buf, &mut out)
        });
        runner.reply(worker, stream, &mut out, IO_CHUNK).await?;
        match step {
            Step::Close => return Ok(()),
            Step::Flush => continue,
            Step::NeedInput => {}
        }
        if *shutdown.borrow() {
            return Ok(());
        }
        if buf.is_empty() && buf.capacity() > REPLY_FLUSH {
            // A large value passed through: do not keep its room per client.
            buf = BytesMut::with_capacity(IO_CHUNK);
        }
        if !super::read_more(stream, &mut buf, &mut shutdown).await? {
            return Ok(());
        }
    }
}

/// Runs every complete request in `buf` (synchronously: the engine stays
/// borrowed for the batch) and drops the bytes consumed.
fn process(
    engine: &mut Engine,
    session: &mut Session,
    parser: &mut Parser,
    value: &mut Vec<u8>,
    buf: &mut BytesMut,
    out: &mut Vec<u8>,
) -> Ran<Step> {
    // `item-size-max` may have changed (CONFIG SET on any worker).
    parser.set_item_size_max(engine.mc_item_size_max());
    let mut pos = 0;
    let mut executed = 0;
    let mut step = Step::NeedInput;
    loop {
        match parser.parse(&buf[pos..]) {
            Parsed::Incomplete => break,
            Parsed::Skipped(n) => pos += n,
            Parsed::Close => {
                step = Step::Close;
                break;
            }
            Parsed::Error {
                line,
                quiet,
                consumed,
            } => {
                if !quiet {
                    // memcached checks the login before it reads a line.
                    let line = if engine.mc_session_ok(session) {
                        line.as_bytes()
                    } else {
                        UNAUTHENTICATED
                    };
                    write_line(out, line);
                }
                pos += consumed;
            }
            Parsed::Request(request, consumed) => {
                pos += consumed;
                executed += 1;
                if !engine.mc_session_ok(session) {
                    login(engine, session, &request, out);
                    continue;
                }
                // The login's ACL user (the default user when no login is
                // required): its rules on writing and reading hold (as SET
                // and GET).
                let writes = matches!(
                    request,
                    Request::Store { .. }
                        | Request::Arith { .. }
                        | Request::Delete { .. }
                        | Request::Touch { .. }
                        | Request::FlushAll { .. }
                        | Request::MetaSet(..)
                        | Request::MetaDelete(..)
                        | Request::MetaArith(..)
                );
                if !engine.mc_permitted(&session.user, writes) {
                    write_line(out, b"CLIENT_ERROR permission denied");
                    continue;
                }
                if !execute(engine, value, request, out) {
                    step = Step::Close;
                    break;
                }
                if out.len() >= REPLY_FLUSH {
                    step = Step::Flush;
                    break;
                }
            }
        }
    }
    buf.advance(pos);
    Ran {
        next: step,
        executed,
    }
}

/// memcached's refusal of anything but a login from a client that has not
/// logged in.
const UNAUTHENTICATED: &[u8] = b"CLIENT_ERROR unauthenticated";

/// A request from a client that must log in first: as memcached 1.6 with
/// an auth file, only a `set` is read, its data being `user password`
/// (`noreply` does not silence the answer); anything else is refused.
fn login(engine: &mut Engine, session: &mut Session, request: &Request<'_>, out: &mut Vec<u8>) {
    let Request::Store {
        mode: StoreMode::Set,
        cas: None,
        data,
        ..
    } = request
    else {
        write_line(out, UNAUTHENTICATED);
        return;
    };
    let line: &[u8] = match engine::memcache_auth::text_token(data) {
        None => b"CLIENT_ERROR bad authentication token format",
        Some((user, pass)) if engine.mc_login(session, user, pass) => b"STORED",
        Some(_) => b"CLIENT_ERROR authentication failure",
    };
    write_line(out, line);
}

/// Runs one request and appends its reply. Returns false on `quit`.
pub(super) fn execute(
    engine: &mut Engine,
    value: &mut Vec<u8>,
    request: Request<'_>,
    out: &mut Vec<u8>,
) -> bool {
    match request {
        Request::Get { cas, touch, keys } => {
            let start = out.len();
            for key in keys {
                match engine.mc_get(key, touch, value) {
                    Ok(Some(item)) => {
                        write_value(out, key, item.flags, value, cas.then_some(item.cas))
                    }
                    Ok(None) => {}
                    Err(e) => {
                        // As memcached: the values already gathered are
                        // dropped and the error is the whole reply.
                        out.truncate(start);
                        write_line(out, e.line().as_bytes());
                        return true;
                    }
                }
            }
            out.extend_from_slice(b"END\r\n");
        }
        Request::Store {
            mode,
            key,
            flags,
            exptime,
            cas,
            data,
            noreply,
        } => {
            let stored = engine.mc_store(mc_store(mode), key, data, flags, exptime, cas);
            if !noreply {
                reply(out, stored.map(|s| stored_line(s).as_bytes()));
            }
        }
        Request::TooLarge {
            key,
            remove_old,
            noreply,
        } => {
            // The block was too large to read. The engine drops the old item
            // for a set (the parser says which refusals do that: set, and
            // ms in any mode, as memcached) and counts the attempt.
            let mode = match remove_old {
                true => McStore::Set,
                false => McStore::Add,
            };
            let error = engine.mc_refused(mode, &key);
            if !noreply {
                write_line(out, error.line().as_bytes());
            }
        }
        Request::Arith {
            incr,
            key,
            delta,
            noreply,
        } => {
            let r = engine.mc_arith(key, incr, delta, None, None, None);
            if !noreply {
                match r {
                    Ok(McArith::Value { value: n, .. }) => {
                        write_u64(out, n);
                        out.extend_from_slice(b"\r\n");
                    }
                    Ok(McArith::NotFound) => out.extend_from_slice(b"NOT_FOUND\r\n"),
                    Ok(McArith::Exists) => out.extend_from_slice(b"EXISTS\r\n"),
                    Err(e) => write_line(out, e.line().as_bytes()),
                }
            }
        }
        Request::Delete { key, noreply } => {
            let r = engine.mc_delete(key, None);
            if !noreply {
                reply(
                    out,
                    r.map(|d| match d {
                        McDeleted::Deleted => &b"DELETED"[..],
                        McDeleted::NotFound => b"NOT_FOUND",
                        McDeleted::Exists => b"EXISTS",
                    }),
                );
            }
        }
        Request::Touch {
            key,
            exptime,
            noreply,
        } => {
            let r = engine.mc_touch(key, exptime);
            if !noreply {
                reply(
                    out,
                    r.map(|t| match t {
                        Some(_) => &b"TOUCHED"[..],
                        None => b"NOT_FOUND",
                    }),
                );
            }
        }
        Request::FlushAll { delay, noreply } => {
            let r = engine.mc_flush_all(delay);
            if !noreply {
                reply(out, r.map(|()| &b"OK"[..]));
            }
        }
        Request::Verbosity { noreply } => {
            if !noreply {
                out.extend_from_slice(b"OK\r\n");
            }
        }
        Request::Version => {
            out.extend_from_slice(b"VERSION ");
            write_line(out, VERSION.as_bytes());
        }
        Request::Quit => return false,
        Request::Stats { group: b"reset" } => match engine.mc_stats_reset() {
            Ok(()) => out.extend_from_slice(b"RESET\r\n"),
            Err(e) => write_line(out, e.line().as_bytes()),
        },
        Request::Stats { group } => {
            let stats = std::str::from_utf8(group)
                .ok()
                .and_then(|g| engine.mc_stats(g));
            match stats {
                Some(pairs) => {
                    for (name, v) in pairs {
                        write_stat(out, name.as_bytes(), v.as_bytes());
                    }
                    out.extend_from_slice(b"END\r\n");
                }
                // memcached's answer to a group it does not have.
                None => out.extend_from_slice(b"ERROR\r\n"),
            }
        }
        Request::MetaNoop => out.extend_from_slice(b"MN\r\n"),
        Request::MetaDebug { key, base64 } => match engine.mc_peek(&key, None) {
            Ok(Some(item)) => {
                let now = engine.now_ms();
                let debug = meta::Debug {
                    exp: match item.expire_at_ms {
                        None => -1,
                        Some(_) => -ttl_s(item.expire_at_ms, now),
                    },
                    la: idle_s(&item, now),
                    cas: item.cas,
                    size: item.len,
                };
                meta::write_debug(out, &key, base64, debug);
            }
            Ok(None) => out.extend_from_slice(b"EN\r\n"),
            Err(e) => write_line(out, e.line().as_bytes()),
        },
        Request::MetaGet(m) => meta_get(engine, value, &m, out),
        Request::MetaSet(m, data) => meta_set(engine, &m, data, out),
        Request::MetaDelete(m) => {
            let code = match engine.mc_delete(&m.key, m.compare_cas) {
                Ok(McDeleted::Deleted) if m.quiet => return true,
                Ok(McDeleted::Deleted) => Code::Hd,
                Ok(McDeleted::NotFound) => Code::Nf,
                Ok(McDeleted::Exists) => Code::Ex,
                Err(e) => {
                    write_line(out, e.line().as_bytes());
                    return true;
                }
            };
            m.write_reply(out, code, |_| None);
        }
        Request::MetaArith(m) => meta_arith(engine, &m, out),
    }
    true
}

/// `mg`: the item's facts (and value with `v`) in the order the flags ask.
fn meta_get(engine: &mut Engine, value: &mut Vec<u8>, m: &Meta<'_>, out: &mut Vec<u8>) {
    let found = match m.value {
        true => engine.mc_get(&m.key, m.ttl, value),
        false => engine.mc_peek(&m.key, m.ttl),
    };
    let item = match found {
        Ok(Some(item)) => item,
        Ok(None) => {
            // `q` withholds a miss.
            if !m.quiet {
                m.write_reply(out, Code::En, |_| None);
            }
            return;
        }
        Err(e) => return write_line(out, e.line().as_bytes()),
    };
    let now = engine.now_ms();
    let code = match m.value {
        true => Code::Va(value.len() as u64),
        false => Code::Hd,
    };
    m.write_reply(out, code, |f| match f {
        b's' => Some(Num::U(item.len)),
        b't' => Some(Num::I(ttl_s(item.expire_at_ms, now))),
        b'c' => Some(Num::U(item.cas)),
        b'f' => Some(Num::U(u64::from(item.flags))),
        b'l' => Some(Num::U(idle_s(&item, now))),
        _ => None,
    });
    if m.value {
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
}

/// `ms`: store in the mode `M` says; `c` returns the new CAS value (0 when
/// nothing was stored, as memcached returns).
fn meta_set(engine: &mut Engine, m: &Meta<'_>, data: &[u8], out: &mut Vec<u8>) {
    let mode = m.store_mode();
    // memcached's add ignores a compare value (it fails on any item).
    let cas = match mode {
        StoreMode::Add => None,
        _ => m.compare_cas,
    };
    let ttl = m.ttl.unwrap_or(0);
    let stored = engine.mc_store(mc_store(mode), &m.key, data, m.client_flags, ttl, cas);
    let (code, cas) = match stored {
        Ok(McStored::Stored { .. }) if m.quiet => return,
        Ok(McStored::Stored { cas }) => (Code::Hd, cas),
        Ok(McStored::NotStored) => (Code::Ns, 0),
        Ok(McStored::Exists) => (Code::Ex, 0),
        // memcached's append and prepend find nothing to add to, CAS or
        // not: NS (the engine's NotFound says a CAS was given).
        Ok(McStored::NotFound) if matches!(mode, StoreMode::Append | StoreMode::Prepend) => {
            (Code::Ns, 0)
        }
        Ok(McStored::NotFound) => (Code::Nf, 0),
        Err(e) => return write_line(out, e.line().as_bytes()),
    };
    m.write_reply(out, code, |f| (f == b'c').then_some(Num::U(cas)));
}

/// `ma`: incr/decr with the meta options (`N`/`J` create, `T` sets the TTL,
/// `C` compares); `v` returns the number, `t` the TTL after the change.
fn meta_arith(engine: &mut Engine, m: &Meta<'_>, out: &mut Vec<u8>) {
    let vivify = m.vivify.map(|exptime| (m.initial, exptime));
    let r = engine.mc_arith(&m.key, m.incr(), m.delta, m.compare_cas, vivify, m.ttl);
    let (n, cas, expire_at_ms) = match r {
        Ok(McArith::Value {
            value,
            cas,
            expire_at_ms,
        }) => (value, cas, expire_at_ms),
        Ok(McArith::NotFound) => return m.write_reply(out, Code::Nf, |_| None),
        Ok(McArith::Exists) => return m.write_reply(out, Code::Ex, |_| None),
        Err(e) => return write_line(out, e.line().as_bytes()),
    };
    if m.quiet {
        return;
    }
    let ttl = ttl_s(expire_at_ms, engine.now_ms());
    let mut digits = Vec::with_capacity(20);
    write_u64(&mut digits, n);
    let code = match m.value {
        true => Code::Va(digits.len() as u64),
        false => Code::Hd,
    };
    m.write_reply(out, code, |f| match f {
        b'c' => Some(Num::U(cas)),
        b't' => Some(Num::I(ttl)),
        _ => None,
    });
    if m.value {
        out.extend_from_slice(&digits);
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends `line` (or the error's line).
fn reply(out: &mut Vec<u8>, r: Result<&[u8], McError>) {
    match r {
        Ok(line) => write_line(out, line),
        Err(e) => write_line(out, e.line().as_bytes()),
    }
}

fn stored_line(s: McStored) -> &'static str {
    match s {
        McStored::Stored { .. } => "STORED",
        McStored::NotStored => "NOT_STORED",
        McStored::Exists => "EXISTS",
        McStored::NotFound => "NOT_FOUND",
    }
}

fn mc_store(mode: StoreMode) -> McStore {
    match mode {
        StoreMode::Set => McStore::Set,
        StoreMode::Add => McStore::Add,
        StoreMode::Replace => McStore::Replace,
        StoreMode::Append => McStore::Append,
        StoreMode::Prepend => McStore::Prepend,
    }
}

/// Whole seconds the item has left (rounded up, so a fresh `T10` reads 10,
/// as memcached's second clock shows it); -1 without an expiry.
fn ttl_s(expire_at_ms: Option<u64>, now_ms: u64) -> i64 {
    match expire_at_ms {
        None => -1,
        Some(at) => at.saturating_sub(now_ms).div_ceil(1000) as i64,
    }
}

/// Seconds since the item's last access.
fn idle_s(item: &McItem, now_ms: u64) -> u64 {
    (now_ms / 1000).saturating_sub(u64::from(item.last_access_s))
}
