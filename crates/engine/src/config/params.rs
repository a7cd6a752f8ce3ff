//! Every parameter of Redis 7.0's CONFIG, with its alias, type, bounds,
//! default (as CONFIG GET prints it) and flags, plus shoal's own parameters.
//!
//! A parameter that shoal acts on (`maxmemory`, `hz`, `timeout`…) is read
//! and changed by `server.rs` through the engine's [`super::Config`] and the
//! store's words. Every other parameter is validated exactly as Redis does
//! and kept in the segment's shared setting text ([`Overrides`]), so every
//! worker reports the same value; docs/configuration.md lists which ones
//! change behaviour.

/// How a parameter's value is read and checked.
#[derive(Debug)]
pub(crate) enum Kind {
    /// `yes` or `no`.
    Bool,
    /// Any text.
    Text,
    /// One of the names (several, space-separated, for a multi-argument
    /// parameter such as `shutdown-on-sigterm`).
    Enum(&'static [&'static str]),
    /// An integer between `min` and `max`; `memory` accepts units (`1gb`),
    /// `percent` also `N%` (stored as `-N`).
    Int {
        min: i64,
        max: i64,
        memory: bool,
        percent: bool,
    },
    /// Its own syntax (`save`, `bind`, `client-output-buffer-limit`…).
    Special,
}

/// Parameter flags (Redis's `*_CONFIG` flags that CONFIG GET/SET obey).
pub(crate) mod pflags {
    /// CONFIG SET refuses it ("can't set immutable config").
    pub const IMMUTABLE: u8 = 1;
    /// CONFIG SET refuses it unless `enable-protected-configs` allows.
    pub const PROTECTED: u8 = 1 << 1;
    /// Its value is several words.
    pub const MULTI_ARG: u8 = 1 << 2;
    /// Refused while loading.
    pub const DENY_LOADING: u8 = 1 << 3;
    /// Not listed by a glob, only by its exact name.
    pub const HIDDEN: u8 = 1 << 4;
    /// Its value is redacted from logs.
    pub const SENSITIVE: u8 = 1 << 5;
    /// Fixed when the server starts (its ports, its workers, whether it
    /// logs), although Redis may change some at run time: CONFIG SET to
    /// the value it has changes nothing and is accepted, any other value
    /// is refused as immutable.
    pub const START_ONLY: u8 = 1 << 6;
}

/// One parameter.
#[derive(Debug)]
pub(crate) struct Param {
    pub name: &'static str,
    /// The old name (`slaveof`, `hash-max-ziplist-entries`…), also listed.
    pub alias: Option<&'static str>,
    pub kind: Kind,
    /// CONFIG GET's text for the default.
    pub default: &'static str,
    /// Bits of [`pflags`].
    pub flags: u8,
}

const fn p(
    name: &'static str,
    alias: Option<&'static str>,
    kind: Kind,
    default: &'static str,
    flags: u8,
) -> Param {
    Param {
        name,
        alias,
        kind,
        default,
        flags,
    }
}

use pflags::*;

