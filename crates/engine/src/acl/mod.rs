//! Redis 7.0 ACL users: their rules (the grammar of ACL SETUSER, with
//! selectors), the check every command passes, and their text form. The
//! users live in the segment's user table area as the text ACL LIST prints
//! (one `user` line each, after its incarnation number), so every worker
//! enforces the same rules at once: a worker that changes a user rewrites the
//! text under the area's lock and bumps [`word::ACL_GENERATION`]; every
//! engine re-reads the text when it sees the word move.
//!
//! Command categories come from the command table (flags and group): one
//! source for ACL rules, ACL CAT and COMMAND INFO.

pub(crate) mod commands;
mod model;
mod pattern;

pub(crate) use model::{category_names, Users};
pub use model::{check_rules, Denied, DeniedKind, User};

use crate::command::{Arg, Command};
use crate::config::word;
use crate::error::CmdError;
use crate::session::Session;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// ACL LOG: why an entry was logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LogReason {
    Command,
    Key,
    Channel,
    Auth,
}

/// ACL LOG: where the refused command ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LogContext {
    Toplevel,
    Multi,
    Lua,
}

/// One ACL LOG entry.
#[derive(Clone, Debug)]
pub(crate) struct LogEntry {
    pub count: u64,
    pub reason: LogReason,
    pub context: LogContext,
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    pub created_ms: u64,
    pub client_info: String,
}

impl LogReason {
    fn code(self) -> u64 {
        self as u64
    }

    fn from_code(c: u64) -> LogReason {
        match c {
            0 => LogReason::Command,
            1 => LogReason::Key,
            2 => LogReason::Channel,
            _ => LogReason::Auth,
        }
    }

    fn name(self) -> &'static [u8] {
        match self {
            LogReason::Command => b"command",
            LogReason::Key => b"key",
            LogReason::Channel => b"channel",
            LogReason::Auth => b"auth",
        }
    }
}

impl LogContext {
    fn from_code(c: u64) -> LogContext {
        match c {
            0 => LogContext::Toplevel,
            1 => LogContext::Multi,
            _ => LogContext::Lua,
        }
    }

    fn name(self) -> &'static [u8] {
        match self {
            LogContext::Toplevel => b"toplevel",
            LogContext::Multi => b"multi",
            LogContext::Lua => b"lua",
        }
    }
}

/// A worker's newest `count` ACL LOG entries for a gathered ACL LOG.
pub(crate) fn encode_log(
    log: &std::collections::VecDeque<LogEntry>,
    count: u64,
    w: &mut crate::wire::Writer,
) {
    let n = log.len().min(count as usize);
    w.u64(n as u64);
    for e in log.iter().take(n) {
        w.u64(e.count);
        w.u64(e.reason.code());
        w.u64(e.context as u64);
        w.bytes(&e.object);
        w.bytes(&e.username);
        w.u64(e.created_ms);
        w.bytes(e.client_info.as_bytes());
    }
}

fn decode_log(a: &[u8]) -> Vec<LogEntry> {
    let mut r = crate::wire::Reader(a);
    let mut out = Vec::new();
    let Some(n) = r.count(8) else {
        return out;
    };
    for _ in 0..n {
        let entry = (|| {
            Some(LogEntry {
                count: r.u64()?,
                reason: LogReason::from_code(r.u64()?),
                context: LogContext::from_code(r.u64()?),
                object: r.bytes()?.to_vec(),
                username: r.bytes()?.to_vec(),
                created_ms: r.u64()?,
                client_info: String::from_utf8_lossy(r.bytes()?).into_owned(),
            })
        })();
        match entry {
            Some(e) => out.push(e),
            None => break,
        }
    }
    out
}

/// ACL LOG's reply from every worker's entries: newest first, `count` at
/// most.
pub(crate) fn write_merged_log(
    answers: &[Vec<u8>],
    count: u64,
    now_ms: u64,
    w: &mut proto::resp::ReplyWriter<'_>,
) {
    let mut all: Vec<LogEntry> = answers.iter().flat_map(|a| decode_log(a)).collect();
    all.sort_by_key(|e| std::cmp::Reverse(e.created_ms));
    all.truncate(count as usize);
    w.array_len(all.len());
    for e in all {
        w.map_len(7);
        w.bulk(b"count");
        w.integer(e.count as i64);
        w.bulk(b"reason");
        w.bulk(e.reason.name());
        w.bulk(b"context");
        w.bulk(e.context.name());
        w.bulk(b"object");
        w.bulk(&e.object);
        w.bulk(b"username");
        w.bulk(&e.username);
        w.bulk(b"age-seconds");
        let age = now_ms.saturating_sub(e.created_ms) as f64 / 1000.0;
        w.double(format!("{age}").as_bytes());
        w.bulk(b"client-info");
        w.bulk(e.client_info.as_bytes());
    }
}

