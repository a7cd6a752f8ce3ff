//! The algebra of sorted sets: ZUNION, ZINTER, ZDIFF, their STORE forms and
//! ZINTERCARD (Redis's `zunionInterDiffGenericCommand`).
//!
//! Plain sets are accepted as sources, every member scoring 1, as in Redis.
//! Floating-point sums depend on their order, so the sources are combined
//! in Redis's order: by ascending size (a stable sort, as glibc's `qsort`
//! is for these small arrays) for union and intersection, as given for the
//! difference. A weighted score that is NaN (`0 * inf`) counts as 0, and so
//! does a SUM of `inf` and `-inf`.

use std::collections::hash_map::{Entry, HashMap};

use store::{Collection, Scored, Set, ZSet};

use super::score::parse_score;
use super::{by_score, reply_members, settle_negative_zeros, store_result};
use crate::command::{Arg, CmdResult};
use crate::engine::Cx;
use crate::error::{CmdError, SYNTAX};
use crate::parse;

/// A weight that is not a number.
const BAD_WEIGHT: &str = "ERR weight value is not a float";
/// ZINTERCARD's LIMIT below 0 or not a number.
const BAD_LIMIT: &str = "ERR LIMIT can't be negative";

/// The operation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

/// How the scores of a member found in several sources combine.
#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// Redis's `zunionInterAggregate`: folds `value` into `target`.
    fn fold(self, target: &mut f64, value: f64) {
        match self {
            Aggregate::Sum => {
                *target += value;
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            // A NaN value loses both comparisons, as in C.
            Aggregate::Min => {
                if value < *target {
                    *target = value;
                }
            }
            Aggregate::Max => {
                if value > *target {
                    *target = value;
                }
            }
        }
    }
}

/// One input: a sorted set, a set (scores 1) or nothing.
enum Source {
    Missing,
    Sorted(ZSet),
    Plain(Set),
}

impl Source {
    /// Reads `key` as a sorted set or else a set; WRONGTYPE for anything
    /// else.
    fn read(cx: &mut Cx<'_>, key: &[u8]) -> Result<Source, CmdError> {
        let db = cx.db();
        match cx.h().read_collection::<ZSet, _>(db, key, |z| z.detached()) {
            Ok(Some(z)) => return Ok(Source::Sorted(z)),
            Ok(None) => {
                cx.miss(key);
                return Ok(Source::Missing);
            }
            Err(store::Error::WrongType) => {}
            Err(e) => return Err(e.into()),
        }
        let set = cx
            .h()
            .read_collection::<Set, _>(db, key, |s| s.detached())?;
        if set.is_none() {
            // Gone between the two reads.
            cx.miss(key);
        }
        Ok(set.map_or(Source::Missing, Source::Plain))
    }

    fn len(&self) -> u64 {
        match self {
            Source::Missing => 0,
            Source::Sorted(z) => z.len(),
            Source::Plain(s) => s.len(),
        }
    }

    /// Every member with its score, in the source's order.
    fn items(&self) -> store::Result<Vec<Scored>> {
        match self {
            Source::Missing => Ok(Vec::new()),
            Source::Sorted(z) => z.range(0, z.len()),
            Source::Plain(s) => Ok(s.members()?.into_iter().map(|m| (m, 1.0)).collect()),
        }
    }

    /// The score of `member`, if present.
    fn find(&self, member: &[u8]) -> store::Result<Option<f64>> {
        match self {
            Source::Missing => Ok(None),
            Source::Sorted(z) => z.score(member),
            Source::Plain(s) => Ok(s.contains(member)?.then_some(1.0)),
        }
    }
}

/// What to do with the result.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Output<'a> {
    /// Reply with the members (and scores with WITHSCORES).
    Reply,
    /// Store under this key and reply with the count.
    Store(&'a [u8]),
    /// ZINTERCARD: reply with the count only.
    Cardinality,
}

