//! The pseudo-random numbers behind SPOP, SRANDMEMBER, HRANDFIELD (and any
//! other command that picks at random): xorshift64*, one generator per
//! thread, so one per engine, with no lock and no crate. It needs to be
//! fast and uniform enough for sampling, not unpredictable: nothing secret
//! depends on it.

use std::cell::Cell;
use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};

use crate::error::CmdError;

/// A count out of the range a command serves.
pub(crate) const OUT_OF_RANGE: &str = "ERR value is out of range";
/// A count of -2^63, which has no positive counterpart.
pub(crate) const COUNT_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";

thread_local! {
    static STATE: Cell<u64> = Cell::new(seed());
}

/// A seed from std's randomly keyed hasher (keyed from the OS once per
/// thread), so that workers and runs do not repeat each other's choices.
fn seed() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    // xorshift's state must not be zero.
    h.finish() | 1
}

/// The next number.
pub(crate) fn next() -> u64 {
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

/// A number in `0..n` (0 when `n` is 0), by Lemire's multiply-shift: the
/// bias is below n / 2^64.
pub(crate) fn below(n: u64) -> u64 {
    ((u128::from(next()) * u128::from(n)) >> 64) as u64
}

/// `count` distinct numbers of `0..n`, ascending (all of them when `count
/// >= n`), by Floyd's algorithm: O(count) time and memory whatever `n` is.
pub(crate) fn distinct(n: u64, count: u64) -> Vec<u64> {
    if count >= n {
        return (0..n).collect();
    }
    let mut picked = HashSet::with_capacity(count as usize);
    for j in n - count..n {
        let t = below(j + 1);
        if !picked.insert(t) {
            picked.insert(j);
        }
    }
    let mut out: Vec<u64> = picked.into_iter().collect();
    out.sort_unstable();
    out
}

/// The count of SRANDMEMBER, HRANDFIELD or ZRANDMEMBER: any integer but
/// -2^63 (Redis's range -LONG_MAX..LONG_MAX), as a magnitude and whether
/// repeats are allowed (a negative count).
pub(crate) fn count(arg: &[u8]) -> Result<(u64, bool), CmdError> {
    let n = crate::parse::int(arg)?;
    if n == i64::MIN {
        return Err(CmdError::msg(COUNT_RANGE));
    }
    Ok((n.unsigned_abs(), n < 0))
}

/// Refuses a sample with repeats (a negative count: SRANDMEMBER,
/// HRANDFIELD) whose reply would pass `limit` bytes, judged by the mean
/// size of the collection's `len` items of `bytes` bytes in all. Redis
/// writes such a reply however large (`SRANDMEMBER k -9223372036854775807`
/// never ends); here a reply is built whole in memory first, so it is
/// bounded, with the error Redis gives HRANDFIELD for a count it cannot
/// serve.
pub(crate) fn check_repeats(count: u64, bytes: u64, len: u64, limit: u64) -> Result<(), CmdError> {
    // RESP framing of an item: `$<len>\r\n…\r\n`, or more in a pair.
    const FRAMING: u64 = 16;
    let per_item = bytes / len.max(1) + FRAMING;
    if count.saturating_mul(per_item) > limit {
        return Err(CmdError::msg(OUT_OF_RANGE));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut seen = [false; 7];
        for _ in 0..1000 {
            let r = below(7);
            seen[r as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(below(0), 0);
        assert_eq!(below(1), 0);
    }

    #[test]
    fn distinct_picks_are_distinct_and_sorted() {
        for (n, count) in [(10, 3), (10, 9), (10, 10), (10, 50), (1 << 40, 5), (0, 3)] {
            let d = distinct(n, count);
            assert_eq!(d.len() as u64, count.min(n));
            assert!(d.windows(2).all(|w| w[0] < w[1]));
            assert!(d.iter().all(|&i| i < n));
        }
    }

    #[test]
    fn huge_repeated_samples_are_refused() {
        assert!(check_repeats(1000, 10, 2, 1 << 20).is_ok());
        assert!(check_repeats(0, 0, 0, 0).is_ok());
        let e = check_repeats(u64::MAX / 2, 10, 2, 512 << 20).unwrap_err();
        assert_eq!(e.text(), OUT_OF_RANGE);
    }
}
