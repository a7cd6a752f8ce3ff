//! Lists: LPUSH, LRANGE and the rest of Redis's list commands (`t_list.c`),
//! with the blocking ones (BLPOP, BLMOVE, BLMPOP…), Redis 7.0's replies and
//! error texts.
//!
//! Each single-key command is one `Handle::write_collection` (or
//! `read_collection`) step, atomic across workers. LMOVE and its kin pop
//! from one key and push to another in two steps; they carry the ATOMIC flag
//! so the dispatcher runs them in the store's exclusive section.
//!
//! A command that adds elements calls [`Cx::signal_ready`] so clients
//! blocked on the key try again. A blocking command that finds nothing
//! calls [`Cx::block`]; when woken it simply runs again, so finding nothing
//! must change nothing.

use store::{Collection, List, ValueType};

use crate::command::{flags::*, Arg, CmdResult, Command};
use crate::engine::{Cx, TimeoutReply};
use crate::error::{CmdError, NO_SUCH_KEY, WRONG_TYPE};
use crate::notify::class;
use crate::parse;

/// A negative count for LPOP/RPOP.
pub(crate) const MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";
/// LSET past either end.
pub(crate) const INDEX_RANGE: &str = "ERR index out of range";
/// LPOS RANK 0 (Redis 7.0's wording).
pub(crate) const RANK_ZERO: &str = "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list";
/// LPOS COUNT that is negative or not an integer.
pub(crate) const COUNT_NEGATIVE: &str = "ERR COUNT can't be negative";
/// LPOS MAXLEN that is negative or not an integer.
pub(crate) const MAXLEN_NEGATIVE: &str = "ERR MAXLEN can't be negative";
/// LMPOP/BLMPOP numkeys below 1 or not an integer.
pub(crate) const NUMKEYS: &str = "ERR numkeys should be greater than 0";
/// LMPOP/BLMPOP COUNT below 1 or not an integer.
pub(crate) const COUNT_POSITIVE: &str = "ERR count should be greater than 0";

/// A list's end: LEFT is the head, RIGHT the tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Left,
    Right,
}

impl End {
    /// `LEFT` or `RIGHT`, any case; a syntax error otherwise.
    fn parse(arg: &[u8]) -> Result<End, CmdError> {
        if parse::is(arg, "left") {
            Ok(End::Left)
        } else if parse::is(arg, "right") {
            Ok(End::Right)
        } else {
            Err(CmdError::syntax())
        }
    }

    /// The keyspace event of a push at this end.
    fn push_event(self) -> &'static str {
        match self {
            End::Left => "lpush",
            End::Right => "rpush",
        }
    }

    /// The keyspace event of a pop at this end.
    fn pop_event(self) -> &'static str {
        match self {
            End::Left => "lpop",
            End::Right => "rpop",
        }
    }
}

fn push(list: &mut List, end: End, item: &[u8]) -> store::Result<()> {
    match end {
        End::Left => list.push_front(item),
        End::Right => list.push_back(item),
    }
}

fn pop(list: &mut List, end: End) -> store::Result<Option<Vec<u8>>> {
    match end {
        End::Left => list.pop_front(),
        End::Right => list.pop_back(),
    }
}

/// Pops up to `count` elements from `end`.
fn pop_many(list: &mut List, end: End, count: u64) -> store::Result<Vec<Vec<u8>>> {
    // The list bounds the allocation, not the client's count.
    let n = count.min(list.len());
    let mut items = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
    for _ in 0..n {
        match pop(list, end)? {
            Some(item) => items.push(item),
            None => break,
        }
    }
    Ok(items)
}

/// Redis's list index (negative counts from the tail) as a position from
/// the head, if it is inside the list.
fn resolve_index(index: i64, len: u64) -> Option<u64> {
    let i = if index < 0 {
        i128::from(len) + i128::from(index)
    } else {
        i128::from(index)
    };
    (0..i128::from(len)).contains(&i).then_some(i as u64)
}

