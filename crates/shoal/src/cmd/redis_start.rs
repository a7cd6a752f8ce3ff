//! `shoal serve` started the way redis-server starts: a redis.conf-style
//! file as the first argument and `--name value...` options for any Redis
//! parameter. This module only tells shoal's own flags from Redis's on the
//! command line; `engine::startup` checks what the parameters mean.

/// shoal's flags of `serve` that take one value and that Redis does not
/// have: they always go to clap.
const SHOAL_FLAGS: &[&str] = &[
    "workers",
    "memcached-port",
    "memcached-udp-port",
    "http-port",
    "nats-port",
    "nats-max-payload",
    "item-size-max",
    "name",
    "segment",
    "memory",
    "snapshot-every",
    "snapshot-log-size",
    "keep-logs",
    "log-file-size",
    "balance",
    "config",
    "log-dir",
];

/// Flags both shoal and Redis have. Alone they keep shoal's classic start;
/// started the Redis way they are Redis's (`--dir` is then the working
/// directory).
const SHARED_FLAGS: &[&str] = &[
    "port",
    "bind",
    "unixsocket",
    "hz",
    "maxclients",
    "dir",
    "appendfsync",
    "replicaof",
];

/// The command line of `shoal serve`, split.
#[derive(Debug, Default, PartialEq)]
pub struct ServeCommandLine {
    /// What clap parses (starting with the program and `serve`).
    pub clap_args: Vec<String>,
    /// Redis-style options (`--save`, `""`, …), in order.
    pub redis_args: Vec<String>,
    /// Started the Redis way: a configuration file, or an option that only
    /// Redis has.
    pub redis_mode: bool,
    /// shoal's flags given explicitly (so a Redis-way start knows which
    /// defaults to replace).
    pub given: Vec<String>,
}

impl ServeCommandLine {
    /// Whether shoal's flag `--name` was given.
    pub fn given(&self, name: &str) -> bool {
        self.given.iter().any(|g| g == name)
    }
}

/// Splits `shoal serve`'s arguments (`args[0]` is the program, `args[1]`
/// is `serve`).
pub fn split_args(args: &[String]) -> ServeCommandLine {
    let mut out = ServeCommandLine {
        clap_args: args.iter().take(2).cloned().collect(),
        ..ServeCommandLine::default()
    };
    let rest = args.get(2..).unwrap_or_default();
    let mut shared = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        let arg = &rest[i];
        i += 1;
        if i == 1 && !arg.starts_with('-') {
            out.clap_args.push(arg.clone());
            out.redis_mode = true;
            continue;
        }
        let Some(flag) = arg.strip_prefix("--").filter(|f| !f.contains(' ')) else {
            // "--port 7000" as one argument is Redis's way.
            if arg.starts_with("--") {
                out.redis_mode = true;
                out.redis_args.push(arg.clone());
            } else {
                out.clap_args.push(arg.clone());
            }
            continue;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (flag, None),
        };
        let lower = name.to_ascii_lowercase();
        if SHOAL_FLAGS.contains(&lower.as_str()) || inline.is_some() || lower == "help" {
            if lower == "config" {
                out.redis_mode = true;
            }
            out.given.push(lower.clone());
            out.clap_args.push(arg.clone());
            if inline.is_none() && lower != "help" {
                if let Some(v) = rest.get(i) {
                    out.clap_args.push(v.clone());
                    i += 1;
                }
            }
            continue;
        }
        // A Redis option and its values: what follows up to the next
        // `--`, and at least one argument (as redis-server reads them)
        // unless it is a bare `--save`.
        let mut option = vec![arg.clone()];
        while let Some(v) = rest.get(i) {
            if v.starts_with("--") && (option.len() > 1 || lower == "save") {
                break;
            }
            option.push(v.clone());
            i += 1;
        }
        if SHARED_FLAGS.contains(&lower.as_str()) {
            shared.push((lower, option));
        } else {
            out.redis_mode = true;
            out.redis_args.extend(option);
        }
    }
    // Shared flags go where the mode says, in their place among the
    // Redis options (a later one wins).
    let mut merged = Vec::new();
    for (name, option) in shared {
        if out.redis_mode {
            merged.extend(option);
        } else {
            out.given.push(name);
            out.clap_args.extend(option);
        }
    }
    if out.redis_mode {
        merged.append(&mut out.redis_args);
        out.redis_args = merged;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &[&str]) -> ServeCommandLine {
        let mut args = vec!["shoal".to_string(), "serve".to_string()];
        args.extend(line.iter().map(|s| s.to_string()));
        split_args(&args)
    }

    #[test]
    fn classic_flags_stay_with_clap() {
        let s = split(&[
            "--workers",
            "2",
            "--port",
            "7000",
            "--dir",
            "/d",
            "--name",
            "n",
        ]);
        assert!(!s.redis_mode);
        assert_eq!(
            s.clap_args,
            [
                "shoal",
                "serve",
                "--workers",
                "2",
                "--name",
                "n",
                "--port",
                "7000",
                "--dir",
                "/d"
            ]
        );
        assert!(s.redis_args.is_empty());
        assert!(s.given.contains(&"port".to_string()));
    }

    #[test]
    fn redis_options_make_a_redis_start() {
        let s = split(&[
            "--port",
            "7000",
            "--save",
            "",
            "--appendonly",
            "no",
            "--workers",
            "2",
        ]);
        assert!(s.redis_mode);
        assert_eq!(s.clap_args, ["shoal", "serve", "--workers", "2"]);
        assert_eq!(
            s.redis_args,
            ["--port", "7000", "--save", "", "--appendonly", "no"]
        );
        let s = split(&["/etc/redis.conf", "--save", "--bind", "127.0.0.1", "::1"]);
        assert!(s.redis_mode);
        assert_eq!(s.clap_args, ["shoal", "serve", "/etc/redis.conf"]);
        assert_eq!(s.redis_args, ["--bind", "127.0.0.1", "::1", "--save"]);
        let s = split(&["--config", "f.conf", "--dir", "/tmp/x", "--log-dir", "/l"]);
        assert!(s.redis_mode);
        assert_eq!(
            s.clap_args,
            ["shoal", "serve", "--config", "f.conf", "--log-dir", "/l"]
        );
        assert_eq!(s.redis_args, ["--dir", "/tmp/x"]);
    }
}
