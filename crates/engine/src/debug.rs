//! DEBUG: the few subcommands of Redis's debugging container that shoal has.
//! `DEBUG SLEEP` stops the calling worker's event loop the way Redis's
//! stops its whole server, so tests and operators can make one worker busy
//! on purpose (to watch the balancer route around it, or to time an
//! upgrade under a stalled worker).
//!
//! Like Redis, DEBUG is one table entry whose handler picks the subcommand
//! itself (COMMAND INFO shows no subcommands for it).

use std::time::Duration;

use crate::command::{flags::*, reply_help, Arg, CmdResult, Command};
use crate::engine::Cx;
use crate::error::{CmdError, NOT_FLOAT};
use crate::parse;

/// The longest DEBUG SLEEP shoal accepts: a typo must not stop a worker for
/// days.
const MAX_SLEEP_SECS: f64 = 3600.0;

/// The debugging command.
pub(crate) const COMMANDS: &[Command] = &[crate::command::spec(
    "debug",
    -2,
    ADMIN | NOSCRIPT | LOADING | STALE,
    (0, 0, 0),
    "server",
    "1.0.0",
    "A container for debugging commands",
    debug,
)];

fn debug(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let sub = &args[1];
    if parse::is(sub, "sleep") && args.len() == 3 {
        sleep(cx, &args[2])
    } else if parse::is(sub, "set-active-expire") && args.len() == 3 {
        set_active_expire(cx, &args[2])
    } else if parse::is(sub, "object") && args.len() == 3 {
        object(cx, &args[2])
    } else if parse::is(sub, "help") && args.len() == 2 {
        reply_help(
            cx,
            &[
                "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "OBJECT <key>",
                "    Show low level info about the key and associated value.",
                "SET-ACTIVE-EXPIRE <0|1>",
                "    Setting it to 0 disables expiring keys in background when they are not",
                "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
                "    default.",
                "SLEEP <seconds>",
                "    Stop the server for <seconds>. Decimals allowed.",
                "HELP",
                "    Prints this help.",
            ],
        )
    } else {
        // Redis's addReplySubcommandSyntaxError: one text for an unknown
        // subcommand and for a known one with the wrong argument count.
        Err(CmdError::owned(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            crate::command::clip(sub, 128)
        )))
    }
}

/// DEBUG SET-ACTIVE-EXPIRE 0|1: turns every worker's expiry sweep off
/// (0) or on. Like Redis's `atoi`, anything but a non-zero number is off.
fn set_active_expire(cx: &mut Cx<'_>, arg: &[u8]) -> CmdResult {
    let on = parse::int(arg).is_ok_and(|v| v != 0);
    let word = crate::config::word::ACTIVE_EXPIRE_OFF;
    cx.engine.store.set_config_word(word, (!on) as u64)?;
    cx.out.simple(b"OK");
    Ok(())
}

/// DEBUG OBJECT: Redis's line about a key, with what shoal knows of it
/// (no address: 0x0; the serialized length is the key's DUMP body).
fn object(cx: &mut Cx<'_>, key: &[u8]) -> CmdResult {
    let db = cx.db();
    let mut value = Vec::new();
    let Some(meta) = cx.h().peek(db, key, u64::MAX, &mut value)? else {
        return Err(CmdError::msg(crate::error::NO_SUCH_KEY));
    };
    let encoding = crate::keyspace::encoding_name(&meta, &value)?;
    let serialized = match crate::dump::read_value(cx.h(), db, key)? {
        // The type byte and the 10-byte footer are not the value's.
        Some(v) => crate::rdb::encode(&v).len().saturating_sub(11),
        None => 0,
    };
    let line = format!(
        "Value at:0x0 refcount:1 encoding:{encoding} serializedlength:{serialized} lru:{} lru_seconds_idle:{}",
        meta.lru & 0xFF_FFFF,
        meta.idle_seconds(cx.engine.now_ms())
    );
    cx.out.simple(line.as_bytes());
    Ok(())
}

/// DEBUG SLEEP: blocks this worker's thread, and with it every client the
/// worker serves, then replies +OK.
fn sleep(cx: &mut Cx<'_>, arg: &[u8]) -> CmdResult {
    let pause = sleep_duration(arg)?;
    // Inside EXEC the queue runs in an exclusive section of the store, where
    // every other worker waits: sleeping there would stop all of them, and
    // the store asks its holders never to wait.
    if cx.h().in_exclusive() {
        return Err(CmdError::msg(
            "ERR DEBUG SLEEP cannot run inside MULTI/EXEC in shoal: it would stop every worker",
        ));
    }
    std::thread::sleep(pause);
    cx.out.simple(b"OK");
    Ok(())
}

/// The pause DEBUG SLEEP asks for. Redis reads it with an unchecked
/// `strtod`, so a non-number or a negative value sleeps 0 s and replies +OK;
/// shoal refuses those (and more than [`MAX_SLEEP_SECS`]) so a mistyped
/// argument is seen.
fn sleep_duration(arg: &[u8]) -> Result<Duration, CmdError> {
    let secs = parse::seconds(arg).ok_or(CmdError::msg(NOT_FLOAT))?;
    if !(0.0..=MAX_SLEEP_SECS).contains(&secs) {
        return Err(CmdError::msg(
            "ERR DEBUG SLEEP takes between 0 and 3600 seconds",
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_takes_decimal_seconds() {
        assert_eq!(sleep_duration(b"0").unwrap(), Duration::ZERO);
        assert_eq!(sleep_duration(b"0.2").unwrap(), Duration::from_millis(200));
        assert_eq!(sleep_duration(b"1e-3").unwrap(), Duration::from_millis(1));
        assert_eq!(sleep_duration(b"3600").unwrap(), Duration::from_secs(3600));
    }

    #[test]
    fn sleep_refuses_what_is_not_a_sane_pause() {
        for bad in [&b"x"[..], b"", b" 1", b"nan", b"1s", b"\xff"] {
            assert_eq!(
                sleep_duration(bad).unwrap_err().text(),
                NOT_FLOAT,
                "{bad:?}"
            );
        }
        for bad in [&b"-1"[..], b"-0.001", b"3600.5", b"inf", b"-inf", b"1e400"] {
            assert!(
                sleep_duration(bad)
                    .unwrap_err()
                    .text()
                    .contains("between 0 and 3600"),
                "{bad:?}"
            );
        }
    }
}