/// LRANGE/LTRIM's inclusive `start..=stop` against a list of `len`, as a
/// half-open range from the head; None when it selects nothing. Unlike
/// GETRANGE, a stop still negative after adding the length empties the
/// range instead of clamping to 0 (`listTypeRange` vs `getrangeCommand`).
fn resolve_range(start: i64, stop: i64, len: u64) -> Option<(u64, u64)> {
    let len = i128::from(len);
    let mut start = i128::from(start);
    let mut stop = i128::from(stop);
    if start < 0 {
        start += len;
    }
    if stop < 0 {
        stop += len;
    }
    start = start.max(0);
    if start > stop || start >= len {
        return None;
    }
    stop = stop.min(len - 1);
    Some((start as u64, stop as u64 + 1))
}

/// Whether `key` holds a list (false: missing); WRONGTYPE when it holds
/// another type.
fn is_list(cx: &mut Cx<'_>, key: &[u8]) -> Result<bool, CmdError> {
    let db = cx.db();
    match cx.h().meta(db, key)? {
        Some(meta) if meta.vtype != ValueType::List => Err(CmdError::msg(WRONG_TYPE)),
        Some(_) => Ok(true),
        None => Ok(false),
    }
}

crate::command::group_cmd!("list");

/// The list commands. LMPOP and BLMPOP name their keys through `numkeys`,
/// which the table cannot express: (0, 0, 0) as Redis reports for
/// movablekeys commands.
#[rustfmt::skip]
pub(crate) const COMMANDS: &[Command] = &[
    cmd("lpush", -3, WRITE | DENYOOM | FAST, (1, 1, 1), "1.0.0", "Prepend one or multiple elements to a list", lpush),
    cmd("rpush", -3, WRITE | DENYOOM | FAST, (1, 1, 1), "1.0.0", "Append one or multiple elements to a list", rpush),
    cmd("lpushx", -3, WRITE | DENYOOM | FAST, (1, 1, 1), "2.2.0", "Prepend an element to a list, only if the list exists", lpushx),
    cmd("rpushx", -3, WRITE | DENYOOM | FAST, (1, 1, 1), "2.2.0", "Append an element to a list, only if the list exists", rpushx),
    cmd("lpop", -2, WRITE | FAST, (1, 1, 1), "1.0.0", "Remove and get the first elements in a list", lpop),
    cmd("rpop", -2, WRITE | FAST, (1, 1, 1), "1.0.0", "Remove and get the last elements in a list", rpop),
    cmd("llen", 2, READONLY | FAST, (1, 1, 1), "1.0.0", "Get the length of a list", llen),
    cmd("lrange", 4, READONLY, (1, 1, 1), "1.0.0", "Get a range of elements from a list", lrange),
    cmd("lindex", 3, READONLY, (1, 1, 1), "1.0.0", "Get an element from a list by its index", lindex),
    cmd("lset", 4, WRITE | DENYOOM, (1, 1, 1), "1.0.0", "Set the value of an element in a list by its index", lset),
    cmd("linsert", 5, WRITE | DENYOOM, (1, 1, 1), "2.2.0", "Insert an element before or after another element in a list", linsert),
    cmd("lrem", 4, WRITE, (1, 1, 1), "1.0.0", "Remove elements from a list", lrem),
    cmd("ltrim", 4, WRITE, (1, 1, 1), "1.0.0", "Trim a list to the specified range", ltrim),
    cmd("lpos", -3, READONLY, (1, 1, 1), "6.0.6", "Return the index of matching elements on a list", lpos),
    cmd("lmove", 5, WRITE | DENYOOM | ATOMIC, (1, 2, 1), "6.2.0", "Pop an element from a list, push it to another list and return it", lmove),
    cmd("rpoplpush", 3, WRITE | DENYOOM | ATOMIC, (1, 2, 1), "1.2.0", "Remove the last element in a list, prepend it to another list and return it", rpoplpush),
    Command { movable_keys: Some(crate::command::keys_numkeys_first), ..cmd("lmpop", -4, WRITE, (0, 0, 0), "7.0.0", "Pop elements from a list", lmpop) },
    cmd("blpop", -3, WRITE | NOSCRIPT | BLOCKING, (1, -2, 1), "2.0.0", "Remove and get the first element in a list, or block until one is available", blpop),
    cmd("brpop", -3, WRITE | NOSCRIPT | BLOCKING, (1, -2, 1), "2.0.0", "Remove and get the last element in a list, or block until one is available", brpop),
    cmd("blmove", 6, WRITE | DENYOOM | NOSCRIPT | BLOCKING | ATOMIC, (1, 2, 1), "6.2.0", "Pop an element from a list, push it to another list and return it; or block until one is available", blmove),
    cmd("brpoplpush", 4, WRITE | DENYOOM | NOSCRIPT | BLOCKING | ATOMIC, (1, 2, 1), "2.2.0", "Pop an element from a list, push it to another list and return it; or block until one is available", brpoplpush),
    Command { movable_keys: Some(crate::command::keys_numkeys_second), ..cmd("blmpop", -5, WRITE | BLOCKING, (0, 0, 0), "7.0.0", "Pop elements from a list, or block until one is available", blmpop) },
];

