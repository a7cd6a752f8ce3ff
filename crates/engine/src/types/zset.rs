//! Sorted sets: ZADD and the rest of Redis's sorted-set commands
//! (`t_zset.c`), with Redis 7.0's replies and error texts. Ranges (ZRANGE,
//! ZCOUNT, ZREMRANGEBY…) are in [`range`], the multi-key algebra (ZUNION,
//! ZINTER, ZDIFF and their STORE forms) in [`setops`], the pops and their
//! blocking forms in [`pop`], and reading and printing scores in [`score`].
//!
//! Every single-key command is one `Handle::read_collection` or
//! `write_collection` call, so it is atomic across workers. The STORE
//! commands read their sources and then replace the destination; they carry
//! the ATOMIC flag so that the dispatcher runs them in the store's
//! exclusive section.
//!
//! Redis keeps a small sorted set as a listpack, where a score that is an
//! integer is stored as one, so a score of -0 reads back as 0; a large set
//! (a skiplist) keeps -0. The store has no such encodings, so the writers
//! follow, member by member, the encoding Redis would use ([`Listpack`]) and
//! store 0 for -0 where it would be a listpack. Redis never turns a skiplist
//! back into a listpack when the set shrinks, and the store does not record
//! the encoding: a set that grew past 128 members and shrank back is taken
//! for a listpack again, and a -0 written to it then reads back as 0 where
//! Redis says -0.

mod pop;
mod range;
pub(crate) mod score;
mod setops;

use proto::resp::Protocol;
use store::{Collection, Scored, ZSet};

use crate::command::{flags::*, Arg, CmdResult, Command};
use crate::engine::Cx;
use crate::error::{CmdError, NOT_FLOAT, SYNTAX};
use crate::notify::class;
use crate::{parse, random, scan};

pub(super) use score::{format_score, parse_score};

/// ZADD with both NX and XX.
const XX_AND_NX: &str = "ERR XX and NX options at the same time are not compatible";
/// ZADD with GT, LT and NX mixed.
const GT_LT_NX: &str = "ERR GT, LT, and/or NX options at the same time are not compatible";
/// ZADD INCR with more than one pair.
const INCR_ONE_PAIR: &str = "ERR INCR option supports a single increment-element pair";
/// An increment that turns a score into NaN (`inf` plus `-inf`).
const NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";
/// ZRANDMEMBER's count of `i64::MIN` (Redis takes -LONG_MAX..LONG_MAX).
const RANDOM_COUNT_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";
/// ZRANDMEMBER's count too large to double for WITHSCORES, or too large for
/// shoal to reply with.
const OUT_OF_RANGE: &str = "ERR value is out of range";

/// The most elements ZRANDMEMBER with a negative count (members may repeat)
/// replies with. Redis has no limit and would build any reply it is asked
/// for; shoal builds replies in memory, so a larger count is refused with
/// "value is out of range" rather than exhausting it.
const RANDOM_REPLY_MAX: u64 = 1 << 24;

crate::command::group_cmd!("sorted-set");

