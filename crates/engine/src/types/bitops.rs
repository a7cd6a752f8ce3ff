//! Bitmaps: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP and BITFIELD over string
//! values (Redis's `bitops.c`), with Redis 7.0's replies and error texts.
//!
//! Bit 0 is the most significant bit of byte 0. SETBIT, and a BITFIELD with
//! a SET or INCRBY, is one read-modify-write under the key's lock
//! (`Handle::modify`), so it is atomic across processes;
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
/// A BITFIELD type that is not `i1`..`i64` or `u1`..`u63`.
pub(crate) const BITFIELD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
/// BITFIELD's OVERFLOW with an unknown behaviour.
pub(crate) const BITFIELD_OVERFLOW: &str = "ERR Invalid OVERFLOW type specified";
/// BITFIELD_RO given SET or INCRBY.
pub(crate) const BITFIELD_RO_WRITE: &str = "ERR BITFIELD_RO only supports the GET subcommand";

crate::command::group_cmd!("bitmap");

/// The bitmap commands.
#[rustfmt::skip]
pub(crate) const COMMANDS: &[Command] = &[
    cmd("setbit", 4, WRITE | DENYOOM, (1, 1, 1), "2.2.0", "Sets or clears the bit at offset in the string value stored at key", setbit),
    cmd("getbit", 3, READONLY | FAST, (1, 1, 1), "2.2.0", "Returns the bit value at offset in the string value stored at key", getbit),
    cmd("bitcount", -2, READONLY, (1, 1, 1), "2.6.0", "Count set bits in a string", bitcount),
    cmd("bitpos", -3, READONLY, (1, 1, 1), "2.8.7", "Find first bit set or clear in a string", bitpos),
    cmd("bitop", -4, WRITE | DENYOOM | ATOMIC, (2, -1, 1), "2.6.0", "Perform bitwise operations between strings", bitop),
    cmd("bitfield", -2, WRITE | DENYOOM, (1, 1, 1), "3.2.0", "Perform arbitrary bitfield integer operations on strings", bitfield),
    cmd("bitfield_ro", -2, READONLY | FAST, (1, 1, 1), "6.0.0", "Perform arbitrary bitfield integer operations on strings. Read-only variant of BITFIELD", bitfield_ro),
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

/// What BITFIELD does when an INCRBY or SET leaves its field's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Overflow {
    /// Modular arithmetic (the default).
    Wrap,
    /// Clamp to the field's minimum or maximum.
    Sat,
    /// Write nothing and reply a null.
    Fail,
}

/// One BITFIELD operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// A BITFIELD operation with its field and the OVERFLOW in force for it.
#[derive(Clone, Copy, Debug)]
struct Field {
    op: FieldOp,
    /// Bit offset of the field's most significant bit.
    offset: u64,
    /// Width, 1..=64 (1..=63 unsigned).
    bits: u32,
    signed: bool,
    overflow: Overflow,
}

/// A BITFIELD type (`i1`..`i64`, `u1`..`u63`) as Redis's
/// `getBitfieldTypeFromArgument` reads it: the sign letter in lower case,
/// then an integer; the number is read as a C string (up to a NUL byte).
fn bitfield_type(arg: &[u8]) -> Result<(bool, u32), CmdError> {
    let err = || CmdError::msg(BITFIELD_TYPE);
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(err()),
    };
    let digits = arg[1..].split(|&b| b == 0).next().unwrap_or(&[]);
    let max = if signed { 64 } else { 63 };
    match store::parse_i64(digits) {
        Some(n) if (1..=max).contains(&n) => Ok((signed, n as u32)),
        _ => Err(err()),
    }
}

