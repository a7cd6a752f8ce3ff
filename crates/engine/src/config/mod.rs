//! Settings in force for one worker, with their Redis names. CONFIG GET and
//! CONFIG SET read and change them. A change must reach every worker at once,
//! so settable values live in the segment's shared setting words (plus a
//! generation word that each engine checks before a command); the memory
//! limit and eviction policy live in the store's own header words.

use store::Store;

pub(crate) mod params;
pub mod startup;

/// The settings a worker runs with.
#[derive(Clone, Debug)]
pub struct Config {
    /// `bind`.
    pub bind: String,
    /// `port` (0 = no RESP TCP listener).
    pub port: u16,
    /// `tls-port`: RESP over TLS (0 = no such listener).
    pub tls_port: u16,
    /// `unixsocket` (empty = none).
    pub unixsocket: String,
    /// `memcached-port`: memcached text, meta and binary over TCP (0 = off).
    pub memcached_port: u16,
    /// `memcached-udp-port`: memcached over UDP, 8-byte frame header (0 = off).
    pub memcached_udp_port: u16,
    /// `http-port`: HTTP commands, raw values, /metrics, WebSocket (0 = off).
    pub http_port: u16,
    /// `nats-port`: NATS clients (0 = off).
    pub nats_port: u16,
    /// `nats-max-payload`: the largest NATS message, announced in INFO.
    pub nats_max_payload: u64,
    /// `item-size-max`: the largest memcached item (memcached's `-I`).
    pub item_size_max: u64,
    /// `proto-max-bulk-len`.
    pub proto_max_bulk_len: u64,
    /// `client-query-buffer-limit`.
    pub client_query_buffer_limit: u64,
    /// `client-output-buffer-limit` for normal clients: hard limit in bytes
    /// (0 = none), soft limit, soft seconds.
    pub output_limit_normal: (u64, u64, u64),
    /// `client-output-buffer-limit` for clients with subscriptions.
    pub output_limit_pubsub: (u64, u64, u64),
    /// `notify-keyspace-events`, as flag bits (notify.rs).
    pub notify_keyspace_events: u32,
    /// `lvc-channels`: globs of the channels whose last message is retained.
    pub lvc_channels: Vec<Vec<u8>>,
    /// `timeout`: close idle clients after this many seconds (0 = never).
    pub timeout: u64,
    /// `maxclients`.
    pub maxclients: u64,
    /// `hz`: active expiry passes per second.
    pub hz: u64,
    /// Number of worker processes (`workers`).
    pub workers: u64,
    /// `slowlog-log-slower-than` (microseconds; negative = off).
    pub slowlog_log_slower_than: i64,
    /// `slowlog-max-len`.
    pub slowlog_max_len: u64,
    /// `latency-monitor-threshold` (milliseconds; 0 = off).
    pub latency_monitor_threshold: u64,
    /// `hll-sparse-max-bytes`: a sparse HyperLogLog past this size turns
    /// dense.
    pub hll_sparse_max_bytes: u64,
    /// The configuration file the server started from (absolute; empty =
    /// none): CONFIG REWRITE writes it back.
    pub config_file: String,
    /// `tracking-table-max-keys`: keys each worker's tracking table holds
    /// at most (0 = no limit).
    pub tracking_table_max_keys: u64,
    /// `stream-node-max-bytes`: bytes of a stream node before a new one
    /// starts (0 = no limit).
    pub stream_node_max_bytes: u64,
    /// `stream-node-max-entries`: entries of a stream node before a new
    /// one starts (0 = no limit).
    pub stream_node_max_entries: u64,
    /// `busy-reply-threshold` (alias `lua-time-limit`): milliseconds a
    /// script runs before other clients get `-BUSY`.
    pub busy_reply_threshold: u64,
    /// `min-replicas-to-write` (0 = off).
    pub min_replicas_to_write: u64,
    /// `min-replicas-max-lag`, seconds.
    pub min_replicas_max_lag: u64,
    /// `replica-sync-count`: replicas that must have applied a write before
    /// its client gets the reply (0 = off; docs/replication.md).
    pub replica_sync_count: u64,
    /// `replica-sync-timeout`: milliseconds a reply waits for them before
    /// it leaves anyway (0 = as long as it takes).
    pub replica_sync_timeout: u64,
    /// `replica-sync-level disk`: the replicas must have the write fsynced
    /// on their disk, not only applied (docs/replication.md).
    pub replica_sync_disk: bool,
    /// `replica-serve-stale-data`: a replica whose link is down serves
    /// every command (yes) or only those with the STALE flag (no).
    pub replica_serve_stale_data: bool,
    /// `lazyfree-lazy-user-del`: DEL frees large values as UNLINK does.
    pub lazyfree_lazy_user_del: bool,
    /// `maxmemory-clients`: bytes, or a percentage of `maxmemory` when
    /// negative (`-N` is `N%`); 0 = clients are never evicted.
    pub maxmemory_clients: i64,
    /// `lazyfree-lazy-user-flush`: FLUSHDB / FLUSHALL with no mode are ASYNC.
    pub lazyfree_lazy_user_flush: bool,
    /// `replica-lazy-flush`: a replica's flush before a full sync is ASYNC.
    pub replica_lazy_flush: bool,
    /// `lazyfree-lazy-expire` and `-server-del`, which the store applies
    /// itself (`lazyfree-lazy-eviction` is accepted: an evicting writer
    /// needs the memory at once, so evicted values are freed in the write).
    pub lazyfree_store: store::LazyFreePolicy,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: "127.0.0.1".into(),
            port: 6379,
            tls_port: 0,
            unixsocket: String::new(),
            memcached_port: 11211,
            memcached_udp_port: 11211,
            http_port: 8080,
            nats_port: 4222,
            nats_max_payload: 1 << 20,
            item_size_max: 1 << 20,
            proto_max_bulk_len: proto::resp::DEFAULT_PROTO_MAX_BULK_LEN,
            client_query_buffer_limit: proto::resp::DEFAULT_CLIENT_QUERY_BUFFER_LIMIT as u64,
            output_limit_normal: (0, 0, 0),
            output_limit_pubsub: (32 << 20, 8 << 20, 60),
            notify_keyspace_events: 0,
            lvc_channels: Vec::new(),
            timeout: 0,
            maxclients: 10_000,
            hz: 10,
            workers: 1,
            slowlog_log_slower_than: 10_000,
            slowlog_max_len: 128,
            latency_monitor_threshold: 0,
            hll_sparse_max_bytes: 3000,
            config_file: String::new(),
            tracking_table_max_keys: 1_000_000,
            stream_node_max_bytes: 4096,
            stream_node_max_entries: 100,
            busy_reply_threshold: 5000,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 10,
            replica_sync_count: 0,
            replica_sync_timeout: 0,
            replica_sync_disk: false,
            replica_serve_stale_data: true,
            lazyfree_lazy_user_del: false,
            maxmemory_clients: 0,
            lazyfree_lazy_user_flush: false,
            replica_lazy_flush: false,
            lazyfree_store: Default::default(),
        }
    }
}

