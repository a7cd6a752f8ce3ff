//! Server-Sent Events: `GET /sub/<channel>` and `GET /psub/<pattern>`. The
//! subscription is a real subscriber on this worker: the ordinary RESP
//! connection loop (`connection::run`) runs SUBSCRIBE or PSUBSCRIBE on the
//! far end of an in-process pipe, as for a WebSocket, so PUBLISH counts it,
//! PUBSUB NUMSUB and CLIENT LIST show it, CLIENT KILL ends it and
//! `client-output-buffer-limit pubsub` closes it when its client does not
//! read. This side turns the messages into events:
//!
//! * `/sub/<channel>`: `event: message` with the payload as its data;
//! * `/psub/<pattern>`: `event: message` with the JSON array
//!   `[channel, payload]` as its data (the channel is not known otherwise).
//!
//! The response head goes out once the subscription is confirmed, so a
//! message published after a client saw the head reaches it. A comment
//! line goes out after [`HEARTBEAT`] without an event, so that proxies keep
//! the stream and a client that went away is noticed. The stream ends when
//! the client closes (the subscriber goes with it), or when the RESP side
//! ends (CLIENT KILL, the output limit, the worker draining).

use std::rc::Rc;
use std::time::Duration;

use crate::worker::transport::Transport;
use bytes::{Buf, BytesMut};
use proto::http::{write_sse_event, Connection, Response};
use proto::json::{parse_reply, write_string, Reply, ReplyScanner};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::conn::date_now;
use crate::worker::connection;
use crate::worker::Worker;

/// A comment line goes out after this long without an event.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(15);

/// The comment line.
const HEARTBEAT_LINE: &[u8] = b": heartbeat\n\n";

/// Bytes the pipe to the RESP loop buffers each way.
const PIPE_BYTES: usize = 64 * 1024;

/// Past this many bytes of events not yet taken by the client, the pipe is
/// not read: the RESP side's output grows instead, where the pubsub output
/// limit watches it.
const MAX_PENDING: usize = 64 * 1024;

/// How long the last events may take to go out once the RESP side ended.
const FINAL_FLUSH: Duration = Duration::from_secs(2);

/// Response fields besides the content type.
pub(crate) const EXTRA: &[(&str, &[u8])] = &[("Cache-Control", b"no-cache")];

/// What a stream subscribes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `/sub/<channel>`: SUBSCRIBE.
    Channel,
    /// `/psub/<pattern>`: PSUBSCRIBE.
    Pattern,
}

/// The stream a key names (`sub/<channel>`, `psub/<pattern>`), with the
/// channel or pattern.
pub(crate) fn route(key: &[u8]) -> Option<(Kind, &[u8])> {
    if let Some(name) = key.strip_prefix(b"sub/") {
        Some((Kind::Channel, name))
    } else {
        key.strip_prefix(b"psub/").map(|name| (Kind::Pattern, name))
    }
}

/// Appends the head of an event stream (also HEAD's answer).
pub(crate) fn write_head(out: &mut Vec<u8>, date: &[u8], connection: Connection) {
    Response {
        status: 200,
        date,
        content_type: Some("text/event-stream"),
        content_length: None,
        connection,
        extra: EXTRA,
    }
    .write(out);
}

/// Serves one event stream on a connection whose request asked for it,
/// until either side ends.
pub(crate) async fn serve(
    worker: Rc<Worker>,
    mut stream: Transport,
    kind: Kind,
    name: Vec<u8>,
    peer: (String, String, i32),
) {
    let (mut pipe, theirs) = tokio::io::duplex(PIPE_BYTES);
    let mut resp_side = tokio::task::spawn_local(connection::run(worker, theirs, peer, None));
    let command: &[u8] = match kind {
        Kind::Channel => b"SUBSCRIBE",
        Kind::Pattern => b"PSUBSCRIBE",
    };
    let mut request = Vec::new();
    let mut w = proto::resp::ReplyWriter::new(&mut request, proto::resp::Protocol::Resp2);
    w.array_len(2);
    w.bulk(command);
    w.bulk(&name);
    if pipe.write_all(&request).await.is_err() {
        return;
    }
    let mut replies = BytesMut::with_capacity(16 * 1024);
    let mut scanner = ReplyScanner::new();
    let mut out = Vec::new();
    let date = date_now();
    // The first reply: the confirmation, or why there is none.
    loop {
        match scanner.scan(&replies) {
            Ok(Some(end)) => {
                match parse_reply(&replies[..end]) {
                    Ok(Some((Reply::Error(text), _))) => refuse(&mut out, &date, text),
                    Ok(Some((Reply::Array(items), _))) if confirms(&items, command) => {
                        write_head(&mut out, &date, Connection::Close);
                    }
                    _ => refuse(&mut out, &date, b"ERR unexpected reply"),
                }
                replies.advance(end);
                break;
            }
            Ok(None) => {}
            Err(_) => return,
        }
        replies.reserve(16 * 1024);
        match pipe.read_buf(&mut replies).await {
            Ok(n) if n > 0 => {}
            _ => {
                refuse(&mut out, &date, b"ERR the subscriber closed");
                break;
            }
        }
    }
    let subscribed = out.starts_with(b"HTTP/1.1 200");
    if stream.write_all(&out).await.is_err() || !subscribed {
        let _ = stream.shutdown().await;
        return;
    }
    let mut pending = BytesMut::new();
    // Messages that came with the confirmation.
    if events(kind, &mut replies, &mut scanner, &mut pending).is_err() {
        return;
    }
    let (mut sock_r, mut sock_w) = tokio::io::split(&mut stream);
    let mut scratch = vec![0u8; 4096];
    let mut last_output = Instant::now();
    let heartbeat = tokio::time::sleep(HEARTBEAT);
    tokio::pin!(heartbeat);
    let resp_ended = loop {
        replies.reserve(16 * 1024);
        tokio::select! {
            // Ended (killed, cut off by the output limit, drained) even
            // while its pipe is not read because the client is slow.
            _ = &mut resp_side => break true,
            // The client sends nothing more; what it does send is dropped.
            n = sock_r.read(&mut scratch) => {
                if !matches!(n, Ok(n) if n > 0) {
                    break false;
                }
            }
            n = pipe.read_buf(&mut replies), if pending.len() < MAX_PENDING => {
                if !matches!(n, Ok(n) if n > 0) {
                    break true;
                }
                if events(kind, &mut replies, &mut scanner, &mut pending).is_err() {
                    break true;
                }
            }
            n = sock_w.write(&pending), if !pending.is_empty() => match n {
                Ok(n) if n > 0 => {
                    pending.advance(n);
                    last_output = Instant::now();
                }
                _ => break false,
            },
            _ = &mut heartbeat => {
                let now = Instant::now();
                if pending.is_empty() && now >= last_output + HEARTBEAT {
                    pending.extend_from_slice(HEARTBEAT_LINE);
                    last_output = now;
                }
                // One timer, re-armed when it fires: writes only note
                // their time.
                let due = last_output + HEARTBEAT;
                heartbeat.as_mut().reset(if due > now { due } else { now + HEARTBEAT });
            }
        }
    };
    if resp_ended {
        // What the RESP side wrote before it ended still goes out (its end
        // of the pipe is closed, so this reads at most the pipe's buffer).
        while matches!(pipe.read_buf(&mut replies).await, Ok(n) if n > 0) {
            replies.reserve(16 * 1024);
        }
        let _ = events(kind, &mut replies, &mut scanner, &mut pending);
        let _ = tokio::time::timeout(FINAL_FLUSH, sock_w.write_all(&pending)).await;
    }
    drop(pipe);
    let _ = stream.shutdown().await;
}