/// LPUSH, RPUSH, LPUSHX, RPUSHX: `create` is false for the X forms, which
/// leave a missing key alone and reply 0.
fn push_cmd(cx: &mut Cx<'_>, args: &[Arg<'_>], end: End, create: bool) -> CmdResult {
    let db = cx.db();
    let len = cx
        .h()
        .write_collection(db, &args[1], create, |l: &mut List| {
            for item in &args[2..] {
                push(l, end, item)?;
            }
            Ok(l.len())
        })?;
    match len {
        Some(n) => {
            cx.signal_ready(&args[1]);
            cx.notify(class::LIST, end.push_event(), &args[1]);
            cx.out.integer(n as i64);
        }
        None => cx.out.integer(0),
    }
    Ok(())
}

fn lpush(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    push_cmd(cx, args, End::Left, true)
}

fn rpush(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    push_cmd(cx, args, End::Right, true)
}

fn lpushx(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    push_cmd(cx, args, End::Left, false)
}

fn rpushx(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    push_cmd(cx, args, End::Right, false)
}

/// Writes an array of bulk strings.
fn write_items(cx: &mut Cx<'_>, items: &[Vec<u8>]) {
    cx.out.array_len(items.len());
    for item in items {
        cx.out.bulk(item);
    }
}

/// LPOP and RPOP: `key [count]`. Without a count the reply is one element
/// (or null); with one it is an array, a null array for a missing key.
fn pop_cmd(cx: &mut Cx<'_>, args: &[Arg<'_>], end: End) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::arity(cx.session.last_cmd));
    }
    let count = match args.get(2) {
        Some(a) => Some(
            parse::int(a)
                .ok()
                .and_then(|n| u64::try_from(n).ok())
                .ok_or(CmdError::msg(MUST_BE_POSITIVE))?,
        ),
        None => None,
    };
    let db = cx.db();
    let popped = cx
        .h()
        .write_collection(db, &args[1], false, |l: &mut List| {
            Ok((pop_many(l, end, count.unwrap_or(1))?, l.is_empty()))
        })?;
    let popped = popped.map(|(items, emptied)| {
        if !items.is_empty() {
            cx.notify_removed(class::LIST, end.pop_event(), &args[1], emptied);
        }
        items
    });
    match (popped, count) {
        (None, None) => cx.out.null(),
        (None, Some(_)) => cx.out.null_array(),
        (Some(items), None) => match items.first() {
            Some(item) => cx.out.bulk(item),
            None => cx.out.null(),
        },
        (Some(items), Some(_)) => write_items(cx, &items),
    }
    Ok(())
}

fn lpop(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    pop_cmd(cx, args, End::Left)
}

fn rpop(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    pop_cmd(cx, args, End::Right)
}

fn llen(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let len = cx
        .h()
        .read_collection(db, &args[1], |l: &List| Ok(l.len()))?;
    let len = cx.miss_if_none(&args[1], len).unwrap_or(0);
    cx.out.integer(len as i64);
    Ok(())
}

