//! Listening sockets, all created by the supervisor: TCP with SO_REUSEPORT
//! (one set per worker, the kernel spreads connections) or one shared set,
//! memcached UDP, and an optional Unix socket.

use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::rc::Rc;

use socket2::{Domain, Protocol, Socket, Type};

use crate::error::{io, Error};

/// Redis's default `tcp-backlog`.
const BACKLOG: i32 = 511;

/// Resolves `bind:port` to one address.
pub(crate) fn resolve(bind: &str, port: u16) -> Result<SocketAddr, Error> {
    (bind, port)
        .to_socket_addrs()
        .map_err(io(format!("resolve {bind}:{port}")))?
        .next()
        .ok_or_else(|| Error::Config(format!("{bind} resolves to no address")))
}

/// A non-blocking TCP listener on `addr` with SO_REUSEADDR, and
/// SO_REUSEPORT when `reuseport`.
fn tcp_socket(addr: SocketAddr, reuseport: bool) -> Result<Socket, Error> {
    let socket = bound_socket(addr, Type::STREAM, Protocol::TCP, "", reuseport)?;
    socket
        .listen(BACKLOG)
        .map_err(io(format!("listen on {addr}")))?;
    Ok(socket)
}

/// A non-blocking socket bound to `addr`, with SO_REUSEPORT when
/// `reuseport` (then every worker's set binds the same port). `kind` names
/// it in messages ("" for TCP, "udp ").
fn bound_socket(
    addr: SocketAddr,
    ty: Type,
    protocol: Protocol,
    kind: &str,
    reuseport: bool,
) -> Result<Socket, Error> {
    let what = || format!("listen on {kind}{addr}");
    let socket = Socket::new(Domain::for_address(addr), ty, Some(protocol)).map_err(io(what()))?;
    socket.set_reuse_address(true).map_err(io(what()))?;
    socket.set_reuse_port(reuseport).map_err(io(what()))?;
    socket.set_nonblocking(true).map_err(io(what()))?;
    socket.bind(&addr.into()).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            Error::Config(format!(
                "{kind}port {} on {} is in use by another program",
                addr.port(),
                addr.ip()
            ))
        } else {
            Error::Io(what(), e)
        }
    })?;
    Ok(socket)
}

/// A non-blocking Unix listener at `path`, replacing a stale socket file.
pub(crate) fn unix(path: &Path) -> Result<std::os::unix::net::UnixListener, Error> {
    let what = format!("listen on {}", path.display());
    if path.exists() {
        std::fs::remove_file(path).map_err(io(what.clone()))?;
    }
    let l = std::os::unix::net::UnixListener::bind(path).map_err(io(what.clone()))?;
    l.set_nonblocking(true).map_err(io(what))?;
    Ok(l)
}

/// What a listening socket serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// RESP over TCP.
    Redis,
    /// memcached text, meta and binary over TCP.
    Memcached,
    /// memcached over UDP.
    MemcachedUdp,
    /// HTTP and WebSocket.
    Http,
    /// RESP over the Unix socket.
    Unix,
}

impl Kind {
    /// The name on the control channel.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Redis => "redis",
            Kind::Memcached => "memcached",
            Kind::MemcachedUdp => "memcached-udp",
            Kind::Http => "http",
            Kind::Unix => "unix",
        }
    }

    /// The kind called `name`.
    pub fn from_name(name: &str) -> Option<Kind> {
        [
            Kind::Redis,
            Kind::Memcached,
            Kind::MemcachedUdp,
            Kind::Http,
            Kind::Unix,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

/// The listening sockets one worker serves. The supervisor creates and keeps
/// them and hands copies to the worker, so a worker's exit (an upgrade, a
/// crash) never closes an accept queue: the next worker takes the same
/// sockets. Under `--balance shared` every worker gets the same set.
pub(crate) struct ListenerSet {
    /// Each socket with what it serves; the Unix socket is one for all sets.
    pub sockets: Vec<(Kind, Rc<OwnedFd>)>,
}

impl ListenerSet {
    /// Binds every port `cfg` turns on: with SO_REUSEPORT when `reuseport`
    /// (one set per worker, the kernel spreads connections over the sets),
    /// without it otherwise (one set shared by every worker).
    pub fn bind(
        cfg: &engine::Config,
        reuseport: bool,
        unix: Option<Rc<OwnedFd>>,
    ) -> Result<ListenerSet, Error> {
        let mut sockets = Vec::new();
        for (kind, port) in [
            (Kind::Redis, cfg.port),
            (Kind::Memcached, cfg.memcached_port),
            (Kind::Http, cfg.http_port),
        ] {
            if port != 0 {
                let addr = resolve(&cfg.bind, port)?;
                let socket = tcp_socket(addr, reuseport)?;
                sockets.push((kind, Rc::new(OwnedFd::from(socket))));
            }
        }
        if cfg.memcached_udp_port != 0 {
            let addr = resolve(&cfg.bind, cfg.memcached_udp_port)?;
            let socket = bound_socket(addr, Type::DGRAM, Protocol::UDP, "udp ", reuseport)?;
            sockets.push((Kind::MemcachedUdp, Rc::new(OwnedFd::from(socket))));
        }
        if let Some(fd) = unix {
            sockets.push((Kind::Unix, fd));
        }
        Ok(ListenerSet { sockets })
    }

    /// The TCP listeners of the set (for the supervisor's last accepts).
    pub fn tcp(&self) -> impl Iterator<Item = (Kind, &OwnedFd)> {
        self.sockets
            .iter()
            .filter(|(k, _)| !matches!(k, Kind::MemcachedUdp | Kind::Unix))
            .map(|(k, fd)| (*k, &**fd))
    }
}
