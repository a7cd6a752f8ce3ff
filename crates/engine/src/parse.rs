//! Argument parsing with Redis's rules and error strings, shared by every
//! command file.

use crate::error::{CmdError, NOT_FLOAT};

/// An integer argument (Redis's `string2ll`): `ERR value is not an integer or
/// out of range` otherwise.
pub(crate) fn int(arg: &[u8]) -> Result<i64, CmdError> {
    store::parse_i64(arg).ok_or(CmdError::not_integer())
}

/// A non-negative integer argument with a custom error for negatives.
pub(crate) fn non_negative(arg: &[u8], negative: &'static str) -> Result<u64, CmdError> {
    let n = int(arg)?;
    u64::try_from(n).map_err(|_| CmdError::msg(negative))
}

/// A float argument as Redis's `getLongDoubleFromObject` reads one: decimal
/// or exponent notation, `inf`/`-inf`, no spaces, no NaN.
pub(crate) fn float(arg: &[u8]) -> Result<f64, CmdError> {
    let bad = || CmdError::msg(NOT_FLOAT);
    let text = std::str::from_utf8(arg).map_err(|_| bad())?;
    if text.is_empty()
        || text.starts_with(char::is_whitespace)
        || text.ends_with(char::is_whitespace)
    {
        return Err(bad());
    }
    let v: f64 = match text.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => text.parse().map_err(|_| bad())?,
    };
    if v.is_nan() {
        return Err(bad());
    }
    Ok(v)
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

    #[test]
    fn floats_refuse_nan_and_spaces() {
        assert_eq!(float(b"1.5").unwrap(), 1.5);
        assert_eq!(float(b"1e3").unwrap(), 1000.0);
        assert_eq!(float(b"-inf").unwrap(), f64::NEG_INFINITY);
        assert!(float(b"nan").is_err());
        assert!(float(b" 1").is_err());
        assert!(float(b"").is_err());
        assert!(float(b"abc").is_err());
    }

    #[test]
    fn negative_counts_get_the_given_error() {
        assert_eq!(non_negative(b"3", "ERR neg").unwrap(), 3);
        assert_eq!(
            non_negative(b"-3", "ERR neg").unwrap_err().text(),
            "ERR neg"
        );
    }
}