/// Every parameter, sorted by name: Redis 7.0.15's table (defaults as its
/// CONFIG GET prints them), then shoal's own.
#[rustfmt::skip]
pub(crate) const PARAMS: &[Param] = &[
    p("acl-pubsub-default", None, Kind::Enum(&["allchannels", "resetchannels"]), "resetchannels", 0),
    p("aclfile", None, Kind::Text, "", IMMUTABLE),
    p("acllog-max-len", None, Kind::Int { min: 0, max: 9223372036854775807, memory: false, percent: false }, "128", 0),
    p("active-defrag-cycle-max", None, Kind::Int { min: 1, max: 99, memory: false, percent: false }, "25", 0),
    p("active-defrag-cycle-min", None, Kind::Int { min: 1, max: 99, memory: false, percent: false }, "1", 0),
    p("active-defrag-ignore-bytes", None, Kind::Int { min: 1, max: 9223372036854775807, memory: true, percent: false }, "104857600", 0),
    p("active-defrag-max-scan-fields", None, Kind::Int { min: 1, max: 9223372036854775807, memory: false, percent: false }, "1000", 0),
    p("active-defrag-threshold-lower", None, Kind::Int { min: 0, max: 1000, memory: false, percent: false }, "10", 0),
    p("active-defrag-threshold-upper", None, Kind::Int { min: 0, max: 1000, memory: false, percent: false }, "100", 0),
    p("active-expire-effort", None, Kind::Int { min: 1, max: 10, memory: false, percent: false }, "1", 0),
    p("activedefrag", None, Kind::Bool, "no", 0),
    p("activerehashing", None, Kind::Bool, "yes", 0),
    p("always-show-logo", None, Kind::Bool, "no", IMMUTABLE),
    p("aof-disable-auto-gc", None, Kind::Bool, "no", 0),
    p("aof-load-truncated", None, Kind::Bool, "yes", 0),
    p("aof-rewrite-incremental-fsync", None, Kind::Bool, "yes", 0),
    p("aof-timestamp-enabled", None, Kind::Bool, "no", 0),
    p("aof-use-rdb-preamble", None, Kind::Bool, "yes", 0),
    p("aof_rewrite_cpulist", None, Kind::Text, "", IMMUTABLE),
    p("appenddirname", None, Kind::Text, "appendonlydir", IMMUTABLE),
    p("appendfilename", None, Kind::Text, "appendonly.aof", IMMUTABLE),
    p("appendfsync", None, Kind::Enum(&["everysec", "always", "no"]), "everysec", 0),
    p("appendonly", None, Kind::Bool, "no", DENY_LOADING | START_ONLY),
    p("auto-aof-rewrite-min-size", None, Kind::Int { min: 0, max: 9223372036854775807, memory: true, percent: false }, "67108864", 0),
    p("auto-aof-rewrite-percentage", None, Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "100", 0),
    p("bgsave_cpulist", None, Kind::Text, "", IMMUTABLE),
    p("bind", None, Kind::Special, "* -::*", MULTI_ARG),
    p("bind-source-addr", None, Kind::Text, "", 0),
    p("bio_cpulist", None, Kind::Text, "", IMMUTABLE),
    p("busy-reply-threshold", Some("lua-time-limit"), Kind::Int { min: 0, max: 9223372036854775807, memory: false, percent: false }, "5000", 0),
    p("client-output-buffer-limit", None, Kind::Special, "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60", MULTI_ARG),
    p("client-query-buffer-limit", None, Kind::Int { min: 1048576, max: 9223372036854775807, memory: true, percent: false }, "1073741824", 0),
    p("cluster-allow-pubsubshard-when-down", None, Kind::Bool, "yes", 0),
    p("cluster-allow-reads-when-down", None, Kind::Bool, "no", 0),
    p("cluster-allow-replica-migration", None, Kind::Bool, "yes", 0),
    p("cluster-announce-bus-port", None, Kind::Int { min: 0, max: 65535, memory: false, percent: false }, "0", 0),
    p("cluster-announce-hostname", None, Kind::Text, "", 0),
    p("cluster-announce-ip", None, Kind::Text, "", 0),
    p("cluster-announce-port", None, Kind::Int { min: 0, max: 65535, memory: false, percent: false }, "0", 0),
    p("cluster-announce-tls-port", None, Kind::Int { min: 0, max: 65535, memory: false, percent: false }, "0", 0),
    p("cluster-config-file", None, Kind::Text, "nodes.conf", IMMUTABLE),
    p("cluster-enabled", None, Kind::Bool, "no", IMMUTABLE),
    p("cluster-link-sendbuf-limit", None, Kind::Int { min: 0, max: 9223372036854775807, memory: true, percent: false }, "0", 0),
    p("cluster-migration-barrier", None, Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "1", 0),
    p("cluster-node-timeout", None, Kind::Int { min: 0, max: 9223372036854775807, memory: false, percent: false }, "15000", 0),
    p("cluster-port", None, Kind::Int { min: 0, max: 65535, memory: false, percent: false }, "0", IMMUTABLE),
    p("cluster-preferred-endpoint-type", None, Kind::Enum(&["ip", "hostname", "unknown-endpoint"]), "ip", 0),
    p("cluster-replica-no-failover", Some("cluster-slave-no-failover"), Kind::Bool, "no", 0),
    p("cluster-replica-validity-factor", Some("cluster-slave-validity-factor"), Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "10", 0),
    p("cluster-require-full-coverage", None, Kind::Bool, "yes", 0),
    p("crash-log-enabled", None, Kind::Bool, "yes", 0),
    p("crash-memcheck-enabled", None, Kind::Bool, "yes", 0),
    p("daemonize", None, Kind::Bool, "no", IMMUTABLE),
    p("databases", None, Kind::Int { min: 1, max: 2147483647, memory: false, percent: false }, "16", IMMUTABLE),
    p("dbfilename", None, Kind::Text, "dump.rdb", PROTECTED),
    p("dir", None, Kind::Special, "", PROTECTED | DENY_LOADING),
    p("disable-thp", None, Kind::Bool, "yes", IMMUTABLE),
    p("dynamic-hz", None, Kind::Bool, "yes", 0),
    p("enable-debug-command", None, Kind::Enum(&["no", "yes", "local"]), "no", IMMUTABLE),
    p("enable-module-command", None, Kind::Enum(&["no", "yes", "local"]), "no", IMMUTABLE),
    p("enable-protected-configs", None, Kind::Enum(&["no", "yes", "local"]), "no", IMMUTABLE),
    p("hash-max-listpack-entries", Some("hash-max-ziplist-entries"), Kind::Int { min: 0, max: 9223372036854775807, memory: false, percent: false }, "512", 0),
    p("hash-max-listpack-value", Some("hash-max-ziplist-value"), Kind::Int { min: 0, max: 9223372036854775807, memory: true, percent: false }, "64", 0),
    p("hll-sparse-max-bytes", None, Kind::Int { min: 0, max: 9223372036854775807, memory: true, percent: false }, "3000", 0),
    p("hz", None, Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "10", 0),
    p("ignore-warnings", None, Kind::Text, "", 0),
    p("io-threads", None, Kind::Int { min: 1, max: 128, memory: false, percent: false }, "1", IMMUTABLE),
    p("io-threads-do-reads", None, Kind::Bool, "no", IMMUTABLE),
    p("jemalloc-bg-thread", None, Kind::Bool, "yes", 0),
    p("key-load-delay", None, Kind::Int { min: -2147483648, max: 2147483647, memory: false, percent: false }, "0", HIDDEN),
    p("latency-monitor-threshold", None, Kind::Int { min: 0, max: 9223372036854775807, memory: false, percent: false }, "0", 0),
    p("latency-tracking", None, Kind::Bool, "yes", 0),
    p("latency-tracking-info-percentiles", None, Kind::Special, "50 99 99.9", MULTI_ARG),
    p("lazyfree-lazy-eviction", None, Kind::Bool, "no", 0),
    p("lazyfree-lazy-expire", None, Kind::Bool, "no", 0),
    p("lazyfree-lazy-server-del", None, Kind::Bool, "no", 0),
    p("lazyfree-lazy-user-del", None, Kind::Bool, "no", 0),
    p("lazyfree-lazy-user-flush", None, Kind::Bool, "no", 0),
    p("lfu-decay-time", None, Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "1", 0),
    p("lfu-log-factor", None, Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "10", 0),
    p("list-compress-depth", None, Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "0", 0),
    p("list-max-listpack-size", Some("list-max-ziplist-size"), Kind::Int { min: -2147483648, max: 2147483647, memory: false, percent: false }, "-2", 0),
    p("loading-process-events-interval-bytes", None, Kind::Int { min: 1024, max: 2147483647, memory: false, percent: false }, "2097152", HIDDEN),
    p("logfile", None, Kind::Text, "", IMMUTABLE),
    p("loglevel", None, Kind::Enum(&["debug", "verbose", "notice", "warning"]), "notice", 0),
    p("masterauth", None, Kind::Text, "", SENSITIVE),
    p("masteruser", None, Kind::Text, "", SENSITIVE),
    p("maxclients", None, Kind::Int { min: 1, max: 4294967295, memory: false, percent: false }, "10000", 0),
    p("maxmemory", None, Kind::Int { min: 0, max: 9223372036854775807, memory: true, percent: false }, "0", 0),
    p("maxmemory-clients", None, Kind::Int { min: -100, max: 9223372036854775807, memory: true, percent: true }, "0", 0),
    p("maxmemory-eviction-tenacity", None, Kind::Int { min: 0, max: 100, memory: false, percent: false }, "10", 0),
    p("maxmemory-policy", None, Kind::Enum(&["volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"]), "noeviction", 0),
    p("maxmemory-samples", None, Kind::Int { min: 1, max: 2147483647, memory: false, percent: false }, "5", 0),
    p("min-replicas-max-lag", Some("min-slaves-max-lag"), Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "10", 0),
    p("min-replicas-to-write", Some("min-slaves-to-write"), Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "0", 0),
    p("no-appendfsync-on-rewrite", None, Kind::Bool, "no", 0),
    p("notify-keyspace-events", None, Kind::Special, "", 0),
    p("oom-score-adj", None, Kind::Enum(&["no", "yes", "relative", "absolute"]), "no", 0),
    p("oom-score-adj-values", None, Kind::Special, "0 200 800", MULTI_ARG),
    p("pidfile", None, Kind::Text, "", IMMUTABLE),
    p("port", None, Kind::Int { min: 0, max: 65535, memory: false, percent: false }, "6379", 0),
    p("proc-title-template", None, Kind::Text, "{title} {listen-addr} {server-mode}", 0),
    p("propagation-error-behavior", None, Kind::Enum(&["ignore", "panic", "panic-on-replicas"]), "ignore", 0),
    p("protected-mode", None, Kind::Bool, "yes", 0),
    p("proto-max-bulk-len", None, Kind::Int { min: 1048576, max: 9223372036854775807, memory: true, percent: false }, "536870912", 0),
    p("rdb-del-sync-files", None, Kind::Bool, "no", 0),
    p("rdb-key-save-delay", None, Kind::Int { min: -2147483648, max: 2147483647, memory: false, percent: false }, "0", HIDDEN),
    p("rdb-save-incremental-fsync", None, Kind::Bool, "yes", 0),
    p("rdbchecksum", None, Kind::Bool, "yes", IMMUTABLE),
    p("rdbcompression", None, Kind::Bool, "yes", 0),
    p("repl-backlog-size", None, Kind::Int { min: 1, max: 9223372036854775807, memory: true, percent: false }, "1048576", 0),
    p("repl-backlog-ttl", None, Kind::Int { min: 0, max: 9223372036854775807, memory: false, percent: false }, "3600", 0),
    p("repl-disable-tcp-nodelay", None, Kind::Bool, "no", 0),
    p("repl-diskless-load", None, Kind::Enum(&["disabled", "on-empty-db", "swapdb"]), "disabled", DENY_LOADING),
    p("repl-diskless-sync", None, Kind::Bool, "yes", 0),
    p("repl-diskless-sync-delay", None, Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "5", 0),
    p("repl-diskless-sync-max-replicas", None, Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "0", 0),
    p("repl-ping-replica-period", Some("repl-ping-slave-period"), Kind::Int { min: 1, max: 2147483647, memory: false, percent: false }, "10", 0),
    p("repl-timeout", None, Kind::Int { min: 1, max: 2147483647, memory: false, percent: false }, "60", 0),
    p("replica-announce-ip", Some("slave-announce-ip"), Kind::Text, "", 0),
    p("replica-announce-port", Some("slave-announce-port"), Kind::Int { min: 0, max: 65535, memory: false, percent: false }, "0", 0),
    p("replica-announced", None, Kind::Bool, "yes", 0),
    p("replica-ignore-disk-write-errors", None, Kind::Bool, "no", 0),
    p("replica-ignore-maxmemory", Some("slave-ignore-maxmemory"), Kind::Bool, "yes", 0),
    p("replica-lazy-flush", Some("slave-lazy-flush"), Kind::Bool, "no", 0),
    p("replica-priority", Some("slave-priority"), Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "100", 0),
    p("replica-read-only", Some("slave-read-only"), Kind::Bool, "yes", 0),
    p("replica-serve-stale-data", Some("slave-serve-stale-data"), Kind::Bool, "yes", 0),
    p("replicaof", Some("slaveof"), Kind::Special, "", IMMUTABLE | MULTI_ARG),
    p("requirepass", None, Kind::Text, "", SENSITIVE),
    p("sanitize-dump-payload", None, Kind::Enum(&["no", "yes", "clients"]), "no", 0),
    p("save", None, Kind::Special, "", MULTI_ARG),
    p("server_cpulist", None, Kind::Text, "", IMMUTABLE),
    p("set-max-intset-entries", None, Kind::Int { min: 0, max: 9223372036854775807, memory: false, percent: false }, "512", 0),
    p("set-proc-title", None, Kind::Bool, "yes", IMMUTABLE),
    p("shutdown-on-sigint", None, Kind::Enum(&["default", "save", "nosave", "now", "force"]), "default", MULTI_ARG),
    p("shutdown-on-sigterm", None, Kind::Enum(&["default", "save", "nosave", "now", "force"]), "default", MULTI_ARG),
    p("shutdown-timeout", None, Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "10", 0),
    p("slowlog-log-slower-than", None, Kind::Int { min: -1, max: 9223372036854775807, memory: false, percent: false }, "10000", 0),
    p("slowlog-max-len", None, Kind::Int { min: 0, max: 9223372036854775807, memory: false, percent: false }, "128", 0),
    p("socket-mark-id", None, Kind::Int { min: 0, max: 4294967295, memory: false, percent: false }, "0", IMMUTABLE),
    p("stop-writes-on-bgsave-error", None, Kind::Bool, "yes", 0),
    p("stream-node-max-bytes", None, Kind::Int { min: 0, max: 9223372036854775807, memory: true, percent: false }, "4096", 0),
    p("stream-node-max-entries", None, Kind::Int { min: 0, max: 9223372036854775807, memory: false, percent: false }, "100", 0),
    p("supervised", None, Kind::Enum(&["upstart", "systemd", "auto", "no"]), "no", IMMUTABLE),
    p("syslog-enabled", None, Kind::Bool, "no", IMMUTABLE),
    p("syslog-facility", None, Kind::Enum(&["user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"]), "local0", IMMUTABLE),
    p("syslog-ident", None, Kind::Text, "redis", IMMUTABLE),
    p("tcp-backlog", None, Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "511", IMMUTABLE),
    p("tcp-keepalive", None, Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "300", 0),
    p("timeout", None, Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "0", 0),
    p("tls-auth-clients", None, Kind::Enum(&["no", "yes", "optional"]), "yes", 0),
    p("tls-ca-cert-dir", None, Kind::Text, "", 0),
    p("tls-ca-cert-file", None, Kind::Text, "", 0),
    p("tls-cert-file", None, Kind::Text, "", 0),
    p("tls-ciphers", None, Kind::Text, "", 0),
    p("tls-ciphersuites", None, Kind::Text, "", 0),
    p("tls-client-cert-file", None, Kind::Text, "", 0),
    p("tls-client-key-file", None, Kind::Text, "", 0),
    p("tls-client-key-file-pass", None, Kind::Text, "", 0),
    p("tls-cluster", None, Kind::Bool, "no", 0),
    p("tls-dh-params-file", None, Kind::Text, "", 0),
    p("tls-key-file", None, Kind::Text, "", 0),
    p("tls-key-file-pass", None, Kind::Text, "", 0),
    // Immutable here: the supervisor binds every listener at start.
    p("tls-port", None, Kind::Int { min: 0, max: 65535, memory: false, percent: false }, "0", 0),
    p("tls-prefer-server-ciphers", None, Kind::Bool, "no", 0),
    p("tls-protocols", None, Kind::Text, "", 0),
    p("tls-replication", None, Kind::Bool, "no", 0),
    p("tls-session-cache-size", None, Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "20480", 0),
    p("tls-session-cache-timeout", None, Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "300", 0),
    p("tls-session-caching", None, Kind::Bool, "yes", 0),
    p("tracking-table-max-keys", None, Kind::Int { min: 0, max: 9223372036854775807, memory: false, percent: false }, "1000000", 0),
    p("unixsocket", None, Kind::Text, "", IMMUTABLE),
    p("unixsocketperm", None, Kind::Int { min: 0, max: 511, memory: false, percent: false }, "0", IMMUTABLE),
    p("use-exit-on-panic", None, Kind::Bool, "no", HIDDEN),
    p("watchdog-period", None, Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "0", HIDDEN),
    p("zset-max-listpack-entries", Some("zset-max-ziplist-entries"), Kind::Int { min: 0, max: 9223372036854775807, memory: false, percent: false }, "128", 0),
    p("zset-max-listpack-value", Some("zset-max-ziplist-value"), Kind::Int { min: 0, max: 9223372036854775807, memory: true, percent: false }, "64", 0),
    // shoal's own.
    p("http-port", None, Kind::Int { min: 0, max: 65535, memory: false, percent: false }, "8080", START_ONLY),
    p("http-tls", None, Kind::Bool, "no", IMMUTABLE | START_ONLY),
    p("item-size-max", None, Kind::Int { min: 1024, max: 1 << 30, memory: true, percent: false }, "1048576", START_ONLY),
    p("lvc-channels", None, Kind::Special, "", 0),
    p("memcached-auth-file", None, Kind::Text, "", IMMUTABLE | START_ONLY),
    p("memcached-port", None, Kind::Int { min: 0, max: 65535, memory: false, percent: false }, "11211", START_ONLY),
    p("nats-max-payload", None, Kind::Int { min: 1, max: 64 << 20, memory: true, percent: false }, "1048576", START_ONLY),
    p("replica-sync-count", None, Kind::Int { min: 0, max: 255, memory: false, percent: false }, "0", 0),
    p("replica-sync-level", None, Kind::Enum(&["memory", "disk"]), "memory", 0),
    p("replica-sync-timeout", None, Kind::Int { min: 0, max: 2147483647, memory: false, percent: false }, "0", 0),
    p("nats-port", None, Kind::Int { min: 0, max: 65535, memory: false, percent: false }, "4222", START_ONLY),
    p("memcached-tls", None, Kind::Bool, "no", IMMUTABLE | START_ONLY),
    p("memcached-udp-port", None, Kind::Int { min: 0, max: 65535, memory: false, percent: false }, "11211", START_ONLY),
    p("workers", None, Kind::Int { min: 1, max: 1024, memory: false, percent: false }, "1", START_ONLY),
];

