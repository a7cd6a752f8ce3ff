//! Popping the lowest or highest members: ZPOPMIN, ZPOPMAX, ZMPOP and the
//! blocking BZPOPMIN, BZPOPMAX, BZMPOP (Redis's `genericZpopCommand` and
//! `blockingGenericZpopCommand`).
//!
//! A blocking command first tries exactly as its non-blocking form; when
//! every key is missing it asks the connection to wait on them
//! ([`Cx::block`]), and runs again from the start once one is signalled
//! ready.

use store::{Collection, Scored, ValueType, ZSet};

use super::{reply_score, resp3};
use crate::command::{Arg, CmdResult};
use crate::engine::{Cx, TimeoutReply};
use crate::error::{CmdError, SYNTAX};
use crate::notify::class;
use crate::parse;

/// ZPOPMIN's count is negative or not a number.
const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";
/// ZMPOP's numkeys is below 1 or not a number.
const BAD_NUMKEYS: &str = "ERR numkeys should be greater than 0";
/// ZMPOP's COUNT is below 1 or not a number.
const BAD_COUNT: &str = "ERR count should be greater than 0";

/// Which end to pop from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Min,
    Max,
}

/// Pops up to `count` members from `end` of the sorted set at `key`, lowest
/// (or highest) first; None when the key is missing. A key emptied is
/// removed by the store. Sends the keyspace events.
fn pop_from(
    cx: &mut Cx<'_>,
    key: &[u8],
    end: End,
    count: u64,
) -> Result<Option<Vec<Scored>>, CmdError> {
    let db = cx.db();
    let popped = cx.h().write_collection::<ZSet, _>(db, key, false, |z| {
        let len = z.len();
        let n = count.min(len);
        let (start, stop) = match end {
            End::Min => (0, n),
            End::Max => (len - n, len),
        };
        let mut items = z.range(start, stop)?;
        if end == End::Max {
            items.reverse();
        }
        z.remove_range(start, stop)?;
        Ok((items, z.is_empty()))
    })?;
    Ok(popped.map(|(items, emptied)| {
        if !items.is_empty() {
            let event = match end {
                End::Min => "zpopmin",
                End::Max => "zpopmax",
            };
            cx.notify_removed(class::ZSET, event, key, emptied);
        }
        items
    }))
}

/// Writes `[member, score]` pairs: nested when `nested`, else flat.
fn reply_pairs(cx: &mut Cx<'_>, items: &[Scored], nested: bool) {
    for (member, score) in items {
        if nested {
            cx.out.array_len(2);
        }
        cx.out.bulk(member);
        reply_score(cx, *score);
    }
}

/// ZPOPMIN / ZPOPMAX key [count].
fn zpop(cx: &mut Cx<'_>, args: &[Arg<'_>], end: End) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::msg(SYNTAX));
    }
    let count = match args.get(2) {
        Some(a) => Some(
            parse::int(a)
                .ok()
                .and_then(|n| u64::try_from(n).ok())
                .ok_or(CmdError::msg(NOT_POSITIVE))?,
        ),
        None => None,
    };
    let items = pop_from(cx, &args[1], end, count.unwrap_or(1))?.unwrap_or_default();
    // RESP3 nests the pairs when a count was given; RESP2 never does.
    let nested = count.is_some() && resp3(cx);
    cx.out
        .array_len(if nested { items.len() } else { items.len() * 2 });
    reply_pairs(cx, &items, nested);
    Ok(())
}

pub(super) fn zpopmin(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    zpop(cx, args, End::Min)
}

pub(super) fn zpopmax(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    zpop(cx, args, End::Max)
}

/// BZPOPMIN / BZPOPMAX key [key …] timeout: `[key, member, score]` from the
/// first non-empty key, else block.
fn bzpop(cx: &mut Cx<'_>, args: &[Arg<'_>], end: End) -> CmdResult {
    let timeout = parse::timeout(&args[args.len() - 1])?;
    let keys = &args[1..args.len() - 1];
    for key in keys {
        if let Some(items) = pop_from(cx, key, end, 1)? {
            cx.out.array_len(1 + items.len() * 2);
            cx.out.bulk(key);
            reply_pairs(cx, &items, false);
            return Ok(());
        }
    }
    let keys = keys.iter().map(|k| k.to_vec()).collect();
    cx.block(keys, ValueType::ZSet, timeout, TimeoutReply::NullArray);
    Ok(())
}

pub(super) fn bzpopmin(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    bzpop(cx, args, End::Min)
}

pub(super) fn bzpopmax(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    bzpop(cx, args, End::Max)
}

/// A parsed ZMPOP / BZMPOP.
struct Mpop<'a, 'b> {
    keys: &'a [Arg<'b>],
    end: End,
    count: u64,
}

/// Parses `numkeys key [key …] MIN|MAX [COUNT count]` starting at
/// `args[at]`, with Redis's errors in Redis's order.
fn parse_mpop<'a, 'b>(args: &'a [Arg<'b>], at: usize) -> Result<Mpop<'a, 'b>, CmdError> {
    let numkeys = parse::int(&args[at])
        .ok()
        .filter(|&n| n >= 1)
        .ok_or(CmdError::msg(BAD_NUMKEYS))?;
    let where_at = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(at + 1))
        .filter(|&w| w < args.len())
        .ok_or(CmdError::msg(SYNTAX))?;
    let end = match &args[where_at] {
        a if parse::is(a, "min") => End::Min,
        a if parse::is(a, "max") => End::Max,
        _ => return Err(CmdError::msg(SYNTAX)),
    };
    let mut count = None;
    let mut j = where_at + 1;
    while j < args.len() {
        if count.is_none() && parse::is(&args[j], "count") && j + 1 < args.len() {
            let n = parse::int(&args[j + 1])
                .ok()
                .filter(|&n| n >= 1)
                .ok_or(CmdError::msg(BAD_COUNT))?;
            count = Some(n as u64);
            j += 2;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
    }
    Ok(Mpop {
        keys: &args[at + 1..where_at],
        end,
        count: count.unwrap_or(1),
    })
}

/// Pops from the first key that exists; writes `[key, [[member, score]…]]`
/// and returns true, or returns false when every key is missing. A key of
/// another type met before that is an error.
fn mpop_any(cx: &mut Cx<'_>, m: &Mpop<'_, '_>) -> Result<bool, CmdError> {
    for key in m.keys {
        if let Some(items) = pop_from(cx, key, m.end, m.count)? {
            cx.out.array_len(2);
            cx.out.bulk(key);
            cx.out.array_len(items.len());
            reply_pairs(cx, &items, true);
            return Ok(true);
        }
    }
    Ok(false)
}

pub(super) fn zmpop(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let m = parse_mpop(args, 1)?;
    if !mpop_any(cx, &m)? {
        cx.out.null_array();
    }
    Ok(())
}

/// BZMPOP timeout numkeys key [key …] MIN|MAX [COUNT count]. The timeout is
/// checked after the rest, as in Redis.
pub(super) fn bzmpop(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let m = parse_mpop(args, 2)?;
    let timeout = parse::timeout(&args[1])?;
    if !mpop_any(cx, &m)? {
        let keys = m.keys.iter().map(|k| k.to_vec()).collect();
        cx.block(keys, ValueType::ZSet, timeout, TimeoutReply::NullArray);
    }
    Ok(())
}
