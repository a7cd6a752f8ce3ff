//! Starting the way redis-server starts: a redis.conf-style file plus
//! `--name value` options, every directive checked as Redis checks it when
//! it loads its configuration, then applied to the segment as if by CONFIG
//! SET. The binary only reads the file and tells shoal's own flags from
//! Redis's; what each parameter means stays here.

use std::fmt;

use store::Store;

use super::params::{self, pflags};
pub use crate::connection::REDIS_VERSION;
use crate::server::{apply_changes, check_change, Change};

/// Parameters the server applies itself when it starts (listeners, working
/// directory, log), so [`StartupConfig::apply`] leaves them out.
const SERVER_APPLIED: &[&str] = &[
    "port",
    "bind",
    "unixsocket",
    "memcached-port",
    "memcached-udp-port",
    "http-port",
    "nats-port",
    "nats-max-payload",
    "item-size-max",
    "databases",
    "workers",
    "appendonly",
    "appendfsync",
    "dir",
    "replicaof",
];

/// Names Redis 7.0 still accepts and ignores (with their argument count).
const DEPRECATED: &[&str] = &[
    "list-max-ziplist-entries",
    "list-max-ziplist-value",
    "lua-replicate-commands",
];

/// Splits a line into arguments as Redis's `sdssplitargs` does: blanks
/// separate, `"..."` takes `\n \r \t \b \a \xHH` and `\<c>` escapes, `'...'`
/// only `\'`, and a closing quote must end the argument. None for
/// unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        // A NUL ends an argument like a blank (it ends the line in C).
        while i < line.len() && (line[i].is_ascii_whitespace() || line[i] == 0) {
            i += 1;
        }
        if i == line.len() {
            return Some(args);
        }
        let mut arg = Vec::new();
        let (mut in_double, mut in_single) = (false, false);
        loop {
            let c = line.get(i).copied();
            if in_double {
                match c {
                    None => return None,
                    Some(b'\\')
                        if i + 3 < line.len()
                            && line[i + 1] == b'x'
                            && line[i + 2].is_ascii_hexdigit()
                            && line[i + 3].is_ascii_hexdigit() =>
                    {
                        let hex = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
                        arg.push(hex(line[i + 2]) * 16 + hex(line[i + 3]));
                        i += 3;
                    }
                    Some(b'\\') if i + 1 < line.len() => {
                        i += 1;
                        arg.push(match line[i] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 8,
                            b'a' => 7,
                            other => other,
                        });
                    }
                    Some(b'"') => {
                        // The closing quote must be followed by a blank.
                        if line.get(i + 1).is_some_and(|b| !b.is_ascii_whitespace()) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    Some(b) => arg.push(b),
                }
            } else if in_single {
                match c {
                    None => return None,
                    Some(b'\\') if line.get(i + 1) == Some(&b'\'') => {
                        i += 1;
                        arg.push(b'\'');
                    }
                    Some(b'\'') => {
                        if line.get(i + 1).is_some_and(|b| !b.is_ascii_whitespace()) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    Some(b) => arg.push(b),
                }
            } else {
                match c {
                    None => break,
                    Some(b) if b.is_ascii_whitespace() || b == 0 => break,
                    Some(b'"') => in_double = true,
                    Some(b'\'') => in_single = true,
                    Some(b) => arg.push(b),
                }
            }
            i += 1;
        }
        args.push(arg);
    }
}

/// Quotes an argument as Redis's `sdscatrepr` does, so [`split_args`] reads
/// it back unchanged.
pub fn quote_arg(arg: &[u8]) -> String {
    let mut out = String::new();
    crate::pubsub::quote(&mut out, arg);
    out
}

