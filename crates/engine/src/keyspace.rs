//! Commands on keys of any type (Redis's `generic` group, `db.c`,
//! `expire.c`, `object.c`): DEL, EXISTS, TYPE, expiry, RENAME, COPY, MOVE,
//! SCAN/KEYS, OBJECT, and the db-wide DBSIZE, FLUSHDB, FLUSHALL, SWAPDB.

use store::{ExpireCondition, Ttl, ValueType};

use crate::command::{dispatch_sub, flags::*, Arg, CmdResult, Command};
use crate::engine::Cx;
use crate::error::{CmdError, BAD_DB, SYNTAX};
use crate::notify::class;
use crate::parse;
use crate::scan;

/// EXPIRE with NX and another condition.
const NX_AND_OTHERS: &str = "ERR NX and XX, GT or LT options at the same time are not compatible";
/// EXPIRE with GT and LT.
const GT_AND_LT: &str = "ERR GT and LT options at the same time are not compatible";
/// SWAPDB's first index is not an integer.
const BAD_FIRST_DB: &str = "ERR invalid first DB index";
/// SWAPDB's second index is not an integer.
const BAD_SECOND_DB: &str = "ERR invalid second DB index";
/// OBJECT FREQ without an LFU policy.
const NO_LFU: &str = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
/// OBJECT IDLETIME under an LFU policy (Redis 7.0's text).
const NO_LRU: &str = "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
/// Redis's refcount of a shared object (the integers 0..9999).
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
/// Keys one SCAN step of KEYS examines.
const KEYS_PAGE: usize = 1024;

crate::command::group_cmd!("generic", since = "1.0.0");

/// A db-wide command (Redis files these under `server`).
const fn server_cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    summary: &'static str,
    handler: crate::command::Handler,
) -> Command {
    Command {
        group: "server",
        ..cmd(name, arity, flags, (0, 0, 0), summary, handler)
    }
}

const fn since(version: &'static str, c: Command) -> Command {
    Command {
        since: version,
        ..c
    }
}

const OBJECT_SUBCOMMANDS: &[Command] = &[
    since(
        "2.2.3",
        cmd(
            "object|encoding",
            3,
            READONLY,
            (2, 2, 1),
            "Inspect the internal encoding of a Redis object",
            object_encoding,
        ),
    ),
    since(
        "4.0.0",
        cmd(
            "object|freq",
            3,
            READONLY,
            (2, 2, 1),
            "Get the logarithmic access frequency counter of a Redis object",
            object_freq,
        ),
    ),
    since(
        "2.2.3",
        cmd(
            "object|idletime",
            3,
            READONLY,
            (2, 2, 1),
            "Get the time since a Redis object was last accessed",
            object_idletime,
        ),
    ),
    since(
        "2.2.3",
        cmd(
            "object|refcount",
            3,
            READONLY,
            (2, 2, 1),
            "Get the number of references to the value of the key",
            object_refcount,
        ),
    ),
    since(
        "6.2.0",
        cmd(
            "object|help",
            2,
            LOADING | STALE,
            (0, 0, 0),
            "Show helpful text about the different subcommands",
            object_help,
        ),
    ),
];

