//! SAVE, BGSAVE and LASTSAVE, and INFO's persistence section. The
//! supervisor writes snapshots (crates/server/src/supervisor/persistence.rs); a worker
//! asks for one through the segment and, for SAVE, waits for the answer.

use std::fmt::Write;
use std::time::{Duration, Instant};

use crate::command::{flags::*, Arg, CmdResult, Command};
use crate::engine::{Cx, Engine};
use crate::error::CmdError;

/// A snapshot is fuzzy (writers never pause) and made consistent by the
/// transaction log's records up to its end, so with the log off there is
/// nothing to save with: refused, where Redis would write `dump.rdb` in its
/// working directory.
const OFF: &str = "ERR persistence is off: snapshots need the transaction log \
                   (shoal serve --dir DIR, or appendonly yes when started the Redis way)";
/// How long SAVE waits for the supervisor's snapshot.
const SAVE_TIMEOUT: Duration = Duration::from_secs(600);

crate::command::group_cmd!("server", keys = (0, 0, 0));

/// The persistence commands.
#[rustfmt::skip]
pub(crate) const COMMANDS: &[Command] = &[
    cmd("save", 1, ADMIN | NOSCRIPT | NO_MULTI, "1.0.0", "Synchronously save the dataset to disk", save),
    cmd("bgsave", -1, ADMIN | NOSCRIPT, "1.0.0", "Asynchronously save the dataset to disk", bgsave),
    cmd("lastsave", 1, NOSCRIPT | LOADING | STALE | FAST, "1.0.0", "Get the UNIX time stamp of the last successful save to disk", lastsave),
];

fn save(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let ring = cx.h().log_ring();
    let status = ring.status();
    if !status.enabled {
        return Err(CmdError::msg(OFF));
    }
    if status.snapshot_running_since != 0 {
        return Err(CmdError::msg("ERR Background save already in progress"));
    }
    let n = ring.request_snapshot().map_err(CmdError::from)?;
    let began = Instant::now();
    while ring.snapshot_answered() < n {
        if began.elapsed() > SAVE_TIMEOUT {
            return Err(CmdError::msg("ERR the snapshot did not finish in time"));
        }
        ring.wait_snapshot_change(Duration::from_millis(100));
    }
    if ring.status().snapshot_last_failed {
        return Err(CmdError::msg(
            "ERR the snapshot failed: see the server's output",
        ));
    }
    cx.out.simple(b"OK");
    Ok(())
}

fn bgsave(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let schedule = match args.get(1) {
        None => false,
        Some(a) if crate::parse::is(a, "schedule") && args.len() == 2 => true,
        Some(_) => return Err(CmdError::syntax()),
    };
    let ring = cx.h().log_ring();
    let status = ring.status();
    if !status.enabled {
        return Err(CmdError::msg(OFF));
    }
    let running = status.snapshot_running_since != 0;
    if running && !schedule {
        return Err(CmdError::msg("ERR Background save already in progress"));
    }
    ring.request_snapshot().map_err(CmdError::from)?;
    cx.out.simple(if running {
        b"Background saving scheduled"
    } else {
        b"Background saving started"
    });
    Ok(())
}

fn lastsave(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let last = cx.h().log_ring().status().snapshot_last_ms;
    let secs = if last == 0 {
        cx.engine.started_unix_ms() / 1000
    } else {
        last / 1000
    };
    cx.out.integer(secs as i64);
    Ok(())
}

/// INFO's `# Persistence`: Redis's field names where they apply, then the
/// log's positions (LSNs are byte offsets in the log).
pub(crate) fn info_section(e: &mut Engine, s: &mut String) {
    let st = e.h.log_ring().status();
    let now_ms = e.now_ms();
    let last_save = if st.snapshot_last_ms == 0 {
        e.started_unix_ms() / 1000
    } else {
        st.snapshot_last_ms / 1000
    };
    let running = st.snapshot_running_since != 0;
    let ok = |failed: bool| if failed { "err" } else { "ok" };
    let last_took = if st.snapshot_last_ms == 0 && !st.snapshot_last_failed {
        -1
    } else {
        (st.snapshot_last_took_ms / 1000) as i64
    };
    let current = if running {
        (now_ms.saturating_sub(st.snapshot_running_since) / 1000) as i64
    } else {
        -1
    };
    let since_snapshot = st.head.saturating_sub(st.snapshot_start_lsn.max(8));
    // Redis's dirty counter: with the log on, the log's bytes since the
    // snapshot's start; with it off, the write versions taken since (one
    // per key a command changed, as Redis counts a change).
    let changes = if st.enabled {
        since_snapshot
    } else {
        st.head.saturating_sub(st.snapshot_start_lsn)
    };
    let _ = write!(
        s,
        "# Persistence\r\nloading:0\r\nasync_loading:0\r\ncurrent_cow_peak:0\r\ncurrent_cow_size:0\r\n\
         rdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{last_save}\r\n\
         rdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{last_took}\r\nrdb_current_bgsave_time_sec:{current}\r\n\
         rdb_saves:{}\r\naof_enabled:{}\r\naof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\n\
         aof_last_rewrite_time_sec:-1\r\naof_current_rewrite_time_sec:-1\r\naof_last_bgrewrite_status:ok\r\n\
         aof_last_write_status:{}\r\naof_last_cow_size:0\r\n\
         shoal_appendfsync:{}\r\nshoal_log_head_lsn:{}\r\nshoal_log_written_lsn:{}\r\nshoal_log_fsynced_lsn:{}\r\n\
         shoal_log_bytes_since_snapshot:{}\r\nshoal_snapshot_start_lsn:{}\r\nshoal_log_ring_bytes:{}\r\n",
        changes,
        running as u8,
        ok(st.snapshot_last_failed),
        st.snapshot_answered,
        st.enabled as u8,
        ok(st.write_failed),
        st.policy.name(),
        st.head,
        st.released,
        st.fsynced,
        if st.enabled { since_snapshot } else { 0 },
        st.snapshot_start_lsn,
        st.ring_size,
    );
}
