//! Bitmaps: SETBIT, GETBIT, BITCOUNT, BITPOS and BITOP over string values
//! (Redis's `bitops.c`), with Redis 7.0's replies and error texts.
//!
//! Bit 0 is the most significant bit of byte 0. SETBIT is a read-modify-write
//! under the key's lock (`Handle::modify`), so it is atomic across processes;
//! BITOP reads its sources one by one and then writes its destination, inside
//! an exclusive section (`ATOMIC`), so no other worker sees or changes a key
//! in between.

use store::{Modify, SetOptions, ValueType};

use crate::command::{flags::*, Arg, CmdResult, Command};
use crate::engine::Cx;
use crate::error::{CmdError, SYNTAX};
use crate::notify::class;
use crate::parse;

/// A bit offset that is not a number, negative, or past proto-max-bulk-len.
pub(crate) const BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";
/// SETBIT's value is not 0 or 1.
pub(crate) const BIT_VALUE: &str = "ERR bit is not an integer or out of range";
/// BITPOS's bit is not 0 or 1.
pub(crate) const BITPOS_BIT: &str = "ERR The bit argument must be 1 or 0.";
/// BITOP NOT with several sources.
pub(crate) const BITOP_NOT_ONE_KEY: &str = "ERR BITOP NOT must be called with a single source key.";

/// A command of the `bitmap` group.
const fn cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: (i32, i32, i32),
    since: &'static str,
    summary: &'static str,
    handler: crate::command::Handler,
) -> Command {
    crate::command::spec(name, arity, flags, keys, "bitmap", since, summary, handler)
}

/// The bitmap commands.
#[rustfmt::skip]
pub(crate) const COMMANDS: &[Command] = &[
    cmd("setbit", 4, WRITE | DENYOOM, (1, 1, 1), "2.2.0", "Sets or clears the bit at offset in the string value stored at key", setbit),
    cmd("getbit", 3, READONLY | FAST, (1, 1, 1), "2.2.0", "Returns the bit value at offset in the string value stored at key", getbit),
    cmd("bitcount", -2, READONLY, (1, 1, 1), "2.6.0", "Count set bits in a string", bitcount),
    cmd("bitpos", -3, READONLY, (1, 1, 1), "2.8.7", "Find first bit set or clear in a string", bitpos),
    cmd("bitop", -4, WRITE | DENYOOM | ATOMIC, (2, -1, 1), "2.6.0", "Perform bitwise operations between strings", bitop),
];

/// A bit offset argument as Redis's `getBitOffsetFromArgument` reads it:
/// an integer from 0 while `offset / 8` is below proto-max-bulk-len (so at
/// most 2^32 - 1 with the default 512MB).
fn bit_offset(arg: &[u8], max_bytes: u64) -> Result<u64, CmdError> {
    store::parse_i64(arg)
        .and_then(|n| u64::try_from(n).ok())
        .filter(|n| n >> 3 < max_bytes)
        .ok_or(CmdError::msg(BIT_OFFSET))
}

fn setbit(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let offset = bit_offset(&args[2], cx.engine.config.proto_max_bulk_len)?;
    let on: u8 = match store::parse_i64(&args[3]) {
        Some(0) => 0,
        Some(1) => 1,
        _ => return Err(CmdError::msg(BIT_VALUE)),
    };
    let byte = usize::try_from(offset >> 3).map_err(|_| CmdError::msg(BIT_OFFSET))?;
    let shift = 7 - (offset & 7) as u8;
    let db = cx.db();
    let old_bit = cx.engine.h.modify(db, &args[1], |old| {
        let mut value = match old {
            Some((_, m)) if m.vtype != ValueType::String => return Err(store::Error::WrongType),
            Some((v, _)) => v.to_vec(),
            None => Vec::new(),
        };
        // Redis writes when the key is new, grows, or the bit changes.
        let mut dirty = old.is_none();
        if value.len() <= byte {
            zero_extend(&mut value, byte + 1)?;
            dirty = true;
        }
        let old_bit = (value[byte] >> shift) & 1;
        if old_bit != on {
            value[byte] ^= 1 << shift;
            dirty = true;
        }
        let action = if dirty {
            Modify::Write(ValueType::String, value)
        } else {
            Modify::Keep
        };
        Ok((action, (old_bit, dirty)))
    })?;
    let (old_bit, dirty) = old_bit;
    if dirty {
        cx.notify(class::STRING, "setbit", &args[1]);
    }
    cx.out.integer(i64::from(old_bit));
    Ok(())
}

