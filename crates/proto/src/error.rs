//! The crate's one error type. Each variant knows the exact reply Redis 7.0
//! sends for it, so the server maps a protocol error to the wire in one place:
//! `writer.error(&err.message())`, then close the connection.

use std::borrow::Cow;
use std::fmt;

/// A request that Redis 7.0 would refuse with a protocol error.
///
/// Redis answers each of these with `-ERR Protocol error: …\r\n` and closes
/// the connection once the reply is written (`CLIENT_CLOSE_AFTER_REPLY`); the
/// caller should do the same. Nothing after the error in the buffer is parsed.
///
/// The texts were checked against `processMultibulkBuffer` and
/// `processInlineBuffer` in Redis 7.0's `src/networking.c`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolError {
    /// A `*` count line has no `\r` within
    /// [`PROTO_INLINE_MAX_SIZE`](crate::resp::PROTO_INLINE_MAX_SIZE) bytes.
    TooBigMultibulkCount,
    /// A `$` length line has no `\r` within
    /// [`PROTO_INLINE_MAX_SIZE`](crate::resp::PROTO_INLINE_MAX_SIZE) bytes.
    TooBigBulkCount,
    /// The `*` count is not an integer (as `string2ll` reads one) or is above
    /// `INT_MAX`.
    InvalidMultibulkLength,
    /// The `$` length is not an integer, is negative, or is above the
    /// configured `proto-max-bulk-len`.
    InvalidBulkLength,
    /// More than 10 arguments before authentication.
    UnauthenticatedMultibulkLength,
    /// An argument longer than 16 KiB before authentication.
    UnauthenticatedBulkLength,
    /// A line inside a multibulk request starts with this byte instead of `$`.
    ExpectedDollar(u8),
    /// An inline request has no `\n` within
    /// [`PROTO_INLINE_MAX_SIZE`](crate::resp::PROTO_INLINE_MAX_SIZE) bytes.
    TooBigInline,
    /// An inline request has an unterminated quote, or a closing quote followed
    /// by something other than a space.
    UnbalancedQuotes,
}

impl ProtocolError {
    /// The reply Redis sends, without the leading `-` and the trailing CRLF:
    /// for example `ERR Protocol error: invalid bulk length`. It fits
    /// [`ReplyWriter::error`](crate::resp::ReplyWriter::error) as it is.
    ///
    /// These are bytes, not a `str`: Redis formats the offending byte of
    /// [`ExpectedDollar`](Self::ExpectedDollar) with `%c`, so it may be any
    /// byte. As in Redis's `addReplyErrorFormat`, a `\r` or `\n` there becomes a
    /// space so the reply stays one line.
    pub fn message(&self) -> Cow<'static, [u8]> {
        let text: &'static str = match self {
            ProtocolError::TooBigMultibulkCount => "ERR Protocol error: too big mbulk count string",
            ProtocolError::TooBigBulkCount => "ERR Protocol error: too big bulk count string",
            ProtocolError::InvalidMultibulkLength => "ERR Protocol error: invalid multibulk length",
            ProtocolError::InvalidBulkLength => "ERR Protocol error: invalid bulk length",
            ProtocolError::UnauthenticatedMultibulkLength => {
                "ERR Protocol error: unauthenticated multibulk length"
            }
            ProtocolError::UnauthenticatedBulkLength => {
                "ERR Protocol error: unauthenticated bulk length"
            }
            ProtocolError::TooBigInline => "ERR Protocol error: too big inline request",
            ProtocolError::UnbalancedQuotes => "ERR Protocol error: unbalanced quotes in request",
            ProtocolError::ExpectedDollar(got) => {
                let got = match *got {
                    b'\r' | b'\n' => b' ',
                    b => b,
                };
                let mut msg = b"ERR Protocol error: expected '$', got '".to_vec();
                msg.push(got);
                msg.push(b'\'');
                return Cow::Owned(msg);
            }
        };
        Cow::Borrowed(text.as_bytes())
    }

    /// The short reason Redis writes to its log with `setProtocolError`
    /// ("Protocol error (…) from client: …"), for the server's own log line.
    pub fn log_reason(&self) -> &'static str {
        match self {
            ProtocolError::TooBigMultibulkCount => "too big mbulk count string",
            ProtocolError::TooBigBulkCount => "too big bulk count string",
            ProtocolError::InvalidMultibulkLength => "invalid mbulk count",
            ProtocolError::InvalidBulkLength => "invalid bulk length",
            ProtocolError::UnauthenticatedMultibulkLength => "unauthenticated multibulk length",
            ProtocolError::UnauthenticatedBulkLength => "unauthenticated bulk length",
            ProtocolError::ExpectedDollar(_) => "expected $ but got something else",
            ProtocolError::TooBigInline => "too big inline request",
            ProtocolError::UnbalancedQuotes => "unbalanced quotes in inline request",
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.message()))
    }
}

impl std::error::Error for ProtocolError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_dollar_keeps_the_byte_but_never_a_line_break() {
        let m = ProtocolError::ExpectedDollar(b'f').message();
        assert_eq!(&*m, b"ERR Protocol error: expected '$', got 'f'");
        let m = ProtocolError::ExpectedDollar(0xff).message();
        assert_eq!(&*m, b"ERR Protocol error: expected '$', got '\xff'");
        let m = ProtocolError::ExpectedDollar(b'\r').message();
        assert_eq!(&*m, b"ERR Protocol error: expected '$', got ' '");
        let m = ProtocolError::ExpectedDollar(b'\n').message();
        assert_eq!(&*m, b"ERR Protocol error: expected '$', got ' '");
    }

    #[test]
    fn display_is_the_message() {
        assert_eq!(
            ProtocolError::InvalidBulkLength.to_string(),
            "ERR Protocol error: invalid bulk length"
        );
    }
}
