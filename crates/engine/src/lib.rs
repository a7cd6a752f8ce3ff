//! shoal's command engine: the command table and the Redis semantics of every
//! command, over the shared-memory [`store`]. It knows nothing of sockets: the
//! server hands it parsed requests and a buffer for the replies.
//!
//! ```
//! use engine::{Config, Engine, ServerInfo, Session};
//! use std::borrow::Cow;
//! use store::{Location, OpenOptions, Store};
//!
//! let path = std::env::temp_dir().join(format!("shoal-engine-doc-{}", std::process::id()));
//! let store = Store::open(&OpenOptions {
//!     location: Location::Path(path.clone()),
//!     size: 8 << 20,
//!     ..OpenOptions::default()
//! })?;
//! let mut engine = Engine::new(store, Config::default(), ServerInfo::default())?;
//! let mut session = Session::new(1, engine.now_ms());
//! let mut out = Vec::new();
//! let req = |words: &[&'static str]| -> Vec<Cow<'static, [u8]>> {
//!     words.iter().map(|w| Cow::Borrowed(w.as_bytes())).collect()
//! };
//! engine.execute(&mut session, &req(&["SET", "k", "v"]), &mut out);
//! engine.execute(&mut session, &req(&["GET", "k"]), &mut out);
//! assert_eq!(out, b"+OK\r\n$1\r\nv\r\n");
//! # std::fs::remove_file(path).unwrap();
//! # Ok::<(), store::Error>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod acl;
mod cluster;
pub mod command;
mod config;
mod connection;
mod debug;
mod decimal;
mod diagnostics;
mod dump;
mod engine;
pub mod error;
mod key_specs;
mod keyspace;
mod keyspec;
pub mod memcache;
pub mod memcache_auth;
mod memory;
mod migrate;
mod notify;
mod parse;
mod pause;
mod persistence;
mod pubsub;
mod random;
pub mod rdb;
pub mod replication;
mod scan;
mod scripting;
mod server;
mod session;
mod stats;
mod tracking;
mod transaction;
mod types;
mod wire;

pub use config::{listen_address, setting_in, startup, tls_generation, Config};
pub use engine::{
    BlockRequest, BusyServer, ClientType, Cx, Engine, EngineStats, Flow, KillFilter, ListenAddress,
    Rebind, ServerInfo, ServerRequest, TimeoutReply, TlsCheck,
};
pub use pause::PauseMode;
pub use pubsub::{queue_key, ClientSubs, PubSub, MAILBOX_FRAGMENT, MAILBOX_MESSAGE};
pub use scripting::fuzzing as script_fuzzing;
pub use scripting::{
    functions_generation, libraries_for_replica, libraries_for_snapshot,
    replace_libraries_from_primary,
};

/// Removes the files shoal keeps beside a segment (the script cache, the
/// function libraries, a busy function's description, a replica's link
/// status): whoever removes the segment calls it, so that nothing is left
/// behind. Missing files are fine.
pub fn remove_side_files(segment: &std::path::Path) -> std::io::Result<()> {
    scripting::remove_side_files(segment)?;
    for file in [replication::status_path(segment), {
        let mut tmp = replication::status_path(segment).into_os_string();
        tmp.push(".tmp");
        tmp.into()
    }] {
        match std::fs::remove_file(file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}
pub use session::{ReplyMode, Session};
