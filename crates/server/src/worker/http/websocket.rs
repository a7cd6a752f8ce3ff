//! An upgraded WebSocket connection. Every sub-protocol runs the ordinary
//! RESP connection loop (`connection::run`) on the far end of an in-process
//! pipe, so blocking commands, MULTI, HELLO, CLIENT KILL and the limits
//! behave exactly as over TCP; this side only translates:
//!
//! * `resp` (the default when the client asks for no sub-protocol): binary
//!   or text frames carry RESP bytes in, binary frames carry the replies out
//!   (RESP is a stream: frame boundaries mean nothing).
//! * `json`: each message is a command as a JSON array of strings; each
//!   reply comes back as one JSON text message (see `proto::json` for the
//!   mapping). A message that is not such an array is answered with
//!   `{"error": …}` in its turn, after the replies of the commands before it.
//!   Pub/sub messages pushed between replies come as `{"push": [...]}`.
//! * `term`: messages are keystrokes; the server echoes and edits the line
//!   (see `term`), runs it on Enter and prints the reply as redis-cli does,
//!   then the prompt. Pushed messages print as they come, above the prompt
//!   and the line being typed.
//!
//! `json` and `term` count replies against the commands they sent (to place
//! refusals and prompts); [`PushTracker`] keeps pushed frames out of that
//! count.
//!
//! Messages are limited to [`MAX_MESSAGE`] bytes (close 1009 past it).
//! Closing: a client's close frame is echoed; when the RESP side ends (QUIT,
//! CLIENT KILL, shutdown) the server sends 1000 (1001 when the worker
//! drains) and waits up to two seconds for the client's close frame.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use crate::worker::transport::Transport;
use bytes::{Buf, BytesMut};
use proto::json::{command_from_json, parse_reply, write_json, write_push, ReplyScanner};
use proto::resp::{Protocol, ReplyWriter, RequestParser};
use proto::websocket::{write_close, write_frame, Message, MessageDecoder, Opcode};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::Notify;

use super::push::PushTracker;
use super::term::{self, LineEditor};
use crate::worker::connection;
use crate::worker::Worker;

/// The largest message accepted (close 1009 past it).
pub(crate) const MAX_MESSAGE: u64 = 16 << 20;

/// Bytes the pipe to the RESP loop buffers each way.
const PIPE_BYTES: usize = 64 * 1024;

/// How long the server waits for the client's close frame after sending its
/// own.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// A WebSocket sub-protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sub {
    Resp,
    Json,
    Term,
}

