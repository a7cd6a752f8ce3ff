//! Ranges of a sorted set: by rank, by score and by member bytes (lex).
//! ZRANGE and its older forms, ZRANGESTORE, ZCOUNT, ZLEXCOUNT and the
//! ZREMRANGEBY… commands (Redis's `zrangeGenericCommand` and kin).
//!
//! A score or lex range becomes a range of ranks through the store's
//! `count_below_score` / `count_below_lex`, so each command reads or
//! removes one slice of the set. As in Redis, a lex range is meaningful only
//! when every member has the same score.

use store::{Collection, Scored, ZSet};

use super::{reply_members, store_result, Listpack, LISTPACK_ENTRIES};
use crate::command::{Arg, CmdResult};
use crate::engine::Cx;
use crate::error::{CmdError, SYNTAX};
use crate::notify::class;
use crate::parse;

/// A score bound that is not a number.
const NOT_FLOAT_RANGE: &str = "ERR min or max is not a float";
/// A lex bound that does not start with `[`, `(` or is not `-` / `+`.
const NOT_LEX_RANGE: &str = "ERR min or max not valid string range item";
/// LIMIT on a range by rank.
const LIMIT_NEEDS_BY: &str =
    "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX";
/// WITHSCORES on a lex range.
const LEX_WITHSCORES: &str = "ERR syntax error, WITHSCORES not supported in combination with BYLEX";

/// One end of a score range: `1.5` (inclusive) or `(1.5` (exclusive).
#[derive(Clone, Copy, Debug)]
struct ScoreBound {
    value: f64,
    exclusive: bool,
}

impl ScoreBound {
    /// Redis's `zslParseRange` for one end.
    fn parse(arg: &[u8]) -> Option<ScoreBound> {
        let (text, exclusive) = match arg.split_first() {
            Some((b'(', rest)) => (rest, true),
            _ => (arg, false),
        };
        super::score::parse_bound(text).map(|value| ScoreBound { value, exclusive })
    }
}

/// One end of a lex range.
#[derive(Clone, Copy, Debug)]
enum LexBound<'a> {
    /// `-`: below every member.
    Lowest,
    /// `+`: above every member.
    Highest,
    /// `[member`.
    Inclusive(&'a [u8]),
    /// `(member`.
    Exclusive(&'a [u8]),
}

impl<'a> LexBound<'a> {
    /// Redis's `zslParseLexRangeItem`.
    fn parse(arg: &'a [u8]) -> Option<LexBound<'a>> {
        match arg.split_first()? {
            (b'-', []) => Some(LexBound::Lowest),
            (b'+', []) => Some(LexBound::Highest),
            (b'[', rest) => Some(LexBound::Inclusive(rest)),
            (b'(', rest) => Some(LexBound::Exclusive(rest)),
            _ => None,
        }
    }

    /// How many members sort before this bound when it is a range's lower
    /// end (`upper` false) or at or before it when it is the upper end.
    fn rank(self, z: &ZSet, upper: bool) -> store::Result<u64> {
        match self {
            LexBound::Lowest => Ok(0),
            LexBound::Highest => Ok(z.len()),
            // [m from below: members < m; [m from above: members <= m.
            LexBound::Inclusive(m) => z.count_below_lex(m, upper),
            LexBound::Exclusive(m) => z.count_below_lex(m, !upper),
        }
    }
}

/// A range of a sorted set as the client gave it.
#[derive(Clone, Copy, Debug)]
enum Span<'a> {
    /// Ranks, negative from the end, both inclusive.
    Rank(i64, i64),
    /// Scores from min to max.
    Score(ScoreBound, ScoreBound),
    /// Members from min to max.
    Lex(LexBound<'a>, LexBound<'a>),
}

/// Parses a score range, `min` then `max`.
fn score_span(min: &[u8], max: &[u8]) -> Result<Span<'static>, CmdError> {
    match (ScoreBound::parse(min), ScoreBound::parse(max)) {
        (Some(min), Some(max)) => Ok(Span::Score(min, max)),
        _ => Err(CmdError::msg(NOT_FLOAT_RANGE)),
    }
}

/// Parses a lex range, `min` then `max`.
fn lex_span<'a>(min: &'a [u8], max: &'a [u8]) -> Result<Span<'a>, CmdError> {
    match (LexBound::parse(min), LexBound::parse(max)) {
        (Some(min), Some(max)) => Ok(Span::Lex(min, max)),
        _ => Err(CmdError::msg(NOT_LEX_RANGE)),
    }
}

impl Span<'_> {
    /// The ranks `start..end` (ascending) that a score or lex range covers.
    fn ranks(&self, z: &ZSet) -> store::Result<(u64, u64)> {
        let (start, end) = match *self {
            Span::Rank(start, end) => return Ok(rank_bounds(z.len(), start, end)),
            // min: members below it (at or below it when exclusive) are out.
            Span::Score(min, max) => (
                z.count_below_score(min.value, min.exclusive)?,
                z.count_below_score(max.value, !max.exclusive)?,
            ),
            Span::Lex(min, max) => (min.rank(z, false)?, max.rank(z, true)?),
        };
        Ok((start, end.max(start)))
    }
}

