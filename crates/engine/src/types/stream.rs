//! Streams and consumer groups: XADD, XRANGE, XREAD, XGROUP, XREADGROUP,
//! XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO and the rest of Redis 7.0's
//! `t_stream.c`, with its replies and error texts.
//!
//! A stream is one store value ([`store::Stream`]); every command reads it
//! or changes it in one step under the key's lock, so a command is atomic
//! across workers. XREAD and XREADGROUP with BLOCK park through the
//! worker's blocked-client registry like BLPOP: an XADD (or XGROUP
//! DESTROY) signals the key, and the parked command runs again. XREAD's
//! `$` is resolved to the stream's last ID when the client blocks, and the
//! command is kept with that ID in its place, so a re-run reads only what
//! came after it.

use store::{
    Collection, NodeLimits, Pending, Stream, StreamConsumer, StreamEntry, StreamGroup, StreamId,
    Trim, ValueType,
};

use crate::command::{dispatch_sub, flags::*, Arg, CmdResult, Command};
use crate::engine::{Cx, TimeoutReply};
use crate::error::CmdError;
use crate::notify::class;
use crate::parse;

/// An ID that does not parse.
const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";
const BAD_START: &str = "ERR invalid start ID for the interval";
const BAD_END: &str = "ERR invalid end ID for the interval";
const ID_TOO_SMALL: &str =
    "ERR The ID specified in XADD is equal or smaller than the target stream top item";
const ID_ZERO: &str = "ERR The ID specified in XADD must be greater than 0-0";
const ID_EXHAUSTED: &str =
    "ERR The stream has exhausted the last possible ID, unable to add more items";
const BOTH_STRATEGIES: &str =
    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";
const NEGATIVE_MAXLEN: &str = "ERR The MAXLEN argument must be >= 0.";
const NEGATIVE_LIMIT: &str = "ERR The LIMIT argument must be >= 0.";
const LIMIT_WITHOUT_STRATEGY: &str =
    "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy";
const XTRIM_WITHOUT_STRATEGY: &str =
    "ERR syntax error, XTRIM must be called with a trimming strategy";
const LIMIT_WITHOUT_APPROX: &str =
    "ERR syntax error, LIMIT cannot be used without the special ~ option";
const BUSYGROUP: &str = "BUSYGROUP Consumer Group name already exists";
const XGROUP_NO_KEY: &str = "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.";
const BAD_ENTRIES_READ: &str = "ERR value for ENTRIESREAD must be positive or -1";

crate::command::group_cmd!("stream");

const XGROUP_SUBCOMMANDS: &[Command] = &[
    cmd(
        "xgroup|create",
        -5,
        WRITE | DENYOOM,
        (2, 2, 1),
        "5.0.0",
        "Create a consumer group.",
        xgroup_create,
    ),
    cmd(
        "xgroup|setid",
        -5,
        WRITE,
        (2, 2, 1),
        "5.0.0",
        "Set a consumer group to an arbitrary last delivered ID value.",
        xgroup_setid,
    ),
    cmd(
        "xgroup|destroy",
        4,
        WRITE,
        (2, 2, 1),
        "5.0.0",
        "Destroy a consumer group.",
        xgroup_destroy,
    ),
    cmd(
        "xgroup|createconsumer",
        5,
        WRITE | DENYOOM,
        (2, 2, 1),
        "6.2.0",
        "Create a consumer in a consumer group.",
        xgroup_createconsumer,
    ),
    cmd(
        "xgroup|delconsumer",
        5,
        WRITE,
        (2, 2, 1),
        "5.0.0",
        "Delete a consumer from a consumer group.",
        xgroup_delconsumer,
    ),
    cmd(
        "xgroup|help",
        2,
        LOADING | STALE,
        (0, 0, 0),
        "5.0.0",
        "Show helpful text about the different subcommands",
        xgroup_help,
    ),
];

const XINFO_SUBCOMMANDS: &[Command] = &[
    cmd(
        "xinfo|consumers",
        4,
        READONLY,
        (2, 2, 1),
        "5.0.0",
        "List the consumers in a consumer group",
        xinfo_consumers,
    ),
    cmd(
        "xinfo|groups",
        3,
        READONLY,
        (2, 2, 1),
        "5.0.0",
        "List the consumer groups of a stream",
        xinfo_groups,
    ),
    cmd(
        "xinfo|stream",
        -3,
        READONLY,
        (2, 2, 1),
        "5.0.0",
        "Get information about a stream",
        xinfo_stream,
    ),
    cmd(
        "xinfo|help",
        2,
        LOADING | STALE,
        (0, 0, 0),
        "5.0.0",
        "Show helpful text about the different subcommands",
        xinfo_help,
    ),
];

/// The stream commands.
#[rustfmt::skip]
pub(crate) const COMMANDS: &[Command] = &[
    cmd("xadd", -5, WRITE | DENYOOM | FAST, (1, 1, 1), "5.0.0", "Appends a new entry to a stream", xadd),
    cmd("xrange", -4, READONLY, (1, 1, 1), "5.0.0", "Return a range of elements in a stream, with IDs matching the specified IDs interval", xrange),
    cmd("xrevrange", -4, READONLY, (1, 1, 1), "5.0.0", "Return a range of elements in a stream, with IDs matching the specified IDs interval, in reverse order (from greater to smaller IDs) compared to XRANGE", xrevrange),
    cmd("xlen", 2, READONLY | FAST, (1, 1, 1), "5.0.0", "Return the number of entries in a stream", xlen),
    cmd("xdel", -3, WRITE | FAST, (1, 1, 1), "5.0.0", "Removes the specified entries from the stream. Returns the number of items actually deleted, that may be different from the number of IDs passed in case certain IDs do not exist.", xdel),
    cmd("xtrim", -4, WRITE, (1, 1, 1), "5.0.0", "Trims the stream to (approximately if '~' is passed) a certain size", xtrim),
    cmd("xsetid", -3, WRITE | DENYOOM | FAST, (1, 1, 1), "5.0.0", "An internal command for replicating stream values", xsetid),
    Command { movable_keys: Some(stream_keys), ..cmd("xread", -4, READONLY | BLOCKING | ATOMIC, (0, 0, 0), "5.0.0", "Return never seen elements in multiple streams, with IDs greater than the ones reported by the caller for each stream. Can block.", xread) },
    Command { movable_keys: Some(stream_keys), ..cmd("xreadgroup", -7, WRITE | BLOCKING | ATOMIC, (0, 0, 0), "5.0.0", "Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.", xreadgroup) },
    cmd("xack", -4, WRITE | FAST, (1, 1, 1), "5.0.0", "Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group. Return value of the command is the number of messages successfully acknowledged, that is, the IDs we were actually able to resolve in the PEL.", xack),
    cmd("xpending", -3, READONLY, (1, 1, 1), "5.0.0", "Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.", xpending),
    cmd("xclaim", -6, WRITE | FAST, (1, 1, 1), "5.0.0", "Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.", xclaim),
    cmd("xautoclaim", -6, WRITE | FAST, (1, 1, 1), "6.2.0", "Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.", xautoclaim),
    Command { subcommands: XGROUP_SUBCOMMANDS, ..cmd("xgroup", -2, 0, (0, 0, 0), "5.0.0", "A container for consumer groups commands", xgroup) },
    Command { subcommands: XINFO_SUBCOMMANDS, ..cmd("xinfo", -2, 0, (0, 0, 0), "5.0.0", "A container for stream introspection commands", xinfo) },
];

