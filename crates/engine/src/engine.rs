//! The dispatcher: looks a request up in the command table, checks its arity,
//! runs it against the store and writes the reply. One `Engine` per worker
//! thread (it owns that thread's store handle).

use std::rc::Rc;
use std::time::Instant;

use proto::resp::ReplyWriter;
use store::{Handle, Store, ValueType};

use crate::command::{self, Arg, CmdResult, Command};
use crate::config::Config;
use crate::error::CmdError;
use crate::pubsub::PubSub;
use crate::session::{ReplyMode, Session};
use crate::transaction;

/// Facts about the process that INFO and CONFIG report.
#[derive(Clone, Debug, Default)]
pub struct ServerInfo {
    /// Worker slot number (0 for an embedded engine).
    pub worker: u32,
    /// TCP port of the RESP listener (0 = none).
    pub port: u16,
    /// The running executable.
    pub executable: String,
    /// The config file, if any.
    pub config_file: String,
    /// 40 hex digits identifying this run (Redis's `run_id`).
    pub run_id: String,
}

/// What the connection does after a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Go on reading.
    Continue,
    /// Write the replies so far, then close (QUIT, or a fatal error).
    Close,
    /// The command concerns connections or processes: the server finishes it
    /// and writes its reply.
    Server(ServerRequest),
    /// A blocking command (BLPOP…) found nothing: the connection waits, with
    /// no reply written, until one of the keys is signalled ready (then the
    /// same command runs again) or the deadline passes (then the server
    /// writes the timeout reply).
    Block(BlockRequest),
    /// CLIENT PAUSE holds the command: nothing ran and no reply was
    /// written. The connection keeps the request (and the ones after it)
    /// unread and runs it again once the pause ends.
    Hold,
}

/// Where and how long a blocked client waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockRequest {
    /// The database of the keys.
    pub db: u8,
    /// The keys, in the command's order.
    pub keys: Vec<Vec<u8>>,
    /// When to give up, ms since the epoch (None: wait forever).
    pub deadline_ms: Option<u64>,
    /// The type the command pops from: a woken client whose key now holds
    /// another type stays blocked, as in Redis 7.0.
    pub wants: ValueType,
    /// The command to run again in place of the one that blocked (XREAD
    /// with `$` resolved to the ID it stood for when the client blocked);
    /// None: the same command.
    pub rerun: Option<Vec<Vec<u8>>>,
}

/// A blocking command's reply when it cannot block (inside EXEC). After a
/// real timeout every blocking command replies a null array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutReply {
    /// BLPOP, BRPOP, BLMPOP, BZPOPMIN/MAX, BZMPOP: a null array.
    NullArray,
    /// BLMOVE, BRPOPLPUSH: a null bulk string.
    NullBulk,
}

impl TimeoutReply {
    /// Writes the reply.
    pub fn write(self, out: &mut ReplyWriter<'_>) {
        match self {
            TimeoutReply::NullArray => out.null_array(),
            TimeoutReply::NullBulk => out.null(),
        }
    }
}

/// Work that only the server can do, already validated by the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerRequest {
    /// CLIENT LIST, optionally only these ids.
    ClientList {
        /// `ID id…` filter (empty = all).
        ids: Vec<u64>,
        /// `TYPE` filter.
        client_type: Option<ClientType>,
    },
    /// CLIENT KILL.
    ClientKill(KillFilter),
    /// CLIENT UNBLOCK: end client `id`'s blocking command as if it timed out
    /// or, with `error`, with an -UNBLOCKED error; the reply is 1 when it was
    /// blocked, else 0.
    ClientUnblock {
        /// The blocked client.
        id: u64,
        /// ERROR rather than TIMEOUT.
        error: bool,
    },
    /// SHUTDOWN (NOSAVE/SAVE are accepted; there is nothing to save yet).
    Shutdown,
    /// PUBSUB CHANNELS / SHARDCHANNELS: the names live with each worker's
    /// subscribers, so every worker is asked.
    PubsubChannels {
        /// SHARDCHANNELS.
        shard: bool,
        /// Only names matching this glob.
        pattern: Option<Vec<u8>>,
    },
    /// A diagnostics query every worker answers (SLOWLOG, LATENCY, INFO):
    /// the server runs [`Engine::answer_gather`] on each worker and gives
    /// the answers to [`Engine::finish_gather`] for the reply.
    Gather(Vec<u8>),
    /// WAIT: reply with how many replicas acknowledged `offset`, once
    /// `numreplicas` have or `timeout_ms` passed (0 = no limit).
    Wait {
        /// Replicas to wait for.
        numreplicas: u64,
        /// Milliseconds; 0 waits as long as it takes.
        timeout_ms: u64,
        /// The log position the replicas must have applied.
        offset: u64,
    },
    /// SHOAL.SYNC: the connection is a replica's link; the supervisor takes it.
    Replicate {
        /// The tag of the history the replica applied, 16 hex digits
        /// (`replication::replid_tag`; `?`: none).
        replid: String,
        /// Where it wants the log from.
        offset: u64,
        /// The port it serves clients on (INFO's `slaveN:port`).
        port: u16,
        /// FAILOVER: the primary asks this replica to take over first.
        failover: bool,
    },
}

/// A client type of CLIENT LIST/KILL's `TYPE`. A replica's link is the
/// supervisor's (never a worker's client) and shoal's own link to its
/// primary is no client either, so only `normal` and `pubsub` select any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientType {
    /// Neither subscribed nor a replication link (MONITOR included, as in
    /// Redis).
    Normal,
    /// A subscriber: Redis keeps it apart, so that Sentinel's `CLIENT KILL
    /// TYPE normal` on a reconfigured server spares the pub/sub links.
    PubSub,
    /// `master`, `replica` or `slave`.
    Replication,
}

