//! Exact decimal arithmetic for INCRBYFLOAT and HINCRBYFLOAT (DESIGN 1.7):
//! IEEE 754-2008 decimal128 (34 significant digits) through the `dec` crate,
//! so `1.10 + 2.2` is `3.3`, not `3.3000000000000003`.
//!
//! [`Decimal::parse`] accepts what Redis's `string2ld` (`strtold`) accepts,
//! except hexadecimal floats: an optional sign, digits with an optional point
//! (`5`, `5.`, `.5`), an optional exponent (`5.0e3`, `1E-2`), or `inf` /
//! `infinity` in any case. No spaces, no NaN, at most 5119 bytes, and a value
//! that overflows to infinity or underflows to zero is refused, as `strtold`'s
//! ERANGE makes Redis refuse it.
//!
//! [`Decimal`]'s `Display` mirrors Redis's `ld2string(…, LD_STR_HUMAN)`: plain
//! decimal notation, never an exponent, no trailing zeros after the point, no
//! trailing point, `0` for zero of either sign. Unlike Redis, which rounds to
//! 17 places after the point (`%.17Lf`), every digit of the decimal128 value
//! is kept: exactness is the point.
//!
//! ```text
//! parse("1.10") + parse("2.2") -> "3.3"
//! parse("5.0e3")               -> "5000"
//! parse("-.5")                 -> "-0.5"
//! ```

use std::fmt;

use dec::{Context, Decimal128};

/// Redis's `MAX_LONG_DOUBLE_CHARS`: longer inputs are not numbers.
const MAX_CHARS: usize = 5 * 1024;

/// A finite or infinite decimal128 value (never NaN).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Decimal(Decimal128);

impl Decimal {
    /// Zero, the value of a missing key.
    pub(crate) const ZERO: Decimal = Decimal(Decimal128::ZERO);

    /// Parses a number as Redis's `string2ld` would (see the module docs);
    /// None when it is not one.
    pub(crate) fn parse(text: &[u8]) -> Option<Decimal> {
        if text.is_empty() || text.len() >= MAX_CHARS {
            return None;
        }
        let body = match text[0] {
            b'-' | b'+' => &text[1..],
            _ => text,
        };
        let is_inf = body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity");
        let nonzero = if is_inf { true } else { check_syntax(body)? };
        let mut cx = Context::<Decimal128>::default();
        let d = cx.parse(text.to_vec()).ok()?;
        // strtold's ERANGE: overflow to infinity, or a non-zero input that
        // underflowed to zero.
        if d.is_nan() || (d.is_infinite() && !is_inf) || (d.is_zero() && nonzero) {
            return None;
        }
        Some(Decimal(d))
    }

    /// The sum, or None when it is NaN or infinite (`inf + -inf`, overflow),
    /// which Redis refuses to store.
    pub(crate) fn checked_add(self, other: Decimal) -> Option<Decimal> {
        let mut cx = Context::<Decimal128>::default();
        let sum = cx.add(self.0, other.0);
        (sum.is_finite()).then_some(Decimal(sum))
    }
}

