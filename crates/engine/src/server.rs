//! Server commands: INFO, CONFIG, COMMAND, TIME, SHUTDOWN.

use std::fmt::Write as _;

use store::{glob::glob_match, EvictionPolicy};

use crate::command::{self, dispatch_sub, flags::*, Arg, CmdResult, Command};
use crate::config::{params, word};
use crate::connection::REDIS_VERSION;
use crate::engine::{Cx, Engine, Flow, ServerRequest};
use crate::error::CmdError;
use crate::keyspec;
use crate::parse;
use crate::stats::CommandStats;

crate::command::group_cmd!("server", keys = (0, 0, 0), since = "1.0.0");

const CONFIG_SUBCOMMANDS: &[Command] = &[
    cmd(
        "config|get",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Get the values of configuration parameters",
        config_get,
    ),
    cmd(
        "config|set",
        -4,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Set configuration parameters to the given values",
        config_set,
    ),
    cmd(
        "config|resetstat",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Reset the stats returned by INFO",
        config_resetstat,
    ),
    cmd(
        "config|rewrite",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Rewrite the configuration file with the in memory configuration",
        config_rewrite,
    ),
    cmd(
        "config|help",
        2,
        LOADING | STALE,
        "Show helpful text about the different subcommands",
        config_help,
    ),
];

const COMMAND_SUBCOMMANDS: &[Command] = &[
    cmd(
        "command|count",
        2,
        LOADING | STALE,
        "Get total number of Redis commands",
        command_count,
    ),
    cmd(
        "command|info",
        -2,
        LOADING | STALE,
        "Get array of specific Redis command details, or all when no argument is given.",
        command_info,
    ),
    cmd(
        "command|docs",
        -2,
        LOADING | STALE,
        "Get array of specific Redis command documentation",
        command_docs,
    ),
    cmd(
        "command|list",
        -2,
        LOADING | STALE,
        "Get an array of Redis command names",
        command_list,
    ),
    cmd(
        "command|getkeys",
        -4,
        LOADING | STALE,
        "Extract keys given a full Redis command",
        command_getkeys,
    ),
    cmd(
        "command|getkeysandflags",
        -4,
        LOADING | STALE,
        "Extract keys and access flags given a full Redis command",
        command_getkeysandflags,
    ),
    cmd(
        "command|help",
        2,
        LOADING | STALE,
        "Show helpful text about the different subcommands",
        command_help,
    ),
];

#[rustfmt::skip]
const MODULE_SUBCOMMANDS: &[Command] = &[
    cmd("module|list", 2, ADMIN | NOSCRIPT, "List all modules loaded by the server", module_list),
    cmd("module|load", -3, ADMIN | NOSCRIPT, "Load a module", module_load),
    cmd("module|loadex", -3, ADMIN | NOSCRIPT, "Load a module with extended parameters", module_load),
    cmd("module|unload", 3, ADMIN | NOSCRIPT, "Unload a module", module_unload),
    cmd("module|help", 2, LOADING | STALE, "Show helpful text about the different subcommands", module_help),
];

/// The server commands.
pub(crate) const COMMANDS: &[Command] = &[
    cmd(
        "info",
        -1,
        LOADING | STALE,
        "Get information and statistics about the server",
        info,
    ),
    Command {
        subcommands: CONFIG_SUBCOMMANDS,
        ..cmd(
            "config",
            -2,
            0,
            "A container for server configuration commands",
            config,
        )
    },
    Command {
        subcommands: COMMAND_SUBCOMMANDS,
        ..cmd(
            "command",
            -1,
            LOADING | STALE,
            "Get array of Redis command details",
            command_cmd,
        )
    },
    cmd(
        "lolwut",
        -1,
        READONLY | FAST,
        "Display some computer art and the Redis version",
        lolwut,
    ),
    cmd(
        "role",
        1,
        NOSCRIPT | LOADING | STALE | FAST,
        "Return the role of the instance in the context of replication",
        crate::replication::role,
    ),
    Command {
        subcommands: MODULE_SUBCOMMANDS,
        ..cmd("module", -2, 0, "A container for module commands", module)
    },
    cmd(
        "time",
        1,
        LOADING | STALE | FAST,
        "Return the current server time",
        time,
    ),
    cmd(
        "shutdown",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY,
        "Synchronously save the dataset to disk and then shut down the server",
        shutdown,
    ),
];

fn module(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let parent = command::lookup(b"module").expect("MODULE is in the table");
    dispatch_sub(cx, parent, args)
}

/// MODULE LIST: shoal loads no Redis modules (their API is redis-server's
/// own C interface), so the list is empty and LOAD fails as a module that
/// cannot be loaded does in Redis.
fn module_list(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    cx.out.array_len(0);
    Ok(())
}

/// LOAD, LOADEX and UNLOAD are protected, as in Redis: refused unless
/// `enable-module-command` allows them.
fn module_allowed(cx: &Cx<'_>) -> Result<(), CmdError> {
    match text_setting(cx.engine, "enable-module-command").as_str() {
        "yes" | "local" => Ok(()),
        _ => Err(CmdError::msg(
            "ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.",
        )),
    }
}

fn module_load(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    module_allowed(cx)?;
    Err(CmdError::msg(
        "ERR Error loading the extension. Please check the server logs.",
    ))
}

fn module_unload(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    module_allowed(cx)?;
    Err(CmdError::msg(
        "ERR Error unloading module: no such module with that name",
    ))
}

fn module_help(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    command::reply_help(
        cx,
        &[
            "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
            "HELP",
            "    Print this help.",
        ],
    )
}

/// LOLWUT [VERSION v]: a shoal of fish, a different school for each
/// version asked, then the version line.
fn lolwut(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    // VERSION v, then that version's own parameters (accepted as Redis does).
    let version = match &args[1..] {
        [] => 7,
        [word, v, ..] if parse::is(word, "version") => parse::int(v)?,
        _ => return Err(CmdError::syntax()),
    };
    let mut text = String::new();
    let (rows, cols) = (8u64, 12u64);
    for row in 0..rows {
        for col in 0..cols {
            // A fixed pseudo-random school: the same picture for a version.
            let h = (row * 31 + col * 17 + version as u64 * 7).wrapping_mul(2654435761) >> 7;
            text.push_str(match h % 5 {
                0 => " ><> ",
                1 => " <>< ",
                _ => "     ",
            });
        }
        text.push('\n');
    }
    text.push_str(&format!(
        "\nA shoal, version {version}. shoal ver. {}, Redis ver. {REDIS_VERSION}\n",
        env!("CARGO_PKG_VERSION")
    ));
    cx.out.verbatim(b"txt", text.as_bytes());
    Ok(())
}