fn lrange(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let start = parse::int(&args[2])?;
    let stop = parse::int(&args[3])?;
    let db = cx.db();
    let mark = cx.out.len();
    let Cx { engine, out, .. } = cx;
    // The elements go straight from the decoded list into the reply.
    let found = engine.h.read_collection(db, &args[1], |l: &List| {
        match resolve_range(start, stop, l.len()) {
            Some((from, to)) => {
                out.array_len((to - from) as usize);
                l.for_each_in(from, to, |item| out.bulk(item))
            }
            None => {
                out.array_len(0);
                Ok(())
            }
        }
    });
    match found {
        Ok(Some(())) => {}
        Ok(None) => {
            cx.miss(&args[1]);
            cx.out.array_len(0);
        }
        Err(e) => {
            cx.out.truncate(mark);
            return Err(e.into());
        }
    }
    Ok(())
}

fn lindex(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    // Redis looks the key up before it parses the index.
    let found = cx.h().read_collection(db, &args[1], |l: &List| {
        Ok(match parse::int(&args[2]) {
            Ok(index) => match resolve_index(index, l.len()) {
                Some(i) => Ok(l.get(i)?),
                None => Ok(None),
            },
            Err(e) => Err(e),
        })
    })?;
    let found = cx.miss_if_none(&args[1], found);
    match found.transpose()?.flatten() {
        Some(item) => cx.out.bulk(&item),
        None => cx.out.null(),
    }
    Ok(())
}

fn lset(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    // Redis looks the key up before it parses the index. LSET adds no
    // element, so it wakes no blocked client.
    let done = cx
        .h()
        .write_collection(db, &args[1], false, |l: &mut List| {
            let index = match parse::int(&args[2]) {
                Ok(index) => index,
                Err(e) => return Ok(Err(e)),
            };
            match resolve_index(index, l.len()) {
                Some(i) if l.set(i, &args[3])? => Ok(Ok(())),
                _ => Ok(Err(CmdError::msg(INDEX_RANGE))),
            }
        })?;
    done.ok_or(CmdError::msg(NO_SUCH_KEY))??;
    cx.notify(class::LIST, "lset", &args[1]);
    cx.out.simple(b"OK");
    Ok(())
}

fn linsert(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let after = if parse::is(&args[2], "after") {
        true
    } else if parse::is(&args[2], "before") {
        false
    } else {
        return Err(CmdError::syntax());
    };
    let (pivot, item) = (&args[3], &args[4]);
    let db = cx.db();
    let len = cx
        .h()
        .write_collection(db, &args[1], false, |l: &mut List| {
            let mut at = None;
            l.scan(false, |i, x| {
                if x == pivot.as_ref() {
                    at = Some(i);
                }
                at.is_none()
            })?;
            match at {
                Some(i) => {
                    l.insert(i + u64::from(after), item)?;
                    Ok(l.len() as i64)
                }
                None => Ok(-1),
            }
        })?;
    match len {
        Some(n) => {
            if n > 0 {
                cx.signal_ready(&args[1]);
                cx.notify(class::LIST, "linsert", &args[1]);
            }
            cx.out.integer(n);
        }
        None => cx.out.integer(0),
    }
    Ok(())
}

fn lrem(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let count = parse::int(&args[2])?;
    let db = cx.db();
    let removed = cx
        .h()
        .write_collection(db, &args[1], false, |l: &mut List| {
            Ok((
                l.remove_equal(&args[3], count.unsigned_abs(), count < 0)?,
                l.is_empty(),
            ))
        })?;
    let (removed, emptied) = removed.unwrap_or((0, false));
    if removed > 0 {
        cx.notify_removed(class::LIST, "lrem", &args[1], emptied);
    }
    cx.out.integer(removed as i64);
    Ok(())
}

