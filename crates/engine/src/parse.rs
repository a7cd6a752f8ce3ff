//! Argument parsing with Redis's rules and error strings, shared by every
//! command file.

use crate::error::CmdError;

/// An integer argument (Redis's `string2ll`): `ERR value is not an integer or
/// out of range` otherwise.
pub(crate) fn int(arg: &[u8]) -> Result<i64, CmdError> {
    store::parse_i64(arg).ok_or(CmdError::not_integer())
}

/// A number of seconds as a float (decimals and exponents allowed, no
/// leading space, not NaN); None when `arg` is not one.
pub(crate) fn seconds(arg: &[u8]) -> Option<f64> {
    std::str::from_utf8(arg)
        .ok()
        .filter(|s| !s.is_empty() && !s.starts_with(char::is_whitespace))
        .and_then(|s| s.parse().ok())
        .filter(|f: &f64| !f.is_nan())
}

/// A blocking command's timeout in seconds (a float, as Redis 6+ takes it),
/// as milliseconds; None for 0, which waits forever.
pub(crate) fn timeout(arg: &[u8]) -> Result<Option<u64>, CmdError> {
    const NOT_FLOAT: &str = "ERR timeout is not a float or out of range";
    let secs = seconds(arg).ok_or(CmdError::msg(NOT_FLOAT))?;
    if secs < 0.0 {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    let ms = secs * 1000.0;
    if !ms.is_finite() || ms > i64::MAX as f64 {
        // Redis 7.0 converts to a long long first, which wraps a huge or
        // infinite timeout negative: its error says so.
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    Ok(match ms.ceil() as u64 {
        0 => None,
        ms => Some(ms),
    })
}

/// Whether `arg` is `word`, ignoring ASCII case.
pub(crate) fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_follow_string2ll() {
        assert_eq!(int(b"-12").unwrap(), -12);
        assert!(int(b"+1").is_err());
        assert!(int(b" 1").is_err());
        assert!(int(b"01").is_err());
        assert!(int(b"9223372036854775808").is_err());
    }
}