/// The sorted-set commands. ZMPOP, BZMPOP, ZUNION, ZINTER, ZDIFF and
/// ZINTERCARD take a key count, which the table cannot express: they list
/// (0, 0, 0) as Redis does for its movable-keys commands; the STORE forms
/// list their destination (1, 1, 1), also as Redis does.
#[rustfmt::skip]
pub(crate) const COMMANDS: &[Command] = &[
    cmd("zadd", -4, WRITE | DENYOOM | FAST, (1, 1, 1), "1.2.0", "Add one or more members to a sorted set, or update its score if it already exists", zadd),
    cmd("zincrby", 4, WRITE | DENYOOM | FAST, (1, 1, 1), "1.2.0", "Increment the score of a member in a sorted set", zincrby),
    cmd("zrem", -3, WRITE | FAST, (1, 1, 1), "1.2.0", "Remove one or more members from a sorted set", zrem),
    cmd("zcard", 2, READONLY | FAST, (1, 1, 1), "1.2.0", "Get the number of members in a sorted set", zcard),
    cmd("zcount", 4, READONLY | FAST, (1, 1, 1), "2.0.0", "Count the members in a sorted set with scores within the given values", range::zcount),
    cmd("zlexcount", 4, READONLY | FAST, (1, 1, 1), "2.8.9", "Count the number of members in a sorted set between a given lexicographical range", range::zlexcount),
    cmd("zscore", 3, READONLY | FAST, (1, 1, 1), "1.2.0", "Get the score associated with the given member in a sorted set", zscore),
    cmd("zmscore", -3, READONLY | FAST, (1, 1, 1), "6.2.0", "Get the score associated with the given members in a sorted set", zmscore),
    cmd("zrank", 3, READONLY | FAST, (1, 1, 1), "2.0.0", "Determine the index of a member in a sorted set", zrank),
    cmd("zrevrank", 3, READONLY | FAST, (1, 1, 1), "2.0.0", "Determine the index of a member in a sorted set, with scores ordered from high to low", zrevrank),
    cmd("zrange", -4, READONLY, (1, 1, 1), "1.2.0", "Return a range of members in a sorted set", range::zrange),
    cmd("zrangebyscore", -4, READONLY, (1, 1, 1), "1.0.5", "Return a range of members in a sorted set, by score", range::zrangebyscore),
    cmd("zrevrangebyscore", -4, READONLY, (1, 1, 1), "2.2.0", "Return a range of members in a sorted set, by score, with scores ordered from high to low", range::zrevrangebyscore),
    cmd("zrangebylex", -4, READONLY, (1, 1, 1), "2.8.9", "Return a range of members in a sorted set, by lexicographical range", range::zrangebylex),
    cmd("zrevrangebylex", -4, READONLY, (1, 1, 1), "2.8.9", "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.", range::zrevrangebylex),
    cmd("zrevrange", -4, READONLY, (1, 1, 1), "1.2.0", "Return a range of members in a sorted set, by index, with scores ordered from high to low", range::zrevrange),
    cmd("zrangestore", -5, WRITE | DENYOOM | ATOMIC, (1, 2, 1), "6.2.0", "Store a range of members from sorted set into another key", range::zrangestore),
    cmd("zremrangebyrank", 4, WRITE, (1, 1, 1), "2.0.0", "Remove all members in a sorted set within the given indexes", range::zremrangebyrank),
    cmd("zremrangebyscore", 4, WRITE, (1, 1, 1), "1.2.0", "Remove all members in a sorted set within the given scores", range::zremrangebyscore),
    cmd("zremrangebylex", 4, WRITE, (1, 1, 1), "2.8.9", "Remove all members in a sorted set between the given lexicographical range", range::zremrangebylex),
    cmd("zpopmin", -2, WRITE | FAST, (1, 1, 1), "5.0.0", "Remove and return members with the lowest scores in a sorted set", pop::zpopmin),
    cmd("zpopmax", -2, WRITE | FAST, (1, 1, 1), "5.0.0", "Remove and return members with the highest scores in a sorted set", pop::zpopmax),
    Command { movable_keys: Some(crate::command::keys_numkeys_first), ..cmd("zmpop", -4, WRITE, (0, 0, 0), "7.0.0", "Remove and return members with scores in a sorted set", pop::zmpop) },
    cmd("bzpopmin", -3, WRITE | NOSCRIPT | BLOCKING | FAST, (1, -2, 1), "5.0.0", "Remove and return the member with the lowest score from one or more sorted sets, or block until one is available", pop::bzpopmin),
    cmd("bzpopmax", -3, WRITE | NOSCRIPT | BLOCKING | FAST, (1, -2, 1), "5.0.0", "Remove and return the member with the highest score from one or more sorted sets, or block until one is available", pop::bzpopmax),
    Command { movable_keys: Some(crate::command::keys_numkeys_second), ..cmd("bzmpop", -5, WRITE | BLOCKING, (0, 0, 0), "7.0.0", "Remove and return members with scores in a sorted set or block until one is available", pop::bzmpop) },
    cmd("zrandmember", -2, READONLY, (1, 1, 1), "6.2.0", "Get one or multiple random elements from a sorted set", zrandmember),
    Command { movable_keys: Some(crate::command::keys_numkeys_first), ..cmd("zunion", -3, READONLY | ATOMIC, (0, 0, 0), "6.2.0", "Add multiple sorted sets", setops::zunion) },
    Command { movable_keys: Some(crate::command::keys_numkeys_first), ..cmd("zinter", -3, READONLY | ATOMIC, (0, 0, 0), "6.2.0", "Intersect multiple sorted sets", setops::zinter) },
    Command { movable_keys: Some(crate::command::keys_numkeys_first), ..cmd("zdiff", -3, READONLY | ATOMIC, (0, 0, 0), "6.2.0", "Subtract multiple sorted sets", setops::zdiff) },
    Command { movable_keys: Some(crate::command::keys_destination_then_numkeys), ..cmd("zunionstore", -4, WRITE | DENYOOM | ATOMIC, (1, 1, 1), "2.0.0", "Add multiple sorted sets and store the resulting sorted set in a new key", setops::zunionstore) },
    Command { movable_keys: Some(crate::command::keys_destination_then_numkeys), ..cmd("zinterstore", -4, WRITE | DENYOOM | ATOMIC, (1, 1, 1), "2.0.0", "Intersect multiple sorted sets and store the resulting sorted set in a new key", setops::zinterstore) },
    Command { movable_keys: Some(crate::command::keys_destination_then_numkeys), ..cmd("zdiffstore", -4, WRITE | DENYOOM | ATOMIC, (1, 1, 1), "6.2.0", "Subtract multiple sorted sets and store the resulting sorted set in a new key", setops::zdiffstore) },
    Command { movable_keys: Some(crate::command::keys_numkeys_first), ..cmd("zintercard", -3, READONLY | ATOMIC, (0, 0, 0), "7.0.0", "Intersect multiple sorted sets and return the cardinality of the result", setops::zintercard) },
    cmd("zscan", -3, READONLY, (1, 1, 1), "2.8.0", "Incrementally iterate sorted sets elements and associated scores", zscan),
];

