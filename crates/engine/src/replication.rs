//! Replication as clients see it (docs/replication.md): REPLICAOF/SLAVEOF,
//! ROLE, WAIT, INFO's replication section, and SHOAL.SYNC, the request a
//! replica's supervisor sends to open a link. The links themselves run in
//! the supervisors (crates/server/src/supervisor/replication.rs); workers
//! and supervisor meet in the segment's shared words and in the status
//! file the supervisor keeps beside the segment.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;
use store::{Handle, Store};

use crate::command::{flags::*, Arg, CmdResult, Command};
use crate::config::{params, word};
use crate::engine::{Cx, Engine, Flow, ServerRequest};
use crate::error::CmdError;

crate::command::group_cmd!("server", keys = (0, 0, 0));

/// The replication commands.
#[rustfmt::skip]
pub(crate) const COMMANDS: &[Command] = &[
    cmd("replicaof", 3, ADMIN | NOSCRIPT | STALE, "5.0.0", "Make the server a replica of another instance, or promote it as master", replicaof),
    cmd("slaveof", 3, ADMIN | NOSCRIPT | STALE, "1.0.0", "Make the server a replica of another instance, or promote it as master", replicaof),
    cmd("wait", 3, NOSCRIPT, "3.0.0", "Wait for the synchronous replication of all the write commands sent in the context of the current connection", wait),
    cmd("failover", -1, ADMIN | NOSCRIPT | STALE, "6.2.0", "Start a coordinated failover between this server and one of its replicas.", failover),
    cmd("shoal.sync", -5, ADMIN | NOSCRIPT | NO_MULTI | STALE, "7.0.0", "Open a replication link (sent by a shoal replica)", shoal_sync),
];

/// Redis's refusal of a write on a read-only replica.
pub(crate) const READONLY: &str = "READONLY You can't write against a read only replica.";

/// Redis's refusal of a write when `min-replicas-to-write` is not met.
pub(crate) const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

/// Redis's refusal on a replica whose link is down under
/// `replica-serve-stale-data no`.
pub(crate) const MASTERDOWN: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// Whether this server refuses commands without the STALE flag now: a
/// replica under `replica-serve-stale-data no` whose link is not up (the
/// link's state is read at most every 100 ms).
pub(crate) fn refuses_stale(e: &mut Engine) -> bool {
    if e.config.replica_serve_stale_data || !is_replica(&e.store) {
        return false;
    }
    if let Some((at, up)) = e.link_up {
        if at.elapsed() < GOOD_REPLICAS_TTL {
            return !up;
        }
    }
    let up = read_status(e.store.path())["link"] == "up";
    e.link_up = Some((Instant::now(), up));
    !up
}

/// Whether a command is refused on a stale replica: it (or the subcommand
/// called) lacks the STALE flag, or it is EXEC and a queued command does.
pub(crate) fn denied_when_stale(session: &crate::Session, cmd: &Command, args: &[Arg<'_>]) -> bool {
    let flags = if cmd.subcommands.is_empty() || args.len() < 2 {
        cmd.flags
    } else {
        crate::command::find_sub(cmd, args).map_or(cmd.flags, |c| c.flags)
    };
    flags & STALE == 0 || (crate::transaction::is_exec(cmd) && session.tx.queued_lacks(STALE))
}

/// How long a worker trusts its count of good replicas.
const GOOD_REPLICAS_TTL: Duration = Duration::from_millis(100);

/// Whether `min-replicas-to-write` refuses writes now: a primary with
/// fewer online replicas whose last acknowledgement is at most
/// `min-replicas-max-lag` seconds old (Redis's checkGoodReplicasStatus).
pub(crate) fn too_few_replicas(e: &mut Engine) -> bool {
    let (want, max_lag) = (
        e.config.min_replicas_to_write,
        e.config.min_replicas_max_lag,
    );
    if want == 0 || max_lag == 0 || is_replica(&e.store) {
        return false;
    }
    good_replicas(e) < want
}

/// Whether the synchronous mode refuses writes now: a primary with fewer
/// online replicas than `replica-sync-count` would hold every reply until
/// one more connects, so it refuses the write before it runs instead, as
/// `min-replicas-to-write` does.
pub(crate) fn too_few_for_sync(e: &mut Engine) -> bool {
    let want = e.config.replica_sync_count;
    if want == 0 || is_replica(&e.store) {
        return false;
    }
    // At the disk level only replicas that fsync what they receive (a
    // `--dir`, shown by their first disk acknowledgement) can release a
    // reply. A count made at the other level is not reused: a write let
    // through by it would wait for replicas that never acknowledge.
    let disk = e.config.replica_sync_disk;
    if let Some((at, n, level)) = e.online_replicas {
        if at.elapsed() < GOOD_REPLICAS_TTL && level == disk {
            return n < want;
        }
    }
    let status = read_status(e.store.path());
    let n = online_replicas(&status)
        .iter()
        .filter(|r| r["state"] == "online" && (!disk || r["disk_ack"].is_u64()))
        .count() as u64;
    e.online_replicas = Some((Instant::now(), n, disk));
    n < want
}

/// Bits of `word::REPL_SYNC_ACKED`: the count it was computed for in the
/// top byte, the LSN below.
const SYNC_COUNT_SHIFT: u32 = 56;
const SYNC_LSN_MASK: u64 = (1 << SYNC_COUNT_SHIFT) - 1;

/// What the synchronous mode asks of the reply to a write on this server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncMode {
    /// `replica-sync-count`: replicas that must have the write.
    pub count: u64,
    /// `replica-sync-timeout` in ms (0: as long as it takes).
    pub timeout_ms: u64,
    /// `replica-sync-level disk`: fsynced on their disk, not only applied.
    pub disk: bool,
}

