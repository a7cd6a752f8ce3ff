//! Commands are data: each group's file lists its commands in a `COMMANDS`
//! table (name, arity, flags, key positions, summary, handler) and this module
//! merges the tables into one lookup. The dispatcher checks existence and arity
//! here once; COMMAND INFO / DOCS / COUNT read the same tables.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use crate::engine::Cx;
use crate::error::CmdError;

/// One argument of a request, borrowed from the read buffer when possible.
pub type Arg<'a> = Cow<'a, [u8]>;

/// What a handler returns: its reply is already written; an error is written
/// by the dispatcher.
pub type CmdResult = Result<(), CmdError>;

/// A command's implementation.
pub type Handler = fn(&mut Cx<'_>, &[Arg<'_>]) -> CmdResult;

/// The indexes of a request's keys, for a command whose keys depend on its
/// arguments (Redis's `movablekeys`: a numkeys argument, SORT's STORE).
pub type KeysFn = fn(&[Arg<'_>]) -> Vec<usize>;

/// The flags a request of a command whose flags depend on what it runs
/// (a script's declared flags) has, from the table's flags.
pub type FlagsFn = fn(&mut Cx<'_>, u32, &[Arg<'_>]) -> u32;

/// Redis's command flags, as COMMAND INFO names them.
pub mod flags {
    /// May modify the data set.
    pub const WRITE: u32 = 1;
    /// Only reads.
    pub const READONLY: u32 = 1 << 1;
    /// Refused with OOM when memory is full (and no eviction frees any).
    pub const DENYOOM: u32 = 1 << 2;
    /// Administrative.
    pub const ADMIN: u32 = 1 << 3;
    /// Allowed while subscribed (RESP2).
    pub const PUBSUB: u32 = 1 << 4;
    /// Not shown in MONITOR.
    pub const NOSCRIPT: u32 = 1 << 5;
    /// May return a different result for the same arguments.
    pub const RANDOM: u32 = 1 << 6;
    /// Allowed while the server is loading.
    pub const LOADING: u32 = 1 << 7;
    /// Allowed on a stale replica.
    pub const STALE: u32 = 1 << 8;
    /// O(1) or O(log N).
    pub const FAST: u32 = 1 << 9;
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1 << 10;
    /// Not allowed inside MULTI.
    pub const NO_MULTI: u32 = 1 << 11;
    /// Allowed while a script is busy.
    pub const ALLOW_BUSY: u32 = 1 << 12;
    /// May block the client (BLPOP and kin).
    pub const BLOCKING: u32 = 1 << 13;
    /// Not shown to MONITOR as itself (a script shows the commands it runs).
    pub const SKIP_MONITOR: u32 = 1 << 14;
    /// Never logged in the SLOWLOG as itself (EXEC: its commands are).
    pub const SKIP_SLOWLOG: u32 = 1 << 15;
    /// Declares no key it must be given (a script's numkeys may be 0).
    pub const NO_MANDATORY_KEYS: u32 = 1 << 16;
    /// Redis's hidden `may-replicate`: not WRITE, yet it changes what a
    /// replica sees (PUBLISH, PFCOUNT, scripts), so a WRITE pause holds it.
    /// COMMAND INFO does not show it, as in Redis.
    pub const MAY_REPLICATE: u32 = 1 << 17;
    /// shoal's own, not shown: a RESP2 client in subscribed mode may run it
    /// (Redis's PING, QUIT, RESET and the subscribe commands).
    pub const SUBSCRIBED_OK: u32 = 1 << 28;
    /// shoal's own, not shown: it acts on the transaction itself, so while
    /// MULTI is open it runs at once instead of being queued (MULTI, EXEC,
    /// DISCARD, WATCH, QUIT, RESET).
    pub const NOT_QUEUED: u32 = 1 << 29;
    /// shoal's own, not shown: it ends an open transaction (EXEC, DISCARD,
    /// QUIT, RESET), so inside MULTI it is never refused for memory (every
    /// other command is: queueing takes memory too).
    pub const ENDS_MULTI: u32 = 1 << 30;
    /// shoal's own, not a Redis flag (COMMAND INFO does not show it): the
    /// command touches several keys and must look like one step to every
    /// other client, so the dispatcher runs it inside
    /// [`store::Handle::exclusive`] (as EXEC runs its queue), where no other
    /// worker reads or writes. Set it on every command that writes one key
    /// from others or writes several (MSET, BITOP, SMOVE, SINTERSTORE, LMOVE,
    /// ZUNIONSTORE…), and on multi-key reads that must see one instant
    /// (MGET, SINTER, ZUNION…). A single-key write is atomic without it (its bucket
    /// lock), and so are RENAME, COPY and MOVE (one store transaction).
    /// Under a variadic key spec (`last_key` < 0) a request naming one key
    /// runs without the section: DEL k or MSET k v cost nothing extra. The
    /// handler must not wait for anything (no blocking): every other worker
    /// waits for it.
    pub const ATOMIC: u32 = 1 << 31;

    /// Flag names in COMMAND INFO's order.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (RANDOM, "random"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_MULTI, "no_multi"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// One entry of a command table.
#[derive(Debug)]
pub struct Command {
    /// Lower-case name (`get`), or `parent|sub` for a subcommand.
    pub name: &'static str,
    /// Redis's arity: `n` means exactly `n` arguments counting the name; `-n`
    /// means at least `n`.
    pub arity: i32,
    /// Bits of [`flags`].
    pub flags: u32,
    /// Position of the first key (0 = no keys).
    pub first_key: i32,
    /// Position of the last key (-1 = the last argument).
    pub last_key: i32,
    /// Distance between keys.
    pub step: i32,
    /// Redis's group (`string`, `generic`, `connection`, `server`).
    pub group: &'static str,
    /// Since which Redis version.
    pub since: &'static str,
    /// One line for COMMAND DOCS.
    pub summary: &'static str,
    /// The implementation. A container command (CLIENT, CONFIG…) dispatches to
    /// its `subcommands` itself through [`dispatch_sub`].
    pub handler: Handler,
    /// Subcommands, for a container command.
    pub subcommands: &'static [Command],
    /// Where the keys are when `first_key`/`last_key`/`step` cannot say
    /// (None: they can).
    pub movable_keys: Option<KeysFn>,
    /// Which arguments are pub/sub channels (ACL channel rules check them).
    pub channels: Channels,
    /// Where a request's flags differ from `flags` (None: they never do):
    /// Redis's `getCommandFlags` for EVAL and FCALL.
    pub request_flags: Option<FlagsFn>,
}

/// The arguments of a command that name pub/sub channels, for ACL
/// channel rules (Redis's channel key specs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channels {
    /// None.
    None,
    /// The first argument is a channel published to.
    Publish,
    /// Every argument is a channel subscribed to.
    Subscribe,
    /// Every argument is a channel pattern subscribed to (matched literally
    /// against the user's channel patterns).
    SubscribePattern,
}

impl Command {
    /// This command with its channel arguments declared.
    pub(crate) const fn with_channels(self, channels: Channels) -> Command {
        Command { channels, ..self }
    }
}

impl Command {
    /// Whether a request of `argc` arguments must run in an exclusive
    /// section (see [`flags::ATOMIC`]).
    pub fn needs_exclusive(&self, argc: usize) -> bool {
        self.flags & flags::ATOMIC != 0
            && (self.last_key >= 0 || self.key_positions(argc).nth(1).is_some())
    }

    /// Whether `argc` arguments (counting the name) satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = self.arity as i64;
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }

    /// Whether the command may write.
    pub fn is_write(&self) -> bool {
        self.flags & flags::WRITE != 0
    }

    /// The positions of a request's keys (COMMAND GETKEYS): the table's
    /// key spec, or the command's own reading of its arguments.
    pub fn keys_of(&self, args: &[Arg<'_>]) -> Vec<usize> {
        match self.movable_keys {
            Some(f) => f(args).into_iter().filter(|&i| i < args.len()).collect(),
            None => self.key_positions(args.len()).collect(),
        }
    }

    /// The argument positions that are keys, for `argc` arguments.
    pub fn key_positions(&self, argc: usize) -> impl Iterator<Item = usize> {
        let argc = argc as i64;
        let first = self.first_key as i64;
        let last = if self.last_key < 0 {
            argc + self.last_key as i64
        } else {
            (self.last_key as i64).min(argc - 1)
        };
        let step = self.step.max(1) as usize;
        let range = if first > 0 && last >= first {
            first as usize..last as usize + 1
        } else {
            0..0
        };
        range.step_by(step)
    }
}

/// A table entry with no subcommands; each group file wraps this with its
/// group's name and defaults.
#[allow(clippy::too_many_arguments)]
pub(crate) const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: (i32, i32, i32),
    group: &'static str,
    since: &'static str,
    summary: &'static str,
    handler: Handler,
) -> Command {
    Command {
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        step: keys.2,
        group,
        since,
        summary,
        handler,
        subcommands: &[],
        movable_keys: None,
        channels: Channels::None,
        request_flags: None,
    }
}