/// Redis's sanitising of a rank range over `len` members: negative ranks
/// count from the end, then the range is clamped; empty when it starts past
/// the end or after it ends. Returns `start..end`.
fn rank_bounds(len: u64, start: i64, end: i64) -> (u64, u64) {
    let len_i = i64::try_from(len).unwrap_or(i64::MAX);
    let start = if start < 0 {
        len_i.saturating_add(start)
    } else {
        start
    }
    .max(0);
    let end = if end < 0 {
        len_i.saturating_add(end)
    } else {
        end
    };
    if start > end || start >= len_i {
        return (0, 0);
    }
    (start as u64, end.min(len_i - 1) as u64 + 1)
}

/// A parsed ZRANGE-family request.
#[derive(Debug)]
struct Request<'a> {
    span: Span<'a>,
    reverse: bool,
    withscores: bool,
    /// LIMIT's offset (0 without LIMIT).
    offset: i64,
    /// LIMIT's count; negative (-1 without LIMIT) means no limit.
    limit: i64,
}

/// Which range a command takes, when it is not ZRANGE's to choose.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum By {
    Rank,
    Score,
    Lex,
}

/// Redis's `zrangeGenericCommand` up to the key lookup: `args[first]` is the
/// source key, then min and max, then the options. `by` and `reverse` are
/// fixed by the older commands (ZRANGEBYSCORE…), chosen by the options for
/// ZRANGE and ZRANGESTORE (None). A store takes no WITHSCORES.
fn parse_request<'a>(
    args: &'a [Arg<'_>],
    first: usize,
    store: bool,
    by: Option<By>,
    reverse: Option<bool>,
) -> Result<Request<'a>, CmdError> {
    let (mut by_opt, mut rev_opt) = (by, reverse);
    let mut withscores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut j = first + 3;
    while j < args.len() {
        let a = &args[j];
        let left = args.len() - j - 1;
        if !store && parse::is(a, "withscores") {
            withscores = true;
        } else if parse::is(a, "limit") && left >= 2 {
            offset = parse::int(&args[j + 1])?;
            limit = parse::int(&args[j + 2])?;
            j += 2;
        } else if rev_opt.is_none() && parse::is(a, "rev") {
            rev_opt = Some(true);
        } else if by_opt.is_none() && parse::is(a, "bylex") {
            by_opt = Some(By::Lex);
        } else if by_opt.is_none() && parse::is(a, "byscore") {
            by_opt = Some(By::Score);
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        j += 1;
    }
    let by = by_opt.unwrap_or(By::Rank);
    let reverse = rev_opt.unwrap_or(false);
    // As in Redis, LIMIT 0 -1 reads as no LIMIT at all.
    if limit != -1 && by == By::Rank {
        return Err(CmdError::msg(LIMIT_NEEDS_BY));
    }
    if withscores && by == By::Lex {
        return Err(CmdError::msg(LEX_WITHSCORES));
    }
    let (mut min, mut max) = (&args[first + 1][..], &args[first + 2][..]);
    if reverse && by != By::Rank {
        // A reversed score or lex range is given as max, min.
        std::mem::swap(&mut min, &mut max);
    }
    let span = match by {
        By::Rank => Span::Rank(parse::int(min)?, parse::int(max)?),
        By::Score => score_span(min, max)?,
        By::Lex => lex_span(min, max)?,
    };
    Ok(Request {
        span,
        reverse,
        withscores,
        offset,
        limit,
    })
}

/// The members and scores a request selects, in reply order.
fn select(z: &ZSet, req: &Request<'_>) -> store::Result<Vec<Scored>> {
    let (lo, hi) = req.span.ranks(z)?;
    let (start, end) = if let Span::Rank(..) = req.span {
        if req.reverse {
            // Ranks counted from the highest score.
            let len = z.len();
            (len - hi, len - lo)
        } else {
            (lo, hi)
        }
    } else {
        // LIMIT applies inside the range, from the end the reply starts at;
        // a negative offset selects nothing (Redis skips to the end).
        let Ok(offset) = u64::try_from(req.offset) else {
            return Ok(Vec::new());
        };
        let available = (hi - lo).saturating_sub(offset);
        let take = u64::try_from(req.limit).map_or(available, |l| l.min(available));
        if req.reverse {
            (hi - offset.min(hi - lo) - take, hi - offset.min(hi - lo))
        } else {
            let start = lo + offset.min(hi - lo);
            (start, start + take)
        }
    };
    let mut items = z.range(start, end)?;
    if req.reverse {
        items.reverse();
    }
    Ok(items)
}

