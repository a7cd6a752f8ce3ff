//! A TCP client's transport under any codec: the socket itself, or TLS
//! over it. Front ends (memcached, HTTP and what it upgrades to, RESP on
//! the TLS port) read and write a [`Transport`] and never know which.

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// How long a client has to finish its TLS handshake: a client that
/// starts one and stalls (a slowloris) is closed after it.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The content type of a TLS handshake record: a TLS client's first byte.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// A plain or TLS TCP connection.
pub(crate) enum Transport {
    /// Bytes as they are on the wire.
    Plain(TcpStream),
    /// TLS, handshake done; shared with the busy-script hook (`busy.rs`),
    /// which answers the connection's requests while its task cannot run.
    Tls(Rc<RefCell<TlsConnection>>),
}

/// A TLS connection, and what a busy script's hook left for its task.
pub(crate) struct TlsConnection {
    /// The session over its socket.
    pub stream: TlsStream<TcpStream>,
    /// Decrypted bytes the hook took out of rustls and did not answer (the
    /// start of a request): the task reads them before anything else.
    pub unread: Vec<u8>,
    /// The task waiting to read, woken when the hook leaves it something
    /// (bytes in `unread`, records to send).
    pub reader: Option<Waker>,
}

impl TlsConnection {
    /// Wakes the task reading the connection.
    pub fn wake_reader(&mut self) {
        if let Some(waker) = self.reader.take() {
            waker.wake();
        }
    }
}

impl Transport {
    /// Runs the server side of a TLS handshake on `stream`. A client that
    /// is not speaking TLS (a plain client on the TLS port), fails the
    /// handshake or stalls past [`HANDSHAKE_TIMEOUT`] is closed: None.
    pub async fn accept_tls(
        config: Arc<rustls::ServerConfig>,
        stream: TcpStream,
    ) -> Option<Transport> {
        let deadline = tokio::time::Instant::now() + HANDSHAKE_TIMEOUT;
        // A client that does not open with a TLS handshake record (a plain
        // client on the TLS port) is closed without a word, as Redis closes
        // it: no TLS alert it would read as a reply.
        let mut first = [0u8; 1];
        match tokio::time::timeout_at(deadline, stream.peek(&mut first)).await {
            Ok(Ok(1)) if first[0] == TLS_HANDSHAKE_RECORD => {}
            Ok(Ok(1)) => {
                close_unread(stream).await;
                return None;
            }
            _ => return None,
        }
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        match tokio::time::timeout_at(deadline, acceptor.accept(stream)).await {
            Ok(Ok(tls)) => Some(Transport::Tls(Rc::new(RefCell::new(TlsConnection {
                stream: tls,
                unread: Vec::new(),
                reader: None,
            })))),
            // The stream is dropped, which closes it.
            _ => None,
        }
    }

    /// The local address, as CLIENT LIST's `laddr` shows it.
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        match self {
            Transport::Plain(s) => s.local_addr(),
            Transport::Tls(s) => s.borrow().stream.get_ref().0.local_addr(),
        }
    }

    /// Whether the connection may move to another worker with its state:
    /// only a plain one (a TLS session's keys stay in this process).
    pub fn can_move(&self) -> bool {
        matches!(self, Transport::Plain(_))
    }
}

/// How long a plain client on a TLS port may go on sending before it is
/// closed.
const PLAIN_CLIENT_LINGER: Duration = Duration::from_secs(1);

/// Closes a connection whose input is not read: FIN first, then what the
/// client sent is read and dropped (for a moment at most), so that the
/// close is not a reset.
async fn close_unread(mut stream: TcpStream) {
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(PLAIN_CLIENT_LINGER, async {
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}

impl AsRawFd for Transport {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Transport::Plain(s) => s.as_raw_fd(),
            Transport::Tls(s) => s.borrow().stream.get_ref().0.as_raw_fd(),
        }
    }
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(s) => {
                let mut conn = s.borrow_mut();
                if !conn.unread.is_empty() {
                    let n = conn.unread.len().min(buf.remaining());
                    buf.put_slice(&conn.unread[..n]);
                    conn.unread.drain(..n);
                    return Poll::Ready(Ok(()));
                }
                // Records a write left in rustls's buffer (the socket was
                // full) go out here: every front end goes back to reading
                // after it writes, and a pending flush wakes this task
                // when the socket can take them.
                let _ = Pin::new(&mut conn.stream).poll_flush(cx);
                let read = Pin::new(&mut conn.stream).poll_read(cx, buf);
                if read.is_pending() {
                    conn.reader = Some(cx.waker().clone());
                }
                read
            }
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Tls(s) => {
                let stream = &mut s.borrow_mut().stream;
                // Earlier records first, so that rustls's buffer stays
                // bounded; then the new ones are sent as far as the
                // socket takes them (the rest by the next read or write).
                std::task::ready!(Pin::new(&mut *stream).poll_flush(cx))?;
                let n = std::task::ready!(Pin::new(&mut *stream).poll_write(cx, buf))?;
                let _ = Pin::new(stream).poll_flush(cx);
                Poll::Ready(Ok(n))
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Transport::Tls(s) => {
                let stream = &mut s.borrow_mut().stream;
                std::task::ready!(Pin::new(&mut *stream).poll_flush(cx))?;
                let n = std::task::ready!(Pin::new(&mut *stream).poll_write_vectored(cx, bufs))?;
                let _ = Pin::new(stream).poll_flush(cx);
                Poll::Ready(Ok(n))
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Transport::Plain(s) => s.is_write_vectored(),
            Transport::Tls(s) => s.borrow().stream.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_flush(cx),
            Transport::Tls(s) => Pin::new(&mut s.borrow_mut().stream).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(s) => Pin::new(&mut s.borrow_mut().stream).poll_shutdown(cx),
        }
    }
}

/// Whether a connection can be handed to another worker with its client's
/// state (`connection::run` moves only those).
pub(crate) trait Movable {
    /// True unless the connection has state that cannot leave this
    /// process (a TLS session).
    fn movable(&self) -> bool {
        true
    }
}

impl Movable for TcpStream {}
impl Movable for tokio::net::UnixStream {}
impl Movable for tokio::io::DuplexStream {}

impl Movable for Transport {
    fn movable(&self) -> bool {
        self.can_move()
    }
}
