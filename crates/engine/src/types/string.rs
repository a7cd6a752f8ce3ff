//! Strings: GET, SET and the rest of Redis's string commands (`t_string.c`),
//! with Redis 7.0's replies and error texts. The bit commands are in
//! [`super::bitops`].
//!
//! Single-key commands are one store step each (`get_del`, `incr_by`,
//! `set_range`…), or a read-modify-write under the key's lock through
//! `Handle::modify` (INCRBYFLOAT), so they are atomic across processes.
//! MSET and MSETNX write several keys inside an exclusive section of the
//! store (`ATOMIC`), so every other worker sees all of them or none. LCS
//! reads two keys one after the other (a read, not flagged).

use store::{Expiry, Modify, SetCondition, SetOptions, ValueType};

use crate::command::{flags::*, Arg, CmdResult, Command};
use crate::decimal::Decimal;
use crate::engine::Cx;
use crate::error::{CmdError, NOT_FLOAT, SYNTAX, WRONG_TYPE};
use crate::notify::class;
use crate::parse;

/// SETRANGE with a negative offset.
pub(crate) const OFFSET_RANGE: &str = "ERR offset is out of range";
/// INCRBYFLOAT whose result is not finite.
pub(crate) const NAN_OR_INFINITY: &str = "ERR increment would produce NaN or Infinity";
/// DECRBY of i64::MIN (negating it overflows).
pub(crate) const DECREMENT_OVERFLOW: &str = "ERR decrement would overflow";
/// LCS against a key of another type.
pub(crate) const LCS_NOT_STRINGS: &str = "ERR The specified keys must contain string values";
/// LCS with both LEN and IDX.
pub(crate) const LCS_LEN_AND_IDX: &str =
    "ERR If you want both the length and indexes, please just use IDX.";
/// LCS whose table would pass proto-max-bulk-len.
pub(crate) const LCS_TOO_BIG: &str =
    "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len";
/// LCS whose table could not be allocated.
pub(crate) const LCS_NO_MEMORY: &str =
    "ERR Insufficient memory, failed allocating transient memory for LCS";

crate::command::group_cmd!("string");

/// The string commands.
#[rustfmt::skip]
pub(crate) const COMMANDS: &[Command] = &[
    cmd("get", 2, READONLY | FAST, (1, 1, 1), "1.0.0", "Get the value of a key", get),
    cmd("set", -3, WRITE | DENYOOM, (1, 1, 1), "1.0.0", "Set the string value of a key", set),
    cmd("setnx", 3, WRITE | DENYOOM | FAST, (1, 1, 1), "1.0.0", "Set the value of a key, only if the key does not exist", setnx),
    cmd("setex", 4, WRITE | DENYOOM, (1, 1, 1), "2.0.0", "Set the value and expiration of a key", setex),
    cmd("psetex", 4, WRITE | DENYOOM, (1, 1, 1), "2.6.0", "Set the value and expiration in milliseconds of a key", psetex),
    cmd("getset", 3, WRITE | DENYOOM | FAST, (1, 1, 1), "1.0.0", "Set the string value of a key and return its old value", getset),
    cmd("getdel", 2, WRITE | FAST, (1, 1, 1), "6.2.0", "Get the value of a key and delete the key", getdel),
    cmd("getex", -2, WRITE | FAST, (1, 1, 1), "6.2.0", "Get the value of a key and optionally set its expiration", getex),
    cmd("mget", -2, READONLY | ATOMIC | FAST, (1, -1, 1), "1.0.0", "Get the values of all the given keys", mget),
    cmd("mset", -3, WRITE | DENYOOM | ATOMIC, (1, -1, 2), "1.0.1", "Set multiple keys to multiple values", mset),
    cmd("msetnx", -3, WRITE | DENYOOM | ATOMIC, (1, -1, 2), "1.0.1", "Set multiple keys to multiple values, only if none of the keys exist", msetnx),
    cmd("append", 3, WRITE | DENYOOM | FAST, (1, 1, 1), "2.0.0", "Append a value to a key", append),
    cmd("strlen", 2, READONLY | FAST, (1, 1, 1), "2.2.0", "Get the length of the value stored in a key", strlen),
    cmd("incr", 2, WRITE | DENYOOM | FAST, (1, 1, 1), "1.0.0", "Increment the integer value of a key by one", incr),
    cmd("decr", 2, WRITE | DENYOOM | FAST, (1, 1, 1), "1.0.0", "Decrement the integer value of a key by one", decr),
    cmd("incrby", 3, WRITE | DENYOOM | FAST, (1, 1, 1), "1.0.0", "Increment the integer value of a key by the given amount", incrby),
    cmd("decrby", 3, WRITE | DENYOOM | FAST, (1, 1, 1), "1.0.0", "Decrement the integer value of a key by the given number", decrby),
    cmd("incrbyfloat", 3, WRITE | DENYOOM | FAST, (1, 1, 1), "2.6.0", "Increment the float value of a key by the given amount", incrbyfloat),
    cmd("getrange", 4, READONLY, (1, 1, 1), "2.4.0", "Get a substring of the string stored at a key", getrange),
    cmd("setrange", 4, WRITE | DENYOOM, (1, 1, 1), "2.2.0", "Overwrite part of a string at key starting at the specified offset", setrange),
    cmd("substr", 4, READONLY, (1, 1, 1), "1.0.0", "Get a substring of the string stored at a key", getrange),
    cmd("lcs", -3, READONLY, (1, 2, 1), "7.0.0", "Find longest common substring", lcs),
];

