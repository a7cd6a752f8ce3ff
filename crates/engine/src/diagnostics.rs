//! SLOWLOG and LATENCY, and the gathering that INFO's per-command sections
//! share with them.
//!
//! Every worker's engine records its own slow commands, latency events and
//! command counters. A command that reports them sets
//! `Flow::Server(ServerRequest::Gather(query))`; the server runs
//! [`Engine::answer_gather`] on every worker (its own, and the others
//! through the bus) and hands all the answers to [`Engine::finish_gather`],
//! which merges them into the reply. So SLOWLOG GET shows the slow commands
//! of the whole server, newest first, whichever worker ran them.

use std::collections::{HashMap, VecDeque};

use proto::resp::{Protocol, ReplyWriter};

use crate::command::{self, dispatch_sub, flags::*, Arg, CmdResult, Command};
use crate::engine::{Cx, Engine, Flow, ServerRequest};
use crate::error::CmdError;
use crate::session::Session;
use crate::stats::CommandStats;
use crate::wire::{Reader, Writer};

/// Redis keeps at most this many arguments of a slow command...
const SLOWLOG_MAX_ARGC: usize = 32;
/// ...and this many bytes of each.
const SLOWLOG_MAX_STRING: usize = 128;
/// Samples kept per latency event (one a second), as Redis.
const LATENCY_SAMPLES: usize = 160;

/// One SLOWLOG entry.
#[derive(Clone, Debug)]
struct SlowEntry {
    id: u64,
    time_s: u64,
    usec: u64,
    args: Vec<Vec<u8>>,
    peer: Vec<u8>,
    name: Vec<u8>,
}

/// One latency event's history.
#[derive(Default, Debug)]
struct Event {
    /// (unix seconds, milliseconds), oldest first.
    samples: VecDeque<(u64, u64)>,
    max: u64,
}