/// Entries logged within this many ms of each other merge (Redis's
/// grouping delta).
const LOG_GROUPING_MS: u64 = 60_000;

/// One engine's view of the users plus its ACL LOG.
pub(crate) struct Acl {
    /// The users as last read from the segment.
    pub users: Users,
    /// The ACL generation word last applied.
    seen: u64,
    /// Whether the default user may run anything without a password (the
    /// fast path: most servers never define a user).
    pub default_open: bool,
    /// Whether the default user has a password or is off (kept here so
    /// the check of every request does not look the user up by name).
    pub default_requires_auth: bool,
    /// ACL LOG, newest first.
    pub log: std::collections::VecDeque<LogEntry>,
    /// Names these users, unique across engines: a connection's user
    /// resolved under another stamp is looked up again.
    stamp: u64,
    /// The last command checked and its id: a pipeline of one command
    /// finds its bit without hashing.
    last_cmd: (usize, Option<usize>),
}

/// The next [`Acl::stamp`].
fn next_stamp() -> u64 {
    static STAMPS: AtomicU64 = AtomicU64::new(1);
    STAMPS.fetch_add(1, Ordering::Relaxed)
}

impl Default for Acl {
    fn default() -> Self {
        Acl {
            users: Users::with_default(),
            seen: u64::MAX,
            default_open: true,
            default_requires_auth: false,
            log: Default::default(),
            stamp: next_stamp(),
            last_cmd: (0, None),
        }
    }
}

impl Acl {
    /// Re-reads the users when another worker changed them.
    pub fn sync(&mut self, store: &store::Store) {
        let generation = store.config_word(word::ACL_GENERATION).unwrap_or(0);
        if generation == self.seen {
            return;
        }
        if let Ok(text) = store.users_text() {
            self.users = Users::from_segment_text(&text);
            self.default_open = self.users.default_user().is_open();
            self.default_requires_auth = self.users.default_user().requires_auth();
            self.seen = generation;
            self.stamp = next_stamp();
        }
    }

    /// Remembers the session's user in the session, unless it already
    /// holds it under these users: the check of every request then finds it
    /// without a lookup by name.
    pub fn resolve_user(&self, session: &mut Session) {
        let fresh = matches!(&session.acl_user,
            Some((stamp, u)) if *stamp == self.stamp && u.name == session.user);
        if !fresh {
            session.acl_user = self
                .users
                .get_shared(&session.user)
                .map(|u| (self.stamp, Arc::clone(u)));
        }
    }

    /// The session's user: the one it resolved under these users, else by
    /// name.
    pub fn user_of<'a>(&'a self, session: &'a Session) -> Option<&'a User> {
        match &session.acl_user {
            Some((stamp, u)) if *stamp == self.stamp && u.name == session.user => Some(u),
            _ => self.users.get(&session.user),
        }
    }

    /// The registry id of `cmd` (a table entry), remembered for the next
    /// request.
    pub fn command_id(&mut self, cmd: &'static Command) -> Option<usize> {
        let addr = cmd as *const Command as usize;
        if self.last_cmd.0 != addr {
            self.last_cmd = (addr, model::registry().id_of(cmd));
        }
        self.last_cmd.1
    }

    /// Adds an entry to the log (or bumps a similar recent one), keeping at
    /// most `max_len` entries.
    pub fn add_log(&mut self, mut entry: LogEntry, max_len: usize) {
        if let Some(pos) = self.log.iter().take(10).position(|e| {
            e.reason == entry.reason
                && e.context == entry.context
                && e.object == entry.object
                && e.username == entry.username
                && entry.created_ms.abs_diff(e.created_ms) <= LOG_GROUPING_MS
        }) {
            let mut old = self.log.remove(pos).expect("found");
            old.count += 1;
            old.created_ms = entry.created_ms;
            old.client_info = std::mem::take(&mut entry.client_info);
            self.log.push_front(old);
        } else {
            self.log.push_front(entry);
        }
        self.log.truncate(max_len);
    }
}

/// `requirepass`: the default user's only password (empty: `nopass`).
pub(crate) fn set_default_password(users: &mut Users, password: &[u8]) {
    if let Some(u) = users
        .map
        .get_mut(&b"default"[..])
        .map(std::sync::Arc::make_mut)
    {
        let _ = u.apply(b"resetpass", false);
        if password.is_empty() {
            let _ = u.apply(b"nopass", false);
        } else {
            let mut op = b">".to_vec();
            op.extend_from_slice(password);
            let _ = u.apply(&op, false);
        }
    }
}