/// The `n` keys after a numkeys argument at `at` (none when it is not a
/// number in range).
fn keys_after_numkeys(args: &[Arg<'_>], at: usize) -> Vec<usize> {
    let n = args
        .get(at)
        .and_then(|a| store::parse_i64(a))
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| at + 1 + n <= args.len())
        .unwrap_or(0);
    (at + 1..at + 1 + n).collect()
}

/// ZUNION, ZINTER, ZDIFF, ZINTERCARD, SINTERCARD, LMPOP, ZMPOP: numkeys
/// first, then the keys.
pub(crate) fn keys_numkeys_first(args: &[Arg<'_>]) -> Vec<usize> {
    keys_after_numkeys(args, 1)
}

/// BLMPOP, BZMPOP: a timeout, numkeys, then the keys.
pub(crate) fn keys_numkeys_second(args: &[Arg<'_>]) -> Vec<usize> {
    keys_after_numkeys(args, 2)
}

/// ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE: the destination, numkeys, then
/// the keys.
pub(crate) fn keys_destination_then_numkeys(args: &[Arg<'_>]) -> Vec<usize> {
    let mut keys = vec![1];
    keys.extend(keys_after_numkeys(args, 2));
    keys
}

/// Defines `cmd`, the constructor a group's file builds its table with: the
/// group fixed, and the key spec and the version either fixed for the whole
/// file or given per command, in the order name, arity, flags, [keys],
/// [since], summary, handler.
macro_rules! group_cmd {
    ($group:literal) => {
        /// A command of this file's group.
        const fn cmd(
            name: &'static str,
            arity: i32,
            flags: u32,
            keys: (i32, i32, i32),
            since: &'static str,
            summary: &'static str,
            handler: $crate::command::Handler,
        ) -> $crate::command::Command {
            $crate::command::spec(name, arity, flags, keys, $group, since, summary, handler)
        }
    };
    ($group:literal, since = $since:literal) => {
        /// A command of this file's group.
        const fn cmd(
            name: &'static str,
            arity: i32,
            flags: u32,
            keys: (i32, i32, i32),
            summary: &'static str,
            handler: $crate::command::Handler,
        ) -> $crate::command::Command {
            $crate::command::spec(name, arity, flags, keys, $group, $since, summary, handler)
        }
    };
    ($group:literal, keys = $keys:expr) => {
        /// A command of this file's group.
        const fn cmd(
            name: &'static str,
            arity: i32,
            flags: u32,
            since: &'static str,
            summary: &'static str,
            handler: $crate::command::Handler,
        ) -> $crate::command::Command {
            $crate::command::spec(name, arity, flags, $keys, $group, since, summary, handler)
        }
    };
    ($group:literal, keys = $keys:expr, since = $since:literal) => {
        /// A command of this file's group.
        const fn cmd(
            name: &'static str,
            arity: i32,
            flags: u32,
            summary: &'static str,
            handler: $crate::command::Handler,
        ) -> $crate::command::Command {
            $crate::command::spec(name, arity, flags, $keys, $group, $since, summary, handler)
        }
    };
}
pub(crate) use group_cmd;

/// A HELP reply: one simple string per line.
pub(crate) fn reply_help(cx: &mut Cx<'_>, lines: &[&str]) -> CmdResult {
    cx.out.array_len(lines.len());
    for l in lines {
        cx.out.simple(l.as_bytes());
    }
    Ok(())
}

/// Every group's table, in COMMAND's order.
fn tables() -> &'static [&'static [Command]] {
    &[
        crate::types::string::COMMANDS,
        crate::types::bitops::COMMANDS,
        crate::types::list::COMMANDS,
        crate::types::hash::COMMANDS,
        crate::types::set::COMMANDS,
        crate::types::zset::COMMANDS,
        crate::types::geo::COMMANDS,
        crate::types::hyperloglog::COMMANDS,
        crate::types::stream::COMMANDS,
        crate::keyspace::COMMANDS,
        crate::dump::COMMANDS,
        crate::migrate::COMMANDS,
        crate::types::sort::COMMANDS,
        crate::connection::COMMANDS,
        crate::server::COMMANDS,
        crate::cluster::COMMANDS,
        crate::scripting::COMMANDS,
        crate::memory::COMMANDS,
        crate::diagnostics::COMMANDS,
        crate::debug::COMMANDS,
        crate::persistence::COMMANDS,
        crate::replication::COMMANDS,
        crate::transaction::COMMANDS,
        crate::pubsub::COMMANDS,
        crate::acl::commands::COMMANDS,
    ]
}

/// Every top-level command.
pub fn all() -> impl Iterator<Item = &'static Command> {
    tables().iter().copied().flatten()
}

/// FNV-1a: command names are short and trusted to be few (the table's own
/// names, not client input), so a simple hash beats SipHash on the hot
/// path: the command lookup and the command's counters, once per request.
#[derive(Default)]
pub(crate) struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        self.0 = h;
    }
}