/// Shared setting words (`Store::config_word`). A stored value is the
/// setting plus one, so that 0 means "never set: keep this worker's own".
pub(crate) mod word {
    /// Bumped by every CONFIG SET.
    pub const GENERATION: u64 = 0;
    pub const PROTO_MAX_BULK_LEN: u64 = 1;
    pub const QUERY_BUFFER_LIMIT: u64 = 2;
    pub const MAXCLIENTS: u64 = 3;
    pub const TIMEOUT: u64 = 4;
    pub const HZ: u64 = 5;
    pub const OUTPUT_HARD: u64 = 6;
    pub const OUTPUT_SOFT: u64 = 7;
    pub const OUTPUT_SOFT_SECONDS: u64 = 8;
    pub const NOTIFY_KEYSPACE_EVENTS: u64 = 9;
    pub const PUBSUB_HARD: u64 = 10;
    pub const PUBSUB_SOFT: u64 = 11;
    pub const PUBSUB_SOFT_SECONDS: u64 = 12;
    /// Set once the shared setting text holds CONFIG SET's values
    /// (`params::Overrides`).
    pub const TEXT_SET: u64 = 13;
    /// CONFIG RESETSTAT baselines: counters report their value minus these.
    pub const BASE_HITS: u64 = 16;
    pub const BASE_MISSES: u64 = 17;
    pub const BASE_EXPIRED: u64 = 18;
    pub const BASE_EVICTED: u64 = 19;
    pub const BASE_COMMANDS: u64 = 20;
    pub const BASE_CONNECTIONS: u64 = 21;
    /// CONFIG RESETSTAT's baseline of `lazyfreed_objects`.
    pub const BASE_LAZYFREED: u64 = 23;
    /// DEBUG SET-ACTIVE-EXPIRE 0 sets it to one: no worker's tick sweeps
    /// expired keys (they still expire when touched).
    pub const ACTIVE_EXPIRE_OFF: u64 = 22;
    /// A delayed memcached `flush_all`'s deadline (ms since the epoch, 0 =
    /// none): whichever worker first sees it due does the flush.
    pub const MC_FLUSH_AT: u64 = 24;
    /// The first of memcached's `stats reset` baselines (one word per
    /// resettable counter, `memcache.rs`'s `RESETTABLE`: 25..=43).
    pub const MC_RESET_BASE: u64 = 25;
    /// The next SLOWLOG entry id, shared so that ids are unique.
    pub const SLOWLOG_ID: u64 = 44;
    /// Bumped by CONFIG RESETSTAT: each engine clears its per-command
    /// counters when it sees a new value.
    pub const STATS_EPOCH: u64 = 45;
    /// CLIENT PAUSE: the deadline (ms since the epoch) shifted left by two,
    /// with the mode in the low bits; 0 = no pause (`pause.rs`).
    pub const PAUSE: u64 = 46;
    /// Bit per worker slot: that worker has tracking clients or tracked
    /// keys (CLIENT TRACKING), so written keys are sent to it.
    pub const TRACKING_SLOTS: u64 = 47;
    /// Bumped by every FLUSHDB / FLUSHALL: a worker that sees it move
    /// empties its tracking table and sends `invalidate nil`, even before
    /// the flush's routed message reaches it.
    pub const TRACKING_FLUSHES: u64 = 48;
    /// Bumped by SCRIPT FLUSH: a worker that sees it move drops the
    /// scripts it compiled (the shared cache directory is emptied).
    pub const SCRIPT_EPOCH: u64 = 49;
    /// Bumped by every change of the function libraries (FUNCTION LOAD,
    /// DELETE, FLUSH, RESTORE): a worker that sees it move loads them
    /// again from the shared file.
    pub const FUNCTION_GENERATION: u64 = 50;
    /// The script running now, if any: its worker, start and requests
    /// (`scripting::busy`); 0 = none.
    pub const SCRIPT_BUSY: u64 = 51;
    /// The synchronous mode's progress, published by the supervisor: the
    /// LSN that `replica-sync-count` replicas have acknowledged, with that
    /// count in the top byte (`replication::sync_acked`).
    pub const REPL_SYNC_ACKED: u64 = 52;
    /// The end of the last write whose reply waits for replicas: a worker
    /// publishes it (a futex wake) so that the senders forward it at once
    /// instead of at their next poll.
    pub const REPL_SYNC_WANTED: u64 = 53;
    /// The synchronous mode's "disk" level, published by the supervisor:
    /// the LSN that `replica-sync-count` replicas have fsynced on their
    /// disk, with that count in the top byte, as `REPL_SYNC_ACKED`.
    pub const REPL_SYNC_DURABLE: u64 = 54;
    /// FAILOVER's request: FORCE in the low bit, the deadline (ms since the
    /// epoch, 0 = none) above it, a sequence number in the top bits
    /// (`replication.rs`).
    pub const FAILOVER_REQUEST: u64 = 55;
    /// FAILOVER's state: 0 none, 1 waiting for the replica's sync, 2 in
    /// progress, 3 a worker is writing the request; the target replica's
    /// id (0: any) above the two low bits. Writes are paused while it is
    /// not 0.
    pub const FAILOVER_STATE: u64 = 56;
    /// Bumped after every change of the ACL user table (acl.rs): each
    /// engine re-reads the users when it sees it move.
    pub const ACL_GENERATION: u64 = 57;
    /// Bumped by every REPLICAOF: the supervisor looks at the target again.
    pub const REPL_GENERATION: u64 = 58;
    /// 1 while this server is a replica (REPLICAOF host port), else 0.
    pub const REPL_ROLE: u64 = 59;
    /// A replica's applied position in its primary's log (replication.rs).
    pub const REPL_APPLIED: u64 = 60;
    /// A replica's tag of the replication id it applied from
    /// (`replication::replid_tag`; 0 = none).
    pub const REPL_FOLLOWED: u64 = 61;
    /// Bumped after every change of a TLS setting (`tls-*`,
    /// `memcached-tls`, `http-tls`): each worker builds its TLS
    /// configuration again when it sees it move.
    pub const TLS_GENERATION: u64 = 62;
    /// Bumped (a futex wake) to have the supervisor rewrite its
    /// replication status file now: by a WAIT that is waiting, and by the
    /// supervisor's own threads when something other than an
    /// acknowledgement changed (`replication::want_status`).
    pub const REPL_STATUS_WANTED: u64 = 63;
    /// `hash-max-listpack-entries` plus one, read by the store: a hash
    /// within the listpack thresholds keeps its insertion order.
    pub const HASH_LISTPACK_ENTRIES: u64 = store::HASH_LISTPACK_ENTRIES_WORD;
    /// `hash-max-listpack-value` plus one, read by the store.
    pub const HASH_LISTPACK_VALUE: u64 = store::HASH_LISTPACK_VALUE_WORD;
}