fn time(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    cx.out.array_len(2);
    cx.out.bulk(now.as_secs().to_string().as_bytes());
    cx.out.bulk(now.subsec_micros().to_string().as_bytes());
    Ok(())
}

fn shutdown(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    // NOSAVE / SAVE / NOW / FORCE / ABORT: there is nothing to save yet.
    for a in &args[1..] {
        if !["nosave", "save", "now", "force"]
            .iter()
            .any(|w| parse::is(a, w))
        {
            return Err(CmdError::syntax());
        }
    }
    // A busy script of another worker: only SHUTDOWN NOSAVE goes on, and
    // it stops the script.
    let nosave = args[1..].iter().any(|a| parse::is(a, "nosave"));
    crate::scripting::busy::shutdown(
        &cx.engine.store,
        cx.engine.info.worker,
        cx.engine.config.busy_reply_threshold,
        nosave,
    )?;
    cx.flow = Flow::Server(ServerRequest::Shutdown);
    Ok(())
}

// ---------- INFO ----------

/// INFO with no argument (or `default`): Redis 7.0's default sections, then
/// shoal's `workers`.
const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
    "workers",
];

/// Every section, in the order INFO prints them (`all`, `everything`).
const ALL_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
    "workers",
];

/// INFO asks every worker for its per-command counters (see
/// `diagnostics.rs`), then [`info_text`] prints the sections.
fn info(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let asked: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    crate::diagnostics::info_gather(cx, &asked);
    Ok(())
}

/// INFO's text for the sections `asked` (none: the default ones), with the
/// whole server's per-command counters `stats`.
pub(crate) fn info_text(e: &mut Engine, asked: &[String], stats: &CommandStats) -> String {
    let mut wanted: Vec<&str> = Vec::new();
    if asked.is_empty() {
        wanted.extend(DEFAULT_SECTIONS);
    }
    for a in asked {
        match a.to_ascii_lowercase().as_str() {
            "default" => wanted.extend(DEFAULT_SECTIONS),
            "all" | "everything" => wanted.extend(ALL_SECTIONS),
            other => wanted.extend(ALL_SECTIONS.iter().filter(|s| **s == other)),
        }
    }
    // The segment's figures and the registry are read once for all sections.
    let store_info = e.store.info().ok();
    let workers = e.store.workers().unwrap_or_default();
    let mut text = String::new();
    for section in ALL_SECTIONS {
        if wanted.contains(section) {
            if !text.is_empty() {
                text.push_str("\r\n");
            }
            info_section(e, stats, &store_info, &workers, section, &mut text);
        }
    }
    text
}

fn human(bytes: u64) -> String {
    let units = ["B", "K", "M", "G", "T"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < units.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes}B")
    } else {
        format!("{v:.2}{}", units[u])
    }
}

/// CPU seconds of this process and of its waited-for children (user,
/// system, children's user, children's system), from /proc/self/stat.
fn cpu_seconds() -> [f64; 4] {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    [tick(11), tick(12), tick(13), tick(14)]
}

/// A setting kept in the shared setting text, or its default.
fn text_setting(e: &Engine, name: &str) -> String {
    let overrides = e
        .store
        .config_text()
        .map(|t| params::Overrides::parse(&t))
        .unwrap_or_default();
    overrides
        .get(name)
        .map(str::to_string)
        .or_else(|| params::find(name.as_bytes()).map(|p| p.default.to_string()))
        .unwrap_or_default()
}