fn get(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    // Read into the engine's reused buffer: no allocation per GET.
    let engine = &mut *cx.engine;
    match engine.h.get_into(db, &args[1], &mut engine.scratch)? {
        Some(meta) if meta.vtype != store::ValueType::String => {
            return Err(CmdError::msg(crate::error::WRONG_TYPE))
        }
        Some(_) => cx.out.bulk(&engine.scratch),
        None => {
            cx.out.null();
            cx.miss(&args[1]);
        }
    }
    if cx.engine.scratch.capacity() > 1 << 20 {
        cx.engine.scratch = Vec::new();
    }
    Ok(())
}

/// Parses the expiry options shared by SET and GETEX: `EX s`, `PX ms`,
/// `EXAT s`, `PXAT ms` into an absolute time. `command` names the command in
/// the invalid-expire error.
pub(crate) fn parse_expiry(
    unit: &[u8],
    value: &[u8],
    now_ms: u64,
    command: &str,
) -> Result<Expiry, CmdError> {
    let n = parse::int(value)?;
    let bad = || CmdError::bad_expire(command);
    if n <= 0 {
        return Err(bad());
    }
    let at = if parse::is(unit, "ex") {
        n.checked_mul(1000)
            .and_then(|ms| ms.checked_add(now_ms as i64))
    } else if parse::is(unit, "px") {
        n.checked_add(now_ms as i64)
    } else if parse::is(unit, "exat") {
        n.checked_mul(1000)
    } else {
        Some(n)
    };
    at.map(|at| Expiry::At(at as u64)).ok_or_else(bad)
}

fn set(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let mut opts = SetOptions::default();
    let mut has_expiry = false;
    let mut i = 3;
    while i < args.len() {
        let a = &args[i];
        let next = args.get(i + 1);
        if parse::is(a, "nx") && opts.condition != SetCondition::IfPresent {
            opts.condition = SetCondition::IfAbsent;
        } else if parse::is(a, "xx") && opts.condition != SetCondition::IfAbsent {
            opts.condition = SetCondition::IfPresent;
        } else if parse::is(a, "get") {
            opts.get = true;
        } else if parse::is(a, "keepttl") && !has_expiry {
            opts.expiry = Expiry::Keep;
            has_expiry = true;
        } else if ["ex", "px", "exat", "pxat"].iter().any(|w| parse::is(a, w))
            && !has_expiry
            && next.is_some()
        {
            has_expiry = true;
            i += 1;
            // Parsed after the loop so that a syntax error wins, as in Redis.
        } else {
            return Err(CmdError::syntax());
        }
        i += 1;
    }
    // Second pass for the expiry value, now that the syntax is known good.
    let mut i = 3;
    while i < args.len() {
        if ["ex", "px", "exat", "pxat"]
            .iter()
            .any(|w| parse::is(&args[i], w))
        {
            opts.expiry = parse_expiry(&args[i], &args[i + 1], cx.engine.now_ms(), "set")?;
            i += 1;
        }
        i += 1;
    }
    let db = cx.db();
    let res = cx.engine.h.set(db, &args[1], &args[2], &opts)?;
    cx.notify_set(&args[1], &opts, &res);
    if opts.get {
        match res.old {
            Some(v) => cx.out.bulk(&v),
            None => cx.out.null(),
        }
    } else if res.written {
        cx.out.simple(b"OK");
    } else {
        cx.out.null();
    }
    Ok(())
}