// ---------- shared helpers ----------

/// Writes `score` as Redis's `addReplyDouble` does: RESP3 `,<text>`, RESP2
/// a bulk string.
fn reply_score(cx: &mut Cx<'_>, score: f64) {
    cx.out.double(format_score(score).as_bytes());
}

/// Whether the client speaks RESP3.
fn resp3(cx: &Cx<'_>) -> bool {
    cx.out.protocol() == Protocol::Resp3
}

/// Members, each followed by its score when `withscores`: one flat array in
/// RESP2, an array of `[member, score]` pairs in RESP3 (Redis cannot use a
/// map: the order matters).
fn reply_members(cx: &mut Cx<'_>, items: &[Scored], withscores: bool) {
    let pairs = withscores && resp3(cx);
    let len = if withscores && !pairs {
        items.len() * 2
    } else {
        items.len()
    };
    cx.out.array_len(len);
    for (member, score) in items {
        if pairs {
            cx.out.array_len(2);
        }
        cx.out.bulk(member);
        if withscores {
            reply_score(cx, *score);
        }
    }
}

/// Whether `x` is -0.
fn is_negative_zero(x: f64) -> bool {
    x == 0.0 && x.is_sign_negative()
}

/// Redis 7.0's `zset-max-listpack-entries` / `-value` defaults.
const LISTPACK_ENTRIES: u64 = 128;
const LISTPACK_VALUE: usize = 64;

/// Follows whether Redis would hold a sorted set as a listpack while members
/// go in one at a time: `zsetAdd` turns it into a skiplist just before a
/// member that would make it longer than 128 entries or that is longer than
/// 64 bytes, and never turns it back (see the module docs for why it
/// matters).
struct Listpack(bool);

impl Listpack {
    /// Before adding a new `member` to a set of `len` members: whether the
    /// set is still a listpack when it goes in.
    fn admit(&mut self, len: u64, member: &[u8]) -> bool {
        if len + 1 > LISTPACK_ENTRIES || member.len() > LISTPACK_VALUE {
            self.0 = false;
        }
        self.0
    }

    /// The score as stored: a listpack stores -0 as the integer 0.
    fn store(&self, score: f64) -> f64 {
        if self.0 && is_negative_zero(score) {
            0.0
        } else {
            score
        }
    }
}

/// Redis's order of sorted-set members: by score, then by bytes.
fn by_score(a: &Scored, b: &Scored) -> std::cmp::Ordering {
    a.1.partial_cmp(&b.1)
        .unwrap_or(std::cmp::Ordering::Equal)
        .then_with(|| a.0.cmp(&b.0))
}