/// The synchronous mode now: None when it is off, and on a replica (its
/// writes are its own).
pub fn sync_mode(e: &Engine) -> Option<SyncMode> {
    let count = e.config.replica_sync_count;
    (count > 0 && !is_replica(&e.store)).then_some(SyncMode {
        count,
        timeout_ms: e.config.replica_sync_timeout,
        disk: e.config.replica_sync_disk,
    })
}

/// The word the level's progress is published in: `REPL_SYNC_ACKED`
/// (applied) or `REPL_SYNC_DURABLE` (fsynced on the replicas' disks).
fn sync_word(disk: bool) -> u64 {
    match disk {
        true => word::REPL_SYNC_DURABLE,
        false => word::REPL_SYNC_ACKED,
    }
}

/// The published progress of a level as it is (to wait for it to move).
pub fn sync_acked_word(store: &Store, disk: bool) -> u64 {
    store.config_word(sync_word(disk)).unwrap_or(0)
}

/// Whether the published progress covers a write ending at `end` for
/// `count` replicas: it was computed for that count and is at or past it.
pub fn sync_covers(acked_word: u64, count: u64, end: u64) -> bool {
    acked_word >> SYNC_COUNT_SHIFT == count && acked_word & SYNC_LSN_MASK >= end
}

/// Sleeps (on a worker's thread, never its event loop) until the
/// published progress moves from `seen` or `timeout` passes.
pub fn wait_sync_acked(store: &Store, disk: bool, seen: u64, timeout: Duration) {
    let _ = store.wait_config_word(sync_word(disk), seen, timeout);
}

/// A worker whose reply waits for replicas: wakes the senders, which
/// forward the log up to `end` at once.
pub fn want_sync(store: &Store, end: u64) {
    let _ = store.publish_config_word(word::REPL_SYNC_WANTED, end);
}

/// A sender with nothing to send: `sync_wanted_word`, read before it
/// looked for frames, tells whether a worker asked since.
pub fn sync_wanted_word(store: &Store) -> u64 {
    store.config_word(word::REPL_SYNC_WANTED).unwrap_or(0)
}

/// Sleeps until a worker asks for a write to be forwarded (the word moved
/// from `seen`) or `timeout` passes.
pub fn wait_sync_wanted(store: &Store, seen: u64, timeout: Duration) {
    let _ = store.wait_config_word(word::REPL_SYNC_WANTED, seen, timeout);
}

/// Asks the supervisor to rewrite its status file now (a WAIT polling
/// it, or a change the file must show at once): acknowledgements alone
/// are written only every [`STATUS_ACKS_EVERY`] otherwise.
pub fn want_status(store: &Store) {
    let seen = status_wanted_word(store);
    let _ = store.publish_config_word(word::REPL_STATUS_WANTED, seen.wrapping_add(1));
}

/// How stale the replicas' acknowledged offsets in the status file may
/// be while nobody waits for them (INFO, ROLE, `min-replicas-max-lag`;
/// Redis's replicas acknowledge once a second).
pub const STATUS_ACKS_EVERY: Duration = Duration::from_millis(100);

/// The status file's request word, read before the supervisor looks
/// for changes (`want_status`).
pub fn status_wanted_word(store: &Store) -> u64 {
    store.config_word(word::REPL_STATUS_WANTED).unwrap_or(0)
}

/// Sleeps until the status file is wanted (the word moved from `seen`)
/// or `timeout` passes.
pub fn wait_status_wanted(store: &Store, seen: u64, timeout: Duration) {
    let _ = store.wait_config_word(word::REPL_STATUS_WANTED, seen, timeout);
}

/// The supervisor's side: publishes the LSN that `replica-sync-count` of
/// the replicas whose acknowledgements are `acks` have applied (`disk`:
/// fsynced; 0 when there are fewer), and wakes the workers waiting for it.
pub fn publish_sync_acked(store: &Store, disk: bool, acks: &mut [u64]) {
    let count = sync_count(store);
    if count == 0 {
        return;
    }
    acks.sort_unstable_by(|a, b| b.cmp(a));
    let mut lsn = acks.get(count as usize - 1).copied().unwrap_or(0);
    // Once N replicas had it, the write was on N replicas: the published
    // LSN never goes back for the same count (a replica that leaves must
    // not strand a reply whose release the watcher had not seen yet).
    let old = sync_acked_word(store, disk);
    if old >> SYNC_COUNT_SHIFT == count {
        lsn = lsn.max(old & SYNC_LSN_MASK);
    }
    let word = (count << SYNC_COUNT_SHIFT) | (lsn & SYNC_LSN_MASK);
    if old != word {
        let _ = store.publish_config_word(sync_word(disk), word);
    }
}

/// Whether `replica-sync-level` is `disk` (the senders ask their replicas
/// for disk acknowledgements then).
pub fn sync_level_disk(store: &Store) -> bool {
    shared_sync_settings(store).1
}

/// `replica-sync-count`.
fn sync_count(store: &Store) -> u64 {
    shared_sync_settings(store).0
}

