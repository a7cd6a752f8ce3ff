//! The log writer: drains the ring in shared memory to segmented log files,
//! fsyncing as the policy says, one fsync covering a whole batch (group
//! commit).
//!
//! It sees the ring only through [`LogSource`], so it runs (and is tested)
//! without shared memory.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use store::log::frame::parse_frame;

use crate::error::{Error, ErrorKind};
use crate::file::{
    encode_file_header, fsync_dir, list_logs, log_file_name, FILE_HEADER, LOG_MAGIC,
};
use crate::verify::{cut_file, scan_log};

pub use store::log::{FsyncPolicy, UnknownPolicy};

/// The ring, as the writer sees it.
pub trait LogSource {
    /// LSN up to which frames were already written to files (the ring may
    /// reuse space before it).
    fn released(&self) -> u64;
    /// The LSN where the next frame will be reserved: nothing at or after it
    /// exists yet.
    fn head(&self) -> u64;
    /// Appends complete frames that start at `from` to `out`, at most about
    /// `max` bytes (at least one whole frame if one is complete, even if
    /// bigger), stopping at the first frame not yet complete. Returns the LSN
    /// after the last frame appended (== `from` if none).
    fn read_frames(&mut self, from: u64, out: &mut Vec<u8>, max: usize) -> u64;
    /// Everything before `lsn` is written to files (page cache): producers
    /// may reuse that ring space.
    fn release(&mut self, lsn: u64);
    /// Everything before `lsn` is fsynced: wakes clients waiting under
    /// `appendfsync always`.
    fn fsynced(&mut self, lsn: u64);
    /// Waits until frames past `from` may be complete, or `timeout` passes.
    fn wait(&mut self, from: u64, timeout: Duration);
    /// The fsync policy now in force (CONFIG SET can change it).
    fn policy(&self) -> FsyncPolicy;
    /// Called when every frame before `pos` is written and none after it
    /// is complete: an LSN past `pos` where the log is to restart, if one
    /// was asked for (a promoted replica moves its LSNs past the ones it
    /// replicated, docs/replication.md) and `pos` is the head. The writer
    /// then fsyncs, starts a new file there and calls
    /// [`LogSource::restarted`]; the source moves the ring's head and
    /// positions to it, and nothing lies in between.
    fn take_restart(&mut self, _pos: u64) -> Option<u64> {
        None
    }
    /// The file the log restarts in exists (header and directory fsynced).
    fn restarted(&mut self, _lsn: u64) {}
}

/// What the writer has done, for INFO persistence; shared with the thread
/// that reports it.
#[derive(Debug, Default)]
pub struct WriterStatus {
    written: AtomicU64,
    fsynced: AtomicU64,
    fsyncs: AtomicU64,
    bytes_written: AtomicU64,
    files_created: AtomicU64,
    write_errors: AtomicU64,
    last_write_failed: AtomicBool,
    last_error: Mutex<Option<String>>,
    current_file: Mutex<Option<PathBuf>>,
}

impl WriterStatus {
    /// LSN up to which frames are written to files.
    pub fn written_lsn(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// LSN up to which frames are fsynced.
    pub fn fsynced_lsn(&self) -> u64 {
        self.fsynced.load(Ordering::Acquire)
    }

    /// Fsyncs of log data so far (file headers and directories not counted).
    pub fn fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::Relaxed)
    }

    /// Frame bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written.load(Ordering::Relaxed)
    }

    /// Log files this writer created.
    pub fn files_created(&self) -> u64 {
        self.files_created.load(Ordering::Relaxed)
    }

    /// Failed writes so far (each retried).
    pub fn write_errors(&self) -> u64 {
        self.write_errors.load(Ordering::Relaxed)
    }

    /// The last write succeeded (Redis's `aof_last_write_status:ok`).
    pub fn last_write_ok(&self) -> bool {
        !self.last_write_failed.load(Ordering::Acquire)
    }

    /// The most recent write or fsync error.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().map(|e| e.clone()).unwrap_or(None)
    }

    /// The log file being appended to.
    pub fn current_file(&self) -> Option<PathBuf> {
        self.current_file.lock().map(|p| p.clone()).unwrap_or(None)
    }

    fn set_error(&self, msg: String) {
        if let Ok(mut e) = self.last_error.lock() {
            *e = Some(msg);
        }
    }
}