/// The key-space commands.
pub(crate) const COMMANDS: &[Command] = &[
    cmd(
        "del",
        -2,
        WRITE | ATOMIC,
        (1, -1, 1),
        "Delete a key",
        del,
    ),
    since(
        "4.0.0",
        cmd(
            "unlink",
            -2,
            WRITE | FAST | ATOMIC,
            (1, -1, 1),
            "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.",
            unlink,
        ),
    ),
    cmd(
        "exists",
        -2,
        READONLY | FAST,
        (1, -1, 1),
        "Determine if a key exists",
        exists,
    ),
    since(
        "3.2.1",
        cmd(
            "touch",
            -2,
            READONLY | FAST,
            (1, -1, 1),
            "Alters the last access time of a key(s). Returns the number of existing keys specified.",
            touch,
        ),
    ),
    cmd(
        "type",
        2,
        READONLY | FAST,
        (1, 1, 1),
        "Determine the type stored at key",
        type_,
    ),
    cmd(
        "keys",
        2,
        READONLY,
        (0, 0, 0),
        "Find all keys matching the given pattern",
        keys,
    ),
    since(
        "2.8.0",
        cmd(
            "scan",
            -2,
            READONLY,
            (0, 0, 0),
            "Incrementally iterate the keys space",
            scan,
        ),
    ),
    cmd(
        "randomkey",
        1,
        READONLY,
        (0, 0, 0),
        "Return a random key from the keyspace",
        randomkey,
    ),
    cmd(
        "rename",
        3,
        WRITE,
        (1, 2, 1),
        "Rename a key",
        rename,
    ),
    cmd(
        "renamenx",
        3,
        WRITE | FAST,
        (1, 2, 1),
        "Rename a key, only if the new key does not exist",
        renamenx,
    ),
    since(
        "6.2.0",
        cmd(
            "copy",
            -3,
            WRITE | DENYOOM,
            (1, 2, 1),
            "Copy a key",
            copy,
        ),
    ),
    cmd(
        "move",
        3,
        WRITE | FAST,
        (1, 1, 1),
        "Move a key to another database",
        move_,
    ),
    cmd(
        "expire",
        -3,
        WRITE | FAST,
        (1, 1, 1),
        "Set a key's time to live in seconds",
        expire,
    ),
    since(
        "2.6.0",
        cmd(
            "pexpire",
            -3,
            WRITE | FAST,
            (1, 1, 1),
            "Set a key's time to live in milliseconds",
            pexpire,
        ),
    ),
    since(
        "1.2.0",
        cmd(
            "expireat",
            -3,
            WRITE | FAST,
            (1, 1, 1),
            "Set the expiration for a key as a UNIX timestamp",
            expireat,
        ),
    ),
    since(
        "2.6.0",
        cmd(
            "pexpireat",
            -3,
            WRITE | FAST,
            (1, 1, 1),
            "Set the expiration for a key as a UNIX timestamp specified in milliseconds",
            pexpireat,
        ),
    ),
    since(
        "7.0.0",
        cmd(
            "expiretime",
            2,
            READONLY | FAST,
            (1, 1, 1),
            "Get the expiration Unix timestamp for a key",
            expiretime,
        ),
    ),
    since(
        "7.0.0",
        cmd(
            "pexpiretime",
            2,
            READONLY | FAST,
            (1, 1, 1),
            "Get the expiration Unix timestamp for a key in milliseconds",
            pexpiretime,
        ),
    ),
    cmd(
        "ttl",
        2,
        READONLY | FAST,
        (1, 1, 1),
        "Get the time to live for a key in seconds",
        ttl,
    ),
    since(
        "2.6.0",
        cmd(
            "pttl",
            2,
            READONLY | FAST,
            (1, 1, 1),
            "Get the time to live for a key in milliseconds",
            pttl,
        ),
    ),
    since(
        "2.2.0",
        cmd(
            "persist",
            2,
            WRITE | FAST,
            (1, 1, 1),
            "Remove the expiration from a key",
            persist,
        ),
    ),
    since(
        "2.2.3",
        Command {
            subcommands: OBJECT_SUBCOMMANDS,
            ..cmd(
                "object",
                -2,
                0,
                (0, 0, 0),
                "A container for object introspection commands",
                object,
            )
        },
    ),
    server_cmd(
        "dbsize",
        1,
        READONLY | FAST,
        "Return the number of keys in the selected database",
        dbsize,
    ),
    server_cmd(
        "flushdb",
        -1,
        WRITE,
        "Remove all keys from the current database",
        flushdb,
    ),
    server_cmd(
        "flushall",
        -1,
        WRITE,
        "Remove all keys from all databases",
        flushall,
    ),
    since(
        "4.0.0",
        server_cmd(
            "swapdb",
            3,
            WRITE | FAST,
            "Swaps two Redis databases",
            swapdb,
        ),
    ),
];

// ---------- existence and type ----------

/// DEL: frees large values lazily only under `lazyfree-lazy-user-del`.
fn del(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let lazy = cx.engine.config.lazyfree_lazy_user_del;
    delete_keys(cx, args, lazy)
}

/// UNLINK: as DEL, but a value past Redis's free-effort threshold is only
/// detached; the worker frees it after the reply, in bounded steps.
fn unlink(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    delete_keys(cx, args, true)
}