/// Writes a bulk reply, or a null one for a missing value.
fn bulk_or_null(cx: &mut Cx<'_>, value: Option<&[u8]>) {
    match value {
        Some(v) => cx.out.bulk(v),
        None => cx.out.null(),
    }
}

fn setnx(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let opts = SetOptions {
        condition: SetCondition::IfAbsent,
        ..SetOptions::default()
    };
    let db = cx.db();
    let res = cx.engine.h.set(db, &args[1], &args[2], &opts)?;
    cx.notify_set(&args[1], &opts, &res);
    cx.out.integer(i64::from(res.written));
    Ok(())
}

/// SETEX and PSETEX: `key time value`, the time in `unit` (`ex` or `px`).
fn set_with_expiry(cx: &mut Cx<'_>, args: &[Arg<'_>], unit: &str, name: &str) -> CmdResult {
    let expiry = parse_expiry(unit.as_bytes(), &args[2], cx.engine.now_ms(), name)?;
    let opts = SetOptions {
        expiry,
        ..SetOptions::default()
    };
    let db = cx.db();
    let res = cx.engine.h.set(db, &args[1], &args[3], &opts)?;
    cx.notify_set(&args[1], &opts, &res);
    cx.out.simple(b"OK");
    Ok(())
}

fn setex(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    set_with_expiry(cx, args, "ex", "setex")
}

fn psetex(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    set_with_expiry(cx, args, "px", "psetex")
}

fn getset(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let opts = SetOptions {
        get: true,
        ..SetOptions::default()
    };
    let db = cx.db();
    let res = cx.engine.h.set(db, &args[1], &args[2], &opts)?;
    cx.notify_set(&args[1], &opts, &res);
    bulk_or_null(cx, res.old.as_deref());
    Ok(())
}

fn getdel(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let v = cx.engine.h.get_del(db, &args[1])?;
    match v {
        Some(_) => cx.notify(class::GENERIC, "del", &args[1]),
        None => cx.miss(&args[1]),
    }
    bulk_or_null(cx, v.as_deref());
    Ok(())
}

fn getex(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    // Redis's parseExtendedStringArgumentsOrReply for COMMAND_GET: one of
    // EX/PX/EXAT/PXAT (with a value) or PERSIST, at most once.
    let mut expire: Option<(&[u8], &[u8])> = None;
    let mut persist = false;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        let next = args.get(i + 1);
        if parse::is(a, "persist") && !persist && expire.is_none() {
            persist = true;
        } else if ["ex", "px", "exat", "pxat"].iter().any(|w| parse::is(a, w))
            && !persist
            && expire.is_none()
        {
            let Some(next) = next else {
                return Err(CmdError::syntax());
            };
            expire = Some((a, next));
            i += 1;
        } else {
            return Err(CmdError::syntax());
        }
        i += 1;
    }
    // Redis's order: a missing key replies nil and a wrong type errs before
    // the time is validated.
    let db = cx.db();
    let had_expiry = match cx.engine.h.meta(db, &args[1])? {
        None => {
            cx.miss(&args[1]);
            cx.out.null();
            return Ok(());
        }
        Some(m) if m.vtype != ValueType::String => return Err(CmdError::msg(WRONG_TYPE)),
        Some(m) => m.expire_at_ms.is_some(),
    };
    let expiry = match expire {
        Some((unit, value)) => parse_expiry(unit, value, cx.engine.now_ms(), "getex")?,
        None if persist => Expiry::Persist,
        None => Expiry::Keep,
    };
    // A past EXAT/PXAT deletes the key after reading it (the store does it).
    let v = cx.engine.h.get_ex(db, &args[1], expiry)?;
    if v.is_some() {
        match expiry {
            Expiry::At(at) if at <= cx.engine.now_ms() => {
                cx.notify(class::GENERIC, "del", &args[1]);
            }
            Expiry::At(_) => cx.notify(class::GENERIC, "expire", &args[1]),
            Expiry::Persist if had_expiry => cx.notify(class::GENERIC, "persist", &args[1]),
            _ => {}
        }
    }
    bulk_or_null(cx, v.as_deref());
    Ok(())
}

