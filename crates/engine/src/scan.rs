//! The SCAN family's arguments and replies, shared by SCAN, HSCAN, SSCAN
//! and ZSCAN: the cursor, `MATCH` / `COUNT` (and SCAN's `TYPE`) as Redis's
//! `scanGenericCommand` reads them, and the reply's shape.

use store::ValueType;

use crate::command::Arg;
use crate::engine::Cx;
use crate::error::{CmdError, SYNTAX};
use crate::parse;

/// A cursor that is not a number.
pub(crate) const INVALID_CURSOR: &str = "ERR invalid cursor";

/// A SCAN, HSCAN, SSCAN or ZSCAN cursor as Redis's `strtoul` reads it: no
/// leading space, an optional sign (a `-` wraps around), decimal digits,
/// nothing after; the empty string is 0.
pub(crate) fn cursor(arg: &[u8]) -> Result<u64, CmdError> {
    let bad = || CmdError::msg(INVALID_CURSOR);
    let (neg, digits) = match arg.first() {
        Some(b'-') => (true, &arg[1..]),
        Some(b'+') => (false, &arg[1..]),
        _ => (false, arg),
    };
    if arg.is_empty() {
        // strtoul of "" is 0 with nothing left over.
        return Ok(0);
    }
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    let mut v: u64 = 0;
    for d in digits {
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add((d - b'0') as u64))
            .ok_or_else(bad)?;
    }
    Ok(if neg { v.wrapping_neg() } else { v })
}

/// The options after a SCAN-family cursor, as Redis's `scanGenericCommand`
/// parses them.
#[derive(Debug, Default)]
pub(crate) struct ScanOptions<'a> {
    /// COUNT: how much one step examines (Redis's default 10).
    pub(crate) count: usize,
    /// MATCH: a glob for keys, fields or members.
    pub(crate) pattern: Option<&'a [u8]>,
    /// TYPE (SCAN only): None for no filter, `Some(None)` for a type name
    /// that no key can have.
    pub(crate) vtype: Option<Option<ValueType>>,
}

impl ScanOptions<'_> {
    /// Whether `item` passes MATCH. The pattern `*` matches everything, the
    /// empty string too (Redis skips the matcher for it, and the matcher
    /// alone would not match an empty string).
    pub(crate) fn matches(&self, item: &[u8]) -> bool {
        match self.pattern {
            None | Some(b"*") => true,
            Some(p) => store::glob::glob_match(p, item, false),
        }
    }
}

/// Parses `MATCH pattern`, `COUNT n` (at least 1, else a syntax error, as
/// each is read) and, when `with_type` is set (SCAN), `TYPE name`, in any
/// order and repeated (the last wins). `args` are the arguments after the
/// cursor.
pub(crate) fn options<'a>(
    args: &'a [Arg<'_>],
    with_type: bool,
) -> Result<ScanOptions<'a>, CmdError> {
    let mut opts = ScanOptions {
        count: 10,
        ..ScanOptions::default()
    };
    let mut i = 0;
    while i < args.len() {
        let Some(value) = args.get(i + 1) else {
            return Err(CmdError::msg(SYNTAX));
        };
        if parse::is(&args[i], "count") {
            let n = parse::int(value)?;
            if n < 1 {
                return Err(CmdError::msg(SYNTAX));
            }
            // Capped so that no caller sizes a buffer by a client's number.
            opts.count = n.min(i32::MAX as i64) as usize;
        } else if parse::is(&args[i], "match") {
            opts.pattern = Some(value);
        } else if with_type && parse::is(&args[i], "type") {
            opts.vtype = Some(ValueType::from_name(value));
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        i += 2;
    }
    Ok(opts)
}

/// Writes a page: the next cursor (0 when the iteration is over), then an
/// array header for `items` elements, which the caller writes after it
/// (HSCAN and ZSCAN write two per entry, flat, in RESP3 too).
pub(crate) fn reply_header(cx: &mut Cx<'_>, next: u64, items: usize) {
    cx.out.array_len(2);
    cx.out.bulk(next.to_string().as_bytes());
    cx.out.array_len(items);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_reject_what_strtoul_would_not_consume() {
        assert_eq!(cursor(b"18446744073709551615").unwrap(), u64::MAX);
        for bad in [&b"x"[..], b" 1", b"1 ", b"-", b"18446744073709551616"] {
            assert_eq!(cursor(bad).unwrap_err().text(), INVALID_CURSOR);
        }
    }

    #[test]
    fn cursors_parse_like_strtoul() {
        assert_eq!(cursor(b"0").unwrap(), 0);
        assert_eq!(cursor(b"").unwrap(), 0);
        assert_eq!(cursor(b"+12").unwrap(), 12);
        assert_eq!(cursor(b"-1").unwrap(), u64::MAX);
        assert_eq!(cursor(b"007").unwrap(), 7);
        for bad in [&b"x"[..], b" 1", b"1 ", b"+", b"-", b"18446744073709551616"] {
            assert_eq!(cursor(bad).unwrap_err().text(), INVALID_CURSOR);
        }
    }

    #[test]
    fn scan_options_follow_scan_generic_command() {
        let a = |w: &[&'static str]| -> Vec<Arg<'static>> {
            w.iter().map(|s| Arg::Borrowed(s.as_bytes())).collect()
        };
        let args = a(&[]);
        let o = options(&args, false).unwrap();
        assert_eq!((o.count, o.pattern, o.vtype), (10, None, None));
        let args = a(&["MATCH", "a*", "count", "3", "match", "b*"]);
        let o = options(&args, false).unwrap();
        assert_eq!((o.count, o.pattern), (3, Some(&b"b*"[..])));
        let args = a(&["type", "hash"]);
        assert_eq!(
            options(&args, true).unwrap().vtype,
            Some(Some(ValueType::Hash))
        );
        let args = a(&["count", "99999999999"]);
        assert_eq!(options(&args, true).unwrap().count, i32::MAX as usize);
        for bad in [
            &["type", "hash"][..],
            &["count"],
            &["count", "0"],
            &["count", "3", "count", "-1"],
            &["match"],
            &["novalues"],
        ] {
            assert_eq!(options(&a(bad), false).unwrap_err().text(), SYNTAX);
        }
        assert_eq!(
            options(&a(&["count", "x"]), false).unwrap_err().text(),
            crate::error::NOT_INTEGER
        );
    }

    #[test]
    fn match_star_takes_the_empty_string() {
        let mut o = ScanOptions::default();
        assert!(o.matches(b""));
        o.pattern = Some(b"*");
        assert!(o.matches(b""));
        o.pattern = Some(b"a?");
        assert!(o.matches(b"ab"));
        assert!(!o.matches(b"b"));
    }
}
