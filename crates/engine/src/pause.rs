//! CLIENT PAUSE and CLIENT UNPAUSE: for a while, clients' commands (every
//! command, or only those that may write) wait unanswered, and the data set
//! stays as it is (no key is expired or evicted), so that a replica can
//! catch up or a failover can happen without losing writes.
//!
//! The pause is one shared setting word (`word::PAUSE`), so every worker
//! sees it at once: the deadline in ms since the epoch, shifted left by two,
//! with the mode in the low two bits (one word, so that a reader never sees
//! the deadline of one pause with the mode of another). A later CLIENT PAUSE
//! keeps the later deadline and the stronger mode, as Redis does. The engine
//! only answers [`crate::Flow::Hold`] for a command that must wait; the server
//! parks the connection and runs the command again once the pause ends
//! (its deadline passes, or CLIENT UNPAUSE on any worker, which every worker
//! hears of through [`Engine::take_pause_changed`]).

use crate::command::{find_sub, flags, Arg, CmdResult, Command};
use crate::config::word;
use crate::engine::{Cx, Engine};
use crate::error::CmdError;
use crate::parse;
use crate::session::Session;

/// What a pause holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PauseMode {
    /// Commands that may write (or propagate: PUBLISH, PFCOUNT, scripts).
    Write = 1,
    /// Every command.
    All = 2,
}

/// How often a client held by FAILOVER's pause looks whether it ended.
const FAILOVER_RECHECK_MS: u64 = 5;

/// The latest deadline a word can hold (timeouts beyond it are clamped).
const MAX_DEADLINE: u64 = (1 << 61) - 1;

fn encode(mode: PauseMode, deadline_ms: u64) -> u64 {
    (deadline_ms.min(MAX_DEADLINE) << 2) | mode as u64
}

fn decode(w: u64) -> Option<(PauseMode, u64)> {
    let mode = match w & 3 {
        1 => PauseMode::Write,
        2 => PauseMode::All,
        _ => return None,
    };
    Some((mode, w >> 2))
}

