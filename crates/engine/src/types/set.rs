//! Sets: SADD, SMEMBERS, the set algebra and the rest of Redis's set
//! commands (`t_set.c`), with Redis 7.0's replies and error texts.
//!
//! A single-key command is one store step: a read decodes the set once
//! ([`store::Handle::read_collection`]); a write (SADD, SREM, SPOP) is one
//! read-modify-write under the key's lock
//! ([`store::Handle::write_collection`]). SMOVE and the …STORE commands
//! touch several keys: they carry the ATOMIC flag, so the dispatcher runs
//! them in the store's exclusive section and no other worker sees them
//! half done. A set left empty is removed by the store.
//!
//! Member order: a set of integers (the intset shape) replies in ascending
//! order, as Redis's intset does; any other set in insertion order, where
//! Redis's hash table order is arbitrary.

use store::{Collection, Set, ValueType};

use crate::command::{flags::*, Arg, CmdResult, Command};
use crate::engine::Cx;
use crate::error::{CmdError, WRONG_TYPE};
use crate::notify::class;
use crate::parse;
use crate::random;
use crate::scan;

/// SPOP's count is negative or not a number.
const MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";
/// SINTERCARD's numkeys is below 1 or not a number.
const NUMKEYS_POSITIVE: &str = "ERR numkeys should be greater than 0";
/// SINTERCARD's numkeys is more than the keys given.
const NUMKEYS_TOO_MANY: &str = "ERR Number of keys can't be greater than number of args";
/// SINTERCARD's LIMIT is negative or not a number.
const LIMIT_NEGATIVE: &str = "ERR LIMIT can't be negative";

crate::command::group_cmd!("set");

/// The set commands. SINTERCARD's keys follow its numkeys argument, which
/// the table cannot express: (0, 0, 0), as Redis's movablekeys show it.
#[rustfmt::skip]
pub(crate) const COMMANDS: &[Command] = &[
    cmd("sadd", -3, WRITE | DENYOOM | FAST, (1, 1, 1), "1.0.0", "Add one or more members to a set", sadd),
    cmd("srem", -3, WRITE | FAST, (1, 1, 1), "1.0.0", "Remove one or more members from a set", srem),
    cmd("scard", 2, READONLY | FAST, (1, 1, 1), "1.0.0", "Get the number of members in a set", scard),
    cmd("sismember", 3, READONLY | FAST, (1, 1, 1), "1.0.0", "Determine if a given value is a member of a set", sismember),
    cmd("smismember", -3, READONLY | FAST, (1, 1, 1), "6.2.0", "Returns the membership associated with the given elements for a set", smismember),
    cmd("smembers", 2, READONLY, (1, 1, 1), "1.0.0", "Get all the members in a set", smembers),
    cmd("spop", -2, WRITE | FAST, (1, 1, 1), "1.0.0", "Remove and return one or multiple random members from a set", spop),
    cmd("srandmember", -2, READONLY, (1, 1, 1), "1.0.0", "Get one or multiple random members from a set", srandmember),
    cmd("smove", 4, WRITE | FAST | ATOMIC, (1, 2, 1), "1.0.0", "Move a member from one set to another", smove),
    cmd("sinter", -2, READONLY | ATOMIC, (1, -1, 1), "1.0.0", "Intersect multiple sets", sinter),
    Command { movable_keys: Some(crate::command::keys_numkeys_first), ..cmd("sintercard", -3, READONLY | ATOMIC, (0, 0, 0), "7.0.0", "Intersect multiple sets and return the cardinality of the result", sintercard) },
    cmd("sinterstore", -3, WRITE | DENYOOM | ATOMIC, (1, -1, 1), "1.0.0", "Intersect multiple sets and store the resulting set in a key", sinterstore),
    cmd("sunion", -2, READONLY | ATOMIC, (1, -1, 1), "1.0.0", "Add multiple sets", sunion),
    cmd("sunionstore", -3, WRITE | DENYOOM | ATOMIC, (1, -1, 1), "1.0.0", "Add multiple sets and store the resulting set in a key", sunionstore),
    cmd("sdiff", -2, READONLY | ATOMIC, (1, -1, 1), "1.0.0", "Subtract multiple sets", sdiff),
    cmd("sdiffstore", -3, WRITE | DENYOOM | ATOMIC, (1, -1, 1), "1.0.0", "Subtract multiple sets and store the resulting set in a key", sdiffstore),
    cmd("sscan", -3, READONLY, (1, 1, 1), "2.8.0", "Incrementally iterate Set elements", sscan),
];

