//! `shoal ctl`: operations on a running server. Everything but `snapshot`
//! talks to the supervisor over its control socket (`<segment>.ctl`, see
//! docs/operations.md): one RESP2 array of bulk strings per request, one
//! RESP2 value per reply (`+OK`, `-ERR …`, or a bulk string of JSON).
//! `snapshot` sends SAVE to the Redis port, as any client could.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ::store::Location;
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use serde_json::Value;

/// How long a request may take: SCALE and UPGRADE answer only when every
/// worker they start is serving and every one they stop has drained.
const REPLY_TIMEOUT: Duration = Duration::from_secs(900);

/// Arguments of `shoal ctl`.
#[derive(Args)]
pub struct CtlArgs {
    /// Shared-memory name of the server's segment (`shoal serve --name`).
    #[arg(long, global = true, default_value = "shoal")]
    name: String,
    /// Path of the server's segment file (`shoal serve --segment`), instead
    /// of a name.
    #[arg(long, global = true)]
    segment: Option<PathBuf>,
    /// The server's Redis port (`snapshot` only).
    #[arg(long, default_value_t = 6379, global = true)]
    port: u16,
    /// The server's address (`snapshot` only).
    #[arg(long, default_value = "127.0.0.1", global = true)]
    host: String,
    #[command(subcommand)]
    command: CtlCommand,
}

#[derive(Subcommand)]
enum CtlCommand {
    /// The supervisor, its workers, memory and log.
    Status {
        /// Print the supervisor's JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Changes the number of workers; returns once the new ones serve and
    /// the removed ones have exited.
    Scale {
        /// How many workers to run.
        workers: u32,
        /// Print the supervisor's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Replaces every worker, one at a time, with a worker of a new binary
    /// (default: the supervisor's own), on the same listening sockets.
    Upgrade {
        /// The binary the new workers run.
        #[arg(long)]
        binary: Option<PathBuf>,
        /// Upgrade the supervisor instead: it re-executes itself (same pid,
        /// default: the file it was started from) while the workers go on
        /// serving, and they reconnect to the new image.
        #[arg(long)]
        supervisor: bool,
        /// Print the supervisor's JSON.
        #[arg(long)]
        json: bool,
    },
    /// Runs one command on every worker at the same instant and reports how
    /// far apart the starts were.
    Exec {
        /// When, in ms from now ("+100" or "100").
        #[arg(long, default_value = "+100", value_parser = parse_at)]
        at: u64,
        /// Send the command to every worker at once and run it on arrival,
        /// instead of spinning to a common start time (for comparison).
        #[arg(long)]
        naive: bool,
        /// Print the supervisor's JSON.
        #[arg(long)]
        json: bool,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<OsString>,
    },
    /// Takes a snapshot now and waits until it is written (Redis's SAVE,
    /// which in shoal never pauses writers).
    Snapshot,
    /// Stops the server (as SIGTERM to the supervisor does).
    Shutdown,
}

/// Runs `shoal ctl`.
pub fn run(args: CtlArgs) -> Result<()> {
    if let CtlCommand::Snapshot = args.command {
        return snapshot(&args.host, args.port);
    }
    let segment = match &args.segment {
        Some(p) => p.clone(),
        None => Location::Name(args.name.clone()).file_path(),
    };
    let serve_hint = match &args.segment {
        Some(p) => format!("--segment {}", p.display()),
        None => format!("--name {}", args.name),
    };
    let mut ctl = Control::connect(&server::control_socket_path(&segment), &serve_hint)?;
    match args.command {
        CtlCommand::Status { json } => {
            let (text, v) = ctl.json(&[b"STATUS"])?;
            print!("{}", if json { text } else { render_status(&v) });
        }
        CtlCommand::Scale { workers, json } => {
            let (text, v) = ctl.json(&[b"SCALE", workers.to_string().as_bytes()])?;
            if json {
                print!("{text}");
            } else {
                println!("scaled from {} to {}", num(&v["from"]), n_workers(&v["to"]));
            }
        }
        CtlCommand::Upgrade {
            binary,
            json,
            supervisor,
        } => {
            // The supervisor runs this file for every later restart too, so
            // it gets the file the link points to now, from any directory.
            let binary = match binary {
                Some(p) => Some(
                    std::fs::canonicalize(&p)
                        .with_context(|| format!("the binary {}", p.display()))?,
                ),
                None => None,
            };
            let mut req: Vec<&[u8]> = vec![if supervisor { b"REEXEC" } else { b"UPGRADE" }];
            if let Some(b) = &binary {
                req.push(b.as_os_str().as_bytes());
            }
            let (text, v) = ctl.json(&req)?;
            if supervisor {
                let path = server::control_socket_path(&segment);
                let status = await_new_supervisor(&path, &serve_hint)?;
                if json {
                    print!("{text}");
                } else {
                    println!(
                        "supervisor pid {} re-executed {}; {} of {} workers reconnected",
                        num(&v["pid"]),
                        v["binary"].as_str().unwrap_or("?"),
                        status,
                        num(&v["workers"]),
                    );
                }
            } else {
                print!("{}", if json { text } else { render_upgrade(&v) });
            }
        }
        CtlCommand::Exec {
            at,
            naive,
            json,
            command,
        } => {
            let at = at.to_string();
            let mode: &[u8] = if naive { b"naive" } else { b"spin" };
            let mut req: Vec<&[u8]> = vec![b"EXEC", at.as_bytes(), mode];
            req.extend(command.iter().map(|a| a.as_bytes()));
            let (text, v) = ctl.json(&req)?;
            print!("{}", if json { text } else { render_exec(&v) });
        }
        CtlCommand::Shutdown => match ctl.request(&[b"SHUTDOWN"])? {
            Reply::Simple(_) => println!("shutting down"),
            other => bail!("unexpected reply to SHUTDOWN: {other:?}"),
        },
        CtlCommand::Snapshot => unreachable!("handled above"),
    }
    Ok(())
}

/// `--at`: milliseconds from now, with or without a leading `+`.
fn parse_at(s: &str) -> Result<u64, String> {
    s.strip_prefix('+')
        .unwrap_or(s)
        .parse()
        .map_err(|_| format!("{s:?} is not a number of milliseconds (+100 or 100)"))
}

/// One reply from the control socket.
#[derive(Debug, PartialEq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
}

/// A connection to the supervisor's control socket.
struct Control {
    reader: BufReader<UnixStream>,
}

impl Control {
    fn connect(path: &Path, serve_hint: &str) -> Result<Control> {
        let stream = UnixStream::connect(path).map_err(|e| match e.kind() {
            // Refused: a socket file left by a supervisor that died.
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => anyhow!(
                "no shoal supervisor at {} (is `shoal serve {serve_hint}` running?)",
                path.display()
            ),
            _ => anyhow!("connect to {}: {e}", path.display()),
        })?;
        stream.set_read_timeout(Some(REPLY_TIMEOUT))?;
        Ok(Control {
            reader: BufReader::new(stream),
        })
    }