/// Replaces the segment's users with `users` and tells every worker.
pub(crate) fn write_users(
    store: &store::Store,
    h: &mut store::Handle,
    users: &Users,
) -> Result<(), store::Error> {
    let text = users.to_segment_text();
    h.update_users_text(|_| Some(text))?;
    bump_generation(store)
}

/// Changes the default user's password in the segment (CONFIG SET
/// requirepass).
pub(crate) fn write_default_password(
    store: &store::Store,
    h: &mut store::Handle,
    password: &[u8],
) -> Result<(), store::Error> {
    h.update_users_text(|old| {
        let mut users = Users::from_segment_text(old);
        set_default_password(&mut users, password);
        Some(users.to_segment_text())
    })?;
    bump_generation(store)
}

/// Bumps [`word::ACL_GENERATION`]: every engine re-reads the users.
pub(crate) fn bump_generation(store: &store::Store) -> Result<(), store::Error> {
    let g = store.config_word(word::ACL_GENERATION)?;
    store.set_config_word(word::ACL_GENERATION, g.wrapping_add(1))
}

/// What the ACL gate decided for one request.
pub(crate) enum Gate {
    /// Run it.
    Pass,
    /// The client's user was deleted or replaced: close the connection
    /// without a reply, as Redis does.
    Close,
    /// Refused with this error (already logged).
    Refuse(CmdError),
}

/// The error for a denied request, as Redis's processCommand words it.
pub(crate) fn noperm_error(kind: DeniedKind, fullname: &str) -> CmdError {
    match kind {
        DeniedKind::Command => CmdError::owned(format!(
            "NOPERM this user has no permissions to run the '{fullname}' command"
        )),
        DeniedKind::Key => CmdError::msg(
            "NOPERM this user has no permissions to access one of the keys used as arguments",
        ),
        DeniedKind::Channel => CmdError::msg(
            "NOPERM this user has no permissions to access one of the channels used as arguments",
        ),
    }
}

/// Redis's reply to a command before AUTH when a password is required.
pub(crate) const NOAUTH: &str = "NOAUTH Authentication required.";
/// Redis's reply to HELLO without AUTH before authentication.
pub(crate) const NOAUTH_HELLO: &str =
    "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time";
/// Protected mode's refusal of a non-loopback client, Redis's text.
pub const DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";
/// Redis's reply to a failed AUTH.
pub(crate) const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// The command a request runs for ACL purposes: a container's subcommand
/// when it names one.
pub(crate) fn effective(cmd: &'static Command, args: &[Arg<'_>]) -> &'static Command {
    if cmd.subcommands.is_empty() || args.len() < 2 {
        return cmd;
    }
    crate::command::find_sub(cmd, args).unwrap_or(cmd)
}

/// Whether `session` is bound to a user the table no longer has in the same
/// incarnation (deleted, or replaced by ACL LOAD).
pub(crate) fn user_stale(user: Option<&User>, session: &Session) -> bool {
    match user {
        Some(u) => session.user_incarnation != 0 && u.incarnation != session.user_incarnation,
        None => true,
    }
}

/// The ACL rule parser on arbitrary bytes, for the fuzz target
/// `acl_rules` and the corpus test.
pub mod fuzzing {
    use super::model::{check_rules, User, Users};

    /// Splits `data` at spaces into rules and applies them to a fresh user,
    /// and reads it as ACL file text. Panics if an invariant breaks: the
    /// parser never panics, and an accepted user's description parses back
    /// to the same user.
    pub fn fuzz_rules(data: &[u8]) {
        let rules: Vec<&[u8]> = data.split(|&b| b == b' ').collect();
        let mut user = User::new(b"fuzz", data.first().is_some_and(|b| b & 1 == 1));
        if check_rules(&mut user, &rules, false).is_ok() {
            let mut back = User::new(b"fuzz", false);
            let line = user.describe();
            let words: Vec<&[u8]> = line.as_bytes().split(|&b| b == b' ').collect();
            // First-args and patterns are stored as given: ones with bytes
            // the text form cannot carry are left out of the comparison.
            if check_rules(&mut back, &words, false).is_ok() {
                assert_eq!(back.describe(), line, "the description is stable");
            }
        }
        let _ = Users::from_acl_file(data, false);
        let _ = Users::from_segment_text(data);
    }
}
