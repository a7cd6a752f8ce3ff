//! The supervisor's channel to each worker: one Unix stream connection to
//! the control socket, carrying JSON lines both ways and, with some of them,
//! file descriptors (SCM_RIGHTS): the listening sockets a worker serves and
//! client connections handed to it. A line that comes with descriptors says
//! how many in its `"fds"` field; they travel in the same `sendmsg`.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use serde_json::Value;
use tokio::io::Interest;
use tokio::net::UnixStream;

/// Most descriptors one line may carry (listeners of every kind, or a batch
/// of handed-over connections).
pub(crate) const MAX_FDS: usize = 16;
/// A line longer than this is a broken peer, not a message.
const MAX_LINE: usize = 1 << 20;

/// One end of a supervisor–worker channel.
pub(crate) struct Channel {
    stream: UnixStream,
    /// One message at a time: a line and its descriptors are never
    /// interleaved with another task's.
    send_lock: tokio::sync::Mutex<()>,
    /// Bytes read but not yet split into lines.
    input: RefCell<Vec<u8>>,
    /// Descriptors received, in order, not yet claimed by a line.
    fds: RefCell<VecDeque<OwnedFd>>,
}

impl Channel {
    /// Wraps a connected stream.
    pub fn new(stream: UnixStream) -> Channel {
        Channel {
            stream,
            send_lock: tokio::sync::Mutex::new(()),
            input: RefCell::new(Vec::new()),
            fds: RefCell::new(VecDeque::new()),
        }
    }

    /// Sends `msg` as one line, with `fds` attached to its first byte.
    pub async fn send(&self, msg: &Value, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        let mut msg = msg.clone();
        if !fds.is_empty() {
            msg["fds"] = fds.len().into();
        }
        let mut line = msg.to_string().into_bytes();
        line.push(b'\n');
        let _guard = self.send_lock.lock().await;
        let mut sent = 0;
        while sent < line.len() {
            self.stream.writable().await?;
            let attach = if sent == 0 { fds } else { &[] };
            let rest = &line[sent..];
            match self.stream.try_io(Interest::WRITABLE, || {
                let mut space =
                    [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
                let mut control = SendAncillaryBuffer::new(&mut space);
                if !attach.is_empty() && !control.push(SendAncillaryMessage::ScmRights(attach)) {
                    return Err(io::Error::other("too many descriptors for one message"));
                }
                sendmsg(
                    &self.stream,
                    &[IoSlice::new(rest)],
                    &mut control,
                    SendFlags::NOSIGNAL,
                )
                .map_err(io::Error::from)
            }) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The next line and the descriptors it carries; `None` when the peer
    /// closed.
    pub async fn recv(&self) -> io::Result<Option<(Value, Vec<OwnedFd>)>> {
        loop {
            if let Some(msg) = self.take_line()? {
                return Ok(Some(msg));
            }
            self.stream.readable().await?;
            let mut buf = [0u8; 16 << 10];
            let read = self.stream.try_io(Interest::READABLE, || {
                let mut space =
                    [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
                let mut control = RecvAncillaryBuffer::new(&mut space);
                let msg = recvmsg(
                    &self.stream,
                    &mut [IoSliceMut::new(&mut buf)],
                    &mut control,
                    RecvFlags::CMSG_CLOEXEC,
                )?;
                let mut fds = self.fds.borrow_mut();
                for cmsg in control.drain() {
                    if let RecvAncillaryMessage::ScmRights(received) = cmsg {
                        fds.extend(received);
                    }
                }
                Ok(msg.bytes)
            });
            match read {
                Ok(0) => return Ok(None),
                Ok(n) => {
                    let mut input = self.input.borrow_mut();
                    input.extend_from_slice(&buf[..n]);
                    if input.len() > MAX_LINE {
                        return Err(io::Error::other("control line too long"));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Splits one whole line off the input, with the descriptors it claims.
    fn take_line(&self) -> io::Result<Option<(Value, Vec<OwnedFd>)>> {
        let mut input = self.input.borrow_mut();
        let Some(end) = input.iter().position(|&b| b == b'\n') else {
            return Ok(None);
        };
        let line: Vec<u8> = input.drain(..=end).collect();
        let msg: Value = serde_json::from_slice(&line[..end])
            .map_err(|e| io::Error::other(format!("bad control line: {e}")))?;
        let want = msg.get("fds").and_then(Value::as_u64).unwrap_or(0) as usize;
        let mut fds = self.fds.borrow_mut();
        if want > fds.len() {
            return Err(io::Error::other("control line without its descriptors"));
        }
        Ok(Some((msg, fds.drain(..want).collect())))
    }
}

/// What a listening socket serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// RESP over TCP.
    Redis,
    /// RESP over TLS (`tls-port`).
    RedisTls,
    /// memcached text, meta and binary over TCP.
    Memcached,
    /// memcached over UDP.
    MemcachedUdp,
    /// HTTP and WebSocket.
    Http,
    /// RESP over the Unix socket.
    Unix,
    /// The NATS client protocol.
    Nats,
}

impl Kind {
    /// The name on the control channel.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Redis => "redis",
            Kind::RedisTls => "redis-tls",
            Kind::Memcached => "memcached",
            Kind::MemcachedUdp => "memcached-udp",
            Kind::Http => "http",
            Kind::Unix => "unix",
            Kind::Nats => "nats",
        }
    }

    /// The kind called `name`.
    pub fn from_name(name: &str) -> Option<Kind> {
        [
            Kind::Redis,
            Kind::RedisTls,
            Kind::Memcached,
            Kind::MemcachedUdp,
            Kind::Http,
            Kind::Unix,
            Kind::Nats,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

/// Where `shoal ctl` reaches the supervisor of the segment at `segment`.
pub fn control_socket_path(segment: &std::path::Path) -> std::path::PathBuf {
    let mut s = segment.as_os_str().to_owned();
    s.push(".ctl");
    std::path::PathBuf::from(s)
}
