//! Scripting: EVAL and its kin, the script cache (SCRIPT), and FUNCTION's
//! libraries, over one Lua 5.1 state per worker thread (`lua.rs`).
//!
//! A script runs inside one exclusive section of the store, exactly as
//! EXEC runs its queue: no client of any worker reads or writes a key until
//! it ends, and the log records its writes as one group of effects, so
//! replaying the log never runs Lua. `redis.call` dispatches through the
//! same command table as a client, with Redis's checks for scripts
//! (`NOSCRIPT` commands, writes from read-only scripts, OOM).
//!
//! The script cache is shared by every worker: a script's body is kept in
//! a directory beside the segment (`<segment>.scripts/<sha1>`), so a script
//! loaded through one worker runs by EVALSHA through any other. Each worker
//! compiles a body the first time it runs it. SCRIPT FLUSH empties the
//! directory and moves a shared epoch word, on which every worker drops
//! what it compiled.

pub(crate) mod busy;
mod convert;
mod functions;
pub use functions::{
    functions_generation, libraries_for_replica, libraries_for_snapshot,
    replace_libraries_from_primary,
};
mod libs;
mod lua;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use mlua::{Function, MultiValue, Value};
use proto::resp::{Protocol, ReplyWriter};
use store::Handle;

use crate::command::{self, dispatch_sub, flags::*, Arg, CmdResult, Command};
use crate::engine::{Cx, Flow};
use crate::error::CmdError;
use crate::parse;
use convert::Reply;
use lua::{Compiled, Vm, VM};

crate::command::group_cmd!("scripting", keys = (0, 0, 0));

const NOSCRIPT_ERR: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// Script flags (`#!lua flags=…`), Redis's `SCRIPT_FLAG_*`.
pub(crate) mod script_flags {
    /// `no-writes`.
    pub const NO_WRITES: u32 = 1;
    /// `allow-oom`.
    pub const ALLOW_OOM: u32 = 1 << 1;
    /// `allow-stale`.
    pub const ALLOW_STALE: u32 = 1 << 2;
    /// `no-cluster`.
    pub const NO_CLUSTER: u32 = 1 << 3;
    /// No shebang: an EVAL script of before 7.0.
    pub const EVAL_COMPAT: u32 = 1 << 4;
    /// `allow-cross-slot-keys`.
    pub const ALLOW_CROSS_SLOT: u32 = 1 << 5;

    /// The flags' names, as shebangs and FUNCTION LIST spell them.
    pub const NAMES: &[(u32, &str)] = &[
        (NO_WRITES, "no-writes"),
        (ALLOW_OOM, "allow-oom"),
        (ALLOW_STALE, "allow-stale"),
        (NO_CLUSTER, "no-cluster"),
        (ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
    ];
}
use script_flags::*;

#[rustfmt::skip]
const SCRIPT_SUBCOMMANDS: &[Command] = &[
    cmd("script|load", 3, NOSCRIPT | STALE, "2.6.0", "Load the specified Lua script into the script cache.", script_load),
    cmd("script|exists", -3, NOSCRIPT, "2.6.0", "Check existence of scripts in the script cache.", script_exists),
    cmd("script|flush", -2, NOSCRIPT, "2.6.0", "Remove all the scripts from the script cache.", script_flush),
    cmd("script|kill", 2, NOSCRIPT | ALLOW_BUSY, "2.6.0", "Kill the script currently in execution.", script_kill),
    cmd("script|help", 2, LOADING | STALE, "5.0.0", "Show helpful text about the different subcommands", script_help),
];

#[rustfmt::skip]
const FUNCTION_SUBCOMMANDS: &[Command] = &[
    cmd("function|load", -3, WRITE | DENYOOM | NOSCRIPT, "7.0.0", "Create a function with the given arguments (name, code, description)", functions::function_load),
    cmd("function|delete", 3, WRITE | NOSCRIPT, "7.0.0", "Delete a function by name", functions::function_delete),
    cmd("function|flush", -2, WRITE | NOSCRIPT, "7.0.0", "Deleting all functions", functions::function_flush),
    cmd("function|list", -2, NOSCRIPT, "7.0.0", "List information about all the functions", functions::function_list),
    cmd("function|dump", 2, NOSCRIPT, "7.0.0", "Dump all functions into a serialized binary payload", functions::function_dump),
    cmd("function|restore", -3, WRITE | DENYOOM | NOSCRIPT, "7.0.0", "Restore all the functions on the given payload", functions::function_restore),
    cmd("function|stats", 2, NOSCRIPT | ALLOW_BUSY, "7.0.0", "Return information about the function currently running (name, description, duration)", functions::function_stats),
    cmd("function|kill", 2, NOSCRIPT | ALLOW_BUSY, "7.0.0", "Kill the function currently in execution.", function_kill),
    cmd("function|help", 2, LOADING | STALE, "7.0.0", "Show helpful text about the different subcommands", function_help),
];

const fn movable(c: Command) -> Command {
    Command {
        movable_keys: Some(command::keys_numkeys_second),
        ..c
    }
}

/// A script command whose request flags are its script's declared ones.
const fn declared(c: Command, request_flags: command::FlagsFn) -> Command {
    Command {
        request_flags: Some(request_flags),
        ..c
    }
}

/// The command flags a script's declared flags give the command that runs
/// it (Redis's `scriptFlagsToCmdFlags`): a write, refused over maxmemory,
/// unless it says `no-writes` (or `allow-oom`). A script without a shebang
/// keeps the command's flags.
fn flags_of_script(cmd_flags: u32, script: u32) -> u32 {
    if script & EVAL_COMPAT != 0 {
        return cmd_flags;
    }
    let mut f = cmd_flags & !(STALE | DENYOOM | WRITE | MAY_REPLICATE);
    if script & (ALLOW_OOM | NO_WRITES) == 0 {
        f |= DENYOOM;
    }
    if script & NO_WRITES == 0 {
        f |= WRITE;
    }
    if script & ALLOW_STALE != 0 {
        f |= STALE;
    }
    f
}

/// EVAL's flags for its script (its shebang).
fn eval_flags(_cx: &mut Cx<'_>, cmd_flags: u32, args: &[Arg<'_>]) -> u32 {
    match shebang_flags(&args[1]) {
        Ok((script, _)) => flags_of_script(cmd_flags, script),
        Err(_) => cmd_flags,
    }
}

