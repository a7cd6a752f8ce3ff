//! Persistence in the supervisor (docs/persistence.md): startup recovery, the log
//! writer thread that drains the segment's log ring to files, and the
//! snapshot thread (SAVE, BGSAVE, `shoal ctl snapshot`, the schedule).
//! Workers only append records to the ring; the store does that inside
//! every write.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::{LogSource, LogWriter, Phase, SnapshotSource};
use store::log::{record, FsyncPolicy, LogRing};
use store::{Handle, Store};

use crate::error::Error;

/// What `shoal serve --dir` asked for.
#[derive(Clone, Debug)]
pub struct PersistOptions {
    /// Where log files and snapshots live.
    pub dir: PathBuf,
    /// `--appendfsync`.
    pub policy: FsyncPolicy,
    /// `--snapshot-every` (None = off).
    pub snapshot_every: Option<Duration>,
    /// `--snapshot-log-size`: a snapshot after this many log bytes (0 = off).
    pub snapshot_log_bytes: u64,
    /// `--keep-logs`: log files kept from before the newest snapshot.
    pub keep_logs: usize,
    /// `--log-file-size`: a new log file past this size.
    pub log_file_size: u64,
}

/// The running log writer and snapshot threads.
pub struct Persistence {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Recovers the segment if it is new (snapshot + log), turns the log on and
/// starts the threads. Before any worker starts.
pub fn start(store: &Store, opts: &PersistOptions) -> Result<Persistence, Error> {
    std::fs::create_dir_all(&opts.dir)
        .map_err(crate::error::io(format!("create {}", opts.dir.display())))?;
    let mut h = store.handle()?;
    let ring = h.log_ring();
    let mut snapshot_now = false;
    if store.created() {
        let end = recover(store, &mut h, opts)?;
        let at = ring.enable(end, opts.policy)?;
        println!("shoal: logging to {} from LSN {at}", opts.dir.display());
    } else {
        let status = ring.status();
        let (enabled, released) = (status.enabled, status.released);
        let dir_empty = log::file::list_logs(&opts.dir).is_ok_and(|l| l.is_empty())
            && log::file::list_snapshots(&opts.dir).is_ok_and(|s| s.is_empty());
        if enabled {
            println!(
                "shoal: attached the segment: no replay needed; the log resumes at LSN {released}"
            );
            ring.set_policy(opts.policy)?;
            // A new directory has none of what the segment holds.
            snapshot_now = dir_empty && ring.head() > store::log::FIRST_LSN;
        } else {
            // The segment holds data no log file has: a snapshot makes the
            // directory whole.
            let at = ring.enable(ring.head(), opts.policy)?;
            println!("shoal: attached a segment that was not logged: logging from LSN {at}, snapshot follows");
            snapshot_now = true;
        }
    }
    drop(h);
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let mut writer = LogWriter::new(opts.dir.clone(), opts.log_file_size);
    let restart = RESTART.get_or_init(Arc::default).clone();
    let mut source = RingSource {
        ring: ring.clone(),
        restart,
    };
    {
        let stop = stop.clone();
        threads.push(
            std::thread::Builder::new()
                .name("log-writer".into())
                .spawn(move || {
                    if let Err(e) = writer.run(&mut source, &stop) {
                        eprintln!("shoal: log writer stopped: {e}");
                        let _ = source.ring.set_write_failed(true);
                    }
                })
                .map_err(crate::error::io("start the log writer"))?,
        );
    }
    {
        let stop = stop.clone();
        let store = store.clone();
        let opts = opts.clone();
        threads.push(
            std::thread::Builder::new()
                .name("snapshots".into())
                .spawn(move || snapshot_loop(store, opts, stop, snapshot_now))
                .map_err(crate::error::io("start the snapshot thread"))?,
        );
    }
    Ok(Persistence { stop, threads })
}

impl Persistence {
    /// Stops both threads: the writer drains what is complete and fsyncs.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Loads the newest valid snapshot and replays the log after it, printing
/// what was loaded and how long each step took. The LSN where the log
/// goes on.
fn recover(store: &Store, h: &mut Handle, opts: &PersistOptions) -> Result<u64, Error> {
    let began = Instant::now();
    let bar = std::io::stderr().is_terminal();
    let mut last_drawn = Instant::now();
    let mut frames = 0u64;
    let mut loader = Some(SnapshotLoader::start(store)?);
    let summary = log::recover(
        &opts.dir,
        &mut |phase, lsn, payload| {
            frames += 1;
            let kind = payload.first().map(|k| k & 0x7f);
            let keyless = matches!(kind, Some(record::KIND_SWAP_DB | record::KIND_FUNCTIONS));
            match (phase, &mut loader) {
                // A snapshot's entries are distinct keys: loader threads
                // take them, after the SWAPDB and function records that
                // come first.
                (Phase::Snapshot, Some(l)) if !keyless => return l.push(lsn, payload),
                (Phase::Log, Some(_)) => loader.take().map_or(Ok(()), SnapshotLoader::finish)?,
                _ => {}
            }
            apply_replayed(h, store, lsn, payload)
        },
        &mut |p| {
            if bar && last_drawn.elapsed() > Duration::from_millis(100) {
                last_drawn = Instant::now();
                let pct = (p.done * 100).checked_div(p.total).unwrap_or(100);
                let filled = (pct / 5) as usize;
                eprint!(
                    "\rrecovering [{}{}] {pct:>3}% {} of {} MiB",
                    "#".repeat(filled),
                    " ".repeat(20 - filled.min(20)),
                    p.done >> 20,
                    p.total >> 20
                );
            }
        },
    )
    .map_err(|e| Error::Config(e.to_string()))?;
    if let Some(l) = loader {
        l.finish().map_err(Error::Config)?;
    }
    if bar {
        eprint!("\r\x1b[K");
    }
    match &summary.snapshot {
        Some(s) => println!(
            "shoal: loaded snapshot {} ({} records) in {:.3} s",
            s.path.display(),
            s.frames,
            s.duration.as_secs_f64()
        ),
        None => println!("shoal: no snapshot to load"),
    }
    println!(
        "shoal: replayed {} log records ({} bytes, {} files) in {:.3} s",
        summary.log_frames,
        summary.log_bytes,
        summary.log_files,
        summary.log_duration.as_secs_f64()
    );
    for notice in &summary.notices {
        println!("shoal: {notice}");
    }
    println!(
        "shoal: recovery applied {frames} records in {:.3} s",
        began.elapsed().as_secs_f64()
    );
    Ok(summary.end_lsn)
}

/// Applies one replayed record (recovery, or a replica's link): the store
/// takes its own records, the engine the function libraries' set.
pub(crate) fn apply_replayed(
    h: &mut Handle,
    store: &Store,
    lsn: u64,
    payload: &[u8],
) -> Result<(), String> {
    if payload.first().map(|k| k & 0x7f) == Some(record::KIND_FUNCTIONS) {
        let Ok((record::Record::Functions { libraries }, _)) = record::Record::decode(payload)
        else {
            return Err(format!("record at LSN {lsn}: a damaged function record"));
        };
        return engine::replace_libraries_from_primary(h, store, libraries)
            .map_err(|e| format!("record at LSN {lsn}: {e}"));
    }
    h.apply_record(lsn, payload)
        .map(|_| ())
        .map_err(|e| format!("record at LSN {lsn}: {e}"))
}

/// Threads that load a snapshot's entries in parallel, each with its own
/// store handle: the reading thread hands them batches.
struct SnapshotLoader {
    senders: Vec<std::sync::mpsc::SyncSender<Batch>>,
    threads: Vec<JoinHandle<Result<(), String>>>,
    batch: Batch,
    next: usize,
}

/// Snapshot entries (LSN, record) on their way to a loader thread.
type Batch = Vec<(u64, Vec<u8>)>;

/// Entries handed to a loader thread at a time.
const LOAD_BATCH: usize = 512;

impl SnapshotLoader {
    fn start(store: &Store) -> Result<SnapshotLoader, Error> {
        let n = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 4);
        let mut senders = Vec::new();
        let mut threads = Vec::new();
        for i in 0..n {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(4);
            let mut h = store.handle()?;
            senders.push(tx);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("snapshot-load-{i}"))
                    .spawn(move || {
                        for batch in rx {
                            for (lsn, payload) in batch {
                                h.load_record(lsn, &payload)
                                    .map_err(|e| format!("snapshot record at LSN {lsn}: {e}"))?;
                            }
                        }
                        Ok(())
                    })
                    .map_err(crate::error::io("start a snapshot loader"))?,
            );
        }
        Ok(SnapshotLoader {
            senders,
            threads,
            batch: Vec::with_capacity(LOAD_BATCH),
            next: 0,
        })
    }

    fn push(&mut self, lsn: u64, payload: &[u8]) -> Result<(), String> {
        self.batch.push((lsn, payload.to_vec()));
        if self.batch.len() >= LOAD_BATCH {
            self.send()?;
        }
        Ok(())
    }

    fn send(&mut self) -> Result<(), String> {
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(LOAD_BATCH));
        let i = self.next % self.senders.len();
        self.next += 1;
        self.senders[i]
            .send(batch)
            .map_err(|_| "a snapshot loader stopped".to_string())
    }

    /// Loads what is left and waits for every thread: the snapshot is in.
    fn finish(mut self) -> Result<(), String> {
        let sent = if self.batch.is_empty() {
            Ok(())
        } else {
            self.send()
        };
        self.senders.clear();
        let mut first_error = sent.err();
        for t in self.threads {
            let res = t
                .join()
                .unwrap_or_else(|_| Err("a snapshot loader panicked".into()));
            if let Err(e) = res {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// The ring as the log writer reads it.
struct RingSource {
    ring: LogRing,
    restart: Arc<LogRestart>,
}

/// A restart of the log at a higher LSN, asked of the log writer (a
/// promoted replica, docs/replication.md): `want` is the LSN asked for
/// (0: none, or taken by the writer), `done` the last one whose file exists.
#[derive(Default)]
struct LogRestart {
    want: AtomicU64,
    done: AtomicU64,
}

static RESTART: OnceLock<Arc<LogRestart>> = OnceLock::new();

/// Restarts the log at `lsn` (8-aligned; nothing happens when the head is
/// there already): waits until the log writer has written every frame
/// before the head, has it fsync and start a new file at `lsn`, then moves
/// the ring's head, written and fsynced positions there. Call it inside an
/// exclusive section of the store, so no frame is reserved meanwhile.
/// Returns the head after it.
pub fn restart_log_at(ring: &LogRing, lsn: u64) -> Result<u64, String> {
    let Some(restart) = RESTART.get() else {
        return Err("this server keeps no transaction log".into());
    };
    let lsn = lsn.next_multiple_of(8);
    if lsn <= ring.head() {
        return Ok(ring.head());
    }
    restart.want.store(lsn, Ordering::Release);
    let began = Instant::now();
    while restart.done.load(Ordering::Acquire) != lsn {
        if ring.status().write_failed {
            return Err("the log writer failed".into());
        }
        if began.elapsed() > Duration::from_secs(30) {
            // Withdraw the request unless the writer took it already.
            if restart
                .want
                .compare_exchange(lsn, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Err("the log writer did not restart the log".into());
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    match ring.restart_at(lsn) {
        Ok(Some(head)) => Ok(head),
        Ok(None) => Err("the log ring was not drained".into()),
        Err(e) => Err(e.to_string()),
    }
}

impl LogSource for RingSource {
    fn released(&self) -> u64 {
        self.ring.status().released
    }

    fn head(&self) -> u64 {
        self.ring.head()
    }

    fn read_frames(&mut self, from: u64, out: &mut Vec<u8>, max: usize) -> u64 {
        match self.ring.read_frames(from, out, max) {
            Ok(end) => end,
            Err(e) => {
                eprintln!("shoal: the log ring is damaged at LSN {from}: {e}");
                from
            }
        }
    }

    fn release(&mut self, lsn: u64) {
        let _ = self.ring.release(lsn);
    }

    fn fsynced(&mut self, lsn: u64) {
        // Test instrumentation: while the file SHOAL_TEST_FSYNC_GATE names
        // exists, fsyncs are not announced, so a test can check that an
        // `always` client gets no reply before its fsync.
        if let Some(gate) = std::env::var_os("SHOAL_TEST_FSYNC_GATE") {
            while std::path::Path::new(&gate).exists() {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let _ = self.ring.set_fsynced(lsn);
    }

    fn wait(&mut self, from: u64, timeout: Duration) {
        self.ring.wait_frames(from, timeout);
    }

    fn policy(&self) -> FsyncPolicy {
        self.ring.policy()
    }

    fn take_restart(&mut self, pos: u64) -> Option<u64> {
        let want = self.restart.want.load(Ordering::Acquire);
        let drained = self.ring.head() == pos && self.ring.status().released == pos;
        if want <= pos || !drained {
            return None;
        }
        self.restart
            .want
            .compare_exchange(want, 0, Ordering::AcqRel, Ordering::Acquire)
            .ok()
    }

    fn restarted(&mut self, lsn: u64) {
        self.restart.done.store(lsn, Ordering::Release);
    }
}

/// The store as a snapshot reads it.
struct StoreSnapshot {
    h: Handle,
    store: Store,
    ring: LogRing,
}

impl SnapshotSource for StoreSnapshot {
    fn start_lsn(&mut self) -> u64 {
        // Every frame before `released` belongs to a committed write, which
        // the snapshot sees when it locks that key's bucket; every later one
        // is in the log the replay reads.
        self.ring.status().released
    }

    fn for_each(
        &mut self,
        f: &mut dyn FnMut(u64, &[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        // The function libraries come first, whole (an empty set too, so a
        // replica's full resync drops the ones it had).
        let libraries = engine::libraries_for_snapshot(&mut self.h, &self.store)
            .map_err(std::io::Error::other)?;
        let mut payload = Vec::new();
        record::encode_functions(&mut payload, &libraries);
        f(0, &payload)?;
        match self.h.snapshot_records(f) {
            Ok(res) => res,
            Err(e) => Err(std::io::Error::other(e.to_string())),
        }
    }

    fn end_lsn(&mut self) -> u64 {
        // The snapshot holds writes up to the head: it is only a valid
        // starting point once the log files hold them too (fsynced, unless
        // the policy leaves fsyncs to the system), or a crash could keep a
        // write in the snapshot and lose an earlier one from the log.
        let end = self.ring.head();
        let began = Instant::now();
        let reached = |st: store::log::LogStatus| match st.policy {
            FsyncPolicy::No => st.released >= end,
            _ => st.fsynced >= end,
        };
        while !reached(self.ring.status()) && began.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(2));
        }
        end
    }
}

fn snapshot_loop(store: Store, opts: PersistOptions, stop: Arc<AtomicBool>, mut due: bool) {
    let Ok(h) = store.handle() else {
        eprintln!("shoal: the snapshot thread found no free context");
        return;
    };
    let ring = h.log_ring();
    let mut src = StoreSnapshot {
        h,
        store: store.clone(),
        ring: ring.clone(),
    };
    let mut last = Instant::now();
    let status = ring.status();
    let mut last_start = status.snapshot_start_lsn.max(status.released);
    while !stop.load(Ordering::Acquire) {
        let requested = ring.snapshot_requests();
        let answered = ring.snapshot_answered();
        due |= requested > answered
            || opts
                .snapshot_every
                .is_some_and(|every| last.elapsed() >= every)
            || (opts.snapshot_log_bytes > 0
                && ring.head().saturating_sub(last_start) >= opts.snapshot_log_bytes);
        if !due {
            ring.wait_snapshot_change(Duration::from_millis(200));
            continue;
        }
        due = false;
        let _ = ring.snapshot_started(now_ms());
        let mut result = log::write_snapshot(&opts.dir, &mut src);
        if result.is_err() {
            // A SWAPDB during the walk: once more.
            result = log::write_snapshot(&opts.dir, &mut src);
        }
        last = Instant::now();
        match result {
            Ok(info) => {
                last_start = info.start_lsn;
                println!(
                    "shoal: snapshot {} ({} records, {} bytes) written in {:.3} s",
                    info.path.display(),
                    info.frames,
                    info.bytes,
                    info.duration.as_secs_f64()
                );
                // Log files a connected replica has not read yet stay. SAVE
                // returns once the old files are gone.
                let needed = super::replication::needed_by_replicas();
                match log::prune_keeping(&opts.dir, info.start_lsn, opts.keep_logs, needed) {
                    Ok(removed) if !removed.is_empty() => {
                        println!("shoal: removed {} old log/snapshot files", removed.len())
                    }
                    Ok(_) => {}
                    Err(e) => eprintln!("shoal: removing old log files failed: {e}"),
                }
                let _ = ring.snapshot_finished(requested, true, info.start_lsn, now_ms());
            }
            Err(e) => {
                eprintln!("shoal: snapshot failed: {e}");
                let _ = ring.snapshot_finished(requested, false, 0, now_ms());
            }
        }
    }
}