/// The TLS generation now in force (see `word::TLS_GENERATION`).
pub fn tls_generation(store: &Store) -> u64 {
    store.config_word(word::TLS_GENERATION).unwrap_or(0)
}

/// The value of parameter `name` in the shared setting text `text`, as
/// CONFIG GET prints it: what CONFIG SET or the start configuration set,
/// else its default. None for an unknown name.
pub fn setting_in(text: &[u8], name: &str) -> Option<String> {
    let param = params::find(name.as_bytes())?;
    let overrides = params::Overrides::parse(text);
    Some(
        overrides
            .get(param.name)
            .map_or_else(|| param.default.to_string(), str::to_string),
    )
}

impl Config {
    /// The `maxmemory-clients` limit in bytes for `maxmemory` (a
    /// percentage of it when so set; 0 = none), as Redis's
    /// getClientEvictionLimit.
    pub fn client_eviction_limit(&self, maxmemory: u64) -> u64 {
        match self.maxmemory_clients {
            v if v >= 0 => v as u64,
            v => (maxmemory as u128 * v.unsigned_abs() as u128 / 100) as u64,
        }
    }

    /// Applies every shared setting that was set, if the generation moved
    /// since `seen`; returns the generation now in force.
    pub(crate) fn sync(&mut self, store: &Store, seen: u64) -> u64 {
        let generation = store.config_word(word::GENERATION).unwrap_or(seen);
        if generation == seen {
            return seen;
        }
        let get = |w| store.config_word(w).ok().filter(|v| *v != 0).map(|v| v - 1);
        if let Some(v) = get(word::PROTO_MAX_BULK_LEN) {
            self.proto_max_bulk_len = v;
        }
        if let Some(v) = get(word::QUERY_BUFFER_LIMIT) {
            self.client_query_buffer_limit = v;
        }
        if let Some(v) = get(word::MAXCLIENTS) {
            self.maxclients = v;
        }
        if let Some(v) = get(word::TIMEOUT) {
            self.timeout = v;
        }
        if let Some(v) = get(word::HZ) {
            self.hz = v;
        }
        if let (Some(h), Some(s), Some(t)) = (
            get(word::OUTPUT_HARD),
            get(word::OUTPUT_SOFT),
            get(word::OUTPUT_SOFT_SECONDS),
        ) {
            self.output_limit_normal = (h, s, t);
        }
        if let (Some(h), Some(s), Some(t)) = (
            get(word::PUBSUB_HARD),
            get(word::PUBSUB_SOFT),
            get(word::PUBSUB_SOFT_SECONDS),
        ) {
            self.output_limit_pubsub = (h, s, t);
        }
        if let Some(v) = get(word::NOTIFY_KEYSPACE_EVENTS) {
            self.notify_keyspace_events = v as u32;
        }
        if get(word::TEXT_SET).is_some() {
            if let Ok(text) = store.config_text() {
                let overrides = params::Overrides::parse(&text);
                // CONFIG SET port / bind moved the listeners (`Engine::set_rebind`).
                if let Some(port) = overrides.get("port").and_then(|p| p.parse().ok()) {
                    self.port = port;
                }
                if let Some(port) = overrides.get("tls-port").and_then(|p| p.parse().ok()) {
                    self.tls_port = port;
                }
                if let Some(bind) = overrides.get("bind") {
                    self.bind = listen_address(bind).map(|(a, _)| a).unwrap_or_default();
                }
                if let Some(globs) = overrides.get("lvc-channels") {
                    self.lvc_channels = split_globs(globs.as_bytes());
                }
                let int = |name: &str| {
                    let value = overrides
                        .get(name)
                        .map(str::to_string)
                        .or_else(|| params::find(name.as_bytes()).map(|p| p.default.to_string()));
                    value.and_then(|v| v.parse::<i64>().ok())
                };
                // The text keeps a percentage as `N%`.
                self.maxmemory_clients = match overrides.get("maxmemory-clients") {
                    Some(v) => match v.strip_suffix('%') {
                        Some(pct) => pct.parse::<i64>().map_or(0, |p| -p),
                        None => v.parse().unwrap_or(0),
                    },
                    None => 0,
                };
                if let Some(v) = int("slowlog-log-slower-than") {
                    self.slowlog_log_slower_than = v;
                }
                if let Some(v) = int("slowlog-max-len") {
                    self.slowlog_max_len = v.max(0) as u64;
                }
                if let Some(v) = int("latency-monitor-threshold") {
                    self.latency_monitor_threshold = v.max(0) as u64;
                }
                if let Some(v) = int("hll-sparse-max-bytes") {
                    self.hll_sparse_max_bytes = v.max(0) as u64;
                }
                if let Some(v) = int("tracking-table-max-keys") {
                    self.tracking_table_max_keys = v.max(0) as u64;
                }
                if let Some(v) = int("stream-node-max-bytes") {
                    self.stream_node_max_bytes = v.max(0) as u64;
                }
                if let Some(v) = int("stream-node-max-entries") {
                    self.stream_node_max_entries = v.max(0) as u64;
                }
                if let Some(v) = int("busy-reply-threshold") {
                    self.busy_reply_threshold = v.max(0) as u64;
                }
                if let Some(v) = int("min-replicas-to-write") {
                    self.min_replicas_to_write = v.max(0) as u64;
                }
                if let Some(v) = int("min-replicas-max-lag") {
                    self.min_replicas_max_lag = v.max(0) as u64;
                }
                if let Some(v) = int("replica-sync-count") {
                    self.replica_sync_count = v.max(0) as u64;
                }
                if let Some(v) = int("replica-sync-timeout") {
                    self.replica_sync_timeout = v.max(0) as u64;
                }
                self.replica_sync_disk = overrides
                    .get("replica-sync-level")
                    .is_some_and(|v| v.eq_ignore_ascii_case("disk"));
                let yes = |name: &str| match overrides.get(name) {
                    Some(v) => v.eq_ignore_ascii_case("yes"),
                    None => params::find(name.as_bytes()).is_some_and(|p| p.default == "yes"),
                };
                self.lazyfree_lazy_user_del = yes("lazyfree-lazy-user-del");
                self.replica_serve_stale_data = yes("replica-serve-stale-data");
                self.lazyfree_lazy_user_flush = yes("lazyfree-lazy-user-flush");
                self.replica_lazy_flush = yes("replica-lazy-flush");
                self.lazyfree_store = store::LazyFreePolicy {
                    expire: yes("lazyfree-lazy-expire"),
                    server_del: yes("lazyfree-lazy-server-del"),
                };
            }
        }
        generation
    }
}