fn delete_keys(cx: &mut Cx<'_>, args: &[Arg<'_>], lazy: bool) -> CmdResult {
    let db = cx.db();
    let mut n = 0;
    let was = cx.h().set_lazy_free(lazy);
    let res: CmdResult = (|| {
        for key in &args[1..] {
            if cx.h().delete(db, key)? {
                cx.notify(class::GENERIC, "del", key);
                n += 1;
            }
        }
        Ok(())
    })();
    cx.h().set_lazy_free(was);
    res?;
    cx.out.integer(n);
    Ok(())
}

/// EXISTS: counts the keys that exist, leaving their LRU clocks.
fn exists(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    count_existing(cx, args, false)
}

/// EXISTS and TOUCH: `touch` moves each key's LRU clock.
fn count_existing(cx: &mut Cx<'_>, args: &[Arg<'_>], touch: bool) -> CmdResult {
    let db = cx.db();
    let mut n = 0;
    for key in &args[1..] {
        let found = if touch {
            cx.h().exists(db, key)?
        } else {
            cx.h().exists_untouched(db, key)?
        };
        if found {
            n += 1;
        } else {
            cx.miss(key);
        }
    }
    cx.out.integer(n);
    Ok(())
}

/// TOUCH: like EXISTS, and each lookup moves the key's LRU clock.
fn touch(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    count_existing(cx, args, true)
}

fn type_(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let name = match cx.h().key_type(db, &args[1])? {
        Some(t) => t.name(),
        None => {
            cx.miss(&args[1]);
            "none"
        }
    };
    cx.out.simple(name.as_bytes());
    Ok(())
}

// ---------- iteration ----------

fn scan(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let cursor = scan::cursor(&args[1])?;
    let opts = scan::options(&args[2..], true)?;
    let db = cx.db();
    let filter = opts.vtype.flatten();
    let mut page = cx.h().scan(db, cursor, opts.pattern, opts.count, filter)?;
    if opts.vtype == Some(None) {
        page.keys.clear();
    }
    scan::reply_header(cx, page.cursor, page.keys.len());
    for k in &page.keys {
        cx.out.bulk(k);
    }
    Ok(())
}

fn keys(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let mut found = Vec::new();
    let mut cursor = 0;
    loop {
        let page = cx.h().scan(db, cursor, Some(&args[1]), KEYS_PAGE, None)?;
        found.extend(page.keys);
        cursor = page.cursor;
        if cursor == 0 {
            break;
        }
    }
    cx.out.array_len(found.len());
    for k in &found {
        cx.out.bulk(k);
    }
    Ok(())
}

fn randomkey(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    match cx.h().random_key(db)? {
        Some(k) => cx.out.bulk(&k),
        None => cx.out.null(),
    }
    Ok(())
}

// ---------- rename, copy, move ----------

fn rename(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    cx.h().rename(db, &args[1], &args[2], false)?;
    cx.signal_ready(&args[2]);
    notify_rename(cx, &args[1], &args[2]);
    cx.out.simple(b"OK");
    Ok(())
}

fn renamenx(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let done = cx.h().rename(db, &args[1], &args[2], true)?;
    if done {
        cx.signal_ready(&args[2]);
        notify_rename(cx, &args[1], &args[2]);
    }
    cx.out.integer(done as i64);
    Ok(())
}

/// RENAME's events; renaming a key to itself changes nothing and says so.
fn notify_rename(cx: &mut Cx<'_>, src: &[u8], dst: &[u8]) {
    if src != dst {
        cx.notify(class::GENERIC, "rename_from", src);
        cx.notify(class::GENERIC, "rename_to", dst);
    }
}

/// A db index argument of COPY and MOVE (Redis's `getIntFromObject`, then
/// the range check).
fn db_index(arg: &[u8]) -> Result<u8, CmdError> {
    let n = parse::int(arg)?;
    if i32::try_from(n).is_err() {
        return Err(CmdError::not_integer());
    }
    if !(0..store::NUM_DBS as i64).contains(&n) {
        return Err(CmdError::msg(BAD_DB));
    }
    Ok(n as u8)
}