/// The log file being appended to.
struct Current {
    file: File,
    path: PathBuf,
    first_lsn: u64,
    /// Bytes in the file.
    len: u64,
    /// LSN of the next frame.
    pos: u64,
}

/// Batches are about this many bytes.
const BATCH_BYTES: usize = 4 << 20;
/// Write attempts once `stop` is set before the writer gives up (leaving the
/// frames in the ring).
const STOP_ATTEMPTS: u32 = 3;

/// Drains a [`LogSource`] into log files in one directory.
pub struct LogWriter {
    dir: PathBuf,
    file_size_limit: u64,
    status: Arc<WriterStatus>,
    notice: Box<dyn FnMut(String) + Send>,
    clock: Box<dyn FnMut() -> Instant + Send>,
    retry_pause: Duration,
    batch_bytes: usize,
    failing_writes: u32,
    current: Option<Current>,
    /// Everything before this LSN is fsynced.
    synced: u64,
    last_fsync: Option<Instant>,
    buf: Vec<u8>,
}

impl LogWriter {
    /// A writer for `dir` that starts a new file once the current one passes
    /// `file_size_limit` bytes. Notices (a torn tail cut at start) go to
    /// stderr until [`LogWriter::on_notice`] redirects them.
    pub fn new(dir: impl Into<PathBuf>, file_size_limit: u64) -> LogWriter {
        LogWriter {
            dir: dir.into(),
            file_size_limit: file_size_limit.max(FILE_HEADER as u64 + 1),
            status: Arc::new(WriterStatus::default()),
            notice: Box::new(|msg| eprintln!("shoal log: {msg}")),
            clock: Box::new(Instant::now),
            retry_pause: Duration::from_millis(100),
            batch_bytes: BATCH_BYTES,
            failing_writes: 0,
            current: None,
            synced: 0,
            last_fsync: None,
            buf: Vec::new(),
        }
    }

    /// Sends notices to `f` instead of stderr.
    pub fn on_notice(&mut self, f: Box<dyn FnMut(String) + Send>) {
        self.notice = f;
    }

    /// The status the writer keeps up to date, to read from another thread.
    pub fn status(&self) -> Arc<WriterStatus> {
        Arc::clone(&self.status)
    }

    /// LSN up to which frames are written to files.
    pub fn written_lsn(&self) -> u64 {
        self.status.written_lsn()
    }

    /// LSN up to which frames are fsynced.
    pub fn fsynced_lsn(&self) -> u64 {
        self.status.fsynced_lsn()
    }

    /// Test hook: the clock `everysec` measures its second with.
    #[doc(hidden)]
    pub fn set_clock(&mut self, clock: Box<dyn FnMut() -> Instant + Send>) {
        self.clock = clock;
    }

    /// Test hook: the pause between write attempts, and the batch size.
    #[doc(hidden)]
    pub fn set_tuning(&mut self, retry_pause: Duration, batch_bytes: usize) {
        self.retry_pause = retry_pause;
        self.batch_bytes = batch_bytes;
    }

    /// Test hook: the next `n` writes fail as a full disk would.
    #[doc(hidden)]
    pub fn fail_next_writes(&mut self, n: u32) {
        self.failing_writes = n;
    }

