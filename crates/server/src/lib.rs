//! shoal's server processes: the supervisor that starts and restarts worker
//! processes, and the workers, each one thread with a tokio `current_thread`
//! event loop that accepts clients on a SO_REUSEPORT listener shared with its
//! siblings and runs their requests through the [`engine`].
//!
//! Workers talk to each other through the segment: the worker registry and a
//! mailbox per worker (see `store`), plus a datagram to wake the receiver.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod channel;
mod client_cert;
mod error;
pub mod redislog;
pub mod simultaneous;
pub mod supervisor;
pub mod tls;
pub mod worker;

pub use channel::control_socket_path;
pub use error::Error;
pub use supervisor::persistence;
pub use supervisor::{serve, Balance, ServeOptions};
pub use worker::{run_worker, WorkerOptions};