/// EVALSHA's flags for its script, if the cache has it.
fn evalsha_flags(cx: &mut Cx<'_>, cmd_flags: u32, args: &[Arg<'_>]) -> u32 {
    let sha = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    if sha.len() != 40 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return cmd_flags;
    }
    match script_function(cx, &sha, None) {
        Ok((_, _, script)) => flags_of_script(cmd_flags, script),
        Err(_) => cmd_flags,
    }
}

/// FCALL's flags for its function, if it exists.
fn fcall_flags(cx: &mut Cx<'_>, cmd_flags: u32, args: &[Arg<'_>]) -> u32 {
    match functions::function_flags(cx, &args[1]) {
        Some(script) => flags_of_script(cmd_flags, script),
        None => cmd_flags,
    }
}

/// The scripting commands.
#[rustfmt::skip]
pub(crate) const COMMANDS: &[Command] = &[
    declared(movable(cmd("eval", -3, NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | NO_MANDATORY_KEYS | STALE, "2.6.0", "Execute a Lua script server side", eval)), eval_flags),
    declared(movable(cmd("evalsha", -3, NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | NO_MANDATORY_KEYS | STALE, "2.6.0", "Execute a Lua script server side", evalsha)), evalsha_flags),
    declared(movable(cmd("eval_ro", -3, NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY, "7.0.0", "Execute a read-only Lua script server side", eval_ro)), eval_flags),
    declared(movable(cmd("evalsha_ro", -3, NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY, "7.0.0", "Execute a read-only Lua script server side", evalsha_ro)), evalsha_flags),
    declared(movable(cmd("fcall", -3, NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | NO_MANDATORY_KEYS | STALE, "7.0.0", "Invoke a function", fcall)), fcall_flags),
    declared(movable(cmd("fcall_ro", -3, NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY, "7.0.0", "Invoke a read-only function", fcall_ro)), fcall_flags),
    Command { subcommands: SCRIPT_SUBCOMMANDS, ..cmd("script", -2, 0, "2.6.0", "A container for Lua scripts management commands", script) },
    Command { subcommands: FUNCTION_SUBCOMMANDS, ..cmd("function", -2, 0, "7.0.0", "A container for function commands", function) },
];

fn script(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    dispatch_sub(cx, &COMMANDS[6], args)
}

fn function(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    dispatch_sub(cx, &COMMANDS[7], args)
}

fn lua_error(e: mlua::Error) -> CmdError {
    CmdError::owned(format!("ERR {e}"))
}

/// Runs `f` with this thread's Lua state and compiled scripts, creating
/// the state on first use and starting afresh after a SCRIPT FLUSH.
fn with_vm<R>(
    cx: &mut Cx<'_>,
    f: impl FnOnce(&Rc<Vm>, &mut Compiled) -> Result<R, CmdError>,
) -> Result<R, CmdError> {
    let epoch = cx
        .engine
        .store
        .config_word(crate::config::word::SCRIPT_EPOCH)
        .unwrap_or(0);
    let (vm, mut compiled) = VM.with(|slot| -> Result<_, CmdError> {
        let mut slot = slot.borrow_mut();
        match slot.take() {
            Some((vm, compiled)) if compiled.epoch == epoch => Ok((vm, compiled)),
            _ => {
                let vm = Vm::new().map_err(lua_error)?;
                Ok((
                    Rc::new(vm),
                    Compiled {
                        epoch,
                        ..Default::default()
                    },
                ))
            }
        }
    })?;
    let r = f(&vm, &mut compiled);
    VM.with(|slot| *slot.borrow_mut() = Some((vm, compiled)));
    r
}

/// A file beside the segment: its path plus `suffix`.
pub(crate) fn beside(segment: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let mut p = segment.as_os_str().to_owned();
    p.push(suffix);
    p.into()
}

/// The shared script cache's directory beside `segment`.
fn cache_dir_of(segment: &std::path::Path) -> std::path::PathBuf {
    beside(segment, ".scripts")
}

/// The function libraries' file beside `segment`.
pub(crate) fn functions_file_of(segment: &std::path::Path) -> std::path::PathBuf {
    beside(segment, ".functions")
}