/// XREAD / XREADGROUP's keys: the first half of what follows STREAMS.
fn stream_keys(args: &[Arg<'_>]) -> Vec<usize> {
    let Some(at) = args.iter().position(|a| parse::is(a, "streams")) else {
        return Vec::new();
    };
    let rest = args.len() - at - 1;
    (at + 1..at + 1 + rest / 2).collect()
}

// ---------------------------------------------------------------- helpers

/// Parses an ID: `ms-seq`, `ms` (seq = `missing_seq`), and unless `strict`
/// `-` and `+`. Returns the ID and whether the sequence was given (false
/// for `ms-*` when `allow_star`).
fn parse_id_full(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    allow_star: bool,
) -> Result<(StreamId, bool), CmdError> {
    let bad = || CmdError::msg(INVALID_ID);
    if arg.len() > 127 {
        return Err(bad());
    }
    match arg {
        b"-" if !strict => return Ok((StreamId::MIN, true)),
        b"+" if !strict => return Ok((StreamId::MAX, true)),
        b"-" | b"+" => return Err(bad()),
        _ => {}
    }
    let (ms_part, seq_part) = match arg.iter().position(|&b| b == b'-') {
        Some(at) => (&arg[..at], Some(&arg[at + 1..])),
        None => (arg, None),
    };
    let ms = parse_u64(ms_part).ok_or_else(bad)?;
    match seq_part {
        Some(b"*") if allow_star => Ok((StreamId { ms, seq: 0 }, false)),
        Some(s) => Ok((
            StreamId {
                ms,
                seq: parse_u64(s).ok_or_else(bad)?,
            },
            true,
        )),
        None => Ok((
            StreamId {
                ms,
                seq: missing_seq,
            },
            true,
        )),
    }
}

/// Redis's `string2ull`: decimal digits only, no sign, no overflow.
fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

fn parse_id(arg: &[u8], missing_seq: u64) -> Result<StreamId, CmdError> {
    parse_id_full(arg, missing_seq, false, false).map(|r| r.0)
}

fn parse_strict_id(arg: &[u8]) -> Result<StreamId, CmdError> {
    parse_id_full(arg, 0, true, false).map(|r| r.0)
}

/// A range bound: `(` makes it exclusive (then `-`/`+` are refused).
fn parse_interval(arg: &[u8], missing_seq: u64, start: bool) -> Result<StreamId, CmdError> {
    if arg.len() > 1 && arg[0] == b'(' {
        let id = parse_id_full(&arg[1..], missing_seq, true, false)?.0;
        return if start {
            id.next().ok_or(CmdError::msg(BAD_START))
        } else {
            id.prev().ok_or(CmdError::msg(BAD_END))
        };
    }
    parse_id(arg, missing_seq)
}

fn nogroup(text: String) -> CmdError {
    CmdError::owned(format!("NOGROUP {text}"))
}

fn lossy(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

fn reply_id(cx: &mut Cx<'_>, id: StreamId) {
    cx.out.bulk(id.to_string().as_bytes());
}

fn reply_entry(cx: &mut Cx<'_>, entry: &StreamEntry) {
    cx.out.array_len(2);
    reply_id(cx, entry.0);
    cx.out.array_len(entry.1.len());
    for f in &entry.1 {
        cx.out.bulk(f);
    }
}

fn reply_entries(cx: &mut Cx<'_>, entries: &[StreamEntry]) {
    cx.out.array_len(entries.len());
    for e in entries {
        reply_entry(cx, e);
    }
}

fn read<T>(
    cx: &mut Cx<'_>,
    key: &[u8],
    f: impl FnOnce(&Stream) -> store::Result<T>,
) -> Result<Option<T>, CmdError> {
    let db = cx.db();
    let found = cx.h().read_collection(db, key, f)?;
    Ok(cx.miss_if_none(key, found))
}

/// Changes the stream at `key` in one atomic step. `f` returns the
/// command's result, or its error (then nothing is written).
fn write<T>(
    cx: &mut Cx<'_>,
    key: &[u8],
    create: bool,
    f: impl FnOnce(&mut Stream) -> Result<T, CmdError>,
) -> Result<Option<T>, CmdError> {
    let db = cx.db();
    let mut failure = None;
    let res = cx.h().write_collection(db, key, create, |s: &mut Stream| {
        f(s).map_err(|e| {
            failure = Some(e);
            store::Error::BadValue
        })
    });
    match (res, failure) {
        (_, Some(e)) => Err(e),
        (r, None) => Ok(r?),
    }
}

fn node_limits(cx: &Cx<'_>) -> NodeLimits {
    let c = cx.engine.config();
    NodeLimits {
        max_bytes: c.stream_node_max_bytes,
        max_entries: c.stream_node_max_entries,
    }
}

fn now(cx: &Cx<'_>) -> u64 {
    cx.engine.now_ms()
}

/// Redis's `streamRangeHasTombstones` from `start` to the end.
fn has_tombstones_from(s: &Stream, start: StreamId) -> store::Result<bool> {
    let m = s.meta();
    if m.length == 0 || m.max_deleted.is_zero() {
        return Ok(false);
    }
    let first = s.first_entry()?.map_or(StreamId::MIN, |e| e.0);
    if first > m.max_deleted {
        return Ok(false);
    }
    Ok(start <= m.max_deleted)
}

/// Redis's `streamEstimateDistanceFromFirstEverEntry`: the logical read
/// counter of `id`, None when it cannot be known.
fn estimate_entries_read(s: &Stream, id: StreamId) -> store::Result<Option<u64>> {
    let m = s.meta();
    if m.entries_added == 0 {
        return Ok(Some(0));
    }
    if m.length == 0 && id <= m.last_id {
        return Ok(Some(m.entries_added));
    }
    if id == m.last_id {
        return Ok(Some(m.entries_added));
    }
    if id > m.last_id {
        return Ok(None);
    }
    let first = s.first_entry()?.map_or(StreamId::MIN, |e| e.0);
    if m.max_deleted.is_zero() || m.max_deleted < first {
        if id < first {
            return Ok(Some(m.entries_added - m.length));
        }
        if id == first {
            return Ok(Some(m.entries_added - m.length + 1));
        }
    }
    Ok(None)
}

/// A group's lag, None when it cannot be known (XINFO's null). Negative
/// when XGROUP SETID's ENTRIESREAD claims more reads than entries were
/// ever added, as Redis shows it.
fn group_lag(s: &Stream, g: &StreamGroup) -> store::Result<Option<i64>> {
    let m = s.meta();
    if m.entries_added == 0 {
        return Ok(Some(0));
    }
    let lag = |read: u64| (m.entries_added as i64).wrapping_sub(read as i64);
    if let Some(read) = g.entries_read {
        if !has_tombstones_from(s, g.last_id)? {
            return Ok(Some(lag(read)));
        }
    }
    Ok(estimate_entries_read(s, g.last_id)?.map(lag))
}

// ---------------------------------------------------------------- XADD / XTRIM

/// Parsed trimming options of XADD and XTRIM.
struct TrimArgs {
    trim: Option<Trim>,
    approx: bool,
    limit: u64,
    nomkstream: bool,
    /// XADD's ID: None for `*`; else the ID and whether its sequence was
    /// given.
    id: Option<(StreamId, bool)>,
    /// Index of the first field (XADD).
    next: usize,
}

fn parse_trim_args(cx: &Cx<'_>, args: &[Arg<'_>], xadd: bool) -> Result<TrimArgs, CmdError> {
    let mut t = TrimArgs {
        trim: None,
        approx: false,
        limit: 0,
        nomkstream: false,
        id: None,
        next: args.len(),
    };
    let mut limit_given = false;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i][..];
        if xadd && opt == b"*" {
            t.next = i + 1;
            break;
        } else if (parse::is(opt, "maxlen") || parse::is(opt, "minid")) && more > 0 {
            if t.trim.is_some() {
                return Err(CmdError::msg(BOTH_STRATEGIES));
            }
            t.approx = false;
            let next = &args[i + 1][..];
            if more >= 2 && next == b"~" {
                t.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            if parse::is(opt, "maxlen") {
                let n = parse::int(&args[i + 1])?;
                if n < 0 {
                    return Err(CmdError::msg(NEGATIVE_MAXLEN));
                }
                t.trim = Some(Trim::MaxLen(n as u64));
            } else {
                t.trim = Some(Trim::MinId(parse_strict_id(&args[i + 1])?));
            }
            i += 1;
        } else if parse::is(opt, "limit") && more > 0 {
            let n = parse::int(&args[i + 1])?;
            if n < 0 {
                return Err(CmdError::msg(NEGATIVE_LIMIT));
            }
            t.limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && parse::is(opt, "nomkstream") {
            t.nomkstream = true;
        } else if xadd {
            t.id = Some(parse_id_full(opt, 0, true, true)?);
            t.next = i + 1;
            break;
        } else {
            return Err(CmdError::syntax());
        }
        i += 1;
    }
    if t.limit > 0 && t.trim.is_none() {
        return Err(CmdError::msg(LIMIT_WITHOUT_STRATEGY));
    }
    if !xadd && t.trim.is_none() {
        return Err(CmdError::msg(XTRIM_WITHOUT_STRATEGY));
    }
    if limit_given {
        if !t.approx {
            return Err(CmdError::msg(LIMIT_WITHOUT_APPROX));
        }
    } else if t.approx {
        let per_node = node_limits(cx).max_entries;
        t.limit = per_node.saturating_mul(100);
        if t.limit == 0 {
            t.limit = 10_000;
        }
        t.limit = t.limit.min(1_000_000);
    } else {
        t.limit = 0;
    }
    Ok(t)
}

/// The ID an XADD adds, as Redis's `streamAppendItem` picks it.
fn next_id(last: StreamId, given: Option<(StreamId, bool)>, now_ms: u64) -> Option<StreamId> {
    let id = match given {
        Some((id, true)) => id,
        Some((id, false)) => {
            if last.ms == id.ms {
                StreamId {
                    ms: id.ms,
                    seq: last.seq.checked_add(1)?,
                }
            } else {
                id
            }
        }
        None if now_ms > last.ms => StreamId { ms: now_ms, seq: 0 },
        None => last.next()?,
    };
    (id > last).then_some(id)
}

fn xadd(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let t = parse_trim_args(cx, args, true)?;
    let fields = &args[t.next.min(args.len())..];
    if t.next > args.len() || fields.len() < 2 || !fields.len().is_multiple_of(2) {
        return Err(CmdError::arity("xadd"));
    }
    if let Some((id, true)) = t.id {
        if id.is_zero() {
            return Err(CmdError::msg(ID_ZERO));
        }
    }
    let limits = node_limits(cx);
    let now_ms = now(cx);
    let fields: Vec<&[u8]> = fields.iter().map(|f| &f[..]).collect();
    let added = write(cx, &args[1], !t.nomkstream, |s| {
        let last = s.meta().last_id;
        if last == StreamId::MAX {
            return Err(CmdError::msg(ID_EXHAUSTED));
        }
        let id = next_id(last, t.id, now_ms).ok_or(CmdError::msg(ID_TOO_SMALL))?;
        s.append(id, &fields, limits)?;
        let trimmed = match t.trim {
            Some(trim) => s.trim(trim, t.approx, t.limit)?,
            None => 0,
        };
        Ok((id, trimmed))
    })?;
    let Some((id, trimmed)) = added else {
        cx.out.null();
        return Ok(());
    };
    reply_id(cx, id);
    cx.notify(class::STREAM, "xadd", &args[1]);
    if trimmed > 0 {
        cx.notify(class::STREAM, "xtrim", &args[1]);
    }
    cx.signal_ready(&args[1]);
    Ok(())
}

fn xtrim(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let t = parse_trim_args(cx, args, false)?;
    let Some(trim) = t.trim else {
        return Err(CmdError::msg(XTRIM_WITHOUT_STRATEGY));
    };
    let trimmed = write(
        cx,
        &args[1],
        false,
        |s| Ok(s.trim(trim, t.approx, t.limit)?),
    )?;
    let trimmed = trimmed.unwrap_or(0);
    if trimmed > 0 {
        cx.notify(class::STREAM, "xtrim", &args[1]);
    }
    cx.out.integer(trimmed as i64);
    Ok(())
}

fn xdel(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let ids = args[2..]
        .iter()
        .map(|a| parse_strict_id(a))
        .collect::<Result<Vec<_>, _>>()?;
    let deleted = write(cx, &args[1], false, |s| {
        let mut n = 0;
        for id in &ids {
            n += u64::from(s.delete(*id)?);
        }
        Ok(n)
    })?
    .unwrap_or(0);
    if deleted > 0 {
        cx.notify(class::STREAM, "xdel", &args[1]);
    }
    cx.out.integer(deleted as i64);
    Ok(())
}

fn xlen(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let n = read(cx, &args[1], |s| Ok(s.len()))?.unwrap_or(0);
    cx.out.integer(n as i64);
    Ok(())
}

fn xsetid(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let id = parse_strict_id(&args[2])?;
    let mut entries_added = None;
    let mut max_deleted = StreamId::MIN;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if parse::is(&args[i], "entriesadded") && more > 0 {
            let n = parse::int(&args[i + 1])?;
            if n < 0 {
                return Err(CmdError::msg("ERR entries_added must be positive"));
            }
            entries_added = Some(n as u64);
        } else if parse::is(&args[i], "maxdeletedid") && more > 0 {
            max_deleted = parse_strict_id(&args[i + 1])?;
            if id < max_deleted {
                return Err(CmdError::msg("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id"));
            }
        } else {
            return Err(CmdError::syntax());
        }
        i += 2;
    }
    let done = write(cx, &args[1], false, |s| {
        let m = s.meta();
        if m.length > 0 {
            let top = s.last_entry()?.map_or(StreamId::MIN, |e| e.0);
            if id < top {
                return Err(CmdError::msg(
                    "ERR The ID specified in XSETID is smaller than the target stream top item",
                ));
            }
            if entries_added.is_some_and(|n| m.length > n) {
                return Err(CmdError::msg("ERR The entries_added specified in XSETID is smaller than the target stream length"));
            }
        }
        let max_deleted = if max_deleted.is_zero() {
            m.max_deleted
        } else {
            max_deleted
        };
        s.set_meta(id, entries_added.unwrap_or(m.entries_added), max_deleted)?;
        Ok(())
    })?;
    if done.is_none() {
        return Err(CmdError::msg(crate::error::NO_SUCH_KEY));
    }
    cx.notify(class::STREAM, "xsetid", &args[1]);
    cx.out.simple(b"OK");
    Ok(())
}

