//! `shoal ctl`: operations on a running server.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};

/// Arguments of `shoal ctl`.
#[derive(Args)]
pub struct CtlArgs {
    /// The server's Redis port.
    #[arg(long, default_value_t = 6379, global = true)]
    port: u16,
    /// The server's address.
    #[arg(long, default_value = "127.0.0.1", global = true)]
    host: String,
    #[command(subcommand)]
    command: CtlCommand,
}

#[derive(Subcommand)]
enum CtlCommand {
    /// Takes a snapshot now and waits until it is written (Redis's SAVE,
    /// which in shoal never pauses writers).
    Snapshot,
}

/// Runs `shoal ctl`.
pub fn run(args: CtlArgs) -> Result<()> {
    match args.command {
        CtlCommand::Snapshot => {
            let reply = command(&args.host, args.port, &["SAVE"])?;
            if let Some(err) = reply.strip_prefix('-') {
                return Err(anyhow!("the server refused: {err}"));
            }
            let info = command(&args.host, args.port, &["INFO", "persistence"])?;
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
    }
}

/// Sends one command and returns its reply: a simple string or error as
/// `+…`/`-…`, a bulk string as its text.
fn command(host: &str, port: u16, argv: &[&str]) -> Result<String> {
    let mut stream =
        TcpStream::connect((host, port)).with_context(|| format!("connect to {host}:{port}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(900)))?;
    let mut req = format!("*{}\r\n", argv.len());
    for a in argv {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    stream.write_all(req.as_bytes())?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let line = line.trim_end().to_string();
    match line.chars().next() {
        Some('+') | Some('-') | Some(':') => Ok(line),
        Some('$') | Some('=') => {
            let len: usize = line[1..].parse().context("bad reply length")?;
            let mut body = vec![0u8; len + 2];
            std::io::Read::read_exact(&mut reader, &mut body)?;
            body.truncate(len);
            Ok(String::from_utf8_lossy(&body).into_owned())
        }
        _ => Err(anyhow!("unexpected reply {line:?}")),
    }
}
