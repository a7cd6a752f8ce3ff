//! memcached over UDP. Each datagram is one request (8-byte frame header,
//! then text or binary protocol, told by the first byte as memcached does);
//! its reply goes back to the sender cut into numbered datagrams of at most
//! 1400 bytes. Datagrams are read with `recvmmsg` and replies sent with
//! `sendmmsg`, many per system call, in a readiness loop on the tokio
//! socket; one engine borrow serves everything one `recvmmsg` brought.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::time::Duration;

use engine::{Engine, Session};
use nix::sys::socket::{recvmmsg, sendmmsg, MsgFlags, MultiHeaders, SockaddrStorage};
use proto::memcache::text::{write_line, Parsed, Parser};
use proto::memcache::{binary::REQUEST_MAGIC, udp};
use tokio::io::Interest;
use tokio::net::UdpSocket;

use super::{binary, text};
use crate::worker::batch::{Ran, Runner};
use crate::worker::Worker;

/// Datagrams taken per `recvmmsg`.
const RECV_BATCH: usize = 32;

/// Datagrams handed to one `sendmmsg`.
const SEND_BATCH: usize = 64;

/// The largest datagram read whole (UDP's limit); a longer one is cut by
/// the kernel and dropped here.
const DATAGRAM_MAX: usize = 65_536;

/// Sent when a reply would need more datagrams than the header can count.
const REPLY_TOO_LONG: &[u8] = b"SERVER_ERROR out of memory writing get response\r\n";

/// Serves memcached UDP requests on `socket` until the worker drains.
pub(crate) async fn serve(worker: Rc<Worker>, socket: UdpSocket) {
    let fd = socket.as_raw_fd();
    let mut inbox = Inbox::new();
    let mut outbox = Outbox::default();
    let mut reply = Vec::new();
    let mut value = Vec::new();
    let mut session = Session::new(0, worker.engine.borrow().now_ms());
    let mut shutdown = worker.shutdown.subscribe();
    let mut runner = Runner::new();
    loop {
        if *shutdown.borrow() {
            return;
        }
        tokio::select! {
            ready = socket.readable() => {
                if ready.is_err() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            }
            _ = shutdown.changed() => return,
        }
        let received = match socket.try_io(Interest::READABLE, || inbox.receive(fd)) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            // A pending ICMP error and the like: the next read goes on.
            Err(_) => continue,
        };
        outbox.clear();
        runner.run(&worker, &mut session, |engine, session| {
            let mut executed = 0;
            for (datagram, from) in inbox.datagrams(received) {
                let Some(request) = udp::parse_datagram(datagram) else {
                    continue;
                };
                reply.clear();
                executed += execute(engine, session, request.payload, &mut reply, &mut value);
                outbox.add(from, request.request_id, &reply);
            }
            Ran { next: (), executed }
        });
        // `appendfsync always` holds UDP replies too.
        runner.settle(&worker).await;
        outbox.send(&socket, fd).await;
    }
}

/// Runs the requests of one datagram's payload; replies into `reply`.
/// Returns how many ran. A request must be whole within the datagram: an
/// incomplete one is dropped, as memcached does.
fn execute(
    engine: &mut Engine,
    session: &mut Session,
    payload: &[u8],
    reply: &mut Vec<u8>,
    value: &mut Vec<u8>,
) -> u64 {
    if engine.mc_auth_required() {
        // A login needs a connection: with one required, nothing runs
        // over UDP (and the socket's one session never logs in).
        reply.extend_from_slice(b"CLIENT_ERROR unauthenticated\r\n");
        return 0;
    }
    if payload.first() == Some(&REQUEST_MAGIC) {
        // What would close a TCP connection (QUIT, a bad header) ends the
        // datagram; a too-large value was never in it.
        return binary::process(engine, session, payload, reply, value, udp::MAX_REPLY).executed;
    }
    let mut parser = Parser::new(engine.mc_item_size_max());
    let mut rest = payload;
    let mut executed = 0;
    while reply.len() < udp::MAX_REPLY {
        match parser.parse(rest) {
            Parsed::Request(request, consumed) => {
                rest = &rest[consumed..];
                executed += 1;
                if !text::execute(engine, value, request, reply) {
                    break;
                }
            }
            Parsed::Error {
                line,
                quiet,
                consumed,
            } => {
                if !quiet {
                    write_line(reply, line.as_bytes());
                }
                rest = &rest[consumed..];
            }
            Parsed::Skipped(n) => rest = &rest[n..],
            Parsed::Incomplete | Parsed::Close => break,
        }
    }
    executed
}

