//! A busy script's own worker answers its other clients, as Redis's event
//! loop does while a script runs past `busy-reply-threshold`: the script's
//! Lua hook calls [`serve_clients`] (through the engine's `BusyServer`),
//! which reads each other client's complete requests straight from its
//! socket and answers them at once: `-BUSY`, or the commands allowed
//! while busy (SCRIPT KILL, FUNCTION KILL, MULTI, SHUTDOWN NOSAVE…).
//!
//! The connection tasks cannot run meanwhile (the worker's one thread is
//! inside the script), so the sockets are reached through copies of their
//! descriptors registered here. Requests are peeked first and only the
//! complete ones consumed, so what a task reads afterwards starts at a
//! request boundary. A TLS connection is registered as its shared session
//! instead: its records are read into rustls, the decrypted bytes taken
//! out, the complete requests answered through the session, and what is
//! left (the start of a request) is kept for its task to read first.
//! Clients that have requests of their own in flight (a blocked client, an
//! in-process stream) are left alone: they wait for the script, as they
//! would in their task.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::rc::{Rc, Weak};

use engine::{Engine, Flow, ServerRequest};
use proto::resp::RequestParser;
use rustix::net::{RecvFlags, SendFlags};

use crate::worker::transport::TlsConnection;
use crate::worker::Worker;

/// Most bytes of one client's requests looked at per round: a larger
/// request waits for the script's end.
const PEEK_MAX: usize = 64 << 10;

/// How the hook reaches a connection's requests.
enum Reach {
    /// A plain socket: a copy of its descriptor.
    Plain(OwnedFd),
    /// A TLS connection: its session, shared with its task.
    Tls(Weak<RefCell<TlsConnection>>),
}

thread_local! {
    /// This worker's RESP connections, by the descriptor number their
    /// sessions show (`Session::fd`).
    static SOCKETS: RefCell<HashMap<i64, Reach>> = RefCell::new(HashMap::new());
}

/// Keeps a connection's socket reachable by [`serve_clients`] for as long
/// as it lives.
pub(crate) struct Registered(i64);

impl Drop for Registered {
    fn drop(&mut self) {
        SOCKETS.with(|s| s.borrow_mut().remove(&self.0));
    }
}

/// Registers the socket of a RESP connection whose session shows `fd`.
pub(crate) fn register(fd: i64, socket: BorrowedFd<'_>) -> Option<Registered> {
    let copy = socket.try_clone_to_owned().ok()?;
    SOCKETS.with(|s| s.borrow_mut().insert(fd, Reach::Plain(copy)));
    Some(Registered(fd))
}

/// Registers a RESP connection over TLS whose session shows `fd`.
pub(crate) fn register_tls(fd: i64, connection: &Rc<RefCell<TlsConnection>>) -> Registered {
    SOCKETS.with(|s| {
        s.borrow_mut()
            .insert(fd, Reach::Tls(Rc::downgrade(connection)))
    });
    Registered(fd)
}

/// The engine's busy server for `worker`.
pub(crate) fn server(worker: Weak<Worker>) -> engine::BusyServer {
    Rc::new(move |engine: &mut Engine| {
        if let Some(worker) = worker.upgrade() {
            serve_clients(&worker, engine);
        }
    })
}

/// Answers the complete requests every other client has sent.
fn serve_clients(worker: &Worker, engine: &mut Engine) {
    for (id, session) in worker.clients.sessions() {
        if worker.blocking.waker(id).is_some() {
            continue;
        }
        // The script's own client is borrowed by its connection.
        let Ok(mut session) = session.try_borrow_mut() else {
            continue;
        };
        let fd = session.fd;
        let reach = SOCKETS.with(|s| match s.borrow().get(&fd) {
            Some(Reach::Plain(f)) => f.as_fd().try_clone_to_owned().ok().map(Reach::Plain),
            Some(Reach::Tls(c)) => Some(Reach::Tls(c.clone())),
            None => None,
        });
        let socket = match reach {
            Some(Reach::Plain(socket)) => socket,
            Some(Reach::Tls(connection)) => {
                if let Some(connection) = connection.upgrade() {
                    let close = serve_tls_client(worker, engine, &mut session, &connection);
                    if close {
                        worker.clients.close(id);
                    }
                }
                continue;
            }
            None => continue,
        };
        let mut peeked = vec![0u8; PEEK_MAX];
        let n = match rustix::net::recv(&socket, &mut peeked, RecvFlags::PEEK | RecvFlags::DONTWAIT)
        {
            Ok((n, _)) if n > 0 => n,
            _ => continue,
        };
        peeked.truncate(n);
        let mut out = Vec::new();
        let (pos, close) = answer(worker, engine, &mut session, &peeked, &mut out);
        if pos == 0 {
            continue;
        }
        // Consume exactly the requests answered: they are in the socket.
        let mut left = pos;
        let mut sink = vec![0u8; left.min(PEEK_MAX)];
        while left > 0 {
            match rustix::net::recv(&socket, &mut sink[..left], RecvFlags::DONTWAIT) {
                Ok((got, _)) if got > 0 => left -= got.min(left),
                _ => break,
            }
        }
        let mut written = 0;
        while written < out.len() {
            match rustix::net::send(
                &socket,
                &out[written..],
                SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
            ) {
                Ok(w) if w > 0 => written += w,
                _ => break,
            }
        }
        if written < out.len() {
            // The rest goes out with the connection's next write.
            worker.clients.queue_output(id, &out[written..]);
        }
        if close {
            worker.clients.close(id);
        }
    }
}

