//! Server commands: INFO, CONFIG, COMMAND, TIME, SHUTDOWN.

use crate::command::{flags::*, Arg, CmdResult, Command};
use crate::engine::{Cx, Flow, ServerRequest};

const fn cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    summary: &'static str,
    handler: crate::command::Handler,
) -> Command {
    Command {
        name,
        arity,
        flags,
        first_key: 0,
        last_key: 0,
        step: 0,
        group: "server",
        since: "1.0.0",
        summary,
        handler,
        subcommands: &[],
    }
}

/// The server commands.
pub(crate) const COMMANDS: &[Command] = &[
    cmd(
        "time",
        1,
        LOADING | STALE | FAST,
        "Returns the server time.",
        time,
    ),
    cmd(
        "shutdown",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY,
        "Synchronously saves the database(s) to disk and shuts down the Redis server.",
        shutdown,
    ),
];

fn time(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    cx.out.array_len(2);
    cx.out.bulk(now.as_secs().to_string().as_bytes());
    cx.out.bulk(now.subsec_micros().to_string().as_bytes());
    Ok(())
}

fn shutdown(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    cx.flow = Flow::Server(ServerRequest::Shutdown);
    Ok(())
}
