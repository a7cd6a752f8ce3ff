//! AUTH and ACL: logging in, and reading and changing the users in the
//! segment's user table.

use super::model::{has_spaces, registry, CATEGORIES};
use super::{check_rules, DeniedKind, LogContext, LogEntry, LogReason, User, Users, WRONGPASS};
use crate::command::{dispatch_sub, flags::*, reply_help, Arg, CmdResult, Command};
use crate::config::params;
use crate::engine::{Cx, Engine, Flow, KillFilter, ServerRequest};
use crate::error::CmdError;
use crate::parse;

crate::command::group_cmd!("server", keys = (0, 0, 0), since = "6.0.0");

const ACL_SUBCOMMANDS: &[Command] = &[
    cmd(
        "acl|cat",
        -2,
        NOSCRIPT | LOADING | STALE,
        "List the ACL categories or the commands inside a category",
        acl_cat,
    ),
    cmd(
        "acl|deluser",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Remove the specified ACL users and the associated rules",
        acl_deluser,
    ),
    Command {
        since: "7.0.0",
        ..cmd(
            "acl|dryrun",
            -4,
            ADMIN | NOSCRIPT | LOADING | STALE,
            "Returns whether the user can execute the given command without executing the command.",
            acl_dryrun,
        )
    },
    cmd(
        "acl|genpass",
        -2,
        NOSCRIPT | LOADING | STALE,
        "Generate a pseudorandom secure password to use for ACL users",
        acl_genpass,
    ),
    cmd(
        "acl|getuser",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Get the rules for a specific ACL user",
        acl_getuser,
    ),
    cmd(
        "acl|help",
        2,
        LOADING | STALE,
        "Show helpful text about the different subcommands",
        acl_help,
    ),
    cmd(
        "acl|list",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "List the current ACL rules in ACL config file format",
        acl_list,
    ),
    cmd(
        "acl|load",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Reload the ACLs from the configured ACL file",
        acl_load,
    ),
    cmd(
        "acl|log",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "List latest events denied because of ACLs in place",
        acl_log,
    ),
    cmd(
        "acl|save",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Save the current ACL rules in the configured ACL file",
        acl_save,
    ),
    cmd(
        "acl|setuser",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "Modify or create the rules for a specific ACL user",
        acl_setuser,
    ),
    cmd(
        "acl|users",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        "List the username of all the configured ACL rules",
        acl_users,
    ),
    cmd(
        "acl|whoami",
        2,
        NOSCRIPT | LOADING | STALE,
        "Return the name of the user associated to the current connection",
        acl_whoami,
    ),
];

/// AUTH and ACL.
#[rustfmt::skip]
pub(crate) const COMMANDS: &[Command] = &[
    Command { group: "connection", since: "1.0.0", ..cmd("auth", -2, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY, "Authenticate to the server", auth) },
    Command { subcommands: ACL_SUBCOMMANDS, ..cmd("acl", -2, 0, "A container for Access List Control commands", acl) },
];

fn acl(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    dispatch_sub(cx, &COMMANDS[1], args)
}

/// `acl-pubsub-default allchannels`: new users may use every channel.
fn pubsub_default_all(engine: &Engine) -> bool {
    params::Overrides::parse(&engine.store.config_text().unwrap_or_default())
        .get("acl-pubsub-default")
        .is_some_and(|v| v == "allchannels")
}

/// `acllog-max-len`.
fn log_max_len(engine: &Engine) -> usize {
    params::Overrides::parse(&engine.store.config_text().unwrap_or_default())
        .get("acllog-max-len")
        .and_then(|v| v.parse().ok())
        .unwrap_or(128)
}

/// The configured `aclfile` (empty = none).
fn acl_file(engine: &Engine) -> String {
    params::Overrides::parse(&engine.store.config_text().unwrap_or_default())
        .get("aclfile")
        .unwrap_or("")
        .to_string()
}

impl Engine {
    /// Changes the users under the user table's lock: `f` gets the table
    /// as the segment holds it now and says what to reply; the new table is
    /// written only when `f` succeeds. Every worker sees it before its next
    /// command.
    pub(crate) fn change_users<T>(
        &mut self,
        f: impl FnOnce(&mut Users) -> Result<T, CmdError>,
    ) -> Result<T, CmdError> {
        let mut outcome = None;
        let res = self.h.update_users_text(|old| {
            let mut users = Users::from_segment_text(old);
            match f(&mut users) {
                Ok(v) => {
                    outcome = Some(Ok(v));
                    Some(users.to_segment_text())
                }
                Err(e) => {
                    outcome = Some(Err(e));
                    None
                }
            }
        });
        match res {
            Err(store::Error::TooLarge) => {
                return Err(CmdError::msg(
                    "ERR the users do not fit the segment's user table area",
                ))
            }
            Err(e) => return Err(e.into()),
            Ok(()) => {}
        }
        let outcome = outcome.unwrap_or(Err(CmdError::msg("ERR user table unavailable")));
        if outcome.is_ok() {
            super::bump_generation(&self.store)?;
            self.acl.sync(&self.store);
        }
        outcome
    }