    /// Opens the log for appending: checks the newest file (cutting a torn
    /// tail), checks it against the ring, and starts a new file where the
    /// log continues. [`LogWriter::run`] calls it if it was not called.
    /// Returns the LSN the new file starts at.
    pub fn start(&mut self, src: &mut dyn LogSource) -> Result<u64, Error> {
        let dir = self.dir.clone();
        fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let released = src.released();
        let head = src.head();
        let mut logs = list_logs(&dir).map_err(|e| Error::io(&dir, e))?;
        let mut files_end = None;
        while let Some(newest) = logs.pop() {
            let path = newest.path;
            let report = scan_log(&path, &mut |_| Ok(()))?;
            if report.header_bad() {
                if report.file_bytes <= FILE_HEADER as u64 {
                    // Created but never given a whole header: it holds nothing.
                    fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
                    fsync_dir(&dir).map_err(|e| Error::io(&dir, e))?;
                    (self.notice)(format!(
                        "{}: removed a log file whose header was never completed",
                        path.display()
                    ));
                    continue;
                }
                let problem = report.problem.as_ref().map(|p| p.what.to_string());
                return Err(Error::new(
                    &path,
                    Some(0),
                    ErrorKind::Corrupt {
                        what: problem.unwrap_or_default(),
                        tail_repairable: false,
                    },
                ));
            }
            if report.problem.is_none()
                && report.end_lsn == report.first_lsn
                && report.first_lsn > head
            {
                // A restart of the log (a promotion) whose new file was
                // created but whose ring never moved: it holds nothing.
                fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
                fsync_dir(&dir).map_err(|e| Error::io(&dir, e))?;
                (self.notice)(format!(
                    "{}: removed an empty log file past the ring's head {head} (a log restart that did not finish)",
                    path.display()
                ));
                continue;
            }
            if let Some(problem) = &report.problem {
                cut_file(&path, report.file_bytes, report.valid_bytes)
                    .map_err(|e| Error::io(&path, e))?;
                (self.notice)(format!(
                    "{}: cut a torn tail of {} bytes {problem}; {} valid records remain",
                    path.display(),
                    report.file_bytes - report.valid_bytes,
                    report.records
                ));
            }
            files_end = Some((path, report.first_lsn, report.end_lsn));
            break;
        }
        let start = match &files_end {
            None => released,
            Some((path, _, end)) if *end < released => {
                return Err(Error::inconsistent(
                    path,
                    format!(
                        "the log files end at LSN {end} but the ring has already released \
                         up to LSN {released}: the frames in between are in neither"
                    ),
                ))
            }
            Some((path, _, end)) if *end > head => {
                return Err(Error::inconsistent(
                    path,
                    format!(
                        "the log files end at LSN {end}, past the ring's head {head}: the \
                         segment is older than the log files"
                    ),
                ))
            }
            Some((_, _, end)) => *end,
        };
        if let Some((path, _, _)) = &files_end {
            // A writer that died between a write and its fsync left pages
            // only in the page cache; clients may be waiting on them.
            File::open(path)
                .and_then(|f| f.sync_all())
                .map_err(|e| Error::io(path, e))?;
        }
        if start > released {
            src.release(start);
        }
        let reuse = matches!(&files_end, Some((_, first, end)) if *first == start && *end == start);
        self.current = Some(self.create_file(start, reuse)?);
        self.synced = start;
        self.status.written.store(start, Ordering::Release);
        self.status.fsynced.store(start, Ordering::Release);
        self.last_fsync = Some((self.clock)());
        src.fsynced(start);
        Ok(start)
    }

    /// Creates the log file whose first LSN is `lsn`: header written and
    /// fsynced, directory fsynced. `reuse`: a file of that name exists and
    /// holds no frames, so it may be overwritten.
    fn create_file(&mut self, lsn: u64, reuse: bool) -> Result<Current, Error> {
        let path = self.dir.join(log_file_name(lsn));
        let io_err = |e| Error::io(&path, e);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(reuse)
            .create_new(!reuse)
            .open(&path)
            .map_err(io_err)?;
        file.write_all_at(&encode_file_header(LOG_MAGIC, lsn), 0)
            .map_err(io_err)?;
        file.set_len(FILE_HEADER as u64).map_err(io_err)?;
        file.sync_all().map_err(io_err)?;
        fsync_dir(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        self.status.files_created.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut current) = self.status.current_file.lock() {
            *current = Some(path.clone());
        }
        Ok(Current {
            file,
            path,
            first_lsn: lsn,
            len: FILE_HEADER as u64,
            pos: lsn,
        })
    }

