//! Replication in the supervisor (docs/replication.md).
//!
//! On a primary, a worker that receives `SHOAL.SYNC` hands the connection
//! here; a sender thread answers `+CONTINUE` (the log from the replica's
//! position, read from the log files) or `+FULLRESYNC` (a snapshot, then
//! the log from the snapshot's start) and then forwards log frames as the
//! log writer puts them in files. Writers never wait for it.
//!
//! On a replica, the link thread connects to the primary's Redis port,
//! checks every frame's CRC and applies the records with the store's
//! replay path (`Handle::apply_record`), a group only once it is closed,
//! and records in the segment how far it applied, so a restart resumes
//! from there.
//!
//! After `+CONTINUE`/`+FULLRESYNC`, the wire carries messages of a kind
//! byte, a little-endian u32 length and that many bytes: `S` snapshot
//! frames, `E` the snapshot's end (u64 start LSN), `L` log frames
//! (contiguous), `H` a heartbeat (u64: the primary's written LSN). The
//! replica answers `A` and the u64 LSN it applied up to.
//!
//! Both sides publish their state in a status file beside the segment,
//! which workers read for ROLE, INFO replication and WAIT.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, IoSlice, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use engine::replication as repl;
use log::LogTail;
use serde_json::{json, Value};
use store::log::{frame::parse_frame, record, GROUP_CONTINUES};
use store::{Handle, Store};

use super::relay::Relay;
use crate::error::Error;

/// Bytes of frames a sender puts in one message.
const CHUNK: usize = 1 << 20;
/// How often an idle sender says it is alive.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// A link that hears nothing for this long is dropped and opened again.
const LINK_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a replica stands on one primary (the status file's `replicas`).
#[derive(Clone, Debug)]
struct ReplicaEntry {
    ip: String,
    port: u16,
    state: &'static str,
    ack: u64,
    last_ack_ms: u64,
    /// The lowest LSN it still has to read from the log files: its
    /// acknowledgement, or the start of the snapshot it is being sent.
    needs: u64,
    /// The LSN it has fsynced on its disk (`replica-sync-level disk`);
    /// None until its first disk acknowledgement (a replica without
    /// `--dir` never sends one).
    disk_ack: Option<u64>,
}

/// What both roles share with the status writer.
struct Shared {
    store: Store,
    dir: Option<PathBuf>,
    node: String,
    port: u16,
    stop: AtomicBool,
    inner: Mutex<Inner>,
    /// Something the status file shows changed (the writer is woken).
    dirty: AtomicBool,
    /// Only replicas' acknowledgements changed: written within
    /// `STATUS_ACKS_EVERY`, or at once when a WAIT asks.
    acks_dirty: AtomicBool,
    /// Until when (ms since the epoch) acknowledgements wake the status
    /// writer at once: a WAIT asked for the file lately.
    acks_urgent_until: AtomicU64,
    /// A replica's relay of its primary's frames, for its own replicas.
    relay: Mutex<Option<Relay>>,
    /// The relay's end (0: no relay), read by the senders of a replica.
    relay_end: AtomicU64,
    /// Bumped when the relay starts over: its senders drop their links.
    relay_epoch: AtomicU64,
    /// Set once a replica of this replica asked (or a FAILOVER made this
    /// server a replica): from then on the link keeps a relay.
    relay_wanted: AtomicBool,
}

#[derive(Default)]
struct Inner {
    /// This server's replication id as a primary.
    replid: String,
    /// The primary's id this replica follows (kept across restarts).
    master_replid: String,
    replicas: HashMap<u64, ReplicaEntry>,
    next_replica: u64,
    /// The replica link: none, connecting, sync, up, down.
    link: &'static str,
    down_since_ms: u64,
    last_io_ms: u64,
    last_error: String,
    /// The history this server followed before its promotion, and the LSN
    /// where its own log continues it (Redis's `master_replid2` and
    /// `second_repl_offset`): a replica of that history at exactly that
    /// LSN gets a partial resync. Empty and 0 when there is none.
    replid2: String,
    second_offset: u64,
    /// The log's head when the replica last applied: own writes after it
    /// (a write taken at promotion) are not in the old history.
    head_while_following: u64,
    /// Where a FAILOVER target restarted its log before it took writes:
    /// its log from there continues the old history exactly.
    prepared_restart: Option<u64>,
    /// Promotions settled so far (a FAILOVER target waits for its own).
    promotions_settled: u64,
    /// The FAILOVER target answered `SHOAL.SYNC … FAILOVER` as a primary.
    failover_answered: bool,
}

static SHARED: OnceLock<Arc<Shared>> = OnceLock::new();

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// 40 random hex digits (a replication id, a node id).
fn random_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    (0..3)
        .map(|i| {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos(),
            );
            h.write_u32(std::process::id());
            h.write_u32(i);
            format!("{:016x}", h.finish())
        })
        .collect::<String>()[..40]
        .to_string()
}

