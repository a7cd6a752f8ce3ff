//! memcached binary-protocol connections, and the executor UDP shares: parse
//! every complete request in the buffer, execute them through the engine's
//! memcached API (one borrow per batch, never across an `.await`), write
//! all replies with one write.
//!
//! Replies follow memcached 1.6's `proto_bin.c`: the response echoes the
//! request's opcode and opaque; quiet variants answer only errors (and the
//! quiet gets say nothing on a miss); a header memcached refuses is answered
//! (or not) and the connection closed; a value over `item-size-max` is
//! answered "Too large." and discarded as it arrives, never buffered.

use std::rc::Rc;

use crate::worker::transport::Transport;
use bytes::{Buf, BytesMut};
use engine::memcache::{McArith, McDeleted, McError, McStore, McStored, VERSION};
use engine::{Engine, Session};
use proto::memcache::binary::{
    self, write_error, write_response, Command, Frame, Request, Status, StoreMode,
};

use super::IO_CHUNK;
use crate::worker::batch::{Ran, Runner};
use crate::worker::Worker;

/// Replies past this size are written before more requests of the buffer
/// run, so that a pipeline of large gets does not pile up in memory.
const REPLY_FLUSH: usize = 1 << 20;

/// Serves a binary-protocol connection whose first bytes are already in `buf`
/// (the text side saw the 0x80 magic byte and handed it over).
pub(crate) async fn serve(
    worker: &Rc<Worker>,
    stream: &mut Transport,
    buf: BytesMut,
) -> std::io::Result<()> {
    let mut buf = buf;
    let mut out = Vec::with_capacity(IO_CHUNK);
    let mut value = Vec::new();
    // Bytes of a refused request's body still to discard.
    let mut skip: u64 = 0;
    let mut session = Session::new(0, worker.engine.borrow().now_ms());
    let mut shutdown = worker.shutdown.subscribe();
    let mut runner = Runner::new();
    loop {
        let dropped = skip.min(buf.len() as u64);
        buf.advance(dropped as usize);
        skip -= dropped;
        let mut batch = Batch::default();
        if skip == 0 {
            batch = runner.run(worker, &mut session, |engine, session| {
                let batch = process(engine, session, &buf, &mut out, &mut value, REPLY_FLUSH);
                Ran {
                    executed: batch.executed,
                    next: batch,
                }
            });
            buf.advance(batch.consumed);
            skip = batch.skip;
        }
        runner.reply(worker, stream, &mut out, IO_CHUNK).await?;
        if batch.close || *shutdown.borrow() {
            return Ok(());
        }
        if batch.more {
            continue;
        }
        if !super::read_more(stream, &mut buf, &mut shutdown).await? {
            return Ok(());
        }
    }
}

/// What working through a buffer of requests did.
#[derive(Debug, Default)]
pub(super) struct Batch {
    /// Bytes of the buffer used up.
    pub consumed: usize,
    /// Bytes past those to discard as they arrive.
    pub skip: u64,
    /// Requests executed.
    pub executed: u64,
    /// The connection is to close once the replies are written.
    pub close: bool,
    /// Stopped at the reply limit: more complete requests may wait.
    pub more: bool,
}

/// Executes the binary requests at the front of `buf`, replies into `out`,
/// until one is incomplete, the connection must close, or `out` holds
/// `reply_limit` bytes. `value` is scratch space for item values.
pub(super) fn process(
    engine: &mut Engine,
    session: &mut Session,
    buf: &[u8],
    out: &mut Vec<u8>,
    value: &mut Vec<u8>,
    reply_limit: usize,
) -> Batch {
    let max_value = engine.mc_item_size_max();
    let mut batch = Batch::default();
    loop {
        if out.len() >= reply_limit {
            batch.more = true;
            return batch;
        }
        let rest = &buf[batch.consumed..];
        let parsed = match binary::parse(rest, max_value) {
            Ok(Some(p)) => p,
            Ok(None) => return batch,
            Err(e) => {
                if let Some((header, status)) = e.reply() {
                    write_error(out, &header, status);
                }
                batch.close = true;
                return batch;
            }
        };
        batch.executed += 1;
        let close = match parsed.frame {
            Frame::Request(request) => execute(engine, session, &request, out, value),
            Frame::TooLarge { header, key } => {
                let mode = match header.opcode {
                    binary::opcode::SET | binary::opcode::SETQ => McStore::Set,
                    // Only whether it is a set matters: a set drops the old item.
                    _ => McStore::Replace,
                };
                let status = status_of(&engine.mc_refused(mode, key));
                write_error(out, &header, status);
                false
            }
            Frame::Unknown { header } => {
                write_error(out, &header, Status::UnknownCommand);
                false
            }
        };
        batch.consumed += parsed.consumed;
        if parsed.skip > 0 {
            let available = (buf.len() - batch.consumed) as u64;
            let now = parsed.skip.min(available);
            batch.consumed += now as usize;
            batch.skip = parsed.skip - now;
        }
        if close {
            batch.close = true;
            return batch;
        }
        if batch.skip > 0 {
            return batch;
        }
    }
}

