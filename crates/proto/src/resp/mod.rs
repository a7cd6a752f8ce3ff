//! RESP, the Redis protocol: decoding client requests
//! ([`RequestParser`]) and encoding replies in RESP2 or RESP3
//! ([`ReplyWriter`]).
//!
//! The yardstick is Redis 7.0: the request parser ports `processInputBuffer`,
//! `processMultibulkBuffer` and `processInlineBuffer` (`src/networking.c`),
//! `sdssplitargs` (`src/sds.c`) and `string2ll` (`src/util.c`); the writer
//! follows the `addReply*` functions of `src/networking.c`. Where the port
//! keeps a Redis quirk on purpose, the item's documentation says so.

mod inline;
pub(crate) mod number;
mod reply;
mod request;

pub use crate::ProtocolError;
pub use reply::ReplyWriter;
pub use request::{Args, ParseResult, RequestParser};

/// Redis's `PROTO_INLINE_MAX_SIZE` (64 KiB). While an inline request has no
/// `\n`, or a `*`/`$` header line has no `\r`, more than this many unconsumed
/// bytes is a protocol error ("too big inline request", "too big mbulk count
/// string", "too big bulk count string").
pub const PROTO_INLINE_MAX_SIZE: usize = 64 * 1024;

/// Redis's `PROTO_IOBUF_LEN` (16 KiB): how much Redis asks `read(2)` for at
/// a time, a reasonable read size for callers.
pub const PROTO_IOBUF_LEN: usize = 16 * 1024;

/// Redis's `PROTO_MBULK_BIG_ARG` (32 KiB): from this bulk length on, Redis
/// reads exactly the rest of the argument so that it can take over the query
/// buffer without a copy. A caller may use it the same way to size its reads.
pub const PROTO_MBULK_BIG_ARG: usize = 32 * 1024;

/// The default of Redis's `proto-max-bulk-len` (512 MB): a longer `$` length
/// is "invalid bulk length". Configurable per
/// [`RequestParser::with_max_bulk_len`].
pub const DEFAULT_PROTO_MAX_BULK_LEN: u64 = 512 * 1024 * 1024;

/// The largest `*` count Redis accepts (`INT_MAX`); a larger one is
/// "invalid multibulk length".
pub const MAX_MULTIBULK_LEN: i64 = i32::MAX as i64;

/// The default of Redis's `client-query-buffer-limit` (1 GB). Enforcing it is
/// the caller's job: Redis closes, without a reply, a connection whose
/// unconsumed input grows past it.
pub const DEFAULT_CLIENT_QUERY_BUFFER_LIMIT: usize = 1024 * 1024 * 1024;

/// The protocol version a connection speaks: RESP2 until `HELLO 3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Protocol {
    /// RESP2, the default.
    #[default]
    Resp2,
    /// RESP3, after `HELLO 3`.
    Resp3,
}

impl Protocol {
    /// The version for `HELLO`'s argument: `Some` for 2 and 3, `None` for any
    /// other number (Redis then answers `NOPROTO`).
    pub fn from_version(version: i64) -> Option<Protocol> {
        match version {
            2 => Some(Protocol::Resp2),
            3 => Some(Protocol::Resp3),
            _ => None,
        }
    }

    /// The version number, 2 or 3 (`proto` in `HELLO`'s reply).
    pub fn version(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}