    /// Runs until `stop` is set: moves complete frames from the ring to the
    /// files, fsyncs by the policy, rotates files. On `stop` it drains what
    /// is complete up to the head it saw then, fsyncs and returns.
    ///
    /// Returns an error when the files and the ring disagree, when the ring
    /// hands over bytes that are not valid frames, when an fsync fails (the
    /// kernel may have dropped the pages: the writer cannot tell what is on
    /// disk), or when a write still fails after `stop`. Frames are never
    /// released before they are written, so nothing is dropped.
    pub fn run(&mut self, src: &mut dyn LogSource, stop: &AtomicBool) -> Result<(), Error> {
        if self.current.is_none() {
            self.start(src)?;
        }
        let mut stop_at = None;
        loop {
            if stop_at.is_none() && stop.load(Ordering::Acquire) {
                stop_at = Some(src.head());
            }
            let pos = self.pos();
            let mut buf = std::mem::take(&mut self.buf);
            buf.clear();
            let end = src.read_frames(pos, &mut buf, self.batch_bytes);
            let wrote = end > pos;
            if wrote {
                let result = self.append(pos, end, &buf, stop);
                self.buf = buf;
                result?;
                src.release(end);
                if src.policy() == FsyncPolicy::Always {
                    self.fsync(src)?;
                }
                if self.current_len() >= self.file_size_limit {
                    self.rotate(src)?;
                }
            } else {
                self.buf = buf;
            }
            if let Some(stop_at) = stop_at {
                if !wrote || end >= stop_at {
                    break;
                }
            }
            let unsynced = self.synced < self.pos();
            let due = match src.policy() {
                FsyncPolicy::Always => true,
                FsyncPolicy::EverySec => self.last_fsync.is_none_or(|t| {
                    (self.clock)().saturating_duration_since(t) >= Duration::from_secs(1)
                }),
                FsyncPolicy::No => false,
            };
            if unsynced && due {
                self.fsync(src)?;
            }
            if !wrote {
                if let Some(lsn) = src.take_restart(pos).filter(|&l| l > pos) {
                    self.restart(src, lsn)?;
                    continue;
                }
                src.wait(pos, Duration::from_millis(100));
            }
        }
        if self.synced < self.pos() {
            self.fsync(src)?;
        }
        Ok(())
    }

    fn pos(&self) -> u64 {
        self.current.as_ref().map_or(0, |c| c.pos)
    }

    fn current_len(&self) -> u64 {
        self.current.as_ref().map_or(0, |c| c.len)
    }