fn info_section(
    e: &mut Engine,
    cmdstats: &CommandStats,
    store_info: &Option<store::StoreInfo>,
    workers: &[store::WorkerInfo],
    section: &str,
    s: &mut String,
) {
    let now_ms = e.now_ms();
    let base = |w| e.store.config_word(w).unwrap_or(0);
    let stat = |name: &str| {
        store_info
            .as_ref()
            .and_then(|i| i.stats.iter().find(|(n, _)| *n == name).map(|(_, v)| *v))
            .unwrap_or(0)
    };
    match section {
        "server" => {
            let uptime = e.started.elapsed().as_secs();
            let _ = write!(
                s,
                "# Server\r\nredis_version:{REDIS_VERSION}\r\nshoal_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_mode:standalone\r\nos:{} {}\r\narch_bits:64\r\nmultiplexing_api:epoll\r\nprocess_id:{}\r\nprocess_supervised:no\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:{}\r\nconfigured_hz:{}\r\nlru_clock:{}\r\nexecutable:{}\r\nconfig_file:{}\r\nio_threads_active:0\r\nshoal_worker:{}\r\n",
                env!("CARGO_PKG_VERSION"),
                std::env::consts::OS,
                std::env::consts::ARCH,
                std::process::id(),
                e.info.run_id,
                e.config.port,
                now_ms * 1000,
                uptime / 86400,
                e.config.hz,
                e.config.hz,
                (now_ms / 1000) & ((1 << 24) - 1),
                e.info.executable,
                e.info.config_file,
                e.info.worker,
            );
        }
        "clients" => {
            let tracking_clients = e.tracking_totals()[0];
            let connected: u64 = workers.iter().map(|w| w.connections).sum();
            let blocked: u64 = workers.iter().map(|w| w.blocked).sum();
            let _ = write!(
                s,
                "# Clients\r\nconnected_clients:{connected}\r\ncluster_connections:0\r\nmaxclients:{}\r\nblocked_clients:{blocked}\r\ntracking_clients:{tracking_clients}\r\nclients_in_timeout_table:0\r\n",
                e.config.maxclients
            );
        }
        "memory" => {
            let (used, total, seg) = store_info.as_ref().map_or((0, 0, 0), |i| {
                (i.arena.used_bytes, i.arena.total_bytes, i.segment_bytes)
            });
            let maxmemory = store_info.as_ref().map_or(0, |i| i.maxmemory);
            let policy = store_info
                .as_ref()
                .map_or(EvictionPolicy::NoEviction, |i| i.policy);
            // used_memory is what maxmemory limits: the arena's bytes in use
            // (values, overflow nodes), as Redis's used_memory less what it
            // does not count for eviction, so used_memory stays under
            // maxmemory as tools and Redis's tests expect. The segment's
            // fixed structures (header, contexts, mailboxes, log ring, the
            // index sized to the segment) are reserved at creation whatever
            // the data: shoal_fixed_bytes, outside used_memory.
            let fixed = seg.saturating_sub(total);
            // Client buffers count too (Redis's used_memory does): what
            // each worker last published for its clients.
            let clients: u64 = workers.iter().map(|w| w.client_memory).sum();
            let used = used + clients;
            // Values UNLINK, FLUSH ASYNC and the lazyfree-lazy-* settings
            // detached and their workers have not wholly freed yet, and
            // those freed since (collections/paged.rs in the store).
            let pending = e.h.lazy_free_pending().unwrap_or(0);
            let freed = stat("lazyfreed_objects").saturating_sub(base(word::BASE_LAZYFREED));
            let _ = write!(
                s,
                "# Memory\r\nused_memory:{}\r\nused_memory_human:{}\r\nused_memory_overhead:{clients}\r\nused_memory_dataset:{}\r\nmaxmemory:{maxmemory}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\nmem_not_counted_for_evict:0\r\nmem_clients_slaves:0\r\nmem_clients_normal:{clients}\r\nlazyfree_pending_objects:{pending}\r\nlazyfreed_objects:{freed}\r\nshoal_segment_bytes:{seg}\r\nshoal_arena_bytes:{total}\r\nshoal_fixed_bytes:{fixed}\r\nmem_allocator:shoal-tlsf\r\n",
                used,
                human(used),
                used - clients,
                human(maxmemory),
                policy.name()
            );
            crate::scripting::info_memory(&e.store, s);
        }
        "stats" => {
            let conns: u64 = workers.iter().map(|w| w.total_connections).sum();
            let cmds: u64 = workers.iter().map(|w| w.commands).sum();
            let (channels, patterns, shard) = e.pubsub.info_counts();
            let [_, tracking_keys, tracking_items, tracking_prefixes] = e.tracking_totals();
            let _ = write!(
                s,
                "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\nrejected_connections:0\r\nexpired_keys:{}\r\nevicted_keys:{}\r\nevicted_clients:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:{channels}\r\npubsub_patterns:{patterns}\r\npubsubshard_channels:{shard}\r\nmigrate_cached_sockets:0\r\ntracking_total_keys:{tracking_keys}\r\ntracking_total_items:{tracking_items}\r\ntracking_total_prefixes:{tracking_prefixes}\r\ntotal_error_replies:{}\r\n",
                conns.saturating_sub(base(word::BASE_CONNECTIONS)),
                cmds.saturating_sub(base(word::BASE_COMMANDS)),
                stat("expired_keys").saturating_sub(base(word::BASE_EXPIRED)),
                stat("evicted_keys").saturating_sub(base(word::BASE_EVICTED)),
                // CONFIG RESETSTAT takes it off each worker's counter.
                workers.iter().map(|w| w.evicted_clients).sum::<u64>(),
                stat("keyspace_hits").saturating_sub(base(word::BASE_HITS)),
                stat("keyspace_misses").saturating_sub(base(word::BASE_MISSES)),
                cmdstats.total_errors(),
            );
        }
        "persistence" => crate::persistence::info_section(e, s),
        "replication" => crate::replication::info_section(e, s),
        "cpu" => {
            let [user, sys, child_user, child_sys] = cpu_seconds();
            let _ = write!(
                s,
                "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:{child_sys:.6}\r\nused_cpu_user_children:{child_user:.6}\r\nused_cpu_sys_main_thread:{sys:.6}\r\nused_cpu_user_main_thread:{user:.6}\r\n"
            );
        }
        "modules" => s.push_str("# Modules\r\n"),
        "commandstats" => cmdstats.write_commandstats(s),
        "errorstats" => cmdstats.write_errorstats(s),
        "latencystats" => {
            let percentiles: Vec<f64> = if text_setting(e, "latency-tracking") == "yes" {
                text_setting(e, "latency-tracking-info-percentiles")
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            } else {
                Vec::new()
            };
            cmdstats.write_latencystats(&percentiles, s);
        }
        "cluster" => s.push_str("# Cluster\r\ncluster_enabled:0\r\n"),
        "keyspace" => {
            s.push_str("# Keyspace\r\n");
            if let Some(i) = &store_info {
                for (db, (keys, expires)) in i.keyspace.iter().enumerate() {
                    if *keys > 0 {
                        let avg_ttl = if *expires > 0 {
                            sample_avg_ttl(e, db as u8)
                        } else {
                            0
                        };
                        let _ = write!(
                            s,
                            "db{db}:keys={keys},expires={expires},avg_ttl={avg_ttl}\r\n"
                        );
                    }
                }
            }
        }
        "workers" => {
            let _ = write!(s, "# Workers\r\nworkers:{}\r\n", workers.len());
            for w in workers {
                let _ = write!(
                    s,
                    "worker{}:pid={},state={},port={},connections={},total_connections={},commands={},uptime={},restarts={}\r\n",
                    w.slot,
                    w.pid,
                    w.state.name(),
                    w.port,
                    w.connections,
                    w.total_connections,
                    w.commands,
                    now_ms.saturating_sub(w.started_ms) / 1000,
                    w.restarts,
                );
            }
        }
        _ => {}
    }
}

/// An estimate of the mean time to live (ms) of `db`'s keys with an expiry,
/// from a bounded sample (Redis estimates it by sampling too).
fn sample_avg_ttl(e: &mut Engine, db: u8) -> u64 {
    let (mut sum, mut n, mut cursor) = (0u64, 0u64, 0u64);
    for _ in 0..8 {
        let Ok(page) = e.h.scan(db, cursor, None, 100, None) else {
            break;
        };
        for key in &page.keys {
            if let Ok(store::Ttl::Ms(ms)) = e.h.ttl(db, key) {
                sum += ms;
                n += 1;
            }
        }
        cursor = page.cursor;
        if cursor == 0 || n >= 100 {
            break;
        }
    }
    sum.checked_div(n).unwrap_or(0)
}

// ---------- CONFIG ----------

fn config(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let parent = command::lookup(b"config").expect("CONFIG is in the table");
    dispatch_sub(cx, parent, args)
}