/// SASL_LIST_MECHS and SASL_AUTH / SASL_STEP: PLAIN against the auth file
/// or the ACL users. Without a login required they are unknown commands,
/// as in a memcached built without SASL.
fn sasl(engine: &mut Engine, session: &mut Session, request: &Request<'_>, out: &mut Vec<u8>) {
    let h = &request.header;
    if !engine.mc_auth_required() {
        write_error(out, h, Status::UnknownCommand);
        return;
    }
    match request.command {
        Command::SaslListMechs => {
            write_response(out, h, Status::Success, 0, &[], &[], b"PLAIN");
        }
        Command::SaslAuth {
            step: false,
            mechanism: b"PLAIN",
            data,
        } => {
            let logged_in = engine::memcache_auth::plain_token(data)
                .is_some_and(|(user, pass)| engine.mc_login(session, user, pass));
            if logged_in {
                write_response(out, h, Status::Success, 0, &[], &[], b"Authenticated");
            } else {
                write_error(out, h, Status::AuthError);
            }
        }
        // Another mechanism, or a step PLAIN never needs.
        _ => write_error(out, h, Status::AuthError),
    }
}

/// Executes one request and writes its reply (unless a quiet variant
/// succeeded). Returns whether the connection is to close (QUIT).
fn execute(
    engine: &mut Engine,
    session: &mut Session,
    request: &Request<'_>,
    out: &mut Vec<u8>,
    value: &mut Vec<u8>,
) -> bool {
    let h = &request.header;
    let login = matches!(
        request.command,
        Command::SaslListMechs | Command::SaslAuth { .. }
    );
    if login {
        sasl(engine, session, request, out);
        return false;
    }
    // As memcached with SASL: before a login only VERSION (and SASL) run;
    // anything else is "Auth failure" and the connection goes on.
    if !engine.mc_session_ok(session) && request.command != Command::Version {
        write_error(out, h, Status::AuthError);
        return false;
    }
    let writes = matches!(
        request.command,
        Command::Store { .. }
            | Command::Delete { .. }
            | Command::Arith { .. }
            | Command::Flush { .. }
            | Command::Touch { .. }
    );
    let reads = matches!(request.command, Command::Get { .. });
    if (writes || reads) && !engine.mc_permitted(&session.user, writes) {
        // The login's ACL user may not (its rules on SET and GET).
        write_error(out, h, Status::AuthError);
        return false;
    }
    let quiet = h.is_quiet();
    let cas = (h.cas != 0).then_some(h.cas);
    let ok = |out: &mut Vec<u8>, cas: u64, body: &[u8]| {
        if !quiet {
            write_response(out, h, Status::Success, cas, &[], &[], body);
        }
    };
    match request.command {
        Command::Get {
            key,
            with_key,
            touch,
        } => match engine.mc_get(key, touch.map(i64::from), value) {
            Ok(Some(item)) => {
                let key = if with_key { key } else { &[] };
                write_response(
                    out,
                    h,
                    Status::Success,
                    item.cas,
                    &item.flags.to_be_bytes(),
                    key,
                    value,
                );
            }
            // GETK's miss carries the key and no text.
            Ok(None) if with_key && !quiet => {
                write_response(out, h, Status::KeyNotFound, 0, &[], key, &[])
            }
            Ok(None) if !quiet => write_error(out, h, Status::KeyNotFound),
            Ok(None) => {}
            Err(e) => write_error(out, h, status_of(&e)),
        },
        Command::Touch { key, exptime } => match engine.mc_touch(key, i64::from(exptime)) {
            // TOUCH answers with the flags and no value.
            Ok(Some(item)) => write_response(
                out,
                h,
                Status::Success,
                item.cas,
                &item.flags.to_be_bytes(),
                &[],
                &[],
            ),
            Ok(None) => write_error(out, h, Status::KeyNotFound),
            Err(e) => write_error(out, h, status_of(&e)),
        },
        Command::Store {
            mode,
            key,
            value,
            flags,
            exptime,
        } => {
            let engine_mode = match (mode, cas) {
                // A CAS turns SET, ADD and REPLACE into memcached's cas.
                (StoreMode::Set | StoreMode::Add | StoreMode::Replace, Some(_)) => McStore::Set,
                (StoreMode::Set, None) => McStore::Set,
                (StoreMode::Add, None) => McStore::Add,
                (StoreMode::Replace, None) => McStore::Replace,
                (StoreMode::Append, _) => McStore::Append,
                (StoreMode::Prepend, _) => McStore::Prepend,
            };
            let concat = matches!(mode, StoreMode::Append | StoreMode::Prepend);
            match engine.mc_store(engine_mode, key, value, flags, i64::from(exptime), cas) {
                Ok(McStored::Stored { cas }) => ok(out, cas, &[]),
                Ok(McStored::NotStored) => {
                    let status = match engine_mode {
                        McStore::Add => Status::KeyExists,
                        McStore::Replace => Status::KeyNotFound,
                        _ => Status::NotStored,
                    };
                    write_error(out, h, status);
                }
                Ok(McStored::Exists) => write_error(out, h, Status::KeyExists),
                // append/prepend need an item: its absence is "Not stored."
                // even with a CAS, as in memcached.
                Ok(McStored::NotFound) if concat => write_error(out, h, Status::NotStored),
                Ok(McStored::NotFound) => write_error(out, h, Status::KeyNotFound),
                // A value over the limit never gets here (the parser refuses
                // it): this is an item that would grow past it, which
                // memcached answers "Not stored.".
                Err(McError::TooLarge) if concat => write_error(out, h, Status::NotStored),
                Err(e) => write_error(out, h, status_of(&e)),
            }
        }
        Command::Delete { key } => match engine.mc_delete(key, cas) {
            Ok(McDeleted::Deleted) => ok(out, 0, &[]),
            Ok(McDeleted::NotFound) => write_error(out, h, Status::KeyNotFound),
            Ok(McDeleted::Exists) => write_error(out, h, Status::KeyExists),
            Err(e) => write_error(out, h, status_of(&e)),
        },
        Command::Arith {
            incr,
            key,
            delta,
            initial,
            exptime,
        } => {
            // An exptime of all ones means "do not create".
            let vivify = (exptime != u32::MAX).then_some((initial, i64::from(exptime)));
            match engine.mc_arith(key, incr, delta, cas, vivify, None) {
                Ok(McArith::Value { value, cas, .. }) => ok(out, cas, &value.to_be_bytes()),
                Ok(McArith::NotFound) => write_error(out, h, Status::KeyNotFound),
                Ok(McArith::Exists) => write_error(out, h, Status::KeyExists),
                Err(e) => write_error(out, h, status_of(&e)),
            }
        }
        Command::Quit => {
            ok(out, 0, &[]);
            return true;
        }
        Command::Flush { delay } => match engine.mc_flush_all(i64::from(delay)) {
            Ok(()) => ok(out, 0, &[]),
            Err(e) => write_error(out, h, status_of(&e)),
        },
        Command::Noop | Command::Verbosity { .. } => ok(out, 0, &[]),
        Command::Version => ok(out, 0, VERSION.as_bytes()),
        // memcached answers a reset with the empty packet that ends a list.
        Command::Stat { group: b"reset" } => match engine.mc_stats_reset() {
            Ok(()) => write_response(out, h, Status::Success, 0, &[], &[], &[]),
            Err(e) => write_error(out, h, status_of(&e)),
        },
        Command::Stat { group } => {
            let stats = std::str::from_utf8(group)
                .ok()
                .and_then(|g| engine.mc_stats(g));
            match stats {
                Some(pairs) => {
                    for (name, v) in pairs {
                        write_response(
                            out,
                            h,
                            Status::Success,
                            0,
                            &[],
                            name.as_bytes(),
                            v.as_bytes(),
                        );
                    }
                    // An empty packet ends the list.
                    write_response(out, h, Status::Success, 0, &[], &[], &[]);
                }
                None => write_error(out, h, Status::KeyNotFound),
            }
        }
        // Answered by `sasl` above.
        Command::SaslListMechs | Command::SaslAuth { .. } => {}
    }
    false
}

/// The binary status for an engine failure.
fn status_of(e: &McError) -> Status {
    match e {
        McError::TooLarge => Status::TooLarge,
        McError::OutOfMemory => Status::OutOfMemory,
        McError::NonNumeric => Status::NonNumeric,
        McError::Failed(_) => Status::InternalError,
    }
}
