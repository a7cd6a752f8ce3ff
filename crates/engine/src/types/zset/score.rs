//! Scores as text: reading them the way Redis's C library does (`strtod`)
//! and writing them the way Redis 7.0 replies with them (`%.17g`).
//!
//! Redis reads a score in two ways. ZADD, ZINCRBY and WEIGHTS use
//! `getDoubleFromObject`: the whole argument must be a number, with no
//! leading space, and a value that overflows to infinity or underflows to
//! zero is refused ([`parse_score`]). The bounds of ZRANGEBYSCORE and kin use
//! `strtod` alone (`zslParseRange`): leading spaces are skipped, an empty
//! string is 0, and an overflow is simply infinity ([`parse_bound`]). Both
//! take hexadecimal floats (`0x1p3`) and `inf`/`infinity` in any case, and
//! both refuse NaN.

/// What `strtod` made of the start of a string.
struct Strtod {
    /// The value (NaN for `nan`).
    value: f64,
    /// Bytes consumed; 0 when no number was found (then `value` is 0).
    len: usize,
    /// `ERANGE`: a finite number overflowed to infinity or a non-zero one
    /// underflowed to zero.
    range_error: bool,
}

/// C's `isspace` in the "C" locale.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Reads the longest prefix of `s` that C's `strtod` reads as a number.
fn strtod(s: &[u8]) -> Strtod {
    let none = Strtod {
        value: 0.0,
        len: 0,
        range_error: false,
    };
    let mut i = s.iter().position(|&b| !is_space(b)).unwrap_or(s.len());
    let negative = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let rest = &s[i..];
    let starts =
        |word: &[u8]| rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word);
    let signed = |v: f64| if negative { -v } else { v };
    if starts(b"infinity") || starts(b"inf") {
        let n = if starts(b"infinity") { 8 } else { 3 };
        return Strtod {
            value: signed(f64::INFINITY),
            len: i + n,
            range_error: false,
        };
    }
    if starts(b"nan") {
        // An optional "(n-char-sequence)" follows; the value is NaN either
        // way, which every caller refuses, so where it ends is moot.
        return Strtod {
            value: f64::NAN,
            len: i + 3,
            range_error: false,
        };
    }
    let hex = (starts(b"0x"))
        && rest
            .get(2)
            .is_some_and(|&b| b.is_ascii_hexdigit() || b == b'.');
    let parsed = if hex {
        hex_float(&rest[2..])
    } else {
        decimal(rest)
    };
    match parsed {
        Some((value, used, range_error)) => Strtod {
            value: signed(value),
            len: i + used + if hex { 2 } else { 0 },
            range_error,
        },
        // "0x" with no digits after it is the number 0 followed by "x".
        None if hex => Strtod {
            value: signed(0.0),
            len: i + 1,
            range_error: false,
        },
        None => none,
    }
}

