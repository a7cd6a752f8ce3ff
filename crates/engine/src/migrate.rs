//! MIGRATE (Redis's `generic` group): moves keys to another Redis-protocol
//! server as RESTORE commands carrying DUMP payloads, then deletes them here
//! (unless COPY).
//!
//! As in Redis, the command waits for the target synchronously: the worker
//! serves nothing else until the target answered or the timeout passed.
//! Unlike Redis, the connection is not cached between calls: each MIGRATE
//! connects, authenticates and selects the db anew.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use store::Ttl;

use crate::command::{flags::*, Arg, CmdResult, Command};
use crate::dump::read_value;
use crate::engine::Cx;
use crate::error::{CmdError, SYNTAX};
use crate::notify::class;
use crate::parse;
use crate::rdb;

crate::command::group_cmd!("generic");

/// MIGRATE.
pub(crate) const COMMANDS: &[Command] = &[Command {
    movable_keys: Some(migrate_keys),
    ..cmd(
        "migrate",
        -6,
        WRITE,
        (3, 3, 1),
        "2.6.0",
        "Atomically transfer a key from a Redis instance to another one.",
        migrate,
    )
}];

/// A reply line longer than this from the target is an error.
const MAX_REPLY_LINE: u64 = 64 * 1024;

/// MIGRATE's keys: `key`, or with an empty `key` the arguments after KEYS
/// (skipping AUTH's and AUTH2's values, which may read "KEYS").
fn migrate_keys(args: &[Arg<'_>]) -> Vec<usize> {
    let mut i = 6;
    while i < args.len() {
        if parse::is(&args[i], "keys") {
            return if args[3].is_empty() {
                (i + 1..args.len()).collect()
            } else {
                // A syntax error MIGRATE itself reports.
                Vec::new()
            };
        }
        i += if parse::is(&args[i], "auth") {
            2
        } else if parse::is(&args[i], "auth2") {
            3
        } else {
            1
        };
    }
    vec![3]
}

/// MIGRATE's options, as Redis parses them.
#[derive(Default)]
struct Options<'a> {
    copy: bool,
    replace: bool,
    username: Option<&'a [u8]>,
    password: Option<&'a [u8]>,
    /// The first key argument and how many there are.
    keys: (usize, usize),
}