/// Turns redis-server's command-line options (`--port 7000 --save ""`) into
/// configuration lines, the way redis-server appends them to its file: an
/// argument starting with `--` opens a directive (unless the one before
/// still lacks a value), the others are its arguments; a bare `--save`
/// means `save ""`.
pub fn options_text(args: &[String]) -> String {
    let mut out = String::new();
    let mut last_has_value = true;
    for (j, arg) in args.iter().enumerate() {
        if last_has_value && arg.starts_with("--") {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&arg[2..]);
            out.push(' ');
            let words = split_args(arg.as_bytes()).map_or(0, |w| w.len());
            last_has_value = words != 1;
            if words == 1 && arg.eq_ignore_ascii_case("--save") {
                let next_is_option = args.get(j + 1).is_none_or(|n| n.starts_with("--"));
                if next_is_option {
                    out.push_str("\"\"");
                    last_has_value = true;
                }
            }
        } else {
            out.push_str(&quote_arg(arg.as_bytes()));
            out.push(' ');
            last_has_value = true;
        }
    }
    out
}

/// A configuration refused at start, printed as redis-server prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The line number (counting the file, then the options) and its text.
    pub line: Option<(usize, String)>,
    /// Why, in Redis's words where Redis has them.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "\n*** FATAL CONFIG FILE ERROR (Redis {REDIS_VERSION}) ***"
        )?;
        if let Some((n, text)) = &self.line {
            writeln!(f, "Reading the configuration file, at line {n}")?;
            writeln!(f, ">>> '{text}'")?;
        }
        write!(f, "{}", self.reason)
    }
}

impl std::error::Error for ConfigError {}

/// A checked start configuration: each parameter given, by its canonical
/// name, with its value as CONFIG GET prints it (a later directive replaces
/// an earlier one).
#[derive(Debug, Clone, Default)]
pub struct StartupConfig {
    settings: Vec<(&'static str, String)>,
    /// `user` directives: name, then rules.
    users: Vec<Vec<Vec<u8>>>,
}

impl StartupConfig {
    /// Reads a configuration file's text followed by the option lines of
    /// [`options_text`], as redis-server reads them: one directive a line,
    /// `#` comments, blank lines skipped.
    pub fn parse(file: &[u8], options: &str) -> Result<StartupConfig, ConfigError> {
        let mut text = file.to_vec();
        if !options.is_empty() {
            text.push(b'\n');
            text.extend_from_slice(options.as_bytes());
        }
        let mut config = StartupConfig::default();
        for (i, raw) in text.split(|b| *b == b'\n').enumerate() {
            let line = raw.trim_ascii();
            if line.is_empty() || line[0] == b'#' {
                continue;
            }
            let fail = |reason: String| ConfigError {
                line: Some((i + 1, String::from_utf8_lossy(line).into_owned())),
                reason,
            };
            let args = split_args(line)
                .ok_or_else(|| fail("Unbalanced quotes in configuration line".into()))?;
            let Some((name, values)) = args.split_first() else {
                continue;
            };
            config.set(name, values).map_err(fail)?;
        }
        Ok(config)
    }

    /// Checks one directive and records it; the error is the reason line.
    pub fn set(&mut self, name: &[u8], args: &[Vec<u8>]) -> Result<(), String> {
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        let Some(param) = params::find(lower.as_bytes()) else {
            return match lower.as_str() {
                n if DEPRECATED.contains(&n) && args.len() == 1 => Ok(()),
                "include" => {
                    Err("include is not supported by shoal: put every directive in one file".into())
                }
                "user" => self.add_user(args),
                "rename-command" | "loadmodule" | "sentinel" => {
                    Err(format!("{lower} is not supported by shoal"))
                }
                _ => Err("Bad directive or wrong number of arguments".into()),
            };
        };
        let multi = param.flags & pflags::MULTI_ARG != 0;
        if !multi && args.len() != 1 {
            return Err("wrong number of arguments".into());
        }
        // One non-empty argument to a several-word parameter is split, so
        // `--save "900 1"` works as `save 900 1`.
        let split;
        let args = if multi && args.len() == 1 && !args[0].is_empty() {
            split = split_args(&args[0]).ok_or("Unbalanced quotes in configuration line")?;
            &split[..]
        } else {
            args
        };
        let value = args.join(&b' ');
        let value = check(param, &value)?;
        self.settings.retain(|(n, _)| *n != param.name);
        self.settings.push((param.name, value));
        Ok(())
    }