fn copy(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let src_db = cx.db();
    let mut dst_db = src_db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if parse::is(&args[i], "replace") {
            replace = true;
        } else if parse::is(&args[i], "db") && i + 1 < args.len() {
            dst_db = db_index(&args[i + 1])?;
            i += 1;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        i += 1;
    }
    let done = cx.h().copy(src_db, &args[1], dst_db, &args[2], replace)?;
    if done {
        cx.signal_ready_in(dst_db, &args[2]);
        cx.engine
            .notify_in(dst_db, class::GENERIC, "copy_to", &args[2]);
    } else if cx.wants_misses() && !cx.h().exists(src_db, &args[1])? {
        // Redis reads the source first ("keymiss"); the store answers
        // false for a missing source and for a destination in the way.
        cx.miss(&args[1]);
    }
    cx.out.integer(done as i64);
    Ok(())
}

fn move_(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let dst = db_index(&args[2])?;
    let done = cx.h().move_key(db, &args[1], dst)?;
    if done {
        cx.signal_ready_in(dst, &args[1]);
        cx.notify(class::GENERIC, "move_from", &args[1]);
        cx.engine
            .notify_in(dst, class::GENERIC, "move_to", &args[1]);
    }
    cx.out.integer(done as i64);
    Ok(())
}

// ---------- expiry ----------

/// EXPIRE's NX / XX / GT / LT, with Redis 7.0's errors for bad combinations.
fn expire_condition(args: &[Arg<'_>]) -> Result<ExpireCondition, CmdError> {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in args {
        if parse::is(a, "nx") {
            nx = true;
        } else if parse::is(a, "xx") {
            xx = true;
        } else if parse::is(a, "gt") {
            gt = true;
        } else if parse::is(a, "lt") {
            lt = true;
        } else {
            return Err(CmdError::owned(format!(
                "ERR Unsupported option {}",
                crate::command::clip(a, 128)
            )));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CmdError::msg(NX_AND_OTHERS));
    }
    if gt && lt {
        return Err(CmdError::msg(GT_AND_LT));
    }
    Ok(match (nx, xx, gt, lt) {
        (true, ..) => ExpireCondition::IfNone,
        // GT already fails on a key without an expiry: XX adds nothing.
        (_, _, true, _) => ExpireCondition::IfGreater,
        (_, true, _, true) => ExpireCondition::IfSomeAndLess,
        (_, _, _, true) => ExpireCondition::IfLess,
        (_, true, ..) => ExpireCondition::IfSome,
        _ => ExpireCondition::Always,
    })
}

/// Redis's `expireGenericCommand`: options, then the number, then overflow
/// checks, then the key. `unit_ms` is 1000 for seconds; `relative` adds now.
fn expire_generic(
    cx: &mut Cx<'_>,
    args: &[Arg<'_>],
    name: &str,
    unit_ms: i64,
    relative: bool,
) -> CmdResult {
    let cond = expire_condition(&args[3..])?;
    let n = parse::int(&args[2])?;
    let bad = || CmdError::bad_expire(name);
    let ms = n.checked_mul(unit_ms).ok_or_else(bad)?;
    let base = if relative {
        cx.engine.now_ms() as i64
    } else {
        0
    };
    let at = ms.checked_add(base).ok_or_else(bad)?;
    let db = cx.db();
    let done = cx.h().expire_at(db, &args[1], at, cond)?;
    if done {
        // A time not in the future deleted the key.
        let event = if at <= cx.engine.now_ms() as i64 {
            "del"
        } else {
            "expire"
        };
        cx.notify(class::GENERIC, event, &args[1]);
    }
    cx.out.integer(done as i64);
    Ok(())
}

fn expire(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    expire_generic(cx, args, "expire", 1000, true)
}

fn pexpire(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    expire_generic(cx, args, "pexpire", 1, true)
}

fn expireat(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    expire_generic(cx, args, "expireat", 1000, false)
}

fn pexpireat(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    expire_generic(cx, args, "pexpireat", 1, false)
}

fn expiretime_generic(cx: &mut Cx<'_>, args: &[Arg<'_>], ms: bool) -> CmdResult {
    let db = cx.db();
    let mut scratch = Vec::new();
    let reply = match cx.h().peek(db, &args[1], 0, &mut scratch)? {
        None => {
            cx.miss(&args[1]);
            -2
        }
        Some(m) => match m.expire_at_ms {
            None => -1,
            Some(at) if ms => at as i64,
            Some(at) => (at / 1000) as i64,
        },
    };
    cx.out.integer(reply);
    Ok(())
}

fn expiretime(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    expiretime_generic(cx, args, false)
}

