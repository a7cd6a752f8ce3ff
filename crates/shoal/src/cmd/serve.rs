//! `shoal serve` (the supervisor) and `shoal worker` (one worker process, as
//! the supervisor starts it).

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;
use engine::Config;
use server::{ServeOptions, WorkerOptions};

use super::SegmentArgs;

/// Settings shared by `serve` and `worker`.
#[derive(Args, Clone, Debug)]
pub struct NetArgs {
    /// TCP port for Redis clients (0 turns it off).
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// TCP port for memcached clients: text, meta and binary (0 turns it off).
    #[arg(long, default_value_t = 11211)]
    memcached_port: u16,
    /// UDP port for memcached clients (0 turns it off).
    #[arg(long, default_value_t = 11211)]
    memcached_udp_port: u16,
    /// TCP port for HTTP and WebSocket clients (0 turns it off).
    #[arg(long, default_value_t = 8080)]
    http_port: u16,
    /// Largest memcached item in bytes (memcached's -I; default 1 MiB).
    #[arg(long, default_value_t = 1 << 20)]
    item_size_max: u64,
    /// Address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Also listen on this Unix socket.
    #[arg(long)]
    unixsocket: Option<PathBuf>,
    /// Active expiry passes per second (Redis's `hz`).
    #[arg(long, default_value_t = 10)]
    hz: u64,
    /// Most clients per worker.
    #[arg(long, default_value_t = 10_000)]
    maxclients: u64,
}

impl NetArgs {
    fn config(&self, workers: u32) -> Config {
        Config {
            port: self.port,
            memcached_port: self.memcached_port,
            memcached_udp_port: self.memcached_udp_port,
            http_port: self.http_port,
            item_size_max: self.item_size_max,
            bind: self.bind.clone(),
            unixsocket: self
                .unixsocket
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            hz: self.hz,
            maxclients: self.maxclients,
            workers: workers as u64,
            ..Config::default()
        }
    }
}

/// Arguments of `shoal serve`.
#[derive(Args)]
pub struct ServeArgs {
    /// Worker processes: a number or `auto` (one per core).
    #[arg(long, default_value = "auto")]
    workers: String,
    #[command(flatten)]
    net: NetArgs,
    #[command(flatten)]
    segment: SegmentArgs,
    /// Directory of the transaction log and snapshots; persistence is off
    /// without it.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// When the log is fsynced: always (before each reply), everysec, no.
    #[arg(long, default_value = "everysec")]
    appendfsync: String,
    /// Take a snapshot this often (5m, 30s, 1h; 0 = never).
    #[arg(long, default_value = "0")]
    snapshot_every: String,
    /// Take a snapshot after this much log (256m, 1g; 0 = never).
    #[arg(long, default_value = "0")]
    snapshot_log_size: String,
    /// Log files to keep from before the newest snapshot.
    #[arg(long, default_value_t = 0)]
    keep_logs: usize,
    /// Start a new log file past this size.
    #[arg(long, default_value = "64m")]
    log_file_size: String,
    /// How connections are spread: reuseport (a listener per worker, the
    /// kernel hashes each connection to one) or shared (one accept queue;
    /// only a worker that is free accepts, so a blocked one takes no one).
    #[arg(long, default_value = "reuseport")]
    balance: String,
}

/// Parses `90`, `30s`, `5m`, `2h` (seconds by default; 0 = never).
fn parse_interval(s: &str) -> Result<Option<std::time::Duration>> {
    let (num, unit) = match s.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| anyhow!("bad interval {s:?}: use a number with s, m or h"))?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(anyhow!("bad interval {s:?}: use a number with s, m or h")),
    };
    Ok((secs > 0).then(|| std::time::Duration::from_secs(secs)))
}

impl ServeArgs {
    fn persist(&self) -> Result<Option<server::persistence::PersistOptions>> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        let size = |what: &str, s: &str| {
            ::store::parse_size(s)
                .or_else(|| (s == "0").then_some(0))
                .ok_or_else(|| anyhow!("bad {what} {s:?}: use a number with k, m or g"))
        };
        Ok(Some(server::persistence::PersistOptions {
            dir: dir.clone(),
            policy: ::store::log::FsyncPolicy::from_name(&self.appendfsync).ok_or_else(|| {
                anyhow!(
                    "--appendfsync takes always, everysec or no, not {:?}",
                    self.appendfsync
                )
            })?,
            snapshot_every: parse_interval(&self.snapshot_every)?,
            snapshot_log_bytes: size("--snapshot-log-size", &self.snapshot_log_size)?,
            keep_logs: self.keep_logs,
            log_file_size: size("--log-file-size", &self.log_file_size)?.max(4096),
        }))
    }
}

/// Arguments of `shoal worker` (started by `shoal serve`).
#[derive(Args)]
pub struct WorkerArgs {
    /// Registry slot.
    #[arg(long)]
    slot: u32,
    /// The segment file.
    #[arg(long)]
    segment: PathBuf,
    #[command(flatten)]
    net: NetArgs,
}

/// Runs `shoal serve`.
pub fn run(args: ServeArgs) -> Result<()> {
    let workers = match args.workers.as_str() {
        "auto" => std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        n => n
            .parse()
            .map_err(|_| anyhow!("--workers takes a number or auto, not {n:?}"))?,
    };
    let opts = args.segment.options(true)?;
    let persist = args.persist()?;
    let balance = server::Balance::from_name(&args.balance).ok_or_else(|| {
        anyhow!(
            "--balance takes reuseport or shared, not {:?}",
            args.balance
        )
    })?;
    server::serve(ServeOptions {
        balance,
        workers,
        location: opts.location,
        memory: opts.size,
        config: args.net.config(workers),
        persist,
    })?;
    Ok(())
}

/// Runs `shoal worker`.
pub fn run_worker(args: WorkerArgs) -> Result<()> {
    // A worker whose supervisor dies drains and exits rather than linger.
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))?;
    server::run_worker(WorkerOptions {
        slot: args.slot,
        segment: args.segment,
        config: args.net.config(0),
    })?;
    Ok(())
}