fn mget(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let keys = &args[1..];
    cx.out.array_len(keys.len());
    let mut buf = Vec::new();
    for key in keys {
        // A value of another type reads as nil, as in Redis.
        match cx.engine.h.get_into(db, key, &mut buf)? {
            Some(m) if m.vtype == ValueType::String => cx.out.bulk(&buf),
            Some(_) => cx.out.null(),
            None => {
                cx.miss(key);
                cx.out.null();
            }
        }
    }
    Ok(())
}

/// The `key value` pairs of MSET / MSETNX, or Redis's arity error.
fn pairs<'a, 'b>(args: &'a [Arg<'b>], name: &str) -> Result<&'a [Arg<'b>], CmdError> {
    if args.len() % 2 != 1 {
        return Err(CmdError::arity(name));
    }
    Ok(&args[1..])
}

fn mset(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let pairs = pairs(args, "mset")?;
    // Key by key, inside the dispatcher's exclusive section (`ATOMIC`) when
    // there are several: no other worker sees some written and not others.
    // A later pair for the same key wins, as in Redis.
    let db = cx.db();
    for kv in pairs.chunks_exact(2) {
        cx.engine
            .h
            .set(db, &kv[0], &kv[1], &SetOptions::default())?;
        cx.notify(class::STRING, "set", &kv[0]);
    }
    cx.out.simple(b"OK");
    Ok(())
}

fn msetnx(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let pairs = pairs(args, "msetnx")?;
    let db = cx.db();
    if let [key, value] = pairs {
        // One key runs outside an exclusive section (`ATOMIC` skips it): SET
        // NX checks and writes under the key's lock.
        let opts = SetOptions {
            condition: SetCondition::IfAbsent,
            ..SetOptions::default()
        };
        let written = cx.engine.h.set(db, key, value, &opts)?.written;
        if written {
            cx.notify(class::STRING, "set", key);
        }
        cx.out.integer(written as i64);
        return Ok(());
    }
    // Several: check, then set, inside the dispatcher's exclusive section, so
    // no other worker creates a key in between or sees a partial result.
    for kv in pairs.chunks_exact(2) {
        if cx.engine.h.exists(db, &kv[0])? {
            cx.out.integer(0);
            return Ok(());
        }
    }
    for kv in pairs.chunks_exact(2) {
        cx.engine
            .h
            .set(db, &kv[0], &kv[1], &SetOptions::default())?;
        cx.notify(class::STRING, "set", &kv[0]);
    }
    cx.out.integer(1);
    Ok(())
}

fn append(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let len = cx.engine.h.append(db, &args[1], &args[2])?;
    cx.notify(class::STRING, "append", &args[1]);
    cx.out.integer(len as i64);
    Ok(())
}

fn strlen(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let len = match cx.engine.h.meta(db, &args[1])? {
        None => {
            cx.miss(&args[1]);
            0
        }
        Some(m) if m.vtype != ValueType::String => return Err(CmdError::msg(WRONG_TYPE)),
        Some(m) => m.len,
    };
    cx.out.integer(len as i64);
    Ok(())
}

/// INCR/DECR/INCRBY/DECRBY after their argument is parsed.
fn incr_by(cx: &mut Cx<'_>, key: &[u8], delta: i64) -> CmdResult {
    let db = cx.db();
    let v = cx.engine.h.incr_by(db, key, delta)?;
    // DECR and DECRBY too: Redis names them all "incrby".
    cx.notify(class::STRING, "incrby", key);
    cx.out.integer(v);
    Ok(())
}

fn incr(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    incr_by(cx, &args[1], 1)
}

fn decr(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    incr_by(cx, &args[1], -1)
}

fn incrby(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let delta = parse::int(&args[2])?;
    incr_by(cx, &args[1], delta)
}

fn decrby(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let delta = parse::int(&args[2])?;
    let negated = delta
        .checked_neg()
        .ok_or(CmdError::msg(DECREMENT_OVERFLOW))?;
    incr_by(cx, &args[1], negated)
}