    /// Sends one request and reads its reply; an error reply is an `Err`.
    fn request(&mut self, args: &[&[u8]]) -> Result<Reply> {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            req.extend_from_slice(a);
            req.extend_from_slice(b"\r\n");
        }
        self.reader
            .get_mut()
            .write_all(&req)
            .context("send to the control socket")?;
        match read_reply(&mut self.reader).context("read from the control socket")? {
            Reply::Error(e) => Err(anyhow!("{e}")),
            r => Ok(r),
        }
    }

    /// A request whose answer is JSON: the text as received (with a final
    /// newline) and its parse.
    fn json(&mut self, args: &[&[u8]]) -> Result<(String, Value)> {
        let Reply::Bulk(body) = self.request(args)? else {
            bail!("the supervisor did not answer with JSON");
        };
        let mut text = String::from_utf8(body).context("the supervisor's JSON is not UTF-8")?;
        let v: Value = serde_json::from_str(&text).context("the supervisor's JSON")?;
        if !text.ends_with('\n') {
            text.push('\n');
        }
        Ok((text, v))
    }
}

/// Reads one RESP2 value (no aggregates: the control socket sends none).
fn read_reply(r: &mut impl BufRead) -> Result<Reply> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    let Some(body) = line.strip_suffix(b"\r\n") else {
        bail!("connection closed before a whole reply");
    };
    let text = String::from_utf8_lossy(&body[1..]).into_owned();
    Ok(match body[0] {
        b'+' => Reply::Simple(text),
        b'-' => Reply::Error(text),
        b':' => Reply::Int(text.parse().context("bad integer reply")?),
        b'$' if text == "-1" => Reply::Nil,
        b'$' => {
            let len: usize = text.parse().context("bad bulk length")?;
            let mut body = vec![0u8; len + 2];
            r.read_exact(&mut body)?;
            if !body.ends_with(b"\r\n") {
                bail!("bulk reply without its CRLF");
            }
            body.truncate(len);
            Reply::Bulk(body)
        }
        other => bail!("unexpected reply type {:?}", other as char),
    })
}