/// The value of a parameter shoal acts on, as CONFIG GET prints it; `None`
/// for one that only the shared setting text holds.
fn acting_value(e: &Engine, name: &str) -> Option<String> {
    let c = &e.config;
    let store_info = || e.store.info().ok();
    Some(match name {
        "bind" => c.bind.clone(),
        "port" => c.port.to_string(),
        "unixsocket" => c.unixsocket.clone(),
        "memcached-port" => c.memcached_port.to_string(),
        "memcached-udp-port" => c.memcached_udp_port.to_string(),
        "http-port" => c.http_port.to_string(),
        "nats-port" => c.nats_port.to_string(),
        "nats-max-payload" => c.nats_max_payload.to_string(),
        "item-size-max" => c.item_size_max.to_string(),
        "databases" => store::NUM_DBS.to_string(),
        "maxmemory" => store_info().map_or(0, |i| i.maxmemory).to_string(),
        "maxmemory-policy" => e
            .store
            .eviction_policy()
            .unwrap_or_default()
            .name()
            .to_string(),
        "maxmemory-samples" => e.store.eviction_samples().unwrap_or(5).to_string(),
        "lfu-log-factor" => e
            .store
            .lfu_log_factor()
            .unwrap_or(store::DEFAULT_LFU_LOG_FACTOR)
            .to_string(),
        "lfu-decay-time" => e
            .store
            .lfu_decay_time()
            .unwrap_or(store::DEFAULT_LFU_DECAY_TIME)
            .to_string(),
        "proto-max-bulk-len" => c.proto_max_bulk_len.to_string(),
        "client-query-buffer-limit" => c.client_query_buffer_limit.to_string(),
        "client-output-buffer-limit" => {
            let (h, s, t) = c.output_limit_normal;
            let (ph, ps, pt) = c.output_limit_pubsub;
            format!("normal {h} {s} {t} slave 268435456 67108864 60 pubsub {ph} {ps} {pt}")
        }
        "notify-keyspace-events" => crate::notify::flags_to_string(c.notify_keyspace_events),
        "lvc-channels" => c
            .lvc_channels
            .iter()
            .map(|g| String::from_utf8_lossy(g).into_owned())
            .collect::<Vec<_>>()
            .join(" "),
        "maxclients" => c.maxclients.to_string(),
        "timeout" => c.timeout.to_string(),
        "hz" => c.hz.to_string(),
        "appendonly" => match e.store.log_status().enabled {
            true => "yes".into(),
            false => "no".into(),
        },
        // With the log off, the text setting (Redis's everysec by default).
        "appendfsync" if e.store.log_status().enabled => e.store.log_status().policy.name().into(),
        "workers" => match e.store.workers() {
            Ok(w) if !w.is_empty() => w.len().to_string(),
            _ => c.workers.max(1).to_string(),
        },
        // Redis's `dir` is its working directory (it changes into it).
        "dir" => std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        _ => return None,
    })
}

/// A parameter's value as CONFIG GET shows it.
fn current_value(engine: &Engine, param: &params::Param) -> Result<String, CmdError> {
    Ok(acting_value(engine, param.name).unwrap_or_else(|| {
        params::Overrides::parse(&engine.store.config_text().unwrap_or_default())
            .get(param.name)
            .map_or_else(|| param.default.to_string(), str::to_string)
    }))
}

fn config_get(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let overrides = params::Overrides::parse(&cx.engine.store.config_text()?);
    let mut found: Vec<(&str, String)> = Vec::new();
    for param in params::PARAMS {
        for name in std::iter::once(param.name).chain(param.alias) {
            // A hidden parameter shows only when asked for by its name.
            let matched = args[2..].iter().any(|p| {
                if param.flags & params::pflags::HIDDEN != 0 {
                    p.eq_ignore_ascii_case(name.as_bytes())
                } else {
                    glob_match(p, name.as_bytes(), true)
                }
            });
            if matched && !found.iter().any(|(n, _)| *n == name) {
                let value = acting_value(cx.engine, param.name)
                    .or_else(|| overrides.get(param.name).map(str::to_string))
                    .unwrap_or_else(|| param.default.to_string());
                found.push((name, value));
            }
        }
    }
    cx.out.map_len(found.len());
    for (name, value) in found {
        cx.out.bulk(name.as_bytes());
        cx.out.bulk(value.as_bytes());
    }
    Ok(())
}

