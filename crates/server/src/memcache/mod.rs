//! memcached clients: text, meta and binary over TCP (the protocol is told
//! by a connection's first byte, as memcached does) and UDP.

mod binary;
mod text;
mod udp;

use std::rc::Rc;
use std::time::Duration;

use crate::worker::Worker;

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