/// What one engine keeps.
#[derive(Default)]
pub(crate) struct Diagnostics {
    slowlog: VecDeque<SlowEntry>,
    /// The slow entry of a command whose reply is being gathered: it joins
    /// the log after the reply is made, so SLOWLOG GET does not see itself
    /// (Redis logs a command once it has replied).
    deferred: Option<SlowEntry>,
    /// That command's call (name, microseconds, failed), counted in INFO
    /// commandstats and LATENCY HISTOGRAM once the reply is made, so that
    /// neither shows the call that asks (Redis counts a call after it).
    pub(crate) deferred_call: Option<(&'static str, u64, bool)>,
    events: HashMap<String, Event>,
}

/// What a gather asks every worker.
mod tag {
    pub const INFO: u64 = 1;
    pub const SLOWLOG_GET: u64 = 2;
    pub const SLOWLOG_LEN: u64 = 3;
    pub const SLOWLOG_RESET: u64 = 4;
    pub const LATENCY_LATEST: u64 = 5;
    pub const LATENCY_HISTORY: u64 = 6;
    pub const LATENCY_RESET: u64 = 7;
    pub const LATENCY_HISTOGRAM: u64 = 8;
    pub const LATENCY_DOCTOR: u64 = 9;
    pub const LATENCY_GRAPH: u64 = 10;
    pub const ACL_LOG_GET: u64 = 11;
    pub const ACL_LOG_RESET: u64 = 12;
}

/// Asks every worker for its ACL LOG entries (at most `count`), or to
/// clear them.
pub(crate) fn gather_acl_log(cx: &mut Cx<'_>, reset: bool, count: u64) {
    let t = if reset {
        tag::ACL_LOG_RESET
    } else {
        tag::ACL_LOG_GET
    };
    gather(cx, t, count, &[]);
}

/// A query: its tag, a number, and words.
fn query(tag: u64, n: u64, words: &[&[u8]]) -> Vec<u8> {
    let mut w = Writer::default();
    w.u64(tag);
    w.u64(n);
    w.u64(words.len() as u64);
    for word in words {
        w.bytes(word);
    }
    w.0
}

fn parse_query(q: &[u8]) -> Option<(u64, u64, Vec<Vec<u8>>)> {
    let mut r = Reader(q);
    let (tag, n) = (r.u64()?, r.u64()?);
    let mut words = Vec::new();
    for _ in 0..r.count(8)? {
        words.push(r.bytes()?.to_vec());
    }
    Some((tag, n, words))
}

/// Asks every worker (see the module's doc).
fn gather(cx: &mut Cx<'_>, tag: u64, n: u64, words: &[&[u8]]) {
    cx.flow = Flow::Server(ServerRequest::Gather(query(tag, n, words)));
}

impl Engine {
    /// After a command ran: a slow one goes to the slow log and, past
    /// `latency-monitor-threshold`, to the `command` (or `fast-command`)
    /// latency event.
    pub(crate) fn record_slow(
        &mut self,
        cmd: &'static Command,
        session: &Session,
        args: &[Arg<'_>],
        usec: u64,
        deferred: bool,
    ) {
        let threshold = self.config.slowlog_log_slower_than;
        if threshold >= 0 && usec >= threshold as u64 && cmd.flags & SKIP_SLOWLOG == 0 {
            self.add_slow_entry(session, args, usec, deferred);
        }
        let event = if cmd.flags & FAST != 0 {
            "fast-command"
        } else {
            "command"
        };
        self.latency_sample_if_needed(event, usec / 1000);
    }

    /// Records `ms` for latency event `name` when it reaches
    /// `latency-monitor-threshold` (0: the monitor is off).
    pub(crate) fn latency_sample_if_needed(&mut self, name: &str, ms: u64) {
        let monitor = self.config.latency_monitor_threshold;
        if monitor > 0 && ms >= monitor {
            self.add_latency_sample(name, ms);
        }
    }

    fn add_slow_entry(&mut self, session: &Session, args: &[Arg<'_>], usec: u64, deferred: bool) {
        let max_len = self.config.slowlog_max_len as usize;
        if max_len == 0 {
            return;
        }
        let mut kept: Vec<Vec<u8>> = Vec::new();
        let shown = args.len().min(SLOWLOG_MAX_ARGC);
        for (i, a) in args[..shown].iter().enumerate() {
            if i == SLOWLOG_MAX_ARGC - 1 && args.len() > SLOWLOG_MAX_ARGC {
                kept.push(format!("... ({} more arguments)", args.len() - i).into_bytes());
            } else if a.len() > SLOWLOG_MAX_STRING {
                let mut s = a[..SLOWLOG_MAX_STRING].to_vec();
                s.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - SLOWLOG_MAX_STRING).as_bytes(),
                );
                kept.push(s);
            } else {
                kept.push(a.to_vec());
            }
        }
        // Ids are unique across the workers: one shared counter.
        let entry = SlowEntry {
            id: 0,
            time_s: self.now_ms() / 1000,
            usec,
            args: kept,
            peer: session.addr.as_bytes().to_vec(),
            name: session.name.clone(),
        };
        if deferred {
            self.diag.deferred = Some(entry);
        } else {
            self.push_slow_entry(entry);
        }
    }

    fn push_slow_entry(&mut self, mut entry: SlowEntry) {
        entry.id = next_slowlog_id(&self.store);
        self.diag.slowlog.push_front(entry);
        self.diag
            .slowlog
            .truncate(self.config.slowlog_max_len as usize);
    }

    /// Records `ms` for latency event `name` (one sample a second: the
    /// larger wins).
    pub(crate) fn add_latency_sample(&mut self, name: &str, ms: u64) {
        let now = self.now_ms() / 1000;
        let event = self.diag.events.entry(name.to_string()).or_default();
        event.max = event.max.max(ms);
        match event.samples.back_mut() {
            Some(last) if last.0 == now => last.1 = last.1.max(ms),
            _ => {
                event.samples.push_back((now, ms));
                if event.samples.len() > LATENCY_SAMPLES {
                    event.samples.pop_front();
                }
            }
        }
    }