fn incrbyfloat(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let incr = &args[2];
    // Under the key's lock: type, current value, increment, then the sum (in
    // Redis's order of errors). The expiry is kept, as Redis's dbOverwrite
    // keeps it. A command error is carried out of the closure as the result.
    let res = cx.engine.h.modify(db, &args[1], |old| {
        let current = match old {
            Some((_, m)) if m.vtype != ValueType::String => return Err(store::Error::WrongType),
            Some((v, _)) => Decimal::parse(v),
            None => Some(Decimal::ZERO),
        };
        let sum = match (current, Decimal::parse(incr)) {
            (Some(a), Some(b)) => a.checked_add(b).ok_or(NAN_OR_INFINITY),
            _ => Err(NOT_FLOAT),
        };
        Ok(match sum {
            Ok(sum) => {
                let text = sum.to_string().into_bytes();
                (Modify::Write(ValueType::String, text.clone()), Ok(text))
            }
            Err(e) => (Modify::Keep, Err(CmdError::msg(e))),
        })
    })?;
    let text = res?;
    cx.notify(class::STRING, "incrbyfloat", &args[1]);
    cx.out.bulk(&text);
    Ok(())
}

/// GETRANGE and SUBSTR.
fn getrange(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let start = parse::int(&args[2])?;
    let end = parse::int(&args[3])?;
    let db = cx.db();
    if start < 0 && end < 0 && start > end {
        // Redis replies empty here before clamping (both would clamp to 0
        // and select the first byte), after checking the type.
        match cx.engine.h.meta(db, &args[1])? {
            Some(m) if m.vtype != ValueType::String => return Err(CmdError::msg(WRONG_TYPE)),
            Some(_) => {}
            None => cx.miss(&args[1]),
        }
        cx.out.bulk(b"");
        return Ok(());
    }
    let v = cx.engine.h.get_range(db, &args[1], start, end)?;
    if v.is_empty() && cx.wants_misses() && cx.engine.h.meta(db, &args[1])?.is_none() {
        cx.miss(&args[1]);
    }
    cx.out.bulk(&v);
    Ok(())
}

fn setrange(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let offset = parse::int(&args[2])?;
    let offset = u64::try_from(offset).map_err(|_| CmdError::msg(OFFSET_RANGE))?;
    let db = cx.db();
    let len = cx.engine.h.set_range(db, &args[1], offset, &args[3])?;
    if !args[3].is_empty() {
        cx.notify(class::STRING, "setrange", &args[1]);
    }
    cx.out.integer(len as i64);
    Ok(())
}

/// LCS's options.
#[derive(Default)]
struct LcsOptions {
    len: bool,
    idx: bool,
    with_match_len: bool,
    min_match_len: u64,
}

fn lcs(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    // Both values first (a missing key is an empty string), as one read each:
    // the two keys are not read at one instant.
    let db = cx.db();
    let mut a = Vec::new();
    let mut b = Vec::new();
    let ma = cx.engine.h.get_into(db, &args[1], &mut a)?;
    let ma = cx.miss_if_none(&args[1], ma);
    let mb = cx.engine.h.get_into(db, &args[2], &mut b)?;
    let mb = cx.miss_if_none(&args[2], mb);
    if [ma, mb]
        .iter()
        .any(|m| m.is_some_and(|m| m.vtype != ValueType::String))
    {
        return Err(CmdError::msg(LCS_NOT_STRINGS));
    }
    let mut opts = LcsOptions::default();
    let mut i = 3;
    while i < args.len() {
        let opt = &args[i];
        if parse::is(opt, "idx") {
            opts.idx = true;
        } else if parse::is(opt, "len") {
            opts.len = true;
        } else if parse::is(opt, "withmatchlen") {
            opts.with_match_len = true;
        } else if parse::is(opt, "minmatchlen") && i + 1 < args.len() {
            // Negative means 0.
            opts.min_match_len = parse::int(&args[i + 1])?.max(0) as u64;
            i += 1;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        i += 1;
    }
    if opts.idx && opts.len {
        return Err(CmdError::msg(LCS_LEN_AND_IDX));
    }
    let limit = cx.engine.config.proto_max_bulk_len;
    let table = LcsTable::build(&a, &b, limit)?;
    if opts.idx {
        table.reply_idx(cx, &opts);
    } else if opts.len {
        cx.out.integer(i64::from(table.len()));
    } else {
        cx.out.bulk(&table.common());
    }
    Ok(())
}

/// The dynamic-programming table of LCS: `at(i, j)` is the length of the
/// longest common subsequence of `a[..i]` and `b[..j]`.
struct LcsTable<'a> {
    a: &'a [u8],
    b: &'a [u8],
    cells: Vec<u32>,
}