/// Pads `v` with zero bytes to `len`, failing (not aborting) when the
/// memory cannot be had; in chunks, so that even a debug build copies 512MB
/// quickly.
fn zero_extend(v: &mut Vec<u8>, len: usize) -> Result<(), store::Error> {
    static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];
    v.try_reserve_exact(len.saturating_sub(v.len()))
        .map_err(|_| store::Error::OutOfMemory)?;
    while v.len() < len {
        let n = (len - v.len()).min(ZEROS.len());
        v.extend_from_slice(&ZEROS[..n]);
    }
    Ok(())
}

fn getbit(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let offset = bit_offset(&args[2], cx.engine.config.proto_max_bulk_len)?;
    // offset >> 3 is below proto-max-bulk-len, far below i64::MAX.
    let byte = i64::try_from(offset >> 3).map_err(|_| CmdError::msg(BIT_OFFSET))?;
    let db = cx.db();
    let b = cx.engine.h.get_range(db, &args[1], byte, byte)?;
    if b.is_empty() && cx.wants_misses() && cx.h().meta(db, &args[1])?.is_none() {
        cx.miss(&args[1]);
    }
    let bit = b.first().map_or(0, |b| (b >> (7 - (offset & 7))) & 1);
    cx.out.integer(i64::from(bit));
    Ok(())
}

/// An inclusive range of bit positions.
type BitRange = (u64, u64);

/// Resolves Redis's `start end` (bytes, or bits with `bits`) against a string
/// of `len` bytes as BITCOUNT and BITPOS do: negatives count from the end,
/// then clamp into the string. None for an empty range.
fn resolve_bits(start: i64, end: i64, len: u64, bits: bool) -> Option<BitRange> {
    let unit_len = if bits { len.saturating_mul(8) } else { len };
    let total = i64::try_from(unit_len).unwrap_or(i64::MAX);
    let mut start = if start < 0 { total + start } else { start };
    let mut end = if end < 0 { total + end } else { end };
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(if bits {
        (start, end)
    } else {
        (start * 8, end * 8 + 7)
    })
}

/// The bits of byte `i` that lie in `range` (a mask, MSB = bit 0).
fn mask(i: u64, (first, last): BitRange) -> u8 {
    let lo = if i == first / 8 { first % 8 } else { 0 };
    let hi = if i == last / 8 { last % 8 } else { 7 };
    (0xFFu8 >> lo) & (0xFFu8 << (7 - hi))
}

/// The set bits of `v` within `range` (which lies inside `v`).
fn count_bits(v: &[u8], range: BitRange) -> u64 {
    let (first, last) = range;
    let (a, b) = ((first / 8) as usize, (last / 8) as usize);
    let Some(bytes) = v.get(a..=b) else { return 0 };
    let inner: u64 = bytes
        .get(1..bytes.len().saturating_sub(1))
        .unwrap_or(&[])
        .iter()
        .map(|x| u64::from(x.count_ones()))
        .sum();
    let edge = |i: usize| u64::from((v[i] & mask(i as u64, range)).count_ones());
    if a == b {
        edge(a)
    } else {
        inner + edge(a) + edge(b)
    }
}

/// The first bit equal to `bit` in `range` of `v`.
fn find_bit(v: &[u8], range: BitRange, bit: bool) -> Option<u64> {
    let (first, last) = range;
    for i in first / 8..=last / 8 {
        let byte = *v.get(i as usize)?;
        let x = if bit { byte } else { !byte } & mask(i, range);
        if x != 0 {
            return Some(i * 8 + u64::from(x.leading_zeros()));
        }
    }
    None
}