impl ClientType {
    /// The type a `TYPE` argument names, if it names one.
    pub fn parse(name: &[u8]) -> Option<ClientType> {
        let is = |w: &str| name.eq_ignore_ascii_case(w.as_bytes());
        if is("normal") {
            Some(ClientType::Normal)
        } else if is("pubsub") {
            Some(ClientType::PubSub)
        } else if is("master") || is("replica") || is("slave") {
            Some(ClientType::Replication)
        } else {
            None
        }
    }

    /// Whether a client that is subscribed (`subscribed`) is of this type.
    pub fn selects(self, subscribed: bool) -> bool {
        match self {
            ClientType::Normal => !subscribed,
            ClientType::PubSub => subscribed,
            ClientType::Replication => false,
        }
    }

    /// The argument that names this type.
    pub fn name(self) -> &'static str {
        match self {
            ClientType::Normal => "normal",
            ClientType::PubSub => "pubsub",
            ClientType::Replication => "replica",
        }
    }
}

/// CLIENT KILL's filters; every given one must match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KillFilter {
    /// The old form `CLIENT KILL addr:port`: reply OK or an error.
    pub legacy: bool,
    /// ID.
    pub id: Option<u64>,
    /// ADDR ip:port.
    pub addr: Option<String>,
    /// LADDR ip:port.
    pub laddr: Option<String>,
    /// MAXAGE seconds.
    pub max_age: Option<u64>,
    /// TYPE.
    pub client_type: Option<ClientType>,
    /// SKIPME (default yes): spare the calling client.
    pub skip_me: bool,
    /// The calling client's id.
    pub caller: u64,
    /// USER: only clients authenticated as one of these (empty = any).
    pub users: Vec<Vec<u8>>,
    /// Only subscribed clients with a subscription that none of these
    /// channel patterns allows (ACL SETUSER took channels away).
    pub channels_outside: Option<Vec<Vec<u8>>>,
    /// The command already replied: write nothing more.
    pub quiet: bool,
}

impl KillFilter {
    /// Whether `s` passes the ACL parts of the filter (user, lost
    /// channels); the server checks the others.
    pub fn selects_acl(&self, s: &Session) -> bool {
        if !self.users.is_empty() && !self.users.contains(&s.user) {
            return false;
        }
        let Some(allowed) = &self.channels_outside else {
            return true;
        };
        let ok = |name: &[u8], pattern: bool| {
            allowed.iter().any(|p| {
                if pattern {
                    p == name
                } else {
                    store::glob::glob_match(p, name, false)
                }
            })
        };
        let subs = s.subs();
        subs.patterns.iter().any(|p| !ok(p, true))
            || subs.channels.iter().any(|c| !ok(c, false))
            || subs.shard.iter().any(|c| !ok(c, false))
    }
}

/// Per-engine counters for INFO stats.
#[derive(Clone, Copy, Debug, Default)]
pub struct EngineStats {
    /// Commands executed.
    pub commands: u64,
    /// Commands rejected before running (unknown, arity).
    pub rejected: u64,
    /// Commands that replied with an error.
    pub failed: u64,
}

/// One thread's command executor.
pub struct Engine {
    pub(crate) store: Store,
    pub(crate) h: Handle,
    pub(crate) config: Config,
    pub(crate) info: ServerInfo,
    pub(crate) stats: EngineStats,
    /// INFO commandstats, errorstats and latencystats.
    pub(crate) cmdstats: crate::stats::CommandStats,
    /// SLOWLOG entries and LATENCY events of this worker.
    pub(crate) diag: crate::diagnostics::Diagnostics,
    /// The CONFIG RESETSTAT epoch this engine's counters start from.
    stats_epoch: u64,
    pub(crate) started: Instant,
    /// Reused buffer for values read on their way into a reply.
    pub(crate) scratch: Vec<u8>,
    /// Lists and sorted sets that commands added elements to since the
    /// server last took them: blocked clients waiting on them may go on.
    pub(crate) ready_keys: Vec<(u8, Vec<u8>)>,
    /// The shared-settings generation this engine has applied.
    config_generation: u64,
    /// Subscribers on this worker and the router to the others.
    pub(crate) pubsub: PubSub,
    /// CLIENT UNPAUSE ran here since the server last looked.
    pub(crate) pause_changed: bool,
    /// CLIENT TRACKING's clients and table on this worker.
    pub(crate) tracking: crate::tracking::Tracking,
    /// The ACL users (from the segment) and this worker's ACL LOG.
    pub(crate) acl: crate::acl::Acl,
    /// Serves this worker's other clients while one of its scripts is busy
    /// (set by the server: it knows the connections).
    pub(crate) busy_server: Option<BusyServer>,
    /// The error the running command returns was counted already (a
    /// script ending with the error of a command it called, as Redis's
    /// `ERR_REPLY_FLAG_NO_STATS_UPDATE`): errorstats skip it.
    pub(crate) error_counted: bool,
    /// Replicas good for `min-replicas-to-write`, and when that was read.
    pub(crate) good_replicas: Option<(Instant, u64)>,
    /// Online replicas (the synchronous mode's check), when that was read
    /// and whether it counted for the disk level.
    pub(crate) online_replicas: Option<(Instant, u64, bool)>,
    /// Whether this replica's link is up, and when that was read.
    pub(crate) link_up: Option<(Instant, bool)>,
    /// Checks a CONFIG SET of TLS settings before it applies (see
    /// [`Engine::set_tls_check`]).
    pub(crate) tls_check: Option<TlsCheck>,
    /// Moves the listening sockets for CONFIG SET port / bind (see
    /// [`Engine::set_rebind`]).
    pub(crate) rebind: Option<Rebind>,
    /// memcached's auth file (`memcached-auth-file`), read at start.
    pub(crate) mc_auth_file: Option<crate::memcache_auth::AuthFile>,
}

/// What a worker runs, from a busy script's hook, to answer its other
/// clients (`-BUSY`, or the commands allowed while busy).
pub type BusyServer = Rc<dyn Fn(&mut Engine)>;