fn ltrim(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let start = parse::int(&args[2])?;
    let stop = parse::int(&args[3])?;
    let db = cx.db();
    let trimmed = cx
        .h()
        .write_collection(db, &args[1], false, |l: &mut List| {
            // An empty range empties the list, which removes the key.
            let (from, to) = resolve_range(start, stop, l.len()).unwrap_or((0, 0));
            l.retain_range(from, to)?;
            Ok(l.is_empty())
        })?;
    // Redis reports a trim even when it removed nothing.
    if let Some(emptied) = trimmed {
        cx.notify_removed(class::LIST, "ltrim", &args[1], emptied);
    }
    cx.out.simple(b"OK");
    Ok(())
}

/// LPOS's options.
struct LposOptions {
    /// Walk from the tail (a negative RANK).
    from_tail: bool,
    /// Matches to pass over before the first one reported (|RANK| - 1).
    skip: u64,
    /// COUNT: None for a single reply, Some(0) for every match.
    count: Option<u64>,
    /// MAXLEN: elements to compare at most (0 = all).
    maxlen: u64,
}

impl LposOptions {
    fn parse(args: &[Arg<'_>]) -> Result<LposOptions, CmdError> {
        let non_negative = |arg: &[u8], msg: &'static str| {
            parse::int(arg)
                .ok()
                .and_then(|n| u64::try_from(n).ok())
                .ok_or(CmdError::msg(msg))
        };
        let mut rank = 1i64;
        let mut count = None;
        let mut maxlen = 0;
        let mut i = 3;
        while i < args.len() {
            let Some(value) = args.get(i + 1) else {
                return Err(CmdError::syntax());
            };
            if parse::is(&args[i], "rank") {
                rank = parse::int(value)?;
                if rank == 0 {
                    return Err(CmdError::msg(RANK_ZERO));
                }
            } else if parse::is(&args[i], "count") {
                count = Some(non_negative(value, COUNT_NEGATIVE)?);
            } else if parse::is(&args[i], "maxlen") {
                maxlen = non_negative(value, MAXLEN_NEGATIVE)?;
            } else {
                return Err(CmdError::syntax());
            }
            i += 2;
        }
        if rank == i64::MIN {
            // Redis negates the rank in a `long`, which leaves LONG_MIN
            // negative: every match from the tail then qualifies and COUNT
            // never ends the walk. Kept for the same replies.
            return Ok(LposOptions {
                from_tail: true,
                skip: 0,
                count: count.map(|_| 0),
                maxlen,
            });
        }
        Ok(LposOptions {
            from_tail: rank < 0,
            skip: rank.unsigned_abs() - 1,
            count,
            maxlen,
        })
    }
}

fn lpos(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let opts = LposOptions::parse(args)?;
    let want = match opts.count {
        None => 1,
        Some(0) => u64::MAX,
        Some(n) => n,
    };
    let item = &args[2];
    let db = cx.db();
    let found = cx.h().read_collection(db, &args[1], |l: &List| {
        let mut positions = Vec::new();
        let (mut compared, mut matches) = (0u64, 0u64);
        l.scan(opts.from_tail, |i, x| {
            if opts.maxlen != 0 && compared >= opts.maxlen {
                return false;
            }
            compared += 1;
            if x == item.as_ref() {
                matches += 1;
                if matches > opts.skip {
                    positions.push(i);
                }
            }
            (positions.len() as u64) < want
        })?;
        Ok(positions)
    })?;
    let found = cx.miss_if_none(&args[1], found);
    match (found, opts.count) {
        (None, None) => cx.out.null(),
        (None, Some(_)) => cx.out.array_len(0),
        (Some(positions), None) => match positions.first() {
            Some(&i) => cx.out.integer(i as i64),
            None => cx.out.null(),
        },
        (Some(positions), Some(_)) => {
            cx.out.array_len(positions.len());
            for i in positions {
                cx.out.integer(i as i64);
            }
        }
    }
    Ok(())
}