    /// Records a `user` directive after checking its rules (Redis's
    /// ACLAppendUserForLoading).
    fn add_user(&mut self, args: &[Vec<u8>]) -> Result<(), String> {
        let Some((name, rules)) = args.split_first() else {
            return Err("wrong number of arguments".into());
        };
        if self.users.iter().any(|u| u[0] == *name) {
            return Err(format!(
                "Error in user declaration '{}': Duplicate user found. A user can only be defined once in config files",
                String::from_utf8_lossy(name)
            ));
        }
        let mut user = crate::acl::User::new(name, false);
        let rules: Vec<&[u8]> = rules.iter().map(|r| r.as_slice()).collect();
        if let Err(e) = crate::acl::check_rules(&mut user, &rules, false) {
            return Err(format!(
                "Error in user declaration '{}': {e}",
                String::from_utf8_lossy(name)
            ));
        }
        self.users.push(args.to_vec());
        Ok(())
    }

    /// The `user` directives given (name, then rules), for CONFIG REWRITE.
    pub fn user_lines(&self) -> &[Vec<Vec<u8>>] {
        &self.users
    }

    /// The users to start with: the default user (with `requirepass`), then
    /// the `user` directives or the `aclfile`'s users.
    fn initial_users(&self) -> Result<crate::acl::Users, String> {
        let all_channels = self.get("acl-pubsub-default") == Some("allchannels");
        let aclfile = self.get("aclfile").unwrap_or("");
        if !aclfile.is_empty() && !self.users.is_empty() {
            return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
        }
        let mut users = crate::acl::Users::with_default();
        if let Some(pass) = self.get("requirepass") {
            crate::acl::set_default_password(&mut users, pass.as_bytes());
        }
        if !aclfile.is_empty() {
            let text = std::fs::read(aclfile)
                .map_err(|e| format!("Error loading ACLs, opening file '{aclfile}': {e}"))?;
            let loaded = crate::acl::Users::from_acl_file(&text, all_channels)?;
            for (name, u) in loaded.map {
                users.map.insert(name, u);
            }
        }
        for line in &self.users {
            let name = &line[0];
            let mut u = crate::acl::User::new(name, all_channels);
            let rules: Vec<&[u8]> = line[1..].iter().map(|r| r.as_slice()).collect();
            crate::acl::check_rules(&mut u, &rules, all_channels).map_err(|e| {
                format!(
                    "Error in user declaration '{}': {e}",
                    String::from_utf8_lossy(name)
                )
            })?;
            users.map.insert(name.clone(), std::sync::Arc::new(u));
        }
        let mut next = 1;
        for u in users.map.values_mut() {
            if u.name != b"default" {
                let u = std::sync::Arc::make_mut(u);
                u.incarnation = next;
                next += 1;
            }
        }
        Ok(users)
    }