/// The parameter named `name` or whose alias it is, case-insensitively.
pub(crate) fn find(name: &[u8]) -> Option<&'static Param> {
    PARAMS.iter().find(|p| {
        p.name.as_bytes().eq_ignore_ascii_case(name)
            || p.alias
                .is_some_and(|a| a.as_bytes().eq_ignore_ascii_case(name))
    })
}

/// Why CONFIG SET refused a value (the text after "- ").
pub(crate) type Refusal = String;

/// Checks `value` for `param` as Redis's CONFIG SET does and returns the
/// text CONFIG GET will print for it.
pub(crate) fn normalize(param: &Param, value: &[u8]) -> Result<String, Refusal> {
    let text = std::str::from_utf8(value).map_err(|_| "argument must be valid text".to_string())?;
    // Passwords are binary-safe in Redis (a test sets `abc\0def`); the
    // shared text escapes them (`Overrides::to_text`).
    if param.flags & pflags::SENSITIVE == 0 && text.contains(['\n', '\r', '\0']) {
        return Err("argument must not contain line breaks".into());
    }
    match &param.kind {
        Kind::Bool => match text.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Text => Ok(text.into()),
        Kind::Enum(names) => {
            let words: Vec<String> = text
                .split_whitespace()
                .map(str::to_ascii_lowercase)
                .collect();
            let multi = param.flags & MULTI_ARG != 0;
            if words.is_empty()
                || (!multi && words.len() != 1)
                || words.iter().any(|w| !names.contains(&w.as_str()))
            {
                return Err(format!(
                    "argument(s) must be one of the following: {}",
                    names.join(", ")
                ));
            }
            Ok(words.join(" "))
        }
        &Kind::Int {
            min,
            max,
            memory,
            percent,
        } => {
            let n: i64 = if percent && text.ends_with('%') {
                let pct: i64 = text[..text.len() - 1]
                    .parse()
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or("argument must be a memory or percent value")?;
                -pct
            } else if memory {
                let why = if percent {
                    "argument must be a memory or percent value"
                } else {
                    "argument must be a memory value"
                };
                parse_memory(text.as_bytes())
                    .and_then(|n| i64::try_from(n).ok())
                    .ok_or(why)?
            } else {
                store::parse_i64(text.as_bytes())
                    .ok_or("argument couldn't be parsed into an integer")?
            };
            if percent && n < 0 {
                // A percentage is stored negated, so only the lower bound applies.
                if n < min {
                    return Err(format!(
                        "percentage argument must be less or equal to {}",
                        -min
                    ));
                }
            } else if n < min || n > max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            Ok(if n < 0 && percent {
                format!("{}%", -n)
            } else {
                n.to_string()
            })
        }
        Kind::Special => special(param.name, text),
    }
}

