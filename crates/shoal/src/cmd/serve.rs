//! `shoal serve` (the supervisor) and `shoal worker` (one worker process, as
//! the supervisor starts it).

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;
use engine::startup::StartupConfig;
use engine::Config;
use server::{ServeOptions, WorkerOptions};

use super::redis_start::ServeCommandLine;
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
    /// UDP port for memcached clients (0 turns it off). Default 11211 on a
    /// loopback bind; off on any other bind unless given (UDP replies can
    /// amplify a spoofed request, as memcached 1.5.6 warns).
    #[arg(long)]
    memcached_udp_port: Option<u16>,
    /// TCP port for HTTP and WebSocket clients (0 turns it off).
    #[arg(long, default_value_t = 8080)]
    http_port: u16,
    /// TCP port for NATS clients (0 turns it off).
    #[arg(long, default_value_t = 4222)]
    nats_port: u16,
    /// Largest NATS message payload in bytes (nats-server's max_payload).
    #[arg(long, default_value_t = 1 << 20)]
    nats_max_payload: u64,
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

/// Whether a bind address is the loopback interface only.
fn is_loopback(bind: &str) -> bool {
    bind == "localhost"
        || bind
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl NetArgs {
    fn config(&self, workers: u32) -> Config {
        Config {
            port: self.port,
            memcached_port: self.memcached_port,
            memcached_udp_port: self
                .memcached_udp_port
                .unwrap_or(if is_loopback(&self.bind) { 11211 } else { 0 }),
            http_port: self.http_port,
            nats_port: self.nats_port,
            nats_max_payload: self.nats_max_payload,
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
#[derive(Args, Clone)]
pub struct ServeArgs {
    /// A redis.conf-style file, as redis-server's first argument; any
    /// Redis parameter may also be given as `--name value...` (see
    /// [`split_args`]).
    #[arg(value_name = "CONFIG_FILE")]
    config_file: Option<PathBuf>,
    /// The same as the CONFIG_FILE argument.
    #[arg(long = "config", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Worker processes: a number or `auto` (one per core).
    #[arg(long, default_value = "auto")]
    workers: String,
    #[command(flatten)]
    net: NetArgs,
    #[command(flatten)]
    segment: SegmentArgs,
    /// Directory of the transaction log and snapshots; persistence is off
    /// without it. Started the Redis way, `--dir` is Redis's working
    /// directory and this is `--log-dir`.
    #[arg(long, visible_alias = "log-dir")]
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
    /// Follow the primary at HOST:PORT as a read-only replica
    /// (docs/replication.md); REPLICAOF NO ONE promotes it.
    #[arg(long)]
    replicaof: Option<String>,
}

/// Parses `HOST:PORT` or `HOST PORT` (the configuration file's form).
fn parse_replicaof(s: &str) -> Result<(String, u16)> {
    let (host, port) = s
        .trim()
        .rsplit_once([':', ' '])
        .ok_or_else(|| anyhow!("--replicaof takes HOST:PORT, not {s:?}"))?;
    let port = port
        .trim()
        .parse()
        .map_err(|_| anyhow!("--replicaof takes HOST:PORT, not {s:?}"))?;
    Ok((host.trim().to_string(), port))
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
    /// The configuration file the server started from (CONFIG REWRITE).
    #[arg(long)]
    config_file: Option<PathBuf>,
    #[command(flatten)]
    net: NetArgs,
}

/// Runs `shoal serve`.
pub fn run(args: ServeArgs, line: ServeCommandLine) -> Result<()> {
    let workers = |text: &str| -> Result<u32> {
        match text {
            "auto" => Ok(std::thread::available_parallelism().map_or(1, |n| n.get() as u32)),
            n => n
                .parse()
                .map_err(|_| anyhow!("--workers takes a number or auto, not {n:?}")),
        }
    };
    let balance = server::Balance::from_name(&args.balance).ok_or_else(|| {
        anyhow!(
            "--balance takes reuseport or shared, not {:?}",
            args.balance
        )
    })?;
    if !line.redis_mode {
        let workers = workers(&args.workers)?;
        let opts = args.segment.options(true)?;
        return Ok(server::serve(ServeOptions {
            balance,
            workers,
            location: opts.location,
            memory: opts.size,
            config: args.net.config(workers),
            persist: args.persist()?,
            startup: None,
            unixsocket_perm: None,
            replicaof: args.replicaof.as_deref().map(parse_replicaof).transpose()?,
        })?);
    }
    // Named before `dir` may change the working directory.
    let config_file = args
        .config
        .as_ref()
        .or(args.config_file.as_ref())
        .and_then(|p| std::fs::canonicalize(p).ok())
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let start = redis_way(&args, &line)?;
    let workers = match (line.given("workers"), start.get("workers")) {
        (false, Some(n)) => workers(n)?,
        _ => workers(&args.workers)?,
    };
    let mut config = args.net.config(workers);
    config.config_file = config_file;
    apply_listeners(&mut config, &start, &line);
    let mut segment = args.segment.clone();
    if !line.given("name") && !line.given("segment") {
        segment.name = segment_name(config.port, start.get("dir").is_some());
    }
    let opts = segment.options(true)?;
    let persist = redis_persist(&args, &start)?;
    let pidfile = start
        .get("pidfile")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    if let Some(path) = &pidfile {
        if let Err(e) = std::fs::write(path, format!("{}\n", std::process::id())) {
            log('#', &format!("Failed to write PID file: {e}"));
        }
    }
    let unixsocket_perm = start
        .get("unixsocketperm")
        .and_then(|m| u32::from_str_radix(m, 8).ok())
        .filter(|m| *m != 0);
    let replicaof = match args.replicaof.as_deref() {
        Some(r) => Some(r.to_string()),
        None => start.get("replicaof").map(str::to_string),
    }
    .filter(|r| !r.trim().is_empty())
    .as_deref()
    .map(parse_replicaof)
    .transpose()?;
    let result = server::serve(ServeOptions {
        balance,
        workers,
        location: opts.location,
        memory: opts.size,
        config,
        persist,
        startup: Some(start),
        unixsocket_perm,
        replicaof,
    });
    if let Some(path) = &pidfile {
        let _ = std::fs::remove_file(path);
    }
    Ok(result?)
}

/// The segment of a server started the Redis way: `shoal-<port>`, so
/// several run side by side, and with `dir` given also a hash of the
/// working directory, so that (as for redis-server, whose data lives in
/// `dir`) a server started in a fresh directory starts empty and one
/// started again in the same directory finds its data.
fn segment_name(port: u16, with_dir: bool) -> String {
    let dir = std::env::current_dir().ok().filter(|_| with_dir);
    match dir {
        Some(dir) => {
            // FNV-1a: stable across builds and versions.
            let hash = dir
                .as_os_str()
                .as_encoded_bytes()
                .iter()
                .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                    (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
                });
            format!("shoal-{port}-{:08x}", hash as u32)
        }
        None => format!("shoal-{port}"),
    }
}

/// One redis-server style log line on stdout (before the configuration
/// is in force, as Redis marks them).
fn log(level: char, text: &str) {
    server::redislog::log('C', level, text);
}

/// Reads the configuration file and options, exits as redis-server does on
/// a bad one, and applies what must happen before anything else: the
/// working directory (`dir`) and the log file (`logfile`).
fn redis_way(args: &ServeArgs, line: &ServeCommandLine) -> Result<StartupConfig> {
    let file = match args.config.as_ref().or(args.config_file.as_ref()) {
        Some(path) => match std::fs::read(path) {
            Ok(text) => text,
            Err(e) => {
                log(
                    '#',
                    &format!(
                        "Fatal error, can't open config file '{}': {e}",
                        path.display()
                    ),
                );
                std::process::exit(1);
            }
        },
        None => Vec::new(),
    };
    let options = engine::startup::options_text(&line.redis_args);
    let start = match StartupConfig::parse(&file, &options) {
        Ok(start) => start,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    if let Some(logfile) = start.get("logfile").filter(|f| !f.is_empty()) {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logfile);
        match file {
            Ok(file) => {
                rustix::stdio::dup2_stdout(&file).map_err(|e| anyhow!("log to {logfile}: {e}"))?
            }
            Err(e) => {
                eprintln!(
                    "{}",
                    engine::startup::ConfigError {
                        line: None,
                        reason: format!("Can't open the log file: {e}"),
                    }
                );
                std::process::exit(1);
            }
        }
    }
    log('#', "oO0OoO0OoO0Oo shoal is starting oO0OoO0OoO0Oo");
    log(
        '#',
        &format!(
            "shoal version={}, Redis {} compatible, pid={}, just started",
            env!("CARGO_PKG_VERSION"),
            engine::startup::REDIS_VERSION,
            std::process::id()
        ),
    );
    log('#', "Configuration loaded");
    if let Some(dir) = start.get("dir") {
        if let Err(e) = std::env::set_current_dir(dir) {
            log('#', &format!("Can't chdir to '{dir}': {e}"));
            std::process::exit(1);
        }
    }
    Ok(start)
}

/// Listener settings from the configuration; memcached and HTTP stay off
/// unless asked for, so servers started side by side do not clash.
fn apply_listeners(config: &mut Config, start: &StartupConfig, line: &ServeCommandLine) {
    let number = |name: &str| start.get(name).and_then(|v| v.parse::<u64>().ok());
    let port = |name: &str, current: u16| {
        number(name).map_or(if line.given(name) { current } else { 0 }, |p| p as u16)
    };
    config.memcached_port = port("memcached-port", config.memcached_port);
    config.memcached_udp_port = port("memcached-udp-port", config.memcached_udp_port);
    config.http_port = port("http-port", config.http_port);
    config.nats_port = port("nats-port", config.nats_port);
    if let Some(n) = number("nats-max-payload") {
        config.nats_max_payload = n;
    }
    if let Some(p) = number("port") {
        config.port = p as u16;
    }
    if let Some(p) = number("tls-port") {
        config.tls_port = p as u16;
    }
    if let Some(n) = number("item-size-max") {
        config.item_size_max = n;
    }
    if let Some(n) = number("hz") {
        config.hz = n;
    }
    if let Some(n) = number("maxclients") {
        config.maxclients = n;
    }
    if let Some(path) = start.get("unixsocket") {
        config.unixsocket = path.to_string();
    }
    if let Some((addr, left_out)) = start.listen_address() {
        if !left_out.is_empty() {
            log(
                '#',
                &format!(
                    "shoal listens on one address: {addr} (not {})",
                    left_out.join(", ")
                ),
            );
        }
        config.bind = addr;
    }
}

/// Persistence started the Redis way: `--log-dir`, else `appendonly yes`
/// logs into `<dir>/<appenddirname>`; `appendfsync` and the shortest
/// `save` interval (as the snapshot interval) apply to it.
fn redis_persist(
    args: &ServeArgs,
    start: &StartupConfig,
) -> Result<Option<server::persistence::PersistOptions>> {
    let mut args = args.clone();
    if args.dir.is_none() && start.get("appendonly") == Some("yes") {
        args.dir = Some(PathBuf::from(
            start.get("appenddirname").unwrap_or("appendonlydir"),
        ));
    }
    if let Some(policy) = start.get("appendfsync") {
        args.appendfsync = policy.to_string();
    }
    if args.snapshot_every == "0" {
        let seconds = start.get("save").and_then(|save| {
            save.split_whitespace()
                .step_by(2)
                .filter_map(|s| s.parse::<u64>().ok())
                .min()
        });
        if let Some(s) = seconds {
            args.snapshot_every = s.to_string();
        }
    }
    args.persist()
}

/// Runs `shoal worker`.
pub fn run_worker(args: WorkerArgs) -> Result<()> {
    // A worker whose supervisor dies drains and exits rather than linger.
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))?;
    let mut config = args.net.config(0);
    config.config_file = args
        .config_file
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    server::run_worker(WorkerOptions {
        slot: args.slot,
        segment: args.segment,
        config,
    })?;
    Ok(())
}