/// The shared implementation: `args[numkeys_at]` is the key count, the keys
/// follow, then the options. `name` is the command for the numkeys error
/// and the STORE forms' keyspace event.
fn setop(
    cx: &mut Cx<'_>,
    args: &[Arg<'_>],
    numkeys_at: usize,
    op: Op,
    output: Output<'_>,
    name: &str,
) -> CmdResult {
    let numkeys = parse::int(&args[numkeys_at])?;
    if numkeys < 1 {
        return Err(CmdError::owned(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        )));
    }
    let first = numkeys_at + 1;
    let n = usize::try_from(numkeys)
        .ok()
        .filter(|&n| n <= args.len() - first)
        .ok_or(CmdError::msg(SYNTAX))?;
    // Sources first: as in Redis, a WRONGTYPE wins over a bad option.
    let mut sources = Vec::with_capacity(n);
    for key in &args[first..first + n] {
        sources.push((Source::read(cx, key)?, 1.0f64));
    }

    let mut aggregate = Aggregate::Sum;
    let mut withscores = false;
    let mut limit = 0u64;
    let mut j = first + n;
    let ops_options = op != Op::Diff && output != Output::Cardinality;
    while j < args.len() {
        let a = &args[j];
        let remaining = args.len() - j;
        if ops_options && remaining > n && parse::is(a, "weights") {
            for (k, (_, weight)) in sources.iter_mut().enumerate() {
                *weight = parse_score(&args[j + 1 + k]).ok_or(CmdError::msg(BAD_WEIGHT))?;
            }
            j += 1 + n;
        } else if ops_options && remaining >= 2 && parse::is(a, "aggregate") {
            let v = &args[j + 1];
            aggregate = match () {
                _ if parse::is(v, "sum") => Aggregate::Sum,
                _ if parse::is(v, "min") => Aggregate::Min,
                _ if parse::is(v, "max") => Aggregate::Max,
                _ => return Err(CmdError::msg(SYNTAX)),
            };
            j += 2;
        } else if output == Output::Reply && parse::is(a, "withscores") {
            withscores = true;
            j += 1;
        } else if output == Output::Cardinality && remaining >= 2 && parse::is(a, "limit") {
            limit = parse::int(&args[j + 1])
                .ok()
                .and_then(|l| u64::try_from(l).ok())
                .ok_or(CmdError::msg(BAD_LIMIT))?;
            j += 2;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
    }

    if op != Op::Diff {
        sources.sort_by_key(|(s, _)| s.len());
    }
    let mut items = match op {
        Op::Inter => inter(&sources, aggregate, output == Output::Cardinality, limit)?,
        Op::Union => union(&sources, aggregate)?,
        Op::Diff => diff(&sources)?,
    };
    match output {
        Output::Cardinality => cx.out.integer(items.len() as i64),
        Output::Store(dst) => {
            settle_negative_zeros(&mut items);
            return store_result(cx, dst, items, name);
        }
        Output::Reply => {
            items.sort_by(by_score);
            reply_members(cx, &items, withscores);
        }
    }
    Ok(())
}

/// `weight * score`, with NaN (`0 * inf`) as 0.
fn weighted(score: f64, weight: f64) -> f64 {
    let s = score * weight;
    if s.is_nan() {
        0.0
    } else {
        s
    }
}

/// Members of the smallest source found in every other one. For
/// ZINTERCARD (`count_only`) the scores are not needed and the walk stops
/// at `limit` members (0: no limit).
fn inter(
    sources: &[(Source, f64)],
    agg: Aggregate,
    count_only: bool,
    limit: u64,
) -> store::Result<Vec<Scored>> {
    let mut out = Vec::new();
    let Some(((smallest, w0), rest)) = sources.split_first() else {
        return Ok(out);
    };
    'members: for (member, score) in smallest.items()? {
        let mut acc = weighted(score, *w0);
        for (src, w) in rest {
            match src.find(&member)? {
                // Only the first weighted score is cleaned of NaN in Redis.
                Some(s) => agg.fold(&mut acc, s * w),
                None => continue 'members,
            }
        }
        out.push((member, acc));
        if count_only && limit > 0 && out.len() as u64 >= limit {
            break;
        }
    }
    Ok(out)
}

/// Every member of every source, scores folded in source order.
fn union(sources: &[(Source, f64)], agg: Aggregate) -> store::Result<Vec<Scored>> {
    let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
    for (src, w) in sources {
        for (member, score) in src.items()? {
            let s = weighted(score, *w);
            match acc.entry(member) {
                Entry::Vacant(e) => {
                    e.insert(s);
                }
                Entry::Occupied(mut e) => agg.fold(e.get_mut(), s),
            }
        }
    }
    Ok(acc.into_iter().collect())
}

/// Members of the first source found in no other, with their own scores.
fn diff(sources: &[(Source, f64)]) -> store::Result<Vec<Scored>> {
    let Some(((first, _), rest)) = sources.split_first() else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    'members: for (member, score) in first.items()? {
        for (src, _) in rest {
            if src.find(&member)?.is_some() {
                continue 'members;
            }
        }
        out.push((member, score));
    }
    Ok(out)
}

pub(super) fn zunion(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    setop(cx, args, 1, Op::Union, Output::Reply, "zunion")
}

pub(super) fn zinter(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    setop(cx, args, 1, Op::Inter, Output::Reply, "zinter")
}

pub(super) fn zdiff(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    setop(cx, args, 1, Op::Diff, Output::Reply, "zdiff")
}

pub(super) fn zintercard(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    setop(cx, args, 1, Op::Inter, Output::Cardinality, "zintercard")
}

pub(super) fn zunionstore(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    setop(
        cx,
        args,
        2,
        Op::Union,
        Output::Store(&args[1]),
        "zunionstore",
    )
}

pub(super) fn zinterstore(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    setop(
        cx,
        args,
        2,
        Op::Inter,
        Output::Store(&args[1]),
        "zinterstore",
    )
}

pub(super) fn zdiffstore(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    setop(cx, args, 2, Op::Diff, Output::Store(&args[1]), "zdiffstore")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_of_opposite_infinities_is_zero() {
        let mut t = f64::INFINITY;
        Aggregate::Sum.fold(&mut t, f64::NEG_INFINITY);
        assert_eq!(t, 0.0);
        let mut t = 1.0;
        Aggregate::Min.fold(&mut t, f64::NAN);
        assert_eq!(t, 1.0);
        Aggregate::Max.fold(&mut t, f64::NAN);
        assert_eq!(t, 1.0);
        assert_eq!(weighted(f64::INFINITY, 0.0), 0.0);
    }
}
