//! MEMORY: USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE, HELP, over the
//! segment's arena (shoal's allocator is the segment's own, not jemalloc,
//! so the figures are the arena's).

use crate::command::{self, dispatch_sub, flags::*, Arg, CmdResult, Command};
use crate::engine::Cx;
use crate::error::{CmdError, SYNTAX};
use crate::parse;

crate::command::group_cmd!("server", since = "4.0.0");

#[rustfmt::skip]
const MEMORY_SUBCOMMANDS: &[Command] = &[
    cmd("memory|usage", -3, READONLY, (2, 2, 1), "Estimate the memory usage of a key", memory_usage),
    cmd("memory|stats", 2, 0, (0, 0, 0), "Show memory usage details", memory_stats),
    cmd("memory|doctor", 2, 0, (0, 0, 0), "Outputs memory problems report", memory_doctor),
    cmd("memory|malloc-stats", 2, 0, (0, 0, 0), "Show allocator internal stats", memory_malloc_stats),
    cmd("memory|purge", 2, 0, (0, 0, 0), "Ask the allocator to release memory", memory_purge),
    cmd("memory|help", 2, LOADING | STALE, (0, 0, 0), "Show helpful text about the different subcommands", memory_help),
];

/// The MEMORY command.
pub(crate) const COMMANDS: &[Command] = &[Command {
    subcommands: MEMORY_SUBCOMMANDS,
    ..cmd(
        "memory",
        -2,
        0,
        (0, 0, 0),
        "A container for memory diagnostics commands",
        memory,
    )
}];

fn memory(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    dispatch_sub(cx, &COMMANDS[0], args)
}

/// MEMORY USAGE key [SAMPLES count]: the arena bytes the key holds. shoal
/// counts every block, so SAMPLES is checked and otherwise has no effect.
fn memory_usage(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let mut i = 3;
    while i < args.len() {
        if parse::is(&args[i], "samples") && i + 1 < args.len() {
            let n = parse::int(&args[i + 1])?;
            if n < 0 {
                return Err(CmdError::msg(SYNTAX));
            }
            i += 2;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
    }
    let db = cx.db();
    match cx.h().memory_usage(db, &args[2])? {
        Some(bytes) => cx.out.integer(bytes as i64),
        None => cx.out.null(),
    }
    Ok(())
}

/// The arena's figures: (segment bytes, arena bytes, used bytes, keys).
fn figures(cx: &Cx<'_>) -> Result<(store::StoreInfo, u64), CmdError> {
    let info = cx.engine.store.info()?;
    let keys = info.keyspace.iter().map(|(k, _)| k).sum();
    Ok((info, keys))
}

fn memory_stats(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let (info, keys) = figures(cx)?;
    let used = info.arena.used_bytes;
    // The segment's fixed structures (header, contexts, mailboxes, index)
    // are its overhead; the arena's used blocks are the dataset.
    let overhead = info.segment_bytes.saturating_sub(info.arena.total_bytes);
    let total = overhead + used;
    let pct = |part: u64, whole: u64| {
        if whole == 0 {
            0.0
        } else {
            part as f64 * 100.0 / whole as f64
        }
    };
    let fields: Vec<(&str, Stat)> = vec![
        ("peak.allocated", Stat::Int(total)),
        ("total.allocated", Stat::Int(total)),
        ("startup.allocated", Stat::Int(overhead)),
        ("replication.backlog", Stat::Int(0)),
        ("clients.slaves", Stat::Int(0)),
        ("clients.normal", Stat::Int(0)),
        ("aof.buffer", Stat::Int(0)),
        ("lua.caches", Stat::Int(0)),
        ("functions.caches", Stat::Int(0)),
        ("overhead.total", Stat::Int(overhead)),
        ("keys.count", Stat::Int(keys)),
        (
            "keys.bytes-per-key",
            Stat::Int(used.checked_div(keys).unwrap_or(0)),
        ),
        ("dataset.bytes", Stat::Int(used)),
        ("dataset.percentage", Stat::Float(pct(used, total))),
        ("peak.percentage", Stat::Float(100.0)),
        ("allocator.allocated", Stat::Int(used)),
        ("allocator.active", Stat::Int(used)),
        ("allocator.resident", Stat::Int(info.arena.total_bytes)),
        (
            "allocator-fragmentation.ratio",
            Stat::Float(1.0 + info.arena.fragmentation()),
        ),
        (
            "fragmentation",
            Stat::Float(1.0 + info.arena.fragmentation()),
        ),
        ("fragmentation.bytes", Stat::Int(info.arena.free_bytes)),
    ];
    cx.out.map_len(fields.len());
    for (name, value) in fields {
        cx.out.bulk(name.as_bytes());
        match value {
            Stat::Int(n) => cx.out.integer(n as i64),
            Stat::Float(f) => cx
                .out
                .double(crate::types::zset::score::format_score(f).as_bytes()),
        }
    }
    Ok(())
}

enum Stat {
    Int(u64),
    Float(f64),
}

fn memory_doctor(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let (info, keys) = figures(cx)?;
    let a = &info.arena;
    let mut report = String::new();
    if keys == 0 || a.used_bytes < 5 << 20 {
        report.push_str("Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.");
    } else if a.fragmentation() > 0.4 {
        report.push_str(&format!(
            "Sam, I detected a few issues in this shoal instance memory implants:\n\n * High fragmentation: {:.0}% of the arena's free bytes are in pieces too small for a request of all of them (largest free block {} bytes). Writes of large values may fail or evict before the arena is full.\n",
            a.fragmentation() * 100.0,
            a.largest_free
        ));
    } else {
        report.push_str("Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.");
    }
    cx.out.verbatim(b"txt", report.as_bytes());
    Ok(())
}

fn memory_malloc_stats(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let (info, _) = figures(cx)?;
    let a = &info.arena;
    let text = format!(
        "shoal segment arena: total {} bytes, used {} bytes in {} blocks, free {} bytes in {} blocks, largest free block {} bytes, stashed {} bytes\n",
        a.total_bytes, a.used_bytes, a.used_blocks, a.free_bytes, a.free_blocks, a.largest_free, a.stashed_bytes
    );
    cx.out.verbatim(b"txt", text.as_bytes());
    Ok(())
}

/// Freed blocks go back to the arena's free lists at once; there is nothing
/// to release to the system (the segment is mapped whole).
fn memory_purge(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    cx.out.simple(b"OK");
    Ok(())
}

fn memory_help(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    command::reply_help(
        cx,
        &[
            "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
            "HELP",
            "    Print this help.",
        ],
    )
}