fn pexpiretime(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    expiretime_generic(cx, args, true)
}

fn ttl_generic(cx: &mut Cx<'_>, args: &[Arg<'_>], ms: bool) -> CmdResult {
    let db = cx.db();
    let reply = match cx.h().ttl(db, &args[1])? {
        Ttl::Missing => {
            cx.miss(&args[1]);
            -2
        }
        Ttl::Persistent => -1,
        // Redis rounds TTL to the nearest second.
        Ttl::Ms(left) if ms => left as i64,
        Ttl::Ms(left) => left.saturating_add(500) as i64 / 1000,
    };
    cx.out.integer(reply);
    Ok(())
}

fn ttl(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    ttl_generic(cx, args, false)
}

fn pttl(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    ttl_generic(cx, args, true)
}

fn persist(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let done = cx.h().persist(db, &args[1])?;
    if done {
        cx.notify(class::GENERIC, "persist", &args[1]);
    }
    cx.out.integer(done as i64);
    Ok(())
}

// ---------- OBJECT ----------

fn object(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let parent = crate::command::lookup(b"object").expect("OBJECT is in the table");
    dispatch_sub(cx, parent, args)
}

/// The key's metadata and (for strings of at most 20 bytes) its value,
/// without touching it; None after writing the null reply.
fn object_lookup(cx: &mut Cx<'_>, key: &[u8]) -> Result<Option<(store::Meta, Vec<u8>)>, CmdError> {
    let db = cx.db();
    let mut value = Vec::new();
    match cx.h().peek(db, key, 20, &mut value)? {
        Some(m) => Ok(Some((m, value))),
        None => {
            cx.out.null();
            Ok(None)
        }
    }
}

/// Whether `value` is a string Redis would store as an integer: a canonical
/// `long` of at most 20 characters.
fn is_int_string(value: &[u8]) -> Option<i64> {
    if value.len() > 20 {
        return None;
    }
    store::parse_i64(value)
}

/// OBJECT ENCODING's name for a key. Strings follow Redis exactly;
/// collections are named by their shape under Redis 7.0's default thresholds.
pub(crate) fn encoding_name(meta: &store::Meta, value: &[u8]) -> Result<&'static str, CmdError> {
    Ok(match meta.vtype {
        ValueType::String if is_int_string(value).is_some() => "int",
        ValueType::String if meta.len <= 44 => "embstr",
        ValueType::String => "raw",
        ValueType::Stream => "stream",
        other => store::collections::encoding_name(other, value)?,
    })
}

fn object_encoding(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if let Some((mut meta, mut value)) = object_lookup(cx, &args[2])? {
        if !matches!(meta.vtype, ValueType::String | ValueType::Stream) {
            // A collection is named by its shape, so it is read whole (the
            // lookup reads only a short string's bytes).
            let db = cx.db();
            let Some(m) = cx.h().peek(db, &args[2], u64::MAX, &mut value)? else {
                cx.out.null();
                return Ok(());
            };
            meta = m;
        }
        cx.out.bulk(encoding_name(&meta, &value)?.as_bytes());
    }
    Ok(())
}

/// Whether the store evicts by an LFU policy (then reads count frequency,
/// and Redis no longer answers idle times).
fn lfu_policy(cx: &Cx<'_>) -> Result<bool, CmdError> {
    Ok(cx.engine.store.eviction_policy()?.is_lfu())
}

fn object_freq(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if let Some((meta, _)) = object_lookup(cx, &args[2])? {
        if !lfu_policy(cx)? {
            return Err(CmdError::msg(NO_LFU));
        }
        let decay = cx.engine.store.lfu_decay_time()?;
        cx.out.integer(meta.freq(cx.engine.now_ms(), decay) as i64);
    }
    Ok(())
}

fn object_idletime(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if let Some((meta, _)) = object_lookup(cx, &args[2])? {
        if lfu_policy(cx)? {
            return Err(CmdError::msg(NO_LRU));
        }
        cx.out.integer(meta.idle_seconds(cx.engine.now_ms()) as i64);
    }
    Ok(())
}

