//! Hashes: HSET, HGET and the rest of Redis's hash commands (`t_hash.c`),
//! with Redis 7.0's replies and error texts.
//!
//! Every command touches one key, through the store's typed collection API:
//! a read decodes the hash once ([`store::Handle::read_collection`]); a
//! write is one read-modify-write under the key's lock
//! ([`store::Handle::write_collection`]), so it is atomic across workers and
//! a failed check (HINCRBY of a non-number) writes nothing. A hash left
//! empty is removed by the store.

use store::{Collection, Hash};

use crate::command::{flags::*, Arg, CmdResult, Command};
use crate::decimal::Decimal;
use crate::engine::Cx;
use crate::error::{CmdError, NOT_FLOAT, OVERFLOW};
use crate::notify::class;
use crate::parse;
use crate::random;
use crate::scan;
use crate::types::string::NAN_OR_INFINITY;

/// HINCRBY of a field that does not hold an integer.
const NOT_INTEGER_FIELD: &str = "ERR hash value is not an integer";
/// HINCRBYFLOAT of a field that does not hold a number.
const NOT_FLOAT_FIELD: &str = "ERR hash value is not a float";
/// HINCRBYFLOAT by an infinite increment.
const NAN_OR_INFINITE_INCR: &str = "ERR value is NaN or Infinity";

crate::command::group_cmd!("hash", keys = (1, 1, 1));

/// The hash commands.
#[rustfmt::skip]
pub(crate) const COMMANDS: &[Command] = &[
    cmd("hset", -4, WRITE | DENYOOM | FAST, "2.0.0", "Set the string value of a hash field", hset),
    cmd("hsetnx", 4, WRITE | DENYOOM | FAST, "2.0.0", "Set the value of a hash field, only if the field does not exist", hsetnx),
    cmd("hget", 3, READONLY | FAST, "2.0.0", "Get the value of a hash field", hget),
    cmd("hmget", -3, READONLY | FAST, "2.0.0", "Get the values of all the given hash fields", hmget),
    cmd("hmset", -4, WRITE | DENYOOM | FAST, "2.0.0", "Set multiple hash fields to multiple values", hmset),
    cmd("hdel", -3, WRITE | FAST, "2.0.0", "Delete one or more hash fields", hdel),
    cmd("hlen", 2, READONLY | FAST, "2.0.0", "Get the number of fields in a hash", hlen),
    cmd("hstrlen", 3, READONLY | FAST, "3.2.0", "Get the length of the value of a hash field", hstrlen),
    cmd("hexists", 3, READONLY | FAST, "2.0.0", "Determine if a hash field exists", hexists),
    cmd("hkeys", 2, READONLY, "2.0.0", "Get all the fields in a hash", hkeys),
    cmd("hvals", 2, READONLY, "2.0.0", "Get all the values in a hash", hvals),
    cmd("hgetall", 2, READONLY, "2.0.0", "Get all the fields and values in a hash", hgetall),
    cmd("hincrby", 4, WRITE | DENYOOM | FAST, "2.0.0", "Increment the integer value of a hash field by the given number", hincrby),
    cmd("hincrbyfloat", 4, WRITE | DENYOOM | FAST, "2.6.0", "Increment the float value of a hash field by the given amount", hincrbyfloat),
    cmd("hrandfield", -2, READONLY, "6.2.0", "Get one or multiple random fields from a hash", hrandfield),
    cmd("hscan", -3, READONLY, "2.8.0", "Incrementally iterate hash fields and associated values", hscan),
];

/// Reads the hash at `key` through `f`; None when the key is missing (a
/// "keymiss").
fn read<T>(
    cx: &mut Cx<'_>,
    key: &[u8],
    f: impl FnOnce(&Hash) -> store::Result<T>,
) -> Result<Option<T>, CmdError> {
    let db = cx.db();
    let found = cx.h().read_collection(db, key, f)?;
    Ok(cx.miss_if_none(key, found))
}

/// Changes the hash at `key` through `f` in one atomic step; a missing key
/// starts empty when `create` is set, else `f` does not run (None).
fn write<T>(
    cx: &mut Cx<'_>,
    key: &[u8],
    create: bool,
    f: impl FnOnce(&mut Hash) -> store::Result<T>,
) -> Result<Option<T>, CmdError> {
    let db = cx.db();
    Ok(cx.h().write_collection(db, key, create, f)?)
}

/// HSET and HMSET: sets each `field value` pair; the number of new fields.
fn set_pairs(cx: &mut Cx<'_>, args: &[Arg<'_>], name: &str) -> Result<u64, CmdError> {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::arity(name));
    }
    let pairs = &args[2..];
    let added = write(cx, &args[1], true, |h| {
        let mut added = 0;
        for pair in pairs.chunks_exact(2) {
            added += u64::from(h.insert(&pair[0], &pair[1])?);
        }
        Ok(added)
    })?;
    cx.notify(class::HASH, "hset", &args[1]);
    Ok(added.unwrap_or(0))
}