/// A BITFIELD offset: a bit offset as SETBIT's, or `#N` for the N-th field
/// of `bits` bits (N × bits, wrapping as Redis's C does before the range
/// check).
fn bitfield_offset(arg: &[u8], bits: u32, max_bytes: u64) -> Result<u64, CmdError> {
    let (text, scale) = match arg.split_first() {
        Some((b'#', rest)) => (rest, i64::from(bits)),
        _ => (arg, 1),
    };
    store::parse_i64(text)
        .map(|n| n.wrapping_mul(scale))
        .and_then(|n| u64::try_from(n).ok())
        .filter(|n| n >> 3 < max_bytes)
        .ok_or(CmdError::msg(BIT_OFFSET))
}

/// Parses BITFIELD's operations (`args` after the key), in Redis's order of
/// checks: the first bad argument is the error.
fn parse_fields(args: &[Arg<'_>], max_bytes: u64) -> Result<Vec<Field>, CmdError> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 0;
    while j < args.len() {
        let left = args.len() - j - 1;
        let word = &args[j];
        let takes_value = if parse::is(word, "get") && left >= 2 {
            false
        } else if (parse::is(word, "set") || parse::is(word, "incrby")) && left >= 3 {
            true
        } else if parse::is(word, "overflow") && left >= 1 {
            let kind = &args[j + 1];
            overflow = if parse::is(kind, "wrap") {
                Overflow::Wrap
            } else if parse::is(kind, "sat") {
                Overflow::Sat
            } else if parse::is(kind, "fail") {
                Overflow::Fail
            } else {
                return Err(CmdError::msg(BITFIELD_OVERFLOW));
            };
            j += 2;
            continue;
        } else {
            return Err(CmdError::msg(SYNTAX));
        };
        let (signed, bits) = bitfield_type(&args[j + 1])?;
        let offset = bitfield_offset(&args[j + 2], bits, max_bytes)?;
        let op = if !takes_value {
            FieldOp::Get
        } else {
            let n = parse::int(&args[j + 3])?;
            if parse::is(word, "set") {
                FieldOp::Set(n)
            } else {
                FieldOp::IncrBy(n)
            }
        };
        fields.push(Field {
            op,
            offset,
            bits,
            signed,
            overflow,
        });
        j += if takes_value { 4 } else { 3 };
    }
    Ok(fields)
}

/// The `bits`-bit unsigned integer at bit `offset` of `v`; bytes past the
/// end read as zeros.
fn get_unsigned(v: &[u8], offset: u64, bits: u32) -> u64 {
    (offset..offset + u64::from(bits)).fold(0, |acc, i| {
        let byte = usize::try_from(i >> 3).ok().and_then(|b| v.get(b));
        let bit = byte.map_or(0, |b| (b >> (7 - (i & 7))) & 1);
        acc << 1 | u64::from(bit)
    })
}

/// The `bits`-bit two's-complement integer at bit `offset` of `v`.
fn get_signed(v: &[u8], offset: u64, bits: u32) -> i64 {
    let u = get_unsigned(v, offset, bits);
    if bits < 64 && u & (1 << (bits - 1)) != 0 {
        (u | u64::MAX << bits) as i64
    } else {
        u as i64
    }
}

/// Writes the low `bits` bits of `value` at bit `offset` of `v`, which is
/// long enough.
fn set_bits(v: &mut [u8], offset: u64, bits: u32, value: u64) {
    for j in 0..bits {
        let on = value >> (bits - 1 - j) & 1 == 1;
        let i = offset + u64::from(j);
        if let Some(b) = usize::try_from(i >> 3).ok().and_then(|b| v.get_mut(b)) {
            let m = 1u8 << (7 - (i & 7));
            if on {
                *b |= m;
            } else {
                *b &= !m;
            }
        }
    }
}

/// Redis's `checkUnsignedBitfieldOverflow`, its C integer conversions
/// kept: None when `value + incr` fits in `bits` unsigned bits, else the
/// value WRAP or SAT stores (FAIL stores nothing).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<u64> {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = value.wrapping_neg() as i64;
    let wrap = || value.wrapping_add(incr as u64) & !u64::MAX.checked_shl(bits).unwrap_or(0);
    if value > max || (incr > 0 && incr > max_incr) {
        Some(if ow == Overflow::Sat { max } else { wrap() })
    } else if incr < 0 && incr < min_incr {
        Some(if ow == Overflow::Sat { 0 } else { wrap() })
    } else {
        None
    }
}