    /// Checks that `buf` is exactly the frames `[pos, end)`, then appends it
    /// with one write, retrying failed writes.
    fn append(&mut self, pos: u64, end: u64, buf: &[u8], stop: &AtomicBool) -> Result<(), Error> {
        let Some(cur) = self.current.as_mut() else {
            return Ok(());
        };
        let ring_err = |lsn, msg: String| Error::new(&cur.path, Some(lsn), ErrorKind::Ring(msg));
        if buf.len() as u64 != end - pos {
            return Err(ring_err(
                pos,
                format!(
                    "read_frames returned {} bytes for LSNs {pos}..{end}",
                    buf.len()
                ),
            ));
        }
        let mut at = 0usize;
        while at < buf.len() {
            let lsn = pos + at as u64;
            let (_, _, size) =
                parse_frame(&buf[at..], lsn).map_err(|e| ring_err(lsn, e.to_string()))?;
            at += size as usize;
        }
        let mut attempts_after_stop = 0;
        loop {
            let result = if self.failing_writes > 0 {
                self.failing_writes -= 1;
                Err(io::Error::other("injected write failure"))
            } else {
                cur.file.write_all_at(buf, cur.len)
            };
            match result {
                Ok(()) => break,
                Err(e) => {
                    self.status.write_errors.fetch_add(1, Ordering::Relaxed);
                    self.status.last_write_failed.store(true, Ordering::Release);
                    self.status
                        .set_error(format!("writing {}: {e}", cur.path.display()));
                    if stop.load(Ordering::Acquire) {
                        attempts_after_stop += 1;
                        if attempts_after_stop >= STOP_ATTEMPTS {
                            return Err(Error::new(&cur.path, Some(cur.len), ErrorKind::Io(e)));
                        }
                    }
                    std::thread::sleep(self.retry_pause);
                }
            }
        }
        self.status
            .last_write_failed
            .store(false, Ordering::Release);
        cur.len += buf.len() as u64;
        cur.pos = end;
        self.status
            .bytes_written
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.status.written.store(end, Ordering::Release);
        Ok(())
    }

    /// Fsyncs everything written: older files not yet fsynced (rotated under
    /// `no`) first, then the current one; then tells the ring.
    fn fsync(&mut self, src: &mut dyn LogSource) -> Result<(), Error> {
        let Some((pos, first_lsn)) = self.current.as_ref().map(|c| (c.pos, c.first_lsn)) else {
            return Ok(());
        };
        if self.synced < first_lsn {
            self.sync_older(first_lsn)?;
        }
        let Some(cur) = self.current.as_ref() else {
            return Ok(());
        };
        if let Err(e) = cur.file.sync_data() {
            self.status
                .set_error(format!("fsync {}: {e}", cur.path.display()));
            return Err(Error::new(&cur.path, None, ErrorKind::Io(e)));
        }
        self.status.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.synced = pos;
        self.status.fsynced.store(pos, Ordering::Release);
        self.last_fsync = Some((self.clock)());
        src.fsynced(pos);
        Ok(())
    }

    /// Fsyncs the log files holding `[self.synced, before)`.
    fn sync_older(&mut self, before: u64) -> Result<(), Error> {
        let logs = list_logs(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        for (i, log) in logs.iter().enumerate() {
            let next_first = logs.get(i + 1).map_or(u64::MAX, |n| n.lsn);
            if log.lsn < before && next_first > self.synced {
                let synced = File::open(&log.path).and_then(|f| f.sync_data());
                if let Err(e) = synced {
                    self.status
                        .set_error(format!("fsync {}: {e}", log.path.display()));
                    return Err(Error::io(&log.path, e));
                }
            }
        }
        Ok(())
    }

    /// Starts the log again at `lsn`, past the head: the current file is
    /// fsynced (whatever the policy: the source then counts everything
    /// before `lsn` as fsynced) and a new file begins at `lsn`.
    fn restart(&mut self, src: &mut dyn LogSource, lsn: u64) -> Result<(), Error> {
        if self.synced < self.pos() {
            self.fsync(src)?;
        }
        let next = self.create_file(lsn, false)?;
        self.current = Some(next);
        self.synced = lsn;
        self.status.written.store(lsn, Ordering::Release);
        self.status.fsynced.store(lsn, Ordering::Release);
        src.restarted(lsn);
        Ok(())
    }

    /// Closes the current file (fsynced first unless the policy is `no`) and
    /// starts the next at the current position.
    fn rotate(&mut self, src: &mut dyn LogSource) -> Result<(), Error> {
        if src.policy() != FsyncPolicy::No && self.synced < self.pos() {
            self.fsync(src)?;
        }
        let pos = self.pos();
        let next = self.create_file(pos, false)?;
        self.current = Some(next);
        Ok(())
    }

    /// The directory the writer writes to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}