fn hset(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let added = set_pairs(cx, args, "hset")?;
    cx.out.integer(added as i64);
    Ok(())
}

fn hmset(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    set_pairs(cx, args, "hmset")?;
    cx.out.simple(b"OK");
    Ok(())
}

fn hsetnx(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let (field, value) = (&args[2], &args[3]);
    let set = write(cx, &args[1], true, |h| {
        if h.contains(field)? {
            return Ok(false);
        }
        h.insert(field, value)
    })?;
    if set == Some(true) {
        cx.notify(class::HASH, "hset", &args[1]);
    }
    cx.out.integer(i64::from(set == Some(true)));
    Ok(())
}

fn hget(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let field = &args[2];
    match read(cx, &args[1], |h| h.get(field))?.flatten() {
        Some(v) => cx.out.bulk(&v),
        None => cx.out.null(),
    }
    Ok(())
}

fn hmget(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let fields = &args[2..];
    let values = read(cx, &args[1], |h| {
        fields
            .iter()
            .map(|f| h.get(f))
            .collect::<store::Result<Vec<_>>>()
    })?;
    cx.out.array_len(fields.len());
    for i in 0..fields.len() {
        match values.as_ref().and_then(|v| v[i].as_deref()) {
            Some(v) => cx.out.bulk(v),
            None => cx.out.null(),
        }
    }
    Ok(())
}

fn hdel(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let fields: Vec<&[u8]> = args[2..].iter().map(|a| &a[..]).collect();
    let removed = write(cx, &args[1], false, |h| {
        Ok((h.remove_all(&fields)?, h.is_empty()))
    })?;
    let (removed, emptied) = removed.unwrap_or((0, false));
    if removed > 0 {
        cx.notify_removed(class::HASH, "hdel", &args[1], emptied);
    }
    cx.out.integer(removed as i64);
    Ok(())
}

fn hlen(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let len = read(cx, &args[1], |h| Ok(h.len()))?;
    cx.out.integer(len.unwrap_or(0) as i64);
    Ok(())
}

fn hstrlen(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let field = &args[2];
    let len = read(cx, &args[1], |h| Ok(h.get(field)?.map_or(0, |v| v.len())))?;
    cx.out.integer(len.unwrap_or(0) as i64);
    Ok(())
}

fn hexists(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let field = &args[2];
    let found = read(cx, &args[1], |h| h.contains(field))?;
    cx.out.integer(i64::from(found == Some(true)));
    Ok(())
}

/// Which parts of the entries HKEYS, HVALS and HGETALL reply with.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parts {
    Fields,
    Values,
    Both,
}

/// HKEYS, HVALS and HGETALL: an array, or for HGETALL a map (RESP3).
fn get_all(cx: &mut Cx<'_>, key: &[u8], parts: Parts) -> CmdResult {
    let entries = read(cx, key, |h| h.entries())?.unwrap_or_default();
    if parts == Parts::Both {
        cx.out.map_len(entries.len());
    } else {
        cx.out.array_len(entries.len());
    }
    for (field, value) in &entries {
        if parts != Parts::Values {
            cx.out.bulk(field);
        }
        if parts != Parts::Fields {
            cx.out.bulk(value);
        }
    }
    Ok(())
}

fn hkeys(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    get_all(cx, &args[1], Parts::Fields)
}

fn hvals(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    get_all(cx, &args[1], Parts::Values)
}

fn hgetall(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    get_all(cx, &args[1], Parts::Both)
}

fn hincrby(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let incr = parse::int(&args[3])?;
    let field = &args[2];
    // A command error is carried out of the closure as its result, with the
    // hash untouched (so nothing is written, and no empty key created).
    let res = write(cx, &args[1], true, |h| {
        let current = match h.get(field)? {
            Some(v) => match store::parse_i64(&v) {
                Some(n) => n,
                None => return Ok(Err(CmdError::msg(NOT_INTEGER_FIELD))),
            },
            None => 0,
        };
        let Some(sum) = current.checked_add(incr) else {
            return Ok(Err(CmdError::msg(OVERFLOW)));
        };
        h.insert(field, sum.to_string().as_bytes())?;
        Ok(Ok(sum))
    })?;
    // `create` is set, so the closure ran; were the key missing the sum
    // would be the increment.
    let sum = res.unwrap_or(Ok(incr))?;
    cx.notify(class::HASH, "hincrby", &args[1]);
    cx.out.integer(sum);
    Ok(())
}

