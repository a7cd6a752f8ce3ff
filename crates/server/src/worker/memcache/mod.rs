//! memcached clients: text, meta and binary over TCP (the protocol is told
//! by a connection's first byte, as memcached does) and UDP.

mod binary;
mod text;
mod udp;

use std::rc::Rc;

use crate::worker::transport::Transport;
use bytes::BytesMut;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use crate::worker::Worker;

/// Read size, and the initial size of a connection's buffers.
const IO_CHUNK: usize = 16 * 1024;

/// Reads more of a connection into `buf`. False when the client hung up or
/// the worker is draining: the connection then ends.
async fn read_more(
    stream: &mut Transport,
    buf: &mut BytesMut,
    shutdown: &mut watch::Receiver<bool>,
) -> std::io::Result<bool> {
    buf.reserve(IO_CHUNK);
    tokio::select! {
        n = stream.read_buf(buf) => Ok(n? > 0),
        _ = shutdown.changed() => Ok(false),
    }
}

/// Serves one memcached TCP connection (text, meta or binary).
pub(crate) async fn serve_tcp(worker: Rc<Worker>, stream: crate::worker::transport::Transport) {
    text::run(worker, stream).await
}

/// Serves memcached UDP requests until the worker drains.
pub(crate) async fn serve_udp(worker: Rc<Worker>, socket: tokio::net::UdpSocket) {
    udp::serve(worker, socket).await
}