    /// Logs a refusal in ACL LOG.
    pub(crate) fn acl_log(
        &mut self,
        session: &crate::session::Session,
        reason: LogReason,
        context: LogContext,
        object: &[u8],
        username: Option<&[u8]>,
    ) {
        let now = self.h.now_ms();
        let entry = LogEntry {
            count: 1,
            reason,
            context,
            object: object.to_vec(),
            username: username.unwrap_or(&session.user).to_vec(),
            created_ms: now,
            client_info: self.client_line(session, now),
        };
        let max = log_max_len(self);
        self.acl.add_log(entry, max);
    }

    /// Logs a refused request: the command's full name, or the key or
    /// channel at `arg`.
    pub(crate) fn acl_log_denied(
        &mut self,
        session: &crate::session::Session,
        cmd: &Command,
        args: &[Arg<'_>],
        kind: DeniedKind,
        arg: usize,
        context: LogContext,
    ) {
        let (reason, object) = match kind {
            DeniedKind::Command => (LogReason::Command, cmd.name.as_bytes().to_vec()),
            DeniedKind::Key => (
                LogReason::Key,
                args.get(arg).map(|a| a.to_vec()).unwrap_or_default(),
            ),
            DeniedKind::Channel => (
                LogReason::Channel,
                args.get(arg).map(|a| a.to_vec()).unwrap_or_default(),
            ),
        };
        self.acl_log(session, reason, context, &object, None);
    }

    /// Logs in as `username` with `password`: true when it worked (the
    /// session is then that user's), else the failure is logged
    /// (`log_object` names the command: AUTH, HELLO).
    pub fn authenticate(
        &mut self,
        session: &mut crate::session::Session,
        username: &[u8],
        password: &[u8],
        log_object: &[u8],
    ) -> bool {
        let found = self
            .acl
            .users
            .get(username)
            .filter(|u| u.password_ok(password))
            .map(|u| u.incarnation);
        match found {
            Some(incarnation) => {
                session.user = username.to_vec();
                session.user_incarnation = incarnation;
                session.authenticated = Some(true);
                true
            }
            None => {
                self.acl_log(
                    session,
                    LogReason::Auth,
                    LogContext::Toplevel,
                    log_object,
                    Some(username),
                );
                false
            }
        }
    }
}

fn auth(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::syntax());
    }
    let (user, pass): (&[u8], &[u8]) = if args.len() == 2 {
        if cx.engine.acl.users.default_user().is_nopass() {
            return Err(CmdError::msg("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"));
        }
        (b"default", &args[1])
    } else {
        (&args[1], &args[2])
    };
    if cx.engine.authenticate(cx.session, user, pass, &args[0]) {
        cx.out.simple(b"OK");
        Ok(())
    } else {
        Err(CmdError::msg(WRONGPASS))
    }
}

fn acl_setuser(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let name = args[2].to_vec();
    if has_spaces(&name) {
        return Err(CmdError::msg(
            "ERR Usernames can't contain spaces or null characters",
        ));
    }
    let all_channels = pubsub_default_all(cx.engine);
    let rules: Vec<&[u8]> = args[3..].iter().map(|a| &a[..]).collect();
    let kill = cx.engine.change_users(|users| {
        let original = users.get(&name).cloned();
        let mut u = match &original {
            Some(u) => u.clone(),
            None => {
                let mut u = User::new(&name, all_channels);
                u.incarnation = users.next_incarnation();
                u
            }
        };
        check_rules(&mut u, &rules, all_channels)
            .map_err(|e| CmdError::owned(format!("ERR {e}")))?;
        let kill = original.and_then(|old| revoked_channels(&old, &u));
        users.map.insert(name.clone(), std::sync::Arc::new(u));
        Ok(kill)
    })?;
    cx.out.simple(b"OK");
    if let Some(allowed) = kill {
        // Subscribers whose channels the user lost are closed, as in Redis.
        cx.flow = Flow::Server(ServerRequest::ClientKill(KillFilter {
            users: vec![name],
            channels_outside: Some(allowed),
            quiet: true,
            caller: cx.session.id,
            ..KillFilter::default()
        }));
    }
    Ok(())
}