/// A CONFIG SET change, checked before any is applied (all or nothing).
pub(crate) enum Change {
    Word(u64, u64),
    MaxMemory(u64),
    Policy(EvictionPolicy),
    Samples(u32),
    LfuLogFactor(u32),
    LfuDecayTime(u32),
    OutputLimit {
        normal: Option<(u64, u64, u64)>,
        pubsub: Option<(u64, u64, u64)>,
    },
    Appendfsync(store::log::FsyncPolicy),
    /// A value kept in the shared setting text (`params::Overrides`).
    Text(&'static str, String),
    /// `requirepass`: the default user's password (any bytes); the text
    /// keeps it when it has no line break, for CONFIG GET.
    RequirePass(Vec<u8>),
}

fn set_failed(name: &str, why: &str) -> CmdError {
    CmdError::owned(format!(
        "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
    ))
}

pub(crate) fn check_change(name: &str, value: &[u8]) -> Result<Change, CmdError> {
    let int = |lo: u64, hi: u64| -> Result<u64, CmdError> {
        let n = std::str::from_utf8(value)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or_else(|| set_failed(name, "argument couldn't be parsed into an integer"))?;
        if n < lo as i64 || n as u64 > hi {
            return Err(set_failed(
                name,
                &format!("argument must be between {lo} and {hi} inclusive"),
            ));
        }
        Ok(n as u64)
    };
    let memory = || {
        params::parse_memory(value)
            .ok_or_else(|| set_failed(name, "argument must be a memory value"))
    };
    Ok(match name {
        "maxmemory" => Change::MaxMemory(memory()?),
        "maxmemory-policy" => Change::Policy(
            EvictionPolicy::from_name(&String::from_utf8_lossy(value)).ok_or_else(|| {
                set_failed(
                    name,
                    "argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction",
                )
            })?,
        ),
        "maxmemory-samples" => Change::Samples(int(1, 64)? as u32),
        "lfu-log-factor" => Change::LfuLogFactor(int(0, i32::MAX as u64)? as u32),
        "lfu-decay-time" => Change::LfuDecayTime(int(0, i32::MAX as u64)? as u32),
        "proto-max-bulk-len" => Change::Word(word::PROTO_MAX_BULK_LEN, memory()?.max(1024 * 1024)),
        "client-query-buffer-limit" => {
            Change::Word(word::QUERY_BUFFER_LIMIT, memory()?.max(1024 * 1024))
        }
        "maxclients" => Change::Word(word::MAXCLIENTS, int(1, u32::MAX as u64)?),
        "timeout" => Change::Word(word::TIMEOUT, int(0, i32::MAX as u64)?),
        "hz" => Change::Word(word::HZ, int(1, 500)?),
        "client-output-buffer-limit" => {
            let text = String::from_utf8_lossy(value).to_ascii_lowercase();
            let parts: Vec<&str> = text.split_whitespace().collect();
            let bad = || set_failed(name, "argument must be a memory value");
            if parts.is_empty() || !parts.len().is_multiple_of(4) {
                return Err(set_failed(name, "Wrong number of arguments in buffer limit configuration."));
            }
            let (mut normal, mut pubsub) = (None, None);
            for chunk in parts.chunks(4) {
                let class = chunk[0];
                if !["normal", "slave", "replica", "pubsub"].contains(&class) {
                    return Err(set_failed(name, "Invalid client class specified in buffer limit configuration."));
                }
                let hard = params::parse_memory(chunk[1].as_bytes()).ok_or_else(bad)?;
                let soft = params::parse_memory(chunk[2].as_bytes()).ok_or_else(bad)?;
                let secs: u64 = chunk[3]
                    .parse()
                    .map_err(|_| set_failed(name, "Error in soft_seconds setting in buffer limit configuration."))?;
                match class {
                    "normal" => normal = Some((hard, soft, secs)),
                    "pubsub" => pubsub = Some((hard, soft, secs)),
                    // Replicas arrive with replication; accepted and kept as is.
                    _ => {}
                }
            }
            Change::OutputLimit { normal, pubsub }
        }
        "notify-keyspace-events" => Change::Word(
            word::NOTIFY_KEYSPACE_EVENTS,
            crate::notify::flags_from_str(value).ok_or_else(|| {
                set_failed(
                    name,
                    "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.",
                )
            })? as u64,
        ),
        "requirepass" => Change::RequirePass(value.to_vec()),
        "appendfsync" => Change::Appendfsync(
            std::str::from_utf8(value)
                .ok()
                .and_then(store::log::FsyncPolicy::from_name)
                .ok_or_else(|| set_failed(name, "argument(s) must be one of the following: always, everysec, no"))?,
        ),
        _ if params::find(name.as_bytes()).is_some() => {
            let param = params::find(name.as_bytes()).expect("found");
            if param.flags & (params::pflags::IMMUTABLE | params::pflags::START_ONLY) != 0 {
                return Err(set_failed(name, "can't set immutable config"));
            }
            if param.flags & params::pflags::PROTECTED != 0 {
                return Err(set_failed(name, "can't set protected config"));
            }
            let value = params::normalize(param, value).map_err(|why| set_failed(name, &why))?;
            Change::Text(param.name, value)
        }
        _ => {
            return Err(CmdError::owned(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
            )))
        }
    })
}

fn config_set(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::arity("config|set"));
    }
    let mut changes = Vec::new();
    let mut seen = Vec::new();
    for pair in args[2..].chunks(2) {
        let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
        if seen.contains(&name) {
            return Err(set_failed(&name, "duplicate parameter"));
        }
        seen.push(name.clone());
        if let Some(param) = params::find(name.as_bytes()) {
            if param.flags & params::pflags::START_ONLY != 0
                && current_value(cx.engine, param)?.as_bytes() == &pair[1][..]
            {
                continue;
            }
        }
        changes.push(check_change(&name, &pair[1])?);
    }
    check_tls_change(cx.engine, &changes)?;
    move_listeners(cx.engine, &changes)?;
    let store = cx.engine.store.clone();
    apply_changes(&store, &mut cx.engine.h, changes)?;
    cx.engine.sync_config();
    cx.out.simple(b"OK");
    Ok(())
}

/// CONFIG SET port / bind: the listeners move before any other change
/// applies, so that a port or address that cannot be bound leaves every
/// setting as it was (Redis's rollback on an apply error). A value that
/// changes nothing moves nothing.
fn move_listeners(engine: &Engine, changes: &[Change]) -> Result<(), CmdError> {
    let old = crate::ListenAddress {
        bind: engine.config.bind.clone(),
        port: engine.config.port,
        tls_port: engine.config.tls_port,
    };
    let mut new = old.clone();
    let mut first = None;
    for change in changes {
        match change {
            Change::Text(name @ "port", value) => {
                new.port = value.parse().unwrap_or(old.port);
                first.get_or_insert(*name);
            }
            Change::Text(name @ "tls-port", value) => {
                new.tls_port = value.parse().unwrap_or(old.tls_port);
                first.get_or_insert(*name);
            }
            Change::Text(name @ "bind", value) => {
                new.bind = crate::config::listen_address(value)
                    .map(|(address, _)| address)
                    .unwrap_or_default();
                first.get_or_insert(*name);
            }
            _ => {}
        }
    }
    let Some(name) = first else {
        return Ok(());
    };
    if new == old {
        return Ok(());
    }
    let Some(rebind) = &engine.rebind else {
        return Err(set_failed(name, "can't set immutable config"));
    };
    rebind(&old, &new).map_err(|_| {
        set_failed(
            name,
            match name {
                "port" | "tls-port" => "Unable to listen on this port. Check server logs.",
                _ => "Failed to bind to specified addresses.",
            },
        )
    })
}

/// Whether a parameter is one of the TLS settings (see
/// `config::word::TLS_GENERATION`).
pub(crate) fn is_tls_setting(name: &str) -> bool {
    name.starts_with("tls-") || name == "memcached-tls" || name == "http-tls"
}

/// Refuses a CONFIG SET of TLS settings that would leave no working TLS
/// configuration, with Redis's message (why goes to the log).
fn check_tls_change(engine: &Engine, changes: &[Change]) -> Result<(), CmdError> {
    let Some(check) = &engine.tls_check else {
        return Ok(());
    };
    let tls: Vec<(&str, &String)> = changes
        .iter()
        .filter_map(|c| match c {
            Change::Text(name, value) if is_tls_setting(name) => Some((*name, value)),
            _ => None,
        })
        .collect();
    let Some((first, _)) = tls.first() else {
        return Ok(());
    };
    let mut overrides = params::Overrides::parse(&engine.store.config_text()?);
    for (name, value) in &tls {
        overrides.set(name, (*value).clone());
    }
    check(&overrides.to_text()).map_err(|_| {
        set_failed(
            first,
            "Unable to update TLS configuration. Check server logs.",
        )
    })
}