type Table = HashMap<Vec<u8>, &'static Command, BuildHasherDefault<Fnv>>;

/// Looks a command up by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    static TABLE: OnceLock<Table> = OnceLock::new();
    let table = TABLE.get_or_init(|| all().map(|c| (c.name.as_bytes().to_vec(), c)).collect());
    if name.len() > 32 {
        return None;
    }
    let mut lower = [0u8; 32];
    let lower = &mut lower[..name.len()];
    for (l, b) in lower.iter_mut().zip(name) {
        *l = b.to_ascii_lowercase();
    }
    table.get(&lower[..]).copied()
}

/// Runs the subcommand named by `args[1]` of a container command, with
/// Redis's errors for an unknown subcommand or a wrong argument count.
pub fn dispatch_sub(cx: &mut Cx<'_>, parent: &Command, args: &[Arg<'_>]) -> CmdResult {
    let cmd = find_sub(parent, args)?;
    cx.session.last_cmd = cmd.name;
    (cmd.handler)(cx, args)
}

/// The subcommand named by `args[1]` of a container command, checked for
/// existence and arity (MULTI checks before queuing, as Redis does).
/// Whether a request may run while a script is busy (`ALLOW_BUSY` on the
/// command or on the subcommand it names).
pub(crate) fn allowed_while_busy(cmd: &Command, args: &[Arg<'_>]) -> bool {
    if cmd.flags & flags::ALLOW_BUSY != 0 {
        return true;
    }
    !cmd.subcommands.is_empty()
        && args.len() >= 2
        && find_sub(cmd, args).is_ok_and(|sub| sub.flags & flags::ALLOW_BUSY != 0)
}

pub(crate) fn find_sub(parent: &Command, args: &[Arg<'_>]) -> Result<&'static Command, CmdError> {
    let sub = &args[1];
    let found = parent.subcommands.iter().find(|c| {
        c.name
            .split_once('|')
            .is_some_and(|(_, s)| s.as_bytes().eq_ignore_ascii_case(sub))
    });
    let Some(cmd) = found else {
        // Spelled out only for the error: the lookup itself allocates
        // nothing (the ACL check calls it for every container command).
        return Err(CmdError::owned(format!(
            "ERR unknown subcommand '{}'. Try {} HELP.",
            clip(sub, 128),
            parent.name.to_ascii_uppercase()
        )));
    };
    if !cmd.arity_ok(args.len()) {
        return Err(CmdError::arity(cmd.name));
    }
    Ok(cmd)
}

/// At most `max` bytes of `bytes` as text (for error messages).
pub(crate) fn clip(bytes: &[u8], max: usize) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(max)]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_lower_case() {
        let mut seen = std::collections::HashSet::new();
        for c in all() {
            assert_eq!(c.name, c.name.to_ascii_lowercase());
            assert!(seen.insert(c.name), "{} twice", c.name);
            for s in c.subcommands {
                assert!(s.name.starts_with(&format!("{}|", c.name)), "{}", s.name);
            }
        }
    }

    #[test]
    fn lookup_ignores_case() {
        assert_eq!(lookup(b"GeT").map(|c| c.name), Some("get"));
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(&[b'a'; 100]).is_none());
    }

    #[test]
    fn key_positions_follow_first_last_step() {
        let del = lookup(b"del").unwrap();
        assert_eq!(del.key_positions(4).collect::<Vec<_>>(), [1, 2, 3]);
        let get = lookup(b"get").unwrap();
        assert_eq!(get.key_positions(2).collect::<Vec<_>>(), [1]);
        let ping = lookup(b"ping").unwrap();
        assert_eq!(ping.key_positions(1).count(), 0);
    }
}
