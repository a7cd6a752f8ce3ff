//! Strings: GET, SET and the rest of Redis's string commands (`t_string.c`).

use store::{Expiry, SetCondition, SetOptions};

use crate::command::{flags::*, Arg, CmdResult, Command};
use crate::engine::Cx;
use crate::error::CmdError;
use crate::parse;

/// A command of the `string` group.
const fn cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: (i32, i32, i32),
    summary: &'static str,
    handler: crate::command::Handler,
) -> Command {
    Command {
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        step: keys.2,
        group: "string",
        since: "1.0.0",
        summary,
        handler,
        subcommands: &[],
    }
}

/// The string commands.
pub(crate) const COMMANDS: &[Command] = &[
    cmd("get", 2, READONLY | FAST, (1, 1, 1), "Returns the string value of a key.", get),
    cmd("set", -3, WRITE | DENYOOM, (1, 1, 1), "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", set),
];

fn get(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    match cx.engine.h.get(db, &args[1])? {
        Some(v) => cx.out.bulk(&v),
        None => cx.out.null(),
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