/// The parameters of their own syntax that shoal keeps but does not act on.
fn special(name: &str, text: &str) -> Result<String, Refusal> {
    let words: Vec<&str> = text.split_whitespace().collect();
    match name {
        // Redis's CONFIG_BINDADDR_MAX.
        "bind" if words.len() > 16 => Err("Too many bind addresses specified.".into()),
        "bind" => Ok(words.join(" ")),
        // Pairs of <seconds> <changes>, or "" for none.
        "save" => {
            if !words.len().is_multiple_of(2) || words.iter().any(|w| w.parse::<u32>().is_err()) {
                return Err("Invalid save parameters".into());
            }
            Ok(words.join(" "))
        }
        "oom-score-adj-values" => {
            if words.len() != 3
                || words
                    .iter()
                    .any(|w| !w.parse::<i32>().is_ok_and(|n| (-2000..=2000).contains(&n)))
            {
                return Err("Invalid oom-score-adj-values".into());
            }
            Ok(words.join(" "))
        }
        // Printed as Redis prints them: `%f` with the trailing zeros cut.
        "latency-tracking-info-percentiles" => {
            let mut out = Vec::new();
            for w in &words {
                match w.parse::<f64>() {
                    Ok(v) if (0.0..=100.0).contains(&v) => out.push(format!("{v}")),
                    _ => return Err("latency-tracking-info-percentiles parameter should be between 0.0 and 100.0".into()),
                }
            }
            Ok(out.join(" "))
        }
        _ => Ok(text.into()),
    }
}