/// A decimal number at the start of `s` (no sign): its value, length and
/// range error, or None when `s` does not start with one.
fn decimal(s: &[u8]) -> Option<(f64, usize, bool)> {
    let digits = |from: usize| s[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let int = digits(0);
    let mut end = int;
    let mut frac = 0;
    if s.get(end) == Some(&b'.') {
        frac = digits(end + 1);
        if int + frac > 0 {
            end += 1 + frac;
        }
    }
    if int + frac == 0 {
        return None;
    }
    let nonzero = s[..end].iter().any(|b| matches!(b, b'1'..=b'9'));
    if matches!(s.get(end), Some(b'e' | b'E')) {
        let mut e = end + 1;
        if matches!(s.get(e), Some(b'+' | b'-')) {
            e += 1;
        }
        let exp_digits = digits(e);
        if exp_digits > 0 {
            end = e + exp_digits;
        }
    }
    // The prefix has Rust's float syntax, so this parse cannot fail.
    let value: f64 = std::str::from_utf8(&s[..end]).ok()?.parse().ok()?;
    // glibc also reports a subnormal result (an inexact one, as a decimal's
    // always is but for absurdly long ones).
    let range_error = value.is_infinite() || (value == 0.0 && nonzero) || value.is_subnormal();
    Some((value, end, range_error))
}

/// A hexadecimal float after its `0x`: hex digits with an optional point,
/// then an optional binary exponent `p[+-]digits`.
fn hex_float(s: &[u8]) -> Option<(f64, usize, bool)> {
    // The first 16 significant hex digits (64 bits) are kept; later ones
    // only matter as a sticky bit for rounding.
    let mut mantissa: u64 = 0;
    let mut kept = 0;
    let mut exp: i64 = 0;
    let mut sticky = false;
    let mut any = false;
    let mut i = 0;
    let mut seen_point = false;
    while let Some(&b) = s.get(i) {
        if b == b'.' && !seen_point {
            seen_point = true;
            i += 1;
            continue;
        }
        let Some(d) = (b as char).to_digit(16) else {
            break;
        };
        any = true;
        if mantissa == 0 && d == 0 {
            // A leading zero: only the point's position matters.
            if seen_point {
                exp -= 4;
            }
        } else if kept < 16 {
            mantissa = mantissa << 4 | u64::from(d);
            kept += 1;
            if seen_point {
                exp -= 4;
            }
        } else {
            sticky |= d != 0;
            if !seen_point {
                exp += 4;
            }
        }
        i += 1;
    }
    if !any {
        return None;
    }
    let mut end = i;
    if matches!(s.get(end), Some(b'p' | b'P')) {
        let mut e = end + 1;
        let negative = match s.get(e) {
            Some(b'-') => {
                e += 1;
                true
            }
            Some(b'+') => {
                e += 1;
                false
            }
            _ => false,
        };
        let start = e;
        let mut n: i64 = 0;
        while let Some(&b) = s.get(e).filter(|b| b.is_ascii_digit()) {
            // Saturate: beyond ±100000 every result is infinity or zero.
            n = (n * 10 + i64::from(b - b'0')).min(100_000);
            e += 1;
        }
        if e > start {
            exp += if negative { -n } else { n };
            end = e;
        }
    }
    if mantissa == 0 {
        return Some((0.0, end, false));
    }
    if sticky {
        // Below the 53 bits a double keeps: breaks a tie the right way.
        mantissa |= 1;
    }
    let mut value = mantissa as f64;
    // Scale in steps that stay within the exponent range of a double.
    let mut e = exp.clamp(-2200, 2200) as i32;
    while e != 0 {
        let step = e.clamp(-1000, 1000);
        value *= 2f64.powi(step);
        e -= step;
    }
    let range_error = value.is_infinite() || value == 0.0;
    Some((value, end, range_error))
}

/// A score argument as ZADD, ZINCRBY and WEIGHTS read it (Redis's
/// `getDoubleFromObject`): the whole argument is one number, not NaN, with no
/// leading space, neither overflowing nor underflowing to zero.
pub(crate) fn parse_score(arg: &[u8]) -> Option<f64> {
    if arg.first().is_none_or(|&b| is_space(b)) {
        return None;
    }
    let r = strtod(arg);
    let out_of_range = r.range_error && (r.value.is_infinite() || r.value == 0.0);
    (r.len == arg.len() && !r.value.is_nan() && !out_of_range).then_some(r.value)
}

/// A score bound without its `(` as ZRANGEBYSCORE reads it (plain `strtod`
/// in `zslParseRange`): leading spaces are skipped, an empty string is 0 and
/// an overflow is infinity; NaN and trailing bytes are refused.
pub(crate) fn parse_bound(text: &[u8]) -> Option<f64> {
    let r = strtod(text);
    // No conversion leaves the end pointer at the start: fine only when the
    // string is empty (the C code then sees its terminating NUL).
    let whole = if r.len == 0 {
        text.is_empty()
    } else {
        r.len == text.len()
    };
    (whole && !r.value.is_nan()).then_some(r.value)
}

/// A weight as SORT reads it (plain `strtod` in `sortCommand`): the value
/// as a C string (up to a NUL byte) must be one number, not NaN and with no
/// range error (`ERANGE`); leading spaces are skipped and an empty string is
/// 0.
pub(crate) fn parse_weight(text: &[u8]) -> Option<f64> {
    let text = text.split(|&b| b == 0).next().unwrap_or(text);
    let r = strtod(text);
    let whole = if r.len == 0 {
        text.is_empty()
    } else {
        r.len == text.len()
    };
    (whole && !r.value.is_nan() && !r.range_error).then_some(r.value)
}

/// A score as Redis 7.0's `addReplyDouble` writes it: `%.17g`, and `inf` /
/// `-inf` for the infinities.
pub(crate) fn format_score(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    // Seventeen significant digits, correctly rounded (ties to even, as
    // glibc's printf): d.dddddddddddddddde±x.
    let sci = format!("{:.16e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digits: Vec<u8> = mantissa.bytes().filter(|b| b.is_ascii_digit()).collect();
    let mut out = String::with_capacity(24);
    if x < 0.0 {
        out.push('-');
    }
    let text = |d: &[u8]| String::from_utf8_lossy(d).into_owned();
    if !(-4..17).contains(&exp) {
        while digits.len() > 1 && digits.last() == Some(&b'0') {
            digits.pop();
        }
        out.push_str(&text(&digits[..1]));
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&text(&digits[1..]));
        }
        out.push_str(&format!(
            "e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        ));
    } else if exp >= 0 {
        let (int, frac) = digits.split_at(exp as usize + 1);
        out.push_str(&text(int));
        let frac_len = frac.len() - frac.iter().rev().take_while(|&&b| b == b'0').count();
        if frac_len > 0 {
            out.push('.');
            out.push_str(&text(&frac[..frac_len]));
        }
    } else {
        while digits.last() == Some(&b'0') {
            digits.pop();
        }
        out.push_str("0.");
        out.push_str(&"0".repeat((-exp - 1) as usize));
        out.push_str(&text(&digits));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_print_as_redis_7_0() {
        // Each checked against redis-server 7.0.15.
        let cases: &[(f64, &str)] = &[
            (0.1, "0.10000000000000001"),
            (1.5, "1.5"),
            (3.0, "3"),
            (1e300, "1.0000000000000001e+300"),
            (1e-5, "1.0000000000000001e-05"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (-0.0, "-0"),
            (0.0, "0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::MAX, "1.7976931348623157e+308"),
            (0.3, "0.29999999999999999"),
            (1e17, "1e+17"),
            (1e16, "10000000000000000"),
            (1e20, "1e+20"),
            (2.5e-7, "2.4999999999999999e-07"),
            (1e-300, "1e-300"),
            (5e-324, "4.9406564584124654e-324"),
            (12345.678, "12345.678"),
            (-2.5, "-2.5"),
            (0.0001, "0.0001"),
            // An exact tie at the 17th digit rounds to even, as printf does.
            (2f64.powi(-25), "2.9802322387695312e-08"),
        ];
        for &(x, text) in cases {
            assert_eq!(format_score(x), text, "{x:e}");
        }
    }

    #[test]
    fn scores_parse_as_get_double_from_object() {
        let good: &[(&str, f64)] = &[
            ("1", 1.0),
            ("-1.5", -1.5),
            ("+2", 2.0),
            (".5", 0.5),
            ("5.", 5.0),
            ("1e3", 1000.0),
            ("1E-2", 0.01),
            ("inf", f64::INFINITY),
            ("-INF", f64::NEG_INFINITY),
            ("+Infinity", f64::INFINITY),
            ("0x10", 16.0),
            ("0x1p3", 8.0),
            ("0x.8", 0.5),
            ("-0x1.8p1", -3.0),
            ("4.9e-324", 5e-324),
            ("1.7976931348623157e308", f64::MAX),
        ];
        for &(text, v) in good {
            assert_eq!(parse_score(text.as_bytes()), Some(v), "{text}");
        }
        for bad in [
            "",
            " 1",
            "1 ",
            "nan",
            "-nan",
            "abc",
            "1e",
            "e1",
            ".",
            "1e400",
            "-1e400",
            "1e-400",
            "0x",
            "0x1p",
            "inf1",
            "infin",
            "1.2.3",
            "0x1p99999",
        ] {
            assert_eq!(parse_score(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn bounds_parse_as_strtod() {
        assert_eq!(parse_bound(b""), Some(0.0));
        assert_eq!(parse_bound(b" 2"), Some(2.0));
        assert_eq!(parse_bound(b"1e400"), Some(f64::INFINITY));
        assert_eq!(parse_bound(b"1e-400"), Some(0.0));
        assert_eq!(parse_bound(b"0x3"), Some(3.0));
        for bad in [" ", "2 ", "nan", "x", "[1", "1e400x"] {
            assert_eq!(parse_bound(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn hex_floats_round_like_strtod() {
        // 2^53 + 1 needs 54 bits: ties to even, down to 2^53.
        assert_eq!(parse_score(b"0x20000000000001"), Some(9007199254740992.0));
        // A set bit far to the right breaks the tie upwards.
        assert_eq!(
            parse_score(b"0x200000000000010000000001"),
            Some(9007199254740994.0 * 2f64.powi(40))
        );
        assert_eq!(parse_score(b"0x0000000000000000000001p-2"), Some(0.25));
    }
}