/// A JSON number or string as text; `-` when absent.
fn num(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if !n.is_i64() && !n.is_u64() => format!("{f:.1}"),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// `1 worker`, `3 workers`.
fn n_workers(n: &Value) -> String {
    let s = if n.as_u64() == Some(1) { "" } else { "s" };
    format!("{} worker{s}", num(n))
}

/// Seconds as the largest two units: `42.1s`, `5m03s`, `2h05m`, `3d04h`.
fn duration(v: &Value) -> String {
    let Some(s) = v.as_f64() else {
        return "-".into();
    };
    let whole = s as u64;
    match whole {
        0..60 => format!("{s:.1}s"),
        60..3600 => format!("{}m{:02}s", whole / 60, whole % 60),
        3600..86400 => format!("{}h{:02}m", whole / 3600, whole / 60 % 60),
        _ => format!("{}d{:02}h", whole / 86400, whole / 3600 % 24),
    }
}

/// Bytes in binary units: `512 B`, `1.2 KiB`, `64.0 MiB`.
fn bytes(v: &Value) -> String {
    let Some(n) = v.as_u64() else {
        return "-".into();
    };
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut f = n as f64;
    let mut unit = 0;
    while f >= 1024.0 && unit + 1 < units.len() {
        f /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{f:.1} {}", units[unit])
    }
}

/// Left-aligned columns, two spaces apart; the last column is not padded.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ", w = widths[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `shoal ctl status` without `--json`.
fn render_status(v: &Value) -> String {
    let sup = &v["supervisor"];
    let mem = &v["memory"];
    let log = &v["log"];
    let mut out = String::new();
    let _ = writeln!(
        out,
        "supervisor  pid {}, version {}, up {}, balance {}, {} wanted",
        num(&sup["pid"]),
        num(&sup["version"]),
        duration(&sup["uptime_s"]),
        num(&sup["balance"]),
        n_workers(&sup["workers_wanted"]),
    );
    let _ = writeln!(out, "binary      {}", num(&sup["binary"]));
    let _ = writeln!(
        out,
        "memory      {} used of a {} segment, {} keys",
        bytes(&mem["used_bytes"]),
        bytes(&mem["segment_bytes"]),
        num(&mem["keys"]),
    );
    if log["enabled"].as_bool() == Some(true) {
        let _ = writeln!(
            out,
            "log         {}: head LSN {}, written {}, fsynced {}, snapshot start {}",
            num(&log["policy"]),
            num(&log["head_lsn"]),
            num(&log["written_lsn"]),
            num(&log["fsynced_lsn"]),
            num(&log["snapshot_start_lsn"]),
        );
    } else {
        out.push_str("log         off\n");
    }
    let repl = &v["replication"];
    match repl["role"].as_str() {
        Some("replica") => {
            let _ = writeln!(
                out,
                "replication replica of {}, link {}, applied LSN {}{}",
                num(&repl["primary"]),
                num(&repl["link"]),
                num(&repl["applied_lsn"]),
                repl["last_error"]
                    .as_str()
                    .filter(|e| !e.is_empty())
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default(),
            );
        }
        Some(_) => {
            let replicas = repl["replicas"].as_array().cloned().unwrap_or_default();
            let _ = writeln!(out, "replication primary, {} replicas", replicas.len());
            for r in &replicas {
                let _ = writeln!(
                    out,
                    "  replica   {} {}, acked LSN {}, lag {} bytes, {} ms",
                    num(&r["addr"]),
                    num(&r["state"]),
                    num(&r["acked_lsn"]),
                    num(&r["lag_bytes"]),
                    num(&r["lag_ms"]),
                );
            }
        }
        None => {}
    }
    out.push('\n');
    let rows: Vec<Vec<String>> = workers(v)
        .iter()
        .map(|w| {
            vec![
                num(&w["slot"]),
                num(&w["pid"]),
                num(&w["version"]),
                num(&w["state"]),
                duration(&w["uptime_s"]),
                num(&w["connections"]),
                num(&w["commands_per_sec"]),
                num(&w["restarts"]),
                num(&w["binary"]),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "SLOT", "PID", "VERSION", "STATE", "UPTIME", "CONNS", "CMDS/S", "RESTARTS", "BINARY",
        ],
        &rows,
    ));
    out
}

/// `shoal ctl upgrade` without `--json`.
/// Waits until the re-executed supervisor answers STATUS with every worker
/// back on its channel (its `workers_wanted` counts them); returns how
/// many serve.
fn await_new_supervisor(path: &Path, serve_hint: &str) -> Result<usize> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let status = Control::connect(path, serve_hint).and_then(|mut c| c.json(&[b"STATUS"]));
        if let Ok((_, v)) = status {
            if v["supervisor"]["reconnecting"] == 0 {
                let serving = workers(&v).iter().filter(|w| w["state"] == "serving");
                return Ok(serving.count());
            }
        }
        if std::time::Instant::now() > deadline {
            bail!("the supervisor did not come back within 60 s");
        }
    }
}