/// When `new` no longer grants every channel `old` granted: the channel
/// patterns `new` keeps (Redis's ACLKillPubsubClientsIfNeeded).
fn revoked_channels(old: &User, new: &User) -> Option<Vec<Vec<u8>>> {
    if new.all_channels() {
        return None;
    }
    let upcoming = new.channel_patterns();
    if !old.all_channels() && old.channel_patterns().iter().all(|c| upcoming.contains(c)) {
        return None;
    }
    Some(upcoming)
}

fn acl_deluser(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if args[2..].iter().any(|a| &a[..] == b"default") {
        return Err(CmdError::msg("ERR The 'default' user cannot be removed"));
    }
    let names: Vec<Vec<u8>> = args[2..].iter().map(|a| a.to_vec()).collect();
    let deleted = cx.engine.change_users(|users| {
        let mut gone = Vec::new();
        for n in &names {
            if users.map.remove(n).is_some() {
                gone.push(n.clone());
            }
        }
        Ok(gone)
    })?;
    cx.out.integer(deleted.len() as i64);
    if !deleted.is_empty() {
        kill_users(cx, deleted);
    }
    Ok(())
}

/// Closes every other connection of `users` (this one closes at its next
/// command, after its reply).
fn kill_users(cx: &mut Cx<'_>, users: Vec<Vec<u8>>) {
    cx.flow = Flow::Server(ServerRequest::ClientKill(KillFilter {
        users,
        quiet: true,
        skip_me: true,
        caller: cx.session.id,
        ..KillFilter::default()
    }));
}

fn acl_getuser(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let Some(u) = cx.engine.acl.users.get(&args[2]).cloned() else {
        cx.out.null();
        return Ok(());
    };
    cx.out.map_len(6);
    cx.out.bulk(b"flags");
    let flags = u.flag_names();
    cx.out.set_len(flags.len());
    for f in flags {
        cx.out.bulk(f.as_bytes());
    }
    cx.out.bulk(b"passwords");
    cx.out.array_len(u.passwords().len());
    for p in u.passwords() {
        cx.out.bulk(p.as_bytes());
    }
    let write_selector = |cx: &mut Cx<'_>, s: &super::model::Selector| {
        cx.out.bulk(b"commands");
        cx.out.bulk(s.describe_commands().as_bytes());
        cx.out.bulk(b"keys");
        cx.out.bulk(s.describe_keys().as_bytes());
        cx.out.bulk(b"channels");
        cx.out.bulk(s.describe_channels().as_bytes());
    };
    write_selector(cx, &u.selectors()[0]);
    cx.out.bulk(b"selectors");
    cx.out.array_len(u.selectors().len() - 1);
    for s in &u.selectors()[1..] {
        cx.out.map_len(3);
        write_selector(cx, s);
    }
    Ok(())
}

fn acl_list(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let lines: Vec<String> = cx.engine.acl.users.map.values().map(|u| u.line()).collect();
    cx.out.array_len(lines.len());
    for l in lines {
        cx.out.bulk(l.as_bytes());
    }
    Ok(())
}

fn acl_users(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let names: Vec<Vec<u8>> = cx.engine.acl.users.map.keys().cloned().collect();
    cx.out.array_len(names.len());
    for n in names {
        cx.out.bulk(&n);
    }
    Ok(())
}

fn acl_whoami(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let user = cx.session.user.clone();
    cx.out.bulk(&user);
    Ok(())
}

fn acl_cat(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::owned(
            "ERR unknown subcommand or wrong number of arguments for 'CAT'. Try ACL HELP."
                .to_string(),
        ));
    }
    let Some(name) = args.get(2) else {
        cx.out.array_len(CATEGORIES.len());
        for c in CATEGORIES {
            cx.out.bulk(c.as_bytes());
        }
        return Ok(());
    };
    let Some(i) = CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
    else {
        return Err(CmdError::owned(format!(
            "ERR Unknown category '{}'",
            crate::command::clip(name, 128)
        )));
    };
    let r = registry();
    let names: Vec<&str> = (0..r.cmds.len())
        .filter(|&id| r.cats[id] & (1 << i) != 0)
        .map(|id| r.cmds[id].name)
        .collect();
    cx.out.array_len(names.len());
    for n in names {
        cx.out.bulk(n.as_bytes());
    }
    Ok(())
}

