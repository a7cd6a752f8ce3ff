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
//! request boundary. Clients that have requests of their own in flight (a
//! blocked client, one reached through TLS or an in-process stream) are
//! left alone: they wait for the script, as they would in their task.

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::rc::{Rc, Weak};

use engine::{Engine, Flow, ServerRequest};
use proto::resp::RequestParser;
use rustix::net::{RecvFlags, SendFlags};

use crate::worker::Worker;

/// Most bytes of one client's requests looked at per round: a larger
/// request waits for the script's end.
const PEEK_MAX: usize = 64 << 10;

thread_local! {
    /// Copies of the descriptors of this worker's RESP connections, by the
    /// descriptor number their sessions show (`Session::fd`).
    static SOCKETS: RefCell<HashMap<i64, OwnedFd>> = RefCell::new(HashMap::new());
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
    SOCKETS.with(|s| s.borrow_mut().insert(fd, copy));
    Some(Registered(fd))
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
        let copy = SOCKETS.with(|s| {
            s.borrow()
                .get(&fd)
                .and_then(|f| f.as_fd().try_clone_to_owned().ok())
        });
        let Some(socket) = copy else {
            continue;
        };
        let mut peeked = vec![0u8; PEEK_MAX];
        let n = match rustix::net::recv(&socket, &mut peeked, RecvFlags::PEEK | RecvFlags::DONTWAIT)
        {
            Ok((n, _)) if n > 0 => n,
            _ => continue,
        };
        peeked.truncate(n);
        let mut parser = RequestParser::new();
        let mut pos = 0;
        let mut out = Vec::new();
        let mut close = false;
        while let Ok(Some((args, used))) = parser.parse(&peeked[pos..]) {
            pos += used;
            match engine.execute_while_busy(&mut session, &args, &mut out) {
                Flow::Continue | Flow::Block(_) | Flow::Hold => {}
                Flow::Close => close = true,
                Flow::Server(ServerRequest::Shutdown) => {
                    if let Ok(Some(pid)) = worker.store.supervisor_pid() {
                        if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                            let _ =
                                rustix::process::kill_process(pid, rustix::process::Signal::TERM);
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