/// Redis's `memtoull`: bytes with an optional k, kb, m, mb, g, gb unit.
pub(crate) fn parse_memory(v: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(v).ok()?.to_ascii_lowercase();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}

/// The values set by CONFIG SET for parameters that live only in the shared
/// setting text: one `name value` line each, the value with `\`, line
/// breaks and NUL escaped (`\\`, `\n`, `\r`, `\0`) so a line stays a line.
#[derive(Default, Debug)]
pub(crate) struct Overrides(Vec<(String, String)>);

impl Overrides {
    /// Reads the shared text (lines that do not parse are skipped).
    pub(crate) fn parse(text: &[u8]) -> Overrides {
        let text = String::from_utf8_lossy(text);
        Overrides(
            text.lines()
                .filter_map(|l| {
                    let (n, v) = l.split_once(' ').unwrap_or((l, ""));
                    find(n.as_bytes()).map(|p| (p.name.to_string(), unescape(v)))
                })
                .collect(),
        )
    }

    /// The value set for `name`, if any.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Sets `name` to `value`; a parameter set back to its default leaves
    /// the text (which is small: `store::CONFIG_TEXT_MAX`).
    pub(crate) fn set(&mut self, name: &str, value: String) {
        self.0.retain(|(n, _)| n != name);
        if find(name.as_bytes()).is_none_or(|p| p.default != value) {
            self.0.push((name.to_string(), value));
        }
    }

