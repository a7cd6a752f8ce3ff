//! Transactions: MULTI, EXEC, DISCARD, WATCH and UNWATCH (Redis's
//! `multi.c`).
//!
//! MULTI opens a queue in the session. Every later command, except those
//! that act on the transaction itself, is looked up and checked (arity, a
//! container's subcommand, `NO_MULTI`) and queued with its arguments copied;
//! a command that fails those checks is refused and dooms the transaction.
//! EXEC runs the whole queue inside one exclusive section of the store
//! (docs/design.md I13): no client of any worker process reads or writes a
//! key until it ends, which is what Redis's single thread gives for free.
//!
//! WATCH records each key's version (the store stamps every write of a key
//! with a value never used before) and the segment's flush epoch. EXEC
//! compares them inside its section before it runs anything and replies a
//! null array when any moved. Where this differs from Redis:
//!
//! * FLUSHDB, FLUSHALL and SWAPDB fail every EXEC whose WATCH came before
//!   them and that watched a key existing then, in any database (Redis
//!   fails only those whose watched keys they removed or moved). An EXEC
//!   whose watched keys were all missing at WATCH fails only if one exists
//!   at EXEC, as in Redis.
//! * A key that is missing at WATCH and again at EXEC counts as unchanged,
//!   even if it was created and deleted in between (Redis fails the EXEC).
//! * CLIENT LIST and CLIENT KILL need the server to finish them after the
//!   command, which cannot happen in the middle of EXEC's reply: queued,
//!   they answer `ERR Command not allowed inside a transaction` there;
//!   SLOWLOG, LATENCY and INFO answer for the worker that runs EXEC.
//! * CLIENT REPLY OFF or SKIP, which reply nothing, answer `+OK` inside
//!   EXEC's array (Redis leaves the array short) and take effect from EXEC's
//!   own reply on.

use std::collections::hash_map::{Entry, HashMap};

use store::Handle;

use crate::command::{find_sub, flags::*, Arg, CmdResult, Command};
use crate::engine::{Cx, Flow, ServerRequest};
use crate::error::CmdError;
use crate::session::Session;

const NESTED: &str = "ERR MULTI calls can not be nested";
const EXEC_WITHOUT_MULTI: &str = "ERR EXEC without MULTI";
const DISCARD_WITHOUT_MULTI: &str = "ERR DISCARD without MULTI";
const WATCH_IN_MULTI: &str = "ERR WATCH inside MULTI is not allowed";
const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";
const NOT_IN_MULTI: &str = "ERR Command not allowed inside a transaction";

crate::command::group_cmd!("transactions");

/// The transaction commands.
#[rustfmt::skip]
pub(crate) const COMMANDS: &[Command] = &[
    cmd("multi", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | NOT_QUEUED, (0, 0, 0), "1.2.0", "Mark the start of a transaction block", multi),
    cmd("exec", 1, NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG | NOT_QUEUED | ENDS_MULTI, (0, 0, 0), "1.2.0", "Execute all commands issued after MULTI", exec),
    cmd("discard", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | NOT_QUEUED | ENDS_MULTI, (0, 0, 0), "2.0.0", "Discard all commands issued after MULTI", discard),
    cmd("watch", -2, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | NOT_QUEUED, (1, -1, 1), "2.2.0", "Watch the given keys to determine execution of the MULTI/EXEC block", watch),
    cmd("unwatch", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, (0, 0, 0), "2.2.0", "Forget about all watched keys", unwatch),
];

/// A client's transaction state, kept in its [`Session`].
#[derive(Clone, Debug, Default)]
pub(crate) struct Transaction {
    /// The queued commands while MULTI is open.
    queue: Option<Vec<Queued>>,
    /// A command was refused while queuing: EXEC must fail.
    failed: bool,
    /// Watched keys (db, key) and their versions at WATCH (None: missing).
    watched: HashMap<(u8, Vec<u8>), Option<u64>>,
    /// The flush epoch at the first WATCH.
    epoch: u64,
    /// EXEC is running the queue.
    executing: bool,
}

/// One queued command with its arguments.
#[derive(Clone, Debug)]
struct Queued {
    cmd: &'static Command,
    args: Vec<Arg<'static>>,
    /// The request's flags when queued (a container's subcommand's, a
    /// script's declared ones): Redis's `mstate.cmd_flags` gathers them.
    flags: u32,
}

impl Transaction {
    /// How many commands are queued, or None outside MULTI.
    pub fn queued(&self) -> Option<usize> {
        self.queue.as_ref().map(Vec::len)
    }

    /// Whether EXEC is running the queued commands now.
    pub fn executing(&self) -> bool {
        self.executing
    }

