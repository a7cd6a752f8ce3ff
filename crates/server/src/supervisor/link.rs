//! The replica's end of a replication link: a TCP connection to the
//! primary's port, or with `tls-replication yes` a TLS session over it
//! (rustls, the client configuration of [`crate::tls::client_config`]:
//! this server's client certificate, the primary checked against
//! `tls-ca-cert-file` / `tls-ca-cert-dir`). The link thread reads and
//! writes it from one thread, so one session serves both directions.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConnection, StreamOwned};
use store::Store;

use crate::tls::TlsSettings;

/// How long the connection and the TLS handshake may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The read timeout once linked: the link thread wakes this often to see
/// REPLICAOF changes and its stop flag.
const POLL: Duration = Duration::from_millis(100);

/// A link to the primary.
pub(super) enum LinkStream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

/// Whether `tls-replication` is on: the link speaks TLS (and the port
/// this replica announces is its `tls-port`, as Redis announces it).
pub(super) fn tls_replication(store: &Store) -> bool {
    let text = store.config_text().unwrap_or_default();
    engine::setting_in(&text, "tls-replication").as_deref() == Some("yes")
}

/// The port a replica announces to its primary: its `tls-port` under
/// `tls-replication yes` (when one is set), else `port`.
pub(super) fn announced_port(store: &Store, port: u16) -> u16 {
    if !tls_replication(store) {
        return port;
    }
    let text = store.config_text().unwrap_or_default();
    engine::setting_in(&text, "tls-port")
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|p| *p != 0)
        .unwrap_or(port)
}

/// Connects to the primary at `addr` (dialled as `host:port`), with TLS
/// when `tls-replication` is on. The error says why, in words for the log
/// and `shoal_master_link_error` (a primary whose certificate does not
/// verify: `TLS handshake with … failed: invalid peer certificate: …`).
pub(super) fn connect(
    store: &Store,
    addr: SocketAddr,
    host: &str,
    port: u16,
) -> Result<LinkStream, String> {
    let tls = if tls_replication(store) {
        let settings = TlsSettings::from_text(&store.config_text().unwrap_or_default());
        Some(crate::tls::client_config(&settings).map_err(|e| {
            format!("cannot connect to {host}:{port} with TLS (tls-replication): {e}")
        })?)
    } else {
        None
    };
    let stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
        .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let Some(config) = tls else {
        stream
            .set_read_timeout(Some(POLL))
            .map_err(|e| e.to_string())?;
        return Ok(LinkStream::Plain(stream));
    };
    let name = ServerName::try_from(host.to_string()).unwrap_or(ServerName::from(addr.ip()));
    let mut session =
        ClientConnection::new(config, name).map_err(|e| format!("TLS with {host}:{port}: {e}"))?;
    let mut stream = stream;
    stream
        .set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(|e| e.to_string())?;
    while session.is_handshaking() {
        session
            .complete_io(&mut stream)
            .map_err(|e| format!("TLS handshake with {host}:{port} failed: {e}"))?;
    }
    stream
        .set_read_timeout(Some(POLL))
        .map_err(|e| e.to_string())?;
    stream.set_write_timeout(None).map_err(|e| e.to_string())?;
    Ok(LinkStream::Tls(Box::new(StreamOwned::new(session, stream))))
}

impl Read for LinkStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            LinkStream::Plain(s) => s.read(buf),
            LinkStream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for LinkStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            LinkStream::Plain(s) => s.write(buf),
            LinkStream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            LinkStream::Plain(s) => s.flush(),
            LinkStream::Tls(s) => s.flush(),
        }
    }
}