/// Answers the complete requests at the start of `input` into `out`;
/// returns how many bytes they took and whether the client is to be closed.
fn answer(
    worker: &Worker,
    engine: &mut Engine,
    session: &mut engine::Session,
    input: &[u8],
    out: &mut Vec<u8>,
) -> (usize, bool) {
    let mut parser = RequestParser::new();
    let mut pos = 0;
    let mut close = false;
    while let Ok(Some((args, used))) = parser.parse(&input[pos..]) {
        pos += used;
        match engine.execute_while_busy(session, &args, out) {
            Flow::Continue | Flow::Block(_) | Flow::Hold => {}
            Flow::Close => close = true,
            Flow::Server(ServerRequest::Shutdown) => {
                if let Ok(Some(pid)) = worker.store.supervisor_pid() {
                    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
                    }
                }
                close = true;
            }
            // Nothing else allowed while busy needs the server.
            Flow::Server(_) => {}
        }
        if close {
            break;
        }
    }
    (pos, close)
}

/// The socket under a TLS session, read and written without waiting.
struct NonBlocking<'a>(BorrowedFd<'a>);

impl Read for NonBlocking<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        rustix::net::recv(self.0, buf, RecvFlags::DONTWAIT)
            .map(|(n, _)| n)
            .map_err(io::Error::from)
    }
}

impl Write for NonBlocking<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        rustix::net::send(self.0, buf, SendFlags::DONTWAIT | SendFlags::NOSIGNAL)
            .map_err(io::Error::from)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Answers the complete requests a TLS client has sent: its records are
/// read into rustls and decrypted into the connection's `unread` bytes
/// (at most [`PEEK_MAX`] of them), the complete requests there answered
/// through the session, and the rest left for the task, which is woken to
/// read it (and to send what the socket did not take). Returns whether the
/// client is to be closed.
fn serve_tls_client(
    worker: &Worker,
    engine: &mut Engine,
    session: &mut engine::Session,
    connection: &Rc<RefCell<TlsConnection>>,
) -> bool {
    // A task inside a read or write of its own holds the session.
    let Ok(mut conn) = connection.try_borrow_mut() else {
        return false;
    };
    let conn = &mut *conn;
    let (tcp, tls) = conn.stream.get_mut();
    let socket = tcp.as_fd();
    while conn.unread.len() < PEEK_MAX {
        match tls.read_tls(&mut NonBlocking(socket)) {
            Ok(n) if n > 0 => {}
            // The end of the stream or nothing more now: what came is
            // decrypted below; the task sees the end itself.
            _ => break,
        }
        if tls.process_new_packets().is_err() {
            // rustls keeps the error (and the alert to send) for the task.
            break;
        }
        let mut chunk = [0u8; 16 << 10];
        loop {
            match tls.reader().read(&mut chunk) {
                Ok(n) if n > 0 => conn.unread.extend_from_slice(&chunk[..n]),
                _ => break,
            }
        }
    }
    let mut out = Vec::new();
    let (pos, close) = answer(worker, engine, session, &conn.unread, &mut out);
    conn.unread.drain(..pos);
    if !out.is_empty() {
        let _ = tls.writer().write_all(&out);
        while tls.wants_write() {
            match tls.write_tls(&mut NonBlocking(socket)) {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
    }
    if !conn.unread.is_empty() || tls.wants_write() {
        conn.wake_reader();
    }
    close
}