/// Checks `digits[.digits][e[+-]digits]` with at least one mantissa digit;
/// returns whether any mantissa digit is non-zero.
fn check_syntax(body: &[u8]) -> Option<bool> {
    let mut i = 0;
    let mut digits = 0;
    let mut nonzero = false;
    let mut seen_point = false;
    while i < body.len() {
        match body[i] {
            b'0'..=b'9' => {
                digits += 1;
                nonzero |= body[i] != b'0';
            }
            b'.' if !seen_point => seen_point = true,
            b'e' | b'E' => break,
            _ => return None,
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    if i < body.len() {
        // The exponent: e, an optional sign, at least one digit.
        i += 1;
        if matches!(body.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp = body.get(i..)?;
        if exp.is_empty() || !exp.iter().all(u8::is_ascii_digit) {
            return None;
        }
    }
    Some(nonzero)
}

impl fmt::Display for Decimal {
    /// Plain notation as Redis's `LD_STR_HUMAN` (see the module docs);
    /// infinities print as `inf` / `-inf`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.is_infinite() {
            return f.write_str(if d.is_negative() { "-inf" } else { "inf" });
        }
        if !d.is_finite() {
            return f.write_str("nan");
        }
        let coef = d.coefficient_digits();
        let first = coef.iter().position(|&c| c != 0);
        let Some(first) = first else {
            return f.write_str("0");
        };
        let digits: String = coef[first..]
            .iter()
            .map(|&c| char::from(b'0' + c))
            .collect();
        let exp = i64::from(d.exponent());
        let mut s = String::with_capacity(digits.len() + exp.unsigned_abs() as usize + 3);
        if d.is_negative() {
            s.push('-');
        }
        if exp >= 0 {
            s.push_str(&digits);
            s.push_str(&"0".repeat(exp as usize));
            return f.write_str(&s);
        }
        let point = digits.len() as i64 + exp;
        let (int, frac) = if point > 0 {
            let (a, b) = digits.split_at(point as usize);
            (a.to_string(), b.to_string())
        } else {
            let zeros = "0".repeat((-point) as usize);
            ("0".to_string(), zeros + &digits)
        };
        s.push_str(&int);
        let frac = frac.trim_end_matches('0');
        if !frac.is_empty() {
            s.push('.');
            s.push_str(frac);
        }
        f.write_str(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Decimal {
        Decimal::parse(s.as_bytes()).unwrap_or_else(|| panic!("{s:?} should parse"))
    }

    fn add(a: &str, b: &str) -> String {
        p(a).checked_add(p(b)).expect("finite").to_string()
    }

    #[test]
    fn sums_are_exact() {
        assert_eq!(add("1.10", "2.2"), "3.3");
        assert_eq!(add("0.1", "0.2"), "0.3");
        assert_eq!(add("10.5", "0.1"), "10.6");
        assert_eq!(add("5.0e3", "2.0e2"), "5200");
        assert_eq!(add("-1", "1"), "0");
        assert_eq!(add("-0", "-0"), "0");
        assert_eq!(add("3", "-5.5"), "-2.5");
        assert_eq!(add("0", "1e-20"), "0.00000000000000000001");
        assert_eq!(add("1e20", "1"), "100000000000000000001");
    }

    #[test]
    fn formatting_is_plain_without_trailing_zeros() {
        assert_eq!(p("10").to_string(), "10");
        assert_eq!(p("10.00").to_string(), "10");
        assert_eq!(p("1.500").to_string(), "1.5");
        assert_eq!(p("-.5").to_string(), "-0.5");
        assert_eq!(p("5.").to_string(), "5");
        assert_eq!(p("1E3").to_string(), "1000");
        assert_eq!(p("1.25e-3").to_string(), "0.00125");
        assert_eq!(p("+7").to_string(), "7");
        assert_eq!(p("-0.0").to_string(), "0");
        assert_eq!(p("1e40").to_string(), format!("1{}", "0".repeat(40)));
        assert_eq!(p("inf").to_string(), "inf");
        assert_eq!(p("-Infinity").to_string(), "-inf");
    }

    #[test]
    fn parse_refuses_what_strtold_refuses() {
        for bad in [
            "", " 1", "1 ", "abc", "1e", "1e+", "e5", ".", "-", "+", "nan", "NaN", "-nan", "1.2.3",
            "1x", "0x10", "1e5.5", "--1", "inf ", "infin", "1\0",
        ] {
            assert!(Decimal::parse(bad.as_bytes()).is_none(), "{bad:?}");
        }
        assert!(Decimal::parse("1".repeat(MAX_CHARS).as_bytes()).is_none());
        assert!(Decimal::parse("1".repeat(MAX_CHARS - 1).as_bytes()).is_some());
    }

    #[test]
    fn overflow_and_underflow_are_refused() {
        assert!(Decimal::parse(b"1e99999").is_none());
        assert!(Decimal::parse(b"-1e99999999999999999999").is_none());
        assert!(Decimal::parse(b"1e-99999").is_none());
        assert!(Decimal::parse(b"0e-99999").is_some());
        assert!(Decimal::parse(b"0e99999").is_some());
    }

    #[test]
    fn non_finite_sums_are_refused() {
        assert!(p("inf").checked_add(p("1")).is_none());
        assert!(p("inf").checked_add(p("-inf")).is_none());
        let big = p("9.999999999999999999999999999999999e6144");
        assert!(big.checked_add(big).is_none());
    }

    #[test]
    fn long_inputs_round_to_34_digits() {
        let d = p("1.00000000000000000000000000000000001");
        assert_eq!(d.to_string(), "1");
        assert_eq!(
            add("0.1234567890123456789012345678901234", "0"),
            "0.1234567890123456789012345678901234"
        );
    }
}
