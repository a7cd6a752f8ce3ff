//! Per-connection state the commands read and change: db, protocol, name,
//! reply mode, an open transaction. The server owns one per connection and
//! fills in the socket fields; the engine never sees the socket itself.

use proto::resp::Protocol;

use crate::pubsub::ClientSubs;
use crate::transaction::Transaction;

/// CLIENT REPLY's modes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplyMode {
    /// Every reply is sent.
    #[default]
    On,
    /// No reply is sent until CLIENT REPLY ON.
    Off,
    /// The next command's reply is not sent.
    Skip,
    /// Set while executing the command after CLIENT REPLY SKIP.
    Skipping,
}

/// One client connection as commands see it.
#[derive(Clone, Debug)]
pub struct Session {
    /// CLIENT ID: unique across every worker of the segment.
    pub id: u64,
    /// Selected database.
    pub db: u8,
    /// RESP2 until HELLO 3.
    pub protocol: Protocol,
    /// CLIENT SETNAME (empty = none).
    pub name: Vec<u8>,
    /// CLIENT SETINFO lib-name / lib-ver (shown in CLIENT LIST).
    pub lib_name: Vec<u8>,
    /// Library version.
    pub lib_ver: Vec<u8>,
    /// CLIENT REPLY.
    pub reply: ReplyMode,
    /// CLIENT NO-EVICT.
    pub no_evict: bool,
    /// Set by the server while the client waits in a blocking command
    /// (CLIENT LIST's `b` flag).
    pub blocked: bool,
    /// The connection can wait for a CLIENT PAUSE to end (a RESP
    /// connection parks; an HTTP request or the control channel cannot, so
    /// a command the pause holds is refused there instead).
    pub holdable: bool,
    /// Remote address `ip:port`, or the socket path's peer for a Unix socket.
    pub addr: String,
    /// Local address.
    pub laddr: String,
    /// The connection's file descriptor (CLIENT LIST's `fd`).
    pub fd: i64,
    /// When the connection was accepted, ms since the epoch.
    pub created_ms: u64,
    /// When the last command ran, ms since the epoch.
    pub last_ms: u64,
    /// Name of the last command run (CLIENT LIST's `cmd`).
    pub last_cmd: &'static str,
    /// Bytes in the query buffer (filled in by the server for CLIENT LIST).
    pub qbuf: usize,
    /// Bytes the query buffer holds room for, used or not (CLIENT LIST's
    /// `qbuf` + `qbuf-free`; filled in by the server).
    pub qbuf_cap: usize,
    /// Bytes in the output buffer (filled in by the server).
    pub omem: usize,
    /// Number of the worker serving the connection.
    pub worker: u32,
    /// The ACL user the connection runs as.
    pub user: Vec<u8>,
    /// That user's incarnation when the connection logged in (0: the
    /// default user, never logged in): a deleted or reloaded user's
    /// connections close.
    pub user_incarnation: u64,
    /// That user as resolved under the users of a stamp (see
    /// `Acl::resolve_user`): the ACL check of a request needs no lookup by
    /// name.
    pub(crate) acl_user: Option<(u64, std::sync::Arc<crate::acl::User>)>,
    /// Whether the connection passed authentication; None until its first
    /// command, when the default user's state decides (Redis decides at
    /// accept time).
    pub authenticated: Option<bool>,
    /// MULTI's queue and WATCH's keys.
    pub(crate) tx: Transaction,
    /// Channels, patterns and keys subscribed; MONITOR.
    pub(crate) subs: ClientSubs,
    /// The protocol and subscribed state client-side caching last noted
    /// for this client (it notes changes only).
    pub(crate) tracking_noted: Option<(Protocol, bool)>,
    /// A script of this client is running the command (Redis's
    /// `CLIENT_SCRIPT`): SORT orders a set, XREAD refuses BLOCK, MONITOR
    /// shows the command as coming from `lua`.
    pub(crate) in_script: bool,
}