    /// No MULTI open, nothing watched, no EXEC running.
    pub fn is_empty(&self) -> bool {
        self.queue.is_none() && self.watched.is_empty() && !self.executing
    }

    /// Marks the client as running commands that cannot block or be
    /// queued: EXEC's queue, or a script's `redis.call`.
    pub(crate) fn set_executing(&mut self, on: bool) {
        self.executing = on;
    }

    /// Whether any queued command has one of `wanted` flags (Redis's
    /// `mstate.cmd_flags`): EXEC is refused or held as its queue would be.
    pub(crate) fn queued_flags_any(&self, wanted: u32) -> bool {
        self.queue.iter().flatten().any(|q| q.flags & wanted != 0)
    }

    /// Whether some queued command lacks every one of `flags` (Redis's
    /// `mstate.cmd_inv_flags`).
    pub(crate) fn queued_lacks(&self, flags: u32) -> bool {
        self.queue.iter().flatten().any(|q| q.flags & flags == 0)
    }

    /// Dooms an open transaction (a command was refused while queuing).
    pub fn flag_error(&mut self) {
        if self.queue.is_some() {
            self.failed = true;
        }
    }
}

/// Whether `cmd` is to be queued rather than run: MULTI is open and the
/// command is not one that acts on the transaction itself.
/// Whether `cmd` is EXEC, whose refusal ends the transaction and which a
/// WRITE pause holds only if its queue writes.
pub(crate) fn is_exec(cmd: &Command) -> bool {
    cmd.name == "exec"
}

/// EXEC refused before it runs (wrong arity): Redis discards the
/// transaction, and the watches, and says why in an EXECABORT error.
pub(crate) fn exec_abort(session: &mut Session, e: CmdError) -> CmdError {
    session.tx = Transaction::default();
    let why = e.text();
    let why = why.strip_prefix("ERR ").unwrap_or(why);
    CmdError::owned(format!("EXECABORT Transaction discarded because of: {why}"))
}

pub(crate) fn queues(session: &Session, cmd: &Command) -> bool {
    session.tx.queue.is_some() && cmd.flags & NOT_QUEUED == 0
}

