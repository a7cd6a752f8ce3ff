//! The engine's one error type: the exact text Redis 7.0 replies with. Store
//! errors are mapped to Redis's strings here and nowhere else (STYLE 7).

use std::borrow::Cow;
use std::fmt;

/// A command failed; the text is the whole error reply without `-` and CRLF,
/// e.g. `ERR syntax error` or `WRONGTYPE Operation against …`.
#[derive(Clone, PartialEq, Eq)]
pub struct CmdError(Cow<'static, str>);

/// `ERR syntax error`.
pub const SYNTAX: &str = "ERR syntax error";
/// Not an integer, as Redis says it for every integer argument.
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// Not a float.
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
/// WRONGTYPE.
pub const WRONG_TYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// An increment that would overflow.
pub const OVERFLOW: &str = "ERR increment or decrement would overflow";
/// Out of memory under `noeviction`.
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
/// RENAME of a missing key.
pub const NO_SUCH_KEY: &str = "ERR no such key";
/// A string would pass proto-max-bulk-len.
pub const TOO_LARGE: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
/// SELECT/MOVE/COPY of a db out of range.
pub const BAD_DB: &str = "ERR DB index is out of range";
/// COPY/MOVE onto itself.
pub const SAME_OBJECT: &str = "ERR source and destination objects are the same";
/// A negative or zero expire time.
pub const BAD_EXPIRE: &str = "ERR invalid expire time in '{}' command";

impl CmdError {
    /// An error with a fixed text.
    pub const fn msg(text: &'static str) -> CmdError {
        CmdError(Cow::Borrowed(text))
    }

    /// An error with a built text.
    pub fn owned(text: String) -> CmdError {
        CmdError(Cow::Owned(text))
    }

    /// `ERR syntax error`.
    pub const fn syntax() -> CmdError {
        CmdError::msg(SYNTAX)
    }

    /// `ERR value is not an integer or out of range`.
    pub const fn not_integer() -> CmdError {
        CmdError::msg(NOT_INTEGER)
    }

    /// `ERR wrong number of arguments for 'NAME' command`.
    pub fn arity(name: &str) -> CmdError {
        CmdError::owned(format!(
            "ERR wrong number of arguments for '{name}' command"
        ))
    }

    /// `ERR invalid expire time in 'NAME' command`.
    pub fn bad_expire(name: &str) -> CmdError {
        CmdError::owned(BAD_EXPIRE.replace("{}", name))
    }

    /// The reply text.
    pub fn text(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CmdError({:?})", self.0)
    }
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CmdError {}

impl From<store::Error> for CmdError {
    fn from(e: store::Error) -> CmdError {
        use store::Error as E;
        match e {
            E::WrongType => CmdError::msg(WRONG_TYPE),
            E::NotInteger => CmdError::msg(NOT_INTEGER),
            E::Overflow => CmdError::msg(OVERFLOW),
            E::OutOfMemory => CmdError::msg(OOM),
            E::NoSuchKey => CmdError::msg(NO_SUCH_KEY),
            E::TooLarge => CmdError::msg(TOO_LARGE),
            E::BadDb => CmdError::msg(BAD_DB),
            E::SameObject => CmdError::msg(SAME_OBJECT),
            // Redis's reply when its AOF cannot be written.
            gone @ E::LogWriterGone(_) => CmdError::owned(format!("MISCONF {gone}")),
            other => CmdError::owned(format!("ERR {other}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_map_to_redis_texts() {
        assert_eq!(CmdError::from(store::Error::WrongType).text(), WRONG_TYPE);
        assert_eq!(
            CmdError::from(store::Error::Corrupted(16)).text(),
            "ERR segment corrupted at offset 0x10"
        );
        assert_eq!(
            CmdError::arity("get").text(),
            "ERR wrong number of arguments for 'get' command"
        );
        assert_eq!(
            CmdError::bad_expire("set").text(),
            "ERR invalid expire time in 'set' command"
        );
    }
}