fn render_upgrade(v: &Value) -> String {
    let replaced = v["replaced"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = String::new();
    let mut total_ms = 0.0;
    for r in replaced {
        total_ms += r["ms"].as_f64().unwrap_or(0.0);
        let _ = writeln!(
            out,
            "pid {} (slot {}) -> pid {} (slot {}) in {} ms",
            num(&r["old_pid"]),
            num(&r["old_slot"]),
            num(&r["new_pid"]),
            num(&r["slot"]),
            num(&r["ms"]),
        );
    }
    let _ = writeln!(
        out,
        "upgraded {} worker{} to {} ({total_ms:.1} ms of replacements)",
        replaced.len(),
        if replaced.len() == 1 { "" } else { "s" },
        num(&v["binary"]),
    );
    out
}

/// The `workers` array of a status or exec reply.
fn workers(v: &Value) -> &[Value] {
    v["workers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// `shoal ctl exec` without `--json`.
fn render_exec(v: &Value) -> String {
    let rows: Vec<Vec<String>> = workers(v)
        .iter()
        .map(|w| {
            vec![
                num(&w["slot"]),
                num(&w["pid"]),
                w["start_offset_us"]
                    .as_f64()
                    .map_or("-".into(), |f| format!("{f:.2}")),
                match (w["reply"].as_str(), w["error"].as_str()) {
                    (Some(reply), _) => escape_controls(reply),
                    // A worker that did not answer in time.
                    (None, Some(e)) => format!("({e})"),
                    (None, None) => "-".into(),
                },
            ]
        })
        .collect();
    let mut out = table(&["SLOT", "PID", "START_OFFSET_US", "REPLY"], &rows);
    let _ = writeln!(
        out,
        "max skew: {} us ({}, at +{} ms)",
        v["max_skew_us"]
            .as_f64()
            .map_or("-".into(), |f| format!("{f:.2}")),
        num(&v["mode"]),
        num(&v["at_ms"]),
    );
    out
}

/// A reply as one line: CR, LF, tab and other control characters as
/// escapes, everything else as it is.
fn escape_controls(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

/// `shoal ctl snapshot`: SAVE on the Redis port, then the snapshot's start
/// LSN and duration from INFO.
fn snapshot(host: &str, port: u16) -> Result<()> {
    let reply = command(host, port, &["SAVE"])?;
    if let Some(err) = reply.strip_prefix('-') {
        return Err(anyhow!("the server refused: {err}"));
    }
    let info = command(host, port, &["INFO", "persistence"])?;
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .unwrap_or("?")
            .to_string()
    };
    println!(
        "snapshot written: start LSN {}, took {} s",
        field("shoal_snapshot_start_lsn"),
        field("rdb_last_bgsave_time_sec")
    );
    Ok(())
}

/// Sends one command to the Redis port and returns its reply: a simple
/// string or error as `+…`/`-…`, a bulk string as its text.
fn command(host: &str, port: u16, argv: &[&str]) -> Result<String> {
    let mut stream =
        TcpStream::connect((host, port)).with_context(|| format!("connect to {host}:{port}"))?;
    stream.set_read_timeout(Some(REPLY_TIMEOUT))?;
    let mut req = format!("*{}\r\n", argv.len());
    for a in argv {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    stream.write_all(req.as_bytes())?;
    let mut reader = BufReader::new(stream);
    Ok(match read_reply(&mut reader)? {
        Reply::Simple(s) => format!("+{s}"),
        Reply::Error(e) => format!("-{e}"),
        Reply::Int(n) => format!(":{n}"),
        Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
        Reply::Nil => String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(bytes: &[u8]) -> Result<Reply> {
        read_reply(&mut &bytes[..])
    }

    #[test]
    fn replies_parse_as_resp2() {
        assert_eq!(reply(b"+OK\r\n").unwrap(), Reply::Simple("OK".into()));
        assert_eq!(
            reply(b"-ERR no\r\n").unwrap(),
            Reply::Error("ERR no".into())
        );
        assert_eq!(reply(b":-3\r\n").unwrap(), Reply::Int(-3));
        assert_eq!(reply(b"$-1\r\n").unwrap(), Reply::Nil);
        assert_eq!(
            reply(b"$4\r\n{\r\n}\r\n").unwrap(),
            Reply::Bulk(b"{\r\n}".to_vec())
        );
        assert!(reply(b"").is_err());
        assert!(reply(b"+OK").is_err());
        assert!(reply(b"$5\r\nab\r\n").is_err());
        assert!(reply(b"*1\r\n").is_err());
    }

    #[test]
    fn at_takes_a_plus_or_not() {
        assert_eq!(parse_at("+100"), Ok(100));
        assert_eq!(parse_at("250"), Ok(250));
        assert!(parse_at("-5").is_err());
        assert!(parse_at("soon").is_err());
    }

    #[test]
    fn units_read_well() {
        assert_eq!(duration(&Value::from(12.34)), "12.3s");
        assert_eq!(duration(&Value::from(303)), "5m03s");
        assert_eq!(duration(&Value::from(7500.0)), "2h05m");
        assert_eq!(duration(&Value::from(273600)), "3d04h");
        assert_eq!(bytes(&Value::from(512)), "512 B");
        assert_eq!(bytes(&Value::from(64u64 << 20)), "64.0 MiB");
        assert_eq!(num(&Value::Null), "-");
        assert_eq!(num(&Value::from(250.0)), "250.0");
        assert_eq!(num(&Value::from(7)), "7");
    }

    #[test]
    fn status_renders_header_and_worker_table() {
        let v: Value = serde_json::from_str(
            r#"{"supervisor":{"pid":1,"version":"0.1.0","binary":"/bin/shoal","uptime_s":12.5,
                "balance":"reuseport","workers_wanted":2},
               "workers":[{"slot":0,"pid":123,"version":"0.1.0","binary":"/bin/shoal",
                 "state":"serving","uptime_s":12.3,"connections":5,"total_connections":10,
                 "commands":1000,"commands_per_sec":250.0,"restarts":0}],
               "memory":{"segment_bytes":67108864,"used_bytes":1234,"keys":10},
               "log":{"enabled":false}}"#,
        )
        .unwrap();
        let text = render_status(&v);
        assert!(text.starts_with(
            "supervisor  pid 1, version 0.1.0, up 12.5s, balance reuseport, 2 workers wanted\n"
        ));
        assert!(text.contains("memory      1.2 KiB used of a 64.0 MiB segment, 10 keys\n"));
        assert!(text.contains("log         off\n"));
        assert!(text.contains(
            "SLOT  PID  VERSION  STATE    UPTIME  CONNS  CMDS/S  RESTARTS  BINARY\n\
             0     123  0.1.0    serving  12.3s   5      250.0   0         /bin/shoal\n"
        ));
    }

    #[test]
    fn upgrade_lists_each_replacement() {
        let v: Value = serde_json::from_str(
            r#"{"binary":"/bin/shoal","replaced":[
                {"old_pid":1,"old_slot":0,"new_pid":2,"slot":2,"ms":20.25},
                {"old_pid":3,"old_slot":1,"new_pid":4,"slot":0,"ms":21.0}]}"#,
        )
        .unwrap();
        assert_eq!(
            render_upgrade(&v),
            "pid 1 (slot 0) -> pid 2 (slot 2) in 20.2 ms\n\
             pid 3 (slot 1) -> pid 4 (slot 0) in 21.0 ms\n\
             upgraded 2 workers to /bin/shoal (41.2 ms of replacements)\n"
        );
    }

    #[test]
    fn exec_shows_replies_escaped() {
        let v: Value = serde_json::from_str(
            r#"{"mode":"spin","at_ms":100,"workers":[
                {"slot":0,"pid":9,"start_offset_us":1.25,"reply":"-ERR 'x'\r\n"},
                {"slot":1,"pid":10,"error":"no reply"}],"max_skew_us":2.5}"#,
        )
        .unwrap();
        assert_eq!(
            render_exec(&v),
            "SLOT  PID  START_OFFSET_US  REPLY\n\
             0     9    1.25             -ERR 'x'\\r\\n\n\
             1     10   -                (no reply)\n\
             max skew: 2.50 us (spin, at +100 ms)\n"
        );
    }
}