fn hincrbyfloat(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    // The increment is checked before the key, as Redis does: an infinite
    // one is refused outright (0 + it is not finite).
    let incr = Decimal::parse(&args[3]).ok_or(CmdError::msg(NOT_FLOAT))?;
    if Decimal::ZERO.checked_add(incr).is_none() {
        return Err(CmdError::msg(NAN_OR_INFINITE_INCR));
    }
    let field = &args[2];
    let res = write(cx, &args[1], true, |h| {
        let current = match h.get(field)? {
            Some(v) => match Decimal::parse(&v) {
                Some(d) => d,
                None => return Ok(Err(CmdError::msg(NOT_FLOAT_FIELD))),
            },
            None => Decimal::ZERO,
        };
        let Some(sum) = current.checked_add(incr) else {
            return Ok(Err(CmdError::msg(NAN_OR_INFINITY)));
        };
        let text = sum.to_string().into_bytes();
        h.insert(field, &text)?;
        Ok(Ok(text))
    })?;
    let text = res.unwrap_or_else(|| Ok(incr.to_string().into_bytes()))?;
    cx.notify(class::HASH, "hincrbyfloat", &args[1]);
    cx.out.bulk(&text);
    Ok(())
}

fn hrandfield(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if args.len() == 2 {
        let picked = read(cx, &args[1], |h| h.nth(random::below(h.len())))?.flatten();
        match picked {
            Some((field, _)) => cx.out.bulk(&field),
            None => cx.out.null(),
        }
        return Ok(());
    }
    let (count, repeats) = random::count(&args[2])?;
    let with_values = match args.get(3) {
        None => false,
        Some(a) if args.len() == 4 && parse::is(a, "withvalues") => true,
        Some(_) => return Err(CmdError::syntax()),
    };
    if with_values && count > (i64::MAX / 2) as u64 {
        return Err(CmdError::msg(random::OUT_OF_RANGE));
    }
    let entries = read(cx, &args[1], |h| h.entries())?.unwrap_or_default();
    let len = entries.len() as u64;
    let pairs = RandomPairs {
        with_values,
        resp3: cx.out.protocol() == proto::resp::Protocol::Resp3,
    };
    if count == 0 || len == 0 {
        cx.out.array_len(0);
    } else if repeats {
        // Each drawn on its own, in the order drawn.
        let bytes = entries
            .iter()
            .map(|(f, v)| (f.len() + v.len()) as u64)
            .sum();
        let limit = cx.engine.config.proto_max_bulk_len;
        random::check_repeats(count, bytes, len, limit)?;
        pairs.header(cx, count as usize);
        for _ in 0..count {
            pairs.write(cx, entries.get(random::below(len) as usize));
        }
    } else {
        // Distinct: all of them, in order, when the count reaches the size.
        let picks = if count >= len {
            (0..len).collect()
        } else {
            random::distinct(len, count)
        };
        pairs.header(cx, picks.len());
        for i in picks {
            pairs.write(cx, entries.get(i as usize));
        }
    }
    Ok(())
}

/// The shape of HRANDFIELD's reply with a count.
struct RandomPairs {
    with_values: bool,
    resp3: bool,
}

impl RandomPairs {
    /// The array of `n` picks: RESP2 flattens field-value pairs, RESP3
    /// nests each pair in an array.
    fn header(&self, cx: &mut Cx<'_>, n: usize) {
        let flat = self.with_values && !self.resp3;
        cx.out.array_len(if flat { n * 2 } else { n });
    }

    /// One pick (always `Some`: its index is below the size).
    fn write(&self, cx: &mut Cx<'_>, entry: Option<&store::FieldValue>) {
        let Some((field, value)) = entry else {
            return;
        };
        if self.with_values && self.resp3 {
            cx.out.array_len(2);
        }
        cx.out.bulk(field);
        if self.with_values {
            cx.out.bulk(value);
        }
    }
}

fn hscan(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    // Redis's order: the cursor, then the key (a missing one replies an
    // empty page without looking at the options), then the options.
    let cursor = scan::cursor(&args[2])?;
    let opts = scan::options(&args[3..], false);
    let count = opts.as_ref().map_or(0, |o| o.count as u64);
    let Some((next, entries)) = read(cx, &args[1], |h| h.scan(cursor, count))? else {
        scan::reply_header(cx, 0, 0);
        return Ok(());
    };
    let opts = opts?;
    let entries: Vec<_> = entries.iter().filter(|e| opts.matches(&e.0)).collect();
    scan::reply_header(cx, next, entries.len() * 2);
    for (field, value) in entries {
        cx.out.bulk(field);
        cx.out.bulk(value);
    }
    Ok(())
}