/// OBJECT REFCOUNT: Redis's shared objects are the integers 0..9999, not
/// shared under `maxmemory` with an LRU or LFU policy (each value then
/// keeps its own access clock). shoal shares no value; it answers by the
/// settings in force when asked, where Redis decided when the value was
/// written.
fn object_refcount(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if let Some((meta, value)) = object_lookup(cx, &args[2])? {
        let store = &cx.engine.store;
        let private = store.maxmemory()? != 0 && store.eviction_policy()?.tracks_access();
        let shared = !private
            && meta.vtype == ValueType::String
            && is_int_string(&value).is_some_and(|n| (0..10_000).contains(&n));
        cx.out.integer(if shared { SHARED_REFCOUNT } else { 1 });
    }
    Ok(())
}

fn object_help(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let lines: &[&str] = &[
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Print this help.",
    ];
    crate::command::reply_help(cx, lines)
}

// ---------- whole databases ----------

fn dbsize(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let n = cx.h().dbsize(db)?;
    cx.out.integer(n as i64);
    Ok(())
}

/// FLUSHDB / FLUSHALL's optional ASYNC | SYNC: whether large values are
/// freed lazily (with no mode, as `lazyfree-lazy-user-flush` says).
fn flush_mode(cx: &Cx<'_>, args: &[Arg<'_>]) -> Result<bool, CmdError> {
    match args.len() {
        1 => Ok(cx.engine.config.lazyfree_lazy_user_flush),
        2 if parse::is(&args[1], "async") => Ok(true),
        2 if parse::is(&args[1], "sync") => Ok(false),
        _ => Err(CmdError::msg(SYNTAX)),
    }
}

/// Runs a flush with lazy frees on or off.
fn flush_with(cx: &mut Cx<'_>, lazy: bool, db: Option<u8>) -> CmdResult {
    let was = cx.h().set_lazy_free(lazy);
    let res = match db {
        Some(db) => cx.h().flushdb(db),
        None => cx.h().flushall(),
    };
    cx.h().set_lazy_free(was);
    Ok(res?)
}

fn flushdb(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let lazy = flush_mode(cx, args)?;
    let db = cx.db();
    flush_with(cx, lazy, Some(db))?;
    cx.engine.keys_reset(Some(db));
    cx.engine.tracking_flushed();
    cx.out.simple(b"OK");
    Ok(())
}

fn flushall(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let lazy = flush_mode(cx, args)?;
    flush_with(cx, lazy, None)?;
    cx.engine.keys_reset(None);
    cx.engine.tracking_flushed();
    cx.out.simple(b"OK");
    Ok(())
}

/// A SWAPDB index: an `int`, else `not_int`; then the range.
fn swap_index(arg: &[u8], not_int: &'static str) -> Result<i64, CmdError> {
    store::parse_i64(arg)
        .filter(|n| i32::try_from(*n).is_ok())
        .ok_or(CmdError::msg(not_int))
}

fn swapdb(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let a = swap_index(&args[1], BAD_FIRST_DB)?;
    let b = swap_index(&args[2], BAD_SECOND_DB)?;
    let range = 0..store::NUM_DBS as i64;
    if !range.contains(&a) || !range.contains(&b) {
        return Err(CmdError::msg(BAD_DB));
    }
    cx.h().swap_db(a as u8, b as u8)?;
    cx.engine.keys_reset(Some(a as u8));
    cx.engine.keys_reset(Some(b as u8));
    cx.out.simple(b"OK");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expire_options_combine_as_redis() {
        let a = |w: &[&'static str]| -> Vec<Arg<'static>> {
            w.iter().map(|s| Arg::Borrowed(s.as_bytes())).collect()
        };
        assert_eq!(expire_condition(&a(&[])).unwrap(), ExpireCondition::Always);
        assert_eq!(
            expire_condition(&a(&["xx", "gt"])).unwrap(),
            ExpireCondition::IfGreater
        );
        assert_eq!(
            expire_condition(&a(&["LT", "xx"])).unwrap(),
            ExpireCondition::IfSomeAndLess
        );
        assert_eq!(
            expire_condition(&a(&["nx", "gt"])).unwrap_err().text(),
            NX_AND_OTHERS
        );
        assert_eq!(
            expire_condition(&a(&["gt", "lt"])).unwrap_err().text(),
            GT_AND_LT
        );
        assert_eq!(
            expire_condition(&a(&["foo"])).unwrap_err().text(),
            "ERR Unsupported option foo"
        );
    }
}