/// Reads the set at `key` through `f`; None when the key is missing (a
/// "keymiss").
fn read<T>(
    cx: &mut Cx<'_>,
    key: &[u8],
    f: impl FnOnce(&Set) -> store::Result<T>,
) -> Result<Option<T>, CmdError> {
    let db = cx.db();
    let found = cx.h().read_collection(db, key, f)?;
    Ok(cx.miss_if_none(key, found))
}

/// Changes the set at `key` through `f` in one atomic step; a missing key
/// starts empty when `create` is set, else `f` does not run (None).
fn write<T>(
    cx: &mut Cx<'_>,
    key: &[u8],
    create: bool,
    f: impl FnOnce(&mut Set) -> store::Result<T>,
) -> Result<Option<T>, CmdError> {
    let db = cx.db();
    Ok(cx.h().write_collection(db, key, create, f)?)
}

/// Writes members as a set reply (RESP3 `~`, RESP2 an array).
fn reply_set(cx: &mut Cx<'_>, members: &[Vec<u8>]) {
    cx.out.set_len(members.len());
    for m in members {
        cx.out.bulk(m);
    }
}

fn sadd(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let members = &args[2..];
    let added = write(cx, &args[1], true, |s| {
        let mut added = 0;
        for m in members {
            added += u64::from(s.insert(m)?);
        }
        Ok(added)
    })?;
    let added = added.unwrap_or(0);
    if added > 0 {
        cx.notify(class::SET, "sadd", &args[1]);
    }
    cx.out.integer(added as i64);
    Ok(())
}

fn srem(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let members: Vec<&[u8]> = args[2..].iter().map(|a| &a[..]).collect();
    let removed = write(cx, &args[1], false, |s| {
        Ok((s.remove_all(&members)?, s.is_empty()))
    })?;
    let (removed, emptied) = removed.unwrap_or((0, false));
    if removed > 0 {
        cx.notify_removed(class::SET, "srem", &args[1], emptied);
    }
    cx.out.integer(removed as i64);
    Ok(())
}

fn scard(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let len = read(cx, &args[1], |s| Ok(s.len()))?;
    cx.out.integer(len.unwrap_or(0) as i64);
    Ok(())
}

fn sismember(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let member = &args[2];
    let found = read(cx, &args[1], |s| s.contains(member))?;
    cx.out.integer(i64::from(found == Some(true)));
    Ok(())
}

fn smismember(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let members = &args[2..];
    let found = read(cx, &args[1], |s| {
        members
            .iter()
            .map(|m| s.contains(m))
            .collect::<store::Result<Vec<bool>>>()
    })?;
    cx.out.array_len(members.len());
    for i in 0..members.len() {
        let hit = found.as_ref().is_some_and(|f| f.get(i) == Some(&true));
        cx.out.integer(i64::from(hit));
    }
    Ok(())
}

fn smembers(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let members = read(cx, &args[1], |s| s.members())?.unwrap_or_default();
    reply_set(cx, &members);
    Ok(())
}

fn spop(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    match args.len() {
        2 => {
            let popped = write(cx, &args[1], false, |s| {
                let Some(m) = s.nth(random::below(s.len()))? else {
                    return Ok(None);
                };
                s.remove(&m)?;
                Ok(Some((m, s.is_empty())))
            })?;
            match popped.flatten() {
                Some((m, emptied)) => {
                    cx.notify_removed(class::SET, "spop", &args[1], emptied);
                    cx.out.bulk(&m);
                }
                None => cx.out.null(),
            }
            Ok(())
        }
        3 => {
            let count = parse::int(&args[2])
                .ok()
                .and_then(|n| u64::try_from(n).ok())
                .ok_or(CmdError::msg(MUST_BE_POSITIVE))?;
            let popped = write(cx, &args[1], false, |s| {
                Ok((pop_members(s, count)?, s.is_empty()))
            })?;
            let (popped, emptied) = popped.unwrap_or_default();
            if !popped.is_empty() {
                cx.notify_removed(class::SET, "spop", &args[1], emptied);
            }
            reply_set(cx, &popped);
            Ok(())
        }
        _ => Err(CmdError::syntax()),
    }
}

