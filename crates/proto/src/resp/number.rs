//! Integers in and out of RESP text: a port of Redis's `string2ll` (the only
//! integer reader its request parser uses) and plain decimal writers.

/// Redis's `LONG_STR_SIZE`: a number of this many bytes or more is refused.
const LONG_STR_SIZE: usize = 21;

/// Reads `s` as an `i64` exactly as Redis 7.0's `string2ll` (`src/util.c`)
/// does, or `None` where it returns 0.
///
/// It is strict: no sign but `-`, no spaces, no leading zeros (only `"0"`
/// itself), no `"-0"`, and 1 to 20 bytes. `i64::MIN` is accepted.
pub(crate) fn string2ll(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() >= LONG_STR_SIZE {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    // The first digit is 1-9; that also refuses a lone "-".
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        // Up to 2^63, which is i64::MIN.
        if v > i64::MIN.unsigned_abs() {
            return None;
        }
        Some(0i64.wrapping_sub_unsigned(v))
    } else {
        i64::try_from(v).ok()
    }
}

/// Appends the decimal digits of `v` (the codecs' one integer writer: RESP
/// lengths, memcached numbers, HTTP status codes and lengths).
pub(crate) fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        // `v % 10` is below 10, so the cast cannot truncate.
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends the decimal digits of `v`.
pub(crate) fn push_u128(out: &mut Vec<u8>, mut v: u128) {
    if let Ok(small) = u64::try_from(v) {
        return push_u64(out, small);
    }
    let mut buf = [0u8; 39];
    let mut i = buf.len();
    loop {
        i -= 1;
        // `v % 10` is below 10, so the cast cannot truncate.
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends the decimal digits of `v`, with a `-` when negative.
pub(crate) fn push_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    push_u128(out, u128::from(v.unsigned_abs()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string2ll_accepts_what_redis_accepts() {
        let ok: &[(&[u8], i64)] = &[
            (b"0", 0),
            (b"1", 1),
            (b"-1", -1),
            (b"1234567890", 1_234_567_890),
            (b"9223372036854775807", i64::MAX),
            (b"-9223372036854775808", i64::MIN),
        ];
        for (s, v) in ok {
            assert_eq!(string2ll(s), Some(*v), "{}", String::from_utf8_lossy(s));
        }
    }

    #[test]
    fn string2ll_refuses_what_redis_refuses() {
        let bad: &[&[u8]] = &[
            b"",
            b"-",
            b"+1",
            b" 1",
            b"1 ",
            b"01",
            b"-0",
            b"00",
            b"1a",
            b"0x10",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"99999999999999999999",
            // 21 bytes is refused before it is read, even when it is a number.
            b"000000000000000000001",
            b"18446744073709551616",
        ];
        for s in bad {
            assert_eq!(string2ll(s), None, "{}", String::from_utf8_lossy(s));
        }
    }

    #[test]
    fn decimal_writers() {
        let mut out = Vec::new();
        push_i64(&mut out, i64::MIN);
        out.push(b' ');
        push_i64(&mut out, 0);
        out.push(b' ');
        push_i64(&mut out, 42);
        out.push(b' ');
        push_u128(&mut out, u128::MAX);
        assert_eq!(
            out,
            b"-9223372036854775808 0 42 340282366920938463463374607431768211455"
        );
    }
}