/// Redis's `checkSignedBitfieldOverflow`, likewise.
fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<i64> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrap = || {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & (1 << (bits - 1)) != 0 {
                c |= mask;
            } else {
                c &= !mask;
            }
        }
        c as i64
    };
    let wide = bits != 64;
    if value > max || (wide && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr) {
        Some(if ow == Overflow::Sat { max } else { wrap() })
    } else if value < min || (wide && incr < min_incr) || (value < 0 && incr < 0 && incr < min_incr)
    {
        Some(if ow == Overflow::Sat { min } else { wrap() })
    } else {
        None
    }
}

/// Runs a SET or INCRBY on `v` (long enough for its field): the reply
/// (None when OVERFLOW FAIL refused it) and whether the field changed.
/// INCRBY replies the new value, SET the old one.
fn apply_write(v: &mut [u8], f: &Field) -> (Option<i64>, bool) {
    let (incr, arg) = match f.op {
        FieldOp::IncrBy(n) => (true, n),
        FieldOp::Set(n) => (false, n),
        FieldOp::Get => return (Some(read_field(v, f)), false),
    };
    // Old and new value as the field's bits, and the reply.
    let (old, new, reply) = if f.signed {
        let old = get_signed(v, f.offset, f.bits);
        let (base, delta) = if incr { (old, arg) } else { (arg, 0) };
        let new = match signed_overflow(base, delta, f.bits, f.overflow) {
            Some(_) if f.overflow == Overflow::Fail => return (None, false),
            Some(limit) => limit,
            None => base.wrapping_add(delta),
        };
        (old as u64, new as u64, if incr { new } else { old })
    } else {
        let old = get_unsigned(v, f.offset, f.bits);
        let (base, delta) = if incr { (old, arg) } else { (arg as u64, 0) };
        let new = match unsigned_overflow(base, delta, f.bits, f.overflow) {
            Some(_) if f.overflow == Overflow::Fail => return (None, false),
            Some(limit) => limit,
            None => base.wrapping_add(delta as u64),
        };
        // A u63 at most: the C code's cast to long long keeps it.
        (old, new, if incr { new as i64 } else { old as i64 })
    };
    set_bits(v, f.offset, f.bits, new);
    (Some(reply), old != new)
}

/// A GET: the field's value (bits past the end of `v` are zeros).
fn read_field(v: &[u8], f: &Field) -> i64 {
    if f.signed {
        get_signed(v, f.offset, f.bits)
    } else {
        get_unsigned(v, f.offset, f.bits) as i64
    }
}

/// Writes BITFIELD's reply: one integer per operation, a null for one that
/// OVERFLOW FAIL refused.
fn reply_fields(cx: &mut Cx<'_>, replies: &[Option<i64>]) {
    cx.out.array_len(replies.len());
    for r in replies {
        match r {
            Some(n) => cx.out.integer(*n),
            None => cx.out.null(),
        }
    }
}

fn bitfield(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    bitfield_generic(cx, args, false)
}

fn bitfield_ro(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    bitfield_generic(cx, args, true)
}

