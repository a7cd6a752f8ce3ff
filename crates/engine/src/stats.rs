//! Per-command and per-error counters for INFO's `commandstats`,
//! `errorstats` and `latencystats` sections, as Redis 7.0 keeps them.
//!
//! They count the commands of this worker's engine: each worker process
//! keeps its own, and INFO reports the worker that serves the connection
//! (its `shoal_worker` field says which), as the `workers` section does
//! for the per-worker command totals.

use std::collections::HashMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;

/// One command's counters.
pub(crate) struct CommandStat {
    pub calls: u64,
    pub usec: u64,
    /// Refused before running (arity, wrong context, OOM).
    pub rejected_calls: u64,
    /// Ran and replied with an error.
    pub failed_calls: u64,
    /// Latency of each call in microseconds (`latency-tracking`).
    latency: Option<Histogram<u64>>,
}

impl CommandStat {
    fn new() -> CommandStat {
        CommandStat {
            calls: 0,
            usec: 0,
            rejected_calls: 0,
            failed_calls: 0,
            latency: None,
        }
    }
}

/// The counters of one engine.
#[derive(Default)]
pub(crate) struct CommandStats {
    commands: HashMap<&'static str, CommandStat>,
    /// Error replies by their first word (`ERR`, `WRONGTYPE`…).
    errors: HashMap<String, u64>,
}

/// Redis stops counting new error kinds past this many (a client could
/// otherwise grow the table without bound with made-up prefixes).
const MAX_ERROR_KINDS: usize = 128;

impl CommandStats {
    fn entry(&mut self, name: &'static str) -> &mut CommandStat {
        self.commands.entry(name).or_insert_with(CommandStat::new)
    }

    /// A call of `name` that ran for `usec` microseconds.
    pub(crate) fn called(&mut self, name: &'static str, usec: u64, failed: bool) {
        let stat = self.entry(name);
        stat.calls += 1;
        stat.usec += usec;
        if failed {
            stat.failed_calls += 1;
        }
        let histogram = stat.latency.get_or_insert_with(|| {
            Histogram::new_with_bounds(1, 1_000_000_000, 2).expect("bounds")
        });
        let _ = histogram.record(usec.clamp(1, 1_000_000_000));
    }

    /// A request of `name` refused before it ran.
    pub(crate) fn rejected(&mut self, name: &'static str) {
        self.entry(name).rejected_calls += 1;
    }

    /// An error reply, counted by its first word.
    pub(crate) fn error(&mut self, text: &str) {
        let kind = text.split(' ').next().unwrap_or("ERR");
        if let Some(n) = self.errors.get_mut(kind) {
            *n += 1;
        } else if self.errors.len() < MAX_ERROR_KINDS {
            self.errors.insert(kind.to_string(), 1);
        }
    }

    /// INFO commandstats' lines.
    pub(crate) fn write_commandstats(&self, s: &mut String) {
        s.push_str("# Commandstats\r\n");
        for (name, c) in self.sorted() {
            let per_call = if c.calls > 0 {
                c.usec as f64 / c.calls as f64
            } else {
                0.0
            };
            let _ = write!(
                s,
                "cmdstat_{name}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
                c.calls, c.usec, c.rejected_calls, c.failed_calls
            );
        }
    }

    /// INFO errorstats' lines.
    pub(crate) fn write_errorstats(&self, s: &mut String) {
        s.push_str("# Errorstats\r\n");
        let mut kinds: Vec<_> = self.errors.iter().collect();
        kinds.sort();
        for (kind, n) in kinds {
            let _ = write!(s, "errorstat_{kind}:count={n}\r\n");
        }
    }

    /// INFO latencystats' lines: the percentiles `latency-tracking-info-
    /// percentiles` names, per command.
    pub(crate) fn write_latencystats(&self, percentiles: &[f64], s: &mut String) {
        s.push_str("# Latencystats\r\n");
        for (name, c) in self.sorted() {
            let Some(h) = &c.latency else { continue };
            if h.is_empty() || percentiles.is_empty() {
                continue;
            }
            let _ = write!(s, "latency_percentiles_usec_{name}:");
            for (i, p) in percentiles.iter().enumerate() {
                let sep = if i == 0 { "" } else { "," };
                let _ = write!(
                    s,
                    "{sep}p{}={:.3}",
                    fmt_percentile(*p),
                    h.value_at_quantile(p / 100.0) as f64
                );
            }
            s.push_str("\r\n");
        }
    }

    /// The total of error replies.
    pub(crate) fn total_errors(&self) -> u64 {
        self.errors.values().sum()
    }

    fn sorted(&self) -> Vec<(&&'static str, &CommandStat)> {
        let mut all: Vec<_> = self
            .commands
            .iter()
            .filter(|(_, c)| c.calls + c.rejected_calls + c.failed_calls > 0)
            .collect();
        all.sort_by_key(|(n, _)| **n);
        all
    }
}

/// A percentile as Redis prints it in a field name (`50`, `99.9`).
fn fmt_percentile(p: f64) -> String {
    let s = format!("{p}");
    s.trim_end_matches(".0").to_string()
}