/// Whether a request of `cmd` (with `args`: a container's subcommand, a
/// script's declared flags) may write or propagate: what a WRITE pause
/// holds.
fn may_replicate(
    engine: &mut Engine,
    session: &mut Session,
    cmd: &'static Command,
    args: &[Arg<'_>],
) -> bool {
    let cmd = if cmd.subcommands.is_empty() || args.len() < 2 {
        cmd
    } else {
        match find_sub(cmd, args) {
            Ok(sub) => sub,
            // An unknown subcommand is answered at once.
            Err(_) => return false,
        }
    };
    let flags = match cmd.request_flags {
        Some(request_flags) => {
            let mut scratch = Vec::new();
            let protocol = session.protocol;
            let mut cx = Cx {
                engine,
                session,
                out: proto::resp::ReplyWriter::new(&mut scratch, protocol),
                flow: crate::engine::Flow::Continue,
            };
            request_flags(&mut cx, cmd.flags, args)
        }
        None => cmd.flags,
    };
    flags & (flags::WRITE | flags::MAY_REPLICATE) != 0
}

impl Engine {
    /// The pause in force now (mode and deadline, ms since the epoch), if
    /// any. A pause is in force up to and including its deadline.
    pub fn pause(&self) -> Option<(PauseMode, u64)> {
        let now = self.h.now_ms();
        let client = self
            .store
            .config_word(word::PAUSE)
            .ok()
            .and_then(decode)
            .filter(|(_, deadline)| now <= *deadline);
        if crate::replication::failover_state(&self.store)
            == crate::replication::FailoverState::None
        {
            return client;
        }
        // FAILOVER pauses writes until the supervisor ends it, with no
        // deadline: held clients look again every few milliseconds.
        let recheck = now.saturating_add(FAILOVER_RECHECK_MS);
        Some(match client {
            Some((mode, deadline)) => (mode.max(PauseMode::Write), deadline.max(recheck)),
            None => (PauseMode::Write, recheck),
        })
    }

    /// Whether CLIENT UNPAUSE ran here since the last call: the server
    /// then tells every worker, whose held clients go on.
    pub fn take_pause_changed(&mut self) -> bool {
        std::mem::take(&mut self.pause_changed)
    }

    /// Whether `session`'s `cmd` must wait for the pause to end. Clients
    /// that cannot wait (HTTP, the control channel) and MONITOR clients
    /// (replicas to Redis, which are never paused) are not held; EXEC is
    /// held when its queue may write.
    pub(crate) fn held_by_pause(
        &mut self,
        session: &mut Session,
        cmd: &'static Command,
        args: &[Arg<'_>],
    ) -> bool {
        let paused = self.pause();
        // While paused the data set stays as it is: reads see expired keys
        // as missing but do not remove them.
        self.h.keep_expired(paused.is_some());
        let Some((mode, _)) = paused else {
            return false;
        };
        if session.subs().monitoring() || session.in_exec() {
            return false;
        }
        // A RESP2 subscriber's refused command is refused at once.
        if session.protocol == proto::resp::Protocol::Resp2
            && session.subs().total() > 0
            && cmd.flags & flags::SUBSCRIBED_OK == 0
        {
            return false;
        }
        match mode {
            PauseMode::All => true,
            PauseMode::Write if crate::transaction::is_exec(cmd) => session
                .tx
                .queued_flags_any(flags::WRITE | flags::MAY_REPLICATE),
            PauseMode::Write => may_replicate(self, session, cmd, args),
        }
    }

    /// Whether expired keys may be removed now (no pause in force): the
    /// active expiry sweep skips its turn otherwise.
    pub(crate) fn expiry_allowed(&mut self) -> bool {
        let paused = self.pause().is_some();
        self.h.keep_expired(paused);
        !paused
    }
}

/// What a held command's connection answers when it cannot wait.
pub(crate) const CANNOT_WAIT: &str =
    "ERR clients are paused by CLIENT PAUSE and this connection cannot wait: try again later";

/// CLIENT PAUSE timeout [WRITE|ALL].
pub(crate) fn client_pause(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if args.len() > 4 {
        return Err(CmdError::msg(
            "ERR unknown subcommand or wrong number of arguments for 'pause'. Try CLIENT HELP.",
        ));
    }
    // As Redis: the mode is checked before the timeout.
    let mode = match args.get(3) {
        None => PauseMode::All,
        Some(m) if parse::is(m, "write") => PauseMode::Write,
        Some(m) if parse::is(m, "all") => PauseMode::All,
        Some(_) => return Err(CmdError::msg("ERR CLIENT PAUSE mode must be WRITE or ALL")),
    };
    let timeout = store::parse_i64(&args[2]).ok_or(CmdError::msg(
        "ERR timeout is not an integer or out of range",
    ))?;
    if timeout < 0 {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    let now = cx.engine.h.now_ms();
    // A timeout of 0 ends at once (a pause already in force keeps its
    // deadline, but takes the stronger mode), as in Redis.
    let deadline = if timeout == 0 {
        0
    } else {
        now.saturating_add(timeout as u64)
    };
    let store = cx.engine.store.clone();
    loop {
        let current = store.config_word(word::PAUSE)?;
        let new = match decode(current).filter(|(_, until)| now <= *until) {
            Some((m, until)) => encode(m.max(mode), until.max(deadline)),
            None if deadline == 0 => 0,
            None => encode(mode, deadline),
        };
        if new == current || store.swap_config_word(word::PAUSE, current, new)? {
            break;
        }
    }
    cx.out.simple(b"OK");
    Ok(())
}

/// CLIENT UNPAUSE: ends the pause on every worker.
pub(crate) fn client_unpause(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    cx.engine.store.set_config_word(word::PAUSE, 0)?;
    cx.engine.h.keep_expired(false);
    cx.engine.pause_changed = true;
    cx.out.simple(b"OK");
    Ok(())
}
