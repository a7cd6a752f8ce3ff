//! Connection commands: PING, ECHO, QUIT, SELECT, HELLO, RESET and CLIENT.

use proto::resp::Protocol;

use crate::command::{dispatch_sub, flags::*, Arg, CmdResult, Command};
use crate::engine::{ClientType, Cx, Flow, KillFilter, ServerRequest};
use crate::error::{CmdError, BAD_DB, SYNTAX};
use crate::parse;
use crate::session::ReplyMode;

/// The version shoal reports as `redis_version`, so that clients pick Redis
/// 7.0's features.
pub const REDIS_VERSION: &str = "7.0.15";

crate::command::group_cmd!("connection", keys = (0, 0, 0), since = "1.0.0");

const CLIENT_SUBCOMMANDS: &[Command] = &[
    cmd(
        "client|help",
        2,
        LOADING | STALE,
        "Show helpful text about the different subcommands",
        client_help,
    ),
    cmd(
        "client|setname",
        3,
        NOSCRIPT | LOADING | STALE,
        "Set the current connection name",
        client_setname,
    ),
    cmd(
        "client|getname",
        2,
        NOSCRIPT | LOADING | STALE,
        "Get the current connection name",
        client_getname,
    ),
    cmd(
        "client|id",
        2,
        NOSCRIPT | LOADING | STALE,
        "Returns the client ID for the current connection",
        client_id,
    ),
    cmd(
        "client|info",
        2,
        NOSCRIPT | LOADING | STALE,
        "Returns information about the current client connection.",
        client_info,
    ),
    cmd(
        "client|list",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Get the list of client connections",
        client_list,
    ),
    cmd(
        "client|kill",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Kill the connection of a client",
        client_kill,
    ),
    cmd(
        "client|no-evict",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Set client eviction mode for the current connection",
        client_no_evict,
    ),
    cmd(
        "client|reply",
        3,
        NOSCRIPT | LOADING | STALE,
        "Instruct the server whether to reply to commands",
        client_reply,
    ),
    cmd(
        "client|unblock",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Unblock a client blocked in a blocking command from a different connection",
        client_unblock,
    ),
    cmd(
        "client|pause",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Stop processing commands from clients for some time",
        crate::pause::client_pause,
    ),
    cmd(
        "client|unpause",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Resume processing of clients that were paused",
        crate::pause::client_unpause,
    ),
    cmd(
        "client|tracking",
        -3,
        NOSCRIPT | LOADING | STALE,
        "Enable or disable server assisted client side caching support",
        crate::tracking::client_tracking,
    ),
    cmd(
        "client|caching",
        3,
        NOSCRIPT | LOADING | STALE,
        "Instruct the server about tracking or not keys in the next request",
        crate::tracking::client_caching,
    ),
    cmd(
        "client|getredir",
        2,
        NOSCRIPT | LOADING | STALE,
        "Get tracking notifications redirection client ID if any",
        crate::tracking::client_getredir,
    ),
    cmd(
        "client|trackinginfo",
        2,
        NOSCRIPT | LOADING | STALE,
        "Return information about server assisted client side caching for the current connection",
        crate::tracking::client_trackinginfo,
    ),
    cmd(
        "client|setinfo",
        4,
        NOSCRIPT | LOADING | STALE,
        "Sets information specific to the client or connection.",
        client_setinfo,
    ),
];

/// The connection commands.
pub(crate) const COMMANDS: &[Command] = &[
    cmd("ping", -1, FAST | SUBSCRIBED_OK, "Ping the server", ping),
    Command {
        since: "3.0.0",
        ..cmd(
            "readonly",
            1,
            FAST | LOADING | STALE,
            "Enables read queries for a connection to a cluster replica node",
            no_cluster,
        )
    },
    Command {
        since: "3.0.0",
        ..cmd(
            "readwrite",
            1,
            FAST | LOADING | STALE,
            "Disables read queries for a connection to a cluster replica node",
            no_cluster,
        )
    },
    cmd("echo", 2, FAST, "Echo the given string", echo),
    cmd(
        "quit",
        -1,
        ALLOW_BUSY
            | NOSCRIPT
            | LOADING
            | STALE
            | FAST
            | NO_AUTH
            | SUBSCRIBED_OK
            | NOT_QUEUED
            | ENDS_MULTI,
        "Close the connection",
        quit,
    ),
    cmd(
        "select",
        2,
        LOADING | STALE | FAST,
        "Change the selected database for the current connection",
        select,
    ),
    cmd(
        "hello",
        -1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        "Handshake with Redis",
        hello,
    ),
    cmd(
        "reset",
        1,
        NOSCRIPT
            | LOADING
            | STALE
            | FAST
            | NO_AUTH
            | SUBSCRIBED_OK
            | NOT_QUEUED
            | ENDS_MULTI
            | ALLOW_BUSY,
        "Reset the connection",
        reset,
    ),
    Command {
        subcommands: CLIENT_SUBCOMMANDS,
        ..cmd(
            "client",
            -2,
            0,
            "A container for client connection commands",
            client,
        )
    },
];