/// Buffers and headers for `recvmmsg`, reused across calls.
struct Inbox {
    buffers: Vec<Vec<u8>>,
    headers: MultiHeaders<SockaddrStorage>,
    /// Per datagram received: its length and sender (None: unusable).
    received: Vec<(usize, Option<SockaddrStorage>)>,
}

impl Inbox {
    fn new() -> Inbox {
        Inbox {
            // Zeroed allocations: pages no datagram reached stay untouched.
            buffers: (0..RECV_BATCH).map(|_| vec![0; DATAGRAM_MAX]).collect(),
            headers: MultiHeaders::preallocate(RECV_BATCH, None),
            received: Vec::with_capacity(RECV_BATCH),
        }
    }

    /// Reads up to `RECV_BATCH` datagrams without waiting; how many came.
    fn receive(&mut self, fd: RawFd) -> io::Result<usize> {
        self.received.clear();
        let mut slices: Vec<[IoSliceMut<'_>; 1]> = self
            .buffers
            .iter_mut()
            .map(|b| [IoSliceMut::new(b)])
            .collect();
        let results = recvmmsg(
            fd,
            &mut self.headers,
            slices.iter_mut(),
            MsgFlags::MSG_DONTWAIT,
            None,
        )?;
        for m in results {
            // A datagram longer than the buffer is not a request to guess at.
            let whole = !m.flags.contains(MsgFlags::MSG_TRUNC);
            self.received
                .push((m.bytes, if whole { m.address } else { None }));
        }
        Ok(self.received.len())
    }

    /// The first `n` datagrams received and their senders.
    fn datagrams(&self, n: usize) -> impl Iterator<Item = (&[u8], SockaddrStorage)> {
        self.received[..n]
            .iter()
            .zip(&self.buffers)
            .filter_map(|(&(len, from), buf)| Some((&buf[..len.min(buf.len())], from?)))
    }
}

/// Reply datagrams waiting to go: one buffer and each datagram's range and
/// destination.
#[derive(Default)]
struct Outbox {
    bytes: Vec<u8>,
    datagrams: Vec<(usize, usize)>,
    destinations: Vec<Option<SockaddrStorage>>,
    headers: Option<MultiHeaders<SockaddrStorage>>,
}

impl Outbox {
    fn clear(&mut self) {
        self.bytes.clear();
        self.datagrams.clear();
        self.destinations.clear();
    }

    /// Queues `reply` to `to` as numbered datagrams (nothing for an empty
    /// reply, as for quiet requests).
    fn add(&mut self, to: SockaddrStorage, request_id: u16, reply: &[u8]) {
        let start = self.bytes.len();
        let lens = match udp::split_reply(request_id, reply, &mut self.bytes) {
            Some(lens) => lens,
            None => {
                self.bytes.truncate(start);
                udp::split_reply(request_id, REPLY_TOO_LONG, &mut self.bytes).unwrap_or_default()
            }
        };
        let mut at = start;
        for len in lens {
            self.datagrams.push((at, at + len));
            self.destinations.push(Some(to));
            at += len;
        }
    }

    /// Sends every queued datagram, `SEND_BATCH` per `sendmmsg`, waiting
    /// while the socket's buffer is full. A datagram the kernel refuses
    /// (an unreachable sender) is dropped; the rest still go.
    async fn send(&mut self, socket: &UdpSocket, fd: RawFd) {
        let headers = self
            .headers
            .get_or_insert_with(|| MultiHeaders::preallocate(SEND_BATCH, None));
        let mut next = 0;
        while next < self.datagrams.len() {
            let end = (next + SEND_BATCH).min(self.datagrams.len());
            let sent = socket.try_io(Interest::WRITABLE, || {
                let slices: Vec<[IoSlice<'_>; 1]> = self.datagrams[next..end]
                    .iter()
                    .map(|&(a, b)| [IoSlice::new(&self.bytes[a..b])])
                    .collect();
                let results = sendmmsg(
                    fd,
                    headers,
                    slices.iter(),
                    &self.destinations[next..end],
                    [],
                    MsgFlags::MSG_DONTWAIT,
                )?;
                Ok(results.count())
            });
            match sent {
                Ok(0) => next += 1,
                Ok(n) => next += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if socket.writable().await.is_err() {
                        return;
                    }
                }
                Err(_) => next += 1,
            }
        }
    }
}