/// Removes what scripting keeps beside a segment (the script cache, the
/// function libraries, a busy function's description); the crate's
/// `remove_side_files` calls it. Missing files are fine.
pub(crate) fn remove_side_files(segment: &std::path::Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(cache_dir_of(segment)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    for file in [functions_file_of(segment), busy::description_file(segment)] {
        match std::fs::remove_file(file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// INFO memory's scripting lines: the scripts in the shared cache.
pub(crate) fn info_memory(store: &store::Store, s: &mut String) {
    let cached = std::fs::read_dir(cache_dir_of(store.path())).map_or(0, |entries| {
        entries
            .flatten()
            .filter(|e| is_sha(&e.file_name().to_string_lossy()))
            .count()
    });
    s.push_str(&format!("number_of_cached_scripts:{cached}\r\n"));
}

/// Whether `name` is a SHA1 in hex (a cached script's file name).
fn is_sha(name: &str) -> bool {
    name.len() == 40 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The directory of the shared script cache.
fn cache_dir(cx: &Cx<'_>) -> std::path::PathBuf {
    cache_dir_of(cx.engine.store.path())
}

/// A script's body from the shared cache, if it is there (and really is
/// the script of that SHA1: the file is outside the engine's control).
fn cached_body(cx: &Cx<'_>, sha: &str) -> Option<Vec<u8>> {
    let body = std::fs::read(cache_dir(cx).join(sha)).ok()?;
    (lua::sha1_hex(&body) == sha).then_some(body)
}

/// Adds a body to the shared cache (best effort: a worker that cannot
/// write it still runs the script; the others then answer NOSCRIPT).
fn store_body(cx: &Cx<'_>, sha: &str, body: &[u8]) {
    let dir = cache_dir(cx);
    let path = dir.join(sha);
    if path.exists() {
        return;
    }
    let _ = std::fs::create_dir_all(&dir);
    let tmp = dir.join(format!(".{sha}.{}", std::process::id()));
    if std::fs::write(&tmp, body).is_ok() {
        let _ = std::fs::rename(&tmp, &path);
    }
}

/// Splits a shebang line into words as Redis's `sdssplitargs` does:
/// spaces separate words, and double or single quotes may wrap parts of a
/// word (`name="foo"` is `name=foo`). None when a quote is left open or a
/// closing quote is not followed by a space.
pub(crate) fn split_args(line: &[u8]) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= line.len() {
            break;
        }
        let mut word = Vec::new();
        let mut quote: Option<u8> = None;
        while i < line.len() {
            let c = line[i];
            match quote {
                Some(q) if c == q => {
                    if line.get(i + 1).is_some_and(|n| !n.is_ascii_whitespace()) {
                        return None;
                    }
                    quote = None;
                    i += 1;
                    break;
                }
                Some(b'"') if c == b'\\' && i + 1 < line.len() => {
                    i += 1;
                    word.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        other => other,
                    });
                }
                Some(_) => word.push(c),
                None if c.is_ascii_whitespace() => break,
                None if c == b'"' || c == b'\'' => quote = Some(c),
                None => word.push(c),
            }
            i += 1;
        }
        if quote.is_some() {
            return None;
        }
        words.push(String::from_utf8_lossy(&word).into_owned());
    }
    Some(words)
}

/// Reads a shebang line (`#!lua flags=no-writes,…`): the flags and the
/// length of the line (which is left out of the compiled text, its line
/// feed kept so line numbers stay right). No shebang: compatibility mode.
pub(crate) fn shebang_flags(body: &[u8]) -> Result<(u32, usize), CmdError> {
    if !body.starts_with(b"#!") {
        return Ok((EVAL_COMPAT, 0));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err(CmdError::msg("ERR Invalid script shebang"));
    };
    let words = split_args(&body[..end]).unwrap_or_default();
    let mut parts = words.iter().map(String::as_str);
    let Some(engine) = parts.next() else {
        return Err(CmdError::msg("ERR Invalid engine in script shebang"));
    };
    if engine != "#!lua" {
        return Err(CmdError::owned(format!(
            "ERR Unexpected engine in script shebang: {engine}"
        )));
    }
    let mut flags = 0;
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(CmdError::owned(format!(
                "ERR Unknown lua shebang option: {part}"
            )));
        };
        for name in list.split(',').filter(|n| !n.is_empty()) {
            match script_flags::NAMES.iter().find(|(_, n)| *n == name) {
                Some((bit, _)) => flags |= bit,
                None => {
                    return Err(CmdError::owned(format!(
                        "ERR Unexpected flag in script shebang: {name}"
                    )))
                }
            }
        }
    }
    Ok((flags, end))
}

/// The compiled function and flags of script `sha` (with `body` when the
/// caller has it), compiling and caching it if this worker has not yet.
fn script_function(
    cx: &mut Cx<'_>,
    sha: &str,
    body: Option<&[u8]>,
) -> Result<(Rc<Vm>, Function, u32), CmdError> {
    // Compiled already on this worker (since the last SCRIPT FLUSH): no
    // look at the shared cache, which EVALSHA would otherwise read and
    // hash on every call.
    let known = with_vm(cx, |vm, compiled| {
        Ok(compiled
            .by_sha
            .get(sha)
            .map(|(f, flags)| (vm.clone(), f.clone(), *flags)))
    })?;
    if let Some(found) = known {
        return Ok(found);
    }
    let body = body.map(|b| b.to_vec());
    let fetched = match &body {
        Some(_) => None,
        None => cached_body(cx, sha),
    };
    let found = with_vm(cx, |vm, compiled| {
        if let Some((f, flags)) = compiled.by_sha.get(sha) {
            return Ok(Some((vm.clone(), f.clone(), *flags, false)));
        }
        let Some(body) = body.as_deref().or(fetched.as_deref()) else {
            return Ok(None);
        };
        let (flags, skip) = shebang_flags(body)?;
        let f = vm.compile(&body[skip..], "@user_script").map_err(|e| {
            let text = match e {
                mlua::Error::SyntaxError { message, .. } => message,
                other => other.to_string(),
            };
            CmdError::owned(format!("ERR Error compiling script (new function): {text}"))
        })?;
        compiled.by_sha.insert(sha.to_string(), (f.clone(), flags));
        Ok(Some((vm.clone(), f, flags, true)))
    })?;
    let Some((vm, f, flags, new)) = found else {
        return Err(CmdError::msg(NOSCRIPT_ERR));
    };
    if new {
        if let Some(b) = &body {
            store_body(cx, sha, b);
        }
    }
    Ok((vm, f, flags))
}