/// Builds the TLS configuration the shared setting text given would make
/// and says why it cannot (the engine knows nothing of TLS; the server
/// crate sets it).
pub type TlsCheck = Box<dyn Fn(&[u8]) -> Result<(), String>>;

/// A listening address: the `bind` address (empty = no TCP listener), the
/// RESP `port` and RESP over TLS `tls-port` (0 = none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenAddress {
    /// The one address listened on (empty = none).
    pub bind: String,
    /// The RESP port (0 = none).
    pub port: u16,
    /// The RESP over TLS port (0 = none).
    pub tls_port: u16,
}

/// Moves every worker's listening sockets from the first address to the
/// second (CONFIG SET port / bind), or none of them, saying why it could
/// not bind. The engine knows nothing of sockets; the server crate sets it.
pub type Rebind = Box<dyn Fn(&ListenAddress, &ListenAddress) -> Result<(), String>>;

/// What a handler works with: the engine, the client's session and the reply
/// sink, plus what the connection should do next.
pub struct Cx<'a> {
    pub(crate) engine: &'a mut Engine,
    pub(crate) session: &'a mut Session,
    pub(crate) out: ReplyWriter<'a>,
    pub(crate) flow: Flow,
}

impl Cx<'_> {
    /// The thread's store handle.
    pub(crate) fn h(&mut self) -> &mut Handle {
        &mut self.engine.h
    }

    /// Records that `key` (in the session's db) gained elements, so that
    /// clients blocked on it, on this worker or another, try again (Redis's
    /// `signalKeyAsReady`). List and sorted-set writers call it.
    pub(crate) fn signal_ready(&mut self, key: &[u8]) {
        self.signal_ready_in(self.session.db, key);
    }

    /// [`Cx::signal_ready`] for a key of db `db` (COPY and MOVE write into
    /// another db). Redis's `dbAdd` signals every key it adds, whatever the
    /// command; the waiters check the type.
    pub(crate) fn signal_ready_in(&mut self, db: u8, key: &[u8]) {
        if !self
            .engine
            .ready_keys
            .iter()
            .any(|(d, k)| *d == db && k == key)
        {
            self.engine.ready_keys.push((db, key.to_vec()));
        }
    }

    /// Ends a blocking command that found nothing: the client waits on
    /// `keys` (holding `wants`) for `timeout_ms` (None: forever). Where a
    /// client cannot wait (inside EXEC) `reply` is written at once, as
    /// Redis does.
    pub(crate) fn block(
        &mut self,
        keys: Vec<Vec<u8>>,
        wants: ValueType,
        timeout_ms: Option<u64>,
        reply: TimeoutReply,
    ) {
        if self.session.in_exec() {
            reply.write(&mut self.out);
            return;
        }
        let now = self.engine.h.now_ms();
        self.flow = Flow::Block(BlockRequest {
            db: self.session.db,
            keys,
            deadline_ms: timeout_ms.map(|t| now.saturating_add(t)),
            wants,
            rerun: None,
        });
    }

    /// [`Cx::block`], the client running `rerun` (not the command that
    /// blocked) each time one of its keys is signalled.
    pub(crate) fn block_rerun(
        &mut self,
        keys: Vec<Vec<u8>>,
        wants: ValueType,
        timeout_ms: Option<u64>,
        reply: TimeoutReply,
        rerun: Vec<Vec<u8>>,
    ) {
        self.block(keys, wants, timeout_ms, reply);
        if let Flow::Block(req) = &mut self.flow {
            req.rerun = Some(rerun);
        }
    }

    /// The selected db.
    pub(crate) fn db(&self) -> u8 {
        self.session.db
    }

    /// A request refused before it ran (unknown command, arity): counted,
    /// and an open MULTI is flagged so that its EXEC fails, as Redis's
    /// `rejectCommand` does.
    pub(crate) fn reject(&mut self, e: CmdError) -> CmdError {
        self.engine.stats.rejected += 1;
        self.session.tx.flag_error();
        e
    }
}

impl Engine {
    /// The end LSN of the last log frame this engine's writes produced: a
    /// client under `appendfsync always` gets its replies once the log is
    /// fsynced past it.
    pub fn log_last_end(&self) -> u64 {
        self.h.log_last_end()
    }

    /// When this engine started, in ms since the epoch (LASTSAVE before
    /// any snapshot).
    pub(crate) fn started_unix_ms(&self) -> u64 {
        let since = self.started.elapsed().as_millis() as u64;
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
            .saturating_sub(since)
    }

    /// An engine for the calling thread (registers a store context).
    pub fn new(store: Store, config: Config, info: ServerInfo) -> Result<Engine, store::Error> {
        let h = store.handle()?;
        let pubsub = PubSub::new(store.clone(), info.worker)?;
        let mut engine = Engine {
            store,
            h,
            config,
            info,
            stats: EngineStats::default(),
            cmdstats: Default::default(),
            diag: Default::default(),
            stats_epoch: 0,
            started: Instant::now(),
            scratch: Vec::new(),
            ready_keys: Vec::new(),
            config_generation: 0,
            pubsub,
            pause_changed: false,
            tracking: Default::default(),
            acl: Default::default(),
            busy_server: None,
            error_counted: false,
            good_replicas: None,
            online_replicas: None,
            link_up: None,
            tls_check: None,
            rebind: None,
            mc_auth_file: None,
        };
        engine.mc_auth_file = engine.load_mc_auth_file();
        engine.acl.sync(&engine.store);
        // A worker that died may have left its tracking bit set.
        engine.tracking_reset_slot();
        Ok(engine)
    }

    /// `memcached-auth-file`'s users, if one is set. A file that no longer
    /// reads (the server checked it at start) lets nobody in.
    fn load_mc_auth_file(&self) -> Option<crate::memcache_auth::AuthFile> {
        let text = self.store.config_text().unwrap_or_default();
        let path = crate::config::setting_in(&text, "memcached-auth-file")?;
        if path.is_empty() {
            return None;
        }
        Some(crate::memcache_auth::AuthFile::load(&path).unwrap_or_default())
    }

