//! Argument parsing with Redis's rules and error strings, shared by every
//! command file.

use crate::error::CmdError;

/// An integer argument (Redis's `string2ll`): `ERR value is not an integer or
/// out of range` otherwise.
pub(crate) fn int(arg: &[u8]) -> Result<i64, CmdError> {
    store::parse_i64(arg).ok_or(CmdError::not_integer())
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