/// `replica-sync-count` and whether `replica-sync-level` is `disk`, from
/// the shared settings, read again only when CONFIG SET's generation moved.
fn shared_sync_settings(store: &Store) -> (u64, bool) {
    static CACHE: std::sync::Mutex<(u64, u64, bool)> = std::sync::Mutex::new((u64::MAX, 0, false));
    let generation = store.config_word(word::GENERATION).unwrap_or(0);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if cache.0 != generation {
        let text = store.config_text().unwrap_or_default();
        let count = crate::config::setting_in(&text, "replica-sync-count")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let disk = crate::config::setting_in(&text, "replica-sync-level")
            .is_some_and(|v| v.eq_ignore_ascii_case("disk"));
        *cache = (generation, count, disk);
    }
    (cache.1, cache.2)
}

/// Replicas good for `min-replicas-to-write`, read at most every 100 ms.
fn good_replicas(e: &mut Engine) -> u64 {
    if let Some((at, n)) = e.good_replicas {
        if at.elapsed() < GOOD_REPLICAS_TTL {
            return n;
        }
    }
    let now_ms = e.now_ms();
    let max_lag_ms = e.config.min_replicas_max_lag.saturating_mul(1000);
    let status = read_status(e.store.path());
    let n = status["replicas"].as_array().map_or(0, |r| {
        r.iter()
            .filter(|r| {
                r["state"] == "online"
                    && now_ms.saturating_sub(r["last_ack_ms"].as_u64().unwrap_or(0)) <= max_lag_ms
            })
            .count() as u64
    });
    e.good_replicas = Some((Instant::now(), n));
    n
}

/// The status file the supervisor keeps beside the segment.
pub fn status_path(segment: &Path) -> PathBuf {
    let mut p = segment.as_os_str().to_owned();
    p.push(".repl");
    PathBuf::from(p)
}

/// The supervisor's last status (an empty object before it wrote one).
pub fn read_status(segment: &Path) -> Value {
    std::fs::read(status_path(segment))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null)
}

/// Whether this server follows a primary (REPLICAOF host port).
pub fn is_replica(store: &Store) -> bool {
    store.config_word(word::REPL_ROLE).unwrap_or(0) == 1
}

/// The replication generation: bumped by every REPLICAOF, so the
/// supervisor knows to look at the target again.
pub fn generation(store: &Store) -> u64 {
    store.config_word(word::REPL_GENERATION).unwrap_or(0)
}

/// The end LSN of the last primary record group a replica applied (0: none,
/// a full sync is needed). Kept in the segment with the data it describes.
pub fn applied_lsn(store: &Store) -> u64 {
    store.config_word(word::REPL_APPLIED).unwrap_or(0)
}

/// Records how far a replica applied (the supervisor's link thread).
pub fn set_applied_lsn(store: &Store, lsn: u64) -> Result<(), store::Error> {
    store.set_config_word(word::REPL_APPLIED, lsn)
}

/// A replication id's tag: 64 bits of FNV-1a, never 0. A replica keeps
/// the tag of the history it applied in its segment and sends it in
/// SHOAL.SYNC (16 hex digits); the primary compares it with its own.
pub fn replid_tag(replid: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in replid.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h.max(1)
}

/// The tag of the history a replica applied (0: none).
pub fn followed_tag(store: &Store) -> u64 {
    store.config_word(word::REPL_FOLLOWED).unwrap_or(0)
}

/// Records the history a replica applies from.
pub fn set_followed_tag(store: &Store, tag: u64) -> Result<(), store::Error> {
    store.set_config_word(word::REPL_FOLLOWED, tag)
}

/// The primary a replica follows, from the shared settings (`replicaof`).
pub fn target(store: &Store) -> Option<(String, u16)> {
    let text = store.config_text().ok()?;
    let overrides = params::Overrides::parse(&text);
    let value = overrides.get("replicaof")?;
    let mut words = value.split_whitespace();
    let host = words.next()?.to_string();
    let port = words.next()?.parse().ok()?;
    Some((host, port))
}

/// `repl-backlog-size` in bytes: how much of the log a primary without
/// `--dir` keeps in memory for its replicas' partial resyncs.
pub fn backlog_size(store: &Store) -> u64 {
    let text = store.config_text().unwrap_or_default();
    crate::config::setting_in(&text, "repl-backlog-size")
        .and_then(|v| params::parse_memory(v.as_bytes()))
        .unwrap_or(1 << 20)
        .max(1)
}

/// `masteruser` and `masterauth`: what a replica authenticates with on its
/// primary (None: no password set).
pub fn master_auth(store: &Store) -> Option<(Option<String>, String)> {
    let text = store.config_text().ok()?;
    let overrides = params::Overrides::parse(&text);
    let pass = overrides
        .get("masterauth")
        .filter(|p| !p.is_empty())?
        .to_string();
    let user = overrides
        .get("masteruser")
        .filter(|u| !u.is_empty())
        .map(str::to_string);
    Some((user, pass))
}

/// Makes this server a replica of `to` (None: a primary), as REPLICAOF,
/// `--replicaof` and the configuration file's `replicaof` do.
pub fn set_target(
    store: &Store,
    h: &mut Handle,
    to: Option<(&str, u16)>,
) -> Result<(), store::Error> {
    let value = to.map_or(String::new(), |(host, port)| format!("{host} {port}"));
    h.update_config_text(|old| {
        let mut overrides = params::Overrides::parse(old);
        overrides.set("replicaof", value);
        Ok(overrides.to_text())
    })?;
    store.set_config_word(word::TEXT_SET, 2)?;
    store.set_config_word(word::REPL_ROLE, u64::from(to.is_some()))?;
    let g = store.config_word(word::REPL_GENERATION)?;
    store.set_config_word(word::REPL_GENERATION, g.wrapping_add(1))
}