/// BITFIELD and BITFIELD_RO (`read_only`: any SET or INCRBY is refused,
/// once every argument parsed). Only GETs: one read of the value. Any
/// write: one read-modify-write under the key's lock, which first grows
/// the string with zeros to the farthest bit any SET or INCRBY names (even
/// one that OVERFLOW FAIL then refuses, as Redis does).
fn bitfield_generic(cx: &mut Cx<'_>, args: &[Arg<'_>], read_only: bool) -> CmdResult {
    let fields = parse_fields(&args[2..], cx.engine.config.proto_max_bulk_len)?;
    let highest = fields
        .iter()
        .filter(|f| f.op != FieldOp::Get)
        .map(|f| f.offset + u64::from(f.bits) - 1)
        .max();
    let db = cx.db();
    let Some(highest) = highest else {
        let value = cx.engine.h.get(db, &args[1])?;
        let value = cx.miss_if_none(&args[1], value).unwrap_or_default();
        let replies: Vec<_> = fields.iter().map(|f| Some(read_field(&value, f))).collect();
        reply_fields(cx, &replies);
        return Ok(());
    };
    if read_only {
        return Err(CmdError::msg(BITFIELD_RO_WRITE));
    }
    let len = usize::try_from(highest >> 3)
        .ok()
        .and_then(|b| b.checked_add(1))
        .ok_or(CmdError::msg(BIT_OFFSET))?;
    let (replies, changes) = cx.engine.h.modify(db, &args[1], |old| {
        let mut value = match old {
            Some((_, m)) if m.vtype != ValueType::String => return Err(store::Error::WrongType),
            Some((v, _)) => v.to_vec(),
            None => Vec::new(),
        };
        // Redis counts every operation as a change once the key was created
        // or grew.
        let grown = old.is_none() || value.len() < len;
        if value.len() < len {
            zero_extend(&mut value, len)?;
        }
        let mut replies = Vec::with_capacity(fields.len());
        let mut changes = 0;
        for f in &fields {
            let (reply, changed) = apply_write(&mut value, f);
            if reply.is_some() && f.op != FieldOp::Get && (grown || changed) {
                changes += 1;
            }
            replies.push(reply);
        }
        let action = if grown || changes > 0 {
            Modify::Write(ValueType::String, value)
        } else {
            Modify::Keep
        };
        Ok((action, (replies, changes)))
    })?;
    if changes > 0 {
        cx.notify(class::STRING, "setbit", &args[1]);
    }
    reply_fields(cx, &replies);
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

    /// The field's range, and what WRAP and SAT make of `x`, computed
    /// wide: the model Redis's C overflow checks must agree with.
    fn model(x: i128, bits: u32, signed: bool) -> (bool, i128, i128) {
        let (min, max) = if signed {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        } else {
            (0, (1i128 << bits) - 1)
        };
        let wrap = (x - min).rem_euclid(1i128 << bits) + min;
        (x < min || x > max, wrap, x.clamp(min, max))
    }

    proptest::proptest! {
        #[test]
        fn signed_overflow_matches_wide_arithmetic(
            bits in 1u32..=64,
            raw: u64,
            incr: i64,
        ) {
            // A value as read from the field: any `bits`-bit integer.
            let value = get_signed(&raw.to_be_bytes(), 0, bits);
            let (over, wrap, sat) = model(i128::from(value) + i128::from(incr), bits, true);
            proptest::prop_assert_eq!(signed_overflow(value, incr, bits, Overflow::Fail).is_some(), over);
            if over {
                proptest::prop_assert_eq!(signed_overflow(value, incr, bits, Overflow::Wrap), Some(wrap as i64));
                proptest::prop_assert_eq!(signed_overflow(value, incr, bits, Overflow::Sat), Some(sat as i64));
            }
            // SET checks the new value alone. Redis's `max - value` wraps
            // for a value that far below the range, which then counts as
            // above it: SAT stores the maximum (as redis-server does).
            let (over, wrap, mut sat) = model(i128::from(incr), bits, true);
            let max = (1i128 << (bits - 1)) - 1;
            if bits < 64 && max - i128::from(incr) > i128::from(i64::MAX) {
                sat = max;
            }
            proptest::prop_assert_eq!(signed_overflow(incr, 0, bits, Overflow::Fail).is_some(), over);
            if over {
                proptest::prop_assert_eq!(signed_overflow(incr, 0, bits, Overflow::Wrap), Some(wrap as i64));
                proptest::prop_assert_eq!(signed_overflow(incr, 0, bits, Overflow::Sat), Some(sat as i64));
            }
        }

        #[test]
        fn unsigned_overflow_matches_wide_arithmetic(
            bits in 1u32..=63,
            raw: u64,
            incr: i64,
        ) {
            let value = get_unsigned(&raw.to_be_bytes(), 0, bits);
            let (over, wrap, sat) = model(i128::from(value) + i128::from(incr), bits, false);
            proptest::prop_assert_eq!(unsigned_overflow(value, incr, bits, Overflow::Fail).is_some(), over);
            if over {
                proptest::prop_assert_eq!(unsigned_overflow(value, incr, bits, Overflow::Wrap), Some(wrap as u64));
                proptest::prop_assert_eq!(unsigned_overflow(value, incr, bits, Overflow::Sat), Some(sat as u64));
            }
            // SET of a negative number: Redis takes it as a huge unsigned
            // one, so SAT stores the maximum, not 0.
            let as_unsigned = i128::from(incr as u64);
            let (over, wrap, sat) = model(as_unsigned, bits, false);
            proptest::prop_assert_eq!(unsigned_overflow(incr as u64, 0, bits, Overflow::Fail).is_some(), over);
            if over {
                proptest::prop_assert_eq!(unsigned_overflow(incr as u64, 0, bits, Overflow::Wrap), Some(wrap as u64));
                proptest::prop_assert_eq!(unsigned_overflow(incr as u64, 0, bits, Overflow::Sat), Some(sat as u64));
            }
        }

        #[test]
        fn fields_round_trip_and_leave_other_bits_alone(
            v in proptest::collection::vec(proptest::num::u8::ANY, 11..14),
            offset in 0u64..24,
            bits in 1u32..=64,
            value: u64,
        ) {
            let mut w = v.clone();
            set_bits(&mut w, offset, bits, value);
            let mask = u64::MAX >> (64 - bits);
            proptest::prop_assert_eq!(get_unsigned(&w, offset, bits), value & mask);
            for i in (0..v.len() as u64 * 8).filter(|i| *i < offset || *i >= offset + u64::from(bits)) {
                proptest::prop_assert_eq!(naive_bit(&w, i), naive_bit(&v, i));
            }
        }
    }

    #[test]
    fn fields_read_past_the_end_as_zeros() {
        assert_eq!(get_unsigned(&[0xff], 4, 8), 0xf0);
        assert_eq!(get_signed(&[0xff], 4, 8), -16);
        assert_eq!(get_signed(&[0x80], 0, 1), -1);
        assert_eq!(get_unsigned(&[], 1000, 63), 0);
    }

    #[test]
    fn types_and_offsets_parse_like_redis() {
        assert_eq!(bitfield_type(b"i64").unwrap(), (true, 64));
        assert_eq!(bitfield_type(b"u63").unwrap(), (false, 63));
        assert_eq!(bitfield_type(b"u1").unwrap(), (false, 1));
        for bad in [
            "u64", "i65", "i0", "I8", "U8", "x8", "", "i", "i-1", "i+8", "i 8", "i08",
        ] {
            assert!(bitfield_type(bad.as_bytes()).is_err(), "{bad:?}");
        }
        // The number is read as a C string.
        assert_eq!(bitfield_type(b"i8\0junk").unwrap(), (true, 8));
        let max = 512 << 20;
        assert_eq!(bitfield_offset(b"#3", 8, max).unwrap(), 24);
        assert_eq!(bitfield_offset(b"13", 8, max).unwrap(), 13);
        assert!(bitfield_offset(b"#-1", 8, max).is_err());
        assert!(bitfield_offset(b"#", 8, max).is_err());
        assert!(bitfield_offset(b"#536870912", 8, max).is_err());
        assert_eq!(bitfield_offset(b"#536870911", 8, max).unwrap(), 4294967288);
        // N × bits wraps before the check, as the C multiplication does.
        assert!(bitfield_offset(b"#9223372036854775807", 8, max).is_err());
        assert_eq!(
            bitfield_offset(b"#-9223372036854775808", 2, max).unwrap(),
            0
        );
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