    /// This worker's answer to a gather query.
    pub fn answer_gather(&mut self, q: &[u8]) -> Vec<u8> {
        // A CONFIG RESETSTAT on another worker applies before answering,
        // and so does a flush (INFO's tracking counters).
        self.sync_config();
        self.tracking_sync_flushes();
        let Some((tag, n, words)) = parse_query(q) else {
            return Vec::new();
        };
        let mut w = Writer::default();
        match tag {
            crate::tracking::GATHER_REDIRECT => return self.answer_redirect(n),
            tag::INFO => {
                self.cmdstats.encode(&mut w);
                for v in self.tracking.counts() {
                    w.u64(v);
                }
            }
            tag::LATENCY_HISTOGRAM => self.cmdstats.encode(&mut w),
            tag::SLOWLOG_GET => {
                w.u64(self.diag.slowlog.len() as u64);
                for e in &self.diag.slowlog {
                    w.u64(e.id);
                    w.u64(e.time_s);
                    w.u64(e.usec);
                    w.u64(e.args.len() as u64);
                    for a in &e.args {
                        w.bytes(a);
                    }
                    w.bytes(&e.peer);
                    w.bytes(&e.name);
                }
            }
            tag::SLOWLOG_LEN => w.u64(self.diag.slowlog.len() as u64),
            tag::ACL_LOG_GET => crate::acl::encode_log(&self.acl.log, n, &mut w),
            tag::ACL_LOG_RESET => self.acl.log.clear(),
            tag::SLOWLOG_RESET => self.diag.slowlog.clear(),
            tag::LATENCY_RESET => {
                let before = self.diag.events.len();
                if words.is_empty() {
                    self.diag.events.clear();
                } else {
                    self.diag.events.retain(|name, _| {
                        !words
                            .iter()
                            .any(|w| w.eq_ignore_ascii_case(name.as_bytes()))
                    });
                }
                w.u64((before - self.diag.events.len()) as u64);
            }
            _ => {
                w.u64(self.diag.events.len() as u64);
                for (name, e) in &self.diag.events {
                    w.bytes(name.as_bytes());
                    w.u64(e.max);
                    w.u64(e.samples.len() as u64);
                    for (t, ms) in &e.samples {
                        w.u64(*t);
                        w.u64(*ms);
                    }
                }
            }
        }
        w.0
    }

    /// Merges every worker's answer (this one's included) into the reply.
    pub fn finish_gather(
        &mut self,
        q: &[u8],
        answers: &[Vec<u8>],
        protocol: Protocol,
        out: &mut Vec<u8>,
    ) {
        self.write_gathered(q, answers, protocol, out);
        if let Some(entry) = self.diag.deferred.take() {
            self.push_slow_entry(entry);
        }
        if let Some((name, usec, failed)) = self.diag.deferred_call.take() {
            self.cmdstats.called(name, usec, failed);
        }
    }