/// Whether a request writes: its command's WRITE flag, or its
/// subcommand's (FUNCTION LOAD), as Redis decides.
pub(crate) fn writes(cmd: &Command, args: &[Arg<'_>]) -> bool {
    let sub = if cmd.subcommands.is_empty() || args.len() < 2 {
        0
    } else {
        crate::command::find_sub(cmd, args).map_or(0, |c| c.flags)
    };
    (cmd.flags | sub) & WRITE != 0
}

/// Whether a command passes FAILOVER's write gate (it may write, or run
/// writes: EXEC, scripts, PUBLISH).
pub(crate) fn gated(cmd: &Command, args: &[Arg<'_>]) -> bool {
    writes(cmd, args) || cmd.flags & MAY_REPLICATE != 0 || crate::transaction::is_exec(cmd)
}

/// Test instrumentation: while the file `SHOAL_TEST_WRITE_STALL` names
/// exists, a command that passed the write gate's checks waits before it
/// runs, so a test can hold a write there across a FAILOVER.
pub(crate) fn test_write_stall() {
    static GATE: OnceLock<Option<PathBuf>> = OnceLock::new();
    let Some(gate) =
        GATE.get_or_init(|| std::env::var_os("SHOAL_TEST_WRITE_STALL").map(PathBuf::from))
    else {
        return;
    };
    while gate.exists() {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether writes are refused here: a replica under `replica-read-only yes`.
pub(crate) fn refuses_writes(e: &Engine) -> bool {
    if !is_replica(&e.store) {
        return false;
    }
    let text = e.store.config_text().unwrap_or_default();
    params::Overrides::parse(&text).get("replica-read-only") != Some("no")
}

fn replicaof(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if failover_state(&cx.engine.store) != FailoverState::None {
        return Err(CmdError::msg(
            "ERR REPLICAOF not allowed while failing over.",
        ));
    }
    if crate::parse::is(&args[1], "no") && crate::parse::is(&args[2], "one") {
        if is_replica(&cx.engine.store) {
            let store = cx.engine.store.clone();
            set_target(&store, cx.h(), None)?;
        }
        cx.out.simple(b"OK");
        return Ok(());
    }
    let port = crate::parse::int(&args[2])
        .ok()
        .filter(|p| (0..=65535).contains(p))
        .ok_or_else(|| CmdError::msg("ERR Invalid master port"))?;
    let host = String::from_utf8_lossy(&args[1]).into_owned();
    if host.is_empty() || host.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return Err(CmdError::msg("ERR Invalid master host"));
    }
    let port = port as u16;
    if is_replica(&cx.engine.store) && target(&cx.engine.store) == Some((host.clone(), port)) {
        cx.out.simple(b"OK Already connected to specified master");
        return Ok(());
    }
    let store = cx.engine.store.clone();
    set_target(&store, cx.h(), Some((&host, port)))?;
    cx.out.simple(b"OK");
    Ok(())
}

/// Where a coordinated failover (FAILOVER) stands, as INFO's
/// `master_failover_state` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailoverState {
    /// No failover.
    None,
    /// Writes are paused; the primary waits for a replica to acknowledge
    /// its whole log.
    WaitingForSync,
    /// The primary became a replica of the target and asks it to take over.
    InProgress,
}

impl FailoverState {
    /// INFO's words.
    pub fn name(self) -> &'static str {
        match self {
            FailoverState::None => "no-failover",
            FailoverState::WaitingForSync => "waiting-for-sync",
            FailoverState::InProgress => "failover-in-progress",
        }
    }
}

/// The low bits of `word::FAILOVER_STATE`.
const FAILOVER_WAITING: u64 = 1;
const FAILOVER_IN_PROGRESS: u64 = 2;
/// A worker claimed the word and is writing the request.
const FAILOVER_CLAIMED: u64 = 3;

/// The failover state now.
pub fn failover_state(store: &Store) -> FailoverState {
    match store.config_word(word::FAILOVER_STATE).unwrap_or(0) & 3 {
        0 => FailoverState::None,
        FAILOVER_IN_PROGRESS => FailoverState::InProgress,
        _ => FailoverState::WaitingForSync,
    }
}

/// A failover the supervisor is to run: the raw state word (to move it on
/// with a compare-and-swap, which FAILOVER ABORT can race), the target
/// replica's id in the status file (0: the first replica that catches
/// up), the deadline (ms since the epoch, 0: none) and FORCE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailoverRequest {
    /// `word::FAILOVER_STATE` as read.
    pub word: u64,
    /// The target replica's id (`replicas[].id` in the status file).
    pub replica: u64,
    /// When waiting for the sync gives up (0: never).
    pub deadline_ms: u64,
    /// FORCE: at the deadline, fail over to the target anyway.
    pub force: bool,
    /// `word::FAILOVER_REQUEST` as read (its sequence tells two equal
    /// requests apart).
    pub request: u64,
}

/// Bits of `word::FAILOVER_REQUEST`: FORCE in bit 0, the deadline in the
/// next 41 (ms since the epoch, to 2039), a sequence number above them.
const REQUEST_DEADLINE_BITS: u32 = 41;
const REQUEST_SEQUENCE_SHIFT: u32 = REQUEST_DEADLINE_BITS + 1;

impl FailoverRequest {
    /// Whether this is still the failover in force (FAILOVER ABORT, and
    /// a new FAILOVER after it, replace it).
    pub fn is_current(&self, store: &Store) -> bool {
        failover_word(store) == self.word
            && store.config_word(word::FAILOVER_REQUEST).ok() == Some(self.request)
    }
}

