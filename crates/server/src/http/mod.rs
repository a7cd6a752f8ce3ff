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
use std::time::Duration;

use crate::worker::Worker;

/// Accepts HTTP connections until the worker drains (the worker aborts this
/// task then).
pub(crate) async fn accept(worker: Rc<Worker>, listener: tokio::net::TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                tokio::task::spawn_local(conn::serve(worker.clone(), stream, peer));
            }
            // Out of file descriptors and the like: back off, do not spin.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}