    fn write_gathered(
        &mut self,
        q: &[u8],
        answers: &[Vec<u8>],
        protocol: Protocol,
        out: &mut Vec<u8>,
    ) {
        let mut w = ReplyWriter::new(out, protocol);
        let Some((tag, n, words)) = parse_query(q) else {
            w.error(b"ERR malformed request");
            return;
        };
        match tag {
            crate::tracking::GATHER_REDIRECT => self.finish_redirect(&words, answers, &mut w),
            tag::INFO => {
                let mut stats = CommandStats::default();
                let mut tracking = [0u64; 4];
                for a in answers {
                    let mut r = Reader(a);
                    stats.merge_encoded(&mut r);
                    for t in tracking.iter_mut() {
                        *t += r.u64().unwrap_or(0);
                    }
                }
                self.tracking.totals = Some(tracking);
                let sections: Vec<String> = words
                    .iter()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect();
                let text = crate::server::info_text(self, &sections, &stats);
                self.tracking.totals = None;
                w.verbatim(b"txt", text.as_bytes());
            }
            tag::LATENCY_HISTOGRAM => {
                let mut stats = CommandStats::default();
                for a in answers {
                    stats.merge_encoded(&mut Reader(a));
                }
                let found = stats.histograms(&words);
                w.map_len(found.len());
                for (name, calls, buckets) in found {
                    w.bulk(name.as_bytes());
                    w.map_len(2);
                    w.bulk(b"calls");
                    w.integer(calls as i64);
                    w.bulk(b"histogram_usec");
                    w.map_len(buckets.len());
                    for (bound, count) in buckets {
                        w.integer(bound as i64);
                        w.integer(count as i64);
                    }
                }
            }
            tag::ACL_LOG_GET => {
                let now = self.h.now_ms();
                crate::acl::write_merged_log(answers, n, now, &mut w);
            }
            tag::ACL_LOG_RESET => w.simple(b"OK"),
            tag::SLOWLOG_GET => {
                let mut all: Vec<SlowEntry> =
                    answers.iter().flat_map(|a| decode_slowlog(a)).collect();
                all.sort_by_key(|e| std::cmp::Reverse(e.id));
                let count = if n == u64::MAX { all.len() } else { n as usize };
                all.truncate(count);
                w.array_len(all.len());
                for e in all {
                    w.array_len(6);
                    w.integer(e.id as i64);
                    w.integer(e.time_s as i64);
                    w.integer(e.usec as i64);
                    w.array_len(e.args.len());
                    for a in &e.args {
                        w.bulk(a);
                    }
                    w.bulk(&e.peer);
                    w.bulk(&e.name);
                }
            }
            tag::SLOWLOG_LEN | tag::LATENCY_RESET => {
                let total: u64 = answers.iter().filter_map(|a| Reader(a).u64()).sum();
                w.integer(total as i64);
            }
            tag::SLOWLOG_RESET => w.simple(b"OK"),
            _ => {
                let events = merge_events(answers);
                finish_latency(tag, &words, &events, &mut w);
            }
        }
    }
}

/// The next SLOWLOG id (shared setting word, bumped with a CAS loop).
fn next_slowlog_id(store: &store::Store) -> u64 {
    let word = crate::config::word::SLOWLOG_ID;
    for _ in 0..64 {
        let Ok(current) = store.config_word(word) else {
            break;
        };
        if store
            .swap_config_word(word, current, current + 1)
            .unwrap_or(false)
        {
            return current;
        }
    }
    0
}

fn decode_slowlog(a: &[u8]) -> Vec<SlowEntry> {
    let mut r = Reader(a);
    let mut out = Vec::new();
    let decode = |r: &mut Reader<'_>, out: &mut Vec<SlowEntry>| -> Option<()> {
        for _ in 0..r.count(48)? {
            let (id, time_s, usec) = (r.u64()?, r.u64()?, r.u64()?);
            let mut args = Vec::new();
            for _ in 0..r.count(8)? {
                args.push(r.bytes()?.to_vec());
            }
            let peer = r.bytes()?.to_vec();
            let name = r.bytes()?.to_vec();
            out.push(SlowEntry {
                id,
                time_s,
                usec,
                args,
                peer,
                name,
            });
        }
        Some(())
    };
    let _ = decode(&mut r, &mut out);
    out
}

/// Every worker's latency events, merged by name (samples of the same
/// second keep the larger value).
fn merge_events(answers: &[Vec<u8>]) -> Vec<(String, Event)> {
    let mut merged: HashMap<String, Event> = HashMap::new();
    for a in answers {
        let mut r = Reader(a);
        let mut one = || -> Option<()> {
            for _ in 0..r.count(24)? {
                let name = String::from_utf8_lossy(r.bytes()?).into_owned();
                let max = r.u64()?;
                let event = merged.entry(name).or_default();
                event.max = event.max.max(max);
                for _ in 0..r.count(16)? {
                    let (t, ms) = (r.u64()?, r.u64()?);
                    match event.samples.iter_mut().find(|s| s.0 == t) {
                        Some(s) => s.1 = s.1.max(ms),
                        None => event.samples.push_back((t, ms)),
                    }
                }
            }
            Some(())
        };
        let _ = one();
    }
    let mut events: Vec<(String, Event)> = merged.into_iter().collect();
    for (_, e) in &mut events {
        e.samples.make_contiguous().sort();
        while e.samples.len() > LATENCY_SAMPLES {
            e.samples.pop_front();
        }
    }
    events.sort_by(|a, b| a.0.cmp(&b.0));
    events
}