/// `word::FAILOVER_STATE` as it is (to see whether a failover moved on).
pub fn failover_word(store: &Store) -> u64 {
    store.config_word(word::FAILOVER_STATE).unwrap_or(0)
}

/// The failover FAILOVER asked for and nobody has started yet.
pub fn failover_requested(store: &Store) -> Option<FailoverRequest> {
    let word = store.config_word(word::FAILOVER_STATE).ok()?;
    if word & 3 != FAILOVER_WAITING {
        return None;
    }
    let request = store.config_word(word::FAILOVER_REQUEST).ok()?;
    Some(FailoverRequest {
        word,
        replica: word >> 2,
        deadline_ms: (request >> 1) & ((1 << REQUEST_DEADLINE_BITS) - 1),
        force: request & 1 == 1,
        request,
    })
}

/// Moves a failover from waiting-for-sync to in progress (false: it was
/// aborted meanwhile).
pub fn failover_begin(store: &Store, request: &FailoverRequest) -> bool {
    let next = (request.word & !3) | FAILOVER_IN_PROGRESS;
    store
        .swap_config_word(word::FAILOVER_STATE, request.word, next)
        .unwrap_or(false)
}

/// Ends a failover, done or aborted: writes go on.
pub fn failover_end(store: &Store) {
    let _ = store.set_config_word(word::FAILOVER_STATE, 0);
}

/// FAILOVER [TO host port [FORCE]] [TIMEOUT ms] | FAILOVER ABORT: Redis's
/// coordinated failover. The command checks and records the request and
/// pauses writes; the supervisor waits for the replica to acknowledge the
/// whole log, becomes its replica and asks it (SHOAL.SYNC … FAILOVER) to
/// take over, as Redis's PSYNC FAILOVER.
fn failover(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let store = cx.engine.store.clone();
    if args.len() == 2 && crate::parse::is(&args[1], "abort") {
        loop {
            let now = store.config_word(word::FAILOVER_STATE)?;
            if now & 3 == 0 {
                return Err(CmdError::msg("ERR No failover in progress."));
            }
            if store.swap_config_word(word::FAILOVER_STATE, now, 0)? {
                break;
            }
        }
        cx.engine.pause_changed = true;
        cx.out.simple(b"OK");
        return Ok(());
    }
    let mut timeout_ms = 0i64;
    let mut force = false;
    let mut to: Option<(String, i64)> = None;
    let mut j = 1;
    while j < args.len() {
        if crate::parse::is(&args[j], "timeout") && j + 1 < args.len() && timeout_ms == 0 {
            timeout_ms = crate::parse::int(&args[j + 1])?;
            if timeout_ms <= 0 {
                return Err(CmdError::msg("ERR FAILOVER timeout must be greater than 0"));
            }
            j += 2;
        } else if crate::parse::is(&args[j], "to") && j + 2 < args.len() && to.is_none() {
            let port = crate::parse::int(&args[j + 2])?;
            to = Some((String::from_utf8_lossy(&args[j + 1]).into_owned(), port));
            j += 3;
        } else if crate::parse::is(&args[j], "force") && !force {
            force = true;
            j += 1;
        } else {
            return Err(CmdError::msg("ERR syntax error"));
        }
    }
    if failover_state(&store) != FailoverState::None {
        return Err(CmdError::msg("ERR FAILOVER already in progress."));
    }
    if is_replica(&store) {
        return Err(CmdError::msg(
            "ERR FAILOVER is not valid when server is a replica.",
        ));
    }
    let status = read_status(store.path());
    let replicas = online_replicas(&status);
    if replicas.is_empty() {
        return Err(CmdError::msg("ERR FAILOVER requires connected replicas."));
    }
    if force && (timeout_ms == 0 || to.is_none()) {
        return Err(CmdError::msg(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        ));
    }
    let mut replica = 0;
    if let Some((host, port)) = &to {
        let found = replicas
            .iter()
            .find(|r| r["ip"].as_str() == Some(host.as_str()) && r["port"].as_i64() == Some(*port));
        let Some(found) = found else {
            return Err(CmdError::msg(
                "ERR FAILOVER target HOST and PORT is not a replica.",
            ));
        };
        if found["state"] != "online" {
            return Err(CmdError::msg("ERR FAILOVER target replica is not online."));
        }
        replica = found["id"].as_u64().unwrap_or(0);
    }
    let deadline_ms = if timeout_ms > 0 {
        cx.engine.now_ms().saturating_add(timeout_ms as u64)
    } else {
        0
    };
    // Claim the word first, so that a racing FAILOVER cannot overwrite
    // this one's request.
    if !store.swap_config_word(word::FAILOVER_STATE, 0, FAILOVER_CLAIMED)? {
        return Err(CmdError::msg("ERR FAILOVER already in progress."));
    }
    let sequence = (store.config_word(word::FAILOVER_REQUEST)? >> REQUEST_SEQUENCE_SHIFT) + 1;
    store.set_config_word(
        word::FAILOVER_REQUEST,
        (sequence << REQUEST_SEQUENCE_SHIFT)
            | (deadline_ms.min((1 << REQUEST_DEADLINE_BITS) - 1) << 1)
            | u64::from(force),
    )?;
    store.set_config_word(word::FAILOVER_STATE, (replica << 2) | FAILOVER_WAITING)?;
    cx.out.simple(b"OK");
    Ok(())
}