/// Removes and returns `count` distinct random members: all of them (in
/// the set's order) when `count` reaches the size.
fn pop_members(s: &mut Set, count: u64) -> store::Result<Vec<Vec<u8>>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let popped = if count >= s.len() {
        s.members()?
    } else {
        let mut popped = Vec::with_capacity(count as usize);
        for i in random::distinct(s.len(), count) {
            popped.extend(s.nth(i)?);
        }
        popped
    };
    let doomed: Vec<&[u8]> = popped.iter().map(Vec::as_slice).collect();
    s.remove_all(&doomed)?;
    Ok(popped)
}

fn srandmember(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    match args.len() {
        2 => {
            let picked = read(cx, &args[1], |s| s.nth(random::below(s.len())))?.flatten();
            match picked {
                Some(m) => cx.out.bulk(&m),
                None => cx.out.null(),
            }
            Ok(())
        }
        3 => srandmember_count(cx, args),
        _ => Err(CmdError::syntax()),
    }
}

fn srandmember_count(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let (count, repeats) = random::count(&args[2])?;
    let members = read(cx, &args[1], |s| s.members())?.unwrap_or_default();
    let len = members.len() as u64;
    if count == 0 || len == 0 {
        cx.out.array_len(0);
    } else if repeats {
        // Each drawn on its own, in the order drawn.
        let bytes = members.iter().map(|m| m.len() as u64).sum();
        let limit = cx.engine.config.proto_max_bulk_len;
        random::check_repeats(count, bytes, len, limit)?;
        cx.out.array_len(count as usize);
        for _ in 0..count {
            if let Some(m) = members.get(random::below(len) as usize) {
                cx.out.bulk(m);
            }
        }
    } else if count >= len {
        cx.out.array_len(members.len());
        for m in &members {
            cx.out.bulk(m);
        }
    } else {
        let picks = random::distinct(len, count);
        cx.out.array_len(picks.len());
        for i in picks {
            if let Some(m) = members.get(i as usize) {
                cx.out.bulk(m);
            }
        }
    }
    Ok(())
}

/// Fails with WRONGTYPE unless `key` is missing or holds a set.
fn check_set_or_missing(cx: &mut Cx<'_>, key: &[u8]) -> Result<bool, CmdError> {
    let db = cx.db();
    match cx.h().meta(db, key)? {
        None => Ok(false),
        Some(m) if m.vtype == ValueType::Set => Ok(true),
        Some(_) => Err(CmdError::msg(WRONG_TYPE)),
    }
}

fn smove(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let (src, dst, member) = (&args[1], &args[2], &args[3]);
    // Redis's order: a missing source replies 0 before any type check.
    if !check_set_or_missing(cx, src)? {
        cx.out.integer(0);
        return Ok(());
    }
    check_set_or_missing(cx, dst)?;
    if src == dst {
        let found = read(cx, src, |s| s.contains(member))?;
        cx.out.integer(i64::from(found == Some(true)));
        return Ok(());
    }
    let removed = write(cx, src, false, |s| Ok((s.remove(member)?, s.is_empty())))?;
    let Some((true, emptied)) = removed else {
        cx.out.integer(0);
        return Ok(());
    };
    cx.notify_removed(class::SET, "srem", src, emptied);
    if write(cx, dst, true, |s| s.insert(member))? == Some(true) {
        cx.notify(class::SET, "sadd", dst);
    }
    cx.out.integer(1);
    Ok(())
}

/// The sets at `keys`, in order (None for a missing key). WRONGTYPE if any
/// holds another type, checked for every key before any result, as Redis
/// does.
fn read_sets(cx: &mut Cx<'_>, keys: &[Arg<'_>]) -> Result<Vec<Option<Set>>, CmdError> {
    keys.iter().map(|k| read(cx, k, |s| s.detached())).collect()
}

/// The intersection of `keys`' sets, stopping once it has `limit` members
/// (0: no limit). Redis's algorithm: walk the smallest set, in its order,
/// keeping the members every other set has; any missing key makes it
/// empty.
fn intersect(cx: &mut Cx<'_>, keys: &[Arg<'_>], limit: u64) -> Result<Vec<Vec<u8>>, CmdError> {
    let Some(mut sets) = read_sets(cx, keys)?
        .into_iter()
        .collect::<Option<Vec<Set>>>()
    else {
        return Ok(Vec::new());
    };
    sets.sort_by_key(|s| s.len());
    let Some((first, rest)) = sets.split_first() else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for m in first.members()? {
        if limit != 0 && out.len() as u64 >= limit {
            break;
        }
        let mut in_all = true;
        for s in rest {
            if !s.contains(&m)? {
                in_all = false;
                break;
            }
        }
        if in_all {
            out.push(m);
        }
    }
    Ok(out)
}