/// The one address shoal listens on for a `bind` list (it binds one): the
/// first IPv4 address (`*` is 0.0.0.0), else the first address; plus the
/// addresses left out. A leading `-` (Redis's "skip if missing") is
/// dropped. None for an empty list (no TCP listener, as in Redis).
pub fn listen_address(bind: &str) -> Option<(String, Vec<String>)> {
    let words: Vec<String> = bind
        .split_whitespace()
        .map(|w| w.trim_start_matches('-').to_string())
        .collect();
    let is_v4 = |w: &str| w == "*" || w.parse::<std::net::Ipv4Addr>().is_ok() || w == "localhost";
    let chosen = words
        .iter()
        .position(|w| is_v4(w))
        .or((!words.is_empty()).then_some(0))?;
    let addr = match words[chosen].as_str() {
        "*" => "0.0.0.0".to_string(),
        "::*" => "::".to_string(),
        w => w.to_string(),
    };
    let rest = words
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != chosen)
        .map(|(_, w)| w.clone())
        .collect();
    Some((addr, rest))
}

/// The globs of a space-separated list (`lvc-channels`).
pub(crate) fn split_globs(text: &[u8]) -> Vec<Vec<u8>> {
    text.split(|b| b.is_ascii_whitespace())
        .filter(|g| !g.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}
