//! shoal's wire protocols as sans-IO codecs: functions over `&[u8]` that
//! return "need more bytes", a frame borrowing the buffer, or an error. No
//! runtime, no sockets; the server owns the buffers and the I/O.
//!
//! - [`resp`]: Redis's RESP2/RESP3, decoding requests the way Redis 7.0 does
//!   (error texts included) and encoding replies in either version;
//! - [`memcache`]: memcached's text and meta commands, its binary protocol and
//!   the UDP frame header, with memcached 1.6's error lines;
//! - [`http`]: HTTP/1.1 request heads and bodies, and commands in the URI;
//! - [`websocket`]: the RFC 6455 handshake and frames;
//! - [`json`]: RESP replies as JSON, and JSON arrays as commands;
//! - [`nats`]: the NATS client protocol, with nats-server 2.9's limits and
//!   error lines.
//!
//! ```
//! use proto::resp::{Protocol, ReplyWriter, RequestParser};
//!
//! // Two pipelined requests, one multibulk and one inline.
//! let input = b"*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\nPING\r\n";
//! let mut parser = RequestParser::new();
//! let mut out = Vec::new();
//! let mut rest = &input[..];
//! while let Some((args, consumed)) = parser.parse(rest)? {
//!     let mut w = ReplyWriter::new(&mut out, Protocol::Resp2);
//!     match args.first().map(|a| a.as_ref()) {
//!         Some(b"ECHO") => w.bulk(&args[1]),
//!         Some(b"PING") => w.simple(b"PONG"),
//!         Some(_) => w.error(b"ERR unknown command"),
//!         None => {} // an empty request: Redis skips it
//!     }
//!     rest = &rest[consumed..];
//! }
//! assert!(rest.is_empty());
//! assert_eq!(out, b"$5\r\nhello\r\n+PONG\r\n");
//!
//! // A protocol error carries the reply Redis sends before closing.
//! let err = RequestParser::new().parse(b"*1\r\nfoo\r\n").unwrap_err();
//! assert_eq!(&*err.message(), b"ERR Protocol error: expected '$', got 'f'");
//! # Ok::<(), proto::ProtocolError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod error;
pub mod http;
pub mod json;
pub mod memcache;
pub mod nats;
pub mod resp;
pub mod websocket;

#[doc(hidden)]
pub mod fuzzing;

pub use error::ProtocolError;