/// WAIT numreplicas timeout: the server polls the replicas' acknowledged
/// offsets until enough have the log up to its head or the time is up.
fn wait(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if is_replica(&cx.engine.store) {
        return Err(CmdError::msg("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated."));
    }
    let numreplicas = crate::parse::int(&args[1])?;
    let timeout = crate::parse::int(&args[2])
        .map_err(|_| CmdError::msg("ERR timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    // Every write acknowledged before WAIT (this client's among them) is
    // below the log's head.
    let offset = cx.engine.store.log_status().head;
    if cx.session.in_multi() {
        // Inside EXEC nothing may wait: the replicas that have it now.
        let n = acked_replicas(&read_status(cx.engine.store.path()), offset);
        cx.out.integer(n as i64);
        return Ok(());
    }
    cx.flow = Flow::Server(ServerRequest::Wait {
        numreplicas: numreplicas.max(0) as u64,
        timeout_ms: timeout as u64,
        offset,
    });
    Ok(())
}

/// How many replicas acknowledged everything before `offset`.
pub fn acked_replicas(status: &Value, offset: u64) -> u64 {
    status["replicas"].as_array().map_or(0, |r| {
        r.iter()
            .filter(|r| r["state"] == "online" && r["ack"].as_u64().unwrap_or(0) >= offset)
            .count() as u64
    })
}

/// SHOAL.SYNC tag offset listening-port node [FAILOVER]: a shoal replica
/// asks to follow this server; the connection goes to the supervisor,
/// which answers. With FAILOVER (sent by a primary during FAILOVER, as
/// Redis's PSYNC FAILOVER) this replica of that primary takes over first.
fn shoal_sync(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let text = |a: &Arg<'_>| String::from_utf8_lossy(a).into_owned();
    let failover = match args.get(5) {
        None => false,
        Some(a) if args.len() == 6 && crate::parse::is(a, "failover") => true,
        Some(_) => return Err(CmdError::msg("ERR syntax error")),
    };
    let offset = crate::parse::int(&args[2])
        .ok()
        .filter(|o| *o >= 0)
        .ok_or_else(|| CmdError::msg("ERR invalid replication offset"))?;
    let port = crate::parse::int(&args[3])
        .ok()
        .filter(|p| (0..=65535).contains(p))
        .ok_or_else(|| CmdError::msg("ERR Invalid listening port"))?;
    let status = read_status(cx.engine.store.path());
    if status["node"].as_str() == Some(text(&args[4]).as_str()) {
        return Err(CmdError::msg(
            "ERR this shoal server cannot replicate from itself",
        ));
    }
    // A primary feeds replicas from its log files or, without `--dir`, from
    // the in-memory backlog its supervisor starts at the first SHOAL.SYNC; a
    // replica feeds them from its relay, which needs a directory.
    let can_feed = !is_replica(&cx.engine.store)
        || (cx.engine.store.log_status().enabled && status["dir"].as_str().is_some());
    if failover {
        if !is_replica(&cx.engine.store) {
            return Err(CmdError::msg(
                "ERR PSYNC FAILOVER can't be sent to a master.",
            ));
        }
        if text(&args[1]) != format!("{:016x}", followed_tag(&cx.engine.store)) {
            return Err(CmdError::msg(
                "ERR PSYNC FAILOVER replid must match my replid.",
            ));
        }
    }
    if !can_feed {
        return Err(CmdError::msg(
            "ERR this shoal replica keeps no log directory to relay its primary's log from: start it with --dir to replicate from it",
        ));
    }
    // A replica feeds its own replicas from its relay; a primary that
    // still holds replicated data its log lacks feeds nobody.
    if !failover && !is_replica(&cx.engine.store) && status["holds_replicated_data"] == true {
        return Err(CmdError::msg(
            "ERR this shoal server holds data it replicated from another primary, which its own log does not hold: replicas cannot follow it",
        ));
    }
    cx.flow = Flow::Server(ServerRequest::Replicate {
        replid: text(&args[1]),
        offset: offset as u64,
        port: port as u16,
        failover,
    });
    Ok(())
}

/// ROLE: master with its offset and replicas, or slave with its primary,
/// the link's state and the offset applied.
pub(crate) fn role(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let store = cx.engine.store.clone();
    let status = read_status(store.path());
    if is_replica(&store) {
        let (host, port) = target(&store).unwrap_or_default();
        let state = match status["link"].as_str() {
            Some("up") => "connected",
            Some("sync") => "sync",
            Some("connecting") => "connecting",
            _ => "connect",
        };
        cx.out.array_len(5);
        cx.out.bulk(b"slave");
        cx.out.bulk(host.as_bytes());
        cx.out.integer(i64::from(port));
        cx.out.bulk(state.as_bytes());
        cx.out.integer(applied_lsn(&store) as i64);
        return Ok(());
    }
    let replicas = online_replicas(&status);
    cx.out.array_len(3);
    cx.out.bulk(b"master");
    cx.out.integer(primary_offset(&store) as i64);
    cx.out.array_len(replicas.len());
    for r in replicas {
        cx.out.array_len(3);
        cx.out.bulk(r["ip"].as_str().unwrap_or("").as_bytes());
        cx.out
            .bulk(r["port"].as_u64().unwrap_or(0).to_string().as_bytes());
        cx.out
            .bulk(r["ack"].as_u64().unwrap_or(0).to_string().as_bytes());
    }
    Ok(())
}

/// A primary's replication offset: its log's head, 0 without a log (no
/// replica can follow it then).
fn primary_offset(store: &Store) -> u64 {
    let log = store.log_status();
    if log.ring_on {
        log.head
    } else {
        0
    }
}

fn online_replicas(status: &Value) -> Vec<&Value> {
    status["replicas"]
        .as_array()
        .map(|r| r.iter().collect())
        .unwrap_or_default()
}

/// INFO's replication section, with the fields redis-sentinel reads.
pub(crate) fn info_section(e: &mut Engine, s: &mut String) {
    let status = read_status(e.store.path());
    let now_ms = e.now_ms();
    let replid = status["replid"]
        .as_str()
        .unwrap_or("0000000000000000000000000000000000000000");
    s.push_str("# Replication\r\n");
    let offset;
    if is_replica(&e.store) {
        let (host, port) = target(&e.store).unwrap_or_default();
        let up = status["link"] == "up";
        offset = applied_lsn(&e.store);
        let last_io = status["last_io_ms"]
            .as_u64()
            .map_or(-1, |t| (now_ms.saturating_sub(t) / 1000) as i64);
        let _ = write!(
            s,
            "role:slave\r\nmaster_host:{host}\r\nmaster_port:{port}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{last_io}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{offset}\r\nslave_repl_offset:{offset}\r\n",
            if up { "up" } else { "down" },
            u8::from(status["link"] == "sync"),
        );
        if !up {
            let since = status["down_since_ms"]
                .as_u64()
                .map_or(-1, |t| (now_ms.saturating_sub(t) / 1000) as i64);
            let _ = write!(s, "master_link_down_since_seconds:{since}\r\n");
        }
        if let Some(err) = status["last_error"].as_str().filter(|e| !e.is_empty()) {
            let _ = write!(s, "shoal_master_link_error:{err}\r\n");
        }
        let text = e.store.config_text().unwrap_or_default();
        let overrides = params::Overrides::parse(&text);
        let priority = overrides.get("replica-priority").unwrap_or("100");
        let read_only = overrides.get("replica-read-only") != Some("no");
        let announced = overrides.get("replica-announced") != Some("no");
        let _ = write!(
            s,
            "slave_priority:{priority}\r\nslave_read_only:{}\r\nreplica_announced:{}\r\n",
            u8::from(read_only),
            u8::from(announced)
        );
    } else {
        s.push_str("role:master\r\n");
        offset = primary_offset(&e.store);
    }
    let replicas = online_replicas(&status);
    let _ = write!(s, "connected_slaves:{}\r\n", replicas.len());
    if e.config.min_replicas_to_write > 0 && e.config.min_replicas_max_lag > 0 {
        let _ = write!(s, "min_slaves_good_slaves:{}\r\n", good_replicas(e));
    }
    // The synchronous mode: how many replicas a write's reply waits for,
    // how long at most, and the LSN that many have applied.
    let _ = write!(
        s,
        "shoal_sync_replicas:{}\r\nshoal_sync_timeout:{}\r\n",
        e.config.replica_sync_count, e.config.replica_sync_timeout
    );
    let level = match e.config.replica_sync_disk {
        true => "disk",
        false => "memory",
    };
    let _ = write!(s, "shoal_sync_level:{level}\r\n");
    if e.config.replica_sync_count > 0 {
        let published = |disk| {
            let acked = sync_acked_word(&e.store, disk);
            match acked >> SYNC_COUNT_SHIFT == e.config.replica_sync_count {
                true => acked & SYNC_LSN_MASK,
                false => 0,
            }
        };
        let _ = write!(
            s,
            "shoal_sync_acked_lsn:{}\r\nshoal_sync_durable_lsn:{}\r\n",
            published(false),
            published(true)
        );
    }
    for (i, r) in replicas.iter().enumerate() {
        let lag = r["last_ack_ms"]
            .as_u64()
            .map_or(0, |t| now_ms.saturating_sub(t) / 1000);
        let _ = write!(
            s,
            "slave{i}:ip={},port={},state={},offset={},lag={lag}\r\n",
            r["ip"].as_str().unwrap_or(""),
            r["port"].as_u64().unwrap_or(0),
            r["state"].as_str().unwrap_or("online"),
            r["ack"].as_u64().unwrap_or(0),
        );
    }
    let _ = write!(
        s,
        "master_failover_state:{}\r\nmaster_replid:{replid}\r\nmaster_replid2:{}\r\nmaster_repl_offset:{offset}\r\nsecond_repl_offset:{}\r\nrepl_backlog_active:{}\r\nrepl_backlog_size:{}\r\nrepl_backlog_first_byte_offset:{}\r\nrepl_backlog_histlen:{}\r\n",
        failover_state(&e.store).name(),
        status["replid2"]
            .as_str()
            .filter(|id| !id.is_empty())
            .unwrap_or("0000000000000000000000000000000000000000"),
        status["second_offset"]
            .as_u64()
            .filter(|&o| o > 0)
            .map_or("-1".to_string(), |o| o.to_string()),
        u8::from(status["dir"].is_string() || status["backlog_size"].is_u64()),
        status["backlog_size"]
            .as_u64()
            .unwrap_or(e.store.log_status().ring_size),
        status["first_lsn"].as_u64().unwrap_or(0),
        offset.saturating_sub(status["first_lsn"].as_u64().unwrap_or(offset)),
    );
}

/// The replication link's messages after the answer line
/// (docs/replication.md): a kind byte, a little-endian u32 length, the
/// body. Shared by the replica's reader and the fuzzing harness.
pub mod link {
    use store::log::frame::{parse_frame, MAX_RECORD};

    /// Bytes of a message header.
    pub const HEADER: usize = 5;
    /// The largest body: a chunk of frames holds at least one whole frame,
    /// which is at most `MAX_RECORD` plus its header.
    pub const MAX_BODY: usize = MAX_RECORD + (1 << 20);

    /// Checks a message header: its kind (`S`, `E`, `L`, `H`, `F` the
    /// function libraries, `D` the disk level's request) and its body's
    /// length.
    pub fn parse_header(head: &[u8; HEADER]) -> Result<(u8, usize), String> {
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > MAX_BODY || !matches!(head[0], b'S' | b'E' | b'L' | b'H' | b'F' | b'D') {
            return Err(format!(
                "the primary sent a malformed message (kind {}, {len} bytes)",
                head[0]
            ));
        }
        Ok((head[0], len))
    }

    /// The u64 an `E` or `H` body carries.
    pub fn parse_position(body: &[u8]) -> Result<u64, String> {
        let b: [u8; 8] = body
            .try_into()
            .map_err(|_| format!("a position message of {} bytes", body.len()))?;
        Ok(u64::from_le_bytes(b))
    }

    /// One checked frame of a body.
    #[derive(Debug, PartialEq, Eq)]
    pub struct Frame<'a> {
        /// Its LSN (a snapshot frame's: the key's version).
        pub lsn: u64,
        /// Its record.
        pub payload: &'a [u8],
        /// Its size in the log (the next frame's LSN in a log body).
        pub size: u64,
    }

    /// Splits a body of whole frames, each checked (length, padding,
    /// CRC). `expect`: a log body's frames are contiguous from there; a
    /// snapshot body's (None) carry any LSN.
    pub fn frames(body: &[u8], expect: Option<u64>) -> Result<Vec<Frame<'_>>, String> {
        let mut out = Vec::new();
        let mut at = 0usize;
        let mut next = expect;
        while at < body.len() {
            let rest = &body[at..];
            let lsn = match next {
                Some(lsn) => lsn,
                None => rest
                    .get(..8)
                    .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
                    .ok_or("a truncated frame")?,
            };
            let (_, payload, size) =
                parse_frame(rest, lsn).map_err(|e| format!("a damaged frame at LSN {lsn}: {e}"))?;
            out.push(Frame { lsn, payload, size });
            at += size as usize;
            next = expect.map(|_| lsn + size);
        }
        Ok(out)
    }

    /// A fuzzing harness: arbitrary bytes as a stream of messages.
    pub mod fuzzing {
        use super::*;
        use store::log::{encode_frame, Record};

        /// Reads `data` as messages and splits their bodies into frames
        /// (as a log body from the LSN of its first eight bytes, and as a
        /// snapshot body), decoding every record; an `F` body is decoded
        /// as function libraries. Panics if an invariant
        /// breaks: accepted frames cover the body exactly and encode back
        /// to its bytes.
        pub fn fuzz_link(data: &[u8]) {
            let mut rest = data;
            while let Some(head) = rest.first_chunk::<HEADER>() {
                let Ok((kind, len)) = parse_header(head) else {
                    return;
                };
                let Some(body) = rest.get(HEADER..HEADER + len) else {
                    return;
                };
                rest = &rest[HEADER + len..];
                if matches!(kind, b'E' | b'H') {
                    let _ = parse_position(body);
                    continue;
                }
                if kind == b'F' {
                    // The function libraries, as a replica checks them.
                    let _ = crate::rdb::verify(body)
                        .ok()
                        .and_then(crate::rdb::decode_functions);
                    continue;
                }
                let first = body
                    .get(..8)
                    .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()));
                for expect in [first, None] {
                    if let Ok(split) = frames(body, expect) {
                        let mut again = Vec::new();
                        for f in &split {
                            let _ = Record::decode(f.payload);
                            encode_frame(f.lsn, f.payload, &mut again);
                        }
                        assert_eq!(again, body, "frames cover the body");
                    }
                }
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use store::log::encode_frame;

        #[test]
        fn frames_are_checked_and_contiguous() {
            let mut body = Vec::new();
            encode_frame(64, b"\x0fab", &mut body);
            let second = 64 + body.len() as u64;
            encode_frame(second, b"\x0fcdef", &mut body);
            let split = frames(&body, Some(64)).unwrap();
            assert_eq!(split.len(), 2);
            assert_eq!(split[1].lsn, second);
            assert!(frames(&body, Some(72)).is_err());
            for i in 0..body.len() {
                let mut bad = body.clone();
                bad[i] ^= 0x10;
                assert!(frames(&bad, Some(64)).is_err(), "a flipped bit at byte {i}");
            }
            let mut stream = vec![b'L'];
            stream.extend_from_slice(&(body.len() as u32).to_le_bytes());
            stream.extend_from_slice(&body);
            stream.extend_from_slice(b"H\x08\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00");
            // Function libraries: whole, then with a flipped byte.
            let libraries = crate::rdb::encode_functions(&[b"#!lua name=l\n".to_vec()]);
            let decoded = crate::rdb::verify(&libraries)
                .ok()
                .and_then(crate::rdb::decode_functions);
            assert_eq!(decoded, Some(vec![b"#!lua name=l\n".to_vec()]));
            let mut damaged = libraries.clone();
            damaged[2] ^= 1;
            assert!(crate::rdb::verify(&damaged)
                .ok()
                .and_then(crate::rdb::decode_functions)
                .is_none());
            for body in [&libraries, &damaged] {
                stream.push(b'F');
                stream.extend_from_slice(&(body.len() as u32).to_le_bytes());
                stream.extend_from_slice(body);
            }
            fuzzing::fuzz_link(&stream);
            fuzzing::fuzz_link(b"Z\xff\xff\xff\xff");
            fuzzing::fuzz_link(b"L\x08\x00\x00\x00\x01");
            assert!(parse_header(b"L\xff\xff\xff\xff").is_err());
        }
    }
}