fn ping(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    // A RESP2 client in subscribed mode gets a pub/sub shaped pong.
    if cx.session.protocol == Protocol::Resp2 && cx.session.subs.total() > 0 {
        if args.len() > 2 {
            return Err(CmdError::arity("ping"));
        }
        cx.out.array_len(2);
        cx.out.bulk(b"pong");
        cx.out.bulk(args.get(1).map_or(&b""[..], |a| a));
        return Ok(());
    }
    match args.len() {
        1 => cx.out.simple(b"PONG"),
        2 => cx.out.bulk(&args[1]),
        _ => return Err(CmdError::arity("ping")),
    }
    Ok(())
}

fn echo(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    cx.out.bulk(&args[1]);
    Ok(())
}

fn quit(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    // An open transaction and the watched keys go with the connection.
    cx.session.tx = Default::default();
    cx.out.simple(b"OK");
    cx.flow = Flow::Close;
    Ok(())
}

fn select(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = parse::int(&args[1])?;
    if !(0..store::NUM_DBS as i64).contains(&db) {
        return Err(CmdError::msg(BAD_DB));
    }
    cx.session.db = db as u8;
    cx.out.simple(b"OK");
    Ok(())
}

/// A connection name may not contain spaces or special characters (Redis's
/// `validateClientName`).
fn check_client_name(name: &[u8]) -> Result<(), CmdError> {
    if name.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(CmdError::msg(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

/// READONLY and READWRITE: cluster commands, refused as a Redis without
/// cluster mode refuses them.
fn no_cluster(_cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    Err(CmdError::msg(
        "ERR This instance has cluster support disabled",
    ))
}

fn hello(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let mut protocol = cx.session.protocol;
    let mut i = 1;
    if let Some(ver) = args.get(1) {
        let v = store::parse_i64(ver).ok_or(CmdError::msg(
            "ERR Protocol version is not an integer or out of range",
        ))?;
        protocol = Protocol::from_version(v)
            .ok_or(CmdError::msg("NOPROTO unsupported protocol version"))?;
        i = 2;
    }
    let mut name = None;
    let mut auth = None;
    while i < args.len() {
        let more = args.len() - i - 1;
        if parse::is(&args[i], "auth") && more >= 2 {
            auth = Some((i + 1, i + 2));
            i += 3;
        } else if parse::is(&args[i], "setname") && more >= 1 {
            check_client_name(&args[i + 1])?;
            name = Some(args[i + 1].to_vec());
            i += 2;
        } else {
            return Err(CmdError::owned(format!(
                "ERR Syntax error in HELLO option '{}'",
                crate::command::clip(&args[i], 128)
            )));
        }
    }
    // Redis authenticates before it applies anything else.
    if let Some((u, p)) = auth {
        if !cx
            .engine
            .authenticate(cx.session, &args[u], &args[p], &args[0])
        {
            return Err(CmdError::msg(crate::acl::WRONGPASS));
        }
    } else if cx.session.authenticated == Some(false)
        && cx.engine.acl.users.default_user().requires_auth()
    {
        return Err(CmdError::msg(crate::acl::NOAUTH_HELLO));
    }
    if let Some(name) = name {
        cx.session.name = name;
    }
    cx.session.protocol = protocol;
    cx.engine.pubsub.set_protocol(cx.session.id, protocol);
    cx.out.set_protocol(protocol);
    cx.out.map_len(7);
    cx.out.bulk(b"server");
    cx.out.bulk(b"redis");
    cx.out.bulk(b"version");
    cx.out.bulk(REDIS_VERSION.as_bytes());
    cx.out.bulk(b"proto");
    cx.out.integer(protocol.version());
    cx.out.bulk(b"id");
    cx.out.integer(cx.session.id as i64);
    cx.out.bulk(b"mode");
    cx.out.bulk(b"standalone");
    cx.out.bulk(b"role");
    cx.out.bulk(b"master");
    cx.out.bulk(b"modules");
    cx.out.array_len(0);
    Ok(())
}

fn reset(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    // Subscriptions and MONITOR end too, as in Redis.
    let mut subs = std::mem::take(&mut cx.session.subs);
    cx.engine.pubsub.forget(cx.session.id, &mut subs);
    cx.engine.tracking_disable(cx.session.id);
    cx.session.reset();
    cx.out.set_protocol(cx.session.protocol);
    cx.out.simple(b"RESET");
    Ok(())
}

fn client(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let parent = crate::command::lookup(b"client").expect("CLIENT is in the table");
    dispatch_sub(cx, parent, args)
}

fn client_help(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let lines: &[&str] = &[
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CACHING (YES|NO)",
        "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
        "GETREDIR",
        "    Return the client ID we are redirecting to when tracking is enabled.",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are: ID <client-id>, ADDR <ip:port>,",
        "    LADDR <ip:port>, SKIPME (YES|NO), MAXAGE <seconds>.",
        "LIST [options ...]",
        "    Return information about client connections. Options:",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "    * ID <client-id> [<client-id> ...]",
        "UNPAUSE",
        "    Stop the current client pause, resuming traffic.",
        "PAUSE <timeout> [WRITE|ALL]",
        "    Suspend all, or just write, clients for <timeout> milliseconds.",
        "NO-EVICT (ON|OFF)",
        "    Protect current client connection from eviction.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "SETINFO <option> <value>",
        "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]",
        "    Unblock the specified blocked client.",
        "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
        "         [OPTIN] [OPTOUT] [NOLOOP]",
        "    Control server assisted client side caching.",
        "TRACKINGINFO",
        "    Report tracking status for the current connection.",
        "HELP",
        "    Print this help.",
    ];
    crate::command::reply_help(cx, lines)
}

fn client_setname(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    check_client_name(&args[2])?;
    cx.session.name = args[2].to_vec();
    cx.out.simple(b"OK");
    Ok(())
}

fn client_getname(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    if cx.session.name.is_empty() {
        cx.out.null();
    } else {
        cx.out.bulk(&cx.session.name.clone());
    }
    Ok(())
}

fn client_id(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    cx.out.integer(cx.session.id as i64);
    Ok(())
}

fn client_info(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let line = cx.engine.client_line(cx.session, cx.engine.now_ms()) + "\n";
    cx.out.verbatim(b"txt", line.as_bytes());
    Ok(())
}

fn client_list(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let mut ids = Vec::new();
    let mut client_type = None;
    let mut i = 2;
    while i < args.len() {
        if parse::is(&args[i], "type") && i + 1 < args.len() {
            client_type = Some(client_type_arg(&args[i + 1])?);
            i += 2;
        } else if parse::is(&args[i], "id") && i + 1 < args.len() {
            for a in &args[i + 1..] {
                let id = store::parse_i64(a)
                    .filter(|&n| n > 0)
                    .ok_or(CmdError::msg("ERR Invalid client ID"))?;
                ids.push(id as u64);
            }
            i = args.len();
        } else {
            return Err(CmdError::syntax());
        }
    }
    cx.flow = Flow::Server(ServerRequest::ClientList { ids, client_type });
    Ok(())
}

/// Refuses a `TYPE` argument of CLIENT LIST/KILL that names no client type
/// Redis knows, with Redis's error.
fn client_type_arg(name: &[u8]) -> Result<ClientType, CmdError> {
    ClientType::parse(name).ok_or_else(|| {
        CmdError::owned(format!(
            "ERR Unknown client type '{}'",
            crate::command::clip(name, 128)
        ))
    })
}

fn client_kill(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let mut filter = KillFilter {
        skip_me: true,
        caller: cx.session.id,
        ..KillFilter::default()
    };
    if args.len() == 3 {
        filter.legacy = true;
        filter.addr = Some(String::from_utf8_lossy(&args[2]).into_owned());
        filter.skip_me = false;
    } else {
        if !args.len().is_multiple_of(2) {
            return Err(CmdError::msg(SYNTAX));
        }
        for pair in args[2..].chunks(2) {
            let (opt, val) = (&pair[0], &pair[1]);
            let text = String::from_utf8_lossy(val).into_owned();
            if parse::is(opt, "id") {
                let id = store::parse_i64(val)
                    .filter(|&n| n > 0)
                    .ok_or(CmdError::msg("ERR client-id should be greater than 0"))?;
                filter.id = Some(id as u64);
            } else if parse::is(opt, "addr") {
                filter.addr = Some(text);
            } else if parse::is(opt, "laddr") {
                filter.laddr = Some(text);
            } else if parse::is(opt, "maxage") {
                let age = store::parse_i64(val)
                    .filter(|&n| n >= 0)
                    .ok_or(CmdError::not_integer())?;
                filter.max_age = Some(age as u64);
            } else if parse::is(opt, "skipme") {
                filter.skip_me = if parse::is(val, "yes") {
                    true
                } else if parse::is(val, "no") {
                    false
                } else {
                    return Err(CmdError::syntax());
                };
            } else if parse::is(opt, "user") {
                if cx.engine.acl.users.get(val).is_none() {
                    return Err(CmdError::owned(format!(
                        "ERR No such user '{}'",
                        String::from_utf8_lossy(val)
                    )));
                }
                filter.users = vec![val.to_vec()];
            } else if parse::is(opt, "type") {
                filter.client_type = Some(client_type_arg(val)?);
            } else {
                return Err(CmdError::syntax());
            }
        }
    }
    cx.flow = Flow::Server(ServerRequest::ClientKill(filter));
    Ok(())
}

fn client_unblock(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if args.len() > 4 {
        return Err(CmdError::msg(
            "ERR unknown subcommand or wrong number of arguments for 'unblock'. Try CLIENT HELP.",
        ));
    }
    // As Redis: the reason is checked before the id.
    let error = match args.get(3) {
        None => false,
        Some(r) if parse::is(r, "timeout") => false,
        Some(r) if parse::is(r, "error") => true,
        Some(_) => {
            return Err(CmdError::msg(
                "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    };
    let id = store::parse_i64(&args[2]).ok_or(CmdError::not_integer())?;
    if id <= 0 {
        // No client has such an id.
        cx.out.integer(0);
        return Ok(());
    }
    cx.flow = Flow::Server(ServerRequest::ClientUnblock {
        id: id as u64,
        error,
    });
    Ok(())
}

fn client_no_evict(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    cx.session.no_evict = if parse::is(&args[2], "on") {
        true
    } else if parse::is(&args[2], "off") {
        false
    } else {
        return Err(CmdError::syntax());
    };
    cx.out.simple(b"OK");
    Ok(())
}

fn client_reply(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if parse::is(&args[2], "on") {
        cx.session.reply = ReplyMode::On;
        cx.out.simple(b"OK");
    } else if parse::is(&args[2], "off") {
        cx.session.reply = ReplyMode::Off;
    } else if parse::is(&args[2], "skip") {
        if cx.session.reply != ReplyMode::Off {
            cx.session.reply = ReplyMode::Skip;
        }
    } else {
        return Err(CmdError::syntax());
    }
    Ok(())
}

fn client_setinfo(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let value = &args[3];
    if value.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(CmdError::owned(format!(
            "ERR {} cannot contain spaces, newlines or special characters.",
            crate::command::clip(&args[2], 32)
        )));
    }
    if parse::is(&args[2], "lib-name") {
        cx.session.lib_name = value.to_vec();
    } else if parse::is(&args[2], "lib-ver") {
        cx.session.lib_ver = value.to_vec();
    } else {
        return Err(CmdError::owned(format!(
            "ERR Unrecognized option '{}'",
            crate::command::clip(&args[2], 128)
        )));
    }
    cx.out.simple(b"OK");
    Ok(())
}