/// Queues a command that passed the dispatcher's checks, after the checks
/// Redis makes before queuing: `NO_MULTI` and a container's subcommand.
pub(crate) fn queue(cx: &mut Cx<'_>, cmd: &'static Command, args: &[Arg<'_>]) -> CmdResult {
    // A container named alone (COMMAND) is a command of its own.
    let checked = match cmd.subcommands.is_empty() || args.len() < 2 {
        true => Ok(cmd),
        false => find_sub(cmd, args),
    };
    let checked = checked.map_err(|e| cx.reject(e))?;
    if (cmd.flags | checked.flags) & NO_MULTI != 0 {
        return Err(cx.reject(CmdError::msg(NOT_IN_MULTI)));
    }
    let flags = match checked.request_flags {
        Some(request_flags) => request_flags(cx, checked.flags, args),
        None => checked.flags,
    };
    let args = args.iter().map(|a| Arg::Owned(a.to_vec())).collect();
    if let Some(queue) = &mut cx.session.tx.queue {
        queue.push(Queued { cmd, args, flags });
    }
    cx.out.simple(b"QUEUED");
    Ok(())
}

fn multi(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let tx = &mut cx.session.tx;
    if tx.queue.is_some() {
        return Err(CmdError::msg(NESTED));
    }
    tx.queue = Some(Vec::new());
    tx.failed = false;
    cx.out.simple(b"OK");
    Ok(())
}

fn discard(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    if cx.session.tx.queue.is_none() {
        return Err(CmdError::msg(DISCARD_WITHOUT_MULTI));
    }
    // DISCARD unwatches too.
    cx.session.tx = Transaction::default();
    cx.out.simple(b"OK");
    Ok(())
}

fn watch(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if cx.session.tx.queue.is_some() {
        return Err(CmdError::msg(WATCH_IN_MULTI));
    }
    let db = cx.db();
    let h = &mut cx.engine.h;
    let tx = &mut cx.session.tx;
    // The epoch before the keys: a flush that runs between the two reads
    // fails the EXEC rather than going unseen (store's `bump_flush_epoch`).
    if tx.watched.is_empty() {
        tx.epoch = h.flush_epoch()?;
    }
    for key in &args[1..] {
        // A key watched twice keeps its first version, as in Redis.
        if let Entry::Vacant(e) = tx.watched.entry((db, key.to_vec())) {
            e.insert(h.key_version(db, key)?);
        }
    }
    cx.out.simple(b"OK");
    Ok(())
}

fn unwatch(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    cx.session.tx.watched.clear();
    cx.out.simple(b"OK");
    Ok(())
}

fn exec(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let Some(queue) = cx.session.tx.queue.take() else {
        return Err(CmdError::msg(EXEC_WITHOUT_MULTI));
    };
    // EXEC ends the transaction and unwatches, whatever it replies.
    let tx = std::mem::take(&mut cx.session.tx);
    if tx.failed {
        return Err(CmdError::msg(EXECABORT));
    }
    let mark = cx.out.len();
    let res = Handle::exclusive_in(cx, Cx::h, |cx| {
        if !unchanged(cx.h(), &tx)? {
            cx.out.null_array();
            return Ok(());
        }
        cx.out.array_len(queue.len());
        cx.session.tx.executing = true;
        for (i, q) in queue.iter().enumerate() {
            if i + 1 == queue.len() {
                test_pause_before_last();
            }
            exec_one(cx, q);
        }
        cx.session.tx.executing = false;
        Ok(())
    });
    cx.session.last_cmd = "exec";
    if res.is_err() {
        // Leaving the section failed (a damaged segment): the error replaces
        // whatever was written, so the reply stays well formed.
        cx.out.truncate(mark);
    }
    res
}

/// Test instrumentation: while the file SHOAL_TEST_EXEC_GATE names exists,
/// an EXEC stops before its last queued command, inside its section, after
/// creating that path plus `.reached`; so a test can kill the worker in the
/// middle of an EXEC at a known point. Unset (always, outside tests), it
/// costs one look at a cached value.
fn test_pause_before_last() {
    static GATE: std::sync::OnceLock<Option<std::ffi::OsString>> = std::sync::OnceLock::new();
    let Some(gate) = GATE.get_or_init(|| std::env::var_os("SHOAL_TEST_EXEC_GATE")) else {
        return;
    };
    let gate = std::path::Path::new(gate);
    if gate.exists() {
        let mut reached = gate.as_os_str().to_owned();
        reached.push(".reached");
        let _ = std::fs::write(&reached, b"");
        while gate.exists() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// Whether nothing `tx` watched changed since WATCH. Runs inside EXEC's
/// exclusive section, so nothing can change between this and the commands.
fn unchanged(h: &mut Handle, tx: &Transaction) -> Result<bool, CmdError> {
    if tx.watched.is_empty() {
        return Ok(true);
    }
    // A flush or SWAPDB since WATCH touched the watched keys that existed
    // then (a key created later was touched by its own write).
    if h.flush_epoch()? != tx.epoch && tx.watched.values().any(Option::is_some) {
        return Ok(false);
    }
    for ((db, key), version) in &tx.watched {
        if h.key_version(*db, key)? != *version {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Runs one queued command and writes its reply as one element of EXEC's
/// array, exactly as it would be written alone (a runtime error is an
/// element like any other; the rest still run).
fn exec_one(cx: &mut Cx<'_>, q: &Queued) {
    let start = cx.out.len();
    // The rules may have changed since the command was queued (Redis
    // checks again at EXEC).
    if let Some(kind) = cx.engine.acl_recheck(cx.session, q.cmd, &q.args) {
        let reason = match kind {
            crate::acl::DeniedKind::Command => "no permission to execute the command or subcommand",
            crate::acl::DeniedKind::Key => "no permission to touch the specified keys",
            crate::acl::DeniedKind::Channel => {
                "no permission to access one of the channels used as arguments"
            }
        };
        cx.out.error(format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}").as_bytes());
        return;
    }
    if let Err(e) = crate::engine::run(cx, q.cmd, &q.args) {
        if !std::mem::take(&mut cx.engine.error_counted) {
            cx.engine.stats.failed += 1;
            cx.engine.cmdstats.error(e.text());
        }
        cx.out.error(e.text().as_bytes());
    }
    if let Flow::Server(ServerRequest::Gather(query)) = &cx.flow {
        // SLOWLOG, LATENCY, INFO: EXEC cannot wait for the other workers,
        // so inside a transaction they answer for this worker alone.
        let query = query.clone();
        cx.flow = Flow::Continue;
        let answer = cx.engine.answer_gather(&query);
        let mut reply = Vec::new();
        cx.engine
            .finish_gather(&query, &[answer], cx.out.protocol(), &mut reply);
        cx.out.raw(&reply);
    }
    if let Flow::Server(_) = cx.flow {
        // CLIENT LIST / KILL: only the server can finish them, after the
        // command; nothing has been done yet.
        cx.flow = Flow::Continue;
        cx.out.truncate(start);
        cx.out.error(NOT_IN_MULTI.as_bytes());
    }
    if cx.out.len() == start {
        // CLIENT REPLY OFF | SKIP: an element all the same.
        cx.out.simple(b"OK");
    }
}