/// Whether a reply confirms the subscription `command` asked for.
fn confirms(items: &[Reply<'_>], command: &[u8]) -> bool {
    matches!(items.first(), Some(Reply::Bulk(kind)) if kind.eq_ignore_ascii_case(command))
}

/// Turns the whole frames in `replies` into events (and drops their
/// bytes). Fails only if the RESP side sent bytes that are not RESP.
fn events(
    kind: Kind,
    replies: &mut BytesMut,
    scanner: &mut ReplyScanner,
    out: &mut BytesMut,
) -> Result<(), proto::json::ReplyError> {
    let mut event = Vec::new();
    while let Some(end) = scanner.scan(replies)? {
        if let Some((frame, _)) = parse_reply(&replies[..end])? {
            event.clear();
            encode(kind, &frame, &mut event);
            out.extend_from_slice(&event);
        }
        replies.advance(end);
    }
    Ok(())
}

/// The event for a message frame (nothing for another frame, such as a
/// confirmation).
fn encode(kind: Kind, frame: &Reply<'_>, out: &mut Vec<u8>) {
    let Reply::Array(items) = frame else {
        return;
    };
    match (kind, items.as_slice()) {
        (Kind::Channel, [Reply::Bulk(b"message"), _, Reply::Bulk(payload)]) => {
            write_sse_event(out, "message", payload);
        }
        (
            Kind::Pattern,
            [Reply::Bulk(b"pmessage"), _, Reply::Bulk(channel), Reply::Bulk(payload)],
        ) => {
            let mut json = Vec::with_capacity(channel.len() + payload.len() + 8);
            json.push(b'[');
            write_string(channel, &mut json);
            json.push(b',');
            write_string(payload, &mut json);
            json.push(b']');
            write_sse_event(out, "message", &json);
        }
        _ => {}
    }
}

/// The answer when the subscription failed: 503 when the server is full,
/// 500 otherwise, with the error's text.
fn refuse(out: &mut Vec<u8>, date: &[u8], error: &[u8]) {
    let status = if error.starts_with(b"ERR max number of clients") {
        503
    } else {
        500
    };
    let mut text = error.to_vec();
    text.push(b'\n');
    Response {
        status,
        date,
        content_type: Some("text/plain"),
        content_length: Some(text.len() as u64),
        connection: Connection::Close,
        extra: &[],
    }
    .write(out);
    out.extend_from_slice(&text);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: Kind, resp: &[u8]) -> String {
        let (frame, _) = parse_reply(resp).unwrap().unwrap();
        let mut out = Vec::new();
        encode(kind, &frame, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn routes() {
        assert_eq!(route(b"sub/md.x"), Some((Kind::Channel, &b"md.x"[..])));
        assert_eq!(route(b"psub/md.*"), Some((Kind::Pattern, &b"md.*"[..])));
        assert_eq!(route(b"sub/a/b"), Some((Kind::Channel, &b"a/b"[..])));
        assert_eq!(route(b"subx"), None);
        assert_eq!(route(b"index.html"), None);
    }

    #[test]
    fn messages_become_events() {
        assert_eq!(
            event(
                Kind::Channel,
                b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\na\nb\xffc\r\n"
            ),
            "event: message\ndata: a\ndata: b\u{fffd}c\n\n"
        );
        assert_eq!(
            event(
                Kind::Pattern,
                b"*4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$3\r\na\nb\r\n"
            ),
            "event: message\ndata: [\"ch\",\"a\\nb\"]\n\n"
        );
        assert_eq!(
            event(
                Kind::Channel,
                b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
            ),
            ""
        );
    }
}
