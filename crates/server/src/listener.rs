//! Listening sockets: TCP with SO_REUSEPORT so that every worker binds the
//! same port and the kernel spreads connections, and an optional Unix socket.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;

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

/// A non-blocking TCP listener on `addr` with SO_REUSEADDR and SO_REUSEPORT.
pub(crate) fn reuseport_tcp(addr: SocketAddr) -> Result<std::net::TcpListener, Error> {
    let socket = reuseport_socket(addr, Type::STREAM, Protocol::TCP, "")?;
    socket
        .listen(BACKLOG)
        .map_err(io(format!("listen on {addr}")))?;
    Ok(socket.into())
}

/// A non-blocking UDP socket bound to `addr` with SO_REUSEADDR and
/// SO_REUSEPORT (the kernel spreads datagrams by source address).
pub(crate) fn reuseport_udp(addr: SocketAddr) -> Result<std::net::UdpSocket, Error> {
    Ok(reuseport_socket(addr, Type::DGRAM, Protocol::UDP, "udp ")?.into())
}

/// A non-blocking socket bound to `addr` that every worker can bind too.
/// `kind` names it in messages ("" for TCP, "udp ").
fn reuseport_socket(
    addr: SocketAddr,
    ty: Type,
    protocol: Protocol,
    kind: &str,
) -> Result<Socket, Error> {
    let what = || format!("listen on {kind}{addr}");
    let socket = Socket::new(Domain::for_address(addr), ty, Some(protocol)).map_err(io(what()))?;
    socket.set_reuse_address(true).map_err(io(what()))?;
    socket.set_reuse_port(true).map_err(io(what()))?;
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