/// A sorted set of `items` (distinct members, scores not NaN), for a STORE
/// command's destination. Sorting first makes each insert an append.
fn build_zset(mut items: Vec<Scored>) -> store::Result<ZSet> {
    items.sort_by(by_score);
    let mut z = ZSet::empty();
    for (member, score) in &items {
        z.insert(member, *score)?;
    }
    Ok(z)
}

/// ZUNIONSTORE and kin build the result as a skiplist and turn it into a
/// listpack when it fits (`zsetConvertToListpackIfNeeded`): then every -0
/// becomes 0.
fn settle_negative_zeros(items: &mut [Scored]) {
    let fits = items.len() as u64 <= LISTPACK_ENTRIES
        && items.iter().all(|(m, _)| m.len() <= LISTPACK_VALUE);
    let lp = Listpack(fits);
    for (_, score) in items.iter_mut() {
        *score = lp.store(*score);
    }
}

/// Replaces `dst` with `items` (deleting it when there are none) and
/// replies with their number: the end of every STORE command. `event`
/// names the command for keyspace notifications.
pub(super) fn store_result(
    cx: &mut Cx<'_>,
    dst: &[u8],
    items: Vec<Scored>,
    event: &str,
) -> CmdResult {
    let count = items.len();
    let z = build_zset(items)?;
    let db = cx.db();
    if count > 0 {
        cx.h().store_collection(db, dst, z)?;
        cx.signal_ready(dst);
        cx.notify(class::ZSET, event, dst);
    } else if cx.h().delete(db, dst)? {
        cx.notify(class::GENERIC, "del", dst);
    }
    cx.out.integer(count as i64);
    Ok(())
}

// ---------- ZADD and ZINCRBY ----------

/// ZADD's options (GEOADD sets NX, XX and CH).
#[derive(Clone, Copy, Default)]
pub(super) struct AddFlags {
    pub(super) nx: bool,
    pub(super) xx: bool,
    pub(super) gt: bool,
    pub(super) lt: bool,
    pub(super) ch: bool,
    pub(super) incr: bool,
}

/// What a ZADD did.
#[derive(Default)]
struct Added {
    added: u64,
    updated: u64,
    /// Members not skipped by NX, XX, GT or LT.
    processed: u64,
    /// The last processed member's new score (INCR's reply).
    score: f64,
}

fn zadd(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let mut f = AddFlags::default();
    let mut i = 2;
    while let Some(a) = args.get(i) {
        let flag = match () {
            _ if parse::is(a, "nx") => &mut f.nx,
            _ if parse::is(a, "xx") => &mut f.xx,
            _ if parse::is(a, "gt") => &mut f.gt,
            _ if parse::is(a, "lt") => &mut f.lt,
            _ if parse::is(a, "ch") => &mut f.ch,
            _ if parse::is(a, "incr") => &mut f.incr,
            _ => break,
        };
        *flag = true;
        i += 1;
    }
    let elements = &args[i..];
    if elements.is_empty() || !elements.len().is_multiple_of(2) {
        return Err(CmdError::msg(SYNTAX));
    }
    if f.nx && f.xx {
        return Err(CmdError::msg(XX_AND_NX));
    }
    // At most one of GT, LT and NX.
    if u8::from(f.gt) + u8::from(f.lt) + u8::from(f.nx) > 1 {
        return Err(CmdError::msg(GT_LT_NX));
    }
    if f.incr && elements.len() > 2 {
        return Err(CmdError::msg(INCR_ONE_PAIR));
    }
    let pairs = elements
        .chunks_exact(2)
        .map(|p| parse_score(&p[0]).map(|s| (s, &*p[1])))
        .collect::<Option<Vec<_>>>()
        .ok_or(CmdError::msg(NOT_FLOAT))?;
    add(cx, &args[1], &pairs, f)
}

fn zincrby(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let incr = parse_score(&args[2]).ok_or(CmdError::msg(NOT_FLOAT))?;
    let flags = AddFlags {
        incr: true,
        ..AddFlags::default()
    };
    add(cx, &args[1], &[(incr, &args[3])], flags)
}