fn options<'a>(args: &'a [Arg<'_>]) -> Result<Options<'a>, CmdError> {
    let mut o = Options {
        keys: (3, 1),
        ..Options::default()
    };
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if parse::is(&args[j], "copy") {
            o.copy = true;
        } else if parse::is(&args[j], "replace") {
            o.replace = true;
        } else if parse::is(&args[j], "auth") && more >= 1 {
            o.password = Some(&args[j + 1]);
            j += 1;
        } else if parse::is(&args[j], "auth2") && more >= 2 {
            o.username = Some(&args[j + 1]);
            o.password = Some(&args[j + 2]);
            j += 2;
        } else if parse::is(&args[j], "keys") {
            if !args[3].is_empty() {
                return Err(CmdError::msg(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            o.keys = (j + 1, args.len() - j - 1);
            break;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        j += 1;
    }
    Ok(o)
}

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
/// [AUTH password] [AUTH2 username password] [KEYS key…]
fn migrate(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let o = options(args)?;
    let timeout_ms = parse::int(&args[5])?;
    let target_db = parse::int(&args[4])?;
    let timeout = Duration::from_millis(if timeout_ms <= 0 {
        1000
    } else {
        timeout_ms as u64
    });
    let db = cx.db();

    // The keys that are here, with their payloads and time to live.
    let mut moving = Vec::new();
    for key in &args[o.keys.0..o.keys.0 + o.keys.1] {
        let Some(value) = read_value(cx.h(), db, key)? else {
            continue;
        };
        let ttl = match cx.h().ttl(db, key)? {
            Ttl::Missing => continue,
            Ttl::Persistent => 0,
            Ttl::Ms(ms) => ms.max(1),
        };
        moving.push((key, ttl, rdb::encode(&value)));
    }
    if moving.is_empty() {
        cx.out.simple(b"NOKEY");
        return Ok(());
    }

    let mut request = Vec::new();
    if let Some(password) = o.password {
        match o.username {
            Some(user) => encode(&mut request, &[b"AUTH", user, password]),
            None => encode(&mut request, &[b"AUTH", password]),
        }
    }
    encode(&mut request, &[b"SELECT", target_db.to_string().as_bytes()]);
    for (key, ttl, payload) in &moving {
        let ttl = ttl.to_string();
        let mut restore: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), payload];
        if o.replace {
            restore.push(b"REPLACE");
        }
        encode(&mut request, &restore);
    }

    let mut conn = connect(&args[1], &args[2], timeout)?;
    conn.get_mut()
        .write_all(&request)
        .map_err(|_| CmdError::msg("IOERR error or timeout writing to target instance"))?;
    let read_error = || CmdError::msg("IOERR error or timeout reading to target instance");
    // The first error the target gave (AUTH's, SELECT's, then RESTOREs').
    let mut refused: Option<Vec<u8>> = None;
    for _ in 0..usize::from(o.password.is_some()) + 1 {
        let line = read_line(&mut conn).ok_or_else(read_error)?;
        if let Some(err) = line.strip_prefix(b"-") {
            refused.get_or_insert_with(|| err.to_vec());
        }
    }
    let session_ok = refused.is_none();
    for (key, _, _) in &moving {
        let Some(line) = read_line(&mut conn) else {
            if refused.is_none() {
                return Err(read_error());
            }
            break;
        };
        let restored = match line.strip_prefix(b"-") {
            Some(err) => {
                refused.get_or_insert_with(|| err.to_vec());
                false
            }
            None => true,
        };
        // Restored there (and AUTH and SELECT went through): the key moved,
        // even when another key of the call was refused.
        if restored && session_ok && !o.copy && cx.h().delete(db, key)? {
            cx.notify(class::GENERIC, "del", key);
        }
    }
    match refused {
        Some(err) => Err(CmdError::owned(format!(
            "ERR Target instance replied with error: {}",
            String::from_utf8_lossy(&err)
        ))),
        None => {
            cx.out.simple(b"OK");
            Ok(())
        }
    }
}

/// Connects to `host`:`port` within `timeout`, with reads and writes
/// bounded by it too.
fn connect(host: &[u8], port: &[u8], timeout: Duration) -> Result<BufReader<TcpStream>, CmdError> {
    let failed = || CmdError::msg("IOERR error or timeout connecting to the client");
    let host = std::str::from_utf8(host).map_err(|_| failed())?;
    let port: u16 = std::str::from_utf8(port)
        .ok()
        .and_then(|p| p.parse().ok())
        .ok_or_else(failed)?;
    let addr = (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(failed)?;
    let stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| {
        // Redis connects without blocking and learns of a refusal only
        // when it writes the request.
        if e.kind() == std::io::ErrorKind::ConnectionRefused {
            CmdError::msg("IOERR error or timeout writing to target instance")
        } else {
            failed()
        }
    })?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|_| failed())?;
    stream
        .set_write_timeout(Some(timeout))
        .map_err(|_| failed())?;
    let _ = stream.set_nodelay(true);
    Ok(BufReader::new(stream))
}

/// One reply line without its CRLF; None on a socket error, a timeout, a
/// closed connection or an overlong line.
fn read_line(conn: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut line = Vec::new();
    let n = std::io::Read::take(&mut *conn, MAX_REPLY_LINE)
        .read_until(b'\n', &mut line)
        .ok()?;
    if n == 0 || !line.ends_with(b"\r\n") {
        return None;
    }
    line.truncate(line.len() - 2);
    Some(line)
}

/// One command in RESP.
fn encode(out: &mut Vec<u8>, words: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", words.len()).as_bytes());
    for w in words {
        out.extend_from_slice(format!("${}\r\n", w.len()).as_bytes());
        out.extend_from_slice(w);
        out.extend_from_slice(b"\r\n");
    }
}