impl Sub {
    /// The names a client may ask for, in `Sec-WebSocket-Protocol`.
    pub(crate) const NAMES: [&'static str; 3] = ["resp", "json", "term"];

    /// The sub-protocol of a name from [`Sub::NAMES`].
    pub(crate) fn from_name(name: &str) -> Sub {
        match name {
            "json" => Sub::Json,
            "term" => Sub::Term,
            _ => Sub::Resp,
        }
    }
}

/// What the reading half asks the writing half to send.
enum Out {
    /// Encoded frames.
    Frames(Vec<u8>),
    /// A close frame; then the writing half stops.
    Close(u16, &'static str),
}

/// What both halves share (one task, so a `RefCell`, never held across an
/// `.await`).
struct Shared {
    sub: Sub,
    /// Commands sent to the RESP side, and replies that came back (never
    /// more than were sent: a command may have several, as SUBSCRIBE with
    /// several channels has).
    sent: u64,
    answered: u64,
    /// Which frames are pushed rather than replies.
    pushes: PushTracker,
    /// `json` answers of our own (refused messages) waiting for the replies
    /// to the commands sent before them: (commands sent then, frame).
    deferred: VecDeque<(u64, Vec<u8>)>,
    editor: LineEditor,
}

/// Speaks WebSocket on an upgraded connection until either side closes.
/// `leftover` holds bytes the client sent right after its handshake.
pub(crate) async fn serve(
    worker: Rc<Worker>,
    mut stream: Transport,
    sub: Sub,
    leftover: BytesMut,
    peer: (String, String, i32),
) {
    let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
    tokio::task::spawn_local(connection::run(worker.clone(), theirs, peer, None));
    let (mut pipe_r, mut pipe_w) = tokio::io::split(ours);
    let shared = RefCell::new(Shared {
        sub,
        sent: 0,
        answered: 0,
        pushes: PushTracker::default(),
        deferred: VecDeque::new(),
        editor: LineEditor::new(),
    });
    let (tx, rx) = unbounded_channel();
    if sub == Sub::Term {
        let _ = tx.send(Out::Frames(text_frame(term::PROMPT)));
    }
    let closing = Notify::new();
    {
        let (mut sock_r, mut sock_w) = tokio::io::split(&mut stream);
        let inbound = async {
            inbound(&mut sock_r, leftover, &mut pipe_w, &tx, &shared, &closing).await;
            // The RESP side sees the end of its input and finishes.
            let _ = pipe_w.shutdown().await;
        };
        let outbound = outbound(&worker, &mut sock_w, &mut pipe_r, rx, &shared, &closing);
        tokio::join!(inbound, outbound);
    }
    let _ = stream.shutdown().await;
}

fn text_frame(text: &str) -> Vec<u8> {
    let mut f = Vec::with_capacity(text.len() + 10);
    write_frame(&mut f, true, Opcode::Text, text.as_bytes(), None);
    f
}

/// Reads the client's frames and passes their messages on, until the client
/// closes or breaks the protocol, or the server's close was answered (or
/// not, in time).
async fn inbound(
    sock: &mut tokio::io::ReadHalf<&mut Transport>,
    mut buf: BytesMut,
    pipe: &mut WriteHalf<DuplexStream>,
    tx: &UnboundedSender<Out>,
    shared: &RefCell<Shared>,
    closing: &Notify,
) {
    let mut decoder = MessageDecoder::new(MAX_MESSAGE);
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        loop {
            let message = match decoder.decode(&buf) {
                Ok((message, used)) => {
                    buf.advance(used);
                    match message {
                        Some(m) => m,
                        None => break,
                    }
                }
                Err(e) => {
                    let _ = tx.send(Out::Close(e.close_code(), e.reason()));
                    return;
                }
            };
            match message {
                Message::Text(data) | Message::Binary(data) => {
                    if deadline.is_some() {
                        // Closing: the RESP side is gone.
                        continue;
                    }
                    if deliver(data, pipe, tx, shared).await.is_err() {
                        return;
                    }
                }
                Message::Ping(payload) => {
                    let mut f = Vec::with_capacity(payload.len() + 2);
                    write_frame(&mut f, true, Opcode::Pong, &payload, None);
                    let _ = tx.send(Out::Frames(f));
                }
                Message::Pong(_) => {}
                Message::Close(status) => {
                    let code = status.map_or(1000, |(code, _)| code);
                    let _ = tx.send(Out::Close(code, ""));
                    return;
                }
            }
        }
        buf.reserve(16 * 1024);
        tokio::select! {
            n = sock.read_buf(&mut buf) => {
                if !matches!(n, Ok(n) if n > 0) {
                    return;
                }
            }
            _ = closing.notified(), if deadline.is_none() => {
                deadline = Some(tokio::time::Instant::now() + CLOSE_WAIT);
            }
            _ = until(deadline) => return,
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

/// One message from the client, translated for the RESP side.
async fn deliver(
    data: Vec<u8>,
    pipe: &mut WriteHalf<DuplexStream>,
    tx: &UnboundedSender<Out>,
    shared: &RefCell<Shared>,
) -> std::io::Result<()> {
    let sub = shared.borrow().sub;
    match sub {
        Sub::Resp => pipe.write_all(&data).await,
        Sub::Json => match command_from_json(&data) {
            Ok(args) => {
                let request = multibulk(&args);
                {
                    let mut s = shared.borrow_mut();
                    s.sent += 1;
                    s.pushes.sent(&args[0]);
                }
                pipe.write_all(&request).await
            }
            Err(why) => {
                let mut json = Vec::new();
                write_json(&proto::json::Reply::Error(why.as_bytes()), &mut json);
                let mut frame = Vec::new();
                write_frame(&mut frame, true, Opcode::Text, &json, None);
                let mut s = shared.borrow_mut();
                if s.answered >= s.sent {
                    let _ = tx.send(Out::Frames(frame));
                } else {
                    let sent = s.sent;
                    s.deferred.push_back((sent, frame));
                }
                Ok(())
            }
        },
        Sub::Term => {
            let keys = String::from_utf8_lossy(&data);
            let (mut screen, mut lines) = (String::new(), Vec::new());
            shared
                .borrow_mut()
                .editor
                .feed(&keys, &mut screen, &mut lines);
            let mut requests = Vec::new();
            for line in lines {
                let mut s = shared.borrow_mut();
                match split_line(&line) {
                    Some(args) if args.is_empty() => {
                        if s.answered >= s.sent {
                            s.editor.redraw(&mut screen);
                        }
                    }
                    Some(args) if args.len() == 1 && args[0].eq_ignore_ascii_case(b"clear") => {
                        s.editor.clear_screen(&mut screen);
                    }
                    Some(args) => {
                        requests.extend_from_slice(&multibulk(&args));
                        s.sent += 1;
                        s.pushes.sent(&args[0]);
                    }
                    None => {
                        screen.push_str("Invalid argument(s)\r\n");
                        s.editor.redraw(&mut screen);
                    }
                }
            }
            if !screen.is_empty() {
                let _ = tx.send(Out::Frames(text_frame(&screen)));
            }
            pipe.write_all(&requests).await
        }
    }
}

/// Splits a console line into arguments as redis-cli does (Redis's inline
/// grammar, quotes and escapes); None for unbalanced quotes.
fn split_line(line: &str) -> Option<Vec<Vec<u8>>> {
    // A leading space keeps a line that starts with `*` inline.
    let request = format!(" {line}\r\n");
    match RequestParser::new().parse(request.as_bytes()) {
        Ok(Some((args, _))) => Some(args.into_iter().map(|a| a.into_owned()).collect()),
        Ok(None) => Some(Vec::new()),
        Err(_) => None,
    }
}

/// A request as a RESP multibulk.
fn multibulk(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = ReplyWriter::new(&mut out, Protocol::Resp2);
    w.array_len(args.len());
    for a in args {
        w.bulk(a);
    }
    out
}

/// Writes the RESP side's replies, translated, and what the reading half
/// asks for, until a close frame went out.
async fn outbound(
    worker: &Worker,
    sock: &mut tokio::io::WriteHalf<&mut Transport>,
    pipe: &mut ReadHalf<DuplexStream>,
    mut rx: UnboundedReceiver<Out>,
    shared: &RefCell<Shared>,
    closing: &Notify,
) {
    let mut replies = BytesMut::with_capacity(16 * 1024);
    let mut scanner = ReplyScanner::new();
    let mut frames = Vec::new();
    loop {
        let mut close = None;
        tokio::select! {
            biased;
            out = rx.recv() => match out {
                Some(Out::Frames(f)) => frames.extend_from_slice(&f),
                Some(Out::Close(code, reason)) => close = Some((code, reason)),
                None => return,
            },
            n = pipe.read_buf(&mut replies) => match n {
                Ok(n) if n > 0 => {
                    if translate(&mut replies, &mut scanner, shared, &mut frames).is_err() {
                        close = Some((1011, "internal error"));
                    }
                }
                _ => {
                    let draining = *worker.shutdown.borrow();
                    close = Some(if draining {
                        (1001, "server shutting down")
                    } else {
                        (1000, "")
                    });
                    closing.notify_one();
                }
            },
        }
        if let Some((code, reason)) = close {
            write_close(&mut frames, code, reason);
        }
        if !frames.is_empty() {
            if sock.write_all(&frames).await.is_err() {
                return;
            }
            frames.clear();
        }
        if close.is_some() {
            return;
        }
        replies.reserve(16 * 1024);
    }
}

/// Turns the whole replies in `replies` into frames for the sub-protocol
/// (and drops their bytes). Fails only if the RESP side sent bytes that are
/// not RESP, which it never does.
fn translate(
    replies: &mut BytesMut,
    scanner: &mut ReplyScanner,
    shared: &RefCell<Shared>,
    frames: &mut Vec<u8>,
) -> Result<(), proto::json::ReplyError> {
    let mut s = shared.borrow_mut();
    if s.sub == Sub::Resp {
        write_frame(frames, true, Opcode::Binary, replies, None);
        replies.clear();
        return Ok(());
    }
    let mut screen = String::new();
    while let Some(end) = scanner.scan(replies)? {
        let (reply, _) = parse_reply(&replies[..end])?.ok_or(proto::json::ReplyError("cut"))?;
        let pushed = s.pushes.is_push(&reply);
        if !pushed {
            s.answered = (s.answered + 1).min(s.sent);
        }
        if s.sub == Sub::Json {
            let mut json = Vec::new();
            if pushed {
                write_push(&reply, &mut json);
            } else {
                write_json(&reply, &mut json);
            }
            write_frame(frames, true, Opcode::Text, &json, None);
            while s
                .deferred
                .front()
                .is_some_and(|(after, _)| *after <= s.answered)
            {
                if let Some((_, frame)) = s.deferred.pop_front() {
                    frames.extend_from_slice(&frame);
                }
            }
        } else {
            let mut text = String::new();
            term::format_reply(&reply, &mut text);
            // Whatever was typed meanwhile is drawn again after the reply.
            screen.push_str("\r\x1b[K");
            term::crlf(&text, &mut screen);
            if s.answered >= s.sent {
                s.editor.redraw(&mut screen);
            }
        }
        replies.advance(end);
    }
    if !screen.is_empty() {
        write_frame(frames, true, Opcode::Text, screen.as_bytes(), None);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_lines_split_like_redis_cli() {
        assert_eq!(
            split_line(r#"set k "a b""#).unwrap(),
            [&b"set"[..], b"k", b"a b"]
        );
        assert_eq!(split_line("*3").unwrap(), [&b"*3"[..]]);
        assert!(split_line("   ").unwrap().is_empty());
        assert!(split_line(r#"get "x"#).is_none());
    }

    #[test]
    fn requests_are_multibulk() {
        assert_eq!(
            multibulk(&[b"GET".to_vec(), b"k".to_vec()]),
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
        );
    }
}
