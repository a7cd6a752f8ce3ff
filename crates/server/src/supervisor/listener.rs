//! Listening sockets, all created by the supervisor: TCP with SO_REUSEPORT
//! (one set per worker, the kernel spreads connections) or one shared set,
//! memcached UDP, and an optional Unix socket.

use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::rc::Rc;

use socket2::{Domain, Protocol, Socket, Type};

pub(crate) use crate::channel::Kind;
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
                "Failed listening on {kind}port {} (on {}): it is in use by another program",
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

/// The kinds of socket that listen on the `bind` address.
pub(crate) const NETWORK_KINDS: [Kind; 6] = [
    Kind::Redis,
    Kind::RedisTls,
    Kind::Memcached,
    Kind::Http,
    Kind::Nats,
    Kind::MemcachedUdp,
];

/// The port `cfg` gives `kind` (0: off).
fn port_of(cfg: &engine::Config, kind: Kind) -> u16 {
    match kind {
        Kind::Redis => cfg.port,
        Kind::RedisTls => cfg.tls_port,
        Kind::Memcached => cfg.memcached_port,
        Kind::Http => cfg.http_port,
        Kind::Nats => cfg.nats_port,
        Kind::MemcachedUdp => cfg.memcached_udp_port,
        Kind::Unix => 0,
    }
}

/// Two protocols on one TCP port would both bind it (SO_REUSEPORT lets
/// them) and the kernel would split connections between them: a RESP
/// client would sometimes reach memcached. Refused instead, as redis-server
/// refuses a port already in use.
fn refuse_shared_tcp_ports(cfg: &engine::Config) -> Result<(), Error> {
    let tcp = NETWORK_KINDS.iter().filter(|k| **k != Kind::MemcachedUdp);
    let mut seen: Vec<(u16, Kind)> = Vec::new();
    for kind in tcp {
        let port = port_of(cfg, *kind);
        if port == 0 {
            continue;
        }
        if let Some((_, other)) = seen.iter().find(|(p, _)| *p == port) {
            return Err(Error::Config(format!(
                "port {port} is given to both {} and {}",
                other.name(),
                kind.name()
            )));
        }
        seen.push((port, *kind));
    }
    Ok(())
}

/// Binds the sockets of `kinds` that `cfg` turns on (a port other than 0,
/// a `bind` address), all or none.
pub(crate) fn bind_kinds(
    cfg: &engine::Config,
    kinds: &[Kind],
    reuseport: bool,
) -> Result<Vec<(Kind, OwnedFd)>, Error> {
    let mut sockets = Vec::new();
    if cfg.bind.is_empty() {
        return Ok(sockets);
    }
    refuse_shared_tcp_ports(cfg)?;
    for kind in kinds {
        let port = port_of(cfg, *kind);
        if port == 0 {
            continue;
        }
        let addr = resolve(&cfg.bind, port)?;
        let socket = match kind {
            Kind::MemcachedUdp => {
                bound_socket(addr, Type::DGRAM, Protocol::UDP, "udp ", reuseport)?
            }
            _ => tcp_socket(addr, reuseport)?,
        };
        sockets.push((*kind, OwnedFd::from(socket)));
    }
    Ok(sockets)
}

/// The kinds of socket a change of the listening address moves: every
/// network one when `bind` changes, else those of the RESP and RESP over
/// TLS ports that change.
pub(crate) fn moved_kinds(old: &engine::ListenAddress, new: &engine::ListenAddress) -> Vec<Kind> {
    if old.bind != new.bind {
        return NETWORK_KINDS.to_vec();
    }
    let mut kinds = Vec::new();
    if old.port != new.port {
        kinds.push(Kind::Redis);
    }
    if old.tls_port != new.tls_port {
        kinds.push(Kind::RedisTls);
    }
    kinds
}

/// The listening sockets one worker serves. The supervisor creates and keeps
/// them and hands copies to the worker, so a worker's exit (an upgrade, a
/// crash) never closes an accept queue: the next worker takes the same
/// sockets. Under `--balance shared` every worker gets the same set.
#[derive(Default)]
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
        let mut sockets: Vec<(Kind, Rc<OwnedFd>)> = bind_kinds(cfg, &NETWORK_KINDS, reuseport)?
            .into_iter()
            .map(|(kind, fd)| (kind, Rc::new(fd)))
            .collect();
        if let Some(fd) = unix {
            sockets.push((Kind::Unix, fd));
        }
        Ok(ListenerSet { sockets })
    }

    /// This set with the sockets of `kinds` replaced by `new` (CONFIG SET
    /// port / bind).
    pub fn replacing(&self, kinds: &[Kind], new: Vec<(Kind, Rc<OwnedFd>)>) -> ListenerSet {
        let mut sockets: Vec<_> = self
            .sockets
            .iter()
            .filter(|(k, _)| !kinds.contains(k))
            .cloned()
            .collect();
        sockets.extend(new);
        ListenerSet { sockets }
    }

    /// The TCP listeners of the set (for the supervisor's last accepts).
    pub fn tcp(&self) -> impl Iterator<Item = (Kind, &OwnedFd)> {
        self.sockets
            .iter()
            .filter(|(k, _)| !matches!(k, Kind::MemcachedUdp | Kind::Unix))
            .map(|(k, fd)| (*k, &**fd))
    }
}

/// Points new connections of a SO_REUSEPORT group at the sockets in
/// `targets` (their indexes in the kernel's array for the group), chosen at
/// random; `None` gives the choice back to the kernel's hash. The program
/// is classic BPF attached with SO_ATTACH_REUSEPORT_CBPF to any member
/// (`member`); a program's index out of range means "hash as usual".
pub(crate) fn steer(member: &OwnedFd, targets: Option<&[u32]>) -> Result<(), Error> {
    use nix::libc::{sock_filter, sock_fprog};
    // Classic BPF opcodes (linux/filter.h) and the ancillary random load.
    const LD_W_ABS: u16 = 0x20;
    const ALU_MOD_K: u16 = 0x94;
    const JMP_JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    const SKF_AD_RANDOM: u32 = (-0x1000i32 + 56) as u32;
    let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    let mut program = Vec::new();
    match targets {
        Some(targets) if !targets.is_empty() => {
            program.push(op(LD_W_ABS, 0, 0, SKF_AD_RANDOM));
            program.push(op(ALU_MOD_K, 0, 0, targets.len() as u32));
            for (i, index) in targets.iter().enumerate() {
                if i + 1 < targets.len() {
                    program.push(op(JMP_JEQ_K, 0, 1, i as u32));
                }
                program.push(op(RET_K, 0, 0, *index));
            }
        }
        _ => program.push(op(RET_K, 0, 0, u32::MAX)),
    }
    let fprog = sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
    };
    nix::sys::socket::setsockopt(
        member,
        nix::sys::socket::sockopt::AttachReusePortCbpf,
        &fprog,
    )
    .map_err(|e| {
        Error::Io(
            "steer new connections (SO_ATTACH_REUSEPORT_CBPF)".into(),
            e.into(),
        )
    })
}