fn acl_genpass(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::arity("acl|genpass"));
    }
    let bits = match args.get(2) {
        Some(a) => store::parse_i64(a).ok_or(CmdError::not_integer())?,
        None => 256,
    };
    if bits <= 0 || bits > 4096 {
        return Err(CmdError::msg("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"));
    }
    let chars = (bits as usize).div_ceil(4);
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    random_bytes(&mut bytes)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    cx.out.bulk(&hex.as_bytes()[..chars]);
    Ok(())
}

/// Bytes from the kernel's random source (passwords must not be
/// predictable).
fn random_bytes(buf: &mut [u8]) -> Result<(), CmdError> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .map_err(|e| CmdError::owned(format!("ERR cannot read random bytes: {e}")))
}

fn acl_log(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::arity("acl|log"));
    }
    let mut count = 10u64;
    if let Some(a) = args.get(2) {
        if parse::is(a, "reset") {
            crate::diagnostics::gather_acl_log(cx, true, 0);
            return Ok(());
        }
        count = store::parse_i64(a).ok_or(CmdError::not_integer())?.max(0) as u64;
    }
    // Each worker logs what its clients were refused: every worker is
    // asked, and the newest entries shown first.
    crate::diagnostics::gather_acl_log(cx, false, count);
    Ok(())
}

fn acl_dryrun(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let Some(user) = cx.engine.acl.users.get(&args[2]).cloned() else {
        return Err(CmdError::owned(format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(&args[2])
        )));
    };
    let req = &args[3..];
    let Some(top) = crate::command::lookup(&req[0]) else {
        return Err(CmdError::owned(format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(&req[0])
        )));
    };
    let cmd = super::effective(top, req);
    if !cmd.arity_ok(req.len()) {
        return Err(CmdError::owned(format!(
            "ERR wrong number of arguments for '{}' command",
            cmd.name
        )));
    }
    match user.check(cmd, req) {
        Ok(()) => cx.out.simple(b"OK"),
        Err(d) => {
            let arg = String::from_utf8_lossy(req.get(d.arg).map_or(&b""[..], |a| &a[..]));
            let text = match d.kind {
                DeniedKind::Command => format!(
                    "This user has no permissions to run the '{}' command",
                    cmd.name
                ),
                DeniedKind::Key => {
                    format!("This user has no permissions to access the '{arg}' key")
                }
                DeniedKind::Channel => {
                    format!("This user has no permissions to access the '{arg}' channel")
                }
            };
            cx.out.bulk(text.as_bytes());
        }
    }
    Ok(())
}

const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

fn acl_load(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let file = acl_file(cx.engine);
    if file.is_empty() {
        return Err(CmdError::msg(NO_ACL_FILE));
    }
    let text = std::fs::read(&file).map_err(|e| {
        CmdError::owned(format!(
            "ERR Error loading ACLs, opening file '{file}': {e}"
        ))
    })?;
    let all_channels = pubsub_default_all(cx.engine);
    let loaded = Users::from_acl_file(&text, all_channels)
        .map_err(|e| CmdError::owned(format!("ERR {e}")))?;
    let replaced = cx.engine.change_users(|users| {
        let mut next = users.next_incarnation();
        let mut fresh = loaded;
        let mut replaced = Vec::new();
        for (name, u) in fresh.map.iter_mut() {
            let u = std::sync::Arc::make_mut(u);
            if name == b"default" {
                // The default user keeps its connections (Redis copies the
                // loaded rules into it).
                u.incarnation = users.default_user().incarnation;
            } else {
                u.incarnation = next;
                next += 1;
            }
        }
        for name in users.map.keys() {
            if name != b"default" {
                replaced.push(name.clone());
            }
        }
        *users = fresh;
        Ok(replaced)
    })?;
    cx.out.simple(b"OK");
    if !replaced.is_empty() {
        kill_users(cx, replaced);
    }
    Ok(())
}

fn acl_save(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let file = acl_file(cx.engine);
    if file.is_empty() {
        return Err(CmdError::msg(NO_ACL_FILE));
    }
    let mut text = String::new();
    for u in cx.engine.acl.users.map.values() {
        text.push_str(&u.line());
        text.push('\n');
    }
    // Written beside the file, then renamed over it: a crash leaves the
    // old file or the new one, never half of one.
    let tmp = format!("{file}.tmp-{}", std::process::id());
    std::fs::write(&tmp, text.as_bytes())
        .and_then(|()| std::fs::rename(&tmp, &file))
        .map_err(|_| {
            let _ = std::fs::remove_file(&tmp);
            CmdError::msg("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
        })?;
    cx.out.simple(b"OK");
    Ok(())
}

fn acl_help(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    reply_help(
        cx,
        &[
            "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
            "HELP",
            "    Print this help.",
        ],
    )
}