    /// The value given for `name` (its canonical name), if any.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.settings
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every parameter given, in order.
    pub fn settings(&self) -> &[(&'static str, String)] {
        &self.settings
    }

    /// The one address shoal listens on for `bind` (see
    /// [`super::listen_address`]).
    pub fn listen_address(&self) -> Option<(String, Vec<String>)> {
        super::listen_address(self.get("bind")?)
    }

    /// Applies every parameter but those the server applies itself to the
    /// segment's shared settings, as CONFIG SET would; parameters CONFIG
    /// SET refuses to change (immutable, protected) are recorded so CONFIG
    /// GET shows them.
    pub fn apply(&self, store: &Store) -> Result<(), String> {
        let mut changes = Vec::new();
        for (name, value) in &self.settings {
            if SERVER_APPLIED.contains(name) {
                continue;
            }
            let Some(param) = params::find(name.as_bytes()) else {
                continue;
            };
            if param.flags & (pflags::IMMUTABLE | pflags::PROTECTED) != 0 {
                changes.push(Change::Text(param.name, value.clone()));
            } else {
                changes.push(check_change(name, value.as_bytes()).map_err(|e| reason(&e))?);
            }
        }
        let users = self.initial_users()?;
        let mut h = store.handle().map_err(|e| e.to_string())?;
        if !changes.is_empty() {
            apply_changes(store, &mut h, changes).map_err(|e| reason(&e))?;
        }
        // After `requirepass` (a `user default` line wins over it).
        crate::acl::write_users(store, &mut h, &users).map_err(|e| e.to_string())
    }
}

/// The part of a CONFIG SET error after "- " (what Redis prints at start).
fn reason(e: &crate::error::CmdError) -> String {
    let text = e.text();
    match text.split_once(") - ") {
        Some((_, why)) => why.to_string(),
        None => text.trim_start_matches("ERR ").to_string(),
    }
}

/// Checks `value` for `param` as Redis does at start; the text CONFIG GET
/// will print.
fn check(param: &params::Param, value: &[u8]) -> Result<String, String> {
    let text = String::from_utf8_lossy(value);
    match param.name {
        // Redis reads the permissions in octal.
        "unixsocketperm" => {
            return u32::from_str_radix(&text, 8)
                .ok()
                .filter(|m| *m <= 0o777)
                .map(|m| format!("{m:o}"))
                .ok_or_else(|| "argument must be an octal number between 0 and 777".into())
        }
        // Redis clamps hz into 1..=500 at start instead of refusing it.
        "hz" => {
            let n = params::normalize(param, value)?;
            return Ok(n.parse::<i64>().map_or(10, |n| n.clamp(1, 500)).to_string());
        }
        _ => {}
    }
    let normalized = params::normalize(param, value)?;
    match param.name {
        "daemonize" if normalized == "yes" => Err(
            "shoal does not daemonize: run it in the foreground (daemonize no) under a process supervisor".into(),
        ),
        "databases" if normalized.parse::<usize>().is_ok_and(|n| n > store::NUM_DBS) => Err(format!(
            "shoal has {} databases: databases must be {} or less",
            store::NUM_DBS,
            store::NUM_DBS
        )),
        "bind" if normalized.split_whitespace().next().is_none() => {
            Err("bind needs at least one address".into())
        }
        name if !SERVER_APPLIED.contains(&name)
            && param.flags & (pflags::IMMUTABLE | pflags::PROTECTED) == 0 =>
        {
            // What CONFIG SET would refuse is refused here too.
            check_change(name, normalized.as_bytes()).map_err(|e| reason(&e))?;
            Ok(normalized)
        }
        _ => Ok(normalized),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Option<Vec<String>> {
        split_args(line.as_bytes()).map(|v| {
            v.into_iter()
                .map(|w| String::from_utf8_lossy(&w).into_owned())
                .collect()
        })
    }

    #[test]
    fn arguments_split_as_redis_does() {
        assert_eq!(
            words("  port   7000 "),
            Some(vec!["port".into(), "7000".into()])
        );
        assert_eq!(words("logfile ''"), Some(vec!["logfile".into(), "".into()]));
        assert_eq!(words("save \"\""), Some(vec!["save".into(), "".into()]));
        assert_eq!(
            words(r#"a "b c\n\x41\"" 'd\'e' f"g h""#),
            Some(vec![
                "a".into(),
                "b c\nA\"".into(),
                "d'e".into(),
                "fg h".into()
            ])
        );
        assert_eq!(words("a \"unclosed"), None);
        assert_eq!(words("a 'unclosed"), None);
        assert_eq!(
            words("a \"x\"y"),
            None,
            "a closing quote must end the argument"
        );
        assert_eq!(words(""), Some(vec![]));
        for arg in ["plain", "with space", "q\"uo\\te", "\x01\n"] {
            let q = quote_arg(arg.as_bytes());
            assert_eq!(words(&q), Some(vec![arg.to_string()]));
        }
    }

    #[test]
    fn command_line_options_become_lines() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            options_text(&args(&[
                "--port",
                "7000",
                "--save",
                "",
                "--appendonly",
                "no"
            ])),
            "port \"7000\" \nsave \"\" \nappendonly \"no\" "
        );
        assert_eq!(
            options_text(&args(&["--save", "--port", "1"])),
            "save \"\"\nport \"1\" "
        );
        assert_eq!(options_text(&args(&["--save"])), "save \"\"");
        assert_eq!(
            options_text(&args(&["--bind", "127.0.0.1", "::1"])),
            "bind \"127.0.0.1\" \"::1\" "
        );
    }

    #[test]
    fn files_are_read_and_checked() {
        let file = b"# a comment\n\n  port 7001\r\nsave 900 1\nsave ''\nlogfile ''\n\
                     maxmemory 1mb\nbind 127.0.0.1 -::1\nunixsocketperm 700\nhz 1000\n";
        let c = StartupConfig::parse(file, "maxmemory-policy \"allkeys-lru\" ").expect("valid");
        assert_eq!(c.get("port"), Some("7001"));
        assert_eq!(
            c.get("save"),
            Some(""),
            "a later directive replaces an earlier one"
        );
        assert_eq!(c.get("logfile"), Some(""));
        assert_eq!(c.get("maxmemory"), Some("1048576"));
        assert_eq!(c.get("maxmemory-policy"), Some("allkeys-lru"));
        assert_eq!(c.get("unixsocketperm"), Some("700"));
        assert_eq!(c.get("hz"), Some("500"));
        assert_eq!(
            c.listen_address(),
            Some(("127.0.0.1".to_string(), vec!["::1".to_string()]))
        );
        let c = StartupConfig::parse(b"bind * -::*\n", "").expect("valid");
        assert_eq!(c.listen_address().map(|a| a.0), Some("0.0.0.0".to_string()));
    }

    #[test]
    fn errors_name_the_line() {
        let err = StartupConfig::parse(b"port 7000\nfoo bar\n", "").unwrap_err();
        assert_eq!(err.line, Some((2, "foo bar".into())));
        assert_eq!(err.reason, "Bad directive or wrong number of arguments");
        assert_eq!(
            err.to_string(),
            "\n*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nReading the configuration file, at line 2\n>>> 'foo bar'\nBad directive or wrong number of arguments"
        );
        let reason = |file: &str| {
            StartupConfig::parse(file.as_bytes(), "")
                .unwrap_err()
                .reason
        };
        assert_eq!(reason("port 1 2"), "wrong number of arguments");
        assert_eq!(
            reason("port x"),
            "argument couldn't be parsed into an integer"
        );
        assert_eq!(reason("appendonly maybe"), "argument must be 'yes' or 'no'");
        assert_eq!(
            reason("logfile \"x"),
            "Unbalanced quotes in configuration line"
        );
        assert_eq!(reason("save 900"), "Invalid save parameters");
        assert!(reason("databases 32").contains("16 or less"));
        assert!(reason("daemonize yes").contains("does not daemonize"));
        assert!(reason("include other.conf").contains("not supported"));
        assert!(reason("notify-keyspace-events Q").contains("Invalid event class"));
        let err = StartupConfig::parse(b"port 1\n", "maxclients 0 ").unwrap_err();
        assert_eq!(
            err.line,
            Some((3, "maxclients 0".into())),
            "options count after the file"
        );
        assert!(StartupConfig::parse(b"list-max-ziplist-entries 5\n", "").is_ok());
    }
}
