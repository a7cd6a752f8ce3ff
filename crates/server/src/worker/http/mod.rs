//! HTTP clients on the HTTP port: commands in the URI, raw values, /metrics,
//! /health and /console, event streams of pub/sub channels, and WebSocket
//! upgrades (`resp`, `json` and `term` sub-protocols). What each URI does
//! is documented in `docs/http.md`.
//!
//! * [`conn`]: the keep-alive loop (read, answer every complete request in
//!   the buffer, one write) and the request handlers.
//! * [`websocket`]: an upgraded connection, bridged to the RESP connection
//!   loop through an in-process pipe.
//! * [`term`]: the `term` sub-protocol's line editor and reply formatter.
//! * [`push`]: tells pushed pub/sub frames from replies for `json` and
//!   `term`.
//! * [`sse`]: Server-Sent Events (`/sub/<channel>`, `/psub/<pattern>`),
//!   bridged to the RESP connection loop like a WebSocket.
//! * [`metrics`]: the Prometheus exposition.

mod conn;
mod metrics;
mod push;
mod sse;
mod term;
mod websocket;

use std::rc::Rc;

use crate::worker::Worker;

/// Serves one HTTP (or WebSocket) connection.
pub(crate) async fn serve(
    worker: Rc<Worker>,
    stream: crate::worker::transport::Transport,
    peer: std::net::SocketAddr,
) {
    conn::serve(worker, stream, peer).await
}