fn eval(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    eval_command(cx, args, false, false)
}

fn evalsha(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    eval_command(cx, args, true, false)
}

fn eval_ro(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    eval_command(cx, args, false, true)
}

fn evalsha_ro(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    eval_command(cx, args, true, true)
}

/// The keys and the other arguments after a numkeys argument at 2.
fn split_numkeys<'a, 'b>(args: &'a [Arg<'b>]) -> Result<(&'a [Arg<'b>], &'a [Arg<'b>]), CmdError> {
    let n = parse::int(&args[2])?;
    if n < 0 {
        return Err(CmdError::msg("ERR Number of keys can't be negative"));
    }
    let rest = &args[3..];
    if n as u64 > rest.len() as u64 {
        return Err(CmdError::msg(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    Ok(rest.split_at(n as usize))
}

fn eval_command(cx: &mut Cx<'_>, args: &[Arg<'_>], by_sha: bool, ro: bool) -> CmdResult {
    let (keys, argv) = split_numkeys(args)?;
    let (vm, f, flags, sha) = if by_sha {
        let sha = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
        if !is_sha(&sha) {
            return Err(CmdError::msg(NOSCRIPT_ERR));
        }
        let (vm, f, flags) = script_function(cx, &sha, None)?;
        (vm, f, flags, sha)
    } else {
        let sha = lua::sha1_hex(&args[1]);
        let (vm, f, flags) = script_function(cx, &sha, Some(&args[1]))?;
        (vm, f, flags, sha)
    };
    // Errors name an EVAL script by its SHA1 alone, as Redis 7.0 does.
    run(cx, &vm, &f, flags, ro, true, &sha, keys, argv)
}

/// What the run's `redis.call` native does besides a command, when its
/// first argument is one of these light userdata (which no script can
/// make): the prelude's `redis.acl_check_cmd` (`state.acl_check`) and the
/// busy hook call it so, and the run needs no native of their own.
pub(crate) const NATIVE_ACL_CHECK: usize = 1;
const NATIVE_SERVE_BUSY: usize = 2;

/// The light userdata that asks the run's `redis.call` for `op`.
pub(crate) fn native_op(op: usize) -> Value {
    Value::LightUserData(mlua::LightUserData(std::ptr::without_provenance_mut(op)))
}

/// What `redis.call` checks and remembers during one run.
struct CallCtx {
    read_only: bool,
    allow_oom: bool,
    wrote: bool,
    /// The run as other workers see it (SCRIPT KILL, BUSY).
    running: Option<Rc<busy::Running>>,
    /// The keys the script declares, kept while a client tracks keys: a
    /// read the script makes tracks them (not the keys it read), as in
    /// Redis, where the caller's own command names what it fetched.
    tracked_keys: Vec<Vec<u8>>,
}

/// Runs a compiled script or function (`eval_mode`: KEYS and ARGV are
/// globals; otherwise they are the function's two arguments) inside one
/// exclusive section and writes its reply.
#[allow(clippy::too_many_arguments)]
fn run(
    cx: &mut Cx<'_>,
    vm: &Rc<Vm>,
    f: &Function,
    flags: u32,
    ro: bool,
    eval_mode: bool,
    name: &str,
    keys: &[Arg<'_>],
    argv: &[Arg<'_>],
) -> CmdResult {
    let compat = flags & EVAL_COMPAT != 0;
    if !compat {
        // A script that may write (Redis's scriptPrepareForRun).
        if flags & NO_WRITES == 0 && crate::replication::refuses_writes(cx.engine) {
            return Err(CmdError::msg(
                "READONLY Can not run script with write flag on readonly replica",
            ));
        }
        if flags & NO_WRITES == 0 && ro {
            return Err(CmdError::msg(
                "ERR Can not execute a script with write flag using *_ro command.",
            ));
        }
        if flags & NO_WRITES == 0 && crate::replication::too_few_replicas(cx.engine) {
            return Err(CmdError::msg(crate::replication::NOREPLICAS));
        }
        if flags & (ALLOW_OOM | NO_WRITES) == 0 && cx.engine.store.over_maxmemory().unwrap_or(false)
        {
            return Err(CmdError::msg("OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'"));
        }
    }
    let mut ctx = CallCtx {
        read_only: ro || (!compat && flags & NO_WRITES != 0),
        allow_oom: !compat && flags & ALLOW_OOM != 0,
        wrote: false,
        running: None,
        tracked_keys: match cx.engine.tracking.any_client() {
            true => keys.iter().map(|k| k.to_vec()).collect(),
            false => Vec::new(),
        },
    };
    let lua = &vm.lua;
    let table = |items: &[Arg<'_>]| -> mlua::Result<mlua::Table> {
        let t = lua.create_table_with_capacity(items.len(), 0)?;
        for (i, a) in items.iter().enumerate() {
            t.raw_set(i + 1, lua.create_string(a)?)?;
        }
        Ok(t)
    };
    let keys_t = table(keys).map_err(lua_error)?;
    let argv_t = table(argv).map_err(lua_error)?;
    if eval_mode {
        vm.globals
            .raw_set(&vm.names.keys, keys_t.clone())
            .map_err(lua_error)?;
        vm.globals
            .raw_set(&vm.names.argv, argv_t.clone())
            .map_err(lua_error)?;
    }
    vm.flags.resp.set(Protocol::Resp2);
    vm.flags.running.set(true);
    let saved_db = cx.session.db;
    let was_executing = cx.session.in_exec();
    let result = Handle::exclusive_in(cx, Cx::h, |cx| -> Result<_, CmdError> {
        let running = Rc::new(busy::Running::begin(
            &cx.engine.store,
            cx.engine.info.worker,
            !eval_mode,
        ));
        ctx.running = Some(running.clone());
        let threshold = Duration::from_millis(cx.engine.config.busy_reply_threshold);
        // A function names itself to FUNCTION STATS once it turns busy.
        let description = (!eval_mode).then(|| {
            let verb: &[u8] = if ro { b"fcall_ro" } else { b"fcall" };
            let mut command = vec![verb.to_vec(), name.as_bytes().to_vec()];
            command.push(keys.len().to_string().into_bytes());
            command.extend(keys.iter().chain(argv).map(|a| a.to_vec()));
            (name.to_string(), command)
        });
        watch_run(vm, running.clone(), threshold, description).map_err(lua_error)?;
        cx.session.tx.set_executing(true);
        let was_in_script = std::mem::replace(&mut cx.session.in_script, true);
        let ignored = cx.engine.h.ignores_maxmemory();
        if ctx.allow_oom {
            cx.engine.h.ignore_maxmemory(true);
        }
        // `redis.call` and the hook's busy server share the context; they
        // never run at once (the hook fires only between Lua instructions).
        let shared = RefCell::new(&mut *cx);
        let call_ctx = RefCell::new(&mut ctx);
        let r = lua.scope(|scope| {
            // `redis.call`, made for each run (garbage the collector pays
            // for); the prelude's `redis.pcall` calls it too.
            let call = {
                let (shared, call_ctx) = (&shared, &call_ctx);
                move |lua: &mlua::Lua, mut args: MultiValue| {
                    if let Some(Value::LightUserData(op)) = args.front() {
                        let op = op.0.addr();
                        args.pop_front();
                        if op == NATIVE_SERVE_BUSY {
                            // The hook fires only between Lua instructions,
                            // never inside `redis.call`, but check rather
                            // than panic.
                            if let Ok(mut cx) = shared.try_borrow_mut() {
                                if let Some(server) = cx.engine.busy_server.clone() {
                                    server(cx.engine);
                                }
                            }
                            return Ok(Value::Nil);
                        }
                        return acl_check_cmd(&mut shared.borrow_mut(), lua, args);
                    }
                    let (value, failed) = redis_call(
                        &mut shared.borrow_mut(),
                        lua,
                        vm.flags.resp.get(),
                        &mut call_ctx.borrow_mut(),
                        args,
                    )?;
                    if failed {
                        // The error table waits for the prelude's handler,
                        // which names the script's line that called.
                        vm.state.raw_set(&vm.names.pending, value)?;
                        vm.restock_error_slot();
                        return Err(mlua::Error::runtime("redis.call failed"));
                    }
                    Ok(value)
                }
            };
            let names = &vm.names;
            vm.redis
                .raw_set(&names.call, scope.create_function(call)?)?;
            vm.state.raw_set(&names.pending, Value::Nil)?;
            let r = vm.limited(|| vm.runner.call::<(bool, Value)>((f.clone(), keys_t, argv_t)));
            vm.redis.raw_set(&names.call, &vm.outside_run)?;
            r
        });
        cx.session.tx.set_executing(was_executing);
        cx.session.in_script = was_in_script;
        cx.engine.h.ignore_maxmemory(ignored);
        vm.watch.borrow_mut().take();
        // The run ends (for other workers) as it leaves the section.
        running.end();
        ctx.running = None;
        Ok(r)
    });
    vm.flags.running.set(false);
    if !matches!(result, Ok(Ok((true, _)))) {
        vm.restock_error_slot();
    }
    cx.session.db = saved_db;
    let resp = vm.flags.resp.get();
    match result? {
        Ok((true, Value::Table(t))) if matches!(t.raw_get("err"), Ok(Value::String(_))) => {
            // An error table returned: the reply is its error, counted
            // unless it came from a command the script called.
            let text: mlua::LuaString = t.raw_get("err").map_err(lua_error)?;
            cx.engine.error_counted = is_counted(&t);
            Err(CmdError::owned(text.to_string_lossy()))
        }
        Ok((true, value)) => {
            convert::lua_to_reply(&mut cx.out, &value, resp);
            Ok(())
        }
        Ok((false, err)) => {
            cx.engine.error_counted = matches!(&err, Value::Table(t) if is_counted(t));
            Err(script_error(&err, name))
        }
        Err(e) => Err(CmdError::owned(format!(
            "ERR Error running script {name}, {}",
            clip_chars(&e.to_string(), 100)
        ))),
    }
}

/// How many Lua instructions run between two looks at the busy word
/// (Redis's hook runs every 100000).
const HOOK_INSTRUCTIONS: u32 = 100_000;

/// How long a worker whose busy script wrote waits, on SHUTDOWN NOSAVE,
/// for the supervisor to start stopping before it exits.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// How often a busy script's worker looks at its other clients.
const SERVE_EVERY: Duration = Duration::from_millis(1);

/// What the instruction hook watches during one run.
pub(crate) struct Watch {
    running: Rc<busy::Running>,
    threshold: Duration,
    /// A function's name and command, for FUNCTION STATS once busy.
    description: Option<(String, Vec<Vec<u8>>)>,
    started: Instant,
    last_served: Instant,
}

/// Watches a run with the hook that stops it when SCRIPT KILL / FUNCTION
/// KILL, a SHUTDOWN NOSAVE or the supervisor's death asks it to. A killed
/// run cannot be caught: `pcall` raises the kill again (`state.killed`).
///
/// Past `threshold` the hook also lets the worker answer its other clients
/// (`redis.call` asked to serve, the engine's [`crate::BusyServer`]), as Redis
/// processes events while a script is busy.
fn watch_run(
    vm: &Vm,
    running: Rc<busy::Running>,
    threshold: Duration,
    description: Option<(String, Vec<Vec<u8>>)>,
) -> mlua::Result<()> {
    vm.state.raw_set(&vm.names.killed, Value::Nil)?;
    let started = Instant::now();
    *vm.watch.borrow_mut() = Some(Watch {
        running,
        threshold,
        description,
        started,
        last_served: started,
    });
    if vm.hooked.get() {
        return Ok(());
    }
    let state = vm.state.clone();
    let redis = vm.redis.clone();
    let watch = vm.watch.clone();
    let parent = std::os::unix::process::parent_id();
    vm.lua.set_hook(
        mlua::HookTriggers::new().every_nth_instruction(HOOK_INSTRUCTIONS),
        move |lua, _| {
            let (running, serve) = {
                let mut watch = watch.borrow_mut();
                let Some(w) = watch.as_mut() else {
                    return Ok(mlua::VmState::Continue);
                };
                let serve =
                    w.started.elapsed() >= w.threshold && w.last_served.elapsed() >= SERVE_EVERY;
                if serve {
                    w.last_served = Instant::now();
                    if let Some((name, command)) = &w.description {
                        w.running.describe(name, command);
                    }
                }
                (w.running.clone(), serve)
            };
            if serve {
                if let Value::Function(call) = redis.raw_get("call")? {
                    call.call::<()>(native_op(NATIVE_SERVE_BUSY))?;
                }
            }
            // A worker whose supervisor died is reparented: it must not
            // spin on in a script nobody can kill.
            let orphaned = std::os::unix::process::parent_id() != parent;
            let stop = match running.stop_requested() {
                Some(stop) => Some(stop),
                None if orphaned => Some(busy::Stop::Shutdown),
                None => None,
            };
            let Some(stop) = stop else {
                return Ok(mlua::VmState::Continue);
            };
            if stop == busy::Stop::Shutdown && running.has_written() {
                // Its writes cannot be undone and the server goes down
                // without saving (SHUTDOWN NOSAVE): the worker ends here,
                // as if killed, and the log drops its unfinished group.
                eprintln!(
                    "shoal: a busy script that wrote is stopped by shutdown; the worker exits"
                );
                // The SHUTDOWN's SIGTERM reaches the supervisor within
                // moments; exiting before it does would look like a crash
                // to restart. (Exits at once when orphaned.)
                let deadline = Instant::now() + SHUTDOWN_GRACE;
                while !orphaned
                    && std::os::unix::process::parent_id() == parent
                    && Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                std::process::exit(1);
            }
            if stop == busy::Stop::Kill {
                eprintln!("shoal: Lua script killed by user with SCRIPT KILL.");
            }
            let e = lua::error_table(lua, busy::KILLED)?;
            state.raw_set("killed", e.clone())?;
            state.raw_set("pending", e)?;
            Err(mlua::Error::RuntimeError("script killed".into()))
        },
    )?;
    vm.hooked.set(true);
    Ok(())
}

fn clip_chars(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// The error reply of a failed run (Redis's `luaCallFunction`).
fn script_error(err: &Value, name: &str) -> CmdError {
    let text = |v: Value| match v {
        Value::String(s) => Some(s.to_string_lossy()),
        Value::Number(n) => Some(libs::lua_number_text(n)),
        Value::Integer(n) => Some(n.to_string()),
        _ => None,
    };
    match err {
        Value::Table(t) => {
            let msg = text(t.raw_get("err").unwrap_or(Value::Nil))
                .unwrap_or_else(|| "ERR unknown error".into());
            let source = text(t.raw_get("source").unwrap_or(Value::Nil));
            let line = text(t.raw_get("line").unwrap_or(Value::Nil));
            let mut out = msg;
            if let (Some(source), Some(line)) = (source, line) {
                out.push_str(&format!(" script: {name}, on {source}:{line}."));
            }
            CmdError::owned(out)
        }
        Value::String(s) => CmdError::owned(format!(
            "ERR Error running script {name}, {}",
            clip_chars(&s.to_string_lossy(), 100)
        )),
        _ => CmdError::owned(format!(
            "ERR Error running script {name}, execution failure"
        )),
    }
}

/// `redis.call` / `redis.pcall`: the arguments become a request, checked
/// as Redis checks a script's command, run, and its reply converted. The
/// second result says whether it is an error (`redis.call` raises it).
fn redis_call(
    cx: &mut Cx<'_>,
    lua: &mlua::Lua,
    resp: Protocol,
    ctx: &mut CallCtx,
    args: MultiValue,
) -> mlua::Result<(Value, bool)> {
    let request = match request_args(lua, args)? {
        Ok(request) => request,
        Err(e) => return Ok((e, true)),
    };
    match script_command(cx, resp, ctx, &request) {
        Err(text) => Ok((counted(lua::error_table(lua, text.as_bytes())?)?, true)),
        Ok(bytes) => match convert::parse_replies(&bytes) {
            Ok(replies) if !replies.is_empty() => {
                let value = convert::reply_to_lua(lua, &replies[0])?;
                match replies[0] {
                    Reply::Error(_) => Ok((counted(value)?, true)),
                    _ => Ok((value, false)),
                }
            }
            _ => Ok((
                lua::error_table(lua, b"Unexpected reply from command")?,
                true,
            )),
        },
    }
}

/// The arguments of `redis.call`, `redis.pcall` or `redis.acl_check_cmd`
/// as a request, or the error table for arguments Redis refuses
/// (`luaArgsToRedisArgv`).
fn request_args(
    lua: &mlua::Lua,
    args: impl IntoIterator<Item = Value>,
) -> mlua::Result<Result<Vec<Arg<'static>>, Value>> {
    let args = args.into_iter();
    let mut request: Vec<Arg<'static>> = Vec::with_capacity(args.size_hint().0);
    for arg in args {
        let bytes = match arg {
            Value::String(s) => s.as_bytes().to_vec(),
            Value::Number(n) => lua::format_double(n).into_bytes(),
            Value::Integer(n) => n.to_string().into_bytes(),
            _ => {
                let e = lua::error_table(
                    lua,
                    b"Lua redis lib command arguments must be strings or integers",
                )?;
                return Ok(Err(e));
            }
        };
        request.push(Arg::Owned(bytes));
    }
    if request.is_empty() {
        let e = lua::error_table(
            lua,
            b"Please specify at least one argument for this redis lib call",
        )?;
        return Ok(Err(e));
    }
    Ok(Ok(request))
}

/// `redis.acl_check_cmd`: whether the user running the script may run
/// this command with these arguments (checked as Redis checks a client's
/// command, keys and channels included, but not logged), or an error
/// table for a command Redis would not find.
fn acl_check_cmd(cx: &mut Cx<'_>, lua: &mlua::Lua, args: MultiValue) -> mlua::Result<Value> {
    let request = match request_args(lua, args)? {
        Ok(request) => request,
        Err(e) => return Ok(e),
    };
    let found = command::lookup(&request[0]).filter(|cmd| {
        cmd.subcommands.is_empty() || request.len() < 2 || command::find_sub(cmd, &request).is_ok()
    });
    let Some(cmd) = found else {
        return lua::error_table(lua, b"Invalid command passed to redis.acl_check_cmd()");
    };
    let session = &*cx.session;
    let acl = &cx.engine.acl;
    let allowed = (session.user == b"default" && acl.default_open)
        || acl.users.get(&session.user).is_some_and(|user| {
            user.check(crate::acl::effective(cmd, &request), &request)
                .is_ok()
        });
    Ok(Value::Boolean(allowed))
}

/// The field of an error table that says its error was counted in
/// errorstats when the command failed (Redis's name for it), so the
/// script's reply does not count it again.
const COUNTED_FIELD: &str = "ignore_error_stats_update";

/// Marks an error table from a command as counted already.
fn counted(err: Value) -> mlua::Result<Value> {
    if let Value::Table(t) = &err {
        t.raw_set(COUNTED_FIELD, true)?;
    }
    Ok(err)
}

/// Whether an error table's error was counted already.
fn is_counted(err: &mlua::Table) -> bool {
    matches!(
        err.raw_get::<Value>(COUNTED_FIELD),
        Ok(Value::Boolean(true))
    )
}

/// Runs one command of a script after Redis's checks (`scriptCall`),
/// returning its reply bytes, or the text of the check that refused it.
/// A refusal counts as an error reply and a rejected call of the command,
/// as Redis counts it.
fn script_command(
    cx: &mut Cx<'_>,
    resp: Protocol,
    ctx: &mut CallCtx,
    args: &[Arg<'static>],
) -> Result<Vec<u8>, String> {
    let checked = checked_command(cx, ctx, args);
    let (cmd, flags) = match checked {
        Ok(found) => found,
        Err((cmd, text)) => {
            cx.engine.stats.failed += 1;
            cx.engine
                .cmdstats
                .error(&String::from_utf8_lossy(&lua::error_text(text.as_bytes())));
            if let Some(cmd) = cmd {
                cx.engine.cmdstats.rejected(cmd.name);
            }
            return Err(text);
        }
    };
    let mut buf = Vec::new();
    // The calling client's command stays the script's (CLIENT LIST, and
    // the script's own call counted under its name).
    let caller_cmd = cx.session.last_cmd;
    let mut inner = Cx {
        engine: &mut *cx.engine,
        session: &mut *cx.session,
        out: ReplyWriter::new(&mut buf, resp),
        flow: Flow::Continue,
    };
    let result = crate::engine::run(&mut inner, cmd, args);
    if let Err(e) = result {
        inner.engine.stats.failed += 1;
        inner.engine.cmdstats.error(e.text());
        inner.out.error(e.text().as_bytes());
    }
    let flow = inner.flow;
    cx.session.last_cmd = caller_cmd;
    if flags & READONLY != 0 && !ctx.tracked_keys.is_empty() {
        let id = cx.session.id;
        cx.engine
            .tracking_remember(id, ctx.tracked_keys.iter().cloned());
    }
    if !matches!(flow, Flow::Continue | Flow::Block(_)) {
        // Only the server could finish it (CLIENT LIST, INFO across
        // workers…), after the script: refused, as Redis refuses commands
        // a script cannot run.
        return Err("This Redis command is not allowed from script".into());
    }
    Ok(buf)
}

/// Redis's checks of a script's command (`scriptCall`): the command to
/// run and its flags (with its subcommand's), or what refused it (with the
/// command when it is known, for its rejected calls).
fn checked_command(
    cx: &mut Cx<'_>,
    ctx: &mut CallCtx,
    args: &[Arg<'static>],
) -> Result<(&'static Command, u32), (Option<&'static Command>, String)> {
    let Some(cmd) = command::lookup(&args[0]) else {
        return Err((None, "Unknown Redis command called from script".into()));
    };
    let sub = match cmd.subcommands.is_empty() || args.len() < 2 {
        true => Some(cmd),
        false => command::find_sub(cmd, args).ok(),
    };
    let named = sub.unwrap_or(cmd);
    let refuse = |text: String| Err((Some(named), text));
    if !cmd.arity_ok(args.len()) {
        return refuse("Wrong number of args calling Redis command from script".into());
    }
    let flags = cmd.flags | sub.map_or(0, |c| c.flags);
    if flags & NOSCRIPT != 0 {
        return refuse("This Redis command is not allowed from script".into());
    }
    if let Err(e) = cx.engine.acl_check_script(cx.session, args) {
        return refuse(e.text().to_string());
    }
    // A read-only script may not propagate either (PUBLISH): it may run
    // while CLIENT PAUSE WRITE holds writes.
    if flags & (WRITE | MAY_REPLICATE) != 0 && ctx.read_only {
        return refuse("Write commands are not allowed from read-only scripts.".into());
    }
    if flags & WRITE != 0 {
        // A read-only replica, or too few replicas: refused before the
        // script's first write (Redis's scriptVerifyWriteCommandAllow).
        if !ctx.wrote && crate::replication::refuses_writes(cx.engine) {
            return refuse(format!("-{}", crate::replication::READONLY));
        }
        if !ctx.wrote && crate::replication::too_few_replicas(cx.engine) {
            return refuse(format!("-{}", crate::replication::NOREPLICAS));
        }
        if flags & DENYOOM != 0 && !ctx.allow_oom && !ctx.wrote && cx.engine.refuses_oom() {
            return refuse(format!("-{}", crate::error::OOM));
        }
        ctx.wrote = true;
        if let Some(running) = &ctx.running {
            running.wrote();
        }
    }
    Ok((cmd, flags))
}

fn fcall(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    functions::fcall_command(cx, args, false)
}

fn fcall_ro(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    functions::fcall_command(cx, args, true)
}

fn function_kill(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    busy::kill(&cx.engine.store, false)?;
    cx.out.simple(b"OK");
    Ok(())
}

fn script_load(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let sha = lua::sha1_hex(&args[2]);
    script_function(cx, &sha, Some(&args[2]))?;
    cx.out.bulk(sha.as_bytes());
    Ok(())
}

fn script_exists(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    cx.out.array_len(args.len() - 2);
    for a in &args[2..] {
        let sha = String::from_utf8_lossy(a).to_ascii_lowercase();
        let known = is_sha(&sha) && cache_dir(cx).join(&sha).exists();
        cx.out.integer(known as i64);
    }
    Ok(())
}

fn script_flush(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    match &args[2..] {
        [] => {}
        [mode] if parse::is(mode, "async") || parse::is(mode, "sync") => {}
        _ => {
            return Err(CmdError::msg(
                "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
            ))
        }
    }
    if let Ok(entries) = std::fs::read_dir(cache_dir(cx)) {
        for e in entries.flatten() {
            let _ = std::fs::remove_file(e.path());
        }
    }
    let word = crate::config::word::SCRIPT_EPOCH;
    let store = &cx.engine.store;
    loop {
        let now = store.config_word(word)?;
        if store.swap_config_word(word, now, now.wrapping_add(1))? {
            break;
        }
    }
    cx.out.simple(b"OK");
    Ok(())
}

fn script_kill(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    busy::kill(&cx.engine.store, true)?;
    cx.out.simple(b"OK");
    Ok(())
}

fn script_help(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    command::reply_help(
        cx,
        &[
            "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
            "HELP",
            "    Print this help.",
        ],
    )
}
fn function_help(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    command::reply_help(
        cx,
        &[
            "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "LIST [WITHCODE] [LIBRARYNAME <pattern>]",
            "    Return general information on all the libraries.",
            "HELP",
            "    Print this help.",
        ],
    )
}

/// The fuzz target `script_reply`'s checks (`cargo test` runs them over
/// its corpus): any bytes given to the reply parser `redis.call` uses are
/// refused or parsed without a panic; whatever parses converts to a Lua
/// value and back into a reply (both protocols) that parses again; and a
/// Lua number passed as a command argument prints as `%.17g`, which reads
/// back as the same number.
#[doc(hidden)]
pub mod fuzzing {
    use proto::resp::{Protocol, ReplyWriter};

    use super::convert::{lua_to_reply, parse_replies, reply_to_lua};

    /// One fuzz input.
    pub fn fuzz_reply(data: &[u8]) {
        if let Ok(replies) = parse_replies(data) {
            let lua = mlua::Lua::new();
            for r in &replies {
                let Ok(v) = reply_to_lua(&lua, r) else {
                    continue;
                };
                for protocol in [Protocol::Resp2, Protocol::Resp3] {
                    let mut out = Vec::new();
                    lua_to_reply(&mut ReplyWriter::new(&mut out, protocol), &v, protocol);
                    assert!(parse_replies(&out).is_ok(), "{out:?}");
                }
            }
        }
        if let Some(bytes) = data.get(..8) {
            let d = f64::from_le_bytes(bytes.try_into().unwrap_or_default());
            let text = super::lua::format_double(d);
            if d.is_finite() {
                assert_eq!(text.parse::<f64>().ok(), Some(d), "{text}");
            }
        }
    }

    #[cfg(test)]
    #[test]
    fn the_fuzz_corpus_keeps_the_invariants() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/script_reply");
        for entry in std::fs::read_dir(&dir).expect("corpus dir") {
            let data = std::fs::read(entry.expect("entry").path()).expect("read");
            fuzz_reply(&data);
        }
    }
}