impl<'a> LcsTable<'a> {
    /// Fills the table, refusing (as Redis does) one larger than `limit` bytes.
    fn build(a: &'a [u8], b: &'a [u8], limit: u64) -> Result<LcsTable<'a>, CmdError> {
        if a.len() as u64 >= u64::from(u32::MAX) - 1 || b.len() as u64 >= u64::from(u32::MAX) - 1 {
            return Err(CmdError::msg("ERR String too long for LCS"));
        }
        let count = (a.len() as u64 + 1) * (b.len() as u64 + 1);
        let bytes = count.saturating_mul(4);
        if bytes > limit {
            return Err(CmdError::msg(LCS_TOO_BIG));
        }
        let count = usize::try_from(count).map_err(|_| CmdError::msg(LCS_NO_MEMORY))?;
        let mut cells = Vec::new();
        cells
            .try_reserve_exact(count)
            .map_err(|_| CmdError::msg(LCS_NO_MEMORY))?;
        cells.resize(count, 0u32);
        let mut t = LcsTable { a, b, cells };
        let w = b.len() + 1;
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                t.cells[i * w + j] = if a[i - 1] == b[j - 1] {
                    t.cells[(i - 1) * w + j - 1] + 1
                } else {
                    t.cells[(i - 1) * w + j].max(t.cells[i * w + j - 1])
                };
            }
        }
        Ok(t)
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * (self.b.len() + 1) + j]
    }

    /// The length of the LCS.
    fn len(&self) -> u32 {
        self.at(self.a.len(), self.b.len())
    }

    /// Walks back from the end, calling `on_match(i, j)` for each matched
    /// pair of positions, last first.
    fn walk(&self, mut on_match: impl FnMut(usize, usize)) {
        let (mut i, mut j) = (self.a.len(), self.b.len());
        while i > 0 && j > 0 {
            if self.a[i - 1] == self.b[j - 1] {
                on_match(i - 1, j - 1);
                i -= 1;
                j -= 1;
            } else if self.at(i - 1, j) > self.at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
        }
    }

    /// The common subsequence itself.
    fn common(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len() as usize);
        self.walk(|i, _| out.push(self.a[i]));
        out.reverse();
        out
    }

    /// IDX's reply: `matches` (ranges of contiguous matches, last first, each
    /// `[[a_start, a_end], [b_start, b_end]]` plus its length with
    /// WITHMATCHLEN, only those of at least MINMATCHLEN) and `len`.
    fn reply_idx(&self, cx: &mut Cx<'_>, opts: &LcsOptions) {
        // (a_start, a_end, b_start, b_end) of each contiguous run.
        let mut ranges: Vec<(usize, usize, usize, usize)> = Vec::new();
        let mut cur: Option<(usize, usize, usize, usize)> = None;
        self.walk(|i, j| match cur {
            Some((s, e, bs, be)) if s == i + 1 && bs == j + 1 => cur = Some((i, e, j, be)),
            Some(r) => {
                ranges.push(r);
                cur = Some((i, i, j, j));
            }
            None => cur = Some((i, i, j, j)),
        });
        ranges.extend(cur);
        ranges.retain(|r| (r.1 - r.0 + 1) as u64 >= opts.min_match_len);
        cx.out.map_len(2);
        cx.out.bulk(b"matches");
        cx.out.array_len(ranges.len());
        for (s, e, bs, be) in ranges {
            cx.out.array_len(if opts.with_match_len { 3 } else { 2 });
            cx.out.array_len(2);
            cx.out.integer(s as i64);
            cx.out.integer(e as i64);
            cx.out.array_len(2);
            cx.out.integer(bs as i64);
            cx.out.integer(be as i64);
            if opts.with_match_len {
                cx.out.integer((e - s + 1) as i64);
            }
        }
        cx.out.bulk(b"len");
        cx.out.integer(i64::from(self.len()));
    }
}