/// BYTE or BIT.
fn parse_unit(arg: &[u8]) -> Result<bool, CmdError> {
    if parse::is(arg, "bit") {
        Ok(true)
    } else if parse::is(arg, "byte") {
        Ok(false)
    } else {
        Err(CmdError::msg(SYNTAX))
    }
}

fn bitcount(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    // Redis 7.0 looks the key up first: a missing key counts 0 whatever the
    // other arguments are.
    let db = cx.db();
    let Some(v) = cx.engine.h.get(db, &args[1])? else {
        cx.miss(&args[1]);
        cx.out.integer(0);
        return Ok(());
    };
    let range = match args.len() {
        2 => resolve_bits(0, -1, v.len() as u64, false),
        4 | 5 => {
            let start = parse::int(&args[2])?;
            let end = parse::int(&args[3])?;
            if start < 0 && end < 0 && start > end {
                cx.out.integer(0);
                return Ok(());
            }
            let bits = match args.get(4) {
                Some(unit) => parse_unit(unit)?,
                None => false,
            };
            resolve_bits(start, end, v.len() as u64, bits)
        }
        _ => return Err(CmdError::msg(SYNTAX)),
    };
    let n = range.map_or(0, |r| count_bits(&v, r));
    cx.out.integer(n as i64);
    Ok(())
}

fn bitpos(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let bit = match parse::int(&args[2])? {
        0 => false,
        1 => true,
        _ => return Err(CmdError::msg(BITPOS_BIT)),
    };
    // A missing key is an endless run of 0 bits.
    let db = cx.db();
    let Some(v) = cx.engine.h.get(db, &args[1])? else {
        cx.miss(&args[1]);
        cx.out.integer(if bit { -1 } else { 0 });
        return Ok(());
    };
    let len = v.len() as u64;
    let (range, end_given) = match args.len() {
        3 => (resolve_bits(0, -1, len, false), false),
        4..=6 => {
            let start = parse::int(&args[3])?;
            let bits = match args.get(5) {
                Some(unit) => parse_unit(unit)?,
                None => false,
            };
            match args.get(4) {
                Some(end) => (resolve_bits(start, parse::int(end)?, len, bits), true),
                None => (resolve_bits(start, -1, len, false), false),
            }
        }
        _ => return Err(CmdError::msg(SYNTAX)),
    };
    // An empty range holds neither a 0 nor a 1.
    let Some(range) = range else {
        cx.out.integer(-1);
        return Ok(());
    };
    let pos = match find_bit(&v, range, bit) {
        Some(p) => p as i64,
        // Looking for a 0 without an explicit end: the string is taken as
        // padded with zeros on the right, so the answer is the bit after it.
        None if !bit && !end_given => (range.1 + 1) as i64,
        None => -1,
    };
    cx.out.integer(pos);
    Ok(())
}

/// BITOP's operations.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