/// Pops from `src`'s `from` end and pushes onto `dst`'s `to` end: the
/// element, or None when `src` is missing. As in Redis, `src` is checked
/// first, then `dst`'s type, before anything changes.
fn move_one(
    cx: &mut Cx<'_>,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
) -> Result<Option<Vec<u8>>, CmdError> {
    let db = cx.db();
    if src == dst {
        // One step, so that a one-element list is rotated rather than
        // removed and created again (which would drop its expiry).
        let moved = cx.h().write_collection(db, src, false, |l: &mut List| {
            let item = pop(l, from)?;
            if let Some(item) = &item {
                push(l, to, item)?;
            }
            Ok(item)
        })?;
        let moved = moved.flatten();
        if moved.is_some() {
            cx.signal_ready(dst);
            cx.notify(class::LIST, to.push_event(), dst);
            cx.notify(class::LIST, from.pop_event(), src);
        }
        return Ok(moved);
    }
    if !is_list(cx, src)? {
        return Ok(None);
    }
    is_list(cx, dst)?;
    let popped = cx.h().write_collection(db, src, false, |l: &mut List| {
        Ok((pop(l, from)?, l.is_empty()))
    })?;
    let Some((Some(item), emptied)) = popped else {
        return Ok(None);
    };
    let pushed = cx
        .h()
        .write_collection(db, dst, true, |l: &mut List| push(l, to, &item));
    if let Err(e) = pushed {
        // The push failed (out of memory): put the element back so that
        // nothing is lost. If that fails too there is nothing left to try.
        let _ = cx
            .h()
            .write_collection(db, src, true, |l: &mut List| push(l, from, &item));
        return Err(e.into());
    }
    cx.signal_ready(dst);
    // Redis pushes before it pops.
    cx.notify(class::LIST, to.push_event(), dst);
    cx.notify_removed(class::LIST, from.pop_event(), src, emptied);
    Ok(Some(item))
}

/// Writes a bulk reply, or a null one.
fn bulk_or_null(cx: &mut Cx<'_>, item: Option<&[u8]>) {
    match item {
        Some(item) => cx.out.bulk(item),
        None => cx.out.null(),
    }
}

fn lmove(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let from = End::parse(&args[3])?;
    let to = End::parse(&args[4])?;
    let moved = move_one(cx, &args[1], &args[2], from, to)?;
    bulk_or_null(cx, moved.as_deref());
    Ok(())
}

fn rpoplpush(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let moved = move_one(cx, &args[1], &args[2], End::Right, End::Left)?;
    bulk_or_null(cx, moved.as_deref());
    Ok(())
}

/// LMPOP's arguments from `numkeys` (at `numkeys_at`) on.
struct Mpop<'a, 'b> {
    keys: &'a [Arg<'b>],
    end: End,
    count: u64,
}

impl<'a, 'b> Mpop<'a, 'b> {
    fn parse(args: &'a [Arg<'b>], numkeys_at: usize) -> Result<Self, CmdError> {
        let numkeys = parse::int(&args[numkeys_at])
            .ok()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n > 0)
            .ok_or(CmdError::msg(NUMKEYS))?;
        let end_at = numkeys_at
            .checked_add(numkeys)
            .and_then(|i| i.checked_add(1))
            .filter(|&i| i < args.len())
            .ok_or(CmdError::syntax())?;
        let end = End::parse(&args[end_at])?;
        let mut count = None;
        let mut i = end_at + 1;
        while i < args.len() {
            match args.get(i + 1) {
                Some(value) if count.is_none() && parse::is(&args[i], "count") => {
                    count = Some(
                        parse::int(value)
                            .ok()
                            .and_then(|n| u64::try_from(n).ok())
                            .filter(|&n| n > 0)
                            .ok_or(CmdError::msg(COUNT_POSITIVE))?,
                    );
                }
                _ => return Err(CmdError::syntax()),
            }
            i += 2;
        }
        Ok(Mpop {
            keys: &args[numkeys_at + 1..end_at],
            end,
            count: count.unwrap_or(1),
        })
    }

    /// Pops from the first non-empty key and replies `[key, [elements]]`;
    /// false (nothing written) when every key is missing.
    fn run(&self, cx: &mut Cx<'_>) -> Result<bool, CmdError> {
        let db = cx.db();
        for key in self.keys {
            let popped = cx.h().write_collection(db, key, false, |l: &mut List| {
                Ok((pop_many(l, self.end, self.count)?, l.is_empty()))
            })?;
            if let Some((items, emptied)) = popped {
                cx.notify_removed(class::LIST, self.end.pop_event(), key, emptied);
                cx.out.array_len(2);
                cx.out.bulk(key);
                write_items(cx, &items);
                return Ok(true);
            }
        }
        Ok(false)
    }
}