fn finish_latency(
    tag: u64,
    words: &[Vec<u8>],
    events: &[(String, Event)],
    w: &mut ReplyWriter<'_>,
) {
    let find = |name: &[u8]| {
        events
            .iter()
            .find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(name))
    };
    match tag {
        tag::LATENCY_LATEST => {
            let live: Vec<_> = events
                .iter()
                .filter(|(_, e)| !e.samples.is_empty())
                .collect();
            w.array_len(live.len());
            for (name, e) in live {
                let (t, ms) = *e.samples.back().expect("not empty");
                w.array_len(4);
                w.bulk(name.as_bytes());
                w.integer(t as i64);
                w.integer(ms as i64);
                w.integer(e.max as i64);
            }
        }
        tag::LATENCY_HISTORY => match words.first().and_then(|n| find(n)) {
            Some((_, e)) => {
                w.array_len(e.samples.len());
                for (t, ms) in &e.samples {
                    w.array_len(2);
                    w.integer(*t as i64);
                    w.integer(*ms as i64);
                }
            }
            None => w.array_len(0),
        },
        tag::LATENCY_GRAPH => {
            let name = words
                .first()
                .map(|n| String::from_utf8_lossy(n).into_owned())
                .unwrap_or_default();
            match find(name.as_bytes()) {
                Some((_, e)) => w.verbatim(b"txt", graph(&name, e).as_bytes()),
                None => w.error(format!("ERR No samples available for event '{name}'").as_bytes()),
            }
        }
        _ => w.verbatim(b"txt", doctor(events).as_bytes()),
    }
}

/// LATENCY GRAPH: the event's samples as bars, oldest on the left.
fn graph(name: &str, e: &Event) -> String {
    let (lo, hi) = e
        .samples
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), s| (lo.min(s.1), hi.max(s.1)));
    let mut text = format!(
        "{name} - high {hi} ms, low {lo} ms (all time high {} ms)\n",
        e.max
    );
    text.push_str(&"-".repeat(80));
    text.push('\n');
    const ROWS: u64 = 4;
    for row in (1..=ROWS).rev() {
        for (_, ms) in &e.samples {
            let level = if hi == 0 { 0 } else { (ms * ROWS).div_ceil(hi) };
            text.push(if level >= row { '#' } else { ' ' });
        }
        text.push('\n');
    }
    text
}

/// LATENCY DOCTOR: a short human report.
fn doctor(events: &[(String, Event)]) -> String {
    if events.is_empty() {
        return "Dave, no latency spike was observed during the lifetime of this shoal instance, not in the slightest bit. I honestly think you ought to sleep tonight.\n".into();
    }
    let mut text = String::from(
        "Dave, I have observed latency spikes in this shoal instance. You don't mind talking about it, do you Dave?\n\n",
    );
    for (i, (name, e)) in events.iter().enumerate() {
        let sum: u64 = e.samples.iter().map(|s| s.1).sum();
        let avg = sum.checked_div(e.samples.len() as u64).unwrap_or(0);
        text.push_str(&format!(
            "{}. {name}: {} latency spikes (average {avg}ms, all time high {}ms).\n",
            i + 1,
            e.samples.len(),
            e.max
        ));
    }
    text.push_str("\nSlow commands: see SLOWLOG GET; commands that are slow on their own (KEYS, SMEMBERS of a large set…) are the usual cause.\n");
    text
}

// ---------- commands ----------

crate::command::group_cmd!("server", keys = (0, 0, 0));

#[rustfmt::skip]
const SLOWLOG_SUBCOMMANDS: &[Command] = &[
    cmd("slowlog|get", -2, ADMIN | LOADING | STALE, "2.2.12", "Get the slow log's entries", slowlog_get),
    cmd("slowlog|len", 2, ADMIN | LOADING | STALE, "2.2.12", "Get the slow log's length", slowlog_len),
    cmd("slowlog|reset", 2, ADMIN | LOADING | STALE, "2.2.12", "Clear all entries from the slow log", slowlog_reset),
    cmd("slowlog|help", 2, LOADING | STALE, "6.2.0", "Show helpful text about the different subcommands", slowlog_help),
];