// ---------------------------------------------------------------- XRANGE

fn range(cx: &mut Cx<'_>, args: &[Arg<'_>], rev: bool) -> CmdResult {
    let (start_arg, end_arg) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let start = parse_interval(start_arg, 0, true)?;
    let end = parse_interval(end_arg, u64::MAX, false)?;
    let mut count: Option<u64> = None;
    let mut i = 4;
    while i < args.len() {
        if parse::is(&args[i], "count") && i + 1 < args.len() {
            count = Some(parse::int(&args[i + 1])?.max(0) as u64);
            i += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    let entries = read(cx, &args[1], |s| {
        if count == Some(0) {
            return Ok(None);
        }
        s.range(start, end, count.unwrap_or(0), rev).map(Some)
    })?;
    match entries {
        None => cx.out.array_len(0),
        Some(None) => cx.out.null_array(),
        Some(Some(entries)) => reply_entries(cx, &entries),
    }
    Ok(())
}

fn xrange(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    range(cx, args, false)
}

fn xrevrange(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    range(cx, args, true)
}

// ---------------------------------------------------------------- XREAD

/// A parsed XREAD / XREADGROUP.
struct ReadArgs {
    block: Option<Option<u64>>,
    count: u64,
    group: Option<(Vec<u8>, Vec<u8>)>,
    noack: bool,
    /// Index of the first key.
    streams_at: usize,
    nkeys: usize,
}

fn parse_read(args: &[Arg<'_>], xreadgroup: bool, in_script: bool) -> Result<ReadArgs, CmdError> {
    let mut r = ReadArgs {
        block: None,
        count: 0,
        group: None,
        noack: false,
        streams_at: 0,
        nkeys: 0,
    };
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let o = &args[i][..];
        if parse::is(o, "block") && more > 0 {
            if in_script {
                // A script cannot wait (Redis says so with the command's
                // name as the client spelled it).
                return Err(CmdError::owned(format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(&args[0])
                )));
            }
            i += 1;
            let ms = parse::int(&args[i])
                .map_err(|_| CmdError::msg("ERR timeout is not an integer or out of range"))?;
            if ms < 0 {
                return Err(CmdError::msg("ERR timeout is negative"));
            }
            r.block = Some((ms > 0).then_some(ms as u64));
        } else if parse::is(o, "count") && more > 0 {
            i += 1;
            r.count = parse::int(&args[i])?.max(0) as u64;
        } else if parse::is(o, "streams") && more > 0 {
            r.streams_at = i + 1;
            let n = args.len() - r.streams_at;
            if !n.is_multiple_of(2) {
                return Err(CmdError::msg("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."));
            }
            r.nkeys = n / 2;
            break;
        } else if parse::is(o, "group") && more >= 2 {
            if !xreadgroup {
                return Err(CmdError::msg(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.group = Some((args[i + 1].to_vec(), args[i + 2].to_vec()));
            i += 2;
        } else if parse::is(o, "noack") {
            if !xreadgroup {
                return Err(CmdError::msg(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.noack = true;
        } else {
            return Err(CmdError::syntax());
        }
        i += 1;
    }
    if r.streams_at == 0 {
        return Err(CmdError::syntax());
    }
    if xreadgroup && r.group.is_none() {
        return Err(CmdError::msg("ERR Missing GROUP option for XREADGROUP"));
    }
    Ok(r)
}

/// What an XREAD(GROUP) asks of one stream.
#[derive(Clone, Copy)]
enum Want {
    /// Entries after this ID.
    After(StreamId),
    /// XREADGROUP `>`: new entries for the group.
    New,
}

fn xread(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    read_streams(cx, args, false)
}

fn xreadgroup(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    read_streams(cx, args, true)
}

fn read_streams(cx: &mut Cx<'_>, args: &[Arg<'_>], xreadgroup: bool) -> CmdResult {
    let r = parse_read(args, xreadgroup, cx.session.in_script)?;
    let keys = &args[r.streams_at..r.streams_at + r.nkeys];
    let id_args = &args[r.streams_at + r.nkeys..];
    let db = cx.db();
    // Run again for a parked client (its key was written, deleted or
    // changed type): Redis's rules for a woken reader apply.
    let rerun = cx.session.blocked;
    let mut wants = Vec::with_capacity(keys.len());
    let mut rewritten = false;
    for (key, id_arg) in keys.iter().zip(id_args) {
        let meta = match cx.h().read_collection(db, key, |s: &Stream| {
            let g = match &r.group {
                Some((g, _)) => s.group(g)?.is_some(),
                None => false,
            };
            Ok((s.meta().last_id, g))
        }) {
            Ok(m) => m,
            // A parked XREAD whose key now holds another type waits on.
            Err(store::Error::WrongType) if rerun && !xreadgroup => {
                cx.block(Vec::new(), ValueType::Stream, None, TimeoutReply::NullArray);
                return Ok(());
            }
            Err(store::Error::WrongType) if !rerun => {
                return Err(CmdError::msg(crate::error::WRONG_TYPE))
            }
            Err(store::Error::WrongType) => None,
            Err(e) => return Err(e.into()),
        };
        if let Some((g, _)) = &r.group {
            if rerun && meta.is_none() {
                return Err(CmdError::msg("UNBLOCKED the stream key no longer exists"));
            }
            if rerun && !meta.is_some_and(|m| m.1) {
                return Err(nogroup(
                    "the consumer group this client was blocked on no longer exists".into(),
                ));
            }
            if !meta.is_some_and(|m| m.1) {
                return Err(nogroup(format!(
                    "No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    lossy(key),
                    lossy(g)
                )));
            }
        }
        let want = if &id_arg[..] == b"$" {
            if xreadgroup {
                return Err(CmdError::msg("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set."));
            }
            rewritten = true;
            Want::After(meta.map_or(StreamId::MIN, |m| m.0))
        } else if &id_arg[..] == b">" {
            if !xreadgroup {
                return Err(CmdError::msg("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."));
            }
            Want::New
        } else {
            Want::After(parse_strict_id(id_arg)?)
        };
        wants.push(want);
    }
    let resp3 = cx.out.protocol() == proto::resp::Protocol::Resp3;
    let mut served: Vec<(usize, Vec<ReadItem>)> = Vec::new();
    let now_ms = now(cx);
    for (i, key) in keys.iter().enumerate() {
        let items = match &r.group {
            None => {
                let Want::After(after) = wants[i] else {
                    continue;
                };
                read(cx, key, |s| {
                    let Some(start) = after.next() else {
                        return Ok(Vec::new());
                    };
                    if s.last_entry()?.is_none_or(|e| e.0 < start) {
                        return Ok(Vec::new());
                    }
                    Ok(s.range(start, StreamId::MAX, r.count, false)?
                        .into_iter()
                        .map(|e| ReadItem::Entry(e.0, e.1))
                        .collect())
                })?
                .unwrap_or_default()
            }
            Some((group, consumer)) => {
                let (group, consumer) = (group.clone(), consumer.clone());
                let want = wants[i];
                let count = r.count;
                let noack = r.noack;
                let mut created = false;
                let items = write(cx, key, false, |s| {
                    let missing = s.consumer(&group, &consumer)?.is_none();
                    let items = group_read(s, &group, &consumer, want, count, noack, now_ms)?;
                    created = missing && s.consumer(&group, &consumer)?.is_some();
                    Ok(items)
                })?
                .flatten()
                .unwrap_or_default();
                if created {
                    cx.notify(class::STREAM, "xgroup-createconsumer", key);
                }
                items
            }
        };
        let history = matches!(wants[i], Want::After(_)) && r.group.is_some();
        if !items.is_empty() || history {
            served.push((i, items));
        }
    }
    if !served.is_empty() {
        if resp3 {
            cx.out.map_len(served.len());
        } else {
            cx.out.array_len(served.len());
        }
        for (i, items) in &served {
            if !resp3 {
                cx.out.array_len(2);
            }
            cx.out.bulk(&keys[*i]);
            cx.out.array_len(items.len());
            for item in items {
                match item {
                    ReadItem::Entry(id, fields) => {
                        cx.out.array_len(2);
                        reply_id(cx, *id);
                        cx.out.array_len(fields.len());
                        for f in fields {
                            cx.out.bulk(f);
                        }
                    }
                    ReadItem::Deleted(id) => {
                        cx.out.array_len(2);
                        reply_id(cx, *id);
                        cx.out.null_array();
                    }
                }
            }
        }
        return Ok(());
    }
    let Some(timeout) = r.block else {
        cx.out.null_array();
        return Ok(());
    };
    let keys_owned: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
    if rewritten {
        let mut again: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        for (j, want) in wants.iter().enumerate() {
            if let Want::After(id) = want {
                again[r.streams_at + r.nkeys + j] = id.to_string().into_bytes();
            }
        }
        cx.block_rerun(
            keys_owned,
            ValueType::Stream,
            timeout,
            TimeoutReply::NullArray,
            again,
        );
    } else {
        cx.block(
            keys_owned,
            ValueType::Stream,
            timeout,
            TimeoutReply::NullArray,
        );
    }
    Ok(())
}

/// One item of an XREAD reply.
enum ReadItem {
    Entry(StreamId, Vec<Vec<u8>>),
    /// A pending entry of the consumer's history that was deleted.
    Deleted(StreamId),
}

/// XREADGROUP on one stream: the consumer's history from `want`, or new
/// entries (`>`), which it then owns (unless `noack`). None: nothing new.
fn group_read(
    s: &mut Stream,
    group: &[u8],
    consumer: &[u8],
    want: Want,
    count: u64,
    noack: bool,
    now_ms: u64,
) -> Result<Option<Vec<ReadItem>>, CmdError> {
    let Some(mut g) = s.group(group)? else {
        return Err(nogroup(format!(
            "No such key or consumer group '{}' in XREADGROUP with GROUP option",
            lossy(group)
        )));
    };
    let new_consumer = s.consumer(group, consumer)?.is_none();
    let mut c = s.consumer(group, consumer)?.unwrap_or(StreamConsumer {
        name: consumer.to_vec(),
        seen_ms: now_ms,
        pending: 0,
    });
    let mut items = Vec::new();
    match want {
        Want::After(after) => {
            let Some(start) = after.next() else {
                if new_consumer {
                    s.put_consumer(group, &c)?;
                }
                return Ok(Some(items));
            };
            c.seen_ms = now_ms;
            s.put_consumer(group, &c)?;
            let owned = s.pending_range(group, Some(consumer), start, StreamId::MAX, count)?;
            for mut p in owned {
                match s.entry(p.id)? {
                    Some(fields) => {
                        p.delivery_ms = now_ms;
                        p.deliveries += 1;
                        s.put_pending(group, &p)?;
                        items.push(ReadItem::Entry(p.id, fields));
                    }
                    None => items.push(ReadItem::Deleted(p.id)),
                }
            }
            Ok(Some(items))
        }
        Want::New => {
            let has_new = s.last_entry()?.is_some_and(|e| e.0 > g.last_id);
            if !has_new {
                return Ok(None);
            }
            c.seen_ms = now_ms;
            s.put_consumer(group, &c)?;
            let Some(start) = g.last_id.next() else {
                return Ok(None);
            };
            let entries = s.range(start, StreamId::MAX, count, false)?;
            for (id, fields) in entries {
                if id > g.last_id {
                    if g.entries_read.is_some() && !has_tombstones_from(s, id)? {
                        g.entries_read = g.entries_read.map(|r| r + 1);
                    } else if s.meta().entries_added > 0 {
                        g.entries_read = estimate_entries_read(s, id)?;
                    }
                    g.last_id = id;
                }
                if !noack {
                    s.put_pending(
                        group,
                        &Pending {
                            id,
                            consumer: consumer.to_vec(),
                            delivery_ms: now_ms,
                            deliveries: 1,
                        },
                    )?;
                }
                items.push(ReadItem::Entry(id, fields));
            }
            // The pending count may have moved: keep it, change the rest.
            let pending = s.group(group)?.map_or(g.pending, |now| now.pending);
            g.pending = pending;
            s.put_group(&g)?;
            Ok(Some(items))
        }
    }
}

// ---------------------------------------------------------------- XGROUP

fn xgroup(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let parent = crate::command::lookup(b"xgroup").expect("XGROUP is in the table");
    dispatch_sub(cx, parent, args)
}

fn xgroup_help(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    crate::command::reply_help(
        cx,
        &[
            "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
            "HELP",
            "    Print this help.",
        ],
    )
}

/// XGROUP CREATE / SETID's options: MKSTREAM (CREATE only) and ENTRIESREAD.
fn group_options(args: &[Arg<'_>], create: bool) -> Result<(bool, Option<u64>), CmdError> {
    let mut mkstream = false;
    let mut entries_read = None;
    let mut i = 5;
    while i < args.len() {
        if create && parse::is(&args[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if parse::is(&args[i], "entriesread") && i + 1 < args.len() {
            let n = parse::int(&args[i + 1])?;
            if n < -1 {
                return Err(CmdError::msg(BAD_ENTRIES_READ));
            }
            entries_read = (n >= 0).then_some(n as u64);
            i += 2;
        } else {
            return Err(subcommand_syntax(args));
        }
    }
    Ok((mkstream, entries_read))
}

fn subcommand_syntax(args: &[Arg<'_>]) -> CmdError {
    CmdError::owned(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        lossy(&args[1]),
        lossy(&args[0]).to_uppercase()
    ))
}

fn no_group_for_key(group: &[u8], key: &[u8]) -> CmdError {
    nogroup(format!(
        "No such consumer group '{}' for key name '{}'",
        lossy(group),
        lossy(key)
    ))
}

/// Whether `key` holds a stream (WRONGTYPE when it holds something else).
fn stream_exists(cx: &mut Cx<'_>, key: &[u8]) -> Result<bool, CmdError> {
    Ok(read(cx, key, |_| Ok(()))?.is_some())
}

fn xgroup_create(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if args.len() > 8 {
        return Err(subcommand_syntax(args));
    }
    let (mkstream, entries_read) = group_options(args, true)?;
    let (key, name) = (&args[2], &args[3]);
    if !mkstream && !stream_exists(cx, key)? {
        return Err(CmdError::msg(XGROUP_NO_KEY));
    }
    let given = if &args[4][..] == b"$" {
        None
    } else {
        Some(parse_strict_id(&args[4])?)
    };
    write(cx, key, true, |s| {
        if s.group(name)?.is_some() {
            return Err(CmdError::msg(BUSYGROUP));
        }
        let last_id = given.unwrap_or(s.meta().last_id);
        s.create()?;
        s.put_group(&StreamGroup {
            name: name.to_vec(),
            last_id,
            entries_read,
            pending: 0,
        })?;
        Ok(())
    })?;
    cx.notify(class::STREAM, "xgroup-create", key);
    cx.out.simple(b"OK");
    Ok(())
}

fn xgroup_setid(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if args.len() != 5 && args.len() != 7 {
        return Err(subcommand_syntax(args));
    }
    let (_, entries_read) = group_options(args, false)?;
    let (key, name) = (&args[2], &args[3]);
    let given = if &args[4][..] == b"$" {
        None
    } else {
        Some(parse_id(&args[4], 0)?)
    };
    let done = write(cx, key, false, |s| {
        let Some(mut g) = s.group(name)? else {
            return Err(no_group_for_key(name, key));
        };
        g.last_id = given.unwrap_or(s.meta().last_id);
        g.entries_read = entries_read;
        s.put_group(&g)?;
        Ok(())
    })?;
    if done.is_none() {
        return Err(CmdError::msg(XGROUP_NO_KEY));
    }
    cx.notify(class::STREAM, "xgroup-setid", key);
    cx.out.simple(b"OK");
    Ok(())
}

fn xgroup_destroy(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let (key, name) = (&args[2], &args[3]);
    let removed = write(cx, key, false, |s| Ok(s.remove_group(name)?))?;
    let Some(removed) = removed else {
        return Err(CmdError::msg(XGROUP_NO_KEY));
    };
    if removed {
        cx.notify(class::STREAM, "xgroup-destroy", key);
        // Clients blocked in XREADGROUP on it learn that it is gone.
        cx.signal_ready(key);
    }
    cx.out.integer(i64::from(removed));
    Ok(())
}

fn xgroup_createconsumer(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let (key, name, consumer) = (&args[2], &args[3], &args[4]);
    let now_ms = now(cx);
    let created = write(cx, key, false, |s| {
        if s.group(name)?.is_none() {
            return Err(no_group_for_key(name, key));
        }
        if s.consumer(name, consumer)?.is_some() {
            return Ok(false);
        }
        s.put_consumer(
            name,
            &StreamConsumer {
                name: consumer.to_vec(),
                seen_ms: now_ms,
                pending: 0,
            },
        )?;
        Ok(true)
    })?;
    let Some(created) = created else {
        return Err(CmdError::msg(XGROUP_NO_KEY));
    };
    if created {
        cx.notify(class::STREAM, "xgroup-createconsumer", key);
    }
    cx.out.integer(i64::from(created));
    Ok(())
}

fn xgroup_delconsumer(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let (key, name, consumer) = (&args[2], &args[3], &args[4]);
    let removed = write(cx, key, false, |s| {
        if s.group(name)?.is_none() {
            return Err(no_group_for_key(name, key));
        }
        Ok(s.remove_consumer(name, consumer)?)
    })?;
    let Some(removed) = removed else {
        return Err(CmdError::msg(XGROUP_NO_KEY));
    };
    if removed.is_some() {
        cx.notify(class::STREAM, "xgroup-delconsumer", key);
    }
    cx.out.integer(removed.unwrap_or(0) as i64);
    Ok(())
}

// ---------------------------------------------------------------- XACK / XPENDING

fn xack(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let (key, group) = (&args[1], &args[2]);
    if read(cx, key, |s| Ok(s.group(group)?.is_some()))? != Some(true) {
        cx.out.integer(0);
        return Ok(());
    }
    let ids = args[3..]
        .iter()
        .map(|a| parse_strict_id(a))
        .collect::<Result<Vec<_>, _>>()?;
    let acked = write(cx, key, false, |s| {
        let mut n = 0;
        for id in &ids {
            n += u64::from(s.remove_pending(group, *id)?);
        }
        Ok(n)
    })?
    .unwrap_or(0);
    cx.out.integer(acked as i64);
    Ok(())
}

fn xpending(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let n = args.len();
    if n != 3 && !(6..=9).contains(&n) {
        return Err(CmdError::syntax());
    }
    let (key, group) = (&args[1], &args[2]);
    let mut extended = None;
    if n >= 6 {
        let mut at = 3;
        let mut min_idle = 0i64;
        if parse::is(&args[3], "idle") {
            min_idle = parse::int(&args[4])?;
            if n < 8 {
                return Err(CmdError::syntax());
            }
            at += 2;
        }
        let count = parse::int(&args[at + 2])?.max(0) as u64;
        let start = parse_interval(&args[at], 0, true)?;
        let end = parse_interval(&args[at + 1], u64::MAX, false)?;
        let consumer = args.get(at + 3).map(|c| c.to_vec());
        extended = Some((min_idle, count, start, end, consumer));
    }
    let now_ms = now(cx);
    let found = read(cx, key, |s| {
        let Some(g) = s.group(group)? else {
            return Ok(None);
        };
        match &extended {
            None => {
                let all = s.pending_range(group, None, StreamId::MIN, StreamId::MAX, 0)?;
                let consumers: Vec<(Vec<u8>, u64)> = s
                    .consumers(group)?
                    .into_iter()
                    .filter(|c| c.pending > 0)
                    .map(|c| (c.name, c.pending))
                    .collect();
                let edges = all.first().zip(all.last()).map(|(a, b)| (a.id, b.id));
                Ok(Some(Err((g.pending, edges, consumers))))
            }
            Some((min_idle, count, start, end, consumer)) => {
                if let Some(c) = consumer {
                    if s.consumer(group, c)?.is_none() {
                        return Ok(Some(Ok(Vec::new())));
                    }
                }
                if *count == 0 {
                    return Ok(Some(Ok(Vec::new())));
                }
                let limit = if *min_idle > 0 { 0 } else { *count };
                let mut list = s.pending_range(group, consumer.as_deref(), *start, *end, limit)?;
                list.retain(|p| (now_ms as i64 - p.delivery_ms as i64) >= *min_idle);
                list.truncate(*count as usize);
                Ok(Some(Ok(list)))
            }
        }
    })?
    .flatten();
    let Some(found) = found else {
        return Err(nogroup(format!(
            "No such key '{}' or consumer group '{}'",
            lossy(key),
            lossy(group)
        )));
    };
    match found {
        Err((total, edges, consumers)) => {
            cx.out.array_len(4);
            cx.out.integer(total as i64);
            match edges {
                None => {
                    cx.out.null();
                    cx.out.null();
                    cx.out.null_array();
                }
                Some((first, last)) => {
                    reply_id(cx, first);
                    reply_id(cx, last);
                    cx.out.array_len(consumers.len());
                    for (name, n) in &consumers {
                        cx.out.array_len(2);
                        cx.out.bulk(name);
                        cx.out.bulk(n.to_string().as_bytes());
                    }
                }
            }
        }
        Ok(list) => {
            cx.out.array_len(list.len());
            for p in &list {
                cx.out.array_len(4);
                reply_id(cx, p.id);
                cx.out.bulk(&p.consumer);
                cx.out
                    .integer((now_ms as i64 - p.delivery_ms as i64).max(0));
                cx.out.integer(p.deliveries as i64);
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- XCLAIM

/// What a claim replies per entry.
enum Claimed {
    Id(StreamId),
    Entry(StreamEntry),
}

fn reply_claimed(cx: &mut Cx<'_>, claimed: &[Claimed]) {
    cx.out.array_len(claimed.len());
    for c in claimed {
        match c {
            Claimed::Id(id) => reply_id(cx, *id),
            Claimed::Entry(e) => reply_entry(cx, e),
        }
    }
}

/// Makes `consumer` of `group` exist, seen now; whether it was created.
fn touch_consumer(
    s: &mut Stream,
    group: &[u8],
    consumer: &[u8],
    now_ms: u64,
) -> Result<bool, CmdError> {
    let (c, created) = match s.consumer(group, consumer)? {
        Some(mut c) => {
            c.seen_ms = now_ms;
            (c, false)
        }
        None => (
            StreamConsumer {
                name: consumer.to_vec(),
                seen_ms: now_ms,
                pending: 0,
            },
            true,
        ),
    };
    s.put_consumer(group, &c)?;
    Ok(created)
}

fn xclaim(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let (key, group, consumer) = (&args[1], &args[2], &args[3]);
    let exists = read(cx, key, |s| Ok(s.group(group)?.is_some()))?;
    if exists != Some(true) {
        return Err(nogroup(format!(
            "No such key '{}' or consumer group '{}'",
            lossy(key),
            lossy(group)
        )));
    }
    let min_idle = parse::int(&args[4])
        .map_err(|_| CmdError::msg("ERR Invalid min-idle-time argument for XCLAIM"))?
        .max(0) as u64;
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match parse_strict_id(&args[j]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now_ms = now(cx);
    let (mut force, mut justid) = (false, false);
    let mut delivery: Option<i64> = None;
    let mut retry: Option<i64> = None;
    let mut last_id = StreamId::MIN;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = &args[j];
        let int_opt = |a: &[u8], what: &str| {
            parse::int(a).map_err(|_| {
                CmdError::owned(format!("ERR Invalid {what} option argument for XCLAIM"))
            })
        };
        if parse::is(opt, "force") {
            force = true;
        } else if parse::is(opt, "justid") {
            justid = true;
        } else if parse::is(opt, "idle") && more > 0 {
            j += 1;
            delivery = Some(now_ms as i64 - int_opt(&args[j], "IDLE")?);
        } else if parse::is(opt, "time") && more > 0 {
            j += 1;
            delivery = Some(int_opt(&args[j], "TIME")?);
        } else if parse::is(opt, "retrycount") && more > 0 {
            j += 1;
            retry = Some(int_opt(&args[j], "RETRYCOUNT")?);
        } else if parse::is(opt, "lastid") && more > 0 {
            j += 1;
            last_id = parse_strict_id(&args[j])?;
        } else {
            return Err(CmdError::owned(format!(
                "ERR Unrecognized XCLAIM option '{}'",
                lossy(opt)
            )));
        }
        j += 1;
    }
    let delivery_ms = match delivery {
        Some(t) if t >= 0 && t <= now_ms as i64 => t as u64,
        _ => now_ms,
    };
    let claimed = write(cx, key, false, |s| {
        let Some(mut g) = s.group(group)? else {
            return Err(nogroup(format!(
                "No such key '{}' or consumer group '{}'",
                lossy(key),
                lossy(group)
            )));
        };
        if last_id > g.last_id {
            g.last_id = last_id;
            s.put_group(&g)?;
        }
        let mut out = Vec::new();
        let mut consumer_made = false;
        let mut created = false;
        for &id in &ids {
            let nack = s.pending(group, id)?;
            let Some(fields) = s.entry(id)? else {
                if nack.is_some() {
                    s.remove_pending(group, id)?;
                }
                continue;
            };
            let mut p = match nack {
                Some(p) => {
                    if min_idle > 0 && now_ms.saturating_sub(p.delivery_ms) < min_idle {
                        continue;
                    }
                    p
                }
                None if force => Pending {
                    id,
                    consumer: Vec::new(),
                    delivery_ms: 0,
                    deliveries: 0,
                },
                None => continue,
            };
            if !consumer_made {
                created = touch_consumer(s, group, consumer, now_ms)?;
                consumer_made = true;
            }
            p.consumer = consumer.to_vec();
            p.delivery_ms = delivery_ms;
            if let Some(r) = retry.filter(|r| *r >= 0) {
                p.deliveries = r as u64;
            } else if !justid {
                p.deliveries += 1;
            }
            s.put_pending(group, &p)?;
            out.push(if justid {
                Claimed::Id(id)
            } else {
                Claimed::Entry((id, fields))
            });
        }
        Ok((out, created))
    })?
    .unwrap_or_default();
    if claimed.1 {
        cx.notify(class::STREAM, "xgroup-createconsumer", key);
    }
    reply_claimed(cx, &claimed.0);
    Ok(())
}

fn xautoclaim(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let (key, group, consumer) = (&args[1], &args[2], &args[3]);
    let min_idle = parse::int(&args[4])
        .map_err(|_| CmdError::msg("ERR Invalid min-idle-time argument for XAUTOCLAIM"))?
        .max(0) as u64;
    let start = parse_interval(&args[5], 0, true)?;
    let mut count: u64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if parse::is(&args[j], "count") && more > 0 {
            let max = (i64::MAX / 16) as u64;
            count = match parse::int(&args[j + 1]) {
                Ok(n) if n >= 1 && (n as u64) <= max => n as u64,
                _ => return Err(CmdError::msg("ERR COUNT must be > 0")),
            };
            j += 1;
        } else if parse::is(&args[j], "justid") {
            justid = true;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    let exists = read(cx, key, |s| Ok(s.group(group)?.is_some()))?;
    if exists != Some(true) {
        return Err(nogroup(format!(
            "No such key '{}' or consumer group '{}'",
            lossy(key),
            lossy(group)
        )));
    }
    let now_ms = now(cx);
    let result = write(cx, key, false, |s| {
        let mut attempts = count.saturating_mul(10);
        let mut left = count;
        let mut claimed = Vec::new();
        let mut deleted = Vec::new();
        let mut consumer_made = false;
        let mut created = false;
        let mut cursor = start;
        let mut next = StreamId::MIN;
        loop {
            let batch = s.pending_range(group, None, cursor, StreamId::MAX, 64)?;
            if batch.is_empty() {
                break;
            }
            let mut stopped = false;
            for mut p in batch {
                if attempts == 0 || left == 0 {
                    next = p.id;
                    stopped = true;
                    break;
                }
                attempts -= 1;
                cursor = p.id.next().unwrap_or(StreamId::MAX);
                let Some(fields) = s.entry(p.id)? else {
                    s.remove_pending(group, p.id)?;
                    deleted.push(p.id);
                    left -= 1;
                    continue;
                };
                if min_idle > 0 && now_ms.saturating_sub(p.delivery_ms) < min_idle {
                    continue;
                }
                if !consumer_made {
                    created = touch_consumer(s, group, consumer, now_ms)?;
                    consumer_made = true;
                }
                p.consumer = consumer.to_vec();
                p.delivery_ms = now_ms;
                if !justid {
                    p.deliveries += 1;
                }
                s.put_pending(group, &p)?;
                claimed.push(if justid {
                    Claimed::Id(p.id)
                } else {
                    Claimed::Entry((p.id, fields))
                });
                left -= 1;
            }
            if stopped || cursor == StreamId::MAX {
                break;
            }
        }
        Ok((next, claimed, deleted, created))
    })?;
    let (next, claimed, deleted, created) = result.unwrap_or_default();
    if created {
        cx.notify(class::STREAM, "xgroup-createconsumer", key);
    }
    cx.out.array_len(3);
    reply_id(cx, next);
    reply_claimed(cx, &claimed);
    cx.out.array_len(deleted.len());
    for id in deleted {
        reply_id(cx, id);
    }
    Ok(())
}

// ---------------------------------------------------------------- XINFO

fn xinfo(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let parent = crate::command::lookup(b"xinfo").expect("XINFO is in the table");
    dispatch_sub(cx, parent, args)
}

fn xinfo_help(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    crate::command::reply_help(
        cx,
        &[
            "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
            "HELP",
            "    Print this help.",
        ],
    )
}

/// The stream at `key` for XINFO: `ERR no such key` when missing.
fn info_read<T>(
    cx: &mut Cx<'_>,
    key: &[u8],
    f: impl FnOnce(&Stream) -> Result<T, CmdError>,
) -> Result<T, CmdError> {
    let mut failure = None;
    let found = read(cx, key, |s| {
        f(s).map_err(|e| {
            failure = Some(e);
            store::Error::BadValue
        })
    });
    if let Some(e) = failure {
        return Err(e);
    }
    found?.ok_or(CmdError::msg(crate::error::NO_SUCH_KEY))
}

fn xinfo_consumers(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let (key, group) = (&args[2], &args[3]);
    let consumers = info_read(cx, key, |s| {
        if s.group(group)?.is_none() {
            return Err(no_group_for_key(group, key));
        }
        Ok(s.consumers(group)?)
    })?;
    let now_ms = now(cx);
    cx.out.array_len(consumers.len());
    for c in &consumers {
        cx.out.map_len(3);
        cx.out.bulk(b"name");
        cx.out.bulk(&c.name);
        cx.out.bulk(b"pending");
        cx.out.integer(c.pending as i64);
        cx.out.bulk(b"idle");
        cx.out.integer((now_ms as i64 - c.seen_ms as i64).max(0));
    }
    Ok(())
}

fn xinfo_groups(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let groups = info_read(cx, &args[2], |s| {
        let mut out = Vec::new();
        for g in s.groups()? {
            let consumers = s.consumers(&g.name)?.len();
            let lag = group_lag(s, &g)?;
            out.push((g, consumers, lag));
        }
        Ok(out)
    })?;
    cx.out.array_len(groups.len());
    for (g, consumers, lag) in &groups {
        cx.out.map_len(6);
        cx.out.bulk(b"name");
        cx.out.bulk(&g.name);
        cx.out.bulk(b"consumers");
        cx.out.integer(*consumers as i64);
        cx.out.bulk(b"pending");
        cx.out.integer(g.pending as i64);
        cx.out.bulk(b"last-delivered-id");
        reply_id(cx, g.last_id);
        cx.out.bulk(b"entries-read");
        reply_opt(cx, g.entries_read);
        cx.out.bulk(b"lag");
        reply_opt(cx, *lag);
    }
    Ok(())
}

fn reply_opt(cx: &mut Cx<'_>, v: Option<impl TryInto<i64>>) {
    match v.and_then(|n| n.try_into().ok()) {
        Some(n) => cx.out.integer(n),
        None => cx.out.null(),
    }
}

/// One group as XINFO STREAM FULL shows it.
struct FullGroup {
    group: StreamGroup,
    lag: Option<i64>,
    pending: Vec<Pending>,
    consumers: Vec<(StreamConsumer, Vec<Pending>)>,
}

fn xinfo_stream(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let opts = &args[3..];
    let mut full = false;
    let mut count: u64 = 10;
    if !opts.is_empty() {
        if (opts.len() != 1 && opts.len() != 3) || !parse::is(&opts[0], "full") {
            return Err(subcommand_syntax(args));
        }
        full = true;
        if opts.len() == 3 {
            if !parse::is(&opts[1], "count") {
                return Err(subcommand_syntax(args));
            }
            let n = parse::int(&opts[2])?;
            count = if n < 0 { 10 } else { n as u64 };
        }
    }
    let info = info_read(cx, &args[2], |s| {
        let meta = s.meta();
        let nodes = s.node_count()?;
        let first = s.first_entry()?;
        let last = s.last_entry()?;
        let groups = s.groups()?;
        let mut full_groups = Vec::new();
        let mut entries = Vec::new();
        if full {
            entries = s.range(StreamId::MIN, StreamId::MAX, count, false)?;
            for g in &groups {
                let pending =
                    s.pending_range(&g.name, None, StreamId::MIN, StreamId::MAX, count)?;
                let mut consumers = Vec::new();
                for c in s.consumers(&g.name)? {
                    let own = s.pending_range(
                        &g.name,
                        Some(&c.name),
                        StreamId::MIN,
                        StreamId::MAX,
                        count,
                    )?;
                    consumers.push((c, own));
                }
                full_groups.push(FullGroup {
                    group: g.clone(),
                    lag: group_lag(s, g)?,
                    pending,
                    consumers,
                });
            }
        }
        Ok((meta, nodes, first, last, groups.len(), entries, full_groups))
    })?;
    let (meta, nodes, first, last, ngroups, entries, full_groups) = info;
    cx.out.map_len(if full { 9 } else { 10 });
    cx.out.bulk(b"length");
    cx.out.integer(meta.length as i64);
    cx.out.bulk(b"radix-tree-keys");
    cx.out.integer(nodes as i64);
    cx.out.bulk(b"radix-tree-nodes");
    cx.out.integer((nodes + 1) as i64);
    cx.out.bulk(b"last-generated-id");
    reply_id(cx, meta.last_id);
    cx.out.bulk(b"max-deleted-entry-id");
    reply_id(cx, meta.max_deleted);
    cx.out.bulk(b"entries-added");
    cx.out.integer(meta.entries_added as i64);
    cx.out.bulk(b"recorded-first-entry-id");
    reply_id(cx, first.as_ref().map_or(StreamId::MIN, |e| e.0));
    if !full {
        cx.out.bulk(b"groups");
        cx.out.integer(ngroups as i64);
        cx.out.bulk(b"first-entry");
        match &first {
            Some(e) => reply_entry(cx, e),
            None => cx.out.null(),
        }
        cx.out.bulk(b"last-entry");
        match &last {
            Some(e) => reply_entry(cx, e),
            None => cx.out.null(),
        }
        return Ok(());
    }
    cx.out.bulk(b"entries");
    reply_entries(cx, &entries);
    cx.out.bulk(b"groups");
    cx.out.array_len(full_groups.len());
    for fg in &full_groups {
        cx.out.map_len(7);
        cx.out.bulk(b"name");
        cx.out.bulk(&fg.group.name);
        cx.out.bulk(b"last-delivered-id");
        reply_id(cx, fg.group.last_id);
        cx.out.bulk(b"entries-read");
        reply_opt(cx, fg.group.entries_read);
        cx.out.bulk(b"lag");
        reply_opt(cx, fg.lag);
        cx.out.bulk(b"pel-count");
        cx.out.integer(fg.group.pending as i64);
        cx.out.bulk(b"pending");
        cx.out.array_len(fg.pending.len());
        for p in &fg.pending {
            cx.out.array_len(4);
            reply_id(cx, p.id);
            cx.out.bulk(&p.consumer);
            cx.out.integer(p.delivery_ms as i64);
            cx.out.integer(p.deliveries as i64);
        }
        cx.out.bulk(b"consumers");
        cx.out.array_len(fg.consumers.len());
        for (c, own) in &fg.consumers {
            cx.out.map_len(4);
            cx.out.bulk(b"name");
            cx.out.bulk(&c.name);
            cx.out.bulk(b"seen-time");
            cx.out.integer(c.seen_ms as i64);
            cx.out.bulk(b"pel-count");
            cx.out.integer(c.pending as i64);
            cx.out.bulk(b"pending");
            cx.out.array_len(own.len());
            for p in own {
                cx.out.array_len(3);
                reply_id(cx, p.id);
                cx.out.integer(p.delivery_ms as i64);
                cx.out.integer(p.deliveries as i64);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_as_redis_does() {
        let id = |ms, seq| StreamId { ms, seq };
        assert_eq!(parse_id(b"5", 0).unwrap(), id(5, 0));
        assert_eq!(parse_id(b"5", u64::MAX).unwrap(), id(5, u64::MAX));
        assert_eq!(parse_id(b"5-3", 0).unwrap(), id(5, 3));
        assert_eq!(parse_id(b"-", 0).unwrap(), StreamId::MIN);
        assert!(parse_strict_id(b"+").is_err());
        assert!(parse_id(b"5-", 0).is_err());
        assert!(parse_id(b"-5", 0).is_err());
        assert!(parse_id(b"18446744073709551616", 0).is_err());
        assert_eq!(
            parse_id_full(b"5-*", 0, true, true).unwrap(),
            (id(5, 0), false)
        );
        assert_eq!(parse_interval(b"(5-3", 0, true).unwrap(), id(5, 4));
        assert_eq!(parse_interval(b"(5-0", 0, false).unwrap(), id(4, u64::MAX));
        assert!(parse_interval(b"(0-0", 0, false).is_err());
    }

    #[test]
    fn next_id_follows_the_last_one() {
        let id = |ms, seq| StreamId { ms, seq };
        assert_eq!(next_id(id(5, 3), None, 4), Some(id(5, 4)));
        assert_eq!(next_id(id(5, 3), None, 9), Some(id(9, 0)));
        assert_eq!(
            next_id(id(5, 3), Some((id(5, 0), false)), 0),
            Some(id(5, 4))
        );
        assert_eq!(
            next_id(id(5, 3), Some((id(6, 0), false)), 0),
            Some(id(6, 0))
        );
        assert_eq!(next_id(id(5, 3), Some((id(5, 3), true)), 0), None);
        assert_eq!(next_id(id(5, u64::MAX), Some((id(5, 0), false)), 0), None);
    }
}