/// Applies checked changes to the shared settings and bumps the generation,
/// so every worker picks them up before its next command.
pub(crate) fn apply_changes(
    store: &store::Store,
    h: &mut store::Handle,
    changes: Vec<Change>,
) -> Result<(), CmdError> {
    let evict = changes
        .iter()
        .any(|c| matches!(c, Change::MaxMemory(_) | Change::Policy(_)));
    let mut tls_changed = false;
    for change in changes {
        match change {
            Change::Word(w, v) => store.set_config_word(w, v + 1)?,
            Change::MaxMemory(v) => store.set_maxmemory(v)?,
            Change::Policy(p) => store.set_eviction_policy(p)?,
            Change::Samples(n) => store.set_eviction_samples(n)?,
            Change::LfuLogFactor(n) => store.set_lfu_log_factor(n)?,
            Change::LfuDecayTime(n) => store.set_lfu_decay_time(n)?,
            Change::OutputLimit { normal, pubsub } => {
                if let Some((h, s, t)) = normal {
                    store.set_config_word(word::OUTPUT_HARD, h + 1)?;
                    store.set_config_word(word::OUTPUT_SOFT, s + 1)?;
                    store.set_config_word(word::OUTPUT_SOFT_SECONDS, t + 1)?;
                }
                if let Some((h, s, t)) = pubsub {
                    store.set_config_word(word::PUBSUB_HARD, h + 1)?;
                    store.set_config_word(word::PUBSUB_SOFT, s + 1)?;
                    store.set_config_word(word::PUBSUB_SOFT_SECONDS, t + 1)?;
                }
            }
            Change::Appendfsync(policy) => {
                h.log_ring().set_policy(policy)?;
                // Reported from the text while the log is off.
                h.update_config_text(|old| {
                    let mut overrides = params::Overrides::parse(old);
                    overrides.set("appendfsync", policy.name().to_string());
                    Ok(overrides.to_text())
                })?;
                store.set_config_word(word::TEXT_SET, 2)?;
            }
            Change::RequirePass(value) => {
                crate::acl::write_default_password(store, h, &value)?;
                let shown = String::from_utf8_lossy(&value).into_owned();
                h.update_config_text(|old| {
                    let mut overrides = params::Overrides::parse(old);
                    overrides.set("requirepass", shown);
                    Ok(overrides.to_text())
                })?;
                store.set_config_word(word::TEXT_SET, 2)?;
            }
            Change::Text(name, value) => {
                tls_changed |= is_tls_setting(name);
                let listpack_word = match name {
                    "hash-max-listpack-entries" => Some(word::HASH_LISTPACK_ENTRIES),
                    "hash-max-listpack-value" => Some(word::HASH_LISTPACK_VALUE),
                    _ => None,
                };
                if let (Some(w), Ok(n)) = (listpack_word, value.parse::<u64>()) {
                    store.set_config_word(w, n.saturating_add(1))?;
                }
                h.update_config_text(|old| {
                        let mut overrides = params::Overrides::parse(old);
                        match name {
                            "port" | "tls-port" | "bind" => overrides.set_kept(name, value),
                            _ => overrides.set(name, value),
                        }
                        Ok(overrides.to_text())
                    })
                    .map_err(|e| match e {
                        store::Error::TooLarge => set_failed(
                            name,
                            "too many parameters differ from their defaults for the shared settings area",
                        ),
                        e => e.into(),
                    })?;
                store.set_config_word(word::TEXT_SET, 2)?;
            }
        }
    }
    let generation = store.config_word(word::GENERATION)?;
    store.set_config_word(word::GENERATION, generation + 1)?;
    if tls_changed {
        let tls = store.config_word(word::TLS_GENERATION)?;
        store.set_config_word(word::TLS_GENERATION, tls + 1)?;
    }
    if evict {
        // As Redis: a lower maxmemory (or a policy that now allows it)
        // evicts at once, not at the next write.
        h.evict_to_maxmemory()?;
    }
    Ok(())
}

fn config_resetstat(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let store = &cx.engine.store;
    let info = store.info()?;
    let stat = |name: &str| {
        info.stats
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, v)| *v)
    };
    let workers = store.workers()?;
    store.set_config_word(word::BASE_HITS, stat("keyspace_hits"))?;
    store.set_config_word(word::BASE_MISSES, stat("keyspace_misses"))?;
    store.set_config_word(word::BASE_EXPIRED, stat("expired_keys"))?;
    store.set_config_word(word::BASE_EVICTED, stat("evicted_keys"))?;
    store.set_config_word(word::BASE_LAZYFREED, stat("lazyfreed_objects"))?;
    store.set_config_word(
        word::BASE_COMMANDS,
        workers.iter().map(|w| w.commands).sum(),
    )?;
    store.set_config_word(
        word::BASE_CONNECTIONS,
        workers.iter().map(|w| w.total_connections).sum(),
    )?;
    // No shared word is left for a baseline: each worker's count goes
    // down by what it was (an eviction meanwhile stays counted).
    for w in &workers {
        store.add_worker_counter(
            w.slot,
            store::WorkerCounter::EvictedClients,
            -(w.evicted_clients as i64),
        )?;
    }
    let epoch = store.config_word(word::STATS_EPOCH)?;
    store.set_config_word(word::STATS_EPOCH, epoch + 1)?;
    let generation = store.config_word(word::GENERATION)?;
    store.set_config_word(word::GENERATION, generation + 1)?;
    cx.engine.sync_config();
    cx.out.simple(b"OK");
    Ok(())
}