impl Session {
    /// A fresh connection's state.
    pub fn new(id: u64, now_ms: u64) -> Session {
        Session {
            id,
            db: 0,
            protocol: Protocol::Resp2,
            name: Vec::new(),
            lib_name: Vec::new(),
            lib_ver: Vec::new(),
            reply: ReplyMode::On,
            no_evict: false,
            blocked: false,
            holdable: false,
            addr: String::new(),
            laddr: String::new(),
            fd: -1,
            created_ms: now_ms,
            last_ms: now_ms,
            last_cmd: "NULL",
            qbuf: 0,
            // A front end's usual read buffer until it reports its own.
            qbuf_cap: 16384,
            omem: 0,
            worker: 0,
            user: b"default".to_vec(),
            user_incarnation: 0,
            acl_user: None,
            authenticated: None,
            tx: Transaction::default(),
            subs: ClientSubs::default(),
            tracking_noted: None,
            in_script: false,
        }
    }

    /// Whether the whole state of this client is in the fields another
    /// worker can take over (an upgrade hands idle connections over): no
    /// transaction or WATCH, no subscription or MONITOR, not blocked,
    /// replies on.
    pub fn can_move(&self) -> bool {
        self.tx.is_empty()
            && self.subs.total() == 0
            && !self.subs.monitoring()
            && !self.blocked
            && self.reply == ReplyMode::On
    }

    /// The client's subscriptions.
    pub fn subs(&self) -> &ClientSubs {
        &self.subs
    }

    /// Whether MULTI is open: commands are queued, not run.
    pub fn in_multi(&self) -> bool {
        self.tx.queued().is_some()
    }

    /// Whether EXEC is running this client's queued commands. A blocking
    /// command must then answer at once, as if its timeout had passed (as
    /// in Redis), and never wait: EXEC holds every other worker up.
    pub fn in_exec(&self) -> bool {
        self.tx.executing()
    }

    /// What RESET restores: db 0, RESP2, no name, replies on, no
    /// transaction and nothing watched.
    pub fn reset(&mut self) {
        self.tx = Transaction::default();
        self.db = 0;
        self.protocol = Protocol::Resp2;
        self.name.clear();
        self.reply = ReplyMode::On;
        self.no_evict = false;
        self.user = b"default".to_vec();
        self.user_incarnation = 0;
        self.authenticated = None;
    }

    /// The line CLIENT LIST and CLIENT INFO print for this client, in Redis
    /// 7.0's field order (without the trailing newline).
    pub fn client_line(&self, now_ms: u64) -> String {
        self.client_line_tracking(now_ms, "", -1)
    }

    /// [`Session::client_line`] with the client's tracking flags (`t`, `R`,
    /// `B`) and `redir=` field, which the engine keeps.
    pub fn client_line_tracking(&self, now_ms: u64, tracking_flags: &str, redir: i64) -> String {
        // Redis's order: O (monitor), P (pub/sub), x (MULTI), b (blocked),
        // t R B (tracking), e (no-evict); N for none.
        let mut flags = String::new();
        if self.subs.monitoring() {
            flags.push('O');
        }
        if self.subs.total() > 0 {
            flags.push('P');
        }
        if self.in_multi() {
            flags.push('x');
        }
        if self.blocked {
            flags.push('b');
        }
        flags.push_str(tracking_flags);
        if self.no_evict {
            flags.push('e');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let multi = self.tx.queued().map_or(-1, |n| n as i64);
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={flags} db={} sub={} psub={} ssub={} multi={multi} qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs=16384 rbp=16384 obl=0 oll=0 omem={} tot-mem={} events=r cmd={} user={} redir={redir} resp={} lib-name={} lib-ver={} worker={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            String::from_utf8_lossy(&self.name),
            now_ms.saturating_sub(self.created_ms) / 1000,
            now_ms.saturating_sub(self.last_ms) / 1000,
            self.db,
            self.subs.channel_count(),
            self.subs.pattern_count(),
            self.subs.shard_count(),
            self.qbuf,
            self.qbuf_cap.saturating_sub(self.qbuf),
            self.omem,
            self.qbuf_cap.max(self.qbuf) + self.omem + 16384,
            self.last_cmd,
            String::from_utf8_lossy(&self.user),
            self.protocol.version(),
            String::from_utf8_lossy(&self.lib_name),
            String::from_utf8_lossy(&self.lib_ver),
            self.worker,
        )
    }
}
