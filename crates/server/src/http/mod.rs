//! HTTP clients: commands in the URI, raw values, /metrics and /health, and
//! WebSocket upgrades (`resp`, `json` and `term` sub-protocols).

use std::rc::Rc;

use crate::worker::Worker;

/// Accepts HTTP connections until the worker drains.
pub(crate) async fn accept(worker: Rc<Worker>, listener: tokio::net::TcpListener) {
    let _ = (worker, listener);
}