/// The client forms: ZRANGE, ZREVRANGE, ZRANGEBYSCORE…
fn range_reply(
    cx: &mut Cx<'_>,
    args: &[Arg<'_>],
    by: Option<By>,
    reverse: Option<bool>,
) -> CmdResult {
    let req = parse_request(args, 1, false, by, reverse)?;
    let db = cx.db();
    let items = cx
        .h()
        .read_collection::<ZSet, _>(db, &args[1], |z| select(z, &req))?;
    let items = cx.miss_if_none(&args[1], items);
    reply_members(cx, &items.unwrap_or_default(), req.withscores);
    Ok(())
}

pub(super) fn zrange(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    range_reply(cx, args, None, None)
}

pub(super) fn zrevrange(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    range_reply(cx, args, Some(By::Rank), Some(true))
}

pub(super) fn zrangebyscore(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    range_reply(cx, args, Some(By::Score), Some(false))
}

pub(super) fn zrevrangebyscore(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    range_reply(cx, args, Some(By::Score), Some(true))
}

pub(super) fn zrangebylex(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    range_reply(cx, args, Some(By::Lex), Some(false))
}

pub(super) fn zrevrangebylex(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    range_reply(cx, args, Some(By::Lex), Some(true))
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]:
/// replaces `dst` (whatever it held) with the range, or deletes it when the
/// range is empty or `src` is missing.
pub(super) fn zrangestore(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let req = parse_request(args, 2, true, None, None)?;
    let db = cx.db();
    let items = cx
        .h()
        .read_collection::<ZSet, _>(db, &args[2], |z| select(z, &req))?;
    let mut items = cx.miss_if_none(&args[2], items).unwrap_or_default();
    // Redis adds the members one by one to a set it starts as a listpack,
    // unless a range by rank knows it will be too long for one.
    let by_rank = matches!(req.span, Span::Rank(..));
    let mut lp = Listpack(!by_rank || items.len() as u64 <= LISTPACK_ENTRIES);
    for (len, (member, score)) in items.iter_mut().enumerate() {
        lp.admit(len as u64, member);
        *score = lp.store(*score);
    }
    store_result(cx, &args[1], items, "zrangestore")
}

/// ZCOUNT and ZLEXCOUNT after parsing.
fn count(cx: &mut Cx<'_>, key: &[u8], span: Span<'_>) -> CmdResult {
    let db = cx.db();
    let n = cx.h().read_collection::<ZSet, _>(db, key, |z| {
        let (lo, hi) = span.ranks(z)?;
        Ok(hi - lo)
    })?;
    let n = cx.miss_if_none(key, n);
    cx.out.integer(n.unwrap_or(0) as i64);
    Ok(())
}

pub(super) fn zcount(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let span = score_span(&args[2], &args[3])?;
    count(cx, &args[1], span)
}

pub(super) fn zlexcount(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let span = lex_span(&args[2], &args[3])?;
    count(cx, &args[1], span)
}

/// The ZREMRANGEBY… commands after parsing: one write. `event` is the
/// command's name.
fn remove(cx: &mut Cx<'_>, key: &[u8], span: Span<'_>, event: &str) -> CmdResult {
    let db = cx.db();
    let n = cx.h().write_collection::<ZSet, _>(db, key, false, |z| {
        let (lo, hi) = span.ranks(z)?;
        Ok((z.remove_range(lo, hi)?, z.is_empty()))
    })?;
    let (n, emptied) = n.unwrap_or((0, false));
    if n > 0 {
        cx.notify_removed(class::ZSET, event, key, emptied);
    }
    cx.out.integer(n as i64);
    Ok(())
}

pub(super) fn zremrangebyrank(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let span = Span::Rank(parse::int(&args[2])?, parse::int(&args[3])?);
    remove(cx, &args[1], span, "zremrangebyrank")
}

pub(super) fn zremrangebyscore(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let span = score_span(&args[2], &args[3])?;
    remove(cx, &args[1], span, "zremrangebyscore")
}

pub(super) fn zremrangebylex(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let span = lex_span(&args[2], &args[3])?;
    remove(cx, &args[1], span, "zremrangebylex")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_bounds_follow_redis() {
        assert_eq!(rank_bounds(5, 0, -1), (0, 5));
        assert_eq!(rank_bounds(5, -2, -1), (3, 5));
        assert_eq!(rank_bounds(5, -100, 1), (0, 2));
        assert_eq!(rank_bounds(5, 3, 1), (0, 0));
        assert_eq!(rank_bounds(5, 5, 10), (0, 0));
        assert_eq!(rank_bounds(5, 0, 100), (0, 5));
        assert_eq!(rank_bounds(5, i64::MIN, i64::MAX), (0, 5));
        assert_eq!(rank_bounds(5, 0, i64::MIN), (0, 0));
        assert_eq!(rank_bounds(0, 0, -1), (0, 0));
    }

    #[test]
    fn lex_bounds_parse() {
        assert!(matches!(LexBound::parse(b"-"), Some(LexBound::Lowest)));
        assert!(matches!(LexBound::parse(b"+"), Some(LexBound::Highest)));
        assert!(matches!(
            LexBound::parse(b"[a"),
            Some(LexBound::Inclusive(b"a"))
        ));
        assert!(matches!(
            LexBound::parse(b"("),
            Some(LexBound::Exclusive(b""))
        ));
        for bad in [&b""[..], b"a", b"+a", b"-a", b"]"] {
            assert!(LexBound::parse(bad).is_none());
        }
    }
}