/// SUNION's and SDIFF's operation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Diff,
}

/// The union of `keys`' sets, or the first minus the others, as a set
/// value (its member order is the one SUNION and SDIFF reply in).
fn union_or_diff(cx: &mut Cx<'_>, keys: &[Arg<'_>], op: SetOp) -> Result<Set, CmdError> {
    let sets = read_sets(cx, keys)?;
    let mut out = Set::empty();
    match op {
        SetOp::Union => {
            for s in sets.iter().flatten() {
                for m in s.members()? {
                    out.insert(&m)?;
                }
            }
        }
        SetOp::Diff => {
            let Some((Some(first), rest)) = sets.split_first() else {
                return Ok(out);
            };
            for m in first.members()? {
                let mut elsewhere = false;
                for s in rest.iter().flatten() {
                    if s.contains(&m)? {
                        elsewhere = true;
                        break;
                    }
                }
                if !elsewhere {
                    out.insert(&m)?;
                }
            }
        }
    }
    Ok(out)
}

/// A set value of `members`.
fn set_of(members: &[Vec<u8>]) -> Result<Set, CmdError> {
    let mut set = Set::empty();
    for m in members {
        set.insert(m)?;
    }
    Ok(set)
}

/// Stores `set` at `dst`, replacing whatever it held (its expiry too), or
/// deleting it when `set` is empty; replies the size. `event` names the
/// command for keyspace notifications.
fn store_result(cx: &mut Cx<'_>, dst: &[u8], set: Set, event: &str) -> CmdResult {
    let db = cx.db();
    let len = set.len();
    if len == 0 {
        if cx.h().delete(db, dst)? {
            cx.notify(class::GENERIC, "del", dst);
        }
    } else {
        cx.h().store_collection(db, dst, set)?;
        cx.notify(class::SET, event, dst);
    }
    cx.out.integer(len as i64);
    Ok(())
}

fn sinter(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let members = intersect(cx, &args[1..], 0)?;
    reply_set(cx, &members);
    Ok(())
}

fn sintercard(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let numkeys = parse::int(&args[1])
        .ok()
        .filter(|&n| n >= 1)
        .ok_or(CmdError::msg(NUMKEYS_POSITIVE))?;
    let keys_end = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(2))
        .filter(|&end| end <= args.len())
        .ok_or(CmdError::msg(NUMKEYS_TOO_MANY))?;
    let mut limit = 0;
    let mut i = keys_end;
    while i < args.len() {
        match args.get(i + 1) {
            Some(value) if parse::is(&args[i], "limit") => {
                limit = parse::int(value)
                    .ok()
                    .and_then(|n| u64::try_from(n).ok())
                    .ok_or(CmdError::msg(LIMIT_NEGATIVE))?;
            }
            _ => return Err(CmdError::syntax()),
        }
        i += 2;
    }
    let members = intersect(cx, &args[2..keys_end], limit)?;
    cx.out.integer(members.len() as i64);
    Ok(())
}

fn sinterstore(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let members = intersect(cx, &args[2..], 0)?;
    store_result(cx, &args[1], set_of(&members)?, "sinterstore")
}

fn sunion(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let set = union_or_diff(cx, &args[1..], SetOp::Union)?;
    reply_set(cx, &set.members()?);
    Ok(())
}

fn sunionstore(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let set = union_or_diff(cx, &args[2..], SetOp::Union)?;
    store_result(cx, &args[1], set, "sunionstore")
}

fn sdiff(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let set = union_or_diff(cx, &args[1..], SetOp::Diff)?;
    reply_set(cx, &set.members()?);
    Ok(())
}

fn sdiffstore(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let set = union_or_diff(cx, &args[2..], SetOp::Diff)?;
    store_result(cx, &args[1], set, "sdiffstore")
}

fn sscan(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    // Redis's order: the cursor, then the key (a missing one replies an
    // empty page without looking at the options), then the options.
    let cursor = scan::cursor(&args[2])?;
    let opts = scan::options(&args[3..], false);
    let count = opts.as_ref().map_or(0, |o| o.count as u64);
    let Some((next, members)) = read(cx, &args[1], |s| s.scan(cursor, count))? else {
        scan::reply_header(cx, 0, 0);
        return Ok(());
    };
    let opts = opts?;
    let members: Vec<_> = members.iter().filter(|m| opts.matches(m)).collect();
    scan::reply_header(cx, next, members.len());
    for m in members {
        cx.out.bulk(m);
    }
    Ok(())
}