fn lmpop(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if !Mpop::parse(args, 1)?.run(cx)? {
        cx.out.null_array();
    }
    Ok(())
}

/// BLPOP and BRPOP: `key… timeout`. Pops one element from the first
/// non-empty key in argument order and replies `[key, element]`.
fn bpop(cx: &mut Cx<'_>, args: &[Arg<'_>], end: End) -> CmdResult {
    let timeout = parse::timeout(&args[args.len() - 1])?;
    let keys = &args[1..args.len() - 1];
    let db = cx.db();
    for key in keys {
        let popped = cx.h().write_collection(db, key, false, |l: &mut List| {
            Ok((pop(l, end)?, l.is_empty()))
        })?;
        if let Some((Some(item), emptied)) = popped {
            cx.notify_removed(class::LIST, end.pop_event(), key, emptied);
            cx.out.array_len(2);
            cx.out.bulk(key);
            cx.out.bulk(&item);
            return Ok(());
        }
    }
    let keys = keys.iter().map(|k| k.to_vec()).collect();
    cx.block(keys, ValueType::List, timeout, TimeoutReply::NullArray);
    Ok(())
}

fn blpop(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    bpop(cx, args, End::Left)
}

fn brpop(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    bpop(cx, args, End::Right)
}

/// BLMOVE and BRPOPLPUSH: LMOVE, or wait on the source while it is missing.
fn bmove(cx: &mut Cx<'_>, args: &[Arg<'_>], from: End, to: End, timeout: &[u8]) -> CmdResult {
    let timeout = parse::timeout(timeout)?;
    match move_one(cx, &args[1], &args[2], from, to)? {
        Some(item) => cx.out.bulk(&item),
        None => cx.block(
            vec![args[1].to_vec()],
            ValueType::List,
            timeout,
            TimeoutReply::NullBulk,
        ),
    }
    Ok(())
}

fn blmove(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let from = End::parse(&args[3])?;
    let to = End::parse(&args[4])?;
    bmove(cx, args, from, to, &args[5])
}

fn brpoplpush(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    bmove(cx, args, End::Right, End::Left, &args[3])
}

fn blmpop(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let timeout = parse::timeout(&args[1])?;
    let mpop = Mpop::parse(args, 2)?;
    if !mpop.run(cx)? {
        let keys = mpop.keys.iter().map(|k| k.to_vec()).collect();
        cx.block(keys, ValueType::List, timeout, TimeoutReply::NullArray);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_count_from_either_end() {
        assert_eq!(resolve_index(0, 3), Some(0));
        assert_eq!(resolve_index(-1, 3), Some(2));
        assert_eq!(resolve_index(-3, 3), Some(0));
        assert_eq!(resolve_index(-4, 3), None);
        assert_eq!(resolve_index(3, 3), None);
        assert_eq!(resolve_index(i64::MIN, 3), None);
        assert_eq!(resolve_index(i64::MAX, u64::MAX), Some(i64::MAX as u64));
        assert_eq!(resolve_index(0, 0), None);
    }

    #[test]
    fn ranges_follow_lrange() {
        assert_eq!(resolve_range(0, -1, 3), Some((0, 3)));
        assert_eq!(resolve_range(-100, 100, 3), Some((0, 3)));
        assert_eq!(resolve_range(0, -100, 3), None);
        assert_eq!(resolve_range(2, 1, 3), None);
        assert_eq!(resolve_range(3, 5, 3), None);
        assert_eq!(resolve_range(-1, -1, 3), Some((2, 3)));
        assert_eq!(resolve_range(i64::MIN, i64::MAX, 3), Some((0, 3)));
        assert_eq!(resolve_range(0, -1, 0), None);
    }
}