/// The running replication threads.
pub struct Replication {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Replication {
    /// Stops the link and the status writer.
    pub fn stop(self) {
        self.shared.stop.store(true, Ordering::Release);
        changed(&self.shared);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Starts replication: `replicaof` (the flag or the configuration file)
/// makes this server a replica now; otherwise the segment's setting
/// stands (a restarted replica goes on following its primary).
pub fn start(
    store: &Store,
    dir: Option<PathBuf>,
    port: u16,
    replicaof: Option<(String, u16)>,
) -> Result<Replication, Error> {
    let mut h = store.handle()?;
    if let Some((host, port)) = &replicaof {
        if repl::target(store).as_ref() != Some(&(host.clone(), *port)) || !repl::is_replica(store)
        {
            repl::set_target(store, &mut h, Some((host, *port)))?;
        }
    }
    drop(h);
    let replid = dir
        .as_ref()
        .and_then(|d| std::fs::read_to_string(d.join("replication-id")).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| s.len() == 40)
        .unwrap_or_else(|| new_replid(dir.as_deref()));
    if store.created() {
        let _ = repl::set_applied_lsn(store, 0);
        let _ = repl::set_followed_tag(store, 0);
    }
    // A supervisor that stopped in the middle of a FAILOVER's hand-over:
    // writes go on, on whatever role it had reached.
    if repl::failover_state(store) == repl::FailoverState::InProgress {
        println!("shoal: FAILOVER aborted: the server restarted during the hand-over");
        repl::failover_end(store);
    }
    let shared = Arc::new(Shared {
        store: store.clone(),
        dir,
        node: random_id(),
        port,
        stop: AtomicBool::new(false),
        inner: Mutex::new(Inner {
            replid,
            link: "none",
            down_since_ms: now_ms(),
            ..Inner::default()
        }),
        dirty: AtomicBool::new(true),
        acks_dirty: AtomicBool::new(false),
        acks_urgent_until: AtomicU64::new(0),
        relay: Mutex::new(None),
        relay_end: AtomicU64::new(0),
        relay_epoch: AtomicU64::new(0),
        relay_wanted: AtomicBool::new(false),
    });
    let _ = SHARED.set(shared.clone());
    write_status(&shared, &mut FirstLog::default());
    let mut threads = Vec::new();
    let s = shared.clone();
    threads.push(
        std::thread::Builder::new()
            .name("repl-status".into())
            .spawn(move || status_loop(&s))
            .map_err(crate::error::io("start the replication status thread"))?,
    );
    let s = shared.clone();
    threads.push(
        std::thread::Builder::new()
            .name("repl-link".into())
            .spawn(move || link_loop(&s))
            .map_err(crate::error::io("start the replication link thread"))?,
    );
    Ok(Replication { shared, threads })
}

/// A new replication id, kept in the log directory so that a restarted
/// primary (whose log goes on) keeps it.
fn new_replid(dir: Option<&Path>) -> String {
    let id = random_id();
    if let Some(dir) = dir {
        let tmp = dir.join("replication-id.tmp");
        if std::fs::write(&tmp, format!("{id}\n")).is_ok() {
            let _ = std::fs::rename(&tmp, dir.join("replication-id"));
        }
    }
    id
}

/// The marker a server's log directory gets once it has followed a
/// primary: its store then holds keys whose versions are the primary's
/// LSNs, which its own log does not hold, so nobody may replicate from it.
const REPLICATED_MARKER: &str = "replicated-data";

fn holds_replicated_data(dir: Option<&Path>) -> bool {
    dir.is_some_and(|d| d.join(REPLICATED_MARKER).exists())
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Inner> {
    shared.inner.lock().unwrap_or_else(|e| e.into_inner())
}

fn changed(shared: &Shared) {
    shared.dirty.store(true, Ordering::Release);
    repl::want_status(&shared.store);
}

/// Rewrites the status file when something changed or a WAIT asks (and
/// every second, so that `lag` moves). Under a stream of writes replicas
/// acknowledge thousands of times a second; those alone are written at
/// most every `STATUS_ACKS_EVERY` unless a WAIT is polling the file.
fn status_loop(shared: &Shared) {
    let mut last = Instant::now();
    let mut first_log = FirstLog::default();
    let mut seen = repl::status_wanted_word(&shared.store);
    while !shared.stop.load(Ordering::Acquire) {
        if !shared.dirty.load(Ordering::Acquire) {
            repl::wait_status_wanted(&shared.store, seen, repl::STATUS_ACKS_EVERY);
        }
        let now_seen = repl::status_wanted_word(&shared.store);
        let wanted = now_seen != seen;
        seen = now_seen;
        if wanted {
            // A WAIT polls the file: for a while, every acknowledgement is
            // written as it arrives.
            let until = now_ms() + ACKS_URGENT.as_millis() as u64;
            shared.acks_urgent_until.store(until, Ordering::Release);
        }
        // While replicas are attached, `lag` moves every second.
        let busy = !lock(shared).replicas.is_empty() || repl::is_replica(&shared.store);
        // A new `replica-sync-count` is published without waiting for an
        // acknowledgement.
        publish_sync_acked(shared);
        let acks = shared.acks_dirty.load(Ordering::Acquire)
            && (wanted || last.elapsed() >= repl::STATUS_ACKS_EVERY);
        if shared.dirty.swap(false, Ordering::AcqRel)
            || acks
            || (busy && last.elapsed() >= Duration::from_secs(1))
        {
            shared.acks_dirty.store(false, Ordering::Release);
            write_status(shared, &mut first_log);
            last = Instant::now();
            // At most about a thousand rewrites a second under a stream
            // of acknowledgements.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    // What a restart needs is in the segment; the file goes with the server.
    let _ = std::fs::remove_file(repl::status_path(shared.store.path()));
}

/// How long after a WAIT's request acknowledgements are written as they
/// arrive (a WAIT asks again every poll while it waits).
const ACKS_URGENT: Duration = Duration::from_millis(50);

/// How often the status file's first log LSN (INFO's
/// `repl_backlog_first_byte_offset`, nothing else) is read from the log
/// directory again: under a stream of acknowledgements the file is
/// rewritten up to a thousand times a second, and listing the directory
/// each time was a quarter of the rewrite's cost.
const FIRST_LOG_REFRESH: Duration = Duration::from_millis(100);

/// The first LSN of the log files, as last listed.
#[derive(Default)]
struct FirstLog {
    listed: Option<(Instant, Option<u64>)>,
}

impl FirstLog {
    fn get(&mut self, dir: Option<&Path>) -> Option<u64> {
        match self.listed {
            Some((at, lsn)) if at.elapsed() < FIRST_LOG_REFRESH => lsn,
            _ => {
                let lsn = dir
                    .and_then(|d| log::file::list_logs(d).ok())
                    .and_then(|l| l.first().map(|f| f.lsn));
                self.listed = Some((Instant::now(), lsn));
                lsn
            }
        }
    }
}

fn write_status(shared: &Shared, first_log: &mut FirstLog) {
    let first_lsn = first_log.get(shared.dir.as_deref());
    // Without a directory: the in-memory backlog, once a replica started it.
    let backlog = super::backlog::current().map(|b| b.span().0);
    let first_lsn = first_lsn.or(backlog);
    let backlog_size = backlog.map(|_| repl::backlog_size(&shared.store));
    let status = {
        let inner = lock(shared);
        let mut replicas: Vec<(&u64, &ReplicaEntry)> = inner.replicas.iter().collect();
        replicas.sort_by_key(|(id, _)| **id);
        let is_replica = repl::is_replica(&shared.store);
        json!({
            "node": shared.node,
            "dir": shared.dir.as_ref().map(|d| d.display().to_string()),
            "replid": if is_replica && !inner.master_replid.is_empty() { &inner.master_replid } else { &inner.replid },
            "own_replid": inner.replid,
            "replid2": inner.replid2,
            "second_offset": inner.second_offset,
            "master_replid": inner.master_replid,
            "first_lsn": first_lsn,
            "backlog_size": backlog_size,
            "holds_replicated_data": holds_replicated_data(shared.dir.as_deref()),
            "link": inner.link,
            "down_since_ms": inner.down_since_ms,
            "last_io_ms": inner.last_io_ms,
            "last_error": inner.last_error,
            "replicas": replicas.iter().map(|(id, r)| json!({
                "id": id, "ip": r.ip, "port": r.port, "state": r.state, "ack": r.ack, "last_ack_ms": r.last_ack_ms,
                "disk_ack": r.disk_ack,
            })).collect::<Vec<_>>(),
        })
    };
    let path = repl::status_path(shared.store.path());
    let mut tmp = path.clone().into_os_string();
    tmp.push(".tmp");
    if std::fs::write(&tmp, status.to_string()).is_ok() {
        let _ = std::fs::rename(&tmp, &path);
    }
}

/// `ctl status`'s replication part: the role, the link of a replica, and
/// each replica of a primary with its acknowledged LSN and its lag in log
/// bytes and in milliseconds since its last acknowledgement.
pub fn ctl_status() -> Value {
    let Some(shared) = SHARED.get() else {
        return json!({});
    };
    let store = &shared.store;
    let now = now_ms();
    let head = store.log_status().head;
    let inner = lock(shared);
    if repl::is_replica(store) {
        let (host, port) = repl::target(store).unwrap_or_default();
        return json!({
            "role": "replica",
            "primary": format!("{host}:{port}"),
            "link": inner.link,
            "applied_lsn": repl::applied_lsn(store),
            "last_error": inner.last_error,
        });
    }
    let mut replicas: Vec<(&u64, &ReplicaEntry)> = inner.replicas.iter().collect();
    replicas.sort_by_key(|(id, _)| **id);
    json!({
        "role": "primary",
        "replid": inner.replid,
        "replicas": replicas.iter().map(|(_, r)| json!({
            "addr": format!("{}:{}", r.ip, r.port),
            "state": r.state,
            "acked_lsn": r.ack,
            "lag_bytes": head.saturating_sub(r.ack),
            "lag_ms": now.saturating_sub(r.last_ack_ms),
        })).collect::<Vec<_>>(),
    })
}

// ---- the primary's side ----

/// The lowest LSN a connected replica still has to read from the log
/// files (u64::MAX: none): snapshots prune no log file at or after it.
pub fn needed_by_replicas() -> u64 {
    let Some(shared) = SHARED.get() else {
        return u64::MAX;
    };
    // A replica's own replicas read its relay, not its log files.
    if repl::is_replica(&shared.store) {
        return u64::MAX;
    }
    lock(shared)
        .replicas
        .values()
        .map(|r| r.needs)
        .min()
        .unwrap_or(u64::MAX)
}

/// Takes a replica's link (SHOAL.SYNC) from a worker: a sender thread
/// serves it until it closes.
pub fn serve_replica(fd: OwnedFd, link: &Value) {
    let Some(shared) = SHARED.get().cloned() else {
        return;
    };
    let stream = TcpStream::from(fd);
    let replid = link["replid"].as_str().unwrap_or("?").to_string();
    let offset = link["offset"].as_u64().unwrap_or(0);
    let port = link["port"].as_u64().unwrap_or(0) as u16;
    let failover = link["failover"] == true;
    let ip = link["addr"]
        .as_str()
        .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
        .map_or(String::new(), |a| a.ip().to_string());
    let _ = std::thread::Builder::new()
        .name("repl-sender".into())
        .spawn(move || {
            let mut stream = stream;
            if failover {
                if let Err(e) = take_over(&shared) {
                    println!("shoal: FAILOVER from {ip}:{port} refused: {e}");
                    let _ = stream.write_all(format!("-ERR {e}\r\n").as_bytes());
                    return;
                }
            }
            let id = {
                let mut inner = lock(&shared);
                inner.next_replica += 1;
                let id = inner.next_replica;
                inner.replicas.insert(
                    id,
                    ReplicaEntry {
                        ip: ip.clone(),
                        port,
                        state: "wait_bgsave",
                        ack: 0,
                        last_ack_ms: now_ms(),
                        needs: offset,
                        disk_ack: None,
                    },
                );
                id
            };
            changed(&shared);
            if let Err(e) = send(&shared, id, stream, &replid, offset) {
                println!("shoal: replica {ip}:{port}: link closed: {e}");
            }
            lock(&shared).replicas.remove(&id);
            changed(&shared);
        });
}

fn set_replica(shared: &Shared, id: u64, f: impl FnOnce(&mut ReplicaEntry)) {
    if let Some(r) = lock(shared).replicas.get_mut(&id) {
        f(r);
    }
    changed(shared);
}

/// Writes one link message: its 5-byte head (kind, little-endian u32
/// length) and the body in one vectored write (the body, up to a chunk of
/// frames, is not copied).
fn write_message(stream: &mut TcpStream, kind: u8, body: &[u8]) -> std::io::Result<()> {
    let mut head = [0u8; 5];
    head[0] = kind;
    head[1..].copy_from_slice(&(body.len() as u32).to_le_bytes());
    let (mut head, mut body) = (&head[..], body);
    while !head.is_empty() || !body.is_empty() {
        let n = match stream.write_vectored(&[IoSlice::new(head), IoSlice::new(body)]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let from_head = n.min(head.len());
        head = &head[from_head..];
        body = &body[n - from_head..];
    }
    Ok(())
}

/// The snapshot of a full resync on the wire: records as frames in `S`
/// messages of about [`CHUNK`] bytes, then `E` with the snapshot's start.
struct SnapshotSender<'a> {
    stream: &'a mut TcpStream,
    chunk: Vec<u8>,
    frames: u64,
}

impl<'a> SnapshotSender<'a> {
    fn new(stream: &'a mut TcpStream) -> SnapshotSender<'a> {
        SnapshotSender {
            stream,
            chunk: Vec::with_capacity(CHUNK),
            frames: 0,
        }
    }

    fn record(&mut self, lsn: u64, payload: &[u8]) -> std::io::Result<()> {
        self.frames += 1;
        store::log::encode_frame(lsn, payload, &mut self.chunk);
        if self.chunk.len() >= CHUNK {
            write_message(self.stream, b'S', &self.chunk)?;
            self.chunk.clear();
        }
        Ok(())
    }

    /// Sends what is left and the end; returns the records sent.
    fn end(self, start: u64) -> std::io::Result<u64> {
        if !self.chunk.is_empty() {
            write_message(self.stream, b'S', &self.chunk)?;
        }
        write_message(self.stream, b'E', &start.to_le_bytes())?;
        Ok(self.frames)
    }
}

/// The streaming part of a link to a replica: log frames as `L` messages,
/// and an `H` heartbeat with the position when nothing was sent for
/// [`HEARTBEAT`].
struct FrameSender {
    last_sent: Instant,
    /// The function libraries' generation last sent (None: not yet).
    functions_sent: Option<u64>,
    /// Whether the replica was asked for disk acknowledgements.
    disk_asked: bool,
}

impl FrameSender {
    fn new() -> FrameSender {
        FrameSender {
            last_sent: Instant::now(),
            functions_sent: None,
            disk_asked: false,
        }
    }

    /// Under `replica-sync-level disk`, asks the replica to fsync what it
    /// receives and acknowledge that too (a `D` message, body 1; body 0
    /// when the level goes back to memory). Never sent at the memory
    /// level, so that level's link is as it was.
    fn disk_level(&mut self, stream: &mut TcpStream, store: &Store) -> std::io::Result<()> {
        let disk = repl::sync_level_disk(store);
        if disk == self.disk_asked {
            return Ok(());
        }
        self.disk_asked = disk;
        self.send(stream, b'D', &[disk as u8])
    }

    /// Sends the function libraries as an `F` message when the link has not
    /// had them yet or they changed since (FUNCTION LOAD, DELETE, FLUSH,
    /// RESTORE: docs/replication.md, "Functions").
    fn functions(&mut self, stream: &mut TcpStream, store: &Store) -> std::io::Result<()> {
        if self.functions_sent == Some(engine::functions_generation(store)) {
            return Ok(());
        }
        let (generation, libraries) = engine::libraries_for_replica(store);
        self.functions_sent = Some(generation);
        if libraries.len() > repl::link::MAX_BODY {
            println!(
                "shoal: the function libraries ({} bytes) are too large for the replication link: not sent",
                libraries.len()
            );
            return Ok(());
        }
        self.send(stream, b'F', &libraries)
    }

    /// Sends `chunk` (and empties it).
    fn frames(&mut self, stream: &mut TcpStream, chunk: &mut Vec<u8>) -> std::io::Result<()> {
        self.send(stream, b'L', chunk)?;
        chunk.clear();
        Ok(())
    }

    /// Sends a heartbeat saying the frames end at `upto`, if one is due.
    fn heartbeat(&mut self, stream: &mut TcpStream, upto: u64) -> std::io::Result<()> {
        if self.last_sent.elapsed() >= HEARTBEAT {
            self.send(stream, b'H', &upto.to_le_bytes())?;
        }
        Ok(())
    }

    fn send(&mut self, stream: &mut TcpStream, kind: u8, body: &[u8]) -> std::io::Result<()> {
        write_message(stream, kind, body)?;
        self.last_sent = Instant::now();
        Ok(())
    }
}

/// An acknowledgement from a replica: `A` (applied) or `D` (fsynced) and
/// the LSN, little-endian.
const ACK_MESSAGE: usize = 9;
/// Room for a few hundred acknowledgements per read.
const ACK_BUFFER: usize = 4096;

/// Reads a replica's acknowledgements on their own thread; the flag says
/// the link closed.
fn read_acks(
    shared: &Arc<Shared>,
    id: u64,
    stream: &TcpStream,
) -> std::io::Result<Arc<AtomicBool>> {
    let closed = Arc::new(AtomicBool::new(false));
    let reader = stream.try_clone()?;
    let (flag, shared) = (closed.clone(), shared.clone());
    std::thread::Builder::new()
        .name("repl-acks".into())
        .spawn(move || {
            // Buffered: under a stream of writes the replica acknowledges
            // often, and every acknowledgement already in the buffer is
            // taken in one go (they only grow: the last one counts).
            let mut reader = BufReader::with_capacity(ACK_BUFFER, reader);
            let mut b = [0u8; ACK_MESSAGE];
            'link: while reader.read_exact(&mut b).is_ok() {
                let (mut ack, mut disk) = (None, None);
                loop {
                    let lsn = u64::from_le_bytes(b[1..].try_into().unwrap_or_default());
                    match b[0] {
                        b'A' => ack = Some(lsn),
                        // What it has fsynced (asked by a `D` message).
                        b'D' => disk = Some(lsn),
                        _ => break 'link,
                    }
                    if reader.buffer().len() < ACK_MESSAGE || reader.read_exact(&mut b).is_err() {
                        break;
                    }
                }
                if let Some(r) = lock(&shared).replicas.get_mut(&id) {
                    if let Some(lsn) = ack {
                        r.ack = lsn;
                        r.needs = lsn;
                        r.last_ack_ms = now_ms();
                    }
                    if disk.is_some() {
                        r.disk_ack = disk;
                    }
                }
                // The synchronous mode reads the segment, at once; the
                // status file (WAIT, INFO) gets it from the status writer.
                shared.acks_dirty.store(true, Ordering::Release);
                if now_ms() < shared.acks_urgent_until.load(Ordering::Acquire) {
                    repl::want_status(&shared.store);
                }
                publish_sync_acked(&shared);
            }
            flag.store(true, Ordering::Release);
        })?;
    Ok(closed)
}

/// The synchronous mode: publishes what `replica-sync-count` online
/// replicas have acknowledged, for the workers holding replies.
fn publish_sync_acked(shared: &Shared) {
    // Under the lock: two acknowledgement threads never publish out of order.
    let inner = lock(shared);
    let online = || inner.replicas.values().filter(|r| r.state == "online");
    let mut acks: Vec<u64> = online().map(|r| r.ack).collect();
    repl::publish_sync_acked(&shared.store, false, &mut acks);
    let mut durable: Vec<u64> = online().filter_map(|r| r.disk_ack).collect();
    repl::publish_sync_acked(&shared.store, true, &mut durable);
}

/// Serves one replica: the answer line, a snapshot if needed, then the log.
fn send(
    shared: &Arc<Shared>,
    id: u64,
    mut stream: TcpStream,
    replid: &str,
    offset: u64,
) -> std::io::Result<()> {
    let io_err = |what: String| std::io::Error::other(what);
    stream.set_nonblocking(false)?;
    // A TLS link reaches here as one end of a socket pair whose other
    // end the worker holding the TLS session pumps: no TCP options there.
    let _ = stream.set_nodelay(true);
    stream.set_write_timeout(Some(LINK_TIMEOUT))?;
    if shared.dir.is_none() && !repl::is_replica(&shared.store) {
        let res = send_backlog(shared, id, stream, replid, offset);
        if let Some(b) = super::backlog::current() {
            b.unpin(id);
        }
        return res;
    }
    let dir = shared
        .dir
        .clone()
        .ok_or_else(|| io_err("no log directory".into()))?;
    if repl::is_replica(&shared.store) {
        return send_relay(shared, id, stream, replid, offset, &dir);
    }
    let ring = shared.store.log_ring();
    let (own, replid2, second_offset) = {
        let inner = lock(shared);
        (
            inner.replid.clone(),
            inner.replid2.clone(),
            inner.second_offset,
        )
    };
    // A replica of the history this server followed before its promotion,
    // at exactly the LSN where its own log continues that history.
    let continues_old_history = !replid2.is_empty()
        && offset == second_offset
        && replid == format!("{:016x}", repl::replid_tag(&replid2));
    let closed = read_acks(shared, id, &stream)?;
    let written = || ring.status().released;
    // A partial resync when the replica follows this history and the files
    // still hold its position (and it is a frame's start).
    let mut first = Vec::new();
    let mut tail = None;
    if replid == format!("{:016x}", repl::replid_tag(&own)) || continues_old_history {
        // A replica that had frames from the ring may be past what the log
        // writer has put in files yet: give the writer a moment.
        let began = Instant::now();
        while offset > written()
            && offset <= ring.head()
            && began.elapsed() < Duration::from_secs(2)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        if let Some(mut t) = LogTail::open(&dir, offset)? {
            let upto = written();
            if offset <= upto && t.read(upto, &mut first, 1).is_ok() {
                tail = Some(t);
            }
        }
    }
    let tail = match tail {
        Some(t) => {
            stream.write_all(format!("+CONTINUE {own} {offset}\r\n").as_bytes())?;
            println!("shoal: replica {id}: partial resync from LSN {offset}");
            t
        }
        None => {
            let snapshot = newest_snapshot(&dir)?;
            let start = match &snapshot {
                Some((_, lsn)) => *lsn,
                // Every frame before `released` belongs to a committed
                // write, which the walk sees; the later ones follow it.
                None => ring.status().released,
            };
            stream.write_all(format!("+FULLRESYNC {own} {start}\r\n").as_bytes())?;
            set_replica(shared, id, |r| {
                r.state = "send_bulk";
                r.needs = start;
            });
            let began = Instant::now();
            let mut sender = SnapshotSender::new(&mut stream);
            match &snapshot {
                None => stream_store(&shared.store, &mut sender)?,
                Some((path, _)) => {
                    let mut failed: Option<std::io::Error> = None;
                    log::read_snapshot(path, &mut |lsn, payload| {
                        sender.record(lsn, payload).map_err(|e| {
                            failed = Some(e);
                            "the replica is gone".into()
                        })
                    })
                    .map_err(|e| failed.take().unwrap_or_else(|| io_err(e.to_string())))?;
                }
            }
            let frames = sender.end(start)?;
            println!(
                "shoal: replica {id}: full resync: {} at LSN {start} ({frames} records) sent in {:.3} s",
                if snapshot.is_some() { "snapshot" } else { "the store" },
                began.elapsed().as_secs_f64()
            );
            LogTail::open(&dir, start)?
                .ok_or_else(|| io_err(format!("the log files no longer hold LSN {start}")))?
        }
    };
    set_replica(shared, id, |r| r.state = "online");
    let mut chunk = first;
    let mut pos = tail.position();
    let mut tail = Some(tail);
    let mut sender = FrameSender::new();
    while !closed.load(Ordering::Acquire) && !shared.stop.load(Ordering::Acquire) {
        sender.functions(&mut stream, &shared.store)?;
        sender.disk_level(&mut stream, &shared.store)?;
        // This server now follows another: its replicas must look again
        // (FAILOVER's hand-over still needs the link to its target).
        if repl::is_replica(&shared.store)
            && repl::failover_state(&shared.store) == repl::FailoverState::None
        {
            break;
        }
        // Read before looking for frames: a worker that asks after this
        // (the synchronous mode) ends the wait below at once.
        let wanted = repl::sync_wanted_word(&shared.store);
        let upto = written();
        if pos < upto && chunk.len() < CHUNK {
            // In the files: read them.
            if tail.as_ref().is_none_or(|t| t.position() != pos) {
                tail = LogTail::open(&dir, pos)?;
            }
            let t = tail
                .as_mut()
                .ok_or_else(|| io_err(format!("the log files no longer hold LSN {pos}")))?;
            pos = t.read(upto, &mut chunk, CHUNK)?;
        } else if chunk.is_empty() {
            // Not in the files yet: complete frames are still in the ring,
            // so the replica need not wait for the log writer. A frame the
            // writer released (and zeroed) meanwhile fails its check and is
            // read from the files instead.
            if let Ok(end) = ring.read_frames(pos, &mut chunk, CHUNK) {
                if end > pos && frames_check(&chunk, pos) {
                    pos = end;
                } else {
                    chunk.clear();
                }
            }
        }
        if !chunk.is_empty() {
            // Looked at again after reading: a frame written under the
            // disk level (its worker saw the new setting first) follows
            // the `D` that asks for it to be fsynced, never precedes it.
            sender.disk_level(&mut stream, &shared.store)?;
            sender.frames(&mut stream, &mut chunk)?;
            continue;
        }
        sender.heartbeat(&mut stream, upto)?;
        repl::wait_sync_wanted(&shared.store, wanted, Duration::from_millis(1));
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
    Ok(())
}

/// Serves a replica of this replica (a chained replica): positions and
/// the replication id are the top primary's. A partial resync when the
/// relay holds its position; otherwise a full resync from a walk of the
/// store (a fuzzy snapshot at the LSN applied when the walk began), then
/// the relay from there.
fn send_relay(
    shared: &Arc<Shared>,
    id: u64,
    mut stream: TcpStream,
    replid: &str,
    offset: u64,
    dir: &Path,
) -> std::io::Result<()> {
    let io_err = |what: String| std::io::Error::other(what);
    let relay_dir = dir.join("relay");
    let store = shared.store.clone();
    let epoch = shared.relay_epoch.load(Ordering::Acquire);
    let master = lock(shared).master_replid.clone();
    let relay_end = || shared.relay_end.load(Ordering::Acquire);
    if master.is_empty() || lock(shared).link != "up" {
        stream.write_all(b"-NOMASTERLINK Can't SYNC while not connected with my master\r\n")?;
        return Ok(());
    }
    if relay_end() == 0 {
        // The link starts the relay with its next message (a heartbeat
        // within a second at the latest).
        shared.relay_wanted.store(true, Ordering::Release);
        stream.write_all(
            b"-ERR this replica is starting to relay its primary's log: try again\r\n",
        )?;
        return Ok(());
    }
    let closed = read_acks(shared, id, &stream)?;
    let mut tail = None;
    // A replica of this server's own history before FAILOVER made it a
    // replica, at exactly where that history ends: the relay starts there.
    let (replid2, second_offset) = {
        let inner = lock(shared);
        (inner.replid2.clone(), inner.second_offset)
    };
    let own_history = !replid2.is_empty()
        && offset == second_offset
        && replid == format!("{:016x}", repl::replid_tag(&replid2));
    if (replid == format!("{:016x}", repl::replid_tag(&master)) || own_history)
        && offset <= relay_end()
    {
        tail = LogTail::open(&relay_dir, offset)?;
    }
    let tail = match tail {
        Some(t) => {
            stream.write_all(format!("+CONTINUE {master} {offset}\r\n").as_bytes())?;
            println!("shoal: replica {id}: partial resync from LSN {offset} (relayed)");
            t
        }
        None => {
            let start = repl::applied_lsn(&store);
            stream.write_all(format!("+FULLRESYNC {master} {start}\r\n").as_bytes())?;
            set_replica(shared, id, |r| r.state = "send_bulk");
            let began = Instant::now();
            let mut sender = SnapshotSender::new(&mut stream);
            stream_store(&store, &mut sender)?;
            let frames = sender.end(start)?;
            println!(
                "shoal: replica {id}: full resync: the store at LSN {start} ({frames} records) sent in {:.3} s",
                began.elapsed().as_secs_f64()
            );
            LogTail::open(&relay_dir, start)?
                .ok_or_else(|| io_err(format!("the relay no longer holds LSN {start}")))?
        }
    };
    set_replica(shared, id, |r| r.state = "online");
    let mut tail = tail;
    let mut chunk = Vec::new();
    let mut sender = FrameSender::new();
    while !closed.load(Ordering::Acquire) && !shared.stop.load(Ordering::Acquire) {
        sender.functions(&mut stream, &shared.store)?;
        // Promoted, or the relay started over: the replica looks again.
        if !repl::is_replica(&store) || shared.relay_epoch.load(Ordering::Acquire) != epoch {
            break;
        }
        let upto = relay_end();
        if tail.position() < upto {
            tail.read(upto, &mut chunk, CHUNK)?;
            sender.frames(&mut stream, &mut chunk)?;
            continue;
        }
        sender.heartbeat(&mut stream, upto)?;
        std::thread::sleep(Duration::from_millis(1));
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
    Ok(())
}

/// Serves a replica of a primary without `--dir` from the in-memory
/// backlog (started by the first replica): a partial resync when the
/// backlog holds its position, otherwise a walk of the store at the
/// backlog's end, then the backlog from there. The walk's start is pinned
/// in the backlog, so no frame after it goes before it is sent.
fn send_backlog(
    shared: &Arc<Shared>,
    id: u64,
    mut stream: TcpStream,
    replid: &str,
    offset: u64,
) -> std::io::Result<()> {
    let io_err = |what: String| std::io::Error::other(what);
    let store = shared.store.clone();
    let backlog = super::backlog::start(&store).map_err(io_err)?;
    let own = lock(shared).replid.clone();
    let closed = read_acks(shared, id, &stream)?;
    let mut chunk = Vec::new();
    let mut resume = None;
    if replid == format!("{:016x}", repl::replid_tag(&own)) && backlog.pin(id, offset) {
        let (_, end) = backlog.span();
        let end_or_frame = offset == end
            || backlog
                .read(id, offset, &mut chunk, 1, Duration::ZERO)
                .is_ok_and(|to| to > offset && frames_check(&chunk, offset));
        if end_or_frame {
            resume = Some(offset);
        } else {
            chunk.clear();
        }
    }
    let mut pos = match resume {
        Some(pos) => {
            stream.write_all(format!("+CONTINUE {own} {pos}\r\n").as_bytes())?;
            println!("shoal: replica {id}: partial resync from LSN {pos} (in-memory backlog)");
            pos + chunk.len() as u64
        }
        None => {
            let start = backlog.pin_end(id);
            stream.write_all(format!("+FULLRESYNC {own} {start}\r\n").as_bytes())?;
            set_replica(shared, id, |r| {
                r.state = "send_bulk";
                r.needs = start;
            });
            let began = Instant::now();
            let mut sender = SnapshotSender::new(&mut stream);
            stream_store(&store, &mut sender)?;
            let frames = sender.end(start)?;
            println!(
                "shoal: replica {id}: full resync: the store at LSN {start} ({frames} records) sent in {:.3} s",
                began.elapsed().as_secs_f64()
            );
            start
        }
    };
    set_replica(shared, id, |r| r.state = "online");
    let mut sender = FrameSender::new();
    while !closed.load(Ordering::Acquire) && !shared.stop.load(Ordering::Acquire) {
        sender.functions(&mut stream, &shared.store)?;
        sender.disk_level(&mut stream, &shared.store)?;
        if repl::is_replica(&store) {
            break;
        }
        if !chunk.is_empty() {
            sender.frames(&mut stream, &mut chunk)?;
            continue;
        }
        pos = backlog
            .read(id, pos, &mut chunk, CHUNK, Duration::from_millis(100))
            .map_err(io_err)?;
        if chunk.is_empty() {
            sender.heartbeat(&mut stream, pos)?;
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
    Ok(())
}

/// Sends a fuzzy snapshot of the store: every key's whole value with its
/// version as LSN (the walk of `Handle::snapshot_records`, which locks one
/// bucket at a time).
fn stream_store(store: &Store, sender: &mut SnapshotSender<'_>) -> std::io::Result<()> {
    let mut h = store
        .handle()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    h.snapshot_records(&mut |lsn, payload| sender.record(lsn, payload))
        .map_err(|e| std::io::Error::other(e.to_string()))?
}

/// Whether `bytes` are whole, valid frames, the first at `lsn`.
pub(super) fn frames_check(bytes: &[u8], mut lsn: u64) -> bool {
    let mut at = 0;
    while at < bytes.len() {
        match parse_frame(&bytes[at..], lsn) {
            Ok((_, _, size)) => {
                at += size as usize;
                lsn += size;
            }
            Err(_) => return false,
        }
    }
    true
}

/// The base of a full resync when there is one: the newest snapshot whose
/// start the log files still hold (its file and the log after it are
/// sent). Without one, the store itself is walked and streamed (as
/// Redis's diskless sync): bounded by the data, where the whole log of a
/// server that never took a snapshot can be many times larger, and with no
/// snapshot written to disk first.
fn newest_snapshot(dir: &Path) -> std::io::Result<Option<(PathBuf, u64)>> {
    for s in log::file::list_snapshots(dir)?.iter().rev() {
        if LogTail::open(dir, s.lsn)?.is_some() {
            return Ok(Some((s.path.clone(), s.lsn)));
        }
    }
    Ok(None)
}

// ---- the replica's side ----

fn link_loop(shared: &Arc<Shared>) {
    // A server that stopped in the middle of its promotion (its directory
    // still has the marker) finishes it.
    let mut was_replica =
        repl::is_replica(&shared.store) || holds_replicated_data(shared.dir.as_deref());
    let mut unsettled = false;
    let mut last_try: Option<Instant> = None;
    while !shared.stop.load(Ordering::Acquire) {
        let generation = repl::generation(&shared.store);
        if !repl::is_replica(&shared.store) {
            if was_replica {
                // REPLICAOF NO ONE: a new history starts here.
                let dir = shared.dir.clone();
                let mut inner = lock(shared);
                inner.replid2.clear();
                inner.second_offset = 0;
                inner.replid = new_replid(dir.as_deref());
                inner.link = "none";
                inner.last_error.clear();
                println!(
                    "shoal: promoted to primary, replication id {}",
                    inner.replid
                );
                drop(inner);
                changed(shared);
                was_replica = false;
                unsettled = true;
            }
            if unsettled && last_try.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                last_try = Some(Instant::now());
                match settle_promotion(shared) {
                    Ok(()) => unsettled = false,
                    Err(e) => println!("shoal: promotion: {e}; trying again"),
                }
            }
            if let Some(request) = repl::failover_requested(&shared.store) {
                if let Some((host, port)) = wait_for_failover_target(shared, &request) {
                    was_replica = fail_over_to(shared, &host, port, request.force);
                }
                continue;
            }
            // A primary's link thread only watches for REPLICAOF and
            // failover requests: 20 ms is soon enough for those (Redis's
            // replication cron runs once a second), and an idle server
            // wakes 50 times a second for it rather than 200.
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        if unsettled {
            // Following again before the promotion settled: writes it took
            // meanwhile are not the old history, so no partial resync.
            let _ = forget_applied(&shared.store);
            unsettled = false;
        }
        was_replica = true;
        if shared.dir.is_none() {
            super::backlog::stop(&shared.store);
        }
        if let Some(dir) = &shared.dir {
            if !holds_replicated_data(Some(dir)) {
                let _ = std::fs::write(
                    dir.join(REPLICATED_MARKER),
                    "this server followed a primary: see docs/replication.md\n",
                );
            }
        }
        let Some((host, port)) = repl::target(&shared.store) else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        {
            let mut inner = lock(shared);
            if inner.link == "none" {
                inner.down_since_ms = now_ms();
            }
            inner.link = "connecting";
        }
        changed(shared);
        let result = follow(shared, &host, port, generation, false);
        {
            let mut inner = lock(shared);
            if inner.link == "up" || inner.link == "sync" {
                inner.down_since_ms = now_ms();
            }
            inner.link = "down";
            if let Err(e) = &result {
                if inner.last_error != *e {
                    println!("shoal: replication from {host}:{port}: {e}");
                }
                inner.last_error = e.clone();
            }
        }
        changed(shared);
        // Try again in a second, at once if REPLICAOF changed the target.
        let began = Instant::now();
        while began.elapsed() < Duration::from_secs(1)
            && repl::generation(&shared.store) == generation
            && !shared.stop.load(Ordering::Acquire)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Makes a promoted server one that replicas can follow
/// (docs/replication.md, "Promotion"): its keys carry the old primary's
/// LSNs as versions, which its own log never held. So its log restarts
/// past every version (the LSN space moves on, as Redis's PSYNC2 keeps the
/// offset), then a snapshot taken after that restart puts the replicated
/// data in its directory, and only then does the marker go that made
/// `SHOAL.SYNC` refuse replicas. Until then what it applied stays known.
fn settle_promotion(shared: &Shared) -> Result<(), String> {
    let store = &shared.store;
    let Some(dir) = shared.dir.as_deref() else {
        return forget_applied(store);
    };
    let mut h = store.handle().map_err(|e| e.to_string())?;
    let ring = h.log_ring();
    let applied = repl::applied_lsn(store);
    let old_history = lock(shared).master_replid.clone();
    let prepared = lock(shared).prepared_restart.take();
    let (restarted, untouched) = match prepared {
        // A FAILOVER target restarted its log before it took any write.
        Some(at) => (at, true),
        None => restart_past_versions(shared, &mut h, applied)?,
    };
    drop(h);
    println!("shoal: promotion: the log goes on at LSN {restarted}, above every replicated version; snapshot follows");
    let n = ring.request_snapshot().map_err(|e| e.to_string())?;
    while ring.snapshot_answered() < n {
        if shared.stop.load(Ordering::Acquire) {
            lock(shared).prepared_restart = prepared;
            return Err("stopping".into());
        }
        ring.wait_snapshot_change(Duration::from_millis(100));
    }
    let status = ring.status();
    if status.snapshot_last_failed || status.snapshot_start_lsn < restarted {
        lock(shared).prepared_restart = prepared;
        return Err("the snapshot after the promotion failed".into());
    }
    std::fs::remove_file(dir.join(REPLICATED_MARKER))
        .or_else(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Ok(()),
            _ => Err(e),
        })
        .map_err(|e| format!("removing {REPLICATED_MARKER}: {e}"))?;
    forget_applied(store)?;
    {
        let mut inner = lock(shared);
        if untouched && applied > 0 && restarted == applied && !old_history.is_empty() {
            inner.replid2 = old_history;
            inner.second_offset = restarted;
        }
        inner.promotions_settled += 1;
    }
    println!(
        "shoal: promotion: snapshot at LSN {} holds the replicated data; replicas may follow",
        status.snapshot_start_lsn
    );
    changed(shared);
    Ok(())
}

/// Restarts a promoted server's log past every version its keys carry
/// (the first step of `settle_promotion`). Returns where the log goes on
/// and whether the server wrote nothing of its own since it last applied.
fn restart_past_versions(
    shared: &Shared,
    h: &mut Handle,
    applied: u64,
) -> Result<(u64, bool), String> {
    let ring = h.log_ring();
    // The highest version a key carries: the replicated keys' are the old
    // primary's LSNs (a walk, because a store recovered from a snapshot no
    // longer knows what it applied).
    let mut top = 0;
    h.snapshot_records(&mut |lsn, _| {
        top = top.max(lsn);
        Ok(())
    })
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())?;
    // Past the frame at `top` and at least where the replicated history
    // ends (the frame at a version ends past it): every new LSN is then
    // above every version.
    let target = applied.max(top.saturating_add(8));
    let following_head = lock(shared).head_while_following;
    h.exclusive(|_| {
        // No write of its own since it last applied: its log from the
        // restart on continues the old history exactly.
        let untouched = ring.head() == following_head;
        Ok(super::persistence::restart_log_at(&ring, target).map(|at| (at, untouched)))
    })
    .map_err(|e| e.to_string())?
}

// ---- FAILOVER ----

/// FAILOVER on this primary, while writes are paused: waits until the
/// target (or, without TO, any replica) has acknowledged the whole log,
/// and moves the failover to "in progress". Returns the new primary's
/// address, or None when the failover was aborted (FAILOVER ABORT, or the
/// timeout without FORCE), which ends the pause.
fn wait_for_failover_target(
    shared: &Arc<Shared>,
    request: &repl::FailoverRequest,
) -> Option<(String, u16)> {
    let store = &shared.store;
    let ring = store.log_ring();
    // The target by address: a replica that reconnects gets a new id.
    let target = match request.replica {
        0 => None,
        id => match lock(shared).replicas.get(&id) {
            Some(r) => Some((r.ip.clone(), r.port)),
            None => {
                abort_failover(store, request, "the target replica is gone");
                return None;
            }
        },
    };
    match &target {
        Some((ip, port)) => println!("shoal: FAILOVER requested to {ip}:{port}"),
        None => println!("shoal: FAILOVER requested to any replica"),
    }
    loop {
        if !request.is_current(store) {
            println!("shoal: FAILOVER aborted: Failover manually aborted");
            return None;
        }
        let head = ring.head();
        let caught_up = lock(shared)
            .replicas
            .values()
            .find(|r| {
                r.state == "online"
                    && r.ack == head
                    && target
                        .as_ref()
                        .is_none_or(|(ip, port)| r.ip == *ip && r.port == *port)
            })
            .map(|r| (r.ip.clone(), r.port));
        if let Some((ip, port)) = caught_up {
            if !repl::failover_begin(store, request) {
                continue;
            }
            println!("shoal: FAILOVER target {ip}:{port} is synced, failing over");
            changed(shared);
            return Some((ip, port));
        }
        if request.deadline_ms != 0 && now_ms() >= request.deadline_ms {
            if let Some((ip, port)) = target.clone().filter(|_| request.force) {
                if !repl::failover_begin(store, request) {
                    continue;
                }
                println!("shoal: FAILOVER to {ip}:{port} time out exceeded, failing over");
                changed(shared);
                return Some((ip, port));
            }
            abort_failover(store, request, "Replica never caught up before timeout");
            return None;
        }
        if shared.stop.load(Ordering::Acquire) {
            abort_failover(store, request, "the server is stopping");
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Ends a failover that is still `request`; writes go on.
fn abort_failover(store: &Store, request: &repl::FailoverRequest, why: &str) {
    if request.is_current(store) {
        repl::failover_end(store);
    }
    println!("shoal: FAILOVER aborted: {why}");
}

/// FAILOVER's hand-over: this primary becomes a replica of `host:port`
/// (workers refuse writes from then on), waits until the target has
/// acknowledged every write that got in before that, and sends it
/// `SHOAL.SYNC … FAILOVER`: the target takes over and answers as a
/// primary, and this server follows it. Returns whether it is a replica
/// now; when the target refused or could not be reached, this server is a
/// primary again with its history, as Redis's abortFailover.
fn fail_over_to(shared: &Arc<Shared>, host: &str, port: u16, force: bool) -> bool {
    let store = shared.store.clone();
    let ring = store.log_ring();
    let own = lock(shared).replid.clone();
    let handed = (|| -> Result<u64, String> {
        let mut h = store.handle().map_err(|e| e.to_string())?;
        repl::set_target(&store, &mut h, Some((host, port))).map_err(|e| e.to_string())?;
        // The write gate: a command that passed its role check before the
        // change is marked until it has logged, and every later one sees
        // the new role and refuses itself; so once no worker is marked,
        // nothing can write past the head read below.
        if !store
            .wait_writers(LINK_TIMEOUT)
            .map_err(|e| e.to_string())?
        {
            return Err("a worker's write did not finish after the role changed".into());
        }
        // Writes not made by commands (expiry) are complete once every
        // holder of a key lock has left.
        let head = h
            .exclusive(|_| Ok(ring.head()))
            .map_err(|e| e.to_string())?;
        drop(h);
        let began = Instant::now();
        // FORCE: the target takes over wherever it stands.
        loop {
            let acked = lock(shared)
                .replicas
                .values()
                .any(|r| r.ip == host && r.port == port && r.ack >= head);
            if force || acked {
                break;
            }
            if repl::failover_state(&store) != repl::FailoverState::InProgress {
                return Err("Failover manually aborted".into());
            }
            if began.elapsed() > LINK_TIMEOUT {
                return Err(format!(
                    "the target did not acknowledge LSN {head} after the role changed"
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // What this server holds is its own history up to `head`; its
        // replicas at exactly there continue through its relay (Redis's
        // master_replid2 after a failover).
        repl::set_applied_lsn(&store, head).map_err(|e| e.to_string())?;
        repl::set_followed_tag(&store, repl::replid_tag(&own)).map_err(|e| e.to_string())?;
        let mut inner = lock(shared);
        inner.master_replid = own.clone();
        inner.replid2 = own.clone();
        inner.second_offset = head;
        Ok(head)
    })();
    let generation = repl::generation(&store);
    lock(shared).failover_answered = false;
    let result = handed.and_then(|head| {
        if repl::failover_state(&store) != repl::FailoverState::InProgress {
            return Err("Failover manually aborted".into());
        }
        if let Some(dir) = &shared.dir {
            let _ = std::fs::write(
                dir.join(REPLICATED_MARKER),
                "this server followed a primary: see docs/replication.md\n",
            );
        }
        // Its own replicas will follow it through its relay.
        shared.relay_wanted.store(true, Ordering::Release);
        println!("shoal: FAILOVER: asking {host}:{port} to take over at LSN {head}");
        {
            let mut inner = lock(shared);
            inner.link = "connecting";
            inner.down_since_ms = now_ms();
        }
        changed(shared);
        follow(shared, host, port, generation, true)
    });
    if lock(shared).failover_answered {
        // The target answered as a primary: the link ran (and ended, or
        // REPLICAOF moved it): the loop goes on as a replica.
        if let Err(e) = result {
            let mut inner = lock(shared);
            inner.link = "down";
            inner.down_since_ms = now_ms();
            inner.last_error = e;
        }
        changed(shared);
        return true;
    }
    let why = result.err().unwrap_or_else(|| "stopped".into());
    println!("shoal: FAILOVER aborted: {why}; this server stays the primary");
    if let Ok(mut h) = store.handle() {
        let _ = repl::set_target(&store, &mut h, None);
    }
    let _ = forget_applied(&store);
    if let Some(dir) = &shared.dir {
        let _ = std::fs::remove_file(dir.join(REPLICATED_MARKER));
    }
    {
        let mut inner = lock(shared);
        inner.link = "none";
        inner.master_replid.clear();
        inner.replid2.clear();
        inner.second_offset = 0;
        inner.last_error = why;
    }
    repl::failover_end(&store);
    changed(shared);
    false
}

/// A FAILOVER target takes over (its primary, writes paused, sent
/// `SHOAL.SYNC … FAILOVER`): while it still refuses writes it restarts its
/// log past every version (where the old primary stopped, normally), so
/// that its log from there continues the old history exactly; then it
/// becomes a primary and waits for the promotion to settle (its snapshot),
/// after which the old primary gets a partial resync.
fn take_over(shared: &Arc<Shared>) -> Result<(), String> {
    let store = &shared.store;
    if shared.dir.is_none() {
        return Err("this shoal server keeps no transaction log".into());
    }
    let mut h = store.handle().map_err(|e| e.to_string())?;
    let applied = repl::applied_lsn(store);
    let settled_before = lock(shared).promotions_settled;
    let (restarted, _) = restart_past_versions(shared, &mut h, applied)?;
    lock(shared).prepared_restart = Some(restarted);
    repl::set_target(store, &mut h, None).map_err(|e| e.to_string())?;
    drop(h);
    println!(
        "shoal: FAILOVER: taking over from the primary at LSN {applied}; the log goes on at LSN {restarted}"
    );
    let began = Instant::now();
    while lock(shared).promotions_settled == settled_before {
        if shared.stop.load(Ordering::Acquire) || began.elapsed() > Duration::from_secs(600) {
            return Err("the promotion did not settle".into());
        }
        if repl::is_replica(store) {
            return Err("REPLICAOF changed this server meanwhile".into());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

/// What a promoted server applied no longer describes its store (writes
/// come now): following any primary again starts with a full resync.
fn forget_applied(store: &Store) -> Result<(), String> {
    repl::set_applied_lsn(store, 0).map_err(|e| e.to_string())?;
    repl::set_followed_tag(store, 0).map_err(|e| e.to_string())
}

/// Reads one message; None on a read timeout before any byte of it.
fn read_message(r: &mut impl Read, body: &mut Vec<u8>) -> Result<Option<u8>, String> {
    let mut head = [0u8; 5];
    match r.read(&mut head[..1]) {
        Ok(0) => return Err("the primary closed the link".into()),
        Ok(_) => {}
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(format!("reading from the primary: {e}")),
    }
    read_fully(r, &mut head[1..])?;
    let (kind, len) = repl::link::parse_header(&head)?;
    body.resize(len, 0);
    read_fully(r, body)?;
    Ok(Some(kind))
}

/// `read_exact` that waits through read timeouts (the link's timeout is
/// for idle waits, not for the middle of a message).
fn read_fully(r: &mut impl Read, mut buf: &mut [u8]) -> Result<(), String> {
    let began = Instant::now();
    while !buf.is_empty() {
        match r.read(buf) {
            Ok(0) => return Err("the primary closed the link mid-message".into()),
            Ok(n) => buf = &mut buf[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) && began.elapsed() < LINK_TIMEOUT => {}
            Err(e) => return Err(format!("reading from the primary: {e}")),
        }
    }
    Ok(())
}

fn resp_command(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// One answer line of the primary (at most 1 KiB), without its CRLF.
fn read_line(reader: &mut impl BufRead, host: &str, port: u16) -> Result<String, String> {
    let mut line = Vec::new();
    let began = Instant::now();
    loop {
        match reader.by_ref().take(1024).read_until(b'\n', &mut line) {
            Ok(0) => {
                return Err(format!(
                    "{host}:{port} closed the connection without answering"
                ))
            }
            Ok(_) if line.ends_with(b"\n") => break,
            Ok(_) if line.len() >= 1024 => {
                return Err(format!(
                    "{host}:{port} is not a shoal server (it answered with a long line)"
                ))
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                // A full resync may first take a snapshot on the primary.
                if began.elapsed() > Duration::from_secs(600) {
                    return Err(format!("{host}:{port} did not answer"));
                }
            }
            Err(e) => return Err(format!("reading from {host}:{port}: {e}")),
        }
    }
    Ok(String::from_utf8_lossy(&line).trim_end().to_string())
}

/// Follows the primary at `host:port` until the link fails (the error) or
/// REPLICAOF changes the generation (Ok).
fn follow(
    shared: &Arc<Shared>,
    host: &str,
    port: u16,
    generation: u64,
    failover: bool,
) -> Result<(), String> {
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("cannot resolve {host}"))?;
    let store = shared.store.clone();
    // Reads and writes go through one stream (one TLS session): answers
    // are written through the reader.
    let stream = super::link::connect(&store, addr, host, port)?;
    let mut reader = BufReader::with_capacity(1 << 20, stream);
    let applied = repl::applied_lsn(&store);
    let tag = repl::followed_tag(&store);
    let replid = if applied > 0 && tag != 0 {
        format!("{tag:016x}")
    } else {
        "?".to_string()
    };
    if let Some((user, pass)) = repl::master_auth(&store) {
        let auth = match &user {
            Some(user) => resp_command(&["AUTH", user, &pass]),
            None => resp_command(&["AUTH", &pass]),
        };
        reader
            .get_mut()
            .write_all(&auth)
            .map_err(|e| format!("writing to {host}:{port}: {e}"))?;
        let answer = read_line(&mut reader, host, port)?;
        if answer != "+OK" {
            return Err(format!(
                "Unable to AUTH to MASTER {host}:{port}: {}",
                answer.trim_start_matches('-')
            ));
        }
    }
    let listening = super::link::announced_port(&store, shared.port).to_string();
    let offset = applied.to_string();
    let mut request_args = vec!["SHOAL.SYNC", &replid, &offset, &listening, &shared.node];
    if failover {
        request_args.push("FAILOVER");
    }
    let request = resp_command(&request_args);
    reader
        .get_mut()
        .write_all(&request)
        .map_err(|e| format!("writing to {host}:{port}: {e}"))?;
    let line = read_line(&mut reader, host, port)?;
    let words: Vec<&str> = line.split(' ').collect();
    if failover && (line.starts_with("+CONTINUE ") || line.starts_with("+FULLRESYNC ")) {
        // The target took over: writes go on here (refused: a replica).
        lock(shared).failover_answered = true;
        repl::failover_end(&store);
        println!("shoal: FAILOVER: {host}:{port} is the primary now");
    }
    let mut h = store.handle().map_err(|e| e.to_string())?;
    let mut expect;
    match words.as_slice() {
        ["+CONTINUE", id, from] => {
            expect = from
                .parse::<u64>()
                .map_err(|_| format!("bad answer {line:?}"))?;
            if expect != applied {
                return Err(format!(
                    "the primary continues from LSN {expect}, not {applied}"
                ));
            }
            lock(shared).master_replid = id.to_string();
            repl::set_followed_tag(&store, repl::replid_tag(id)).map_err(|e| e.to_string())?;
            relay_from(shared, applied);
            set_up(shared, "up");
            println!("shoal: replicating from {host}:{port}: partial resync from LSN {applied}");
        }
        ["+FULLRESYNC", id, start] => {
            let start = start
                .parse::<u64>()
                .map_err(|_| format!("bad answer {line:?}"))?;
            set_up(shared, "sync");
            repl::set_applied_lsn(&store, 0).map_err(|e| e.to_string())?;
            {
                // The store is replaced: no history of its own goes on.
                let mut inner = lock(shared);
                inner.replid2.clear();
                inner.second_offset = 0;
            }
            relay_from(shared, start);
            let mut flush = Vec::new();
            record::encode_flush_all(&mut flush);
            // Every key goes, whatever its version: a replayed FLUSHALL
            // removes the keys whose versions are below its LSN, and keys
            // of this server's own history (an old primary, a FAILOVER
            // with FORCE) may carry versions above the snapshot's.
            h.apply_record(u64::MAX, &flush)
                .map_err(|e| e.to_string())?;
            let began = Instant::now();
            let n = receive_snapshot(&mut reader, &mut h, &store, start)?;
            lock(shared).master_replid = id.to_string();
            repl::set_followed_tag(&store, repl::replid_tag(id)).map_err(|e| e.to_string())?;
            repl::set_applied_lsn(&store, start).map_err(|e| e.to_string())?;
            set_up(shared, "up");
            println!(
                "shoal: replicating from {host}:{port}: full resync, {n} records at LSN {start} loaded in {:.3} s",
                began.elapsed().as_secs_f64()
            );
            expect = start;
        }
        _ if line.contains("unknown command") => {
            return Err(format!(
                "{host}:{port} is not a shoal server (it answered {line:?} to SHOAL.SYNC)"
            ))
        }
        _ if line.starts_with('-') => return Err(format!("{host}:{port} refused: {}", &line[1..])),
        _ => {
            return Err(format!(
                "{host}:{port} is not a shoal server (it answered {line:?})"
            ))
        }
    }
    let ack = |writer: &mut super::link::LinkStream, lsn: u64| -> Result<(), String> {
        let mut b = [b'A'; 9];
        b[1..].copy_from_slice(&lsn.to_le_bytes());
        writer
            .write_all(&b)
            .map_err(|e| format!("writing to the primary: {e}"))
    };
    ack(reader.get_mut(), expect)?;
    // `replica-sync-level disk` on the primary (a `D` message): the relay
    // is fsynced and what it holds acknowledged with `D`.
    let mut disk = false;
    let mut disk_acked = 0;
    // The relay's epoch when the level began on this link: a relay started
    // over since (one that failed) misses frames, so it acknowledges nothing.
    let mut disk_epoch = 0;
    let mut body = Vec::new();
    // Frames of a group not closed yet: applied only with its last frame.
    let mut group: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut last_heard = Instant::now();
    loop {
        if shared.stop.load(Ordering::Acquire) || repl::generation(&store) != generation {
            return Ok(());
        }
        let Some(kind) = read_message(&mut reader, &mut body)? else {
            if last_heard.elapsed() > LINK_TIMEOUT {
                return Err("the primary has been silent too long".into());
            }
            continue;
        };
        last_heard = Instant::now();
        lock(shared).last_io_ms = now_ms();
        match kind {
            b'L' => {
                relay_from(shared, expect);
                let mut closed = expect;
                let frames = repl::link::frames(&body, Some(expect))
                    .map_err(|e| format!("{e}; resyncing"))?;
                for f in frames {
                    let continues = f.payload.first().is_some_and(|k| k & GROUP_CONTINUES != 0);
                    group.push((f.lsn, f.payload.to_vec()));
                    expect += f.size;
                    if store::log::record::drops_group(f.payload) {
                        // The primary undid the section that wrote the group.
                        group.clear();
                        closed = expect;
                    } else if !continues {
                        for (lsn, payload) in group.drain(..) {
                            super::persistence::apply_replayed(&mut h, &store, lsn, &payload)
                                .map_err(|e| format!("applying the {e}"))?;
                        }
                        closed = expect;
                    }
                }
                relay_append(shared, &body);
                if closed > repl::applied_lsn(&store) {
                    repl::set_applied_lsn(&store, closed).map_err(|e| e.to_string())?;
                }
                lock(shared).head_while_following = store.log_status().head;
                ack(reader.get_mut(), repl::applied_lsn(&store))?;
                // Group commit: while more of the link is already here, the
                // fsync waits for it, so one fsync covers every frame
                // received so far (never one per frame).
                if disk && reader.buffer().is_empty() {
                    disk_ack(shared, reader.get_mut(), disk_epoch, &mut disk_acked)?;
                }
            }
            b'D' => {
                disk = body.first() == Some(&1) && shared.dir.is_some();
                if body.first() == Some(&1) && shared.dir.is_none() {
                    println!(
                        "shoal: the primary asks for disk acknowledgements (replica-sync-level disk): this replica has no --dir, so it never counts toward that level"
                    );
                }
                if disk {
                    // Its relay is its disk copy of the primary's frames.
                    shared.relay_wanted.store(true, Ordering::Release);
                    relay_from(shared, expect);
                    disk_epoch = shared.relay_epoch.load(Ordering::Acquire);
                    disk_acked = 0;
                    disk_ack(shared, reader.get_mut(), disk_epoch, &mut disk_acked)?;
                }
            }
            b'F' => {
                engine::replace_libraries_from_primary(&mut h, &store, &body)
                    .map_err(|e| format!("the primary's function libraries: {e}"))?;
            }
            b'H' => {
                relay_from(shared, expect);
                lock(shared).head_while_following = store.log_status().head;
                ack(reader.get_mut(), repl::applied_lsn(&store))?;
                if disk {
                    disk_ack(shared, reader.get_mut(), disk_epoch, &mut disk_acked)?;
                }
            }
            _ => {
                return Err(format!(
                    "unexpected message {:?} after the sync",
                    kind as char
                ))
            }
        }
    }
}

/// The disk level: fsyncs the relay (one fsync for everything written to
/// it since the last) and acknowledges its end with a `D` message when it
/// moved past `acked`. A replica whose relay failed (or started over
/// since `epoch`, so that it misses frames) acknowledges nothing more on
/// this link (its primary's disk level then waits for other replicas).
fn disk_ack(
    shared: &Shared,
    writer: &mut super::link::LinkStream,
    epoch: u64,
    acked: &mut u64,
) -> Result<(), String> {
    let durable = {
        let mut relay = shared.relay.lock().unwrap_or_else(|e| e.into_inner());
        let Some(r) = relay.as_mut() else {
            return Ok(());
        };
        if shared.relay_epoch.load(Ordering::Acquire) != epoch {
            return Ok(());
        }
        if r.end() == *acked {
            return Ok(());
        }
        match r.sync() {
            Ok(end) => end,
            Err(e) => {
                println!("shoal: fsyncing the relay failed: {e}");
                return Ok(());
            }
        }
    };
    if durable != *acked {
        *acked = durable;
        let mut b = [b'D'; 9];
        b[1..].copy_from_slice(&durable.to_le_bytes());
        writer
            .write_all(&b)
            .map_err(|e| format!("writing to the primary: {e}"))?;
    }
    Ok(())
}

/// Makes the relay continue at `lsn`: kept when it ends there, else
/// started over (its replicas then look again).
fn relay_from(shared: &Shared, lsn: u64) {
    let Some(dir) = &shared.dir else {
        return;
    };
    if !shared.relay_wanted.load(Ordering::Acquire) {
        return;
    }
    let mut relay = shared.relay.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = relay.as_mut() {
        if r.end() == lsn {
            return;
        }
        // The frames of a group the link lost go; the replicas keep theirs
        // (they apply closed groups only).
        if r.rewind(lsn).unwrap_or(false) {
            shared.relay_end.store(r.end(), Ordering::Release);
            return;
        }
    }
    shared.relay_epoch.fetch_add(1, Ordering::AcqRel);
    shared.relay_end.store(0, Ordering::Release);
    *relay = match Relay::start(&dir.join("relay"), lsn) {
        Ok(r) => Some(r),
        Err(e) => {
            println!("shoal: the relay for replicas of this replica failed: {e}");
            None
        }
    };
    if let Some(r) = relay.as_ref() {
        shared.relay_end.store(r.end(), Ordering::Release);
    }
}

/// Relays the frames of one `L` message (already checked and applied up
/// to its last closed group). A relay that fails is dropped.
fn relay_append(shared: &Shared, frames: &[u8]) {
    let mut relay = shared.relay.lock().unwrap_or_else(|e| e.into_inner());
    let Some(r) = relay.as_mut() else {
        return;
    };
    match r.append(frames) {
        Ok(()) => shared.relay_end.store(r.end(), Ordering::Release),
        Err(e) => {
            println!("shoal: the relay for replicas of this replica failed: {e}");
            *relay = None;
            shared.relay_end.store(0, Ordering::Release);
            shared.relay_epoch.fetch_add(1, Ordering::AcqRel);
        }
    }
}

fn set_up(shared: &Shared, link: &'static str) {
    let mut inner = lock(shared);
    inner.link = link;
    inner.last_error.clear();
    inner.last_io_ms = now_ms();
    drop(inner);
    changed(shared);
}

/// Loads the snapshot frames of a full resync until its end message.
fn receive_snapshot(
    reader: &mut impl Read,
    h: &mut Handle,
    store: &Store,
    start: u64,
) -> Result<u64, String> {
    let mut body = Vec::new();
    let mut n = 0u64;
    let mut quiet = Instant::now();
    loop {
        let Some(kind) = read_message(reader, &mut body)? else {
            if quiet.elapsed() > LINK_TIMEOUT {
                return Err("the primary stopped sending the snapshot".into());
            }
            continue;
        };
        quiet = Instant::now();
        match kind {
            b'S' => {
                let frames = repl::link::frames(&body, None)
                    .map_err(|e| format!("{e} in the snapshot; resyncing"))?;
                for f in frames {
                    super::persistence::apply_replayed(h, store, f.lsn, f.payload)
                        .map_err(|e| format!("loading the snapshot {e}"))?;
                    n += 1;
                }
            }
            b'E' => {
                if repl::link::parse_position(&body)? != start {
                    return Err("the snapshot ended at another LSN than announced".into());
                }
                return Ok(n);
            }
            b'H' => {}
            k => {
                return Err(format!(
                    "unexpected message {:?} in the snapshot",
                    k as char
                ))
            }
        }
    }
}