#[rustfmt::skip]
const LATENCY_SUBCOMMANDS: &[Command] = &[
    cmd("latency|latest", 2, ADMIN | NOSCRIPT | LOADING | STALE, "2.8.13", "Return the latest latency samples for all events.", latency_latest),
    cmd("latency|history", 3, ADMIN | NOSCRIPT | LOADING | STALE, "2.8.13", "Return timestamp-latency samples for the event.", latency_history),
    cmd("latency|reset", -2, ADMIN | NOSCRIPT | LOADING | STALE, "2.8.13", "Reset latency data for one or more events.", latency_reset),
    cmd("latency|graph", 3, ADMIN | NOSCRIPT | LOADING | STALE, "2.8.13", "Return a latency graph for the event.", latency_graph),
    cmd("latency|doctor", 2, ADMIN | NOSCRIPT | LOADING | STALE, "2.8.13", "Return a human readable latency analysis report.", latency_doctor),
    cmd("latency|histogram", -2, ADMIN | NOSCRIPT | LOADING | STALE, "7.0.0", "Return the cumulative distribution of latencies of a subset of commands or all.", latency_histogram),
    cmd("latency|help", 2, LOADING | STALE, "2.8.13", "Show helpful text about the different subcommands.", latency_help),
];

/// SLOWLOG and LATENCY.
pub(crate) const COMMANDS: &[Command] = &[
    Command {
        subcommands: SLOWLOG_SUBCOMMANDS,
        ..cmd(
            "slowlog",
            -2,
            0,
            "2.2.12",
            "A container for slow log commands",
            slowlog,
        )
    },
    Command {
        subcommands: LATENCY_SUBCOMMANDS,
        ..cmd(
            "latency",
            -2,
            0,
            "2.8.13",
            "A container for latency diagnostics commands",
            latency,
        )
    },
];

fn slowlog(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    dispatch_sub(cx, &COMMANDS[0], args)
}

fn latency(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    dispatch_sub(cx, &COMMANDS[1], args)
}

/// SLOWLOG GET [count]: 10 by default, -1 for all.
fn slowlog_get(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let count = match args.get(2) {
        None => 10,
        Some(a) if args.len() == 3 => {
            let n = store::parse_i64(a)
                .filter(|n| *n >= -1)
                .ok_or(CmdError::msg(
                    "ERR count should be greater than or equal to -1",
                ))?;
            if n == -1 {
                u64::MAX
            } else {
                n as u64
            }
        }
        Some(_) => return Err(CmdError::arity("slowlog|get")),
    };
    gather(cx, tag::SLOWLOG_GET, count, &[]);
    Ok(())
}

fn slowlog_len(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    gather(cx, tag::SLOWLOG_LEN, 0, &[]);
    Ok(())
}

fn slowlog_reset(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    gather(cx, tag::SLOWLOG_RESET, 0, &[]);
    Ok(())
}

fn slowlog_help(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    command::reply_help(
        cx,
        &[
            "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
            "HELP",
            "    Print this help.",
        ],
    )
}

fn latency_latest(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    gather(cx, tag::LATENCY_LATEST, 0, &[]);
    Ok(())
}

fn latency_history(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    gather(cx, tag::LATENCY_HISTORY, 0, &[&args[2]]);
    Ok(())
}

fn latency_reset(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let events: Vec<&[u8]> = args[2..].iter().map(|a| &a[..]).collect();
    gather(cx, tag::LATENCY_RESET, 0, &events);
    Ok(())
}

fn latency_graph(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    gather(cx, tag::LATENCY_GRAPH, 0, &[&args[2]]);
    Ok(())
}

fn latency_doctor(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    gather(cx, tag::LATENCY_DOCTOR, 0, &[]);
    Ok(())
}

fn latency_histogram(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let names: Vec<&[u8]> = args[2..].iter().map(|a| &a[..]).collect();
    gather(cx, tag::LATENCY_HISTOGRAM, 0, &names);
    Ok(())
}

fn latency_help(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    command::reply_help(
        cx,
        &[
            "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
            "HELP",
            "    Print this help.",
        ],
    )
}

/// INFO asks every worker when it prints a section of per-command counters.
pub(crate) fn info_gather(cx: &mut Cx<'_>, sections: &[String]) {
    let words: Vec<&[u8]> = sections.iter().map(|s| s.as_bytes()).collect();
    gather(cx, tag::INFO, 0, &words);
}