/// CONFIG REWRITE: the configuration file the server started from, with
/// each parameter's line set to the value in force (the first line of a
/// parameter is rewritten in place, later ones dropped); a parameter the
/// file does not name is added at the end when it differs from its default.
/// Comments and blank lines stay.
fn config_rewrite(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let path = cx.engine.config.config_file.clone();
    if path.is_empty() {
        return Err(CmdError::msg(
            "ERR The server is running without a config file",
        ));
    }
    let failed = |e: std::io::Error| CmdError::owned(format!("ERR Rewriting config file: {e}"));
    let old = std::fs::read_to_string(&path).map_err(failed)?;
    let overrides = params::Overrides::parse(&cx.engine.store.config_text()?);
    let value_of = |p: &params::Param| {
        acting_value(cx.engine, p.name)
            .or_else(|| overrides.get(p.name).map(str::to_string))
            .unwrap_or_else(|| p.default.to_string())
    };
    let mut written: Vec<&'static str> = Vec::new();
    let mut out = String::new();
    for line in old.lines() {
        let directive = line.split_whitespace().next().unwrap_or("");
        let param = (!directive.starts_with('#'))
            .then(|| params::find(directive.as_bytes()))
            .flatten();
        match param {
            Some(p) if written.contains(&p.name) => {}
            Some(p) => {
                written.push(p.name);
                out.push_str(&rewrite_line(p, &value_of(p)));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    let mut generated = false;
    for p in params::PARAMS {
        let value = value_of(p);
        if written.contains(&p.name) || value == p.default {
            continue;
        }
        if !generated {
            out.push_str("# Generated by CONFIG REWRITE\n");
            generated = true;
        }
        out.push_str(&rewrite_line(p, &value));
    }
    // A new file beside the old, then one rename: a crash leaves either.
    let tmp = format!("{path}.rewrite-{}", std::process::id());
    std::fs::write(&tmp, out.as_bytes())
        .and_then(|_| {
            if let Ok(meta) = std::fs::metadata(&path) {
                std::fs::set_permissions(&tmp, meta.permissions())?;
            }
            std::fs::rename(&tmp, &path)
        })
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            failed(e)
        })?;
    cx.out.simple(b"OK");
    Ok(())
}

/// A config file line for `p` set to `value`: several words as they are
/// for a multi-word parameter, else one quoted when it must be.
fn rewrite_line(p: &params::Param, value: &str) -> String {
    let multi = p.flags & params::pflags::MULTI_ARG != 0 && !value.is_empty();
    let needs_quotes = value.is_empty()
        || value
            .chars()
            .any(|c| c.is_whitespace() || c == '"' || c == '\'' || c == '\\' || c.is_control());
    if multi || !needs_quotes {
        return format!("{} {value}\n", p.name);
    }
    let mut quoted = String::from('"');
    for c in value.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            c if c.is_control() => quoted.push_str(&format!("\\x{:02x}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    format!("{} {quoted}\n", p.name)
}

fn config_help(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    command::reply_help(
        cx,
        &[
            "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
            "HELP",
            "    Print this help.",
        ],
    )
}

// ---------- COMMAND ----------

fn command_cmd(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if args.len() == 1 {
        let all: Vec<_> = command::all().collect();
        cx.out.array_len(all.len());
        for c in all {
            write_info(cx, c);
        }
        return Ok(());
    }
    let parent = command::lookup(b"command").expect("COMMAND is in the table");
    dispatch_sub(cx, parent, args)
}

fn command_count(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    cx.out.integer(command::all().count() as i64);
    Ok(())
}

/// Finds `name` or `parent|sub`.
fn find(name: &[u8]) -> Option<&'static Command> {
    let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
    match lower.split_once('|') {
        None => command::lookup(name),
        Some((parent, _)) => command::lookup(parent.as_bytes())?
            .subcommands
            .iter()
            .find(|s| s.name == lower),
    }
}

fn write_info(cx: &mut Cx<'_>, c: &Command) {
    cx.out.array_len(10);
    cx.out.bulk(c.name.as_bytes());
    cx.out.integer(c.arity as i64);
    let mut flags: Vec<&str> = command::flags::NAMES
        .iter()
        .filter(|(bit, _)| c.flags & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    if c.movable_keys.is_some() {
        // Redis prints it just before allow_busy.
        let at = flags
            .iter()
            .position(|f| *f == "allow_busy")
            .unwrap_or(flags.len());
        flags.insert(at, "movablekeys");
    }
    cx.out.set_len(flags.len());
    for f in flags {
        cx.out.simple(f.as_bytes());
    }
    cx.out.integer(c.first_key as i64);
    cx.out.integer(c.last_key as i64);
    cx.out.integer(c.step as i64);
    let cats = acl_categories(c);
    cx.out.set_len(cats.len());
    for cat in cats {
        cx.out.simple(cat.as_bytes());
    }
    let tips = keyspec::tips(c);
    cx.out.set_len(tips.len());
    for tip in tips {
        cx.out.bulk(tip.as_bytes());
    }
    write_key_specs(cx, c);
    cx.out.array_len(c.subcommands.len());
    for s in c.subcommands {
        write_info(cx, s);
    }
}

/// COMMAND INFO's key specifications, as Redis 7.0 prints them.
fn write_key_specs(cx: &mut Cx<'_>, c: &Command) {
    use keyspec::{Begin, Find};
    let specs = keyspec::specs(c);
    cx.out.set_len(specs.len());
    for spec in specs {
        cx.out.map_len(3 + usize::from(spec.notes.is_some()));
        if let Some(notes) = spec.notes {
            cx.out.bulk(b"notes");
            cx.out.bulk(notes.as_bytes());
        }
        cx.out.bulk(b"flags");
        write_key_flags(cx, spec.flags);
        cx.out.bulk(b"begin_search");
        match spec.begin {
            Begin::Index(pos) => write_spec_part(cx, "index", &[("index", pos)], None),
            Begin::Keyword(keyword, startfrom) => {
                write_spec_part(cx, "keyword", &[("startfrom", startfrom)], Some(keyword))
            }
            Begin::Unknown => write_spec_part(cx, "unknown", &[], None),
        }
        cx.out.bulk(b"find_keys");
        match spec.find {
            Find::Range {
                lastkey,
                step,
                limit,
            } => write_spec_part(
                cx,
                "range",
                &[("lastkey", lastkey), ("keystep", step), ("limit", limit)],
                None,
            ),
            Find::Keynum {
                keynumidx,
                firstkey,
                step,
            } => write_spec_part(
                cx,
                "keynum",
                &[
                    ("keynumidx", keynumidx),
                    ("firstkey", firstkey),
                    ("keystep", step),
                ],
                None,
            ),
            Find::Unknown => write_spec_part(cx, "unknown", &[], None),
        }
    }
}

/// One half of a key spec: `{type, spec: {…}}`, the spec's `keyword` (a
/// keyword search's) first, then its numbers.
fn write_spec_part(cx: &mut Cx<'_>, kind: &str, numbers: &[(&str, i32)], keyword: Option<&str>) {
    cx.out.map_len(2);
    cx.out.bulk(b"type");
    cx.out.bulk(kind.as_bytes());
    cx.out.bulk(b"spec");
    cx.out
        .map_len(numbers.len() + usize::from(keyword.is_some()));
    if let Some(keyword) = keyword {
        cx.out.bulk(b"keyword");
        cx.out.bulk(keyword.as_bytes());
    }
    for (name, v) in numbers {
        cx.out.bulk(name.as_bytes());
        cx.out.integer((*v).into());
    }
}

/// Key spec flags as a set of status strings (`RW`, `access`, …).
fn write_key_flags(cx: &mut Cx<'_>, flags: u16) {
    let names: Vec<&str> = keyspec::flag_names(flags).collect();
    cx.out.set_len(names.len());
    for name in names {
        cx.out.simple(name.as_bytes());
    }
}

/// Redis's ACL categories for a command (the ACL rules use the same).
fn acl_categories(c: &Command) -> Vec<String> {
    crate::acl::category_names(c)
}

fn command_info(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if args.len() == 2 {
        let all: Vec<_> = command::all().collect();
        cx.out.array_len(all.len());
        for c in all {
            write_info(cx, c);
        }
        return Ok(());
    }
    cx.out.array_len(args.len() - 2);
    for name in &args[2..] {
        match find(name) {
            Some(c) => write_info(cx, c),
            None => cx.out.null_array(),
        }
    }
    Ok(())
}

fn write_doc(cx: &mut Cx<'_>, c: &Command) {
    cx.out.bulk(c.name.as_bytes());
    let subs = !c.subcommands.is_empty();
    cx.out.map_len(3 + subs as usize);
    cx.out.bulk(b"summary");
    cx.out.bulk(c.summary.as_bytes());
    cx.out.bulk(b"since");
    cx.out.bulk(c.since.as_bytes());
    cx.out.bulk(b"group");
    cx.out.bulk(c.group.as_bytes());
    if subs {
        cx.out.bulk(b"subcommands");
        cx.out.map_len(c.subcommands.len());
        for s in c.subcommands {
            write_doc(cx, s);
        }
    }
}

fn command_docs(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let cmds: Vec<&Command> = if args.len() == 2 {
        command::all().collect()
    } else {
        args[2..].iter().filter_map(|n| find(n)).collect()
    };
    cx.out.map_len(cmds.len());
    for c in cmds {
        write_doc(cx, c);
    }
    Ok(())
}

/// COMMAND GETKEYS command arg…: the keys the request would touch, by the
/// command's key spec (or its own reading of its arguments).
fn command_getkeys(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let (cmd, request) = getkeys_request(args)?;
    let keys = cmd.keys_of(request);
    no_keys_found(cmd, keys.is_empty())?;
    cx.out.array_len(keys.len());
    for i in keys {
        cx.out.bulk(&request[i]);
    }
    Ok(())
}

/// COMMAND GETKEYSANDFLAGS command arg…: each key with its key spec flags.
fn command_getkeysandflags(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let (cmd, request) = getkeys_request(args)?;
    let keys = keyspec::keys_and_flags(cmd, request);
    no_keys_found(cmd, keys.is_empty())?;
    cx.out.array_len(keys.len());
    for (i, flags) in keys {
        cx.out.array_len(2);
        cx.out.bulk(&request[i]);
        write_key_flags(cx, flags);
    }
    Ok(())
}

/// A request that names no key is an error unless its command may have
/// none (EVAL with 0 keys: an empty list).
fn no_keys_found(cmd: &Command, empty: bool) -> Result<(), CmdError> {
    if empty && cmd.flags & NO_MANDATORY_KEYS == 0 {
        return Err(CmdError::msg("ERR Invalid arguments specified for command"));
    }
    Ok(())
}

/// The command (or subcommand) a COMMAND GETKEYS… request names, checked
/// for having keys at all and for arity, and its arguments.
fn getkeys_request<'r, 'a>(
    args: &'r [Arg<'a>],
) -> Result<(&'static Command, &'r [Arg<'a>]), CmdError> {
    let request = &args[2..];
    let mut cmd =
        command::lookup(&request[0]).ok_or(CmdError::msg("ERR Invalid command specified"))?;
    if !cmd.subcommands.is_empty() && request.len() >= 2 {
        if let Ok(sub) = command::find_sub(cmd, request) {
            cmd = sub;
        }
    }
    if cmd.first_key == 0 && cmd.movable_keys.is_none() && keyspec::specs(cmd).is_empty() {
        return Err(CmdError::msg("ERR The command has no key arguments"));
    }
    if !cmd.arity_ok(request.len()) {
        return Err(CmdError::msg(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    Ok((cmd, request))
}

/// COMMAND LIST: every command and subcommand (`config|get`), as Redis 7.0
/// lists them, optionally filtered.
fn command_list(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let every = command::all().flat_map(|c| std::iter::once(c).chain(c.subcommands.iter()));
    let names: Vec<&Command> = match args.len() {
        2 => every.collect(),
        5 if parse::is(&args[2], "filterby") && parse::is(&args[3], "pattern") => every
            .filter(|c| glob_match(&args[4], c.name.as_bytes(), true))
            .collect(),
        5 if parse::is(&args[2], "filterby") && parse::is(&args[3], "aclcat") => every
            .filter(|c| {
                acl_categories(c)
                    .iter()
                    .any(|cat| args[4].eq_ignore_ascii_case(&cat.as_bytes()[1..]))
            })
            .collect(),
        // No modules: none of their commands.
        5 if parse::is(&args[2], "filterby") && parse::is(&args[3], "module") => Vec::new(),
        _ => return Err(CmdError::syntax()),
    };
    cx.out.array_len(names.len());
    for c in names {
        cx.out.bulk(c.name.as_bytes());
    }
    Ok(())
}

fn command_help(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    command::reply_help(
        cx,
        &[
            "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
            "HELP",
            "    Print this help.",
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_values_parse_as_redis() {
        assert_eq!(params::parse_memory(b"100"), Some(100));
        assert_eq!(params::parse_memory(b"1k"), Some(1000));
        assert_eq!(params::parse_memory(b"1KB"), Some(1024));
        assert_eq!(params::parse_memory(b"2gb"), Some(2 << 30));
        assert_eq!(params::parse_memory(b"1x"), None);
        assert_eq!(params::parse_memory(b"-1"), None);
        assert_eq!(params::parse_memory(b""), None);
    }
}