/// ZADD's work (Redis's `zsetAdd` per pair) and reply, in one write;
/// GEOADD's too, with its coordinates turned into scores.
pub(super) fn add(cx: &mut Cx<'_>, key: &[u8], pairs: &[(f64, &[u8])], f: AddFlags) -> CmdResult {
    let db = cx.db();
    let res = cx.h().write_collection::<ZSet, _>(db, key, !f.xx, |z| {
        let mut out = Added::default();
        let mut lp = Listpack(z.encoding_name() == "listpack");
        for &(score, member) in pairs {
            let new = match z.score(member)? {
                Some(_) if f.nx => continue,
                Some(cur) => {
                    let new = if f.incr { cur + score } else { score };
                    if new.is_nan() {
                        // Pairs before this one stay added, as in Redis.
                        return Ok((out, Some(CmdError::msg(NAN_SCORE))));
                    }
                    if (f.lt && new >= cur) || (f.gt && new <= cur) {
                        continue;
                    }
                    // -0 and 0 are the same score: no update.
                    if new != cur {
                        z.set_score(member, lp.store(new), Some(cur))?;
                        out.updated += 1;
                    }
                    new
                }
                None if f.xx => continue,
                None => {
                    lp.admit(z.len(), member);
                    z.set_score(member, lp.store(score), None)?;
                    out.added += 1;
                    score
                }
            };
            out.processed += 1;
            out.score = new;
        }
        Ok((out, None))
    })?;
    // XX on a missing key: nothing to do.
    let (out, error) = res.unwrap_or_default();
    if out.added > 0 {
        cx.signal_ready(key);
    }
    if out.added + out.updated > 0 {
        cx.notify(class::ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
    if let Some(e) = error {
        return Err(e);
    }
    if f.incr {
        if out.processed > 0 {
            // The computed score, even where -0 was stored as 0.
            reply_score(cx, out.score);
        } else {
            cx.out.null();
        }
    } else {
        let n = if f.ch {
            out.added + out.updated
        } else {
            out.added
        };
        cx.out.integer(n as i64);
    }
    Ok(())
}

// ---------- single-key reads and ZREM ----------

fn zrem(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let removed = cx
        .h()
        .write_collection::<ZSet, _>(db, &args[1], false, |z| {
            let mut n = 0i64;
            for m in &args[2..] {
                n += i64::from(z.remove(m)?);
            }
            Ok((n, z.is_empty()))
        })?;
    let (removed, emptied) = removed.unwrap_or((0, false));
    if removed > 0 {
        cx.notify_removed(class::ZSET, "zrem", &args[1], emptied);
    }
    cx.out.integer(removed);
    Ok(())
}

fn zcard(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let len = cx
        .h()
        .read_collection::<ZSet, _>(db, &args[1], |z| Ok(z.len()))?;
    let len = cx.miss_if_none(&args[1], len);
    cx.out.integer(len.unwrap_or(0) as i64);
    Ok(())
}

fn zscore(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let score = cx
        .h()
        .read_collection::<ZSet, _>(db, &args[1], |z| z.score(&args[2]))?;
    let score = cx.miss_if_none(&args[1], score);
    match score.flatten() {
        Some(s) => reply_score(cx, s),
        None => cx.out.null(),
    }
    Ok(())
}

fn zmscore(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let members = &args[2..];
    let scores = cx.h().read_collection::<ZSet, _>(db, &args[1], |z| {
        members
            .iter()
            .map(|m| z.score(m))
            .collect::<store::Result<Vec<_>>>()
    })?;
    // A missing key is an empty set: every score is nil.
    let scores = cx.miss_if_none(&args[1], scores);
    let scores = scores.unwrap_or_else(|| vec![None; members.len()]);
    cx.out.array_len(scores.len());
    for s in scores {
        match s {
            Some(s) => reply_score(cx, s),
            None => cx.out.null(),
        }
    }
    Ok(())
}

/// ZRANK and ZREVRANK.
fn rank(cx: &mut Cx<'_>, args: &[Arg<'_>], reverse: bool) -> CmdResult {
    let db = cx.db();
    let rank = cx.h().read_collection::<ZSet, _>(db, &args[1], |z| {
        Ok(z.rank(&args[2])?
            .map(|r| if reverse { z.len() - 1 - r } else { r }))
    })?;
    let rank = cx.miss_if_none(&args[1], rank);
    match rank.flatten() {
        Some(r) => cx.out.integer(r as i64),
        None => cx.out.null(),
    }
    Ok(())
}

fn zrank(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    rank(cx, args, false)
}

fn zrevrank(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    rank(cx, args, true)
}

// ---------- ZRANDMEMBER ----------

fn zrandmember(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let Some(count) = args.get(2) else {
        let member = cx.h().read_collection::<ZSet, _>(db, &args[1], |z| {
            Ok(z.nth(random::below(z.len()))?.map(|(m, _)| m))
        })?;
        let member = cx.miss_if_none(&args[1], member);
        match member.flatten() {
            Some(m) => cx.out.bulk(&m),
            None => cx.out.null(),
        }
        return Ok(());
    };
    let count = parse::int(count)?;
    if count == i64::MIN {
        return Err(CmdError::msg(RANDOM_COUNT_RANGE));
    }
    let withscores = match args.get(3) {
        None => false,
        Some(a) if args.len() == 4 && parse::is(a, "withscores") => true,
        Some(_) => return Err(CmdError::msg(SYNTAX)),
    };
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(CmdError::msg(OUT_OF_RANGE));
    }
    let unique = count >= 0;
    let n = count.unsigned_abs();
    if !unique && n > RANDOM_REPLY_MAX {
        return Err(CmdError::msg(OUT_OF_RANGE));
    }
    let picked = cx.h().read_collection::<ZSet, _>(db, &args[1], |z| {
        let len = z.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        if !unique {
            // With repetition, in random order.
            return (0..n)
                .filter_map(|_| z.nth(random::below(len)).transpose())
                .collect();
        }
        if n >= len {
            return z.range(0, len);
        }
        // Distinct members: a partial Fisher-Yates shuffle of the ranks.
        let mut ranks: Vec<u64> = (0..len).collect();
        let mut out = Vec::with_capacity(n as usize);
        for i in 0..n as usize {
            let j = i + random::below(len - i as u64) as usize;
            ranks.swap(i, j);
            out.extend(z.nth(ranks[i])?);
        }
        Ok(out)
    })?;
    let picked = cx.miss_if_none(&args[1], picked);
    reply_members(cx, &picked.unwrap_or_default(), withscores);
    Ok(())
}

