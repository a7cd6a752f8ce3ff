//! Commands on keys of any type (Redis's `generic` group, `db.c`,
//! `expire.c`): DEL, EXISTS, TYPE, expiry, RENAME, SCAN, DB-wide commands.

use crate::command::{flags::*, Arg, CmdResult, Command};
use crate::engine::Cx;

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
        group: "generic",
        since: "1.0.0",
        summary,
        handler,
        subcommands: &[],
    }
}

/// The key-space commands.
pub(crate) const COMMANDS: &[Command] = &[
    cmd(
        "del",
        -2,
        WRITE,
        (1, -1, 1),
        "Deletes one or more keys.",
        del,
    ),
    cmd(
        "unlink",
        -2,
        WRITE | FAST,
        (1, -1, 1),
        "Asynchronously deletes one or more keys.",
        del,
    ),
    cmd(
        "exists",
        -2,
        READONLY | FAST,
        (1, -1, 1),
        "Determines whether one or more keys exist.",
        exists,
    ),
];

fn del(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let mut n = 0;
    for key in &args[1..] {
        n += cx.h().delete(db, key)? as i64;
    }
    cx.out.integer(n);
    Ok(())
}

fn exists(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    let mut n = 0;
    for key in &args[1..] {
        n += cx.h().exists(db, key)? as i64;
    }
    cx.out.integer(n);
    Ok(())
}