    /// Sets `name` to `value` even when it is the default: for a setting
    /// whose value in force started elsewhere (the listening `port` and
    /// `bind` come from each worker's command line), so that every worker
    /// takes it.
    pub(crate) fn set_kept(&mut self, name: &str, value: String) {
        self.0.retain(|(n, _)| n != name);
        self.0.push((name.to_string(), value));
    }

    /// The shared text.
    pub(crate) fn to_text(&self) -> Vec<u8> {
        let mut out = String::new();
        for (n, v) in &self.0 {
            out.push_str(n);
            out.push(' ');
            for c in v.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\0' => out.push_str("\\0"),
                    c => out.push(c),
                }
            }
            out.push('\n');
        }
        out.into_bytes()
    }
}

/// The value `Overrides::to_text` escaped; an unknown escape stays as it is.
fn unescape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('0') => out.push('\0'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, value: &str) -> Result<String, Refusal> {
        normalize(find(name.as_bytes()).expect("known"), value.as_bytes())
    }

    #[test]
    fn table_is_sorted_and_unique() {
        let names: Vec<&str> = PARAMS.iter().map(|p| p.name).collect();
        let mut redis: Vec<&str> = names.clone();
        redis.dedup();
        assert_eq!(redis.len(), names.len());
        assert!(find(b"hash-max-ziplist-entries")
            .is_some_and(|p| p.name == "hash-max-listpack-entries"));
        assert!(find(b"SLAVEOF").is_some_and(|p| p.name == "replicaof"));
    }

    #[test]
    fn values_are_checked_as_redis_does() {
        assert_eq!(set("activerehashing", "YES"), Ok("yes".into()));
        assert_eq!(
            set("activerehashing", "1"),
            Err("argument must be 'yes' or 'no'".into())
        );
        assert_eq!(set("list-max-listpack-size", "-2"), Ok("-2".into()));
        assert_eq!(
            set("list-compress-depth", "x"),
            Err("argument couldn't be parsed into an integer".into())
        );
        assert_eq!(
            set("list-compress-depth", "-1"),
            Err("argument must be between 0 and 2147483647 inclusive".into())
        );
        assert_eq!(set("hash-max-listpack-value", "1kb"), Ok("1024".into()));
        assert_eq!(set("loglevel", "WARNING"), Ok("warning".into()));
        assert_eq!(
            set("loglevel", "loud"),
            Err("argument(s) must be one of the following: debug, verbose, notice, warning".into())
        );
        assert_eq!(set("save", "3600 1 300 100"), Ok("3600 1 300 100".into()));
        assert_eq!(
            set("latency-tracking-info-percentiles", "0.0 50.0 99.9"),
            Ok("0 50 99.9".into())
        );
        assert_eq!(set("save", ""), Ok("".into()));
        assert!(set("save", "3600").is_err());
    }

    #[test]
    fn overrides_round_trip() {
        let mut o = Overrides::parse(b"save 1 2\nno-such-param 3\n");
        assert_eq!(o.get("save"), Some("1 2"));
        assert_eq!(o.get("no-such-param"), None);
        o.set("loglevel", "debug".into());
        o.set("save", "60 1".into());
        o.set("hz", "10".into());
        let o = Overrides::parse(&o.to_text());
        assert_eq!(o.get("save"), Some("60 1"));
        assert_eq!(o.get("hz"), None, "a default is not kept");
        assert_eq!(o.get("loglevel"), Some("debug"));
    }

    #[test]
    fn a_binary_password_survives_the_shared_text() {
        assert_eq!(set("masterauth", "abc\0d\nef"), Ok("abc\0d\nef".into()));
        assert!(set("dir", "a\nb").is_err(), "only passwords are binary");
        let mut o = Overrides::default();
        o.set("masterauth", "a\\b\0c\r\nd\\n".into());
        o.set("logfile", "x".into());
        let text = o.to_text();
        assert_eq!(text.iter().filter(|&&b| b == b'\n').count(), 2);
        let o = Overrides::parse(&text);
        assert_eq!(o.get("masterauth"), Some("a\\b\0c\r\nd\\n"));
        assert_eq!(o.get("logfile"), Some("x"));
        assert_eq!(unescape("a\\qb\\"), "a\\qb\\", "unknown escapes stay");
    }
}
