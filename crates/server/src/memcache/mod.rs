//! memcached clients: text, meta and binary over TCP (the protocol is told
//! by a connection's first byte, as memcached does) and UDP.

mod binary;
mod text;
mod udp;

use std::rc::Rc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::worker::Worker;

/// Read size, and the initial size of a connection's buffers.
const IO_CHUNK: usize = 16 * 1024;

/// Reads more of a connection into `buf`. False when the client hung up or
/// the worker is draining: the connection then ends.
async fn read_more(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    shutdown: &mut watch::Receiver<bool>,
) -> std::io::Result<bool> {
    buf.reserve(IO_CHUNK);
    tokio::select! {
        n = stream.read_buf(buf) => Ok(n? > 0),
        _ = shutdown.changed() => Ok(false),
    }
}

/// Accepts memcached TCP connections until the worker drains (the worker
/// then aborts this task; each connection watches the drain itself).
pub(crate) async fn accept_tcp(worker: Rc<Worker>, listener: tokio::net::TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                tokio::task::spawn_local(text::run(worker.clone(), stream));
            }
            // Out of file descriptors and the like: back off, do not spin.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Serves memcached UDP requests until the worker drains.
pub(crate) async fn serve_udp(worker: Rc<Worker>, socket: tokio::net::UdpSocket) {
    udp::serve(worker, socket).await
}