    /// Sets the check CONFIG SET runs on new TLS settings: a change that
    /// would leave no working TLS configuration is refused, as Redis
    /// refuses it.
    pub fn set_tls_check(&mut self, check: TlsCheck) {
        self.tls_check = Some(check);
    }

    /// Sets what CONFIG SET port / bind runs to move the listeners; without
    /// it they are refused as immutable.
    pub fn set_rebind(&mut self, rebind: Rebind) {
        self.rebind = Some(rebind);
    }

    /// Applies settings another worker changed (CONFIG SET), if any.
    pub fn sync_config(&mut self) {
        self.acl.sync(&self.store);
        let seen = self.config_generation;
        self.config_generation = self.config.sync(&self.store, seen);
        if self.config_generation != seen {
            self.h.set_lazy_policy(self.config.lazyfree_store);
            // CONFIG RESETSTAT on any worker clears every worker's counters.
            let epoch = self
                .store
                .config_word(crate::config::word::STATS_EPOCH)
                .unwrap_or(0);
            if epoch != self.stats_epoch {
                self.stats_epoch = epoch;
                self.stats = EngineStats::default();
                self.cmdstats = Default::default();
            }
        }
    }

    /// Evicts keys while the arena and the clients' buffers hold more
    /// than `maxmemory` under an evicting policy, before every command as
    /// Redis's performEvictions: replies and requests piling up in client
    /// buffers push keys out even when nobody writes. A replica leaves
    /// eviction to its primary (`replica-ignore-maxmemory`).
    fn evict_if_over(&mut self) {
        if !self.store.over_maxmemory().unwrap_or(false)
            || crate::replication::is_replica(&self.store)
            || self
                .store
                .eviction_policy()
                .is_ok_and(|p| p == store::EvictionPolicy::NoEviction)
        {
            return;
        }
        let _ = self.h.evict_to_maxmemory();
    }

    /// Whether a `denyoom` command must be refused now: over `maxmemory`
    /// under `noeviction`, or under an evicting policy that cannot get back
    /// under it (a write may have gone past it once nothing more could be
    /// evicted): Redis's performEvictions before a command.
    pub(crate) fn refuses_oom(&mut self) -> bool {
        if !self.store.over_maxmemory().unwrap_or(false) {
            return false;
        }
        if self
            .store
            .eviction_policy()
            .is_ok_and(|p| p == store::EvictionPolicy::NoEviction)
        {
            return true;
        }
        let _ = self.h.evict_to_maxmemory();
        self.store.over_maxmemory().unwrap_or(false)
    }

    /// Whether a password is required before any command (the default
    /// user has a password or is off): protocols without a way to log in
    /// yet (memcached) refuse every request then.
    pub fn auth_required(&self) -> bool {
        !self.acl.default_open && self.acl.users.default_user().requires_auth()
    }

    /// Whether a client from another host is refused (Redis's protected
    /// mode): `protected-mode yes` (the default) and no password for the
    /// default user.
    pub fn protected_mode_refuses(&self) -> bool {
        let on =
            crate::config::params::Overrides::parse(&self.store.config_text().unwrap_or_default())
                .get("protected-mode")
                .is_none_or(|v| v == "yes");
        on && self.acl.users.default_user().is_nopass()
    }

    /// Whether a memcached client logged in as `user` (the default user
    /// when no login is required) may write (as SET does) or read (as GET
    /// does) under the ACL rules.
    pub fn mc_permitted(&self, user: &[u8], writes: bool) -> bool {
        if self.acl.default_open && user == b"default" {
            return true;
        }
        let name: &[u8] = if writes { b"set" } else { b"get" };
        let Some(cmd) = command::lookup(name) else {
            return true;
        };
        let args = [
            std::borrow::Cow::Borrowed(name),
            std::borrow::Cow::Borrowed(&b"k"[..]),
            std::borrow::Cow::Borrowed(&b"v"[..]),
        ];
        let args = if writes { &args[..] } else { &args[..2] };
        let Some(user) = self.acl.users.get(user) else {
            return false;
        };
        // Key patterns are not checked here: a rule on commands is.
        user.check(cmd, args).is_ok() || {
            let d = user.check(cmd, args).err();
            d.is_some_and(|d| d.kind != crate::acl::DeniedKind::Command)
        }
    }

    /// Whether `session`'s user may subscribe to `channel` (a pattern when
    /// `is_pattern`): SSE subscriptions obey the channel rules.
    pub fn acl_channel_allowed(&self, session: &Session, channel: &[u8], is_pattern: bool) -> bool {
        if session.user == b"default" && self.acl.default_open {
            return true;
        }
        self.acl
            .users
            .get(&session.user)
            .is_some_and(|u| u.channel_allowed(channel, is_pattern))
    }

    /// The settings in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Changes settings (the server applies CONFIG SET from other workers).
    pub fn config_mut(&mut self) -> &mut Config {
        &mut self.config
    }

    /// The store this engine works on.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Counters for INFO.
    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    /// The type of `key`, if it exists (a woken blocked client checks it
    /// before running again).
    pub fn key_type(&mut self, db: u8, key: &[u8]) -> Option<ValueType> {
        self.h.key_type(db, key).ok().flatten()
    }

    /// The clock commands use (ms since the epoch).
    pub fn now_ms(&self) -> u64 {
        self.h.now_ms()
    }

    /// Looks up a request's command and, when `prefetch` is set, starts
    /// loading its keys' index slots into cache, so that a pipeline's lookups
    /// overlap (Rai DS's batch prefetch). Hand the result to
    /// [`execute_resolved`](Self::execute_resolved) so the name is not looked
    /// up twice.
    pub fn resolve(
        &self,
        session: &Session,
        args: &[Arg<'_>],
        prefetch: bool,
    ) -> Option<&'static Command> {
        let cmd = command::lookup(args.first()?)?;
        if prefetch && cmd.first_key != 0 {
            for i in cmd.key_positions(args.len()) {
                if let Some(key) = args.get(i) {
                    self.h.prefetch(session.db, key);
                }
            }
        }
        Some(cmd)
    }