// ---------- ZSCAN ----------

/// A score as ZSCAN shows it. A listpack holds an integral score within
/// ±2^62 as an integer, which ZSCAN prints as one (`100000000000000000`
/// where ZRANGE says `1e+17`); anything else prints as `%.17g`.
fn scan_score(score: f64, listpack: bool) -> String {
    const LIMIT: f64 = (i64::MAX / 2) as f64;
    if listpack && score.fract() == 0.0 && (-LIMIT..=LIMIT).contains(&score) {
        (score as i64).to_string()
    } else {
        format_score(score)
    }
}

fn zscan(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let cursor = scan::cursor(&args[2])?;
    let db = cx.db();
    // The whole set in one step (cursor 0 next), as Redis does for a set in
    // a listpack; COUNT is only checked.
    let page = cx.h().read_collection::<ZSet, _>(db, &args[1], |z| {
        let listpack = z.encoding_name() == "listpack";
        let (next, items) = z.scan(cursor, 10)?;
        Ok((next, items, listpack))
    })?;
    let Some((next, items, listpack)) = cx.miss_if_none(&args[1], page) else {
        // Redis replies before it looks at the options.
        cx.out.array_len(2);
        cx.out.bulk(b"0");
        cx.out.array_len(0);
        return Ok(());
    };
    let opts = scan::options(&args[3..], false)?;
    let items: Vec<&Scored> = items.iter().filter(|(m, _)| opts.matches(m)).collect();
    scan::reply_header(cx, next, items.len() * 2);
    for (member, score) in items {
        cx.out.bulk(member);
        cx.out.bulk(scan_score(*score, listpack).as_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_scores_follow_the_listpack() {
        assert_eq!(scan_score(1e17, true), "100000000000000000");
        assert_eq!(scan_score(1e17, false), "1e+17");
        assert_eq!(
            scan_score(4611686018427387904.0, true),
            "4611686018427387904"
        );
        assert_eq!(scan_score(1e19, true), "1e+19");
        assert_eq!(scan_score(0.1, true), "0.10000000000000001");
        assert_eq!(scan_score(f64::INFINITY, true), "inf");
    }
}