fn bitop(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let op = [
        ("and", BitOp::And),
        ("or", BitOp::Or),
        ("xor", BitOp::Xor),
        ("not", BitOp::Not),
    ]
    .into_iter()
    .find(|(w, _)| parse::is(&args[1], w))
    .map(|(_, op)| op)
    .ok_or(CmdError::msg(SYNTAX))?;
    if op == BitOp::Not && args.len() != 4 {
        return Err(CmdError::msg(BITOP_NOT_ONE_KEY));
    }
    let db = cx.db();
    // Missing keys are empty strings; shorter strings are padded with zeros.
    let mut sources = Vec::with_capacity(args.len() - 3);
    for key in &args[3..] {
        let value = cx.engine.h.get(db, key)?;
        sources.push(cx.miss_if_none(key, value).unwrap_or_default());
    }
    let max_len = sources.iter().map(Vec::len).max().unwrap_or(0);
    let dest = &args[2];
    if max_len == 0 {
        if cx.engine.h.delete(db, dest)? {
            cx.notify(class::GENERIC, "del", dest);
        }
        cx.out.integer(0);
        return Ok(());
    }
    let mut res = std::mem::take(&mut sources[0]);
    res.resize(max_len, 0);
    match op {
        BitOp::Not => res.iter_mut().for_each(|b| *b = !*b),
        _ => {
            for src in &sources[1..] {
                for (i, r) in res.iter_mut().enumerate() {
                    let s = src.get(i).copied().unwrap_or(0);
                    match op {
                        BitOp::And => *r &= s,
                        BitOp::Or => *r |= s,
                        _ => *r ^= s,
                    }
                }
            }
        }
    }
    // A plain SET: the destination loses any TTL, as Redis's setKey does.
    cx.engine.h.set(db, dest, &res, &SetOptions::default())?;
    cx.notify(class::STRING, "set", dest);
    cx.out.integer(max_len as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_resolve_like_redis() {
        assert_eq!(resolve_bits(0, -1, 3, false), Some((0, 23)));
        assert_eq!(resolve_bits(1, 1, 3, false), Some((8, 15)));
        assert_eq!(resolve_bits(-100, 100, 2, false), Some((0, 15)));
        assert_eq!(resolve_bits(5, 3, 10, false), None);
        assert_eq!(resolve_bits(0, -1, 0, false), None);
        assert_eq!(resolve_bits(3, 9, 2, true), Some((3, 9)));
        assert_eq!(resolve_bits(-3, -1, 2, true), Some((13, 15)));
        assert_eq!(resolve_bits(i64::MIN, i64::MAX, 4, true), Some((0, 31)));
        assert_eq!(resolve_bits(i64::MAX, i64::MIN, 4, false), None);
    }

    #[test]
    fn counting_and_finding_respect_edges() {
        let v = [0b1010_1010u8, 0xFF, 0b0000_0001];
        assert_eq!(count_bits(&v, (0, 23)), 13);
        assert_eq!(count_bits(&v, (1, 6)), 3);
        assert_eq!(count_bits(&v, (7, 16)), 8);
        assert_eq!(count_bits(&v, (7, 23)), 9);
        assert_eq!(find_bit(&v, (0, 23), true), Some(0));
        assert_eq!(find_bit(&v, (1, 23), true), Some(2));
        assert_eq!(find_bit(&v, (8, 23), false), Some(16));
        assert_eq!(find_bit(&v, (8, 15), false), None);
        assert_eq!(find_bit(&v, (16, 22), true), None);
        assert_eq!(find_bit(&v, (16, 23), true), Some(23));
    }

    fn naive_bit(v: &[u8], i: u64) -> bool {
        v[(i / 8) as usize] >> (7 - i % 8) & 1 == 1
    }

    proptest::proptest! {
        #[test]
        fn masks_agree_with_a_bit_by_bit_model(
            v in proptest::collection::vec(proptest::num::u8::ANY, 1..6),
            a in 0u64..48,
            b in 0u64..48,
            bit: bool,
        ) {
            let last_bit = v.len() as u64 * 8 - 1;
            let (first, last) = (a.min(b).min(last_bit), a.max(b).min(last_bit));
            let count = (first..=last).filter(|&i| naive_bit(&v, i)).count() as u64;
            proptest::prop_assert_eq!(count_bits(&v, (first, last)), count);
            let pos = (first..=last).find(|&i| naive_bit(&v, i) == bit);
            proptest::prop_assert_eq!(find_bit(&v, (first, last), bit), pos);
        }
    }

    #[test]
    fn offsets_stop_at_the_bulk_limit() {
        let max = 512 << 20;
        assert_eq!(bit_offset(b"4294967295", max).unwrap(), u32::MAX as u64);
        assert!(bit_offset(b"4294967296", max).is_err());
        assert!(bit_offset(b"-1", max).is_err());
        assert!(bit_offset(b"x", max).is_err());
    }
}