    /// After [`Engine::resolve`] prefetched the buckets of a whole batch:
    /// prefetches the entries the buckets point to, so that both levels of
    /// cache misses overlap across the batch rather than stall each request.
    pub fn prefetch_entries(&self, session: &Session, args: &[Arg<'_>], cmd: &Command) {
        if cmd.first_key != 0 {
            for i in cmd.key_positions(args.len()) {
                if let Some(key) = args.get(i) {
                    self.h.prefetch_entry(session.db, key);
                }
            }
        }
    }

    /// The keys signalled ready since the last call (see
    /// [`Cx::signal_ready`]), for the server to wake blocked clients.
    pub fn take_ready_keys(&mut self) -> Vec<(u8, Vec<u8>)> {
        std::mem::take(&mut self.ready_keys)
    }

    /// One step of the background free of values this worker's lazy frees
    /// detached; true while some are left.
    pub fn free_lazily(&mut self) -> bool {
        /// Blocks (tree nodes of at most a few KiB) freed per step.
        const STEP: u64 = 256;
        self.h.free_lazily(STEP).unwrap_or(false)
    }

    /// Whether a script of another worker runs now: it holds the store's
    /// exclusive section, so background work that would resolve keys is
    /// put off rather than stall this worker until the script ends.
    pub fn script_running_elsewhere(&self) -> bool {
        crate::scripting::busy::running_elsewhere(&self.store, self.info.worker)
    }

    /// Periodic work between requests: an incremental pass of the active
    /// expiry sweeper. Returns how many keys it removed.
    pub fn tick(&mut self) -> u64 {
        self.h.freeze_clock(false);
        self.sync_config();
        self.sync_key_log();
        // The sweep below is a "command" of its own for removal versions.
        self.pubsub.command_started();
        self.pubsub.tick();
        // A script of another worker holds the store (an exclusive
        // section): work that resolves keys would wait for it, and this
        // worker's clients with it (a script looping until killed never
        // ends). A script that starts after this check makes the sweep
        // give up at its first bucket; `any_expires` reads no db map.
        let script_elsewhere = self.script_running_elsewhere();
        if !script_elsewhere {
            self.mc_flush_if_due();
        }
        self.tracking_sync_flushes();
        self.drain_key_log();
        self.tracking_flush();
        let off = crate::config::word::ACTIVE_EXPIRE_OFF;
        // A pause keeps the data set as it is: no key expires meanwhile.
        if !self.expiry_allowed()
            || self.store.config_word(off).unwrap_or(0) == 1
            || script_elsewhere
        {
            return 0;
        }
        if !self.h.any_expires().unwrap_or(false) {
            return 0;
        }
        // The workers share the sweep cursor: together they pass over the
        // whole index about once a second, so a key outlives its expiry by
        // about a second at most (Redis's sampling expires a small keyspace
        // within a few of its 100 ms cycles). A tick spends at most a tenth
        // of the time between ticks (Redis's slow cycle may take a quarter
        // under pressure): a segment too large for that passes more slowly.
        let hz = self.config.hz.max(1);
        let target = (self.store.bucket_count() / (hz * self.config.workers.max(1))).max(256);
        let budget = std::time::Duration::from_micros(100_000 / hz);
        let started = Instant::now();
        let (mut swept, mut expired) = (0, 0);
        while swept < target && started.elapsed() < budget {
            let chunk = (target - swept).min(4096);
            match self.h.sweep_expired(chunk) {
                Ok(s) => expired += s.expired,
                Err(_) => break,
            }
            swept += chunk;
        }
        // A slow pass is the `expire-cycle` latency event, as in Redis.
        self.latency_sample_if_needed("expire-cycle", started.elapsed().as_millis() as u64);
        self.drain_key_log();
        self.tracking_flush();
        expired
    }

    /// Call before each batch of requests: applies settings another worker
    /// changed and stamps the session's last-interaction time.
    pub fn begin_batch(&mut self, session: &mut Session) {
        self.pubsub.command_started();
        self.sync_config();
        self.sync_key_log();
        self.tracking_sync_flushes();
        self.h.freeze_clock(true);
        self.mc_flush_if_due();
        session.last_ms = self.h.now_ms();
    }

    /// Call after a batch: the clock runs again (for timers between batches).
    pub fn end_batch(&mut self) {
        self.drain_key_log();
        self.tracking_flush();
        self.h.freeze_clock(false);
    }

    /// Executes one request and appends its reply (if the client wants one) to
    /// `out`. An empty request does nothing.
    pub fn execute(&mut self, session: &mut Session, args: &[Arg<'_>], out: &mut Vec<u8>) -> Flow {
        let cmd = self.resolve(session, args, false);
        self.execute_resolved(session, cmd, args, out)
    }

    /// [`execute`](Self::execute) for a request whose command
    /// [`resolve`](Self::resolve) already looked up (`None`: unknown).
    pub fn execute_resolved(
        &mut self,
        session: &mut Session,
        cmd: Option<&'static Command>,
        args: &[Arg<'_>],
        out: &mut Vec<u8>,
    ) -> Flow {
        if args.is_empty() {
            return Flow::Continue;
        }
        // CLIENT PAUSE: a command refused anyway (unknown, arity) is
        // answered at once; one the pause holds waits unanswered.
        if let Some(c) = cmd.filter(|c| c.arity_ok(args.len())) {
            if self.held_by_pause(session, c, args) {
                if session.holdable {
                    return Flow::Hold;
                }
                ReplyWriter::new(out, session.protocol).error(crate::pause::CANNOT_WAIT.as_bytes());
                return Flow::Continue;
            }
        }
        self.evict_if_over();
        // AUTH and ACL: a refused request is answered below; a connection
        // whose user is gone closes.
        let acl_refusal = match cmd.filter(|c| c.arity_ok(args.len())) {
            Some(c) => match self.acl_gate(session, c, args) {
                crate::acl::Gate::Pass => None,
                crate::acl::Gate::Close => return Flow::Close,
                crate::acl::Gate::Refuse(e) => Some(e),
            },
            None => None,
        };
        let mark = out.len();
        let reply_mode = session.reply;
        if reply_mode == ReplyMode::Skip {
            session.reply = ReplyMode::Skipping;
        }
        let protocol = session.protocol;
        self.pubsub.set_current(session.id);
        self.pubsub.command_started();
        let mut cx = Cx {
            engine: self,
            session,
            out: ReplyWriter::new(out, protocol),
            flow: Flow::Continue,
        };
        let rejected_before = cx.engine.stats.rejected;
        let busy = cmd
            .filter(|c| c.arity_ok(args.len()) && !command::allowed_while_busy(c, args))
            .and_then(|_| cx.engine.script_gate().err());
        // FAILOVER's write gate: a command that may write is marked from
        // before its role check until it has logged (`Store::wait_writers`).
        let gated =
            cmd.is_some_and(|c| c.arity_ok(args.len()) && crate::replication::gated(c, args));
        if gated {
            let _ = cx
                .engine
                .store
                .set_worker_writing(cx.engine.info.worker, true);
        }
        let result = match cmd {
            None => Err(cx.reject(unknown_command(args))),
            Some(cmd) if !cmd.arity_ok(args.len()) && transaction::is_exec(cmd) => {
                let e = cx.reject(CmdError::arity(cmd.name));
                Err(transaction::exec_abort(cx.session, e))
            }
            Some(cmd) if !cmd.arity_ok(args.len()) => Err(cx.reject(CmdError::arity(cmd.name))),
            Some(_) if acl_refusal.is_some() => {
                Err(cx.reject(acl_refusal.clone().expect("checked")))
            }
            Some(cmd)
                if cx.session.protocol == proto::resp::Protocol::Resp2
                    && cx.session.subs.total() > 0
                    && cmd.flags & command::flags::SUBSCRIBED_OK == 0 =>
            {
                // Redis names a container's subcommand in full (client|id).
                let name = if cmd.subcommands.is_empty() || args.len() < 2 {
                    cmd.name
                } else {
                    command::find_sub(cmd, args).map_or(cmd.name, |c| c.name)
                };
                Err(cx.reject(CmdError::owned(format!(
                    "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
                ))))
            }
            // A MONITOR client is a replica to Redis: it may not touch keys.
            Some(cmd)
                if cx.session.subs.monitoring()
                    && cmd.flags & (command::flags::WRITE | command::flags::READONLY) != 0 =>
            {
                Err(cx.reject(CmdError::msg(
                    "ERR Replica can't interact with the keyspace",
                )))
            }
            // Over maxmemory with nothing to evict, a command that may grow
            // memory is refused before it runs, and inside MULTI so is any
            // command but the ones that end it (queueing takes memory too),
            // so that EXEC then aborts; so is EXEC whose queue holds one
            // that may grow memory: Redis's processCommand.
            Some(cmd)
                if (cmd.flags & command::flags::DENYOOM != 0
                    || (cx.session.in_multi() && cmd.flags & command::flags::ENDS_MULTI == 0)
                    || (transaction::is_exec(cmd)
                        && cx.session.tx.queued_flags_any(command::flags::DENYOOM)))
                    && cx.engine.refuses_oom() =>
            {
                let e = cx.reject(CmdError::msg(crate::error::OOM));
                match transaction::is_exec(cmd) {
                    true => Err(transaction::exec_abort(cx.session, e)),
                    false => Err(e),
                }
            }
            // A script of another worker runs: wait for it, or past
            // `busy-reply-threshold` refuse (Redis's processCommand).
            Some(cmd) if busy.is_some() => {
                let e = cx.reject(busy.clone().expect("checked"));
                match transaction::is_exec(cmd) {
                    true => Err(transaction::exec_abort(cx.session, e)),
                    false => Err(e),
                }
            }
            // A read-only replica refuses writes, queued or not (Redis's
            // processCommand).
            Some(cmd)
                if crate::replication::writes(cmd, args)
                    && crate::replication::refuses_writes(cx.engine) =>
            {
                Err(cx.reject(CmdError::msg(crate::replication::READONLY)))
            }
            // replica-serve-stale-data no: a replica whose link is down
            // serves only commands with the STALE flag (Redis's
            // processCommand).
            Some(cmd)
                if crate::replication::refuses_stale(cx.engine)
                    && crate::replication::denied_when_stale(cx.session, cmd, args) =>
            {
                Err(cx.reject(CmdError::msg(crate::replication::MASTERDOWN)))
            }
            // min-replicas-to-write: a primary with too few good replicas
            // refuses writes.
            Some(cmd)
                if crate::replication::writes(cmd, args)
                    && crate::replication::too_few_replicas(cx.engine) =>
            {
                Err(cx.reject(CmdError::msg(crate::replication::NOREPLICAS)))
            }
            // The synchronous mode refuses a write that no reply could
            // follow: fewer replicas online than it waits for.
            Some(cmd)
                if crate::replication::writes(cmd, args)
                    && crate::replication::too_few_for_sync(cx.engine) =>
            {
                Err(cx.reject(CmdError::msg(crate::replication::NOREPLICAS)))
            }
            Some(cmd) if transaction::queues(cx.session, cmd) => {
                transaction::queue(&mut cx, cmd, args)
            }
            Some(cmd) => {
                if gated {
                    crate::replication::test_write_stall();
                }
                run(&mut cx, cmd, args)
            }
        };
        if gated {
            let _ = cx
                .engine
                .store
                .set_worker_writing(cx.engine.info.worker, false);
        }
        if let Err(e) = result {
            if !std::mem::take(&mut cx.engine.error_counted) {
                cx.engine.stats.failed += 1;
                cx.engine.cmdstats.error(e.text());
            }
            if let Some(cmd) = cmd.filter(|_| cx.engine.stats.rejected != rejected_before) {
                let name = if cmd.subcommands.is_empty() || args.len() < 2 {
                    cmd.name
                } else {
                    command::find_sub(cmd, args).map_or(cmd.name, |c| c.name)
                };
                cx.engine.cmdstats.rejected(name);
            }
            cx.out.error(e.text().as_bytes());
        }
        cx.engine.drain_key_log();
        // CLIENT REPLY: OFF drops every reply, SKIP the next command's.
        match cx.session.reply {
            ReplyMode::Off => cx.out.truncate(mark),
            ReplyMode::Skipping if reply_mode == ReplyMode::Skip => {
                cx.out.truncate(mark);
                cx.session.reply = ReplyMode::On;
            }
            _ => {}
        }
        let flow = cx.flow;
        let in_multi = cx.session.tx.queued().is_some();
        let id = cx.session.id;
        let noted = (cx.session.protocol, cx.session.subs.total() > 0);
        let changed = cx.session.tracking_noted != Some(noted);
        if changed {
            cx.session.tracking_noted = Some(noted);
        }
        // Messages this command published to its own client go before its
        // reply (pushes are sent whatever CLIENT REPLY says), as in Redis.
        let frames = self.pubsub.take_current_frames();
        if !frames.is_empty() {
            out.splice(mark..mark, frames);
        }
        // Invalidations for its own client follow its reply, as in Redis.
        if flow == Flow::Close {
            self.tracking_client_gone(id);
        } else if changed {
            self.tracking_note_client(id, noted.0, noted.1);
        }
        if let Some(cmd) = cmd.filter(|_| self.tracking.any_client()) {
            self.tracking_after_command(id, cmd.name, in_multi);
        }
        let after = self.tracking_flush();
        out.extend_from_slice(&after);
        self.pubsub.set_current(0);
        flow
    }
}

impl Engine {
    /// Sets what answers this worker's other clients while one of its
    /// scripts is busy (see [`BusyServer`]).
    pub fn set_busy_server(&mut self, server: BusyServer) {
        self.busy_server = Some(server);
    }

    /// A blocked command that ends with no run serving it (its timeout, or
    /// CLIENT UNBLOCK with `error`, the reply it gets): counted as a call
    /// of the command, failed with that error, as Redis counts a client's
    /// call when it is unblocked.
    pub fn blocked_call_ended(&mut self, session: &Session, error: Option<&str>) {
        self.cmdstats.called(session.last_cmd, 0, error.is_some());
        if let Some(text) = error {
            self.stats.failed += 1;
            self.cmdstats.error(text);
        }
    }

    /// Answers one request of another client while a script of this
    /// worker is busy: the commands flagged `allow-busy` run (SCRIPT KILL,
    /// MULTI, SHUTDOWN NOSAVE…), unknown commands and wrong arities get
    /// their usual errors, and every other command `-BUSY` (flagging the
    /// client's MULTI, or aborting its EXEC), as Redis's processCommand.
    pub fn execute_while_busy(
        &mut self,
        session: &mut Session,
        args: &[Arg<'_>],
        out: &mut Vec<u8>,
    ) -> Flow {
        let cmd = self.resolve(session, args, false);
        match cmd {
            Some(c) if c.arity_ok(args.len()) && !command::allowed_while_busy(c, args) => {
                let text = crate::scripting::busy::own_busy_error(&self.store);
                self.stats.rejected += 1;
                self.stats.failed += 1;
                self.cmdstats.error(text);
                self.cmdstats.rejected(c.name);
                session.tx.flag_error();
                let e = CmdError::msg(text);
                let e = match transaction::is_exec(c) {
                    true => transaction::exec_abort(session, e),
                    false => e,
                };
                if session.reply == ReplyMode::On {
                    ReplyWriter::new(out, session.protocol).error(e.text().as_bytes());
                }
                Flow::Continue
            }
            _ => self.execute_resolved(session, cmd, args, out),
        }
    }

    /// Waits while a script of another worker runs, up to
    /// `busy-reply-threshold`; past it, the BUSY error to answer.
    pub(crate) fn script_gate(&self) -> Result<(), CmdError> {
        crate::scripting::busy::wait_gate(
            &self.store,
            self.info.worker,
            self.config.busy_reply_threshold,
        )
    }

    /// The ACL gate a request passes before it runs or is queued (Redis's
    /// processCommand: authentication, then the user's rules).
    pub(crate) fn acl_gate(
        &mut self,
        session: &mut Session,
        cmd: &'static Command,
        args: &[Arg<'_>],
    ) -> crate::acl::Gate {
        use crate::acl::{self, Gate};
        let is_default = session.user == b"default";
        if is_default && self.acl.default_open {
            // Redis decides at accept time: a client that came while no
            // password was needed stays authenticated when one is set.
            session.authenticated.get_or_insert(true);
            return Gate::Pass;
        }
        let default_requires_auth = self.acl.default_requires_auth;
        let authenticated = *session.authenticated.get_or_insert(!default_requires_auth);
        let effective = acl::effective(cmd, args);
        let id = self.acl.command_id(effective);
        self.acl.resolve_user(session);
        // Resolved just now: the session holds its user if the table has
        // it (user_of would compare the stamp and the name again).
        let user = session.acl_user.as_ref().map(|(_, u)| &**u);
        if !is_default && acl::user_stale(user, session) {
            return Gate::Close;
        }
        if default_requires_auth && !authenticated && cmd.flags & command::flags::NO_AUTH == 0 {
            return Gate::Refuse(CmdError::msg(acl::NOAUTH));
        }
        let Some(user) = user else {
            return Gate::Close;
        };
        match user.check_as(id, effective, args) {
            Ok(()) => Gate::Pass,
            Err(d) => {
                let context = if session.in_multi() {
                    acl::LogContext::Multi
                } else {
                    acl::LogContext::Toplevel
                };
                self.acl_log_denied(session, effective, args, d.kind, d.arg, context);
                Gate::Refuse(acl::noperm_error(d.kind, effective.name))
            }
        }
    }

    /// EXEC's check of a queued command against the rules now in force:
    /// the reason it is refused, logged, if it is.
    pub(crate) fn acl_recheck(
        &mut self,
        session: &Session,
        cmd: &'static Command,
        args: &[Arg<'_>],
    ) -> Option<crate::acl::DeniedKind> {
        if session.user == b"default" && self.acl.default_open {
            return None;
        }
        let effective = crate::acl::effective(cmd, args);
        let d = self.acl.user_of(session)?.check(effective, args).err()?;
        self.acl_log_denied(
            session,
            effective,
            args,
            d.kind,
            d.arg,
            crate::acl::LogContext::Multi,
        );
        Some(d.kind)
    }

    /// Whether the session's user may read every key with this request
    /// (SORT refuses BY and GET patterns otherwise, as Redis does).
    pub(crate) fn user_reads_every_key(&self, session: &Session, args: &[Arg<'_>]) -> bool {
        if session.user == b"default" && self.acl.default_open {
            return true;
        }
        let Some(cmd) = args.first().and_then(|n| command::lookup(n)) else {
            return true;
        };
        self.acl
            .user_of(session)
            .is_none_or(|u| u.reads_every_key(cmd, args))
    }

    /// The check scripts' `redis.call` makes (Redis logs it in the `lua`
    /// context): Ok, or the error to raise in the script, in Redis's words.
    pub fn acl_check_script(
        &mut self,
        session: &Session,
        args: &[Arg<'_>],
    ) -> Result<(), CmdError> {
        if session.user == b"default" && self.acl.default_open {
            return Ok(());
        }
        let Some(cmd) = args.first().and_then(|n| command::lookup(n)) else {
            return Ok(());
        };
        let effective = crate::acl::effective(cmd, args);
        let Some(user) = self.acl.user_of(session) else {
            return Ok(());
        };
        match user.check(effective, args) {
            Ok(()) => Ok(()),
            Err(d) => {
                self.acl_log_denied(
                    session,
                    effective,
                    args,
                    d.kind,
                    d.arg,
                    crate::acl::LogContext::Lua,
                );
                Err(CmdError::msg(match d.kind {
                    crate::acl::DeniedKind::Command => {
                        "The user executing the script can't run this command or subcommand"
                    }
                    crate::acl::DeniedKind::Key => {
                        "The user executing the script can't access at least one of the keys mentioned in the command arguments"
                    }
                    crate::acl::DeniedKind::Channel => {
                        "The user executing the script can't publish to the channel mentioned in the command"
                    }
                }))
            }
        }
    }
}

/// Runs a command that passed the checks (and EXEC's queued commands):
/// inside an exclusive section when the table asks for one (`ATOMIC`).
pub(crate) fn run(cx: &mut Cx<'_>, cmd: &'static Command, args: &[Arg<'_>]) -> CmdResult {
    cx.engine.stats.commands += 1;
    cx.session.last_cmd = cmd.name;
    // A script command is shown before the commands its script runs, as
    // Redis's EVAL and FCALL feed MONITOR themselves.
    if cmd.flags & command::flags::SKIP_MONITOR != 0 && cx.engine.pubsub.monitored() {
        cx.engine.feed_monitors(cx.session, args);
    }
    let started = Instant::now();
    let result = if cmd.needs_exclusive(args.len()) {
        Handle::exclusive_in(cx, Cx::h, |cx| (cmd.handler)(cx, args))
    } else {
        (cmd.handler)(cx, args)
    };
    // A tracking client remembers the keys its reads fetched (a script's
    // reads track the keys the script declares: see scripting).
    if cmd.flags & command::flags::READONLY != 0
        && !cx.session.in_script
        && cx.engine.tracking.any_client()
    {
        let keys = cmd
            .key_positions(args.len())
            .filter_map(|i| args.get(i).map(|k| k.to_vec()));
        cx.engine.tracking_remember(cx.session.id, keys);
    }
    // A container's subcommand (config|get) is counted under its own name;
    // a blocking command that parks is counted once, by the run that
    // serves it (Redis counts no call of a client that blocks).
    let usec = started.elapsed().as_micros() as u64;
    let gathering = matches!(cx.flow, Flow::Server(ServerRequest::Gather(_)));
    if gathering {
        cx.engine.diag.deferred_call = Some((cx.session.last_cmd, usec, result.is_err()));
    } else if !matches!(cx.flow, Flow::Block(_)) {
        cx.engine
            .cmdstats
            .called(cx.session.last_cmd, usec, result.is_err());
    }
    cx.engine
        .record_slow(cmd, cx.session, args, usec, gathering);
    // MONITOR shows a command once it ran (EXEC's queued commands when EXEC
    // runs them), in the db it left selected, as Redis 7.0's call() does.
    if cx.engine.pubsub.monitored() && crate::pubsub::shown_in_monitor(cmd, args) {
        cx.engine.feed_monitors(cx.session, args);
    }
    result
}

/// Redis's reply to an unknown command, quoting up to 128 bytes of arguments.
fn unknown_command(args: &[Arg<'_>]) -> CmdError {
    let mut quoted = String::new();
    for a in &args[1..] {
        if quoted.len() >= 128 {
            break;
        }
        let room = 128 - quoted.len();
        quoted.push('\'');
        quoted.push_str(&command::clip(a, room));
        quoted.push_str("' ");
    }
    CmdError::owned(format!(
        "ERR unknown command '{}', with args beginning with: {quoted}",
        command::clip(&args[0], 128)
    ))
}
