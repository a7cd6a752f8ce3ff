//! FUNCTION: Redis 7.0's function libraries. shoal has no Lua engine yet, so
//! no library can be loaded and the library set is always empty: FLUSH and
//! LIST answer truthfully for that empty set (every `start_server` block of
//! Redis's own test suite begins with `FUNCTION FLUSH`), and LOAD, FCALL and
//! the rest stay unknown until scripting arrives.

use crate::command::{self, dispatch_sub, flags::*, Arg, CmdResult, Command};
use crate::engine::Cx;
use crate::error::CmdError;
use crate::parse;

crate::command::group_cmd!("scripting", keys = (0, 0, 0), since = "7.0.0");

#[rustfmt::skip]
const FUNCTION_SUBCOMMANDS: &[Command] = &[
    cmd("function|flush", -2, WRITE | NOSCRIPT, "Deleting all functions", function_flush),
    cmd("function|list", -2, NOSCRIPT, "List information about all the functions", function_list),
    cmd("function|help", 2, LOADING | STALE, "Show helpful text about the different subcommands", function_help),
];

/// The scripting commands.
pub(crate) const COMMANDS: &[Command] = &[Command {
    subcommands: FUNCTION_SUBCOMMANDS,
    ..cmd(
        "function",
        -2,
        0,
        "A container for function commands",
        function,
    )
}];

fn function(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    dispatch_sub(cx, &COMMANDS[0], args)
}

/// FUNCTION FLUSH [ASYNC|SYNC]: the set of libraries is empty already.
fn function_flush(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    match &args[2..] {
        [] => {}
        [mode] if parse::is(mode, "async") || parse::is(mode, "sync") => {}
        [_] => {
            return Err(CmdError::msg(
                "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
            ))
        }
        _ => return Err(CmdError::arity("function|flush")),
    }
    cx.out.simple(b"OK");
    Ok(())
}

/// FUNCTION LIST [WITHCODE] [LIBRARYNAME pattern]: options checked as Redis
/// does, then the (empty) list of libraries.
fn function_list(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let mut i = 2;
    let (mut with_code, mut pattern) = (false, false);
    while i < args.len() {
        if parse::is(&args[i], "withcode") && !with_code {
            with_code = true;
        } else if parse::is(&args[i], "libraryname") && !pattern {
            if i + 1 >= args.len() {
                return Err(CmdError::msg("ERR library name argument was not given"));
            }
            pattern = true;
            i += 1;
        } else {
            return Err(CmdError::owned(format!(
                "ERR Unknown argument {}",
                command::clip(&args[i], 128)
            )));
        }
        i += 1;
    }
    cx.out.array_len(0);
    Ok(())
}

fn function_help(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    command::reply_help(
        cx,
        &[
            "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "LIST [WITHCODE] [LIBRARYNAME <pattern>]",
            "    Return general information on all the libraries.",
            "HELP",
            "    Print this help.",
        ],
    )
}
