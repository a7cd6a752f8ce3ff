//! Per-command and per-error counters for INFO's `commandstats`,
//! `errorstats` and `latencystats` sections, as Redis 7.0 keeps them.
//!
//! Each worker's engine counts its own commands; INFO and LATENCY HISTOGRAM
//! gather every worker's counters ([`CommandStats::encode`]) and merge them
//! (`diagnostics.rs`), so a client sees the whole server's figures.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::BuildHasherDefault;

use hdrhistogram::Histogram;

use crate::command::Fnv;
use crate::wire::{Reader, Writer};

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

/// LATENCY HISTOGRAM's entry for one command: its name, calls, and
/// (bound in microseconds, calls at most that long) pairs.
pub(crate) type CommandHistogram = (&'static str, u64, Vec<(u64, u64)>);

/// The counters of one engine.
#[derive(Default)]
pub(crate) struct CommandStats {
    commands: HashMap<&'static str, CommandStat, BuildHasherDefault<Fnv>>,
    /// Error replies by their first word (`ERR`, `WRONGTYPE`…).
    errors: HashMap<String, u64>,
}

/// Redis stops counting new error kinds past this many (a client could
/// otherwise grow the table without bound with made-up prefixes).
const MAX_ERROR_KINDS: usize = 128;

/// The `&'static` table name of a command or subcommand (`config|get`).
fn table_name(name: &[u8]) -> Option<&'static str> {
    let text = std::str::from_utf8(name).ok()?;
    match text.split_once('|') {
        None => crate::command::lookup(name).map(|c| c.name),
        Some((parent, _)) => crate::command::lookup(parent.as_bytes())?
            .subcommands
            .iter()
            .find(|c| c.name == text)
            .map(|c| c.name),
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 1_000_000_000, 2).expect("valid bounds")
}

impl CommandStats {
    /// The counters as bytes for another worker.
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.u64(self.commands.len() as u64);
        for (name, c) in &self.commands {
            w.bytes(name.as_bytes());
            w.u64(c.calls);
            w.u64(c.usec);
            w.u64(c.rejected_calls);
            w.u64(c.failed_calls);
            let recorded: Vec<(u64, u64)> = c
                .latency
                .iter()
                .flat_map(|h| {
                    h.iter_recorded()
                        .map(|v| (v.value_iterated_to(), v.count_at_value()))
                })
                .collect();
            w.u64(recorded.len() as u64);
            for (value, count) in recorded {
                w.u64(value);
                w.u64(count);
            }
        }
        w.u64(self.errors.len() as u64);
        for (kind, n) in &self.errors {
            w.bytes(kind.as_bytes());
            w.u64(*n);
        }
    }

    /// Adds counters another worker encoded (as far as they decode).
    pub(crate) fn merge_encoded(&mut self, r: &mut Reader<'_>) -> Option<()> {
        for _ in 0..r.count(48)? {
            let name = r.bytes()?;
            let (calls, usec, rejected, failed) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
            let mut recorded = Vec::new();
            for _ in 0..r.count(16)? {
                recorded.push((r.u64()?, r.u64()?));
            }
            let Some(name) = table_name(name) else {
                continue;
            };
            let stat = self.entry(name);
            stat.calls += calls;
            stat.usec += usec;
            stat.rejected_calls += rejected;
            stat.failed_calls += failed;
            if !recorded.is_empty() {
                let h = stat.latency.get_or_insert_with(new_histogram);
                for (value, count) in recorded {
                    let _ = h.record_n(value.clamp(1, 1_000_000_000), count);
                }
            }
        }
        for _ in 0..r.count(16)? {
            let kind = String::from_utf8_lossy(r.bytes()?).into_owned();
            let n = r.u64()?;
            if self.errors.contains_key(&kind) || self.errors.len() < MAX_ERROR_KINDS {
                *self.errors.entry(kind).or_insert(0) += n;
            }
        }
        Some(())
    }

    /// LATENCY HISTOGRAM's entries: for each command asked for (all with
    /// calls when none is; a container names its subcommands), its calls
    /// and the cumulative count at each power-of-two microsecond bound.
    pub(crate) fn histograms(&self, asked: &[Vec<u8>]) -> Vec<CommandHistogram> {
        let wanted = |name: &str| {
            asked.is_empty()
                || asked.iter().any(|a| {
                    a.eq_ignore_ascii_case(name.as_bytes())
                        || name
                            .split_once('|')
                            .is_some_and(|(parent, _)| a.eq_ignore_ascii_case(parent.as_bytes()))
                })
        };
        let mut out = Vec::new();
        for (name, c) in self.sorted() {
            let Some(h) = c.latency.as_ref().filter(|h| !h.is_empty()) else {
                continue;
            };
            if !wanted(name) {
                continue;
            }
            let mut buckets = Vec::new();
            let mut bound = 1u64;
            let mut cumulative = 0u64;
            let mut last = 0u64;
            while cumulative < h.len() && bound <= 1 << 40 {
                cumulative = h.count_between(0, bound);
                if cumulative != last {
                    buckets.push((bound, cumulative));
                    last = cumulative;
                }
                bound *= 2;
            }
            out.push((*name, h.len(), buckets));
        }
        out
    }

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
